//! [`Call`]: one call of an entry point, its keys and arguments, and the commands that send it
//! in each [`Dialect`].

use std::borrow::Cow;

use redis::{Cmd, RedisError, ServerErrorKind, ToRedisArgs};

use super::entry::Entry;
use super::library::Library;

/// How calls reach the entry points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::store::redis) enum Dialect {
    /// `FCALL` of the library's functions (Redis 7+).
    Functions,
    /// `EVALSHA` of a script per entry point (Redis 6.2).
    Scripts,
}

/// What to do about a call that failed.
pub(in crate::store::redis) enum Recovery {
    /// Send this (`FUNCTION LOAD REPLACE` or `SCRIPT LOAD`), then the call again.
    Load(Cmd),
    /// The server does not know `FCALL`: send the call again as a script.
    Scripts,
    /// Nothing to do: the error is the answer.
    None,
}

/// One call of an entry point: its keys, then its other arguments, written straight into the
/// `FCALL` that sends it (the common case: no copy), and copied into an `EVALSHA` when the
/// server speaks scripts.
pub(in crate::store) struct Call {
    entry: Entry,
    /// The algorithms the call's rules use, for the scripts dialect (see `Entry::script`).
    algorithms: u8,
    /// The keys announced, and how many were added.
    keys: usize,
    added: usize,
    /// `FCALL <function> <keys> <key>... <arg>...`.
    command: Cmd,
}

impl Call {
    /// A call of `entry` with `keys` keys, whose rules use the algorithm set `algorithms` (0 for
    /// an entry that calls none). Every key is added before any other argument.
    pub(in crate::store) fn new(entry: Entry, algorithms: u8, keys: usize) -> Self {
        let mut command = redis::cmd("FCALL");
        command.arg(Library::get().function(entry)).arg(keys);
        Self {
            entry,
            algorithms,
            keys,
            added: 0,
            command,
        }
    }

    /// Adds a key (`KEYS[n]`, in the order added).
    pub(in crate::store) fn key(&mut self, key: impl ToRedisArgs) -> &mut Self {
        debug_assert!(
            self.added < self.keys && self.command.args_iter().len() == 3 + self.added,
            "more keys than announced, or a key after an argument"
        );
        self.command.arg(key);
        self.added += 1;
        self
    }

    /// Adds an argument (`ARGV[n]`, in the order added), after every key.
    pub(in crate::store) fn arg(&mut self, arg: impl ToRedisArgs) -> &mut Self {
        debug_assert_eq!(
            self.added, self.keys,
            "an argument before every key was added"
        );
        self.command.arg(arg);
        self
    }

    /// The command that sends this call in `dialect`: `FCALL <function> <numkeys> <keys...>
    /// <args...>`, or `EVALSHA <sha1> ...` with the same keys and arguments.
    pub(in crate::store::redis) fn command(&self, dialect: Dialect) -> Cow<'_, Cmd> {
        match dialect {
            Dialect::Functions => Cow::Borrowed(&self.command),
            Dialect::Scripts => {
                let mut command = redis::cmd("EVALSHA");
                command.arg(&self.entry.script(self.algorithms).hash);
                for arg in self.command.args_iter().skip(2) {
                    if let redis::Arg::Simple(bytes) = arg {
                        command.arg(bytes);
                    }
                }
                Cow::Owned(command)
            }
        }
    }

    /// What to do about `err`, the answer to this call sent in `dialect`: load the library (a
    /// function not found) or the script (`NOSCRIPT`), or change dialects (a server without
    /// functions).
    pub(in crate::store::redis) fn recovery(&self, dialect: Dialect, err: &RedisError) -> Recovery {
        match dialect {
            Dialect::Functions if names(err, "Function not found") => {
                let mut load = redis::cmd("FUNCTION");
                load.arg("LOAD").arg("REPLACE").arg(&Library::get().source);
                Recovery::Load(load)
            }
            Dialect::Functions if names(err, "unknown command") => Recovery::Scripts,
            Dialect::Scripts
                if err.kind() == redis::ErrorKind::Server(ServerErrorKind::NoScript) =>
            {
                let mut load = redis::cmd("SCRIPT");
                load.arg("LOAD")
                    .arg(&self.entry.script(self.algorithms).code);
                Recovery::Load(load)
            }
            _ => Recovery::None,
        }
    }
}

/// Whether the server's error says `what` (Redis answers both as plain `ERR` errors).
fn names(err: &RedisError, what: &str) -> bool {
    err.detail().is_some_and(|detail| detail.contains(what)) || err.to_string().contains(what)
}
