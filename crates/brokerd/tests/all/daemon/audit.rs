//! The audit log a real broker wrote, tampered with one record at a time: `brokerd audit
//! verify` names the record, a broker refuses to start on it, and `--new-audit-segment` starts
//! a new segment that records the break.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use proto::ToolResponse;
use testkit::{AgentClient, BrokerProcess};

use super::{FAST, WORK, path_args};

/// A broker that answered five reads, then was killed: its folders stay for the tampering.
fn used_broker() -> BrokerProcess {
    let mut broker = BrokerProcess::start(WORK, FAST);
    fs::write(broker.work.join("a.txt"), "a").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    for id in 1..=5 {
        let answer = client
            .call(id, "read_file", &path_args(&broker.work.join("a.txt")))
            .unwrap();
        assert!(matches!(answer, ToolResponse::Result { .. }), "{answer:?}");
    }
    // The ledger is applied just after each answer leaves; wait for it to reach the log's last
    // record, so that it anchors the whole log (a log cut after the anchor is undetectable).
    let records = audit_lines(&broker.state).len() as u64;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let anchored = ledger::Ledger::open_read_only(&broker.state.join(proto::dirs::LEDGER_FILE))
            .and_then(|l| l.anchor())
            .ok()
            .flatten()
            .map_or(0, |a| a.seq);
        if anchored == records {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the ledger stays at {anchored} of {records}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    broker.kill();
    broker
}

/// A copy of the broker's state folder, to tamper with without touching the original.
fn copy_state(broker: &BrokerProcess, name: &str) -> PathBuf {
    let copy = broker.root.path().join(name);
    let status = Command::new("cp")
        .arg("-a")
        .arg(&broker.state)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success());
    copy
}

fn audit_lines(state: &Path) -> Vec<String> {
    fs::read_to_string(state.join(proto::dirs::AUDIT_FILE))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn write_audit(state: &Path, lines: &[String]) {
    let mut text = lines.join("\n");
    text.push('\n');
    fs::write(state.join(proto::dirs::AUDIT_FILE), text).unwrap();
}

fn verify(state: &Path) -> (i32, String) {
    let output = Command::new(testkit::binary("brokerd").unwrap())
        .args(["audit", "verify", "--state-dir"])
        .arg(state)
        .output()
        .unwrap();
    (output.status.code().unwrap_or(-1), text(&output))
}

fn text(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr)
}

/// `brokerd serve` on `broker`'s config and runtime folders and the state folder `state`.
fn serve(broker: &BrokerProcess, state: &Path, extra: &[&str]) -> Command {
    let mut command = Command::new(testkit::binary("brokerd").unwrap());
    command
        .arg("serve")
        .arg("--config-dir")
        .arg(&broker.config)
        .arg("--state-dir")
        .arg(state)
        .arg("--runtime-dir")
        .arg(&broker.runtime)
        .args(extra)
        .env("HOME", broker.root.path());
    command
}

#[test]
fn each_tampered_record_is_named_by_verify() {
    let broker = used_broker();
    let (code, summary) = verify(&broker.state);
    assert_eq!(code, 0, "{summary}");
    let lines = audit_lines(&broker.state);
    assert!(lines.len() >= 6, "{lines:?}");
    let middle = lines.len() / 2;
    // Record numbers start at 1, one per line.
    let record = middle + 1;

    let edited = copy_state(&broker, "edited");
    let mut changed = lines.clone();
    changed[middle] = changed[middle].replacen("\"at\":\"20", "\"at\":\"19", 1);
    assert_ne!(changed[middle], lines[middle]);
    write_audit(&edited, &changed);

    let deleted = copy_state(&broker, "deleted");
    let mut fewer = lines.clone();
    fewer.remove(middle);
    write_audit(&deleted, &fewer);

    let reordered = copy_state(&broker, "reordered");
    let mut swapped = lines.clone();
    swapped.swap(middle, middle + 1);
    write_audit(&reordered, &swapped);

    let truncated = copy_state(&broker, "truncated");
    let last = lines.len() - 1;
    write_audit(&truncated, &lines[..last]);

    for (state, named) in [
        (&edited, record + 1),
        (&deleted, record),
        (&reordered, record),
        (&truncated, lines.len()),
    ] {
        let (code, said) = verify(state);
        assert_eq!(code, 1, "{}: {said}", state.display());
        assert!(
            said.contains(&format!("record {named} ")),
            "{}: {said}",
            state.display()
        );
    }
}

#[test]
fn a_broker_refuses_a_broken_log_and_a_new_segment_records_the_break() {
    let broker = used_broker();
    let state = copy_state(&broker, "broken");
    let mut lines = audit_lines(&state);
    let middle = lines.len() / 2;
    lines.remove(middle);
    write_audit(&state, &lines);

    let refused = serve(&broker, &state, &[]).output().unwrap();
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    assert!(
        text(&refused).contains(&format!("record {}", middle + 1)),
        "{}",
        text(&refused)
    );

    let socket = broker.runtime.join("agent.sock");
    let _ = fs::remove_file(&socket);
    let mut child = serve(&broker, &state, &["--new-audit-segment"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !socket.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut client = AgentClient::open(&socket, None);
    let answer = client
        .call(1, "read_file", &path_args(&broker.work.join("a.txt")))
        .unwrap();
    assert!(matches!(answer, ToolResponse::Result { .. }), "{answer:?}");
    child.kill().unwrap();
    child.wait().unwrap();

    let segment = fs::read_to_string(state.join(proto::dirs::AUDIT_FILE)).unwrap();
    assert!(
        segment.lines().next().unwrap().contains("segment"),
        "{segment}"
    );
    let (code, said) = verify(&state);
    assert_eq!(code, 0, "{said}");
    let kept = fs::read_dir(&state)
        .unwrap()
        .filter_map(Result::ok)
        .any(|e| e.file_name().to_string_lossy().starts_with("audit.jsonl."));
    assert!(kept, "the broken log was not kept aside");
}
