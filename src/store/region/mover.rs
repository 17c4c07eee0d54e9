//! The mover: one task per [`RegionStore`](super::RegionStore) that, every `sync_every`, reports
//! what was asked of each global key here to the region and, in the one instance that leads the
//! region, moves allotments between the region and the ledger. No request waits on it.
//!
//! A move is one of four idempotent steps, each with the move's id, so that a retried or late
//! message applies once: **take** (the ledger grants units to the region), **apply** (the region
//! adds them to what it holds), **surrender** (the region gives up unspent units), **credit**
//! (the ledger frees them). Units are always taken off one side before they are added to the
//! other, so a move cut short strands units (until its window ends) and never creates them.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::mem;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use futures_util::future::join_all;
use tokio::task::JoinHandle;

use super::allotment::Counts;
use super::demand::Asked;
use super::global_key::{GlobalKey, KeyId};
use super::pace::{Intent, Pace, Report};
use super::rate::AskRate;
use super::shared::{DECLARED, Shared};
use super::window::Window;

/// One step of a move of units of `window`, named `id`.
#[derive(Clone, Debug)]
enum Move {
    Take {
        id: Box<str>,
        window: Window,
        want: u64,
        demand: u64,
    },
    Apply {
        id: Box<str>,
        window: Window,
        units: u64,
    },
    Surrender {
        id: Box<str>,
        window: Window,
        most: u64,
    },
    Credit {
        id: Box<str>,
        window: Window,
        units: u64,
    },
}

impl Move {
    fn window(&self) -> Window {
        match self {
            Move::Take { window, .. }
            | Move::Apply { window, .. }
            | Move::Surrender { window, .. }
            | Move::Credit { window, .. } => *window,
        }
    }
}

/// What became of a step.
enum Stepped {
    Done,
    Then(Move),
    /// Not done (an error, a take not yet replicated): the same step again next tick.
    Again,
}

/// What the mover remembers of a key between ticks.
#[derive(Default)]
struct Track {
    /// The region's rate of asks, from the readings of its count.
    asked: AskRate,
    /// The moves of each window (the current one, the next), by window index.
    lanes: BTreeMap<u64, Lane>,
    /// The reports of demand (takes of nothing) of each window, and what their answers give
    /// back, beside its moves: a report never holds up a move (a surplus to give back, a take
    /// of units), which it would for a round trip.
    reports: BTreeMap<u64, Lane>,
    /// What this leader last reported of the region's demand, by window, where it was above
    /// zero: reported again when it changes (as zero when it goes, so that its share goes to
    /// the others), and while units are held.
    reported: HashMap<u64, Report>,
    /// Windows that have ended with units unspent, to give back once their lane is free (a
    /// take of the window may still be on its way when it ends).
    ended: Vec<Window>,
}

/// The moves of one window: steps not done yet, in order, and the task running them, which
/// hands back those it could not do. The ledger's round trips never hold up the next tick's
/// report of demand, nor one window's moves the other's.
#[derive(Default)]
struct Lane {
    pending: VecDeque<Move>,
    running: Option<JoinHandle<VecDeque<Move>>>,
}

impl Lane {
    /// Collects a finished task's leftovers; whether the lane is free for new moves.
    async fn settle(&mut self) -> bool {
        if let Some(running) = self.running.take() {
            if !running.is_finished() {
                self.running = Some(running);
                return false;
            }
            // A task that panicked took its steps with it: what they would have moved is
            // stranded until its window ends, never counted twice.
            self.pending = running.await.unwrap_or_default();
        }
        self.pending.is_empty()
    }

    /// Whether nothing is pending or running (as [`settle`](Self::settle) left it).
    fn is_free(&self) -> bool {
        self.running.is_none() && self.pending.is_empty()
    }

    /// A take handed back (not answered, or not acknowledged yet) reports `demand` when it is
    /// sent again: if the ledger never saw it, the demand it records is today's; if it did,
    /// the move's id still grants once.
    fn report(&mut self, demand: u64) {
        if let Some(Move::Take { demand: sent, .. }) = self.pending.front_mut()
            && *sent > 0
            && demand > 0
        {
            *sent = demand;
        }
    }

