//! The commit the binary is built from, for `--version`: `git rev-parse` in a checkout of the
//! repository, `unknown` elsewhere (a packaged crate, an archive, a vendored copy inside another
//! repository).

use std::path::Path;
use std::process::Command;

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".to_owned());
    let dir = Path::new(&dir);
    println!("cargo:rerun-if-changed=build.rs");
    let commit = commit(dir).unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=RATELIMIT_GATEWAY_COMMIT={commit}");
}

/// The short commit of the checkout `dir` is in, if `dir`'s own manifest is one of its files
/// (a copy of the crate inside another repository is not that repository's commit). Asks
/// cargo to run again when `HEAD` moves.
fn commit(dir: &Path) -> Option<String> {
    let git = |args: &[&str]| {
        let output = Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .ok()?;
        let text = String::from_utf8(output.stdout).ok()?;
        output.status.success().then(|| text.trim().to_owned())
    };
    git(&["ls-files", "--error-unmatch", "Cargo.toml"])?;
    for watched in ["HEAD", "packed-refs"] {
        if let Some(path) = git(&["rev-parse", "--git-path", watched]) {
            println!("cargo:rerun-if-changed={}", dir.join(path).display());
        }
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(path) = git(&["rev-parse", "--git-path", &branch])
    {
        println!("cargo:rerun-if-changed={}", dir.join(path).display());
    }
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).filter(|commit| !commit.is_empty())?;
    Some(commit)
}
