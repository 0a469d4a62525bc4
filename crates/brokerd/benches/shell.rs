//! `shell` through the broker, beside the same command spawned directly, in one run: `true`,
//! and `git status` on a repository of 10,000 files; then the broker's memory peak while a
//! command prints 100 MB.
//!
//! `cargo bench -p brokerd --bench shell` (builds brokerd first). Each `shell` line is measured
//! twice: from a broker with the box (a fresh bubblewrap box per call, the default) and from
//! one with `[sandbox] file_walls = false` (the command contained in its own PID namespace but
//! not boxed), so the cost of the box and the cost of the broker show apart. The direct line is
//! `std::process::Command` running `bash -c` with the same script in the same folder.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use proto::ToolResponse;
use testkit::{AgentClient, BrokerProcess};

const GRANTS: &str = r#"
[[grant]]
id = "bench"
tool = "shell"
paths = ["{work}"]
commands = ["true", "git status", "yes", "head"]
untrusted = false
on_untrusted = "allow"
"#;

const FILES: usize = 10_000;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(at).copied().unwrap_or_default()
}

/// A repository of [`FILES`] committed files in 100 folders, under `work/repo`.
fn make_repository(work: &Path) -> std::path::PathBuf {
    let repo = work.join("repo");
    for folder in 0..100 {
        let dir = repo.join(format!("d{folder:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        for file in 0..FILES / 100 {
            std::fs::write(
                dir.join(format!("f{file:03}.txt")),
                format!("{folder} {file}\n"),
            )
            .unwrap();
        }
    }
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .args(args)
            .current_dir(&repo)
            .env("GIT_AUTHOR_NAME", "bench")
            .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
            .env("GIT_COMMITTER_NAME", "bench")
            .env("GIT_COMMITTER_EMAIL", "bench@example.invalid")
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "ten thousand files"]);
    repo
}

/// Median and p99 of `runs` runs of `once`, after `warm` unmeasured ones.
fn measure(warm: usize, runs: usize, mut once: impl FnMut()) -> (Duration, Duration) {
    for _ in 0..warm {
        once();
    }
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            once();
            start.elapsed()
        })
        .collect();
    times.sort();
    (percentile(&times, 0.5), percentile(&times, 0.99))
}

fn direct(script: &str, cwd: &Path) {
    let status = Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(cwd)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "{script}");
}

/// One `shell` call, which must have run and exited 0.
fn through(client: &mut AgentClient, id: &mut u64, script: &str, cwd: &Path) {
    *id += 1;
    let args = serde_json::json!({ "command": script, "cwd": cwd, "timeout_secs": 300 });
    let answer = client.call(*id, "shell", &args.to_string()).unwrap();
    let ToolResponse::Result { content, .. } = &answer else {
        panic!("{script}: {answer:?}");
    };
    assert!(content.contains("\"exit_code\":0"), "{script}: {content}");
}

/// The broker's peak resident memory (`VmHWM`), in KiB.
fn peak_kib(broker: &BrokerProcess) -> u64 {
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", broker.pid().unwrap())).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn main() {
    let boxed = BrokerProcess::start(GRANTS, "idle_timeout_ms = 600000\nshell_ms = 300000\n");
    let unboxed = BrokerProcess::start(
        GRANTS,
        "idle_timeout_ms = 600000\nshell_ms = 300000\n[sandbox]\nfile_walls = false\n",
    );
    let repo = make_repository(&boxed.work);
    let unboxed_repo = make_repository(&unboxed.work);
    let mut boxed_client = AgentClient::open(&boxed.socket(), None);
    let mut unboxed_client = AgentClient::open(&unboxed.socket(), None);
    let mut id = 0;
    let mut unboxed_id = 0;

    for (script, warm, runs) in [("true", 10, 200), ("git status", 3, 40)] {
        let (d50, d99) = measure(warm, runs, || direct(script, &repo));
        let (u50, u99) = measure(warm, runs, || {
            through(&mut unboxed_client, &mut unboxed_id, script, &unboxed_repo)
        });
        let (b50, b99) = measure(warm, runs, || {
            through(&mut boxed_client, &mut id, script, &repo)
        });
        println!("shell `{script}` ({runs} calls each):");
        println!("  spawned directly (bash -c):    median {d50:?}, p99 {d99:?}");
        println!(
            "  broker, contained, no box:     median {u50:?}, p99 {u99:?} ({:.2}x direct)",
            u50.as_secs_f64() / d50.as_secs_f64()
        );
        println!(
            "  broker, fresh bubblewrap box:  median {b50:?}, p99 {b99:?} ({:.2}x direct)",
            b50.as_secs_f64() / d50.as_secs_f64()
        );
    }

    let script = "yes | head -c 100000000";
    for (name, broker, client, id, cwd) in [
        ("fresh box", &boxed, &mut boxed_client, &mut id, &repo),
        (
            "no box",
            &unboxed,
            &mut unboxed_client,
            &mut unboxed_id,
            &unboxed_repo,
        ),
    ] {
        let before = peak_kib(broker);
        let start = Instant::now();
        through(client, id, script, cwd);
        let elapsed = start.elapsed();
        let after = peak_kib(broker);
        println!(
            "100 MB of output ({name}): {elapsed:?}; broker's peak RSS {before} KiB before, {after} KiB after (+{} KiB)",
            after.saturating_sub(before)
        );
    }
}
