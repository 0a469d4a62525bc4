//! The owner's `bx memory` requests on the owner socket: list, show, forget, purge and export,
//! each recorded in the audit log before its answer (an export before its first entry).

use std::sync::Arc;
use std::time::Duration;

use ::memory::{Forgot, MemoryError, Scope, Store};
use proto::{OwnerErrorCode, OwnerReply, Timestamp};

use super::MemoryService;
use crate::daemon::Broker;

/// The most entries `bx memory list` may ask for at once.
pub const LIST_CAP: u64 = 10_000;

/// How many entries one `memory_chunk` of an export holds.
pub const EXPORT_CHUNK: usize = 500;

/// Runs `f` on the store off the async threads.
async fn blocking<T: Send + 'static>(
    service: &Arc<MemoryService>,
    f: impl FnOnce(&mut Store) -> Result<T, MemoryError> + Send + 'static,
) -> Result<T, String> {
    let service = Arc::clone(service);
    match tokio::task::spawn_blocking(move || service.with_store(f)).await {
        Ok(result) => result,
        Err(join) => Err(format!("the memory store stopped unexpectedly: {join}")),
    }
}

/// Records an owner's memory command in the audit log.
async fn audit(
    broker: &Broker,
    command: &str,
    entry: Option<u64>,
    entries: u64,
    outcome: &str,
) -> Result<(), OwnerReply> {
    let event = ledger::Event::MemoryOwner {
        command: command.to_string(),
        entry,
        entries,
        outcome: outcome.to_string(),
    };
    broker.journal.record(vec![event]).await.map_err(|error| {
        tracing::error!(%error, command, "an owner memory command was not recorded");
        OwnerReply::Error {
            code: OwnerErrorCode::Internal,
            message: format!("the audit log could not record `memory {command}`: {error}"),
        }
    })
}

/// The store cannot be used: recorded too, then said.
async fn unavailable(
    broker: &Broker,
    command: &str,
    entry: Option<u64>,
    message: String,
) -> OwnerReply {
    if let Err(reply) = audit(broker, command, entry, 0, &message).await {
        return reply;
    }
    OwnerReply::Error {
        code: OwnerErrorCode::MemoryUnavailable,
        message,
    }
}

/// `bx memory list`: the newest `limit` entries (forgotten ones too), recorded.
pub async fn owner_list(broker: &Broker, limit: u64) -> OwnerReply {
    let limit = limit.clamp(1, LIST_CAP) as usize;
    let (entries, total) = match blocking(&broker.memory, move |s| s.list(limit)).await {
        Ok(listed) => listed,
        Err(message) => return unavailable(broker, "list", None, message).await,
    };
    let outcome = format!("{} of {total} entries listed", entries.len());
    if let Err(reply) = audit(broker, "list", None, entries.len() as u64, &outcome).await {
        return reply;
    }
    OwnerReply::MemoryEntries { entries, total }
}

/// `bx memory show ID`, recorded.
pub async fn owner_show(broker: &Broker, id: u64) -> OwnerReply {
    let shown = blocking(&broker.memory, move |s| Ok((s.show(id)?, s.list(0)?.1))).await;
    let (entry, total) = match shown {
        Ok(shown) => shown,
        Err(message) => return unavailable(broker, "show", Some(id), message).await,
    };
    let outcome = match &entry {
        Some(_) => format!("entry {id} shown"),
        None => format!("no entry {id}"),
    };
    let count = u64::from(entry.is_some());
    if let Err(reply) = audit(broker, "show", Some(id), count, &outcome).await {
        return reply;
    }
    match entry {
        Some(entry) => OwnerReply::MemoryEntries {
            entries: vec![entry],
            total,
        },
        None => OwnerReply::Error {
            code: OwnerErrorCode::UnknownEntry,
            message: format!("there is no memory entry {id} (or it was purged)"),
        },
    }
}

/// `bx memory forget ID`: forgotten for every session, still listed until purged; recorded.
pub async fn owner_forget(broker: &Broker, id: u64) -> OwnerReply {
    let forgot = blocking(&broker.memory, move |s| {
        s.forget(id, Scope::All, Timestamp::now())
    })
    .await;
    let (outcome, reply) = match forgot {
        Ok(Forgot::Forgotten) => (
            format!("entry {id} forgotten"),
            OwnerReply::Done {
                message: format!(
                    "Entry {id} is forgotten: no session recalls it; `bx memory purge` deletes it for good."
                ),
            },
        ),
        Ok(Forgot::NotFound) => (
            format!("no entry {id} to forget"),
            OwnerReply::Error {
                code: OwnerErrorCode::UnknownEntry,
                message: format!(
                    "there is no memory entry {id} to forget (absent, purged or already forgotten)"
                ),
            },
        ),
        Err(message) => return unavailable(broker, "forget", Some(id), message).await,
    };
    let count = u64::from(matches!(forgot, Ok(Forgot::Forgotten)));
    if let Err(reply) = audit(broker, "forget", Some(id), count, &outcome).await {
        return reply;
    }
    reply
}

/// `bx memory purge`: every forgotten entry deleted for good; recorded.
pub async fn owner_purge(broker: &Broker) -> OwnerReply {
    let purged = match blocking(&broker.memory, |s| s.purge()).await {
        Ok(purged) => purged,
        Err(message) => return unavailable(broker, "purge", None, message).await,
    };
    let outcome = format!("{purged} forgotten entries purged");
    if let Err(reply) = audit(broker, "purge", None, purged, &outcome).await {
        return reply;
    }
    OwnerReply::Done {
        message: format!("Purged {purged} forgotten entries."),
    }
}

/// `bx memory export`, recorded before anything is sent: the entries as `memory_chunk`
/// replies on `writer`, the last one marked; an error reply when the store fails.
pub async fn owner_export(
    broker: &Broker,
    writer: &mut tokio::net::unix::OwnedWriteHalf,
    idle: Duration,
) -> Result<(), crate::daemon::outgoing::Closed> {
    use crate::daemon::outgoing::write;
    let total = match blocking(&broker.memory, |s| Ok(s.list(0)?.1)).await {
        Ok(total) => total,
        Err(message) => {
            let reply = unavailable(broker, "export", None, message).await;
            return write(writer, &reply, idle).await;
        }
    };
    let outcome = format!("{total} entries exported");
    if let Err(reply) = audit(broker, "export", None, total, &outcome).await {
        return write(writer, &reply, idle).await;
    }
    let mut after = 0;
    loop {
        let page = match blocking(&broker.memory, move |s| s.page(after, EXPORT_CHUNK)).await {
            Ok(page) => page,
            Err(message) => {
                let reply = OwnerReply::Error {
                    code: OwnerErrorCode::MemoryUnavailable,
                    message,
                };
                return write(writer, &reply, idle).await;
            }
        };
        let last = page.len() < EXPORT_CHUNK;
        if let Some(entry) = page.last() {
            after = entry.id;
        }
        let chunk = OwnerReply::MemoryChunk {
            entries: page,
            last,
        };
        write(writer, &chunk, idle).await?;
        if last {
            return Ok(());
        }
    }
}
