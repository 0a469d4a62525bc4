//! `bx audit checkpoint`, `prove`, `consistency` and `verify --checkpoint/--proof` on a log
//! written by the ledger, with no broker; and every proof checked against a second, independent
//! implementation of RFC 9162's hashing (Python's hashlib) reading the same file.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use ledger::{AuditLog, Event};
use proto::{SessionId, Timestamp};

use super::{Ran, bx_in};

/// A state folder whose audit log the ledger writes, and the folders `bx` is given.
pub struct State {
    pub root: tempfile::TempDir,
    log: Option<AuditLog>,
    written: usize,
}

impl State {
    pub fn new() -> State {
        let root = testkit::temp_dir();
        fs::create_dir_all(root.path().join("s")).unwrap();
        State {
            root,
            log: None,
            written: 0,
        }
    }

    pub fn state(&self) -> PathBuf {
        self.root.path().join("s")
    }

    pub fn log_path(&self) -> PathBuf {
        self.state().join("audit.jsonl")
    }

    /// Appends `n` records (each its own write, as the broker's answers are).
    pub fn append(&mut self, n: usize) {
        let now = Timestamp::parse("2026-12-01T00:00:00Z").unwrap();
        if self.log.is_none() {
            self.log = Some(AuditLog::open(&self.log_path(), None, now).unwrap().0);
        }
        let log = self.log.as_mut().unwrap();
        for _ in 0..n {
            self.written += 1;
            let event = Event::SessionOpened {
                session: SessionId(format!("s{}", self.written)),
                // Each state folder's own: two folders' logs have two first records, two ids.
                token_sha256: ledger::sha256_hex(
                    format!("t{} {}", self.written, self.root.path().display()).as_bytes(),
                ),
            };
            log.append(&[event], now).unwrap();
        }
    }

    /// Drops the open log, so the next append opens the file as it now is.
    pub fn reopen(&mut self) {
        self.log = None;
    }

    pub fn bx(&self, args: &[&str]) -> Ran {
        let root = self.root.path();
        bx_in(&root.join("c"), &self.state(), &root.join("r"), args)
    }

    /// Runs `bx ARGS`, which must succeed, and keeps what it printed in the file `name`.
    pub fn keep(&self, name: &str, args: &[&str]) -> PathBuf {
        let ran = self.bx(args);
        assert_eq!(ran.code, 0, "bx {args:?}: {}{}", ran.stdout, ran.stderr);
        let path = self.root.path().join(name);
        fs::write(&path, ran.stdout).unwrap();
        path
    }

