//! One indexed tree: every entry a walk from the start yields (the same walker, so the same
//! links left alone, the same pruned and excluded folders, the same ignore rules), with its kind,
//! size and modification time, kept current from the tree's notifications.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use ignore::WalkState;

use super::watch::{Changes, RULE_NAMES, Watch};
use crate::search::SearchOptions;
use crate::search::walk::{order_key, relative_bytes, walker};

/// The most entries one index holds; a larger tree is walked.
pub const MAX_ENTRIES: usize = 1_000_000;

/// How far back a folder's change time counts as "maybe during its reading": a folder changed
/// between being read and being watched is read again.
const RECENT: Duration = Duration::from_secs(1);

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

/// An entry's metadata, as the walk's `lstat` gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Meta {
    pub kind: Kind,
    pub size: u64,
    pub modified: SystemTime,
}

impl Meta {
    fn of(meta: &std::fs::Metadata) -> Meta {
        let kind = meta.file_type();
        Meta {
            kind: if kind.is_symlink() {
                Kind::Symlink
            } else if kind.is_dir() {
                Kind::Dir
            } else if kind.is_file() {
                Kind::File
            } else {
                Kind::Other
            },
            size: meta.len(),
            modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
        }
    }
}

/// Why a tree cannot answer: it is walked instead (and built again on the next call).
#[derive(Debug)]
pub(super) struct Untrusted;

/// One indexed tree.
pub(super) struct Tree {
    pub root: PathBuf,
    /// Device and inode of the start when indexed.
    pub id: (u64, u64),
    /// Every entry below the start, by order key.
    pub entries: BTreeMap<Vec<u8>, Meta>,
    watch: Watch,
    /// Folders to read again before the next answer (changed while being first read).
    pending: BTreeSet<Vec<u8>>,
    /// Folders to walk again, all below them, before the next answer (a rule file of theirs
    /// changed while being first read).
    pending_trees: BTreeSet<Vec<u8>>,
}

/// What one scan found.
struct Scanned {
    entries: Vec<(Vec<u8>, Meta)>,
    /// Folders watched by this scan: (key, wd, whether the watch is new).
    dirs: Vec<(Vec<u8>, i32, bool)>,
    failed: bool,
}

impl Tree {
    /// Indexes the tree at `root` (its device and inode `id`) as `options` walk it.
    pub fn build(root: &Path, id: (u64, u64), options: &SearchOptions) -> Result<Tree, Untrusted> {
        let watch = Watch::new(root).map_err(|_| Untrusted)?;
        let mut tree = Tree {
            root: root.to_path_buf(),
            id,
            entries: BTreeMap::new(),
            watch,
            pending: BTreeSet::new(),
            pending_trees: BTreeSet::new(),
        };
        tree.scan(&[], None, options)?;
        Ok(tree)
    }

    /// Applies the events queued since the last call; `Err` when the tree cannot be trusted.
    pub fn refresh(&mut self, options: &SearchOptions) -> Result<(), Untrusted> {
        let Changes {
            invalid,
            mut stale,
            touched,
        } = self.watch.drain();
        if invalid {
            return Err(Untrusted);
        }
        // Walked again under the watches they now have (the recheck cannot come round again).
        for folder in std::mem::take(&mut self.pending_trees) {
            if folder.is_empty()
                || self
                    .entries
                    .get(&folder)
                    .is_some_and(|m| m.kind == Kind::Dir)
            {
                self.clear_below(&folder);
                self.scan(&folder, None, options)?;
            }
        }
        stale.append(&mut self.pending);
        for key in touched {
            let Some(old) = self.entries.get(&key).copied() else {
                continue;
            };
            match std::fs::symlink_metadata(self.path(&key)) {
                Ok(meta) if Meta::of(&meta).kind == old.kind => {
                    self.entries.insert(key, Meta::of(&meta));
                }
                // Gone or replaced by another kind: its folder is read again.
                _ => {
                    stale.insert(parent_key(&key).to_vec());
                }
            }
        }
        // Each changed folder's entries read again: first what went, then what came, so a
        // folder moved inside the tree keeps the watch it is given under its new name.
        let mut added = Vec::new();
        for folder in &stale {
            if !folder.is_empty() && self.entries.get(folder).is_none_or(|m| m.kind != Kind::Dir) {
                continue;
            }
            let found = self.scan_children(folder, options)?;
            let depth = depth_of(folder) + 1;
            let before: Vec<(Vec<u8>, Meta)> = self
                .children(folder, depth)
                .map(|(k, m)| (k.clone(), *m))
                .collect();
            let now: BTreeMap<&Vec<u8>, &Meta> = found.iter().map(|(k, m)| (k, m)).collect();
            for (key, meta) in &before {
                match now.get(key) {
                    Some(new) if new.kind == meta.kind => {}
                    _ => self.remove_below(key),
                }
            }
            for (key, meta) in found {
                let known = self.entries.get(&key).is_some_and(|m| m.kind == meta.kind);
                self.entries.insert(key.clone(), meta);
                if !known && meta.kind == Kind::Dir {
                    added.push(key);
                }
            }
        }
        for key in added {
            self.scan(&key, None, options)?;
        }
        if self.entries.len() > MAX_ENTRIES {
            return Err(Untrusted);
        }
        Ok(())
    }

