//! A warm worker: a box built once from a [`Policy`] whose command stays up and answers one
//! line of output for each line of input, so that a caller pays for the box (bubblewrap,
//! seccomp, Landlock, the cgroup) once, not on every request.
//!
//! The box is the one [`crate::spawn_boxed`] builds, with the command's standard input a pipe
//! from the caller. Each [`WarmBox::exchange`] writes one request line and reads one answer
//! line within a deadline; on any failure (the deadline, the box gone, an answer too long or
//! followed by more bytes than one line) the box is not to be used again: dropping it kills
//! every process of it and its cgroup, as the deadline kills a fresh box.
//!
//! The box's parent-death signal follows the thread that spawned it (bubblewrap's
//! `--die-with-parent`), so a caller that keeps a box beyond one request spawns it from a
//! thread that lives as long as the box may.

use std::io;
use std::os::fd::AsFd;
use std::process::{ChildStderr, ChildStdin, ChildStdout};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::fs::{OFlags, fcntl_setfl};
use rustix::io::{Errno, read, write};

use crate::boxed::spawn_boxed_with;
use crate::contain::ContainedChild;
use crate::policy::{BoxError, Policy};
use crate::spec::{CommandSpec, Ended};
use crate::wire::{self, Request, Tag};

/// How long past a command's timeout its worker may take to answer (it kills the command at
/// the timeout and then waits for its processes to be gone).
pub const WORKER_GRACE: Duration = Duration::from_secs(5);

/// The most bytes of the box's standard error kept for an error message.
const STDERR_KEPT: usize = 64 * 1024;

/// Why an exchange with a warm box failed; the box is not to be used again.
#[derive(Debug, thiserror::Error)]
pub enum WarmError {
    /// No whole answer came before the deadline.
    #[error("the warm box gave no answer within {0:?}")]
    TimedOut(Duration),
    /// The box closed its output (it ended, or was killed) before a whole answer; what it
    /// wrote to standard error is attached.
    #[error("the warm box ended before answering: {0}")]
    Ended(String),
    /// The answer grew past the caller's limit.
    #[error("the warm box's answer passed {0} bytes")]
    TooLong(usize),
    /// The box wrote more than one line for one request.
    #[error("the warm box wrote more than one answer line for one request")]
    Extra,
    /// The worker's answer is not made of frames it may send.
    #[error("the command worker's answer is garbled: {0}")]
    Garbled(String),
    /// A request held a newline (it must be one line).
    #[error("a request to a warm box must be one line")]
    NotOneLine,
    /// The pipes failed.
    #[error("the warm box's pipes failed: {0}")]
    Io(#[from] io::Error),
}

impl WarmError {
    /// Whether the box took none of the request: it was gone, or had written something
    /// unasked, before the request reached it, so the request had no effect and may be sent to
    /// another box.
    pub fn before_request(&self, sent: &Sent) -> bool {
        matches!(self, WarmError::Ended(_) | WarmError::Extra) && sent.0 == 0
    }
}

/// How many bytes of the last request reached the box (see [`WarmError::before_request`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Sent(usize);

/// A box whose command answers requests line by line. Dropping it kills the box.
#[derive(Debug)]
pub struct WarmBox {
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
    /// What the box wrote to standard error so far (at most [`STDERR_KEPT`] bytes).
    errors: Vec<u8>,
    // Last: it kills the box once the pipes are closed.
    child: ContainedChild,
}

/// Starts `spec` in a box built from `policy`, its standard input a pipe from the caller. The
/// box has no deadline of its own: each exchange has one, and dropping the box ends it.
pub fn spawn_warm(spec: &CommandSpec, policy: &Policy) -> Result<WarmBox, BoxError> {
    // The deadline of `ContainedChild::finish`, which a warm box never calls.
    let mut child = spawn_boxed_with(spec, policy, Duration::MAX, true)?;
    let (stdin, stdout, stderr) = child.take_pipes();
    for fd in [
        stdin.as_ref().map(|f| f.as_fd()),
        stdout.as_ref().map(|f| f.as_fd()),
        stderr.as_ref().map(|f| f.as_fd()),
    ]
    .into_iter()
    .flatten()
    {
        fcntl_setfl(fd, OFlags::NONBLOCK).map_err(|e| BoxError::Spawn(io::Error::from(e)))?;
    }
    Ok(WarmBox {
        stdin,
        stdout,
        stderr,
        errors: Vec::new(),
        child,
    })
}

impl WarmBox {
    /// The process id of the broker's child that leads the box (bubblewrap, or the launcher
    /// without it).
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// Whether the box still waits for a request: its output is open and holds nothing (a
    /// box that ended, or wrote without being asked, is not).
    pub fn is_idle(&self) -> bool {
        let Some(out) = &self.stdout else {
            return false;
        };
        let mut fds = [PollFd::new(out, PollFlags::IN)];
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        matches!(poll(&mut fds, Some(&zero)), Ok(0))
    }

