//! Contained commands, run for real: nothing they start outlives them, they see only their own
//! processes, and they hold no privilege. The tests that need another user or a broker that
//! dies run a body of this same binary in a child process (see `child_entry`).

use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use sandbox::{CommandSpec, ContainOptions, Containment, Ended, Exit, spawn_contained};

const BOXES: [Containment; 2] = [Containment::PidNamespace, Containment::Subreaper];
const ALL: [Containment; 3] = [
    Containment::PidNamespace,
    Containment::Subreaper,
    Containment::ProcessGroup,
];

/// The body a child process of this binary runs, chosen by this variable.
const BODY: &str = "BOXMAKER_SANDBOX_TEST_BODY";

struct Run {
    ended: Ended,
    containment: Containment,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

fn spec(script: &str) -> CommandSpec {
    CommandSpec {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
        env: vec![(
            "PATH".into(),
            "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin".into(),
        )],
        cwd: "/".into(),
    }
}

fn run_with(script: &str, containment: Containment, timeout: Duration) -> Run {
    let started = Instant::now();
    let options = ContainOptions {
        timeout,
        containment,
    };
    let child = spawn_contained(&spec(script), &options).unwrap();
    let applied = child.containment();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let ended = child
        .finish(&mut |b| out.extend_from_slice(b), &mut |b| {
            err.extend_from_slice(b)
        })
        .unwrap();
    Run {
        ended,
        containment: applied,
        stdout: String::from_utf8_lossy(&out).into_owned(),
        stderr: String::from_utf8_lossy(&err).into_owned(),
        elapsed: started.elapsed(),
    }
}

fn run(script: &str, containment: Containment) -> Run {
    run_with(script, containment, Duration::from_secs(30))
}

/// Runs `script` (with `{marker}` replaced) under each containment at once, waits `wait`, and
/// says for which the marker appeared.
fn survivors(script: &str, modes: &[Containment], wait: Duration) -> Vec<Containment> {
    let dir = tempfile::tempdir().unwrap();
    let markers: Vec<_> = modes
        .iter()
        .map(|mode| dir.path().join(mode.as_str()))
        .collect();
    thread::scope(|s| {
        for (mode, marker) in modes.iter().zip(&markers) {
            let script = script.replace("{marker}", &marker.display().to_string());
            s.spawn(move || {
                let run = run(&script, *mode);
                assert_eq!(run.containment, *mode);
                assert_eq!(run.ended.exit, Some(Exit::Code(0)), "{}", run.stderr);
            });
        }
    });
    thread::sleep(wait);
    modes
        .iter()
        .zip(&markers)
        .filter(|(_, m)| m.exists())
        .map(|(mode, _)| *mode)
        .collect()
}

#[test]
fn a_setsid_child_dies_with_the_command() {
    let script = "setsid sh -c 'sleep 2; touch {marker}' & echo started";
    assert_eq!(survivors(script, &BOXES, Duration::from_secs(3)), []);
}

#[test]
fn a_double_forked_grandchild_dies_with_the_command() {
    let script = "sh -c '(sleep 2; touch {marker}) &' ; echo started";
    assert_eq!(survivors(script, &BOXES, Duration::from_secs(3)), []);
}

#[test]
fn a_process_group_does_not_hold_a_setsid_child_which_is_why_boxes_exist() {
    // The control for the two tests above: the weakest containment lets it escape (once the
    // child has had the time to call setsid before its group is killed).
    let script = "setsid sh -c 'sleep 1; touch {marker}' & sleep 0.5; echo started";
    let escaped = survivors(script, &[Containment::ProcessGroup], Duration::from_secs(2));
    assert_eq!(escaped, [Containment::ProcessGroup]);
}

#[test]
fn dropping_a_contained_child_kills_everything_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    for mode in ALL {
        let marker = dir.path().join(mode.as_str());
        let script = format!(
            "setsid sh -c 'sleep 2; touch {}' & sleep 2",
            marker.display()
        );
        let options = ContainOptions {
            containment: mode,
            ..ContainOptions::default()
        };
        drop(spawn_contained(&spec(&script), &options).unwrap());
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    thread::sleep(Duration::from_secs(3));
    for mode in BOXES {
        assert!(!dir.path().join(mode.as_str()).exists(), "{mode:?}");
    }
}

#[test]
fn a_grandchild_holding_stdout_does_not_delay_the_return_past_the_deadline() {
    for mode in BOXES {
        let run = run_with("(sleep 8) & sleep 30", mode, Duration::from_secs(1));
        assert!(run.ended.timed_out, "{mode:?}");
        assert_eq!(run.ended.exit, Some(Exit::Signal(9)));
        assert!(
            run.elapsed < Duration::from_secs(5),
            "{mode:?}: {:?}",
            run.elapsed
        );
    }
    // A process group cannot kill what left it with setsid, so here the readers must give up.
    for script in [
        "setsid sleep 8 & echo $!",
        "setsid sleep 8 & echo $!; sleep 30",
    ] {
        let run = run_with(script, Containment::ProcessGroup, Duration::from_secs(1));
        assert!(
            run.elapsed < Duration::from_secs(5),
            "{script}: {:?}",
            run.elapsed
        );
        let escaped: i32 = run.stdout.trim().parse().unwrap();
        // End the escapee now rather than in eight seconds.
        Command::new("kill")
            .arg(escaped.to_string())
            .status()
            .unwrap();
    }
}

#[test]
fn exit_codes_and_signals_pass_through_the_supervisor() {
    for mode in ALL {
        assert_eq!(
            run("exit 7", mode).ended.exit,
            Some(Exit::Code(7)),
            "{mode:?}"
        );
        assert_eq!(
            run("kill -TERM $$", mode).ended.exit,
            Some(Exit::Signal(15)),
            "{mode:?}"
        );
        assert_eq!(
            run("kill -KILL $$", mode).ended.exit,
            Some(Exit::Signal(9)),
            "{mode:?}"
        );
        let run = run("echo out; echo err >&2", mode);
        assert_eq!(
            (run.stdout.as_str(), run.stderr.as_str()),
            ("out\n", "err\n")
        );
        assert!(!run.ended.timed_out);
    }
}

#[test]
fn every_command_starts_with_no_signal_blocked_and_sigpipe_not_ignored() {
    // This test binary ignores SIGPIPE (std does, in every Rust program) and the process-group
    // child is started sharing its memory until `exec`: neither may reach the command, or
    // `yes | head` would end in EPIPE instead of SIGPIPE.
    for mode in ALL {
        let run = run("grep -E '^Sig(Blk|Ign):' /proc/self/status", mode);
        let mask = |name: &str| {
            let line = run.stdout.lines().find(|l| l.starts_with(name)).unwrap();
            u64::from_str_radix(line[name.len()..].trim(), 16).unwrap()
        };
        assert_eq!(mask("SigBlk:"), 0, "{mode:?}: {}", run.stdout);
        let sigpipe = 1 << (13 - 1);
        assert_eq!(mask("SigIgn:") & sigpipe, 0, "{mode:?}: {}", run.stdout);
        let piped = run_with(
            "(yes; echo \"yes ended $?\" >&2) | head -c 1 >/dev/null",
            mode,
            Duration::from_secs(5),
        );
        assert_eq!(piped.stderr, "yes ended 141\n", "{mode:?}");
    }
}

#[test]
fn a_program_or_folder_that_is_not_there_is_an_error_naming_it() {
    for mode in ALL {
        let options = ContainOptions {
            timeout: Duration::from_secs(5),
            containment: mode,
        };
        let missing = CommandSpec {
            program: "/nonexistent/boxmaker-test-program".into(),
            ..spec("true")
        };
        let error = spawn_contained(&missing, &options).unwrap_err();
        assert_eq!(
            error.kind(),
            std::io::ErrorKind::NotFound,
            "{mode:?}: {error}"
        );
        let elsewhere = CommandSpec {
            cwd: "/nonexistent/boxmaker-test-folder".into(),
            ..spec("true")
        };
        let error = spawn_contained(&elsewhere, &options).unwrap_err();
        assert_eq!(
            error.kind(),
            std::io::ErrorKind::NotFound,
            "{mode:?}: {error}"
        );
    }
}

#[test]
fn a_command_that_leaves_its_process_group_is_still_waited_for() {
    // The command makes itself a session of its own (setsid(1) calls setsid() in place, the
    // command not leading its group): the init, or the subreaper, must wait for any child,
    // not only for those of its own group, or it takes the command for gone and ends it.
    for mode in BOXES {
        let run = run("exec setsid sh -c 'sleep 0.3; echo done; exit 7'", mode);
        assert_eq!(run.containment, mode);
        assert_eq!(
            run.ended.exit,
            Some(Exit::Code(7)),
            "{mode:?}: {}",
            run.stderr
        );
        assert_eq!(run.stdout, "done\n", "{mode:?}");
    }
}

#[test]
fn the_command_sees_only_its_own_processes_in_proc() {
    let run = run(
        "echo $$; ls /proc | grep -c '^[0-9]'",
        Containment::PidNamespace,
    );
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.first(), Some(&"2"), "the init is 1, the command 2");
    let count: u32 = lines.get(1).unwrap().parse().unwrap();
    assert!(count <= 4, "init, sh, ls and grep at most: {count}");
}

