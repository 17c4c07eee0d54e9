//! Draws the three measures as one SVG, by hand (no plotting or font dependency), as the other
//! charts of docs/ are drawn.

use std::fmt::Write as _;

use crate::instances::{self, Point as InstancePoint};
use crate::keys::{IN_FLIGHT, Point as KeyPoint};
use crate::memory::PerKey;
use testkit::BoxError;

const WIDTH: f64 = 960.0;
/// Where every panel's plot area starts and ends across.
const LEFT: f64 = 90.0;
const RIGHT: f64 = 700.0;

const BLUE: &str = "#2f7ed8";
const ORANGE: &str = "#e8871e";
const RED: &str = "#c0392b";
const GREY: &str = "#555";

/// The SVG text being written: writing to a `String` cannot fail, so no call returns an error.
struct Svg(String);

impl Svg {
    fn raw(&mut self, element: &str) {
        self.0.push_str(element);
        self.0.push('\n');
    }

    fn text(&mut self, (x, y): (f64, f64), anchor: &str, style: &str, content: &str) {
        let _ = writeln!(
            self.0,
            r#"<text x="{x:.1}" y="{y:.1}" text-anchor="{anchor}" {style}>{content}</text>"#
        );
    }

    fn line(&mut self, (x1, y1): (f64, f64), (x2, y2): (f64, f64), style: &str) {
        let _ = writeln!(
            self.0,
            r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" {style}/>"#
        );
    }

    fn rect(&mut self, (x, y): (f64, f64), (width, height): (f64, f64), style: &str) {
        let _ = writeln!(
            self.0,
            r#"<rect x="{x:.1}" y="{y:.1}" width="{width:.1}" height="{height:.1}" {style}/>"#
        );
    }

