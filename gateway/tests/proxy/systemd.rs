//! The systemd units an operator installs (`gateway/systemd/`): systemd reads them without a
//! complaint, and the pages that show them show them as they are.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::BINARY;

/// Each unit, and the page that shows it.
const UNITS: [(&str, &str); 2] = [
    ("ratelimit-gateway-proxy.service", "gateway/docs/proxy.md"),
    (
        "ratelimit-gateway-serve.service",
        "gateway/docs/gateways.md",
    ),
];

/// Where the units install the binary, as `cargo install` leaves it.
const INSTALLED: &str = "/usr/local/bin/ratelimit-gateway";

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

fn unit(name: &str) -> String {
    std::fs::read_to_string(repository().join("gateway/systemd").join(name)).unwrap()
}

/// The ```ini block of `page` whose first line names the unit's installed path.
fn shown(page: &str, name: &str) -> String {
    let text = std::fs::read_to_string(repository().join(page)).unwrap();
    let first = format!("```ini\n# /etc/systemd/system/{name}\n");
    let start = text
        .find(&first)
        .unwrap_or_else(|| panic!("{page} shows no {name} (a ```ini block opening with its path)"));
    let block = &text[start + "```ini\n".len()..];
    block[..block.find("```\n").unwrap()].to_owned()
}

#[test]
fn the_pages_show_the_units_as_they_are() {
    for (name, page) in UNITS {
        assert_eq!(
            shown(page, name),
            unit(name),
            "{page} must show gateway/systemd/{name} as it is"
        );
    }
}

/// `systemd-analyze verify` checks every key and that each command is an executable file. The
/// units name the binary where it is installed, which a test machine does not have: each is
/// verified as a copy whose commands name the binary cargo built for these tests, the one
/// change. Warnings (an unknown key is only a warning) fail the test as errors do.
#[test]
fn systemd_verifies_the_units() {
    let found = Command::new("systemd-analyze").arg("--version").output();
    assert!(
        found.is_ok_and(|output| output.status.success()),
        "systemd-analyze is missing: install systemd (`apt-get install -y systemd` on Debian \
         and Ubuntu; .ci/run does)"
    );
    let dir = testkit::TempDir::new("systemd-units").unwrap();
    for (name, _) in UNITS {
        let text = unit(name);
        assert!(text.contains(INSTALLED), "{name} runs {INSTALLED}");
        let copy = dir.path().join(name);
        std::fs::write(&copy, text.replace(INSTALLED, BINARY)).unwrap();
        let output = Command::new("systemd-analyze")
            .arg("verify")
            .arg(&copy)
            .output()
            .unwrap();
        let complaints = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success() && complaints.trim().is_empty(),
            "{name}: {}\n{complaints}",
            output.status
        );
    }
}
