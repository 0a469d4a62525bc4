//! The warm boxes of the file tools and of `shell`: instead of a fresh box per call, each
//! session keeps one box per granted folder and access for the file tools (read-only for
//! `read_file` and the walkers, read-write for `write_file` and `edit_file`) with
//! `brokerd box-file --warm` inside, which answers one request line after another
//! (`sandbox::spawn_warm`), and one box per `shell` policy (the deciding grant's folders) with
//! the sandbox's command worker inside, which forks each command (`sandbox::spawn_command_worker`). A box is the one a fresh call would
//! get, built the same way from the same policy; what changes is that it serves the next call
//! too, which then costs about a pipe round trip instead of bubblewrap, seccomp, Landlock and a
//! cgroup.
//!
//! A box is used again only for a call whose box would be the same: the same session, the same
//! folder and access, and the same files under the same names: the granted folder, each ignore
//! file bound beside it and each protected folder by device and inode (or absence), so a
//! folder renamed and replaced, a new ignore file or a protected folder made since the box was
//! built get a new box. Without bubblewrap a folder holding a protected folder is never kept
//! warm (Landlock's rules list its entries as they were when the box was built).
//!
//! A box ends when its session ends ([`WarmPool::end_session`]), after `warm_idle_ms` unused,
//! after [`LIFETIME`] or [`MAX_CALLS`] calls, when [`MAX_PARKED`] others are newer, and at
//! once after any exchange that fails (the deadline included), as a fresh box would. Boxes
//! are spawned from one thread that lives as long as the pool, since a box's parent-death
//! signal follows the thread that spawned it; that thread also ends the idle ones.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use proto::SessionId;

/// The longest a box lives, however busy.
pub const LIFETIME: Duration = Duration::from_secs(30 * 60);

/// The most calls one box answers.
pub const MAX_CALLS: u32 = 1000;

/// The most boxes kept waiting, over every session.
pub const MAX_PARKED: usize = 16;

/// How often the spawning thread looks for boxes idle too long.
const SWEEP: Duration = Duration::from_secs(1);

/// What a box is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Use {
    /// brokerd's file worker, read-only or read-write (`writes`).
    Files { writes: bool },
    /// The sandbox's command worker (`shell`, and git for `git_status` and `git_diff`), with
    /// this many of its folders read-write and this many read-only (the rest pinned), so a
    /// read-only box is never the read-write one of the same folders.
    Commands { read_write: usize, read_only: usize },
    /// brokerd's fetcher (`http_fetch`), its network the proxy it was built with.
    Fetch,
}

/// What a box keeps beside itself for its whole life (a fetcher's proxy), ended after it.
pub type Kept = Arc<dyn std::any::Any + Send + Sync>;

/// An exchange's answer line and how its box came about, or why there is none.
pub type Exchanged = Result<(Vec<u8>, Reuse), String>;

/// What makes two calls' boxes the same.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    session: SessionId,
    what: Use,
    /// The policy's folders, in order: for the file tools the granted folder, then the ignore
    /// files bound beside it; for commands the read-write folders, then the read-only ones.
    bound: Vec<PathBuf>,
    /// Device and inode of each bound path, then of each protected folder (`None`: absent).
    ids: Vec<Option<(u64, u64)>>,
}

impl Key {
    /// The key of a file call of `session` in `folders` (the granted folder first, then the
    /// git-controlled places a write's grant names; read-write when `writes`), with `ignores`
    /// bound beside them and `masked` masked.
    pub fn of(
        session: &SessionId,
        writes: bool,
        folders: &[PathBuf],
        ignores: &[PathBuf],
        masked: &[PathBuf],
    ) -> Key {
        let mut bound = Vec::with_capacity(folders.len() + ignores.len());
        bound.extend(folders.iter().cloned());
        bound.extend(ignores.iter().cloned());
        let ids = folders
            .iter()
            .map(|p| std::fs::metadata(p).ok())
            .chain(ignores.iter().map(|p| p.symlink_metadata().ok()))
            .chain(masked.iter().map(|p| std::fs::metadata(p).ok()))
            .map(|m| m.map(|m| (m.dev(), m.ino())))
            .collect();
        Key {
            session: session.clone(),
            what: Use::Files { writes },
            bound,
            ids,
        }
    }

    /// The key of `session`'s fetcher: one per session, holding no folder of the host's.
    pub fn fetch(session: &SessionId) -> Key {
        Key {
            session: session.clone(),
            what: Use::Fetch,
            bound: Vec::new(),
            ids: Vec::new(),
        }
    }

