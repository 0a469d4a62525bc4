//! The optional Podman backend (`[sandbox] podman_image` in `brokerd.toml`): for an owner who
//! wants an image as the world of `shell` commands. Behind the same [`Runner`] trait, it runs
//! each `shell` call in a fresh container of that image, and everything else as the sandboxed
//! runner does (the file tools, jobs and downstream servers in their boxes).
//!
//! Each container: `--runtime runc` (crun fails on this kind of hybrid cgroup machine), no
//! network (`--network none`; the default bridge reaches out), every capability dropped,
//! `no-new-privileges`, a read-only root with a private `/tmp`, explicit `--ulimit`s for open
//! files and processes (needed as root here), the box's memory and process limits, Podman's own
//! `--timeout` at the call's limit, the call's granted folders bound read-write at their own
//! paths with boxmaker's protected folders inside them hidden, the command's scrubbed
//! environment, and the same shell the decision judged the script by (its path inside the
//! image: an image without it fails the call). About 150-250 ms a call.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use super::config::SandboxConfig;
use super::runner::{Outcome, RunContext, Runner, shell};
use super::sandboxed::SandboxedRunner;
use policy::args::{ToolArgs, ToolName};
use policy::decide::{Allowed, Scope};
use proto::tools::Home;

/// A memory tool that reached the container runtime (seed M6b/04's sentence).
pub const IN_MEMORYD: &str = "the memory tools run in memoryd, not in a container";

/// A `consult` that reached the container runtime: fixed, it reaches the model (seed M6b/04).
pub const IN_CONSULT: &str = "consult runs in brokerd, not in a container";

/// How long past a call's limit the broker waits for Podman to stop the container itself.
const PODMAN_GRACE: Duration = Duration::from_secs(10);

/// Runs `shell` in a Podman container of the owner's image, everything else as `inner` does.
pub struct PodmanRunner {
    inner: SandboxedRunner,
    podman: PathBuf,
    image: String,
    settings: SandboxConfig,
}

impl PodmanRunner {
    /// `shell` in containers of `image` through the `podman` program, the rest through `inner`.
    pub fn new(
        inner: SandboxedRunner,
        podman: PathBuf,
        image: String,
        settings: SandboxConfig,
    ) -> PodmanRunner {
        PodmanRunner {
            inner,
            podman,
            image,
            settings,
        }
    }

    /// Runs `allowed` in a container: `shell` runs; the memory tools and `consult`, which the
    /// broker routes elsewhere, are refused with the seed's sentences; any other tool is not
    /// one the container runs.
    pub fn in_container(&self, allowed: &Allowed, context: &RunContext, kept: Kept<'_>) -> Outcome {
        let tool = allowed.args.tool();
        if let Some(sentence) = refused_in_container(tool) {
            return Outcome::Failed(sentence.to_string());
        }
        let ToolArgs::Shell(args) = &allowed.args else {
            return Outcome::Failed(format!(
                "{} does not run in a Podman container",
                tool.as_str()
            ));
        };
        if !allowed.hosts.is_empty() {
            return Outcome::Failed(format!(
                "grant {} gives this shell call hosts, but the Podman backend runs every container with --network none",
                allowed.grant
            ));
        }
        let options = tools::shell::ShellOptions {
            timeout: context.limit,
            ..tools::shell::ShellOptions::default()
        };
        let folders = match &allowed.scope {
            Some(Scope::Paths(paths)) => paths.clone(),
            _ => Vec::new(),
        };
        let hidden: Vec<PathBuf> = context
            .protected
            .folders()
            .iter()
            .filter(|p| folders.iter().any(|f| p.starts_with(f)))
            .cloned()
            .collect();
        let ran = tools::shell::shell_with(args, &options, &mut |spec, timeout, out, err| {
            let podman = self.command(spec, timeout, &folders, &hidden, &kept);
            let mut ended = follow(&podman, timeout + PODMAN_GRACE, out, err)?;
            // Podman stopped the container at its --timeout: it then exits 255, no sooner than
            // the limit.
            if ended.ended.exit == Some(sandbox::Exit::Code(255)) && ended.duration >= timeout {
                ended.ended.timed_out = true;
                ended.ended.exit = None;
            }
            Ok((ended.ended, sandbox::Containment::ProcessGroup))
        });
        let mut extra = Map::new();
        extra.insert(
            "sandbox".to_string(),
            Value::from(format!(
                "podman container of {} (runc, no network, capabilities dropped)",
                self.image
            )),
        );
        shell(args, ran, extra)
    }

