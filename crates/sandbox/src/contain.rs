//! The broker's side of a contained command: spawn it, collect its output until it ends or
//! its deadline passes, and leave no process of it behind.

// `Command::pre_exec` is unsafe because its hook runs between `fork` and `exec` of a possibly
// multithreaded parent. The hook here is `child::Plan::run`, async-signal-safe by
// construction; this is the one `unsafe` of this module.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::fs::{OFlags, fcntl_setfl};
use rustix::pipe::{PipeFlags, pipe_with};
use rustix::process::{
    Pid, PidfdFlags, Signal, getegid, geteuid, kill_process, kill_process_group, pidfd_open,
};
use serde::{Deserialize, Serialize};

use crate::cgroup::PooledCgroup;
use crate::child::{IdMaps, Plan, Want};
use crate::harden::Hardening;
use crate::parts::{BoxParts, Scratch};
use crate::pipes::{read_available, read_exact};
use crate::policy::MAX_INHERITED;
use crate::record::{self, Record};
use crate::spec::{CommandSpec, Ended, Exit};

mod finish;

/// How long past the deadline the broker waits for the supervisor's own report before it kills
/// the supervisor itself.
const BACKSTOP: Duration = Duration::from_secs(1);

/// How long the broker keeps reading once the command has ended and its box is gone: only
/// something that escaped the box could still hold a pipe open.
const DRAIN: Duration = Duration::from_millis(250);

/// How a command's processes are held together, strongest first. Serialized in snake_case
/// (`pid_namespace`, `subreaper`, `process_group`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Containment {
    /// The command is the only child of an init that is PID 1 of new PID and mount namespaces
    /// (and a new user namespace when the owner is not root), with its own `/proc`. Ending the
    /// init ends every descendant. Asked for, it falls back to [`Containment::Subreaper`]
    /// where the kernel refuses namespaces.
    PidNamespace,
    /// The command is the child of a child subreaper that kills every process it adopts when
    /// the command ends, at the deadline, or when the broker lets go. The command sees the
    /// host's `/proc` and could kill the subreaper (same user), so this is a fall-back.
    Subreaper,
    /// The command leads its own process group, killed whole when it ends or at the deadline;
    /// `setsid` leaves the group. For a caller whose own box already contains the command.
    ProcessGroup,
    /// The command runs in a bubblewrap box ([`crate::spawn_boxed`]): its own PID namespace,
    /// killed whole with `bwrap`, which leads its own process group.
    Bubblewrap,
    /// The command runs in a box without bubblewrap ([`crate::FileWalls::LandlockOnly`]): no
    /// PID namespace, so the box's cgroup, killed whole, holds its processes together (and its
    /// process group, for the deadline).
    Cgroup,
}

impl Containment {
    /// The snake_case name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Containment::PidNamespace => "pid_namespace",
            Containment::Subreaper => "subreaper",
            Containment::ProcessGroup => "process_group",
            Containment::Bubblewrap => "bubblewrap",
            Containment::Cgroup => "cgroup",
        }
    }
}

/// How to contain a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainOptions {
    /// The longest the command may run; then everything it started is killed.
    pub timeout: Duration,
    /// The containment wanted; [`Containment::PidNamespace`] falls back to
    /// [`Containment::Subreaper`] where namespaces are refused.
    pub containment: Containment,
}

impl Default for ContainOptions {
    fn default() -> Self {
        ContainOptions {
            timeout: Duration::from_secs(60),
            containment: Containment::PidNamespace,
        }
    }
}

/// A running contained command. Dropping it without [`ContainedChild::finish`] kills every
/// process of the command and reaps the supervisor.
///
/// The thread that spawned it must outlive it: the kernel's parent-death signal, one of the
/// ties between the broker and the box, follows the spawning thread.
#[derive(Debug)]
pub struct ContainedChild {
    /// The command's standard input, when the caller asked for a pipe (a warm worker).
    stdin: Option<ChildStdin>,
    child: Option<Proc>,
    containment: Containment,
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
    /// The status pipe's read end (namespaces and subreaper).
    status: Option<OwnedFd>,
    /// A pidfd of the command (process group).
    pidfd: Option<OwnedFd>,
    /// The leash's write end: closing it tells the supervisor to kill everything.
    leash: Option<OwnedFd>,
    deadline: Option<Instant>,
    records: Vec<u8>,
    /// The box's cgroup, killed and removed when the command has ended (or on drop).
    cgroup: Option<PooledCgroup>,
    /// A box's scratch folder without bubblewrap (its `TMPDIR`), removed on drop.
    _scratch: Option<Scratch>,
    /// The most bytes of output passed on before the box is killed (a box's limit).
    output_limit: Option<u64>,
    /// The read end of a [`crate::Stopper`]'s pipe: a byte or its closing kills the box.
    stop: Option<OwnedFd>,
}

