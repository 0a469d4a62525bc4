//! The git tools on repositories made here with the real `git`: the repository guessed from
//! the folder asked for, never one above the granted folder, a booby-trapped repository whose
//! configured programs never run (and do run under plain git), and `git_diff`'s filters.
//! `git_clone` is `nettools`'.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tools::git::{
    GitContainment, GitDiffArgs, GitError, GitOptions, GitStatusArgs, git_diff, git_status,
};

/// Runs plain git (the owner's own, not a tool's) in `dir`, and panics if it fails.
fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A repository at `dir` with one commit of `a.txt` ("one\n").
fn repository(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.email", "test@example.com"]);
    git(dir, &["config", "user.name", "Test"]);
    std::fs::write(dir.join("a.txt"), "one\n").unwrap();
    git(dir, &["add", "a.txt"]);
    git(dir, &["commit", "-q", "-m", "first"]);
}

/// A resolved temporary folder.
fn temp() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().canonicalize().unwrap();
    (dir, path)
}

fn status(path: &Path, root: &Path) -> Result<tools::git::GitResult, GitError> {
    git_status(
        &GitStatusArgs {
            path: path.display().to_string(),
        },
        &GitOptions::new(root),
    )
}

#[test]
fn git_status_finds_the_repository_from_a_folder_inside_it_and_merges_its_output() {
    let (_keep, root) = temp();
    repository(&root);
    std::fs::create_dir_all(root.join("src/deep")).unwrap();
    std::fs::write(root.join("src/new.rs"), "fn main() {}\n").unwrap();
    std::fs::write(root.join("a.txt"), "two\n").unwrap();
    let result = status(&root.join("src/deep"), &root).unwrap();
    assert_eq!(result.repository, root.display().to_string());
    assert_eq!(result.exit_code, Some(0), "{}", result.output);
    assert!(
        result.output.contains("On branch main"),
        "{}",
        result.output
    );
    assert!(
        result.output.contains("modified:   a.txt"),
        "{}",
        result.output
    );
    assert!(result.output.contains("src/"), "{}", result.output);
    assert_eq!(result.containment, tools::shell::Containment::PidNamespace);
}

#[test]
fn the_one_repository_below_the_folder_asked_for_is_used_and_several_are_named() {
    let (_keep, root) = temp();
    repository(&root.join("app"));
    std::fs::create_dir_all(root.join("notes")).unwrap();
    let result = status(&root, &root).unwrap();
    assert_eq!(result.repository, root.join("app").display().to_string());
    assert!(
        result.output.contains("nothing to commit"),
        "{}",
        result.output
    );
    repository(&root.join("lib"));
    let error = status(&root, &root).unwrap_err();
    assert!(matches!(error, GitError::Several { .. }), "{error}");
    assert!(error.to_string().contains("app, lib"), "{error}");
}

#[test]
fn a_repository_above_the_granted_folder_is_not_used() {
    let (_keep, top) = temp();
    repository(&top);
    let granted = top.join("granted");
    std::fs::create_dir_all(granted.join("inner")).unwrap();
    // Plain git finds the repository above; the tool, held to the granted folder, does not.
    assert!(
        git(&granted.join("inner"), &["rev-parse", "--show-toplevel"])
            .contains(&*top.to_string_lossy())
    );
    let error = status(&granted.join("inner"), &granted).unwrap_err();
    assert!(matches!(error, GitError::NoRepository { .. }), "{error}");
    let error = status(&top, &granted).unwrap_err();
    assert!(matches!(error, GitError::OutsideGrant { .. }), "{error}");
}

