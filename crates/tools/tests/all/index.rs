//! The warm index against a fresh walk: after each of many seeded random changes (files
//! created, written, touched, renamed and deleted; folders made, moved and removed; links;
//! ignore files rewritten), every answer from the index is the one a fresh walk gives, with a
//! grant's exclusion among the limits.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use tools::fs::GrantedDir;
use tools::search::{
    Exclusion, GlobArgs, GrepArgs, ListFilesArgs, OutputMode, WalkLimits, WarmIndex, glob, grep,
    list_files,
};

/// A small seeded generator (xorshift64*), so a failure can be replayed from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        (!items.is_empty()).then(|| &items[self.below(items.len())])
    }
}

const NAMES: &[&str] = &[
    "a.txt", "b.rs", "c.log", ".hidden", "d.txt", "build", "src", "e.md", "skip.txt", "f",
];

/// Every path below `root` but `.git`, folders and files alike (ignored ones too).
fn everything(root: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (mut files, mut dirs) = (Vec::new(), vec![root.to_path_buf()]);
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.file_name().is_some_and(|n| n == ".git") {
                continue;
            }
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                dirs.push(path.clone());
                stack.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    dirs.sort();
    (files, dirs)
}

fn change(rng: &mut Rng, root: &Path) -> String {
    let (files, dirs) = everything(root);
    let dir = rng.pick(&dirs).unwrap().clone();
    let name = *rng.pick(NAMES).unwrap();
    let fresh = dir.join(format!("{name}{}", rng.below(5)));
    match rng.below(12) {
        0 | 1 => {
            let text = if rng.below(2) == 0 {
                "needle here\nhay\n"
            } else {
                "hay only\n"
            };
            fs::write(&fresh, text).ok();
            format!("create {}", fresh.display())
        }
        2 => {
            fs::create_dir(&fresh).ok();
            format!("mkdir {}", fresh.display())
        }
        3 => match rng.pick(&files) {
            Some(file) => {
                let mut text = fs::read(file).unwrap_or_default();
                text.extend_from_slice(b"needle appended\n");
                fs::write(file, text).ok();
                format!("append {}", file.display())
            }
            None => "nothing".into(),
        },
        4 => match rng.pick(&files) {
            Some(file) => {
                let when = SystemTime::now() - Duration::from_secs(rng.below(100_000) as u64);
                if let Ok(f) = fs::File::options().write(true).open(file) {
                    f.set_modified(when).ok();
                }
                format!("touch {}", file.display())
            }
            None => "nothing".into(),
        },
        5 | 6 => {
            let from = if rng.below(2) == 0 {
                rng.pick(&files).cloned()
            } else {
                rng.pick(dirs.get(1..).unwrap_or_default()).cloned()
            };
            match from {
                Some(from) if !fresh.starts_with(&from) => {
                    fs::rename(&from, &fresh).ok();
                    format!("rename {} {}", from.display(), fresh.display())
                }
                _ => "nothing".into(),
            }
        }
        7 => match rng.pick(&files) {
            Some(file) => {
                fs::remove_file(file).ok();
                format!("rm {}", file.display())
            }
            None => "nothing".into(),
        },
        8 => match rng.pick(dirs.get(1..).unwrap_or_default()) {
            Some(gone) => {
                fs::remove_dir_all(gone).ok();
                format!("rm -r {}", gone.display())
            }
            None => "nothing".into(),
        },
        9 => {
            let target = rng.pick(&dirs).unwrap().clone();
            std::os::unix::fs::symlink(&target, &fresh).ok();
            format!("ln -s {} {}", target.display(), fresh.display())
        }
        10 => {
            let rules = [
                "*.log\n",
                "build/\n*.md\n",
                "skip*\n",
                "!keep.log\n*.log\nsrc/f*\n",
            ];
            let file = dir.join(if rng.below(2) == 0 {
                ".gitignore"
            } else {
                ".ignore"
            });
            fs::write(&file, rng.pick(&rules).unwrap()).ok();
            format!("rules {}", file.display())
        }
        _ => {
            // Written in place and replaced by a rename, as edit_file writes.
            match rng.pick(&files) {
                Some(file) => {
                    let temp = file.with_extension("partial");
                    fs::write(&temp, "needle replaced\n").ok();
                    fs::rename(&temp, file).ok();
                    format!("replace {}", file.display())
                }
                None => "nothing".into(),
            }
        }
    }
}

/// Every walker's answer from the index and from a fresh walk, compared.
fn compare(index: &mut WarmIndex, root: &Path, limits: &WalkLimits, step: &str) -> u64 {
    let dir = GrantedDir::open(root).unwrap();
    let options = limits.options().unwrap();
    let path = root.display().to_string();
    let mut asked = 0;
    for max_depth in [Some(64), Some(2), None] {
        let args = ListFilesArgs {
            path: path.clone(),
            recursive: true,
            max_depth,
        };
        let warm = index.list_files(&dir, &args, limits, &options).unwrap();
        let walked = list_files(&dir, &args, &options).unwrap();
        assert_eq!(warm, walked, "list_files {max_depth:?} after {step}");
        asked += 1;
    }
    for pattern in ["**/*.txt", "*", "**/src/**", "**"] {
        let args = GlobArgs {
            pattern: pattern.into(),
            path: path.clone(),
        };
        let warm = index.glob(&dir, &args, limits, &options).unwrap();
        let walked = glob(&dir, &args, &options).unwrap();
        assert_eq!(warm, walked, "glob {pattern} after {step}");
        asked += 1;
    }
    for mode in [OutputMode::FilesWithMatches, OutputMode::Content] {
        let args = GrepArgs {
            pattern: "needle".into(),
            path: path.clone(),
            output_mode: mode,
            ..GrepArgs::default()
        };
        let warm = index.grep(&dir, &args, limits, &options).unwrap();
        let walked = grep(&dir, &args, &options).unwrap();
        assert_eq!(warm, walked, "grep {mode:?} after {step}");
        asked += 1;
    }
    asked
}

