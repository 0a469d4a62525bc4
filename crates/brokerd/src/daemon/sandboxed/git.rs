//! The git tools in the box: `git_status` and `git_diff` with each git in a fresh box holding
//! the granted folder read-only (or contained when the file walls are off), and `git_clone` in
//! a fresh box of the deciding grant's folders whose only way out is a proxy of the grant's
//! hosts (or contained from the broker, pinned, where there is no bubblewrap).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::super::runner::{Outcome, RunContext};
use super::{SandboxedRunner, granted};
use policy::decide::Allowed;

impl SandboxedRunner {
    /// Runs `git_status` or `git_diff` with each git in a fresh box holding the granted
    /// folder read-only (no network), or contained when the file walls are off.
    pub(super) fn git_read(&self, allowed: &Allowed, context: &RunContext) -> Outcome {
        let mut extra = Map::new();
        if !self.settings.file_walls {
            extra.insert("sandbox".to_string(), Value::from(GIT_UNBOXED));
            return super::super::runner::git_read(
                allowed,
                context,
                tools::git::GitContainment::Contained,
                extra,
            );
        }
        if let Some(why) = self.unboxable() {
            return Outcome::Failed(why);
        }
        let policy = self.policy_with(granted(allowed), Vec::new(), context);
        let walls = git_boxed(self.file_walls, self.landlock());
        if self.warm_commands {
            extra.insert(
                "sandbox".to_string(),
                Value::from(format!("{walls}; {}", super::WARM_COMMANDS)),
            );
            let worker = tools::git::GitWorker(self.command_runner(policy, context));
            return super::super::runner::git_read(
                allowed,
                context,
                tools::git::GitContainment::Worker(worker),
                extra,
            );
        }
        extra.insert("sandbox".to_string(), Value::from(walls));
        super::super::runner::git_read(
            allowed,
            context,
            tools::git::GitContainment::Boxed(Box::new(policy)),
            extra,
        )
    }
}

/// What the header of a boxed `git_status` or `git_diff` result says of its walls.
pub fn git_boxed(walls: sandbox::FileWalls, landlock: sandbox::Enforcement) -> String {
    match walls {
        sandbox::FileWalls::Bubblewrap => format!(
            "bubblewrap: git sees only the granted folder, read-only, and a read-only system; protected folders masked; Landlock {landlock}; no network; every capability dropped"
        ),
        sandbox::FileWalls::LandlockOnly => format!(
            "landlock only (no bubblewrap): Landlock {landlock}: git sees only the granted folder and a read-only system, protected folders left out; seccomp: no socket but AF_UNIX, no connect; every capability dropped"
        ),
    }
}

impl SandboxedRunner {
    /// Whether `git_clone` runs in a box: with the file walls on, bubblewrap for its network
    /// namespace, and a proxy for the granted hosts.
    pub(super) fn clones_in_box(&self) -> bool {
        self.settings.file_walls
            && self.file_walls == sandbox::FileWalls::Bubblewrap
            && self.proxies.is_some()
            && self.unboxable().is_none()
    }

    /// Runs `git_clone` with git in a fresh box: the deciding grant's folders read-write (the
    /// destination is in one), and the network of the grant's hosts through a proxy of its own.
    pub(super) fn clone_in_box(
        &self,
        args: &tools::git::GitCloneArgs,
        allowed: &Allowed,
        context: &RunContext,
    ) -> Outcome {
        let Some(proxies) = &self.proxies else {
            return Outcome::Failed("this broker has no proxy for git_clone's host".to_string());
        };
        let proxy = match proxies.open(&allowed.hosts) {
            Ok(proxy) => proxy,
            Err(why) => return Outcome::Failed(why),
        };
        let folders = granted(allowed);
        let _made = match MadeDestination::make(&folders, Path::new(&args.path)) {
            Ok(made) => made,
            Err(why) => return Outcome::Failed(why),
        };
        let mut policy = self.policy_with(Vec::new(), folders, context);
        policy.network = Some(sandbox::Network::new(proxy.socket()));
        let walls = clone_boxed(
            self.landlock(),
            &super::super::proxy::network_words(&allowed.hosts),
        );
        let outcome = self.direct.clone_with(
            args,
            allowed,
            context,
            tools::git::GitContainment::Boxed(Box::new(policy)),
            &walls,
        );
        drop(proxy); // git's box has ended
        outcome
    }
}

/// The clone's destination made empty, when the grant names the destination itself and it
/// does not exist yet (the box binds the grant's folders, so they must exist; the destination's
/// parent is not the grant's to bind); removed again if the clone leaves it empty.
struct MadeDestination(Option<PathBuf>);

impl MadeDestination {
    fn make(folders: &[PathBuf], destination: &Path) -> Result<MadeDestination, String> {
        if !folders.iter().any(|f| f == destination) || destination.exists() {
            return Ok(MadeDestination(None));
        }
        match std::fs::create_dir(destination) {
            Ok(()) => Ok(MadeDestination(Some(destination.to_path_buf()))),
            Err(e) => Err(format!(
                "cannot make the clone's folder {}: {e}",
                destination.display()
            )),
        }
    }
}

impl Drop for MadeDestination {
    fn drop(&mut self) {
        if let Some(folder) = &self.0 {
            // Fails, as it should, on a folder the clone filled.
            let _ = std::fs::remove_dir(folder);
        }
    }
}

/// What the header of a `git_clone` result says when git ran in a box whose network is
/// `network` (`network: only …, through the broker's proxy`).
pub fn clone_boxed(landlock: sandbox::Enforcement, network: &str) -> String {
    format!(
        "bubblewrap: git sees only the grant's folders (read-write) and a read-only system; protected folders masked; Landlock {landlock}; {network}, each connection checked again there; every capability dropped; https only, no redirect followed"
    )
}

/// What the header of a `git_status` or `git_diff` result says when the file walls are off.
pub const GIT_UNBOXED: &str = "none: [sandbox] file_walls = false in brokerd.toml, so git ran contained from the broker and sees every file the broker's user can";
