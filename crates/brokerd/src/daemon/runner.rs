//! Running a decided call. [`Runner`] is the seam where the sandbox comes in later; the
//! [`DirectRunner`] runs each tool in the broker's process (file tools through the granted
//! folder's descriptor, `shell` contained by the tools library, `http_fetch` with every
//! redirect decided again, `consult` through its client). Blocking tools run off the async
//! threads; the caller enforces each tool's time limit as well.

use std::sync::Arc;
use std::time::Duration;

use proto::DenyReason;
use serde_json::{Map, Value, json};

use crate::consult::ConsultClient;
use crate::files::{WalkContext, run_file_call};
use policy::args::ToolArgs;
use policy::decide::IndexedGrants;
use policy::decide::{Allowed, Labels, Protected};

pub use ::worker::Outcome;
pub(super) use ::worker::file_outcome;

/// What a memory tool that reached a runner answers: the router sends them to the store.
pub const IN_STORE: &str = "the memory tools run in the broker's memory store, not in a runner";

/// What a run may need beside the decision: the grants and labels it was decided against, to
/// decide each redirect again.
#[derive(Clone)]
pub struct RunContext {
    /// The session the call belongs to (a session's warm box serves only its own calls).
    pub session: proto::SessionId,
    /// The grants in force.
    pub grants: Arc<IndexedGrants>,
    /// The session's labels when the call was decided.
    pub labels: Labels,
    /// boxmaker's own folders.
    pub protected: Arc<Protected>,
    /// The tool's time limit.
    pub limit: Duration,
    /// What read before write expects of the file a `write_file` or `edit_file` replaces, as
    /// decided; the write checks it on its own descriptor.
    pub expected: Option<tools::fs::Expected>,
    /// The labels the run raised beyond the deciding grant's.
    pub raised: Raised,
}

/// Labels a run raised beyond its deciding grant's: an `http_fetch` redirect to a host another
/// grant covers labels the result with that grant's class and `untrusted` too, so a page
/// reached through a public grant's redirect still carries the secret grant's class.
#[derive(Debug, Clone, Default)]
pub struct Raised(Arc<std::sync::Mutex<Option<(proto::Class, bool)>>>);

impl Raised {
    /// Raises the run's labels to at least `class` and `untrusted` (never lowers them).
    pub fn raise(&self, class: proto::Class, untrusted: bool) {
        let mut raised = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *raised = Some(match *raised {
            Some((c, u)) => (c.max(class), u || untrusted),
            None => (class, untrusted),
        });
    }

    /// `class` and `untrusted` (the deciding grant's) with what the run raised.
    pub fn over(&self, class: proto::Class, untrusted: bool) -> (proto::Class, bool) {
        match *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
        {
            Some((c, u)) => (class.max(c), untrusted || u),
            None => (class, untrusted),
        }
    }
}

/// Runs decided calls.
pub trait Runner: Send + Sync {
    /// Runs `allowed` (blocking; the caller runs it off the async threads).
    fn run(&self, allowed: &Allowed, context: &RunContext) -> Outcome;

    /// The walls around a run, as `bx status` shows them.
    fn walls(&self) -> Vec<String>;

    /// Lets go of what the runner keeps for `session` (its warm boxes), once it has ended;
    /// returns how many boxes ended. Blocking.
    fn end_session(&self, _session: &proto::SessionId) -> usize {
        0
    }

    /// Whether a `shell` call's box keeps it to its grant's folders, for the decision (then a
    /// redirection into a granted folder is covered). No box: the strict rules.
    fn path_enforcement(&self) -> policy::shell::PathEnforcement {
        policy::shell::PathEnforcement::Unenforced
    }

    /// The box of a downstream MCP server: `read_only` and `read_write` bound beside the
    /// minimal system, the protected folders masked, and `hosts` reachable through a proxy
    /// kept open as long as the returned value; or why no such box can be built here.
    fn served_box(
        &self,
        _read_only: Vec<std::path::PathBuf>,
        _read_write: Vec<std::path::PathBuf>,
        _hosts: &[policy::grants::HostRule],
        _protected: &Protected,
    ) -> Result<(sandbox::Policy, Option<super::proxy::BoxProxy>), String> {
        Err(
            "downstream MCP servers run only in a box, and this broker runs its tools without one"
                .to_string(),
        )
    }

