//! The worker-utilisation shedder's control law (Stripe's): a pure state machine driven by the
//! time and the utilisation it is given, so it can be tested with a paused clock and charted.
//!
//! The state is one number, the *shedding amount*, between a negative resting value and 1. The
//! utilisation sets how fast it moves (its derivative):
//!
//! | utilisation | derivative, per second |
//! |---|---|
//! | below `end_of_good` (0.7) | `(u / end_of_good − 1) / ramp`: negative, recovering faster the idler the service is |
//! | `end_of_good` to `start_of_bad` (0.7–0.8) | 0: the dead zone holds the amount where it is |
//! | from `start_of_bad` (0.8) | `(u − start_of_bad) / (1 − start_of_bad) / ramp`, at most `1 / ramp` (from u = 1 up) |
//!
//! The amount rests at `−delay / ramp` (−28/120) while the service is healthy, so full overload
//! needs `delay` (28 s) to bring it up to 0, where shedding starts, and `ramp` (120 s) more to bring
//! it to 1, where every sheddable request is refused. The amount is split into one equal band per
//! sheddable priority in use, lowest priority first: with `Low`, `Normal` and `High`, `Low` is
//! refused with probability `3a` (so all of it at a = ⅓), `Normal` with `3a − 1`, `High` with
//! `3a − 2`. `Critical` is never refused.

use std::time::Duration;

use tokio::time::Instant;

use crate::error::{ConfigError, ShedConfigError};
use crate::shed::Priority;

/// The constants of the control law. The defaults are Stripe's; see the
/// [module docs](crate::shed) for what each one does and why it has its value.
///
/// ```
/// use std::time::Duration;
/// use tower_redis_ratelimit::shed::{ControlLaw, Priority};
///
/// // React faster than Stripe's defaults, for a service whose utilisation is measured continuously.
/// let law = ControlLaw::default()
///     .delay(Duration::from_secs(10))
///     .ramp(Duration::from_secs(60))
///     .priorities([Priority::Low, Priority::Normal]);
/// assert_eq!(law.resting_amount(), -10.0 / 60.0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ControlLaw {
    end_of_good: f64,
    start_of_bad: f64,
    delay: Duration,
    ramp: Duration,
    /// Bit `i` is set when the priority of index `i` is shed (never `Critical`'s).
    levels: u8,
}

/// The shortest `delay` or `ramp` accepted.
const MIN_PERIOD: Duration = Duration::from_millis(1);
/// The longest `delay` or `ramp` accepted: a day is already far slower than any overload.
const MAX_PERIOD: Duration = Duration::from_secs(24 * 3600);

impl ControlLaw {
    /// Stripe's constants: dead zone 0.7 to 0.8, 28 s before shedding starts, 120 s to shed all
    /// traffic, every sheddable priority in use.
    pub const STRIPE: ControlLaw = ControlLaw {
        end_of_good: 0.7,
        start_of_bad: 0.8,
        delay: Duration::from_secs(28),
        ramp: Duration::from_secs(120),
        levels: 0b0111,
    };

    /// The dead zone: below `end_of_good` (default 0.7) the shedding amount recovers, from
    /// `start_of_bad` (default 0.8) it rises, in between it holds. Needs
    /// `0 < end_of_good ≤ start_of_bad < 1`.
    pub const fn dead_zone(mut self, end_of_good: f64, start_of_bad: f64) -> Self {
        self.end_of_good = end_of_good;
        self.start_of_bad = start_of_bad;
        self
    }

    /// How long full overload must last before the first request is shed (default 28 s), from a
    /// rested state. It also caps how much time one update may account for, so one sample after a
    /// long quiet spell cannot jump over the delay. Between 1 ms and 24 h.
    pub const fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// How long full overload takes to go from shedding nothing to shedding every sheddable
    /// request (default 120 s); at u = 0 recovery is as fast. Between 1 ms and 24 h.
    pub const fn ramp(mut self, ramp: Duration) -> Self {
        self.ramp = ramp;
        self
    }

