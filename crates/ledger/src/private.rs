//! The state folder's files are the owner's alone: mode 0600, whatever the process's umask and
//! whatever the folder's mode.
//!
//! SQLite makes a new database file with the umask (0644 under the usual 022) and gives the
//! `-wal`, `-shm` and `-journal` it makes beside it the mode of the database file (it sets that
//! mode itself on a new, empty one, so the umask does not narrow or widen it). So the database
//! file is made 0600 before SQLite opens it, and each of the four files found wider (an older
//! install's) is narrowed: every file SQLite then makes is 0600 too. A process-wide umask
//! would do the same for these files but also for every file the broker's tools make for the
//! owner (a `write_file`, a command in a box), which must keep the owner's usual mode.

use std::fs::{self, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The mode of every file in the state folder.
pub const PRIVATE_FILE: u32 = 0o600;

/// The files SQLite keeps beside a database: its write-ahead log, its shared memory index and
/// its rollback journal.
const COMPANIONS: [&str; 3] = ["-wal", "-shm", "-journal"];

/// Readies the SQLite database at `path` to be opened: made (empty, mode 0600) when `create`
/// and it is missing, and it and its companions narrowed to 0600 where they are wider. A reader
/// (`create` false) that may not change a file's mode (not its owner) leaves it as it is: it
/// makes nothing, and the broker narrows the files when it opens them.
pub fn prepare_database(path: &Path, create: bool) -> io::Result<()> {
    match narrow_database(path, create) {
        Err(e) if !create && e.kind() == io::ErrorKind::PermissionDenied => Ok(()),
        done => done,
    }
}

fn narrow_database(path: &Path, create: bool) -> io::Result<()> {
    if create {
        // Opened to make it when missing; an existing file is left as it is (not truncated).
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(PRIVATE_FILE)
            .open(path)?;
    }
    narrow(path)?;
    for suffix in COMPANIONS {
        let mut companion = path.as_os_str().to_owned();
        companion.push(suffix);
        narrow(&PathBuf::from(companion))?;
    }
    Ok(())
}

/// Sets the regular file at `path` to mode 0600 when its mode is anything else; a missing file
/// is left missing.
pub fn narrow(path: &Path) -> io::Result<()> {
    let meta = match fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if meta.is_file() && meta.permissions().mode() & 0o7777 != PRIVATE_FILE {
        fs::set_permissions(path, Permissions::from_mode(PRIVATE_FILE))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_missing_database_is_made_0600_and_wider_companions_are_narrowed() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.sqlite");
        let wal = dir.path().join("x.sqlite-wal");
        fs::write(&wal, "").unwrap();
        fs::set_permissions(&wal, Permissions::from_mode(0o644)).unwrap();
        prepare_database(&db, true).unwrap();
        assert_eq!(mode(&db), 0o600);
        assert_eq!(mode(&wal), 0o600);
        assert!(!dir.path().join("x.sqlite-shm").exists());
    }

    #[test]
    fn an_existing_database_keeps_its_content_and_loses_its_wider_mode() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.sqlite");
        fs::write(&db, "content").unwrap();
        fs::set_permissions(&db, Permissions::from_mode(0o664)).unwrap();
        prepare_database(&db, true).unwrap();
        assert_eq!(fs::read_to_string(&db).unwrap(), "content");
        assert_eq!(mode(&db), 0o600);
    }

    #[test]
    fn without_create_a_missing_database_stays_missing() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.sqlite");
        prepare_database(&db, false).unwrap();
        assert!(!db.exists());
    }
}
