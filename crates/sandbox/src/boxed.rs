//! A policy turned into a box: bubblewrap with a minimal read-only system, only the granted
//! paths bound in, boxmaker's protected folders masked, a private size-limited `/tmp`, its own
//! `/proc`, every namespace its own (so no network), every capability dropped, a clean
//! environment; around it rlimits, `no_new_privs` and a cgroup for processes and memory.

use std::ffi::OsString;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::process::{Resource, Rlimit, setrlimit};

use crate::cgroup::PooledCgroup;
use crate::child::Want;
use crate::contain::{CommandSpec, ContainOptions, ContainedChild, spawn_once};
use crate::harden::Hardening;

/// Where bubblewrap is looked for, in order.
const BWRAP_PATHS: [&str; 2] = ["/usr/bin/bwrap", "/usr/local/bin/bwrap"];

/// The system folders bound read-only (or recreated as the same symbolic link) when present.
const SYSTEM: [&str; 7] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32",
];

/// The few `/etc` entries programs need; never `/run`, never the rest of `/etc`.
const ETC: [&str; 9] = [
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

/// The limits of one box.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// CPU seconds (`RLIMIT_CPU`).
    pub cpu_seconds: u64,
    /// Address space of each process, in bytes (`RLIMIT_AS`; generous: it is virtual memory).
    pub address_space: u64,
    /// The largest file a process may write, in bytes (`RLIMIT_FSIZE`).
    pub file_size: u64,
    /// Open descriptors per process (`RLIMIT_NOFILE`).
    pub open_files: u64,
    /// Processes in the whole box (the cgroup's `pids.max`).
    pub processes: u64,
    /// Memory of the whole box, in bytes (the cgroup's memory limit).
    pub memory: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            cpu_seconds: 300,
            address_space: 8 << 30,
            file_size: 1 << 30,
            open_files: 1024,
            processes: 256,
            memory: 2 << 30,
        }
    }
}

impl Limits {
    /// Sets the rlimits of the calling process (and `RLIMIT_CORE` to 0). Async-signal-safe.
    pub(crate) fn apply(&self) -> io::Result<()> {
        let set = |resource, value: u64| {
            setrlimit(
                resource,
                Rlimit {
                    current: Some(value),
                    maximum: Some(value),
                },
            )
        };
        set(Resource::Cpu, self.cpu_seconds)?;
        set(Resource::As, self.address_space)?;
        set(Resource::Fsize, self.file_size)?;
        set(Resource::Nofile, self.open_files)?;
        set(Resource::Core, 0)?;
        Ok(())
    }
}

/// What the box's first process needs beside the command: its limits, its cgroup, and the
/// descriptors bubblewrap must inherit (the seccomp programs).
#[derive(Debug)]
pub(crate) struct BoxParts {
    pub(crate) limits: Limits,
    pub(crate) cgroup: PooledCgroup,
    pub(crate) inherit: Vec<std::os::fd::OwnedFd>,
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
    /// The box's limits.
    pub limits: Limits,
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
}

/// The bubblewrap binary, when installed.
pub fn find_bwrap() -> Option<PathBuf> {
    BWRAP_PATHS.iter().map(PathBuf::from).find(|p| p.is_file())
}

/// Starts `spec` in a box built from `policy`, killed whole after `timeout`. `spec.env` is the
/// command's whole environment and `spec.cwd` must be inside a bound path (or `/tmp`).
pub fn spawn_boxed(
    spec: &CommandSpec,
    policy: &Policy,
    timeout: Duration,
) -> Result<ContainedChild, BoxError> {
    let bwrap = find_bwrap().ok_or(BoxError::NoBubblewrap)?;
    if policy.files.len() > MAX_FILES {
        return Err(BoxError::TooManyFiles(policy.files.len()));
    }
    let mut inherit = crate::seccomp::programs().map_err(BoxError::Seccomp)?;
    let mut args = Vec::new();
    for fd in &inherit {
        args.push(OsString::from("--add-seccomp-fd"));
        args.push(OsString::from(fd.as_raw_fd().to_string()));
    }
    let mut file_fds = Vec::new();
    for (_, bytes) in &policy.files {
        let fd = memfd_holding(bytes).map_err(BoxError::Spawn)?;
        file_fds.push(fd.as_raw_fd());
        inherit.push(fd);
    }
    args.extend(box_args(spec, policy, &file_fds)?);
    let cgroup = PooledCgroup::take(policy.limits.processes, policy.limits.memory)
        .map_err(BoxError::Cgroup)?;
    let outer = CommandSpec {
        program: bwrap,
        args,
        env: Vec::new(),
        cwd: PathBuf::from("/"),
    };
    let options = ContainOptions {
        timeout,
        containment: crate::Containment::Bubblewrap,
    };
    let hardening = Hardening::new().map_err(BoxError::Spawn)?;
    spawn_once(
        &outer,
        &options,
        hardening,
        Want::Bubblewrap,
        Some(BoxParts {
            limits: policy.limits,
            cgroup,
            inherit,
        }),
    )
    .map_err(|e| BoxError::Spawn(e.into_error()))
}

