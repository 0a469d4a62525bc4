//! A policy turned into a box: bubblewrap with a minimal read-only system, only the granted
//! paths bound in, boxmaker's protected folders masked, a private size-limited `/tmp`, its own
//! `/proc`, every namespace its own (so no network, or only the policy's [`crate::Network`]:
//! its proxy socket and the relay to it, see `net`), every capability dropped, a clean
//! environment; around it rlimits, `no_new_privs` and a cgroup for processes and memory; inside
//! it, when the policy names a launcher, Landlock over the same paths (see `launcher`).
//!
//! Where bubblewrap or user namespaces are missing ([`FileWalls::LandlockOnly`]), the box is
//! the one of `landlocked`: Landlock, a wider seccomp filter, rlimits, no capability and the
//! cgroup, and never a network.

use std::ffi::OsString;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cgroup::PooledCgroup;
use crate::child::Want;
use crate::contain::{CommandSpec, ContainOptions, ContainedChild, spawn_once};
use crate::harden::Hardening;
use crate::limits::Limits;

/// Where bubblewrap is looked for, in order.
const BWRAP_PATHS: [&str; 2] = ["/usr/bin/bwrap", "/usr/local/bin/bwrap"];

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

/// What the box's first process needs beside the command: its limits, its cgroup, and the
/// descriptors bubblewrap must inherit (see [`bwrap_command`]).
#[derive(Debug)]
pub(crate) struct BoxParts {
    pub(crate) limits: Limits,
    pub(crate) cgroup: PooledCgroup,
    pub(crate) inherit: Vec<std::os::fd::OwnedFd>,
    /// The seccomp programs installed before `exec` (a box without bubblewrap).
    pub(crate) seccomp: Vec<seccompiler::BpfProgram>,
    /// The scratch folder of a box without bubblewrap.
    pub(crate) scratch: Option<crate::landlocked::Scratch>,
    /// Whether the command's standard input is a pipe from the caller (a warm worker's
    /// requests) instead of `/dev/null`.
    pub(crate) stdin: bool,
}

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
        if find_bwrap().is_some() && crate::probe::user_namespaces().is_ok() {
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
    pub network: Option<crate::Network>,
}

impl Policy {
    /// How much of the Landlock layer a box of this policy gets on this machine.
    pub fn landlock(&self) -> crate::Enforcement {
        if self.launcher.is_some() {
            crate::landlock_enforcement()
        } else {
            crate::Enforcement::NotEnforced
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
    Pinned(#[from] crate::pinned::PinError),
}

/// Why a box without bubblewrap has no network.
pub const NETWORK_NEEDS_BUBBLEWRAP: &str = "granted hosts need bubblewrap's network namespace, and this box is Landlock alone (no bubblewrap or user namespaces here, or [sandbox] bubblewrap = false): it cannot reach any host";

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
    spawn_boxed_with(spec, policy, timeout, false)
}

/// [`spawn_boxed`], with the command's standard input a pipe from the caller when `stdin`.
pub(crate) fn spawn_boxed_with(
    spec: &CommandSpec,
    policy: &Policy,
    timeout: Duration,
    stdin: bool,
) -> Result<ContainedChild, BoxError> {
    if policy.files.len() > MAX_FILES {
        return Err(BoxError::TooManyFiles(policy.files.len()));
    }
    if policy.file_walls == FileWalls::LandlockOnly {
        if policy.network.is_some() {
            return Err(BoxError::NoNetwork(NETWORK_NEEDS_BUBBLEWRAP));
        }
        return crate::landlocked::spawn_landlocked(spec, policy, timeout, stdin);
    }
    let bwrap = find_bwrap().ok_or(BoxError::NoBubblewrap)?;
    let (args, inherit) = bwrap_command(spec, policy)?;
    let cgroup = PooledCgroup::take(
        policy.limits.processes,
        policy.limits.memory,
        policy.launcher.as_deref(),
        false,
    )
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
            seccomp: Vec::new(),
            scratch: None,
            stdin,
        }),
    )
    .map_err(|e| BoxError::Spawn(e.into_error()))
}

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

/// The system folders and `/etc` as the launcher's read rules inside a bubblewrap box: there
/// `/etc` is a folder of the box's read-only root holding only the entries of [`ETC`] bound into
/// it (and what the policy binds beneath), so one rule on it reads what one rule per entry
/// would, and the launcher makes one rule for `/etc` instead of nine.
fn system_paths_in_box() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = system_paths()
        .into_iter()
        .filter(|p| !p.starts_with("/etc"))
        .collect();
    if ETC.iter().any(|e| Path::new(e).exists()) {
        paths.push(PathBuf::from("/etc"));
    }
    paths
}

