//! Trusted places that did not exist when a box started ([`policy::trusted::BoxPins::missing`]):
//! a box cannot keep what is not there, so they are recorded before the run and, once the box
//! has ended, any that appeared is moved aside into boxmaker's state folder (or, where that
//! folder is on another file system, renamed beside itself), and the call's result says so.
//! In a box of Landlock alone, the places it keeps by record ([`super::snapshot`]) are put
//! back the same way. The place ends the call as it began; during the call a program outside
//! the box could read what the box made there (the window), and a `bash_bg` job's places are
//! swept when the session's next boxed call ends, or its session ends.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::Value;

use super::super::runner::Outcome;
use super::snapshot::Snapshot;

/// What a box's call found missing, and (in a box of Landlock alone) the places recorded to
/// put back, to sweep after it.
#[derive(Debug, Default)]
pub(super) struct Watch {
    missing: Vec<PathBuf>,
    recorded: Vec<Snapshot>,
}

impl Watch {
    /// Records the places of `missing` that still do not exist, and `recorded`.
    pub(super) fn before(missing: Vec<PathBuf>, recorded: Vec<Snapshot>) -> Watch {
        Watch {
            missing: missing
                .into_iter()
                .filter(|p| p.symlink_metadata().is_err())
                .collect(),
            recorded,
        }
    }

    /// Moves aside, into `aside`, each recorded place that exists now: each as "place → where".
    pub(super) fn sweep(&self, aside: &Path) -> Vec<String> {
        let mut moved = Vec::new();
        for shot in &self.recorded {
            match shot.restore(|place| move_aside(place, aside)) {
                None => {}
                Some(Ok(to)) => {
                    tracing::warn!(place = %shot.place().display(), to = %to.display(), "a box changed a trusted place; put back");
                    moved.push(format!(
                        "{} → {} (and the place put back as it was)",
                        shot.place().display(),
                        to.display()
                    ));
                }
                Some(Err(e)) => {
                    tracing::error!(place = %shot.place().display(), error = %e, "a box changed a trusted place that cannot be put back");
                    moved.push(format!(
                        "{} was changed and {e}: check it by hand",
                        shot.place().display()
                    ));
                }
            }
        }
        for place in &self.missing {
            if place.symlink_metadata().is_err() {
                continue;
            }
            match move_aside(place, aside) {
                Ok(to) => {
                    tracing::warn!(place = %place.display(), to = %to.display(), "a box made a trusted place; moved aside");
                    moved.push(format!("{} → {}", place.display(), to.display()));
                }
                Err(e) => {
                    tracing::error!(place = %place.display(), error = %e, "a box made a trusted place that cannot be moved aside");
                    moved.push(format!(
                        "{} could not be moved aside ({e}): remove it by hand",
                        place.display()
                    ));
                }
            }
        }
        moved
    }
}

/// The watches of running `bash_bg` jobs, by session.
#[derive(Debug, Default)]
pub(super) struct JobWatches(Mutex<Vec<(proto::SessionId, Watch)>>);

impl JobWatches {
    /// Keeps `watch` for `session`'s later sweeps.
    pub(super) fn add(&self, session: &proto::SessionId, watch: Watch) {
        if watch.missing.is_empty() && watch.recorded.is_empty() {
            return;
        }
        self.lock().push((session.clone(), watch));
    }

    /// Sweeps `session`'s job watches; `end`: the session has ended, so they are dropped.
    pub(super) fn sweep(&self, session: &proto::SessionId, aside: &Path, end: bool) -> Vec<String> {
        let mut watches = self.lock();
        let moved = watches
            .iter()
            .filter(|(s, _)| s == session)
            .flat_map(|(_, w)| w.sweep(aside))
            .collect();
        if end {
            watches.retain(|(s, _)| s != session);
        }
        moved
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(proto::SessionId, Watch)>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Renames `place` into a fresh folder under `aside` that mirrors its path, or beside itself
/// with a `.boxmaker-moved-N` suffix when `aside` is on another file system.
fn move_aside(place: &Path, aside: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let relative = place.strip_prefix("/").unwrap_or(place);
    let to = aside.join(stamp.to_string()).join(relative);
    if let Some(parent) = to.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)?;
    }
    match std::fs::rename(place, &to) {
        Ok(()) => Ok(to),
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error()) => {
            let name = place.file_name().map(|n| n.to_string_lossy().into_owned());
            let name = name.unwrap_or_default();
            for n in 1..1000 {
                let beside = place.with_file_name(format!("{name}.boxmaker-moved-{n}"));
                if beside.symlink_metadata().is_err() {
                    std::fs::rename(place, &beside)?;
                    return Ok(beside);
                }
            }
            Err(e)
        }
        Err(e) => Err(e),
    }
}

/// `outcome` with what was moved aside: a header field and a closing sentence the model reads.
pub(super) fn with_moved(outcome: Outcome, moved: Vec<String>) -> Outcome {
    if moved.is_empty() {
        return outcome;
    }
    let sentence = format!(
        "[boxmaker] moved aside what this call made at a trusted place that programs outside the box read or run (only a grant that names the place may make it): {}",
        moved.join("; ")
    );
    match outcome {
        Outcome::Ran { mut fields, body } => {
            fields.insert(
                "moved_aside".to_string(),
                Value::from(
                    moved
                        .iter()
                        .map(|m| Value::from(m.as_str()))
                        .collect::<Vec<_>>(),
                ),
            );
            let mut body = body;
            if !body.is_empty() && !body.ends_with('\n') {
                body.push('\n');
            }
            body.push_str(&sentence);
            body.push('\n');
            Outcome::Ran { fields, body }
        }
        Outcome::Failed(why) => Outcome::Failed(format!("{why}\n{sentence}")),
        Outcome::Denied(reason, why) => Outcome::Denied(reason, format!("{why}\n{sentence}")),
    }
}
