//! The worker-utilisation shedder's control law (seed 004), driven second by second on a paused
//! tokio clock: the dead zone, the delay before shedding, the gradual ramp lowest priority first,
//! critical traffic never shed, and the gradual recovery.

use std::time::Duration;

use tokio::time::{Instant, advance};
use tower_redis_ratelimit::shed::{ControlLaw, Priority, ShedControl};
const EPSILON: f64 = 1e-9;
/// The most the shedding amount may move in one second under the seed's law: 1 / 120.
const MAX_STEP: f64 = 1.0 / 120.0;

/// One sample of the control: the time since the start, the amount and each priority's drop
/// probability (lowest priority first, `Critical` last).
#[derive(Clone, Copy, Debug)]
struct Sample {
    second: u64,
    amount: f64,
    drop: [f64; 4],
}

/// A control fed one utilisation sample per second of paused tokio time.
struct Drive {
    control: ShedControl,
    start: Instant,
}

impl Drive {
    fn new(law: ControlLaw) -> Self {
        let start = Instant::now();
        Self {
            control: ShedControl::new(law, start).unwrap(),
            start,
        }
    }

    /// Runs `seconds` seconds at `utilization`, sampling once a second, and returns the samples.
    async fn run(&mut self, seconds: u64, utilization: f64) -> Vec<Sample> {
        let mut samples = Vec::new();
        for _ in 0..seconds {
            advance(Duration::from_secs(1)).await;
            let now = Instant::now();
            let amount = self.control.update(now, utilization);
            samples.push(Sample {
                second: (now - self.start).as_secs(),
                amount,
                drop: Priority::ALL.map(|priority| self.control.drop_probability(priority)),
            });
        }
        samples
    }

    fn drop(&self, priority: Priority) -> f64 {
        self.control.drop_probability(priority)
    }
}

fn first_shedding(samples: &[Sample]) -> Option<u64> {
    samples
        .iter()
        .find(|s| s.drop.iter().any(|&p| p > 0.0))
        .map(|s| s.second)
}

#[tokio::test(start_paused = true)]
async fn the_dead_zone_holds_the_amount_where_it_is() {
    let mut drive = Drive::new(ControlLaw::default());
    let resting = ControlLaw::default().resting_amount();
    // Ten minutes between 70% and 80%: a healthy instance never starts shedding.
    for utilization in [0.7, 0.75, 0.799] {
        for sample in drive.run(600, utilization).await {
            assert_eq!(
                sample.amount, resting,
                "{utilization} at {}s",
                sample.second
            );
        }
    }
    // Up to some shedding, then ten minutes in the dead zone: the shedding stays, unchanged.
    drive.run(88, 1.0).await;
    let held = drive.control.amount();
    assert!((held - 0.5).abs() < EPSILON, "{held}");
    for sample in drive.run(600, 0.75).await {
        assert_eq!(sample.amount, held);
    }
    assert!((drive.drop(Priority::Normal) - 0.5).abs() < EPSILON);
}

#[tokio::test(start_paused = true)]
async fn nothing_is_shed_until_the_overload_has_lasted_the_delay() {
    // Full overload (and beyond: 120% is no faster than 100%) sheds from the 29th second on.
    for utilization in [1.0, 1.2, 50.0] {
        let mut drive = Drive::new(ControlLaw::default());
        let samples = drive.run(40, utilization).await;
        assert_eq!(first_shedding(&samples), Some(29), "at {utilization}");
    }
    // At 90% the amount rises half as fast: twice the delay.
    let mut drive = Drive::new(ControlLaw::default());
    assert_eq!(first_shedding(&drive.run(70, 0.9).await), Some(57));
    // The delay is configurable.
    let mut drive = Drive::new(ControlLaw::default().delay(Duration::from_secs(5)));
    assert_eq!(first_shedding(&drive.run(10, 1.0).await), Some(6));
}

#[tokio::test(start_paused = true)]
async fn short_overloads_with_recovery_in_between_never_shed() {
    // Twenty seconds saturated, twenty idle, for an hour: each idle spell undoes the spike.
    let mut drive = Drive::new(ControlLaw::default());
    for _ in 0..90 {
        let mut samples = drive.run(20, 1.0).await;
        samples.extend(drive.run(20, 0.0).await);
        assert_eq!(first_shedding(&samples), None);
    }
}

