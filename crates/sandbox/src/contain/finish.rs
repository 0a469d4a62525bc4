//! The broker's wait for a contained command: its output read as it comes, its end seen
//! (the supervisor's status pipe, or a `pidfd`), the deadline, the output limit and a stopper
//! acted on, and what is left of it killed.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::time::Instant;

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::io::Errno;
use rustix::process::{Signal, WaitId, WaitIdOptions, kill_process, kill_process_group, waitid};

use super::{BACKSTOP, ContainedChild, Containment, DRAIN, Ended, Exit};
use crate::pipes::{pump, read_available};
use crate::record::{self, Record};

impl ContainedChild {
    /// Reads standard output and standard error into `on_stdout` and `on_stderr` until the
    /// command has ended and its box is gone, then reaps it. At the deadline everything is
    /// killed; the readers give up at the deadline (or shortly after the command ended) even
    /// when a process that escaped the box still holds a pipe open.
    pub fn finish(
        mut self,
        on_stdout: &mut dyn FnMut(&[u8]),
        on_stderr: &mut dyn FnMut(&[u8]),
    ) -> io::Result<Ended> {
        let group = self.is_group();
        let kill_at = self.deadline.map(|d| {
            if group {
                d
            } else {
                d.checked_add(BACKSTOP).unwrap_or(d)
            }
        });
        let mut killed_at: Option<Instant> = None;
        let mut ended_at: Option<Instant> = None;
        let mut buf = vec![0u8; 64 * 1024];
        // Output past the box's limit is dropped and the box killed.
        let limit = self.output_limit.unwrap_or(u64::MAX);
        let seen = std::cell::Cell::new(0u64);
        let bounded = |sink: &mut dyn FnMut(&[u8]), bytes: &[u8]| {
            let before = seen.get();
            seen.set(before.saturating_add(bytes.len() as u64));
            let room = usize::try_from(limit.saturating_sub(before)).unwrap_or(usize::MAX);
            if room > 0 {
                // Cannot panic: the end is at most the length.
                sink(&bytes[..room.min(bytes.len())]);
            }
        };
        let mut to_stdout = |bytes: &[u8]| bounded(on_stdout, bytes);
        let mut to_stderr = |bytes: &[u8]| bounded(on_stderr, bytes);
        let mut flooded = false;
        let mut stopped = false;
        loop {
            let now = Instant::now();
            if ended_at.is_none() {
                if killed_at.is_none() && kill_at.is_some_and(|k| now >= k) {
                    self.kill_everything();
                    killed_at = Some(now);
                }
                if killed_at.is_some_and(|k| now >= k + BACKSTOP) {
                    ended_at = Some(now);
                }
            }
            let streams_open = self.stdout.is_some() || self.stderr.is_some();
            if let Some(ended) = ended_at
                && (!streams_open || now >= ended + DRAIN)
            {
                break;
            }
            let wake = match (ended_at, killed_at) {
                (Some(ended), _) => Some(ended + DRAIN),
                (None, Some(killed)) => Some(killed + BACKSTOP),
                (None, None) => kill_at,
            };
            let events = self.poll_once(wake, &mut buf, &mut to_stdout, &mut to_stderr)?;
            if events.stop && killed_at.is_none() && ended_at.is_none() {
                self.kill_everything();
                killed_at = Some(Instant::now());
                stopped = true;
            }
            if seen.get() > limit && !flooded && killed_at.is_none() && ended_at.is_none() {
                self.kill_everything();
                killed_at = Some(Instant::now());
                flooded = true;
            }
            if events.ended && ended_at.is_none() {
                ended_at = Some(Instant::now());
                self.after_end();
            }
        }
        self.stdout = None;
        self.stderr = None;
        let status = match self.child.take() {
            Some(mut child) => Some(child.wait()?),
            None => None,
        };
        let timed_out_here = killed_at.is_some() && !flooded && !stopped;
        if group {
            return Ok(Ended {
                exit: status
                    .and_then(|s| s.code().map(Exit::Code).or(s.signal().map(Exit::Signal))),
                timed_out: timed_out_here,
                output_exceeded: flooded,
                stopped,
            });
        }
        let mut exit = None;
        let mut timed_out = timed_out_here;
        for record in record::parse_all(&self.records) {
            match record {
                Record::Exited(code) => exit = Some(Exit::Code(code)),
                Record::Signaled(signal) => exit = Some(Exit::Signal(signal)),
                Record::TimedOut => timed_out = true,
                _ => {}
            }
        }
        if timed_out {
            exit = Some(Exit::Signal(Signal::KILL.as_raw()));
        }
        Ok(Ended {
            exit,
            timed_out,
            output_exceeded: flooded,
            stopped,
        })
    }

