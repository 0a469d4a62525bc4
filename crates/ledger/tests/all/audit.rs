//! The audit log: appends, the chain, and every way of breaking it named by `verify`.

use std::fs;
use std::path::{Path, PathBuf};

use ledger::{Anchor, AuditError, AuditLog, Event, verify};
use proto::{SessionId, Timestamp};

fn now() -> Timestamp {
    Timestamp::parse("2026-12-01T00:00:00Z").unwrap()
}

fn opened(n: usize) -> Vec<Event> {
    (0..n)
        .map(|i| Event::SessionOpened {
            session: SessionId(format!("s{i}")),
            token_sha256: ledger::sha256_hex(format!("t{i}").as_bytes()),
        })
        .collect()
}

/// A log of `n` records in a new folder.
fn log_of(n: usize) -> (tempfile::TempDir, PathBuf, Anchor) {
    let dir = testkit::temp_dir();
    let path = dir.path().join("audit.jsonl");
    let (mut log, _) = AuditLog::open(&path, None, now()).unwrap();
    let anchor = log.append(&opened(n), now()).unwrap();
    (dir, path, anchor)
}

fn lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn write_lines(path: &Path, lines: &[String]) {
    fs::write(path, lines.join("\n") + "\n").unwrap();
}

fn broken(path: &Path, anchor: Option<&Anchor>) -> ledger::Broken {
    match verify(path, anchor) {
        Err(AuditError::Broken { broken, .. }) => broken,
        other => panic!("not broken: {other:?}"),
    }
}

#[test]
fn appended_records_form_a_chain_that_verifies() {
    let (_dir, path, anchor) = log_of(5);
    assert_eq!(anchor.seq, 5);
    let summary = verify(&path, Some(&anchor)).unwrap();
    assert_eq!(summary.records, 5);
    assert_eq!(summary.last_seq, 5);
    assert_eq!(summary.last_hash, anchor.hash);
    assert_eq!(summary.partial, None);
    assert!(summary.to_string().contains("5 records"));
    // Reopened, the numbering goes on.
    let (mut log, opened) = AuditLog::open(&path, Some(&anchor), now()).unwrap();
    assert_eq!(opened.records, 5);
    assert_eq!(log.append(&opened_one(), now()).unwrap().seq, 6);
    assert_eq!(verify(&path, None).unwrap().records, 6);
}

fn opened_one() -> Vec<Event> {
    opened(1)
}

#[test]
fn an_edited_record_is_named() {
    let (_dir, path, anchor) = log_of(5);
    let mut all = lines(&path);
    all[2] = all[2].replace("\"s2\"", "\"sX\"");
    write_lines(&path, &all);
    let found = broken(&path, Some(&anchor));
    assert_eq!(found.record, 3, "{found}");
    assert!(found.what.contains("changed"), "{found}");
}

#[test]
fn an_edited_last_record_is_named_against_the_ledgers_anchor() {
    let (_dir, path, anchor) = log_of(3);
    let mut all = lines(&path);
    all[2] = all[2].replace("\"s2\"", "\"sX\"");
    write_lines(&path, &all);
    assert!(
        verify(&path, None).is_ok(),
        "without the anchor it cannot be seen"
    );
    let found = broken(&path, Some(&anchor));
    assert_eq!(found.record, 3, "{found}");
}

#[test]
fn a_deleted_record_is_named() {
    let (_dir, path, anchor) = log_of(5);
    let mut all = lines(&path);
    all.remove(1);
    write_lines(&path, &all);
    let found = broken(&path, Some(&anchor));
    assert_eq!(found.record, 2, "{found}");
    assert!(found.what.contains("missing"), "{found}");
}

#[test]
fn reordered_records_are_named() {
    let (_dir, path, anchor) = log_of(5);
    let mut all = lines(&path);
    all.swap(1, 2);
    write_lines(&path, &all);
    let found = broken(&path, Some(&anchor));
    assert_eq!(found.record, 2, "{found}");
}

#[test]
fn a_cut_record_is_named_against_the_ledgers_anchor() {
    let (_dir, path, anchor) = log_of(5);
    let mut all = lines(&path);
    all.pop();
    write_lines(&path, &all);
    let found = broken(&path, Some(&anchor));
    assert_eq!(found.record, 5, "{found}");
    assert!(found.what.contains("cut"), "{found}");
    // A record cut in the middle of its line, then: still named.
    let (_dir, path, anchor) = log_of(5);
    let text = fs::read_to_string(&path).unwrap();
    fs::write(&path, &text[..text.len() - 20]).unwrap();
    assert_eq!(broken(&path, Some(&anchor)).record, 5);
}

