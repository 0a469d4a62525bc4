//! A cgroup per box, for the limits that rlimits cannot give a box whose processes are the
//! host's root: the number of processes (`RLIMIT_NPROC` never applies to the host's root user)
//! and memory across every process of the box. The box's first process joins it between
//! `fork` and `exec` (through a descriptor opened here), so nothing it starts is ever outside;
//! dropping the [`BoxCgroup`] kills whatever is still in it and removes it.
//!
//! Making and removing a memory cgroup costs about 4 ms here (measured: a fresh box took 12.8 ms
//! against 9.0 ms without its cgroup), so ended boxes' cgroups, killed, go back to a small pool
//! of this process ([`PooledCgroup`]) and are reused with new limits. Those a broker that died
//! left behind are removed the first time a cgroup is made.
//!
//! Cgroup v1 controllers (`/sys/fs/cgroup/pids`, `/sys/fs/cgroup/memory`) are used where they
//! are mounted and writable, as on this kind of hybrid machine; otherwise v2 (`cgroup.subtree_control`
//! of the unified hierarchy naming `pids` and `memory`).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};

/// The folder of boxmaker's cgroups under each controller's root.
const PARENT: &str = "boxmaker";

/// Numbers the boxes of this process, so two boxes never share a cgroup.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Cgroups of ended boxes, killed; the next box takes one once nothing is charged to it.
static POOL: Mutex<Vec<BoxCgroup>> = Mutex::new(Vec::new());

/// The most cgroups the pool keeps; more are removed.
const POOL_SIZE: usize = 8;

/// Removes, once per process, the cgroups a dead broker left behind.
static SWEEP: Once = Once::new();

/// A box's cgroup that goes back to the pool, killed, when dropped.
#[derive(Debug)]
pub(crate) struct PooledCgroup(Option<BoxCgroup>);

impl PooledCgroup {
    /// A cgroup from the pool (or a new one) with these limits.
    /// The first one taken starts the process's warden through `launcher`
    /// ([`crate::warden`]).
    pub(crate) fn take(
        processes: u64,
        memory: u64,
        launcher: Option<&Path>,
    ) -> io::Result<PooledCgroup> {
        crate::warden::ensure(launcher);
        // Only one that nothing is charged to any more: an ended box's last zombie may still
        // wait for the host's init to reap it.
        let pooled = POOL.lock().ok().and_then(|mut pool| {
            let at = pool.iter().position(BoxCgroup::is_empty)?;
            Some(pool.swap_remove(at))
        });
        let cgroup = match pooled {
            Some(cgroup) => {
                cgroup.set_limits(processes, memory)?;
                cgroup
            }
            None => {
                SWEEP.call_once(sweep);
                BoxCgroup::create(processes, memory)?
            }
        };
        Ok(PooledCgroup(Some(cgroup)))
    }

    /// See [`BoxCgroup::join_fds`].
    pub(crate) fn join_fds(&self) -> Vec<RawFd> {
        self.0.as_ref().map(BoxCgroup::join_fds).unwrap_or_default()
    }

    /// See [`BoxCgroup::kill_all`].
    pub(crate) fn kill_all(&self) {
        if let Some(cgroup) = &self.0 {
            cgroup.kill_all();
        }
    }
}

impl Drop for PooledCgroup {
    fn drop(&mut self) {
        let Some(cgroup) = self.0.take() else { return };
        cgroup.kill_all();
        // Pooled at once, not once empty: a killed box's last zombie is reaped by whoever
        // adopted it (measured: up to 100 ms under load, which each call used to wait), and
        // `take` skips a cgroup that something is still charged to.
        if let Ok(mut pool) = POOL.lock()
            && pool.len() < POOL_SIZE
        {
            pool.push(cgroup);
        }
    }
}

/// Kills what is left in the cgroups named after a process that no longer exists (a broker
/// killed outright whose warden was killed too, or that had none), then removes them.
fn sweep() {
    sweep_where(|pid| !Path::new("/proc").join(pid).exists());
}

/// Kills what is left in the box cgroups of process `pid` and removes them: the warden's work
/// once that process is gone ([`crate::warden`]).
pub(crate) fn remove_all_of(pid: u32) {
    let pid = pid.to_string();
    sweep_where(|owner| owner == pid);
}

/// Kills what is in each box cgroup whose maker's pid `owned` picks, then removes it.
fn sweep_where(owned: impl Fn(&str) -> bool) {
    for parent in [
        "/sys/fs/cgroup/pids/boxmaker",
        "/sys/fs/cgroup/memory/boxmaker",
        "/sys/fs/cgroup/boxmaker",
    ] {
        let Ok(entries) = fs::read_dir(parent) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(pid) = name.strip_prefix("box-").and_then(|r| r.split('-').next()) else {
                continue;
            };
            if owned(pid) {
                kill_procs_in(&entry.path());
                for _ in 0..50 {
                    if fs::remove_dir(entry.path()).is_ok() || !entry.path().exists() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
            }
        }
    }
}

/// One box's cgroups, one per controller (v1) or one for both (v2).
#[derive(Debug)]
pub(crate) struct BoxCgroup {
    dirs: Vec<PathBuf>,
    /// The file of each dir the child writes `0` to, to join: opened for writing.
    procs: Vec<File>,
    /// The files holding its limits.
    limits: Vec<(PathBuf, Limit)>,
}

/// Which limit a file holds.
#[derive(Debug, Clone, Copy)]
enum Limit {
    Processes,
    Memory,
}

