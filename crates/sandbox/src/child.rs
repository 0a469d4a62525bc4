//! What runs in the processes between the broker's `fork` and the command's `exec`.
//!
//! `std` forks the intermediate and runs [`Plan::run`] in it as a `pre_exec` hook (a child
//! that `exec`s straight after the hook, bubblewrap or a process-group command, is started by
//! `crate::spawn` instead, sharing the broker's memory until then). The intermediate never
//! returns from the hook: it forks the process that will `exec` the command
//! (that one returns `Ok` and `std` execs it), supervises it until it ends, the deadline
//! passes or the broker lets go of the leash, writes what happened to the status pipe, and
//! `_exit`s.
//!
//! - Namespaces: the intermediate calls `unshare(CLONE_NEWPID | CLONE_NEWNS [| CLONE_NEWUSER])`
//!   and forks the init, PID 1 of the new PID namespace. The init makes `/` `MS_REC |
//!   MS_PRIVATE`, mounts a fresh `/proc` (and, for uid 0, makes the kernel's knobs read-only:
//!   see `mounts`), drops every capability (so the command can never undo a mount), forks the
//!   command and reaps until the command ends; its exit takes every other process of the
//!   namespace with it. The command is not PID 1 itself, so a signal it
//!   sends to itself (`kill -TERM $$`) works as anywhere else.
//! - Subreaper: where `unshare` is refused, the intermediate becomes a child subreaper, forks
//!   the command, and when it ends kills every process it has adopted until none is left.
//!
//! Everything here is async-signal-safe: the parent may be multithreaded, so between `fork`
//! and `exec` nothing may allocate or take a lock. Buffers live on the stack or were built by
//! the parent before `fork`.

// fork(2), _exit(2) and close_range(2) have no safe wrappers in rustix (a fork cannot be made
// safe in general); each use is a plain system call whose only precondition is documented at
// the call.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::fs::{Mode, OFlags, open};
use rustix::io::{Errno, write};
use rustix::pipe::{PipeFlags, pipe_with};
use rustix::process::{
    Pid, PidfdFlags, Signal, WaitId, WaitIdOptions, WaitOptions, WaitStatus, getpid, kill_process,
    pidfd_open, set_child_subreaper, set_parent_process_death_signal, wait, waitid, waitpid,
};
use rustix::thread::{UnshareFlags, unshare_unsafe};

use crate::harden::{Hardening, make_non_dumpable};
use crate::mounts;
use crate::reap::kill_all_descendants;
use crate::record::Record;

/// How long the intermediate sleeps between looks at its child when `pidfd_open` is missing.
const SLICE: Duration = Duration::from_millis(10);

/// Which kind of box to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Want {
    /// Namespaces, falling back to a subreaper where they are refused.
    Namespaces,
    /// A subreaper only.
    Subreaper,
    /// No intermediate: the command is the child, hardened, in its own process group.
    ProcessGroup,
    /// No intermediate: the child is `bwrap`, which needs its capabilities to build the box
    /// (and drops them all for the command, `--cap-drop ALL`); it joins the box's cgroup, takes
    /// the box's rlimits and `no_new_privs`, in its own process group.
    Bubblewrap,
    /// No intermediate and no bubblewrap: the child is the box's launcher, which applies
    /// Landlock itself; it joins the box's cgroup, takes the rlimits, drops every capability,
    /// sets `no_new_privs` and installs the seccomp programs, in its own process group.
    Launcher,
}

/// The lines written to `/proc/self/{uid_map,gid_map}` for a new user namespace: the caller's
/// own ids mapped onto themselves.
#[derive(Debug, Clone)]
pub(crate) struct IdMaps {
    pub(crate) uid_map: CString,
    pub(crate) gid_map: CString,
    /// Whether the caller's effective user id is 0 (then a user namespace is a second try).
    pub(crate) root: bool,
}

