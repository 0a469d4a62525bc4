//! Finding the repository of a `git_status` or `git_diff` call, and running them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::{
    GitDiffArgs, GitError, GitOptions, GitResult, GitStatusArgs, MAX_DIFF_PATHS, Ran, Run,
    check_diff_path, exit_code, git_env, left, millis, run_git, signal,
};

/// A repository found for a call: its top folder and its git folders, each resolved and
/// inside the granted folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repository {
    /// The work tree's top folder.
    pub top: PathBuf,
    /// The git folder (`.git`, or a worktree's folder under the main one).
    pub git_dir: PathBuf,
    /// The common git folder (the same as `git_dir` but for a linked worktree).
    pub common_dir: PathBuf,
}

/// `git status` of the repository at (or above, or the one below) `args.path`.
pub fn git_status(args: &GitStatusArgs, options: &GitOptions) -> Result<GitResult, GitError> {
    let started = Instant::now();
    let repository = find_repository(Path::new(&args.path), options)?;
    let mut command: Vec<OsString> = base_args();
    command.extend(["status".into(), "--ignore-submodules=dirty".into()]);
    run_in(&repository, command, options, started)
}

/// `git diff --no-ext-diff --no-textconv` (with `--staged` when asked) of the repository at
/// (or above, or the one below) `args.path`, limited to `args.paths` when given.
pub fn git_diff(args: &GitDiffArgs, options: &GitOptions) -> Result<GitResult, GitError> {
    let started = Instant::now();
    let filters = args.paths.as_deref().unwrap_or_default();
    if filters.len() > MAX_DIFF_PATHS {
        return Err(GitError::BadFilter(format!(
            "{} path filters; give at most {MAX_DIFF_PATHS}",
            filters.len()
        )));
    }
    for filter in filters {
        check_diff_path(filter).map_err(GitError::BadFilter)?;
    }
    let repository = find_repository(Path::new(&args.path), options)?;
    let mut command: Vec<OsString> = base_args();
    command.extend([
        "diff".into(),
        "--no-ext-diff".into(),
        "--no-textconv".into(),
        "--no-color".into(),
        "--ignore-submodules=dirty".into(),
    ]);
    if args.staged == Some(true) {
        command.push("--staged".into());
    }
    command.push("--".into());
    command.extend(filters.iter().map(OsString::from));
    run_in(&repository, command, options, started)
}

/// What every git of these tools starts with: no pager, no optional locks.
fn base_args() -> Vec<OsString> {
    vec!["--no-pager".into(), "--no-optional-locks".into()]
}

/// Runs `command` in the repository's top folder with its filter drivers turned off.
fn run_in(
    repository: &Repository,
    command: Vec<OsString>,
    options: &GitOptions,
    started: Instant,
) -> Result<GitResult, GitError> {
    let mut settings = filters_off(repository, options, started)?;
    settings.sort();
    settings.dedup();
    let ran = run_git(
        command,
        &repository.top,
        git_env(ceiling(&options.root).as_deref(), &settings),
        run(options, started),
    )?;
    Ok(GitResult {
        repository: repository.top.display().to_string(),
        exit_code: exit_code(&ran),
        signal: signal(&ran),
        timed_out: ran.timed_out,
        output_bytes: ran.merged.total,
        truncated: ran.merged.cut() > 0,
        output: ran.merged.text(),
        duration_ms: millis(started),
        containment: ran.containment,
    })
}

fn run(options: &GitOptions, started: Instant) -> Run<'_> {
    Run {
        walls: &options.walls,
        timeout: left(started, options.timeout),
        head_bytes: options.head_bytes,
        tail_bytes: options.tail_bytes,
        on_start: None,
    }
}

/// `GIT_CEILING_DIRECTORIES`: the granted folder's parent, so discovery reaches the granted
/// folder and never goes above it.
fn ceiling(root: &Path) -> Option<PathBuf> {
    root.parent().map(Path::to_path_buf)
}

