//! A cgroup per box, for the limits that rlimits cannot give a box whose processes are the
//! host's root: the number of processes (`RLIMIT_NPROC` never applies to the host's root user)
//! and memory across every process of the box. The box's first process joins it between
//! `fork` and `exec` (through a descriptor opened here), so nothing it starts is ever outside;
//! dropping the [`BoxCgroup`] kills whatever is still in it and removes it.
//!
//! Making and removing a memory cgroup costs about 4 ms here (measured: a fresh box took 12.8 ms
//! against 9.0 ms without its cgroup), so ended boxes' cgroups go back to a small pool of this
//! process ([`PooledCgroup`]) and are reused with new limits. Those a broker that died left
//! behind are removed the first time a cgroup is made.
//!
//! A box's cgroup goes back to the pool once no process is listed in it (each killed until
//! none is), and the next box takes the oldest cgroup that lists no process and is charged
//! with few enough ended but unreaped processes (a box's init is reaped by the host's init,
//! which can take seconds): they count against the next box's `pids.max`, which is never
//! raised for them (see `take_pooled`).
//!
//! Where the cgroups go is found once per process (`place`): boxmaker's folders under the v1
//! `pids` and `memory` controllers (`/sys/fs/cgroup/pids`, `/sys/fs/cgroup/memory`) where they
//! are mounted, as on this kind of hybrid machine, otherwise under v2 (`cgroup.subtree_control`
//! of the unified hierarchy naming `pids` and `memory`); for an owner who is not root, folders
//! delegated to that owner. Where none can be had, a bubblewrap box is built without a cgroup
//! (its PID namespace still ends it whole, see [`crate::WITHOUT_CGROUP`]).

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};

mod place;
pub(crate) mod warden;

use place::{Place, place};

/// Numbers the boxes of this process, so two boxes never share a cgroup.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Cgroups of ended boxes, oldest first, each with no process left that can run (see
/// [`PooledCgroup`]); the next box takes the oldest that lists no process at all.
static POOL: Mutex<VecDeque<BoxCgroup>> = Mutex::new(VecDeque::new());

/// The most cgroups the pool keeps; more are removed.
const POOL_SIZE: usize = 8;

/// How many times a pooled cgroup may be passed over (a process still listed, or too many
/// unreaped) before it leaves the pool and is removed.
const MAX_PASSED_OVER: u32 = 32;

/// Removes, once per process, the cgroups a dead broker left behind.
static SWEEP: Once = Once::new();

/// A box's cgroup that goes back to the pool when dropped, once nothing in it can run.
#[derive(Debug)]
pub(crate) struct PooledCgroup {
    cgroup: Option<BoxCgroup>,
    /// No process is listed in it any more ([`PooledCgroup::settle`]).
    settled: bool,
}

impl PooledCgroup {
    /// A cgroup from the pool (or a new one) with these limits.
    /// The first one taken starts the process's warden through `launcher`
    /// ([`warden`]). Where this process can have no cgroup ([`box_cgroup`]), none: a
    /// box without one, or, when `required` (a box that nothing else holds together), the
    /// error saying what is missing.
    pub(crate) fn take(
        processes: u64,
        memory: u64,
        launcher: Option<&Path>,
        required: bool,
    ) -> io::Result<PooledCgroup> {
        let place = match place() {
            Ok(place) => place,
            Err(missing) if required => {
                return Err(io::Error::other(format!(
                    "no cgroup for the box, and a box without bubblewrap has nothing else to hold its processes together: {}",
                    missing.text()
                )));
            }
            Err(_) => {
                return Ok(PooledCgroup {
                    cgroup: None,
                    settled: false,
                });
            }
        };
        warden::ensure(launcher);
        let cgroup = match take_pooled(processes) {
            Some(mut cgroup) => {
                cgroup.set_limits(processes, memory)?;
                cgroup
            }
            None => {
                SWEEP.call_once(sweep);
                BoxCgroup::create(place, processes, memory)?
            }
        };
        Ok(PooledCgroup {
            cgroup: Some(cgroup),
            settled: false,
        })
    }

    /// See [`BoxCgroup::join_fds`].
    pub(crate) fn join_fds(&self) -> Vec<RawFd> {
        self.cgroup
            .as_ref()
            .map(BoxCgroup::join_fds)
            .unwrap_or_default()
    }

    /// See [`BoxCgroup::kill_all`].
    pub(crate) fn kill_all(&self) {
        if let Some(cgroup) = &self.cgroup {
            cgroup.kill_all();
        }
    }

