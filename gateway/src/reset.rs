//! `ratelimit-gateway reset FILE`: lifting a ban from the command line, and what the admin
//! address's `POST /reset` does in `proxy` and `serve`: a route's key, or an Envoy descriptor's
//! counter, reset in the file's store ([`reset`]).
//!
//! The command builds the file's limits in a process of its own and resets in their store. A
//! Redis store is shared: the reset reaches Redis, and every running instance hears it there
//! (the library's reset channel) and forgets its remembered denials and leases. An in-process
//! store is not shared: the command cannot reach the one a running process counts in, and says
//! so instead of resetting a store of its own that nobody asks.

use std::path::{Path, PathBuf};

use tower_redis_ratelimit::config::{Limits, StoreKind};

use crate::config::{File, FileError};
use crate::envoy::RateLimitService;
use crate::runtime::{BoxError, ResetError, ResetTarget, reset_route};

/// The command line of `ratelimit-gateway reset`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["route", "domain"])))]
pub struct ResetArgs {
    /// The configuration file (.toml, .yaml, .yml or .json) the running processes read.
    pub config: PathBuf,
    /// The route whose key to reset (under each of its policies and plans).
    #[arg(long, requires = "key", conflicts_with_all = ["domain", "descriptor"])]
    pub route: Option<String>,
    /// The key, as the route's key makes it: a header's value, a client's address (an IPv6
    /// client's /64 as `2001:db8:1:2::/64`).
    #[arg(long)]
    pub key: Option<String>,
    /// The Envoy domain whose descriptor's counter to reset (`[serve.envoy]` files).
    #[arg(long, requires = "descriptor")]
    pub domain: Option<String>,
    /// The descriptor, as Envoy sends it: `key=value[,key=value...]`, its entries in order.
    #[arg(long, value_parser = descriptor)]
    pub descriptor: Option<Descriptor>,
}

/// A descriptor's entries, `(key, value)` in order: one value of `--descriptor` (a newtype, as
/// clap reads an `Option<Vec<_>>` as a repeated option).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Descriptor(pub Vec<(String, String)>);

impl ResetArgs {
    /// What the command line names (clap requires one of the two pairs).
    pub fn target(&self) -> Option<ResetTarget> {
        match (&self.route, &self.key, &self.domain, &self.descriptor) {
            (Some(route), Some(key), _, _) => Some(ResetTarget::Route {
                route: route.clone(),
                key: key.clone(),
            }),
            (_, _, Some(domain), Some(Descriptor(entries))) => Some(ResetTarget::Descriptor {
                domain: domain.clone(),
                entries: entries.clone(),
            }),
            _ => None,
        }
    }
}

/// Resets `target` in `limits` (a route's key) or in `envoy` (a descriptor's counter); says
/// what it did.
pub async fn reset(
    limits: &Limits,
    envoy: Option<&RateLimitService>,
    target: ResetTarget,
) -> Result<String, ResetError> {
    match target {
        ResetTarget::Route { route, key } => reset_route(limits, &route, &key).await,
        ResetTarget::Descriptor { domain, entries } => match envoy {
            Some(envoy) => envoy.reset(&domain, &entries).await,
            None => Err(ResetError::Unknown(
                "no Envoy files here: descriptors are reset on the `serve` whose `[serve.envoy]` \
                 names them"
                    .to_owned(),
            )),
        },
    }
}

/// Reads the descriptor `key=value[,key=value...]` of the command line.
pub fn descriptor(text: &str) -> Result<Descriptor, String> {
    let entries = text
        .split(',')
        .map(|entry| {
            entry
                .split_once('=')
                .filter(|(key, _)| !key.is_empty())
                .map(|(key, value)| (key.to_owned(), value.to_owned()))
                .ok_or_else(|| format!("{entry:?} is not key=value (write e.g. user=ann,path=/x)"))
        })
        .collect::<Result<_, _>>()?;
    Ok(Descriptor(entries))
}

