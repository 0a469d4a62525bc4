//! The command worker inside a box: it reads one [`Request`] frame after another from its
//! standard input and, for each, forks the command, streams its output back as frames and
//! ends with how it ended, once every process the command started is gone.
//!
//! The worker is the box's launcher itself, after its Landlock layer: PID 2 of the box's own
//! PID namespace (bubblewrap's init is PID 1), so `kill(-1, SIGKILL)` from it reaches exactly
//! the processes of the box but bubblewrap's init and the worker: what the last command left
//! behind. It refuses to serve anywhere else (a box without bubblewrap has no PID namespace of
//! its own, and `kill(-1)` there would reach the owner's other processes).
//!
//! What keeps a command from its worker, which shares its box: the worker is non-dumpable, so
//! nothing in the box reads its memory or its descriptors through `/proc`; each command is a
//! Landlock domain of its own nested in the box's, scoped so that it can signal only its own
//! domain (never the worker), and Landlock refuses a nested domain `ptrace` of its parent's;
//! each command leads its own session, with `RLIMIT_CPU` set to the call's and its OOM score
//! raised to the most, so the box's memory limit takes a command before the worker. The box's
//! cgroup (its processes and memory) holds one command at a time.

#![allow(unsafe_code)]

use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ChildStderr, ChildStdout, Stdio};
use std::time::{Duration, Instant};

use landlock::{ABI, Access, Ruleset, RulesetAttr, RulesetStatus, Scope};
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::fs::{OFlags, fcntl_setfl};
use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags, Resource, Rlimit, getppid, pidfd_open, setrlimit};

use crate::rules::{LAUNCH_FAILED, say};
use crate::spec::{Ended, Exit};
use crate::wire::{self, HEADER, MAX_REQUEST, Request, Tag};

/// The argument after the launcher's own path that makes it a command worker.
pub(crate) const SERVE: &str = "--boxmaker-command-worker";

/// How long output is still read after the command ended (its leftovers are killed then).
const DRAIN: Duration = Duration::from_millis(250);

/// How long a command killed at its deadline may take to be gone before the worker gives up.
const BACKSTOP: Duration = Duration::from_secs(2);

/// Serves requests until standard input ends; the process's exit code.
pub(crate) fn run() -> i32 {
    let mut output = io::stdout().lock();
    match serve(&mut io::stdin().lock(), &mut output) {
        Ok(()) => 0,
        Err(why) => {
            let _ = output.write_all(&wire::frame(Tag::Failed, why.as_bytes()));
            let _ = output.flush();
            say(&format!("boxmaker command worker: {why}"));
            LAUNCH_FAILED
        }
    }
}

fn serve(input: &mut impl Read, output: &mut impl Write) -> Result<(), String> {
    crate::make_non_dumpable().map_err(|e| format!("cannot make itself non-dumpable: {e}"))?;
    if getppid() != Some(Pid::INIT) {
        return Err(
            "a command worker needs a PID namespace of its own (a box built by bubblewrap)"
                .to_string(),
        );
    }
    loop {
        let mut head = [0u8; HEADER];
        match read_all(input, &mut head) {
            Ok(false) => return Ok(()),
            Ok(true) => {}
            Err(e) => return Err(format!("cannot read a request: {e}")),
        }
        let (tag, len) = wire::header(&head)?;
        if tag != Tag::Request {
            return Err(format!("expected a request frame, got {tag:?}"));
        }
        if len > MAX_REQUEST {
            return Err(format!(
                "a request of {len} bytes passes the limit of {MAX_REQUEST}"
            ));
        }
        let mut payload = vec![0u8; len];
        if !read_all(input, &mut payload).map_err(|e| format!("cannot read a request: {e}"))? {
            return Err("standard input ended inside a request".to_string());
        }
        let request = Request::decode(&payload)?;
        let ended = run_one(&request, output)?;
        send(output, Tag::End, &wire::encode_end(&ended))?;
    }
}

