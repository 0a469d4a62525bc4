//! `list_files`, `glob` and `grep` on a generated tree: against `rg` and `fdfind` (Debian's
//! ripgrep and fd-find, installed by `.ci/run`; missing, the test fails), and with protected
//! folders pruned.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use tools::fs::GrantedDir;
use tools::search::{
    GlobArgs, GrepArgs, ListFilesArgs, OutputMode, SearchError, SearchOptions, glob, grep,
    list_files,
};

/// A tree with ignore files at three depths, hidden files, a binary file, symbolic links to a
/// file and to a folder, and a name that is not UTF-8. The root is a git work tree (a `.git`
/// folder), so `.gitignore` applies as it does for `rg` and `fd`.
fn tree() -> tempfile::TempDir {
    let dir = testkit::temp_dir();
    let root = dir.path();
    let files: &[(&str, &[u8])] = &[
        (".git/HEAD", b"ref: refs/heads/main\n"),
        (".gitignore", b"*.log\nbuild/\n"),
        (".ignore", b"skipme.txt\n"),
        ("a.txt", b"needle one\nother line\nNEEDLE shouting\n"),
        ("b.log", b"needle in a log\n"),
        ("skipme.txt", b"needle skipped\n"),
        ("build/out.txt", b"needle built\n"),
        ("src/.gitignore", b"gen.rs\n"),
        (
            "src/lib.rs",
            b"fn needle() {}\n// no match\nfn other() {}\n",
        ),
        ("src/gen.rs", b"needle generated\n"),
        ("src/deep/mod/.gitignore", b"*.tmp\n"),
        ("src/deep/mod/c.rs", b"Needle\nneedle\nhay\n"),
        ("src/deep/mod/d.tmp", b"needle temporary\n"),
        (".hidden/h.txt", b"needle hidden\n"),
        (".h.txt", b"needle dot\n"),
        ("bin.dat", b"\0\x01needle\0binary\n"),
        ("docs/readme.md", b"a needle in docs\n"),
    ];
    for (name, bytes) in files {
        let path = root.join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, bytes).unwrap();
    }
    fs::write(
        root.join(OsStr::from_bytes(b"caf\xe9.txt")),
        b"needle latin1\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(root.join("a.txt"), root.join("link.txt")).unwrap();
    std::os::unix::fs::symlink(root.join("src"), root.join("srclink")).unwrap();
    dir
}

fn granted(root: &Path) -> GrantedDir {
    GrantedDir::open(root).unwrap()
}