    /// The box has ended: kills what is left, until each process still listed is in the
    /// kernel's exit, so that nothing of it runs past the call.
    pub(crate) fn settle(&mut self) {
        if let Some(cgroup) = &self.cgroup {
            self.settled = cgroup.kill_until_ending();
        }
    }
}

impl Drop for PooledCgroup {
    fn drop(&mut self) {
        let Some(mut cgroup) = self.cgroup.take() else {
            return;
        };
        // A box dropped before it was settled (an error, a worker ending) is killed here, and
        // one whose processes will not go is not pooled (its `Drop` removes what it can).
        if !(self.settled || cgroup.kill_all()) {
            return;
        }
        if let Ok(mut pool) = POOL.lock()
            && pool.len() < POOL_SIZE
        {
            cgroup.passed_over = 0;
            pool.push_back(cgroup);
        }
    }
}

/// The oldest pooled cgroup that lists no process and is charged with few enough ended ones
/// for a box limited to `processes`.
///
/// An ended process stays charged to `pids.current` until it is reaped: a bubblewrap box
/// leaves its init to the host's init, which can take seconds, and a box without a PID
/// namespace can leave many. They count against the next box's `pids.max`, which stays that
/// box's own limit, never more; so a cgroup is taken only while they are at most an eighth of
/// it, and otherwise waits in the pool to be reaped.
fn take_pooled(processes: u64) -> Option<BoxCgroup> {
    let mut evicted = Vec::new();
    let taken = {
        let mut pool = POOL.lock().ok()?;
        let mut taken = None;
        let mut at = 0;
        while let Some(cgroup) = pool.get_mut(at) {
            if cgroup.lists_no_process() && cgroup.unreaped() <= processes / 8 {
                taken = pool.remove(at);
                break;
            }
            cgroup.passed_over += 1;
            if cgroup.passed_over > MAX_PASSED_OVER {
                evicted.extend(pool.remove(at));
            } else {
                at += 1;
            }
        }
        taken
    };
    // Off the call's path: each is killed and removed as it drops, which can take a while
    // for a cgroup whose processes would not go.
    if !evicted.is_empty() {
        std::thread::spawn(move || drop(evicted));
    }
    taken
}

/// Kills what is left in the cgroups named after a process that no longer exists (a broker
/// killed outright whose warden was killed too, or that had none), then removes them.
fn sweep() {
    sweep_where(|pid| !Path::new("/proc").join(pid).exists());
}

/// Kills what is left in the box cgroups of process `pid` and removes them: the warden's work
/// once that process is gone ([`warden`]).
pub(crate) fn remove_all_of(pid: u32) {
    let pid = pid.to_string();
    sweep_where(|owner| owner == pid);
}