    /// The absolute path of `key`.
    pub fn path(&self, key: &[u8]) -> PathBuf {
        if key.is_empty() {
            return self.root.clone();
        }
        let bytes: Vec<u8> = key.iter().map(|&b| if b == 0 { b'/' } else { b }).collect();
        self.root.join(std::ffi::OsStr::from_bytes(&bytes))
    }

    /// The entries of `folder` (at `depth`), in order.
    fn children<'a>(
        &'a self,
        folder: &[u8],
        depth: usize,
    ) -> impl Iterator<Item = (&'a Vec<u8>, &'a Meta)> + 'a {
        let start = if folder.is_empty() {
            Vec::new()
        } else {
            let mut s = folder.to_vec();
            s.push(0);
            s
        };
        let prefix = start.clone();
        self.entries
            .range(start..)
            .take_while(move |(k, _)| k.starts_with(&prefix))
            .filter(move |(k, _)| depth_of(k) == depth)
    }

    /// Removes everything below `key` from the entries, keeping the watches (a walk again
    /// records them; one of a folder gone ends with an `IN_IGNORED`).
    fn clear_below(&mut self, key: &[u8]) {
        let mut below = key.to_vec();
        if !below.is_empty() {
            below.push(0);
        }
        let gone: Vec<Vec<u8>> = self
            .entries
            .range(below.clone()..)
            .take_while(|(k, _)| k.starts_with(&below))
            .map(|(k, _)| k.clone())
            .collect();
        for k in gone {
            self.entries.remove(&k);
        }
    }

    /// Removes `key` and everything below it, and their watches.
    fn remove_below(&mut self, key: &[u8]) {
        let mut below = key.to_vec();
        below.push(0);
        let gone: Vec<Vec<u8>> = self
            .entries
            .range(below.clone()..)
            .take_while(|(k, _)| k.starts_with(&below))
            .map(|(k, _)| k.clone())
            .chain(std::iter::once(key.to_vec()))
            .collect();
        for k in gone {
            if self.entries.remove(&k).is_some_and(|m| m.kind == Kind::Dir) {
                self.watch.forget(&k);
            }
        }
    }

    /// The entries of `folder` as a walk from it one level deep sees them (its parents' ignore
    /// files read as a walk from the start reads them).
    fn scan_children(
        &mut self,
        folder: &[u8],
        options: &SearchOptions,
    ) -> Result<Vec<(Vec<u8>, Meta)>, Untrusted> {
        let scanned = self.walk(folder, Some(1), options, false);
        if scanned.failed {
            return Err(Untrusted);
        }
        Ok(scanned.entries)
    }

    /// Walks from `folder` (down to `depth` below it, or all the way), watching each folder
    /// entered before its entries are read, and adds what it finds.
    fn scan(
        &mut self,
        folder: &[u8],
        depth: Option<usize>,
        options: &SearchOptions,
    ) -> Result<(), Untrusted> {
        let since = SystemTime::now()
            .checked_sub(RECENT)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let scanned = self.walk(folder, depth, options, true);
        if scanned.failed {
            return Err(Untrusted);
        }
        for (key, meta) in scanned.entries {
            self.entries.insert(key, meta);
        }
        for (key, wd, new) in scanned.dirs {
            self.watch.record(wd, key.clone());
            if new {
                // Read before its watch was added: changed since the walk began, it is read
                // again (its rule files: the tree is built again).
                self.check_recent(&key, since);
            }
        }
        if self.entries.len() > MAX_ENTRIES {
            return Err(Untrusted);
        }
        Ok(())
    }

    fn check_recent(&mut self, key: &[u8], since: SystemTime) {
        let path = self.path(key);
        let changed = |p: &Path| {
            std::fs::symlink_metadata(p).map(|m| {
                let ctime = SystemTime::UNIX_EPOCH
                    + Duration::new(m.ctime().max(0) as u64, m.ctime_nsec().max(0) as u32);
                ctime >= since
            })
        };
        if changed(&path).unwrap_or(true) {
            self.pending.insert(key.to_vec());
        }
        for name in RULE_NAMES {
            match changed(&path.join(std::ffi::OsStr::from_bytes(name))) {
                Ok(false) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                _ => {
                    self.pending_trees.insert(key.to_vec());
                }
            }
        }
    }

    /// One walk from `folder`; with `watching`, each folder it enters is watched first.
    fn walk(
        &self,
        folder: &[u8],
        depth: Option<usize>,
        options: &SearchOptions,
        watching: bool,
    ) -> Scanned {
        let start = self.path(folder);
        let root_bytes = self.root.as_os_str().as_bytes();
        let shared = Mutex::new(Scanned {
            entries: Vec::new(),
            dirs: Vec::new(),
            failed: false,
        });
        let mut builder = walker(&start, options);
        builder.max_depth(depth).threads(options.threads);
        builder.build_parallel().run(|| {
            let mut mine = Local {
                scanned: Scanned {
                    entries: Vec::new(),
                    dirs: Vec::new(),
                    failed: false,
                },
                shared: &shared,
            };
            let watch = &self.watch;
            Box::new(move |entry| {
                let Ok(entry) = entry else {
                    // A folder that cannot be read: an index could not see it change.
                    mine.scanned.failed = true;
                    return WalkState::Quit;
                };
                let key = order_key(relative_bytes(root_bytes, entry.path()).to_vec());
                let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
                if watching && is_dir {
                    match watch.add(entry.path()) {
                        Ok(wd) => mine.scanned.dirs.push((key.clone(), wd, !watch.has(wd))),
                        Err(_) => {
                            mine.scanned.failed = true;
                            return WalkState::Quit;
                        }
                    }
                }
                if entry.depth() > 0 {
                    match entry.metadata() {
                        Ok(meta) => mine.scanned.entries.push((key, Meta::of(&meta))),
                        Err(_) => {
                            mine.scanned.failed = true;
                            return WalkState::Quit;
                        }
                    }
                }
                WalkState::Continue
            })
        });
        shared
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// One walking thread's finds, handed over when it is done.
struct Local<'a> {
    scanned: Scanned,
    shared: &'a Mutex<Scanned>,
}

impl Drop for Local<'_> {
    fn drop(&mut self) {
        if let Ok(mut shared) = self.shared.lock() {
            shared.entries.append(&mut self.scanned.entries);
            shared.dirs.append(&mut self.scanned.dirs);
            shared.failed |= self.scanned.failed;
        }
    }
}

/// How deep `key` is below the start (1 for its own entries, 0 for the start).
pub(super) fn depth_of(key: &[u8]) -> usize {
    if key.is_empty() {
        0
    } else {
        key.iter().filter(|&&b| b == 0).count() + 1
    }
}

/// The folder `key` is in.
fn parent_key(key: &[u8]) -> &[u8] {
    match key.iter().rposition(|&b| b == 0) {
        Some(at) => key.get(..at).unwrap_or_default(),
        None => &[],
    }
}
