//! The broker's background jobs (`bash_bg`, `bash_tail`, `bash_kill`): a table of each
//! session's jobs, each numbered by the id of the `bash_bg` call that started it (call ids are
//! never reused in a session, so a job id never names two jobs, not even across a broker's
//! restart, and one session's ids say nothing of another's); a job of another session is
//! answered exactly as a job that does not exist.
//! A job is the one exception to "every descendant dies with its call": it has a box of its own
//! ([`super::runner::Runner::start_job`]) and dies at `job_lifetime_ms`, by `bash_kill`, when
//! its session ends ([`Jobs::end_session`]), or when the broker stops ([`Jobs::stop_all`];
//! and, should the broker be killed outright, with the thread that reads it, through the box's
//! parent-death signal).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use proto::{Class, SessionId};
use serde_json::{Map, Value, json};
use tools::jobs::{DEFAULT_TAIL_BYTES, Job, JobOptions, JobState, JobStatus};

use super::Broker;
use super::memory::Routed;
use super::runner::{Outcome, RunContext};
use policy::args::ToolArgs;
use policy::decide::Allowed;

/// How long `bash_kill`, a session's end or the broker's stop waits for a killed job's box to
/// be gone.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// Every session's jobs.
#[derive(Debug, Default)]
pub struct Jobs {
    sessions: Mutex<HashMap<SessionId, SessionJobs>>,
}

#[derive(Debug, Default)]
struct SessionJobs {
    jobs: BTreeMap<u64, Arc<Entry>>,
}

/// One job and what its answers carry.
#[derive(Debug)]
struct Entry {
    job: Job,
    /// The labels of the `bash_bg` call that started it: its output's.
    class: Class,
    untrusted: bool,
}

impl Jobs {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, SessionJobs>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn find(&self, session: &SessionId, job: u64) -> Option<Arc<Entry>> {
        self.lock()
            .get(session)
            .and_then(|jobs| jobs.jobs.get(&job))
            .cloned()
    }

    /// Makes room for one more job of `session` (dropping the oldest ended job when the
    /// session holds `cap`), or says why there is none.
    fn room(&self, session: &SessionId, cap: usize) -> Result<(), String> {
        let mut sessions = self.lock();
        let Some(jobs) = sessions.get_mut(session) else {
            return Ok(());
        };
        if jobs.jobs.len() < cap {
            return Ok(());
        }
        let ended = jobs
            .jobs
            .iter()
            .find(|(_, e)| e.job.status().state != JobState::Running)
            .map(|(id, _)| *id);
        match ended {
            Some(id) => {
                jobs.jobs.remove(&id);
                Ok(())
            }
            None => Err(format!(
                "this session already runs {cap} jobs (jobs_per_session in brokerd.toml); stop one with bash_kill first"
            )),
        }
    }

    /// Keeps `entry` as job `id` of `session` (the id of the call that started it).
    fn insert(&self, session: &SessionId, id: u64, entry: Entry) {
        let mut sessions = self.lock();
        let jobs = sessions.entry(session.clone()).or_default();
        jobs.jobs.insert(id, Arc::new(entry));
    }

    /// Kills every job of `session` and forgets them (its session ended). Blocking.
    pub fn end_session_blocking(&self, session: &SessionId) -> usize {
        let removed = self.lock().remove(session);
        let entries: Vec<Arc<Entry>> = removed
            .map(|jobs| jobs.jobs.into_values().collect())
            .unwrap_or_default();
        kill_all(&entries)
    }

    /// [`Jobs::end_session_blocking`] off the async threads.
    pub async fn end_session(self: &Arc<Self>, session: &SessionId) {
        let jobs = Arc::clone(self);
        let session = session.clone();
        let killed = tokio::task::spawn_blocking(move || jobs.end_session_blocking(&session)).await;
        if let Ok(killed @ 1..) = killed {
            tracing::info!(killed, "killed the jobs of an ended session");
        }
    }

    /// Kills every job of every session (the broker stops). Blocking.
    pub fn stop_all(&self) -> usize {
        let all: Vec<Arc<Entry>> = self
            .lock()
            .drain()
            .flat_map(|(_, jobs)| jobs.jobs.into_values())
            .collect();
        kill_all(&all)
    }

    /// How many jobs run now, in all sessions.
    pub fn running(&self) -> usize {
        self.lock()
            .values()
            .flat_map(|jobs| jobs.jobs.values())
            .filter(|e| e.job.status().state == JobState::Running)
            .count()
    }
}

/// Kills `entries` (each waits for its box to be gone); the jobs' threads end when the last
/// handle goes. Returns how many were still running.
fn kill_all(entries: &[Arc<Entry>]) -> usize {
    entries.iter().filter(|e| e.job.kill(KILL_WAIT).1).count()
}

/// The answer to a `bash_tail` or `bash_kill` of a job this session does not have: the same
/// whether the id was never given or is another session's.
fn no_such_job(job: u64) -> String {
    format!("this session has no job {job}; bash_bg returns the id of each job it starts")
}

