//! brokerd, boxmaker's broker daemon, as a library: the daemon ([`daemon`]: config, sockets,
//! sessions, the journal, the runner), the one place that opens a decided folder ([`files`]) and
//! the `consult` client ([`consult`]).
//!
//! The decision itself lives in the `policy` crate. The modules [`args`], [`grants`] and
//! [`policy`] (and the pure half of [`consult`]) re-export it, so that the seeds' paths
//! (`brokerd::args::parse`, `brokerd::consult::wire_body`, …) keep working.

// A library says what it has to say through its callers (a returned text, an error) or
// `tracing`; only binaries, tests, benches and examples write to standard output or error.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod consult;
pub mod daemon;
pub mod files;

/// Re-export of `policy::args` (and `policy::hosts::https_host`): tool names and strict
/// argument parsing, at the seeds' path.
pub mod args {
    pub use ::policy::args::*;
    pub use ::policy::hosts::https_host;
}

/// Re-export of `policy::grants` (and `policy::paths`' resolution): the owner's grant files, at
/// the seeds' path.
pub mod grants {
    pub use ::policy::grants::*;
    pub use ::policy::paths::{MAX_PATH_BYTES, ResolveError, resolve};
}

/// Re-export of `policy::decide`, `policy::shell` and `policy::git`: the decision, at the path
/// the broker has always used.
pub mod policy {
    pub use ::policy::decide::*;
    pub use ::policy::{git, shell};
}

/// The version `--version` prints, which `bx demo` compares between the binaries it runs.
pub const BUILD_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (build ",
    env!("BOXMAKER_BUILD_ID"),
    ")"
);