#[test]
fn a_removed_first_record_is_named() {
    let (_dir, path, _) = log_of(3);
    let mut all = lines(&path);
    all.remove(0);
    write_lines(&path, &all);
    assert_eq!(broken(&path, None).record, 1);
}

#[test]
fn a_line_that_is_not_a_record_is_named() {
    let (_dir, path, anchor) = log_of(3);
    let mut all = lines(&path);
    all[1] = "{\"seq\":2}".into();
    write_lines(&path, &all);
    let found = broken(&path, Some(&anchor));
    assert_eq!((found.record, found.line), (2, 2), "{found}");
}

#[test]
fn a_torn_last_line_is_in_progress_for_verify_and_cut_and_recorded_at_open() {
    let (_dir, path, anchor) = log_of(3);
    let mut text = fs::read_to_string(&path).unwrap();
    text.push_str("{\"seq\":4,\"at\":");
    fs::write(&path, &text).unwrap();
    let summary = verify(&path, Some(&anchor)).unwrap();
    assert_eq!(summary.partial.map(|p| p.1), Some(14));
    let (mut log, opened) = AuditLog::open(&path, Some(&anchor), now()).unwrap();
    assert_eq!(opened.cut.map(|c| c.1), Some(14));
    let all = lines(&path);
    assert_eq!(all.len(), 4);
    assert!(all[3].contains("\"type\":\"cut\""), "{}", all[3]);
    assert_eq!(log.append(&opened_one(), now()).unwrap().seq, 5);
    assert_eq!(verify(&path, None).unwrap().records, 5);
}

#[test]
fn any_other_break_refuses_to_open_and_writes_nothing() {
    let (_dir, path, anchor) = log_of(4);
    let mut all = lines(&path);
    all.remove(2);
    write_lines(&path, &all);
    let before = fs::read(&path).unwrap();
    let error = AuditLog::open(&path, Some(&anchor), now()).unwrap_err();
    assert!(error.to_string().contains("record 3"), "{error}");
    assert_eq!(fs::read(&path).unwrap(), before);
}

#[test]
fn a_new_segment_keeps_the_broken_file_and_records_the_break() {
    let (dir, path, anchor) = log_of(4);
    let mut all = lines(&path);
    all.remove(2);
    write_lines(&path, &all);
    let (mut log, opened) = AuditLog::open_new_segment(&path, Some(&anchor), now()).unwrap();
    let aside = opened.previous_segment.unwrap();
    assert!(aside.starts_with(dir.path()) && aside.exists());
    let first = lines(&path).remove(0);
    assert!(
        first.contains("\"type\":\"segment\"") && first.contains("record 3"),
        "{first}"
    );
    // The numbering continues from the last good record (2).
    assert!(first.starts_with("{\"seq\":3,"), "{first}");
    assert_eq!(log.append(&opened_one(), now()).unwrap().seq, 4);
    assert_eq!(verify(&path, None).unwrap().records, 2);
}

#[test]
fn a_device_where_the_log_should_be_is_an_error_not_a_hang() {
    let error = AuditLog::open(Path::new("/dev/zero"), None, now()).unwrap_err();
    assert!(error.to_string().contains("not a regular file"), "{error}");
    let dir = testkit::temp_dir();
    let error = AuditLog::open(dir.path(), None, now()).unwrap_err();
    assert!(matches!(error, AuditError::Io { .. }), "{error}");
}

#[test]
fn a_missing_log_is_empty() {
    let dir = testkit::temp_dir();
    let summary = verify(&dir.path().join("none.jsonl"), None).unwrap();
    assert_eq!(summary.records, 0);
}

#[test]
fn a_log_replaced_after_opening_is_not_written() {
    let (_dir, path, anchor) = log_of(2);
    let (mut log, _) = AuditLog::open(&path, Some(&anchor), now()).unwrap();
    let kept = path.with_extension("kept");
    fs::rename(&path, &kept).unwrap();
    std::os::unix::fs::symlink("/dev/full", &path).unwrap();
    let error = log.append(&opened_one(), now()).unwrap_err();
    assert!(error.to_string().contains("replaced"), "{error}");
    fs::remove_file(&path).unwrap();
    fs::rename(&kept, &path).unwrap();
    assert_eq!(log.append(&opened_one(), now()).unwrap().seq, 3);
    assert_eq!(verify(&path, None).unwrap().records, 3);
    // Deleted: nothing is written, and no file is made where it was.
    fs::remove_file(&path).unwrap();
    let error = log.append(&opened_one(), now()).unwrap_err();
    assert!(error.to_string().contains("deleted"), "{error}");
    assert!(!path.exists());
}
