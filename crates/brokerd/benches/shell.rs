//! `shell` through the broker, beside the same command spawned directly, in one run: `true`,
//! and `git status` on a repository of 10,000 files; then the broker's memory peak while a
//! command prints 100 MB.
//!
//! `cargo bench -p brokerd --bench shell` (builds brokerd first). Each `shell` line is measured
//! three times: from a broker with `[sandbox] file_walls = false` (the command contained in its
//! own PID namespace but not boxed), one with a fresh bubblewrap box per call
//! (`warm_idle_ms = 0`) and one with the session's warm box (the default: the sandbox's command
//! worker forks each command), so the cost of the box and the cost of the broker show apart. The direct line is
//! `std::process::Command` running `bash -c` with the same script in the same folder. Where
//! Podman is installed, `true` is also measured through the optional Podman backend.
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

[[grant]]
id = "bench-git"
tool = "git_status"
paths = ["{work}"]
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

/// A broker measured: its name, the process, a client and the repository in its folder.
struct Side {
    name: &'static str,
    broker: BrokerProcess,
    client: AgentClient,
    id: u64,
    repo: std::path::PathBuf,
}

impl Side {
    fn start(name: &'static str, sandbox: &str) -> Side {
        let config = format!("idle_timeout_ms = 600000\nshell_ms = 300000\n[sandbox]\n{sandbox}");
        let broker = BrokerProcess::start(GRANTS, &config);
        let repo = make_repository(&broker.work);
        let client = AgentClient::open(&broker.socket(), None);
        Side {
            name,
            broker,
            client,
            id: 0,
            repo,
        }
    }

    fn call(&mut self, script: &str) {
        through(&mut self.client, &mut self.id, script, &self.repo);
    }
}

fn main() {
    let mut sides = [
        Side::start("broker, contained, no box:   ", "file_walls = false\n"),
        Side::start("broker, fresh bubblewrap box:", "warm_idle_ms = 0\n"),
        Side::start("broker, warm box (default):  ", ""),
    ];
    for (script, warm, runs) in [("true", 10, 200), ("git status", 3, 40)] {
        let (d50, d99) = measure(warm, runs, || direct(script, &sides[0].repo));
        println!("shell `{script}` ({runs} calls each):");
        println!("  spawned directly (bash -c):    median {d50:?}, p99 {d99:?}");
        for side in &mut sides {
            let (m50, m99) = measure(warm, runs, || side.call(script));
            println!(
                "  {} median {m50:?}, p99 {m99:?} ({:.2}x direct)",
                side.name,
                m50.as_secs_f64() / d50.as_secs_f64()
            );
        }
    }

    // The git_status tool (three gits a call: its filter settings, then status), on the same
    // repository: in fresh boxes, and forked by the session's command worker.
    for side in &mut sides[1..] {
        let repo = side.repo.clone();
        let (m50, m99) = measure(3, 40, || {
            side.id += 1;
            let args = serde_json::json!({ "path": repo }).to_string();
            let answer = side.client.call(side.id, "git_status", &args).unwrap();
            assert!(matches!(answer, ToolResponse::Result { .. }), "{answer:?}");
        });
        println!(
            "git_status tool ({}): median {m50:?}, p99 {m99:?}",
            side.name.trim_end_matches([' ', ':'])
        );
    }

    // The optional Podman backend, where Podman is installed: `true` in a fresh container of an
    // image made of this machine's bash and true (a local tarball, `podman import`).
    match brokerd::daemon::podman::find_podman(None) {
        Some(podman) => {
            let image = testkit::podman::Image::import(&podman, &["bash", "true"]);
            let mut side = Side::start(
                "broker, Podman container:    ",
                &format!("podman_image = {:?}\n", image.name),
            );
            let (d50, _) = measure(10, 200, || direct("true", &side.repo));
            let (m50, m99) = measure(3, 40, || side.call("true"));
            println!(
                "shell `true` (40 calls): {} median {m50:?}, p99 {m99:?} ({:.2}x direct)",
                side.name,
                m50.as_secs_f64() / d50.as_secs_f64()
            );
        }
        None => println!("Podman: not installed, not measured"),
    }

    let script = "yes | head -c 100000000";
    for side in &mut sides {
        let before = side.broker.peak_kib();
        let start = Instant::now();
        side.call(script);
        let elapsed = start.elapsed();
        let after = side.broker.peak_kib();
        println!(
            "100 MB of output ({}): {elapsed:?}; broker's peak RSS {before} KiB before, {after} KiB after (+{} KiB)",
            side.name.trim_end_matches([' ', ':']),
            after.saturating_sub(before)
        );
    }
}
