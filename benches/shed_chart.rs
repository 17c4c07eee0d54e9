//! Run with: cargo bench --bench shed_chart
//!
//! Drives the worker-utilisation shedder's real control law ([`ShedControl`] with Stripe's
//! constants) through a step of overload and draws the drop probability of each priority over
//! time, with the utilisation and the shedding amount, into `docs/load-shedding.svg`.
//!
//! The step: utilisation 50%, then 120% from t = 10 s (a traffic spike, a slow dependency), then
//! 50% again from t = 190 s. The chart is open loop: the utilisation is the input and does not
//! fall as requests are shed, which shows the law itself; in a real service shedding lowers the
//! utilisation, and the amount settles where the utilisation sits in the dead zone.
//!
//! Pass a path to write the SVG elsewhere: `cargo bench --bench shed_chart -- /tmp/chart.svg`.
//! The SVG is written by hand (no plotting or font dependency).

use std::fmt::Write as _;
use std::time::Duration;

use tokio::time::Instant;
use tower_redis_ratelimit::shed::{ControlLaw, Priority, ShedControl};
/// The simulated time, in seconds, and the sampling step.
const END: f64 = 720.0;
const STEP: f64 = 0.5;
const OVERLOAD_STARTS: f64 = 10.0;
const OVERLOAD_ENDS: f64 = 190.0;

/// The chart's canvas and plot area, in SVG units.
const WIDTH: f64 = 980.0;
const HEIGHT: f64 = 560.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 940.0;
const TOP: f64 = 110.0;
const BOTTOM: f64 = 480.0;
/// The y axis, in percent: from below 0, for the negative resting amount, to 120% utilisation.
const Y_MIN: f64 = -30.0;
const Y_MAX: f64 = 130.0;

fn utilization(second: f64) -> f64 {
    if (OVERLOAD_STARTS..OVERLOAD_ENDS).contains(&second) {
        1.2
    } else {
        0.5
    }
}

/// One sample: the time, the utilisation, the amount and the drop probabilities, in percent.
struct Sample {
    second: f64,
    utilization: f64,
    amount: f64,
    drop: [f64; 4],
}

fn simulate(law: ControlLaw) -> Result<Vec<Sample>, Box<dyn std::error::Error>> {
    let start = Instant::now();
    let mut control = ShedControl::new(law, start)?;
    let mut samples = Vec::new();
    let steps = (END / STEP) as u32;
    for step in 0..=steps {
        let second = f64::from(step) * STEP;
        let utilization = utilization(second);
        let amount = control.update(start + Duration::from_secs_f64(second), utilization);
        samples.push(Sample {
            second,
            utilization: utilization * 100.0,
            amount: amount * 100.0,
            drop: Priority::ALL.map(|priority| control.drop_probability(priority) * 100.0),
        });
    }
    Ok(samples)
}

fn x(second: f64) -> f64 {
    LEFT + (RIGHT - LEFT) * second / END
}

fn y(percent: f64) -> f64 {
    BOTTOM - (BOTTOM - TOP) * (percent - Y_MIN) / (Y_MAX - Y_MIN)
}

/// A series as an SVG polyline.
fn polyline(svg: &mut String, points: impl Iterator<Item = (f64, f64)>, style: &str) {
    let points: Vec<String> = points
        .map(|(second, percent)| format!("{:.1},{:.1}", x(second), y(percent)))
        .collect();
    let _ = writeln!(
        svg,
        r#"<polyline fill="none" {style} points="{}"/>"#,
        points.join(" ")
    );
}

fn text(svg: &mut String, at: (f64, f64), anchor: &str, style: &str, content: &str) {
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="{anchor}" {style}>{content}</text>"#,
        at.0, at.1
    );
}

