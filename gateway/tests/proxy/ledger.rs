//! A region's proxy before and after its ledger is declared from the command line
//! (`ratelimit-gateway ledger`, docs/regions.md's "Operating the ledger"): 503s, `/readyz` and
//! the log saying "ledger not declared", then 200s; what `ledger show` prints.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::process::{output_of, stdout_of};
use crate::support::{BINARY, Proxy, TempFile, client, free_addr, get_with, proxy_table, upstream};

/// A proxy in region `eu-west`, its Redis at `region`, spending a ledger at `ledger`.
fn config(
    upstream: std::net::SocketAddr,
    admin: std::net::SocketAddr,
    region: &str,
    ledger: &str,
    skew: &str,
) -> String {
    let proxy = proxy_table(upstream, &format!("admin = \"{admin}\""));
    format!(
        r#"{proxy}
        [stores.eu]
        type = "redis"
        url = "{region}"
        region = {{ name = "eu-west", ledger = {{ url = "{ledger}" }}, max_skew = "{skew}" }}

        [policies.api]
        global = true
        rules = [{{ name = "api", algorithm = "fixed_window", limit = 1000, period = "1s" }}]

        [routes.api]
        paths = ["/api/"]
        policy = "api"
        key = {{ header = "x-api-key" }}
        "#
    )
}

/// The commands of docs/regions.md's "Operating the ledger" (its `sh` block), each a line after
/// a comment.
fn walkthrough() -> Vec<String> {
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/regions.md"))
        .unwrap();
    let section = &page[page.find("## Operating the ledger").unwrap()..];
    let block = &section[section.find("```sh\n").unwrap() + 6..];
    let block = &block[..block.find("```").unwrap()];
    block
        .lines()
        .filter(|line| !line.trim_start().starts_with('#') && !line.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

async fn readyz(admin: std::net::SocketAddr) -> (u16, String) {
    let response = client()
        .get(format!("http://{admin}/readyz"))
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// Asks `/readyz` until it answers `status`, for at most 10 s; its body.
async fn readyz_until(admin: std::net::SocketAddr, status: u16) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (code, body) = readyz(admin).await;
        if code == status {
            return body;
        }
        assert!(Instant::now() < deadline, "/readyz still {code}: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_refuses_with_503_until_its_ledger_is_declared_from_the_command_line() {
    let commands = walkthrough();
    assert_eq!(commands.len(), 3, "{commands:?}");
    let upstream = upstream().await;
    let (region, mut ledger) = (testkit::RedisServer::start(), testkit::RedisServer::start());
    let admin = free_addr();
    let proxy = Proxy::start(&config(
        upstream,
        admin,
        &region.url(),
        &ledger.url(),
        "20ms",
    ));
    let api_url = proxy.url("/api/echo");
    let api = || get_with(&api_url, &[("x-api-key", "customer-1")]);

    // Not declared: /readyz, the log and the requests say so; no quota message.
    let body = readyz_until(admin, 503).await;
    assert!(body.contains("ledger not declared"), "{body}");
    let warning = proxy.said("ledger not declared");
    assert!(
        warning.contains("WARN") && warning.contains("eu-west"),
        "{warning}"
    );
    let refused = api().await;
    assert_eq!(refused.status().as_u16(), 503);
    assert!(refused.headers().contains_key("retry-after"));
    let problem = refused.text().await.unwrap();
    assert!(!problem.contains("quota"), "{problem}");

    let run = async |command: &str| {
        let command = command
            .replace(
                "/etc/ratelimit-gateway/region.toml",
                proxy.config.to_str().unwrap(),
            )
            .replace("ratelimit-gateway ledger", &format!("{BINARY} ledger"));
        let mut shell = Command::new("sh");
        shell.args(["-c", &command]);
        stdout_of(shell).await
    };
    let declared = run(&commands[0]).await;
    let url = ledger.url();
    assert!(
        declared.starts_with(&format!("ledger {url} declared: epoch 20"))
            && declared.ends_with(", max_skew 20ms\n"),
        "{declared}"
    );
    readyz_until(admin, 200).await;
    // The fenced windows (up to two periods) pass, then the region is granted units.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = api().await.status().as_u16();
        if status == 200 {
            break;
        }
        assert_eq!(
            status, 429,
            "a declared ledger's fenced window is a quota's refusal"
        );
        assert!(
            Instant::now() < deadline,
            "still refused 10 s after the declaration"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Declared again: nothing changes.
    let again = run(&commands[0]).await;
    assert!(
        again.starts_with(&format!("ledger {url} already declared: epoch 20")),
        "{again}"
    );
    assert!(again.ends_with("; left as it is\n"), "{again}");

    let shown = run(&commands[1]).await;
    let mut lines = shown.lines();
    let head = lines.next().unwrap();
    assert!(
        head.starts_with(&format!("ledger {url}: declared, epoch 20")),
        "{shown}"
    );
    let holdings: Vec<&str> = lines.collect();
    assert!(!holdings.is_empty(), "{shown}");
    for line in &holdings {
        assert!(line.starts_with("api:"), "{shown}");
        assert!(line.contains(" {customer-1} window "), "{shown}");
        assert!(line.contains("; eu-west holds "), "{shown}");
        assert!(line.contains(" a window)"), "{shown}");
    }
    let other = stdout_of({
        let mut command = Command::new(BINARY);
        command.args([
            "ledger",
            "show",
            proxy.config.to_str().unwrap(),
            "--key",
            "nobody",
        ]);
        command
    })
    .await;
    assert!(other.ends_with("no key holds units\n"), "{other}");

    // Another max_skew conflicts: refused, the ledger left as it is.
    let conflicting = TempFile::new(
        "toml",
        &config(upstream, free_addr(), &region.url(), &ledger.url(), "50ms"),
    );
    let mut command = Command::new(BINARY);
    command.args(["ledger", "declare", conflicting.0.to_str().unwrap()]);
    let output = output_of(command).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("declared with max_skew 20000 us"),
        "{stderr}"
    );

    let anew = run(&commands[2]).await;
    assert!(
        anew.starts_with(&format!("ledger {url} declared anew: epoch 20")),
        "{anew}"
    );
    assert_eq!(readyz(admin).await.0, 200);

    // The ledger's Redis restarts empty: the region finds it not declared again, and says so
    // while it asks for the next window's units.
    tokio::task::block_in_place(|| ledger.restart());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let _ = api().await;
        let (code, body) = readyz(admin).await;
        if code == 503 {
            assert!(body.contains("ledger not declared"), "{body}");
            break;
        }
        assert!(Instant::now() < deadline, "/readyz still {code}: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The region's warning, not a refused request's (which says it too).
    while !proxy
        .message_containing("ledger not declared")
        .contains("eu-west")
    {}
}
