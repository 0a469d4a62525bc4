//! `git_clone`: one `https://` repository into a new folder, the host checked and pinned.
//!
//! The URL's host is checked as `http_fetch` checks a hop ([`crate::web::check_url_host`]: the
//! broker's grant check, resolution, every address classified, private ones only for a host a
//! grant names), then git runs contained with
//! `-c http.followRedirects=false -c http.curloptResolve=HOST:PORT:<checked addresses>
//! -c protocol.allow=never -c protocol.https.allow=always`, so it connects to the checked
//! addresses only, over https only, and follows no redirect. In a box ([`CloneOptions::walls`],
//! a policy whose network is the caller's proxy of the granted hosts) git is not pinned: it
//! reaches the host through the box's `HTTPS_PROXY`, and the proxy checks the host and its
//! addresses again and connects to the ones it checked. The clone is bounded in time (the
//! call's limit) and in size: the destination's bytes on disk are summed every
//! [`WATCH_EVERY`] and git is killed once they pass `max_bytes`. A clone that fails, times out
//! or grows too large leaves nothing behind (the folder is removed, or emptied if it existed).

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::web::{FetchError, FetchOptions, check_url_host};
use tools::git::{
    GitCloneArgs, GitContainment, GitError, Run, SSH_NOT_SUPPORTED, exit_code, git_env, millis,
    run_git, signal,
};
use tools::shell::{Containment, HEAD_BYTES, TAIL_BYTES};

/// How often the destination's size is summed during a clone.
pub const WATCH_EVERY: Duration = Duration::from_millis(100);

/// How `git_clone` runs.
#[derive(Debug, Clone)]
pub struct CloneOptions {
    /// The host check, the resolver, the explicit hosts and the trusted roots (PEM) of
    /// `http_fetch`; its `timeout` is the whole clone's time limit.
    pub fetch: FetchOptions,
    /// The most bytes the clone may write.
    pub max_bytes: u64,
    /// Where git runs: contained from the caller (the default, pinned to the checked
    /// addresses), or in a box whose policy binds the destination's folder read-write and
    /// reaches the host through its network (the trusted roots file is bound in read-only).
    pub walls: GitContainment,
}

impl CloneOptions {
    /// 1 GiB.
    pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;

    /// A clone under `fetch`'s checks and time limit, at most [`Self::DEFAULT_MAX_BYTES`].
    pub fn new(fetch: FetchOptions) -> CloneOptions {
        CloneOptions {
            fetch,
            max_bytes: Self::DEFAULT_MAX_BYTES,
            walls: GitContainment::Contained,
        }
    }
}

/// What a clone did. A git that failed is a result too (with nothing left behind).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CloneResult {
    /// The URL cloned.
    pub url: String,
    /// The folder cloned into.
    pub path: String,
    /// The address git was pinned to (the first checked one).
    pub address: String,
    /// Git's exit status, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// Whether it was killed at the time limit.
    pub timed_out: bool,
    /// Whether it was killed for writing more than `max_bytes`.
    pub too_large: bool,
    /// The clone's bytes on disk at the end (0 once a failed clone is removed).
    pub bytes: u64,
    /// Git's output, merged, bounded and cleaned.
    pub output: String,
    /// Whether the output was cut.
    pub truncated: bool,
    /// How long it took, in milliseconds.
    pub duration_ms: u64,
    /// How git's processes were held.
    pub containment: Containment,
}

impl CloneResult {
    /// Whether the clone is there: git exited 0 in time and within the size.
    pub fn cloned(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out && !self.too_large
    }
}