/// Resets `target` in the store of the file at `path`; says what it did.
pub async fn run(path: &Path, target: ResetTarget) -> Result<String, BoxError> {
    let file = File::read(path)?;
    let limits = file.limits.build().map_err(|err| file.limits_error(err))?;
    let envoy = match &file
        .tables
        .serve
        .as_ref()
        .and_then(|serve| serve.envoy.as_ref())
    {
        Some(envoy) => Some(
            RateLimitService::load(&envoy.files, envoy.settings(), &limits)
                .map_err(FileError::from)?,
        ),
        None => None,
    };
    let store = match &target {
        ResetTarget::Route { route, .. } => file
            .limits
            .routes
            .get(route)
            .map(|route| route.store.as_deref()),
        ResetTarget::Descriptor { domain, .. } => {
            envoy.as_ref().and_then(|envoy| envoy.domain_store(domain))
        }
    };
    if let Some(store) = store
        && in_process(&file, store)
    {
        return Err(format!(
            "{}: {} counts in an in-process store, which lives in each running process's \
             memory: this command cannot reach it. Reset it in the running process instead: \
             POST /reset to its admin address (docs/operations.md, \"Lifting a ban\")",
            path.display(),
            describe(&target),
        )
        .into());
    }
    Ok(reset(&limits, envoy.as_ref(), target).await?)
}

/// Whether the store named `store` (the default one when `None`) is in-process: the file's
/// `memory` store, or the one made for a file that names no store.
fn in_process(file: &File, store: Option<&str>) -> bool {
    let stores = &file.limits.stores;
    let config = match store {
        Some(name) => stores.get(name),
        None if stores.len() == 1 => stores.values().next(),
        None => return stores.is_empty(),
    };
    config.is_some_and(|config| config.kind == StoreKind::Memory)
}

fn describe(target: &ResetTarget) -> String {
    match target {
        ResetTarget::Route { route, .. } => format!("route {route:?}"),
        ResetTarget::Descriptor { domain, .. } => format!("domain {domain:?}"),
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ResetArgs,
    }

    #[test]
    fn the_command_line_names_a_routes_key_or_a_domains_descriptor() {
        Cli::command().debug_assert();
        let parse = |args: &[&str]| {
            let args = ["reset", "limits.toml"].iter().chain(args);
            Cli::try_parse_from(args).map(|cli| cli.args.target())
        };
        assert_eq!(
            parse(&["--route", "api", "--key", "k"]).unwrap(),
            Some(ResetTarget::Route {
                route: "api".to_owned(),
                key: "k".to_owned()
            })
        );
        assert_eq!(
            parse(&["--domain", "rl", "--descriptor", "user=ann,path=/x"]).unwrap(),
            Some(ResetTarget::Descriptor {
                domain: "rl".to_owned(),
                entries: vec![
                    ("user".to_owned(), "ann".to_owned()),
                    ("path".to_owned(), "/x".to_owned())
                ]
            })
        );
        for wrong in [
            &[][..],
            &["--route", "api"],
            &["--domain", "rl"],
            &[
                "--route",
                "api",
                "--key",
                "k",
                "--domain",
                "rl",
                "--descriptor",
                "a=b",
            ],
            &["--domain", "rl", "--descriptor", "user"],
        ] {
            assert!(parse(wrong).is_err(), "{wrong:?}");
        }
    }

    #[test]
    fn a_descriptor_is_key_value_pairs_in_order() {
        let pair = |key: &str, value: &str| (key.to_owned(), value.to_owned());
        assert_eq!(
            descriptor("user=ann,path=/a=b").unwrap(),
            Descriptor(vec![pair("user", "ann"), pair("path", "/a=b")])
        );
        assert_eq!(
            descriptor("user=").unwrap(),
            Descriptor(vec![pair("user", "")])
        );
        for wrong in ["user", "=ann", "user=ann,", ""] {
            assert!(descriptor(wrong).is_err(), "{wrong:?}");
        }
    }
}
