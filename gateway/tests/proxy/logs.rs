//! The access log: one line per request on standard output, JSON or text, with the request id,
//! the route, the key's digest (never the key), the decision, the latency and the upstream's
//! status. Standard output is the access log alone; the messages (the start-up line,
//! warnings) are on standard error, in words, and in JSON too when the access log is.

use crate::support::{Proxy, config_with, get_with, upstream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_lines_say_what_happened_to_each_request() {
    let upstream = upstream().await;
    let config =
        config_with(upstream, 1, "").replace(r#"access_log = "off""#, r#"access_log = "json""#);
    let (proxy, stdout) = Proxy::start_with_stdout(&config);
    let secret_key = [("x-api-key", "s3cret-key"), ("x-request-id", "abc-1")];
    assert_eq!(
        get_with(&proxy.url("/api/echo"), &secret_key)
            .await
            .status(),
        200
    );
    assert_eq!(
        get_with(&proxy.url("/%61pi/echo"), &secret_key)
            .await
            .status(),
        429
    );
    let created = get_with(&proxy.url("/open/fail?x=1"), &[]).await;
    assert_eq!(created.status(), 500);
    let created_id = created.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(created_id.len(), 32, "{created_id}");
    assert_eq!(get_with(&proxy.url("/api/echo"), &[]).await.status(), 400);

    let lines: Vec<String> = (0..4).map(|_| stdout.next_line()).collect();
    let parsed: Vec<serde_json::Value> = lines
        .iter()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("{line}: {err}")))
        .collect();
    let field = |line: usize, name: &str| parsed[line][name].clone();
    assert!(
        !lines.iter().any(|line| line.contains("s3cret")),
        "{lines:?}"
    );
    let digest = field(0, "key");
    assert_eq!(digest.as_str().map(str::len), Some(16), "{digest}");
    // The same key, the same digest.
    assert_eq!(field(1, "key"), digest);
    let expected = [
        ("abc-1", "/api/echo", 200, "api", "allowed", Some(200)),
        ("abc-1", "/api/echo", 429, "api", "denied", None),
        (
            created_id.as_str(),
            "/open/fail",
            500,
            "",
            "unlimited",
            Some(500),
        ),
        ("", "/api/echo", 400, "api", "denied", None),
    ];
    for (line, (id, path, status, route, decision, upstream_status)) in
        expected.into_iter().enumerate()
    {
        if !id.is_empty() {
            assert_eq!(field(line, "request_id"), id, "{}", lines[line]);
        }
        assert_eq!(field(line, "method"), "GET", "{}", lines[line]);
        assert_eq!(field(line, "path"), path, "{}", lines[line]);
        assert_eq!(field(line, "status"), status, "{}", lines[line]);
        assert_eq!(field(line, "decision"), decision, "{}", lines[line]);
        assert_eq!(field(line, "client"), "127.0.0.1", "{}", lines[line]);
        let route_value = field(line, "route");
        assert_eq!(route_value.as_str().unwrap_or(""), route, "{}", lines[line]);
        assert_eq!(
            field(line, "upstream_status").as_u64(),
            upstream_status,
            "{}",
            lines[line]
        );
        assert!(field(line, "latency_ms").as_f64().unwrap() >= 0.0);
        // Milliseconds to the microsecond, without a float's noise (`1.1612040000000001`).
        let latency = lines[line]
            .split("\"latency_ms\":")
            .nth(1)
            .and_then(|rest| rest.split([',', '}']).next())
            .unwrap();
        let decimals = latency
            .split_once('.')
            .map_or(0, |(_, decimals)| decimals.len());
        assert!(decimals <= 3, "{latency} in {}", lines[line]);
    }
    // The line without a key has none.
    assert!(field(3, "key").is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_lines_are_key_value_pairs() {
    let upstream = upstream().await;
    let config =
        config_with(upstream, 5, "").replace(r#"access_log = "off""#, r#"access_log = "text""#);
    let (proxy, stdout) = Proxy::start_with_stdout(&config);
    get_with(
        &proxy.url("/api/echo"),
        &[("x-api-key", "k"), ("x-request-id", "t-1")],
    )
    .await;
    let line = stdout.next_line();
    for pair in [
        "request_id=t-1 client=127.0.0.1 method=GET path=\"/api/echo\" status=200 route=api key=",
        " decision=allowed latency_ms=",
        " upstream_status=200",
    ] {
        assert!(line.contains(pair), "{pair:?} not in {line:?}");
    }
    assert!(line.starts_with("time="), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_are_json_on_standard_error_when_the_access_log_is() {
    // An upstream that refuses connections: a port just closed.
    let closed = crate::support::free_addr();
    let config =
        config_with(closed, 5, "").replace(r#"access_log = "off""#, r#"access_log = "json""#);
    let (proxy, stdout) = Proxy::start_with_stdout(&config);
    assert_eq!(get_with(&proxy.url("/open/x"), &[]).await.status(), 502);
    // The access log's line is the first on standard output.
    let line = stdout.next_line();
    let entry: serde_json::Value =
        serde_json::from_str(&line).unwrap_or_else(|err| panic!("{line}: {err}"));
    assert_eq!(entry["status"], 502, "{line}");
    // The warning is a JSON object whose error is said in words, not as Rust's Debug.
    let warning = loop {
        let message = proxy.process.stderr.next_line();
        let value: serde_json::Value =
            serde_json::from_str(&message).unwrap_or_else(|err| panic!("{message}: {err}"));
        if value["message"] == "the upstream cannot be reached" {
            break value;
        }
    };
    assert_eq!(warning["level"], "WARN", "{warning}");
    let error = warning["error"].as_str().unwrap();
    assert!(!error.contains("Os {"), "{error}");
    assert!(error.contains("refused"), "{error}");
}
