//! `ratelimit-gateway ledger declare|show FILE`: the operator's commands of the ledger that the
//! file's region store spends global policies from (`docs/regions.md`).
//!
//! Named after what they act on and what they do: the ledger is what `docs/regions.md` calls
//! it, *declare* is its word for the one act that lets a ledger grant (a ledger grants nothing
//! until declared), *show* only reads. Both take the file the running processes read, so that
//! the ledger, its key prefix and the regions' `max_skew` are the ones they use.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use tower_redis_ratelimit::config::RegionConfig;
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::store::region::{Birth, Declared, Holding, Ledger};

use crate::config::File;
use crate::runtime::BoxError;

/// The command line of `ratelimit-gateway ledger`.
#[derive(Debug, clap::Subcommand)]
pub enum LedgerCommand {
    /// Declares the ledger of the file's region store, so that it grants quota. Safe to repeat:
    /// a ledger declared with the same `max_skew` is left as it is; one declared with another
    /// is refused unless `--anew`.
    Declare {
        /// The configuration file (.toml, .yaml, .yml or .json) the regions' processes read.
        config: PathBuf,
        /// The store whose `region` table names the ledger (needed when several have one).
        #[arg(long)]
        store: Option<String>,
        /// Declares it new even if it is declared: a new epoch that fences every window an
        /// earlier declaration may have granted (the regions get nothing of them). For a ledger
        /// restored from a snapshot older than its last takes, or to change `max_skew`.
        #[arg(long)]
        anew: bool,
    },
    /// Prints the ledger's declaration and, per key and window, the units free and what each
    /// region holds and last asked for.
    Show {
        /// The configuration file (.toml, .yaml, .yml or .json) the regions' processes read.
        config: PathBuf,
        /// The store whose `region` table names the ledger (needed when several have one).
        #[arg(long)]
        store: Option<String>,
        /// Only this client key (as the route's key makes it).
        #[arg(long)]
        key: Option<String>,
    },
}

/// Runs `command`; what it did, to print (lines, each ended).
pub async fn run(command: LedgerCommand) -> Result<String, BoxError> {
    let mut out = act(command).await?;
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
}

async fn act(command: LedgerCommand) -> Result<String, BoxError> {
    match command {
        LedgerCommand::Declare {
            config,
            store,
            anew,
        } => {
            let (region, ledger) = ledger(&config, store.as_deref())?;
            let skew = region.skew();
            let url = ledger.store().redacted_url();
            if anew {
                let epoch = ledger.declare_new(skew).await?;
                return Ok(format!(
                    "ledger {url} declared anew: epoch {}, max_skew {skew:?}",
                    at(epoch)
                ));
            }
            Ok(match ledger.declare(skew).await? {
                Declared::Now { epoch } => {
                    format!(
                        "ledger {url} declared: epoch {}, max_skew {skew:?}",
                        at(epoch)
                    )
                }
                Declared::Already { epoch } => format!(
                    "ledger {url} already declared: epoch {}, max_skew {skew:?}; left as it is",
                    at(epoch)
                ),
                _ => format!("ledger {url} declared"),
            })
        }
        LedgerCommand::Show { config, store, key } => {
            let (_, ledger) = ledger(&config, store.as_deref())?;
            let birth = ledger.birth().await?;
            let holdings = ledger.holdings(key.map(Key::from).as_ref()).await?;
            Ok(show(&ledger, birth, &holdings))
        }
    }
}

/// The region table of the store named `store` (the file's only store with one, when `None`)
/// and its ledger.
fn ledger(path: &Path, store: Option<&str>) -> Result<(RegionConfig, Ledger), BoxError> {
    let file = File::read(path)?;
    let regions: Vec<(&String, &RegionConfig)> = file
        .limits
        .stores
        .iter()
        .filter_map(|(name, store)| Some((name, store.region.as_ref()?)))
        .collect();
    let names = || {
        regions
            .iter()
            .map(|(name, _)| name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (name, region) = match (store, &regions[..]) {
        (None, []) => {
            return Err(format!(
                "{}: no store has a `region` table: there is no ledger to act on",
                path.display()
            )
            .into());
        }
        (None, [only]) => *only,
        (None, _) => {
            return Err(format!(
                "{}: several stores have a `region` table ({}): name one with --store",
                path.display(),
                names()
            )
            .into());
        }
        (Some(wanted), _) => *regions
            .iter()
            .find(|(name, _)| name.as_str() == wanted)
            .ok_or_else(|| {
                format!(
                    "{}: no store {wanted:?} with a `region` table (those with one: {})",
                    path.display(),
                    names()
                )
            })?,
    };
    let ledger = region
        .ledger(&format!("stores.{name}.region"))
        .map_err(|err| format!("{}: {err}", path.display()))?;
    Ok((region.clone(), ledger))
}

/// What `show` prints.
fn show(ledger: &Ledger, birth: Option<Birth>, holdings: &[Holding]) -> String {
    let url = ledger.store().redacted_url();
    let mut out = match birth {
        Some(birth) => format!(
            "ledger {url}: declared, epoch {}, max_skew {:?}\n",
            at(birth.epoch),
            birth.max_skew
        ),
        None => format!(
            "ledger {url}: not declared: it grants nothing (ratelimit-gateway ledger declare \
             FILE)\n"
        ),
    };
    if holdings.is_empty() {
        out.push_str("no key holds units\n");
    }
    for holding in holdings {
        let _ = write!(
            out,
            "{} {{{}}} window {}: free {}",
            holding.rule, holding.key, holding.window, holding.free
        );
        for region in &holding.regions {
            let _ = write!(
                out,
                "; {} holds {} (demand {} a window)",
                region.region, region.holds, region.demand
            );
        }
        out.push('\n');
    }
    out
}

/// An epoch (µs since the Unix epoch) as RFC 3339.
fn at(epoch: u64) -> String {
    humantime::format_rfc3339_micros(SystemTime::UNIX_EPOCH + Duration::from_micros(epoch))
        .to_string()
}
