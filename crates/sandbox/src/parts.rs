//! What a box adds to a contained spawn ([`BoxParts`]): its limits, its cgroup, the descriptors
//! bubblewrap inherits, and, without bubblewrap, its seccomp programs and scratch folder. Below
//! both kinds of box and the spawn they share (`contain`), which holds them until the box ends.

use std::path::{Path, PathBuf};

use crate::cgroup::PooledCgroup;
use crate::limits::Limits;

/// What the box's first process needs beside the command: its limits, its cgroup, and the
/// descriptors bubblewrap must inherit (see [`crate::bwrap_command`]).
#[derive(Debug)]
pub(crate) struct BoxParts {
    pub(crate) limits: Limits,
    pub(crate) cgroup: PooledCgroup,
    pub(crate) inherit: Vec<std::os::fd::OwnedFd>,
    /// The seccomp programs installed before `exec` (a box without bubblewrap).
    pub(crate) seccomp: Vec<seccompiler::BpfProgram>,
    /// The scratch folder of a box without bubblewrap.
    pub(crate) scratch: Option<Scratch>,
    /// Whether the command's standard input is a pipe from the caller (a warm worker's
    /// requests) instead of `/dev/null`.
    pub(crate) stdin: bool,
}

/// Numbers the scratch folders of this process.
static NEXT_SCRATCH: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The scratch folder of a box without bubblewrap: made mode 0700, removed with the box.
#[derive(Debug)]
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    /// Makes a new scratch folder under the temporary folder.
    pub(crate) fn make() -> std::io::Result<Scratch> {
        use std::os::unix::fs::DirBuilderExt;
        let n = NEXT_SCRATCH.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("boxmaker-box-{}-{n}", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        Ok(Scratch(path))
    }

    /// Where the folder is.
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