#[test]
fn the_init_holds_the_brokers_memory_and_is_not_readable() {
    // The init is a fork of the broker: its environment and memory are the broker's.
    let run = run(
        "cat /proc/1/environ; echo rc=$?; head -c1 /proc/1/mem; echo rc=$?",
        Containment::PidNamespace,
    );
    assert!(
        run.stdout.contains("rc=1\n") && !run.stdout.contains("rc=0"),
        "{}",
        run.stdout
    );
    assert!(run.stderr.contains("Permission denied"), "{}", run.stderr);
    assert!(!run.stdout.contains("PATH="), "{}", run.stdout);
}

fn assert_no_privilege(status: &str) {
    for field in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        let line = status.lines().find(|l| l.starts_with(field)).unwrap();
        assert!(line.ends_with("0000000000000000"), "{line}");
    }
    assert!(status.lines().any(|l| l == "NoNewPrivs:\t1"), "{status}");
}

#[test]
fn every_capability_is_dropped_and_no_new_privs_is_set() {
    for mode in ALL {
        let run = run("grep -E '^(Cap|NoNewPrivs)' /proc/self/status", mode);
        assert_no_privilege(&run.stdout);
    }
}

#[test]
fn proc_cannot_be_unmounted_and_nothing_can_be_mounted() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "umount /proc; echo umount=$?; mount -t tmpfs none {0}; echo mount=$?; ls /proc/1 >/dev/null && echo own-proc",
        dir.path().display()
    );
    let run = run(&script, Containment::PidNamespace);
    assert!(
        run.stdout.contains("umount=32") || run.stdout.contains("umount=1"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("mount=0"), "{}", run.stdout);
    assert!(run.stdout.contains("own-proc"), "{}", run.stdout);
    // Nothing of the box's mounts reached the broker's mount namespace.
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    assert!(!mounts.contains(&dir.path().display().to_string()));
}