/// Everything the child side needs, built by the parent before `fork`.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) want: Want,
    pub(crate) hardening: Hardening,
    pub(crate) deadline: Option<Instant>,
    /// The status pipe's write end (close-on-exec).
    pub(crate) status: RawFd,
    /// The leash's read end (close-on-exec): hang-up means the broker let go.
    pub(crate) leash: RawFd,
    pub(crate) maps: IdMaps,
    /// The rlimits of a box ([`Want::Bubblewrap`]).
    pub(crate) limits: Option<crate::Limits>,
    /// The cgroup files the box's first process joins by writing `0` (v1 `tasks`, v2
    /// `cgroup.procs`; -1: none).
    pub(crate) cgroups: [RawFd; 2],
    /// Descriptors bubblewrap inherits (the seccomp programs, the box's files, its launcher's
    /// binary; -1: none).
    pub(crate) inherit: [RawFd; crate::policy::MAX_INHERITED],
    /// The seccomp programs installed before `exec` ([`Want::Launcher`]; built by the parent).
    pub(crate) seccomp: Vec<seccompiler::BpfProgram>,
}

/// How supervision of the intermediate's child ended.
enum Outcome {
    Exited,
    TimedOut,
    Cancelled,
}

impl Plan {
    /// The `pre_exec` hook. Returns `Ok` only in the process that is to `exec` the command.
    pub(crate) fn run(&self) -> io::Result<()> {
        match self.want {
            Want::ProcessGroup => self.hardening.apply(),
            Want::Bubblewrap => self.enter_box(),
            Want::Launcher => {
                self.enter_box()?;
                self.hardening.apply()?;
                for program in &self.seccomp {
                    // Builds a `sock_fprog` on the stack and makes two system calls; the errno
                    // is read back rather than formatted (nothing allocated here).
                    seccompiler::apply_filter(program).map_err(|_| io::Error::last_os_error())?;
                }
                Ok(())
            }
            Want::Subreaper => self.subreaper(),
            Want::Namespaces => {
                if self.enter_namespaces()? {
                    self.namespaces()
                } else {
                    self.subreaper()
                }
            }
        }
    }

