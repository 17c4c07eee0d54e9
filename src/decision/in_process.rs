//! Decisions a Redis store answers in process, from what Redis said before: a remembered denial
//! (the denial cache), a fallback's decision, and admissions and refusals from quota reserved
//! by a quota lease.

use super::{Decision, Outcome};

impl Decision {
    /// The same decision, made by a fallback.
    pub(crate) fn degraded(self) -> Decision {
        Decision {
            degraded: true,
            ..self
        }
    }

    /// The same decision `elapsed_us` later, for a denial remembered by the store's caller: the
    /// waits are that much shorter, the counts the same.
    pub(crate) fn aged(&self, elapsed_us: u64) -> Decision {
        Decision {
            full_after_us: self.full_after_us.saturating_sub(elapsed_us),
            wait_us: self.wait_us.saturating_sub(elapsed_us),
            // Only the reported rule (the longest wait) is sure to refuse until it ends.
            refused_by: if self.refused_by == 0 {
                0
            } else {
                1 << self.rule.min(7)
            },
            ..self.clone()
        }
    }

    /// The same decision, refused by the rules of `refused_by` (one bit per rule index): a
    /// remembered denial's rules whose own waits are not over.
    pub(crate) fn refused_by_rules(self, refused_by: u8) -> Decision {
        Decision { refused_by, ..self }
    }

    /// An admission answered from quota reserved in process: the store's decision on the
    /// reservation, with `unspent` units of it still held here (so remaining, not in use), aged
    /// by `elapsed_us`. Neither count passes the limit: a reservation of a rate holds units
    /// past a bucket's capacity, which it spends only as they conform.
    pub(crate) fn leased(&self, unspent: u64, elapsed_us: u64) -> Decision {
        let aged = self.aged(elapsed_us);
        let limit = u64::from(self.limit);
        Decision {
            remaining: aged.remaining.saturating_add(unspent).min(limit),
            used: aged.used.saturating_sub(unspent).min(limit),
            ..aged
        }
    }

    /// A refusal answered from quota reserved in process: the reservation holds units for the
    /// request, but the next conforms only `retry_after_us` from now. Its rule is full until
    /// then, as the store would say; the reservation's decision aged by `elapsed_us`.
    pub(crate) fn leased_wait(&self, retry_after_us: u64, elapsed_us: u64) -> Decision {
        let aged = self.aged(elapsed_us);
        Decision {
            outcome: Outcome::Denied,
            remaining: 0,
            used: u64::from(self.limit),
            full_after_us: aged.full_after_us.max(retry_after_us),
            wait_us: retry_after_us,
            refused_by: 1 << self.rule.min(7),
            ..aged
        }
    }
}
