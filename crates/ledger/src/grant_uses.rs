//! How many calls each grant let run in each session: what a grant's `per_session` counts,
//! kept so that a restarted broker goes on counting where it stopped.

use proto::SessionId;

use crate::engine::Arg;
use crate::store::{Ledger, LedgerError, damaged};

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
        self.begin()?;
        for grant in grants {
            let counted = self.run(
                "INSERT INTO grant_uses (session, grant_id, count) VALUES (?1, ?2, 1)
                 ON CONFLICT (session, grant_id) DO UPDATE SET count = grant_uses.count + 1",
                &[session.as_str().into(), Arg::Text(grant)],
            );
            if let Err(error) = counted {
                self.rollback();
                return Err(error);
            }
        }
        self.commit()
    }

    /// The count of calls each grant let run in `session`, by grant id.
    pub fn grant_uses(&self, session: &SessionId) -> Result<Vec<(String, u64)>, LedgerError> {
        self.rows(
            "SELECT grant_id, count FROM grant_uses WHERE session = ?1",
            &[session.as_str().into()],
        )?
        .iter()
        .map(|row| {
            let bad = |detail: String| damaged("a grant's count", detail);
            let grant = row.text(0).map_err(bad)?;
            let count = row.int(1).map_err(bad)?;
            Ok((grant, u64::try_from(count).unwrap_or(0)))
        })
        .collect()
    }
}
