//! docs/operations.md's commands for the gateway in production, run as the page writes them
//! but for addresses, files, the binary's path and the process id: secrets from the unit's
//! environment file, a certificate rotated, a drain seen by a load balancer's probe, and the
//! alerting rules checked and unit-tested by Prometheus's promtool against a live scrape.
//! (Lifting a ban is `reset.rs`'s.)
//!
//! The page says `systemctl reload` and `systemctl stop`; the tests send the signals the units
//! send (`ExecReload=/bin/kill -HUP $MAINPID`, and systemd's default SIGTERM on stop), which
//! `units_signal_as_the_tests_do` checks in the units themselves.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::certificates::certificate_in;
use crate::process::{output_of, stdout_of};
use crate::support::{BINARY, Proxy, client, config_with, free_addr, upstream};

fn page() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/operations.md"
    ))
    .unwrap()
}

/// The page's commands of the block holding `marker`, `replacements` made.
fn commands(marker: &str, replacements: &[(&str, String)]) -> Vec<String> {
    testkit::peer::documented_commands(&page(), marker, replacements).unwrap()
}

/// `lines` run as one `sh` script in `dir` (a `cd` or `set -a` holds for the lines after it),
/// stopping at the first that fails; its standard output.
async fn script(dir: &Path, lines: &[String]) -> String {
    let mut shell = Command::new("sh");
    shell
        .args(["-ec", &lines.join("\n")])
        .current_dir(dir)
        .env_remove("REDIS_PASSWORD")
        .env_remove("RATELIMIT_ADMIN_TOKEN");
    stdout_of(shell).await
}

/// The units send what the tests send in `systemctl`'s place: SIGHUP to reload, SIGTERM (no
/// other `KillSignal=`) to stop.
#[test]
fn units_signal_as_the_tests_do() {
    for unit in ["proxy", "serve"] {
        let path = format!(
            "{}/systemd/ratelimit-gateway-{unit}.service",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.lines()
                .any(|line| line == "ExecReload=/bin/kill -HUP $MAINPID"),
            "{path}"
        );
        assert!(!text.contains("KillSignal="), "{path}");
        assert!(
            text.contains(&format!(
                "EnvironmentFile=-/etc/ratelimit-gateway/{unit}.env"
            )),
            "{path}"
        );
    }
}

/// Secrets: the environment file sourced, `check` sees the password and prints it hidden;
/// without the file, it refuses naming the field and the variable, as the page says.
#[tokio::test]
async fn check_with_the_unit_s_environment_hides_the_password() {
    let dir = testkit::TempDir::new("operations-secrets").unwrap();
    let env_file = dir.path().join("proxy.env");
    std::fs::write(
        &env_file,
        "REDIS_PASSWORD=s3cret-pw\nRATELIMIT_ADMIN_TOKEN=token-0123456789abcdef\n",
    )
    .unwrap();
    let file = dir.path().join("proxy.toml");
    std::fs::write(
        &file,
        format!(
            "{}\n[stores.shared]\ntype = \"redis\"\nurl = \"redis://app:${{REDIS_PASSWORD}}@redis:6379/0\"\n",
            config_with(
                "127.0.0.1:3000".parse().unwrap(),
                10,
                "admin = \"127.0.0.1:9000\"\nadmin_token = \"${RATELIMIT_ADMIN_TOKEN}\""
            )
        ),
    )
    .unwrap();
    let lines = commands(
        "set -a; . /etc/ratelimit-gateway/proxy.env; set +a",
        &[
            (
                "/etc/ratelimit-gateway/proxy.env",
                env_file.to_str().unwrap().to_owned(),
            ),
            (
                "/etc/ratelimit-gateway/proxy.toml",
                file.to_str().unwrap().to_owned(),
            ),
            ("ratelimit-gateway check", format!("{BINARY} check")),
        ],
    );
    assert_eq!(lines.len(), 2, "{lines:?}");
    let printed = script(dir.path(), &lines).await;
    assert!(
        printed.contains("shared: redis redis://app:***@redis:6379/0"),
        "{printed}"
    );
    assert!(!printed.contains("s3cret-pw"), "{printed}");
    assert!(!printed.contains("0123456789abcdef"), "{printed}");

    // The check alone, without the environment file.
    let mut shell = Command::new("sh");
    shell
        .args(["-c", &lines[1]])
        .env_remove("REDIS_PASSWORD")
        .env_remove("RATELIMIT_ADMIN_TOKEN");
    let refused = output_of(shell).await;
    assert_eq!(refused.status.code(), Some(1));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("the environment variable") && said.contains("is not set"),
        "{said}"
    );
    let page = page().replace('\n', " ");
    assert!(
        page.contains(
            "(`` `stores.shared.url`: the environment variable REDIS_PASSWORD is not set ``)"
        ),
        "the page quotes the refusal of a file whose only variable is REDIS_PASSWORD"
    );
}

/// The SHA-256 fingerprint line `openssl x509 -noout -fingerprint -sha256` prints for `pem`.
async fn fingerprint(pem: &Path) -> String {
    let mut openssl = Command::new("openssl");
    openssl.args(["x509", "-noout", "-fingerprint", "-sha256", "-in"]);
    openssl.arg(pem);
    stdout_of(openssl).await
}

