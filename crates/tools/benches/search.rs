//! The coding tools against `rg` and `fd`, through the tool functions: the median of N runs
//! each, and the ratio (ours / theirs; at most 1.0 is the target).
//!
//! `scripts/bench-corpus` sets the issue's corpus up (Debian's `linux-source-6.1` unpacked in
//! `/var/tmp/boxmaker-bench`, `rg` 15 and `fd` 10 built with `cargo install --locked` in
//! `/opt/boxmaker-bench`) and prints the command:
//! `BOXMAKER_BENCH_TREE=/var/tmp/boxmaker-bench/linux-source-6.1 RG=/opt/boxmaker-bench/bin/rg
//! FD=/opt/boxmaker-bench/bin/fd cargo bench -p tools --bench search` (any large tree works). `BOXMAKER_BENCH_RUNS` sets N (default 20), `BOXMAKER_BENCH_THREADS`
//! the threads of both sides (default: the machine's cores), `RG` and `FD` the programs
//! (default `rg` and `fdfind`). The rows lift the tools' caps on matches and entries, so both
//! sides give the whole answer; one more lists with `list_files`' own cap of 1,000 entries.
//! Also times a capped read of a 100 MB file and of a 1 GiB one and one edit in a 50 MB file,
//! and the warm index's repeated calls against `fd` and `rg`; `BOXMAKER_BENCH_ONLY` (grep,
//! walk, warm or files) runs one group. Never part of CI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// The allocator of `brokerd`, whose box workers run these tools.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tools::fs::{
    EDIT_LIMIT, Edit, EditFileArgs, GrantedDir, READ_CAP, ReadFileArgs, edit_file, read_file,
};
use tools::search::{
    GlobArgs, GrepArgs, ListFilesArgs, OutputMode, SearchOptions, WalkLimits, WarmIndex, glob,
    grep, list_files,
};

fn median(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    runs[runs.len() / 2]
}

fn time(runs: usize, mut f: impl FnMut()) -> Duration {
    f(); // warm the page cache and the code
    median(
        (0..runs)
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed()
            })
            .collect(),
    )
}

/// The medians of `ours` and `theirs`, their runs interleaved so that a change in the machine's
/// load (shared with other builds) falls on both sides alike.
fn time_both(
    runs: usize,
    mut ours: impl FnMut(),
    mut theirs: impl FnMut(),
) -> (Duration, Duration) {
    ours();
    theirs();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let start = Instant::now();
        ours();
        a.push(start.elapsed());
        let start = Instant::now();
        theirs();
        b.push(start.elapsed());
    }
    (median(a), median(b))
}