/// bubblewrap's arguments for `spec` in `policy`'s box, without the seccomp filter and
/// `policy.files` (which [`spawn_boxed`] passes as descriptors).
pub fn bwrap_args(spec: &CommandSpec, policy: &Policy) -> Result<Vec<OsString>, BoxError> {
    box_args(spec, policy, &[], None)
}

/// bubblewrap's whole command line for `spec` in `policy`'s box, as [`spawn_boxed`] runs it:
/// the arguments, and the descriptors they name, close-on-exec: the seccomp programs and
/// `policy.files`, each read once by the bubblewrap that inherits it, then the launcher's
/// binary (an `O_PATH` descriptor), which bubblewrap runs as `/proc/self/fd/N`. A caller
/// running bubblewrap itself keeps them open until it has started and clears close-on-exec on
/// them in the child.
pub fn bwrap_command(
    spec: &CommandSpec,
    policy: &Policy,
) -> Result<(Vec<OsString>, Vec<std::os::fd::OwnedFd>), BoxError> {
    let mut inherit =
        crate::seccomp::programs(policy.network.is_some()).map_err(BoxError::Seccomp)?;
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
    // The launcher is run through a descriptor, not bound into the box: each bind costs
    // bubblewrap a mount and its remount read-only (measured: 0.4-0.7 ms a box).
    let opened = match box_launcher(policy)? {
        Some(path) => {
            let fd = open_launcher(&path)?;
            let raw = fd.as_raw_fd();
            inherit.push(fd);
            Some((path, raw))
        }
        None => None,
    };
    args.extend(box_args(spec, policy, &file_fds, opened)?);
    Ok((args, inherit))
}

/// The launcher's binary as an `O_PATH` descriptor (running it needs execute permission only,
/// and nothing can read it through the descriptor); a regular file, or an error naming it.
fn open_launcher(path: &Path) -> Result<std::os::fd::OwnedFd, BoxError> {
    use rustix::fs::{FileType, Mode, OFlags};
    let bad = |reason: String| BoxError::BadPath {
        path: path.to_path_buf(),
        reason,
    };
    let fd = rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| bad(e.to_string()))?;
    let stat = rustix::fs::fstat(&fd).map_err(|e| bad(e.to_string()))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(bad("the launcher is not a regular file".to_string()));
    }
    Ok(fd)
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

/// Whether `program` (absolute) is the file at `resolved`.
fn is_same_file(program: &Path, resolved: &Path) -> bool {
    program.is_absolute() && std::fs::canonicalize(program).is_ok_and(|p| p == resolved)
}

/// The launcher a box of `policy` starts through (resolved), if any: with the Landlock layer,
/// or for a network's relay.
fn box_launcher(policy: &Policy) -> Result<Option<PathBuf>, BoxError> {
    match &policy.launcher {
        Some(path)
            if policy.landlock() != crate::Enforcement::NotEnforced || policy.network.is_some() =>
        {
            Ok(Some(resolve(path)?))
        }
        _ if policy.network.is_some() => Err(BoxError::NoNetwork(
            "a box with a network needs a launcher to run its relay",
        )),
        _ => Ok(None),
    }
}

