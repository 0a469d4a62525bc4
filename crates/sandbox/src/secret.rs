//! Files that hold a secret (a bearer token, a session's resume token): the one check every
//! reader makes and the one way every writer creates them.
//!
//! Read ([`read_secret`]): refused, as ssh refuses a key, when the file's group or others may
//! read or write it, or when another user owns it, with the `chmod 600 PATH` (or `chown`) that
//! fixes it. The check is made on the file opened (`fstat`), so what is checked is what is
//! read.
//!
//! Written ([`write_secret`], [`create_secret`]): a new file of the folder, created mode 0600
//! with `O_EXCL` (whatever the umask adds, never more; no moment at 0644), written, synced,
//! then renamed over the place (or linked to it when nothing may be replaced), so the place
//! holds the old secret or the new one, whole, and never a readable one.

use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Why a secret file was refused or could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// Its group or others may read or write it.
    #[error(
        "{} holds a secret but can be {} by other users (mode {mode:04o}); run: chmod 600 {}",
        .path.display(),
        exposure(*.mode),
        shell_word(.path)
    )]
    Exposed {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// Another user owns it.
    #[error(
        "{} holds a secret but is owned by uid {owner}, not by this user (uid {you}); make it yours (as root: chown {you} {}) or write a file of your own",
        .path.display(),
        shell_word(.path)
    )]
    NotYours {
        /// The file.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// This process's effective uid.
        you: u32,
    },
    /// It is not a regular file.
    #[error("{} holds a secret but is not a regular file", .path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// It cannot be opened, read or written.
    #[error("cannot {action} {}: {source}", .path.display())]
    Io {
        /// "read", "write" or "create".
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

impl SecretError {
    /// Whether the file does not exist (a reader may treat that as "none kept").
    pub fn is_not_found(&self) -> bool {
        matches!(self, SecretError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

/// The whole of the secret file at `path`, as text, once [`check_secret`] passed on the file
/// opened.
pub fn read_secret(path: &Path) -> Result<String, SecretError> {
    let io = |source| SecretError::Io {
        action: "read",
        path: path.to_path_buf(),
        source,
    };
    let mut file = File::open(path).map_err(io)?;
    check_secret(path, &file.metadata().map_err(io)?)?;
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(io)?;
    Ok(text)
}

/// Whether `meta` (of the file at `path`) may hold a secret: a regular file of this user that
/// no other user may read or write.
pub fn check_secret(path: &Path, meta: &Metadata) -> Result<(), SecretError> {
    if !meta.file_type().is_file() {
        return Err(SecretError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    let you = rustix::process::geteuid().as_raw();
    if meta.uid() != you {
        return Err(SecretError::NotYours {
            path: path.to_path_buf(),
            owner: meta.uid(),
            you,
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(SecretError::Exposed {
            path: path.to_path_buf(),
            mode,
        });
    }
    Ok(())
}

/// Puts `bytes` at `path` as a secret file (mode 0600), replacing what is there whole: a new
/// file renamed over it.
pub fn write_secret(path: &Path, bytes: &[u8]) -> Result<(), SecretError> {
    let temporary = written_aside(path, bytes)?;
    fs::rename(&temporary, path).map_err(|source| {
        let _ = fs::remove_file(&temporary);
        SecretError::Io {
            action: "write",
            path: path.to_path_buf(),
            source,
        }
    })
}

/// Puts `bytes` at `path` as a secret file (mode 0600) only if nothing is there: a new file
/// linked to the place, which fails with `AlreadyExists` when something is.
pub fn create_secret(path: &Path, bytes: &[u8]) -> Result<(), SecretError> {
    let temporary = written_aside(path, bytes)?;
    let linked = fs::hard_link(&temporary, path);
    let _ = fs::remove_file(&temporary);
    linked.map_err(|source| SecretError::Io {
        action: "create",
        path: path.to_path_buf(),
        source,
    })
}

/// A new file beside `path` (in its folder, so a rename or link stays on one file system)
/// holding `bytes`, created 0600 with `O_EXCL` and synced: its path.
fn written_aside(path: &Path, bytes: &[u8]) -> Result<PathBuf, SecretError> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let io = |source| SecretError::Io {
        action: "write",
        path: path.to_path_buf(),
        source,
    };
    let name = path
        .file_name()
        .ok_or_else(|| io(io::Error::other("it names no file")))?;
    let folder = path.parent().unwrap_or(Path::new("."));
    loop {
        let mut aside = std::ffi::OsString::from(".");
        aside.push(name);
        aside.push(format!(
            ".{}.{}.new",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let temporary = folder.join(aside);
        let mut file = match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)
        {
            Ok(file) => file,
            // A file of a process with this pid before: take the next name.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io(e)),
        };
        let written = file.write_all(bytes).and_then(|()| file.sync_all());
        if let Err(e) = written {
            let _ = fs::remove_file(&temporary);
            return Err(io(e));
        }
        return Ok(temporary);
    }
}

/// What other users may do with a file of mode `mode`.
fn exposure(mode: u32) -> &'static str {
    match (mode & 0o044 != 0, mode & 0o022 != 0) {
        (true, true) => "read and written",
        (false, true) => "written",
        _ => "read",
    }
}

/// `path` as one word for a shell: as it is when it holds only safe characters, otherwise in
/// single quotes; anything a terminal would act on is shown escaped.
fn shell_word(path: &Path) -> String {
    let text = path.to_string_lossy();
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@=~".contains(c));
    let word = if plain {
        text.into_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    };
    word.chars()
        .map(|c| {
            if c.is_control() {
                format!("\\x{:02x}", u32::from(c))
            } else {
                c.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn secret_at(dir: &Path, mode: u32) -> PathBuf {
        let path = dir.join(format!("token-{mode:o}"));
        fs::write(&path, "a-token-of-some-length\n").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn a_secret_file_other_users_may_read_or_write_is_refused_with_the_chmod_that_fixes_it() {
        let dir = tempfile::tempdir().unwrap();
        for mode in [
            0o640, 0o604, 0o644, 0o620, 0o602, 0o660, 0o666, 0o610, 0o601,
        ] {
            let path = secret_at(dir.path(), mode);
            let error = read_secret(&path).unwrap_err();
            assert!(
                matches!(error, SecretError::Exposed { mode: m, .. } if m == mode),
                "{mode:o}: {error:?}"
            );
            let message = error.to_string();
            assert!(
                message.contains(&format!("run: chmod 600 {}", path.display())),
                "{message}"
            );
        }
        for mode in [0o600, 0o400] {
            let path = secret_at(dir.path(), mode);
            assert_eq!(read_secret(&path).unwrap(), "a-token-of-some-length\n");
        }
    }

    #[test]
    fn a_secret_file_another_user_owns_is_refused_with_the_chown_that_fixes_it() {
        if !rustix::process::geteuid().is_root() {
            return; // Only root can give a file away; the other cases run for everyone.
        }
        let dir = tempfile::tempdir().unwrap();
        let path = secret_at(dir.path(), 0o600);
        std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
        let message = read_secret(&path).unwrap_err().to_string();
        assert!(message.contains("owned by uid 65534"), "{message}");
        assert!(
            message.contains(&format!("chown 0 {}", path.display())),
            "{message}"
        );
    }

    #[test]
    fn a_folder_or_a_missing_file_is_no_secret() {
        let dir = tempfile::tempdir().unwrap();
        let missing = read_secret(&dir.path().join("none")).unwrap_err();
        assert!(missing.is_not_found(), "{missing:?}");
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).unwrap();
        assert!(matches!(
            read_secret(dir.path()),
            Err(SecretError::NotAFile { .. }) | Err(SecretError::Io { .. })
        ));
    }

    #[test]
    fn a_path_in_a_command_is_one_shell_word_and_shows_no_control() {
        assert_eq!(shell_word(Path::new("/a/b.txt")), "/a/b.txt");
        assert_eq!(shell_word(Path::new("/a b/it's")), r"'/a b/it'\''s'");
        assert_eq!(shell_word(Path::new("/a\u{1b}[2J")), "'/a\\x1b[2J'");
    }

    #[test]
    fn a_secret_is_written_0600_under_umask_022_and_replaces_the_old_one_whole() {
        // The usual umask, which leaves a file made without a mode at 0644.
        rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o022));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        fs::write(&path, "old").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        write_secret(&path, b"new").unwrap();
        let meta = fs::metadata(&path).unwrap();
        assert_eq!(meta.mode() & 0o7777, 0o600);
        assert_eq!(fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(read_secret(&path).unwrap(), "new");
        let created = dir.path().join("created");
        create_secret(&created, b"one").unwrap();
        assert_eq!(fs::metadata(&created).unwrap().mode() & 0o7777, 0o600);
        let again = create_secret(&created, b"two").unwrap_err();
        assert!(
            matches!(&again, SecretError::Io { source, .. } if source.kind() == io::ErrorKind::AlreadyExists),
            "{again:?}"
        );
        assert_eq!(fs::read_to_string(&created).unwrap(), "one");
        let left: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 2, "nothing left aside: {left:?}");
    }
}
