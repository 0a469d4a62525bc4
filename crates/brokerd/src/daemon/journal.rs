//! The one writer of the audit log and the ledger: a thread that takes records from every
//! connection, writes them in batches with one fsync each (group commit), then applies them to
//! the ledger and answers each waiting call. A call's answer leaves only after its record is on
//! disk.

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
    reply: oneshot::Sender<Result<(), JournalError>>,
}

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
    /// Starts the writer thread, which owns `log` and updates `ledger` after each batch.
    pub fn start(log: AuditLog, ledger: Arc<Mutex<Ledger>>) -> std::io::Result<Journal> {
        let (tx, rx) = mpsc::channel::<Job>();
        let stats = Arc::new(JournalStats::default());
        let counters = Arc::clone(&stats);
        std::thread::Builder::new()
            .name("audit-writer".into())
            .spawn(move || write_loop(log, ledger, rx, &counters))?;
        Ok(Journal { tx, stats })
    }

    /// Writes `events` (one record each, in order) and waits until they are on disk and in the
    /// ledger.
    pub async fn record(&self, events: Vec<Event>) -> Result<(), JournalError> {
        self.record_with(events, None).await
    }

    /// [`Journal::record`], then keeps `whole` as the call's answer in the ledger.
    pub async fn record_with(
        &self,
        events: Vec<Event>,
        whole: Option<WholeAnswer>,
    ) -> Result<(), JournalError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Job {
                events,
                whole,
                reply,
            })
            .map_err(|_| JournalError::Stopped)?;
        answer.await.map_err(|_| JournalError::Stopped)?
    }

    /// The counters.
    pub fn stats(&self) -> &JournalStats {
        &self.stats
    }
}

fn write_loop(
    mut log: AuditLog,
    ledger: Arc<Mutex<Ledger>>,
    rx: mpsc::Receiver<Job>,
    stats: &JournalStats,
) {
    while let Ok(first) = rx.recv() {
        let mut jobs = vec![first];
        while jobs.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let events: Vec<Event> = jobs.iter().flat_map(|j| j.events.iter().cloned()).collect();
        let result = match log.append_records(&events, Timestamp::now()) {
            Err(error) => {
                tracing::error!(%error, "audit log write failed");
                Err(JournalError::Audit(error.to_string()))
            }
            Ok(records) => {
                stats.fsyncs.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(records = records.len(), "audit batch written");
                stats
                    .records
                    .fetch_add(records.len() as u64, Ordering::Relaxed);
                let mut ledger = ledger.lock().unwrap_or_else(PoisonError::into_inner);
                ledger
                    .apply_all(&records)
                    .and_then(|()| {
                        jobs.iter()
                            .filter_map(|j| j.whole.as_ref())
                            .try_for_each(|w| {
                                ledger.set_response(&w.session, w.call_id, &w.response)
                            })
                    })
                    .map_err(|error| {
                        tracing::error!(%error, "ledger update failed");
                        JournalError::Ledger(error.to_string())
                    })
            }
        };
        for job in jobs {
            let _ = job.reply.send(result.clone());
        }
    }
}
