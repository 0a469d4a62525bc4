//! The one writer of the audit log and the ledger, by group commit: a caller that records
//! queues its records, and the first caller to find no batch being written becomes the writer
//! of every record queued so far (one fsync each batch) on its own thread, so a lone call's
//! answer goes to disk without waiting for another thread to wake. A second thread then
//! applies each batch, in order, to the ledger. A call's answer leaves only after its record is
//! on disk; the next batch is written while the ledger follows the last one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use ledger::{AuditLog, Event, Ledger};
use proto::{CallId, SessionId, Timestamp, ToolResponse};
use tokio::sync::oneshot;

/// The most jobs written with one fsync.
const MAX_BATCH: usize = 1024;

/// Why a record could not be kept.
#[derive(Debug, Clone, thiserror::Error)]
pub enum JournalError {
    /// The audit log could not be written (the answer must be `AuditUnavailable`).
    #[error("the audit log cannot be written: {0}")]
    Audit(String),
    /// The log was written but the ledger could not follow (the state is unreadable until a
    /// restart catches it up from the log).
    #[error("the ledger cannot be updated: {0}")]
    Ledger(String),
    /// The thread that wrote or applied the records is gone (the broker is stopping).
    #[error("the audit writer has stopped")]
    Stopped,
}

/// A call's whole answer, for the ledger, where its audit record keeps only a digest.
#[derive(Debug, Clone)]
pub struct WholeAnswer {
    /// The session.
    pub session: SessionId,
    /// The call.
    pub call_id: CallId,
    /// The answer the client received.
    pub response: ToolResponse,
}

struct Job {
    ticket: u64,
    events: Vec<Event>,
    whole: Option<WholeAnswer>,
    follower: Follower,
}

/// Who hears that the ledger followed a job's records (or could not).
enum Follower {
    /// A caller waiting in [`Applied::wait`].
    Waiting(oneshot::Sender<Result<(), JournalError>>),
    /// A flag set once the ledger holds the records (a session's memo reads it): no thread to
    /// wake, so the ledger's thread wakes none after each answer.
    Flag(Arc<AtomicBool>),
}

impl Follower {
    fn tell(self, outcome: Result<(), JournalError>) {
        match self {
            Follower::Waiting(waiting) => {
                let _ = waiting.send(outcome);
            }
            Follower::Flag(flag) => {
                if outcome.is_ok() {
                    flag.store(true, Ordering::Release);
                }
            }
        }
    }
}

/// Resolves once the ledger follows the records of one [`Journal::record_with`].
pub struct Applied(oneshot::Receiver<Result<(), JournalError>>);

impl Applied {
    /// Waits until the ledger has applied the records.
    pub async fn wait(self) -> Result<(), JournalError> {
        self.0.await.map_err(|_| JournalError::Stopped)?
    }
}

/// How long the writer waits for more records before an fsync once it has seen concurrent
/// callers: a few more answers share each fsync at the cost of at most this much latency.
const GATHER: Duration = Duration::from_micros(600);

/// How much writing the journal has done: for the benchmark's fsyncs per call.
#[derive(Debug, Default)]
pub struct JournalStats {
    /// Batches written (one fsync each).
    pub fsyncs: AtomicU64,
    /// Records written.
    pub records: AtomicU64,
}

/// The handle every connection records through.
#[derive(Clone)]
pub struct Journal {
    inner: Arc<Inner>,
}

struct Inner {
    queue: Mutex<Queue>,
    /// A job was queued (the writer gathering a batch waits on it).
    arrived: Condvar,
    /// A batch is on disk, or failed (the callers waiting for their records wait on it).
    written: Condvar,
    /// The audit log and the way to the ledger's thread, held by the one writing a batch.
    writer: Mutex<Writer>,
    stats: JournalStats,
}

#[derive(Default)]
struct Queue {
    jobs: Vec<Job>,
    next_ticket: u64,
    /// Whether some caller is writing a batch now.
    writing: bool,
    /// Whether the last batch held more than one job (then the next one gathers a little).
    concurrent: bool,
    /// The outcome of each written job, taken by its caller.
    outcomes: HashMap<u64, Result<(), JournalError>>,
}

