//! The decision on one call: which grant covers it and whether it runs, asks the owner, or is
//! refused, in the order of the design brief (protected paths; grants that cover the call,
//! expired ones, deny grants; the session's taint; integrity after untrusted content;
//! approval).
//!
//! [`decide`] is a pure function of the call, the grants, the session's labels and the clock
//! (path resolution reads the file system, nothing else); it never runs anything.

pub mod shell;

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use proto::{Class, DenyReason, Timestamp};
use tools::shell::ShellArgs;

use crate::args::{ToolArgs, ToolName, https_host};
use crate::grants::{Approval, Grant, OnUntrusted, resolve};

/// What a session has seen so far: the two labels that meet the grants on every call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Labels {
    /// The highest class of any result the session has received.
    pub taint: Class,
    /// Whether the session has received any untrusted result.
    pub untrusted: bool,
}

/// boxmaker's own folders (config, grants, ledger, audit log, sessions, runtime): no call may
/// name a path inside them, whatever a grant says.
#[derive(Debug, Clone, Default)]
pub struct Protected {
    folders: Vec<PathBuf>,
}

impl Protected {
    /// The folders, resolved (symbolic links followed as far as they exist).
    pub fn new(folders: &[PathBuf]) -> Protected {
        Protected {
            // A protected folder that cannot be resolved is kept as written.
            folders: folders
                .iter()
                .map(|f| resolve(f).unwrap_or_else(|_| f.clone()))
                .collect(),
        }
    }

    /// The protected folder that holds `resolved`, if any.
    pub fn holding(&self, resolved: &Path) -> Option<&Path> {
        self.folders
            .iter()
            .find(|f| resolved.starts_with(f))
            .map(PathBuf::as_path)
    }
}

/// What a covering grant lets the runner make available: the granted folders, or the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// The folders of the grant's paths that cover the call.
    Paths(Vec<PathBuf>),
    /// The host and port the call reaches.
    Host(String, u16),
}

/// Whether `grant` covers `args`: `None` if not; `Some(None)` for a tool without constraints
/// (`consult`); `Some(Some(scope))` with what the covering paths or host are. `args` must have
/// its paths resolved ([`resolve_args`]).
pub fn covers(grant: &Grant, args: &ToolArgs) -> Option<Option<Scope>> {
    if grant.tool != args.tool() {
        return None;
    }
    match args {
        ToolArgs::ReadFile(a) => paths_scope(grant, &[Path::new(&a.path)]),
        ToolArgs::WriteFile(a) => paths_scope(grant, &[Path::new(&a.path)]),
        ToolArgs::Shell(a) => {
            if !grant.commands.is_empty() && !shell_covered(grant, a) {
                return None;
            }
            if grant.deny {
                // A deny grant forbids the call wherever it runs.
                return Some(Some(Scope::Paths(
                    grant.paths.iter().map(|p| p.base()).collect(),
                )));
            }
            match &a.cwd {
                Some(cwd) if !grant.paths.is_empty() => paths_scope(grant, &[Path::new(cwd)]),
                _ => Some(Some(Scope::Paths(
                    grant.paths.iter().map(|p| p.base()).collect(),
                ))),
            }
        }
        ToolArgs::HttpFetch(a) => {
            let (host, port) = https_host(&a.url).ok()?;
            if grant.hosts.is_empty() && grant.deny {
                return Some(Some(Scope::Host(host, port)));
            }
            grant
                .hosts
                .iter()
                .any(|rule| rule.covers(&host, port))
                .then_some(Some(Scope::Host(host, port)))
        }
        ToolArgs::Consult { .. } => Some(None),
    }
}

/// An allow grant covers a script when every command starts with one of its prefixes; a deny
/// grant, when any command does (`git` allowed and `git push` denied refuse
/// `git status; git push`).
fn shell_covered(grant: &Grant, args: &ShellArgs) -> bool {
    if grant.deny {
        shell::touches_script(&args.command, &grant.commands)
    } else {
        shell::covers_script(&args.command, &grant.commands).is_ok()
    }
}

