//! `shell` running real commands. The tests that need another user, a secret in the broker's
//! environment or a non-dumpable broker run a body of this same binary in a child process
//! (`child_entry`), so that nothing changes this process's environment.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use tools::shell::{Containment, ShellArgs, ShellError, ShellOptions, ShellResult, shell};

fn run(command: &str) -> ShellResult {
    run_with(command, &ShellOptions::default())
}

fn run_with(command: &str, options: &ShellOptions) -> ShellResult {
    shell(
        &ShellArgs {
            command: command.into(),
            cwd: None,
            timeout_secs: None,
        },
        options,
    )
    .unwrap()
}

fn uncontained() -> ShellOptions {
    ShellOptions {
        contain: false,
        ..ShellOptions::default()
    }
}

/// The body a child process of this binary runs, chosen by this variable.
const BODY: &str = "BOXMAKER_TOOLS_TEST_BODY";
const SECRET: &str = "BOXMAKER_TEST_SECRET";

/// Runs `body` of this binary in a child process (as `nobody` when asked) with `env` added;
/// returns the results its shell calls printed.
fn child_process(body: &str, as_nobody: bool, env: &[(&str, &str)]) -> Vec<serde_json::Value> {
    // As nobody, a copy that nobody can run wherever the checkout is (see testkit::RunnableCopy).
    let copy = as_nobody.then(testkit::RunnableCopy::of_this_test);
    let mut command = match &copy {
        Some(copy) => copy.command_as(testkit::NOBODY),
        None => Command::new(std::env::current_exe().unwrap()),
    };
    command
        .args([
            "--exact",
            "shell::child_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(BODY, body)
        .envs(env.iter().copied());
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
        .map(|(_, json)| serde_json::from_str(json).unwrap())
        .collect()
}

/// The bodies run by `child_process`; a no-op in an ordinary test run.
#[test]
fn child_entry() {
    let Ok(body) = std::env::var(BODY) else {
        return;
    };
    let report = |result: &ShellResult| println!("@@{}", serde_json::to_string(result).unwrap());
    match body.as_str() {
        "env" => report(&run("env")),
        // A broker holding a secret in its environment, non-dumpable as brokers are.
        "secret_holder" => {
            sandbox::make_non_dumpable().unwrap();
            let me = std::process::id();
            report(&run(&format!(
                "cat /proc/$PPID/environ; echo; cat /proc/{me}/environ; echo; ls /proc/{me}"
            )));
        }
        // Without a PID namespace, only non-dumpability hides the broker from its command.
        "secret_holder_uncontained" => {
            sandbox::make_non_dumpable().unwrap();
            report(&run_with("cat /proc/$PPID/environ", &uncontained()));
        }
        "secret_holder_dumpable_uncontained" => {
            report(&run_with("cat /proc/$PPID/environ", &uncontained()));
        }
        "as_nobody" => report(&run(
            "id -u; cat /proc/self/uid_map; ls /proc | grep -c '^[0-9]'; grep -E '^(Cap|NoNewPrivs)' /proc/self/status",
        )),
        // A gigabyte of output through `shell`, with this process's peak memory before and
        // after (this process is the one that reads and keeps the output).
        "gigabyte" => {
            let before = peak_rss_kib();
            let result = run("yes | head -c 1073741824");
            let after = peak_rss_kib();
            println!(
                "@@{}",
                serde_json::json!({
                    "stdout_bytes": result.stdout_bytes,
                    "stdout_len": result.stdout.len(),
                    "truncated": result.truncated,
                    "exit_code": result.exit_code,
                    "timed_out": result.timed_out,
                    "before_kib": before,
                    "after_kib": after,
                })
            );
        }
        other => panic!("unknown body {other}"),
    }
}

/// This process's peak resident memory so far (`VmHWM`), in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn a_gigabyte_of_output_finishes_with_bounded_memory_and_truncated() {
    let reports = child_process("gigabyte", false, &[]);
    let report = &reports[0];
    assert_eq!(report["stdout_bytes"], 1u64 << 30, "{report}");
    assert_eq!(report["truncated"], true);
    assert_eq!(report["exit_code"], 0);
    assert_eq!(report["timed_out"], false);
    assert!(
        report["stdout_len"].as_u64().unwrap() < 300 * 1024,
        "{report}"
    );
    let grew = report["after_kib"].as_u64().unwrap() - report["before_kib"].as_u64().unwrap();
    // Two streams of 256 KiB are kept; anything near the output's size would be a leak.
    assert!(grew < 32 * 1024, "the peak grew by {grew} KiB: {report}");
}

#[test]
fn yes_piped_to_head_ends_when_head_has_its_lines() {
    let result = run("yes | head -n 3");
    assert_eq!(result.stdout, "y\ny\ny\n");
    assert_eq!(result.exit_code, Some(0));
    assert!(!result.timed_out);
}

#[test]
fn a_command_reading_its_closed_stdin_sees_the_end_at_once() {
    let result = run("read line; echo \"read=$? line=$line\"; head -c 10; wc -c");
    assert_eq!(result.stdout, "read=1 line=\n0\n");
    assert!(!result.timed_out);
}

#[test]
fn colours_and_redrawn_lines_are_cleaned_and_the_header_counts_raw_bytes() {
    let raw = "\x1b[1;32mok\x1b[0m\n 10%\r 50%\r100%\r\n\x1b]0;title\x07end\n";
    let result = run(&format!("printf '%s' '{raw}'"));
    assert_eq!(result.stdout, "ok\n100%\nend\n");
    assert_eq!(result.stdout_bytes, raw.len() as u64);
}

#[test]
fn a_calls_timeout_secs_shortens_the_time_limit() {
    let args = ShellArgs {
        command: "sleep 5; echo slept".into(),
        cwd: None,
        timeout_secs: Some(1),
    };
    let result = shell(&args, &ShellOptions::default()).unwrap();
    assert!(result.timed_out, "{result:?}");
    assert_eq!(result.stdout, "");
    let args = ShellArgs {
        timeout_secs: Some(300),
        ..args
    };
    let options = ShellOptions {
        timeout: Duration::from_millis(500),
        ..ShellOptions::default()
    };
    assert!(shell(&args, &options).unwrap().timed_out);
}

#[test]
fn a_command_gives_its_output_and_exit_code() {
    let result = run("echo out; echo err >&2; exit 3");
    assert_eq!(result.stdout, "out\n");
    assert_eq!(result.stderr, "err\n");
    assert_eq!(result.exit_code, Some(3));
    assert!(!result.timed_out && !result.truncated);
}

#[test]
fn it_runs_in_bash_when_there_is_bash() {
    let result = run("echo ${BASH_VERSION:+bash}");
    assert_eq!(result.stdout, "bash\n");
}

#[test]
fn cwd_is_used_and_must_be_an_absolute_directory() {
    let dir = testkit::temp_dir();
    let cwd = dir.path().canonicalize().unwrap().display().to_string();
    let args = ShellArgs {
        command: "pwd".into(),
        cwd: Some(cwd.clone()),
        timeout_secs: None,
    };
    let result = shell(&args, &ShellOptions::default()).unwrap();
    assert_eq!(result.stdout.trim_end(), cwd);
    for bad in ["relative", "/no/such/folder", "/etc/passwd"] {
        let args = ShellArgs {
            command: "pwd".into(),
            cwd: Some(bad.into()),
            timeout_secs: None,
        };
        let error = shell(&args, &ShellOptions::default());
        assert!(
            matches!(error, Err(ShellError::BadCwd(ref d)) if d == bad),
            "{bad}"
        );
    }
}

#[test]
fn the_environment_is_scrubbed_to_the_allow_list() {
    let results = child_process("env", false, &[("BOXMAKER_SECRET_TOKEN", "hunter2")]);
    let stdout = results[0]["stdout"].as_str().unwrap();
    assert!(!stdout.contains("hunter2"), "{stdout}");
    let names: Vec<&str> = stdout.lines().filter_map(|l| l.split('=').next()).collect();
    for name in &names {
        let allowed = tools::shell::PASSED_ENV.contains(name)
            || tools::shell::FIXED_ENV.iter().any(|(n, _)| n == name)
            || tools::shell::GIT_ENV.iter().any(|(n, _)| n == name)
            || ["PWD", "SHLVL", "_", "OLDPWD"].contains(name);
        assert!(allowed, "{name} leaked into the environment");
    }
    assert!(stdout.contains("TERM=dumb"));
    assert!(stdout.contains("GIT_CONFIG_KEY_0=core.fsmonitor"));
}

#[test]
fn everything_a_command_started_is_killed_at_the_time_limit() {
    for contain in [true, false] {
        let dir = testkit::temp_dir();
        let marker = dir.path().join("survived");
        let options = ShellOptions {
            timeout: Duration::from_millis(300),
            contain,
            ..ShellOptions::default()
        };
        let started = Instant::now();
        let command = format!("(sleep 1; touch {}) & sleep 30", marker.display());
        let result = shell(
            &ShellArgs {
                command,
                cwd: None,
                timeout_secs: None,
            },
            &options,
        )
        .unwrap();
        assert!(result.timed_out);
        assert_eq!(result.exit_code, None);
        assert_eq!(result.signal, Some(9));
        assert!(started.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(1500));
        assert!(!marker.exists(), "a background child outlived the call");
    }
}

#[test]
fn background_children_do_not_outlive_a_command_that_exits() {
    for options in [ShellOptions::default(), uncontained()] {
        let dir = testkit::temp_dir();
        let marker = dir.path().join("survived");
        let command = format!("(sleep 1; touch {}) & echo started", marker.display());
        let result = run_with(&command, &options);
        assert_eq!(result.stdout, "started\n");
        assert_eq!(result.exit_code, Some(0));
        std::thread::sleep(Duration::from_millis(1500));
        assert!(!marker.exists(), "a background child outlived the call");
    }
}

/// Runs `command` with `{marker}` replaced, waits three seconds, and says whether the marker
/// appeared.
fn leaves_a_survivor(command: &str) -> bool {
    let dir = testkit::temp_dir();
    let marker = dir.path().join("survived");
    let result = run(&command.replace("{marker}", &marker.display().to_string()));
    assert_eq!(result.exit_code, Some(0), "{}", result.stderr);
    assert_eq!(result.containment, Containment::PidNamespace);
    std::thread::sleep(Duration::from_secs(3));
    marker.exists()
}

#[test]
fn a_setsid_child_does_not_outlive_the_call() {
    assert!(!leaves_a_survivor(
        "setsid sh -c 'sleep 2; touch {marker}' & echo started"
    ));
}

#[test]
fn a_double_forked_grandchild_does_not_outlive_the_call() {
    assert!(!leaves_a_survivor(
        "sh -c '(sleep 2; touch {marker}) &'; echo started"
    ));
}

#[test]
fn a_grandchild_holding_stdout_does_not_delay_the_return_past_the_deadline() {
    let one_second = |contain| ShellOptions {
        timeout: Duration::from_secs(1),
        contain,
        ..ShellOptions::default()
    };
    // Contained: the holder dies with the command, or with the box at the deadline.
    for command in ["(sleep 8) & echo started", "(sleep 8) & sleep 30"] {
        let started = Instant::now();
        let result = run_with(command, &one_second(true));
        assert!(started.elapsed() < Duration::from_secs(5), "{command}");
        assert_eq!(
            result.stdout,
            "started\n".repeat(usize::from(command.contains("echo")))
        );
    }
    // A process group cannot kill what left it: the readers give up instead.
    for command in [
        "setsid sleep 8 & echo $!",
        "setsid sleep 8 & echo $!; sleep 30",
    ] {
        let started = Instant::now();
        let result = run_with(command, &one_second(false));
        assert!(started.elapsed() < Duration::from_secs(5), "{command}");
        // End the escapee now rather than in eight seconds.
        Command::new("kill")
            .arg(result.stdout.trim())
            .status()
            .unwrap();
    }
}

#[test]
fn the_brokers_environment_is_not_readable_from_a_command() {
    let results = child_process("secret_holder", false, &[(SECRET, "hunter2")]);
    let result = &results[0];
    let stdout = result["stdout"].as_str().unwrap();
    let stderr = result["stderr"].as_str().unwrap();
    assert!(!stdout.contains("hunter2"), "{stdout}");
    // $PPID is the namespace's init (a non-dumpable fork of the broker); the broker's own pid
    // does not exist in the command's /proc.
    assert!(stderr.contains("Permission denied"), "{stderr}");
    assert!(stderr.contains("No such file or directory"), "{stderr}");
}

#[test]
fn without_a_pid_namespace_non_dumpability_still_hides_the_brokers_environment() {
    let hidden = child_process("secret_holder_uncontained", true, &[(SECRET, "hunter2")]);
    assert!(!hidden[0]["stdout"].as_str().unwrap().contains("hunter2"));
    assert!(
        hidden[0]["stderr"]
            .as_str()
            .unwrap()
            .contains("Permission denied")
    );
    // The control: a dumpable broker of the same user is readable.
    let shown = child_process(
        "secret_holder_dumpable_uncontained",
        true,
        &[(SECRET, "hunter2")],
    );
    assert!(shown[0]["stdout"].as_str().unwrap().contains("hunter2"));
}

#[test]
fn the_command_sees_only_its_own_processes() {
    let result = run("echo $$ $PPID; ls /proc | grep -c '^[0-9]'");
    let lines: Vec<&str> = result.stdout.lines().collect();
    assert_eq!(lines[0], "2 1", "the command is 2, its init 1");
    let count: u32 = lines[1].parse().unwrap();
    assert!(count <= 4, "init, bash, ls and grep at most: {count}");
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
    for options in [ShellOptions::default(), uncontained()] {
        let result = run_with("grep -E '^(Cap|NoNewPrivs)' /proc/self/status", &options);
        assert_no_privilege(&result.stdout);
    }
}

#[test]
fn proc_cannot_be_unmounted_and_nothing_can_be_mounted() {
    let dir = testkit::temp_dir();
    let command = format!(
        "umount /proc; echo umount=$?; mount -t tmpfs none {}; echo mount=$?; ls /proc/1 >/dev/null && echo own-proc",
        dir.path().display()
    );
    let result = run(&command);
    assert!(!result.stdout.contains("umount=0"), "{}", result.stdout);
    assert!(!result.stdout.contains("mount=0"), "{}", result.stdout);
    assert!(result.stdout.contains("own-proc"), "{}", result.stdout);
}

#[test]
fn the_result_names_the_containment_that_applied() {
    let contained = serde_json::to_value(run("true")).unwrap();
    assert_eq!(contained["containment"], "pid_namespace");
    let uncontained = serde_json::to_value(run_with("true", &uncontained())).unwrap();
    assert_eq!(uncontained["containment"], "process_group");
}

#[test]
fn an_owner_who_is_not_root_gets_a_pid_namespace_inside_a_user_namespace() {
    let results = child_process("as_nobody", true, &[]);
    let result = &results[0];
    assert_eq!(result["containment"], "pid_namespace");
    let stdout = result["stdout"].as_str().unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "65534");
    assert_eq!(
        lines[1].split_whitespace().collect::<Vec<_>>(),
        ["65534", "65534", "1"]
    );
    assert!(lines[2].parse::<u32>().unwrap() <= 4, "{stdout}");
    assert_no_privilege(&lines[3..].join("\n"));
}