/// Settings that turn off every filter driver the repository's configuration names
/// (`filter.<name>.clean`, `.smudge`, `.process` empty, `.required` false): `git status` and
/// `git diff` run a clean filter on a changed file, and no setting turns all filters off.
fn filters_off(
    repository: &Repository,
    options: &GitOptions,
    started: Instant,
) -> Result<Vec<(String, String)>, GitError> {
    let mut command = base_args();
    command.extend(
        [
            "config",
            "--null",
            "--name-only",
            "--get-regexp",
            r"^filter\..*\.(clean|smudge|process|required)$",
        ]
        .map(OsString::from),
    );
    let ran = run_git(
        command,
        &repository.top,
        git_env(ceiling(&options.root).as_deref(), &[]),
        run(options, started),
    )?;
    let mut settings = Vec::new();
    // Exit 1: no such key.
    for name in ran.stdout.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let name = String::from_utf8_lossy(name);
        let Some(driver) = name
            .strip_prefix("filter.")
            .and_then(|rest| rest.rsplit_once('.'))
            .map(|(driver, _)| driver.to_string())
        else {
            continue;
        };
        for (key, value) in [
            ("clean", ""),
            ("smudge", ""),
            ("process", ""),
            ("required", "false"),
        ] {
            settings.push((format!("filter.{driver}.{key}"), value.to_string()));
        }
    }
    Ok(settings)
}

/// The repository of a call on `path` under `options.root` (see the module docs of `git`).
pub fn find_repository(path: &Path, options: &GitOptions) -> Result<Repository, GitError> {
    let shown = || path.display().to_string();
    if !path.is_absolute() || !path.is_dir() {
        return Err(GitError::BadPath(shown()));
    }
    let root = std::fs::canonicalize(&options.root).map_err(|_| GitError::BadPath(shown()))?;
    let folder = std::fs::canonicalize(path).map_err(|_| GitError::BadPath(shown()))?;
    if !folder.starts_with(&root) {
        return Err(GitError::OutsideGrant {
            path: shown(),
            root: root.display().to_string(),
        });
    }
    let started = Instant::now();
    let found = match rev_parse(&folder, &root, options, started)? {
        Some(found) => found,
        None => {
            let below = repositories_below(&folder);
            match below.as_slice() {
                [] => {
                    return Err(GitError::NoRepository {
                        path: shown(),
                        root: root.display().to_string(),
                    });
                }
                [one] => rev_parse(one, &root, options, started)?.ok_or_else(|| {
                    GitError::NoRepository {
                        path: one.display().to_string(),
                        root: root.display().to_string(),
                    }
                })?,
                several => {
                    return Err(GitError::Several {
                        path: shown(),
                        names: several
                            .iter()
                            .filter_map(|p| p.file_name())
                            .map(|n| n.to_string_lossy().into_owned())
                            .collect::<Vec<_>>()
                            .join(", "),
                    });
                }
            }
        }
    };
    for (what, place) in [
        ("work tree", &found.top),
        ("git folder", &found.git_dir),
        ("common git folder", &found.common_dir),
    ] {
        if !place.starts_with(&root) {
            return Err(GitError::RepositoryOutside {
                what,
                place: place.display().to_string(),
                root: root.display().to_string(),
            });
        }
    }
    Ok(found)
}

/// The sub-folders of `folder` (not followed through links) that hold a `.git`, in name order.
fn repositories_below(folder: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .filter(|p| std::fs::symlink_metadata(p.join(".git")).is_ok())
        .collect();
    found.sort();
    found
}

/// Git's own discovery from `folder`: the repository, `None` when git finds none, or what git
/// said when it cannot read the one it found.
fn rev_parse(
    folder: &Path,
    root: &Path,
    options: &GitOptions,
    started: Instant,
) -> Result<Option<Repository>, GitError> {
    let mut command = base_args();
    command.extend(
        [
            "rev-parse",
            "--path-format=absolute",
            "--show-toplevel",
            "--git-dir",
            "--git-common-dir",
        ]
        .map(OsString::from),
    );
    let ran: Ran = run_git(
        command,
        folder,
        git_env(ceiling(root).as_deref(), &[]),
        run(options, started),
    )?;
    let said = || ran.merged.text().trim().to_string();
    if !ran.succeeded() {
        if said().contains("not a git repository") {
            return Ok(None);
        }
        return Err(GitError::Discovery {
            path: folder.display().to_string(),
            output: said(),
        });
    }
    let text = String::from_utf8_lossy(&ran.stdout);
    let lines: Vec<&str> = text.lines().collect();
    let resolved = |line: Option<&&str>| -> Result<PathBuf, GitError> {
        let line = line.ok_or_else(|| GitError::Discovery {
            path: folder.display().to_string(),
            output: said(),
        })?;
        std::fs::canonicalize(line).map_err(|e| GitError::Discovery {
            path: folder.display().to_string(),
            output: format!("{line}: {e}"),
        })
    };
    Ok(Some(Repository {
        top: resolved(lines.first())?,
        git_dir: resolved(lines.get(1))?,
        common_dir: resolved(lines.get(2))?,
    }))
}
