//! The tamper cases the Merkle tree alone detects (issue 36's corpus, its tree part): each
//! rewrite is made after a checkpoint was taken, and each is found by that checkpoint
//! (`LogTree::check_checkpoint`) and by a consistency proof from the rewritten log to the
//! checkpoint (what a witness holding only the old checkpoint checks), even where the rewrite
//! leaves a chain that holds.

use std::fs;
use std::path::{Path, PathBuf};

use ledger::audit::merkle;
use ledger::{AuditLog, Checkpoint, Event, LogTree, Proof, Record, TreeError, verify};
use proto::{SessionId, Timestamp};

const ORIGIN: &str = "boxmaker audit /tamper";

fn now() -> Timestamp {
    Timestamp::parse("2026-12-01T00:00:00Z").unwrap()
}

fn append(path: &Path, from: usize, n: usize) {
    let (mut log, _) = AuditLog::open(path, None, now()).unwrap();
    let events: Vec<Event> = (from..from + n)
        .map(|i| Event::SessionOpened {
            session: SessionId(format!("s{i}")),
            token_sha256: ledger::sha256_hex(format!("t{i}").as_bytes()),
        })
        .collect();
    log.append(&events, now()).unwrap();
}

/// A log of `n` records and the checkpoint taken of it before any tampering.
fn logged(n: usize) -> (tempfile::TempDir, PathBuf, Checkpoint) {
    let dir = testkit::temp_dir();
    let path = dir.path().join("audit.jsonl");
    append(&path, 0, n);
    let checkpoint = tree(&path).checkpoint(None).unwrap();
    (dir, path, checkpoint)
}

fn tree(path: &Path) -> LogTree {
    LogTree::read(path, ORIGIN.to_string()).unwrap()
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

/// Rewrites every record's `prev` so the chain holds again over `lines`, and renumbers them:
/// what an intruder with the owner's powers does after an edit.
fn rechain(lines: &[String]) -> Vec<String> {
    let mut prev = ledger::audit::GENESIS.to_string();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let mut record: Record = serde_json::from_str(line).unwrap();
        record.seq = i as u64 + 1;
        record.prev = prev;
        let line = serde_json::to_string(&record).unwrap();
        prev = ledger::sha256_hex(line.as_bytes());
        out.push(line);
    }
    out
}

/// The checkpoint taken before is refused by the log as it is now (its root, or, for a log
/// now shorter, its size), and so is the consistency proof the rewritten log offers from the
/// checkpoint's size to its own.
fn assert_found_by_the_checkpoint(path: &Path, before: &Checkpoint) {
    let now = tree(path);
    let expected = if now.size() < before.size {
        TreeError::Beyond {
            size: before.size,
            records: now.size(),
        }
    } else {
        TreeError::Root { size: before.size }
    };
    assert_eq!(
        now.check_checkpoint(before),
        Err(expected),
        "the checkpoint of {} records must fail",
        before.size
    );
    if now.size() >= before.size {
        let current = now.checkpoint(None).unwrap();
        let Proof::Consistency { path: hashes, .. } =
            now.consistency(before.size, now.size()).unwrap()
        else {
            panic!("a consistency proof");
        };
        assert!(
            merkle::verify_consistency(
                before.size,
                current.size,
                &before.root,
                &current.root,
                &hashes
            )
            .is_err(),
            "no consistency proof joins the old checkpoint to the rewritten log"
        );
    }
}

#[test]
fn an_untouched_log_that_grew_still_holds_its_old_checkpoint() {
    let (_dir, path, before) = logged(6);
    append(&path, 6, 5);
    let now = tree(&path);
    assert_eq!(now.check_checkpoint(&before), Ok(()));
    let current = now.checkpoint(None).unwrap();
    let Proof::Consistency { path: hashes, .. } = now.consistency(6, 11).unwrap() else {
        panic!("a consistency proof");
    };
    assert!(merkle::verify_consistency(6, 11, &before.root, &current.root, &hashes).is_ok());
}

