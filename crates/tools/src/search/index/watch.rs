//! The index's notifications: one inotify instance, a watch on each folder the walk entered
//! (added before the folder's entries are indexed) and on each folder above the start, read
//! without blocking at the start of each call, so every change finished before the call is in
//! hand when it is answered.

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsStr;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;

/// The names whose change changes what a walk keeps: the ignore files it reads and the `.git`
/// that makes a folder a work tree.
pub(super) const RULE_NAMES: [&[u8]; 4] = [b".gitignore", b".ignore", b".rgignore", b".git"];

/// What the events read since the last call say.
#[derive(Debug, Default)]
pub(super) struct Changes {
    /// The index cannot be trusted: the queue overflowed, the start or a folder above it went,
    /// or a rule file changed.
    pub invalid: bool,
    /// Folders (order keys) whose entries changed: read again.
    pub stale: BTreeSet<Vec<u8>>,
    /// Entries (order keys) whose content or metadata changed: looked up again.
    pub touched: BTreeSet<Vec<u8>>,
}

/// The inotify instance and what each watch stands for.
pub(super) struct Watch {
    fd: OwnedFd,
    /// Each folder of the tree watched, by its order key (empty: the start).
    dirs: HashMap<i32, Vec<u8>>,
    /// The same, by key.
    by_key: HashMap<Vec<u8>, i32>,
    /// The folders above the start, each with the name of the next one down.
    above: HashMap<i32, Vec<u8>>,
}

fn tree_flags() -> WatchFlags {
    WatchFlags::ATTRIB
        | WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MODIFY
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
        | WatchFlags::DONT_FOLLOW
        | WatchFlags::EXCL_UNLINK
}

impl Watch {
    /// A new instance watching each folder above `root` (a folder above that cannot be watched
    /// makes the index impossible: its rule files could change unseen).
    pub(super) fn new(root: &Path) -> std::io::Result<Watch> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
        let mut above = HashMap::new();
        let mut child = root;
        while let Some(parent) = child.parent() {
            let wd = inotify::add_watch(&fd, parent, tree_flags())?;
            let name = child.file_name().map_or(&[][..], OsStr::as_bytes);
            above.insert(wd, name.to_vec());
            child = parent;
        }
        Ok(Watch {
            fd,
            dirs: HashMap::new(),
            by_key: HashMap::new(),
            above,
        })
    }

    /// Adds a watch on the folder at `path` (thread-safe: the map is updated by [`Watch::record`]).
    pub(super) fn add(&self, path: &Path) -> std::io::Result<i32> {
        Ok(inotify::add_watch(&self.fd, path, tree_flags())?)
    }

    /// Whether `wd` already stands for a folder of the tree.
    pub(super) fn has(&self, wd: i32) -> bool {
        self.dirs.contains_key(&wd)
    }

    /// Records that `wd` watches the folder `key`.
    pub(super) fn record(&mut self, wd: i32, key: Vec<u8>) {
        if let Some(old) = self.by_key.insert(key.clone(), wd)
            && old != wd
        {
            self.dirs.remove(&old);
        }
        self.dirs.insert(wd, key);
    }

    /// Stops watching the folder `key`, if watched.
    pub(super) fn forget(&mut self, key: &[u8]) {
        if let Some(wd) = self.by_key.remove(key) {
            self.dirs.remove(&wd);
            // A folder already gone has lost its watch with it.
            let _ = inotify::remove_watch(&self.fd, wd);
        }
    }

    /// Reads every event queued, without blocking.
    pub(super) fn drain(&mut self) -> Changes {
        let mut changes = Changes::default();
        let mut buffer = [MaybeUninit::<u8>::uninit(); 64 * 1024];
        let mut reader = inotify::Reader::new(&self.fd, &mut buffer);
        loop {
            let event = match reader.next() {
                Ok(event) => event,
                Err(Errno::AGAIN) => return changes,
                Err(Errno::INTR) => continue,
                Err(_) => {
                    changes.invalid = true;
                    return changes;
                }
            };
            let flags = event.events();
            let name = event.file_name().map(|n| n.to_bytes());
            if flags.intersects(ReadFlags::QUEUE_OVERFLOW | ReadFlags::UNMOUNT) {
                changes.invalid = true;
                continue;
            }
            if let Some(next) = self.above.get(&event.wd()) {
                // Above the start: only its rule files and the way down to it count.
                let gone = flags
                    .intersects(ReadFlags::IGNORED | ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF);
                if gone || name.is_some_and(|n| n == next.as_slice() || RULE_NAMES.contains(&n)) {
                    changes.invalid = true;
                }
                continue;
            }
            let Some(key) = self.dirs.get(&event.wd()) else {
                // A watch already forgotten.
                continue;
            };
            if flags.contains(ReadFlags::IGNORED) && !key.is_empty() {
                // The folder went (its parent's events say so): its watch with it.
                let key = key.clone();
                if self.by_key.get(&key) == Some(&event.wd()) {
                    self.by_key.remove(&key);
                }
                self.dirs.remove(&event.wd());
                continue;
            }
            let Some(name) = name else {
                if key.is_empty()
                    && flags.intersects(
                        ReadFlags::IGNORED | ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF,
                    )
                {
                    changes.invalid = true;
                } else if flags.contains(ReadFlags::ATTRIB) {
                    // Its own permissions: what can be listed may have changed.
                    changes.stale.insert(key.clone());
                    changes.touched.insert(key.clone());
                }
                continue;
            };
            if RULE_NAMES.contains(&name) {
                changes.invalid = true;
                continue;
            }
            let child = child_key(key, name);
            if flags.intersects(
                ReadFlags::CREATE | ReadFlags::DELETE | ReadFlags::MOVED_FROM | ReadFlags::MOVED_TO,
            ) {
                changes.stale.insert(key.clone());
            }
            if flags.intersects(ReadFlags::MODIFY | ReadFlags::ATTRIB) {
                changes.touched.insert(child);
            }
        }
    }
}

/// The order key of `name` in the folder `key` (NUL between components).
pub(super) fn child_key(key: &[u8], name: &[u8]) -> Vec<u8> {
    let mut child = Vec::with_capacity(key.len() + 1 + name.len());
    if !key.is_empty() {
        child.extend_from_slice(key);
        child.push(0);
    }
    child.extend_from_slice(name);
    child
}
