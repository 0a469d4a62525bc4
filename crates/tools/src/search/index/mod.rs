//! A warm index of a session's trees for `list_files`, `glob` and `grep`: what a walk from a
//! start yields (paths, kinds, sizes, modification times; no content), kept by a long-lived
//! worker (the session's warm box) and answered from instead of walking again.
//!
//! The index is built by the very walker a walk uses ([`super::walk::walker`]: links never
//! followed, the call's pruned and excluded folders left out, ignore files honoured), so it
//! holds what a walk would yield and nothing the call's grant leaves out; one index per start
//! and per [`WalkLimits`] (what the grants leave out is part of the key). It is kept current by
//! inotify watches on each folder the walk entered (added before the folder's entries are
//! indexed) and on each folder above the start, read without blocking at the start of every
//! call: a change made before the call, by anyone, inside the box or out, is in hand before it
//! is answered. A folder whose entries changed is read again (a folder that came, walked); a
//! file written or touched is looked up again. When the index cannot be trusted it is dropped
//! and the call walks (and builds it again): the event queue overflowed, the start or a folder
//! above it went or was moved, an ignore file or a `.git` changed, a folder could not be read
//! or watched (the watch limit), or the tree holds more than [`MAX_ENTRIES`] entries.
//!
//! Not the `notify` crate: its inotify watcher also watches `IN_OPEN` (each file a `grep` reads
//! would queue an event, past the queue's 16,384 on a kernel tree) and hands events over on a
//! thread of its own, with no way to know that every event queued before the call was seen.
//!
//! `grep` with a `glob` or a `type` walks: their rules can take in a file the walk's ignore
//! rules leave out (ripgrep's overrides, and a type's whitelist, go before the hidden-file
//! rule), which an index of the walk does not hold.

mod tree;
mod watch;

pub use tree::MAX_ENTRIES;

use std::ffi::OsStr;
use std::fs::Metadata;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::glob::matcher;
use super::grep::grep_files;
use super::list::MAX_DEPTH;
use super::walk::pinned_start;
use super::{
    GlobArgs, GlobResult, GrepArgs, GrepResult, ListEntry, ListFilesArgs, ListFilesResult,
    SearchError, SearchOptions, WalkLimits,
};
use crate::fs::GrantedDir;
use tree::{Kind, Tree, depth_of};

/// The most trees one index keeps (the least recently used goes).
pub const MAX_TREES: usize = 4;

/// After a tree could not be indexed (a folder it cannot read or watch, too many entries), how
/// many calls on it walk before the index is tried again.
const WALKS_BEFORE_RETRY: u32 = 16;

/// A worker's warm trees. Each method answers as its walking function does (the same result,
/// the same errors), from the index when it is current. `options` must be `limits`' options
/// ([`WalkLimits::options`], any caps and threads). A tree that cannot be indexed is walked,
/// and tried again after [`WALKS_BEFORE_RETRY`] calls.
#[derive(Default)]
pub struct WarmIndex {
    trees: Vec<(WalkLimits, Tree)>,
    /// Trees that could not be indexed, and how many more calls walk before the next try.
    refused: Vec<(WalkLimits, PathBuf, u32)>,
    /// Calls answered from an index.
    pub served: u64,
    /// Trees built (the first call on a tree, and each after one could not be trusted).
    pub built: u64,
}

impl std::fmt::Debug for WarmIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WarmIndex")
            .field("trees", &self.trees.len())
            .field("served", &self.served)
            .field("built", &self.built)
            .finish()
    }
}

impl WarmIndex {
    /// An empty index.
    pub fn new() -> WarmIndex {
        WarmIndex::default()
    }

    /// [`super::list_files`], from the index for a recursive listing.
    pub fn list_files(
        &mut self,
        dir: &GrantedDir,
        args: &ListFilesArgs,
        limits: &WalkLimits,
        options: &SearchOptions,
    ) -> Result<ListFilesResult, SearchError> {
        if !args.recursive {
            return super::list_files(dir, args, options);
        }
        let (root, meta) = pinned_start(dir, &args.path)?;
        if !meta.is_dir() {
            return Err(SearchError::NotADirectory(args.path.clone()));
        }
        let Some(tree) = self.current(&root, &meta, limits, options) else {
            return super::list_files(dir, args, options);
        };
        let depth = args.max_depth.unwrap_or(MAX_DEPTH).max(1);
        let cap = options.max_entries;
        let mut entries = Vec::new();
        let mut seen = 0usize;
        for (key, m) in &tree.entries {
            if depth_of(key) > depth {
                continue;
            }
            seen += 1;
            if entries.len() < cap {
                entries.push(ListEntry {
                    path: super::walk::key_path(key),
                    size: m.size,
                    is_dir: m.kind == Kind::Dir,
                    symlink: m.kind == Kind::Symlink,
                });
            }
        }
        self.served += 1;
        Ok(ListFilesResult {
            path: args.path.clone(),
            entries,
            truncated: seen > cap,
        })
    }

