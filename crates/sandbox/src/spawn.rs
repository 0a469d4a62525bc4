//! Starting a box's first process the way `posix_spawn` does: a child that shares the parent's
//! memory (`clone(CLONE_VM | CLONE_VFORK)`) runs [`Plan::run`] and `exec`s, while the calling
//! thread waits. `std`'s `pre_exec` forces a `fork`, which copies the page tables of the whole
//! broker and leaves it copy-on-write faults afterwards: about 0.5 ms a box here, more for a
//! larger parent. Used for the children that `exec` straight after the hook (bubblewrap, a
//! launcher without it, a process-group command); the supervisors that keep running after
//! their hook still `fork`.
//!
//! The child must touch nothing the parent owns but what it is handed: everything it needs
//! (the program, its arguments and environment as C strings, the pipes, the plan) is built
//! before `clone`, it runs on a stack of its own, with every signal blocked until each
//! caught signal's handler is back to the default (a handler of the parent, running in the
//! child, would run on the parent's memory), and it reports a failure by writing the error
//! number into the parent's memory before `_exit`.

// `clone`, `execve`, `_exit`, `sigaction` and the stack's `mmap` have no safe wrappers; this
// module is their one place. Each use states its precondition.
#![allow(unsafe_code)]

use std::ffi::{CString, OsStr, c_int, c_void};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::process::{ChildStderr, ChildStdin, ChildStdout, ExitStatus};
use std::ptr;
use std::sync::atomic::{AtomicI32, Ordering};

use rustix::fs::{Mode, OFlags, open};
use rustix::pipe::{PipeFlags, pipe_with};
use rustix::process::{Pid, WaitOptions, waitpid};

use crate::child::Plan;
use crate::spec::CommandSpec;

/// The child's stack: its hook needs a few KiB (a seccomp program is installed from the stack);
/// the guard page below it turns an overflow into a fault rather than a write to the heap.
const STACK: usize = 256 << 10;

/// The error number a child reports when its hook failed with an error that carries none.
const UNKNOWN_ERROR: i32 = libc::EIO;

/// A child started by [`spawn`]: its process id and the parent's ends of its three pipes.
#[derive(Debug)]
pub(crate) struct Spawned {
    pub(crate) pid: Pid,
    pub(crate) stdin: Option<ChildStdin>,
    pub(crate) stdout: ChildStdout,
    pub(crate) stderr: ChildStderr,
}