#[test]
fn the_kernels_knobs_are_read_only_for_a_command_of_uid_0() {
    // Writes back the value it read, so that the control changes nothing.
    let script = "v=$(cat /proc/sys/kernel/domainname); echo \"$v\" > /proc/sys/kernel/domainname && echo wrote; \
                  awk '$5 ~ \"^/sys|^/proc/(sys|sysrq-trigger|irq|bus|fs)$\" {print $5, $6}' /proc/self/mountinfo";
    let boxed = run(script, Containment::PidNamespace);
    assert!(!boxed.stdout.contains("wrote"), "{}", boxed.stdout);
    assert!(
        boxed.stderr.contains("Read-only file system"),
        "{}",
        boxed.stderr
    );
    let mounts: Vec<&str> = boxed.stdout.lines().collect();
    let expected = [
        "/sys",
        "/proc/sys",
        "/proc/sysrq-trigger",
        "/proc/irq",
        "/proc/bus",
        "/proc/fs",
    ];
    for path in expected.iter().filter(|p| Path::new(p).exists()) {
        let prefix = format!("{path} ");
        assert!(
            mounts.iter().any(|m| m.starts_with(&prefix)),
            "{path}: {mounts:?}"
        );
    }
    for mount in mounts {
        assert!(
            mount.split(' ').nth(1).unwrap().starts_with("ro"),
            "{mount}"
        );
    }
    // The control: uid 0 without any capability, outside the box's mounts, can write them.
    let uncontained = run(script, Containment::ProcessGroup);
    assert!(
        uncontained.stdout.contains("wrote"),
        "{}",
        uncontained.stderr
    );
}

