//! A trusted place as it was, to put back: how a box of Landlock alone keeps a place without
//! taking new files from the folder that holds it (Landlock grants a folder whole, so leaving
//! `.git/config` out of its write rules would leave `.git` without `index.lock`: no `git
//! add`). A place small enough ([`MAX_BYTES`], [`MAX_ENTRIES`]) is recorded before the call
//! (links as links, files with their bytes and mode, folders with what they hold) and, if the
//! box changed it, what the box left is moved aside and the record put back once the box has
//! ended. A larger place is left out of Landlock's write rules instead.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The most bytes a place's files may hold to be recorded.
pub(super) const MAX_BYTES: u64 = 1 << 20;
/// The most entries a place may hold to be recorded.
pub(super) const MAX_ENTRIES: usize = 512;

/// One entry of a recorded place.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    File {
        bytes: Vec<u8>,
        mode: u32,
    },
    Link(PathBuf),
    Folder {
        mode: u32,
        entries: Vec<(OsString, Node)>,
    },
}

/// A place as it was before a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Snapshot {
    place: PathBuf,
    node: Node,
}

impl Snapshot {
    /// `place` as it is now, or `None` when it is too large to record (or cannot be read).
    pub(super) fn take(place: &Path) -> Option<Snapshot> {
        let mut budget = (MAX_BYTES, MAX_ENTRIES);
        Some(Snapshot {
            place: place.to_path_buf(),
            node: record(place, &mut budget)?,
        })
    }

    /// Whether the place is still as recorded; if not, moves what is there aside (with
    /// `aside`) and puts the record back: the place, and where its changed form went.
    pub(super) fn restore(
        &self,
        aside: impl Fn(&Path) -> std::io::Result<PathBuf>,
    ) -> Option<Result<PathBuf, String>> {
        let mut budget = (MAX_BYTES.saturating_mul(4), MAX_ENTRIES.saturating_mul(4));
        let now = record(&self.place, &mut budget);
        if now.as_ref() == Some(&self.node) {
            return None;
        }
        let moved = if self.place.symlink_metadata().is_ok() {
            match aside(&self.place) {
                Ok(to) => Some(to),
                Err(e) => return Some(Err(format!("cannot move it aside: {e}"))),
            }
        } else {
            None
        };
        if let Err(e) = write(&self.place, &self.node) {
            return Some(Err(format!("cannot put it back: {e}")));
        }
        Some(Ok(moved.unwrap_or_default()))
    }

    /// The place.
    pub(super) fn place(&self) -> &Path {
        &self.place
    }

    /// Whether `place` is small enough to record, by its metadata alone.
    pub(super) fn fits(place: &Path) -> bool {
        fn walk(path: &Path, budget: &mut (u64, usize)) -> Option<()> {
            budget.1 = budget.1.checked_sub(1)?;
            let meta = path.symlink_metadata().ok()?;
            if meta.is_file() {
                budget.0 = budget.0.checked_sub(meta.len())?;
            } else if meta.is_dir() {
                for entry in std::fs::read_dir(path).ok()? {
                    walk(&entry.ok()?.path(), budget)?;
                }
            } else if !meta.file_type().is_symlink() {
                return None;
            }
            Some(())
        }
        walk(place, &mut (MAX_BYTES, MAX_ENTRIES)).is_some()
    }
}

fn record(path: &Path, budget: &mut (u64, usize)) -> Option<Node> {
    budget.1 = budget.1.checked_sub(1)?;
    let meta = path.symlink_metadata().ok()?;
    let mode = meta.permissions().mode() & 0o7777;
    if meta.file_type().is_symlink() {
        return Some(Node::Link(std::fs::read_link(path).ok()?));
    }
    if meta.is_file() {
        budget.0 = budget.0.checked_sub(meta.len())?;
        return Some(Node::File {
            bytes: std::fs::read(path).ok()?,
            mode,
        });
    }
    if meta.is_dir() {
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(path).ok()? {
            let entry = entry.ok()?;
            let node = record(&entry.path(), budget)?;
            entries.push((entry.file_name(), node));
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        return Some(Node::Folder { mode, entries });
    }
    // A socket, a fifo or a device: not a place's content; not recorded.
    None
}

fn write(path: &Path, node: &Node) -> std::io::Result<()> {
    match node {
        Node::Link(target) => std::os::unix::fs::symlink(target, path),
        Node::File { bytes, mode } => {
            std::fs::write(path, bytes)?;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(*mode))
        }
        Node::Folder { mode, entries } => {
            std::fs::create_dir(path)?;
            for (name, node) in entries {
                write(&path.join(name), node)?;
            }
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(*mode))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_place_is_moved_aside_and_put_back_as_it_was_in_every_cell() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_path_buf();
        let aside_dir = base.join("aside");
        std::fs::create_dir(&aside_dir).unwrap();
        let n = std::sync::atomic::AtomicUsize::new(0);
        let aside = |p: &Path| {
            let to = aside_dir.join(
                n.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                    .to_string(),
            );
            std::fs::rename(p, &to).map(|()| to)
        };
        let file = base.join("gitconfig");
        std::fs::write(&file, "[user]\n").unwrap();
        let link = base.join("link");
        std::os::unix::fs::symlink("gitconfig", &link).unwrap();
        let folder = base.join("hooks");
        std::fs::create_dir(&folder).unwrap();
        std::fs::write(folder.join("pre-commit"), "exit 0\n").unwrap();
        let shots: Vec<Snapshot> = [&file, &link, &folder]
            .iter()
            .map(|p| Snapshot::take(p).unwrap())
            .collect();
        assert!(
            shots.iter().all(|s| s.restore(aside).is_none()),
            "unchanged"
        );
        std::fs::remove_file(&link).unwrap();
        std::fs::write(&link, "[core]\n\tpager = evil\n").unwrap();
        std::fs::write(&file, "[core]\n\tpager = evil\n").unwrap();
        std::fs::write(folder.join("post-checkout"), "evil\n").unwrap();
        for shot in &shots {
            assert!(matches!(shot.restore(aside), Some(Ok(_))), "{shot:?}");
            assert!(shot.restore(aside).is_none(), "as it was: {shot:?}");
        }
        assert_eq!(
            std::fs::read_link(&link).unwrap(),
            PathBuf::from("gitconfig")
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "[user]\n");
        assert!(!folder.join("post-checkout").exists());
        assert_eq!(std::fs::read_dir(&aside_dir).unwrap().count(), 3);
        // Too large to record: left to Landlock.
        let big = base.join("big");
        std::fs::write(&big, vec![0u8; (MAX_BYTES + 1) as usize]).unwrap();
        assert!(Snapshot::take(&big).is_none());
    }
}
