//! [`SettingError`]: what a configuration file gets wrong beyond one builder's settings. It lives
//! here with the other errors, and names what it is about by the file's own words, so that the
//! errors depend on nothing of the configuration module.

use super::{ConfigError, debug_as_display};

/// A setting of a configuration file that names what is not there, or does not fit with another
/// setting. [`ConfigError::Field`] says which field.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SettingError {
    /// A name of a policy or store that the file does not define.
    #[error("no {table} named {name:?} ({})", there_are(known))]
    Unknown {
        /// `policy` or `store`.
        table: &'static str,
        /// The name given.
        name: String,
        /// The names defined.
        known: Vec<String>,
    },
    /// A route or concurrency limit that names no store when there are several.
    #[error(
        "is required when there are several stores ({}): name one",
        there_are(stores)
    )]
    StoreRequired {
        /// The stores defined.
        stores: Vec<String>,
    },
    /// A setting this kind of store needs.
    #[error("is required for a {store} store")]
    Required {
        /// The store's type (`memory`, `redis`, `cluster`, `sentinel`).
        store: &'static str,
    },
    /// A user name without its password (`primary_auth`).
    #[error("is required with `username`: AUTH sends both")]
    PasswordRequired,
    /// A setting this kind of store does not have.
    #[error("is not a setting of a {store} store: remove it")]
    NotAStoreSetting {
        /// The store's type (`memory`, `redis`, `cluster`, `sentinel`).
        store: &'static str,
    },
    /// A route's `max_delay` whose policies have no rule that can delay a request.
    #[error(
        "delays only gcra and token_bucket rules, and policy {policy:?} has none: use such a \
         rule to smooth bursts, or remove max_delay"
    )]
    NothingToDelay {
        /// The policy without such a rule.
        policy: String,
    },
    /// A setting this rule's algorithm does not have.
    #[error("only {} (this is a {algorithm} rule): remove it", only(setting))]
    NotARuleSetting {
        /// `burst` or `sub_intervals`.
        setting: &'static str,
        /// The rule's algorithm, as the file names it (`fixed_window`, ...).
        algorithm: &'static str,
    },
    /// A ledger whose Redis is not named by `url` alone, or by `sentinels` and `master`.
    #[error("names no one Redis: give `url`, or `sentinels` and `master`")]
    LedgerAddress,
    /// A policy with no rule.
    #[error("is empty: a policy needs at least one rule")]
    NoRules,
    /// `failure_mode = "open"` on a route of a global policy, which fails closed.
    #[error(
        "is \"open\", but the route's policy {policy:?} is global: a global policy fails closed \
         (503) when its region's Redis cannot answer, or the world would admit past its quota; \
         remove this or set it to \"closed\""
    )]
    GlobalFailsClosed {
        /// The global policy.
        policy: String,
    },
    /// A path prefix that does not start with `/`.
    #[error("{path:?} is not a path: it must start with `/`")]
    NotAPath {
        /// The prefix given.
        path: String,
    },
    /// A path prefix that another route (or concurrency limit) has.
    #[error("{path:?} is already a path of {table} {owner:?}")]
    PathTaken {
        /// The prefix given.
        path: String,
        /// `route` or `concurrency limit`.
        table: &'static str,
        /// The one that has it.
        owner: String,
    },
    /// A route's `plan_header` without `plans` to choose among.
    #[error("chooses a plan, but the route has no `plans`: add them or remove this")]
    NoPlans,
    /// A TLS file (`tls.ca`, `tls.certificate`, `tls.private_key`) that cannot be read or holds
    /// no PEM of its kind.
    #[error("{path}: {reason}")]
    TlsFile {
        /// The file.
        path: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// A client certificate without its private key, or the reverse.
    #[error("is required with `{given}`: a client certificate is presented with its key")]
    TlsPair {
        /// The field missing: `certificate` or `private_key`.
        missing: &'static str,
        /// The field given.
        given: &'static str,
    },
    /// A setting this build cannot honour.
    #[error("this build lacks the crate's `{feature}` feature: turn it on in Cargo.toml")]
    FeatureMissing {
        /// The cargo feature.
        feature: &'static str,
    },
}

debug_as_display!(SettingError);

impl From<SettingError> for ConfigError {
    fn from(error: SettingError) -> Self {
        ConfigError::Setting(error)
    }
}

fn there_are(names: &[String]) -> String {
    if names.is_empty() {
        "there are none".to_owned()
    } else {
        let quoted: Vec<String> = names.iter().map(|name| format!("{name:?}")).collect();
        format!("there are {}", quoted.join(", "))
    }
}

fn only(setting: &str) -> &'static str {
    match setting {
        "burst" => "token_bucket and gcra rules have a burst",
        _ => "sliding_window rules have sub-intervals",
    }
}
