//! [`Policy`]: one or more rules checked together, all or nothing.

use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use super::rule::Rule;
use crate::algorithm::Params;
use crate::error::ConfigError;

/// The most rules one policy may hold: they are all checked in one atomic step.
pub const MAX_RULES: usize = 8;

/// One or more rules enforced together on the same key.
///
/// A request is admitted only if every rule admits it, and a denied request consumes none of them.
/// Built with [`Policy::new`], which validates every rule, or from a single rule with
/// `Policy::try_from(rule)`.
///
/// ```
/// use tower_redis_ratelimit::{Policy, Quota, Rule};
///
/// let policy = Policy::new([
///     Rule::gcra("per-second", Quota::per_second(10)),
///     Rule::fixed_window("per-hour", Quota::per_hour(1_000)),
/// ])?;
/// assert_eq!(policy.rules().len(), 2);
/// # Ok::<(), tower_redis_ratelimit::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Policy {
    inner: Arc<PolicyInner>,
}

struct PolicyInner {
    rules: Box<[Rule]>,
    /// One quota for the whole world, spent by regions (see [`Policy::global`]).
    global: bool,
    /// The windows per period the ledger allots a global policy's rule in (`policy::global`);
    /// 1 for a policy that is not global.
    windows: u32,
    /// Stable per-rule identities for the memory store (name and state code hashed).
    rule_ids: Box<[u64]>,
    /// Each rule's parameters as the algorithms compute with them, validated once here.
    params: Box<[Params]>,
}

impl Policy {
    /// A policy of the given rules, validated.
    pub fn new(rules: impl IntoIterator<Item = Rule>) -> Result<Self, ConfigError> {
        let rules: Box<[Rule]> = rules.into_iter().collect();
        if rules.is_empty() {
            return Err(ConfigError::EmptyPolicy);
        }
        if rules.len() > MAX_RULES {
            return Err(ConfigError::TooManyRules {
                count: rules.len(),
                max: MAX_RULES,
            });
        }
        for (index, rule) in rules.iter().enumerate() {
            rule.validate()?;
            if rules[..index]
                .iter()
                .any(|earlier| earlier.name() == rule.name())
            {
                return Err(ConfigError::DuplicateRuleName {
                    name: rule.name().to_owned(),
                });
            }
        }
        let params = rules
            .iter()
            .map(|rule| {
                Params::new(rule.name(), rule.algorithm(), rule.quota())?
                    .delaying(rule.name(), rule.max_delay())
            })
            .collect::<Result<Box<[Params]>, ConfigError>>()?;
        let rule_ids = rules.iter().map(rule_id).collect();
        Ok(Self {
            inner: Arc::new(PolicyInner {
                rules,
                global: false,
                windows: 1,
                rule_ids,
                params,
            }),
        })
    }

    /// A global policy: one quota per key for the whole world, of which each region spends the
    /// allotments a ledger hands it (see `store::region::RegionStore`), deciding every request in the
    /// region. It holds one rule: a fixed window, a sliding window, GCRA or a token bucket (not a
    /// sliding log, nor a rule with a `max_delay`). Under a region store the ledger allots it in
    /// *windows* aligned to the Unix epoch, so that every region counts the same ones: a fixed
    /// window's windows, a sliding window's sub-intervals, and for GCRA and the token bucket
    /// the period split so that a window refills at most half the burst; it meters the windows'
    /// grants as the rule's algorithm would (`docs/regions.md` states each bound).
    ///
    /// A store that is not a `store::region::RegionStore` counts a global policy as any other: one
    /// Redis, or one process, is then the whole world. A rate-limit layer fails closed (503) on a
    /// global policy whatever its [failure mode](crate::admission::FailureMode): a request let
    /// through unchecked would spend quota no region was granted.
    ///
    /// ```
    /// use tower_redis_ratelimit::{ConfigError, Policy, Quota, Rule};
    ///
    /// let policy = Policy::global(Rule::fixed_window("api", Quota::per_minute(6_000)))?;
    /// assert!(policy.is_global());
    /// let rate = Policy::global(Rule::gcra("api", Quota::per_minute(6_000).with_burst(100)))?;
    /// assert!(rate.is_global());
    /// let error = Policy::global(Rule::sliding_log("api", Quota::per_minute(6_000))).unwrap_err();
    /// assert!(matches!(error, ConfigError::GlobalRule { .. }));
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub fn global(rule: Rule) -> Result<Self, ConfigError> {
        let mut policy = Self::new([rule])?;
        let windows = super::global::windows(&policy.inner.rules[0])?;
        if let Some(inner) = Arc::get_mut(&mut policy.inner) {
            inner.global = true;
            inner.windows = windows;
        }
        Ok(policy)
    }

    /// A policy of `rules`, [global](Self::global) or not: what a layer's builder, given a
    /// policy and maybe more rules, builds.
    pub(crate) fn of(rules: Vec<Rule>, global: bool) -> Result<Self, ConfigError> {
        if !global {
            return Self::new(rules);
        }
        let count = rules.len();
        match <[Rule; 1]>::try_from(rules) {
            Ok([rule]) => Self::global(rule),
            Err(_) => Err(ConfigError::GlobalRules { count }),
        }
    }

    /// Whether this is a [global](Self::global) policy.
    pub fn is_global(&self) -> bool {
        self.inner.global
    }

    /// For a [global](Self::global) policy, how many windows a period its quota is allotted in
    /// (each `period / windows` long): 1 for a fixed window (its windows), a sliding window's
    /// sub-intervals, the fewest that refill at most half the burst for GCRA and the token
    /// bucket. `None` for a policy that is not global.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tower_redis_ratelimit::{Policy, Quota, Rule};
    ///
    /// let rate = Rule::gcra("api", Quota::new(600, Duration::from_secs(60)).with_burst(20));
    /// assert_eq!(Policy::global(rate)?.global_windows(), Some(60));
    /// # Ok::<(), tower_redis_ratelimit::ConfigError>(())
    /// ```
    pub fn global_windows(&self) -> Option<u32> {
        self.inner.global.then_some(self.inner.windows)
    }

