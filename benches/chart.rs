//! Run with: cargo bench --bench chart
//!
//! Draws `docs/algorithms.svg`: which requests of one bursty client each algorithm allows and
//! denies over time, under a quota of 10 requests per 10 s. Every algorithm sees the same trace
//! (built with the same generator as the accuracy study) through the real [`MemoryStore`] with a
//! [`ManualClock`]:
//!
//! - t = 0: a burst of 20 requests;
//! - t = 3 to 17 s: one request a second, the quota's rate;
//! - t = 28 s: one request, which starts a fixed window;
//! - t = 37.5 s: 10 requests just before that window ends, and 10 just after (t = 38 s);
//! - t = 40 to 56 s: two requests a second, twice the quota's rate.
//!
//! Pass a path to write the SVG elsewhere: `cargo bench --bench chart -- /tmp/chart.svg`.
//! The SVG is written by hand (no plotting or font dependency).

use std::fmt::Write as _;
use std::time::Duration;

use testkit::traces::{START_MICROS, Trace};
use tower_redis_ratelimit::clock::ManualClock;
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::{MemoryStore, Policy, Quota, Rule, Store};

/// The simulated time shown, in seconds, and the width of one column of stacked requests.
const END: f64 = 56.0;
const COLUMN: f64 = 0.2;

/// The canvas, in SVG units.
const WIDTH: f64 = 1000.0;
const LEFT: f64 = 225.0;
const RIGHT: f64 = 975.0;
const TOP: f64 = 104.0;
const ROW: f64 = 116.0;
/// One request's mark: a small bar, stacked up (allowed) or down (denied) from the row's middle.
const MARK_WIDTH: f64 = 2.4;
const MARK_HEIGHT: f64 = 4.0;
const MARK_STEP: f64 = 5.0;

const GREEN: &str = "#2e9d4a";
const RED: &str = "#d43d3d";

fn trace() -> Vec<u64> {
    let ms = Duration::from_millis;
    let s = Duration::from_secs;
    Trace::new()
        .burst(0, s(0), 20, ms(25))
        .steady(0, s(3), ms(17_500), 1.0)
        .burst(0, s(28), 1, ms(0))
        .burst(0, ms(37_500), 10, ms(50))
        .burst(0, s(38), 10, ms(50))
        .steady(0, s(40), s(56), 2.0)
        .finish()
        .into_iter()
        .map(|request| request.at - START_MICROS)
        .collect()
}

/// Each request's time (seconds since the trace start) and whether it was allowed.
fn decide(rule: Rule, trace: &[u64]) -> Result<Vec<(f64, bool)>, Box<dyn std::error::Error>> {
    let clock = ManualClock::new(START_MICROS);
    let store = MemoryStore::builder().clock(clock.clone()).build();
    let policy = Policy::new([rule])?;
    let key = Key::from("client");
    let mut decisions = Vec::with_capacity(trace.len());
    for &offset in trace {
        clock.set(START_MICROS + offset);
        let decision = store
            .check(&key, &policy, 1)
            .take_ready()
            .ok_or("the memory store answers synchronously")??;
        decisions.push((offset as f64 / 1e6, decision.is_allowed()));
    }
    Ok(decisions)
}