/// Starts `spec` contained as `options` says, hardened ([`Hardening::apply`]) whatever the
/// containment. Fails when the program cannot be started, or when the namespaces were entered
/// but could not be set up and the subreaper fall-back failed too.
pub fn spawn_contained(spec: &CommandSpec, options: &ContainOptions) -> io::Result<ContainedChild> {
    let hardening = Hardening::new()?;
    let want = match options.containment {
        Containment::PidNamespace => Want::Namespaces,
        Containment::Subreaper => Want::Subreaper,
        Containment::ProcessGroup | Containment::Bubblewrap | Containment::Cgroup => {
            Want::ProcessGroup
        }
    };
    match spawn_once(spec, options, hardening, want, None) {
        Err(Attempt::SetupFailed(_)) => {
            spawn_once(spec, options, hardening, Want::Subreaper, None).map_err(Attempt::into_error)
        }
        other => other.map_err(Attempt::into_error),
    }
}

/// Why one attempt failed.
pub(crate) enum Attempt {
    /// The namespaces were entered but `/proc` or the hardening could not be set up there.
    SetupFailed(io::Error),
    Failed(io::Error),
}

impl Attempt {
    pub(crate) fn into_error(self) -> io::Error {
        match self {
            Attempt::SetupFailed(e) => e,
            Attempt::Failed(e) => e,
        }
    }
}

impl From<io::Error> for Attempt {
    fn from(e: io::Error) -> Self {
        Attempt::Failed(e)
    }
}

