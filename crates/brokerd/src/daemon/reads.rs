//! Read before write (seed 003's guard rail): `write_file` or `edit_file` on an existing file
//! is refused unless this session read it (whole or in part) since it last changed, judged by
//! the SHA-256 of the file's whole content kept in the ledger. A session's own successful
//! `read_file`, `write_file` or `edit_file` records the content it saw or left, in the same
//! audit batch as its answer; until the ledger applies it, the session's memo has it.
//!
//! The check sits after `decide` (so after coverage) and before any approval, so the owner is
//! never asked about a call that would then be refused. The content is hashed through the
//! deciding grant's folder descriptor, the way the write reaches the file; the decision hands
//! the write what it expects ([`Expected`]), and the write compares it again on the very
//! descriptor it reads and replaces the file through (in the box's worker, before the atomic
//! rename), so a change between the decision and the write is refused, not overwritten.

use std::path::Path;

use proto::{DenyReason, SessionId};
use tools::fs::{EDIT_LIMIT, Expected, GrantedDir, current_content};

use super::Broker;
use super::memo::SessionMemo;
use crate::args::ToolArgs;
use crate::policy::{Allowed, Scope};

/// The hash of the file `allowed` names as it is now: `Ok(None)` when no file is there.
fn content_hash(allowed: &Allowed) -> Result<Option<(String, String)>, String> {
    let Some(path) = allowed.args.path() else {
        return Ok(None);
    };
    let Some(Scope::Paths(bases)) = &allowed.scope else {
        return Ok(None);
    };
    let Some(base) = bases.first() else {
        return Ok(None);
    };
    let dir = GrantedDir::for_target(base, Path::new(path)).map_err(|e| e.to_string())?;
    let content = current_content(&dir, path, EDIT_LIMIT + 1).map_err(|e| e.to_string())?;
    Ok(content.map(|bytes| (path.to_string(), ledger::sha256_hex(&bytes))))
}

/// Read before write for `allowed`: `Err` with the reason and the detail for the owner when it
/// must be refused; otherwise what the write must find on its own descriptor when it runs
/// ([`Expected`]: the content this session read, or no file), `None` for a call that does not
/// write.
pub(super) fn check(
    broker: &Broker,
    session: &SessionId,
    memo: &SessionMemo,
    allowed: &Allowed,
) -> Result<Option<Expected>, (DenyReason, String)> {
    if !matches!(allowed.args, ToolArgs::WriteFile(_) | ToolArgs::EditFile(_)) {
        return Ok(None);
    }
    // A file that cannot be reached is left to the tool, which says why.
    let (path, now) = match content_hash(allowed) {
        Ok(Some(found)) => found,
        Ok(None) => return Ok(Some(Expected::Absent)),
        Err(_) => return Ok(None),
    };
    let recorded = match memo.seen(&path) {
        Some(hash) => Ok(Some(hash.to_string())),
        None => broker.with_ledger(|l| l.read_hash(session, &path)),
    };
    match recorded {
        Ok(Some(seen)) if seen == now => Ok(Some(Expected::Sha256(seen))),
        Ok(Some(_)) => Err((
            DenyReason::ReadBeforeWrite,
            format!("{path} changed since this session last read it"),
        )),
        Ok(None) => Err((
            DenyReason::ReadBeforeWrite,
            format!("this session has not read {path}"),
        )),
        Err(error) => Err((
            DenyReason::StateUnreadable,
            format!("the ledger cannot say what this session read: {error}"),
        )),
    }
}

/// The record of the content a successful `read_file`, `write_file` or `edit_file` saw or
/// left, for the call's own answer batch (one fsync for both); blocking: it hashes the file.
pub(super) fn seen(session: &SessionId, allowed: &Allowed) -> Option<ledger::Event> {
    if !matches!(
        allowed.args,
        ToolArgs::ReadFile(_) | ToolArgs::WriteFile(_) | ToolArgs::EditFile(_)
    ) {
        return None;
    }
    match content_hash(allowed) {
        Ok(Some((path, sha256))) => Some(ledger::Event::FileSeen {
            session: session.clone(),
            path,
            sha256,
        }),
        Ok(None) => None,
        Err(error) => {
            tracing::warn!(%error, "the content the session saw cannot be hashed");
            None
        }
    }
}
