//! The memory store on real SQLite files: labels kept, model-written FTS5 syntax, tags and
//! scopes, forget and purge, export, a damaged file, and 100,000 entries.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod large;
mod store;

use std::path::PathBuf;

use memory::{NewEntry, Recall, Scope, Store};
use proto::{Class, Timestamp};

/// A store in a fresh temporary folder (kept alive by the returned guard).
pub fn fresh() -> (tempfile::TempDir, PathBuf, Store) {
    let dir = tempfile::Builder::new()
        .prefix("boxmaker-memory-")
        .tempdir()
        .unwrap();
    let path = dir.path().join("memory").join("memory.sqlite");
    let store = Store::open(&path).unwrap();
    (dir, path, store)
}

/// An entry written by session `s1`, public and trusted.
pub fn entry<'a>(text: &'a str, tags: &'a [String]) -> NewEntry<'a> {
    NewEntry {
        text,
        tags,
        session: "s1",
        class: Class::Public,
        untrusted: false,
        at: Timestamp::from_millis(1_700_000_000_000).unwrap(),
    }
}

/// A recall of `query` over every entry, 10 at most.
pub fn query(query: &str) -> Recall<'_> {
    Recall {
        query,
        tags: &[],
        scope: Scope::All,
        limit: 10,
        terms_only: false,
    }
}

/// Owned tags.
pub fn tags(names: &[&str]) -> Vec<String> {
    names.iter().map(|t| t.to_string()).collect()
}
