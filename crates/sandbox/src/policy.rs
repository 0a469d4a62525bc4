//! What a box may see and use ([`Policy`]), which walls keep it there ([`FileWalls`]), and why
//! one could not be built ([`BoxError`]): the words every kind of box (bubblewrap's, Landlock's
//! alone, warm, served) is built from, below all of them.

use std::io;
use std::path::{Path, PathBuf};

use crate::limits::Limits;
use crate::machine::{BWRAP_PATHS, find_bwrap, user_namespaces};
use crate::net::Network;
use crate::pinned::PinError;
use crate::rules::{Enforcement, landlock_enforcement};

/// The system folders bound read-only (or recreated as the same symbolic link) when present.
pub(crate) const SYSTEM: [&str; 7] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32",
];

/// The few `/etc` entries programs need; never `/run`, never the rest of `/etc`.
pub(crate) const ETC: [&str; 9] = [
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/alternatives",
    "/etc/ssl/certs",
];

/// The most [`Policy::files`] one box takes.
pub const MAX_FILES: usize = 2;

/// The most descriptors a box's bubblewrap inherits: its two seccomp programs, its files
/// ([`MAX_FILES`]) and its launcher's binary.
pub(crate) const MAX_INHERITED: usize = 2 + MAX_FILES + 1;

/// Which walls keep a box to its paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum FileWalls {
    /// bubblewrap's mount, PID and network namespaces, with Landlock inside when the policy
    /// names a launcher.
    #[default]
    Bubblewrap,
    /// Landlock alone (with seccomp refusing every socket but `AF_UNIX` and every `connect`),
    /// for a machine without bubblewrap or user namespaces. Needs a launcher.
    LandlockOnly,
}

impl FileWalls {
    /// What this machine offers: [`FileWalls::Bubblewrap`] when bubblewrap is installed and
    /// user namespaces are allowed, otherwise [`FileWalls::LandlockOnly`].
    pub fn detect() -> FileWalls {
        if find_bwrap().is_some() && user_namespaces().is_ok() {
            FileWalls::Bubblewrap
        } else {
            FileWalls::LandlockOnly
        }
    }

    /// `bubblewrap` or `landlock_only`.
    pub fn as_str(self) -> &'static str {
        match self {
            FileWalls::Bubblewrap => "bubblewrap",
            FileWalls::LandlockOnly => "landlock_only",
        }
    }
}

/// What a box may see and use. The crate knows no tool names: the caller says which paths.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    /// Paths bound read-only beside the minimal system (toolchains, the files a call reads).
    pub read_only: Vec<PathBuf>,
    /// Paths bound read-write (a `shell` grant's folders).
    pub read_write: Vec<PathBuf>,
    /// Paths that must never be seen: masked (an empty read-only folder, or `/dev/null` for a
    /// file) wherever they fall inside a bound path.
    pub masked: Vec<PathBuf>,
    /// The size of the box's private `/tmp`, in bytes (0: 64 MiB).
    pub tmp_bytes: u64,
    /// Files made in the box before the command starts (under `/tmp` or a read-write path),
    /// each holding these bytes: how a worker in the box receives its request. At most
    /// [`MAX_FILES`].
    pub files: Vec<(PathBuf, Vec<u8>)>,
    /// Files and folders the box may read and run but never change, even where a read-write
    /// path holds them: what the caller runs later, in the next box or outside any (its own
    /// binaries, a repository's hooks). Bound read-only over themselves where a read-write
    /// path holds them, each folder between bound onto itself so none can be moved aside;
    /// without bubblewrap, left out of the Landlock layer's write rules (and with them the
    /// folders that hold them: no new file directly in those).
    pub pinned: Vec<PathBuf>,
    /// The box's limits.
    pub limits: Limits,
    /// A binary whose `main` starts with [`crate::launch_if_asked`]: run in the box through a
    /// descriptor bubblewrap inherits (no path in the box names it), it applies the Landlock
    /// layer and then runs the command. `None`: no Landlock layer
    /// (and no box at all with [`FileWalls::LandlockOnly`]).
    pub launcher: Option<PathBuf>,
    /// Which walls keep the box to its paths.
    pub file_walls: FileWalls,
    /// The box's way to the hosts its caller granted: the proxy socket and the relay's port.
    /// `None`: no network at all. Needs bubblewrap and a launcher.
    pub network: Option<Network>,
}

impl Policy {
    /// How much of the Landlock layer a box of this policy gets on this machine.
    pub fn landlock(&self) -> Enforcement {
        if self.launcher.is_some() {
            landlock_enforcement()
        } else {
            Enforcement::NotEnforced
        }
    }
}

/// Why a box could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BoxError {
    /// bubblewrap is not installed.
    #[error(
        "bubblewrap is not installed (looked for {}); install the `bubblewrap` package",
        BWRAP_PATHS.join(", ")
    )]
    NoBubblewrap,
    /// A path of the policy is not absolute or cannot be resolved.
    #[error("the box cannot bind {path}: {reason}")]
    BadPath {
        /// The path as the policy names it.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The box's cgroup could not be made.
    #[error("{0}")]
    Cgroup(io::Error),
    /// The box's seccomp programs could not be compiled.
    #[error("cannot compile the box's seccomp filter: {0}")]
    Seccomp(io::Error),
    /// The policy names more files than a box takes.
    #[error("a box takes at most {MAX_FILES} files, the policy names {0}")]
    TooManyFiles(usize),
    /// bubblewrap could not be started.
    #[error("cannot start bubblewrap: {0}")]
    Spawn(io::Error),
    /// A box without bubblewrap was asked for where Landlock is missing, or without a
    /// launcher: nothing would keep it to its paths.
    #[error(
        "no file walls: {0}; install bubblewrap, or run on a kernel with Landlock (5.13 or later, enabled in the lsm= boot list)"
    )]
    NoFileWalls(&'static str),
    /// A command worker was asked for where a box cannot take one.
    #[error("no command worker: {0}")]
    NoCommandWorker(&'static str),
    /// The box without bubblewrap could not be started.
    #[error("cannot start the box's launcher: {0}")]
    Launch(io::Error),
    /// The policy asks for a network where the box cannot have one.
    #[error("{0}")]
    NoNetwork(&'static str),
    /// A pinned place cannot be kept unchanged in this box (a symbolic link in a read-write
    /// folder).
    #[error("the box was not started: {0}")]
    Pinned(#[from] PinError),
}

/// Why a box without bubblewrap has no network.
pub const NETWORK_NEEDS_BUBBLEWRAP: &str = "granted hosts need bubblewrap's network namespace, and this box is Landlock alone (no bubblewrap or user namespaces here, or [sandbox] bubblewrap = false): it cannot reach any host";

/// The system folders and `/etc` files that exist here (symbolic links left out: they lead
/// into `/usr`).
pub(crate) fn system_paths() -> Vec<PathBuf> {
    SYSTEM
        .iter()
        .map(Path::new)
        .filter(|p| p.is_dir() && !p.is_symlink())
        .chain(ETC.iter().map(Path::new).filter(|p| p.exists()))
        .map(Path::to_path_buf)
        .collect()
}

/// The path with every symbolic link followed: the box binds what the link names, at that name.
pub(crate) fn resolve(path: &Path) -> Result<PathBuf, BoxError> {
    if !path.is_absolute() {
        return Err(BoxError::BadPath {
            path: path.to_path_buf(),
            reason: "not an absolute path".to_string(),
        });
    }
    std::fs::canonicalize(path).map_err(|e| BoxError::BadPath {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}
