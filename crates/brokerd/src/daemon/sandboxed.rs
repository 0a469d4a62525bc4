//! The runner with the box: each `shell` call runs in a fresh bubblewrap box
//! (`sandbox::spawn_boxed`) that binds the deciding grant's folders read-write, the
//! `[sandbox] read_only` folders read-only, masks boxmaker's protected folders inside them, and
//! has no network, unless the deciding grant names hosts: then only those, through a proxy of
//! its own ([`super::proxy`]) that the box reaches by its relay (`sandbox::Network`); inside
//! it, launched through brokerd's own binary, Landlock over the same paths. Where bubblewrap or user namespaces are missing (or `[sandbox] bubblewrap = false`),
//! the box is Landlock, seccomp, rlimits and the cgroup alone, and the walls sentence of every
//! answer says so (the owner's: the model's header keeps a token, [`super::render::owner_walls`]). The
//! file tools and the walkers run in brokerd's worker in a box ([`super::worker`]);
//! `http_fetch` in a fresh box whose proxy decides each hop (`sandboxed/fetch.rs`), `git_clone`
//! in one whose proxy allows its grant's hosts; every other tool runs as the [`DirectRunner`]
//! runs it.

pub use super::box_error::box_error;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::config::SandboxConfig;
use super::runner::{DirectRunner, Outcome, RunContext, Runner, shell};
use policy::args::ToolArgs;
use policy::decide::{Allowed, Scope};

mod beside;
mod fetch;
mod files;
mod git;
mod keep;
mod snapshot;
mod walls;
mod watch;

use beside::{FETCH_WORKER, FILE_WORKER, LAUNCHER, beside};
pub use fetch::fetch_boxed;
pub use files::{FILE_UNBOXED, file_boxed};
pub use git::{GIT_UNBOXED, clone_boxed, git_boxed};

/// What a boxed `shell` result's walls sentence (the owner's detail of the answer) says, for
/// the box's file walls and its Landlock layer.
pub fn boxed(walls: sandbox::FileWalls, landlock: sandbox::Enforcement) -> String {
    boxed_with(walls, landlock, &[])
}

/// [`boxed`] for a box whose deciding grant names `hosts`: "network: only …, through the
/// broker's proxy" instead of "no network".
pub fn boxed_with(
    walls: sandbox::FileWalls,
    landlock: sandbox::Enforcement,
    hosts: &[policy::grants::HostRule],
) -> String {
    boxed_words(walls, landlock, hosts, sandbox::box_cgroup().is_ok())
}

/// [`boxed_with`] for a box with a cgroup or without one (where the broker can have none, a
/// bubblewrap box is built all the same, and its header says what that costs).
fn boxed_words(
    walls: sandbox::FileWalls,
    landlock: sandbox::Enforcement,
    hosts: &[policy::grants::HostRule],
    cgroup: bool,
) -> String {
    let network = if hosts.is_empty() {
        "no network".to_string()
    } else {
        super::proxy::network_words(hosts)
    };
    let limits = if cgroup {
        "processes, memory, CPU and file size limited".to_string()
    } else {
        format!(
            "CPU and file size limited; {} (`bx doctor` says how to delegate one)",
            sandbox::WITHOUT_CGROUP
        )
    };
    match walls {
        sandbox::FileWalls::Bubblewrap => format!(
            "bubblewrap: only the grant's folders (read-write) and a read-only system; protected folders masked; Landlock {landlock} over the same paths; {network}; every capability dropped; own /proc and size-limited /tmp; {limits}"
        ),
        sandbox::FileWalls::LandlockOnly => format!(
            "landlock only (no bubblewrap): Landlock {landlock}: only the grant's folders (read-write) and a read-only system, protected folders left out; seccomp: no socket but AF_UNIX, no connect; every capability dropped; a scratch TMPDIR; processes, memory, CPU and file size limited; the host's processes are visible"
        ),
    }
}

/// What the header of a `shell` result adds when the command ran through its session's warm
/// box.
pub const WARM_COMMANDS: &str = "kept warm: forked by the session's command worker in this box, in a Landlock domain of its own that cannot signal, trace or read the worker; every process of it ended before this answer";

/// What the header says when the owner switched the file walls off.
pub const UNBOXED: &str = "none: [sandbox] file_walls = false in brokerd.toml, so the command sees every file the broker's user can and the broker's whole network, whatever hosts its grant names";