/// bubblewrap's arguments. `opened`: the launcher (resolved) and a descriptor of its binary
/// that bubblewrap inherits, run as `/proc/self/fd/N`; without it the launcher is bound into
/// the box read-only and run by its path.
fn box_args(
    spec: &CommandSpec,
    policy: &Policy,
    file_fds: &[std::os::fd::RawFd],
    opened: Option<(PathBuf, std::os::fd::RawFd)>,
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
    let mut writable = Vec::new();
    // A network's relay is started by the launcher, with Landlock or without.
    let launcher_fd = opened.as_ref().map(|(_, fd)| *fd);
    let launcher = match opened {
        Some((path, _)) => Some(path),
        None => box_launcher(policy)?,
    };
    let mut rules = crate::launcher::Rules {
        read: system_paths_in_box(),
        write: vec![PathBuf::from("/tmp"), PathBuf::from("/dev")],
        expect: Some(policy.landlock()),
        relay: policy.network.as_ref().map(|n| n.port),
        own: launcher_fd,
    };
    rules.read.push(PathBuf::from("/proc"));
    for (flag, paths) in [
        ("--ro-bind", &policy.read_only),
        ("--bind", &policy.read_write),
    ] {
        for path in paths {
            let resolved = resolve(path)?;
            // A file inside another read-write path is writable with it already; bound, it
            // would be a mount point that no write could replace by a rename.
            let nested_file = flag == "--bind"
                && !resolved.is_dir()
                && paths
                    .iter()
                    .any(|other| other != path && resolved.starts_with(other));
            if !nested_file {
                a.bind(flag, &resolved);
            }
            if flag == "--bind" {
                rules.write.push(resolved.clone());
                writable.push(resolved.clone());
            } else {
                rules.read.push(resolved.clone());
            }
            bound.push(resolved);
        }
    }
    if let Some(path) = &launcher
        && launcher_fd.is_none()
        && !bound.iter().any(|b| path.starts_with(b))
    {
        a.bind("--ro-bind", path);
        rules.read.push(path.clone());
    }
    let launcher = launcher.map(|path| (path, rules));
    // Before the masks, which a bind of a folder holding one would cover.
    let masked: Vec<PathBuf> = policy
        .masked
        .iter()
        .filter_map(|m| std::fs::canonicalize(m).ok())
        .filter(|m| bound.iter().any(|b| m.starts_with(b)))
        .collect();
    let pinned = crate::pinned::Pinned::under(&policy.pinned, &writable)?;
    let visible = |p: &PathBuf| !masked.iter().any(|m| p.starts_with(m));
    for folder in pinned.folders.iter().filter(|f| visible(f)) {
        a.bind("--bind", folder);
    }
    for place in pinned.files.iter().filter(|f| visible(f)) {
        // The place itself read-only, and a mount point, which cannot be renamed over or
        // removed.
        a.bind("--ro-bind", place);
    }
    for resolved in &masked {
        // Inside another masked folder: unseen with it already (and its read-only tmpfs
        // could not take a mount point).
        if masked
            .iter()
            .any(|m| m != resolved && resolved.starts_with(m))
        {
            continue;
        }
        if resolved.is_dir() {
            a.push(&["--perms", "0000", "--tmpfs"]);
            a.path(resolved);
            a.push(&["--remount-ro"]);
            a.path(resolved);
        } else {
            a.push(&["--ro-bind", "/dev/null"]);
            a.path(resolved);
        }
    }
    if let Some(network) = &policy.network {
        // The one socket by path the box holds: its proxy's.
        if !network.proxy_socket.is_absolute() || !network.proxy_socket.exists() {
            return Err(BoxError::BadPath {
                path: network.proxy_socket.clone(),
                reason: "the proxy socket must be an absolute path that exists".to_string(),
            });
        }
        a.push(&["--bind"]);
        a.path(&network.proxy_socket);
        a.path(Path::new(crate::net::PROXY_IN_BOX));
    }
    // The box's own root (bubblewrap's tmpfs holding the mount points) read-only too.
    for ((dest, _), fd) in policy.files.iter().zip(file_fds) {
        a.push(&["--file", &fd.to_string()]);
        a.path(dest);
    }
    a.push(&["--remount-ro", "/"]);
    let proxy = policy.network.iter().flat_map(|n| n.env());
    let env = spec
        .env
        .iter()
        .filter(|(name, _)| !crate::net::PROXY_VARIABLES.iter().any(|v| name == v))
        .cloned()
        .chain(proxy.map(|(name, value)| (name.into(), value.into())));
    for (name, value) in env {
        a.push(&["--setenv"]);
        a.0.push(name);
        a.0.push(value);
    }
    a.push(&["--chdir"]);
    a.path(&spec.cwd);
    a.push(&["--"]);
    match launcher {
        Some((launcher, rules)) => {
            let through_fd = launcher_fd.map(|fd| PathBuf::from(format!("/proc/self/fd/{fd}")));
            // A command that is the launcher itself (a worker) is named the way it was run,
            // since no path in the box need name it.
            let program = match &through_fd {
                Some(own) if is_same_file(&spec.program, &launcher) => own,
                _ => &spec.program,
            };
            a.path(through_fd.as_ref().unwrap_or(&launcher));
            a.0.extend(rules.to_args(program, &spec.args));
        }
        None => {
            a.path(&spec.program);
            a.0.extend(spec.args.iter().cloned());
        }
    }
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
