//! The warm box's command worker ([`sandbox::spawn_command_worker`]): commands run one after
//! another in the same box, each ended whole (its leftovers too) before the next; and a
//! command cannot reach its worker, which shares its box: no signal, no `ptrace`, no memory, no
//! descriptors. A second box's worker is not even visible.

use std::time::Duration;

use sandbox::{Exit, Sent, WarmError, spawn_command_worker};

use super::kernel::{EPERM, syscall};
use super::{run_warm, scene};

const LONG: Duration = Duration::from_secs(20);

#[test]
fn commands_run_one_after_another_with_their_own_output_exit_and_environment() {
    let s = scene();
    let mut worker = spawn_command_worker(&s.policy()).unwrap();
    let (ended, ran) = run_warm(
        &mut worker,
        &s.spec(
            "echo out; echo err >&2; pwd; echo \"$GRANT\" > made; exit 3",
            &[],
        ),
        LONG,
    );
    assert_eq!(ended.exit, Some(Exit::Code(3)));
    assert!(!ended.timed_out && !ended.output_exceeded);
    assert_eq!(ran.stdout, format!("out\n{}\n", s.grant.display()));
    assert_eq!(ran.stderr, "err\n");
    assert_eq!(
        std::fs::read_to_string(s.grant.join("made")).unwrap(),
        format!("{}\n", s.grant.display())
    );
    let (ended, ran) = run_warm(
        &mut worker,
        &s.spec(
            "echo \"$EXTRA\"; cat made",
            &[("EXTRA", "second".to_string())],
        ),
        LONG,
    );
    assert_eq!(ended.exit, Some(Exit::Code(0)));
    assert_eq!(ran.stdout, format!("second\n{}\n", s.grant.display()));
}

#[test]
fn what_a_command_leaves_running_is_gone_before_the_next_starts() {
    let s = scene();
    let mut worker = spawn_command_worker(&s.policy()).unwrap();
    let (ended, _) = run_warm(
        &mut worker,
        &s.spec("setsid sleep 300 & (sleep 301 &) ; echo started", &[]),
        LONG,
    );
    assert_eq!(ended.exit, Some(Exit::Code(0)));
    // The next command sees the box's init (bubblewrap), its worker and its own `ps`.
    let (_, ran) = run_warm(&mut worker, &s.spec("ps -e -o pid=,comm=", &[]), LONG);
    let processes: Vec<&str> = ran
        .stdout
        .lines()
        .filter_map(|line| line.split_whitespace().nth(1))
        .collect();
    assert_eq!(
        processes,
        ["bwrap", "sandbox-launche", "ps"],
        "{}",
        ran.stdout
    );
}

#[test]
fn a_command_past_its_timeout_is_killed_whole_and_the_worker_serves_on() {
    let s = scene();
    let mut worker = spawn_command_worker(&s.policy()).unwrap();
    let (ended, ran) = run_warm(
        &mut worker,
        &s.spec("sleep 400 & echo before; sleep 300", &[]),
        Duration::from_millis(500),
    );
    assert!(ended.timed_out, "{ended:?}");
    assert_eq!(ended.exit, Some(Exit::Signal(9)));
    assert_eq!(ran.stdout, "before\n");
    let (ended, ran) = run_warm(&mut worker, &s.spec("pgrep -c sleep || true", &[]), LONG);
    assert_eq!(ended.exit, Some(Exit::Code(0)));
    assert_eq!(ran.stdout.trim(), "0");
}

#[test]
fn a_command_writing_past_its_output_limit_is_killed_and_the_rest_not_passed_on() {
    let s = scene();
    let mut worker = spawn_command_worker(&s.policy()).unwrap();
    let mut out = 0usize;
    let ended = worker
        .run_command(
            &s.spec("yes", &[]),
            LONG,
            30,
            100_000,
            &mut |b| out += b.len(),
            &mut |_| {},
            &mut Sent::default(),
        )
        .unwrap();
    assert!(ended.output_exceeded, "{ended:?}");
    assert_eq!(out, 100_000);
    let (ended, ran) = run_warm(&mut worker, &s.spec("echo still here", &[]), LONG);
    assert_eq!(ended.exit, Some(Exit::Code(0)));
    assert_eq!(ran.stdout, "still here\n");
}

#[test]
fn a_program_that_cannot_start_is_a_result_not_a_dead_worker() {
    let s = scene();
    let mut worker = spawn_command_worker(&s.policy()).unwrap();
    let mut spec = s.spec("true", &[]);
    spec.program = "/no/such/program".into();
    let (ended, ran) = run_warm(&mut worker, &spec, LONG);
    assert_eq!(ended.exit, Some(Exit::Code(125)));
    assert!(
        ran.stderr.contains("cannot run /no/such/program"),
        "{}",
        ran.stderr
    );
    let (ended, _) = run_warm(&mut worker, &s.spec("true", &[]), LONG);
    assert_eq!(ended.exit, Some(Exit::Code(0)));
}