    /// `bx audit verify` with these checkpoints and proof.
    pub fn verify(&self, checkpoints: &[&Path], proof: Option<&Path>) -> Ran {
        let mut args = vec!["audit".to_string(), "verify".to_string()];
        for checkpoint in checkpoints {
            args.push("--checkpoint".to_string());
            args.push(checkpoint.display().to_string());
        }
        if let Some(proof) = proof {
            args.push("--proof".to_string());
            args.push(proof.display().to_string());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.bx(&args)
    }
}

#[test]
fn a_checkpoint_taken_now_holds_and_the_chain_line_comes_first_as_before() {
    let mut state = State::new();
    state.append(5);
    let plain = state.bx(&["audit", "verify"]);
    assert_eq!(plain.code, 0, "{}", plain.stdout);
    assert_eq!(plain.stdout.lines().count(), 1, "{}", plain.stdout);
    let checkpoint = state.keep("cp", &["audit", "checkpoint"]);
    let text = fs::read_to_string(&checkpoint).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    // The log's id, from its first record: not the state folder's path.
    let id = lines[0].strip_prefix("boxmaker audit ").unwrap();
    assert!(
        id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{text}"
    );
    assert_eq!(lines[1], "5");
    assert_eq!(lines[2].len(), 44, "{text}");
    state.append(2);
    let ran = state.verify(&[&checkpoint], None);
    assert_eq!(ran.code, 0, "{}", ran.stdout);
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert!(
        lines[0].contains("the chain holds: 7 records"),
        "{}",
        ran.stdout
    );
    assert!(
        lines[1].contains("the checkpoint holds: the log's first 5 records hash to its root"),
        "{}",
        ran.stdout
    );
}

#[test]
fn proofs_hold_against_the_checkpoints_they_name_and_an_altered_one_fails() {
    let mut state = State::new();
    state.append(5);
    let old = state.keep("cp5", &["audit", "checkpoint"]);
    state.append(4);
    let new = state.keep("cp9", &["audit", "checkpoint"]);
    let inclusion = state.keep("p3", &["audit", "prove", "3", "--size", "5"]);
    let ran = state.verify(&[&old], Some(&inclusion));
    assert_eq!(ran.code, 0, "{}", ran.stdout);
    assert!(
        ran.stdout.contains("the proof holds: record 3, as the log holds it, is leaf 2 of the tree of 5 records whose root the checkpoint gives"),
        "{}",
        ran.stdout
    );
    let consistency = state.keep("c59", &["audit", "consistency", "5", "9"]);
    let ran = state.verify(&[&old, &new], Some(&consistency));
    assert_eq!(ran.code, 0, "{}", ran.stdout);
    assert!(
        ran.stdout.contains(
            "(root from the checkpoint) is a prefix of the tree of 9 (root from the checkpoint)"
        ),
        "{}",
        ran.stdout
    );
    // The proof of record 3 presented for record 4: refused, naming the proof.
    let text = fs::read_to_string(&inclusion).unwrap();
    let moved = text.replace("record 3\nleaf 2", "record 4\nleaf 3");
    fs::write(&inclusion, moved).unwrap();
    let ran = state.verify(&[&old], Some(&inclusion));
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    assert!(ran.stdout.contains("the proof fails"), "{}", ran.stdout);
    // A checkpoint of another log is refused as such.
    let other =
        fs::read_to_string(&new)
            .unwrap()
            .replacen("boxmaker audit ", "boxmaker audit 0000", 1);
    fs::write(&new, other).unwrap();
    let ran = state.verify(&[&new], None);
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    assert!(ran.stdout.contains("not this one"), "{}", ran.stdout);
}

#[test]
fn proofs_for_records_or_sizes_outside_the_log_are_refused_with_a_reason() {
    let mut state = State::new();
    state.append(3);
    for args in [
        &["audit", "prove", "4"][..],
        &["audit", "prove", "0"],
        &["audit", "prove", "1", "--size", "4"],
        &["audit", "consistency", "0", "3"],
        &["audit", "consistency", "2", "5"],
        &["audit", "checkpoint", "--size", "4"],
    ] {
        let ran = state.bx(args);
        assert_eq!(ran.code, 1, "{args:?}: {}", ran.stdout);
        assert!(ran.stderr.starts_with("bx: "), "{args:?}: {}", ran.stderr);
    }
}

/// RFC 9162's hashing written again in Python, from the RFC's definitions (MTH, PATH,
/// SUBPROOF), reading the log file itself: a leaf is a line without its newline.
const RFC9162_PY: &str = r#"
import base64, hashlib, json, sys

def h(b): return hashlib.sha256(b).digest()
def leaf(b): return h(b"\x00" + b)
def node(l, r): return h(b"\x01" + l + r)
def k_of(n):
    k = 1
    while k * 2 < n: k *= 2
    return k
def mth(d):
    if len(d) == 0: return h(b"")
    if len(d) == 1: return d[0]
    k = k_of(len(d))
    return node(mth(d[:k]), mth(d[k:]))
def path(m, d):
    if len(d) <= 1: return []
    k = k_of(len(d))
    if m < k: return path(m, d[:k]) + [mth(d[k:])]
    return path(m - k, d[k:]) + [mth(d[:k])]
def subproof(m, d, b):
    if m == len(d): return [] if b else [mth(d)]
    k = k_of(len(d))
    if m <= k: return subproof(m, d[:k], b) + [mth(d[k:])]
    return subproof(m - k, d[k:], False) + [mth(d[:k])]

log, cases = sys.argv[1], json.load(open(sys.argv[2]))
lines = open(log, "rb").read().split(b"\n")[:-1]
leaves = [leaf(line) for line in lines]
b64 = lambda x: base64.b64encode(x).decode()
wrong = []
for case in cases:
    text = case["text"].splitlines()
    if case["kind"] == "checkpoint":
        size = int(text[1])
        if text[2] != b64(mth(leaves[:size])): wrong.append(case)
    elif case["kind"] == "inclusion":
        record, index, size = (int(t.split(" ")[1]) for t in text[2:5])
        ok = index == record - 1 and text[5:] == [b64(x) for x in path(index, leaves[:size])]
        if not ok: wrong.append(case)
    else:
        old, new = (int(t.split(" ")[1]) for t in text[2:4])
        if text[4:] != [b64(x) for x in subproof(old, leaves[:new], True)]: wrong.append(case)
print(json.dumps({"checked": len(cases), "wrong": wrong}))
"#;

#[test]
fn every_checkpoint_and_proof_matches_an_independent_python_implementation_of_rfc_9162() {
    let mut state = State::new();
    state.append(13);
    let sizes = [1u64, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13];
    let mut cases = Vec::new();
    let mut case = |kind: &str, args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let ran = state.bx(&args);
        assert_eq!(ran.code, 0, "{args:?}: {}", ran.stderr);
        cases.push(serde_json::json!({"kind": kind, "args": args, "text": ran.stdout}));
    };
    for new in sizes {
        let n = new.to_string();
        case(
            "checkpoint",
            vec![
                "audit".into(),
                "checkpoint".into(),
                "--size".into(),
                n.clone(),
            ],
        );
        for record in 1..=new {
            let r = record.to_string();
            case(
                "inclusion",
                vec![
                    "audit".into(),
                    "prove".into(),
                    r,
                    "--size".into(),
                    n.clone(),
                ],
            );
        }
        for old in sizes.iter().filter(|old| **old <= new) {
            let o = old.to_string();
            case(
                "consistency",
                vec!["audit".into(), "consistency".into(), o, n.clone()],
            );
        }
    }
    // One case made wrong on purpose: the second implementation must see it.
    let whole = cases
        .iter()
        .rev()
        .find(|c| c["kind"] == "checkpoint")
        .unwrap()
        .clone();
    let text = whole["text"]
        .as_str()
        .unwrap()
        .replacen("\n13\n", "\n12\n", 1);
    let planted = serde_json::json!({"kind": "checkpoint", "args": "planted", "text": text});
    cases.push(planted.clone());
    let count = cases.len();
    let cases_file = state.root.path().join("cases.json");
    fs::write(&cases_file, serde_json::to_vec(&cases).unwrap()).unwrap();
    let script = state.root.path().join("rfc9162.py");
    fs::write(&script, RFC9162_PY).unwrap();
    let output = Command::new("python3")
        .arg(&script)
        .arg(state.log_path())
        .arg(&cases_file)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(answer["checked"], count);
    assert_eq!(answer["wrong"], serde_json::json!([planted]), "{answer:#}");
}

