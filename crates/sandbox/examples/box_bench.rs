//! What a box costs: median and p99 of `/bin/true` run (1) by plain fork/exec, (2) by bubblewrap
//! alone with the box's options, (3) in a fresh box (`spawn_boxed`: bubblewrap plus cgroup,
//! rlimits, seccomp). Run as root: `cargo run --release -p sandbox --example box_bench [runs]`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sandbox::{CommandSpec, Policy, bwrap_args, find_bwrap, spawn_boxed};

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(200);
    let work = tempfile::tempdir().unwrap();
    let spec = CommandSpec {
        program: "/bin/true".into(),
        args: Vec::new(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        cwd: work.path().to_path_buf(),
    };
    let policy = Policy {
        read_write: vec![work.path().to_path_buf()],
        ..Policy::default()
    };
    let bwrap = find_bwrap().expect("bubblewrap is not installed");
    let args = bwrap_args(&spec, &policy).unwrap();
    let plain = measure(runs, || {
        let status = Command::new("/bin/true")
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
    });
    let alone = measure(runs, || {
        let status = Command::new(&bwrap).args(&args).status().unwrap();
        assert!(status.success());
    });
    let boxed = measure(runs, || {
        let child = spawn_boxed(&spec, &policy, Duration::from_secs(10)).unwrap();
        let ended = child.finish(&mut |_| {}, &mut |_| {}).unwrap();
        assert_eq!(ended.exit, Some(sandbox::Exit::Code(0)));
    });
    println!("{runs} runs of /bin/true; median and p99 in ms");
    for (name, times) in [
        ("fork/exec", &plain),
        ("bwrap alone", &alone),
        ("fresh box", &boxed),
    ] {
        println!(
            "{name:12} median {:7.2}  p99 {:7.2}",
            ms(percentile(times, 50)),
            ms(percentile(times, 99))
        );
    }
    println!(
        "fresh box / bwrap alone (medians): {:.2}x",
        ms(percentile(&boxed, 50)) / ms(percentile(&alone, 50))
    );
}

fn measure(runs: usize, mut once: impl FnMut()) -> Vec<Duration> {
    once();
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            once();
            started.elapsed()
        })
        .collect();
    times.sort_unstable();
    times
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