    fn start(&mut self, shared: &Arc<Shared>, key: &GlobalKey) {
        if self.running.is_none() && !self.pending.is_empty() {
            let steps = mem::take(&mut self.pending);
            self.running = Some(tokio::spawn(finish(shared.clone(), key.clone(), steps)));
        }
    }
}

/// Runs the mover of the store `shared` until the store is dropped.
pub(crate) async fn run(shared: Weak<Shared>) {
    let Some(every) = shared.upgrade().map(|shared| shared.settings.sync_every) else {
        return;
    };
    // Connections across regions take round trips to make: made now, not when demand comes.
    if let Some(shared) = shared.upgrade() {
        let _ = futures_util::future::join(shared.ledger.ping(), shared.region.store.ping()).await;
    }
    let mut interval = tokio::time::interval(every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut tracks = HashMap::new();
    loop {
        interval.tick().await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        if shared.declared.load(Ordering::Relaxed) != DECLARED {
            // Until the ledger is known declared, asked every tick (one read): `/readyz` and
            // the log say so before the first request, and turn as soon as it is declared.
            // Once it is, a take that finds it gone says so.
            if let Ok(declared) = shared.within("birth", shared.ledger.declared()).await {
                shared.note_declared(declared);
            }
        }
        tick(&shared, &mut tracks).await;
    }
}

async fn tick(shared: &Arc<Shared>, tracks: &mut HashMap<KeyId, Track>) {
    let now = shared.clock.now_micros();
    let reports = shared.demand.report(now);
    if reports.is_empty() {
        tracks.clear();
        return;
    }
    // Held for three ticks and a call's timeout: a leader that stops ticking hands over soon.
    let settings = &shared.settings;
    let ttl_ms = u64::try_from((settings.sync_every * 3 + settings.move_timeout).as_millis())
        .unwrap_or(u64::MAX);
    let leads = shared
        .within("lead", shared.region.lead(&shared.instance, ttl_ms))
        .await
        .unwrap_or(false);
    let work = reports.into_iter().map(|asked| {
        let id = asked.key.id();
        let track = tracks.remove(&id).unwrap_or_default();
        async move { (id, step(shared, asked, track, leads, now).await) }
    });
    let done = join_all(work).await;
    // Keys no longer asked about are forgotten; their moves' tasks run to their end.
    tracks.clear();
    tracks.extend(done);
}

/// One key's tick: its demand reported and, when this instance leads, its moves planned.
async fn step(
    shared: &Arc<Shared>,
    asked: Asked,
    mut track: Track,
    leads: bool,
    now: u64,
) -> Track {
    let key = &asked.key;
    let current = Window::at(now, key.period_us());
    let reported = if asked.window == current {
        asked.units
    } else {
        if asked.units > 0 {
            let _ = shared
                .within(
                    "sync",
                    shared.region.sync(key, asked.window, asked.units, now),
                )
                .await;
        }
        0
    };
    let Ok(counts) = shared
        .within("sync", shared.region.sync(key, current, reported, now))
        .await
    else {
        return track;
    };
    // The rate the region is asked at, from its count of units asked (every instance's).
    let mut ended = None;
    let mut unspent_before = None;
    if let Some(before) = track.asked.crossing(current) {
        let Ok(counts) = shared
            .within("sync", shared.region.sync(key, before, 0, now))
            .await
        else {
            return track;
        };
        ended = Some(counts.asked);
        unspent_before = Some((before, counts.unspent()));
    }
    let tick_us = shared.settings.sync_every.as_micros() as u64;
    let rate = track
        .asked
        .read(current, counts.asked, now, ended, (asked.first_us, tick_us));
    if !leads {
        return track;
    }
    emergency(shared, key, current, now).await;
    let next = current.next();
    // Under a meter whose ended windows still count, what the region did not spend of the
    // window just ended goes back, and so does what a take still on its way brings in.
    if let Some((before, unspent)) = unspent_before
        && key.meter().ended_units_count()
        && (unspent > 0
            || track
                .lanes
                .get(&before.index)
                .is_some_and(|lane| !lane.is_free()))
    {
        track.ended.push(before);
    }
    track.settle_ended(current).await;
    track.give_back(shared, now);
    track.reports.retain(|window, _| *window >= current.index);
    for window in [current, next] {
        track
            .reports
            .entry(window.index)
            .or_default()
            .settle()
            .await;
    }
    track.reported.retain(|window, _| *window >= current.index);

    let settings = &shared.settings;
    let skew = settings.max_skew_us;
    // Units per window the region is asked at: what the ledger shares the quota by.
    let whole = current.period_us.saturating_sub(2 * skew) as f64;
    let pace = Pace {
        rate,
        demand: (rate * whole).round() as u64,
        quota: key.quota(),
        margin: rate * 2.0 * tick_us as f64,
        horizon_us: 2.0 * (settings.sync_every + settings.move_timeout).as_micros() as f64,
        tick_us,
        report_every_us: 5 * tick_us,
    };

    if track.lanes.entry(current.index).or_default().settle().await {
        let left = current.end_us().saturating_sub(skew).saturating_sub(now) as f64;
        track.plan(shared, &pace, current, counts, left, now);
    }

    // Near the window's end, the next window's allotment, so that it opens with units held;
    // and, where a demand was reported, the same care as the current window's.
    let lookahead = (current.period_us / 4).max(3 * tick_us);
    if track.lanes.entry(next.index).or_default().settle().await {
        let reported = track.reported.get(&next.index).copied();
        let due = now + lookahead >= current.end_us() && pace.demand > 0;
        if due || reported.is_some() {
            if let Ok(ahead) = shared
                .within("sync", shared.region.sync(key, next, 0, now))
                .await
            {
                track.plan(shared, &pace, next, ahead, whole, now);
            }
        }
    }
    for lane in track.lanes.values_mut().chain(track.reports.values_mut()) {
        lane.report(pace.demand);
        lane.start(shared, key);
    }
    track
}

impl Track {
    /// Forgets the lanes of windows before `current` once their steps are done (those that
    /// bring an ended window's units back to the ledger run on: [`finish`]).
    async fn settle_ended(&mut self, current: Window) {
        let kept = self.lanes.split_off(&current.index);
        for (index, mut lane) in mem::replace(&mut self.lanes, kept) {
            if !lane.settle().await {
                self.lanes.insert(index, lane);
            }
        }
    }

    /// Gives back what is unspent of each ended window whose lane is free, in that lane: the
    /// region's surrender makes the units unspendable before the ledger's credit frees them.
    /// A window whose lane is busy (a take answered late applies its units first, so that a
    /// retried apply never counts them twice) waits for a later tick, until the region forgets
    /// its counts.
    fn give_back(&mut self, shared: &Shared, now: u64) {
        let lanes = &mut self.lanes;
        self.ended.retain(|window| {
            if now >= window.end_us().saturating_add(window.period_us) {
                return false;
            }
            let lane = lanes.entry(window.index).or_default();
            if lane.running.is_some() {
                return true;
            }
            // The region gives up what is unspent, whatever the take that ended the window
            // brought in: at most all it holds.
            lane.pending.push_back(Move::Surrender {
                id: shared.move_id(),
                window: *window,
                most: u64::from(u32::MAX),
            });
            false
        });
    }

    /// Plans `window`'s next move, of which the region holds and spent `counts` with `left_us`
    /// of spending left, into its lane (free); a take notes what the ledger will have heard.
    fn plan(
        &mut self,
        shared: &Shared,
        pace: &Pace,
        window: Window,
        counts: Counts,
        left_us: f64,
        now: u64,
    ) {
        let reported = self.reported.get(&window.index).copied();
        let Some(intent) = pace.plan(counts, left_us, reported, now) else {
            return;
        };
        let lanes = match intent {
            Intent::Take { want: 0 } => &mut self.reports,
            _ => &mut self.lanes,
        };
        let lane = lanes.entry(window.index).or_default();
        if !lane.is_free() {
            // The window's last report is still on its way: this one waits for a tick.
            return;
        }
        let id = shared.move_id();
        let step = match intent {
            Intent::Take { want } => {
                let demand = pace.demand;
                if demand > 0 {
                    let report = Report { demand, at_us: now };
                    self.reported.insert(window.index, report);
                } else {
                    self.reported.remove(&window.index);
                }
                Move::Take {
                    id,
                    window,
                    want,
                    demand,
                }
            }
            Intent::Surrender { most } => Move::Surrender { id, window, most },
        };
        lane.pending.push_back(step);
    }
}

/// Runs a window's steps in order until one is not done, and hands the rest back. A step of a
/// window that has ended is dropped when its units are of no use any more: every step of a
/// fixed window, and a take of any; where ended windows' units still count on the ledger
/// ([`Meter::ended_units_count`](super::meter::Meter::ended_units_count)), the steps that bring
/// them back to it run on for a period after the window's end (as long as the region keeps
/// the window's counts).
async fn finish(shared: Arc<Shared>, key: GlobalKey, mut steps: VecDeque<Move>) -> VecDeque<Move> {
    while let Some(next) = steps.pop_front() {
        let now = shared.clock.now_micros();
        let window = next.window();
        if now >= window.end_us() {
            let brings_back = key.meter().ended_units_count() && !matches!(next, Move::Take { .. });
            if !brings_back || now >= window.end_us().saturating_add(window.period_us) {
                continue;
            }
        }
        match perform(&shared, &key, &next, now).await {
            Stepped::Done => {}
            Stepped::Then(then) => steps.push_front(then),
            Stepped::Again => {
                steps.push_front(next);
                break;
            }
        }
    }
    steps
}

async fn perform(shared: &Arc<Shared>, key: &GlobalKey, step: &Move, now: u64) -> Stepped {
    let region = &shared.settings.name;
    match step {
        Move::Take {
            id,
            window,
            want,
            demand,
        } => {
            let taken = shared
                .within(
                    "take",
                    shared
                        .ledger
                        .take(key, *window, region, id, *want, *demand, now),
                )
                .await;
            shared.note_answer(&taken);
            let Ok(taken) = shared.ledger_answered(taken) else {
                return Stepped::Again;
            };
            if taken.fenced {
                return Stepped::Done;
            }
            if !taken.counted {
                tracing::debug!(
                    "a take of the ledger is not acknowledged by its replicas yet: asked again"
                );
                return Stepped::Again;
            }
            if taken.units == 0 {
                // Holding more than its share while others wait for theirs: given back now,
                // in this window's lane, so that their next take finds the units free. Every
                // unit: what others wait for is no surplus too small to move.
                let most = taken.to_give_back();
                if most > 0 {
                    return Stepped::Then(Move::Surrender {
                        id: shared.move_id(),
                        window: *window,
                        most,
                    });
                }
                return Stepped::Done;
            }
            Stepped::Then(Move::Apply {
                id: id.clone(),
                window: *window,
                units: taken.units,
            })
        }
        Move::Apply { id, window, units } => {
            match shared
                .within("apply", shared.region.apply(key, *window, id, *units, now))
                .await
            {
                Ok(_) => Stepped::Done,
                Err(_) => Stepped::Again,
            }
        }
        Move::Surrender { id, window, most } => {
            match shared
                .within(
                    "surrender",
                    shared.region.surrender(key, *window, id, *most, now),
                )
                .await
            {
                Ok(0) => Stepped::Done,
                Ok(units) => Stepped::Then(Move::Credit {
                    id: id.clone(),
                    window: *window,
                    units,
                }),
                Err(_) => Stepped::Again,
            }
        }
        Move::Credit { id, window, units } => {
            let credited = shared
                .within(
                    "credit",
                    shared.ledger.credit(key, *window, region, id, *units, now),
                )
                .await;
            match shared.ledger_answered(credited) {
                Ok(()) => Stepped::Done,
                Err(_) => Stepped::Again,
            }
        }
    }
}

/// In emergency mode, once the ledger has not answered for `partition_after`: the region's
/// emergency share of the current window, applied once per region and window whichever of its
/// instances leads (the move's id is the same for all).
async fn emergency(shared: &Arc<Shared>, key: &GlobalKey, window: Window, now: u64) {
    let units = shared
        .settings
        .partition
        .emergency_units(key.window_quota());
    if units == 0 || !shared.cut_off(now) {
        return;
    }
    let applied = shared
        .within(
            "apply",
            shared.region.apply(key, window, "emergency", units, now),
        )
        .await;
    if let Ok(true) = applied {
        crate::telemetry::region_emergency_units(units);
        tracing::warn!(
            region = %shared.settings.name,
            units,
            "cut off from the ledger: this region spends its emergency share of a global quota \
             for this window"
        );
    }
}
