//! A served box: a box built from a [`Policy`] whose command stays up and speaks its own
//! protocol over its three pipes (a downstream MCP server, say), for a caller that reads and
//! writes them itself. Dropping the box kills every process of it and its cgroup.
//!
//! As for [`crate::WarmBox`], the box's parent-death signal follows the thread that spawned
//! it: a caller keeps that thread alive as long as the box.

use std::process::{ChildStderr, ChildStdin, ChildStdout};
use std::time::Duration;

use crate::boxed::spawn_boxed_with;
use crate::contain::ContainedChild;
use crate::policy::{BoxError, Policy};
use crate::spec::CommandSpec;

/// A box whose command talks over its pipes. Dropping it kills the box.
#[derive(Debug)]
pub struct ServedBox {
    /// The command's standard input (taken by the caller).
    pub stdin: Option<ChildStdin>,
    /// The command's standard output.
    pub stdout: Option<ChildStdout>,
    /// The command's standard error.
    pub stderr: Option<ChildStderr>,
    // Last: it kills the box once the pipes are closed.
    child: ContainedChild,
}

impl ServedBox {
    /// The process id of the broker's child that leads the box.
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }
}

/// Starts `spec` in a box built from `policy`, with its three pipes for the caller. The box
/// has no deadline: it lives until it is dropped or its command ends.
pub fn spawn_served(spec: &CommandSpec, policy: &Policy) -> Result<ServedBox, BoxError> {
    let mut child = spawn_boxed_with(spec, policy, Duration::MAX, true)?;
    let (stdin, stdout, stderr) = child.take_pipes();
    Ok(ServedBox {
        stdin,
        stdout,
        stderr,
        child,
    })
}
