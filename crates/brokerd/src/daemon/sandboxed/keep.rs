//! The trusted places a call's box keeps by other means than its walls: what a box records
//! before a call and sweeps after it ([`super::watch`], [`super::snapshot`]), and the
//! repositories' `hooks` folders made first.

use std::path::PathBuf;

use super::super::runner::{Outcome, RunContext};
use super::{SandboxedRunner, granted, snapshot, watch};
use policy::decide::Allowed;

impl SandboxedRunner {
    /// The trusted places under the call's read-write folders that do not exist now, to
    /// sweep once its box has ended ([`watch`]); none when the file walls are off.
    pub(super) fn watch(&self, allowed: &Allowed, context: &RunContext) -> watch::Watch {
        if !self.settings.file_walls {
            return watch::Watch::default();
        }
        let read_write = granted(allowed);
        if read_write.is_empty() {
            return watch::Watch::default();
        }
        let pins = context.protected.places().box_pins(&read_write);
        // Made before they are recorded, as the box will find them.
        make_hooks(&pins.hooks);
        let recorded = if self.file_walls == sandbox::FileWalls::LandlockOnly {
            pins.kept
                .iter()
                .filter(|p| snapshot::Snapshot::fits(p))
                .filter_map(|p| snapshot::Snapshot::take(p))
                .collect()
        } else {
            Vec::new()
        };
        watch::Watch::before(pins.missing, recorded)
    }

    /// Runs `run` (a call in a runtime other than this runner's boxes: a Podman container)
    /// keeping the trusted places under the call's read-write folders: each small one recorded
    /// and put back after it ([`snapshot`]), each larger one given to `run` as read-only
    /// mounts (the folders to bind onto themselves first, then the places), the missing ones
    /// swept ([`watch`]); or the call failed with the sentence of a link that cannot be kept.
    pub(in crate::daemon) fn run_keeping(
        &self,
        allowed: &Allowed,
        context: &RunContext,
        run: impl FnOnce(&[PathBuf], &[PathBuf]) -> Outcome,
    ) -> Outcome {
        let read_write = granted(allowed);
        let pins = context.protected.places().box_pins(&read_write);
        make_hooks(&pins.hooks);
        let (small, large): (Vec<PathBuf>, Vec<PathBuf>) = pins
            .kept
            .into_iter()
            .partition(|p| snapshot::Snapshot::fits(p));
        let (folders, places) = match sandbox::pinned_mounts(&large, &read_write) {
            Ok(mounts) => mounts,
            Err(e) => return Outcome::Failed(format!("the container was not started: {e}")),
        };
        let recorded = small
            .iter()
            .filter_map(|p| snapshot::Snapshot::take(p))
            .collect();
        let watch = watch::Watch::before(pins.missing, recorded);
        let outcome = run(&folders, &places);
        let mut moved = watch.sweep(&self.aside);
        moved.extend(self.job_watches.sweep(&context.session, &self.aside, false));
        watch::with_moved(outcome, moved)
    }
}

/// Makes each repository's missing `hooks` folder (empty, as `git init` does), so that a box
/// cannot make it.
pub(super) fn make_hooks(hooks: &[PathBuf]) {
    for hooks in hooks {
        if let Err(e) = std::fs::create_dir(hooks)
            && e.kind() != std::io::ErrorKind::AlreadyExists
        {
            tracing::warn!(hooks = %hooks.display(), error = %e, "cannot make the repository's hooks folder, which a box could then make");
        }
    }
}
