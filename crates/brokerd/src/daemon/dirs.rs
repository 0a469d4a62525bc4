//! The broker's checks on its folders, and the locks that keep one broker per state folder and
//! per runtime folder.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use proto::dirs::{Dirs, LOCK_FILE, MAX_SOCKET_PATH};
use rustix::fs::{FlockOperation, flock};

/// Why the broker cannot use its folders.
#[derive(Debug, thiserror::Error)]
pub enum FolderError {
    /// The runtime or the state folder is not private to this user.
    #[error(
        "the {which} folder {path} {why}; it must be a real directory owned by uid {uid} with mode 0700: {fix}"
    )]
    NotPrivate {
        /// `runtime` or `state`.
        which: &'static str,
        /// The folder.
        path: String,
        /// What is wrong.
        why: String,
        /// The broker's uid.
        uid: u32,
        /// What fixes it.
        fix: String,
    },
    /// The socket path would be too long for a Unix socket.
    #[error(
        "the socket path {path} is {len} bytes; a Unix socket path is at most {MAX_SOCKET_PATH} (use a shorter --runtime-dir)"
    )]
    SocketPathTooLong {
        /// The path.
        path: String,
        /// Its length.
        len: usize,
    },
    /// Another broker holds the lock.
    #[error("another brokerd (pid {pid}) is already running on {path}")]
    Locked {
        /// What is locked.
        path: String,
        /// The holder's pid, as it wrote it.
        pid: String,
    },
    /// The file system refused.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
}

/// Makes `dir` (and its parents) with mode 0700 when missing.
pub fn make_private_dir(dir: &Path) -> Result<(), FolderError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| FolderError::Io {
            path: dir.display().to_string(),
            source,
        })
}

/// Makes the runtime folder when missing and checks that it is private ([`check_private`]).
/// Also checks that the socket path fits.
pub fn check_runtime(dirs: &Dirs) -> Result<(), FolderError> {
    check_private(&dirs.runtime, "runtime")?;
    let socket = dirs.agent_socket();
    let len = socket.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        return Err(FolderError::SocketPathTooLong {
            path: socket.display().to_string(),
            len,
        });
    }
    Ok(())
}

/// Makes the state folder when missing and checks that it is private ([`check_private`]): it
/// holds every call's answer and every waiting call's arguments.
pub fn check_state(dirs: &Dirs) -> Result<(), FolderError> {
    check_private(&dirs.state, "state")
}

/// Makes `path` (the `which` folder) when missing, and checks that it is private: a real
/// directory (not a symbolic link), owned by this uid, mode 0700; else refused with a sentence
/// naming it and what fixes it. One made or fixed once stays accepted.
pub fn check_private(path: &Path, which: &'static str) -> Result<(), FolderError> {
    let uid = rustix::process::getuid().as_raw();
    if fs::symlink_metadata(path).is_err() {
        make_private_dir(path)?;
    }
    let shown = path.display().to_string();
    let refused = |why: String, fix: String| FolderError::NotPrivate {
        which,
        path: shown.clone(),
        why,
        uid,
        fix,
    };
    let meta = fs::symlink_metadata(path).map_err(|source| FolderError::Io {
        path: shown.clone(),
        source,
    })?;
    let elsewhere = format!("or name another folder with --{which}-dir");
    if meta.file_type().is_symlink() {
        let fix = format!("replace the link with a directory, {elsewhere}");
        return Err(refused("is a symbolic link".into(), fix));
    }
    if !meta.is_dir() {
        let fix = format!("remove it, {elsewhere}");
        return Err(refused("is not a directory".into(), fix));
    }
    if meta.uid() != uid {
        let fix = format!("`chown {uid} {shown}` (as root), {elsewhere}");
        return Err(refused(format!("is owned by uid {}", meta.uid()), fix));
    }
    let mode = meta.permissions().mode();
    if mode & 0o777 != 0o700 {
        let fix = format!("`chmod 700 {shown}`");
        return Err(refused(format!("has mode {:04o}", mode & 0o7777), fix));
    }
    Ok(())
}

/// An exclusive lock held for the broker's life: on `<state>/brokerd.lock` (which holds the
/// pid) and on the runtime folder itself.
#[derive(Debug)]
pub struct Locks {
    _state: File,
    _runtime: File,
}

/// How long a lock is tried before another broker is named as its holder: a broker killed a
/// moment ago may leave a child that holds its descriptors for a few milliseconds more.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

fn lock_within(file: &File, wait: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + wait;
    loop {
        if flock(file, FlockOperation::NonBlockingLockExclusive).is_ok() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Takes both locks, or names the pid of the broker that holds them.
pub fn lock(dirs: &Dirs) -> Result<Locks, FolderError> {
    let lock_path = dirs.state.join(LOCK_FILE);
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| FolderError::Io { path, source }
    };
    let mut state = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&lock_path)
        .map_err(io(&lock_path))?;
    // 0600 as every file in the state folder, also when an older install made it wider.
    state
        .set_permissions(fs::Permissions::from_mode(0o600))
        .map_err(io(&lock_path))?;
    if !lock_within(&state, LOCK_WAIT) {
        let mut pid = String::new();
        let _ = state.read_to_string(&mut pid);
        return Err(FolderError::Locked {
            path: dirs.state.display().to_string(),
            pid: pid.trim().to_string(),
        });
    }
    let runtime = File::open(&dirs.runtime).map_err(io(&dirs.runtime))?;
    if !lock_within(&runtime, LOCK_WAIT) {
        let mut pid = String::new();
        let _ = state.read_to_string(&mut pid);
        return Err(FolderError::Locked {
            path: dirs.runtime.display().to_string(),
            pid: "unknown (another state folder)".to_string(),
        });
    }
    state
        .set_len(0)
        .and_then(|()| state.rewind())
        .and_then(|()| writeln!(state, "{}", std::process::id()))
        .and_then(|()| state.sync_data())
        .map_err(io(&lock_path))?;
    Ok(Locks {
        _state: state,
        _runtime: runtime,
    })
}