    /// The sheddable priorities your classifier uses (default `Low`, `Normal` and `High`). Each
    /// gets an equal band of the ramp, lowest first, so a band nobody uses costs no time. A
    /// request of a priority not listed is shed with the nearest listed priority below it, or
    /// with the lowest listed one. `Critical` cannot be listed: it is never shed.
    pub fn priorities(mut self, priorities: impl IntoIterator<Item = Priority>) -> Self {
        self.levels = priorities
            .into_iter()
            .fold(0, |levels, priority| levels | 1 << priority.index());
        self
    }

    /// The lower end of the dead zone.
    pub const fn end_of_good(&self) -> f64 {
        self.end_of_good
    }

    /// The upper end of the dead zone.
    pub const fn start_of_bad(&self) -> f64 {
        self.start_of_bad
    }

    /// How long overload must last before shedding starts.
    pub const fn delay_before_shedding(&self) -> Duration {
        self.delay
    }

    /// How long full overload takes to shed every sheddable request.
    pub const fn ramp_duration(&self) -> Duration {
        self.ramp
    }

    /// The shedding amount of a healthy service, `−delay / ramp`: the distance full overload has
    /// to cover before shedding starts.
    pub fn resting_amount(&self) -> f64 {
        -self.delay.as_secs_f64() / self.ramp.as_secs_f64()
    }

    /// How fast the shedding amount moves at `utilization`, per second: between `−1 / ramp` and
    /// `1 / ramp`. A utilisation that is not a number (NaN) moves nothing.
    pub fn rate(&self, utilization: f64) -> f64 {
        self.direction(utilization) / self.ramp.as_secs_f64()
    }

    /// The rate in seconds of full overload per second, from −1 to 1.
    fn direction(&self, utilization: f64) -> f64 {
        let direction = if utilization.is_nan() {
            0.0
        } else if utilization < self.end_of_good {
            utilization.max(0.0) / self.end_of_good - 1.0
        } else if utilization < self.start_of_bad {
            0.0
        } else {
            (utilization - self.start_of_bad) / (1.0 - self.start_of_bad)
        };
        direction.clamp(-1.0, 1.0)
    }

    /// The probability that a request of `priority` is refused at shedding amount `amount`.
    pub fn drop_probability(&self, amount: f64, priority: Priority) -> f64 {
        self.band_probability(amount * self.ramp.as_secs_f64(), priority)
    }

    /// The drop probability at `overload`, the amount in seconds of full overload (`amount ×
    /// ramp`). Multiplying before dividing keeps the band edges exact for whole seconds.
    fn band_probability(&self, overload: f64, priority: Priority) -> f64 {
        if !priority.is_sheddable() || self.levels == 0 {
            return 0.0;
        }
        let bands = self.levels.count_ones();
        let at_or_below = self.levels & ((2 << priority.index()) - 1);
        let band = at_or_below.count_ones().saturating_sub(1);
        let position = overload * f64::from(bands) / self.ramp.as_secs_f64();
        (position - f64::from(band)).clamp(0.0, 1.0)
    }

    /// Checks the constants; the layer's `build()` calls it.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |error: ShedConfigError| Err(error.into());
        if !(0.0 < self.end_of_good
            && self.end_of_good <= self.start_of_bad
            && self.start_of_bad < 1.0)
        {
            return invalid(ShedConfigError::DeadZone {
                end_of_good: self.end_of_good,
                start_of_bad: self.start_of_bad,
            });
        }
        for (setting, period) in [("delay", self.delay), ("ramp", self.ramp)] {
            if !(MIN_PERIOD..=MAX_PERIOD).contains(&period) {
                return invalid(ShedConfigError::PeriodOutOfRange {
                    setting,
                    period,
                    min: MIN_PERIOD,
                    max: MAX_PERIOD,
                });
            }
        }
        if self.levels == 0 {
            return invalid(ShedConfigError::NoPriorities);
        }
        if self.levels & (1 << Priority::Critical.index()) != 0 {
            return invalid(ShedConfigError::CriticalShed);
        }
        Ok(())
    }
}

impl Default for ControlLaw {
    fn default() -> Self {
        ControlLaw::STRIPE
    }
}