    /// The `podman run` of `spec` (the shell and its script, as `tools::shell` builds it).
    fn command(
        &self,
        spec: &sandbox::CommandSpec,
        timeout: Duration,
        folders: &[PathBuf],
        hidden: &[PathBuf],
        kept: &Kept<'_>,
    ) -> sandbox::CommandSpec {
        let processes = self.settings.processes.max(1);
        let mut args: Vec<String> = [
            "run",
            "--rm",
            "--runtime",
            "runc",
            "--network",
            "none",
            "--cap-drop",
            "all",
            "--security-opt",
            "no-new-privileges",
            "--read-only",
            "--pull",
            "never",
            "--log-driver",
            "none",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        args.extend([
            "--tmpfs".to_string(),
            format!("/tmp:size={}m", self.settings.tmp_mb.max(1)),
            "--ulimit".to_string(),
            "nofile=1024:1024".to_string(),
            "--ulimit".to_string(),
            format!("nproc={processes}:{processes}"),
            "--pids-limit".to_string(),
            processes.to_string(),
            "--memory".to_string(),
            format!("{}m", self.settings.memory_mb.max(16)),
            "--timeout".to_string(),
            // Whole seconds, rounded up: never less than the call's limit.
            timeout
                .as_secs()
                .saturating_add(u64::from(timeout.subsec_nanos() > 0))
                .max(1)
                .to_string(),
            "--workdir".to_string(),
            spec.cwd.display().to_string(),
        ]);
        for folder in folders {
            args.push("--volume".to_string());
            args.push(format!("{0}:{0}:rw", folder.display()));
        }
        // A trusted place too large to record: each folder on its way bound onto itself (a
        // mount point cannot be moved aside), then the place read-only.
        for folder in kept.folders {
            args.push("--volume".to_string());
            args.push(format!("{0}:{0}:rw", folder.display()));
        }
        for place in kept.places {
            args.push("--volume".to_string());
            args.push(format!("{0}:{0}:ro", place.display()));
        }
        for folder in hidden {
            args.push("--tmpfs".to_string());
            args.push(format!("{}:ro,size=1k", folder.display()));
        }
        for (name, value) in &spec.env {
            args.push("--env".to_string());
            args.push(format!(
                "{}={}",
                name.to_string_lossy(),
                value.to_string_lossy()
            ));
        }
        args.push(self.image.clone());
        args.push(spec.program.display().to_string());
        args.extend(spec.args.iter().map(|a| a.to_string_lossy().into_owned()));
        sandbox::CommandSpec {
            program: self.podman.clone(),
            args: args.into_iter().map(Into::into).collect(),
            env: podman_env(),
            cwd: PathBuf::from("/"),
        }
    }
}

/// The trusted places a container keeps read-only ([`SandboxedRunner::run_keeping`]): the
/// folders to bind onto themselves first, then the places.
#[derive(Debug, Clone, Copy)]
pub struct Kept<'a> {
    /// Bound onto themselves, read-write.
    pub folders: &'a [PathBuf],
    /// Bound onto themselves, read-only.
    pub places: &'a [PathBuf],
}

/// How `podman run` ended, and after how long.
struct Followed {
    ended: sandbox::Ended,
    duration: Duration,
}

