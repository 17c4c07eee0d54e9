//! The admin address: `/metrics`, `/healthz`, `/readyz`.

use std::time::{Duration, Instant};

use crate::support::{Proxy, client, config_with, free_addr, get_with, upstream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_are_served_as_prometheus_metrics() {
    let upstream = upstream().await;
    let metrics = free_addr();
    let proxy = Proxy::start(&config_with(upstream, 2, &format!("admin = \"{metrics}\"")));
    for _ in 0..3 {
        get_with(&proxy.url("/api/echo"), &[("x-api-key", "m")]).await;
    }
    let text = metrics_text(metrics).await;
    let sample = |outcome: &str| {
        text.lines()
            .find(|line| {
                line.starts_with("ratelimit_decisions_total{")
                    && line.contains(&format!("outcome=\"{outcome}\""))
            })
            .unwrap_or_else(|| panic!("no {outcome} decisions in:\n{text}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        (sample("allowed"), sample("denied")),
        ("2".to_owned(), "1".to_owned())
    );
    // The gateway's own: requests by decision and status, upstream answers, latencies.
    let line = |prefix: &str| {
        text.lines()
            .find(|line| line.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in:\n{text}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        line(r#"gateway_requests_total{decision="allowed",status="2xx"}"#),
        "2"
    );
    assert_eq!(
        line(r#"gateway_requests_total{decision="denied",status="4xx"}"#),
        "1"
    );
    assert_eq!(
        line(r#"gateway_upstream_responses_total{status="2xx"}"#),
        "2"
    );
    assert_eq!(line("gateway_request_duration_seconds_count"), "3");
}

/// What the admin address at `admin` serves at `/metrics`.
pub(crate) async fn metrics_text(admin: std::net::SocketAddr) -> String {
    let response = client().get(format!("http://{admin}/metrics")).send().await;
    response.unwrap().text().await.unwrap()
}

async fn status_and_text(url: String) -> (u16, String) {
    let response = client().get(url).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// `/healthz` says the process is up; `/readyz` that its stores answer: not while Redis is down,
/// and again once it is back. Neither is forwarded nor limited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_and_readyz_follow_the_store() {
    let upstream = upstream().await;
    let mut redis = testkit::RedisServer::start();
    let admin = free_addr();
    let config = format!(
        "{}\n[stores.shared]\ntype = \"redis\"\nurl = \"{}\"\nconnect_timeout = \"200ms\"\n",
        config_with(upstream, 100, &format!("admin = \"{admin}\"")),
        redis.url()
    );
    let proxy = Proxy::start(&config);
    assert!(
        proxy
            .first_line
            .contains(&format!("admin on http://{admin}")),
        "{}",
        proxy.first_line
    );
    let url = |path: &str| format!("http://{admin}{path}");
    assert_eq!(
        status_and_text(url("/healthz")).await,
        (200, "ok\n".to_owned())
    );
    assert_eq!(
        status_and_text(url("/readyz")).await,
        (200, "ready\n".to_owned())
    );
    // Not forwarded: the upstream answers any path with "path ...".
    assert_eq!(status_and_text(url("/api/echo")).await.0, 404);

    redis.kill();
    let (status, text) = status_and_text(url("/readyz")).await;
    assert_eq!(status, 503, "{text}");
    assert!(text.starts_with("not ready: store shared: "), "{text}");
    // Still up.
    assert_eq!(status_and_text(url("/healthz")).await.0, 200);

    redis.restart();
    let deadline = Instant::now() + Duration::from_secs(10);
    while status_and_text(url("/readyz")).await.0 != 200 {
        assert!(
            Instant::now() < deadline,
            "not ready again after Redis came back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The proxy's own traffic is unaffected by all this.
    assert_eq!(
        get_with(&proxy.url("/api/echo"), &[("x-api-key", "h")])
            .await
            .status(),
        200
    );
}

/// `/metrics` read by a Prometheus text parser: every metric has its `# HELP`, latencies are
/// histograms with buckets (aggregatable across instances), counters are there at 0 before
/// their first event, and the admin address's own connections (scrapes) are not counted among
/// the open ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_read_as_prometheus_reads_them() {
    let upstream = upstream().await;
    let admin = free_addr();
    let proxy = Proxy::start(&config_with(upstream, 2, &format!("admin = \"{admin}\"")));
    let scrape = || async {
        let text = metrics_text(admin).await;
        let lines = text.lines().map(|line| Ok(line.to_owned()));
        (prometheus_parse::Scrape::parse(lines).unwrap(), text)
    };
    // Nothing has been asked yet: the counters are there, at 0.
    let (before, text) = scrape().await;
    let value = |scrape: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]| {
        scrape
            .samples
            .iter()
            .find(|sample| {
                sample.metric == name
                    && labels
                        .iter()
                        .all(|(label, value)| sample.labels.get(label) == Some(*value))
            })
            .map(|sample| sample.value.clone())
    };
    for (name, labels) in [
        (
            "gateway_requests_total",
            &[("decision", "denied"), ("status", "4xx")][..],
        ),
        ("gateway_upstream_errors_total", &[("error", "timeout")][..]),
        ("ratelimit_fallback_decisions_total", &[][..]),
        ("ratelimit_store_errors_total", &[("kind", "timeout")][..]),
    ] {
        assert!(
            matches!(
                value(&before, name, labels),
                Some(prometheus_parse::Value::Counter(zero)) if zero == 0.0
            ),
            "{name} {labels:?} not at 0 in:\n{text}"
        );
    }
    // (A histogram is exported, its help with it, from its first sample on.)
    for name in [
        "gateway_requests_total",
        "ratelimit_store_errors_total",
        "gateway_connections_open",
    ] {
        assert!(
            before.docs.get(name).is_some_and(|help| !help.is_empty()),
            "no # HELP for {name} in:\n{text}"
        );
    }
    // Scrapes are no client connections.
    let (again, _) = scrape().await;
    assert!(matches!(
        value(&again, "gateway_connections_open", &[]),
        Some(prometheus_parse::Value::Gauge(open)) if open == 0.0
    ));
    for _ in 0..3 {
        get_with(&proxy.url("/api/echo"), &[("x-api-key", "p")]).await;
    }
    // Latencies are histograms with buckets, not summaries.
    let (after, text) = scrape().await;
    assert!(
        after.docs.contains_key("gateway_request_duration_seconds"),
        "{text}"
    );
    match value(&after, "gateway_request_duration_seconds", &[]) {
        Some(prometheus_parse::Value::Histogram(buckets)) => {
            assert!(buckets.len() > 5, "{buckets:?}");
            let all = buckets
                .iter()
                .find(|bucket| bucket.less_than == f64::INFINITY);
            assert_eq!(all.map(|bucket| bucket.count), Some(3.0), "{text}");
        }
        other => panic!("not a histogram: {other:?} in:\n{text}"),
    }
}
