//! The file tools in the box: `read_file`, `write_file`, `edit_file` and the walkers
//! (`list_files`, `glob`, `grep`) in brokerd's file worker (`brokerd-files box-file`, or
//! `brokerd box-file` without it), in the session's warm box for that folder and access or a
//! fresh one per call.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::super::runner::{Outcome, RunContext, Runner};
use super::super::worker::{self, REQUEST, Request};
use super::{SandboxedRunner, box_error, cores, granted};
use policy::decide::Allowed;

impl SandboxedRunner {
    /// Runs a file tool in brokerd's file worker, in the session's warm box or a fresh one.
    pub(super) fn file_in_box(&self, allowed: &Allowed, context: &RunContext) -> Outcome {
        let folders = granted(allowed);
        let Some(base) = folders.first().cloned() else {
            return Outcome::Failed(
                "the decision names no granted folder for the file tool".to_string(),
            );
        };
        let Some((tool, writes)) = worker::file_call(&allowed.args) else {
            return self.direct.run(allowed, context);
        };
        // Only a call on the grant's base itself can be under a grant on one file: a target
        // below the base makes it a folder, with no look on the call's path.
        if allowed
            .args
            .path()
            .is_some_and(|path| Path::new(path) == base)
            && !is_folder(&base)
        {
            return self.one_file(allowed, context);
        }
        let walks = tool.walks();
        let (mut parents_ignores, mut walk) = (Vec::new(), None);
        if walks {
            let mut limits =
                crate::files::walk_limits(allowed, &context.grants, &context.protected);
            (parents_ignores, limits.git_repo_above) = worker::above_the_grant(&base);
            walk = Some(limits);
        }
        let exe = match self.file_worker() {
            Ok(exe) => exe,
            Err(failed) => return failed,
        };
        let request = Request {
            tool,
            base: base.clone(),
            cap: self.direct.read_cap_for(allowed),
            walk,
            expected: context.expected.clone(),
        };
        let bytes = match serde_json::to_vec(&request) {
            Ok(bytes) => bytes,
            Err(e) => return Outcome::Failed(format!("cannot write the file tool's request: {e}")),
        };
        // A write's folders are its base and the git-controlled places it changes, which its
        // grant names (or the decision would not have allowed it): no pin keeps those. A read's
        // is its base, read-only.
        let bound: &[PathBuf] = if writes {
            &folders
        } else {
            std::slice::from_ref(&base)
        };
        let (mut read_only, read_write) = if writes {
            (Vec::new(), bound.to_vec())
        } else {
            (bound.to_vec(), Vec::new())
        };
        read_only.push(exe.clone());
        read_only.extend(parents_ignores.iter().cloned());
        let mut policy = self.policy_with(read_only, read_write, context);
        // The worker (brokerd-files, or brokerd) is its own launcher: it goes on in the
        // launcher's process, one `exec` in all (a box with a network, `http_fetch`'s, keeps
        // the small launcher, which also runs its relay).
        policy.launcher = Some(exe.clone());
        let mut spec = sandbox::CommandSpec {
            program: exe,
            args: vec!["box-file".into()],
            env: Vec::new(),
            cwd: PathBuf::from("/"),
        };
        let masked = context.protected.folders();
        let outcome = if self.warm_fits(&base, masked) {
            spec.args.push("--warm".into());
            // Its CPU limit covers its life; each call's deadline is the call's own.
            policy.limits.cpu_seconds = super::super::warm::LIFETIME
                .as_secs()
                .saturating_mul(cores());
            let key = super::super::warm::Key::of(
                &context.session,
                writes,
                bound,
                &parents_ignores,
                masked,
            );
            let cap = usize::try_from(policy.limits.output_bytes).unwrap_or(usize::MAX);
            match self
                .warm
                .exchange(key, &spec, &policy, &bytes, context.limit, cap)
            {
                Ok((answer, _)) => worker::outcome(&answer, b"", None),
                Err(e) => Outcome::Failed(format!("the file tool's warm box failed: {e}")),
            }
        } else {
            policy.files = vec![(PathBuf::from(REQUEST), bytes)];
            fresh_box(&spec, &policy, context)
        };
        match outcome {
            Outcome::Ran { mut fields, body } => {
                fields.insert(
                    "sandbox".to_string(),
                    Value::from(file_boxed(self.file_walls, self.landlock(), walks)),
                );
                Outcome::Ran { fields, body }
            }
            other => other,
        }
    }