    /// The key of a command of `session` in a box of `policy`. Its pinned places are part of
    /// it: a repository made since the box was built (`git init` in it) has hooks and a
    /// configuration the next call's box keeps unchanged, so that call gets a new box.
    pub fn commands(session: &SessionId, policy: &sandbox::Policy) -> Key {
        let bound: Vec<PathBuf> = policy
            .read_write
            .iter()
            .chain(&policy.read_only)
            .chain(&policy.pinned)
            .cloned()
            .collect();
        let ids = bound
            .iter()
            .chain(&policy.masked)
            .map(|p| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino())))
            .collect();
        Key {
            session: session.clone(),
            what: Use::Commands {
                read_write: policy.read_write.len(),
                read_only: policy.read_only.len(),
            },
            bound,
            ids,
        }
    }
}

/// A box waiting for its next call.
struct Parked {
    warm: sandbox::WarmBox,
    /// Dropped after the box (fields drop in order): what the box uses from outside.
    kept: Option<Kept>,
    born: Instant,
    last: Instant,
    calls: u32,
}

impl Parked {
    /// Whether it may serve another call at `now`.
    fn usable(&self, now: Instant, idle_for: Duration) -> bool {
        now.duration_since(self.last) < idle_for
            && now.duration_since(self.born) < LIFETIME
            && self.calls < MAX_CALLS
    }
}

/// A box to spawn, and where to send it.
struct Spawn {
    /// The worker to start in it: `None` for the sandbox's command worker.
    spec: Option<sandbox::CommandSpec>,
    policy: sandbox::Policy,
    reply: mpsc::SyncSender<Result<sandbox::WarmBox, sandbox::BoxError>>,
}

/// How a call's box came about, for the tests and the benches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reuse {
    /// A waiting box answered.
    Warm,
    /// A new box was built for it (and kept for the next call).
    Built,
}

/// The warm boxes of every session.
pub struct WarmPool {
    idle_for: Duration,
    parked: Arc<Mutex<HashMap<Key, Parked>>>,
    /// The sessions ended lately (the newest [`ENDED_KEPT`]), written and read under
    /// `parked`'s lock: a box in use when its session ended is not parked after its call.
    ended: Mutex<std::collections::VecDeque<SessionId>>,
    spawner: OnceLock<Mutex<mpsc::Sender<Spawn>>>,
}

/// How many ended sessions the pool remembers; a box of one it has forgotten still ends after
/// `warm_idle_ms`.
const ENDED_KEPT: usize = 4096;

impl WarmPool {
    /// A pool whose boxes end after `idle_for` unused; zero keeps none.
    pub fn new(idle_for: Duration) -> WarmPool {
        WarmPool {
            idle_for,
            parked: Arc::new(Mutex::new(HashMap::new())),
            ended: Mutex::new(std::collections::VecDeque::new()),
            spawner: OnceLock::new(),
        }
    }

    /// Whether boxes are kept at all.
    pub fn enabled(&self) -> bool {
        !self.idle_for.is_zero()
    }

    /// How many boxes wait now.
    pub fn parked(&self) -> usize {
        self.parked.lock().map(|p| p.len()).unwrap_or(0)
    }

    /// Sends `request` (one line) to the box for `key`, a waiting one or a new one built from
    /// `spec` and `policy`, and returns its answer line within `limit`, at most `cap` bytes.
    pub fn exchange(
        &self,
        key: Key,
        spec: &sandbox::CommandSpec,
        policy: &sandbox::Policy,
        request: &[u8],
        limit: Duration,
        cap: usize,
    ) -> Exchanged {
        let built = || Ok((policy.clone(), None));
        self.exchange_kept(key, spec, built, |_| {}, |_| {}, request, limit, cap)
            .0
    }