/// Fills `buf`; `false` when the input ended before its first byte.
fn read_all(input: &mut impl Read, buf: &mut [u8]) -> io::Result<bool> {
    let mut done = 0;
    while done < buf.len() {
        // Invariant: the loop runs only while `done` is below the length.
        match input.read(&mut buf[done..]) {
            Ok(0) if done == 0 => return Ok(false),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

fn send(output: &mut impl Write, tag: Tag, payload: &[u8]) -> Result<(), String> {
    output
        .write_all(&wire::frame(tag, payload))
        .and_then(|()| output.flush())
        .map_err(|e| format!("cannot answer the broker: {e}"))
}

/// Runs one command to its end and the end of every process it started.
fn run_one(request: &Request, output: &mut impl Write) -> Result<Ended, String> {
    let spec = &request.spec;
    let cpu = request.cpu_seconds;
    let mut command = spec.command();
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: the worker has one thread, so the forked child may allocate (the Landlock
    // ruleset, an error's text) without meeting a lock another thread held at the fork.
    unsafe { command.pre_exec(move || prepare(cpu)) };
    let started = Instant::now();
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            let line = format!("boxmaker box: cannot run {}: {e}\n", spec.program.display());
            send(output, Tag::Stderr, line.as_bytes())?;
            return Ok(Ended {
                exit: Some(Exit::Code(LAUNCH_FAILED)),
                timed_out: false,
                output_exceeded: false,
                stopped: false,
            });
        }
    };
    let followed = follow(&mut child, request, started, output);
    // Whatever happened, nothing of this command outlives it. When the command was reaped
    // and nothing else was left to kill then, nothing is left at all: only a process can
    // start another.
    let clean = matches!(followed, Ok((_, Left::Nothing)));
    if !clean {
        kill_everything();
        let _ = child.wait();
    }
    let (ended, _) = followed?;
    if !clean {
        wait_for_leftovers()?;
    }
    Ok(ended)
}

/// What a command left in the box once it was reaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Left {
    /// No process but bubblewrap's init and the worker (`kill(-1)` found none).
    Nothing,
    /// Processes, killed but perhaps not gone yet, or not known.
    Maybe,
}

/// Between `fork` and `exec` of a command: its own session, the call's CPU limit, the
/// highest OOM score, and a Landlock domain of its own that may signal only itself.
fn prepare(cpu_seconds: u64) -> io::Result<()> {
    rustix::process::setsid()?;
    let _ = std::fs::write("/proc/self/oom_score_adj", "1000");
    setrlimit(
        Resource::Cpu,
        Rlimit {
            current: Some(cpu_seconds),
            maximum: Some(cpu_seconds),
        },
    )?;
    let scoped = Ruleset::default()
        .scope(Scope::from_all(ABI::V6))
        .and_then(|r| r.create())
        .and_then(|r| r.restrict_self())
        .map_err(|e| io::Error::other(format!("Landlock cannot scope the command: {e}")))?;
    if scoped.ruleset != RulesetStatus::FullyEnforced {
        return Err(io::Error::other(
            "Landlock cannot scope the command's signals on this kernel",
        ));
    }
    Ok(())
}

/// Streams the command's output to the broker until it ended (and its output is drained),
/// its deadline passed, or it wrote more than it may.
fn follow(
    child: &mut Child,
    request: &Request,
    started: Instant,
    output: &mut impl Write,
) -> Result<(Ended, Left), String> {
    let lost = |e: io::Error| format!("lost track of the command: {e}");
    let mut left = Left::Maybe;
    let mut stdout: Option<ChildStdout> = child.stdout.take();
    let mut stderr: Option<ChildStderr> = child.stderr.take();
    for fd in [
        stdout.as_ref().map(|f| f.as_fd()),
        stderr.as_ref().map(|f| f.as_fd()),
    ]
    .into_iter()
    .flatten()
    {
        fcntl_setfl(fd, OFlags::NONBLOCK).map_err(|e| lost(e.into()))?;
    }
    let pid = Pid::from_child(child);
    let pidfd = pidfd_open(pid, PidfdFlags::empty()).map_err(|e| lost(e.into()))?;
    let deadline = started.checked_add(request.timeout);
    let mut status = None;
    let mut killed_at: Option<Instant> = None;
    let mut drain_until: Option<Instant> = None;
    let (mut timed_out, mut flooded) = (false, false);
    let mut seen = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let now = Instant::now();
        if status.is_none() && killed_at.is_none() && deadline.is_some_and(|d| now >= d) {
            kill_everything();
            killed_at = Some(now);
            timed_out = true;
        }
        if let Some(until) = drain_until
            && ((stdout.is_none() && stderr.is_none()) || now >= until)
        {
            break;
        }
        let wake = match (drain_until, killed_at) {
            (Some(until), _) => Some(until),
            (None, Some(killed)) => {
                if now >= killed + BACKSTOP {
                    return Err("the command did not end when killed".to_string());
                }
                Some(killed + BACKSTOP)
            }
            (None, None) => deadline,
        };
        let timeout = wake.map(|w| {
            let left = w.saturating_duration_since(now);
            Timespec {
                tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
                tv_nsec: i64::from(left.subsec_nanos()),
            }
        });
        let mut fds = Vec::with_capacity(3);
        let out_slot = stdout.as_ref().map(|f| {
            fds.push(PollFd::new(f, PollFlags::IN));
            fds.len() - 1
        });
        let err_slot = stderr.as_ref().map(|f| {
            fds.push(PollFd::new(f, PollFlags::IN));
            fds.len() - 1
        });
        let exit_slot = status.is_none().then(|| {
            fds.push(PollFd::new(&pidfd, PollFlags::IN));
            fds.len() - 1
        });
        match poll(&mut fds, timeout.as_ref()) {
            Ok(_) | Err(Errno::INTR) => {}
            Err(e) => return Err(lost(e.into())),
        }
        let ready: Vec<bool> = fds.iter().map(|fd| !fd.revents().is_empty()).collect();
        drop(fds);
        let is_ready = |slot: Option<usize>| slot.and_then(|i| ready.get(i).copied()) == Some(true);
        for (slot, tag) in [(out_slot, Tag::Stdout), (err_slot, Tag::Stderr)] {
            if !is_ready(slot) {
                continue;
            }
            let got = if tag == Tag::Stdout {
                read_some(&mut stdout, &mut buf)
            } else {
                read_some(&mut stderr, &mut buf)
            };
            let Some(n) = got.map_err(lost)? else {
                continue;
            };
            let room =
                usize::try_from(request.output_bytes.saturating_sub(seen)).unwrap_or(usize::MAX);
            seen = seen.saturating_add(n as u64);
            // Invariant: `read_some` returns what `Read::read` put in `buf`, at most its length.
            let passed = &buf[..n.min(room)];
            if !passed.is_empty() {
                send(output, tag, passed)?;
            }
            if seen > request.output_bytes && status.is_none() && killed_at.is_none() {
                kill_everything();
                killed_at = Some(Instant::now());
                flooded = true;
            }
        }
        if is_ready(exit_slot) {
            status = Some(child.wait().map_err(lost)?);
            // What the command left behind dies with it, as in a fresh box.
            if !kill_everything() {
                left = Left::Nothing;
            }
            drain_until = Some(Instant::now() + DRAIN);
        }
    }
    let exit = status.map(|s| match (s.code(), s.signal()) {
        (Some(code), _) => Exit::Code(code),
        (None, Some(signal)) => Exit::Signal(signal),
        (None, None) => Exit::Code(-1),
    });
    Ok((
        Ended {
            exit,
            timed_out,
            output_exceeded: flooded,
            stopped: false,
        },
        left,
    ))
}

