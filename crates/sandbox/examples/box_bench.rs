//! What a box costs: median and p99 of `/bin/true` run (1) by plain fork/exec, (2) by bubblewrap
//! alone with the box's options and (3) with every one of them, its seccomp programs included,
//! (4) in a fresh box without the Landlock layer (`spawn_boxed`: bubblewrap plus cgroup,
//! rlimits, seccomp), (5) in a fresh box with it (through `sandbox-launcher`, the small launcher,
//! as brokerd's boxes go through `brokerd-launcher`), and (6) an in-process `read_file` in a
//! fresh box: this binary as the worker, as `brokerd box-file` is, reading a 4 KiB file of a
//! folder bound read-only, (7) `/bin/true` in a fresh box with a network (the proxy socket bound
//! in, the relay started and detached), (8) `/bin/true` through a warm box's command worker
//! (`spawn_command_worker`), built once before the runs; rows 2-7 interleaved, one call of
//! each in turn, and rows 1 and 8 the same way; then (9) 100 MB of output from a fresh box and
//! through the worker, and (10) bubblewrap alone and a fresh box again, each after 1 s idle
//! (`BOXMAKER_BENCH_IDLE_RUNS` each, default 10; 0 skips them), as a model's calls come.
//! Run as root: `cargo build --release -p sandbox && cargo run --release -p sandbox --example
//! box_bench [runs]` (without `sandbox-launcher` built, this binary is the launcher).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sandbox::{CommandSpec, Policy, bwrap_args, bwrap_command, find_bwrap, spawn_boxed};

fn main() {
    // In a box, the worker goes on in the launcher's process (no second exec).
    let args: Vec<String> = match sandbox::launch_if_asked() {
        Some(command) => command
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect(),
        None => std::env::args().collect(),
    };
    if args.get(1).map(String::as_str) == Some("read-file") {
        // The worker: read the file and print it, as `brokerd box-file` answers `read_file`.
        let text = std::fs::read_to_string(&args[2]).unwrap();
        print!("{text}");
        return;
    }
    let runs: usize = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(200);
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("a.txt");
    std::fs::write(&file, "x".repeat(4096)).unwrap();
    let exe = std::env::current_exe().unwrap();
    let small = exe
        .parent()
        .and_then(|examples| examples.parent())
        .map(|release| release.join("sandbox-launcher"))
        .filter(|p| p.is_file());
    let launcher = small.clone().unwrap_or_else(|| exe.clone());
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
    let landlocked = Policy {
        launcher: Some(launcher.clone()),
        ..policy.clone()
    };
    let reader = CommandSpec {
        program: exe.clone(),
        args: vec!["read-file".into(), file.clone().into()],
        env: Vec::new(),
        cwd: "/".into(),
    };
    let read_policy = Policy {
        read_only: vec![work.path().to_path_buf(), exe.clone()],
        launcher: Some(exe.clone()),
        ..Policy::default()
    };
    let proxy = work.path().join("proxy.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&proxy).unwrap();
    let networked = Policy {
        network: Some(sandbox::Network::new(&proxy)),
        ..landlocked.clone()
    };
    let bwrap = find_bwrap().expect("bubblewrap is not installed");
    let args = bwrap_args(&spec, &policy).unwrap();
    let mut worker = sandbox::spawn_command_worker(&landlocked).unwrap();
    // The rows of each comparison run interleaved, one call of each in turn, so that the
    // machine's drift (this VM's speed swings by 2x within minutes) falls on each row alike:
    // the boxes against bubblewrap first, then the warm worker against a plain fork/exec (two
    // light rows, kept apart from the boxes, whose teardown the kernel finishes in the
    // background).
    let boxes = measure_interleaved(
        runs,
        &mut [
            &mut || {
                let status = Command::new(&bwrap).args(&args).status().unwrap();
                assert!(status.success());
            },
            &mut || {
                // Every option the box gives bubblewrap, its seccomp programs included, which
                // bubblewrap reads from inherited descriptors.
                let (args, fds) = bwrap_command(&spec, &policy).unwrap();
                for fd in &fds {
                    rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty()).unwrap();
                }
                let status = Command::new(&bwrap).args(&args).status().unwrap();
                assert!(status.success());
            },
            &mut || run_box(&spec, &policy, 0),
            &mut || run_box(&spec, &landlocked, 0),
            &mut || run_box(&reader, &read_policy, 4096),
            &mut || run_box(&spec, &networked, 0),
        ],
    );
    let [alone, same, boxed, with_landlock, read, network] = &boxes[..] else {
        unreachable!("six rows")
    };
    let light = measure_interleaved(
        runs,
        &mut [
            &mut || {
                let status = Command::new("/bin/true")
                    .stdout(Stdio::null())
                    .status()
                    .unwrap();
                assert!(status.success());
            },
            &mut || run_warm(&mut worker, &spec, 10, 1 << 20, 0),
        ],
    );
    let [plain, warm] = &light[..] else {
        unreachable!("two rows")
    };
    // 100 MB of output, fresh and through the worker: what the extra pipe and frames cost.
    let flood = CommandSpec {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), "yes | head -c 100000000".into()],
        ..spec.clone()
    };
    let flood_runs = (runs / 20).max(3);
    let flood_fresh = measure(flood_runs, || run_box(&flood, &landlocked, 100_000_000));
    let flood_warm = measure(flood_runs, || {
        run_warm(&mut worker, &flood, 30, 1 << 30, 100_000_000);
    });
    // A model's calls come seconds apart, not back to back: each side again after 1 s idle,
    // interleaved (joining a cgroup can then wait for an RCU grace period; bwrap joins none).
    let idle_runs: usize = std::env::var("BOXMAKER_BENCH_IDLE_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10);
    let (mut idle_alone, mut idle_fresh) = (Vec::new(), Vec::new());
    for _ in 0..idle_runs {
        std::thread::sleep(Duration::from_secs(1));
        idle_alone.extend(measure_once(|| {
            let status = Command::new(&bwrap).args(&args).status().unwrap();
            assert!(status.success());
        }));
        std::thread::sleep(Duration::from_secs(1));
        idle_fresh.extend(measure_once(|| run_box(&spec, &landlocked, 0)));
    }
    idle_alone.sort_unstable();
    idle_fresh.sort_unstable();
    println!(
        "{runs} runs each, interleaved; median and p99 in ms; Landlock {}; launcher {}",
        sandbox::landlock_enforcement(),
        if small.is_some() {
            "sandbox-launcher"
        } else {
            "this binary (sandbox-launcher not built)"
        }
    );
    for (name, times) in [
        ("fork/exec /bin/true", plain.as_slice()),
        ("bwrap alone /bin/true", alone.as_slice()),
        ("bwrap, all the box's options", same.as_slice()),
        ("fresh box, no Landlock", boxed.as_slice()),
        ("fresh box /bin/true", with_landlock.as_slice()),
        ("fresh box read_file", read.as_slice()),
        ("fresh box with network", network.as_slice()),
        ("warm worker /bin/true", warm.as_slice()),
        ("fresh box, 100 MB out", flood_fresh.as_slice()),
        ("warm worker, 100 MB out", flood_warm.as_slice()),
    ] {
        println!(
            "{name:30} median {:7.2}  p99 {:7.2}",
            ms(percentile(times, 50)),
            ms(percentile(times, 99))
        );
    }
    let ratio = |t: &[Duration]| ms(percentile(t, 50)) / ms(percentile(same, 50));
    println!(
        "fresh box / bwrap with the same options (medians): {:.2}x (no Landlock {:.2}x, read_file {:.2}x); Landlock's cost: {:.2} ms",
        ratio(with_landlock),
        ratio(boxed),
        ratio(read),
        ms(percentile(with_landlock, 50)) - ms(percentile(boxed, 50))
    );
    println!(
        "against bwrap without the seccomp programs: {:.2}x; the programs' cost in bwrap: {:.2} ms",
        ms(percentile(with_landlock, 50)) / ms(percentile(alone, 50)),
        ms(percentile(same, 50)) - ms(percentile(alone, 50))
    );
    println!(
        "a network's cost (the socket bound, the relay's two execs): {:.2} ms",
        ms(percentile(network, 50)) - ms(percentile(with_landlock, 50))
    );
    if idle_runs > 0 {
        println!(
            "after 1 s idle ({idle_runs} runs each): bwrap alone median {:.2}, fresh box /bin/true median {:.2} ({:.2}x)",
            ms(percentile(&idle_alone, 50)),
            ms(percentile(&idle_fresh, 50)),
            ms(percentile(&idle_fresh, 50)) / ms(percentile(&idle_alone, 50))
        );
    }
    println!(
        "warm worker / fork/exec: median {:.2}x, p99 {:.2}x",
        ms(percentile(warm, 50)) / ms(percentile(plain, 50)),
        ms(percentile(warm, 99)) / ms(percentile(plain, 99))
    );
}