#[test]
fn long_output_keeps_the_first_64_kib_and_the_last_192_kib() {
    let result = run("head -c 1000000 /dev/zero | tr '\\0' a; echo; echo END");
    assert_eq!(result.stdout_bytes, 1_000_005);
    assert!(result.truncated);
    assert!(result.stdout.starts_with(&"a".repeat(65536)));
    assert!(result.stdout.ends_with("aaaa\nEND\n"));
    let marker = format!("\n[... {} bytes cut ...]\n", 1_000_005 - 65536 - 196608);
    assert!(result.stdout.contains(&marker));
    assert_eq!(result.stdout.len(), 65536 + 196608 + marker.len());
}

#[test]
fn a_command_killed_by_a_signal_reports_it() {
    let result = run("kill -TERM $$");
    assert_eq!(result.exit_code, None);
    assert_eq!(result.signal, Some(15));
}

#[test]
fn an_empty_command_or_a_nul_byte_is_refused() {
    let options = ShellOptions::default();
    let empty = ShellArgs {
        command: "  ".into(),
        cwd: None,
        timeout_secs: None,
    };
    assert!(matches!(shell(&empty, &options), Err(ShellError::Empty)));
    let nul = ShellArgs {
        command: "a\0b".into(),
        cwd: None,
        timeout_secs: None,
    };
    assert!(matches!(shell(&nul, &options), Err(ShellError::Nul)));
}

