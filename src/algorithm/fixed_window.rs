//! Fixed window, as `lua/fixed_window.lua`: at most `limit` units of cost per window; a window
//! starts with the first request a key makes after its previous window ended.

use super::{Params, verdict};
use crate::decision::{Outcome, RuleVerdict};

/// The window's start (µs since the epoch) and the units used in it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct State {
    pub(crate) start: f64,
    pub(crate) used: f64,
}

pub(super) fn step(
    params: &Params,
    state: Option<&State>,
    now: f64,
    cost: f64,
) -> (RuleVerdict, Option<(State, u64)>) {
    let Params { limit, period, .. } = *params;
    let (start, used) = match state {
        Some(state) if now < state.start + period => (state.start, state.used),
        _ => (now, 0.0),
    };
    let reset_after = start + period - now;
    let room = (limit - used).max(0.0);
    if cost > limit {
        return (verdict(Outcome::Never, room, used, reset_after, 0.0), None);
    }
    if used + cost > limit {
        return (
            verdict(Outcome::Denied, room, used, reset_after, reset_after),
            None,
        );
    }
    let used = used + cost;
    let next = (cost > 0.0).then(|| (State { start, used }, super::arith::ttl_micros(reset_after)));
    (
        verdict(Outcome::Allowed, limit - used, used, reset_after, 0.0),
        next,
    )
}