/// Kills what is in each box cgroup whose maker's pid `owned` picks, then removes it.
fn sweep_where(owned: impl Fn(&str) -> bool) {
    let Ok(place) = place() else { return };
    for parent in place.parents() {
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

/// Whether this process's boxes get a cgroup: `Ok` saying where, or `Err` saying what is
/// missing, then the commands that would give one, each on a line of its own (for `bx doctor`).
/// Found once per process: a broker started before the cgroup was delegated builds its boxes
/// without one until it is restarted.
pub fn box_cgroup() -> Result<String, String> {
    match place() {
        Ok(place) => Ok(place.describe()),
        Err(missing) => Err(missing.text()),
    }
}

/// What a box built without a cgroup lacks (where [`box_cgroup`] is `Err`).
pub const WITHOUT_CGROUP: &str = "no cgroup: no limit on the number of its processes or on their memory together (each process keeps its rlimits: CPU time, address space, file size, open files); it is killed whole through its PID namespace, and a box started in the instant its broker is killed may outlive it";

/// One box's cgroups, one per controller (v1) or one for both (v2).
#[derive(Debug)]
pub(crate) struct BoxCgroup {
    dirs: Vec<PathBuf>,
    /// The file of each dir the child writes `0` to, to join: opened for writing.
    procs: Vec<File>,
    /// The first dir's list of every task it holds: v1's `tasks` lists each thread, v2's
    /// `cgroup.procs` each process.
    tasks: Option<PathBuf>,
    /// The files holding its limits, in the order they are written when limits go up.
    limits: Vec<(PathBuf, Limit)>,
    /// The values last written to `limits`: processes, memory.
    written: Option<(u64, u64)>,
    /// How many times in a row the pool passed it over ([`MAX_PASSED_OVER`]).
    passed_over: u32,
}

/// Which limit a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Limit {
    Processes,
    Memory,
    /// v1's memory and swap together, best effort (absent without swap accounting); never
    /// below [`Limit::Memory`].
    MemoryAndSwap,
}

impl BoxCgroup {
    /// Creates the box's cgroups at `place` with at most `processes` tasks and `memory` bytes.
    fn create(place: &Place, processes: u64, memory: u64) -> io::Result<BoxCgroup> {
        let name = format!(
            "box-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut made = BoxCgroup {
            dirs: Vec::new(),
            procs: Vec::new(),
            tasks: None,
            limits: Vec::new(),
            written: None,
            passed_over: 0,
        };
        match place {
            Place::V1 { pids, memory: mem } => {
                // v1's `tasks`, not `cgroup.procs`: the child joins between `fork` and `exec`,
                // while it is one thread, and the kernel moves the writing thread alone without
                // the write lock on every thread group that moving a whole process takes, which
                // waits for an RCU grace period (7-27 ms here after a second with no move,
                // against 0.5 ms through `tasks`).
                let pids = made.make(pids, &name, "tasks")?;
                let mem = made.make(mem, &name, "tasks")?;
                // Kept, so that a pooled cgroup takes the next box's limits, not its first one's.
                made.limits = vec![
                    (pids.join("pids.max"), Limit::Processes),
                    (
                        mem.join("memory.memsw.limit_in_bytes"),
                        Limit::MemoryAndSwap,
                    ),
                    (mem.join("memory.limit_in_bytes"), Limit::Memory),
                ];
            }
            Place::V2(parent) => {
                fs::create_dir_all(parent).map_err(|e| named(parent, e))?;
                write(&parent.join("cgroup.subtree_control"), "+pids +memory")?;
                // v2 moves a thread alone only within a threaded subtree: the whole process it is.
                let dir = made.make(parent, &name, "cgroup.procs")?;
                made.limits = vec![
                    (dir.join("pids.max"), Limit::Processes),
                    (dir.join("memory.max"), Limit::Memory),
                ];
                // Best effort: without swap accounting the file is absent.
                let _ = write(&dir.join("memory.swap.max"), "0");
            }
        }
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
        self.tasks.get_or_insert_with(|| procs.clone());
        let file = OpenOptions::new()
            .write(true)
            .open(&procs)
            .map_err(|e| named(&procs, e))?;
        self.procs.push(file);
        Ok(dir)
    }

    /// Sets its limits for the next box. Writes only what changed.
    fn set_limits(&mut self, processes: u64, memory: u64) -> io::Result<()> {
        if self.written == Some((processes, memory)) {
            return Ok(());
        }
        // v1 refuses a memory limit above the memory-and-swap one and the reverse, so the one
        // that makes room goes first: memory-and-swap when the limit goes up, memory when it
        // goes down (as it does from a new cgroup's "unlimited").
        let raising = self.written.is_some_and(|(_, before)| memory > before);
        let order: Vec<&(PathBuf, Limit)> = if raising {
            self.limits.iter().collect()
        } else {
            self.limits.iter().rev().collect()
        };
        let (processes_before, memory_before) = self.written.unzip();
        for (file, limit) in order {
            let (value, before) = match limit {
                Limit::Processes => (processes, processes_before),
                Limit::Memory | Limit::MemoryAndSwap => (memory, memory_before),
            };
            if before == Some(value) {
                continue;
            }
            let written = write(file, &value.to_string());
            if *limit != Limit::MemoryAndSwap {
                written?;
            }
        }
        self.written = Some((processes, memory));
        Ok(())
    }

    /// How many processes are still charged to it: after [`BoxCgroup::lists_no_process`],
    /// those that have exited but are not reaped yet (`u64::MAX` when it cannot be read).
    fn unreaped(&self) -> u64 {
        let Some((limit, _)) = self.limits.iter().find(|(_, l)| *l == Limit::Processes) else {
            return 0;
        };
        limit
            .parent()
            .and_then(|dir| fs::read_to_string(dir.join("pids.current")).ok())
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(u64::MAX)
    }

    /// Whether no process is listed in it any more. Every process of a box joins all its
    /// cgroups at once (its first process, before `exec`) and none can leave, so the first
    /// cgroup answers for all.
    fn lists_no_process(&self) -> bool {
        self.dirs.first().is_none_or(|dir| {
            fs::read_to_string(dir.join("cgroup.procs")).is_ok_and(|t| t.trim().is_empty())
        })
    }

    /// The descriptors the child writes `0` to, to join (close-on-exec, as std opens them).
    fn join_fds(&self) -> Vec<RawFd> {
        self.procs.iter().map(AsRawFd::as_raw_fd).collect()
    }

    /// Kills every process still in the box's cgroups, until none is listed (or about 200 ms
    /// have passed); whether none is.
    fn kill_all(&self) -> bool {
        self.dirs.first().is_none_or(|dir| kill_procs_in(dir))
    }

    /// Kills every process still in the box's cgroups, until each task listed is in the
    /// kernel's exit (or about 200 ms have passed); whether each is.
    fn kill_until_ending(&self) -> bool {
        self.tasks.as_deref().is_none_or(kill_until_ending)
    }
}

/// Kills every process in the cgroup `dir`, and waits (up to about 200 ms) until none is
/// listed; whether none is.
fn kill_procs_in(dir: &Path) -> bool {
    // A process killed (or ending on its own: a box's init right after its command) stays
    // listed for a moment. The first looks come soon, since a box's last process is usually
    // gone within a few tens of microseconds (measured: a flat 2 ms wait here was paid by
    // more than half of all fresh boxes, on the call's path), then further apart.
    let mut pause = std::time::Duration::from_micros(50);
    let until = std::time::Instant::now() + std::time::Duration::from_millis(200);
    loop {
        match kill_listed_in(dir) {
            None => return false,
            Some(0) => return true,
            Some(_) if std::time::Instant::now() >= until => return false,
            Some(_) => {}
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(2));
    }
}

/// Kills every task the cgroup list `tasks` holds until each was killed at an earlier look and
/// is in the kernel's exit (out of user space and of every system call: it runs nothing
/// more), or none is listed; whether that was reached within about 200 ms. A process whose
/// first thread has ended while others run is not on its way out: where the list holds each
/// thread (v1's `tasks`), each is looked at.
///
/// A box's init is often still listed for a few hundred microseconds after its command ended,
/// while the kernel tears its mount namespace down (measured: a median of 0.36 ms waited in
/// `kill_procs_in` at the end of a fresh box). That wait is not the call's: the cgroup goes
/// back to the pool, which takes it again only once it lists no process.
fn kill_until_ending(tasks: &Path) -> bool {
    let mut killed: Vec<i32> = Vec::new();
    let mut pause = std::time::Duration::from_micros(50);
    let until = std::time::Instant::now() + std::time::Duration::from_millis(200);
    loop {
        let Some(pids) = read_ids(tasks) else {
            return false;
        };
        if pids
            .iter()
            .all(|pid| killed.contains(pid) && is_ending(*pid))
        {
            return true;
        }
        let first = killed.is_empty();
        for &pid in &pids {
            kill(pid);
            if !killed.contains(&pid) {
                killed.push(pid);
            }
        }
        if std::time::Instant::now() >= until {
            return false;
        }
        // The first look after a kill comes at once: a process already on its way out (the
        // init, once its command has ended) needs nothing more.
        if !first {
            std::thread::sleep(pause);
            pause = (pause * 2).min(std::time::Duration::from_millis(2));
        }
    }
}

/// Whether the thread `pid` is in the kernel's exit (`PF_EXITING` in its flags), or gone.
fn is_ending(pid: i32) -> bool {
    /// The flag the kernel sets as a process starts its exit (`include/linux/sched.h`).
    const PF_EXITING: u64 = 0x4;
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    // After the command's name, which may hold anything but ends at the last `)`: state,
    // ppid, pgrp, session, tty, tpgid, flags.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(6))
        .and_then(|flags| flags.parse::<u64>().ok())
        .is_some_and(|flags| flags & PF_EXITING != 0)
}

/// The ids a cgroup's list file (`cgroup.procs`, `tasks`) holds (`None`: it cannot be read).
fn read_ids(list: &Path) -> Option<Vec<i32>> {
    let text = fs::read_to_string(list).ok()?;
    Some(text.lines().filter_map(|l| l.trim().parse().ok()).collect())
}

/// `SIGKILL` to the process of `pid` (a thread's id signals its whole process).
fn kill(pid: i32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}

/// Sends `SIGKILL` to each process the cgroup `dir` lists; how many it listed (`None`: its
/// list cannot be read).
fn kill_listed_in(dir: &Path) -> Option<usize> {
    let pids = read_ids(&dir.join("cgroup.procs"))?;
    for &pid in &pids {
        kill(pid);
    }
    Some(pids.len())
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

#[cfg(test)]
mod tests {
    use super::is_ending;

    #[test]
    fn a_running_process_is_not_ending_and_a_killed_one_is() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        assert!(!is_ending(pid), "a sleeping process");
        assert!(!is_ending(i32::try_from(std::process::id()).unwrap()));
        child.kill().unwrap();
        // Killed and not yet reaped: a zombie, its exit done.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !is_ending(pid) && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        assert!(is_ending(pid), "a killed process");
        child.wait().unwrap();
        assert!(is_ending(pid), "a reaped process is gone");
    }
}
