//! The state folder holds every call's answer and every waiting call's arguments: the broker
//! refuses one that is not private (a real directory, this uid's, mode 0700) with a sentence
//! naming it and the fix, and every file the broker, `bx` and `brokerd audit verify` leave in
//! it is mode 0600 (every folder 0700) whatever the umask.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use proto::ToolResponse;
use testkit::{AgentClient, BrokerProcess};

use super::gateway::{Probe, pins_of};
use super::{FAST, WORK, content, path_args};

/// The umask most owners run with: files made with the default mode are readable by all.
fn usual_umask() {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o022));
}

/// `brokerd serve` on `broker`'s config and runtime folders with the state folder `state`.
fn serve(broker: &BrokerProcess, state: &Path) -> Command {
    let mut command = Command::new(testkit::binary("brokerd").unwrap());
    command
        .arg("serve")
        .arg("--config-dir")
        .arg(&broker.config)
        .arg("--state-dir")
        .arg(state)
        .arg("--runtime-dir")
        .arg(&broker.runtime)
        .env("HOME", broker.root.path());
    command
}

/// Runs `command` until it exits, or for 20 s (then it is killed: it served): its exit code
/// (`None` when killed) and what it wrote on standard error.
fn run_briefly(mut command: Command, stderr: &Path) -> (Option<i32>, String) {
    let mut child = command
        .stdout(Stdio::null())
        .stderr(fs::File::create(stderr).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if Instant::now() >= deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (code, fs::read_to_string(stderr).unwrap())
}

fn text(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr)
}

/// Every file and folder below `dir` whose mode is not 0600 (a file) or 0700 (a folder), with
/// its mode; and how many files were looked at.
fn not_private(dir: &Path) -> (Vec<(PathBuf, u32)>, usize) {
    let mut wrong = Vec::new();
    let mut files = 0;
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            let mode = meta.mode() & 0o7777;
            if meta.is_dir() {
                if mode != 0o700 {
                    wrong.push((path.clone(), mode));
                }
                folders.push(path);
            } else {
                files += 1;
                if mode != 0o600 {
                    wrong.push((path, mode));
                }
            }
        }
    }
    (wrong, files)
}