    /// Sends `request` (one line, without its newline) and returns the answer line (without
    /// its newline), at most `limit` bytes, before `deadline`. `sent` says afterwards how much
    /// of the request reached the box.
    pub fn exchange(
        &mut self,
        request: &[u8],
        deadline: Instant,
        limit: usize,
        sent: &mut Sent,
    ) -> Result<Vec<u8>, WarmError> {
        if request.contains(&b'\n') {
            return Err(WarmError::NotOneLine);
        }
        let mut line = Vec::with_capacity(request.len() + 1);
        line.extend_from_slice(request);
        line.push(b'\n');
        let started = Instant::now();
        let mut answer = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        *sent = Sent(0);
        self.expect_idle(&mut buf)?;
        // The box waits with an empty pipe, so a request mostly goes at once, without a wait
        // for the pipe to take it; never past its deadline (building the box counts).
        if Instant::now() >= deadline {
            return Err(WarmError::TimedOut(deadline.duration_since(started)));
        }
        self.write_some(&line, sent)?;
        loop {
            let n = self.pump(&line, sent, started, deadline, &mut buf)?;
            // Invariant: `pump` returns what read(2) put in `buf`, at most its length.
            let bytes = &buf[..n];
            if let Some(end) = bytes.iter().position(|b| *b == b'\n') {
                if end + 1 != bytes.len() || sent.0 < line.len() {
                    return Err(WarmError::Extra);
                }
                // Invariant: `end` is a position in `bytes`.
                answer.extend_from_slice(&bytes[..end]);
                if answer.len() > limit {
                    return Err(WarmError::TooLong(limit));
                }
                return Ok(answer);
            }
            answer.extend_from_slice(bytes);
            if answer.len() > limit {
                return Err(WarmError::TooLong(limit));
            }
        }
    }

    /// Runs `spec` in a box of [`crate::spawn_command_worker`]: its output goes to `on_stdout`
    /// and `on_stderr` as it comes, and this returns once it and every process it started are
    /// gone. The worker kills it at `timeout` (and past `output_bytes` of output); a worker
    /// that has not answered [`WORKER_GRACE`] later is given up on ([`WarmError::TimedOut`]).
    #[allow(clippy::too_many_arguments)]
    pub fn run_command(
        &mut self,
        spec: &CommandSpec,
        timeout: Duration,
        cpu_seconds: u64,
        output_bytes: u64,
        on_stdout: &mut dyn FnMut(&[u8]),
        on_stderr: &mut dyn FnMut(&[u8]),
        sent: &mut Sent,
    ) -> Result<Ended, WarmError> {
        let request = Request {
            spec: spec.clone(),
            timeout,
            cpu_seconds,
            output_bytes,
        }
        .encode();
        let started = Instant::now();
        let deadline = started + timeout.saturating_add(WORKER_GRACE);
        let mut buf = vec![0u8; 64 * 1024];
        let mut frames = Vec::new();
        *sent = Sent(0);
        self.expect_idle(&mut buf)?;
        loop {
            let n = self.pump(&request, sent, started, deadline, &mut buf)?;
            // Invariant: `pump` returns what read(2) put in `buf`, at most its length.
            frames.extend_from_slice(&buf[..n]);
            while let Some((tag, payload)) =
                wire::take_frame(&mut frames, wire::MAX_ANSWER).map_err(WarmError::Garbled)?
            {
                match tag {
                    Tag::Stdout => on_stdout(&payload),
                    Tag::Stderr => on_stderr(&payload),
                    Tag::End if frames.is_empty() && sent.0 == request.len() => {
                        return wire::decode_end(&payload).map_err(WarmError::Garbled);
                    }
                    Tag::End => return Err(WarmError::Extra),
                    Tag::Failed => {
                        return Err(WarmError::Ended(
                            String::from_utf8_lossy(&payload).into_owned(),
                        ));
                    }
                    Tag::Request => {
                        return Err(WarmError::Garbled(
                            "the worker sent a request frame".to_string(),
                        ));
                    }
                }
            }
        }
    }