/// Runs `shell` in a box, everything else directly.
pub struct SandboxedRunner {
    /// The runner of every other tool (and of `shell` when the file walls are off).
    pub direct: DirectRunner,
    settings: SandboxConfig,
    /// `settings.read_only` with `~/` expanded.
    read_only: Vec<PathBuf>,
    /// The walls this machine (or `[sandbox] bubblewrap = false`) gives a box.
    file_walls: sandbox::FileWalls,
    /// The launcher of the boxes whose command is another program: `brokerd-launcher` beside
    /// brokerd when it is of brokerd's own build ([`beside`]), else brokerd's own
    /// binary (`main` starts with `sandbox::launch_if_asked`). Boxes whose worker is one of
    /// brokerd's binaries (the file tools' `brokerd-files`, `http_fetch`'s `brokerd-fetch`) are their
    /// own launcher, one `exec` in all.
    launcher: Option<PathBuf>,
    /// brokerd's own binary, found once: the worker of the fetcher's boxes.
    own_binary: std::io::Result<PathBuf>,
    /// The worker of the file tools' boxes: `brokerd-files` beside brokerd when it is of
    /// brokerd's own build ([`beside`]), else brokerd's own binary (`brokerd box-file`).
    file_worker: Option<PathBuf>,
    /// The worker of `http_fetch`'s boxes: `brokerd-fetch` beside brokerd when it is of
    /// brokerd's own build ([`beside`]), else brokerd's own binary (`brokerd box-fetch`).
    fetch_worker: Option<PathBuf>,
    /// The sessions' warm boxes for the file tools and `shell`.
    warm: std::sync::Arc<super::warm::WarmPool>,
    /// Whether `shell` commands run through a warm box's command worker here (the pool keeps
    /// boxes, and this machine's boxes take a worker): fixed for the broker's life.
    warm_commands: bool,
    /// The proxies of granted hosts, one per box that has hosts.
    proxies: Option<super::proxy::Proxies>,
    /// Where a trusted place that a box made is moved aside (in boxmaker's state folder);
    /// `None`: nowhere yet, so beside itself.
    aside: PathBuf,
    /// The trusted places missing when each running `bash_bg` job's box started.
    job_watches: watch::JobWatches,
}

impl SandboxedRunner {
    /// The runner for `settings`, with `~/` in its folders meaning `home`.
    pub fn new(direct: DirectRunner, settings: SandboxConfig, home: &Path) -> SandboxedRunner {
        let read_only = settings
            .read_only
            .iter()
            .map(|p| super::config::expand_home(p, home))
            .collect();
        let file_walls = if settings.bubblewrap {
            sandbox::FileWalls::detect()
        } else {
            sandbox::FileWalls::LandlockOnly
        };
        let warm = std::sync::Arc::new(super::warm::WarmPool::new(
            std::time::Duration::from_millis(settings.warm_idle_ms),
        ));
        let own_binary = std::env::current_exe();
        let launcher = own_binary.as_ref().ok().map(|exe| beside(exe, LAUNCHER));
        let file_worker = own_binary.as_ref().ok().map(|exe| beside(exe, FILE_WORKER));
        let fetch_worker = own_binary
            .as_ref()
            .ok()
            .map(|exe| beside(exe, FETCH_WORKER));
        let probe = sandbox::Policy {
            launcher: launcher.clone(),
            file_walls,
            ..sandbox::Policy::default()
        };
        let warm_commands = warm.enabled() && sandbox::command_worker_missing(&probe).is_none();
        SandboxedRunner {
            direct,
            settings,
            read_only,
            file_walls,
            launcher,
            own_binary,
            file_worker,
            fetch_worker,
            warm,
            warm_commands,
            proxies: None,
            aside: std::env::temp_dir().join("boxmaker-moved-aside"),
            job_watches: watch::JobWatches::default(),
        }
    }

    /// The same runner, moving a trusted place that a box made into `aside` (a folder in
    /// boxmaker's state folder, made mode 0700 when needed).
    pub fn with_aside(mut self, aside: PathBuf) -> SandboxedRunner {
        self.aside = aside;
        self
    }