    /// [`super::glob`], from the index.
    pub fn glob(
        &mut self,
        dir: &GrantedDir,
        args: &GlobArgs,
        limits: &WalkLimits,
        options: &SearchOptions,
    ) -> Result<GlobResult, SearchError> {
        let glob = matcher(&args.pattern)?;
        let (root, meta) = pinned_start(dir, &args.path)?;
        if !meta.is_dir() {
            return Err(SearchError::NotADirectory(args.path.clone()));
        }
        let Some(tree) = self.current(&root, &meta, limits, options) else {
            return super::glob(dir, args, options);
        };
        let mut relative = Vec::new();
        let mut found: Vec<(SystemTime, &Vec<u8>)> = Vec::new();
        for (key, m) in &tree.entries {
            if m.kind != Kind::File {
                continue;
            }
            relative.clear();
            relative.extend(key.iter().map(|&b| if b == 0 { b'/' } else { b }));
            if glob.is_match(Path::new(OsStr::from_bytes(&relative))) {
                found.push((m.modified, key));
            }
        }
        found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        let truncated = found.len() > options.max_entries;
        found.truncate(options.max_entries);
        let files = found
            .into_iter()
            .map(|(_, key)| tree.path(key).to_string_lossy().into_owned())
            .collect();
        self.served += 1;
        Ok(GlobResult { files, truncated })
    }

    /// [`super::grep`], its file list from the index for a folder searched without `glob` or
    /// `type`.
    pub fn grep(
        &mut self,
        dir: &GrantedDir,
        args: &GrepArgs,
        limits: &WalkLimits,
        options: &SearchOptions,
    ) -> Result<GrepResult, SearchError> {
        if args.glob.is_some() || args.file_type.is_some() {
            return super::grep(dir, args, options);
        }
        let (root, meta) = pinned_start(dir, &args.path)?;
        if !meta.is_dir() {
            return super::grep(dir, args, options);
        }
        let Some(tree) = self.current(&root, &meta, limits, options) else {
            return super::grep(dir, args, options);
        };
        let paths: Vec<PathBuf> = tree
            .entries
            .iter()
            .filter(|(_, m)| m.kind == Kind::File)
            .map(|(key, _)| tree.path(key))
            .collect();
        self.served += 1;
        grep_files(args, options, &paths)
    }

    /// The tree of `root` (as `meta` says it is now) for `limits`, current; `None` when it
    /// cannot be had (the call walks).
    fn current(
        &mut self,
        root: &Path,
        meta: &Metadata,
        limits: &WalkLimits,
        options: &SearchOptions,
    ) -> Option<&Tree> {
        let id = (meta.dev(), meta.ino());
        if let Some(at) = self
            .trees
            .iter()
            .position(|(l, t)| l == limits && t.root == root)
        {
            let (kept, mut tree) = self.trees.remove(at);
            if tree.id == id && tree.refresh(options).is_ok() {
                self.trees.push((kept, tree));
                return self.trees.last().map(|(_, t)| t);
            }
        }
        if let Some(at) = self
            .refused
            .iter()
            .position(|(l, r, _)| l == limits && r == root)
        {
            match self.refused.get_mut(at) {
                Some((_, _, left)) if *left > 0 => {
                    *left -= 1;
                    return None;
                }
                _ => {
                    self.refused.remove(at);
                }
            }
        }
        let Ok(tree) = Tree::build(root, id, options) else {
            if self.refused.len() >= MAX_TREES {
                self.refused.remove(0);
            }
            self.refused
                .push((limits.clone(), root.to_path_buf(), WALKS_BEFORE_RETRY));
            return None;
        };
        self.built += 1;
        if self.trees.len() >= MAX_TREES {
            self.trees.remove(0);
        }
        self.trees.push((limits.clone(), tree));
        self.trees.last().map(|(_, t)| t)
    }
}
