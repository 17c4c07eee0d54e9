//! The configuration files README and the docs show run as documented.

use std::path::PathBuf;
use std::process::Command;

use crate::support::{BINARY, Proxy, TempFile, client, get_with, upstream};

/// A file of the repository, from the gateway crate's directory.
fn repository_file(path: &str) -> String {
    std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// README's proxy configuration (its section's TOML block) loads and runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_configuration_runs() {
    let upstream = upstream().await;
    let readme = repository_file("../README.md");
    let section = readme
        .split("## In front of a service in any language")
        .nth(1)
        .expect("README's proxy section");
    let block = section
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a TOML block in README's proxy section");
    let config = block
        .replace(r#"listen = "127.0.0.1:8080""#, r#"listen = "127.0.0.1:0""#)
        .replace(
            r#"upstream = "http://127.0.0.1:3000""#,
            &format!(r#"upstream = "http://{upstream}""#),
        );
    assert_ne!(config, block, "README's listen and upstream lines changed");
    let proxy = Proxy::start(&config);
    let response = get_with(&proxy.url("/api/echo"), &[("x-api-key", "readme")]).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["ratelimit-policy"],
        "\"api-burst\";q=20;w=2, \"api-hourly\";q=5000;w=3600"
    );
}

/// `gateway/examples/proxy.toml`, the file README and `gateway/docs/proxy.md` show, runs as documented.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_configuration_runs() {
    let upstream = upstream().await;
    let example = repository_file("examples/proxy.toml");
    let config = example
        .replace(r#"listen = "127.0.0.1:8080""#, r#"listen = "127.0.0.1:0""#)
        .replace(
            r#"upstream = "http://127.0.0.1:3000""#,
            &format!(r#"upstream = "http://{upstream}""#),
        );
    assert_ne!(
        config, example,
        "the example's listen and upstream lines changed"
    );
    let proxy = Proxy::start(&config);
    // The API: a GCRA burst of 20 and an hourly window of 5000 per key.
    let response = get_with(&proxy.url("/api/echo"), &[("x-api-key", "ex")]).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["ratelimit-policy"],
        "\"api-burst\";q=20;w=2, \"api-hourly\";q=5000;w=3600"
    );
    // Login: 5 a minute per client address, then 429.
    for _ in 0..5 {
        let response = client().get(proxy.url("/login")).send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.text().await.unwrap(), "path /login");
    }
    let refused = client().get(proxy.url("/login")).send().await.unwrap();
    assert_eq!(refused.status(), 429);
    assert_eq!(
        refused.headers()["content-type"],
        "application/problem+json"
    );
}