    /// [`WarmPool::exchange`] for a box that keeps something of its own for its life: a new
    /// box is built from what `build` gives (its policy and what it keeps); `prepare` sees what
    /// the box keeps just before the request is sent, and `finish` right after the exchange,
    /// whatever came of it, before the box waits for another call. What `finish` gave for the
    /// last box tried comes back beside the answer.
    #[allow(clippy::too_many_arguments)]
    pub fn exchange_kept<F>(
        &self,
        key: Key,
        spec: &sandbox::CommandSpec,
        build: impl FnOnce() -> Result<(sandbox::Policy, Option<Kept>), String>,
        mut prepare: impl FnMut(Option<&Kept>),
        mut finish: impl FnMut(Option<&Kept>) -> F,
        request: &[u8],
        limit: Duration,
        cap: usize,
    ) -> (Exchanged, Option<F>) {
        let deadline = Instant::now() + limit;
        let mut finished = None;
        let answer = self.serve(key, Some(spec), build, |warm, kept, sent| {
            prepare(kept);
            let answer = warm.exchange(request, deadline, cap, sent);
            finished = Some(finish(kept));
            answer
        });
        (answer, finished)
    }

    /// Runs `spec` in the command worker's box for `key` (a waiting one, or a new one built
    /// from `policy`): its output to the sinks as it comes, at most `timeout` (each of its
    /// processes at most `cpu_seconds` of CPU, all of them at most `output_bytes` of output).
    #[allow(clippy::too_many_arguments)]
    pub fn run_command(
        &self,
        key: Key,
        policy: &sandbox::Policy,
        spec: &sandbox::CommandSpec,
        timeout: Duration,
        cpu_seconds: u64,
        output_bytes: u64,
        on_stdout: &mut dyn FnMut(&[u8]),
        on_stderr: &mut dyn FnMut(&[u8]),
    ) -> Result<(sandbox::Ended, Reuse), String> {
        let built = || Ok((policy.clone(), None));
        self.serve(key, None, built, |warm, _, sent| {
            warm.run_command(
                spec,
                timeout,
                cpu_seconds,
                output_bytes,
                &mut *on_stdout,
                &mut *on_stderr,
                sent,
            )
        })
    }

    /// Runs `run` on the box for `key`: the waiting one, or (when none waits, or the one
    /// waiting was gone before the request reached it, so nothing ran) a new one built from
    /// what `build` gives (its policy, and what it keeps) with `spec` as its worker (`None`: the command worker). A box that served is
    /// kept for the next call; one that failed is dropped, which kills it.
    fn serve<T>(
        &self,
        key: Key,
        spec: Option<&sandbox::CommandSpec>,
        build: impl FnOnce() -> Result<(sandbox::Policy, Option<Kept>), String>,
        mut run: impl FnMut(
            &mut sandbox::WarmBox,
            Option<&Kept>,
            &mut sandbox::Sent,
        ) -> Result<T, sandbox::WarmError>,
    ) -> Result<(T, Reuse), String> {
        if let Some(parked) = self.take(&key) {
            let mut sent = sandbox::Sent::default();
            let Parked {
                mut warm,
                kept,
                born,
                calls,
                ..
            } = parked;
            match run(&mut warm, kept.as_ref(), &mut sent) {
                Ok(answer) => {
                    self.park(key, warm, kept, born, calls + 1);
                    return Ok((answer, Reuse::Warm));
                }
                Err(e) if e.before_request(&sent) => {
                    tracing::debug!(error = %e, "a warm box had ended; building another");
                    // The box first, then what it kept (its proxy).
                    drop(warm);
                    drop(kept);
                }
                Err(e) => {
                    drop(warm);
                    drop(kept);
                    return Err(e.to_string());
                }
            }
        }
        let (policy, kept) = build()?;
        let mut warm = self.spawn(spec, &policy)?;
        let born = Instant::now();
        let mut sent = sandbox::Sent::default();
        let answer = match run(&mut warm, kept.as_ref(), &mut sent) {
            Ok(answer) => answer,
            Err(e) => {
                drop(warm);
                drop(kept);
                return Err(e.to_string());
            }
        };
        self.park(key, warm, kept, born, 1);
        Ok((answer, Reuse::Built))
    }

    /// Ends the boxes of `session`, and any of its boxes in use once its call is over; returns
    /// how many ended now.
    pub fn end_session(&self, session: &SessionId) -> usize {
        let ended: Vec<Parked> = match self.parked.lock() {
            Ok(mut parked) => {
                if let Ok(mut ended) = self.ended.lock() {
                    if ended.len() >= ENDED_KEPT {
                        ended.pop_front();
                    }
                    ended.push_back(session.clone());
                }
                let keys: Vec<Key> = parked
                    .keys()
                    .filter(|k| &k.session == session)
                    .cloned()
                    .collect();
                keys.iter().filter_map(|k| parked.remove(k)).collect()
            }
            Err(_) => Vec::new(),
        };
        // Dropped outside the lock: each drop kills a box and reaps it.
        ended.len()
    }

