//! Process hardening: a process's memory closed to others, and every privilege dropped before
//! a command runs. Only rustix's safe wrappers of `prctl(2)` and `capset(2)`, so no `unsafe`.

use std::io;

use rustix::io::Errno;
use rustix::process::{DumpableBehavior, set_dumpable_behavior};
use rustix::thread::{
    CapabilitySet, CapabilitySets, clear_ambient_capability_set,
    remove_capability_from_bounding_set, set_capabilities, set_no_new_privs,
};

/// Where the kernel says which capability is its last.
const CAP_LAST_CAP: &str = "/proc/sys/kernel/cap_last_cap";

/// The highest capability number a [`CapabilitySet`] (64 bits) can name.
const MAX_CAP: u32 = 63;

/// Makes the calling process non-dumpable (`PR_SET_DUMPABLE` 0): no core dump, and
/// `/proc/PID/environ`, `mem`, `maps` and `ptrace` are refused to every process that lacks
/// `CAP_SYS_PTRACE` (measured on Linux 6.18: `CAP_SYS_ADMIN` and `CAP_PERFMON` also open it),
/// even one of the same user. Every boxmaker process that holds a secret calls it at start.
/// The flag is inherited by `fork` and reset by `exec` of an ordinary program.
pub fn make_non_dumpable() -> io::Result<()> {
    set_dumpable_behavior(DumpableBehavior::NotDumpable).map_err(io::Error::from)
}

/// Every privilege a command could hold, to be dropped between `fork` and `exec`.
///
/// [`Hardening::new`] reads what it needs in the parent (the kernel's last capability), so
/// that [`Hardening::apply`] in the child allocates nothing and makes only system calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hardening {
    last_cap: u32,
}

impl Hardening {
    /// Reads the kernel's last capability number from `/proc/sys/kernel/cap_last_cap`.
    pub fn new() -> io::Result<Hardening> {
        let text = std::fs::read_to_string(CAP_LAST_CAP)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot read {CAP_LAST_CAP}: {e}")))?;
        let last_cap = text.trim().parse::<u32>().map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{CAP_LAST_CAP} holds {:?}: {e}", text.trim()),
            )
        })?;
        Ok(Hardening {
            last_cap: last_cap.min(MAX_CAP),
        })
    }

    /// Drops every capability of the calling thread and sets `no_new_privs`: each capability
    /// up to the kernel's last is removed from the bounding set (`PR_CAPBSET_DROP`), the
    /// ambient set is cleared, the permitted, effective and inheritable sets are set to empty
    /// (`capset`), then `PR_SET_NO_NEW_PRIVS` is set, so no later `exec` (a setuid program, a
    /// file with capabilities, or root's own rule) gives any back.
    ///
    /// Async-signal-safe: system calls only, nothing allocated, so it may run in a
    /// `pre_exec` hook of a multithreaded parent.
    ///
    /// Without `CAP_SETPCAP` the bounding set cannot shrink; for a process whose user id is
    /// not 0 that is harmless (`no_new_privs` stops every gain at `exec`), for user id 0 it is
    /// an error, since `exec` as root would fill the permitted set from the bounding set.
    pub fn apply(&self) -> io::Result<()> {
        for cap in 0..=self.last_cap {
            match remove_capability_from_bounding_set(CapabilitySet::from_bits_retain(1 << cap)) {
                Ok(()) | Err(Errno::INVAL) => {}
                Err(Errno::PERM) if !is_uid_zero() => {}
                Err(e) => return Err(e.into()),
            }
        }
        match clear_ambient_capability_set() {
            // EINVAL: a kernel without ambient capabilities (before 4.3) has none to clear.
            Ok(()) | Err(Errno::INVAL) => {}
            Err(e) => return Err(e.into()),
        }
        set_capabilities(
            None,
            CapabilitySets {
                effective: CapabilitySet::empty(),
                permitted: CapabilitySet::empty(),
                inheritable: CapabilitySet::empty(),
            },
        )?;
        set_no_new_privs(true)?;
        Ok(())
    }
}

fn is_uid_zero() -> bool {
    rustix::process::getuid().is_root() || rustix::process::geteuid().is_root()
}
