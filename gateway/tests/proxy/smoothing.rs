//! A route's `max_delay` (gateway/docs/proxy.md's "Smoothing bursts", its file run as written
//! under a `[proxy]` table): a burst is forwarded in turn, each request after its wait, and what
//! would wait longer is refused; the access log says how long each waited, and `/metrics` has
//! the waits as a histogram.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::admin::metrics_text;
use crate::support::{BINARY, Proxy, TempFile, free_addr, get_with, upstream};

/// The TOML block of gateway/docs/proxy.md's "Smoothing bursts".
fn documented() -> String {
    let page =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/proxy.md")).unwrap();
    let section = &page[page.find("## Smoothing bursts").unwrap()..];
    let block = &section[section.find("```toml\n").unwrap() + 8..];
    block[..block.find("```").unwrap()].to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_is_forwarded_in_turn_and_what_would_wait_too_long_is_refused() {
    let upstream = upstream().await;
    let admin = free_addr();
    let config = format!(
        "[proxy]\nlisten = \"127.0.0.1:0\"\nupstream = \"http://{upstream}\"\n\
         access_log = \"json\"\nadmin = \"{admin}\"\n\n{}",
        documented()
    );
    let (proxy, stdout) = Proxy::start_with_stdout(&config);
    // Six at once from one key: 2 per second, 2 back to back, up to a second of waiting.
    let url = proxy.url("/search/q");
    let started = Instant::now();
    let answers = futures_util::future::join_all((0..6).map(|_| {
        let url = url.clone();
        async move {
            let response = get_with(&url, &[("x-api-key", "k")]).await;
            let status = response.status().as_u16();
            let retry_after = response
                .headers()
                .get("retry-after")
                .map(|value| value.to_str().unwrap().to_owned());
            (status, started.elapsed(), retry_after)
        }
    }))
    .await;
    let mut served: Vec<Duration> = answers
        .iter()
        .filter(|(status, ..)| *status == 200)
        .map(|(_, took, _)| *took)
        .collect();
    served.sort();
    let refused: Vec<_> = answers
        .iter()
        .filter(|(status, ..)| *status == 429)
        .collect();
    assert_eq!((served.len(), refused.len()), (4, 2), "{answers:?}");
    for (_, took, retry_after) in &refused {
        assert_eq!(retry_after.as_deref(), Some("1"), "{answers:?}");
        assert!(
            *took < Duration::from_millis(450),
            "refused at once: {answers:?}"
        );
    }
    // Two at once, then one after 500 ms and one after a second (a wait is never shorter).
    let ms = Duration::from_millis;
    assert!(served[1] < ms(450), "{served:?}");
    assert!(served[2] >= ms(500) && served[2] < ms(950), "{served:?}");
    assert!(
        served[3] >= ms(1_000) && served[3] < ms(1_450),
        "{served:?}"
    );

    // The access log's delay_ms: 0 for the two at once and the refused, about 500 and 1000.
    let mut delays: Vec<f64> = (0..6)
        .map(|_| {
            let line: serde_json::Value = serde_json::from_str(&stdout.next_line()).unwrap();
            line["delay_ms"]
                .as_f64()
                .unwrap_or_else(|| panic!("{line}"))
        })
        .collect();
    delays.sort_by(f64::total_cmp);
    assert_eq!(&delays[..4], [0.0; 4], "{delays:?}");
    // The store's clock runs while the burst arrives: each wait is its slot less that time.
    assert!(delays[4] > 400.0 && delays[4] <= 500.0, "{delays:?}");
    assert!(delays[5] > 900.0 && delays[5] <= 1_000.0, "{delays:?}");

    let text = metrics_text(admin).await;
    assert!(
        text.contains("# HELP ratelimit_delay_seconds "),
        "no HELP line in:\n{text}"
    );
    let count = text
        .lines()
        .find(|line| line.starts_with("ratelimit_delay_seconds_count{"))
        .unwrap_or_else(|| panic!("no ratelimit_delay_seconds in:\n{text}"));
    assert!(count.contains("rule=\"search\""), "{count}");
    assert!(count.ends_with(" 2"), "{count}");
    assert!(
        text.contains("ratelimit_delay_seconds_bucket{") && text.contains("le=\"1\""),
        "no buckets in:\n{text}"
    );
}

/// `check` says a route's `max_delay` in the file's words, and names it when the route's policy
/// has no rule it could delay.
#[test]
fn check_shows_a_max_delay_and_names_a_misplaced_one() {
    let check = |blocks: &str| {
        let file = TempFile::new(
            "toml",
            &format!(
                "[proxy]\nlisten = \"127.0.0.1:0\"\nupstream = \"http://127.0.0.1:9\"\n{blocks}"
            ),
        );
        let output = Command::new(BINARY)
            .arg("check")
            .arg(&file.0)
            .output()
            .unwrap();
        let text =
            String::from_utf8(output.stdout).unwrap() + &String::from_utf8(output.stderr).unwrap();
        (output.status.success(), text)
    };
    let (valid, text) = check(&documented());
    assert!(valid, "{text}");
    let line = "  search: paths [\"/search/\"], policy search, key header x-api-key, max_delay 1s";
    assert!(
        text.lines().any(|l| l == line),
        "no line {line:?} in:\n{text}"
    );
    let (valid, text) = check(
        &documented()
            .replace("\"gcra\"", "\"fixed_window\"")
            .replace(", burst = 2", ""),
    );
    assert!(!valid, "{text}");
    assert!(
        text.contains("`routes.search.max_delay`: delays only gcra and token_bucket rules, and policy \"search\" has none"),
        "{text}"
    );
}
