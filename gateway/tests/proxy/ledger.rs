//! A region's proxy before and after its ledger is declared from the command line
//! (`ratelimit-gateway ledger`, docs/regions.md's "Operating the ledger"): 503s, `/readyz` and
//! the log saying "ledger not declared", then 200s; what `ledger show` prints. And a ledger on
//! a Redis Cluster of three primaries, declared and spent the same way.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::process::{output_of, stdout_of};
use crate::support::{
    BINARY, Proxy, TempFile, free_addr, get_with, keys_per_primary, proxy_table, readyz,
    readyz_until, toml_strings, upstream,
};

/// A proxy in region `eu-west`, its Redis at `region`, spending a ledger at `ledger`.
fn config(
    upstream: std::net::SocketAddr,
    admin: std::net::SocketAddr,
    region: &str,
    ledger: &str,
    skew: &str,
) -> String {
    config_with(
        upstream,
        admin,
        region,
        &format!("url = \"{ledger}\""),
        skew,
        1000,
    )
}

/// [`config`], the ledger's table holding `ledger`, the policy's quota `limit` a second.
fn config_with(
    upstream: std::net::SocketAddr,
    admin: std::net::SocketAddr,
    region: &str,
    ledger: &str,
    skew: &str,
    limit: u32,
) -> String {
    let proxy = proxy_table(upstream, &format!("admin = \"{admin}\""));
    format!(
        r#"{proxy}
        [stores.eu]
        type = "redis"
        url = "{region}"
        region = {{ name = "eu-west", ledger = {{ {ledger} }}, max_skew = "{skew}" }}

        [policies.api]
        global = true
        rules = [{{ name = "api", algorithm = "fixed_window", limit = {limit}, period = "1s" }}]

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

/// A region's proxy whose ledger is a Redis Cluster of three primaries (`ledger = { nodes =
/// [...] }`): declared from the command line (a birth in every hash slot), then granting each
/// of many keys its quota and never more, the keys' ledger windows spread over the primaries,
/// and `ledger show` reading them from every primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_on_a_redis_cluster_is_declared_and_spent_from_the_binary() {
    const LIMIT: u64 = 5;
    const KEYS: usize = 12;
    let upstream = upstream().await;
    let region = testkit::RedisServer::start();
    let cluster = testkit::cluster::RedisCluster::start();
    let nodes = toml_strings(&cluster.urls());
    let admin = free_addr();
    let proxy = Proxy::start(&config_with(
        upstream,
        admin,
        &region.url(),
        &format!("nodes = {nodes}"),
        "20ms",
        LIMIT as u32,
    ));
    readyz_until(admin, 503).await;

    let mut declare = Command::new(BINARY);
    declare.args(["ledger", "declare", proxy.config.to_str().unwrap()]);
    let declared = stdout_of(declare).await;
    assert!(
        declared.starts_with(&format!(
            "ledger Redis Cluster {} declared: epoch 20",
            cluster.urls_joined()
        )),
        "{declared}"
    );
    let primaries = cluster.primaries();
    for &primary in &primaries {
        let births = cluster.node(primary).cli(&["DBSIZE"]);
        assert_eq!(births, cluster.slot_count(primary).to_string());
    }
    readyz_until(admin, 200).await;

    // Every key asked well past its quota, for a few windows: each is granted, never more
    // than its quota a window (counted over the windows the requests were sent in).
    let api_url = proxy.url("/api/echo");
    let key = |index: usize| format!("customer-{index}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while get_with(&api_url, &[("x-api-key", &key(0))]).await.status() != 200 {
        assert!(Instant::now() < deadline, "never granted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let first = std::time::SystemTime::now();
    let mut admitted = [0_u64; KEYS];
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        let asks = (0..KEYS).map(|index| {
            let url = api_url.clone();
            async move {
                let status = get_with(&url, &[("x-api-key", &key(index))]).await.status();
                (index, status.as_u16())
            }
        });
        for (index, status) in futures_util::future::join_all(asks).await {
            assert!(status == 200 || status == 429, "{status}");
            admitted[index] += u64::from(status == 200);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let seconds =
        |at: std::time::SystemTime| at.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let windows = seconds(std::time::SystemTime::now()) - seconds(first) + 1;
    eprintln!("admitted per key over {windows} windows: {admitted:?}");
    for (index, &count) in admitted.iter().enumerate() {
        // Key 0's first admission above is in the first window.
        let bound = LIMIT * windows - u64::from(index == 0);
        assert!(
            count <= bound,
            "key {index}: {count} > {bound}: {admitted:?}"
        );
        assert!(count >= LIMIT, "key {index} granted little: {admitted:?}");
    }

    // The keys' windows on the ledger, per primary: on every one.
    let spread = keys_per_primary(&cluster, "api");
    eprintln!("keys per primary: {spread:?}");
    assert_eq!(spread.iter().sum::<usize>(), KEYS, "{spread:?}");
    assert!(spread.iter().all(|&keys| keys > 0), "{spread:?}");

    let mut show = Command::new(BINARY);
    show.args(["ledger", "show", proxy.config.to_str().unwrap()]);
    let shown = stdout_of(show).await;
    assert!(shown.starts_with("ledger Redis Cluster "), "{shown}");
    assert!(
        shown
            .lines()
            .next()
            .unwrap()
            .contains(": declared, epoch 20"),
        "{shown}"
    );
    for index in 0..KEYS {
        assert!(
            shown.contains(&format!(" {{{}}} window ", key(index))),
            "{shown}"
        );
    }
}