/// `check` on a good file: exit 0 and what would run. The example file's own listen and upstream
/// addresses are fine: nothing is bound nor connected.
#[test]
fn check_says_what_a_file_would_run() {
    let output = Command::new(BINARY)
        .args(["check", "examples/proxy.toml"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // One worker per core unless the file says otherwise.
    let cores = std::thread::available_parallelism().unwrap();
    let connections = format!(
        "  connections: at most 10000 on {cores} workers, header timeout 10s, idle timeout 1m, drain delay 5s, drain timeout 30s"
    );
    for line in [
        "examples/proxy.toml: the configuration is valid",
        "proxy: listen http://127.0.0.1:8080, upstream http://127.0.0.1:3000, upstream timeout 1m",
        &connections,
        "  access log: text",
        "  websockets: at most 2 open per key, key client address",
        "stores: none named: counts are kept in process (one instance)",
        // In the file's words, with every setting the store runs.
        "  api: api-burst: gcra, limit 10 per 1s, burst 20; api-hourly: fixed_window, limit 5000 per 1h",
        "  login: login: sliding_window, limit 5 per 1m, sub_intervals 12",
        "  api: paths [\"/api/\"], policy api, key header x-api-key, or client address",
        "  reports: paths [\"/reports/\"], at most 4 in flight per key, key client address",
        "paths (a request meets every route of its path, in this order):",
        "  /api/: api",
        "  /login: login",
        "concurrency paths (a request holds a slot of each):",
        "  /reports/: reports",
    ] {
        assert!(
            stdout.lines().any(|l| l == line),
            "no line {line:?} in:\n{stdout}"
        );
    }
}

/// `check` on a file whose store is a region's and whose policy is global: the proxy builds
/// them from the library's configuration, as any other.
#[test]
fn check_says_which_store_is_a_region_s_and_which_policy_global() {
    let file = TempFile::new(
        "toml",
        "[proxy]\nlisten = \"127.0.0.1:8080\"\nupstream = \"http://127.0.0.1:3000\"\n\
         [stores.eu]\ntype = \"redis\"\nurl = \"redis://127.0.0.1:6379\"\n\
         region = { name = \"eu-west\", ledger = { url = \"redis://:s3cret@ledger:6379\" } }\n\
         [policies.api]\nglobal = true\n\
         rules = [{ name = \"api\", algorithm = \"fixed_window\", limit = 600, period = \"1min\" }]\n\
         [policies.rate]\nglobal = true\n\
         rules = [{ name = \"rate\", algorithm = \"gcra\", limit = 600, period = \"1min\", burst = 20 }]\n\
         [routes.rate]\npaths = [\"/rate/\"]\npolicy = \"rate\"\nkey = { header = \"x-api-key\" }\n\
         [routes.api]\npaths = [\"/api/\"]\npolicy = \"api\"\nkey = { header = \"x-api-key\" }\n",
    );
    let output = Command::new(BINARY)
        .arg("check")
        .arg(&file.0)
        .output()
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for line in [
        "  eu: redis redis://127.0.0.1:6379, region eu-west (ledger redis://:***@ledger:6379, partition refuse, max_skew the default)",
        "  api: api: fixed_window, limit 600 per 1m, global (one quota across regions, at most 600 a window; fails closed whatever the failure_mode)",
        // A bucket is allotted in windows that refill at most half its burst: 60 of a second.
        "  rate: rate: gcra, limit 600 per 1m, burst 20, global (one quota across regions, allotted in 60 windows of 1s: at most 20 + 10 × m in any m consecutive; fails closed whatever the failure_mode)",
    ] {
        assert!(
            stdout.lines().any(|l| l == line),
            "no line {line:?} in:\n{stdout}"
        );
    }
    // Failing open would admit past the world's quota: refused.
    let text = std::fs::read_to_string(&file.0).unwrap();
    let open = TempFile::new("toml", &format!("{text}failure_mode = \"open\"\n"));
    let output = Command::new(BINARY)
        .arg("check")
        .arg(&open.0)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "`routes.api.failure_mode`: is \"open\", but the route's policy \"api\" is global"
        ),
        "{stderr}"
    );
}

/// `check` on bad files: exit 1, and the mistake named by its line or its field.
#[test]
fn check_names_the_mistake() {
    let cases = [
        (
            "toml",
            "[proxy]\nlisten = \"127.0.0.1:8080\"\nupstream = \"http://127.0.0.1:3000\"\nupstream_timeout = \"soon\"\n",
            ":4:20: proxy.upstream_timeout: invalid duration \"soon\"",
        ),
        (
            "yaml",
            "proxy:\n  listen: 127.0.0.1:8080\n  upstrem: http://127.0.0.1:3000\n",
            ":3:3: proxy: unknown field `upstrem`",
        ),
        (
            "toml",
            "[proxy]\nlisten = \"127.0.0.1:8080\"\nupstream = \"http://127.0.0.1:3000\"\nconnections = { max = 0 }\n",
            ": `proxy.connections.max`: must be at least 1",
        ),
        (
            "toml",
            "[routes.api]\npaths = [\"/%61pi/\"]\npolicy = \"api\"\nkey = { global = \"all\" }\n",
            ": `routes.api.paths[0]`: \"/%61pi/\" is not a normalised path, and requests are matched normalised: write \"/api/\"",
        ),
        (
            "toml",
            "[routes.api]\npaths = [\"/api/\"]\npolicy = \"ap1\"\nkey = { global = \"all\" }\n",
            ": `routes.api.policy`: no policy named \"ap1\" (there are none)",
        ),
        // A route without paths would limit nothing in the gateway.
        (
            "toml",
            "[routes.api]\npolicy = \"api\"\nkey = { global = \"all\" }\n",
            ": `routes.api.paths`: missing: the gateway limits a request by the routes of its path",
        ),
        (
            "toml",
            "[concurrency.reports]\nmax_in_flight = 2\nkey = { global = \"all\" }\n",
            ": `concurrency.reports.paths`: missing",
        ),
    ];
    for (extension, text, mistake) in cases {
        let file = TempFile::new(extension, text);
        let output = Command::new(BINARY)
            .arg("check")
            .arg(&file.0)
            .output()
            .unwrap();
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert_eq!(output.status.code(), Some(1), "{text}: {stderr}");
        let expected = format!("ratelimit-gateway: {}{mistake}", file.0.display());
        assert!(
            stderr.starts_with(&expected),
            "expected {expected:?}, got {stderr:?}"
        );
        assert!(output.stdout.is_empty());
    }
}