    /// brokerd's own binary, to run as the worker in a box (`what` names the box in the error).
    fn own_binary(&self, what: &str) -> Result<PathBuf, Outcome> {
        self.own_binary.as_ref().cloned().map_err(|e| {
            Outcome::Failed(format!("cannot find brokerd's own binary for {what}: {e}"))
        })
    }

    /// The file tools' worker, to run in a box.
    fn file_worker(&self) -> Result<PathBuf, Outcome> {
        match &self.file_worker {
            Some(worker) => Ok(worker.clone()),
            None => self.own_binary("the file tool's box"),
        }
    }

    /// `http_fetch`'s worker, to run in a box.
    fn fetch_worker(&self) -> Result<PathBuf, Outcome> {
        match &self.fetch_worker {
            Some(worker) => Ok(worker.clone()),
            None => self.own_binary("http_fetch's box"),
        }
    }

    /// The same runner, giving the boxes of `shell` and `bash_bg` calls whose deciding grant
    /// names hosts a proxy from `proxies`.
    pub fn with_proxies(mut self, proxies: super::proxy::Proxies) -> SandboxedRunner {
        self.proxies = Some(proxies);
        self
    }

    /// The box of a `shell` or `bash_bg` call, with the network of its deciding grant's hosts:
    /// the proxy the box reaches them through, open until it is dropped; or why the call
    /// cannot have them here.
    fn script_box(
        &self,
        allowed: &Allowed,
        context: &RunContext,
    ) -> Result<(sandbox::Policy, Option<super::proxy::BoxProxy>), String> {
        let mut policy = self.policy(allowed, context);
        if allowed.hosts.is_empty() {
            return Ok((policy, None));
        }
        if self.file_walls == sandbox::FileWalls::LandlockOnly {
            return Err(format!(
                "grant {} gives this {} call hosts ({}), but {}",
                allowed.grant,
                allowed.args.tool().as_str(),
                allowed
                    .hosts
                    .iter()
                    .map(|h| h.written.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                sandbox::NETWORK_NEEDS_BUBBLEWRAP
            ));
        }
        let Some(proxies) = &self.proxies else {
            return Err(format!(
                "grant {} gives this call hosts, but this broker has no proxy for them",
                allowed.grant
            ));
        };
        let proxy = proxies.open(&allowed.hosts)?;
        policy.network = Some(sandbox::Network::new(proxy.socket()));
        Ok((policy, Some(proxy)))
    }

    /// Whether a box here keeps a command to its paths: bubblewrap, or Landlock alone.
    pub fn full_box(&self) -> bool {
        self.settings.file_walls && self.file_walls == sandbox::FileWalls::Bubblewrap
    }

    /// How much of Landlock a box gets.
    fn landlock(&self) -> sandbox::Enforcement {
        if self.launcher.is_some() {
            sandbox::landlock_enforcement()
        } else {
            sandbox::Enforcement::NotEnforced
        }
    }

    /// Why no box can be built here, if none can. Bubblewrap was found when the runner was
    /// made (it is not looked for again on every call, which decides with this): one removed
    /// since fails each box it would have built with [`box_error`]'s sentence.
    fn unboxable(&self) -> Option<String> {
        match self.file_walls {
            sandbox::FileWalls::LandlockOnly
                if self.landlock() == sandbox::Enforcement::NotEnforced =>
            {
                Some(format!(
                    "{}; or set [sandbox] file_walls = false in brokerd.toml to run shell and the file tools without file walls",
                    sandbox::BoxError::NoFileWalls(
                        "neither bubblewrap (or user namespaces) nor Landlock is available"
                    )
                ))
            }
            _ => None,
        }
    }

    /// The box of a `shell` call: the grant's folders read-write, the toolchains read-only.
    fn policy(&self, allowed: &Allowed, context: &RunContext) -> sandbox::Policy {
        // A toolchain folder that does not exist on this machine is left out, not an error.
        let read_only = self
            .read_only
            .iter()
            .filter(|p| p.exists())
            .cloned()
            .collect();
        self.policy_with(read_only, granted(allowed), context)
    }

    fn policy_with(
        &self,
        read_only: Vec<PathBuf>,
        read_write: Vec<PathBuf>,
        context: &RunContext,
    ) -> sandbox::Policy {
        let cpu_seconds = context.limit.as_secs().saturating_add(1);
        self.box_of(read_only, read_write, &context.protected, cpu_seconds)
    }

    /// A box of `read_only` and `read_write` beside the minimal system, the protected folders
    /// masked, with this broker's `[sandbox]` limits and `cpu_seconds` of CPU.
    fn box_of(
        &self,
        read_only: Vec<PathBuf>,
        read_write: Vec<PathBuf>,
        protected: &policy::decide::Protected,
        cpu_seconds: u64,
    ) -> sandbox::Policy {
        sandbox::Policy {
            read_only,
            files: Vec::new(),
            masked: protected.folders().to_vec(),
            tmp_bytes: self.settings.tmp_mb.saturating_mul(1 << 20),
            limits: sandbox::Limits {
                cpu_seconds,
                processes: self.settings.processes,
                memory: self.settings.memory_mb.saturating_mul(1 << 20),
                ..sandbox::Limits::default()
            },
            launcher: self.launcher.clone(),
            file_walls: self.file_walls,
            network: None,
            pinned: self.pinned(&read_write, protected),
            read_write,
        }
    }

    /// What a box of `read_write` may read and run but never change, where a read-write
    /// folder holds it: brokerd's own binaries (or the next box, or the next broker, would run
    /// what a command put there), and the trusted places that programs outside the box read
    /// or run ([`policy::trusted::TrustedPlaces::box_pins`]). A repository without `hooks`
    /// gets an empty one first, as `git init` makes it, so that the box cannot make it.
    ///
    /// Without bubblewrap, only the places too large to record ([`snapshot`]) are left out of
    /// Landlock's write rules (Landlock grants a folder whole: keeping `.git/config` so would
    /// leave `.git` without new files, so no `git add`); the others are recorded before the
    /// call and put back after it ([`watch`]).
    fn pinned(
        &self,
        read_write: &[PathBuf],
        protected: &policy::decide::Protected,
    ) -> Vec<PathBuf> {
        let mut trusted = protected.places().box_pins(read_write);
        if self.file_walls == sandbox::FileWalls::LandlockOnly {
            trusted.kept.retain(|p| !snapshot::Snapshot::fits(p));
        }
        keep::make_hooks(&trusted.hooks);
        let mut pinned: Vec<PathBuf> = Vec::new();
        let binaries = self.own_binary.as_ref().ok();
        for path in binaries
            .into_iter()
            .chain(&self.launcher)
            .chain(&self.file_worker)
            .chain(&self.fetch_worker)
        {
            // Without the small binaries beside it, brokerd stands in for them.
            if !pinned.contains(path) {
                pinned.push(path.clone());
            }
        }
        pinned.extend(trusted.kept);
        pinned
    }
}

impl SandboxedRunner {
    /// [`Runner::run`] in its box, before its trusted places are swept.
    fn run_boxed(&self, allowed: &Allowed, context: &RunContext) -> Outcome {
        if matches!(allowed.args, ToolArgs::GitStatus(_) | ToolArgs::GitDiff(_)) {
            return self.git_read(allowed, context);
        }
        if let ToolArgs::GitClone(args) = &allowed.args
            && self.clones_in_box()
        {
            return self.clone_in_box(args, allowed, context);
        }
        if let ToolArgs::HttpFetch(args) = &allowed.args
            && self.fetches_in_box()
        {
            return self.fetch_in_box(args, allowed, context);
        }
        let ToolArgs::Shell(args) = &allowed.args else {
            let file_tool = super::worker::file_call(&allowed.args).is_some();
            if self.settings.file_walls && file_tool {
                return self.file_in_box(allowed, context);
            }
            return match (&allowed.args, self.direct.run(allowed, context)) {
                // Its result header says it ran outside the box, and why.
                (ToolArgs::HttpFetch(_), Outcome::Ran { mut fields, body }) => {
                    fields.insert("sandbox".to_string(), Value::from(FETCH_UNBOXED));
                    Outcome::Ran { fields, body }
                }
                // The file walls are off: the header says the file tool ran without them.
                (_, Outcome::Ran { mut fields, body }) if file_tool => {
                    fields.insert("sandbox".to_string(), Value::from(FILE_UNBOXED));
                    Outcome::Ran { fields, body }
                }
                (_, outcome) => outcome,
            };
        };
        if self.settings.file_walls
            && let Some(why) = self.unboxable()
        {
            return Outcome::Failed(why);
        }
        let mut options = tools::shell::ShellOptions {
            timeout: context.limit,
            ..tools::shell::ShellOptions::default()
        };
        let mut extra = Map::new();
        if !self.settings.file_walls {
            extra.insert("sandbox".to_string(), Value::from(UNBOXED));
            return shell(args, tools::shell::shell(args, &options), extra);
        }
        // A box with granted hosts has a proxy of its own for the call, so it is never kept
        // warm for the next one.
        if allowed.hosts.is_empty() && self.warm_commands {
            let policy = self.policy(allowed, context);
            let walls = format!(
                "{}; {WARM_COMMANDS}",
                boxed(self.file_walls, self.landlock())
            );
            extra.insert("sandbox".to_string(), Value::from(walls));
            return shell(
                args,
                self.shell_warm(args, &options, policy, context),
                extra,
            );
        }
        let (policy, proxy) = match self.script_box(allowed, context) {
            Ok(made) => made,
            Err(why) => return Outcome::Failed(why),
        };
        options.policy = Some(policy);
        let walls = boxed_with(self.file_walls, self.landlock(), &allowed.hosts);
        extra.insert("sandbox".to_string(), Value::from(walls));
        let outcome = shell(args, tools::shell::shell(args, &options), extra);
        drop(proxy); // the box has ended: so do its socket and its tunnels
        outcome
    }

