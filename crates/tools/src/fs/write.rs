//! `write_file` on a granted folder's descriptor: the temporary file is made, synced and renamed
//! in the folder opened beneath the grant, so the file replaced is the one the decision saw.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;
use sha2::{Digest, Sha256};

use super::{
    DIFF_LIMIT, Expected, FileError, GrantedDir, WriteFileArgs, WriteFileResult, absolute,
};

/// Replaces the file at `args.path`, below `dir`, with `args.content`, atomically: a temporary
/// file in the same folder, synced, given the old file's permissions and owner, renamed over
/// it, and the folder synced. A reader sees the old content or the new, never a mix; a failure
/// leaves the old file as it was and no temporary file behind.
pub fn write_file(dir: &GrantedDir, args: &WriteFileArgs) -> Result<WriteFileResult, FileError> {
    write_file_expecting(dir, args, None)
}

/// [`write_file`], refused with [`FileError::Unread`] unless the file it replaces is what
/// `expected` says (read before write), checked on the descriptor it reads the old file
/// through and again just before the rename.
pub fn write_file_expecting(
    dir: &GrantedDir,
    args: &WriteFileArgs,
    expected: Option<&Expected>,
) -> Result<WriteFileResult, FileError> {
    let shown = args.path.as_str();
    let target = Target::open(dir, shown)?;
    target.check(expected, None, shown)?;
    let previous_size = target.previous_size();
    let old = match previous_size {
        Some(size) if size <= DIFF_LIMIT as u64 => target.read_old(DIFF_LIMIT as u64 + 1),
        _ => None,
    };
    let diff = super::diff::diff_of(shown, previous_size, old, &args.content);
    target.replace(args.content.as_bytes(), shown, expected.is_some())?;
    Ok(WriteFileResult {
        path: args.path.clone(),
        bytes: args.content.len() as u64,
        created: previous_size.is_none(),
        previous_size,
        diff,
    })
}

