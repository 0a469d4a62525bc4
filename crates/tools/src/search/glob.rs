//! `glob`: the files whose path below a folder matches a glob, newest first (then by path),
//! found by a parallel walk.

use std::ffi::OsStr;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;
use std::sync::Mutex;
use std::time::SystemTime;

use ignore::WalkState;

use globset::GlobBuilder;
use serde::{Deserialize, Serialize};

use super::walk::{key_path, order_key, pinned_start, relative_bytes, walker};
use super::{SearchError, SearchOptions};
use crate::fs::GrantedDir;

pub use proto::tools::schemas::glob_schema;

/// The arguments of `glob`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GlobArgs {
    /// The glob, matched against each file's path relative to `path` (`**/*.rs`, `src/*.md`).
    pub pattern: String,
    /// The absolute path of the folder to search.
    pub path: String,
}

/// What `glob` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GlobResult {
    /// The absolute paths of the files matched, newest first (then by path); invalid UTF-8
    /// shown as U+FFFD.
    pub files: Vec<String>,
    /// Whether the cap cut the list.
    pub truncated: bool,
}

/// The files below `args.path` (in `dir`) whose relative path matches `args.pattern`.
pub fn glob(
    dir: &GrantedDir,
    args: &GlobArgs,
    options: &SearchOptions,
) -> Result<GlobResult, SearchError> {
    let matcher = matcher(&args.pattern)?;
    let (root, meta) = pinned_start(dir, &args.path)?;
    if !meta.is_dir() {
        return Err(SearchError::NotADirectory(args.path.clone()));
    }
    // A parallel walk: the order is set by the sort below, whatever the threads' timing.
    // Each match as its modification time and its path's order key.
    let shared: Mutex<Vec<(SystemTime, Vec<u8>)>> = Mutex::new(Vec::new());
    let mut builder = walker(&root, options);
    builder.threads(options.threads);
    builder.build_parallel().run(|| {
        let mut mine = Found {
            found: Vec::new(),
            shared: &shared,
        };
        let (root, matcher) = (root.as_os_str().as_bytes(), &matcher);
        Box::new(move |entry| {
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return WalkState::Continue;
            }
            let relative = Path::new(OsStr::from_bytes(relative_bytes(root, entry.path())));
            if matcher.is_match(relative) {
                let modified = entry
                    .metadata()
                    .ok()
                    .and_then(|m| m.modified().ok())
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                let path = entry.into_path().into_os_string().into_vec();
                mine.found.push((modified, order_key(path)));
            }
            WalkState::Continue
        })
    });
    // A walker thread that panicked holding the lock is re-raised by `run` (a scoped
    // thread) before this line; were the lock poisoned anyway, what the walkers found is kept,
    // not silently emptied.
    let mut found = shared
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let truncated = found.len() > options.max_entries;
    found.truncate(options.max_entries);
    Ok(GlobResult {
        files: found.into_iter().map(|(_, key)| key_path(&key)).collect(),
        truncated,
    })
}

/// `glob`'s matcher of `pattern` (`*` not crossing `/`, `\\` escaping).
pub(crate) fn matcher(pattern: &str) -> Result<globset::GlobMatcher, SearchError> {
    Ok(GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| SearchError::BadGlob {
            glob: pattern.to_string(),
            message: e.kind().to_string(),
        })?
        .compile_matcher())
}

/// One walking thread's matches, handed to the shared list when the thread is done.
struct Found<'a> {
    found: Vec<(SystemTime, Vec<u8>)>,
    shared: &'a Mutex<Vec<(SystemTime, Vec<u8>)>>,
}

impl Drop for Found<'_> {
    fn drop(&mut self) {
        if let Ok(mut shared) = self.shared.lock() {
            shared.append(&mut self.found);
        }
    }
}