    /// The box's first process: into its cgroups, under its rlimits, `no_new_privs`.
    fn enter_box(&self) -> io::Result<()> {
        for fd in self.cgroups {
            if fd < 0 {
                continue;
            }
            // SAFETY: the parent opened these cgroup files and keeps them open until after
            // `spawn` returns. A forked child is one thread, so v1's `tasks` moves all of it.
            let file = unsafe { BorrowedFd::borrow_raw(fd) };
            write(file, b"0")?;
        }
        if let Some(limits) = &self.limits {
            limits.apply()?;
        }
        // Every descriptor past the standard three close-on-exec, so nothing the broker holds
        // open (a socket, a granted folder) is inherited by bubblewrap and the box.
        // SAFETY: only sets a flag on this process's own descriptors; closes none.
        if unsafe {
            libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            )
        } != 0
        {
            return Err(io::Error::last_os_error());
        }
        for fd in self.inherit {
            if fd < 0 {
                continue;
            }
            // SAFETY: the parent keeps these descriptors (the seccomp programs' pipes, the
            // box's files, the launcher's binary) open until after `spawn` returns.
            let fd = unsafe { BorrowedFd::borrow_raw(fd) };
            rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty())?;
        }
        rustix::thread::set_no_new_privs(true)?;
        Ok(())
    }

    /// `unshare` into new PID and mount namespaces: as root first without a user namespace,
    /// otherwise (or when that is refused) inside a new one mapping the caller's own ids.
    /// `Ok(false)` when the kernel refuses them (see [`falls_back`]).
    fn enter_namespaces(&self) -> io::Result<bool> {
        let base = UnshareFlags::NEWPID | UnshareFlags::NEWNS;
        if self.maps.root {
            // SAFETY: NEWPID and NEWNS concern only this single-threaded child and its future
            // children; no file descriptor table is unshared.
            match unsafe { unshare_unsafe(base) } {
                Ok(()) => return Ok(true),
                Err(e) if falls_back(e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        // SAFETY: as above; NEWUSER needs a single-threaded caller, which a forked child is.
        match unsafe { unshare_unsafe(base | UnshareFlags::NEWUSER) } {
            Ok(()) => {}
            Err(e) if falls_back(e) => return Ok(false),
            Err(e) => return Err(e.into()),
        }
        // Past this point the children of this process are in the new PID namespace whatever
        // happens, so a failure is an error, not a fall-back.
        write_file(c"/proc/self/setgroups", b"deny")?;
        write_file(c"/proc/self/uid_map", self.maps.uid_map.as_bytes())?;
        write_file(c"/proc/self/gid_map", self.maps.gid_map.as_bytes())?;
        Ok(true)
    }

    /// The intermediate of the namespace box: forks the init and supervises it.
    fn namespaces(&self) -> io::Result<()> {
        self.report(Record::Namespaces);
        let (life_r, life_w) = pipe_with(PipeFlags::CLOEXEC)?;
        match fork()? {
            None => {
                drop(life_w);
                tie_to_parent(&life_r);
                drop(life_r);
                if let Err(e) = self.init_setup() {
                    self.report(Record::SetupFailed(e.raw_os_error()));
                    // `std` sends this error to the broker's `spawn` and exits.
                    return Err(e.into());
                }
                self.init()
            }
            Some(init) => {
                drop(life_r);
                self.become_supervisor(&life_w);
                let outcome = self.supervise(init);
                // Killing PID 1 ends every process of the namespace.
                let _ = kill_process(init, Signal::KILL);
                let _ = waitpid(Some(init), WaitOptions::empty());
                match outcome {
                    // The init reported the command's status itself.
                    Outcome::Exited => {}
                    Outcome::TimedOut => self.report(Record::TimedOut),
                    Outcome::Cancelled => self.report(Record::Cancelled),
                }
                exit(0)
            }
        }
    }

    /// In the init, before the command: its own `/proc`, the kernel's knobs read-only when
    /// the command's user id is 0 (see `mounts`), then no privilege left.
    fn init_setup(&self) -> Result<(), Errno> {
        mounts::own_proc()?;
        if self.maps.root {
            mounts::kernel_knobs_read_only()?;
        }
        set_non_dumpable()?;
        self.hardening
            .apply()
            .map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::PERM))
    }

    /// The init (PID 1): forks the command, then reaps every process until the command is
    /// reaped, reports its status, and exits, which ends the namespace.
    fn init(&self) -> io::Result<()> {
        let Some(command) = fork()? else {
            // The command: its parent is the init; if the init dies, the namespace dies with
            // every process in it, so no death signal is needed.
            return Ok(());
        };
        close_all_except(&mut [self.status]);
        loop {
            match wait(WaitOptions::empty()) {
                Ok(Some((pid, status))) if pid == command => {
                    self.report(status_record(status));
                    exit(0)
                }
                Ok(_) | Err(Errno::INTR) => continue,
                Err(_) => exit(1),
            }
        }
    }

    /// The intermediate as a child subreaper: forks the command, supervises it, then kills
    /// everything it adopted.
    fn subreaper(&self) -> io::Result<()> {
        set_child_subreaper(Some(getpid()))?;
        self.report(Record::Subreaper);
        let (life_r, life_w) = pipe_with(PipeFlags::CLOEXEC)?;
        match fork()? {
            None => {
                drop(life_w);
                tie_to_parent(&life_r);
                drop(life_r);
                self.hardening.apply()
            }
            Some(command) => {
                drop(life_r);
                self.become_supervisor(&life_w);
                let outcome = self.supervise(command);
                let status = match outcome {
                    Outcome::Exited => waitpid(Some(command), WaitOptions::empty())
                        .ok()
                        .flatten()
                        .map(|(_, status)| status_record(status)),
                    Outcome::TimedOut => Some(Record::TimedOut),
                    Outcome::Cancelled => Some(Record::Cancelled),
                };
                let _ = kill_process(command, Signal::KILL);
                kill_all_descendants();
                if let Some(record) = status {
                    self.report(record);
                }
                exit(0)
            }
        }
    }

    /// After forking: keep only the status pipe, the leash and the life pipe, and hold no
    /// privilege the command could borrow.
    fn become_supervisor(&self, life_w: &OwnedFd) {
        close_all_except(&mut [self.status, self.leash, raw(life_w)]);
        let _ = set_non_dumpable();
        let _ = self.hardening.apply();
    }

    /// Waits until `child` ends, the deadline passes, or the leash is let go.
    fn supervise(&self, child: Pid) -> Outcome {
        let pidfd = pidfd_open(child, PidfdFlags::empty()).ok();
        // SAFETY: `self.leash` is the leash's read end, open in this process (kept by
        // `close_all_except`) and owned by nothing else here; it lives until `_exit`.
        let leash = unsafe { BorrowedFd::borrow_raw(self.leash) };
        loop {
            let mut wait = match self.deadline {
                Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return Outcome::TimedOut,
                },
                None => None,
            };
            if pidfd.is_none() {
                wait = Some(wait.map_or(SLICE, |w| w.min(SLICE)));
            }
            let timeout = wait.map(|w| Timespec {
                tv_sec: i64::try_from(w.as_secs()).unwrap_or(i64::MAX),
                tv_nsec: i64::from(w.subsec_nanos()),
            });
            let (let_go, exited) = match &pidfd {
                Some(pidfd) => {
                    let mut fds = [
                        PollFd::new(&leash, PollFlags::IN),
                        PollFd::new(pidfd, PollFlags::IN),
                    ];
                    if let Err(e) = poll(&mut fds, timeout.as_ref())
                        && e != Errno::INTR
                    {
                        return Outcome::Cancelled;
                    }
                    let [leash_fd, child_fd] = &fds;
                    (
                        !leash_fd.revents().is_empty(),
                        !child_fd.revents().is_empty(),
                    )
                }
                None => {
                    let mut fds = [PollFd::new(&leash, PollFlags::IN)];
                    if let Err(e) = poll(&mut fds, timeout.as_ref())
                        && e != Errno::INTR
                    {
                        return Outcome::Cancelled;
                    }
                    let [leash_fd] = &fds;
                    let exited = waitid(
                        WaitId::Pid(child),
                        WaitIdOptions::EXITED | WaitIdOptions::NOWAIT | WaitIdOptions::NOHANG,
                    );
                    (
                        !leash_fd.revents().is_empty(),
                        matches!(exited, Ok(Some(_))),
                    )
                }
            };
            if let_go {
                return Outcome::Cancelled;
            }
            if exited {
                return Outcome::Exited;
            }
        }
    }

    /// Writes one record to the status pipe; a broker that stopped listening is not an error
    /// here (the leash tells the supervisor that).
    fn report(&self, record: Record) {
        // SAFETY: `self.status` is the status pipe's write end, open in every process that
        // reports (kept by `close_all_except`), and outlives this call.
        let status = unsafe { BorrowedFd::borrow_raw(self.status) };
        let bytes = record.encode();
        loop {
            match write(status, &bytes) {
                Err(Errno::INTR) => continue,
                _ => return,
            }
        }
    }
}