    /// [`Runner::start_job`] in its box, before its trusted places are watched.
    fn start_boxed_job(
        &self,
        allowed: &Allowed,
        context: &RunContext,
        mut options: tools::jobs::JobOptions,
    ) -> Result<(tools::jobs::Job, Map<String, Value>), String> {
        let walls = if self.settings.file_walls {
            if let Some(why) = self.unboxable() {
                return Err(why);
            }
            let (mut policy, proxy) = self.script_box(allowed, context)?;
            // The ring bounds what is kept; a long-lived job may write more than a call would.
            policy.limits.output_bytes = u64::MAX;
            options.policy = Some(policy);
            // The proxy lives as long as the job's box.
            options.keep_alive = proxy.map(|p| std::sync::Arc::new(p) as _);
            format!(
                "{}; a fresh box of its own for the job (no warm worker yet), killed at job_lifetime_ms, at its session's end or when the broker stops",
                boxed_with(self.file_walls, self.landlock(), &allowed.hosts)
            )
        } else {
            options.policy = None;
            UNBOXED.to_string()
        };
        let (job, mut fields) = self.direct.start_job(allowed, context, options)?;
        fields.insert("sandbox".to_string(), Value::from(walls));
        Ok((job, fields))
    }
}

impl Runner for SandboxedRunner {
    fn run(&self, allowed: &Allowed, context: &RunContext) -> Outcome {
        let watch = self.watch(allowed, context);
        let outcome = self.run_boxed(allowed, context);
        let mut moved = watch.sweep(&self.aside);
        moved.extend(self.job_watches.sweep(&context.session, &self.aside, false));
        watch::with_moved(outcome, moved)
    }