/// Runs `body` of this binary in a child process, as `nobody` when asked; returns its `@@`
/// lines.
fn child_process(body: &str, as_nobody: bool, dir: &Path) -> Vec<String> {
    // As nobody, a copy that nobody can run wherever the checkout is (see testkit::RunnableCopy).
    let copy = as_nobody.then(testkit::RunnableCopy::of_this_test);
    let mut command = match &copy {
        Some(copy) => copy.command_as(testkit::NOBODY),
        None => Command::new(std::env::current_exe().unwrap()),
    };
    command
        .args([
            "--exact",
            "contain::child_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(BODY, body)
        .env("BOXMAKER_TEST_DIR", dir);
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .filter_map(|l| l.split_once("@@"))
        .map(|(_, line)| line.to_string())
        .collect()
}

/// The bodies run by `child_process`; a no-op in an ordinary test run.
#[test]
fn child_entry() {
    let Ok(body) = std::env::var(BODY) else {
        return;
    };
    let dir = std::env::var("BOXMAKER_TEST_DIR").unwrap();
    match body.as_str() {
        // A broker that starts contained commands, then dies without finishing them.
        "dying_broker" => {
            for mode in BOXES {
                let marker = Path::new(&dir).join(mode.as_str());
                let script = format!("sleep 2; touch {}", marker.display());
                let child = spawn_contained(
                    &spec(&script),
                    &ContainOptions {
                        containment: mode,
                        ..ContainOptions::default()
                    },
                )
                .unwrap();
                std::mem::forget(child);
            }
            println!("@@started");
            std::process::exit(0);
        }
        "as_nobody" => {
            let run = run(
                "id -u; cat /proc/self/uid_map; echo $$; grep -E '^(Cap|NoNewPrivs)' /proc/self/status",
                Containment::PidNamespace,
            );
            println!("@@containment={}", run.containment.as_str());
            for line in run.stdout.lines() {
                println!("@@{line}");
            }
        }
        other => panic!("unknown body {other}"),
    }
}

#[test]
fn a_command_dies_with_its_broker() {
    let dir = tempfile::tempdir().unwrap();
    let lines = child_process("dying_broker", false, dir.path());
    assert_eq!(lines, ["started"]);
    thread::sleep(Duration::from_secs(3));
    for mode in BOXES {
        assert!(
            !dir.path().join(mode.as_str()).exists(),
            "{mode:?} outlived its broker"
        );
    }
}

#[test]
fn an_owner_who_is_not_root_gets_a_user_namespace_with_their_own_ids() {
    let dir = tempfile::tempdir().unwrap();
    let lines = child_process("as_nobody", true, dir.path());
    assert_eq!(
        lines.first().map(String::as_str),
        Some("containment=pid_namespace")
    );
    assert_eq!(lines.get(1).map(String::as_str), Some("65534"));
    let map: Vec<&str> = lines.get(2).unwrap().split_whitespace().collect();
    assert_eq!(map, ["65534", "65534", "1"]);
    assert_eq!(lines.get(3).map(String::as_str), Some("2"));
    assert_no_privilege(&lines[4..].join("\n"));
}