/// The series, with their colour and dash pattern, in legend order.
const SERIES: [(&str, &str); 6] = [
    ("utilisation", r##"stroke="#222" stroke-width="2.5""##),
    (
        "shedding amount",
        r##"stroke="#7a5cc2" stroke-width="1.5" stroke-dasharray="2 4""##,
    ),
    ("drop: low", r##"stroke="#e8871e" stroke-width="3""##),
    ("drop: normal", r##"stroke="#2f7ed8" stroke-width="3""##),
    ("drop: high", r##"stroke="#c0392b" stroke-width="3""##),
    (
        "drop: critical (never)",
        r##"stroke="#27ae60" stroke-width="3" stroke-dasharray="8 4""##,
    ),
];

fn chart(samples: &[Sample], law: &ControlLaw) -> String {
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="13">"#
    );
    let _ = writeln!(
        svg,
        r##"<rect width="{WIDTH}" height="{HEIGHT}" fill="#fff"/>"##
    );
    text(
        &mut svg,
        (WIDTH / 2.0, 30.0),
        "middle",
        r#"font-size="18" font-weight="bold""#,
        "Worker-utilisation load shedder: drop probability for a step of overload",
    );
    text(
        &mut svg,
        (WIDTH / 2.0, 52.0),
        "middle",
        r##"fill="#444""##,
        "utilisation 50% → 120% at 10 s → 50% at 190 s; Stripe's constants: dead zone 70–80%, \
         28 s delay, 120 s ramp (open loop)",
    );

    // The dead zone, behind everything.
    let (good, bad) = (law.end_of_good() * 100.0, law.start_of_bad() * 100.0);
    let _ = writeln!(
        svg,
        r##"<rect x="{LEFT}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#eee"/>"##,
        y(bad),
        RIGHT - LEFT,
        y(good) - y(bad)
    );
    text(
        &mut svg,
        (RIGHT - 6.0, y(bad) + 14.0),
        "end",
        r##"fill="#777" font-size="12""##,
        "dead zone (70–80%): the amount holds",
    );

    // Grid and y axis: every 10%, labelled every 20%.
    let mut percent = Y_MIN;
    while percent <= Y_MAX {
        let major = (percent as i64) % 20 == 0;
        let stroke = if percent == 0.0 {
            "#888"
        } else if major {
            "#ddd"
        } else {
            "#f2f2f2"
        };
        let _ = writeln!(
            svg,
            r#"<line x1="{LEFT}" x2="{RIGHT}" y1="{0:.1}" y2="{0:.1}" stroke="{stroke}"/>"#,
            y(percent)
        );
        if major {
            text(
                &mut svg,
                (LEFT - 8.0, y(percent) + 4.0),
                "end",
                "",
                &format!("{percent:.0}%"),
            );
        }
        percent += 10.0;
    }
    // x axis: a tick every 30 s, labelled every 60 s.
    for second in (0..=END as u32).step_by(30) {
        let at = x(f64::from(second));
        let _ = writeln!(
            svg,
            r##"<line x1="{at:.1}" x2="{at:.1}" y1="{BOTTOM}" y2="{:.1}" stroke="#444"/>"##,
            BOTTOM + 5.0
        );
        if second % 60 == 0 {
            text(
                &mut svg,
                (at, BOTTOM + 20.0),
                "middle",
                "",
                &second.to_string(),
            );
        }
    }
    let _ = writeln!(
        svg,
        r##"<rect x="{LEFT}" y="{TOP}" width="{:.1}" height="{:.1}" fill="none" stroke="#444"/>"##,
        RIGHT - LEFT,
        BOTTOM - TOP
    );
    text(
        &mut svg,
        ((LEFT + RIGHT) / 2.0, BOTTOM + 42.0),
        "middle",
        "",
        "time (s)",
    );
    text(
        &mut svg,
        (22.0, (TOP + BOTTOM) / 2.0),
        "middle",
        &format!(r#"transform="rotate(-90 22 {:.1})""#, (TOP + BOTTOM) / 2.0),
        "utilisation, drop probability, shedding amount (%)",
    );

    // When things happen: the step up, the first shed request, the step down.
    let first_drop = samples
        .iter()
        .find(|s| s.drop[0] > 0.0)
        .map_or(0.0, |s| s.second);
    // Labels go where no series passes: above the 120% line, or below 0% once shedding started.
    for (second, height, label) in [
        (OVERLOAD_STARTS, 124.0, "overload starts"),
        (first_drop, -12.0, "shedding starts, 28 s later"),
        (OVERLOAD_ENDS, 124.0, "overload ends"),
    ] {
        let at = x(second);
        let _ = writeln!(
            svg,
            r##"<line x1="{at:.1}" x2="{at:.1}" y1="{TOP}" y2="{BOTTOM}" stroke="#999" stroke-dasharray="4 3"/>"##
        );
        text(
            &mut svg,
            (at + 4.0, y(height)),
            "start",
            r##"fill="#555" font-size="12""##,
            label,
        );
    }
    text(
        &mut svg,
        (x(OVERLOAD_ENDS) + 4.0, y(-24.0)),
        "start",
        r##"fill="#555" font-size="12""##,
        "gradual recovery at 50%: high priority first, low last, then the delay refills",
    );

    // The series.
    polyline(
        &mut svg,
        samples.iter().map(|s| (s.second, s.utilization)),
        SERIES[0].1,
    );
    polyline(
        &mut svg,
        samples.iter().map(|s| (s.second, s.amount)),
        SERIES[1].1,
    );
    for (band, (_, style)) in SERIES[2..].iter().enumerate() {
        polyline(
            &mut svg,
            samples.iter().map(|s| (s.second, s.drop[band])),
            style,
        );
    }

    // The legend, in one row above the plot.
    let mut at = LEFT;
    for (label, style) in SERIES {
        let _ = writeln!(
            svg,
            r#"<line x1="{at:.1}" x2="{:.1}" y1="80" y2="80" {style}/>"#,
            at + 28.0
        );
        text(&mut svg, (at + 34.0, 84.5), "start", "", label);
        at += 40.0 + 7.6 * label.chars().count() as f64;
    }
    svg.push_str("</svg>\n");
    svg
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let law = ControlLaw::STRIPE;
    let samples = simulate(law)?;
    let path = testkit::args().into_iter().next().unwrap_or_else(|| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/docs/load-shedding.svg").to_owned()
    });
    std::fs::write(&path, chart(&samples, &law))?;
    println!("wrote {path}");
    for (second, label) in [(38.5, "38.5 s"), (190.0, "190 s"), (470.0, "470 s")] {
        let sample = &samples[(second / STEP) as usize];
        println!(
            "at {label}: amount {:.1}%, drop low {:.1}%, normal {:.1}%, high {:.1}%",
            sample.amount, sample.drop[0], sample.drop[1], sample.drop[2]
        );
    }
    Ok(())
}