    /// One `poll` over the open streams and the end signal (status pipe or pidfd) until `wake`.
    fn poll_once(
        &mut self,
        wake: Option<Instant>,
        buf: &mut [u8],
        on_stdout: &mut dyn FnMut(&[u8]),
        on_stderr: &mut dyn FnMut(&[u8]),
    ) -> io::Result<Events> {
        let timeout = wake.map(|w| {
            let left = w.saturating_duration_since(Instant::now());
            Timespec {
                tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
                tv_nsec: i64::from(left.subsec_nanos()),
            }
        });
        let end_fd = self.status.as_ref().or(self.pidfd.as_ref());
        let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(4);
        let mut slots = [None; 4];
        if let Some(out) = &self.stdout {
            slots[0] = Some(fds.len());
            fds.push(PollFd::new(out, PollFlags::IN));
        }
        if let Some(err) = &self.stderr {
            slots[1] = Some(fds.len());
            fds.push(PollFd::new(err, PollFlags::IN));
        }
        if let Some(end) = end_fd {
            slots[2] = Some(fds.len());
            fds.push(PollFd::new(end, PollFlags::IN));
        }
        if let Some(stop) = &self.stop {
            slots[3] = Some(fds.len());
            fds.push(PollFd::new(stop, PollFlags::IN));
        }
        match poll(&mut fds, timeout.as_ref()) {
            Ok(_) | Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
        let ready: Vec<bool> = fds.iter().map(|fd| !fd.revents().is_empty()).collect();
        drop(fds);
        let is_ready =
            |slot: Option<usize>| slot.and_then(|i| ready.get(i).copied()).unwrap_or(false);
        if is_ready(slots[0]) && !pump(&mut self.stdout, buf, on_stdout) {
            self.stdout = None;
        }
        if is_ready(slots[1]) && !pump(&mut self.stderr, buf, on_stderr) {
            self.stderr = None;
        }
        let mut ended = false;
        if is_ready(slots[2]) {
            match &self.status {
                Some(status) => {
                    if !read_available(status, &mut self.records) {
                        self.status = None;
                        ended = true;
                    }
                }
                None => {
                    self.pidfd = None;
                    ended = true;
                }
            }
        }
        // A byte on the stop pipe, or its write end closed: either way, stop (once).
        let stop = is_ready(slots[3]);
        if stop {
            self.stop = None;
        }
        Ok(Events { ended, stop })
    }

    /// Once the command has ended: for a process group, kill what is left of the group (the
    /// leader is a zombie, so its group id cannot have been reused); for a box, wait for the
    /// supervisor to finish exiting and kill its group too, in case anything is left in it.
    fn after_end(&mut self) {
        let Some(pid) = self.pid() else { return };
        if let Some(cgroup) = &mut self.cgroup {
            cgroup.settle();
        }
        if !self.is_group() {
            let _ = waitid(
                WaitId::Pid(pid),
                WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
            );
        }
        let _ = kill_process_group(pid, Signal::KILL);
    }

    /// At the deadline (process group) or when the supervisor has not reported by then:
    /// `SIGKILL` to the group, and to the supervisor, whose death kills the namespace's init.
    fn kill_everything(&mut self) {
        let Some(pid) = self.pid() else { return };
        let _ = kill_process_group(pid, Signal::KILL);
        let _ = kill_process(pid, Signal::KILL);
        if let Some(cgroup) = &self.cgroup {
            cgroup.kill_all();
        }
    }

    /// Whether the broker's child leads the command's process group itself (no supervisor).
    pub(super) fn is_group(&self) -> bool {
        matches!(
            self.containment,
            Containment::ProcessGroup | Containment::Bubblewrap | Containment::Cgroup
        )
    }
}

struct Events {
    ended: bool,
    /// The stopper asked (or was dropped).
    stop: bool,
}
