//! Background jobs, seed 003's `bash_bg`, `bash_tail` and `bash_kill`: a command started in a
//! box of its own that keeps running after the call that started it, its output (standard
//! output and standard error interleaved, in the order they were read) kept in a bounded ring
//! of the newest bytes, read a piece at a time, and killed on demand, at its lifetime, or when
//! its [`Job`] is dropped. Which session owns a job is the broker's business, not this
//! module's.
//!
//! Each job has a thread of its own that starts the box and reads it to its end: the kernel's
//! parent-death signal follows the thread that spawned a box, so the box dies with that
//! thread, and the thread lives exactly as long as the box.

mod ring;

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use sandbox::{ContainOptions, Containment, Ended, Exit, Stopper};

use crate::clean::clean_output;
use crate::shell::{ShellArgs, ShellError, command_spec};

pub use ring::{Read, Ring};

pub use proto::tools::schemas::{bash_bg_schema, bash_kill_schema, bash_tail_schema};

/// The arguments of `bash_bg`: `shell`'s without a time limit (a job lives until it ends, is
/// killed, or reaches the broker's `job_lifetime_ms`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BashBgArgs {
    /// The command line to run.
    pub command: String,
    /// The absolute path of the directory to run it in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

impl BashBgArgs {
    /// The script as `shell` would run it (no `timeout_secs`): what the checker judges.
    pub fn script(&self) -> ShellArgs {
        ShellArgs {
            command: self.command.clone(),
            cwd: self.cwd.clone(),
            timeout_secs: None,
        }
    }
}

/// The arguments of `bash_tail`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BashTailArgs {
    /// The job, as `bash_bg` numbered it.
    pub job: u64,
    /// The most bytes of output to return (default [`DEFAULT_TAIL_BYTES`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

/// The arguments of `bash_kill`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BashKillArgs {
    /// The job, as `bash_bg` numbered it.
    pub job: u64,
}

/// The bytes `bash_tail` returns when the call names no `max_bytes`.
pub const DEFAULT_TAIL_BYTES: u64 = 16 * 1024;

/// How a job runs.
#[derive(Debug, Clone)]
pub struct JobOptions {
    /// The longest it may run; then every process it started is killed ([`JobState::TimedOut`]).
    pub lifetime: Duration,
    /// The most bytes of output kept ([`Ring`]); older ones are dropped and counted.
    pub ring_bytes: usize,
    /// The directory used when the call names none.
    pub default_cwd: PathBuf,
    /// The box to run it in ([`sandbox::spawn_boxed`]); without one it is contained as `shell`
    /// contains a command without a box (its own PID and mount namespaces).
    pub policy: Option<sandbox::Policy>,
    /// What must live as long as the job's box and no longer (the caller's proxy of the box's
    /// granted hosts): held by the job's thread, dropped when the box has ended.
    pub keep_alive: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Still running.
    Running,
    /// It ended by itself (with an exit code or a signal).
    Exited,
    /// `bash_kill` (or the end of its session, or the broker stopping) killed it.
    Killed,
    /// It reached its lifetime and was killed.
    TimedOut,
}

impl JobState {
    /// The snake_case name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Running => "running",
            JobState::Exited => "exited",
            JobState::Killed => "killed",
            JobState::TimedOut => "timed_out",
        }
    }
}

/// A job's state and how it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobStatus {
    /// Where it is.
    pub state: JobState,
    /// Its exit code, when it exited by itself.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// How long it has run (or ran), in milliseconds.
    pub duration_ms: u64,
}

/// One `bash_tail`: the output since the last read, and the job's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tail {
    /// The output, cleaned for the model ([`clean_output`]).
    pub output: String,
    /// Raw bytes this read returned.
    pub bytes: u64,
    /// Bytes written since the last read that the ring no longer held.
    pub dropped_bytes: u64,
    /// Bytes held past this read, for the next one.
    pub unread_bytes: u64,
    /// Bytes the job has written in all.
    pub total_bytes: u64,
    /// The job's status at this read.
    pub status: JobStatus,
}

/// A running (or ended) job. Dropping it kills the job and waits for its thread.
#[derive(Debug)]
pub struct Job {
    shared: Arc<Shared>,
    stopper: Mutex<Option<Stopper>>,
    thread: Option<JoinHandle<()>>,
    containment: Containment,
}

#[derive(Debug)]
struct Shared {
    inner: Mutex<Inner>,
    ended: Condvar,
    started: Instant,
}

#[derive(Debug)]
struct Inner {
    ring: Ring,
    /// The offset the next `bash_tail` reads from.
    read: u64,
    end: Option<JobStatus>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn status(&self, inner: &Inner) -> JobStatus {
        inner.end.unwrap_or(JobStatus {
            state: JobState::Running,
            exit_code: None,
            signal: None,
            duration_ms: self.elapsed_ms(),
        })
    }

