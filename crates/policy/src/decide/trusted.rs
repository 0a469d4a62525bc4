//! The refusal of a write to a trusted place ([`crate::trusted`]) that no grant names.

use proto::{DenyReason, Timestamp};

use super::{Call, Decision, deny, writable};
use crate::grants::Grant;

/// Why no grant covers a call whose write to a trusted place is what keeps a grant of its
/// tool from covering it: the place, what reads it, and how a grant opens it.
pub(super) fn trusted_refusal(call: &Call, grants: &[Grant], now: Timestamp) -> Option<Decision> {
    let tool = call.args.tool().granted_by();
    call.writes.iter().find_map(|write| {
        let reached = write.place.as_ref()?;
        let blocked = grants.iter().any(|g| {
            g.tool == tool
                && !g.deny
                && !g.expired(now)
                && g.paths.iter().any(|rule| rule.covers(&write.path))
                && !writable(g, write)
        });
        blocked.then(|| {
            deny(
                DenyReason::TrustedPlace,
                None,
                format!(
                    "{} is in {}, which {} reads or runs outside any box; a grant opens it only by naming it in its paths (paths = [\"{}\"]), not through a broader folder or a glob",
                    write.path.display(),
                    reached.place.display(),
                    reached.read_by,
                    reached.place.display()
                ),
            )
        })
    })
}