#[test]
fn a_record_deleted_in_the_middle_is_found_by_the_checkpoint() {
    let (_dir, path, before) = logged(9);
    let mut all = lines(&path);
    all.remove(4);
    write_lines(&path, &all);
    assert_found_by_the_checkpoint(&path, &before);
}

#[test]
fn a_record_deleted_and_the_chain_recomputed_is_found_by_the_checkpoint_though_the_chain_holds() {
    let (_dir, path, before) = logged(9);
    let mut all = lines(&path);
    all.remove(4);
    // And one appended so the log is as long as the checkpoint says.
    all.push(all[0].clone());
    write_lines(&path, &rechain(&all));
    assert!(verify(&path, None).is_ok(), "the recomputed chain holds");
    assert_found_by_the_checkpoint(&path, &before);
}

#[test]
fn two_records_swapped_are_found_by_the_checkpoint() {
    let (_dir, path, before) = logged(9);
    let mut all = lines(&path);
    all.swap(2, 6);
    write_lines(&path, &all);
    assert_found_by_the_checkpoint(&path, &before);
    write_lines(&path, &rechain(&all));
    assert!(verify(&path, None).is_ok(), "the recomputed chain holds");
    assert_found_by_the_checkpoint(&path, &before);
}

#[test]
fn a_flipped_byte_is_found_by_the_checkpoint() {
    let (_dir, path, before) = logged(9);
    let mut bytes = fs::read(&path).unwrap();
    // A byte inside record 5's session name: `s4` becomes `s5`.
    let at = bytes
        .windows(4)
        .position(|w| w == b"\"s4\"")
        .map(|i| i + 2)
        .unwrap();
    bytes[at] ^= 0x01;
    fs::write(&path, bytes).unwrap();
    assert_found_by_the_checkpoint(&path, &before);
}

#[test]
fn an_edit_with_the_whole_chain_recomputed_is_found_by_the_checkpoint_though_the_chain_holds() {
    let (_dir, path, before) = logged(9);
    let mut all = lines(&path);
    all[3] = all[3].replace("\"s3\"", "\"someone-else\"");
    write_lines(&path, &rechain(&all));
    assert!(verify(&path, None).is_ok(), "the recomputed chain holds");
    assert_found_by_the_checkpoint(&path, &before);
}

#[test]
fn a_tail_truncated_and_continued_is_found_by_the_checkpoint_though_the_chain_holds() {
    // CVE-2023-31438's shape: cut after record 5, then write on as the log would, so the file
    // again holds as many records as the checkpoint names, every one chained.
    let (_dir, path, before) = logged(8);
    let all = lines(&path);
    write_lines(&path, &all[..5]);
    append(&path, 100, 3);
    assert_eq!(tree(&path).size(), 8);
    assert!(verify(&path, None).is_ok(), "the continued chain holds");
    assert_found_by_the_checkpoint(&path, &before);
}

#[test]
fn a_tail_truncated_and_not_continued_is_found_as_records_cut() {
    let (_dir, path, before) = logged(8);
    let all = lines(&path);
    write_lines(&path, &all[..5]);
    assert_eq!(
        tree(&path).check_checkpoint(&before),
        Err(TreeError::Beyond {
            size: 8,
            records: 5
        })
    );
}

#[test]
fn a_device_where_the_log_should_be_has_no_tree_rather_than_a_hang() {
    let error = LogTree::read(Path::new("/dev/zero"), ORIGIN.to_string()).unwrap_err();
    assert!(error.to_string().contains("not a regular file"), "{error}");
}

#[test]
fn a_zeroed_tail_after_the_last_record_as_preallocation_leaves_is_no_record_and_keeps_the_root() {
    let (_dir, path, before) = logged(5);
    let mut bytes = fs::read(&path).unwrap();
    bytes.extend(std::iter::repeat_n(0u8, 1 << 16));
    fs::write(&path, &bytes).unwrap();
    let now = tree(&path);
    assert_eq!(now.checkpoint(None).unwrap(), before);
    assert_eq!(now.check_checkpoint(&before), Ok(()));
}
