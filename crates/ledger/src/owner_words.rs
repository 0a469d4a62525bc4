//! The owner's words each session was given, in order: what a session's value index holds as
//! the owner's when the broker rebuilds it.

use proto::SessionId;

use crate::engine::Arg;
use crate::store::{Ledger, LedgerError, damaged};

impl Ledger {
    /// Records the owner's words of record `seq` for `session` (`None`: the record kept only
    /// their digest).
    pub fn put_owner_words(
        &self,
        session: &SessionId,
        seq: u64,
        text: Option<&str>,
    ) -> Result<(), LedgerError> {
        self.run(
            "INSERT INTO owner_words (session, seq, text) VALUES (?1, ?2, ?3)
             ON CONFLICT (session, seq) DO UPDATE SET text = excluded.text",
            &[session.as_str().into(), Arg::Int(seq as i64), text.into()],
        )
        .map(|_| ())
    }

    /// The owner's words `session` was given, in order; words whose record kept only a digest
    /// are left out.
    pub fn owner_words(&self, session: &SessionId) -> Result<Vec<String>, LedgerError> {
        self.rows(
            "SELECT text FROM owner_words WHERE session = ?1 AND text IS NOT NULL ORDER BY seq",
            &[session.as_str().into()],
        )?
        .iter()
        .map(|row| {
            row.text(0)
                .map_err(|detail| damaged("the owner's words", detail))
        })
        .collect()
    }
}