pub(crate) fn spawn_once(
    spec: &CommandSpec,
    options: &ContainOptions,
    hardening: Hardening,
    want: Want,
    boxed: Option<BoxParts>,
) -> Result<ContainedChild, Attempt> {
    let mut cgroups = [-1; 2];
    let mut inherit = [-1; MAX_INHERITED];
    if let Some(parts) = &boxed {
        if parts.inherit.len() > inherit.len() {
            return Err(Attempt::Failed(io::Error::other(format!(
                "a box inherits at most {} descriptors, {} were given",
                inherit.len(),
                parts.inherit.len()
            ))));
        }
        for (slot, fd) in cgroups.iter_mut().zip(parts.cgroup.join_fds()) {
            *slot = fd;
        }
        for (slot, fd) in inherit.iter_mut().zip(&parts.inherit) {
            *slot = fd.as_raw_fd();
        }
    }
    let piped_stdin = boxed.as_ref().is_some_and(|parts| parts.stdin);
    // The inherited descriptors stay open until `spawn` has returned, then close here.
    let (limits, cgroup, _inherited, seccomp, scratch) = match boxed {
        Some(parts) => (
            Some(parts.limits),
            Some(parts.cgroup),
            parts.inherit,
            parts.seccomp,
            parts.scratch,
        ),
        None => (None, None, Vec::new(), Vec::new(), None),
    };
    let (status_r, status_w) = pipe_with(PipeFlags::CLOEXEC).map_err(io::Error::from)?;
    let (leash_r, leash_w) = pipe_with(PipeFlags::CLOEXEC).map_err(io::Error::from)?;
    let uid = geteuid();
    let gid = getegid();
    let maps = IdMaps {
        uid_map: id_map(uid.as_raw())?,
        gid_map: id_map(gid.as_raw())?,
        root: uid.is_root(),
    };
    let deadline = Instant::now().checked_add(options.timeout);
    let plan = Plan {
        want,
        hardening,
        deadline,
        status: status_w.as_raw_fd(),
        leash: leash_r.as_raw_fd(),
        maps,
        limits,
        cgroups,
        inherit,
        seccomp,
    };
    // A child that `exec`s straight after its hook shares the broker's memory until then
    // (`spawn`); a supervisor, which goes on running, is forked.
    let shared = matches!(want, Want::Bubblewrap | Want::Launcher | Want::ProcessGroup)
        && spec.program.is_absolute();
    let spawned = if shared {
        crate::spawn::spawn(spec, &plan, piped_stdin)
            .map(|s| (Proc::Shared(s.pid), s.stdin, Some(s.stdout), Some(s.stderr)))
    } else {
        let mut command = spec.command();
        command
            .stdin(if piped_stdin {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        // SAFETY: `Plan::run` is async-signal-safe (see `child`): system calls only, with
        // buffers on the stack or built above, before the fork.
        unsafe {
            command.pre_exec(move || plan.run());
        }
        command.spawn().map(|mut child| {
            let (stdin, stdout, stderr) =
                (child.stdin.take(), child.stdout.take(), child.stderr.take());
            (Proc::Forked(child), stdin, stdout, stderr)
        })
    };
    drop(status_w);
    drop(leash_r);
    let (child, stdin, stdout, stderr) = match spawned {
        Ok(spawned) => spawned,
        Err(e) => {
            // The supervisor has been reaped by `spawn`: whatever it and the init wrote is in
            // the pipe already.
            let _ = fcntl_setfl(&status_r, OFlags::NONBLOCK);
            let mut bytes = Vec::new();
            read_available(&status_r, &mut bytes);
            let setup_failed = record::parse_all(&bytes)
                .iter()
                .any(|r| matches!(r, Record::SetupFailed(_)));
            return Err(if setup_failed {
                Attempt::SetupFailed(e)
            } else {
                Attempt::Failed(e)
            });
        }
    };
    let mut contained = ContainedChild {
        stdin,
        child: Some(child),
        containment: Containment::ProcessGroup,
        stdout,
        stderr,
        status: None,
        pidfd: None,
        leash: None,
        deadline,
        records: Vec::new(),
        cgroup,
        _scratch: scratch,
        output_limit: limits.map(|l| l.output_bytes),
        stop: None,
    };
    match want {
        Want::Bubblewrap => contained.containment = Containment::Bubblewrap,
        Want::Launcher => contained.containment = Containment::Cgroup,
        _ => {}
    }
    if matches!(want, Want::ProcessGroup | Want::Bubblewrap | Want::Launcher) {
        let pid = contained
            .pid()
            .ok_or_else(|| io::Error::other("the child has no pid"))?;
        contained.pidfd = Some(pidfd_open(pid, PidfdFlags::empty()).map_err(io::Error::from)?);
        return Ok(contained);
    }
    // `spawn` returned once the command's `exec` closed its copy of std's error pipe, and the
    // supervisor wrote which box it built before forking: the first record is in the pipe.
    let mut first = [0u8; record::LEN];
    read_exact(&status_r, &mut first)?;
    contained.containment = match Record::decode(first) {
        Some(Record::Namespaces) => Containment::PidNamespace,
        Some(Record::Subreaper) => Containment::Subreaper,
        _ => return Err(io::Error::other("the supervisor reported no containment").into()),
    };
    fcntl_setfl(&status_r, OFlags::NONBLOCK).map_err(io::Error::from)?;
    contained.status = Some(status_r);
    contained.leash = Some(leash_w);
    Ok(contained)
}

impl ContainedChild {
    /// The three pipes, taken by a warm worker ([`crate::WarmBox`]), which speaks to the box
    /// itself instead of [`ContainedChild::finish`]; the child still kills the box on drop.
    pub(crate) fn take_pipes(
        &mut self,
    ) -> (Option<ChildStdin>, Option<ChildStdout>, Option<ChildStderr>) {
        (self.stdin.take(), self.stdout.take(), self.stderr.take())
    }

    /// The containment that applied.
    pub fn containment(&self) -> Containment {
        self.containment
    }

    /// The process id of the broker's child: the supervisor, or the command itself for
    /// [`Containment::ProcessGroup`]. It leads the process group of the command.
    pub fn id(&self) -> Option<u32> {
        self.child.as_ref().map(Proc::id)
    }

    fn pid(&self) -> Option<Pid> {
        Pid::from_raw(i32::try_from(self.id()?).ok()?)
    }

    /// A handle another thread uses to kill the box while [`ContainedChild::finish`] reads it
    /// (a background job's `kill`). [`crate::Stopper::stop`], or dropping the handle, kills
    /// every process of the command as the deadline would; [`Ended::stopped`] then says so.
    /// A second call replaces the first handle, which then stops nothing.
    pub fn stopper(&mut self) -> io::Result<crate::Stopper> {
        let (stop, stopper) = crate::stop::pipe()?;
        self.stop = Some(stop);
        Ok(stopper)
    }
}

impl Drop for ContainedChild {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // The supervisor kills everything when the leash is let go.
        self.leash = None;
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(0));
        if self.is_group() {
            if let Some(pid) = pid {
                let _ = kill_process_group(pid, Signal::KILL);
            }
        } else if let Some(pid) = pid {
            let exited = pidfd_open(pid, PidfdFlags::empty()).ok().is_some_and(|fd| {
                let mut fds = [PollFd::new(&fd, PollFlags::IN)];
                let timeout = Timespec {
                    tv_sec: i64::try_from(BACKSTOP.as_secs()).unwrap_or(1),
                    tv_nsec: 0,
                };
                matches!(poll(&mut fds, Some(&timeout)), Ok(n) if n > 0)
            });
            if !exited {
                let _ = kill_process_group(pid, Signal::KILL);
                let _ = kill_process(pid, Signal::KILL);
            }
        }
        let _ = child.wait();
    }
}

/// The broker's child: forked by `std` (a supervisor), or started sharing the broker's memory
/// until its `exec` ([`crate::spawn`]).
#[derive(Debug)]
pub(crate) enum Proc {
    Forked(Child),
    Shared(Pid),
}

impl Proc {
    fn id(&self) -> u32 {
        match self {
            Proc::Forked(child) => child.id(),
            Proc::Shared(pid) => pid.as_raw_nonzero().get().unsigned_abs(),
        }
    }

    /// Waits for the child to end and reaps it.
    pub(crate) fn wait(&mut self) -> io::Result<ExitStatus> {
        match self {
            Proc::Forked(child) => child.wait(),
            Proc::Shared(pid) => crate::spawn::wait(*pid),
        }
    }
}

/// `"<id> <id> 1"`: the caller's own id mapped onto itself in a new user namespace.
fn id_map(id: u32) -> io::Result<CString> {
    CString::new(format!("{id} {id} 1")).map_err(io::Error::other)
}
