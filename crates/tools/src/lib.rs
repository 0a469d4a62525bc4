//! boxmaker's tools as a library: each tool is an args struct (serde, unknown fields refused), a
//! hand-written JSON Schema, and a function from args and options to a typed result or a typed
//! error. Nothing here decides policy or knows about sessions: the broker does both, and hands
//! each tool only what it already decided (paths resolved and checked, hosts allowed).
//!
//! The network tools (`http_fetch`, `web_search`, `git_clone`) and the reading of a call's
//! arguments are the `nettools` crate's: this one links no HTTP client and no async runtime, so
//! a program that runs the file tools in a box (the `worker` crate) links neither.

// A library says what it has to say through its callers (a returned text, an error) or
// `tracing`; only binaries, tests, benches and examples write to standard output or error.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod clean;
pub mod fs;
pub mod git;
pub mod jobs;
pub mod search;
pub mod shell;