struct Writer {
    log: AuditLog,
    to_apply: mpsc::Sender<Written>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Journal {
    /// Takes `log` and starts the thread that updates `ledger` after each batch.
    pub fn start(log: AuditLog, ledger: Arc<Mutex<Ledger>>) -> std::io::Result<Journal> {
        let (to_apply, batches) = mpsc::channel::<Written>();
        std::thread::Builder::new()
            .name("ledger-applier".into())
            .spawn(move || apply_loop(ledger, batches))?;
        Ok(Journal {
            inner: Arc::new(Inner {
                queue: Mutex::new(Queue::default()),
                arrived: Condvar::new(),
                written: Condvar::new(),
                writer: Mutex::new(Writer { log, to_apply }),
                stats: JournalStats::default(),
            }),
        })
    }

    /// Writes `events` (one record each, in order) and waits until they are on disk and in the
    /// ledger.
    pub async fn record(&self, events: Vec<Event>) -> Result<(), JournalError> {
        self.record_with(events, None).await?.wait().await
    }

    /// Writes `events`, keeps `whole` as the call's answer in the ledger, and returns once the
    /// records are on disk; the returned [`Applied`] resolves once the ledger follows them (a
    /// caller holds its session until then, so the next call reads the new state).
    pub async fn record_with(
        &self,
        events: Vec<Event>,
        whole: Option<WholeAnswer>,
    ) -> Result<Applied, JournalError> {
        let journal = self.clone();
        tokio::task::spawn_blocking(move || journal.record_blocking(events, whole))
            .await
            .map_err(|_| JournalError::Stopped)?
    }

    /// [`Journal::record_with`] for a caller on a thread that may block (a tool's run): the
    /// records are written on this thread when no batch is being written, so nothing waits for
    /// another thread to wake.
    pub fn record_blocking(
        &self,
        events: Vec<Event>,
        whole: Option<WholeAnswer>,
    ) -> Result<Applied, JournalError> {
        let (applied, in_ledger) = oneshot::channel();
        self.write_blocking(events, whole, Follower::Waiting(applied))
            .map(|()| Applied(in_ledger))
    }

    /// [`Journal::record_blocking`] for a call's answer: `applied` is set once the ledger
    /// holds it (never, if the ledger cannot follow: the ledger's thread logs why, once).
    pub fn record_answer_blocking(
        &self,
        events: Vec<Event>,
        whole: Option<WholeAnswer>,
        applied: Arc<AtomicBool>,
    ) -> Result<(), JournalError> {
        self.write_blocking(events, whole, Follower::Flag(applied))
    }

    /// [`Journal::record_answer_blocking`] from the async threads.
    pub async fn record_answer(
        &self,
        events: Vec<Event>,
        whole: Option<WholeAnswer>,
        applied: Arc<AtomicBool>,
    ) -> Result<(), JournalError> {
        let journal = self.clone();
        tokio::task::spawn_blocking(move || journal.record_answer_blocking(events, whole, applied))
            .await
            .map_err(|_| JournalError::Stopped)?
    }

    /// Queues `events` and returns once they are on disk, written by this thread when no
    /// batch is being written.
    fn write_blocking(
        &self,
        events: Vec<Event>,
        whole: Option<WholeAnswer>,
        follower: Follower,
    ) -> Result<(), JournalError> {
        let inner = &self.inner;
        let mut queue = lock(&inner.queue);
        let ticket = queue.next_ticket;
        queue.next_ticket += 1;
        queue.jobs.push(Job {
            ticket,
            events,
            whole,
            follower,
        });
        inner.arrived.notify_one();
        loop {
            if let Some(outcome) = queue.outcomes.remove(&ticket) {
                return outcome;
            }
            if queue.writing {
                queue = inner
                    .written
                    .wait(queue)
                    .unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            queue.writing = true;
            // The queue is let go while the batch is written, so others can queue the next one.
            let jobs = self.gather(queue);
            let outcomes = self.write(jobs);
            queue = lock(&inner.queue);
            queue.writing = false;
            queue.concurrent = outcomes.len() > 1;
            queue.outcomes.extend(outcomes);
            inner.written.notify_all();
        }
    }

    /// Takes the queued jobs as one batch, and lets the queue go; after a batch of several,
    /// waits up to [`GATHER`] for more first.
    fn gather(&self, mut queue: MutexGuard<'_, Queue>) -> Vec<Job> {
        if queue.concurrent {
            let until = Instant::now() + GATHER;
            while queue.jobs.len() < MAX_BATCH {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                queue = self
                    .inner
                    .arrived
                    .wait_timeout(queue, left)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        }
        let take = queue.jobs.len().min(MAX_BATCH);
        queue.jobs.drain(..take).collect()
    }

    /// Writes one batch with one fsync and hands it to the ledger's thread; the outcome of
    /// each job.
    fn write(&self, jobs: Vec<Job>) -> Vec<(u64, Result<(), JournalError>)> {
        let inner = &self.inner;
        let mut writer = lock(&inner.writer);
        let events: Vec<Event> = jobs.iter().flat_map(|j| j.events.iter().cloned()).collect();
        let records = match writer.log.append_records(&events, Timestamp::now()) {
            Err(error) => {
                tracing::error!(%error, "audit log write failed");
                let failed = Err(JournalError::Audit(error.to_string()));
                return jobs
                    .into_iter()
                    .map(|job| {
                        job.follower.tell(failed.clone());
                        (job.ticket, failed.clone())
                    })
                    .collect();
            }
            Ok(records) => records,
        };
        inner.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
        inner
            .stats
            .records
            .fetch_add(records.len() as u64, Ordering::Relaxed);
        tracing::debug!(records = records.len(), "audit batch written");
        let mut followers = Vec::with_capacity(jobs.len());
        let mut wholes = Vec::new();
        let mut outcomes = Vec::with_capacity(jobs.len());
        for job in jobs {
            outcomes.push((job.ticket, Ok(())));
            wholes.extend(job.whole);
            followers.push(job.follower);
        }
        let batch = Written {
            records,
            wholes,
            followers,
        };
        // Sent while the batch's writer holds the log, so the ledger applies batches in order.
        if let Err(mpsc::SendError(batch)) = writer.to_apply.send(batch) {
            tracing::error!(
                records = batch.records.len(),
                "the ledger's thread is gone: written records are not applied until a restart"
            );
            for follower in batch.followers {
                follower.tell(Err(JournalError::Stopped));
            }
        }
        outcomes
    }

    /// The counters.
    pub fn stats(&self) -> &JournalStats {
        &self.inner.stats
    }
}

/// A batch on disk, for the ledger to follow.
struct Written {
    records: Vec<(ledger::Record, String)>,
    wholes: Vec<WholeAnswer>,
    followers: Vec<Follower>,
}

/// Applies the written batches to the ledger, in the order written: every batch waiting when
/// the thread looks, with their whole answers, in one transaction (one commit to SQLite's
/// write-ahead log instead of two a batch). When that fails, each batch is applied on its own,
/// so a failing batch costs no other its place in the ledger. Once a batch cannot be applied,
/// none after it is: the ledger stays a prefix of the audit log, and a restart catches it up
/// from the first record it lacks (applying later batches would move its anchor past that
/// record for good, and a call whose record was skipped could run again).
fn apply_loop(ledger: Arc<Mutex<Ledger>>, batches: mpsc::Receiver<Written>) {
    // The ledger follows; calls come first. On Linux a thread has a nice value of its own.
    let _ = rustix::process::setpriority_process(None, 10);
    let mut stopped: Option<String> = None;
    while let Ok(first) = batches.recv() {
        let mut waiting = vec![first];
        while waiting.len() < MAX_BATCH
            && let Ok(next) = batches.try_recv()
        {
            waiting.push(next);
        }
        let mut ledger = ledger.lock().unwrap_or_else(PoisonError::into_inner);
        let together = if waiting.len() == 1 || stopped.is_some() {
            None
        } else {
            let mut records = Vec::new();
            let mut wholes = Vec::new();
            for batch in &waiting {
                records.extend(batch.records.iter().cloned());
                wholes.extend(batch.wholes.iter().cloned());
            }
            apply(&mut ledger, &records, &wholes).ok()
        };
        let outcomes: Vec<Result<(), JournalError>> = match together {
            Some(()) => waiting.iter().map(|_| Ok(())).collect(),
            None => waiting
                .iter()
                .map(|batch| {
                    if let Some(why) = &stopped {
                        return Err(JournalError::Ledger(format!(
                            "the ledger stopped following the audit log ({why}); a restart catches it up"
                        )));
                    }
                    let applied = apply(&mut ledger, &batch.records, &batch.wholes);
                    if let Err(error) = &applied {
                        tracing::error!(%error, "ledger update failed; the ledger stops following the audit log until a restart");
                        stopped = Some(error.to_string());
                    }
                    applied
                })
                .collect(),
        };
        drop(ledger);
        for (batch, applied) in waiting.into_iter().zip(outcomes) {
            for follower in batch.followers {
                follower.tell(applied.clone());
            }
        }
    }
}

/// Applies `records` and then `wholes` (each call's whole answer) in one transaction. A group's
/// failure is not logged: each of its batches is tried again on its own, and logged there.
fn apply(
    ledger: &mut Ledger,
    records: &[(ledger::Record, String)],
    wholes: &[WholeAnswer],
) -> Result<(), JournalError> {
    ledger
        .apply_all_then(records, |ledger| {
            wholes
                .iter()
                .try_for_each(|w| ledger.set_response(&w.session, w.call_id, &w.response))
        })
        .map_err(|error| JournalError::Ledger(error.to_string()))
}