#[tokio::test(start_paused = true)]
async fn the_ramp_is_gradual_monotone_and_sheds_the_lowest_priority_first() {
    let mut drive = Drive::new(ControlLaw::default());
    let samples = drive.run(200, 1.2).await;
    for pair in samples.windows(2) {
        let (before, after) = (pair[0], pair[1]);
        assert!(after.amount >= before.amount, "{after:?}");
        assert!(
            after.amount - before.amount <= MAX_STEP + EPSILON,
            "{after:?}"
        );
        for (was, is) in before.drop.iter().zip(after.drop) {
            assert!(is >= *was, "drop probabilities only rise: {after:?}");
            // Three bands share the ramp: at most 3/120 per second for any one priority.
            assert!(is - was <= 3.0 * MAX_STEP + EPSILON, "{after:?}");
        }
    }
    for sample in &samples {
        let [low, normal, high, critical] = sample.drop;
        assert!(low >= normal && normal >= high, "{sample:?}");
        assert!(
            normal == 0.0 || low == 1.0,
            "normal only once low is all shed: {sample:?}"
        );
        assert!(
            high == 0.0 || normal == 1.0,
            "high only once normal is all shed: {sample:?}"
        );
        assert_eq!(critical, 0.0, "{sample:?}");
    }
    // Each band takes a third of the 120 s ramp, after the 28 s delay.
    let at = |second: u64| samples[second as usize - 1];
    assert_eq!(at(28).drop, [0.0; 4]);
    assert!((at(48).drop[0] - 0.5).abs() < EPSILON);
    assert_eq!(at(68).drop, [1.0, 0.0, 0.0, 0.0]);
    assert!((at(88).drop[1] - 0.5).abs() < EPSILON);
    assert_eq!(at(148).drop, [1.0, 1.0, 1.0, 0.0]);
    assert_eq!(at(200).amount, 1.0);
}

#[tokio::test(start_paused = true)]
async fn critical_traffic_is_never_shed() {
    let mut drive = Drive::new(ControlLaw::default());
    for sample in drive.run(3600, 10.0).await {
        assert_eq!(sample.drop[Priority::Critical as usize], 0.0);
    }
    assert_eq!(drive.control.amount(), 1.0);
    // Even with a single band, and even when the law is saturated.
    let mut drive = Drive::new(ControlLaw::default().priorities([Priority::Normal]));
    drive.run(600, 10.0).await;
    assert_eq!(drive.drop(Priority::Low), 1.0);
    assert_eq!(drive.drop(Priority::High), 1.0);
    assert_eq!(drive.drop(Priority::Critical), 0.0);
}

#[tokio::test(start_paused = true)]
async fn recovery_is_gradual_highest_priority_first_and_restores_the_delay() {
    let mut drive = Drive::new(ControlLaw::default());
    drive.run(300, 1.0).await;
    assert_eq!(drive.control.amount(), 1.0);

    // Down to 35%, half of `end_of_good`: the amount falls at half the ramp's speed, 0.5 / 120
    // per second, never in a jump, until it rests at −28 / 120.
    let resting = ControlLaw::default().resting_amount();
    let samples = drive.run(400, 0.35).await;
    let mut before: f64 = 1.0;
    for sample in &samples {
        let expected = (before - 0.5 / 120.0).max(resting);
        assert!((sample.amount - expected).abs() < EPSILON, "{sample:?}");
        before = sample.amount;
        let [low, normal, high, _] = sample.drop;
        assert!(low >= normal && normal >= high, "{sample:?}");
    }
    // High is served in full again first, after 80 s; Low last, after 240 s.
    let served_in_full_after = |band: usize| {
        samples
            .iter()
            .find(|s| s.drop[band] == 0.0)
            .map(|s| s.second - 300)
    };
    assert_eq!(served_in_full_after(2), Some(80));
    assert_eq!(served_in_full_after(1), Some(160));
    assert_eq!(served_in_full_after(0), Some(240));
    // Rested again (after 240 + 56 s): a new overload waits the whole delay again.
    assert_eq!(samples[295].amount, resting);
    let again = drive.run(40, 1.0).await;
    assert_eq!(first_shedding(&again).map(|s| s - 700), Some(29));
}

#[tokio::test(start_paused = true)]
async fn an_idle_instance_recovers_in_one_ramp() {
    let mut drive = Drive::new(ControlLaw::default());
    drive.run(300, 1.0).await;
    // At 0% the amount falls as fast as it rose: from everything shed to nothing in 120 s.
    let samples = drive.run(120, 0.0).await;
    assert!(samples[118].drop[0] > 0.0, "{:?}", samples[118]);
    assert_eq!(samples[119].drop, [0.0; 4]);
    for pair in samples.windows(2) {
        assert!(pair[0].amount - pair[1].amount <= MAX_STEP + EPSILON);
    }
}

#[tokio::test(start_paused = true)]
async fn a_quiet_spell_counts_in_full_toward_recovery_and_never_past_the_delay_toward_shedding() {
    let law = ControlLaw::default();
    let start = Instant::now();
    let at = |seconds: u64| start + Duration::from_secs(seconds);
    let mut control = ShedControl::new(law, start).unwrap();
    let resting = control.amount();
    // Saturated for five minutes, updated every second: everything sheddable is refused.
    for second in 1..=300 {
        control.update(at(second), 1.0);
    }
    assert_eq!(control.amount(), 1.0);
    // No request for ten minutes, then one that finds the instance idle: the quiet spell was
    // longer than a whole ramp, so nothing is shed any more, as if requests had come all along.
    control.update(at(900), 0.0);
    assert_eq!(control.amount(), resting);
    for priority in [Priority::Low, Priority::Normal, Priority::High] {
        assert_eq!(control.drop_probability(priority), 0.0, "{priority:?}");
    }
    // Ten more quiet minutes, then a request that finds it saturated: that says nothing about the
    // spell, so the amount moves by the delay at most, reaching the point where shedding starts.
    control.update(at(1500), 1.0);
    assert!(control.amount().abs() < EPSILON, "{}", control.amount());
    assert_eq!(control.drop_probability(Priority::Low), 0.0);
}
