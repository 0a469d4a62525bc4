//! Test support for boxmaker (dev-only; never in a shipped binary): a scripted
//! OpenAI-compatible HTTP server, a model server that records what a client sends, a finder for
//! the daemons' binaries and for the npm clients `scripts/test-deps` installs, a `brokerd` launcher and
//! agent-socket client, temporary folders, and copies of binaries another user can run.

// A library says what it has to say through its callers (a returned text, an error) or
// `tracing`; only binaries, tests, benches and examples write to standard output or error.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod binaries;
mod daemon;
mod linking;
pub mod npm;
mod other_user;
mod pg;
mod plain_server;
pub mod podman;
pub mod python;
mod recorder;
mod script_server;
pub mod tls_server;

pub use binaries::{BinaryError, binary};
pub use daemon::{AgentClient, BrokerProcess, OwnerClient};
pub use linking::{linked_statically, linked_statically_where_it_can_be};
pub use other_user::{NOBODY, RunnableCopy};
pub use pg::PgServer;
pub use plain_server::PlainServer;
pub use recorder::{Recorded, RequestRecorder};
pub use script_server::ScriptServer;

/// A fresh temporary folder, removed when the value is dropped: in `/var/tmp` (where none can
/// be made there, in the system's temporary folder).
///
/// Not below `/tmp`: a box has a `/tmp` of its own that it may read and write throughout, so a
/// test whose files are below `/tmp` cannot see what a box refuses everywhere else (a walk of a
/// granted folder that opened the folder above it passed every test that way). Tests' files
/// are made where an owner's are.
pub fn temp_dir() -> tempfile::TempDir {
    let builder = || {
        let mut builder = tempfile::Builder::new();
        builder.prefix("boxmaker-test-");
        builder
    };
    if let Ok(dir) = builder().tempdir_in("/var/tmp") {
        return dir;
    }
    match builder().tempdir() {
        Ok(dir) => dir,
        Err(error) => panic!("cannot create a temporary folder: {error}"),
    }
}

/// How many processes of this machine have a command line (its arguments joined by spaces)
/// that holds `marker`: for tests that a box, a job or a command left nothing behind.
pub fn processes_named(marker: &str) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|cmdline| {
            String::from_utf8_lossy(cmdline)
                .replace('\0', " ")
                .contains(marker)
        })
        .count()
}

/// The command prefixes that shell-coverage tables and benchmarks are checked against.
pub const COVERAGE_PREFIXES: &[&str] = &[
    "git status",
    "git log",
    "ls",
    "cargo test",
    "echo",
    "grep",
    "wc -l",
];

/// Command prefixes as a grant holds them: each `"git status"` becomes `["git", "status"]`.
pub fn prefixes(list: &[&str]) -> Vec<Vec<String>> {
    list.iter()
        .map(|p| p.split(' ').map(str::to_owned).collect())
        .collect()
}
