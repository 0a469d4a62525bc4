//! Read before write: the content hash of each file a session read (or wrote, or edited), so
//! the broker can refuse a write to a file the session has not seen as it now is.

use proto::SessionId;

use crate::engine::Arg;
use crate::store::{Ledger, LedgerError, damaged};

impl Ledger {
    /// Notes that `session` has seen `path` (resolved) with content of SHA-256 `sha256`; the
    /// journal applies it from an `Event::FileSeen` record.
    pub(crate) fn record_read(
        &self,
        session: &SessionId,
        path: &str,
        sha256: &str,
    ) -> Result<(), LedgerError> {
        self.run(
            "INSERT INTO file_reads (session, path, sha256) VALUES (?1, ?2, ?3)
             ON CONFLICT (session, path) DO UPDATE SET sha256 = excluded.sha256",
            &[session.as_str().into(), Arg::Text(path), Arg::Text(sha256)],
        )
        .map(|_| ())
    }

    /// The SHA-256 of `path`'s content when `session` last saw it, if it ever did.
    pub fn read_hash(
        &self,
        session: &SessionId,
        path: &str,
    ) -> Result<Option<String>, LedgerError> {
        self.row(
            "SELECT sha256 FROM file_reads WHERE session = ?1 AND path = ?2",
            &[session.as_str().into(), Arg::Text(path)],
        )?
        .map(|row| row.text(0))
        .transpose()
        .map_err(|detail| damaged(&format!("what session {session} read"), detail))
    }
}
