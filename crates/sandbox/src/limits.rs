//! The limits of one box: rlimits its first process takes before `exec` (each of its
//! processes under them), beside the cgroup's limits on all of them together (`cgroup`).

use std::io;

use rustix::process::{Resource, Rlimit, setrlimit};

/// The limits of one box.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// CPU seconds (`RLIMIT_CPU`).
    pub cpu_seconds: u64,
    /// Address space of each process, in bytes (`RLIMIT_AS`; generous: it is virtual memory).
    pub address_space: u64,
    /// The largest file a process may write, in bytes (`RLIMIT_FSIZE`).
    pub file_size: u64,
    /// Open descriptors per process (`RLIMIT_NOFILE`).
    pub open_files: u64,
    /// Processes in the whole box (the cgroup's `pids.max`).
    pub processes: u64,
    /// Memory of the whole box, in bytes (the cgroup's memory limit).
    pub memory: u64,
    /// Bytes of standard output and error together the box may write; past them it is killed
    /// whole ([`crate::Ended::output_exceeded`]) and the rest is not read.
    pub output_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            cpu_seconds: 300,
            address_space: 8 << 30,
            file_size: 1 << 30,
            open_files: 1024,
            processes: 256,
            memory: 2 << 30,
            output_bytes: 256 << 20,
        }
    }
}

impl Limits {
    /// Sets the rlimits of the calling process (and `RLIMIT_CORE` to 0). Async-signal-safe.
    pub(crate) fn apply(&self) -> io::Result<()> {
        let set = |resource, value: u64| {
            setrlimit(
                resource,
                Rlimit {
                    current: Some(value),
                    maximum: Some(value),
                },
            )
        };
        set(Resource::Cpu, self.cpu_seconds)?;
        set(Resource::As, self.address_space)?;
        set(Resource::Fsize, self.file_size)?;
        set(Resource::Nofile, self.open_files)?;
        set(Resource::Core, 0)?;
        Ok(())
    }
}
