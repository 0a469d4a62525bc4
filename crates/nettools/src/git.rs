//! `git_clone`: the git tool that reaches the network, run the way `tools::git` runs git (a
//! scrubbed environment, a box, bounded output), its host checked as `http_fetch` checks a hop.

mod clone;

pub use clone::{CloneError, CloneOptions, CloneResult, git_clone};
