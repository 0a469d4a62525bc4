//! The one writer of the audit log and the ledger: a thread that takes records from every
//! connection, writes them in batches with one fsync each (group commit) and tells each waiting
//! call, and a second thread that then applies each batch, in order, to the ledger. A call's
//! answer leaves only after its record is on disk; the next batch is written while the ledger
//! follows the last one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};

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
    /// The writer thread is gone.
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
    events: Vec<Event>,
    whole: Option<WholeAnswer>,
    durable: oneshot::Sender<Result<(), JournalError>>,
    applied: oneshot::Sender<Result<(), JournalError>>,
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
const GATHER: std::time::Duration = std::time::Duration::from_micros(300);

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
    tx: mpsc::Sender<Job>,
    stats: Arc<JournalStats>,
}

impl Journal {
    /// Starts the writer thread, which owns `log`, and the thread that updates `ledger` after
    /// each batch.
    pub fn start(log: AuditLog, ledger: Arc<Mutex<Ledger>>) -> std::io::Result<Journal> {
        let (tx, rx) = mpsc::channel::<Job>();
        let (written, to_apply) = mpsc::channel::<Written>();
        let stats = Arc::new(JournalStats::default());
        let counters = Arc::clone(&stats);
        std::thread::Builder::new()
            .name("ledger-applier".into())
            .spawn(move || apply_loop(ledger, to_apply))?;
        std::thread::Builder::new()
            .name("audit-writer".into())
            .spawn(move || write_loop(log, rx, written, &counters))?;
        Ok(Journal { tx, stats })
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
        let (durable, on_disk) = oneshot::channel();
        let (applied, in_ledger) = oneshot::channel();
        self.tx
            .send(Job {
                events,
                whole,
                durable,
                applied,
            })
            .map_err(|_| JournalError::Stopped)?;
        on_disk.await.map_err(|_| JournalError::Stopped)??;
        Ok(Applied(in_ledger))
    }

    /// The counters.
    pub fn stats(&self) -> &JournalStats {
        &self.stats
    }
}

/// A batch on disk, for the ledger to follow.
struct Written {
    records: Vec<(ledger::Record, String)>,
    wholes: Vec<WholeAnswer>,
    appliers: Vec<oneshot::Sender<Result<(), JournalError>>>,
}

fn write_loop(
    mut log: AuditLog,
    rx: mpsc::Receiver<Job>,
    written: mpsc::Sender<Written>,
    stats: &JournalStats,
) {
    let mut concurrent = false;
    while let Ok(first) = rx.recv() {
        let mut jobs = vec![first];
        let gather_until = std::time::Instant::now() + GATHER;
        while jobs.len() < MAX_BATCH {
            let next = if concurrent {
                let left = gather_until.saturating_duration_since(std::time::Instant::now());
                rx.recv_timeout(left).ok()
            } else {
                rx.try_recv().ok()
            };
            match next {
                Some(job) => jobs.push(job),
                None => break,
            }
        }
        concurrent = jobs.len() > 1;
        let events: Vec<Event> = jobs.iter().flat_map(|j| j.events.iter().cloned()).collect();
        let records = match log.append_records(&events, Timestamp::now()) {
            Err(error) => {
                tracing::error!(%error, "audit log write failed");
                let failed = Err(JournalError::Audit(error.to_string()));
                for job in jobs {
                    let _ = job.durable.send(failed.clone());
                    let _ = job.applied.send(failed.clone());
                }
                continue;
            }
            Ok(records) => records,
        };
        stats.fsyncs.fetch_add(1, Ordering::Relaxed);
        stats
            .records
            .fetch_add(records.len() as u64, Ordering::Relaxed);
        tracing::debug!(records = records.len(), "audit batch written");
        let mut appliers = Vec::with_capacity(jobs.len());
        let mut wholes = Vec::new();
        for job in jobs {
            let _ = job.durable.send(Ok(()));
            wholes.extend(job.whole);
            appliers.push(job.applied);
        }
        let batch = Written {
            records,
            wholes,
            appliers,
        };
        if let Err(mpsc::SendError(batch)) = written.send(batch) {
            for applier in batch.appliers {
                let _ = applier.send(Err(JournalError::Stopped));
            }
        }
    }
}

/// Applies each written batch to the ledger, in the order written.
fn apply_loop(ledger: Arc<Mutex<Ledger>>, batches: mpsc::Receiver<Written>) {
    while let Ok(batch) = batches.recv() {
        let mut ledger = ledger.lock().unwrap_or_else(PoisonError::into_inner);
        let applied = ledger
            .apply_all(&batch.records)
            .and_then(|()| {
                batch
                    .wholes
                    .iter()
                    .try_for_each(|w| ledger.set_response(&w.session, w.call_id, &w.response))
            })
            .map_err(|error| {
                tracing::error!(%error, "ledger update failed");
                JournalError::Ledger(error.to_string())
            });
        drop(ledger);
        for applier in batch.appliers {
            let _ = applier.send(applied.clone());
        }
    }
}