#[test]
fn verify_with_a_checkpoint_fails_a_log_cut_and_continued_whose_chain_still_holds() {
    let mut state = State::new();
    state.append(6);
    let before = state.keep("cp", &["audit", "checkpoint"]);
    // Cut after record 4, then write on with a chain that holds (the ledger's own writer).
    let text = fs::read_to_string(state.log_path()).unwrap();
    let kept: Vec<&str> = text.lines().take(4).collect();
    fs::write(state.log_path(), kept.join("\n") + "\n").unwrap();
    state.log = None;
    state.append(3);
    let ran = state.verify(&[&before], None);
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert!(
        lines[0].contains("the chain holds: 7 records"),
        "{}",
        ran.stdout
    );
    assert!(
        lines[1].contains("the checkpoint fails: the log's first 6 records no longer hash to the checkpoint's root"),
        "{}",
        ran.stdout
    );
}

/// A state folder of 4 records, sealing set up, two seals (epochs 1 and 2) with records
/// between them: the root key printed at init.
fn sealed_state() -> (State, String) {
    let mut state = State::new();
    state.append(4);
    let init = state.bx(&["audit", "seal", "init"]);
    assert_eq!(init.code, 0, "{}", init.stderr);
    assert!(
        init.stderr.contains("keep it off this machine"),
        "{}",
        init.stderr
    );
    let root = init.stdout.trim().to_string();
    assert_eq!(root.len(), 44, "{root}");
    assert_eq!(state.bx(&["audit", "seal", "init"]).code, 1, "init twice");
    assert_eq!(state.bx(&["audit", "seal", "now"]).code, 0);
    state.append(3);
    assert_eq!(state.bx(&["audit", "seal", "now"]).code, 0);
    (state, root)
}