/// `--version` and `--help` say what the program is.
#[test]
fn version_and_help() {
    let version = Command::new(BINARY).arg("--version").output().unwrap();
    let version = String::from_utf8(version.stdout).unwrap();
    // The version, the commit built (a checkout's: these tests run in one) and the features.
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let commit = String::from_utf8(commit.stdout).unwrap();
    assert_eq!(
        version,
        format!(
            "ratelimit-gateway {} (commit {}; redis, cluster, sentinel, regions, tls, toml, \
             yaml, json, envoy)\n",
            env!("CARGO_PKG_VERSION"),
            commit.trim()
        )
    );
    // The list is the library's features this crate turns on (`config` aside: every file
    // needs it; `redis` by default), so that one turned on later is named too.
    let manifest = include_str!("../../Cargo.toml");
    let line = manifest
        .lines()
        .find(|line| line.starts_with("tower-redis-ratelimit = "))
        .unwrap();
    let features = &line[line.find("features = [").unwrap() + 12..];
    let features: Vec<&str> = features[..features.find(']').unwrap()]
        .split(',')
        .map(|feature| feature.trim().trim_matches('"'))
        .filter(|feature| *feature != "config")
        .collect();
    let mut named: Vec<&str> = version
        .trim_end()
        .trim_end_matches(')')
        .rsplit("; ")
        .next()
        .unwrap()
        .split(", ")
        .filter(|feature| *feature != "envoy")
        .collect();
    let mut built = features;
    built.push("redis");
    named.sort_unstable();
    built.sort_unstable();
    assert_eq!(named, built, "{version}");
    let help = Command::new(BINARY).arg("--help").output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    for command in ["proxy", "check", "ledger"] {
        assert!(
            help.lines()
                .any(|line| line.trim_start().starts_with(command)),
            "{help}"
        );
    }
}

/// Secrets from the environment: `${NAME}` and `${NAME:-default}` in the file's strings; an
/// unset one is refused by its field; `check` shows every URL without its password.
#[test]
fn values_come_from_the_environment_and_passwords_are_never_shown() {
    let text = "[proxy]\nlisten = \"127.0.0.1:8080\"\n\
                upstream = \"http://app:${TRR_TEST_UPSTREAM_PASSWORD}@${TRR_TEST_UNSET_HOST:-127.0.0.1}:3000\"\n\
                [stores.shared]\ntype = \"redis\"\n\
                url = \"redis://app:${TRR_TEST_REDIS_PASSWORD}@127.0.0.1:6379/0\"\n\
                [policies.api]\n\
                rules = [{ name = \"api\", algorithm = \"gcra\", limit = 1, period = \"1s\" }]\n";
    let file = TempFile::new("toml", text);
    let run = |redis_password: Option<&str>| {
        let mut command = Command::new(BINARY);
        command
            .arg("check")
            .arg(&file.0)
            .env("TRR_TEST_UPSTREAM_PASSWORD", "up-s3cret")
            .env_remove("TRR_TEST_UNSET_HOST");
        match redis_password {
            Some(password) => command.env("TRR_TEST_REDIS_PASSWORD", password),
            None => command.env_remove("TRR_TEST_REDIS_PASSWORD"),
        };
        command.output().unwrap()
    };
    let output = run(Some("s3cret"));
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(output.status.success(), "{stdout}");
    assert!(!stdout.contains("s3cret"), "{stdout}");
    assert!(
        stdout.contains("upstream http://app:***@127.0.0.1:3000"),
        "{stdout}"
    );
    assert!(
        stdout.contains("redis redis://app:***@127.0.0.1:6379/0"),
        "{stdout}"
    );

    let refused = run(None);
    let stderr = String::from_utf8(refused.stderr).unwrap();
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "`stores.shared.url`: the environment variable TRR_TEST_REDIS_PASSWORD is not set"
        ),
        "{stderr}"
    );
}
