//! What a grant's `per_session` counts: the calls each grant let run in a session. Counted
//! when a call is about to run (after its decision and any approval), in the ledger before the
//! run, so that a restarted broker goes on counting where it stopped; read back from the
//! ledger the first time this broker decides a call of the session.

use std::sync::PoisonError;

use policy::decide::GrantUses;
use proto::SessionId;

use super::{Broker, SessionSlot};

impl SessionSlot {
    /// Calls `f` with the session's counts, read from the ledger first if this broker has not
    /// yet (`None` when the ledger cannot say: no count is then proven below its limit).
    pub fn with_uses<T>(
        &self,
        broker: &Broker,
        session: &SessionId,
        f: impl FnOnce(Option<&GrantUses>) -> T,
    ) -> T {
        let mut uses = self.uses.lock().unwrap_or_else(PoisonError::into_inner);
        if uses.is_none() {
            match broker.with_reader(|l| l.grant_uses(session)) {
                Ok(counts) => {
                    let mut read = GrantUses::default();
                    for (grant, count) in counts {
                        read.set(&grant, count);
                    }
                    *uses = Some(read);
                }
                Err(error) => {
                    tracing::error!(%session, %error, "the grants' counts cannot be read")
                }
            }
        }
        f(uses.as_ref())
    }

    /// Counts a call of the session that is about to run under each of `grants` (the covering
    /// grants that say `per_session`): in the ledger first, then here. `Err` with the ledger's
    /// error when it cannot be recorded: the call must not run uncounted.
    pub fn count_run(
        &self,
        broker: &Broker,
        session: &SessionId,
        grants: &[String],
    ) -> Result<(), String> {
        if grants.is_empty() {
            return Ok(());
        }
        broker
            .with_ledger(|l| l.add_grant_uses(session, grants))
            .map_err(|e| e.to_string())?;
        let mut uses = self.uses.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(uses) = uses.as_mut() {
            for grant in grants {
                uses.add(grant);
            }
        }
        Ok(())
    }
}