fn paths_scope(grant: &Grant, paths: &[&Path]) -> Option<Option<Scope>> {
    if grant.paths.is_empty() {
        // Only a deny grant can be without paths (the loader refuses others): it covers all.
        return grant.deny.then(|| {
            Some(Scope::Paths(
                paths.iter().map(|p| p.to_path_buf()).collect(),
            ))
        });
    }
    let mut bases = Vec::new();
    for path in paths {
        let rule = grant.paths.iter().find(|rule| rule.covers(path))?;
        bases.push(rule.base());
    }
    Some(Some(Scope::Paths(bases)))
}

/// The decision on one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run it under `grant`.
    Allow(Allowed),
    /// Ask the owner first; run it under `grant` if they agree.
    Ask(Allowed, AskReason),
    /// Refuse it.
    Deny(Denied),
}

/// A call that may run: under which grant, with which labels, with its arguments resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    /// The grant's id.
    pub grant: String,
    /// The label of the result.
    pub class: Class,
    /// Whether the result is marked untrusted.
    pub untrusted: bool,
    /// The arguments with every path resolved: what the tool must receive.
    pub args: ToolArgs,
    /// What the runner makes available.
    pub scope: Option<Scope>,
}

/// Why the owner is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AskReason {
    /// The grant says `approval = "ask"`.
    GrantAsks,
    /// The session has received untrusted content and the grant says `on_untrusted = "ask"`.
    AfterUntrusted,
}

/// A refusal: the reason (the model's sentence), the grant when one decided it, and a detail
/// for the owner and the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// Why.
    pub reason: DenyReason,
    /// The grant that decided it, if one did.
    pub grant: Option<String>,
    /// What exactly, for the owner.
    pub detail: String,
}

fn deny(reason: DenyReason, grant: Option<&Grant>, detail: String) -> Decision {
    Decision::Deny(Denied {
        reason,
        grant: grant.map(|g| g.id.clone()),
        detail,
    })
}

/// `args` with every path it names resolved (symbolic links and `..`), or why a path cannot be
/// used at all.
pub fn resolve_args(args: &ToolArgs) -> Result<ToolArgs, String> {
    fn absolute(path: &str) -> Result<PathBuf, String> {
        resolve(Path::new(path)).map_err(|e| e.to_string())
    }
    let text = |p: PathBuf| p.to_string_lossy().into_owned();
    Ok(match args {
        ToolArgs::ReadFile(a) => {
            let mut a = a.clone();
            a.path = text(absolute(&a.path)?);
            ToolArgs::ReadFile(a)
        }
        ToolArgs::WriteFile(a) => {
            let mut a = a.clone();
            a.path = text(absolute(&a.path)?);
            ToolArgs::WriteFile(a)
        }
        ToolArgs::Shell(a) => {
            let mut a = a.clone();
            if let Some(cwd) = &a.cwd {
                a.cwd = Some(text(absolute(cwd)?));
            }
            ToolArgs::Shell(a)
        }
        other => other.clone(),
    })
}

fn named_paths(args: &ToolArgs) -> Vec<&str> {
    match args {
        ToolArgs::ReadFile(a) => vec![a.path.as_str()],
        ToolArgs::WriteFile(a) => vec![a.path.as_str()],
        ToolArgs::Shell(a) => a.cwd.as_deref().into_iter().collect(),
        ToolArgs::HttpFetch(_) | ToolArgs::Consult { .. } => Vec::new(),
    }
}

