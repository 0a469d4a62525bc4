//! The ledger following the audit log: records replayed into it, each with its line's hash as
//! the new anchor, at start (catching up) and after every append.

use std::path::Path;

use proto::{Class, ToolResponse};

use crate::audit::{Anchor, Event, INTERRUPTED, Record};
use crate::store::{CallRow, CallState, Ledger, LedgerError, SessionRow, damaged, field_digest};

impl Ledger {
    /// Replays records (each with its line's hash) in one transaction: the ledger follows the
    /// log, at start (catching up) and after every append.
    pub fn apply_all(&mut self, records: &[(Record, String)]) -> Result<(), LedgerError> {
        self.apply_all_then(records, |_| Ok(()))
    }

    /// [`Ledger::apply_all`], then `also` in the same transaction (what the records do not
    /// carry, such as whole answers kept only as digests in the log): one commit for all, or
    /// nothing when any part fails.
    pub fn apply_all_then(
        &mut self,
        records: &[(Record, String)],
        also: impl FnOnce(&Ledger) -> Result<(), LedgerError>,
    ) -> Result<(), LedgerError> {
        self.begin()?;
        let applied = records
            .iter()
            .try_for_each(|(record, hash)| self.apply(record, hash))
            .and_then(|()| also(self));
        if let Err(error) = applied {
            self.rollback();
            return Err(error);
        }
        self.commit()
    }

    /// Brings the ledger forward from the audit log at `log`: every whole record after the
    /// ledger's anchor is applied. Returns how many were.
    pub fn catch_up(&mut self, log: &Path) -> Result<usize, LedgerError> {
        let from = self.anchor()?.map_or(0, |a| a.seq);
        let text = match std::fs::read(log) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => {
                return Err(damaged("the audit log", e.to_string()));
            }
        };
        let mut behind = Vec::new();
        for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let Ok(record) = serde_json::from_slice::<Record>(line) else {
                break; // a torn last line: the log's own open cuts it
            };
            if record.seq > from {
                behind.push((record, crate::audit::sha256_hex(line)));
            }
        }
        self.apply_all(&behind)?;
        Ok(behind.len())
    }

    /// Replays one audit record into the ledger and records it as the anchor: how a ledger
    /// behind the log is brought forward at start.
    pub fn apply(&self, record: &Record, line_hash: &str) -> Result<(), LedgerError> {
        let at = record.at;
        match &record.event {
            Event::SessionOpened {
                session,
                token_sha256,
            } => self.put_session(&SessionRow {
                id: session.clone(),
                token_sha256: token_sha256.clone(),
                created: at,
                last_used: at,
                taint: Class::Public,
                untrusted: false,
                ended: None,
            })?,
            Event::SessionEnded { session, .. } => self.end_session(session, at)?,
            Event::Decided {
                session,
                call_id,
                tool,
                arguments,
                ..
            } => self.put_call(&CallRow {
                session: session.clone(),
                call_id: *call_id,
                tool: tool.clone(),
                arguments_sha256: field_digest(arguments),
                state: CallState::Running,
                response: None,
                updated: at,
            })?,
            Event::Answered {
                session,
                call_id,
                tool,
                arguments,
                labels,
                answer,
                ..
            } => {
                self.put_call(&CallRow {
                    session: session.clone(),
                    call_id: *call_id,
                    tool: tool.clone(),
                    arguments_sha256: field_digest(arguments),
                    state: CallState::Done,
                    response: Some(answer.response()),
                    updated: at,
                })?;
                self.touch(session, at)?;
                if let Some(labels) = labels {
                    self.set_labels(session, labels.taint, labels.untrusted, at)?;
                    if labels.untrusted {
                        self.set_untrusted_by(session, &format!("call {call_id} ({tool})"))?;
                    }
                }
            }
            Event::ApprovalRequested { .. } | Event::ApprovalResolved { .. } => {
                self.apply_approval(&record.event, at)?
            }
            Event::Interrupted { session, call_id } => {
                if let Some(mut row) = self.call(session, *call_id)? {
                    row.state = CallState::Done;
                    row.response = Some(ToolResponse::Failed {
                        message: INTERRUPTED.to_string(),
                    });
                    row.updated = at;
                    self.put_call(&row)?;
                }
            }
            Event::SessionResumed { session, .. } => self.touch(session, at)?,
            Event::OwnerWords { session, text } => {
                self.put_owner_words(session, record.seq, text.text())?
            }
            Event::FileSeen {
                session,
                path,
                sha256,
            } => self.record_read(session, path, sha256)?,
            Event::Started { .. }
            | Event::Stopped { .. }
            | Event::Cut { .. }
            | Event::Segment { .. }
            | Event::MemoryOwner { .. } => {}
        }
        self.set_anchor(&Anchor {
            seq: record.seq,
            hash: line_hash.to_string(),
        })
    }
}