#[test]
fn the_index_answers_as_a_fresh_walk_after_random_changes() {
    for seed in [0x9E37_79B9_7F4A_7C15u64, 42, 7_777_777] {
        let scratch = testkit::temp_dir();
        let root = scratch.path().canonicalize().unwrap();
        fs::create_dir_all(root.join(".git")).unwrap();
        fs::create_dir_all(root.join("src/deep")).unwrap();
        fs::create_dir_all(root.join("secret")).unwrap();
        fs::write(root.join(".gitignore"), "*.log\n").unwrap();
        fs::write(root.join("src/a.txt"), "needle\n").unwrap();
        fs::write(root.join("secret/key.txt"), "needle secret\n").unwrap();
        // What a deny grant leaves out: one folder by path, and a glob.
        let limits = WalkLimits {
            excluded: vec![
                Exclusion::Below {
                    path: root.join("secret"),
                },
                Exclusion::Glob {
                    glob: format!("{}/**/d.txt*", root.display()),
                },
            ],
            ..WalkLimits::default()
        };
        let mut index = WarmIndex::new();
        let mut rng = Rng(seed);
        let mut asked = compare(&mut index, &root, &limits, "the start");
        for n in 0..150 {
            let step = format!("{n}: {}", change(&mut rng, &root));
            // Several changes between calls now and then, as edits between two searches.
            if rng.below(3) == 0 {
                continue;
            }
            asked += compare(&mut index, &root, &limits, &step);
        }
        // Every call but the shallow listings came from the index (built again where it had
        // to be), none from a walk instead.
        assert_eq!(index.served, asked, "seed {seed}");
        // Kept across calls: built again only after a rule file changed (about one change in
        // twelve) or a folder changed while first read.
        eprintln!("seed {seed}: {asked} calls, {} trees built", index.built);
        assert!(
            index.built * 4 < asked,
            "seed {seed}: {index:?} for {asked} calls"
        );
    }
}

#[test]
fn an_overflowed_queue_or_a_start_replaced_builds_the_index_again() {
    let scratch = testkit::temp_dir();
    let root = scratch.path().join("work");
    fs::create_dir_all(root.join("sub")).unwrap();
    fs::write(root.join("sub/a.txt"), "needle\n").unwrap();
    let limits = WalkLimits::default();
    let mut index = WarmIndex::new();
    assert_eq!(
        compare(&mut index, &root, &limits, "the start"),
        index.served
    );
    assert_eq!(index.built, 1);
    // More events than the kernel queues (fs.inotify.max_queued_events, 16,384 by default).
    let queued: usize = fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .map_or(16_384, |n| n.trim().parse().unwrap());
    for n in 0..queued / 2 + 10 {
        let path = root.join("sub").join(format!("f{n}.txt"));
        fs::write(&path, "x\n").unwrap();
    }
    compare(&mut index, &root, &limits, "an overflow");
    assert_eq!(index.built, 2, "{index:?}");
    // The start renamed away and another folder put in its place.
    fs::rename(&root, scratch.path().join("old")).unwrap();
    fs::create_dir_all(root.join("other")).unwrap();
    fs::write(root.join("other/b.txt"), "needle again\n").unwrap();
    compare(&mut index, &root, &limits, "the start replaced");
    assert_eq!(index.built, 3, "{index:?}");
    // The start gone: the same error as a walk's.
    fs::remove_dir_all(&root).unwrap();
    let dir = GrantedDir::open(scratch.path()).unwrap();
    let args = GlobArgs {
        pattern: "*".into(),
        path: root.display().to_string(),
    };
    let warm = index.glob(&dir, &args, &limits, &limits.options().unwrap());
    let walked = glob(&dir, &args, &limits.options().unwrap());
    assert_eq!(
        warm.unwrap_err().to_string(),
        walked.unwrap_err().to_string()
    );
}

#[test]
fn a_tree_the_index_cannot_hold_is_walked_and_answered_the_same() {
    let scratch = testkit::temp_dir();
    let root = scratch.path().canonicalize().unwrap();
    fs::create_dir_all(root.join("sub")).unwrap();
    fs::write(root.join("sub/a.txt"), "needle\n").unwrap();
    // Folders nested past PATH_MAX (made one below the other by descriptor): the walk cannot
    // read them by path and reports an error, which an index does not take for a tree it can
    // keep.
    let mut at = rustix::fs::open(
        root.join("sub"),
        rustix::fs::OFlags::DIRECTORY,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    let name = "d".repeat(200);
    for _ in 0..25 {
        rustix::fs::mkdirat(&at, name.as_str(), rustix::fs::Mode::from_raw_mode(0o755)).unwrap();
        at = rustix::fs::openat(
            &at,
            name.as_str(),
            rustix::fs::OFlags::DIRECTORY,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
    }
    let limits = WalkLimits::default();
    let mut index = WarmIndex::new();
    compare(&mut index, &root, &limits, "folders past PATH_MAX");
    assert_eq!((index.built, index.served), (0, 0), "{index:?}");
    // `rm` removes below PATH_MAX by descriptor, as the temporary folder's own removal cannot.
    let removed = std::process::Command::new("rm")
        .arg("-rf")
        .arg(&root)
        .status()
        .unwrap();
    assert!(removed.success());
}
