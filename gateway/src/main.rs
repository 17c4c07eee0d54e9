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
    /// SIGHUP reloads the file's limits; SIGTERM or Ctrl-C stops accepting, finishes what is in
    /// flight (at most `[proxy.connections] drain_timeout`) and exits.
    Proxy {
        /// The configuration file (.toml, .yaml, .yml or .json).
        config: PathBuf,
    },
    /// Runs the decision service that nginx `auth_request` (at /auth_request), Traefik
    /// ForwardAuth and Caddy forward_auth (at /forward_auth) ask before serving a request.
    ///
    /// SIGHUP reloads the file's limits; SIGTERM or Ctrl-C stops accepting, finishes what is in
    /// flight (at most `[serve.connections] drain_timeout`) and exits.
    Serve {
        /// The configuration file (.toml, .yaml, .yml or .json).
        config: PathBuf,
    },
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