    /// A panel's title and the lines saying how it was measured.
    fn heading(&mut self, top: f64, title: &str, caption: &[&str]) {
        self.text(
            (LEFT - 70.0, top),
            "start",
            r#"font-size="15" font-weight="bold""#,
            title,
        );
        for (index, line) in caption.iter().enumerate() {
            self.text(
                (LEFT - 70.0, top + 18.0 + 15.0 * index as f64),
                "start",
                &format!(r#"fill="{GREY}" font-size="12""#),
                line,
            );
        }
    }
}

/// "41 ns", "1.2 µs", "98 µs", "1.5 ms".
fn duration(nanos: f64) -> String {
    let (value, unit) = if nanos < 1e3 {
        (nanos, "ns")
    } else if nanos < 1e6 {
        (nanos / 1e3, "µs")
    } else {
        (nanos / 1e6, "ms")
    };
    if value < 10.0 {
        format!("{value:.1} {unit}")
    } else {
        format!("{value:.0} {unit}")
    }
}

/// "1", "10", ... "10⁶".
fn power_of_ten(exponent: u32) -> String {
    const SUPERSCRIPTS: [&str; 10] = ["⁰", "¹", "²", "³", "⁴", "⁵", "⁶", "⁷", "⁸", "⁹"];
    match exponent {
        0 => "1".to_owned(),
        1 => "10".to_owned(),
        _ => exponent
            .to_string()
            .chars()
            .filter_map(|digit| digit.to_digit(10))
            .fold("10".to_owned(), |mut label, digit| {
                label.push_str(SUPERSCRIPTS[digit as usize]);
                label
            }),
    }
}

pub(crate) fn draw(
    keys: &[KeyPoint],
    memory: &[PerKey],
    instances: &[InstancePoint],
    machine: &str,
) -> Result<String, BoxError> {
    let largest = keys.last().ok_or("no key count was measured")?;
    let mut svg = Svg(String::new());
    let (a_top, b_top) = (70.0, 470.0);
    let c_top = b_top + 100.0 + 26.0 * (memory.len() + 1) as f64;
    let height = c_top + 380.0;
    let _ = writeln!(
        svg.0,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="13">"#
    );
    svg.raw(r##"<rect width="100%" height="100%" fill="#fff"/>"##);
    svg.text(
        (WIDTH / 2.0, 30.0),
        "middle",
        r#"font-size="18" font-weight="bold""#,
        "What rate limiting costs as the work grows",
    );
    svg.text(
        (WIDTH / 2.0, 50.0),
        "middle",
        &format!(r#"fill="{GREY}""#),
        &format!("cargo bench --bench scaling: {machine}"),
    );
    keys_panel(&mut svg, a_top, keys);
    memory_panel(&mut svg, b_top, memory, largest);
    instances_panel(&mut svg, c_top, instances);
    svg.raw("</svg>");
    Ok(svg.0)
}

/// Time per decision against live keys: log-log, one line per store and way of asking.
fn keys_panel(svg: &mut Svg, top: f64, points: &[KeyPoint]) {
    svg.heading(
        top,
        "Time per decision against live keys (GCRA, every decision admitted)",
        &[
            "Keys pre-populated (one decision each), then decisions through all of them in turn. \
             Memory: MemoryStore::check in a loop, one thread.",
            &format!(
                "Redis: RedisStore::check on one connection, {IN_FLIGHT} in flight (run time over \
                 decisions: what Redis sustains) or one at a time (a round trip each)."
            ),
        ],
    );
    let (plot_top, plot_bottom) = (top + 60.0, top + 330.0);
    let decades_x = points
        .last()
        .map_or(1.0, |point| (point.keys as f64).log10().max(1.0));
    let (y_low, y_high) = (1.0, 6.0); // 10 ns to 1 ms
    // Inset from the axes, so the first and last values' labels clear the tick labels.
    let (x_first, x_last) = (LEFT + 40.0, RIGHT - 30.0);
    let x = |keys: usize| x_first + (x_last - x_first) * (keys as f64).log10() / decades_x;
    let y = |nanos: f64| {
        let decades = nanos.max(10.0).log10().clamp(y_low, y_high);
        plot_bottom - (plot_bottom - plot_top) * (decades - y_low) / (y_high - y_low)
    };
    for (exponent, label) in (1..).zip(["10 ns", "100 ns", "1 µs", "10 µs", "100 µs", "1 ms"]) {
        let at = y(10_f64.powi(exponent));
        svg.line((LEFT, at), (RIGHT, at), r##"stroke="#ddd""##);
        svg.text((LEFT - 8.0, at + 4.0), "end", "", label);
    }
    for point in points {
        let at = x(point.keys);
        svg.line((at, plot_top), (at, plot_bottom), r##"stroke="#eee""##);
        let exponent = (point.keys as f64).log10().round() as u32;
        svg.text(
            (at, plot_bottom + 18.0),
            "middle",
            "",
            &power_of_ten(exponent),
        );
    }
    svg.line(
        (LEFT, plot_bottom),
        (RIGHT, plot_bottom),
        r#"stroke="black""#,
    );
    svg.line((LEFT, plot_top), (LEFT, plot_bottom), r#"stroke="black""#);
    svg.text(
        ((LEFT + RIGHT) / 2.0, plot_bottom + 38.0),
        "middle",
        "",
        "live keys",
    );
    let series = [
        Series {
            name: "Redis, one at a time".to_owned(),
            color: RED,
            value: |point| point.redis_one_ns,
            label_offset: -10.0,
        },
        Series {
            name: format!("Redis, {IN_FLIGHT} in flight"),
            color: ORANGE,
            value: |point| point.redis_in_flight_ns,
            label_offset: 18.0,
        },
        Series {
            name: "memory".to_owned(),
            color: BLUE,
            value: |point| point.memory_ns,
            label_offset: -10.0,
        },
    ];
    for (index, series) in series.into_iter().enumerate() {
        let Series {
            name,
            color,
            value,
            label_offset,
        } = series;
        let coordinates: Vec<String> = points
            .iter()
            .map(|point| format!("{:.1},{:.1}", x(point.keys), y(value(point))))
            .collect();
        let _ = writeln!(
            svg.0,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2.5" points="{}"/>"#,
            coordinates.join(" ")
        );
        for point in points {
            let (px, py) = (x(point.keys), y(value(point)));
            let _ = writeln!(
                svg.0,
                r#"<circle cx="{px:.1}" cy="{py:.1}" r="3.5" fill="{color}"/>"#
            );
            svg.text(
                (px, py + label_offset),
                "middle",
                &format!(r#"fill="{color}" font-size="11""#),
                &duration(value(point)),
            );
        }
        let legend = plot_top + 20.0 + 22.0 * index as f64;
        svg.line(
            (RIGHT + 20.0, legend - 4.0),
            (RIGHT + 50.0, legend - 4.0),
            &format!(r#"stroke="{color}" stroke-width="2.5""#),
        );
        svg.text((RIGHT + 58.0, legend), "start", "", &name);
    }
}

/// One line of the key-count panel.
struct Series {
    name: String,
    color: &'static str,
    value: fn(&KeyPoint) -> f64,
    /// Where its values are written: above (negative) or below the points.
    label_offset: f64,
}

/// Redis bytes per client key: one bar per measured state, on a log scale.
fn memory_panel(svg: &mut Svg, top: f64, rows: &[PerKey], largest: &KeyPoint) {
    let exponent = (largest.keys as f64).log10().round() as u32;
    svg.heading(
        top,
        "Redis memory per client key",
        &[
            "MEMORY USAGE of one client's state keys, quota 100/min: the table of cargo bench \
             --bench memory_usage in docs/algorithms.md.",
            &format!(
                "Last bar: Redis's used_memory growth over {} live GCRA keys of the run above, \
                 divided by the keys (keyspace and expiry entries included).",
                power_of_ten(exponent)
            ),
        ],
    );
    let (bar_left, bar_right) = (370.0, 860.0);
    let decades = 6.0; // 1 byte to 1 MB
    let x = |bytes: f64| bar_left + (bar_right - bar_left) * bytes.max(1.0).log10() / decades;
    let first = top + 60.0;
    let mut bars: Vec<(String, f64, &str)> = rows
        .iter()
        .map(|row| (row.label.clone(), row.bytes as f64, BLUE))
        .collect();
    bars.push((
        format!("GCRA, whole server at {} keys", power_of_ten(exponent)),
        largest.redis_bytes_per_key,
        ORANGE,
    ));
    let bottom = first + 26.0 * bars.len() as f64;
    for exponent in 0..=6_u32 {
        let at = x(10_f64.powi(exponent as i32));
        svg.line((at, first - 6.0), (at, bottom), r##"stroke="#ddd""##);
        let label = ["1 B", "10 B", "100 B", "1 kB", "10 kB", "100 kB", "1 MB"][exponent as usize];
        svg.text((at, bottom + 16.0), "middle", "", label);
    }
    for (index, (label, bytes, color)) in bars.iter().enumerate() {
        let row_top = first + 26.0 * index as f64;
        svg.text((bar_left - 10.0, row_top + 14.0), "end", "", label);
        svg.rect(
            (bar_left, row_top),
            (x(*bytes) - bar_left, 18.0),
            &format!(r#"fill="{color}""#),
        );
        svg.text(
            (x(*bytes) + 6.0, row_top + 14.0),
            "start",
            r#"font-size="12""#,
            &format!("{bytes:.0} B"),
        );
    }
}

/// Requests per second for 1, 2 and 4 app processes, with each round's range as a whisker.
fn instances_panel(svg: &mut Svg, top: f64, points: &[InstancePoint]) {
    svg.heading(
        top,
        "Requests/s against app processes sharing one Redis",
        &[
            "Each process: an axum app with RateLimitLayer on RedisStore (GCRA, 10,000 keys in \
             turn, all admitted), one EVALSHA per request.",
            "Driven by the load generator of cargo bench --bench http (32 keep-alive connections \
             over the processes); whiskers: lowest and highest round.",
        ],
    );
    let (plot_top, plot_bottom) = (top + 70.0, top + 320.0);
    let highest = points
        .iter()
        .map(|point| instances::range(&point.per_round).1)
        .fold(1.0_f64, f64::max);
    // A round number of thousands above the highest round.
    let y_max = (highest * 1.25 / 5_000.0).ceil() * 5_000.0;
    let y = |rate: f64| plot_bottom - (plot_bottom - plot_top) * rate / y_max;
    let ticks = 5;
    for tick in 0..=ticks {
        let rate = y_max * f64::from(tick) / f64::from(ticks);
        svg.line((LEFT, y(rate)), (RIGHT, y(rate)), r##"stroke="#ddd""##);
        svg.text(
            (LEFT - 8.0, y(rate) + 4.0),
            "end",
            "",
            &if tick == 0 {
                "0".to_owned()
            } else {
                format!("{:.0}k", rate / 1_000.0)
            },
        );
    }
    svg.line(
        (LEFT, plot_bottom),
        (RIGHT, plot_bottom),
        r#"stroke="black""#,
    );
    svg.line((LEFT, plot_top), (LEFT, plot_bottom), r#"stroke="black""#);
    let slot = (RIGHT - LEFT) / points.len().max(1) as f64;
    for (index, point) in points.iter().enumerate() {
        let middle = LEFT + slot * (index as f64 + 0.5);
        let rate = point.total.per_second();
        svg.rect(
            (middle - 45.0, y(rate)),
            (90.0, plot_bottom - y(rate)),
            &format!(r#"fill="{BLUE}""#),
        );
        let (low, high) = instances::range(&point.per_round);
        svg.line((middle, y(low)), (middle, y(high)), r#"stroke="black""#);
        for end in [low, high] {
            svg.line(
                (middle - 8.0, y(end)),
                (middle + 8.0, y(end)),
                r#"stroke="black""#,
            );
        }
        svg.text(
            (middle, y(high) - 24.0),
            "middle",
            r#"font-weight="bold""#,
            &format!("{rate:.0} req/s"),
        );
        svg.text(
            (middle, y(high) - 8.0),
            "middle",
            &format!(r#"fill="{GREY}" font-size="12""#),
            &format!(
                "p50 {} · p99 {}",
                duration(point.total.micros_at(0.5) as f64 * 1e3),
                duration(point.total.micros_at(0.99) as f64 * 1e3)
            ),
        );
        let label = if point.instances == 1 {
            "1 process".to_owned()
        } else {
            format!("{} processes", point.instances)
        };
        svg.text((middle, plot_bottom + 18.0), "middle", "", &label);
    }
    svg.text(
        (LEFT - 70.0, plot_top - 12.0),
        "start",
        &format!(r#"fill="{GREY}" font-size="12""#),
        "requests/s",
    );
}