    /// Starts a decided `bash_bg` call as a job (blocking until its box runs), with `options`
    /// but for the box, which the runner chooses; returns the job and its header's fields
    /// (`containment`, and the box's walls as `sandbox`). Without a box the job is contained as
    /// an unboxed `shell` command is.
    fn start_job(
        &self,
        allowed: &Allowed,
        _context: &RunContext,
        options: tools::jobs::JobOptions,
    ) -> Result<(tools::jobs::Job, Map<String, Value>), String> {
        let ToolArgs::BashBg(script) = &allowed.args else {
            return Err("only a bash_bg call starts a job".to_string());
        };
        let job = tools::jobs::start(script, &options).map_err(|e| e.to_string())?;
        let mut fields = Map::new();
        fields.insert("containment".into(), job.containment().as_str().into());
        Ok((job, fields))
    }
}

/// Runs every tool in the broker's own process.
pub struct DirectRunner {
    /// The `consult` client, when a consult server is configured.
    pub consult: Option<ConsultClient>,
    /// The provider `web_search` asks, when `brokerd.toml` names one.
    pub web_search: Option<super::search::SearchSettings>,
    /// `read_file`'s cap, in bytes: within the result cap with room for the header
    /// ([`read_cap`]), so the file tool cuts a long read at a line it can name, never the
    /// rendering in the middle.
    pub read_cap: usize,
    /// Extra trusted roots for `http_fetch` and `git_clone` (tests use a local CA).
    pub root_certificates: Vec<Vec<u8>>,
    /// The most bytes a `git_clone` may write (`git_clone_mb`).
    pub git_clone_bytes: u64,
    /// The resolver of `http_fetch`'s and `git_clone`'s host checks, the one the proxy of
    /// granted hosts uses too (the system's, or `BOXMAKER_TEST_RESOLVE`'s test names first).
    pub resolver: Arc<dyn nettools::web::Resolve>,
}

/// The bytes of a rendered `read_file` result kept for its header, beside its path: the
/// envelope, the labels, the size, the lines, the next offset, the walls token and a cut.
const READ_HEADER_ROOM: usize = 512;

/// `read_file`'s cap under a result cap of `result_cap`: [`tools::fs::READ_CAP`] at most, and
/// room for the header left.
pub fn read_cap(result_cap: usize) -> usize {
    tools::fs::READ_CAP.min(result_cap.saturating_sub(READ_HEADER_ROOM))
}

impl DirectRunner {
    /// The cap of `allowed`'s read: [`DirectRunner::read_cap`] less its path, as the header
    /// writes it.
    pub(super) fn read_cap_for(&self, allowed: &Allowed) -> usize {
        let path = allowed.args.path().unwrap_or_default();
        let written = serde_json::to_string(path).map_or(path.len() * 6, |p| p.len());
        self.read_cap.saturating_sub(written)
    }
}

impl Runner for DirectRunner {
    fn run(&self, allowed: &Allowed, context: &RunContext) -> Outcome {
        match &allowed.args {
            ToolArgs::ReadFile(_)
            | ToolArgs::WriteFile(_)
            | ToolArgs::EditFile(_)
            | ToolArgs::ListFiles(_)
            | ToolArgs::Glob(_)
            | ToolArgs::Grep(_) => {
                let walk = WalkContext {
                    grants: &context.grants,
                    protected: &context.protected,
                    expected: context.expected.as_ref(),
                };
                file_outcome(run_file_call(allowed, self.read_cap_for(allowed), &walk))
            }
            ToolArgs::Shell(args) => {
                let options = tools::shell::ShellOptions {
                    timeout: context.limit,
                    ..tools::shell::ShellOptions::default()
                };
                shell(args, tools::shell::shell(args, &options), Map::new())
            }
            ToolArgs::HttpFetch(args) => self.fetch(args, allowed, context),
            ToolArgs::Consult { .. } => self.consult(allowed),
            ToolArgs::WebSearch(args) => self.search(args, context),
            ToolArgs::GitStatus(_) | ToolArgs::GitDiff(_) => git_read(
                allowed,
                context,
                tools::git::GitContainment::Contained,
                Map::new(),
            ),
            ToolArgs::GitClone(args) => self.clone_with(
                args,
                allowed,
                context,
                tools::git::GitContainment::Contained,
                &format!("none: {GIT_CLONE_WALLS}"),
            ),
            // The broker's job table starts, reads and kills jobs (`start_job` for the box).
            ToolArgs::BashBg(_) | ToolArgs::BashTail(_) | ToolArgs::BashKill(_) => {
                Outcome::Failed("background jobs are run by the broker's job table".to_string())
            }
            // The broker answers `ask` from the owner's answer; it never reaches a runner.
            ToolArgs::Ask(_) => Outcome::Failed("ask is answered by the owner".to_string()),
            // The broker's child sessions answer `delegate`; it never reaches a runner.
            ToolArgs::Delegate(_) => {
                Outcome::Failed("delegate is answered by the broker's child sessions".to_string())
            }
            // The router sends the memory tools to the store; one here is refused, never run.
            ToolArgs::Recall(_) | ToolArgs::Memory(_) | ToolArgs::AskMemory(_) => {
                Outcome::Failed(IN_STORE.to_string())
            }
        }
    }

