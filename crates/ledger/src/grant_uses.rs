//! How many calls each grant let run in each session: what a grant's `per_session` counts,
//! kept so that a restarted broker goes on counting where it stopped.

use rusqlite::params;

use proto::SessionId;

use crate::store::{Ledger, LedgerError};

impl Ledger {
    /// Counts one more call of `session` under each of `grants` (ids), in one transaction.
    pub fn add_grant_uses(
        &self,
        session: &SessionId,
        grants: &[String],
    ) -> Result<(), LedgerError> {
        if grants.is_empty() {
            return Ok(());
        }
        let tx = self
            .conn()
            .unchecked_transaction()
            .map_err(|e| self.sqlite(e))?;
        for grant in grants {
            tx.execute(
                "INSERT INTO grant_uses (session, grant_id, count) VALUES (?1, ?2, 1)
                 ON CONFLICT (session, grant_id) DO UPDATE SET count = count + 1",
                params![session.as_str(), grant],
            )
            .map_err(|e| self.sqlite(e))?;
        }
        tx.commit().map_err(|e| self.sqlite(e))
    }

    /// The count of calls each grant let run in `session`, by grant id.
    pub fn grant_uses(&self, session: &SessionId) -> Result<Vec<(String, u64)>, LedgerError> {
        let mut statement = self
            .conn()
            .prepare_cached("SELECT grant_id, count FROM grant_uses WHERE session = ?1")
            .map_err(|e| self.sqlite(e))?;
        let rows = statement
            .query_map([session.as_str()], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
            })
            .map_err(|e| self.sqlite(e))?;
        rows.map(|r| {
            r.map(|(grant, count)| (grant, u64::try_from(count).unwrap_or(0)))
                .map_err(|e| self.sqlite(e))
        })
        .collect()
    }
}
