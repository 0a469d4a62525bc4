//! The files and folders a box may read and run but never change ([`crate::Policy::pinned`]),
//! where a read-write path holds them: what bubblewrap binds to keep them so, and what a box
//! without it leaves out of Landlock's write rules.
//!
//! A place is kept as spelled, never through its target alone: a symbolic link's entry lives
//! in its folder, and a bind mount cannot be put on a link itself, so a place that is a link,
//! or has one on its way below a read-write path, cannot be kept from being replaced there:
//! the box refuses to start ([`PinError::Link`]). What a kept place names (its target, and
//! the targets of links inside a kept folder) is kept too where a read-write path holds it.

use std::path::{Path, PathBuf};

/// How deep below a kept folder links are looked for, and how many entries at most.
const SCAN_DEPTH: usize = 2;
const SCAN_ENTRIES: usize = 2048;

/// A policy's pinned places that lie in a read-write path, and the folders between each and
/// that path. Each folder is bound onto itself (still read-write) before the place is bound
/// read-only: a mount point cannot be renamed or removed, so the box cannot move a pinned
/// place's folder aside and put one of its own in its place, which a read-only place alone
/// would allow.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Pinned {
    /// Outermost first, each once.
    pub(crate) folders: Vec<PathBuf>,
    /// Each once; files and folders, none inside another.
    pub(crate) files: Vec<PathBuf>,
}

/// Why a pinned place cannot be kept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinError {
    /// The place is a symbolic link, or one lies on its way, whose entry is in a read-write
    /// folder: the box could replace the link.
    #[error(
        "{place} must end the call as it began, but {link} is a symbolic link in the read-write folder {root}, and a box cannot keep a link from being replaced; grant folders below {root} that do not hold {link} instead of {root} itself, or replace the link by what it names"
    )]
    Link {
        /// The place to keep, as spelled.
        place: PathBuf,
        /// The link: the place itself or a folder on its way.
        link: PathBuf,
        /// The innermost read-write path holding it.
        root: PathBuf,
    },
}

impl Pinned {
    /// The pinned places of `pinned` (absolute, as spelled) in one of `writable` (resolved
    /// read-write paths), each with what it names where a read-write path holds that; a place
    /// that does not exist has nothing to keep.
    pub(crate) fn under(pinned: &[PathBuf], writable: &[PathBuf]) -> Result<Pinned, PinError> {
        let mut places: Vec<(PathBuf, PathBuf)> = Vec::new();
        let mut queue: Vec<PathBuf> = pinned.to_vec();
        let mut scanned = 0usize;
        while let Some(place) = queue.pop() {
            if let Ok(real) = std::fs::canonicalize(&place)
                && real != place
            {
                queue.push(real);
            }
            let Some(root) = innermost(&place, writable) else {
                continue;
            };
            if let Some(link) = link_on_the_way(&place, &root) {
                return Err(PinError::Link { place, link, root });
            }
            if place.symlink_metadata().is_err() || places.iter().any(|(p, _)| *p == place) {
                continue;
            }
            if place.is_dir() {
                // A link inside a kept folder cannot change, what it names can.
                for target in linked_from(&place, &mut scanned) {
                    queue.push(target);
                }
            }
            places.push((place, root));
        }
        places.sort();
        let mut out = Pinned::default();
        for (place, root) in &places {
            // Inside another kept folder: read-only with it already.
            if places
                .iter()
                .any(|(other, _)| other != place && place.starts_with(other))
            {
                continue;
            }
            let mut between: Vec<PathBuf> = place
                .ancestors()
                .skip(1)
                .take_while(|folder| folder != root)
                .map(Path::to_path_buf)
                .collect();
            between.reverse();
            for folder in between {
                if !out.folders.contains(&folder) {
                    out.folders.push(folder);
                }
            }
            out.files.push(place.clone());
        }
        // Outermost first.
        out.folders.sort_by_key(|f| f.components().count());
        Ok(out)
    }
}

/// For a runtime other than bubblewrap (a container's volumes): the folders to bind onto
/// themselves read-write and then the places to bind read-only over themselves, so that
/// `pinned` (absolute, as spelled) ends a run as it began where `writable` (resolved) holds
/// them; or why one cannot be kept ([`PinError::Link`]).
pub fn pinned_mounts(
    pinned: &[PathBuf],
    writable: &[PathBuf],
) -> Result<(Vec<PathBuf>, Vec<PathBuf>), PinError> {
    let kept = Pinned::under(pinned, writable)?;
    Ok((kept.folders, kept.files))
}

/// The innermost read-write path holding `place` below its top (a bind's root is a mount
/// point already).
fn innermost(place: &Path, writable: &[PathBuf]) -> Option<PathBuf> {
    writable
        .iter()
        .filter(|rw| place.starts_with(rw) && place != rw.as_path())
        .max_by_key(|rw| rw.as_os_str().len())
        .cloned()
}

/// The first symbolic link from below `root` down to `place` itself, if any.
fn link_on_the_way(place: &Path, root: &Path) -> Option<PathBuf> {
    let rest = place.strip_prefix(root).ok()?;
    let mut walked = root.to_path_buf();
    for name in rest.iter() {
        walked.push(name);
        match walked.symlink_metadata() {
            Ok(meta) if meta.file_type().is_symlink() => return Some(walked),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

/// What the links in `folder` (to [`SCAN_DEPTH`] levels, [`SCAN_ENTRIES`] entries in all)
/// name, resolved.
fn linked_from(folder: &Path, scanned: &mut usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut level = vec![folder.to_path_buf()];
    for _ in 0..SCAN_DEPTH {
        let mut next = Vec::new();
        for dir in &level {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            for entry in entries.flatten() {
                *scanned += 1;
                if *scanned > SCAN_ENTRIES {
                    return out;
                }
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if kind.is_symlink() {
                    if let Ok(target) = std::fs::canonicalize(entry.path()) {
                        out.push(target);
                    }
                } else if kind.is_dir() {
                    next.push(entry.path());
                }
            }
        }
        level = next;
    }
    out
}

#[cfg(test)]
mod tests;