    fn walls(&self) -> Vec<String> {
        vec![
            "no sandbox yet: tools run in the broker's process".to_string(),
            "file tools open only below the deciding grant's folder (openat2, no symbolic links)"
                .to_string(),
            WALKERS.to_string(),
            "shell: its own PID and mount namespaces, every capability dropped, no_new_privs, killed whole at its time limit"
                .to_string(),
            "http_fetch: https only; metadata addresses always refused, loopback, private and link-local ones unless a grant names the host itself; checked after DNS and on every redirect"
                .to_string(),
            GIT_READ_CONTAINED.to_string(),
            GIT_CLONE_WALLS.to_string(),
        ]
    }
}

/// How `git_status` and `git_diff` run without the box.
pub(super) const GIT_READ_CONTAINED: &str = "git_status, git_diff: git contained from the broker (its own PID and mount namespaces, every capability dropped, no_new_privs), scrubbed environment, no program of the repository's configuration run";

/// How `git_clone` runs, in every result header and `bx status`.
pub const GIT_CLONE_WALLS: &str = "git_clone: git contained from the broker (its own PID and mount namespaces, every capability dropped, no_new_privs, scrubbed environment), outside the box until a box can reach granted hosts; https only, the checked address pinned (http.curloptResolve), no redirect followed";

/// How the walkers run in the broker's process.
pub(super) const WALKERS: &str = "list_files, glob, grep: in the broker's process, from the deciding grant's pinned folder, following no symbolic link, leaving out boxmaker's folders and what deny grants cover";