/// Whether `unshare`'s error means "namespaces are refused here", so the subreaper takes over:
/// EPERM (no privilege, or a seccomp filter), EINVAL (a kernel without them), ENOSPC (a
/// namespace limit such as `user.max_user_namespaces` = 0), EUSERS (nesting too deep).
pub(crate) fn falls_back(errno: Errno) -> bool {
    matches!(
        errno,
        Errno::PERM | Errno::INVAL | Errno::NOSPC | Errno::USERS | Errno::NOSYS
    )
}

/// The record for a command's wait status.
fn status_record(status: WaitStatus) -> Record {
    match (status.exit_status(), status.terminating_signal()) {
        (Some(code), _) => Record::Exited(code),
        (None, Some(signal)) => Record::Signaled(signal),
        (None, None) => Record::Exited(-1),
    }
}

/// In a freshly forked child: die with the parent (`PR_SET_PDEATHSIG`), and die now if the
/// parent already died before the death signal was set (its end of the life pipe is closed).
fn tie_to_parent(life_r: &OwnedFd) {
    let _ = set_parent_process_death_signal(Some(Signal::KILL));
    let mut fds = [PollFd::new(life_r, PollFlags::IN)];
    let zero = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    if matches!(poll(&mut fds, Some(&zero)), Ok(n) if n > 0) {
        exit(1);
    }
}