/// Waits for `pid`, a child of this process, to end (retried on `EINTR`).
pub(crate) fn wait(pid: Pid) -> io::Result<ExitStatus> {
    loop {
        match waitpid(Some(pid), WaitOptions::empty()) {
            Ok(Some((_, status))) => return Ok(ExitStatus::from_raw(status.as_raw())),
            Ok(None) => return Err(io::Error::other("waitpid returned no status")),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Everything the child reads, built before `clone` and alive until it has `exec`ed or exited.
struct ChildArgs<'a> {
    program: &'a CString,
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
    cwd: &'a CString,
    /// The descriptors that become the child's 0, 1 and 2.
    stdio: [RawFd; 3],
    plan: &'a Plan,
    /// 0, or the error number of what failed in the child.
    error: AtomicI32,
}

/// Starts `spec` as a child in its own process group, with `plan`'s hook run before the
/// `exec` ([`Plan::run`] must return `Ok` in the very process that calls it, as it does for
/// bubblewrap, a launcher and a process-group command). Standard output and error are pipes;
/// standard input a pipe when `piped_stdin`, `/dev/null` otherwise. The program is taken as a
/// path (no `PATH` search). Returns once the child has `exec`ed; an error of the hook or of
/// the `exec` is returned as that error, the child reaped.
pub(crate) fn spawn(spec: &CommandSpec, plan: &Plan, piped_stdin: bool) -> io::Result<Spawned> {
    let program = c_string(spec.program.as_os_str())?;
    let cwd = c_string(spec.cwd.as_os_str())?;
    let mut strings = Vec::with_capacity(1 + spec.args.len());
    strings.push(program.clone());
    for arg in &spec.args {
        strings.push(c_string(arg)?);
    }
    let mut env = Vec::with_capacity(spec.env.len());
    for (key, value) in &spec.env {
        if key.is_empty() || key.as_bytes().contains(&b'=') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("environment name {key:?} is empty or holds '='"),
            ));
        }
        let mut pair = key.as_bytes().to_vec();
        pair.push(b'=');
        pair.extend_from_slice(value.as_bytes());
        env.push(c_string(OsStr::from_bytes(&pair))?);
    }
    let argv = pointers(&strings);
    let envp = pointers(&env);

    let (stdin_child, stdin_parent) = if piped_stdin {
        let (read, write) = pipe_with(PipeFlags::CLOEXEC)?;
        (read, Some(write))
    } else {
        (
            open("/dev/null", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty())?,
            None,
        )
    };
    let (stdout_parent, stdout_child) = pipe_with(PipeFlags::CLOEXEC)?;
    let (stderr_parent, stderr_child) = pipe_with(PipeFlags::CLOEXEC)?;

    let mut args = ChildArgs {
        program: &program,
        argv: &argv,
        envp: &envp,
        cwd: &cwd,
        stdio: [
            stdin_child.as_raw_fd(),
            stdout_child.as_raw_fd(),
            stderr_child.as_raw_fd(),
        ],
        plan,
        error: AtomicI32::new(0),
    };
    let stack = Stack::new()?;
    let pid = {
        // SAFETY: `all` is initialised by `sigfillset` before use; blocking every signal in
        // this thread keeps the caller's handlers from running in the child until it has
        // reset them, and the mask is restored right after `clone` returns.
        let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: `all` is a `sigset_t` on this stack, which `sigfillset` only writes.
        unsafe { libc::sigfillset(&mut all) };
        // SAFETY: all zeroes is a valid `sigset_t`, overwritten by `pthread_sigmask` below.
        let mut saved: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: both sets live on this stack; `saved` receives the mask put back after
        // `clone`.
        let blocked = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut saved) };
        if blocked != 0 {
            return Err(io::Error::from_raw_os_error(blocked));
        }
        // SAFETY: `child_main` receives `args`, which lives until this thread resumes; with
        // `CLONE_VFORK` this thread resumes only once the child has `exec`ed or exited, so
        // nothing the child reads is freed or moved while it runs, and the child runs on its
        // own stack (`stack`), never on this thread's.
        let pid = unsafe {
            libc::clone(
                child_main,
                stack.top(),
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                ptr::from_mut(&mut args).cast::<c_void>(),
            )
        };
        let clone_error = io::Error::last_os_error();
        // SAFETY: restores the mask saved above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &saved, ptr::null_mut()) };
        if pid < 0 {
            return Err(clone_error);
        }
        Pid::from_raw(pid).ok_or_else(|| io::Error::other("clone returned pid 0"))?
    };
    drop(stack);
    drop((stdin_child, stdout_child, stderr_child));
    let error = args.error.load(Ordering::Acquire);
    if error != 0 {
        let _ = wait(pid);
        return Err(io::Error::from_raw_os_error(error));
    }
    Ok(Spawned {
        pid,
        stdin: stdin_parent.map(ChildStdin::from),
        stdout: ChildStdout::from(stdout_parent),
        stderr: ChildStderr::from(stderr_parent),
    })
}