    fn start_job(
        &self,
        allowed: &Allowed,
        context: &RunContext,
        options: tools::jobs::JobOptions,
    ) -> Result<(tools::jobs::Job, Map<String, Value>), String> {
        let watch = self.watch(allowed, context);
        let started = self.start_boxed_job(allowed, context, options);
        self.job_watches.add(&context.session, watch);
        started
    }

    fn end_session(&self, session: &proto::SessionId) -> usize {
        // Logged: no call is left to say so.
        let _ = self.job_watches.sweep(session, &self.aside, true);
        self.warm.end_session(session)
    }

    fn served_box(
        &self,
        read_only: Vec<PathBuf>,
        read_write: Vec<PathBuf>,
        hosts: &[policy::grants::HostRule],
        protected: &policy::decide::Protected,
    ) -> Result<(sandbox::Policy, Option<super::proxy::BoxProxy>), String> {
        if !self.full_box() {
            return Err(self.unboxable().unwrap_or_else(|| {
                "downstream MCP servers need a full box (bubblewrap): [sandbox] file_walls or bubblewrap is off in brokerd.toml, or this machine has no bubblewrap".to_string()
            }));
        }
        let read_only = self
            .read_only
            .iter()
            .chain(&read_only)
            .filter(|p| p.exists())
            .cloned()
            .collect();
        // A server lives as long as its session: a day of CPU at most.
        let mut policy = self.box_of(read_only, read_write, protected, 86_400);
        if hosts.is_empty() {
            return Ok((policy, None));
        }
        let Some(proxies) = &self.proxies else {
            return Err(
                "the server's grant names hosts, but this broker has no proxy for them".to_string(),
            );
        };
        let proxy = proxies.open(hosts)?;
        policy.network = Some(sandbox::Network::new(proxy.socket()));
        Ok((policy, Some(proxy)))
    }