impl BoxCgroup {
    /// Creates the box's cgroups with at most `processes` tasks and `memory` bytes.
    fn create(processes: u64, memory: u64) -> io::Result<BoxCgroup> {
        let name = format!(
            "box-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let v1_pids = Path::new("/sys/fs/cgroup/pids");
        let v1_memory = Path::new("/sys/fs/cgroup/memory");
        let mut made = BoxCgroup {
            dirs: Vec::new(),
            procs: Vec::new(),
            limits: Vec::new(),
        };
        if v1_pids.join("tasks").exists() && v1_memory.join("tasks").exists() {
            // v1's `tasks`, not `cgroup.procs`: the child joins between `fork` and `exec`, while
            // it is one thread, and the kernel moves the writing thread alone without the
            // write lock on every thread group that moving a whole process takes, which waits
            // for an RCU grace period (7-27 ms here after a second with no move, against
            // 0.5 ms through `tasks`).
            let pids = made.make(&v1_pids.join(PARENT), &name, "tasks")?;
            let mem = made.make(&v1_memory.join(PARENT), &name, "tasks")?;
            // Kept, so that a pooled cgroup takes the next box's limits, not its first one's.
            made.limits = vec![
                (pids.join("pids.max"), Limit::Processes),
                (mem.join("memory.limit_in_bytes"), Limit::Memory),
            ];
            made.set_limits(processes, memory)?;
            // Best effort: without swap accounting the file is absent.
            let _ = write(
                &mem.join("memory.memsw.limit_in_bytes"),
                &memory.to_string(),
            );
            return Ok(made);
        }
        let unified = Path::new("/sys/fs/cgroup");
        let controllers = fs::read_to_string(unified.join("cgroup.controllers")).map_err(|e| {
            io::Error::new(
                e.kind(),
                "no cgroup for the box: neither the v1 pids and memory controllers nor a v2 hierarchy are mounted at /sys/fs/cgroup",
            )
        })?;
        if !(controllers.contains("pids") && controllers.contains("memory")) {
            return Err(io::Error::other(
                "no cgroup for the box: the v2 hierarchy at /sys/fs/cgroup has no pids and memory controllers",
            ));
        }
        let parent = unified.join(PARENT);
        fs::create_dir_all(&parent).map_err(|e| named(&parent, e))?;
        write(&parent.join("cgroup.subtree_control"), "+pids +memory")?;
        // v2 moves a thread alone only within a threaded subtree: the whole process it is.
        let dir = made.make(&parent, &name, "cgroup.procs")?;
        made.limits = vec![
            (dir.join("pids.max"), Limit::Processes),
            (dir.join("memory.max"), Limit::Memory),
        ];
        // Best effort: without swap accounting the file is absent.
        let _ = write(&dir.join("memory.swap.max"), "0");
        made.set_limits(processes, memory)?;
        Ok(made)
    }

    /// Makes `parent/name` and opens its `join` file for the child.
    fn make(&mut self, parent: &Path, name: &str, join: &str) -> io::Result<PathBuf> {
        fs::create_dir_all(parent).map_err(|e| named(parent, e))?;
        let dir = parent.join(name);
        fs::create_dir(&dir).map_err(|e| named(&dir, e))?;
        self.dirs.push(dir.clone());
        let procs = dir.join(join);
        let file = OpenOptions::new()
            .write(true)
            .open(&procs)
            .map_err(|e| named(&procs, e))?;
        self.procs.push(file);
        Ok(dir)
    }

    fn set_limits(&self, processes: u64, memory: u64) -> io::Result<()> {
        for (file, limit) in &self.limits {
            let value = match limit {
                Limit::Processes => processes,
                Limit::Memory => memory,
            };
            write(file, &value.to_string())?;
        }
        Ok(())
    }

    /// Whether no process is left in it and none is still counted against its process limit:
    /// a killed process leaves `cgroup.procs` at exit but is uncharged from `pids.current`
    /// only once reaped, and a pooled cgroup still charged would refuse the next box's forks.
    fn is_empty(&self) -> bool {
        self.dirs.iter().all(|dir| {
            let no_procs =
                fs::read_to_string(dir.join("cgroup.procs")).is_ok_and(|t| t.trim().is_empty());
            let uncharged = match fs::read_to_string(dir.join("pids.current")) {
                Ok(text) => text.trim() == "0",
                Err(_) => true,
            };
            no_procs && uncharged
        })
    }

    /// The descriptors the child writes `0` to, to join (close-on-exec, as std opens them).
    fn join_fds(&self) -> Vec<RawFd> {
        self.procs.iter().map(AsRawFd::as_raw_fd).collect()
    }

    /// Kills every process still in the box's cgroups.
    fn kill_all(&self) {
        for dir in &self.dirs {
            kill_procs_in(dir);
        }
    }
}

/// Kills every process in the cgroup `dir`, and waits (up to about 200 ms) until none is
/// listed.
fn kill_procs_in(dir: &Path) {
    // A process killed (or ending on its own: a box's init right after its command) stays
    // listed for a moment. The first looks come soon, since a box's last process is usually
    // gone within a few tens of microseconds (measured: a flat 2 ms wait here was paid by
    // more than half of all fresh boxes, on the call's path), then further apart.
    let mut pause = std::time::Duration::from_micros(50);
    let until = std::time::Instant::now() + std::time::Duration::from_millis(200);
    while let Ok(text) = fs::read_to_string(dir.join("cgroup.procs")) {
        let pids: Vec<i32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
        if pids.is_empty() || std::time::Instant::now() >= until {
            break;
        }
        for pid in pids {
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(2));
    }
}

impl Drop for BoxCgroup {
    fn drop(&mut self) {
        self.kill_all();
        self.procs.clear();
        for dir in self.dirs.iter().rev() {
            for _ in 0..50 {
                if fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
    }
}

fn write(path: &Path, value: &str) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| named(path, e))?;
    file.write_all(value.as_bytes()).map_err(|e| named(path, e))
}

fn named(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("cgroup {}: {e}", path.display()))
}