/// The child's side: signals back to their defaults, the pipes on 0, 1 and 2, the working
/// folder, its own process group, the plan's hook, no signal blocked, then `exec`.
/// Never returns to the caller's code: `exec` replaces it, or it exits with status 127.
extern "C" fn child_main(arg: *mut c_void) -> c_int {
    // SAFETY: `spawn` passed a pointer to its `ChildArgs`, alive and unmoved while this runs.
    let args = unsafe { &*arg.cast::<ChildArgs<'_>>() };
    let result = prepare(args);
    let errno = match result {
        Ok(()) => {
            // SAFETY: the program, argument and environment arrays are NUL-terminated C
            // strings and null-terminated pointer arrays built by `spawn`.
            unsafe {
                libc::execve(
                    args.program.as_ptr(),
                    args.argv.as_ptr(),
                    args.envp.as_ptr(),
                )
            };
            io::Error::last_os_error().raw_os_error()
        }
        Err(e) => e.raw_os_error(),
    };
    args.error.store(
        errno.filter(|e| *e != 0).unwrap_or(UNKNOWN_ERROR),
        Ordering::Release,
    );
    // SAFETY: ends the child without running anything of the parent's (no atexit handlers,
    // no buffers flushed: they are the parent's).
    unsafe { libc::_exit(127) }
}

/// Everything before `exec`, system calls only (no allocation, no lock).
fn prepare(args: &ChildArgs<'_>) -> io::Result<()> {
    reset_signal_handlers();
    let mut stdio = args.stdio;
    // A pipe end that landed on 0, 1 or 2 (a parent started with one of them closed) is moved
    // above them first, so no `dup2` overwrites an end still to be placed.
    for fd in &mut stdio {
        if *fd < 3 {
            // SAFETY: duplicates a descriptor this child holds; the copy is close-on-exec.
            let moved = unsafe { libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, 3) };
            if moved < 0 {
                return Err(io::Error::last_os_error());
            }
            *fd = moved;
        }
    }
    for (target, fd) in (0..).zip(stdio) {
        // SAFETY: `dup2` onto the standard descriptors; the copy is not close-on-exec.
        if unsafe { libc::dup2(fd, target) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    // SAFETY: `cwd` is a NUL-terminated C string built by `spawn`.
    if unsafe { libc::chdir(args.cwd.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: puts this child in a process group of its own.
    if unsafe { libc::setpgid(0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    args.plan.run()?;
    // SAFETY: an empty mask, built on the stack: the program starts with no signal blocked,
    // as `std` starts its children (and `exec` would otherwise keep every signal blocked).
    let mut none: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `none` is a `sigset_t` on this stack, which `sigemptyset` only writes.
    unsafe { libc::sigemptyset(&mut none) };
    // SAFETY: `none` is initialised above; a null old set asks for nothing back.
    let unblocked = unsafe { libc::sigprocmask(libc::SIG_SETMASK, &none, ptr::null_mut()) };
    if unblocked != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Every caught signal back to its default action, so that none of the parent's handlers runs
/// in the child, and `SIGPIPE` too, which `std` ignores in the parent and resets in the
/// children it starts; other ignored signals stay ignored, as `exec` keeps them.
fn reset_signal_handlers() {
    for signal in 1..=libc::SIGRTMAX() {
        if signal == libc::SIGKILL || signal == libc::SIGSTOP {
            continue;
        }
        if signal == libc::SIGPIPE {
            set_default(signal);
            continue;
        }
        // SAFETY: reads the disposition into a zeroed `sigaction`; a signal the C library
        // reserves for itself is refused (`EINVAL`) and skipped.
        let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: a null new action only reads the current one into `current`, on this stack.
        if unsafe { libc::sigaction(signal, ptr::null(), &mut current) } != 0 {
            continue;
        }
        if current.sa_sigaction == libc::SIG_IGN || current.sa_sigaction == libc::SIG_DFL {
            continue;
        }
        set_default(signal);
    }
}

/// `signal`'s default action (all signals are still blocked in the child).
fn set_default(signal: c_int) {
    // SAFETY: a zeroed `sigaction` with `SIG_DFL` as its handler, on the stack.
    let mut default: libc::sigaction = unsafe { std::mem::zeroed() };
    default.sa_sigaction = libc::SIG_DFL;
    // SAFETY: `default` is initialised above and lives on this stack; a null old action asks
    // for nothing back.
    unsafe { libc::sigaction(signal, &default, ptr::null_mut()) };
}

/// A NUL-terminated copy of `text`, or an error naming the text that holds a NUL.
fn c_string(text: &OsStr) -> io::Result<CString> {
    CString::new(text.as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{text:?} holds a NUL byte"),
        )
    })
}

/// The pointers of `strings`, null-terminated, as `execve` takes them.
fn pointers(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(ptr::null()))
        .collect()
}

/// The child's stack, mapped with a guard page below it and unmapped on drop.
struct Stack {
    base: *mut c_void,
    len: usize,
}

impl Stack {
    fn new() -> io::Result<Stack> {
        // SAFETY: `sysconf` reads a constant of the system.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|p| *p > 0)
            .unwrap_or(4096);
        let len = STACK + page;
        // SAFETY: a fresh private anonymous mapping, owned by the `Stack` alone.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = Stack { base, len };
        // SAFETY: the lowest page of the mapping just made becomes the guard page.
        if unsafe { libc::mprotect(base, page, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// The highest address of the stack (it grows down), 16-byte aligned.
    fn top(&self) -> *mut c_void {
        // SAFETY: one past the end of the mapping, which `clone` takes as the initial stack
        // pointer; the length is a multiple of the page size, so the address is aligned.
        unsafe { self.base.cast::<u8>().add(self.len).cast::<c_void>() }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping made in `new`, which nothing uses any more (the child has
        // `exec`ed or exited when `spawn` drops it).
        unsafe { libc::munmap(self.base, self.len) };
    }
}