/// A file about to be replaced: its folder held open beneath the grant, its name in it, and
/// what was there (a regular file, held open, or nothing).
pub(crate) struct Target {
    folder: OwnedFd,
    name: std::ffi::OsString,
    previous: Option<Stat>,
    /// The file that was there, opened without following a link: what is read, hashed and
    /// compared is this descriptor's content.
    held: Option<File>,
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
        let mut held = None;
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
            let fd = rustix::fs::openat(
                &folder,
                name,
                OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| match e {
                Errno::LOOP | Errno::NOENT => FileError::Moved(shown.to_string()),
                e => io_error(shown, e),
            })?;
            let opened = rustix::fs::fstat(&fd).map_err(|e| io_error(shown, e))?;
            if !same_file(&opened, stat) {
                return Err(FileError::Moved(shown.to_string()));
            }
            held = Some(File::from(fd));
        }
        Ok(Target {
            folder,
            name: name.to_os_string(),
            previous,
            held,
        })
    }

    /// Read before write: whether the file held is what `expected` says. `content` is its
    /// whole content when the caller has already read it through [`Target::read_old`];
    /// otherwise the descriptor is read to hash it.
    pub(crate) fn check(
        &self,
        expected: Option<&Expected>,
        content: Option<&[u8]>,
        shown: &str,
    ) -> Result<(), FileError> {
        let unread = |why| FileError::Unread {
            path: shown.to_string(),
            why,
        };
        match (expected, &self.held) {
            (None, _) | (Some(Expected::Absent), None) => Ok(()),
            (Some(Expected::Absent), Some(_)) => Err(unread(
                "appeared after the call was decided, and this session has not read it",
            )),
            // The file the session read is gone: the write creates a new one, losing nothing.
            (Some(Expected::Sha256(_)), None) => Ok(()),
            (Some(Expected::Sha256(seen)), Some(file)) => {
                let now = match content {
                    Some(bytes) => sha256_hex(bytes),
                    None => hash_from_start(file).map_err(|e| FileError::Io {
                        path: shown.to_string(),
                        source: e,
                    })?,
                };
                if &now == seen {
                    Ok(())
                } else {
                    Err(unread("changed since this session last read it"))
                }
            }
        }
    }

    /// Whether the name still holds the very file checked, unchanged since it was opened (or
    /// still nothing): the last look before the rename.
    fn unchanged(&self, shown: &str) -> Result<(), FileError> {
        let unread = |why| FileError::Unread {
            path: shown.to_string(),
            why,
        };
        let now = match rustix::fs::statat(&self.folder, &self.name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Some(stat),
            Err(Errno::NOENT) => None,
            Err(e) => return Err(io_error(shown, e)),
        };
        match (&self.previous, &self.held, now) {
            (None, _, None) => Ok(()),
            (None, _, Some(_)) => Err(unread(
                "appeared while it was being written, and this session has not read it",
            )),
            (Some(_), _, None) => Err(unread("was removed while it was being written")),
            (Some(before), Some(file), Some(now)) => {
                let held = rustix::fs::fstat(file).map_err(|e| io_error(shown, e))?;
                if same_file(before, &now) && unmodified(before, &held) {
                    Ok(())
                } else {
                    Err(unread("changed while it was being written"))
                }
            }
            (Some(_), None, Some(_)) => Err(FileError::Moved(shown.to_string())),
        }
    }

    /// The size of the file there before, when there was one.
    pub(crate) fn previous_size(&self) -> Option<u64> {
        self.previous.as_ref().map(|s| s.st_size as u64)
    }

    /// The content of the file held, at most `limit` bytes of it.
    pub(crate) fn read_old(&self, limit: u64) -> Option<Vec<u8>> {
        let mut file = self.held.as_ref()?;
        file.seek(SeekFrom::Start(0)).ok()?;
        let mut bytes = Vec::new();
        file.take(limit).read_to_end(&mut bytes).ok()?;
        Some(bytes)
    }

    /// Replaces the file with `bytes`, atomically: a temporary file in the same folder, synced,
    /// given the old file's permissions and owner, renamed over it, and the folder synced.
    /// `guard` (read before write) first makes sure the name still holds the file checked,
    /// unchanged.
    pub(crate) fn replace(&self, bytes: &[u8], shown: &str, guard: bool) -> Result<(), FileError> {
        let mode = self.previous.as_ref().map_or(0o644, |s| s.st_mode & 0o7777);
        let temp = temporary_name(&self.name);
        if let Err(error) = write_temp(&self.folder, &temp, bytes, mode, self.previous.as_ref()) {
            let _ = rustix::fs::unlinkat(&self.folder, temp.as_str(), AtFlags::empty());
            return Err(io_error(shown, error));
        }
        if guard && let Err(refused) = self.unchanged(shown) {
            let _ = rustix::fs::unlinkat(&self.folder, temp.as_str(), AtFlags::empty());
            return Err(refused);
        }
        if let Err(error) =
            rustix::fs::renameat(&self.folder, temp.as_str(), &self.folder, &self.name)
        {
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

/// The SHA-256 of `bytes` in lower-case hex: the content hash read before write compares.
pub use proto::ids::sha256_hex;

/// The SHA-256 of a file's first `limit` bytes, fed block by block as a read goes.
pub(crate) struct PrefixHash {
    hasher: Sha256,
    left: u64,
}

impl PrefixHash {
    /// A hash of at most `limit` bytes.
    pub(crate) fn new(limit: u64) -> PrefixHash {
        PrefixHash {
            hasher: Sha256::new(),
            left: limit,
        }
    }

    /// Adds the next bytes read (those past the limit are left out).
    pub(crate) fn update(&mut self, bytes: &[u8]) {
        let take = usize::try_from(self.left)
            .unwrap_or(usize::MAX)
            .min(bytes.len());
        // Cannot panic: `take` is at most the length.
        self.hasher.update(&bytes[..take]);
        self.left -= take as u64;
    }

    /// Whether more bytes would still count.
    pub(crate) fn wants_more(&self) -> bool {
        self.left > 0
    }

    /// The digest in lower-case hex ([`sha256_hex`]'s digits).
    pub(crate) fn finish(self) -> String {
        proto::ids::hex(&self.hasher.finalize())
    }
}

/// The SHA-256 of the whole content of `file`, read from its start.
fn hash_from_start(mut file: &File) -> std::io::Result<String> {
    file.seek(SeekFrom::Start(0))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            return Ok(proto::ids::hex(&hasher.finalize()));
        }
        // Invariant: `Read::read` returns at most the buffer's length.
        hasher.update(&buffer[..n]);
    }
}

/// Whether two looks saw the same file (device and inode).
fn same_file(a: &Stat, b: &Stat) -> bool {
    a.st_dev == b.st_dev && a.st_ino == b.st_ino
}

/// Whether a file's size and change times are what they were.
fn unmodified(before: &Stat, now: &Stat) -> bool {
    before.st_size == now.st_size
        && before.st_mtime == now.st_mtime
        && before.st_mtime_nsec == now.st_mtime_nsec
        && before.st_ctime == now.st_ctime
        && before.st_ctime_nsec == now.st_ctime_nsec
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