/// The control law's state: the shedding amount and when it was last updated.
///
/// The amount is kept as seconds of full overload (`amount × ramp`, from `−delay` to `ramp`):
/// whole seconds at full overload then add up exactly, so the delay ends on the second.
///
/// Feed it the time and the utilisation at each request ([`update`](Self::update)), then read the
/// drop probability of the request's priority; the caller refuses the request when a uniform
/// random number in `[0, 1)` falls below it. Nothing in it reads a clock or a random generator,
/// so a test decides both.
///
/// ```
/// use std::time::Duration;
/// use tokio::time::Instant;
/// use tower_redis_ratelimit::shed::{ControlLaw, Priority, ShedControl};
///
/// let start = Instant::now();
/// let mut control = ShedControl::new(ControlLaw::default(), start)?;
/// // Full overload: nothing is shed for 28 s, then `Low` traffic starts to go.
/// for second in 1..=28 {
///     control.update(start + Duration::from_secs(second), 1.0);
/// }
/// assert_eq!(control.drop_probability(Priority::Low), 0.0);
/// control.update(start + Duration::from_secs(38), 1.0);
/// assert!((control.drop_probability(Priority::Low) - 0.25).abs() < 1e-9);
/// assert_eq!(control.drop_probability(Priority::Normal), 0.0);
/// assert_eq!(control.drop_probability(Priority::Critical), 0.0);
/// # Ok::<(), tower_redis_ratelimit::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ShedControl {
    law: ControlLaw,
    overload: f64,
    updated: Instant,
}

impl ShedControl {
    /// A rested control (amount `−delay / ramp`) as of `now`, or why the law is invalid.
    ///
    /// Stripe's sketch starts at amount 0 with its last update at the Unix epoch, so a process that starts
    /// under overload sheds at once; starting rested gives it the same delay as anyone else.
    pub fn new(law: ControlLaw, now: Instant) -> Result<Self, ConfigError> {
        law.validate()?;
        Ok(Self {
            law,
            overload: -law.delay.as_secs_f64(),
            updated: now,
        })
    }

    /// The constants.
    pub fn law(&self) -> &ControlLaw {
        &self.law
    }

    /// Moves the shedding amount by the rate at `utilization` for the time since the last update,
    /// and returns it. An instant before the last update counts as no time.
    ///
    /// Toward shedding, the time counts for at most `delay`: a request after a quiet spell finds
    /// the instance busy now, which says nothing about the spell, so it must not jump past the
    /// delay. Toward recovery the whole spell counts: an instance that no request reached was
    /// idle, and recovers as it would have with requests updating it all along.
    pub fn update(&mut self, now: Instant, utilization: f64) -> f64 {
        let rate = self.law.direction(utilization);
        let mut elapsed = now.saturating_duration_since(self.updated);
        if rate > 0.0 {
            elapsed = elapsed.min(self.law.delay);
        }
        self.updated = self.updated.max(now);
        let moved = self.overload + elapsed.as_secs_f64() * rate;
        self.overload = moved.clamp(-self.law.delay.as_secs_f64(), self.law.ramp.as_secs_f64());
        self.amount()
    }

    /// The shedding amount: negative while healthy, 0 where shedding starts, 1 when every
    /// sheddable request is refused.
    pub fn amount(&self) -> f64 {
        self.overload / self.law.ramp.as_secs_f64()
    }

