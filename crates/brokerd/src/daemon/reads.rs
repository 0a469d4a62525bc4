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
use policy::args::ToolArgs;
use policy::decide::{Allowed, Scope};

/// The hash of the file `allowed` names as it is now: `Ok(None)` when no file is there.
fn content_hash(allowed: &Allowed) -> Result<Option<(String, String)>, String> {
    content_hash_within(allowed, EDIT_LIMIT)
}

/// [`content_hash`] of the file's first `limit + 1` bytes.
fn content_hash_within(allowed: &Allowed, limit: u64) -> Result<Option<(String, String)>, String> {
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
    let content =
        current_content(&dir, path, limit.saturating_add(1)).map_err(|e| e.to_string())?;
    Ok(content.map(|bytes| (path.to_string(), ledger::sha256_hex(&bytes))))
}

pub use ::worker::SEEN_FIELD;

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
/// left, for the call's own answer batch (one fsync for both): the hash a read or an edit
/// reported in `fields` ([`SEEN_FIELD`], taken out), a `write_file`'s own content; the file is
/// hashed again (blocking) only when a run reported nothing.
pub(super) fn seen(
    session: &SessionId,
    allowed: &Allowed,
    fields: &mut serde_json::Map<String, serde_json::Value>,
) -> Option<ledger::Event> {
    // The hash a read reported leaves the header here, whatever the tool: never shown.
    let reported = fields.remove(SEEN_FIELD);
    if !matches!(
        allowed.args,
        ToolArgs::ReadFile(_) | ToolArgs::WriteFile(_) | ToolArgs::EditFile(_)
    ) {
        return None;
    }
    // A write that succeeded left exactly its content: hashed as the file would be (its first
    // `EDIT_LIMIT + 1` bytes), not read again, so a change made after the write is not taken
    // for what this session wrote.
    if let ToolArgs::WriteFile(write) = &allowed.args {
        return Some(ledger::Event::FileSeen {
            session: session.clone(),
            path: write.path.clone(),
            sha256: written_hash(write.content.as_bytes(), EDIT_LIMIT),
        });
    }
    if let (Some(path), Some(serde_json::Value::String(sha256))) = (allowed.args.path(), reported) {
        return Some(ledger::Event::FileSeen {
            session: session.clone(),
            path: path.to_string(),
            sha256,
        });
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

/// The hash of what a write of `bytes` leaves, cut as [`content_hash_within`] reads the file:
/// its first `limit + 1` bytes.
fn written_hash(bytes: &[u8], limit: u64) -> String {
    let cut = usize::try_from(limit.saturating_add(1)).unwrap_or(usize::MAX);
    ledger::sha256_hex(bytes.get(..bytes.len().min(cut)).unwrap_or(bytes))
}

#[cfg(test)]
mod tests {
    use proto::Class;
    use tools::fs::WriteFileArgs;

    use super::*;

    fn write_of(folder: &Path, content: String) -> Allowed {
        Allowed {
            grant: "w".to_string(),
            class: Class::Private,
            untrusted: false,
            args: ToolArgs::WriteFile(WriteFileArgs {
                path: folder.join("a.txt").display().to_string(),
                content,
            }),
            scope: Some(Scope::Paths(vec![folder.to_path_buf()])),
            hosts: Vec::new(),
            traced: policy::decide::Traced::default(),
            counted: Vec::new(),
        }
    }

    fn recorded(event: Option<ledger::Event>) -> Option<(String, String)> {
        match event {
            Some(ledger::Event::FileSeen { path, sha256, .. }) => Some((path, sha256)),
            _ => None,
        }
    }

    #[test]
    fn a_write_records_its_own_content_not_what_the_file_holds_afterwards() {
        let folder = tempfile::tempdir().unwrap();
        let session = SessionId::from("s-1");
        let allowed = write_of(folder.path(), "written\n".to_string());
        // Someone else changed the file right after the write: the session saw only its own.
        std::fs::write(folder.path().join("a.txt"), "changed by someone else\n").unwrap();
        let (path, sha256) =
            recorded(seen(&session, &allowed, &mut serde_json::Map::new())).unwrap();
        assert_eq!(path, folder.path().join("a.txt").display().to_string());
        assert_eq!(sha256, ledger::sha256_hex(b"written\n"));
    }

    #[test]
    fn a_large_writes_hash_covers_what_the_check_reads_of_the_file() {
        let folder = tempfile::tempdir().unwrap();
        let session = SessionId::from("s-1");
        // The cut is the same for any limit: a small one keeps the test's file small.
        let limit = 64;
        let content = "x".repeat(limit as usize + 10);
        std::fs::write(folder.path().join("a.txt"), &content).unwrap();
        let allowed = write_of(folder.path(), content.clone());
        let written = written_hash(content.as_bytes(), limit);
        let (_, on_disk) = content_hash_within(&allowed, limit).unwrap().unwrap();
        assert_eq!(written, on_disk);
        assert_ne!(written, ledger::sha256_hex(content.as_bytes()), "cut");
        let (_, whole) = recorded(seen(&session, &allowed, &mut serde_json::Map::new())).unwrap();
        assert_eq!(
            whole,
            ledger::sha256_hex(content.as_bytes()),
            "below EDIT_LIMIT"
        );
    }

    #[test]
    fn a_read_records_the_hash_its_own_read_reported_not_the_file_read_again() {
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("a.txt");
        std::fs::write(&path, "first\n").unwrap();
        let dir = tools::fs::GrantedDir::open(folder.path()).unwrap();
        let args = tools::fs::ReadFileArgs {
            path: path.display().to_string(),
            offset: None,
            limit: None,
        };
        let read = tools::fs::read_file(&dir, &args, 1 << 20).unwrap();
        assert_eq!(read.sha256, ledger::sha256_hex(b"first\n"));
        let allowed = Allowed {
            args: ToolArgs::ReadFile(args),
            ..write_of(folder.path(), String::new())
        };
        let super::super::runner::Outcome::Ran { mut fields, .. } =
            super::super::runner::file_outcome(Ok(crate::files::FileOutcome::Read(read)))
        else {
            panic!("not a result");
        };
        // The file changes after the read: what the session saw is still the first content.
        std::fs::write(&path, "changed after the read\n").unwrap();
        let (_, sha256) = recorded(seen(&SessionId::from("s-1"), &allowed, &mut fields)).unwrap();
        assert_eq!(sha256, ledger::sha256_hex(b"first\n"));
        assert!(!fields.contains_key(SEEN_FIELD), "the hash is never shown");
    }

    #[test]
    fn an_edit_records_the_hash_of_what_it_wrote_not_the_file_read_again() {
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("a.txt");
        std::fs::write(&path, "one two\n").unwrap();
        let dir = tools::fs::GrantedDir::open(folder.path()).unwrap();
        let args = tools::fs::EditFileArgs {
            path: path.display().to_string(),
            edits: vec![tools::fs::Edit {
                old_str: "two".to_string(),
                new_str: "three".to_string(),
                replace_all: false,
            }],
        };
        let edited = tools::fs::edit_file(&dir, &args).unwrap();
        let allowed = Allowed {
            args: ToolArgs::EditFile(args),
            ..write_of(folder.path(), String::new())
        };
        let super::super::runner::Outcome::Ran { mut fields, .. } =
            super::super::runner::file_outcome(Ok(crate::files::FileOutcome::Edited(edited)))
        else {
            panic!("not a result");
        };
        std::fs::write(&path, "changed after the edit\n").unwrap();
        let (_, sha256) = recorded(seen(&SessionId::from("s-1"), &allowed, &mut fields)).unwrap();
        assert_eq!(sha256, ledger::sha256_hex(b"one three\n"));
        assert!(!fields.contains_key(SEEN_FIELD), "the hash is never shown");
    }
}
