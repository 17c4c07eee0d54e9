//! `ratelimit-gateway`: see the crate's documentation, or `ratelimit-gateway --help`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Rate limits from a configuration file, in front of a service in any language.
#[derive(Parser)]
#[command(name = "ratelimit-gateway", version = ratelimit_gateway::version::VERSION, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs a rate-limiting reverse proxy in front of the file's `[proxy] upstream`.
    ///
    /// SIGHUP reloads the file's limits. SIGTERM or Ctrl-C: `/readyz` answers 503 at once,
    /// serving goes on for `[proxy.connections] drain_delay` (a second signal ends it), then it
    /// stops accepting, finishes what is in flight (at most `drain_timeout`) and exits.
    Proxy {
        /// The configuration file (.toml, .yaml, .yml or .json).
        config: PathBuf,
    },
    /// Runs the decision service that nginx `auth_request` (at /auth_request), Traefik
    /// ForwardAuth and Caddy forward_auth (at /forward_auth) ask before serving a request.
    ///
    /// SIGHUP reloads the file's limits. SIGTERM or Ctrl-C: `/readyz` answers 503 at once,
    /// serving goes on for `[serve.connections] drain_delay` (a second signal ends it), then it
    /// stops accepting, finishes what is in flight (at most `drain_timeout`) and exits.
    Serve {
        /// The configuration file (.toml, .yaml, .yml or .json).
        config: PathBuf,
    },
    /// Lifts a ban: resets a route's key (`--route R --key K`) or an Envoy descriptor's counter
    /// (`--domain D --descriptor key=value[,key=value...]`) in the file's Redis store, for
    /// every running process that shares it. A file whose limits count in an in-process store
    /// cannot be reached from here: POST /reset to the running process's admin address.
    Reset(ratelimit_gateway::reset::ResetArgs),
    /// The ledger of global policies that the file's region store spends from: `declare` it
    /// (a ledger grants nothing until declared), `show` what it holds per key and window.
    #[command(subcommand)]
    Ledger(ratelimit_gateway::ledger::LedgerCommand),
    /// Validates a configuration file without starting anything and prints what it would run
    /// (listeners, stores, policies, routes); exits 1 with the mistake on a bad file.
    Check {
        /// The configuration file (.toml, .yaml, .yml or .json).
        config: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check { config } => match ratelimit_gateway::check::check(&config) {
            Ok(summary) => {
                print!("{summary}");
                ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!("ratelimit-gateway: {err}");
                ExitCode::FAILURE
            }
        },
        Command::Proxy { config } => run(ratelimit_gateway::proxy::run(config)),
        Command::Serve { config } => run(ratelimit_gateway::serve::run(config)),
        Command::Reset(args) => run(async move {
            // The store's own warnings (a Redis it cannot reach), on standard error.
            ratelimit_gateway::runtime::logs::init(ratelimit_gateway::config::LogFormat::Text);
            let target = args
                .target()
                .ok_or("name --route and --key, or --domain and --descriptor")?;
            let done = ratelimit_gateway::reset::run(&args.config, target).await?;
            println!("{done}");
            Ok(())
        }),
        Command::Ledger(command) => run(async move {
            ratelimit_gateway::runtime::logs::init(ratelimit_gateway::config::LogFormat::Text);
            print!("{}", ratelimit_gateway::ledger::run(command).await?);
            Ok(())
        }),
    }
}

/// Runs a command until it ends, on a runtime of its own.
fn run(
    command: impl std::future::Future<Output = Result<(), ratelimit_gateway::runtime::BoxError>>,
) -> ExitCode {
    // Connections are served by the workers (`connections.workers`), each with a runtime of its
    // own; this one runs what is beside them: accepting, the stores' connections, the admin
    // address, reloads.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("ratelimit-gateway: cannot start the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("ratelimit-gateway: {err}");
            ExitCode::FAILURE
        }
    }
}