    /// The probability that a request of `priority` is refused now.
    pub fn drop_probability(&self, priority: Priority) -> f64 {
        self.law.band_probability(self.overload, priority)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EPSILON: f64 = 1e-12;

    #[test]
    fn the_rate_follows_stripes_law_in_each_zone() {
        let law = ControlLaw::STRIPE;
        let per_second = |u: f64| law.rate(u) * 120.0;
        assert!((per_second(0.0) + 1.0).abs() < EPSILON);
        assert!((per_second(0.35) + 0.5).abs() < EPSILON);
        assert_eq!(per_second(0.7), 0.0);
        assert_eq!(per_second(0.75), 0.0);
        assert_eq!(per_second(0.8), 0.0);
        assert!((per_second(0.9) - 0.5).abs() < 1e-9);
        assert!((per_second(1.0) - 1.0).abs() < EPSILON);
        assert_eq!(per_second(5.0), 1.0);
        assert_eq!(per_second(-3.0), -1.0);
        assert_eq!(per_second(f64::NAN), 0.0);
        assert_eq!(per_second(f64::INFINITY), 1.0);
    }

    #[test]
    fn the_resting_amount_is_the_delay_over_the_ramp() {
        // Stripe's sketch writes `-28 / 120`, which Ruby computes in integers as -1: a 120 s delay
        // instead of the 28 s the comment intends. Here it is a real division.
        assert!((ControlLaw::STRIPE.resting_amount() + 28.0 / 120.0).abs() < EPSILON);
    }

    #[test]
    fn bands_go_to_the_listed_priorities_lowest_first() {
        let law = ControlLaw::STRIPE;
        let p = |amount, priority| law.drop_probability(amount, priority);
        assert_eq!(p(-0.1, Priority::Low), 0.0);
        assert!((p(0.1, Priority::Low) - 0.3).abs() < EPSILON);
        assert_eq!(p(0.1, Priority::Normal), 0.0);
        assert_eq!(p(0.5, Priority::Low), 1.0);
        assert!((p(0.5, Priority::Normal) - 0.5).abs() < EPSILON);
        assert_eq!(p(0.5, Priority::High), 0.0);
        assert_eq!(p(1.0, Priority::High), 1.0);
        assert_eq!(p(1.0, Priority::Critical), 0.0);

        // Two classes in use: `Normal` owns the upper half; `High`, not listed, goes with it;
        // `Low` goes with the lowest listed band.
        let two = ControlLaw::STRIPE.priorities([Priority::Low, Priority::Normal]);
        assert!((two.drop_probability(0.75, Priority::Normal) - 0.5).abs() < EPSILON);
        assert!((two.drop_probability(0.75, Priority::High) - 0.5).abs() < EPSILON);
        let one = ControlLaw::STRIPE.priorities([Priority::Normal]);
        assert!((one.drop_probability(0.4, Priority::Low) - 0.4).abs() < EPSILON);
        assert!((one.drop_probability(0.4, Priority::Normal) - 0.4).abs() < EPSILON);
        assert!((one.drop_probability(0.4, Priority::High) - 0.4).abs() < EPSILON);
    }

    #[test]
    fn invalid_constants_are_refused_with_the_reason() {
        let message = |law: ControlLaw| law.validate().unwrap_err().to_string();
        assert!(ControlLaw::STRIPE.validate().is_ok());
        assert!(message(ControlLaw::STRIPE.dead_zone(0.8, 0.7)).contains("0 < end_of_good"));
        assert!(message(ControlLaw::STRIPE.dead_zone(0.0, 0.5)).contains("dead zone"));
        assert!(message(ControlLaw::STRIPE.dead_zone(0.5, 1.0)).contains("dead zone"));
        assert!(message(ControlLaw::STRIPE.dead_zone(f64::NAN, 0.5)).contains("dead zone"));
        assert!(message(ControlLaw::STRIPE.delay(Duration::ZERO)).contains("delay"));
        assert!(message(ControlLaw::STRIPE.ramp(Duration::from_secs(90_000))).contains("ramp"));
        assert!(message(ControlLaw::STRIPE.priorities([])).contains("at least one"));
        assert!(
            message(ControlLaw::STRIPE.priorities([Priority::Critical])).contains("never shed")
        );
        assert!(ControlLaw::STRIPE.dead_zone(0.75, 0.75).validate().is_ok());
    }

    #[test]
    fn one_update_accounts_for_at_most_the_delay() {
        let start = Instant::now();
        let mut control = ShedControl::new(ControlLaw::STRIPE, start).unwrap();
        // An hour of silence, then one sample at full overload: it moves the amount by 28 s
        // worth, from rest to the edge of shedding and no further.
        let amount = control.update(start + Duration::from_secs(3600), 1.0);
        assert!(amount.abs() < EPSILON, "{amount}");
        assert_eq!(control.drop_probability(Priority::Low), 0.0);
        // An instant before the last update moves nothing.
        assert_eq!(control.update(start, 1.0), amount);
    }
}