fn fields(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The outcome of a `shell` call that ran (or failed) as `ran` says; `extra` joins the
/// header's fields (the box's walls).
pub(super) fn shell(
    args: &tools::shell::ShellArgs,
    ran: Result<tools::shell::ShellResult, tools::shell::ShellError>,
    extra: Map<String, Value>,
) -> Outcome {
    match ran {
        Ok(result) => {
            let mut body = result.stdout.clone();
            if !result.stderr.is_empty() {
                if !body.is_empty() && !body.ends_with('\n') {
                    body.push('\n');
                }
                body.push_str("[stderr]\n");
                body.push_str(&result.stderr);
            }
            let mut header = fields(json!({
                    "cwd": args.cwd.as_deref().unwrap_or("/"),
                    "containment": result.containment.as_str(),
                    "exit_code": result.exit_code,
                    "signal": result.signal,
                    "timed_out": result.timed_out,
                    "truncated": result.truncated,
                    "stdout_bytes": result.stdout_bytes,
                    "stderr_bytes": result.stderr_bytes,
                    "duration_ms": result.duration_ms,
            }));
            header.extend(extra);
            Outcome::Ran {
                fields: header,
                body,
            }
        }
        Err(error) => Outcome::Failed(error.to_string()),
    }
}

/// Runs `git_status` or `git_diff` in the deciding grant's folder under `walls`; `extra`
/// joins the header's fields (the box's walls).
pub(super) fn git_read(
    allowed: &Allowed,
    context: &RunContext,
    walls: tools::git::GitContainment,
    extra: Map<String, Value>,
) -> Outcome {
    let Some(policy::decide::Scope::Paths(folders)) = &allowed.scope else {
        return Outcome::Failed("the decision names no granted folder for git".to_string());
    };
    let Some(root) = folders.first() else {
        return Outcome::Failed("the decision names no granted folder for git".to_string());
    };
    let mut options = tools::git::GitOptions::new(root);
    options.timeout = context.limit;
    options.walls = walls;
    let result = match &allowed.args {
        ToolArgs::GitStatus(args) => tools::git::git_status(args, &options),
        ToolArgs::GitDiff(args) => tools::git::git_diff(args, &options),
        _ => return Outcome::Failed("not a git_status or git_diff call".to_string()),
    };
    match result {
        Ok(result) => {
            let mut header = fields(json!({
                "repository": result.repository,
                "containment": result.containment.as_str(),
                "exit_code": result.exit_code,
                "signal": result.signal,
                "timed_out": result.timed_out,
                "truncated": result.truncated,
                "output_bytes": result.output_bytes,
                "duration_ms": result.duration_ms,
            }));
            header.extend(extra);
            let body = if result.output.is_empty() {
                "(no output)".to_string()
            } else {
                result.output
            };
            Outcome::Ran {
                fields: header,
                body,
            }
        }
        Err(error) => Outcome::Failed(error.to_string()),
    }
}

impl DirectRunner {
    /// Runs `git_clone` with git held by `walls`; `sandbox` is what the header says of them.
    pub(super) fn clone_with(
        &self,
        args: &tools::git::GitCloneArgs,
        allowed: &Allowed,
        context: &RunContext,
        walls: tools::git::GitContainment,
        sandbox: &str,
    ) -> Outcome {
        let Ok((host, port)) = policy::hosts::https_host(&args.url) else {
            return Outcome::Failed(format!("{:?} is not an https:// URL", args.url));
        };
        // The call was decided for this host and port; git follows no redirect to another.
        // Private addresses only where the deciding grant names the host itself.
        let verdict = if policy::grants::names_itself(&allowed.hosts, &host, port) {
            nettools::web::HostVerdict::NamedItself
        } else {
            nettools::web::HostVerdict::Granted
        };
        let mut fetch = nettools::web::FetchOptions::with_verdicts(move |h: &str, p: u16| {
            if h == host && p == port {
                verdict
            } else {
                nettools::web::HostVerdict::Refused
            }
        })
        .with_timeout(context.limit);
        fetch.resolver = Arc::clone(&self.resolver);
        for root in &self.root_certificates {
            fetch = fetch.with_root_certificate(root.clone());
        }
        let mut options = nettools::git::CloneOptions::new(fetch);
        options.max_bytes = self.git_clone_bytes;
        options.walls = walls;
        match nettools::git::git_clone(args, &options) {
            Ok(result) if result.cloned() => Outcome::Ran {
                fields: fields(json!({
                    "url": result.url,
                    "path": result.path,
                    "address": result.address,
                    "containment": result.containment.as_str(),
                    "exit_code": result.exit_code,
                    "bytes": result.bytes,
                    "truncated": result.truncated,
                    "duration_ms": result.duration_ms,
                    "sandbox": sandbox,
                })),
                body: result.output,
            },
            Ok(result) if result.too_large => Outcome::Failed(format!(
                "the clone passed the {} MiB git_clone_mb allows (brokerd.toml), so git was stopped; nothing was kept",
                self.git_clone_bytes >> 20
            )),
            Ok(result) if result.timed_out => Outcome::Failed(format!(
                "the clone took longer than the {} ms git_clone_ms allows (brokerd.toml); nothing was kept",
                context.limit.as_millis()
            )),
            Ok(result) => Outcome::Failed(format!(
                "git clone failed (exit {}); nothing was kept:\n{}",
                result
                    .exit_code
                    .map_or_else(|| "by a signal".to_string(), |c| c.to_string()),
                result.output
            )),
            Err(
                error @ nettools::git::CloneError::Host(nettools::web::FetchError::UnsafeAddress {
                    ..
                }),
            ) => Outcome::Denied(DenyReason::UnsafeAddress, error.to_string()),
            Err(
                error @ nettools::git::CloneError::Host(nettools::web::FetchError::HostNotAllowed {
                    ..
                }),
            ) => Outcome::Denied(DenyReason::NoGrant, error.to_string()),
            Err(error) => Outcome::Failed(error.to_string()),
        }
    }

    fn search(
        &self,
        args: &nettools::web::web_search::WebSearchArgs,
        context: &RunContext,
    ) -> Outcome {
        use nettools::web::web_search::{SearchOptions, web_search};
        let mut options = SearchOptions::new(self.web_search.as_ref().map(|s| s.provider.clone()));
        options.timeout = context.limit;
        if let Some(settings) = &self.web_search {
            options.retries = settings.retries;
            options.backoff = settings.backoff;
        }
        options.root_certificates = self.root_certificates.clone();
        match web_search(args, &options) {
            Ok(found) => {
                let mut body = String::new();
                for (index, hit) in found.results.iter().enumerate() {
                    body.push_str(&format!(
                        "{}. {}\n   {}\n   {}\n",
                        index + 1,
                        hit.title,
                        hit.url,
                        hit.snippet
                    ));
                }
                if found.results.is_empty() {
                    body.push_str("No results.\n");
                }
                Outcome::Ran {
                    fields: fields(json!({
                        "provider": found.provider,
                        "query": args.query,
                        "results": found.results.len(),
                        "attempts": found.attempts,
                    })),
                    body,
                }
            }
            Err(error) => Outcome::Failed(error.to_string()),
        }
    }

    fn consult(&self, allowed: &Allowed) -> Outcome {
        let Some(client) = &self.consult else {
            return Outcome::Failed(
                "no consult server is configured ([consult] in brokerd.toml)".to_string(),
            );
        };
        match client.run(&allowed.args.canonical_json()) {
            Ok((answer, truncated)) => Outcome::Ran {
                fields: fields(json!({ "truncated": truncated })),
                body: answer,
            },
            Err(error) => Outcome::Failed(error.to_string()),
        }
    }
}