    /// The waiting box for `key`, if it may still serve. Whether it is still there and
    /// quiet is the exchange's first question (`WarmError::before_request` when not), not
    /// asked twice.
    fn take(&self, key: &Key) -> Option<Parked> {
        let parked = self.parked.lock().ok()?.remove(key)?;
        parked
            .usable(Instant::now(), self.idle_for)
            .then_some(parked)
    }

    /// Keeps `warm` for the next call with `key`, unless it has served its share; the oldest
    /// waiting box ends when too many wait.
    fn park(
        &self,
        key: Key,
        warm: sandbox::WarmBox,
        kept: Option<Kept>,
        born: Instant,
        calls: u32,
    ) {
        let parked = Parked {
            warm,
            kept,
            born,
            last: Instant::now(),
            calls,
        };
        if !parked.usable(parked.last, self.idle_for) {
            return;
        }
        let mut ended = Vec::new();
        if let Ok(mut map) = self.parked.lock() {
            // Its session ended while it served: it ends too (dropped below, outside the lock).
            let gone = self
                .ended
                .lock()
                .is_ok_and(|e| e.iter().any(|s| s == &key.session));
            if gone {
                ended.push(parked);
            } else if let Some(before) = map.insert(key, parked) {
                ended.push(before);
            }
            while map.len() > MAX_PARKED {
                let oldest = map
                    .iter()
                    .min_by_key(|(_, p)| p.last)
                    .map(|(k, _)| k.clone());
                match oldest.and_then(|k| map.remove(&k)) {
                    Some(p) => ended.push(p),
                    None => break,
                }
            }
        }
        drop(ended);
    }

    /// A new box, spawned by the pool's thread, with `spec` as its worker (`None`: the
    /// sandbox's command worker).
    fn spawn(
        &self,
        spec: Option<&sandbox::CommandSpec>,
        policy: &sandbox::Policy,
    ) -> Result<sandbox::WarmBox, String> {
        let spawner = self.spawner.get_or_init(|| Mutex::new(self.start_thread()));
        let (reply, answer) = mpsc::sync_channel(1);
        let job = Spawn {
            spec: spec.cloned(),
            policy: policy.clone(),
            reply,
        };
        spawner
            .lock()
            .map_err(|_| "the warm boxes' thread is gone".to_string())?
            .send(job)
            .map_err(|_| "the warm boxes' thread is gone".to_string())?;
        match answer.recv() {
            Ok(Ok(warm)) => Ok(warm),
            Ok(Err(e)) => Err(super::box_error::box_error(e)),
            Err(_) => Err("the warm boxes' thread is gone".to_string()),
        }
    }

    /// The thread that spawns every box and ends the idle ones; it ends with the pool.
    fn start_thread(&self) -> mpsc::Sender<Spawn> {
        let (send, receive) = mpsc::channel::<Spawn>();
        let parked = Arc::downgrade(&self.parked);
        let idle_for = self.idle_for;
        let started = std::thread::Builder::new()
            .name("warm-boxes".to_string())
            .spawn(move || {
                loop {
                    match receive.recv_timeout(SWEEP) {
                        Ok(job) => {
                            let _ = job.reply.send(match &job.spec {
                                Some(spec) => sandbox::spawn_warm(spec, &job.policy),
                                None => sandbox::spawn_command_worker(&job.policy),
                            });
                        }
                        Err(RecvTimeoutError::Timeout) => {
                            let Some(parked) = parked.upgrade() else {
                                break;
                            };
                            sweep(&parked, idle_for);
                        }
                        Err(RecvTimeoutError::Disconnected) => break,
                    }
                }
            });
        if let Err(error) = started {
            tracing::error!(%error, "cannot start the warm boxes' thread");
        }
        send
    }
}

/// Ends the boxes that may not serve again.
fn sweep(parked: &Mutex<HashMap<Key, Parked>>, idle_for: Duration) {
    let now = Instant::now();
    let ended: Vec<Parked> = match parked.lock() {
        Ok(mut map) => {
            let keys: Vec<Key> = map
                .iter()
                .filter(|(_, p)| !p.usable(now, idle_for))
                .map(|(k, _)| k.clone())
                .collect();
            keys.iter().filter_map(|k| map.remove(k)).collect()
        }
        Err(_) => Vec::new(),
    };
    drop(ended);
}