    /// A call under a grant that names one file (not a folder), in the broker's process: a box
    /// holds folders, and one holding only the file could not replace it whole (a write is a
    /// temporary file renamed over it, in its folder, which the grant does not name). The tool
    /// reaches the file through its folder opened without links, and nothing else of it.
    fn one_file(&self, allowed: &Allowed, context: &RunContext) -> Outcome {
        match self.direct.run(allowed, context) {
            Outcome::Ran { mut fields, body } => {
                fields.insert("sandbox".to_string(), Value::from(ONE_FILE_UNBOXED));
                Outcome::Ran { fields, body }
            }
            other => other,
        }
    }

    /// Whether a file call in `base` may use a warm box: kept warm, and (without bubblewrap)
    /// no protected folder below `base`, whose siblings Landlock's rules list as they were.
    fn warm_fits(&self, base: &Path, masked: &[PathBuf]) -> bool {
        self.warm.enabled()
            && (self.file_walls == sandbox::FileWalls::Bubblewrap
                || !masked.iter().any(|m| m.starts_with(base)))
    }
}

/// Runs the file tool's worker once in a fresh box and reads its outcome.
fn fresh_box(
    spec: &sandbox::CommandSpec,
    policy: &sandbox::Policy,
    context: &RunContext,
) -> Outcome {
    match sandbox::spawn_boxed(spec, policy, context.limit) {
        Ok(child) => finish(child),
        Err(e) => Outcome::Failed(box_error(e)),
    }
}

/// The outcome a worker in a fresh box (a file tool's, or the fetcher) printed once it ended.
pub(super) fn finish(child: sandbox::ContainedChild) -> Outcome {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let ended = match child.finish(&mut |b| out.extend_from_slice(b), &mut |b| {
        err.extend_from_slice(b)
    }) {
        Ok(ended) => ended,
        Err(e) => return Outcome::Failed(format!("lost track of the worker's box: {e}")),
    };
    worker::outcome(&out, &err, ended.exit)
}

/// Whether `path` is a folder (a grant's base: a file, or one not made yet, is not), without
/// following a link.
fn is_folder(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

/// What the header of a file tool's result says when its grant names the file itself.
const ONE_FILE_UNBOXED: &str = "none: the grant names this one file and a box holds folders, so the tool ran in the broker's process, reaching the file through its folder opened without links";

/// What the header of a file tool's result says when the owner switched the file walls off.
pub const FILE_UNBOXED: &str =
    "none: [sandbox] file_walls = false in brokerd.toml, so the tool ran in the broker's process";

/// What the header of a boxed file tool's result says of its walls; `walks` for the walkers
/// (`list_files`, `glob`, `grep`), which only read.
pub fn file_boxed(
    walls: sandbox::FileWalls,
    landlock: sandbox::Enforcement,
    walks: bool,
) -> String {
    let reach = if walks {
        "walks only the granted folder, read-only"
    } else {
        "sees only the granted folder (read-only to read_file)"
    };
    match walls {
        sandbox::FileWalls::Bubblewrap => format!(
            "bubblewrap: brokerd's worker {reach}, protected folders masked; Landlock {landlock}; no network; every capability dropped"
        ),
        sandbox::FileWalls::LandlockOnly => format!(
            "landlock only (no bubblewrap): Landlock {landlock}: brokerd's worker {reach}, protected folders left out; seccomp: no socket but AF_UNIX, no connect; every capability dropped"
        ),
    }
}
