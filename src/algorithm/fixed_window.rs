//! Fixed window, as `lua/fixed_window.lua`: at most `limit` units of cost per window; a window
//! starts with the first request a key makes after its previous window ended.

use super::{Params, Step, Write, verdict};
use crate::decision::Outcome;

/// The window's start (µs since the epoch) and the units used in it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct State {
    pub(crate) start: f64,
    pub(crate) used: f64,
}

pub(super) fn step(params: &Params, state: Option<&State>, now: f64, cost: f64) -> Step {
    let Params { limit, period, .. } = *params;
    let (start, used) = match state {
        Some(state) if now < state.start + period => (state.start, state.used),
        _ => (now, 0.0),
    };
    let reset_after = start + period - now;
    let room = (limit - used).max(0.0);
    if cost > limit {
        let never = verdict(Outcome::Never, room, used, reset_after, 0.0);
        return Step::read_only(never);
    }
    if used + cost > limit {
        let denied = verdict(Outcome::Denied, room, used, reset_after, reset_after);
        return Step::read_only(denied);
    }
    let used = used + cost;
    let write =
        (cost > 0.0).then_some(Write::Set(super::State::FixedWindow(State { start, used })));
    let allowed = verdict(Outcome::Allowed, limit - used, used, reset_after, 0.0);
    Step::new(allowed, write, reset_after)
}
