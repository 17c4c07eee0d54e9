//! Tests in a binary of their own without libtest (`harness = false` in Cargo.toml: one that
//! re-executes itself as a child process, one that must own `main`), answering `cargo test` as
//! libtest's binaries do.

use std::io::Write;

/// Runs the `tests` (name, function) of the test binary `binary` that `cargo test`'s arguments
/// select (name filters, as substrings or with `--exact` whole, `--skip`; `--list` lists them),
/// each in turn, a panic failing it; prints a line per test and a closing count like libtest's,
/// and exits with 101 when one failed.
pub fn run(binary: &str, tests: &[(&str, fn())]) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|arg| arg == "--list") {
        for (name, _) in tests {
            println!("{name}: test");
        }
        return;
    }
    let exact = args.iter().any(|arg| arg == "--exact");
    let (mut filters, mut skips) = (Vec::new(), Vec::new());
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--skip" => skips.extend(rest.next()),
            flag if flag.starts_with('-') => {}
            filter => filters.push(filter),
        }
    }
    let matches = |name: &str, filter: &str| {
        if exact {
            filter == name
        } else {
            name.contains(filter)
        }
    };
    let (mut passed, mut failed) = (0, 0);
    for (name, test) in tests {
        let skipped = skips.iter().any(|skip| matches(name, skip));
        let selected = filters.is_empty() || filters.iter().any(|filter| matches(name, filter));
        if skipped || !selected {
            continue;
        }
        print!("test {name} ... ");
        std::io::stdout().flush().expect("stdout");
        if std::panic::catch_unwind(test).is_ok() {
            println!("ok");
            passed += 1;
        } else {
            println!("FAILED");
            failed += 1;
        }
    }
    println!("\n{binary}: {passed} passed, {failed} failed");
    if failed > 0 {
        std::process::exit(101);
    }
}