    fn finish(&self, ended: Result<Ended, std::io::Error>) {
        let status = match ended {
            Ok(ended) => JobStatus {
                state: if ended.stopped {
                    JobState::Killed
                } else if ended.timed_out {
                    JobState::TimedOut
                } else if ended.output_exceeded {
                    JobState::Killed
                } else {
                    JobState::Exited
                },
                exit_code: match ended.exit {
                    Some(Exit::Code(code)) if !ended.timed_out && !ended.stopped => Some(code),
                    _ => None,
                },
                signal: match ended.exit {
                    Some(Exit::Signal(signal)) => Some(signal),
                    _ => None,
                },
                duration_ms: self.elapsed_ms(),
            },
            // Lost track of the box: it was killed on the way out (the child's drop).
            Err(_) => JobStatus {
                state: JobState::Killed,
                exit_code: None,
                signal: None,
                duration_ms: self.elapsed_ms(),
            },
        };
        self.lock().end = Some(status);
        self.ended.notify_all();
    }
}

/// Starts `args.command` as a job; returns once its box runs (or could not be built).
pub fn start(args: &ShellArgs, options: &JobOptions) -> Result<Job, ShellError> {
    let spec = command_spec(args, &options.default_cwd)?;
    let shared = Arc::new(Shared {
        inner: Mutex::new(Inner {
            ring: Ring::new(options.ring_bytes),
            read: 0,
            end: None,
        }),
        ended: Condvar::new(),
        started: Instant::now(),
    });
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let reader = Arc::clone(&shared);
    let options = options.clone();
    let thread = std::thread::Builder::new()
        .name("job".to_string())
        .spawn(move || {
            // The closure would take only the fields it names: this one goes with the box.
            let _alive = options.keep_alive;
            let spawned = match &options.policy {
                Some(policy) => {
                    sandbox::spawn_boxed(&spec, policy, options.lifetime).map_err(ShellError::Box)
                }
                None => {
                    let contain = ContainOptions {
                        timeout: options.lifetime,
                        containment: Containment::PidNamespace,
                    };
                    sandbox::spawn_contained(&spec, &contain).map_err(|source| ShellError::Spawn {
                        shell: spec.program.display().to_string(),
                        source,
                    })
                }
            };
            let mut child = match spawned {
                Ok(child) => child,
                Err(error) => {
                    let _ = started_tx.send(Err(error));
                    return;
                }
            };
            match child.stopper() {
                Ok(stopper) => {
                    if started_tx.send(Ok((stopper, child.containment()))).is_err() {
                        return; // nobody waits for the job: the child's drop kills it
                    }
                }
                Err(error) => {
                    let _ = started_tx.send(Err(ShellError::Follow(error)));
                    return;
                }
            }
            let push = |bytes: &[u8]| reader.lock().ring.push(bytes);
            let ended = child.finish(&mut |b| push(b), &mut |b| push(b));
            reader.finish(ended);
        })
        .map_err(|source| ShellError::Spawn {
            shell: "the job's thread".to_string(),
            source,
        })?;
    match started_rx.recv() {
        Ok(Ok((stopper, containment))) => Ok(Job {
            shared,
            stopper: Mutex::new(Some(stopper)),
            thread: Some(thread),
            containment,
        }),
        Ok(Err(error)) => {
            let _ = thread.join();
            Err(error)
        }
        Err(_) => {
            let _ = thread.join();
            Err(ShellError::Follow(std::io::Error::other(
                "the job's thread ended before its box started",
            )))
        }
    }
}

impl Job {
    /// How the job's processes are held together.
    pub fn containment(&self) -> Containment {
        self.containment
    }

    /// The job's status now.
    pub fn status(&self) -> JobStatus {
        let inner = self.shared.lock();
        self.shared.status(&inner)
    }

    /// At most `max_bytes` of the output written since the last read, and the job's status.
    pub fn tail(&self, max_bytes: usize) -> Tail {
        let mut inner = self.shared.lock();
        // The status first: an ended job's output is all in the ring by then.
        let status = self.shared.status(&inner);
        let read = inner.ring.read_from(inner.read, max_bytes);
        inner.read = read.next;
        Tail {
            output: clean_output(&read.bytes),
            bytes: read.bytes.len() as u64,
            dropped_bytes: read.dropped,
            unread_bytes: read.unread,
            total_bytes: inner.ring.total(),
            status,
        }
    }

    /// Kills the job (if it still runs) and waits at most `wait` for it to end; returns its
    /// status then, and whether it was still running when asked.
    pub fn kill(&self, wait: Duration) -> (JobStatus, bool) {
        let was_running = self.shared.lock().end.is_none();
        if let Some(stopper) = self
            .stopper
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            stopper.stop();
        }
        let inner = self.shared.lock();
        let (inner, _) = self
            .shared
            .ended
            .wait_timeout_while(inner, wait, |inner| inner.end.is_none())
            .unwrap_or_else(PoisonError::into_inner);
        (self.shared.status(&inner), was_running)
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        // Letting go of the stopper kills the box; the thread then reaps it and ends.
        self.stopper
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