/// Why a clone failed: git's reasons, or the host check's.
#[derive(Debug, thiserror::Error)]
pub enum CloneError {
    /// The URL, the destination, or git itself.
    #[error(transparent)]
    Git(#[from] GitError),
    /// The host check refused the URL's host.
    #[error(transparent)]
    Host(#[from] FetchError),
}

/// Clones `args.url` into `args.path` (see the module docs).
pub fn git_clone(args: &GitCloneArgs, options: &CloneOptions) -> Result<CloneResult, CloneError> {
    let started = Instant::now();
    if args.url.starts_with("git@") || args.url.starts_with("ssh://") {
        return Err(GitError::Url(SSH_NOT_SUPPORTED.to_string()).into());
    }
    if !args.url.starts_with("https://") {
        return Err(GitError::Url(format!(
            "{:?} is not an https:// URL: git_clone clones only over https",
            args.url
        ))
        .into());
    }
    let destination = PathBuf::from(&args.path);
    let existed = check_destination(&destination)?;
    let checked = check_url_host(&args.url, &options.fetch)?;
    let Some(first) = checked.addresses.first().copied() else {
        return Err(GitError::Url(format!("{} has no address", checked.host)).into());
    };
    let roots = RootsFile::write(&options.fetch.root_certificates)?;
    let mut command: Vec<OsString> = vec!["--no-pager".into()];
    let mut set = |setting: String| {
        command.push("-c".into());
        command.push(setting.into());
    };
    set("http.followRedirects=false".to_string());
    let boxed = matches!(options.walls, GitContainment::Boxed(_));
    // In a box the proxy resolves and pins; a pin here would only be unused.
    if !checked.literal && !boxed {
        let addresses: Vec<String> = checked
            .addresses
            .iter()
            .map(|ip| match ip {
                std::net::IpAddr::V4(v4) => v4.to_string(),
                std::net::IpAddr::V6(v6) => format!("[{v6}]"),
            })
            .collect();
        set(format!(
            "http.curloptResolve={}:{}:{}",
            checked.host,
            checked.port,
            addresses.join(",")
        ));
    }
    set("protocol.allow=never".to_string());
    set("protocol.https.allow=always".to_string());
    if let Some(roots) = &roots {
        set(format!("http.sslCAInfo={}", roots.0.display()));
    }
    // The URL with its host as checked and pinned (`Example.COM.` and `bücher.de` would
    // otherwise be looked up by git under another name than the pin's).
    command.extend(
        ["clone", "--no-recurse-submodules", "--", &checked.url]
            .map(OsString::from)
            .into_iter()
            .chain([destination.clone().into_os_string()]),
    );
    let watch = SizeWatch::start(&destination, options.max_bytes);
    let mut on_start = |stopper: sandbox::Stopper| watch.follow(stopper);
    let cwd = destination.parent().unwrap_or(Path::new("/")).to_path_buf();
    let walls = match (&options.walls, &roots) {
        (GitContainment::Boxed(policy), Some(roots)) => {
            let mut policy = policy.clone();
            policy.read_only.push(roots.0.clone());
            GitContainment::Boxed(policy)
        }
        (walls, _) => walls.clone(),
    };
    let ran = run_git(
        command,
        &cwd,
        git_env(None, &[]),
        Run {
            walls: &walls,
            timeout: options
                .fetch
                .timeout
                .saturating_sub(started.elapsed())
                .max(Duration::from_millis(1)),
            head_bytes: HEAD_BYTES,
            tail_bytes: TAIL_BYTES,
            on_start: Some(&mut on_start),
        },
    );
    let too_large = watch.stop();
    drop(roots);
    let ran = match ran {
        Ok(ran) => ran,
        Err(error) => {
            remove_clone(&destination, existed);
            return Err(error.into());
        }
    };
    let mut result = CloneResult {
        url: args.url.clone(),
        path: args.path.clone(),
        address: first.to_string(),
        exit_code: exit_code(&ran),
        signal: signal(&ran),
        timed_out: ran.timed_out,
        too_large: too_large || size_of(&destination) > options.max_bytes,
        bytes: 0,
        truncated: ran.merged.cut() > 0,
        output: ran.merged.text(),
        duration_ms: 0,
        containment: ran.containment,
    };
    if result.cloned() {
        result.bytes = size_of(&destination);
    } else {
        remove_clone(&destination, existed);
    }
    result.duration_ms = millis(started);
    Ok(result)
}

/// The destination must be absolute, and not exist yet (its parent being a folder) or be an
/// empty folder (not a link). Returns whether it existed.
fn check_destination(destination: &Path) -> Result<bool, GitError> {
    let shown = destination.display();
    if !destination.is_absolute() {
        return Err(GitError::Destination(format!(
            "{shown} is not an absolute path"
        )));
    }
    match std::fs::symlink_metadata(destination) {
        Ok(meta) if meta.is_dir() => {
            let empty = std::fs::read_dir(destination)
                .map_err(|e| GitError::Destination(format!("cannot read {shown}: {e}")))?
                .next()
                .is_none();
            if empty {
                Ok(true)
            } else {
                Err(GitError::Destination(format!(
                    "{shown} is not empty: clone into a new or empty folder"
                )))
            }
        }
        Ok(_) => Err(GitError::Destination(format!(
            "{shown} exists and is not a folder"
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let parent_is_dir = destination
                .parent()
                .and_then(|p| std::fs::symlink_metadata(p).ok())
                .is_some_and(|m| m.is_dir());
            if parent_is_dir {
                Ok(false)
            } else {
                Err(GitError::Destination(format!(
                    "the folder {shown} would be made in does not exist"
                )))
            }
        }
        Err(e) => Err(GitError::Destination(format!("cannot read {shown}: {e}"))),
    }
}

/// Removes what a failed clone left: the folder it made, or the contents of the empty folder
/// it was given. Links are removed, never followed.
fn remove_clone(destination: &Path, existed: bool) {
    if !existed {
        let _ = std::fs::remove_dir_all(destination);
        return;
    }
    if let Ok(entries) = std::fs::read_dir(destination) {
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = std::fs::remove_dir_all(&path);
            } else {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}

/// The bytes of every file below `path` (links not followed; blocks on disk are not counted).
pub(crate) fn size_of(path: &Path) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![path.to_path_buf()];
    while let Some(folder) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                total = total.saturating_add(meta.len());
            }
        }
    }
    total
}

/// The trusted roots git is given (`http.sslCAInfo`), in a file of the broker's temporary
/// folder (mode 0600) removed when dropped; only when roots are configured (tests).
struct RootsFile(PathBuf);

impl RootsFile {
    fn write(roots: &[Vec<u8>]) -> Result<Option<RootsFile>, GitError> {
        if roots.is_empty() {
            return Ok(None);
        }
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("boxmaker-git-roots-{}-{n}.pem", std::process::id()));
        let setup = |e: std::io::Error| GitError::Setup(format!("{}: {e}", path.display()));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(setup)?;
        let file_guard = RootsFile(path.clone());
        for (index, root) in roots.iter().enumerate() {
            if !root.trim_ascii_start().starts_with(b"-----BEGIN") {
                return Err(GitError::Setup(format!(
                    "root certificate {index} is not PEM, which git needs"
                )));
            }
            file.write_all(root).map_err(setup)?;
            file.write_all(b"\n").map_err(setup)?;
        }
        Ok(Some(file_guard))
    }
}

