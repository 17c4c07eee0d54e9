//! A route's `max_delay` in `serve`: a question about a request the route admits to wait is
//! answered once the wait is over (as nginx's own `limit_req` holds a request), one about a
//! request that would wait longer is refused at once; the access log says how long each waited.

use std::time::{Duration, Instant};

use crate::support::{Serve, get, header};

const SMOOTHED: &str = r#"
    [serve]
    listen = "127.0.0.1:0"
    access_log = "json"

    [policies.search]
    rules = [{ name = "search", algorithm = "gcra", limit = 2, period = "1s", burst = 2 }]

    [routes.search]
    paths = ["/search/"]
    policy = "search"
    key = { header = "x-api-key" }
    max_delay = "1s"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_is_answered_after_the_wait_and_refused_past_max_delay() {
    let (serve, stdout) = Serve::start_with_stdout(SMOOTHED);
    let url = serve.url("/auth_request");
    let started = Instant::now();
    // Six questions at once about one key: 2 per second, 2 back to back, up to a second's wait.
    let answers = futures_util::future::join_all((0..6).map(|_| {
        let url = url.clone();
        async move {
            let headers = [("x-original-uri", "/search/q"), ("x-api-key", "k")];
            let answer = get("127.0.0.1", &url, &headers).await;
            let rejection = header(&answer, "rejection-status");
            (answer.status().as_u16(), rejection, started.elapsed())
        }
    }))
    .await;
    let mut admitted: Vec<Duration> = answers
        .iter()
        .filter(|(status, ..)| *status == 204)
        .map(|(.., took)| *took)
        .collect();
    admitted.sort();
    let refused: Vec<_> = answers
        .iter()
        .filter(|(status, ..)| *status == 403)
        .collect();
    assert_eq!((admitted.len(), refused.len()), (4, 2), "{answers:?}");
    for (_, rejection, took) in &refused {
        assert_eq!(rejection, "429", "{answers:?}");
        assert!(*took < Duration::from_millis(450), "{answers:?}");
    }
    let ms = Duration::from_millis;
    assert!(admitted[1] < ms(450), "{admitted:?}");
    assert!(
        admitted[2] >= ms(500) && admitted[2] < ms(950),
        "{admitted:?}"
    );
    assert!(
        admitted[3] >= ms(1_000) && admitted[3] < ms(1_450),
        "{admitted:?}"
    );
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
    assert!(delays[4] > 400.0 && delays[5] > 900.0, "{delays:?}");
}
