//! The witness end to end (issue 36, items 3 and 4): `bx audit witness` as a process on a
//! temporary socket, a real `brokerd` sending it its checkpoints (`[audit] witness`), and
//! `bx audit verify --witness DIR` reading only the log and DIR.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use testkit::{AgentClient, BrokerProcess};

use super::{Ran, bx_in};

/// A running `bx audit witness --dir DIR --socket PATH`, and the lines it printed.
pub struct Witness {
    pub root: tempfile::TempDir,
    child: Child,
    pub key: String,
    said: Arc<Mutex<Vec<String>>>,
}

impl Witness {
    pub fn start() -> Witness {
        let root = testkit::temp_dir();
        let mut child = Command::new(testkit::binary("bx").unwrap())
            .args(["audit", "witness", "--dir"])
            .arg(root.path().join("w"))
            .arg("--socket")
            .arg(root.path().join("witness.sock"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().unwrap().unwrap();
        let key = first.strip_prefix("witness key ").unwrap().to_string();
        let said = Arc::new(Mutex::new(Vec::new()));
        let keep = Arc::clone(&said);
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                keep.lock().unwrap().push(line);
            }
        });
        Witness {
            root,
            child,
            key,
            said,
        }
    }

    pub fn dir(&self) -> PathBuf {
        self.root.path().join("w")
    }

    pub fn socket(&self) -> PathBuf {
        self.root.path().join("witness.sock")
    }

    /// `unix:PATH`, as brokerd.toml and `bx audit cosign` name it.
    pub fn address(&self) -> String {
        format!("unix:{}", self.socket().display())
    }

    /// The lines it printed about the checkpoints it cosigned or refused, so far.
    pub fn said(&self) -> Vec<String> {
        self.said.lock().unwrap().clone()
    }
}

