//! boxmaker's tools as a library: each tool is an args struct (serde, unknown fields refused), a
//! hand-written JSON Schema, and a function from args and options to a typed result or a typed
//! error. Nothing here decides policy or knows about sessions: the broker does both, and hands
//! each tool only what it already decided (paths resolved and checked, hosts allowed).
//!
//! The network tools (`web`, and `git_clone` in `git`) come with the `net` feature (on by
//! default); without it the crate links no HTTP client and no async runtime.

// A library says what it has to say through its callers (a returned text, an error) or
// `tracing`; only binaries, tests, benches and examples write to standard output or error.
#![deny(clippy::print_stdout, clippy::print_stderr)]

#[cfg(feature = "net")]
pub mod args;
pub mod clean;
pub mod fs;
pub mod git;
pub mod jobs;
#[cfg(feature = "net")]
pub mod pages;
pub mod search;
pub mod shell;
#[cfg(feature = "net")]
pub mod web;
