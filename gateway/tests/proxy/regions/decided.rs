//! Which window decided an admission, as far as the upstream's log can tell. The proxy decided
//! between the request's send (its client's time, which it carries) and its arrival upstream:
//! on a quiet machine both fall in one window, and that window decided it. On a stalled one, a
//! request sent before a window's end may arrive after it, decided in either window: counted
//! by arrival alone, a stall would look like an overshoot of the next window.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The windows an admission may have been decided in: from the one it was sent in to the one
/// it arrived in.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Span {
    pub(crate) first: u64,
    pub(crate) last: u64,
}

/// The first window that must have decided more than `bound` of the admissions `spans`, if
/// any: whatever window of its span each was decided in, some window holds more. Found by
/// placing them window after window, each window taking up to `bound` of the admissions it may
/// hold, those whose spans end soonest first (which leaves the later windows the most room,
/// so it finds a placement whenever there is one).
pub(crate) fn overfull(mut spans: Vec<Span>, bound: u64) -> Option<u64> {
    spans.sort_by_key(|span| span.first);
    let mut spans = spans.into_iter().peekable();
    // The admissions whose spans have begun and that no window took yet, by their last window.
    let mut waiting = BinaryHeap::<Reverse<u64>>::new();
    let mut window = spans.peek()?.first;
    loop {
        while let Some(span) = spans.next_if(|span| span.first <= window) {
            waiting.push(Reverse(span.last));
        }
        for _ in 0..bound {
            if waiting.pop().is_none() {
                break;
            }
        }
        // Left over, one whose span ends here has no window left.
        if waiting.peek().is_some_and(|Reverse(last)| *last <= window) {
            return Some(window);
        }
        window = match (waiting.is_empty(), spans.peek()) {
            (false, _) => window + 1,
            (true, Some(next)) => next.first,
            (true, None) => return None,
        };
    }
}

#[test]
fn an_admission_that_straddles_a_window_s_edge_goes_where_there_is_room() {
    let span = |first, last| Span { first, last };
    // Two windows of a bound of 2: three admissions inside window 1 and one that may be either.
    let within = vec![span(0, 0), span(0, 1), span(1, 1), span(1, 1)];
    assert_eq!(overfull(within.clone(), 2), None);
    let mut over = within;
    over.push(span(1, 1));
    assert_eq!(overfull(over, 2), Some(1));
    assert_eq!(overfull(vec![span(5, 5); 3], 2), Some(5));
    assert_eq!(overfull(vec![span(5, 6); 4], 2), None);
    assert_eq!(overfull(Vec::new(), 2), None);
}
