//! The function library (Redis 7+): the helpers, every algorithm and every entry point, loaded
//! once with `FUNCTION LOAD` and called with `FCALL`.
//!
//! Its name carries its version, a digest of its source: `ratelimit_<16 hex digits>`, and so do
//! its functions' (`ratelimit_<digits>_decide`, ...), since function names are unique across
//! the libraries of a server. A server holding another version (instances of two releases
//! during a rolling upgrade) answers that the function is not found, and gets this version
//! loaded beside the other: each instance calls its own. `FUNCTION DELETE` removes an old
//! version once no instance uses it.
//!
//! Each entry point's file is the body of its function: its `KEYS` and `ARGV` are the
//! function's arguments, its `return` the function's, and the helpers' locals (`MIN_TTL_MS`...)
//! are the library's, shared by its functions as they are by one script's code.

use std::fmt::Write;
use std::sync::LazyLock;

use sha2::{Digest, Sha256};

use super::entry::{ALGORITHMS, COMMON, Entry};

/// The library: its name, its functions' names and its source.
pub(in crate::store::redis) struct Library {
    /// `ratelimit_<version>`.
    pub(in crate::store::redis) name: String,
    /// Each entry point's function, in `Entry::ALL`'s order.
    functions: Vec<String>,
    /// What `FUNCTION LOAD` is sent: the shebang line naming the library, then the code.
    pub(super) source: String,
}

impl Library {
    /// The library of this build.
    pub(in crate::store::redis) fn get() -> &'static Library {
        static LIBRARY: LazyLock<Library> = LazyLock::new(Library::new);
        &LIBRARY
    }

    fn new() -> Self {
        let version = version();
        let name = format!("ratelimit_{version}");
        let functions: Vec<String> = Entry::ALL
            .iter()
            .map(|entry| format!("{name}_{}", entry.name()))
            .collect();
        let mut source = format!("#!lua name={name}\n{}", code());
        for (entry, function) in Entry::ALL.iter().zip(&functions) {
            // Writing to a String cannot fail.
            write!(
                source,
                "\nredis.register_function('{function}', function(KEYS, ARGV)\n{}\nend)\n",
                entry.source()
            )
            .unwrap_or_default();
        }
        Self {
            name,
            functions,
            source,
        }
    }

    /// The name of `entry`'s function.
    pub(super) fn function(&self, entry: Entry) -> &str {
        let index = Entry::ALL
            .iter()
            .position(|each| *each == entry)
            .unwrap_or_default();
        &self.functions[index]
    }
}

/// The code before the functions: the helpers and every algorithm.
fn code() -> String {
    let mut code = String::from(COMMON);
    for algorithm in ALGORITHMS {
        code.push('\n');
        code.push_str(algorithm);
    }
    code
}

/// 64 bits of SHA-256 of everything the library holds, in hex: a changed file is a new version.
fn version() -> String {
    let mut digest = Sha256::new();
    digest.update(code());
    for entry in Entry::ALL {
        digest.update(entry.name());
        digest.update(entry.source());
    }
    digest.finalize()[..8]
        .iter()
        .fold(String::new(), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_names_its_version_in_itself_and_in_every_function() {
        let library = Library::get();
        let version = library.name.strip_prefix("ratelimit_").unwrap();
        assert_eq!(version.len(), 16);
        assert!(version.bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(
            library
                .source
                .starts_with(&format!("#!lua name={}\n", library.name))
        );
        for entry in Entry::ALL {
            let function = library.function(entry);
            assert_eq!(function, format!("{}_{}", library.name, entry.name()));
            assert!(library.source.contains(&format!("'{function}'")));
        }
    }
}