#[test]
fn a_work_tree_whose_git_folder_is_outside_the_granted_folder_is_refused() {
    let (_keep, top) = temp();
    let granted = top.join("granted");
    std::fs::create_dir_all(&granted).unwrap();
    let outside = top.join("outside.git");
    git(
        &top,
        &[
            "init",
            "-q",
            "--separate-git-dir",
            &outside.display().to_string(),
            &granted.display().to_string(),
        ],
    );
    assert!(granted.join(".git").is_file());
    let error = status(&granted, &granted).unwrap_err();
    assert!(
        matches!(
            error,
            GitError::RepositoryOutside {
                what: "git folder",
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn git_diff_shows_unstaged_or_staged_changes_limited_to_its_paths() {
    let (_keep, root) = temp();
    repository(&root);
    std::fs::write(root.join("b.txt"), "bee\n").unwrap();
    git(&root, &["add", "b.txt"]);
    git(&root, &["commit", "-q", "-m", "b"]);
    std::fs::write(root.join("a.txt"), "one\nmore\n").unwrap();
    std::fs::write(root.join("b.txt"), "bee\nsting\n").unwrap();
    let diff = |staged: Option<bool>, paths: Option<Vec<String>>| {
        git_diff(
            &GitDiffArgs {
                path: root.display().to_string(),
                staged,
                paths,
            },
            &GitOptions::new(&root),
        )
    };
    let all = diff(None, None).unwrap();
    assert!(
        all.output.contains("+more") && all.output.contains("+sting"),
        "{}",
        all.output
    );
    let only_b = diff(None, Some(vec!["b.txt".into()])).unwrap();
    assert!(only_b.output.contains("+sting"), "{}", only_b.output);
    assert!(!only_b.output.contains("+more"), "{}", only_b.output);
    assert!(diff(Some(true), None).unwrap().output.is_empty());
    git(&root, &["add", "a.txt"]);
    let staged = diff(Some(true), None).unwrap();
    assert!(
        staged.output.contains("+more") && !staged.output.contains("+sting"),
        "{}",
        staged.output
    );
    for bad in ["--output=/tmp/x", "/etc/passwd", "../up", ":(attr:x)a", ""] {
        let error = diff(None, Some(vec![bad.into()])).unwrap_err();
        assert!(matches!(error, GitError::BadFilter(_)), "{bad}: {error}");
    }
}

/// A repository whose configuration names a pager, an fsmonitor, a hook, an external diff, a
/// textconv and a filter driver, each a script that leaves a marker in `marks` when it runs.
fn booby_trapped(root: &Path, marks: &Path) {
    repository(root);
    std::fs::create_dir_all(marks).unwrap();
    let script = |name: &str, body: &str| -> String {
        let path = marks.join(format!("{name}.sh"));
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\ntouch '{}'\n{body}\n",
                marks.join(name).display()
            ),
        )
        .unwrap();
        Command::new("chmod")
            .arg("755")
            .arg(&path)
            .status()
            .unwrap();
        path.display().to_string()
    };
    let config = [
        ("core.pager", script("pager", "cat")),
        ("core.fsmonitor", script("fsmonitor", "exit 1")),
        ("diff.external", script("external", "exit 0")),
        ("diff.conv.textconv", script("textconv", "cat \"$1\"")),
        ("filter.trap.clean", script("filter", "cat")),
    ];
    for (key, value) in &config {
        git(root, &["config", key, value]);
    }
    let hook = root.join(".git/hooks/post-index-change");
    std::fs::write(
        &hook,
        format!("#!/bin/sh\ntouch '{}'\n", marks.join("hook").display()),
    )
    .unwrap();
    Command::new("chmod")
        .arg("755")
        .arg(&hook)
        .status()
        .unwrap();
    std::fs::write(
        root.join(".git/info/attributes"),
        "*.txt diff=conv filter=trap\n",
    )
    .unwrap();
    // A change whose stat differs from the index (git must read the file to compare).
    std::thread::sleep(Duration::from_millis(1100));
    std::fs::write(root.join("a.txt"), "one\nchanged\n").unwrap();
}

const TRAPS: [&str; 6] = [
    "pager",
    "fsmonitor",
    "hook",
    "external",
    "textconv",
    "filter",
];

fn fired(marks: &Path) -> Vec<&'static str> {
    TRAPS
        .into_iter()
        .filter(|t| marks.join(t).exists())
        .collect()
}

#[test]
fn a_booby_trapped_repository_runs_none_of_its_programs_but_plain_git_runs_them_all() {
    let (_keep, top) = temp();
    let (root, marks) = (top.join("repo"), top.join("marks"));
    booby_trapped(&root, &marks);
    let options = GitOptions::new(&root);
    let path = root.display().to_string();
    let status = git_status(&GitStatusArgs { path: path.clone() }, &options).unwrap();
    assert!(
        status.output.contains("modified:   a.txt"),
        "{}",
        status.output
    );
    for staged in [None, Some(true)] {
        let diff = git_diff(
            &GitDiffArgs {
                path: path.clone(),
                staged,
                paths: None,
            },
            &options,
        )
        .unwrap();
        assert_eq!(diff.exit_code, Some(0), "{}", diff.output);
        if staged.is_none() {
            assert!(diff.output.contains("+changed"), "{}", diff.output);
        }
    }
    assert_eq!(
        fired(&marks),
        Vec::<&str>::new(),
        "a trap ran under the tools"
    );
    // The same repository under plain git runs every one of them, so the test can fail.
    git(&root, &["status"]);
    git(&root, &["diff"]);
    git(&root, &["diff", "--no-ext-diff"]);
    let pager = Command::new("script")
        .args(["-qec", "git log", "/dev/null"])
        .current_dir(&root)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(pager.status.success());
    assert_eq!(
        fired(&marks),
        TRAPS.to_vec(),
        "plain git did not run every trap"
    );
}

#[test]
fn git_status_runs_in_a_box_holding_only_the_granted_folder() {
    let (_keep, root) = temp();
    repository(&root);
    std::fs::write(root.join("a.txt"), "two\n").unwrap();
    let mut options = GitOptions::new(&root);
    options.walls = GitContainment::Boxed(Box::new(sandbox::Policy {
        read_only: vec![root.clone()],
        ..sandbox::Policy::default()
    }));
    let result = git_status(
        &GitStatusArgs {
            path: root.display().to_string(),
        },
        &options,
    )
    .unwrap();
    assert_eq!(result.exit_code, Some(0), "{}", result.output);
    assert!(
        result.output.contains("modified:   a.txt"),
        "{}",
        result.output
    );
    assert_eq!(result.containment, tools::shell::Containment::Bubblewrap);
}
