//! [`ShedConfigError`]: what is wrong with a load shedder's settings.

use std::time::Duration;

/// A load shedder setting is invalid.
#[derive(Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ShedConfigError {
    /// A capacity of zero.
    #[error(
        "a capacity of 0: the capacity is how many requests in flight make the instance fully utilised, at least 1"
    )]
    ZeroCapacity,
    /// Neither a capacity nor a utilisation function.
    #[error(
        "no measure of utilisation: call `.capacity(n)` to count requests in flight, or `.utilization(f)` to measure it yourself"
    )]
    NoUtilization,
    /// Both a capacity and a utilisation function.
    #[error("both `.capacity(n)` and `.utilization(f)` are set: choose one measure of utilisation")]
    BothMeasures,
    /// A dead zone out of order.
    #[error(
        "the dead zone {end_of_good}..{start_of_bad} must satisfy 0 < end_of_good <= start_of_bad < 1"
    )]
    DeadZone {
        /// Where good utilisation ends.
        end_of_good: f64,
        /// Where bad utilisation starts.
        start_of_bad: f64,
    },
    /// A control period out of range.
    #[error("the {setting} of {period:?} is out of range: use between {min:?} and {max:?}")]
    PeriodOutOfRange {
        /// `delay` or `ramp`.
        setting: &'static str,
        /// The period refused.
        period: Duration,
        /// The shortest allowed.
        min: Duration,
        /// The longest allowed.
        max: Duration,
    },
    /// No sheddable priority.
    #[error(
        "no sheddable priority is in use: list at least one of low, normal and high (critical is never shed)"
    )]
    NoPriorities,
    /// Critical listed as sheddable.
    #[error("critical traffic is never shed: list only low, normal and high as priorities")]
    CriticalShed,
}
