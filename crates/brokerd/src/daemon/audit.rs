//! `audit verify` for a state folder: the chain checked against the ledger's anchor, through
//! `ledger::verify_with_ledger`, the one function every `audit verify` uses.

use ledger::{AuditError, Summary, verify_with_ledger};
use proto::dirs::Dirs;

/// Checks the audit log of `dirs.state` against its ledger (when there is one).
pub fn verify_state(dirs: &Dirs) -> Result<Summary, AuditError> {
    verify_with_ledger(&dirs.audit_log(), &dirs.ledger())
}
