//! `audit verify` for a state folder: the chain checked against the ledger's anchor. One
//! function, used by `brokerd audit verify` and `bx audit verify`.

use ledger::{AuditError, Ledger, Summary, verify};
use proto::dirs::Dirs;

/// Checks the audit log of `dirs.state` against its ledger (when there is one). While a broker
/// runs, records after the ledger's last recorded one may still be being written: a partial
/// last line there is reported as in progress, not as a break.
pub fn verify_state(dirs: &Dirs) -> Result<Summary, AuditError> {
    let anchor = if dirs.ledger().exists() {
        Ledger::open_read_only(&dirs.ledger())
            .and_then(|l| l.anchor())
            .map_err(|e| AuditError::Io {
                path: dirs.ledger().display().to_string(),
                source: std::io::Error::other(e.to_string()),
            })?
    } else {
        None
    };
    verify(&dirs.audit_log(), anchor.as_ref())
}