/// Runs `podman` (its own process group) and passes its output to the sinks until it ends, or
/// kills the group at `limit`. Podman is started as the broker's user with its privileges, not
/// through `sandbox::spawn_contained`, which drops every capability: Podman as root needs
/// them to build the container, whose own walls are Podman's (see the module's comment).
fn follow(
    spec: &sandbox::CommandSpec,
    limit: Duration,
    on_stdout: &mut dyn FnMut(&[u8]),
    on_stderr: &mut dyn FnMut(&[u8]),
) -> Result<Followed, tools::shell::ShellError> {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::process::{Command, Stdio};
    use std::sync::mpsc;

    let started = std::time::Instant::now();
    let mut child = Command::new(&spec.program)
        .args(&spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&spec.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|source| tools::shell::ShellError::Spawn {
            shell: spec.program.display().to_string(),
            source,
        })?;
    let (tx, rx) = mpsc::channel::<(bool, Vec<u8>)>();
    let readers: Vec<Box<dyn std::io::Read + Send>> = [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
    ]
    .into_iter()
    .flatten()
    .collect();
    for (index, mut reader) in readers.into_iter().enumerate() {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            while let Ok(n) = reader.read(&mut buf) {
                let chunk = buf.get(..n).unwrap_or_default().to_vec();
                if n == 0 || tx.send((index == 1, chunk)).is_err() {
                    break;
                }
            }
        });
    }
    drop(tx);
    let deadline = started + limit;
    let mut timed_out = false;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok((false, bytes)) => on_stdout(&bytes),
            Ok((true, bytes)) => on_stderr(&bytes),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let pid = rustix::process::Pid::from_child(&child);
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
                timed_out = true;
                break;
            }
        }
    }
    let status = child.wait().map_err(tools::shell::ShellError::Follow)?;
    let exit = match (status.code(), status.signal()) {
        (Some(code), _) => Some(sandbox::Exit::Code(code)),
        (None, Some(signal)) => Some(sandbox::Exit::Signal(signal)),
        (None, None) => None,
    };
    Ok(Followed {
        ended: sandbox::Ended {
            exit,
            timed_out,
            output_exceeded: false,
            stopped: false,
        },
        duration: started.elapsed(),
    })
}

/// Podman's own environment: a plain `PATH` and the broker's `HOME` (its configuration).
fn podman_env() -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let mut env = vec![("PATH".into(), "/usr/sbin:/usr/bin:/sbin:/bin".into())];
    if let Some(home) = std::env::var_os("HOME") {
        env.push(("HOME".into(), home));
    }
    env
}

impl Runner for PodmanRunner {
    fn run(&self, allowed: &Allowed, context: &RunContext) -> Outcome {
        match &allowed.args {
            ToolArgs::Shell(_) => self.inner.run_keeping(allowed, context, |folders, places| {
                self.in_container(allowed, context, Kept { folders, places })
            }),
            _ => self.inner.run(allowed, context),
        }
    }

    fn walls(&self) -> Vec<String> {
        let mut walls = self.inner.walls();
        walls.push(format!(
            "shell: a Podman container of {} per call (runc, --network none, every capability dropped, read-only root)",
            self.image
        ));
        walls
    }

    fn end_session(&self, session: &proto::SessionId) -> usize {
        self.inner.end_session(session)
    }

    fn path_enforcement(&self) -> policy::shell::PathEnforcement {
        self.inner.path_enforcement()
    }

    fn served_box(
        &self,
        read_only: Vec<PathBuf>,
        read_write: Vec<PathBuf>,
        hosts: &[policy::grants::HostRule],
        protected: &policy::decide::Protected,
    ) -> Result<(sandbox::Policy, Option<super::proxy::BoxProxy>), String> {
        self.inner
            .served_box(read_only, read_write, hosts, protected)
    }

    fn start_job(
        &self,
        allowed: &Allowed,
        context: &RunContext,
        options: tools::jobs::JobOptions,
    ) -> Result<(tools::jobs::Job, Map<String, Value>), String> {
        self.inner.start_job(allowed, context, options)
    }
}

/// The sentence a tool that never runs in a container is refused with there: the memory tools
/// (the broker's memory store answers them) and `consult` (the broker asks the model).
pub fn refused_in_container(tool: ToolName) -> Option<&'static str> {
    match tool.builtin().home {
        Home::Memory => Some(IN_MEMORYD),
        Home::Broker => Some(IN_CONSULT),
        Home::Runner | Home::Jobs | Home::Owner => None,
    }
}

/// The `podman` program: `path` when given, else the first `podman` on the usual paths.
pub fn find_podman(path: Option<&Path>) -> Option<PathBuf> {
    if let Some(path) = path {
        return path.is_file().then(|| path.to_path_buf());
    }
    ["/usr/bin/podman", "/usr/local/bin/podman", "/bin/podman"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_tools_and_consult_are_refused_with_the_seeds_sentences() {
        for tool in [ToolName::Recall, ToolName::Memory, ToolName::AskMemory] {
            assert_eq!(
                refused_in_container(tool),
                Some("the memory tools run in memoryd, not in a container")
            );
        }
        assert_eq!(
            refused_in_container(ToolName::Consult),
            Some("consult runs in brokerd, not in a container")
        );
        assert_eq!(refused_in_container(ToolName::Shell), None);
    }
}
