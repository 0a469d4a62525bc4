//! `audit verify` for a state folder: the chain checked against the ledger's anchor, through
//! `ledger::verify_with_ledger`, the one function every `audit verify` uses; and the owner
//! socket's reads of the log (`audit_lines`, `audit_verify`), which `bx console` pages through.

use std::io::{BufRead, BufReader};

use ledger::{AuditError, Summary, verify_with_ledger};
use proto::dirs::Dirs;
use proto::{AUDIT_LINES_BYTES, AuditBreak, OwnerErrorCode, OwnerReply};

/// The most lines one `audit_lines` reply carries, whatever the request asks.
const LINES_CAP: u64 = 5_000;

/// Checks the audit log of `dirs.state` against its ledger (when there is one).
pub fn verify_state(dirs: &Dirs) -> Result<Summary, AuditError> {
    verify_with_ledger(&dirs.audit_log(), &dirs.ledger())
}

/// `audit_verify`: the chain's check as a reply, the first break named.
pub fn owner_verify(dirs: &Dirs) -> OwnerReply {
    match verify_state(dirs) {
        Ok(summary) => OwnerReply::AuditVerified {
            holds: true,
            message: summary.to_string(),
            broken: None,
        },
        Err(error) => {
            let broken = match &error {
                AuditError::Broken { broken, .. } => Some(AuditBreak {
                    record: broken.record,
                    line: broken.line,
                    what: broken.what.clone(),
                }),
                _ => None,
            };
            OwnerReply::AuditVerified {
                holds: false,
                message: error.to_string(),
                broken,
            }
        }
    }
}

/// `audit_lines`: the log's complete lines from `from`, at most `limit` (and [`LINES_CAP`])
/// of them and [`AUDIT_LINES_BYTES`] in all (a longer single line comes alone), with the
/// count of complete lines. A line that is not UTF-8 comes with its bad bytes replaced.
pub fn owner_lines(dirs: &Dirs, from: u64, limit: u64) -> OwnerReply {
    let path = dirs.audit_log();
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return OwnerReply::AuditLines {
                lines: Vec::new(),
                total: 0,
            };
        }
        Err(e) => return unreadable(&path, &e),
    };
    let limit = limit.min(LINES_CAP);
    let mut reader = BufReader::new(file);
    let mut lines = Vec::new();
    let mut bytes = 0usize;
    let mut total = 0u64;
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) if line.last() != Some(&b'\n') => break,
            Ok(n) => {
                let wanted = total >= from && (lines.len() as u64) < limit;
                let fits = lines.is_empty() || bytes + n <= AUDIT_LINES_BYTES;
                if wanted && fits {
                    bytes += n;
                    line.pop();
                    lines.push(String::from_utf8_lossy(&line).into_owned());
                }
                total += 1;
            }
            Err(e) => return unreadable(&path, &e),
        }
    }
    OwnerReply::AuditLines { lines, total }
}

fn unreadable(path: &std::path::Path, e: &std::io::Error) -> OwnerReply {
    OwnerReply::Error {
        code: OwnerErrorCode::Internal,
        message: format!("the audit log {} cannot be read: {e}", path.display()),
    }
}