/// `spec` through the warm box's command worker, within `seconds` (of time and of CPU) and
/// `cap` bytes of output: it must end with 0 after `want` bytes of standard output.
fn run_warm(
    worker: &mut sandbox::WarmBox,
    spec: &CommandSpec,
    seconds: u64,
    cap: u64,
    want: usize,
) {
    let mut got = 0;
    let ended = worker
        .run_command(
            spec,
            Duration::from_secs(seconds),
            seconds,
            cap,
            &mut |b| got += b.len(),
            &mut |b| eprint!("{}", String::from_utf8_lossy(b)),
            &mut sandbox::Sent::default(),
        )
        .unwrap();
    assert_eq!(ended.exit, Some(sandbox::Exit::Code(0)));
    assert_eq!(got, want);
}

fn run_box(spec: &CommandSpec, policy: &Policy, want: usize) {
    let child = spawn_boxed(spec, policy, Duration::from_secs(10)).unwrap();
    let mut got = 0;
    let ended = child
        .finish(&mut |b| got += b.len(), &mut |b| {
            eprint!("{}", String::from_utf8_lossy(b))
        })
        .unwrap();
    assert_eq!(ended.exit, Some(sandbox::Exit::Code(0)));
    assert_eq!(got, want);
}

/// Each of `rows` once (a warm-up), then `runs` rounds of one call of each; the times of each
/// row, sorted.
fn measure_interleaved(runs: usize, rows: &mut [&mut dyn FnMut()]) -> Vec<Vec<Duration>> {
    for row in rows.iter_mut() {
        row();
    }
    let mut times = vec![Vec::with_capacity(runs); rows.len()];
    for _ in 0..runs {
        for (row, out) in rows.iter_mut().zip(&mut times) {
            let started = Instant::now();
            row();
            out.push(started.elapsed());
        }
    }
    for row in &mut times {
        row.sort_unstable();
    }
    times
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

/// One timed run, without the warm-up run `measure` makes.
fn measure_once(once: impl FnOnce()) -> Option<Duration> {
    let started = Instant::now();
    once();
    Some(started.elapsed())
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