/// The lines a reference program prints, each invalid UTF-8 sequence replaced.
fn run(program: &str, args: &[&OsStr]) -> BTreeSet<String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("{program} is needed for this test (apt-get install ripgrep fd-find): {e}")
        });
    assert!(
        output.status.success() || output.status.code() == Some(1),
        "{program} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

fn rg(root: &Path, extra: &[&str]) -> BTreeSet<String> {
    let mut args: Vec<&OsStr> = ["-n", "--no-heading", "-H", "--sort", "path"]
        .iter()
        .map(OsStr::new)
        .collect();
    args.extend(extra.iter().map(OsStr::new));
    args.push(OsStr::new("needle"));
    args.push(root.as_os_str());
    run("rg", &args)
}

fn ours(root: &Path, args: GrepArgs) -> BTreeSet<String> {
    let args = GrepArgs {
        pattern: "needle".into(),
        path: root.display().to_string(),
        ..args
    };
    let result = grep(&granted(root), &args, &SearchOptions::default()).unwrap();
    assert!(!result.truncated);
    result.output.lines().map(str::to_string).collect()
}

#[test]
fn grep_finds_the_same_lines_files_and_counts_as_rg() {
    let dir = tree();
    let root = dir.path();
    let content = GrepArgs {
        output_mode: OutputMode::Content,
        ..GrepArgs::default()
    };
    let found = ours(root, content.clone());
    assert!(
        found.iter().any(|l| l.ends_with("a.txt:1:needle one")),
        "{found:?}"
    );
    assert_eq!(found, rg(root, &[]));
    let insensitive = GrepArgs {
        case_insensitive: true,
        ..content.clone()
    };
    assert_eq!(ours(root, insensitive), rg(root, &["-i"]));
    assert_eq!(ours(root, GrepArgs::default()), rg(root, &["-l"]));
    let count = GrepArgs {
        output_mode: OutputMode::Count,
        ..GrepArgs::default()
    };
    assert_eq!(ours(root, count), rg(root, &["-c"]));
    let rust = GrepArgs {
        file_type: Some("rust".into()),
        ..content.clone()
    };
    assert_eq!(ours(root, rust), rg(root, &["-t", "rust"]));
    let md = GrepArgs {
        glob: Some("*.md".into()),
        ..content
    };
    assert_eq!(ours(root, md), rg(root, &["-g", "*.md"]));
}

#[test]
fn glob_and_list_files_find_the_same_files_as_fd() {
    let dir = tree();
    let root = dir.path();
    let root_arg = root.as_os_str();
    let all = run(
        "fdfind",
        &[OsStr::new("-t"), OsStr::new("f"), OsStr::new("."), root_arg],
    );
    let listed = list_files(
        &granted(root),
        &ListFilesArgs {
            path: root.display().to_string(),
            recursive: true,
            max_depth: None,
        },
        &SearchOptions::default(),
    )
    .unwrap();
    let files: BTreeSet<String> = listed
        .entries
        .iter()
        .filter(|e| !e.is_dir && !e.symlink)
        .map(|e| root.join(&e.path).display().to_string())
        .collect();
    assert!(
        files.iter().any(|f| f.ends_with("caf\u{FFFD}.txt")),
        "{files:?}"
    );
    assert_eq!(files, all);
    let rust = run(
        "fdfind",
        &[
            OsStr::new("-t"),
            OsStr::new("f"),
            OsStr::new("-e"),
            OsStr::new("rs"),
            OsStr::new("."),
            root_arg,
        ],
    );
    let globbed = glob(
        &granted(root),
        &GlobArgs {
            pattern: "**/*.rs".into(),
            path: root.display().to_string(),
        },
        &SearchOptions::default(),
    )
    .unwrap();
    assert_eq!(globbed.files.iter().cloned().collect::<BTreeSet<_>>(), rust);
}

#[test]
fn glob_lists_the_newest_file_first() {
    let dir = testkit::temp_dir();
    let root = dir.path();
    for (name, age) in [("old.rs", 300), ("new.rs", 0), ("mid.rs", 100)] {
        let path = root.join(name);
        fs::write(&path, "").unwrap();
        let when = std::time::SystemTime::now() - std::time::Duration::from_secs(age);
        fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(when)
            .unwrap();
    }
    let found = glob(
        &granted(root),
        &GlobArgs {
            pattern: "*.rs".into(),
            path: root.display().to_string(),
        },
        &SearchOptions::default(),
    )
    .unwrap();
    let names: Vec<&str> = found
        .files
        .iter()
        .map(|f| f.rsplit('/').next().unwrap())
        .collect();
    assert_eq!(names, ["new.rs", "mid.rs", "old.rs"]);
}

#[test]
fn a_marker_in_a_protected_folder_is_never_found() {
    let dir = testkit::temp_dir();
    let root = dir.path();
    let protected: Vec<PathBuf> = ["config/boxmaker", "state/ledger", "state/conversations"]
        .iter()
        .map(|p| root.join(p))
        .collect();
    for folder in &protected {
        fs::create_dir_all(folder).unwrap();
        fs::write(folder.join("marker.txt"), "needle marker\n").unwrap();
    }
    fs::write(root.join("open.txt"), "needle open\n").unwrap();
    let options = SearchOptions {
        prune: protected,
        ..SearchOptions::default()
    };
    let path = root.display().to_string();
    let grepped = grep(
        &granted(root),
        &GrepArgs {
            pattern: "needle".into(),
            path: path.clone(),
            output_mode: OutputMode::Content,
            ..GrepArgs::default()
        },
        &options,
    )
    .unwrap();
    assert_eq!(grepped.output, format!("{path}/open.txt:1:needle open"));
    let globbed = glob(
        &granted(root),
        &GlobArgs {
            pattern: "**/*.txt".into(),
            path: path.clone(),
        },
        &options,
    )
    .unwrap();
    assert_eq!(globbed.files, [format!("{path}/open.txt")]);
    let listed = list_files(
        &granted(root),
        &ListFilesArgs {
            path,
            recursive: true,
            max_depth: None,
        },
        &options,
    )
    .unwrap();
    assert!(
        listed.entries.iter().all(|e| !e.path.contains("marker")),
        "{listed:?}"
    );
}

#[test]
fn grep_shows_context_caps_lines_and_spans_lines_when_asked() {
    let dir = testkit::temp_dir();
    let root = dir.path();
    fs::write(
        root.join("f.txt"),
        format!("a\nb\nneedle {}\nc\nd\n", "x".repeat(20)),
    )
    .unwrap();
    let path = root.join("f.txt").display().to_string();
    let options = SearchOptions {
        max_line_chars: 10,
        ..SearchOptions::default()
    };
    let result = grep(
        &granted(root),
        &GrepArgs {
            pattern: "needle".into(),
            path: path.clone(),
            output_mode: OutputMode::Content,
            context: Some(1),
            ..GrepArgs::default()
        },
        &options,
    )
    .unwrap();
    assert_eq!(
        result.output,
        format!("{path}-2-b\n{path}:3:needle xxx…\n{path}-4-c")
    );
    assert!(result.truncated);
    let spanning = grep(
        &granted(root),
        &GrepArgs {
            pattern: "b.needle".into(),
            path: path.clone(),
            output_mode: OutputMode::Count,
            multiline: true,
            ..GrepArgs::default()
        },
        &SearchOptions::default(),
    )
    .unwrap();
    assert_eq!(spanning.output, format!("{path}:2"));
}

#[test]
fn a_bad_regex_is_an_error_quoting_the_engine() {
    let dir = testkit::temp_dir();
    let error = grep(
        &granted(dir.path()),
        &GrepArgs {
            pattern: "(unclosed".into(),
            path: dir.path().display().to_string(),
            ..GrepArgs::default()
        },
        &SearchOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(error, SearchError::BadPattern { .. }));
    let text = error.to_string();
    assert!(
        text.starts_with("the pattern \"(unclosed\" is not a valid regular expression: "),
        "{text}"
    );
    assert!(text.contains("unclosed group"), "{text}");
}

#[test]
fn the_line_cap_cuts_the_output_and_says_so() {
    let dir = testkit::temp_dir();
    let root = dir.path();
    fs::write(root.join("f.txt"), "needle\n".repeat(50)).unwrap();
    let options = SearchOptions {
        max_lines: 5,
        ..SearchOptions::default()
    };
    let result = grep(
        &granted(root),
        &GrepArgs {
            pattern: "needle".into(),
            path: root.display().to_string(),
            output_mode: OutputMode::Content,
            ..GrepArgs::default()
        },
        &options,
    )
    .unwrap();
    assert_eq!(result.output.lines().count(), 5);
    assert_eq!(result.matches, 50);
    assert!(result.truncated);
}

#[test]
fn list_files_walks_in_parallel_and_answers_the_same_sorted_first_entries_on_any_thread_count() {
    let dir = tree();
    let root = dir.path();
    for n in 0..40 {
        let folder = root.join(format!("many/d{}", n % 7));
        fs::create_dir_all(&folder).unwrap();
        fs::write(folder.join(format!("f{n:02}.txt")), b"x").unwrap();
    }
    let args = ListFilesArgs {
        path: root.display().to_string(),
        recursive: true,
        max_depth: None,
    };
    let listing = |threads: usize, max_entries: usize| {
        let options = SearchOptions {
            threads,
            max_entries,
            ..SearchOptions::default()
        };
        list_files(&granted(root), &args, &options).unwrap()
    };
    let one = listing(1, usize::MAX);
    let paths: Vec<&str> = one.entries.iter().map(|e| e.path.as_str()).collect();
    // The order of a depth-first walk with each folder's entries sorted.
    let mut sorted: Vec<PathBuf> = paths.iter().map(PathBuf::from).collect();
    sorted.sort();
    assert_eq!(
        paths,
        sorted
            .iter()
            .map(|p| p.to_str().unwrap())
            .collect::<Vec<_>>()
    );
    assert!(paths.contains(&"many/d3/f31.txt"), "{paths:?}");
    assert!(!one.truncated);
    for threads in [2, 4, 8] {
        assert_eq!(listing(threads, usize::MAX), one, "{threads} threads");
        let cut = listing(threads, 9);
        assert!(cut.truncated);
        assert_eq!(cut.entries, one.entries[..9], "{threads} threads, cap 9");
    }
    assert_eq!(
        listing(4, one.entries.len()),
        one,
        "a cap the listing fits in"
    );
    assert!(listing(4, 0).entries.is_empty() && listing(4, 0).truncated);
}