fn x(second: f64) -> f64 {
    LEFT + (RIGHT - LEFT) * second / END
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = testkit::args()
        .into_iter()
        .next()
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/docs/algorithms.svg").to_owned());
    let quota = Quota::new(10, Duration::from_secs(10));
    let rows = [
        ("Fixed window", Rule::fixed_window("q", quota)),
        ("Sliding log (exact)", Rule::sliding_log("q", quota)),
        (
            "Sliding window (4 sub-int.)",
            Rule::sliding_window("q", quota, 4),
        ),
        ("Token bucket", Rule::token_bucket("q", quota)),
        ("GCRA", Rule::gcra("q", quota)),
    ];
    let trace = trace();
    let height = TOP + ROW * rows.len() as f64 + 56.0;

    let mut svg = String::new();
    writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="13">"#
    )?;
    writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#)?;
    writeln!(
        svg,
        r#"<text x="{LEFT}" y="26" font-size="17" font-weight="bold">The same bursty client under each algorithm: quota 10 requests per 10 s</text>"#
    )?;
    // Legend.
    writeln!(
        svg,
        r#"<rect x="{LEFT}" y="40" width="10" height="10" fill="{GREEN}"/><text x="{}" y="49">allowed (stacked up)</text>"#,
        LEFT + 15.0
    )?;
    writeln!(
        svg,
        r#"<rect x="{}" y="40" width="10" height="10" fill="{RED}"/><text x="{}" y="49">denied (stacked down)</text>"#,
        LEFT + 170.0,
        LEFT + 185.0
    )?;
    writeln!(
        svg,
        r##"<text x="{}" y="49" fill="#555">one mark per request, grouped per {COLUMN} s</text>"##,
        LEFT + 350.0
    )?;
    // What the client does, above the strips.
    // Two lines of labels, so that neighbours do not overlap.
    for (second, line, anchor, label) in [
        (0.0, 1.0, "start", "burst of 20"),
        (3.0, 0.0, "start", "1/s (the quota's rate)"),
        (28.0, 0.0, "middle", "1"),
        (38.0, 1.0, "middle", "10 at 37.5 s, 10 at 38 s"),
        (40.5, 0.0, "start", "2/s (twice the quota's rate)"),
    ] {
        writeln!(
            svg,
            r##"<text x="{:.1}" y="{}" text-anchor="{anchor}" fill="#555" font-size="12">{label}</text>"##,
            x(second),
            TOP - 8.0 - 15.0 * line
        )?;
    }

    let bottom = TOP + ROW * rows.len() as f64;
    // Multiples of the period: the sliding window's sub-intervals are aligned to them.
    for ten in 0..=(END as u32 / 10) {
        let at = x(f64::from(ten * 10));
        writeln!(
            svg,
            r##"<line x1="{at:.1}" y1="{TOP}" x2="{at:.1}" y2="{bottom}" stroke="#bbb" stroke-dasharray="3,3"/>"##
        )?;
    }

    for (index, (name, rule)) in rows.into_iter().enumerate() {
        let decisions = decide(rule, &trace)?;
        let top = TOP + ROW * index as f64;
        let middle = top + ROW / 2.0;
        if index % 2 == 0 {
            writeln!(
                svg,
                r##"<rect x="0" y="{top}" width="{WIDTH}" height="{ROW}" fill="#f4f4f4" fill-opacity="0.7"/>"##
            )?;
        }
        let allowed = decisions.iter().filter(|(_, allowed)| *allowed).count();
        let denied = decisions.len() - allowed;
        writeln!(
            svg,
            r#"<text x="12" y="{:.1}" font-weight="bold" font-size="13">{name}</text>"#,
            middle - 6.0
        )?;
        writeln!(
            svg,
            r#"<text x="12" y="{:.1}"><tspan fill="{GREEN}">{allowed} allowed</tspan>, <tspan fill="{RED}">{denied} denied</tspan></text>"#,
            middle + 14.0
        )?;
        writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{middle}" x2="{RIGHT}" y2="{middle}" stroke="#999"/>"##
        )?;
        // Stack each column's allowed requests upwards and denied ones downwards.
        let columns = (END / COLUMN).ceil() as usize + 1;
        let mut stacks = vec![(0u32, 0u32); columns];
        for &(second, allowed) in &decisions {
            let column = ((second / COLUMN) as usize).min(columns - 1);
            let left = x(column as f64 * COLUMN);
            let (up, down) = &mut stacks[column];
            let (y, color) = if allowed {
                *up += 1;
                (middle - 1.0 - f64::from(*up) * MARK_STEP, GREEN)
            } else {
                *down += 1;
                (middle + 1.0 + f64::from(*down - 1) * MARK_STEP, RED)
            };
            writeln!(
                svg,
                r#"<rect x="{left:.1}" y="{y:.1}" width="{MARK_WIDTH}" height="{MARK_HEIGHT}" fill="{color}"/>"#
            )?;
        }
    }

    // The time axis.
    writeln!(
        svg,
        r#"<line x1="{LEFT}" y1="{bottom}" x2="{RIGHT}" y2="{bottom}" stroke="black"/>"#
    )?;
    for second in 0..=END as u32 {
        let at = x(f64::from(second));
        let long = second % 5 == 0;
        writeln!(
            svg,
            r#"<line x1="{at:.1}" y1="{bottom}" x2="{at:.1}" y2="{}" stroke="black"/>"#,
            bottom + if long { 8.0 } else { 4.0 }
        )?;
        if long {
            writeln!(
                svg,
                r#"<text x="{at:.1}" y="{}" text-anchor="middle" font-size="12">{second}</text>"#,
                bottom + 22.0
            )?;
        }
    }
    writeln!(
        svg,
        r#"<text x="{:.1}" y="{}" text-anchor="middle">time (s); dashed lines every period (10 s)</text>"#,
        (LEFT + RIGHT) / 2.0,
        bottom + 44.0
    )?;
    writeln!(svg, "</svg>")?;

    std::fs::write(&path, svg)?;
    println!("wrote {path}");
    Ok(())
}