    fn path_enforcement(&self) -> policy::shell::PathEnforcement {
        if self.settings.file_walls && self.unboxable().is_none() {
            policy::shell::PathEnforcement::Enforced
        } else {
            policy::shell::PathEnforcement::Unenforced
        }
    }

    fn walls(&self) -> Vec<String> {
        self.wall_lines()
    }
}

impl SandboxedRunner {
    /// Runs a `shell` call through the session's command worker for `policy`.
    fn shell_warm(
        &self,
        args: &tools::shell::ShellArgs,
        options: &tools::shell::ShellOptions,
        policy: sandbox::Policy,
        context: &RunContext,
    ) -> Result<tools::shell::ShellResult, tools::shell::ShellError> {
        let run = self.command_runner(policy, context);
        tools::shell::shell_with(args, options, &mut |spec, timeout, on_stdout, on_stderr| {
            run(spec, timeout, on_stdout, on_stderr).map_err(tools::shell::ShellError::Warm)
        })
    }

    /// What runs commands through the session's command worker in a box of `policy`: each
    /// forked by the worker with the call's CPU time and output limits (the worker's own CPU
    /// limit covers its life). `shell` and the gits of `git_status` and `git_diff` use it.
    pub(super) fn command_runner(
        &self,
        mut policy: sandbox::Policy,
        context: &RunContext,
    ) -> std::sync::Arc<tools::git::RunGit> {
        let (cpu_seconds, output_bytes) = (policy.limits.cpu_seconds, policy.limits.output_bytes);
        policy.limits.cpu_seconds = super::warm::LIFETIME.as_secs().saturating_mul(cores());
        let key = super::warm::Key::commands(&context.session, &policy);
        let warm = std::sync::Arc::clone(&self.warm);
        std::sync::Arc::new(move |spec, timeout, on_stdout, on_stderr| {
            warm.run_command(
                key.clone(),
                &policy,
                spec,
                timeout,
                cpu_seconds,
                output_bytes,
                on_stdout,
                on_stderr,
            )
            .map(|(ended, _)| (ended, sandbox::Containment::Bubblewrap))
        })
    }
}

/// The folders of the deciding grant that cover the call.
fn granted(allowed: &Allowed) -> Vec<PathBuf> {
    match &allowed.scope {
        Some(Scope::Paths(paths)) => paths.clone(),
        _ => Vec::new(),
    }
}

/// The cores of this machine (a box's threads share its CPU limit).
pub(super) fn cores() -> u64 {
    // Read once: `available_parallelism` opens three files of `/proc` and the cgroup's CPU
    // quota each time (measured: most of what a warm file call spent before its request).
    static CORES: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| {
        std::thread::available_parallelism().map_or(1, |n| u64::try_from(n.get()).unwrap_or(1))
    })
}

/// What the header of an `http_fetch` result says of its walls when it ran outside a box.
pub const FETCH_UNBOXED: &str = "none: http_fetch ran in the broker's process (a box with a network needs bubblewrap and [sandbox] file_walls on); each hop decided again, its addresses checked and pinned there";

#[cfg(test)]
mod tests {
    use sandbox::{Enforcement, FileWalls};

    use super::boxed_words;

    #[test]
    fn a_box_without_a_cgroup_says_in_its_header_what_is_missing_and_what_it_costs() {
        let with = boxed_words(FileWalls::Bubblewrap, Enforcement::Full, &[], true);
        assert!(
            with.ends_with("processes, memory, CPU and file size limited"),
            "{with}"
        );
        let without = boxed_words(FileWalls::Bubblewrap, Enforcement::Full, &[], false);
        assert!(
            without.ends_with(&format!(
                "CPU and file size limited; {} (`bx doctor` says how to delegate one)",
                sandbox::WITHOUT_CGROUP
            )),
            "{without}"
        );
        assert!(!without.contains("processes, memory"), "{without}");
    }
}