/// Runs decided job call `call` of `session` (a `bash_bg` call's id is its job's).
pub async fn route(
    broker: &Arc<Broker>,
    session: &SessionId,
    call: proto::CallId,
    allowed: &Allowed,
    mut context: RunContext,
) -> Routed {
    let plain = |outcome| Routed {
        outcome,
        class: allowed.class,
        untrusted: allowed.untrusted,
    };
    match &allowed.args {
        ToolArgs::BashBg(script) => {
            let cap = broker.config.jobs_per_session;
            if let Err(full) = broker.jobs.room(session, cap) {
                return plain(Outcome::Failed(full));
            }
            let lifetime = broker.config.job_lifetime();
            // The box's CPU limit follows the job's lifetime, not a call's.
            context.limit = lifetime;
            let options = JobOptions {
                lifetime,
                ring_bytes: broker.config.job_ring_bytes,
                default_cwd: std::path::PathBuf::from("/"),
                policy: None,
                keep_alive: None,
            };
            let runner = Arc::clone(&broker.runner);
            let to_start = allowed.clone();
            let started =
                tokio::task::spawn_blocking(move || runner.start_job(&to_start, &context, options))
                    .await;
            let (job, mut fields) = match started {
                Ok(Ok(started)) => started,
                Ok(Err(why)) => return plain(Outcome::Failed(why)),
                Err(join) => {
                    return plain(Outcome::Failed(format!(
                        "the job could not be started: {join}"
                    )));
                }
            };
            let id = call.0;
            broker.jobs.insert(
                session,
                id,
                Entry {
                    job,
                    class: allowed.class,
                    untrusted: allowed.untrusted,
                },
            );
            let mut header = Map::new();
            header.insert("job".into(), json!(id));
            header.insert("state".into(), json!(JobState::Running.as_str()));
            header.insert("cwd".into(), json!(script.cwd.as_deref().unwrap_or("/")));
            header.insert("lifetime_ms".into(), json!(broker.config.job_lifetime_ms));
            header.append(&mut fields);
            plain(Outcome::Ran {
                fields: header,
                body: format!(
                    "job {id} started; bash_tail {{\"job\": {id}}} reads its output, bash_kill {{\"job\": {id}}} stops it"
                ),
            })
        }
        ToolArgs::BashTail(args) => {
            let Some(entry) = broker.jobs.find(session, args.job) else {
                return plain(Outcome::Failed(no_such_job(args.job)));
            };
            // What a tail returns fits in one answer beside its header.
            let room = broker.config.result_cap.saturating_sub(1024).max(512);
            let asked = args.max_bytes.unwrap_or(DEFAULT_TAIL_BYTES);
            let max = usize::try_from(asked).unwrap_or(usize::MAX).min(room);
            let tail = entry.job.tail(max);
            let mut fields = status_fields(args.job, &tail.status);
            fields.insert("bytes".into(), json!(tail.bytes));
            fields.insert("dropped_bytes".into(), json!(tail.dropped_bytes));
            fields.insert("unread_bytes".into(), json!(tail.unread_bytes));
            fields.insert("total_bytes".into(), json!(tail.total_bytes));
            Routed {
                outcome: Outcome::Ran {
                    fields,
                    body: tail.output,
                },
                class: entry.class,
                untrusted: entry.untrusted,
            }
        }
        ToolArgs::BashKill(args) => {
            let Some(entry) = broker.jobs.find(session, args.job) else {
                return plain(Outcome::Failed(no_such_job(args.job)));
            };
            let killing = Arc::clone(&entry);
            let killed = tokio::task::spawn_blocking(move || killing.job.kill(KILL_WAIT)).await;
            let Ok((status, was_running)) = killed else {
                return plain(Outcome::Failed(format!(
                    "job {} could not be killed",
                    args.job
                )));
            };
            let mut fields = status_fields(args.job, &status);
            fields.insert("was_running".into(), json!(was_running));
            let body = if was_running {
                format!("job {} killed, with every process it started", args.job)
            } else {
                format!(
                    "job {} had already ended ({})",
                    args.job,
                    status.state.as_str()
                )
            };
            Routed {
                outcome: Outcome::Ran { fields, body },
                class: entry.class,
                untrusted: entry.untrusted,
            }
        }
        _ => plain(Outcome::Failed(
            "only bash_bg, bash_tail and bash_kill are jobs".to_string(),
        )),
    }
}

/// The header fields every job answer has: the job, its state, how it ended, how long it ran.
fn status_fields(job: u64, status: &JobStatus) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("job".into(), json!(job));
    fields.insert("state".into(), json!(status.state.as_str()));
    fields.insert("exit_code".into(), json!(status.exit_code));
    fields.insert("signal".into(), json!(status.signal));
    fields.insert("duration_ms".into(), json!(status.duration_ms));
    fields
}
