//! The owner's words each session was given, in order: what a session's value index holds as
//! the owner's when the broker rebuilds it.

use rusqlite::params;

use proto::SessionId;

use crate::store::{Ledger, LedgerError};

impl Ledger {
    /// Records the owner's words of record `seq` for `session` (`None`: the record kept only
    /// their digest).
    pub fn put_owner_words(
        &self,
        session: &SessionId,
        seq: u64,
        text: Option<&str>,
    ) -> Result<(), LedgerError> {
        self.exec(
            "INSERT OR REPLACE INTO owner_words (session, seq, text) VALUES (?1, ?2, ?3)",
            params![session.as_str(), seq as i64, text],
        )
        .map(|_| ())
        .map_err(|e| self.sqlite(e))
    }

    /// The owner's words `session` was given, in order; words whose record kept only a digest
    /// are left out.
    pub fn owner_words(&self, session: &SessionId) -> Result<Vec<String>, LedgerError> {
        let mut statement = self
            .conn()
            .prepare_cached(
                "SELECT text FROM owner_words WHERE session = ?1 AND text IS NOT NULL ORDER BY seq",
            )
            .map_err(|e| self.sqlite(e))?;
        let rows = statement
            .query_map([session.as_str()], |row| row.get::<_, String>(0))
            .map_err(|e| self.sqlite(e))?;
        rows.map(|r| r.map_err(|e| self.sqlite(e))).collect()
    }
}