    /// The windows per period a global policy's rule is allotted in (1 when not global).
    #[cfg(feature = "regions")]
    pub(crate) fn window_count(&self) -> u32 {
        self.inner.windows
    }

    /// The rules, in the order they were given.
    pub fn rules(&self) -> &[Rule] {
        &self.inner.rules
    }

    pub(crate) fn rule_ids(&self) -> &[u64] {
        &self.inner.rule_ids
    }

    #[cfg(feature = "redis")]
    /// Whether the two are the same policy: one value, or equal rules. The common case, the one
    /// policy of one layer, is a pointer comparison.
    pub(crate) fn same(&self, other: &Policy) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner) || self.inner.rules == other.inner.rules
    }

    /// Each rule's parameters, in rule order.
    pub(crate) fn params(&self) -> &[Params] {
        &self.inner.params
    }
}

impl TryFrom<Rule> for Policy {
    type Error = ConfigError;

    fn try_from(rule: Rule) -> Result<Self, ConfigError> {
        Policy::new([rule])
    }
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("rules", &self.inner.rules)
            .field("global", &self.inner.global)
            .finish()
    }
}

impl PartialEq for Policy {
    fn eq(&self, other: &Self) -> bool {
        self.inner.rules == other.inner.rules && self.inner.global == other.inner.global
    }
}

/// The identity of a rule's state in the memory store: what names its key in Redis, the rule's
/// name and state code (see [`Rule::state_code`]), so both stores start fresh state for the same
/// quota changes. SipHash with fixed keys, so the id is stable across processes; 64 bits make an
/// accidental collision between two rules negligible.
fn rule_id(rule: &Rule) -> u64 {
    let mut hasher = DefaultHasher::new();
    rule.name().hash(&mut hasher);
    rule.state_code().to_string().hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::quota::Quota;

    #[test]
    fn invalid_quotas_are_rejected_with_the_rule_name() {
        let err = Policy::try_from(Rule::gcra("api", Quota::per_second(0))).unwrap_err();
        assert_eq!(err, ConfigError::ZeroLimit { rule: "api".into() });
        let err =
            Policy::try_from(Rule::gcra("api", Quota::per_second(1).with_burst(0))).unwrap_err();
        assert_eq!(err, ConfigError::ZeroBurst { rule: "api".into() });
        let err = Policy::try_from(Rule::gcra("api", Quota::new(1, Duration::from_micros(10))))
            .unwrap_err();
        assert!(matches!(err, ConfigError::PeriodOutOfRange { .. }));
        let err = Policy::try_from(Rule::gcra("has space", Quota::per_second(1))).unwrap_err();
        assert!(matches!(err, ConfigError::InvalidRuleName { .. }));
        let err = Policy::try_from(Rule::gcra("{tag}", Quota::per_second(1))).unwrap_err();
        assert!(matches!(err, ConfigError::InvalidRuleName { .. }));
        assert_eq!(Policy::new([]).unwrap_err(), ConfigError::EmptyPolicy);
        let twice = [
            Rule::gcra("a", Quota::per_second(1)),
            Rule::fixed_window("a", Quota::per_hour(5)),
        ];
        assert!(matches!(
            Policy::new(twice).unwrap_err(),
            ConfigError::DuplicateRuleName { .. }
        ));
    }

    #[test]
    fn rule_ids_change_with_what_gives_the_state_its_meaning() {
        let a = rule_id(&Rule::gcra("api", Quota::per_second(1)));
        assert_ne!(a, rule_id(&Rule::fixed_window("api", Quota::per_second(1))));
        assert_ne!(a, rule_id(&Rule::gcra("api2", Quota::per_second(1))));
        // A bucket's level is counted in units of its rate: a new rate is fresh state, a new
        // burst is not for GCRA; a token bucket's tokens take longer to refill under a larger
        // burst, so there it is.
        assert_ne!(a, rule_id(&Rule::gcra("api", Quota::per_second(2))));
        assert_ne!(a, rule_id(&Rule::gcra("api", Quota::per_minute(1))));
        assert_eq!(
            a,
            rule_id(&Rule::gcra("api", Quota::per_second(1).with_burst(5)))
        );
        let tb = |quota| rule_id(&Rule::token_bucket("api", quota));
        assert_ne!(tb(Quota::per_second(1)), tb(Quota::per_second(2)));
        assert_ne!(
            tb(Quota::per_second(1)),
            tb(Quota::per_second(1).with_burst(5))
        );
        // A window's state keeps its meaning under a new limit, not under a new period or new
        // sub-intervals.
        let window = |quota, n| rule_id(&Rule::sliding_window("api", quota, n));
        let w = window(Quota::per_minute(3), 60);
        assert_eq!(w, window(Quota::per_minute(5), 60));
        assert_ne!(w, window(Quota::per_hour(3), 60));
        assert_ne!(w, window(Quota::per_minute(3), 30));
        let fixed = |quota| rule_id(&Rule::fixed_window("api", quota));
        assert_eq!(fixed(Quota::per_hour(5)), fixed(Quota::per_hour(2)));
        assert_ne!(fixed(Quota::per_hour(5)), fixed(Quota::per_day(5)));
        let log = |quota| rule_id(&Rule::sliding_log("api", quota));
        assert_eq!(log(Quota::per_hour(5)), log(Quota::per_hour(2)));
        assert_ne!(log(Quota::per_hour(5)), log(Quota::per_day(5)));
    }
}
