//! The warm box ([`sandbox::spawn_warm`]): one process answers request after request inside the
//! same walls as a fresh box; a box that misses its deadline, ends, writes more than one line
//! or too long a line is reported as such, and dropping it leaves no process behind.

use std::fs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use sandbox::{CommandSpec, FileWalls, Limits, Policy, Sent, WarmError, spawn_warm};

use crate::escape::launcher;

struct Folder {
    _root: tempfile::TempDir,
    grant: PathBuf,
    outside: PathBuf,
}

fn folder() -> Folder {
    let root = tempfile::tempdir_in("/var/tmp").unwrap();
    let grant = root.path().join("grant");
    let outside = root.path().join("outside");
    fs::create_dir_all(&grant).unwrap();
    fs::create_dir_all(&outside).unwrap();
    fs::write(grant.join("inside.txt"), "inside").unwrap();
    fs::write(outside.join("secret"), "outside-secret").unwrap();
    Folder {
        _root: root,
        grant,
        outside,
    }
}

fn policy(folder: &Folder) -> Policy {
    Policy {
        read_only: vec![folder.grant.clone()],
        read_write: Vec::new(),
        masked: Vec::new(),
        tmp_bytes: 1 << 20,
        files: Vec::new(),
        limits: Limits {
            cpu_seconds: 30,
            processes: 32,
            memory: 256 << 20,
            ..Limits::default()
        },
        launcher: Some(launcher()),
        file_walls: FileWalls::Bubblewrap,
        network: None,
        pinned: Vec::new(),
    }
}

fn spec(script: &str) -> CommandSpec {
    CommandSpec {
        program: PathBuf::from("/bin/bash"),
        args: vec!["-c".into(), script.into()],
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        cwd: PathBuf::from("/"),
    }
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(10)
}

/// Whether a process whose command line holds `needle` runs.
fn running(needle: &str) -> bool {
    fs::read_dir("/proc").unwrap().flatten().any(|e| {
        fs::read(e.path().join("cmdline")).is_ok_and(|c| {
            String::from_utf8_lossy(&c)
                .replace('\0', " ")
                .contains(needle)
        })
    })
}

#[test]
fn one_process_answers_each_request_inside_the_box() {
    let folder = folder();
    // A counter that only a process kept between requests can keep.
    let script = r#"n=0; while IFS= read -r path; do n=$((n+1)); echo "$n $(cat "$path" 2>&1 | tr '\n' ' ')"; done"#;
    let mut warm = spawn_warm(&spec(script), &policy(&folder)).unwrap();
    assert!(warm.is_idle());
    let mut sent = Sent::default();
    let inside = folder.grant.join("inside.txt");
    let answer = warm
        .exchange(inside.to_str().unwrap().as_bytes(), soon(), 4096, &mut sent)
        .unwrap();
    assert_eq!(String::from_utf8(answer).unwrap(), "1 inside");
    let secret = folder.outside.join("secret");
    // Unsandboxed, the same `cat` reads it.
    assert_eq!(fs::read_to_string(&secret).unwrap(), "outside-secret");
    let answer = warm
        .exchange(secret.to_str().unwrap().as_bytes(), soon(), 4096, &mut sent)
        .unwrap();
    let answer = String::from_utf8(answer).unwrap();
    assert!(answer.starts_with("2 "), "{answer}");
    assert!(answer.contains("No such file or directory"), "{answer}");
    assert!(warm.is_idle());
}

#[test]
fn a_box_past_its_deadline_times_out_and_dropping_it_leaves_no_process() {
    let folder = folder();
    let mut warm = spawn_warm(&spec("read -r l; sleep 1001.7"), &policy(&folder)).unwrap();
    let mut sent = Sent::default();
    let deadline = Instant::now() + Duration::from_millis(300);
    let error = warm.exchange(b"go", deadline, 4096, &mut sent).unwrap_err();
    assert!(matches!(error, WarmError::TimedOut(_)), "{error}");
    assert!(!error.before_request(&sent));
    assert!(running("sleep 1001.7"));
    drop(warm);
    let until = Instant::now() + Duration::from_secs(5);
    while running("sleep 1001.7") && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!running("sleep 1001.7"), "the box outlived its drop");
}

#[test]
fn a_box_that_ends_is_reported_with_its_errors_and_is_not_idle() {
    let folder = folder();
    let mut warm = spawn_warm(
        &spec("read -r l; echo \"refused $l\" >&2; exit 3"),
        &policy(&folder),
    )
    .unwrap();
    let mut sent = Sent::default();
    let error = warm.exchange(b"this", soon(), 4096, &mut sent).unwrap_err();
    match &error {
        WarmError::Ended(errors) => assert_eq!(errors, "refused this"),
        other => panic!("not ended: {other}"),
    }
    // The request had reached it: sending it elsewhere could run it twice.
    assert!(!error.before_request(&sent));
    assert!(!warm.is_idle());
    // A box gone before a request: the request never reached it.
    let mut gone = spawn_warm(&spec("exit 0"), &policy(&folder)).unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    while gone.is_idle() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!gone.is_idle());
    let error = gone.exchange(b"late", soon(), 4096, &mut sent).unwrap_err();
    assert!(matches!(error, WarmError::Ended(_)), "{error}");
    assert!(error.before_request(&sent), "{error} after {sent:?}");
}

#[test]
fn two_lines_a_long_line_or_a_request_with_a_newline_are_refused() {
    let folder = folder();
    let mut sent = Sent::default();
    let mut two = spawn_warm(
        &spec("read -r l; printf 'a\\nb\\n'; sleep 5"),
        &policy(&folder),
    )
    .unwrap();
    // The two lines come in one read or two: in one, the first answer is refused; in two, the
    // second line waits in the pipe and the next request is refused before it is sent.
    let error = match two.exchange(b"x", soon(), 4096, &mut sent) {
        Ok(first) => {
            assert_eq!(first, b"a");
            std::thread::sleep(Duration::from_millis(100));
            let error = two.exchange(b"y", soon(), 4096, &mut sent).unwrap_err();
            // Unasked output found before the request went: it may go to another box.
            assert!(error.before_request(&sent), "{error} after {sent:?}");
            error
        }
        Err(error) => error,
    };
    assert!(matches!(error, WarmError::Extra), "{error}");
    let long = "read -r l; head -c 100000 /dev/zero | tr '\\0' a; echo; sleep 5";
    let mut long = spawn_warm(&spec(long), &policy(&folder)).unwrap();
    let error = long.exchange(b"x", soon(), 1000, &mut sent).unwrap_err();
    assert!(matches!(error, WarmError::TooLong(1000)), "{error}");
    let mut echo = spawn_warm(
        &spec("while read -r l; do echo \"$l\"; done"),
        &policy(&folder),
    )
    .unwrap();
    let error = echo.exchange(b"a\nb", soon(), 4096, &mut sent).unwrap_err();
    assert!(matches!(error, WarmError::NotOneLine), "{error}");
    assert_eq!(
        echo.exchange(b"ok", soon(), 4096, &mut sent).unwrap(),
        b"ok"
    );
}
