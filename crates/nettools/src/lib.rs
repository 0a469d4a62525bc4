//! boxmaker's network tools and the reading of a call's arguments, as a library: `web`
//! (`http_fetch`, `web_search`, the host and URL reading and the address classifier every host
//! check uses), `git` (`git_clone`, whose transport `web` checks), `pages` (the web reading
//! tools' page model: a fetched page's Markdown with its links numbered, read by lines or by
//! heading, grepped) and `args` (a call's arguments parsed strictly for its tool, which names
//! the network tools' arguments too).
//!
//! The file tools are the `tools` crate's, which this one builds on; they are apart so that a
//! program that runs them in a box (the `worker` crate) never links an HTTP client or an async
//! runtime, whatever else is built with it.

// A library says what it has to say through its callers (a returned text, an error) or
// `tracing`; only binaries, tests, benches and examples write to standard output or error.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod args;
pub mod git;
pub mod pages;
pub mod web;
