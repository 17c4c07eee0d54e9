//! The mover: one task per [`RegionStore`](super::RegionStore) that, every `sync_every`, reports
//! what was asked of each global key here to the region and, in the one instance that leads the
//! region, moves allotments between the region and the ledger. No request waits on it.
//!
//! A move is one of four idempotent steps, each with the move's id, so that a retried or late
//! message applies once: **take** (the ledger grants units to the region), **apply** (the region
//! adds them to what it holds), **surrender** (the region gives up unspent units), **credit**
//! (the ledger frees them). Units are always taken off one side before they are added to the
//! other, so a move cut short strands units (until its window ends) and never creates them.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::mem;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use futures_util::future::join_all;
use tokio::task::JoinHandle;

use super::demand::Asked;
use super::global_key::{GlobalKey, KeyId};
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
    /// The window, the region's units asked in it and when they were read: the last reading.
    last: Option<(Window, u64, u64)>,
    /// Units asked per µs in the region, smoothed.
    rate: f64,
    /// The moves of each window (the current one, the next), by window index.
    lanes: BTreeMap<u64, Lane>,
    /// Windows whose ledger holds a demand of this region above zero: a demand of zero must be
    /// reported there when it goes, so that its share goes to the others.
    reported: HashSet<u64>,
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
    // The rate the region is asked at, from its count of units asked (every instance's); at
    // first, since the window started or this instance was first asked, whichever is later.
    let instant = match track.last {
        Some((window, asked_before, at)) if window == current && now > at => {
            counts.asked.saturating_sub(asked_before) as f64 / (now - at) as f64
        }
        _ => {
            let since = current.start_us().max(asked.first_us);
            counts.asked as f64 / now.saturating_sub(since).max(1) as f64
        }
    };
    // Smoothed, but following a change within a few ticks: demand that moves away must free
    // its share soon.
    track.rate = if track.last.is_some() {
        0.4 * track.rate + 0.6 * instant
    } else {
        instant
    };
    track.last = Some((current, counts.asked, now));
    if !leads {
        return track;
    }
    emergency(shared, key, current, now).await;
    let next = current.next();
    track.lanes.retain(|window, _| *window >= current.index);
    track.reported.retain(|window| *window >= current.index);

    let settings = &shared.settings;
    let quota = key.quota();
    let skew = settings.max_skew_us;
    let sync_us = settings.sync_every.as_micros() as f64;
    // Units per window the region is asked at: what the ledger shares the quota by.
    let whole = current.period_us.saturating_sub(2 * skew) as f64;
    let demand = (track.rate * whole).round() as u64;
    let margin = track.rate * 2.0 * sync_us;

    if track.lanes.entry(current.index).or_default().settle().await {
        let left = current.end_us().saturating_sub(skew).saturating_sub(now) as f64;
        let needed = track.rate * left;
        let unspent = counts.unspent() as f64;
        let want = ((needed + margin - unspent).ceil().max(0.0) as u64)
            .min(quota.saturating_sub(counts.held));
        let surplus = (unspent - (needed + 2.0 * margin).ceil()).max(0.0) as u64;
        let step = if want > 0 || (demand == 0 && track.reported.contains(&current.index)) {
            Some(take(shared, &mut track.reported, current, want, demand))
        } else if surplus > (quota / 50).max(1) {
            Some(Move::Surrender {
                id: shared.move_id(),
                window: current,
                most: surplus,
            })
        } else {
            None
        };
        track
            .lanes
            .entry(current.index)
            .or_default()
            .pending
            .extend(step);
    }

    // Near the window's end, the next window's allotment, so that it opens with units held;
    // and a demand reported there that has gone, so that its share goes to the others.
    let lookahead = (current.period_us / 4).max(3 * settings.sync_every.as_micros() as u64);
    if track.lanes.entry(next.index).or_default().settle().await {
        let mut step = None;
        if demand == 0 && track.reported.contains(&next.index) {
            step = Some(take(shared, &mut track.reported, next, 0, 0));
        } else if now + lookahead >= current.end_us() && demand > 0 {
            if let Ok(ahead) = shared
                .within("sync", shared.region.sync(key, next, 0, now))
                .await
            {
                let want = ((demand as f64 + margin).ceil() as u64)
                    .min(quota)
                    .saturating_sub(ahead.held);
                if want > 0 {
                    step = Some(take(shared, &mut track.reported, next, want, demand));
                }
            }
        }
        track
            .lanes
            .entry(next.index)
            .or_default()
            .pending
            .extend(step);
    }
    for lane in track.lanes.values_mut() {
        lane.start(shared, key);
    }
    track
}

/// A take of `want` units of `window`, reporting `demand`; `reported` notes where the ledger
/// holds a demand of this region.
fn take(
    shared: &Shared,
    reported: &mut HashSet<u64>,
    window: Window,
    want: u64,
    demand: u64,
) -> Move {
    if demand > 0 {
        reported.insert(window.index);
    } else {
        reported.remove(&window.index);
    }
    Move::Take {
        id: shared.move_id(),
        window,
        want,
        demand,
    }
}

/// Runs a window's steps in order until one is not done, and hands the rest back. A step of a
/// window that has ended is dropped: its units are of no use any more.
async fn finish(shared: Arc<Shared>, key: GlobalKey, mut steps: VecDeque<Move>) -> VecDeque<Move> {
    while let Some(next) = steps.pop_front() {
        let now = shared.clock.now_micros();
        if now >= next.window().end_us() {
            continue;
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
