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
use crate::contain::{ContainOptions, ContainedChild, Containment, spawn_once};
use crate::harden::Hardening;
use crate::machine::find_bwrap;
use crate::parts::BoxParts;
use crate::policy::{
    BoxError, ETC, FileWalls, MAX_FILES, NETWORK_NEEDS_BUBBLEWRAP, Policy, SYSTEM, resolve,
    system_paths,
};
use crate::rules::{Enforcement, Rules};
use crate::spec::CommandSpec;

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
        containment: Containment::Bubblewrap,
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
        Some(path) if policy.landlock() != Enforcement::NotEnforced || policy.network.is_some() => {
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
    let mut rules = Rules {
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