    /// Fails unless nothing waits in the box's output (it would pass for the answer).
    fn expect_idle(&mut self, buf: &mut [u8]) -> Result<(), WarmError> {
        if self.is_idle() {
            return Ok(());
        }
        match self.stdout.as_ref().map(|out| read(out, buf)) {
            Some(Ok(n)) if n > 0 => Err(WarmError::Extra),
            _ => {
                self.stdout = None;
                Err(self.ended())
            }
        }
    }

    /// Waits once for the box (before `deadline`): writes what the pipe takes of the rest of
    /// `request`, keeps what came on standard error, and returns how many bytes of output it
    /// read into `buf` (0: nothing yet). The box closing its output is [`WarmError::Ended`].
    fn pump(
        &mut self,
        request: &[u8],
        sent: &mut Sent,
        started: Instant,
        deadline: Instant,
        buf: &mut [u8],
    ) -> Result<usize, WarmError> {
        let now = Instant::now();
        if now >= deadline {
            return Err(WarmError::TimedOut(deadline.duration_since(started)));
        }
        let left = deadline.duration_since(now);
        let timeout = Timespec {
            tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        let Some(out) = &self.stdout else {
            return Err(self.ended());
        };
        let writing = sent.0 < request.len();
        let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(3);
        fds.push(PollFd::new(out, PollFlags::IN));
        let err_slot = self.stderr.as_ref().map(|err| {
            fds.push(PollFd::new(err, PollFlags::IN));
            fds.len() - 1
        });
        let in_slot = match (&self.stdin, writing) {
            (Some(stdin), true) => {
                fds.push(PollFd::new(stdin, PollFlags::OUT));
                Some(fds.len() - 1)
            }
            _ => None,
        };
        match poll(&mut fds, Some(&timeout)) {
            Ok(_) | Err(Errno::INTR) => {}
            Err(e) => return Err(io::Error::from(e).into()),
        }
        let ready: Vec<bool> = fds.iter().map(|fd| !fd.revents().is_empty()).collect();
        drop(fds);
        let is_ready = |slot: Option<usize>| slot.and_then(|i| ready.get(i).copied());
        if is_ready(in_slot) == Some(true) {
            self.write_some(request, sent)?;
        }
        if is_ready(err_slot) == Some(true) {
            self.read_errors(buf);
        }
        if ready.first() != Some(&true) {
            return Ok(0);
        }
        match self.stdout.as_ref().map(|out| read(out, &mut *buf)) {
            Some(Ok(0)) | None => {
                self.stdout = None;
                Err(self.ended())
            }
            Some(Ok(n)) => Ok(n),
            Some(Err(Errno::INTR | Errno::AGAIN)) => Ok(0),
            Some(Err(e)) => Err(io::Error::from(e).into()),
        }
    }

    /// Writes what the pipe takes of the rest of `line`.
    fn write_some(&mut self, line: &[u8], sent: &mut Sent) -> Result<(), WarmError> {
        let Some(stdin) = &self.stdin else {
            return Err(self.ended());
        };
        // Invariant: `sent` counts the bytes of `line` the pipe took (set to 0 before the first
        // write), and write(2) takes at most what it is given, so it is at most `line`'s length.
        match write(stdin, &line[sent.0..]) {
            Ok(n) => sent.0 += n,
            Err(Errno::INTR | Errno::AGAIN) => {}
            Err(Errno::PIPE) => {
                self.stdin = None;
                return Err(self.ended());
            }
            Err(e) => return Err(io::Error::from(e).into()),
        }
        Ok(())
    }

    /// Keeps what standard error has (up to [`STDERR_KEPT`] bytes); closes it at its end.
    fn read_errors(&mut self, buf: &mut [u8]) {
        let Some(err) = &self.stderr else { return };
        match read(err, &mut *buf) {
            Ok(0) => self.stderr = None,
            Ok(n) => {
                let room = STDERR_KEPT.saturating_sub(self.errors.len()).min(n);
                // Invariant: `room` is at most `n`, which read(2) keeps within `buf`.
                self.errors.extend_from_slice(&buf[..room]);
            }
            Err(Errno::INTR | Errno::AGAIN) => {}
            Err(_) => self.stderr = None,
        }
    }

    /// The error for a box that ended, with what it wrote to standard error (what is still in
    /// the pipe included).
    fn ended(&mut self) -> WarmError {
        let mut buf = vec![0u8; 4096];
        for _ in 0..16 {
            let before = self.errors.len();
            self.read_errors(&mut buf);
            if self.stderr.is_none() || self.errors.len() == before {
                break;
            }
        }
        WarmError::Ended(String::from_utf8_lossy(&self.errors).trim().to_string())
    }
}
