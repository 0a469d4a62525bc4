//! What the console asks the broker, over the owner socket only (the powers `bx` has, no
//! more): one request on a blocking thread, the whole audit log as lines with their records,
//! the chain's check, and the memory entries.

use std::path::{Path, PathBuf};

use ledger::Record;
use proto::{AuditBreak, MemoryEntry, OwnerReply, OwnerRequest};

use crate::owner::Owner;

/// How many lines one `audit_lines` request asks for.
const PAGE: u64 = 2_000;
/// The most memory entries the sessions view lists.
const MEMORY_LIMIT: u64 = 10_000;

/// Runs `read` (which talks to the owner socket) on a blocking thread.
pub async fn blocking<T: Send + 'static>(
    read: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(read)
        .await
        .map_err(|e| e.to_string())?
}

/// Runs one owner-socket request on a blocking thread.
pub async fn request(socket: PathBuf, request: OwnerRequest) -> Result<OwnerReply, String> {
    blocking(move || {
        let mut owner = Owner::connect(&socket).map_err(|e| e.to_string())?;
        owner.request(&request).map_err(|e| e.to_string())
    })
    .await
}

/// One line of the audit log: its number in the file (from 1), its bytes as written, and its
/// record when it reads as one.
#[derive(Debug, Clone)]
pub struct Line {
    /// Its line number, from 1.
    pub number: u64,
    /// The line as the log holds it (text from outside: escape before showing).
    pub raw: String,
    /// The record, when the line is one.
    pub record: Option<Record>,
}

/// Every complete line of the audit log, asked for in pages over one connection.
pub fn read_log(socket: &Path) -> Result<Vec<Line>, String> {
    let mut owner = Owner::connect(socket).map_err(|e| e.to_string())?;
    let mut lines = Vec::new();
    loop {
        let from = lines.len() as u64;
        let (page, total) = match owner.request(&OwnerRequest::AuditLines { from, limit: PAGE }) {
            Ok(OwnerReply::AuditLines { lines, total }) => (lines, total),
            Ok(other) => return Err(owner.unexpected(&other).to_string()),
            Err(e) => return Err(e.to_string()),
        };
        let got = page.len();
        for raw in page {
            let number = lines.len() as u64 + 1;
            let record = serde_json::from_str::<Record>(&raw).ok();
            lines.push(Line {
                number,
                raw,
                record,
            });
        }
        if got == 0 || lines.len() as u64 >= total {
            return Ok(lines);
        }
    }
}

/// The chain's check as the broker makes it.
#[derive(Debug, Clone)]
pub struct Verified {
    /// Whether the chain holds.
    pub holds: bool,
    /// What the check says.
    pub message: String,
    /// The first break, when there is one.
    pub broken: Option<AuditBreak>,
}

/// Asks the broker to check the audit chain.
pub fn verify(socket: &Path) -> Result<Verified, String> {
    let mut owner = Owner::connect(socket).map_err(|e| e.to_string())?;
    match owner.request(&OwnerRequest::AuditVerify {}) {
        Ok(OwnerReply::AuditVerified {
            holds,
            message,
            broken,
        }) => Ok(Verified {
            holds,
            message,
            broken,
        }),
        Ok(other) => Err(owner.unexpected(&other).to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// The memory entries, newest first (forgotten ones included).
pub fn memory(socket: &Path) -> Result<Vec<MemoryEntry>, String> {
    let mut owner = Owner::connect(socket).map_err(|e| e.to_string())?;
    match owner.request(&OwnerRequest::MemoryList {
        limit: MEMORY_LIMIT,
    }) {
        Ok(OwnerReply::MemoryEntries { entries, .. }) => Ok(entries),
        Ok(other) => Err(owner.unexpected(&other).to_string()),
        Err(e) => Err(e.to_string()),
    }
}
