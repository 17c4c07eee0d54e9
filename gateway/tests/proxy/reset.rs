//! Lifting a ban: `POST /reset` on the admin address and `ratelimit-gateway reset`, across two
//! proxies sharing one Redis (each remembering the denial), and in the one process of an
//! in-process store; who may reset.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::process::{output_of, stdout_of};
use crate::support::{BINARY, Proxy, client, config_with, free_addr, get_with, upstream};

const TOKEN: &str = "test-token-0123456789abcdef";

/// `ratelimit-gateway <args>`, run to its end.
async fn gateway(args: &[&str]) -> Output {
    let mut command = Command::new(BINARY);
    command.args(args);
    output_of(command).await
}

async fn status(proxy: &Proxy, key: &str) -> u16 {
    get_with(&proxy.url("/api/echo"), &[("x-api-key", key)])
        .await
        .status()
        .as_u16()
}

/// Asks until `key` is admitted: another instance forgets its remembered denial once it hears
/// the reset on Redis's channel, a moment after the reset. Denied asks are answered from that
/// memory and count nothing.
async fn admitted_soon(proxy: &Proxy, key: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while status(proxy, key).await != 200 {
        assert!(
            Instant::now() < deadline,
            "{key} still refused 10 s after the reset"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn post_reset(admin: &str, token: Option<&str>, body: &str) -> (u16, String) {
    let mut request = client()
        .post(format!("http://{admin}/reset"))
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// The commands of docs/operations.md's "Lifting a ban in the gateway" (its first `sh` block):
/// one through the admin address `admin`, one from the command line with `file`.
fn walkthrough(admin: std::net::SocketAddr, file: &std::path::Path) -> Vec<String> {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/operations.md"
    ))
    .unwrap();
    testkit::peer::documented_commands(
        &page,
        "ratelimit-gateway reset /etc/ratelimit-gateway/proxy.toml",
        &[
            ("http://127.0.0.1:9000", format!("http://{admin}")),
            (
                "/etc/ratelimit-gateway/proxy.toml",
                file.to_str().unwrap().to_owned(),
            ),
            ("ratelimit-gateway reset", format!("{BINARY} reset")),
        ],
    )
    .unwrap()
}

/// A key locked out on both proxies (each remembers the denial) is admitted on both after one
/// reset through one proxy's admin address, and again after a reset from the command line:
/// docs/operations.md's commands, run as written but for the address, the file and the
/// binary's path. A wrong token resets nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_is_lifted_on_every_proxy_sharing_redis() {
    let curl = Command::new("curl").arg("--version").output();
    assert!(
        curl.is_ok_and(|output| output.status.success()),
        "curl is missing (docs/operations.md's command): `apt-get install -y curl`"
    );
    let upstream = upstream().await;
    let redis = testkit::RedisServer::start();
    let config = |admin: std::net::SocketAddr| {
        format!(
            "{}\n[stores.shared]\ntype = \"redis\"\nurl = \"{}\"\n",
            config_with(
                upstream,
                2,
                &format!("admin = \"{admin}\"\nadmin_token = \"{TOKEN}\"")
            ),
            redis.url()
        )
    };
    let admin = free_addr();
    let first = Proxy::start(&config(admin));
    let second = Proxy::start(&config(free_addr()));
    let commands = walkthrough(admin, &first.config);
    assert_eq!(commands.len(), 2, "{commands:?}");
    let key = "k-123";
    let locked_out = async || {
        // Three asks each use up the limit of 2, whatever the other proxy used: each ends
        // refused, and remembers it.
        for proxy in [&first, &second] {
            let mut answers = Vec::new();
            for _ in 0..3 {
                answers.push(status(proxy, key).await);
            }
            assert_eq!(answers.last(), Some(&429), "{answers:?}");
        }
    };
    locked_out().await;
    assert_eq!(status(&first, "other").await, 200);

    let body = r#"{"route": "api", "key": "k-123"}"#;
    for wrong in [None, Some("not-the-token-0123456789")] {
        let (code, text) = post_reset(&admin.to_string(), wrong, body).await;
        assert_eq!(code, 401, "{text}");
    }
    assert_eq!(status(&first, key).await, 429);

    for command in commands {
        let mut shell = Command::new("sh");
        shell
            .args(["-c", &command])
            .env("RATELIMIT_ADMIN_TOKEN", TOKEN);
        assert_eq!(
            stdout_of(shell).await,
            "reset key \"k-123\" of route \"api\"\n",
            "{command}"
        );
        admitted_soon(&first, key).await;
        admitted_soon(&second, key).await;
        // One reset, not a switch: the quota counts again, in both.
        locked_out().await;
    }
    // Another key was not reset.
    assert_eq!(status(&first, "other").await, 200);
    assert_eq!(status(&second, "other").await, 429);
}

/// With the in-process store, the admin address resets in its process; the command says it
/// cannot reach it and where to go instead. What is not a reset is refused, by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_process_store_is_reset_through_the_admin_address() {
    let upstream = upstream().await;
    let admin = free_addr();
    let proxy = Proxy::start(&config_with(upstream, 1, &format!("admin = \"{admin}\"")));
    assert_eq!(status(&proxy, "k").await, 200);
    assert_eq!(status(&proxy, "k").await, 429);

    let config_path = proxy.config.to_str().unwrap();
    let output = gateway(&["reset", config_path, "--route", "api", "--key", "k"]).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("in-process store") && stderr.contains("POST /reset"),
        "{stderr}"
    );
    assert_eq!(status(&proxy, "k").await, 429);

    let admin = admin.to_string();
    // On loopback without a token, whoever reaches the address may reset.
    let (code, text) = post_reset(&admin, None, r#"{"route": "api", "key": "k"}"#).await;
    assert_eq!(code, 200, "{text}");
    assert_eq!(status(&proxy, "k").await, 200);

    for (body, expected) in [
        (r#"{"route": "web", "key": "k"}"#, 404),
        (r#"{"domain": "rl", "descriptor": []}"#, 404),
        (r#"{"route": "api"}"#, 400),
        ("route=api&key=k", 400),
    ] {
        let (code, text) = post_reset(&admin, None, body).await;
        assert_eq!(code, expected, "{body}: {text}");
    }
}

/// Any method but the path's own is answered 405 with `Allow`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_methods_on_admin_paths_are_answered_405_with_allow() {
    let upstream = upstream().await;
    let admin = free_addr();
    let _proxy = Proxy::start(&config_with(upstream, 1, &format!("admin = \"{admin}\"")));
    for (method, path, allow) in [
        ("POST", "/metrics", "GET, HEAD"),
        ("DELETE", "/readyz", "GET, HEAD"),
        ("PUT", "/healthz", "GET, HEAD"),
        ("GET", "/reset", "POST"),
    ] {
        let response = client()
            .request(method.parse().unwrap(), format!("http://{admin}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 405, "{method} {path}");
        assert_eq!(response.headers()["allow"], allow, "{method} {path}");
    }
}

/// An admin address beyond loopback without a token does not start, naming the field; with
/// one, the probes stay open and a reset needs it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_address_beyond_loopback_needs_a_token() {
    let upstream = upstream().await;
    let port = free_addr().port();
    let open = config_with(upstream, 1, &format!("admin = \"0.0.0.0:{port}\""));
    let file = crate::support::TempFile::new("toml", &open);
    let output = gateway(&["proxy", file.0.to_str().unwrap()]).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("`proxy.admin_token`: required because `proxy.admin` (0.0.0.0:"),
        "{stderr}"
    );

    let guarded = config_with(
        upstream,
        1,
        &format!("admin = \"0.0.0.0:{port}\"\nadmin_token = \"{TOKEN}\""),
    );
    let _proxy = Proxy::start(&guarded);
    let admin = format!("127.0.0.1:{port}");
    let healthz = client()
        .get(format!("http://{admin}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(healthz.status(), 200);
    let body = r#"{"route": "api", "key": "k"}"#;
    let (code, _) = post_reset(&admin, None, body).await;
    assert_eq!(code, 401);
    let (code, text) = post_reset(&admin, Some(TOKEN), body).await;
    assert_eq!(code, 200, "{text}");
}