impl Drop for RootsFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A thread that sums the destination's size while git runs and stops git's box (every
/// process of it, through the box's own [`sandbox::Stopper`], never a process id that could
/// have been reused) once it passes the limit.
struct SizeWatch {
    stopper: Arc<Mutex<Option<sandbox::Stopper>>>,
    done: Arc<AtomicBool>,
    exceeded: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SizeWatch {
    fn start(destination: &Path, max_bytes: u64) -> SizeWatch {
        let stopper: Arc<Mutex<Option<sandbox::Stopper>>> = Arc::new(Mutex::new(None));
        let done = Arc::new(AtomicBool::new(false));
        let exceeded = Arc::new(AtomicBool::new(false));
        let thread = {
            let (stopper, done, exceeded) = (
                Arc::clone(&stopper),
                Arc::clone(&done),
                Arc::clone(&exceeded),
            );
            let destination = destination.to_path_buf();
            std::thread::Builder::new()
                .name("git_clone-size".to_string())
                .spawn(move || {
                    while !done.load(Ordering::SeqCst) {
                        std::thread::sleep(WATCH_EVERY);
                        if size_of(&destination) <= max_bytes {
                            continue;
                        }
                        exceeded.store(true, Ordering::SeqCst);
                        if let Ok(held) = stopper.lock()
                            && let Some(stopper) = held.as_ref()
                        {
                            stopper.stop();
                        }
                        return;
                    }
                })
                .ok()
        };
        SizeWatch {
            stopper,
            done,
            exceeded,
            thread,
        }
    }

    fn follow(&self, stopper: sandbox::Stopper) {
        if let Ok(mut held) = self.stopper.lock() {
            *held = Some(stopper);
        }
    }

    /// Stops the watch; whether the limit was passed.
    fn stop(mut self) -> bool {
        self.done.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.exceeded.load(Ordering::SeqCst)
    }
}
