//! The network tools' integration tests, one binary: `http_fetch` and `web_search` against a
//! local TLS server, and `git_clone` from one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod git_clone;
mod http_fetch;
mod web_search;
