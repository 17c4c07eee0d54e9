//! The `[serve]` table as `check` reads it, what `serve` refuses to run, `--help`, the admin
//! address and the access log, and a SIGHUP reload that keeps the counts.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{BINARY, Serve, get, header, limits};

fn check(config: &str) -> std::process::Output {
    let dir = testkit::TempDir::new("serve-check").unwrap();
    let path = dir.path().join("serve.toml");
    std::fs::write(&path, config).unwrap();
    Command::new(BINARY)
        .arg("check")
        .arg(&path)
        .output()
        .unwrap()
}

#[test]
fn check_prints_the_serve_table_and_refuses_concurrency_limits() {
    let output = check(&format!(
        r#"
        [serve]
        listen = "127.0.0.1:8081"
        socket = "/run/ratelimit-gateway/serve.sock"
        client_header = "x-real-ip"
        admin = "127.0.0.1:9000"
        {}
        "#,
        limits(5)
    ));
    let printed = String::from_utf8(output.stdout).unwrap();
    assert!(output.status.success(), "{printed}");
    assert!(
        printed.contains("proxy: none (no [proxy] table)\n"),
        "{printed}"
    );
    assert!(
        printed.contains(
            "serve: listen http://127.0.0.1:8081 and unix:/run/ratelimit-gateway/serve.sock, \
             endpoints /auth_request (nginx) and /forward_auth (Traefik, Caddy)\n  client \
             address: x-real-ip from gateways 127.0.0.0/8, ::1/128 and the Unix socket\n"
        ),
        "{printed}"
    );
    // Who may reset is part of what runs: here anyone on this host.
    assert!(
        printed.contains(
            "  admin: http://127.0.0.1:9000 (/healthz, /readyz, /metrics; POST /reset by anyone \
             who reaches this loopback address (no admin_token))\n"
        ),
        "{printed}"
    );
    let guarded = check(&format!(
        "[serve]\nlisten = \"127.0.0.1:8081\"\nadmin = \"0.0.0.0:9000\"\n\
         admin_token = \"0123456789abcdef0123\"\n{}",
        limits(5)
    ));
    let printed = String::from_utf8(guarded.stdout).unwrap();
    assert!(guarded.status.success(), "{printed}");
    assert!(
        printed.contains(
            "  admin: http://0.0.0.0:9000 (/healthz, /readyz, /metrics; POST /reset with the \
             admin_token as a bearer token)\n"
        ),
        "{printed}"
    );
    assert!(!printed.contains("0123456789abcdef"), "{printed}");

    let refused = check(&format!(
        r#"
        [serve]
        listen = "127.0.0.1:8081"
        {}
        [concurrency.reports]
        paths = ["/reports/"]
        max_in_flight = 4
        key = {{ client_ip = {{}} }}
        "#,
        limits(5)
    ));
    assert!(!refused.status.success());
    let error = String::from_utf8(refused.stderr).unwrap();
    assert!(
        error.contains("`concurrency.reports`: `serve` answers before the request is served"),
        "{error}"
    );
    for (table, field) in [
        ("[serve]\naccess_log = \"off\"\n", "`serve.listen`"),
        (
            "[serve]\nlisten = \"127.0.0.1:1\"\ngateways = [\"nowhere\"]\n",
            "`serve.gateways`",
        ),
        (
            "[serve]\nlisten = \"127.0.0.1:1\"\nclient_header = \"a b\"\n",
            "`serve.client_header`",
        ),
    ] {
        let refused = check(&format!("{table}{}", limits(5)));
        assert!(!refused.status.success(), "{table}");
        let error = String::from_utf8(refused.stderr).unwrap();
        assert!(error.contains(field), "{error}");
    }
}

#[test]
fn help_lists_serve() {
    let output = Command::new(BINARY).arg("--help").output().unwrap();
    let help = String::from_utf8(output.stdout).unwrap();
    assert!(help.contains("\n  serve "), "{help}");
    assert!(help.contains("/auth_request"), "{help}");
}

/// The admin address, the access log line of a question, and a reload that keeps the counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_access_log_and_a_reload_that_keeps_counts() {
    let admin = crate::process::free_addr();
    let config = |limit: u32| {
        format!(
            "[serve]\nlisten = \"127.0.0.1:0\"\nadmin = \"{admin}\"\naccess_log = \"json\"\n{}",
            limits(limit)
        )
    };
    let (serve, log) = Serve::start_with_stdout(&config(2));
    let (auth_request, forward_auth) = (serve.url("/auth_request"), serve.url("/forward_auth"));
    let ask = || {
        get(
            "127.0.0.1",
            &auth_request,
            &[
                ("x-original-uri", "/%61pi/x?q=1"),
                ("x-forwarded-method", "POST"),
                ("x-forwarded-for", "203.0.113.5"),
                ("x-request-id", "req-1"),
            ],
        )
    };
    let first = ask().await;
    assert_eq!(first.status(), 204);
    assert_eq!(header(&first, "x-request-id"), "req-1");
    let line = log.next_line();
    let entry: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(entry["request_id"], "req-1");
    assert_eq!(entry["client"], "203.0.113.5");
    assert_eq!(entry["method"], "POST");
    assert_eq!(entry["path"], "/api/x");
    assert_eq!(entry["status"], 204);
    assert_eq!(entry["route"], "api");
    assert_eq!(entry["decision"], "allowed");
    assert_eq!(entry["key"].as_str().unwrap().len(), 16);

    let admin_get = |path: &'static str| async move {
        get("127.0.0.1", &format!("http://{admin}{path}"), &[]).await
    };
    assert_eq!(admin_get("/healthz").await.status(), 200);
    assert_eq!(admin_get("/readyz").await.status(), 200);
    let metrics = admin_get("/metrics").await.text().await.unwrap();
    assert!(
        metrics.contains("gateway_requests_total{decision=\"allowed\",status=\"2xx\"} 1"),
        "{metrics}"
    );

    assert_eq!(ask().await.status(), 204);
    assert_eq!(ask().await.status(), 403);
    // Reloaded with a route added: the store is kept, and so is the count.
    std::fs::write(
        &serve.config,
        format!(
            "{}\n[routes.other]\npaths = [\"/other/\"]\npolicy = \"api\"\nkey = {{ global = \"all\" }}\n",
            config(2)
        ),
    )
    .unwrap();
    serve.signal("-HUP");
    // The new route limits once the reload is done.
    let deadline = Instant::now() + Duration::from_secs(10);
    while header(
        &get(
            "127.0.0.1",
            &forward_auth,
            &[("x-forwarded-uri", "/other/")],
        )
        .await,
        "ratelimit",
    ) == "-"
    {
        assert!(Instant::now() < deadline, "the reload did not happen");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let after = ask().await;
    assert_eq!(after.status(), 403);
    assert_eq!(header(&after, "rejection-status"), "429");
}
