//! The tools' integration tests, one binary: the file tools, `http_fetch` against a local TLS
//! server, the seed-pinned schemas, and `shell`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod edit;
mod fs;
mod git;
mod http_fetch;
mod index;
mod jobs;
mod schemas;
mod search;
mod shell;
mod web_search;
