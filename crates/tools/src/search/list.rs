//! `list_files`: the entries of a folder, or of its tree down to a depth, sorted by path. The
//! tree is walked in parallel (ignore's parallel walker); each thread keeps the first entries
//! in path order, so the answer is the same whatever the threads' timing, and never holds more
//! than the cap per thread.

use std::collections::BinaryHeap;
use std::os::unix::ffi::OsStrExt;
use std::sync::Mutex;

use ignore::WalkState;
use serde::{Deserialize, Serialize};

use super::walk::{key_path, order_key, pinned_start, relative_bytes, walker};
use super::{SearchError, SearchOptions};
use crate::fs::GrantedDir;

pub use proto::tools::schemas::list_files_schema;

/// The default depth of a recursive `list_files`.
pub const MAX_DEPTH: usize = 10;

/// The arguments of `list_files`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListFilesArgs {
    /// The absolute path of the folder.
    pub path: String,
    /// List the whole tree instead of the folder's own entries.
    #[serde(default)]
    pub recursive: bool,
    /// How deep a recursive listing goes (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth: Option<usize>,
}

/// One entry `list_files` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListEntry {
    /// The path relative to the folder listed (invalid UTF-8 shown as U+FFFD).
    pub path: String,
    /// The size in bytes (of the link itself for a symbolic link).
    pub size: u64,
    /// Whether it is a folder.
    pub is_dir: bool,
    /// Whether it is a symbolic link (listed, never followed).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub symlink: bool,
}

/// What `list_files` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListFilesResult {
    /// The folder listed.
    pub path: String,
    /// The entries, sorted by path.
    pub entries: Vec<ListEntry>,
    /// Whether the cap cut the list.
    pub truncated: bool,
}

/// Lists the folder at `args.path`, below `dir`.
pub fn list_files(
    dir: &GrantedDir,
    args: &ListFilesArgs,
    options: &SearchOptions,
) -> Result<ListFilesResult, SearchError> {
    let (root, meta) = pinned_start(dir, &args.path)?;
    if !meta.is_dir() {
        return Err(SearchError::NotADirectory(args.path.clone()));
    }
    let depth = if args.recursive {
        args.max_depth.unwrap_or(MAX_DEPTH).max(1)
    } else {
        1
    };
    let cap = options.max_entries;
    let mut builder = walker(&root, options);
    builder.max_depth(Some(depth)).threads(options.threads);
    let shared = Mutex::new(Kept::default());
    builder.build_parallel().run(|| {
        let mut kept = Collector {
            kept: Kept::default(),
            cap,
            shared: &shared,
        };
        let root = root.as_os_str().as_bytes();
        Box::new(move |entry| {
            if let Ok(entry) = entry
                && entry.depth() > 0
            {
                kept.offer(root, &entry);
            }
            WalkState::Continue
        })
    });
    // A walker thread that panicked holding the lock is re-raised by `run` (a scoped
    // thread) before this line; were the lock poisoned anyway, what the walkers found is kept,
    // not silently emptied.
    let kept = shared
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut found = kept.entries.into_vec();
    found.sort();
    let truncated = kept.seen > cap;
    found.truncate(cap);
    Ok(ListFilesResult {
        path: args.path.clone(),
        entries: found.into_iter().map(Keyed::entry).collect(),
        truncated,
    })
}

/// An entry ordered by its path relative to the start (component by component, as a sorted
/// depth-first walk meets them: [`order_key`]).
#[derive(Debug, PartialEq, Eq)]
struct Keyed {
    key: Vec<u8>,
    size: u64,
    is_dir: bool,
    symlink: bool,
}

impl Keyed {
    fn entry(self) -> ListEntry {
        ListEntry {
            path: key_path(&self.key),
            size: self.size,
            is_dir: self.is_dir,
            symlink: self.symlink,
        }
    }
}

impl Ord for Keyed {
    fn cmp(&self, other: &Keyed) -> std::cmp::Ordering {
        self.key.cmp(&other.key)
    }
}

impl PartialOrd for Keyed {
    fn partial_cmp(&self, other: &Keyed) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// The first entries in path order (a max-heap cut to the cap) and how many were seen.
#[derive(Default)]
struct Kept {
    entries: BinaryHeap<Keyed>,
    seen: usize,
}

impl Kept {
    fn merge(&mut self, other: Kept, cap: usize) {
        self.seen += other.seen;
        for keyed in other.entries {
            self.keep(keyed, cap);
        }
    }

    fn keep(&mut self, keyed: Keyed, cap: usize) {
        if self.entries.len() < cap {
            self.entries.push(keyed);
        } else if self.entries.peek().is_some_and(|last| keyed < *last) {
            self.entries.pop();
            self.entries.push(keyed);
        }
    }
}

/// One walking thread's entries, handed to the shared list when the thread is done.
struct Collector<'a> {
    kept: Kept,
    cap: usize,
    shared: &'a Mutex<Kept>,
}

impl Collector<'_> {
    fn offer(&mut self, root: &[u8], entry: &ignore::DirEntry) {
        let Some(kind) = entry.file_type() else {
            return;
        };
        self.kept.seen += 1;
        let key = order_key(relative_bytes(root, entry.path()).to_vec());
        if self.kept.entries.len() >= self.cap
            && self.kept.entries.peek().is_none_or(|last| key >= last.key)
        {
            return;
        }
        // The size is looked up only for an entry that may be listed.
        let size = entry.metadata().map_or(0, |m| m.len());
        let keyed = Keyed {
            key,
            size,
            is_dir: kind.is_dir(),
            symlink: kind.is_symlink(),
        };
        self.kept.keep(keyed, self.cap);
    }
}

impl Drop for Collector<'_> {
    fn drop(&mut self) {
        let kept = std::mem::take(&mut self.kept);
        if let Ok(mut shared) = self.shared.lock() {
            shared.merge(kept, self.cap);
        }
    }
}
