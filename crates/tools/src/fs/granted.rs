//! The folder a call was granted, held open, and the files below it opened through that
//! descriptor.
//!
//! The broker decides on resolved paths; a tool opens them later. A folder swapped for a
//! symbolic link in between would send the tool elsewhere, so the check and the use are tied:
//! the granted folder is opened refusing any symbolic link on its way (`RESOLVE_NO_SYMLINKS`),
//! and every file below it is opened from that descriptor refusing to leave it or to follow a
//! link (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`). A link planted after the decision makes the
//! call fail; it never redirects it.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags, ResolveFlags, openat2};
use rustix::io::Errno;

use super::FileError;

/// A folder a call may reach, held open from the moment it was checked.
#[derive(Debug)]
pub struct GrantedDir {
    fd: OwnedFd,
    path: PathBuf,
}

/// How every open below a granted folder walks: never above it, never through a link.
const BENEATH: ResolveFlags = ResolveFlags::BENEATH
    .union(ResolveFlags::NO_SYMLINKS)
    .union(ResolveFlags::NO_MAGICLINKS);

impl GrantedDir {
    /// Opens the folder at `path`, an absolute path without symbolic links (as the decision
    /// resolved it); a link anywhere on the way is refused ([`FileError::Moved`]).
    pub fn open(path: &Path) -> Result<GrantedDir, FileError> {
        let shown = path.display().to_string();
        if !path.is_absolute() {
            return Err(FileError::NotAbsolute(shown));
        }
        let fd = openat2(
            rustix::fs::CWD,
            path,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        )
        .map_err(|e| walk_error(&shown, e))?;
        Ok(GrantedDir {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// The folder to hold for a call on `target` granted through `base`: `base` itself, or
    /// the folder that holds it when the grant names the target file itself. A call on the
    /// granted folder itself holds that folder, never its parent: the folders above a grant
    /// may be out of reach (in a box, they are).
    pub fn for_target(base: &Path, target: &Path) -> Result<GrantedDir, FileError> {
        if base != target {
            return GrantedDir::open(base);
        }
        // Not a folder (a file, a link the tool refuses by name, or a file a write is to
        // make): held through its folder.
        match GrantedDir::open(base) {
            Err(FileError::NotFound(_) | FileError::Moved(_)) => {}
            Err(FileError::Io { source, .. })
                if source.raw_os_error() == Some(Errno::NOTDIR.raw_os_error()) => {}
            held => return held,
        }
        let parent = target.parent().ok_or_else(|| FileError::NotAFile {
            path: target.display().to_string(),
            kind: "a directory",
        })?;
        GrantedDir::open(parent)
    }

    /// The folder's path, as it was checked.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The descriptor of the folder.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// `target` relative to this folder: [`FileError::Outside`] when it is not below it,
    /// [`FileError::NotAFile`] when it is the folder itself.
    pub fn relative<'a>(&self, target: &'a Path) -> Result<&'a Path, FileError> {
        match target.strip_prefix(&self.path) {
            Ok(rest) if !rest.as_os_str().is_empty() => Ok(rest),
            // The folder itself, as a file tool's target.
            Ok(_) => Err(FileError::NotAFile {
                path: target.display().to_string(),
                kind: "a directory",
            }),
            Err(_) => Err(FileError::Outside {
                path: target.display().to_string(),
                folder: self.path.display().to_string(),
            }),
        }
    }

    /// Opens `relative` below this folder with `flags`, without leaving it or following a link.
    pub(crate) fn open_beneath(
        &self,
        relative: &Path,
        flags: OFlags,
        mode: Mode,
        shown: &str,
    ) -> Result<OwnedFd, FileError> {
        openat2(&self.fd, relative, flags | OFlags::CLOEXEC, mode, BENEATH)
            .map_err(|e| walk_error(shown, e))
    }
}

/// An `openat2` failure as a file error naming `shown`.
pub(crate) fn walk_error(shown: &str, errno: Errno) -> FileError {
    match errno {
        Errno::NOENT => FileError::NotFound(shown.to_string()),
        // A symbolic link on the way (ELOOP) or a step out of the folder (EXDEV): the tree
        // changed since the decision.
        Errno::LOOP | Errno::XDEV => FileError::Moved(shown.to_string()),
        other => FileError::Io {
            path: shown.to_string(),
            source: io::Error::from(other),
        },
    }
}