fn program(program: &str, args: &[&str], root: &Path) -> impl FnMut() {
    let program = program.to_string();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let root = root.to_path_buf();
    move || {
        let status = Command::new(&program)
            .args(&args)
            .arg(&root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap_or_else(|e| panic!("{program}: {e}"));
        assert!(status.code().is_some_and(|c| c <= 1), "{program} failed");
    }
}

fn report(name: &str, ours: Duration, theirs: Option<(&str, Duration)>) {
    match theirs {
        Some((who, theirs)) => println!(
            "{name:<32} ours {:>9.1} ms   {who} {:>9.1} ms   ratio {:.2}",
            ours.as_secs_f64() * 1e3,
            theirs.as_secs_f64() * 1e3,
            ours.as_secs_f64() / theirs.as_secs_f64()
        ),
        None => println!("{name:<32} ours {:>9.1} ms", ours.as_secs_f64() * 1e3),
    }
}

fn main() {
    let tree = PathBuf::from(
        std::env::var("BOXMAKER_BENCH_TREE")
            .expect("set BOXMAKER_BENCH_TREE to a large source tree (the Linux kernel's)"),
    )
    .canonicalize()
    .unwrap();
    let runs: usize = std::env::var("BOXMAKER_BENCH_RUNS").map_or(20, |n| n.parse().unwrap());
    let threads: usize = std::env::var("BOXMAKER_BENCH_THREADS").map_or_else(
        |_| std::thread::available_parallelism().map_or(1, |n| n.get()),
        |n| n.parse().unwrap(),
    );
    let rg = std::env::var("RG").unwrap_or_else(|_| "rg".into());
    let fd = std::env::var("FD").unwrap_or_else(|_| "fdfind".into());
    let j = threads.to_string();
    println!("tree {} · {runs} runs · {threads} threads", tree.display());
    let dir = GrantedDir::open(&tree).unwrap();
    let options = SearchOptions {
        threads,
        max_lines: usize::MAX,
        max_entries: usize::MAX,
        ..SearchOptions::default()
    };
    let path = tree.display().to_string();
    // BOXMAKER_BENCH_ONLY=grep, walk or files runs one group (grep; glob and list_files;
    // read and edit).
    let only = std::env::var("BOXMAKER_BENCH_ONLY").ok();
    let runs_group = |group: &str| only.as_deref().is_none_or(|o| o == group);
    for (name, pattern, insensitive, flag) in [
        ("grep literal", "EXPORT_SYMBOL", false, None),
        ("grep regex", r"\w+_lock\(", false, None),
        ("grep case-insensitive", "mutex", true, Some("-i")),
    ] {
        if !runs_group("grep") {
            break;
        }
        let args = GrepArgs {
            pattern: pattern.into(),
            path: path.clone(),
            output_mode: OutputMode::Content,
            case_insensitive: insensitive,
            ..GrepArgs::default()
        };
        let mut rg_args = vec!["-n", "--no-heading", "-H", "-j", &j];
        rg_args.extend(flag);
        rg_args.push(pattern);
        let (ours, theirs) = time_both(
            runs,
            || {
                grep(&dir, &args, &options).unwrap();
            },
            program(&rg, &rg_args, &tree),
        );
        report(name, ours, Some(("rg", theirs)));
    }
    if runs_group("grep") {
        // The broker's walks prune its own folders (config, state, runtime, loopd's sessions),
        // mostly outside the walk: against the same grep without them, interleaved.
        let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
        let pruned = SearchOptions {
            prune: [
                ".config/boxmaker",
                ".local/state/boxmaker",
                ".local/state/boxmaker/sessions",
                ".cache/boxmaker",
            ]
            .iter()
            .map(|p| Path::new(&home).join(p))
            .chain([PathBuf::from("/run/user/0/boxmaker")])
            .collect(),
            ..options.clone()
        };
        let args = GrepArgs {
            pattern: "EXPORT_SYMBOL".into(),
            path: path.clone(),
            output_mode: OutputMode::Content,
            ..GrepArgs::default()
        };
        let (with, without) = time_both(
            runs,
            || {
                grep(&dir, &args, &pruned).unwrap();
            },
            || {
                grep(&dir, &args, &options).unwrap();
            },
        );
        report(
            "grep literal, 5 folders pruned",
            with,
            Some(("unpruned", without)),
        );
    }
    if runs_group("walk") {
        let globbed = GlobArgs {
            pattern: "**/*.c".into(),
            path: path.clone(),
        };
        let (ours, theirs) = time_both(
            runs,
            || {
                glob(&dir, &globbed, &options).unwrap();
            },
            program(&fd, &["-t", "f", "-e", "c", "-j", &j, "."], &tree),
        );
        report("glob **/*.c", ours, Some(("fd", theirs)));
        let listed = ListFilesArgs {
            path: path.clone(),
            recursive: true,
            max_depth: Some(64),
        };
        // Uncapped, then as an agent's call has it: the first 1,000 entries in path order.
        // The walk is whole either way; only an entry that may be listed has its size looked
        // up (a `statx`, which fd never makes), not each of the tree's.
        let capped = SearchOptions {
            threads,
            ..SearchOptions::default()
        };
        for (name, options) in [
            ("list_files recursive", &options),
            ("list_files recursive, capped", &capped),
        ] {
            let (ours, theirs) = time_both(
                runs,
                || {
                    list_files(&dir, &listed, options).unwrap();
                },
                program(&fd, &["-j", &j, "."], &tree),
            );
            report(name, ours, Some(("fd", theirs)));
        }
    }
    if runs_group("warm") {
        warm(&tree, runs, threads, &rg, &fd);
    }
    if !runs_group("files") {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let big = scratch.path().join("big.txt");
    let line = "the quick brown fox jumps over the lazy dog 0123456789\n";
    std::fs::write(&big, line.repeat(100_000_000 / line.len())).unwrap();
    let folder = GrantedDir::open(scratch.path()).unwrap();
    let read = ReadFileArgs {
        path: big.display().to_string(),
        ..ReadFileArgs::default()
    };
    let ours = time(runs, || {
        read_file(&folder, &read, READ_CAP).unwrap();
    });
    report("read 100 MB, 1 MiB cap", ours, None);
    drop(scratch);
    huge_read(runs);
    let scratch = tempfile::tempdir().unwrap();
    let folder = GrantedDir::open(scratch.path()).unwrap();
    let medium = scratch.path().join("medium.txt");
    let mut text = line.repeat(50_000_000 / line.len());
    text.push_str("MARKER\n");
    std::fs::write(&medium, text).unwrap();
    let mut flip = false;
    let ours = time(runs, || {
        let (old, new) = if flip {
            ("MARKED", "MARKER")
        } else {
            ("MARKER", "MARKED")
        };
        flip = !flip;
        edit_file(
            &folder,
            &EditFileArgs {
                path: medium.display().to_string(),
                edits: vec![Edit {
                    old_str: old.into(),
                    new_str: new.into(),
                    replace_all: false,
                }],
            },
        )
        .unwrap();
    });
    report("edit in 50 MB", ours, None);
}

/// A capped read of a 1 GiB text file (in `BOXMAKER_BENCH_SCRATCH`, default `/var/tmp`, deleted
/// after), against its floor: reading and hashing the first [`EDIT_LIMIT`] + 1 bytes, which read
/// before write needs of every read, interleaved.
fn huge_read(runs: usize) {
    let at = std::env::var("BOXMAKER_BENCH_SCRATCH").unwrap_or_else(|_| "/var/tmp".into());
    let scratch = tempfile::tempdir_in(at).unwrap();
    let huge = scratch.path().join("huge.txt");
    let line = "the quick brown fox jumps over the lazy dog 0123456789\n";
    {
        use std::io::Write;
        let block = line.repeat((1 << 20) / line.len());
        let mut file = std::io::BufWriter::new(std::fs::File::create(&huge).unwrap());
        let mut written = 0u64;
        while written < 1 << 30 {
            file.write_all(block.as_bytes()).unwrap();
            written += block.len() as u64;
        }
        file.flush().unwrap();
    }
    let folder = GrantedDir::open(scratch.path()).unwrap();
    let read = ReadFileArgs {
        path: huge.display().to_string(),
        ..ReadFileArgs::default()
    };
    let window = ReadFileArgs {
        offset: Some(1000),
        limit: Some(200),
        ..read.clone()
    };
    let (ours, floor) = time_both(
        runs,
        || {
            read_file(&folder, &read, READ_CAP).unwrap();
        },
        || {
            hash_prefix(&huge);
        },
    );
    report("read 1 GiB, 1 MiB cap", ours, Some(("hash", floor)));
    let ours = time(runs, || {
        read_file(&folder, &window, READ_CAP).unwrap();
    });
    report("read 1 GiB, lines 1000-1199", ours, None);
}

/// Reads and hashes the first [`EDIT_LIMIT`] + 1 bytes of `path`.
fn hash_prefix(path: &Path) {
    use sha2::Digest;
    use std::io::Read;
    let mut file = std::fs::File::open(path).unwrap().take(EDIT_LIMIT + 1);
    let mut hasher = sha2::Sha256::new();
    let mut buffer = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buffer).unwrap();
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    std::hint::black_box(hasher.finalize());
}

/// The warm index (a session's warm file worker keeps one): repeated calls on the same tree,
/// unchanged, against `fd` and `rg`, interleaved; the first call (which builds the index)
/// against `fd`; and the floor under a repeated `grep`: every indexed file read, nothing
/// matched.
fn warm(tree: &Path, runs: usize, threads: usize, rg: &str, fd: &str) {
    let j = threads.to_string();
    let dir = GrantedDir::open(tree).unwrap();
    let limits = WalkLimits::default();
    let options = SearchOptions {
        threads,
        max_lines: usize::MAX,
        max_entries: usize::MAX,
        ..limits.options().unwrap()
    };
    let capped = SearchOptions {
        threads,
        ..limits.options().unwrap()
    };
    let path = tree.display().to_string();
    let listed = ListFilesArgs {
        path: path.clone(),
        recursive: true,
        max_depth: Some(64),
    };
    // The first call: the walk, a `statx` per entry and a watch per folder.
    let built = time(runs.min(5), || {
        let mut index = WarmIndex::new();
        index.list_files(&dir, &listed, &limits, &options).unwrap();
    });
    let (_, theirs) = time_both(runs.min(5), || {}, program(fd, &["-j", &j, "."], tree));
    report("warm: first call (builds)", built, Some(("fd", theirs)));
    let mut index = WarmIndex::new();
    let globbed = GlobArgs {
        pattern: "**/*.rs".into(),
        path: path.clone(),
    };
    let (ours, theirs) = time_both(
        runs,
        || {
            index.glob(&dir, &globbed, &limits, &options).unwrap();
        },
        program(fd, &["-t", "f", "-e", "rs", "-j", &j, "."], tree),
    );
    report("warm: glob **/*.rs", ours, Some(("fd", theirs)));
    for (name, options) in [
        ("warm: list_files recursive", &options),
        ("warm: list_files, capped", &capped),
    ] {
        let (ours, theirs) = time_both(
            runs,
            || {
                index.list_files(&dir, &listed, &limits, options).unwrap();
            },
            program(fd, &["-j", &j, "."], tree),
        );
        report(name, ours, Some(("fd", theirs)));
    }
    for (name, pattern) in [
        ("warm: grep literal", "unsafe impl"),
        ("warm: grep regex", r"\w+_lock\("),
    ] {
        let args = GrepArgs {
            pattern: pattern.into(),
            path: path.clone(),
            output_mode: OutputMode::Content,
            ..GrepArgs::default()
        };
        let (ours, theirs) = time_both(
            runs,
            || {
                index.grep(&dir, &args, &limits, &options).unwrap();
            },
            program(rg, &["-n", "--no-heading", "-H", "-j", &j, pattern], tree),
        );
        report(name, ours, Some(("rg", theirs)));
    }
    // The floor: the files a grep searches, read whole on as many threads (no matching).
    let files: Vec<PathBuf> = index
        .glob(
            &dir,
            &GlobArgs {
                pattern: "**".into(),
                path: path.clone(),
            },
            &limits,
            &options,
        )
        .unwrap()
        .files
        .into_iter()
        .map(PathBuf::from)
        .collect();
    let (floor, theirs) = time_both(
        runs,
        || read_all(&files, threads),
        program(
            rg,
            &["-n", "--no-heading", "-H", "-j", &j, "unsafe impl"],
            tree,
        ),
    );
    report("floor: read every file", floor, Some(("rg", theirs)));
    let served = index.served;
    assert!(
        served >= (runs as u64) * 5,
        "the index answered {served} calls"
    );
    println!("{} files; the index answered {served} calls", files.len());
}

/// Reads every file of `files` on `threads` threads.
fn read_all(files: &[PathBuf], threads: usize) {
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                let mut buffer = Vec::new();
                loop {
                    let at = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(file) = files.get(at) else { break };
                    use std::io::Read;
                    buffer.clear();
                    if let Ok(mut f) = std::fs::File::open(file) {
                        f.read_to_end(&mut buffer).ok();
                    }
                    std::hint::black_box(&buffer);
                }
            });
        }
    });
}
