//! Commands in a warm box: [`spawn_command_worker`] builds a box from a [`Policy`] once, with
//! a worker inside (`serve`) that forks each command the caller sends
//! ([`crate::WarmBox::run_command`]), so a command in the box costs about a plain
//! `fork`/`exec` instead of a new box. Every wall of the box is the fresh box's; each command
//! is also kept from the worker (its own Landlock domain scoped to itself, a non-dumpable
//! worker), and nothing of it outlives it.
//!
//! Only a box built by bubblewrap, with the Landlock layer fully enforced, takes a worker: the
//! worker needs the box's own PID namespace to end a command's leftovers, and Landlock's
//! signal scoping to keep commands from signalling it.

mod serve;

use std::path::PathBuf;

use crate::policy::{BoxError, FileWalls, Policy};
use crate::spec::CommandSpec;
use crate::warm::{WarmBox, spawn_warm};

pub(crate) use serve::{SERVE, run as serve};

/// Starts a box built from `policy` with a command worker inside.
pub fn spawn_command_worker(policy: &Policy) -> Result<WarmBox, BoxError> {
    if let Some(why) = command_worker_missing(policy) {
        return Err(BoxError::NoCommandWorker(why));
    }
    let Some(launcher) = policy.launcher.clone() else {
        return Err(BoxError::NoCommandWorker("the policy names no launcher"));
    };
    let spec = CommandSpec {
        program: launcher,
        args: vec![SERVE.into()],
        env: Vec::new(),
        cwd: PathBuf::from("/"),
    };
    spawn_warm(&spec, policy)
}

/// Why a box of `policy` cannot take a command worker on this machine, if it cannot.
pub fn command_worker_missing(policy: &Policy) -> Option<&'static str> {
    if policy.file_walls != FileWalls::Bubblewrap {
        Some("a command worker needs a box built by bubblewrap (its own PID namespace)")
    } else if policy.launcher.is_none() {
        Some("a command worker needs the policy's launcher")
    } else if policy.landlock() != crate::Enforcement::Full {
        Some("a command worker needs Landlock fully enforced (signal scoping, ABI 6)")
    } else if policy.network.is_some() {
        // The worker kills every other process of the box after each command, the network's
        // relay included.
        Some("a command worker's box has no network (its relay would not outlive a command)")
    } else {
        None
    }
}