/// Reads what `stream` has: `Some(n)` bytes, or `None` when it has nothing now or has just
/// ended (then it is closed).
fn read_some(stream: &mut Option<impl Read>, buf: &mut [u8]) -> io::Result<Option<usize>> {
    let Some(open) = stream.as_mut() else {
        return Ok(None);
    };
    match open.read(buf) {
        Ok(0) => {
            *stream = None;
            Ok(None)
        }
        Ok(n) => Ok(Some(n)),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Kills every process of the box but bubblewrap's init and this worker; whether there was
/// any (`kill(-1)` fails with `ESRCH` when it finds none to signal).
fn kill_everything() -> bool {
    // SAFETY: `kill` takes no pointer; -1 means every process this one may signal, which in
    // the box's own PID namespace is the box's processes but its init and the caller.
    let killed = unsafe { libc::kill(-1, libc::SIGKILL) };
    killed == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Waits until the box holds no process but its init and this worker (bubblewrap's init
/// reaps what was killed), killing again what is still there.
fn wait_for_leftovers() -> Result<(), String> {
    let me = std::process::id();
    let give_up = Instant::now() + BACKSTOP;
    loop {
        let others = std::fs::read_dir("/proc")
            .map_err(|e| format!("cannot list the box's processes: {e}"))?
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .any(|pid| pid != 1 && pid != me);
        if !others {
            return Ok(());
        }
        if Instant::now() >= give_up {
            return Err("processes of the last command would not end".to_string());
        }
        kill_everything();
        std::thread::sleep(Duration::from_micros(200));
    }
}