#[test]
fn sealed_checkpoints_hold_from_the_root_key_and_fail_from_another() {
    let (state, root) = sealed_state();
    let ran = state.bx(&["audit", "verify", "--seal-root", &root]);
    assert_eq!(ran.code, 0, "{}", ran.stdout);
    assert!(
        ran.stdout.contains("seals: 2 sealed checkpoints hold, the last of epoch 2: the log's first 7 records hash to its root"),
        "{}",
        ran.stdout
    );
    let other = ledger::audit::encode_hash(&[9; 32]);
    let ran = state.bx(&["audit", "verify", "--seal-root", &other]);
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    assert!(
        ran.stdout.contains("epoch 1's key is not certified"),
        "{}",
        ran.stdout
    );
}

#[test]
fn a_rewrite_resealed_with_the_stolen_current_key_fails_the_older_epochs_seals() {
    let (state, root) = sealed_state();
    // The intruder edits record 2, recomputes the chain, and seals the result with the key
    // it found (epoch 3's): the epochs before still hold the log as it was.
    let text = fs::read_to_string(state.log_path()).unwrap();
    let mut prev = ledger::audit::GENESIS.to_string();
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        let mut record: ledger::Record = serde_json::from_str(line).unwrap();
        if i == 1 {
            record.event = Event::SessionOpened {
                session: SessionId("nobody".to_string()),
                token_sha256: ledger::sha256_hex(b"x"),
            };
        }
        record.prev = prev;
        let line = serde_json::to_string(&record).unwrap();
        prev = ledger::sha256_hex(line.as_bytes());
        out.push_str(&line);
        out.push('\n');
    }
    fs::write(state.log_path(), out).unwrap();
    assert_eq!(state.bx(&["audit", "seal", "now"]).code, 0);
    let ran = state.bx(&["audit", "verify", "--seal-root", &root]);
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    assert!(ran.stdout.contains("the chain holds"), "{}", ran.stdout);
    assert!(
        ran.stdout.contains(
            "4.e1 (epoch 1): the sealed checkpoint fails: the log's first 4 records no longer hash"
        ),
        "{}",
        ran.stdout
    );
    // Removing the older epochs' checkpoints is seen too.
    for epoch in ["4.e1", "7.e2"] {
        fs::remove_file(state.state().join("seal/checkpoints").join(epoch)).unwrap();
    }
    let ran = state.bx(&["audit", "verify", "--seal-root", &root]);
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    assert!(
        ran.stdout
            .contains("the sealed checkpoint of epoch 1 is missing (removed)"),
        "{}",
        ran.stdout
    );
}

#[test]
fn a_broker_that_seals_seals_its_log_when_stopped_by_sigterm() {
    let broker = testkit::BrokerProcess::start("", "");
    let init = super::bx(&broker, &["audit", "seal", "init"]);
    assert_eq!(init.code, 0, "{}", init.stderr);
    let root = init.stdout.trim().to_string();
    let mut client = testkit::AgentClient::open(&broker.socket(), None);
    let _ = client.call(1, "read_file", r#"{"path":"/etc/hostname"}"#);
    drop(client);
    let pid = rustix::process::Pid::from_raw(broker.pid().unwrap() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    assert!(
        broker.wait_for_log(
            "sealed the audit log at stop",
            1,
            std::time::Duration::from_secs(30)
        ),
        "{}",
        broker.log()
    );
    let ran = super::bx(&broker, &["audit", "verify", "--seal-root", &root]);
    assert_eq!(ran.code, 0, "{}", ran.stdout);
    assert!(
        ran.stdout
            .contains("seals: 1 sealed checkpoints hold, the last of epoch 1"),
        "{}",
        ran.stdout
    );
}
