//! Read before write: the content hash of each file a session read (or wrote, or edited), so
//! the broker can refuse a write to a file the session has not seen as it now is.

use rusqlite::{OptionalExtension, params};

use proto::SessionId;

use crate::store::{Ledger, LedgerError};

impl Ledger {
    /// Notes that `session` has seen `path` (resolved) with content of SHA-256 `sha256`; the
    /// journal applies it from an `Event::FileSeen` record.
    pub(crate) fn record_read(
        &self,
        session: &SessionId,
        path: &str,
        sha256: &str,
    ) -> Result<(), LedgerError> {
        self.exec(
            "INSERT OR REPLACE INTO file_reads (session, path, sha256) VALUES (?1, ?2, ?3)",
            params![session.as_str(), path, sha256],
        )
        .map(|_| ())
        .map_err(|e| self.sqlite(e))
    }

    /// The SHA-256 of `path`'s content when `session` last saw it, if it ever did.
    pub fn read_hash(
        &self,
        session: &SessionId,
        path: &str,
    ) -> Result<Option<String>, LedgerError> {
        self.query_one(
            "SELECT sha256 FROM file_reads WHERE session = ?1 AND path = ?2",
            params![session.as_str(), path],
            |row| row.get::<_, String>(0),
        )
        .optional()
        .map_err(|e| self.sqlite(e))
    }
}
