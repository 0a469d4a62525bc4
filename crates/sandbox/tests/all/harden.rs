//! `make_non_dumpable` against a reader with no capability, the way a command of the shell tool
//! reads: the target is a child process of this binary holding a secret in its environment.

use std::path::Path;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use sandbox::{
    CommandSpec, ContainOptions, ContainedChild, Containment, make_non_dumpable, spawn_contained,
};

const BODY: &str = "BOXMAKER_SANDBOX_TEST_BODY";
const SECRET: &str = "BOXMAKER_TEST_SECRET";

/// The bodies run in child processes; a no-op in an ordinary test run.
#[test]
fn child_entry() {
    let Ok(body) = std::env::var(BODY) else {
        return;
    };
    match body.as_str() {
        "dumpable" => {}
        "non_dumpable" => make_non_dumpable().unwrap(),
        other => panic!("unknown body {other}"),
    }
    println!("@@ready");
    // Live until the test says it has read.
    let done = std::path::PathBuf::from(std::env::var("BOXMAKER_TEST_DONE").unwrap());
    for _ in 0..1000 {
        if done.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn contained(program: &Path, args: &[&str], env: &[(&str, &str)]) -> ContainedChild {
    let spec = CommandSpec {
        program: program.into(),
        args: args.iter().map(Into::into).collect(),
        env: env.iter().map(|(k, v)| (k.into(), v.into())).collect(),
        cwd: "/".into(),
    };
    let options = ContainOptions {
        timeout: Duration::from_secs(20),
        containment: Containment::ProcessGroup,
    };
    spawn_contained(&spec, &options).unwrap()
}

/// What a reader without capabilities gets from the target's `/proc/PID/environ`. The target
/// is started hardened too (every thread of it without capabilities), so that only its
/// dumpability protects it: a target holding capabilities that the reader lacks is refused
/// anyway.
fn read_environ_of(body: &str) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let done = dir.path().join("done");
    let exe = std::env::current_exe().unwrap();
    let target = contained(
        &exe,
        &[
            "--exact",
            "harden::child_entry",
            "--nocapture",
            "--test-threads=1",
        ],
        &[
            (BODY, body),
            (SECRET, "hunter2"),
            ("BOXMAKER_TEST_DONE", &done.display().to_string()),
        ],
    );
    let pid = target.id().unwrap();
    let (ready_tx, ready_rx) = mpsc::channel();
    let waiter = thread::spawn(move || {
        let mut seen = Vec::new();
        target
            .finish(
                &mut |b| {
                    seen.extend_from_slice(b);
                    if String::from_utf8_lossy(&seen).contains("@@ready") {
                        let _ = ready_tx.send(());
                    }
                },
                &mut |_| {},
            )
            .unwrap()
    });
    ready_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    contained(
        Path::new("/bin/cat"),
        &[&format!("/proc/{pid}/environ")],
        &[],
    )
    .finish(&mut |b| out.extend_from_slice(b), &mut |b| {
        err.extend_from_slice(b)
    })
    .unwrap();
    std::fs::write(&done, "").unwrap();
    waiter.join().unwrap();
    (
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    )
}

#[test]
fn a_non_dumpable_process_hides_its_environment_from_a_process_without_capabilities() {
    let (out, err) = read_environ_of("non_dumpable");
    assert!(!out.contains("hunter2"), "{out}");
    assert!(err.contains("Permission denied"), "{err}");
}

#[test]
fn a_dumpable_process_shows_its_environment_to_the_same_user_which_is_why_it_matters() {
    let (out, err) = read_environ_of("dumpable");
    assert!(out.contains(&format!("{SECRET}=hunter2")), "{out} {err}");
}