/// The attempt `script` against the worker (`$PPID` of the command's shell) is refused with
/// `refusal`, and the worker answers the next command.
fn worker_survives(script: &str, refusal: &str) {
    let s = scene();
    let mut worker = spawn_command_worker(&s.policy()).unwrap();
    let (_, ran) = run_warm(&mut worker, &s.spec(script, &[]), LONG);
    assert_ne!(ran.code, Some(0), "{}{}", ran.stdout, ran.stderr);
    assert!(!ran.stdout.contains("made"), "{}", ran.stdout);
    assert!(
        ran.stderr.contains(refusal),
        "wanted {refusal:?}: {}{}",
        ran.stdout,
        ran.stderr
    );
    let (ended, ran) = run_warm(&mut worker, &s.spec("echo served", &[]), LONG);
    assert_eq!(ended.exit, Some(Exit::Code(0)));
    assert_eq!(ran.stdout, "served\n");
}

#[test]
fn the_worker_is_the_commands_parent_and_its_memory_readable_on_the_host() {
    // The attempts below aim at the right process: the worker is the shell's parent, and
    // reading a process's memory works where nothing stops it (the test's own).
    let s = scene();
    let mut worker = spawn_command_worker(&s.policy()).unwrap();
    let (_, ran) = run_warm(&mut worker, &s.spec("cat /proc/$PPID/cmdline", &[]), LONG);
    assert!(
        ran.stdout.contains("--boxmaker-command-worker"),
        "{}",
        ran.stdout
    );
    let own = std::fs::read(format!("/proc/{}/environ", std::process::id())).unwrap();
    assert!(!own.is_empty());
}

#[test]
fn a_command_cannot_kill_its_worker() {
    worker_survives("kill -9 $PPID && echo made", "Operation not permitted");
}

#[test]
fn a_command_cannot_send_any_signal_to_its_worker() {
    worker_survives(
        "kill -0 $PPID && kill -STOP $PPID && echo made",
        "Operation not permitted",
    );
}

#[test]
fn a_command_cannot_ptrace_its_worker() {
    // PTRACE_ATTACH and PTRACE_SEIZE.
    worker_survives(
        &format!(
            "{} $PPID || {} $PPID",
            syscall("", "101, 16, $ARGV[0] + 0, 0, 0"),
            syscall("", "101, 0x4206, $ARGV[0] + 0, 0, 0")
        ),
        EPERM,
    );
}

#[test]
fn a_command_cannot_read_its_workers_memory_environment_or_what_its_descriptors_are() {
    worker_survives(
        "dd if=/proc/$PPID/mem bs=1 count=1 skip=4194304 2>&1 >/dev/null | head -1 >&2; \
         cat /proc/$PPID/environ >/dev/null && echo made environ; \
         ls -l /proc/$PPID/fd/ && echo made fd; \
         readlink /proc/$PPID/fd/0 && echo made link; \
         echo x > /proc/$PPID/fd/1 && echo made write; exit 1",
        "Permission denied",
    );
}

#[test]
fn a_command_cannot_write_to_its_workers_memory() {
    worker_survives(
        "printf x | dd of=/proc/$PPID/mem bs=1 seek=4194304 conv=notrunc && echo made",
        "Permission denied",
    );
}

#[test]
fn a_second_boxs_worker_is_invisible() {
    let (a, b) = (scene(), scene());
    let mut first = spawn_command_worker(&a.policy()).unwrap();
    let mut second = spawn_command_worker(&b.policy()).unwrap();
    let (ended, _) = run_warm(&mut second, &b.spec("true", &[]), LONG);
    assert_eq!(ended.exit, Some(Exit::Code(0)));
    let list = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done";
    let (_, ran) = run_warm(&mut first, &a.spec(list, &[]), LONG);
    assert!(
        ran.stdout.contains(&a.grant.display().to_string()),
        "{}",
        ran.stdout
    );
    assert!(
        !ran.stdout.contains(&b.grant.display().to_string()),
        "{}",
        ran.stdout
    );
    // The second still serves.
    let (ended, _) = run_warm(&mut second, &b.spec("true", &[]), LONG);
    assert_eq!(ended.exit, Some(Exit::Code(0)));
}

#[test]
fn a_worker_killed_from_outside_answers_with_an_error_not_a_hang() {
    let s = scene();
    let mut worker = spawn_command_worker(&s.policy()).unwrap();
    let (ended, _) = run_warm(&mut worker, &s.spec("true", &[]), LONG);
    assert_eq!(ended.exit, Some(Exit::Code(0)));
    let pid = worker.id().unwrap();
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    // `kill` returns once the signal is sent: the box goes (bubblewrap, then its init by its
    // parent-death signal, then everything in its PID namespace) a moment later, and until
    // then the worker may still answer. Its output closing says it is gone.
    let gone_by = std::time::Instant::now() + Duration::from_secs(10);
    while worker.is_idle() && std::time::Instant::now() < gone_by {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        !worker.is_idle(),
        "the worker's box outlived its bubblewrap by 10 s"
    );
    let error = worker
        .run_command(
            &s.spec("echo never", &[]),
            LONG,
            30,
            1 << 20,
            &mut |_| {},
            &mut |_| {},
            &mut Sent::default(),
        )
        .unwrap_err();
    assert!(matches!(error, WarmError::Ended(_)), "{error:?}");
}
