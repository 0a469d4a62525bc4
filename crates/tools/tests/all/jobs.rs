//! Background jobs run as real contained processes: output read a piece at a time, a kill from
//! another thread, the lifetime, and a ring smaller than the output.

use std::time::{Duration, Instant};

use testkit::processes_named;
use tools::jobs::{JobOptions, JobState, start};
use tools::shell::ShellArgs;

fn options(lifetime: Duration, ring_bytes: usize) -> JobOptions {
    JobOptions {
        lifetime,
        ring_bytes,
        default_cwd: std::env::temp_dir(),
        policy: None,
        keep_alive: None,
    }
}

/// Tails `job` until `done` says its output is there (at most ten seconds).
fn tail_until(job: &tools::jobs::Job, done: impl Fn(&str) -> bool) -> String {
    let until = Instant::now() + Duration::from_secs(10);
    let mut seen = String::new();
    while Instant::now() < until {
        seen.push_str(&job.tail(1 << 20).output);
        if done(&seen) {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the job's output never came: {seen:?}");
}

#[test]
fn a_job_runs_after_start_returns_is_read_once_and_is_killed() {
    let args = ShellArgs::new("echo first; echo err >&2; sleep 100; echo never");
    let job = start(&args, &options(Duration::from_secs(60), 4096)).unwrap();
    assert_eq!(job.status().state, JobState::Running);
    let seen = tail_until(&job, |s| s.contains("first") && s.contains("err"));
    assert!(!seen.contains("never"), "{seen}");
    let again = job.tail(1024);
    assert_eq!((again.output.as_str(), again.bytes), ("", 0), "read once");
    let started = Instant::now();
    let (status, was_running) = job.kill(Duration::from_secs(5));
    assert!(was_running);
    assert_eq!(status.state, JobState::Killed);
    assert_eq!(status.exit_code, None);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let (after, was_running) = job.kill(Duration::from_secs(1));
    assert!(!was_running, "a second kill finds it ended");
    assert_eq!(after.state, JobState::Killed);
}

#[test]
fn a_job_that_exits_reports_its_code() {
    let job = start(
        &ShellArgs::new("echo done; exit 3"),
        &options(Duration::from_secs(60), 4096),
    )
    .unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while job.status().state == JobState::Running && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    let tail = job.tail(1024);
    assert_eq!(tail.output, "done\n");
    assert_eq!(tail.status.state, JobState::Exited);
    assert_eq!(tail.status.exit_code, Some(3));
}

#[test]
fn a_job_is_killed_at_its_lifetime() {
    let job = start(
        &ShellArgs::new("sleep 100"),
        &options(Duration::from_millis(300), 4096),
    )
    .unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while job.status().state == JobState::Running && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = job.status();
    assert_eq!(status.state, JobState::TimedOut);
    assert!(status.duration_ms < 5_000, "{status:?}");
}

#[test]
fn output_larger_than_the_ring_keeps_the_newest_bytes_and_counts_the_rest() {
    // 200,000 numbered lines of 7 bytes; the ring holds 1,000 bytes.
    let args = ShellArgs::new("seq 100000 299999; echo END");
    let job = start(&args, &options(Duration::from_secs(60), 1000)).unwrap();
    let until = Instant::now() + Duration::from_secs(20);
    while job.status().state == JobState::Running && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    let tail = job.tail(1 << 20);
    assert_eq!(tail.total_bytes, 200_000 * 7 + 4);
    assert_eq!(tail.bytes, 1000);
    assert_eq!(tail.dropped_bytes, tail.total_bytes - 1000);
    assert!(tail.output.ends_with("299999\nEND\n"), "{}", tail.output);
}

#[test]
fn dropping_a_job_kills_its_processes() {
    let marker = format!("job-drop-{}", std::process::id());
    // The marker is made by the shell, so that only the `sleep` it becomes carries it: a
    // script holding it literally matched too, until its `exec`, during which the count could
    // read 0 (seen once in a loaded full run).
    let args = ShellArgs::new(format!(
        "m=job-drop; exec -a \"$m-{}\" sleep 100",
        std::process::id()
    ));
    let job = start(&args, &options(Duration::from_secs(60), 4096)).unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while processes_named(&marker) == 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(processes_named(&marker), 1);
    drop(job);
    assert_eq!(processes_named(&marker), 0);
}

#[test]
fn what_a_job_keeps_alive_lives_until_its_box_has_ended() {
    let kept: std::sync::Arc<dyn std::any::Any + Send + Sync> = std::sync::Arc::new("proxy");
    let watch = std::sync::Arc::downgrade(&kept);
    let mut opts = options(Duration::from_secs(30), 4096);
    opts.keep_alive = Some(kept);
    let job = start(&ShellArgs::new("sleep 100"), &opts).unwrap();
    drop(opts);
    // Started and running: the caller's copies are gone, the job's thread still holds it.
    assert_eq!(job.status().state, JobState::Running);
    assert!(watch.upgrade().is_some());
    let (status, _) = job.kill(Duration::from_secs(10));
    assert_eq!(status.state, JobState::Killed);
    let until = Instant::now() + Duration::from_secs(10);
    while watch.upgrade().is_some() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(watch.upgrade().is_none(), "kept past the job's end");
}