fn set_non_dumpable() -> Result<(), Errno> {
    make_non_dumpable().map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::PERM))
}

fn write_file(path: &CStr, bytes: &[u8]) -> Result<(), Errno> {
    let file = open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    let written = write(&file, bytes)?;
    if written == bytes.len() {
        Ok(())
    } else {
        Err(Errno::IO)
    }
}

fn raw(fd: &OwnedFd) -> RawFd {
    fd.as_raw_fd()
}

/// `fork(2)`: `None` in the child, the child's pid in the parent.
fn fork() -> Result<Option<Pid>, Errno> {
    // SAFETY: the caller is itself a forked, single-threaded child, so the new process
    // inherits no other thread's half-done state; both sides go on with async-signal-safe
    // code only (system calls and the stack).
    let pid = unsafe { libc::fork() };
    match pid {
        0 => Ok(None),
        p if p > 0 => Ok(Pid::from_raw(p)),
        _ => Err(Errno::from_raw_os_error(
            io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EAGAIN),
        )),
    }
}

/// `_exit(2)`: ends this process without running anything of the parent's (no atexit
/// handlers, no flushing of buffers copied from the broker).
fn exit(code: i32) -> ! {
    // SAFETY: _exit has no preconditions.
    unsafe { libc::_exit(code) }
}

/// Closes every file descriptor except those in `keep` (sorted in place).
fn close_all_except(keep: &mut [RawFd]) {
    keep.sort_unstable();
    let mut first: u32 = 0;
    for &fd in keep.iter() {
        let Ok(fd) = u32::try_from(fd) else { continue };
        if fd > first {
            close_range(first, fd - 1);
        }
        first = fd.saturating_add(1);
    }
    close_range(first, u32::MAX);
}

fn close_range(first: u32, last: u32) {
    // SAFETY: closes descriptors of this process only; the only ones still used afterwards are
    // those `close_all_except` keeps, and nothing else in this single-threaded child refers to
    // the closed ones.
    let result = unsafe { libc::close_range(first, last, 0) };
    if result != 0 {
        // A kernel without close_range (before 5.9): close one by one, up to a sane bound.
        for fd in first..=last.min(65_535) {
            // SAFETY: as above; closing a descriptor that is not open only returns EBADF.
            unsafe { libc::close(fd as RawFd) };
        }
    }
}

#[cfg(test)]
mod tests {
    use rustix::io::Errno;

    use super::falls_back;

    #[test]
    fn refused_namespaces_fall_back_and_other_errors_do_not() {
        for errno in [
            Errno::PERM,
            Errno::INVAL,
            Errno::NOSPC,
            Errno::USERS,
            Errno::NOSYS,
        ] {
            assert!(falls_back(errno), "{errno:?}");
        }
        for errno in [Errno::NOMEM, Errno::BADF, Errno::NOENT] {
            assert!(!falls_back(errno), "{errno:?}");
        }
    }
}