/// Rotation: new files copied beside the old ones, renamed into place, SIGHUP; what a new
/// connection is served and the file on disk then have one fingerprint, the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_certificate_is_served_after_the_reload() {
    let openssl = Command::new("openssl").arg("version").output();
    assert!(
        openssl.is_ok_and(|output| output.status.success()),
        "openssl is missing (docs/operations.md's command): `apt-get install -y openssl`"
    );
    let upstream = upstream().await;
    let dir = testkit::TempDir::new("operations-rotation").unwrap();
    certificate_in(dir.path());
    let old = fingerprint(&dir.path().join("cert.pem")).await;
    let renewed = testkit::TempDir::new("operations-renewed").unwrap();
    certificate_in(renewed.path());
    std::fs::rename(
        renewed.path().join("cert.pem"),
        renewed.path().join("fullchain.pem"),
    )
    .unwrap();
    std::fs::rename(
        renewed.path().join("key.pem"),
        renewed.path().join("privkey.pem"),
    )
    .unwrap();
    let new = fingerprint(&renewed.path().join("fullchain.pem")).await;
    assert_ne!(old, new);

    let config = config_with(upstream, 100, "").replace(
        "access_log = \"off\"",
        "access_log = \"off\"\ntls = { certificate = \"cert.pem\", private_key = \"key.pem\" }",
    );
    let (proxy, _) = Proxy::start_in(dir.path(), &config);
    let lines = commands(
        "systemctl reload ratelimit-gateway-proxy",
        &[
            (
                "/etc/ratelimit-gateway",
                dir.path().to_str().unwrap().to_owned(),
            ),
            (
                "/etc/letsencrypt/live/api.example.com/",
                format!("{}/", renewed.path().to_str().unwrap()),
            ),
            (
                "systemctl reload ratelimit-gateway-proxy",
                format!("kill -HUP {}", proxy.process.child.id()),
            ),
            ("127.0.0.1:8443", proxy.addr.clone()),
        ],
    );
    assert_eq!(lines.len(), 7, "{lines:?}");
    let reload = lines
        .iter()
        .position(|line| line.starts_with("kill -HUP"))
        .unwrap();
    let (before, after) = lines.split_at(reload + 1);
    // `cd` into the directory, copy, rename, reload; then, once the process says so, look.
    script(dir.path(), before).await;
    proxy.message_containing("configuration reloaded");
    let printed = script(dir.path(), after).await;
    assert_eq!(printed, format!("{new}{new}"), "the old one was {old}");
}

/// Draining: the probe's answer before and after the stop, and a request still served while
/// `/readyz` says 503; the process then exits on its own once the delay has passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_turns_readyz_503_while_requests_are_still_served() {
    let upstream = upstream().await;
    let admin = free_addr();
    let mut proxy = Proxy::start(&config_with(
        upstream,
        100,
        &format!("admin = \"{admin}\"\nconnections = {{ drain_delay = \"3s\" }}"),
    ));
    let lines = commands(
        "systemctl stop --no-block ratelimit-gateway-proxy",
        &[
            ("http://127.0.0.1:9000", format!("http://{admin}")),
            ("http://127.0.0.1:8080", format!("http://{}", proxy.addr)),
            (
                "systemctl stop --no-block ratelimit-gateway-proxy",
                format!("kill -TERM {}", proxy.process.child.id()),
            ),
        ],
    );
    assert_eq!(lines.len(), 4, "{lines:?}");
    let dir = std::env::temp_dir();
    let upstream_answer = client()
        .get(format!("http://{upstream}/"))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16();

    assert_eq!(script(&dir, &lines[..1]).await, "200\n");
    script(&dir, &lines[1..2]).await;
    // The signal is handled as the process reads it: the probe that follows the message.
    proxy.message_containing("shutting down: /readyz answers 503");
    assert_eq!(
        script(&dir, &lines[2..]).await,
        format!("503\n{upstream_answer}\n")
    );
    proxy
        .exits_successfully_within(Duration::from_secs(20))
        .await;
}

/// Alerts: the rules load, their unit tests pass, a live scrape passes promtool's lint, and
/// every metric the rules read is in that scrape from the start (a rule on a metric the
/// gateway does not export would never fire).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_alerting_rules_pass_promtool_and_read_exported_metrics() {
    let promtool = testkit::peer::find("promtool").unwrap();
    let upstream = upstream().await;
    let admin = free_addr();
    let redis = testkit::RedisServer::start();
    let _proxy = Proxy::start(&format!(
        "{}\n[stores.shared]\ntype = \"redis\"\nurl = \"{}\"\n",
        config_with(upstream, 100, &format!("admin = \"{admin}\"")),
        redis.url()
    ));
    let lines = commands(
        "promtool check rules gateway/prometheus/alerts.yml",
        &[
            ("http://127.0.0.1:9000", format!("http://{admin}")),
            ("promtool", promtool.to_str().unwrap().to_owned()),
        ],
    );
    assert_eq!(lines.len(), 3, "{lines:?}");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let printed = script(&root, &lines).await;
    assert!(printed.contains("SUCCESS: 7 rules found"), "{printed}");

    let scrape = client()
        .get(format!("http://{admin}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let exported: Vec<&str> = scrape
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|line| line.split(' ').next())
        .collect();
    let rules = std::fs::read_to_string(root.join("gateway/prometheus/alerts.yml")).unwrap();
    let mut read = 0;
    for expr in rules
        .lines()
        .filter(|line| line.contains("rate(") || line.contains("increase("))
    {
        // Envoy's counter is exported by `serve` with `[serve.envoy]` only (the envoy tests'
        // `an_envoy_service_exports_its_failure_count_from_the_start`).
        for name in expr
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|word| word.starts_with("ratelimit_") || word.starts_with("gateway_"))
            .filter(|word| *word != "ratelimit_service_should_rate_limit_error")
        {
            read += 1;
            assert!(
                exported.contains(&name),
                "the rules read {name}, which the scrape lacks:\n{scrape}"
            );
        }
    }
    assert!(read >= 7, "{read} metric names found in the rules");
    assert!(rules.contains("rate(ratelimit_service_should_rate_limit_error[5m])"));
}
