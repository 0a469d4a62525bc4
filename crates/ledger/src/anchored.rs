//! The audit log checked against the ledger's anchor: the one check behind every `audit
//! verify`. Above both [`crate::audit`] and [`crate::store`], which it joins: the log knows
//! nothing of the ledger, and the ledger reads the log's records.

use std::path::Path;

use crate::audit::{AuditError, Summary, verify};
use crate::store::Ledger;

/// Checks the audit log at `log` against the ledger at `ledger` (its anchor, when the ledger
/// exists): the one check behind `brokerd audit verify` and `bx audit verify`. While a broker
/// runs, records after the ledger's last recorded one may still be being written: a partial
/// last line there is reported as in progress, not as a break.
pub fn verify_with_ledger(log: &Path, ledger: &Path) -> Result<Summary, AuditError> {
    let anchor = if ledger.exists() {
        Ledger::open_read_only(ledger)
            .and_then(|l| l.anchor())
            .map_err(|e| AuditError::Io {
                path: ledger.display().to_string(),
                source: std::io::Error::other(e.to_string()),
            })?
    } else {
        None
    };
    verify(log, anchor.as_ref())
}
