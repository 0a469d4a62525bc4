//! A call made ready for the grants: every path it names resolved (symbolic links and `..`,
//! as the kernel walks them), a `shell` call's `cwd` chosen and its script's write targets
//! found, each checked against boxmaker's own folders.

use std::path::{Path, PathBuf};

use proto::Timestamp;
use tools::shell::ShellArgs;

use super::{Call, Protected, Write, shell_covered, shell_dialect};
use crate::args::{CallReach, ToolArgs};
use crate::grants::Grant;
use crate::paths::resolve;
use crate::trusted::Reached;
use crate::{git, shell};

/// `args` with every path it names resolved (symbolic links and `..`), or why a path cannot be
/// used at all.
pub fn resolve_args(args: &ToolArgs) -> Result<ToolArgs, String> {
    let text = |p: PathBuf| p.to_string_lossy().into_owned();
    if args.tool().is_path_tool() {
        let mut args = args.clone();
        if let Some(path) = args.path_mut() {
            *path = text(absolute(path)?);
        }
        return Ok(args);
    }
    let mut args = args.clone();
    if let Some(a) = args.script_mut()
        && let Some(cwd) = &a.cwd
    {
        a.cwd = Some(text(absolute(cwd)?));
    }
    Ok(args)
}

fn absolute(path: &str) -> Result<PathBuf, String> {
    resolve(Path::new(path)).map_err(|e| e.to_string())
}

pub(super) fn named_paths(call: &Call) -> Vec<&Path> {
    let mut paths: Vec<&Path> = match call.args.script() {
        Some(a) => a.cwd.as_deref().map(Path::new).into_iter().collect(),
        None => call.args.path().map(Path::new).into_iter().collect(),
    };
    paths.extend(call.writes.iter().map(|w| w.path.as_path()));
    paths
}

/// The call with its paths resolved and what it writes, or why it cannot be decided
/// (`InvalidArguments`). A `shell` (or `bash_bg`) call without `cwd` runs in the first folder of
/// the first grant of its tool that could cover it, and says so in its arguments.
pub(super) fn prepare(
    args: &ToolArgs,
    grants: &[Grant],
    now: Timestamp,
    protected: &Protected,
    walls: shell::PathEnforcement,
) -> Result<Call, String> {
    let spelled = args.path().map(PathBuf::from);
    let mut args = resolve_args(args)?;
    let tool = args.tool();
    let dialect = match args.script() {
        Some(_) => shell_dialect(),
        None => shell::Dialect::Bash,
    };
    if let Some(a) = args.script_mut()
        && a.cwd.is_none()
    {
        a.cwd = grants
            .iter()
            .filter(|g| g.tool == tool && !g.deny && !g.expired(now))
            .filter(|g| g.commands.is_empty() || shell_covered(g, a, dialect, walls))
            .find_map(|g| g.paths.first())
            .map(|rule| rule.base().to_string_lossy().into_owned());
    }
    let (writes, unknown_writes) = match args.reach() {
        CallReach::Path { path, writes: true } => {
            (vec![write_at(spelled.as_deref(), path, protected)], None)
        }
        // A clone writes its destination (and below it, which the grant's paths cover too).
        CallReach::Clone { path, .. } => {
            (vec![write_at(spelled.as_deref(), path, protected)], None)
        }
        CallReach::Script(a) => match shell::write_targets_in(&a.command, dialect, walls) {
            Ok(targets) => (shell_writes(a, &targets, protected)?, None),
            Err(why) => (Vec::new(), Some(why.to_string())),
        },
        _ => (Vec::new(), None),
    };
    Ok(Call {
        args,
        writes,
        unknown_writes,
        dialect,
        walls,
    })
}

/// A write to `resolved`, spelled `spelled` by the call, with the trusted place it changes.
fn write_at(spelled: Option<&Path>, resolved: impl AsRef<Path>, protected: &Protected) -> Write {
    let path = resolved.as_ref().to_path_buf();
    let place = protected.places.place_of(spelled, &path);
    Write { path, place }
}

/// The places a `shell` script writes, resolved against its `cwd` (and `~` against the
/// owner's home); a place that cannot be resolved makes the call invalid.
fn shell_writes(
    args: &ShellArgs,
    targets: &[shell::WriteTarget],
    protected: &Protected,
) -> Result<Vec<Write>, String> {
    let cwd = PathBuf::from(args.cwd.as_deref().unwrap_or("/"));
    let spelled = |word: &str| -> Option<PathBuf> {
        if word == "~" || word.starts_with("~/") {
            let home = protected.home.as_ref()?;
            Some(home.join(word.trim_start_matches('~').trim_start_matches('/')))
        } else {
            Some(cwd.join(word))
        }
    };
    let place = |word: &str| -> Result<PathBuf, String> {
        let path = if word == "~" || word.starts_with("~/") {
            let home = protected
                .home
                .as_ref()
                .ok_or_else(|| format!("{word} names the home folder, which is not known here"))?;
            home.join(word.trim_start_matches('~').trim_start_matches('/'))
        } else if word.starts_with('~') {
            return Err(format!("{word} names another user's home folder"));
        } else {
            cwd.join(word)
        };
        resolve(&path).map_err(|e| format!("the command writes {word}: {e}"))
    };
    let mut writes = Vec::new();
    for target in targets {
        match target {
            shell::WriteTarget::Path(word) => {
                writes.push(write_at(spelled(word).as_deref(), place(word)?, protected))
            }
            shell::WriteTarget::GitConfig { scope } => {
                let (path, root) = match scope {
                    shell::GitConfigScope::Local | shell::GitConfigScope::Worktree => {
                        let git_dir = git::repository_git_dir(&cwd);
                        (git_dir.join("config"), git_dir)
                    }
                    shell::GitConfigScope::Global => {
                        let file = place("~/.gitconfig")?;
                        (file.clone(), file)
                    }
                    shell::GitConfigScope::System => {
                        let file = PathBuf::from("/etc/gitconfig");
                        (file.clone(), file)
                    }
                    shell::GitConfigScope::File(word) => {
                        let file = place(word)?;
                        (file.clone(), file)
                    }
                };
                writes.push(Write {
                    path,
                    place: Some(Reached {
                        place: root,
                        read_by: "git",
                    }),
                });
            }
        }
    }
    Ok(writes)
}