/// Decides `args` against `grants` for a session with `labels`, at `now`.
pub fn decide(
    args: &ToolArgs,
    grants: &[Grant],
    labels: Labels,
    now: Timestamp,
    protected: &Protected,
) -> Decision {
    let tool = args.tool();
    let args = match resolve_args(args) {
        Ok(resolved) => resolved,
        Err(detail) => return deny(DenyReason::InvalidArguments, None, detail),
    };
    for path in named_paths(&args) {
        if let Some(folder) = protected.holding(Path::new(path)) {
            return deny(
                DenyReason::ProtectedPath,
                None,
                format!("{path} is inside boxmaker's folder {}", folder.display()),
            );
        }
    }
    let covering: Vec<(&Grant, Option<Scope>)> = grants
        .iter()
        .filter_map(|g| covers(g, &args).map(|scope| (g, scope)))
        .collect();
    if let Some((grant, _)) = covering.iter().find(|(g, _)| g.deny && !g.expired(now)) {
        return deny(
            DenyReason::DeniedByGrant,
            Some(grant),
            format!("grant {} forbids this {} call", grant.id, tool.as_str()),
        );
    }
    let live: Vec<&(&Grant, Option<Scope>)> = covering
        .iter()
        .filter(|(g, _)| !g.deny && !g.expired(now))
        .collect();
    if live.is_empty() {
        if let Some((grant, _)) = covering.iter().find(|(g, _)| !g.deny) {
            return deny(
                DenyReason::GrantExpired,
                Some(grant),
                format!("grant {} has expired", grant.id),
            );
        }
        return deny(
            DenyReason::NoGrant,
            None,
            format!("no grant covers this {} call", tool.as_str()),
        );
    }
    let within_taint: Vec<&(&Grant, Option<Scope>)> = live
        .iter()
        .copied()
        .filter(|(g, _)| g.max_taint.is_none_or(|max| labels.taint <= max))
        .collect();
    let chosen = within_taint
        .iter()
        .copied()
        .min_by_key(|(g, _)| friction(g, tool, labels));
    let Some((grant, scope)) = chosen else {
        let grant = live.first().map(|(g, _)| *g);
        return deny(
            DenyReason::TaintTooHigh,
            grant,
            format!(
                "the session has seen {} data; no covering grant allows that much (max_taint)",
                labels.taint.as_str()
            ),
        );
    };
    let grant: &Grant = grant;
    if let Some(denied) = unsafe_literal_address(&args, grant) {
        return denied;
    }
    // The labels describe the data, not the grant that lets the call run: of every live grant
    // that covers the call, the highest class, and untrusted if any says so. A broad public
    // grant over a folder does not make a secret file below it public.
    let class = live
        .iter()
        .map(|(g, _)| g.class)
        .max()
        .unwrap_or(grant.class);
    let untrusted = live.iter().any(|(g, _)| g.untrusted);
    let allowed = Allowed {
        grant: grant.id.clone(),
        class,
        untrusted,
        args: args.clone(),
        scope: scope.clone(),
    };
    let after_untrusted = labels.untrusted && tool.has_side_effects();
    match (
        after_untrusted.then_some(grant.on_untrusted),
        grant.approval,
    ) {
        (Some(OnUntrusted::Deny), _) => deny(
            DenyReason::UntrustedInput,
            Some(grant),
            format!(
                "the session has received untrusted content and grant {} refuses {} after that",
                grant.id,
                tool.as_str()
            ),
        ),
        (Some(OnUntrusted::Ask), _) => Decision::Ask(allowed, AskReason::AfterUntrusted),
        (_, Approval::Ask) => Decision::Ask(allowed, AskReason::GrantAsks),
        _ => Decision::Allow(allowed),
    }
}

/// How much stands between a grant and running the call: 0 runs, 1 asks, 2 is refused. Among
/// several grants that cover a call, the one with the least friction decides, file order
/// breaking ties.
fn friction(grant: &Grant, tool: ToolName, labels: Labels) -> u8 {
    let after_untrusted = labels.untrusted && tool.has_side_effects();
    match (
        after_untrusted.then_some(grant.on_untrusted),
        grant.approval,
    ) {
        (Some(OnUntrusted::Deny), _) => 2,
        (Some(OnUntrusted::Ask), _) | (_, Approval::Ask) => 1,
        _ => 0,
    }
}

/// A URL whose host is a literal unsafe address (loopback, private, link-local, metadata) is
/// refused here unless the grant names that address itself; host names are checked by the
/// tool after resolution.
fn unsafe_literal_address(args: &ToolArgs, grant: &Grant) -> Option<Decision> {
    let ToolArgs::HttpFetch(a) = args else {
        return None;
    };
    let (host, _) = https_host(&a.url).ok()?;
    let ip: IpAddr = host.parse().ok()?;
    let named = grant.hosts.iter().any(|h| !h.wildcard && h.host == host);
    (tools::web::address::classify(ip).is_some() && !named).then(|| {
        deny(
            DenyReason::UnsafeAddress,
            Some(grant),
            format!(
                "{ip} is not a public address and grant {} does not name it",
                grant.id
            ),
        )
    })
}