#[test]
fn a_state_folder_that_is_not_private_is_refused_naming_it_and_the_fix() {
    let mut broker = BrokerProcess::start(WORK, FAST);
    broker.kill();
    let root = broker.root.path().to_path_buf();
    let folder = |name: &str, mode: u32| {
        let path = root.join(name);
        fs::create_dir(&path).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
        path
    };
    let open = folder("open", 0o755);
    let group = folder("group", 0o750);
    let theirs = folder("theirs", 0o700);
    std::os::unix::fs::chown(&theirs, Some(65534), None).unwrap();
    let link = root.join("link");
    std::os::unix::fs::symlink(folder("target", 0o700), &link).unwrap();
    let cases = [
        (
            &open,
            "has mode 0755".to_string(),
            format!("`chmod 700 {}`", open.display()),
        ),
        (
            &group,
            "has mode 0750".to_string(),
            format!("`chmod 700 {}`", group.display()),
        ),
        (
            &theirs,
            "is owned by uid 65534".to_string(),
            "chown".to_string(),
        ),
        (
            &link,
            "is a symbolic link".to_string(),
            "--state-dir".to_string(),
        ),
    ];
    for (state, why, fix) in cases {
        let (code, said) = run_briefly(serve(&broker, state), &root.join("stderr"));
        assert_eq!(code, Some(1), "{said}");
        let named = format!("the state folder {} {why}", state.display());
        assert!(said.contains(&named), "{said}");
        assert!(said.contains(&fix), "{said}");
        assert!(!state.join("ledger.sqlite").exists(), "{said}");
    }
    // Fixed as the sentence says, the same folder serves.
    fs::set_permissions(&open, fs::Permissions::from_mode(0o700)).unwrap();
    let socket = broker.socket();
    let _ = fs::remove_file(&socket);
    let mut child = serve(&broker, &open)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !socket.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    fs::write(broker.work.join("a.txt"), "a").unwrap();
    let mut client = AgentClient::open(&socket, None);
    let answer = client.call(1, "read_file", &path_args(&broker.work.join("a.txt")));
    assert!(
        matches!(answer, Ok(ToolResponse::Result { .. })),
        "{answer:?}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn under_umask_022_every_file_a_broker_run_leaves_in_the_state_folder_is_private() {
    usual_umask();
    let memory =
        "[[grant]]\nid = \"remember\"\ntool = [\"memory\", \"recall\"]\non_untrusted = \"allow\"\n";
    let others = format!("{WORK}\n{memory}");
    let mut probe = Probe::start(&others);
    let pins = pins_of(&probe.broker, "probe");
    let tools = format!(
        "[[grant]]\nid = \"probe-tools\"\ntool = \"probe.*\"\non_untrusted = \"allow\"\npins = {{ {pins} }}\n\n{others}"
    );
    probe.grant(&tools);
    let broker = &probe.broker;
    fs::write(broker.work.join("a.txt"), "a").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    let read = client.call(1, "read_file", &path_args(&broker.work.join("a.txt")));
    assert!(matches!(read, Ok(ToolResponse::Result { .. })), "{read:?}");
    let write = serde_json::json!({ "path": broker.work.join("b.txt"), "content": "b" });
    let wrote = client.call(2, "write_file", &write.to_string());
    assert!(
        matches!(wrote, Ok(ToolResponse::Result { .. })),
        "{wrote:?}"
    );
    let remembered = client.call(3, "memory", r#"{"text":"the owner's secret"}"#);
    assert!(
        matches!(remembered, Ok(ToolResponse::Result { .. })),
        "{remembered:?}"
    );
    let recalled = client.call(4, "recall", r#"{"query":"secret"}"#).unwrap();
    assert!(
        content(&recalled).contains("the owner's secret"),
        "{recalled:?}"
    );
    let echoed = client.call(5, "probe.echo", r#"{"text":"hi"}"#).unwrap();
    assert!(content(&echoed).contains("echo: hi"), "{echoed:?}");
    let state = &broker.state;
    for file in [
        "ledger.sqlite",
        "ledger.sqlite-wal",
        "ledger.sqlite-shm",
        "audit.jsonl",
        "memory/memory.sqlite",
        "memory/memory.sqlite-wal",
        "downstream",
    ] {
        assert!(state.join(file).exists(), "no {file} to check");
    }
    let (wrong, files) = not_private(state);
    assert!(files >= 8, "{files} files");
    assert!(wrong.is_empty(), "readable by others: {wrong:?}");
}

#[test]
fn bx_and_brokerd_audit_verify_on_an_older_ledger_leave_nothing_others_can_read() {
    usual_umask();
    let mut broker = BrokerProcess::start(WORK, FAST);
    fs::write(broker.work.join("a.txt"), "a").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    let read = client.call(1, "read_file", &path_args(&broker.work.join("a.txt")));
    assert!(matches!(read, Ok(ToolResponse::Result { .. })), "{read:?}");
    broker.kill();
    // An older install's files, readable by all; the index SQLite rebuilds, gone.
    let state = broker.state.clone();
    for entry in fs::read_dir(&state).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        }
    }
    fs::remove_file(state.join("ledger.sqlite-shm")).unwrap();
    let bx = Command::new(testkit::binary("bx").unwrap())
        .arg("--state-dir")
        .arg(&state)
        .args(["audit", "verify"])
        .output()
        .unwrap();
    assert_eq!(bx.status.code(), Some(0), "{}", text(&bx));
    let (wrong, _) = not_private(&state);
    let ledgers: Vec<_> = wrong
        .iter()
        .filter(|(p, _)| p.to_string_lossy().contains("ledger.sqlite"))
        .collect();
    assert!(
        ledgers.is_empty(),
        "bx left readable by others: {ledgers:?}"
    );
    let (code, said) = super::audit_verify(&broker);
    assert_eq!(code, 0, "{said}");
    // A broker started on them narrows what is left (the audit log and the lock).
    broker.spawn();
    let (wrong, files) = not_private(&state);
    assert!(files >= 4, "{files} files");
    assert!(wrong.is_empty(), "readable by others: {wrong:?}");
}
