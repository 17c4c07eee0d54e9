//! [`Placement`]: where a domain's counters live in its store, and so how the descriptors of one
//! request are decided: together, all or nothing, on one key (one Redis Cluster slot); or each on
//! its own key (a slot each), as envoyproxy/ratelimit decides them.

use serde::Deserialize;
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::policy::Rule;

/// How a domain's descriptors are placed and decided (`extensions.placement` of its file).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// Every counter of the domain under one key, the domain (on Redis, the domain is the hash
    /// tag of each: one Cluster slot, one primary): a request's descriptors are decided in one
    /// atomic step, and a request refused by one spends nothing on the others. The default: it
    /// keeps every count of a deployment as it was, and a client over one limit cannot drain the
    /// others (the reference's best-known complaint).
    #[default]
    AllOrNothing,
    /// Each descriptor's counter under a key of its own (on Redis, its own hash tag: its own
    /// slot, so a domain's counters spread over every primary of a Cluster): each descriptor
    /// decided on its own, all of a request's at once, as the reference decides them. A request
    /// refused by one descriptor has spent on the descriptors that admitted it.
    PerDescriptor,
}

impl Placement {
    /// The names of its values in a file, in order.
    pub const NAMES: [&'static str; 2] = ["all_or_nothing", "per_descriptor"];

    /// Its name in a file.
    pub fn name(self) -> &'static str {
        match self {
            Placement::AllOrNothing => Self::NAMES[0],
            Placement::PerDescriptor => Self::NAMES[1],
        }
    }

    /// The key a counter of `domain` decided by `rule` (named by its descriptor's entries)
    /// counts under: the domain, or the domain and the rule's name. The rule's name is the
    /// counter's fixed-length digest (`e.` and 32 hex digits), so no two counters of two domains
    /// meet under one key, whatever a domain's name holds.
    pub(super) fn key(self, domain: &str, rule: &Rule) -> Key {
        match self {
            Placement::AllOrNothing => Key::from(domain),
            Placement::PerDescriptor => Key::from(format!("{domain}:{}", rule.name())),
        }
    }
}
