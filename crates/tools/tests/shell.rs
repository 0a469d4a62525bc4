//! `shell` running real commands.

use std::time::{Duration, Instant};

use tools::shell::{ShellArgs, ShellError, ShellOptions, shell};

fn run(command: &str) -> tools::shell::ShellResult {
    shell(
        &ShellArgs {
            command: command.into(),
            cwd: None,
        },
        &ShellOptions::default(),
    )
    .unwrap()
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
    };
    let result = shell(&args, &ShellOptions::default()).unwrap();
    assert_eq!(result.stdout.trim_end(), cwd);
    for bad in ["relative", "/no/such/folder", "/etc/passwd"] {
        let args = ShellArgs {
            command: "pwd".into(),
            cwd: Some(bad.into()),
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
    // SAFETY: no other test of this binary reads the environment while this one sets it.
    unsafe { std::env::set_var("BOXMAKER_SECRET_TOKEN", "hunter2") };
    let result = run("env");
    assert!(!result.stdout.contains("hunter2"), "{}", result.stdout);
    let names: Vec<&str> = result
        .stdout
        .lines()
        .filter_map(|l| l.split('=').next())
        .collect();
    for name in &names {
        let allowed = tools::shell::PASSED_ENV.contains(name)
            || tools::shell::FIXED_ENV.iter().any(|(n, _)| n == name)
            || ["PWD", "SHLVL", "_", "OLDPWD"].contains(name);
        assert!(allowed, "{name} leaked into the environment");
    }
    assert!(result.stdout.contains("TERM=dumb"));
}

#[test]
fn the_whole_process_group_is_killed_at_the_time_limit() {
    let dir = testkit::temp_dir();
    let marker = dir.path().join("survived");
    let options = ShellOptions {
        timeout: Duration::from_millis(300),
        ..ShellOptions::default()
    };
    let started = Instant::now();
    let command = format!("(sleep 1; touch {}) & sleep 30", marker.display());
    let result = shell(&ShellArgs { command, cwd: None }, &options).unwrap();
    assert!(result.timed_out);
    assert_eq!(result.exit_code, None);
    assert_eq!(result.signal, Some(9));
    assert!(started.elapsed() < Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!marker.exists(), "a background child outlived the call");
}

#[test]
fn background_children_do_not_outlive_a_command_that_exits() {
    let dir = testkit::temp_dir();
    let marker = dir.path().join("survived");
    let command = format!("(sleep 1; touch {}) & echo started", marker.display());
    let result = run(&command);
    assert_eq!(result.stdout, "started\n");
    assert_eq!(result.exit_code, Some(0));
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!marker.exists(), "a background child outlived the call");
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
    };
    assert!(matches!(shell(&empty, &options), Err(ShellError::Empty)));
    let nul = ShellArgs {
        command: "a\0b".into(),
        cwd: None,
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
    assert!(serde_json::from_str::<ShellArgs>(r#"{"command":"ls","timeout":5}"#).is_err());
    assert!(serde_json::from_str::<ShellArgs>(r#"{"command":"ls"}"#).is_ok());
}