/// bubblewrap's arguments for `spec` in `policy`'s box, without the seccomp filter and
/// `policy.files` (which [`spawn_boxed`] passes as descriptors).
pub fn bwrap_args(spec: &CommandSpec, policy: &Policy) -> Result<Vec<OsString>, BoxError> {
    box_args(spec, policy, &[])
}

/// A sealed-in-memory file holding `bytes`, read from its start by bubblewrap.
fn memfd_holding(bytes: &[u8]) -> io::Result<std::os::fd::OwnedFd> {
    use rustix::fs::{MemfdFlags, SeekFrom, memfd_create, seek};
    let fd = memfd_create("boxmaker-box-file", MemfdFlags::CLOEXEC)?;
    let mut done = 0;
    while done < bytes.len() {
        done += rustix::io::write(&fd, &bytes[done..])?;
    }
    seek(&fd, SeekFrom::Start(0))?;
    Ok(fd)
}

fn box_args(
    spec: &CommandSpec,
    policy: &Policy,
    file_fds: &[std::os::fd::RawFd],
) -> Result<Vec<OsString>, BoxError> {
    let mut a = Args(Vec::new());
    a.push(&[
        "--unshare-all",
        // Its own user namespace, explicitly, so that no nested one can be made inside.
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--cap-drop",
        "ALL",
    ]);
    for dir in SYSTEM {
        let path = Path::new(dir);
        match std::fs::read_link(path) {
            Ok(target) => {
                a.push(&["--symlink"]);
                a.path(&target);
                a.path(path);
            }
            Err(_) if path.is_dir() => a.bind("--ro-bind", path),
            Err(_) => {}
        }
    }
    for entry in ETC {
        let path = Path::new(entry);
        if path.exists() {
            a.bind("--ro-bind", path);
        }
    }
    a.push(&["--proc", "/proc", "--dev", "/dev"]);
    let tmp = if policy.tmp_bytes == 0 {
        64 << 20
    } else {
        policy.tmp_bytes
    };
    a.push(&["--size", &tmp.to_string(), "--tmpfs", "/tmp"]);
    let mut bound = Vec::new();
    for (flag, paths) in [
        ("--ro-bind", &policy.read_only),
        ("--bind", &policy.read_write),
    ] {
        for path in paths {
            let resolved = resolve(path)?;
            a.bind(flag, &resolved);
            bound.push(resolved);
        }
    }
    for masked in &policy.masked {
        let Ok(resolved) = std::fs::canonicalize(masked) else {
            continue;
        };
        if !bound.iter().any(|b| resolved.starts_with(b)) {
            continue;
        }
        if resolved.is_dir() {
            a.push(&["--perms", "0000", "--tmpfs"]);
            a.path(&resolved);
            a.push(&["--remount-ro"]);
            a.path(&resolved);
        } else {
            a.push(&["--ro-bind", "/dev/null"]);
            a.path(&resolved);
        }
    }
    // The box's own root (bubblewrap's tmpfs holding the mount points) read-only too.
    for ((dest, _), fd) in policy.files.iter().zip(file_fds) {
        a.push(&["--file", &fd.to_string()]);
        a.path(dest);
    }
    a.push(&["--remount-ro", "/"]);
    for (name, value) in &spec.env {
        a.push(&["--setenv"]);
        a.0.push(name.clone());
        a.0.push(value.clone());
    }
    a.push(&["--chdir"]);
    a.path(&spec.cwd);
    a.push(&["--"]);
    a.path(&spec.program);
    a.0.extend(spec.args.iter().cloned());
    Ok(a.0)
}

struct Args(Vec<OsString>);

impl Args {
    fn push(&mut self, words: &[&str]) {
        self.0.extend(words.iter().map(OsString::from));
    }

    fn path(&mut self, path: &Path) {
        self.0.push(path.as_os_str().to_owned());
    }

    fn bind(&mut self, flag: &str, path: &Path) {
        self.push(&[flag]);
        self.path(path);
        self.path(path);
    }
}

/// The path with every symbolic link followed: the box binds what the link names, at that name.
fn resolve(path: &Path) -> Result<PathBuf, BoxError> {
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