#[test]
fn stdin_is_empty() {
    let result = run("cat; echo done");
    assert_eq!(result.stdout, "done\n");
}

#[test]
fn unknown_argument_fields_are_refused() {
    let error = serde_json::from_str::<ShellArgs>(r#"{"command":"ls","timeout":5}"#)
        .expect_err("refused")
        .to_string();
    assert!(error.starts_with("unknown field `timeout`"), "{error}");
    assert!(serde_json::from_str::<ShellArgs>(r#"{"command":"ls"}"#).is_ok());
}

/// A repository whose own `.git/config` and hooks run `touch <marker>` on `git status` (the
/// file-system monitor) and on `git commit` (a pre-commit hook).
fn booby_trapped_repository(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let repo = dir.join("repo");
    let marker = dir.join("ran");
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .args(args)
            .current_dir(&repo)
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    std::fs::create_dir(&repo).unwrap();
    git(&["init", "-q"]);
    let trap = dir.join("trap.sh");
    std::fs::write(&trap, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    let hook = repo.join(".git/hooks/pre-commit");
    std::fs::copy(&trap, &hook).unwrap();
    use std::os::unix::fs::PermissionsExt;
    for file in [&trap, &hook] {
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    git(&["config", "core.fsmonitor", &trap.display().to_string()]);
    git(&["config", "user.email", "a@example.org"]);
    git(&["config", "user.name", "a"]);
    std::fs::write(repo.join("f"), "x").unwrap();
    (repo, marker)
}

#[test]
fn a_repositorys_fsmonitor_does_not_run_on_git_status() {
    let dir = testkit::temp_dir();
    let (repo, marker) = booby_trapped_repository(dir.path());
    let args = ShellArgs {
        command: "git status --short".into(),
        cwd: Some(repo.display().to_string()),
        timeout_secs: None,
    };
    let result = shell(&args, &ShellOptions::default()).unwrap();
    assert_eq!(result.exit_code, Some(0), "{}", result.stderr);
    assert_eq!(result.stdout, "?? f\n");
    assert!(!marker.exists(), "the repository's fsmonitor ran");
    // The control: the same git without GIT_ENV runs it.
    Command::new("git")
        .args(["status", "--short"])
        .current_dir(&repo)
        .output()
        .unwrap();
    assert!(marker.exists(), "the trap is not a trap");
}

#[test]
fn a_repositorys_hooks_do_not_run_on_git_commit() {
    let dir = testkit::temp_dir();
    let (repo, marker) = booby_trapped_repository(dir.path());
    let args = ShellArgs {
        command: "git add f && git commit -q -m one".into(),
        cwd: Some(repo.display().to_string()),
        timeout_secs: None,
    };
    let result = shell(&args, &ShellOptions::default()).unwrap();
    assert_eq!(result.exit_code, Some(0), "{}", result.stderr);
    assert!(!marker.exists(), "the repository's pre-commit hook ran");
    std::fs::write(repo.join("f"), "y").unwrap();
    Command::new("git")
        .args(["-c", "core.fsmonitor=false", "commit", "-q", "-am", "two"])
        .current_dir(&repo)
        .output()
        .unwrap();
    assert!(marker.exists(), "the trap is not a trap");
}