impl Drop for Witness {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `bx audit verify --witness DIR` on the state folder `state`, with no other folder.
pub fn verify_witnessed(state: &Path, witness: &Path) -> Ran {
    let root = state.parent().unwrap();
    bx_in(
        &root.join("no-config"),
        state,
        &root.join("no-runtime"),
        &["audit", "verify", "--witness", witness.to_str().unwrap()],
    )
}

fn stop(broker: &BrokerProcess, stops: usize) {
    let pid = rustix::process::Pid::from_raw(broker.pid().unwrap() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    assert!(
        broker.wait_for_log("brokerd stopped", stops, Duration::from_secs(30)),
        "{}",
        broker.log()
    );
}

fn calls(broker: &BrokerProcess, n: u64) {
    let mut client = AgentClient::open(&broker.socket(), None);
    for id in 1..=n {
        let _ = client.call(id, "read_file", r#"{"path":"/etc/hostname"}"#);
    }
}

/// Every record's `prev` recomputed after `edit` changed the lines: an intruder's rewrite.
pub fn rechain(lines: &[String]) -> String {
    let mut prev = ledger::audit::GENESIS.to_string();
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        let mut record: ledger::Record = serde_json::from_str(line).unwrap();
        record.seq = i as u64 + 1;
        record.prev = prev;
        let line = serde_json::to_string(&record).unwrap();
        prev = ledger::sha256_hex(line.as_bytes());
        out.push_str(&line);
        out.push('\n');
    }
    out
}

pub fn lines_of(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_rewrite_after_the_witnessed_stop_is_named_though_the_chain_and_every_state_file_were_replaced()
{
    let witness = Witness::start();
    let config = format!("[audit]\nwitness = \"{}\"\n", witness.address());
    let broker = BrokerProcess::start("", &config);
    calls(&broker, 3);
    stop(&broker, 1);
    assert!(
        broker
            .log()
            .contains("the witness cosigned the audit log at stop"),
        "{}",
        broker.log()
    );
    // The key it printed at start is the one its folder gives verify.
    let public = fs::read_to_string(witness.dir().join("witness.pub")).unwrap();
    assert_eq!(public.trim(), witness.key);
    let said = witness.said();
    assert!(
        said.iter()
            .any(|l| l.starts_with("cosigned boxmaker audit ")),
        "{said:?}"
    );
    // The broker kept the cosignature in its state folder.
    assert_eq!(
        fs::read_dir(broker.state.join("witness")).unwrap().count(),
        1
    );
    let ran = verify_witnessed(&broker.state, &witness.dir());
    assert_eq!(ran.code, 0, "{}", ran.stdout);
    assert!(
        ran.stdout.contains("witness: the log's first "),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout.contains("stopped (SIGTERM) at record")
            && ran
                .stdout
                .contains("its checkpoint covers every record of it"),
        "{}",
        ran.stdout
    );

    // The intruder edits record 2, recomputes the whole chain, and replaces every file of
    // the state folder: a new folder elsewhere holding only the rewritten log.
    let mut lines = lines_of(&broker.state.join("audit.jsonl"));
    let mut record: ledger::Record = serde_json::from_str(&lines[1]).unwrap();
    record.at = proto::Timestamp::parse("2020-01-01T00:00:00Z").unwrap();
    lines[1] = serde_json::to_string(&record).unwrap();
    let elsewhere = testkit::temp_dir();
    let state = elsewhere.path().join("s");
    fs::create_dir_all(&state).unwrap();
    fs::write(state.join("audit.jsonl"), rechain(&lines)).unwrap();
    let ran = verify_witnessed(&state, &witness.dir());
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    assert!(ran.stdout.contains("the chain holds"), "{}", ran.stdout);
    assert!(
        ran.stdout.contains(
            "witness: record 2 (line 2) no longer matches the record the witness cosigned"
        ),
        "{}",
        ran.stdout
    );
}

#[test]
fn logging_off_a_crash_and_deleted_records_each_read_as_what_they_are() {
    let witness = Witness::start();
    let config = format!(
        "[audit]\nwitness = \"{}\"\nseal_interval_secs = 3600\n",
        witness.address()
    );
    let mut broker = BrokerProcess::start("", &config);
    calls(&broker, 2);
    stop(&broker, 1);
    broker.spawn();
    calls(&broker, 2);
    // A crash: kill -9, no stop record, no checkpoint; then a start and a clean stop.
    broker.restart();
    calls(&broker, 1);
    stop(&broker, 2);
    let ran = verify_witnessed(&broker.state, &witness.dir());
    assert_eq!(ran.code, 0, "{}", ran.stdout);
    let stops: Vec<&str> = ran
        .stdout
        .lines()
        .filter(|l| l.starts_with("stops: "))
        .collect();
    assert_eq!(stops.len(), 3, "{}", ran.stdout);
    assert!(
        stops[0].starts_with("stops: logging off from ")
            && stops[0].contains("the broker stopped (SIGTERM)")
            && stops[0].contains("its checkpoint covers every record of it"),
        "{}",
        ran.stdout
    );
    assert!(
        stops[1].starts_with("stops: a crash: the broker's run ended without its stop record")
            && stops[1].contains("were open to rewrite unnoticed for")
            && stops[1].contains("at most the 3600 s checkpoint interval"),
        "{}",
        ran.stdout
    );
    assert!(
        stops[2].starts_with("stops: the broker is off since "),
        "{}",
        ran.stdout
    );

    // Records deleted from the tail read as such, not as a stop.
    let log = broker.state.join("audit.jsonl");
    let lines = lines_of(&log);
    fs::write(&log, lines[..lines.len() - 3].join("\n") + "\n").unwrap();
    let ran = verify_witnessed(&broker.state, &witness.dir());
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    assert!(
        ran.stdout.contains(&format!(
            "witness: records deleted: the log holds {} records, but the witness cosigned {}",
            lines.len() - 3,
            lines.len()
        )),
        "{}",
        ran.stdout
    );
}

#[test]
fn the_witness_waits_at_most_the_bound_at_stop_and_a_broker_without_one_stops_all_the_same() {
    // A socket that accepts and never answers: the stop waits witness_wait_ms, then ends.
    let root = testkit::temp_dir();
    let socket = root.path().join("silent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let held = std::thread::spawn(move || listener.accept().map(|(stream, _)| stream));
    let config = format!(
        "[audit]\nwitness = \"unix:{}\"\nwitness_wait_ms = 300\n",
        socket.display()
    );
    let broker = BrokerProcess::start("", &config);
    stop(&broker, 1);
    assert!(
        broker
            .log()
            .contains("the audit log's checkpoint was not cosigned"),
        "{}",
        broker.log()
    );
    drop(held);
}

#[test]
fn a_bad_audit_section_is_refused_naming_the_key() {
    let root = testkit::temp_dir();
    for (config, named) in [
        ("[audit]\nwitness = \"tcp:1.2.3.4:5\"\n", "witness"),
        ("[audit]\nseal_interval_secs = 0\n", "seal_interval_secs"),
        ("[audit]\nwitnes = \"unix:/x\"\n", "witnes"),
    ] {
        let config_dir = root.path().join("c");
        fs::create_dir_all(&config_dir).unwrap();
        fs::write(config_dir.join("brokerd.toml"), config).unwrap();
        let output = Command::new(testkit::binary("brokerd").unwrap())
            .arg("serve")
            .arg("--config-dir")
            .arg(&config_dir)
            .arg("--state-dir")
            .arg(root.path().join("s"))
            .arg("--runtime-dir")
            .arg(root.path().join("r"))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{config}: {stderr}");
        assert!(stderr.contains(named), "{config}: {stderr}");
    }
}

#[test]
fn the_broker_seals_and_sends_its_checkpoint_every_seal_interval_secs() {
    let witness = Witness::start();
    let config = format!(
        "[audit]\nwitness = \"{}\"\nseal_interval_secs = 1\n",
        witness.address()
    );
    let broker = BrokerProcess::start("", &config);
    let init = super::bx(&broker, &["audit", "seal", "init"]);
    assert_eq!(init.code, 0, "{}", init.stderr);
    calls(&broker, 2);
    // Both before any stop: the interval's, not the stop's.
    for needle in ["sealed the audit log", "the witness cosigned the audit log"] {
        assert!(
            broker.wait_for_log(needle, 1, Duration::from_secs(30)),
            "{needle}: {}",
            broker.log()
        );
    }
    assert!(!broker.log().contains("at stop"), "{}", broker.log());
    let started: ledger::Record =
        serde_json::from_str(&lines_of(&broker.state.join("audit.jsonl"))[0]).unwrap();
    assert!(
        matches!(
            started.event,
            ledger::Event::Started {
                checkpoint_every_secs: Some(1),
                ..
            }
        ),
        "{started:?}"
    );
}
