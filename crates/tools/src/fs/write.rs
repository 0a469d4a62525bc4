//! `write_file` on a granted folder's descriptor: the temporary file is made, synced and renamed
//! in the folder opened beneath the grant, so the file replaced is the one the decision saw.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

use super::{DIFF_LIMIT, FileError, GrantedDir, WriteFileArgs, WriteFileResult, absolute};

/// Replaces the file at `args.path`, below `dir`, with `args.content`, atomically: a temporary
/// file in the same folder, synced, given the old file's permissions and owner, renamed over
/// it, and the folder synced. A reader sees the old content or the new, never a mix; a failure
/// leaves the old file as it was and no temporary file behind.
pub fn write_file(dir: &GrantedDir, args: &WriteFileArgs) -> Result<WriteFileResult, FileError> {
    let shown = args.path.as_str();
    let target = Target::open(dir, shown)?;
    let previous_size = target.previous_size();
    let old = match previous_size {
        Some(size) if size <= DIFF_LIMIT as u64 => target.read_old(DIFF_LIMIT as u64 + 1),
        _ => None,
    };
    let diff = super::diff::diff_of(shown, previous_size, old, &args.content);
    target.replace(args.content.as_bytes(), shown)?;
    Ok(WriteFileResult {
        path: args.path.clone(),
        bytes: args.content.len() as u64,
        created: previous_size.is_none(),
        previous_size,
        diff,
    })
}

/// A file about to be replaced: its folder held open beneath the grant, its name in it, and
/// what was there (a regular file, or nothing).
pub(crate) struct Target {
    folder: OwnedFd,
    name: std::ffi::OsString,
    previous: Option<Stat>,
}

impl Target {
    /// Opens the folder of `shown` (an absolute path below `dir`) and looks at what is there:
    /// nothing, or a regular file; a link, a directory or a device is refused.
    pub(crate) fn open(dir: &GrantedDir, shown: &str) -> Result<Target, FileError> {
        let path = absolute(shown)?;
        let relative = dir.relative(&path)?;
        let (Some(name), Some(parent)) = (relative.file_name(), relative.parent()) else {
            return Err(FileError::NotAFile {
                path: shown.to_string(),
                kind: "a directory",
            });
        };
        let folder = open_folder(dir, parent, shown)?;
        let previous = match rustix::fs::statat(&folder, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Some(stat),
            Err(Errno::NOENT) => None,
            Err(e) => return Err(io_error(shown, e)),
        };
        if let Some(stat) = &previous {
            match FileType::from_raw_mode(stat.st_mode) {
                FileType::RegularFile => {}
                FileType::Symlink => return Err(FileError::Symlink(shown.to_string())),
                other => {
                    return Err(FileError::NotAFile {
                        path: shown.to_string(),
                        kind: kind_name(other),
                    });
                }
            }
        }
        Ok(Target {
            folder,
            name: name.to_os_string(),
            previous,
        })
    }

    /// The size of the file there before, when there was one.
    pub(crate) fn previous_size(&self) -> Option<u64> {
        self.previous.as_ref().map(|s| s.st_size as u64)
    }

    /// The current content, at most `limit` bytes of it, without following a link.
    pub(crate) fn read_old(&self, limit: u64) -> Option<Vec<u8>> {
        read_old(&self.folder, &self.name, limit)
    }

    /// Replaces the file with `bytes`, atomically: a temporary file in the same folder, synced,
    /// given the old file's permissions and owner, renamed over it, and the folder synced.
    pub(crate) fn replace(&self, bytes: &[u8], shown: &str) -> Result<(), FileError> {
        let mode = self.previous.as_ref().map_or(0o644, |s| s.st_mode & 0o7777);
        let temp = temporary_name(&self.name);
        let written = write_temp(&self.folder, &temp, bytes, mode, self.previous.as_ref())
            .and_then(|()| {
                rustix::fs::renameat(&self.folder, temp.as_str(), &self.folder, &self.name)
            });
        if let Err(error) = written {
            let _ = rustix::fs::unlinkat(&self.folder, temp.as_str(), AtFlags::empty());
            return Err(io_error(shown, error));
        }
        // The rename is durable once the folder is synced.
        let _ = rustix::fs::fsync(&self.folder);
        Ok(())
    }
}

fn open_folder(dir: &GrantedDir, parent: &Path, shown: &str) -> Result<OwnedFd, FileError> {
    let flags = OFlags::DIRECTORY | OFlags::RDONLY;
    let opened = if parent.as_os_str().is_empty() {
        dir.open_beneath(Path::new("."), flags, Mode::empty(), shown)
    } else {
        dir.open_beneath(parent, flags, Mode::empty(), shown)
    };
    opened.map_err(|e| match e {
        FileError::NotFound(_) => FileError::NoFolder(shown.to_string()),
        FileError::Io { source, .. } if source.raw_os_error() == Some(libc::ENOTDIR) => {
            FileError::NoFolder(shown.to_string())
        }
        other => other,
    })
}

fn read_old(folder: &OwnedFd, name: &OsStr, limit: u64) -> Option<Vec<u8>> {
    let fd = rustix::fs::openat(
        folder,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let mut bytes = Vec::new();
    File::from(fd).take(limit).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

fn write_temp(
    folder: &OwnedFd,
    temp: &str,
    bytes: &[u8],
    mode: u32,
    previous: Option<&Stat>,
) -> Result<(), Errno> {
    let fd = rustix::fs::openat(
        folder,
        temp,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let mut file = File::from(fd);
    file.write_all(bytes)
        .map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::IO))?;
    if let Some(stat) = previous {
        // Keep the owner and group when allowed to (root writing someone's file).
        let _ = rustix::fs::fchown(
            file.as_fd(),
            Some(rustix::fs::Uid::from_raw(stat.st_uid)),
            Some(rustix::fs::Gid::from_raw(stat.st_gid)),
        );
    }
    rustix::fs::fchmod(file.as_fd(), Mode::from_raw_mode(mode))?;
    rustix::fs::fsync(file.as_fd())
}

/// `.<name>.boxmaker-<pid>-<n>.tmp`, unique within this process.
fn temporary_name(name: &OsStr) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!(
        ".{}.boxmaker-{}-{n}.tmp",
        name.to_string_lossy(),
        std::process::id()
    )
}

fn kind_name(kind: FileType) -> &'static str {
    match kind {
        FileType::Directory => "a directory",
        FileType::Fifo => "a pipe",
        FileType::Socket => "a socket",
        FileType::BlockDevice | FileType::CharacterDevice => "a device",
        FileType::Symlink => "a symbolic link",
        _ => "not a regular file",
    }
}

fn io_error(shown: &str, errno: Errno) -> FileError {
    FileError::Io {
        path: shown.to_string(),
        source: std::io::Error::from(errno),
    }
}

/// The whole content of the regular file at `shown` below `dir` (at most `limit` bytes), or
/// `None` when nothing is there: reached as `write_file` and `edit_file` reach it (its folder
/// opened beneath the grant, the file itself never through a link). The broker hashes it for
/// read before write.
pub fn current_content(
    dir: &GrantedDir,
    shown: &str,
    limit: u64,
) -> Result<Option<Vec<u8>>, FileError> {
    let target = Target::open(dir, shown)?;
    match target.previous_size() {
        None => Ok(None),
        Some(_) => target
            .read_old(limit)
            .map(Some)
            .ok_or_else(|| FileError::Moved(shown.to_string())),
    }
}
