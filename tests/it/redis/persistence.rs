//! The servers the tests start keep nothing where the tests run: saving is off (no RDB snapshot,
//! no append-only file), and each works in a directory of its own that goes when it does. A
//! server started in the checkout would leave `dump.rdb` there as soon as anything saved (a
//! replica writes the RDB of its first sync to disk, saving off or not).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::support::RedisServer;

/// `CONFIG GET name`'s value (redis-cli prints the name and the value on two lines).
fn config(server: &RedisServer, name: &str) -> String {
    let answer = server.cli(&["CONFIG", "GET", name]);
    answer.lines().nth(1).unwrap_or_default().to_owned()
}

fn canonical(path: &Path) -> PathBuf {
    path.canonicalize()
        .unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

#[test]
fn a_server_saves_nothing_and_works_in_a_directory_removed_with_it() {
    let checkout = canonical(Path::new(env!("CARGO_MANIFEST_DIR")));
    let started = SystemTime::now();
    let server = RedisServer::start();
    assert_eq!(config(&server, "save"), "", "snapshots are off");
    assert_eq!(
        config(&server, "appendonly"),
        "no",
        "the append-only file is off"
    );
    let dir = PathBuf::from(config(&server, "dir"));
    assert_ne!(
        canonical(&dir),
        checkout,
        "the server works in the checkout"
    );
    assert_ne!(
        canonical(&dir),
        canonical(&std::env::current_dir().unwrap()),
        "the server works in the test's directory"
    );

    // Even an explicit SAVE writes into the server's own directory.
    assert_eq!(server.cli(&["SAVE"]), "OK");
    assert!(
        dir.join("dump.rdb").is_file(),
        "SAVE wrote no dump.rdb in {}",
        dir.display()
    );
    drop(server);
    assert!(!dir.exists(), "{} outlived its server", dir.display());
    assert_no_new_dump(&checkout, started);
}

#[test]
fn a_replica_writes_its_first_sync_into_its_own_directory() {
    let checkout = canonical(Path::new(env!("CARGO_MANIFEST_DIR")));
    let started = SystemTime::now();
    // Without the default 5 s wait for more replicas before a sync.
    let primary = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    primary.cli(&["SET", "k", "v"]);
    let replica =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &primary.port().to_string()]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !replica
        .cli(&["INFO", "replication"])
        .contains("master_link_status:up")
    {
        assert!(
            Instant::now() < deadline,
            "the replica did not sync within 30 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(replica.cli(&["GET", "k"]), "v");
    let dirs = [primary.dir().to_owned(), replica.dir().to_owned()];
    for dir in &dirs {
        assert_ne!(canonical(dir), checkout);
    }
    assert_ne!(
        canonical(&dirs[0]),
        canonical(&dirs[1]),
        "each server has a directory of its own"
    );
    drop((primary, replica));
    for dir in &dirs {
        assert!(!dir.exists(), "{} outlived its server", dir.display());
    }
    assert_no_new_dump(&checkout, started);
}

/// A dump.rdb left in the checkout by an older run may be there; none is from this one.
fn assert_no_new_dump(checkout: &Path, started: SystemTime) {
    if let Ok(metadata) = checkout.join("dump.rdb").metadata() {
        assert!(
            metadata.modified().unwrap() < started,
            "a dump.rdb appeared in the checkout"
        );
    }
}
