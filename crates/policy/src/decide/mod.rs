//! The decision on one call: which grant covers it and whether it runs, asks the owner, or is
//! refused, in the order of the design brief (protected paths; grants that cover the call,
//! expired ones, deny grants; the session's taint; integrity after untrusted content;
//! approval).
//!
//! [`decide`] is a pure function of the call, the grants, the session's labels and the clock
//! (path resolution reads the file system, nothing else); it never runs anything.

use std::path::{Path, PathBuf};

use proto::{Class, DenyReason, Timestamp};
use tools::shell::ShellArgs;

use crate::args::{CallReach, ToolArgs};
use crate::grants::{Grant, HostRule};
use crate::hosts::https_host;
use crate::memory::MemoryAction;
use crate::paths::resolve;
use crate::shell;
use crate::trusted::{Reached, TrustedPlaces};

mod index;
mod integrity;
mod last_step;
mod on_arguments;
mod prepare;
mod rails;
mod trusted;

use rails::{guard_rails, unsafe_literal_address};

pub use index::{GrantIndex, IndexedGrants};
pub(crate) use integrity::{Arguments, Provenance, Vouched};
pub use integrity::{CountReached, Seen, Traced};
pub(crate) use last_step::Ruled;
use last_step::last_step;
pub use on_arguments::{GrantUses, RuleMiss};
pub(crate) use on_arguments::{misses, over_count};
pub use prepare::resolve_args;
use prepare::{named_paths, prepare};
use trusted::trusted_refusal;

/// What a session has seen so far: the two labels that meet the grants on every call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Labels {
    /// The highest class of any result the session has received.
    pub taint: Class,
    /// Whether the session has received any untrusted result.
    pub untrusted: bool,
}

/// What the decision knows of the machine beside the grants: boxmaker's own folders (config,
/// grants, ledger, audit log, sessions, runtime), which no call may name whatever a grant says,
/// and the owner's home and trusted places ([`crate::trusted`]), which a write may reach only
/// through a grant that names them.
#[derive(Debug, Clone, Default)]
pub struct Protected {
    folders: Vec<PathBuf>,
    home: Option<PathBuf>,
    places: TrustedPlaces,
}

impl Protected {
    /// The folders, resolved (symbolic links followed as far as they exist).
    pub fn new(folders: &[PathBuf]) -> Protected {
        Protected {
            // A protected folder that cannot be resolved is kept as written.
            folders: folders.iter().map(|f| resolved_or_as_is(f)).collect(),
            home: None,
            places: TrustedPlaces::default(),
        }
    }

    /// The same, knowing the owner's home (for `~` in command arguments, and the trusted
    /// places in it) and their `$XDG_CONFIG_HOME`, when set.
    pub fn with_home(mut self, home: &Path, xdg_config_home: Option<&Path>) -> Protected {
        self.home = Some(resolved_or_as_is(home));
        self.places = TrustedPlaces::new(home, xdg_config_home);
        self
    }

    /// The owner's trusted places: what a write may reach only through a grant that names
    /// it, and what every box keeps ([`TrustedPlaces::box_pins`]).
    pub fn places(&self) -> &TrustedPlaces {
        &self.places
    }

    /// The protected folders, resolved: what a box masks inside the paths it binds, and what
    /// the walkers prune.
    pub fn folders(&self) -> &[PathBuf] {
        &self.folders
    }

    /// The protected folder that holds `resolved`, if any.
    pub fn holding(&self, resolved: &Path) -> Option<&Path> {
        self.folders
            .iter()
            .find(|f| resolved.starts_with(f))
            .map(PathBuf::as_path)
    }
}

fn resolved_or_as_is(path: &Path) -> PathBuf {
    resolve(path).unwrap_or_else(|_| path.to_path_buf())
}

/// What a covering grant lets the runner make available: the granted folders, or the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// The folders of the grant's paths that cover the call.
    Paths(Vec<PathBuf>),
    /// The host and port the call reaches.
    Host(String, u16),
    /// The memory tags the session's reads, writes and forgets are limited to (the grant's
    /// `tags`); no scope at all is the whole memory.
    Tags(Vec<String>),
}

/// A call as the grants meet it: its arguments with every path resolved, and each place it
/// writes (resolved, with the trusted place it changes, if any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The arguments, paths resolved; for a `shell` call without `cwd`, the folder it will run in.
    pub args: ToolArgs,
    /// What the call writes.
    pub writes: Vec<Write>,
    /// Why what a `shell` script writes cannot be known, when it cannot: then no allow grant
    /// covers it.
    pub unknown_writes: Option<String>,
    /// The rules the script is judged by (those of the shell that will run it).
    pub dialect: shell::Dialect,
    /// Whether the box the call runs in enforces paths (then a `shell` redirection is covered
    /// when its file is inside the grant's folders).
    pub walls: shell::PathEnforcement,
}

/// One place a call writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// The path, resolved.
    pub path: PathBuf,
    /// The trusted place it changes (a `.git` folder, a bare repository, `~/.bashrc`, a
    /// workspace's `.claude`, …), which the grant must name ([`crate::trusted`]).
    pub place: Option<Reached>,
}

/// Whether `grant` covers `call` (seed 001's signature, `Option<Option<Scope>>`): `None` if
/// not; `Some(None)` for a tool without constraints
/// (`consult`, and the memory tools like it when the grant names no `tags`);
/// `Some(Some(scope))` with what the covering paths, host or tags are. A `memory` entry is
/// covered when each of its tags is one of the grant's (an entry without tags gets them).
///
/// A `bash_bg` grant covers `bash_tail` and `bash_kill` (of the session's own jobs, which the
/// broker checks): any allow grant, and a deny grant that names no commands or paths (one that
/// forbids every job).
pub fn covers(grant: &Grant, call: &Call) -> Option<Option<Scope>> {
    let scope = covering_scope(grant, call)?;
    if grant.deny {
        return Some(scope);
    }
    Some(scope.map(|scope| with_trusted_places(scope, call)))
}

/// `scope` with the trusted places the call writes (each named by the grant, or the call
/// would not be covered): a box keeps such a place unchanged unless its read-write paths name
/// it ([`TrustedPlaces::box_pins`]), and this call may change it.
fn with_trusted_places(scope: Scope, call: &Call) -> Scope {
    match scope {
        Scope::Paths(mut paths) => {
            for reached in call.writes.iter().filter_map(|w| w.place.as_ref()) {
                if !paths.contains(&reached.place) {
                    paths.push(reached.place.clone());
                }
            }
            Scope::Paths(paths)
        }
        other => other,
    }
}

fn covering_scope(grant: &Grant, call: &Call) -> Option<Option<Scope>> {
    if grant.tool != call.args.tool().granted_by() {
        return None;
    }
    let reach = call.args.reach();
    if reach == CallReach::OwnJob {
        return (!grant.deny || (grant.commands.is_empty() && grant.paths.is_empty()))
            .then_some(None);
    }
    if !grant.deny
        && (call.unknown_writes.is_some() || !call.writes.iter().all(|w| writable(grant, w)))
    {
        return None;
    }
    match reach {
        CallReach::Path { path, .. } => paths_scope(grant, &[Path::new(path)]),
        CallReach::Clone { url, path } => {
            // Both the host and the destination: a deny grant names either (or neither: all).
            let (host, port) = https_host(url).ok()?;
            let host_named = grant.hosts.iter().any(|rule| rule.covers(&host, port));
            let path_named = grant.paths.iter().any(|rule| rule.covers(Path::new(path)));
            if grant.deny {
                let all = grant.hosts.is_empty() && grant.paths.is_empty();
                return (all || host_named || path_named)
                    .then(|| Some(Scope::Paths(vec![PathBuf::from(path)])));
            }
            if !host_named {
                return None;
            }
            paths_scope(grant, &[Path::new(path)])
        }
        CallReach::Script(a) => {
            if !grant.commands.is_empty() && !shell_covered(grant, a, call.dialect, call.walls) {
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
        CallReach::Url(url) => {
            let (host, port) = https_host(url).ok()?;
            if grant.hosts.is_empty() && grant.deny {
                return Some(Some(Scope::Host(host, port)));
            }
            grant
                .hosts
                .iter()
                .any(|rule| rule.covers(&host, port))
                .then_some(Some(Scope::Host(host, port)))
        }
        CallReach::Unconstrained => Some(None),
        // Answered above.
        CallReach::OwnJob => Some(None),
        CallReach::MemoryRead => Some(tags_scope(grant)),
        CallReach::MemoryChange(action) => match action {
            MemoryAction::Add { tags, .. }
                if !grant.tags.is_empty() && !tags.iter().all(|t| grant.tags.contains(t)) =>
            {
                None
            }
            MemoryAction::Add { .. } | MemoryAction::Forget(_) => Some(tags_scope(grant)),
        },
    }
}

/// The memory a grant reaches: its tags, or (none named) all of it.
fn tags_scope(grant: &Grant) -> Option<Scope> {
    (!grant.tags.is_empty()).then(|| Scope::Tags(grant.tags.clone()))
}

/// Whether an allow grant lets the call write `write`: one of its paths covers it, and when it
/// changes a trusted place, one of its paths names that place.
fn writable(grant: &Grant, write: &Write) -> bool {
    grant.paths.iter().any(|rule| rule.covers(&write.path))
        && write
            .place
            .as_ref()
            .is_none_or(|reached| grant.paths.iter().any(|rule| rule.names(&reached.place)))
}

/// An allow grant covers a script when every command starts with one of its prefixes; a deny
/// grant, when any command does (`git` allowed and `git push` denied refuse
/// `git status; git push`).
pub(super) fn shell_covered(
    grant: &Grant,
    args: &ShellArgs,
    dialect: shell::Dialect,
    walls: shell::PathEnforcement,
) -> bool {
    if grant.deny {
        shell::touches_script_in(&args.command, &grant.commands, dialect, walls)
    } else {
        shell::covers_script_in(&args.command, &grant.commands, dialect, walls).is_ok()
    }
}

/// The rules a `shell` script is judged by: bash's when the `shell` tool will run it with
/// bash, POSIX sh's when it falls back to `/bin/sh`.
pub fn shell_dialect() -> shell::Dialect {
    let program = tools::shell::find_shell();
    if program.file_name().is_some_and(|name| name == "bash") {
        shell::Dialect::Bash
    } else {
        shell::Dialect::Posix
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
    /// The deciding grant's hosts (the grant named in `grant`): for `shell` and `bash_bg`, the
    /// only hosts the call's box may reach, through the broker's proxy; empty: no network.
    pub hosts: Vec<HostRule>,
    /// When the provenance of its values asks ([`AskReason::Provenance`]), or a rule on an
    /// argument or a count does ([`AskReason::ArgumentRule`]): which values, and why.
    pub traced: Traced,
    /// The ids of the covering grants that count their calls (`per_session`): the broker
    /// counts this call under each when it runs.
    pub counted: Vec<String>,
}

/// Why the owner is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AskReason {
    /// The grant says `approval = "ask"`.
    GrantAsks,
    /// The session has received untrusted content and the grant says `on_untrusted = "ask"`.
    AfterUntrusted,
    /// The grant says `on_untrusted = "provenance"` and a value of the call came only from
    /// untrusted results (named in [`Allowed::traced`]).
    Provenance,
    /// A value is outside a grant's rule on its argument that says `otherwise = "ask"`, or the
    /// grant's `per_session` count is reached (named in [`Allowed::traced`]).
    ArgumentRule,
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

/// Decides `args` against `grants` for a session with `labels`, at `now`.
///
/// Deny wins; then, of the live allow grants that cover the call, the strictest on every axis:
/// any whose `max_taint` is below the session's taint refuses (`TaintTooHigh`), any whose
/// `on_untrusted` refuses after untrusted input refuses (`UntrustedInput`), any that asks asks.
/// The result's labels are the highest class and untrusted if any says so.
pub fn decide(
    args: &ToolArgs,
    grants: &[Grant],
    labels: Labels,
    now: Timestamp,
    protected: &Protected,
) -> Decision {
    decide_in(
        args,
        grants,
        labels,
        now,
        protected,
        shell::PathEnforcement::Unenforced,
    )
}

/// [`decide_in`] for a session whose values are tracked: `seen` has its labels and its index,
/// which grants that say `on_untrusted = "provenance"` or `max_taint = "carried"` read.
pub fn decide_seen(
    args: &ToolArgs,
    grants: &[Grant],
    seen: Seen<'_>,
    now: Timestamp,
    protected: &Protected,
    walls: shell::PathEnforcement,
) -> Decision {
    decide_with(args, (grants, None), seen, now, protected, walls)
}

/// [`decide_seen`] looking only at the grants `index` (built by [`GrantIndex::new`] from
/// `grants`) says may cover the call: the same decision, in time that grows with the grants of
/// the call's tool and folders rather than with the list (an index built from another list is
/// not used).
pub fn decide_indexed(
    args: &ToolArgs,
    (grants, index): (&[Grant], &GrantIndex),
    seen: Seen<'_>,
    now: Timestamp,
    protected: &Protected,
    walls: shell::PathEnforcement,
) -> Decision {
    decide_with(args, (grants, Some(index)), seen, now, protected, walls)
}

/// [`decide`] for a call whose box enforces paths as `walls` says: with
/// [`shell::PathEnforcement::Enforced`] a `shell` redirection is covered when its file resolves
/// inside the grant's folders and outside the protected ones (the strict rules of [`decide`]
/// refuse every redirection).
pub fn decide_in(
    args: &ToolArgs,
    grants: &[Grant],
    labels: Labels,
    now: Timestamp,
    protected: &Protected,
    walls: shell::PathEnforcement,
) -> Decision {
    decide_with(
        args,
        (grants, None),
        Seen::labels_only(labels),
        now,
        protected,
        walls,
    )
}

fn decide_with(
    args: &ToolArgs,
    (grants, index): (&[Grant], Option<&GrantIndex>),
    seen: Seen<'_>,
    now: Timestamp,
    protected: &Protected,
    walls: shell::PathEnforcement,
) -> Decision {
    let labels = seen.labels;
    let tool = args.tool();
    let call = match prepare(args, grants, now, protected, walls) {
        Ok(call) => call,
        Err(detail) => {
            // The rails hold even when a place the script names cannot be resolved.
            if let Some(a) = args.script()
                && let Some(refused) = guard_rails(a, tool, grants, protected)
            {
                return refused;
            }
            return deny(DenyReason::InvalidArguments, None, detail);
        }
    };
    for path in named_paths(&call) {
        if let Some(folder) = protected.holding(path) {
            return deny(
                DenyReason::ProtectedPath,
                None,
                format!(
                    "{} is inside boxmaker's folder {}",
                    path.display(),
                    folder.display()
                ),
            );
        }
    }
    if let Some(a) = call.args.script()
        && let Some(refused) = guard_rails(a, tool, grants, protected)
    {
        return refused;
    }
    let covering: Vec<(&Grant, Option<Scope>)> = match index.filter(|i| i.fits(grants.len())) {
        Some(index) => index
            .candidates(&call.args)
            .iter()
            .filter_map(|&at| grants.get(at))
            .filter_map(|g| covers(g, &call).map(|scope| (g, scope)))
            .collect(),
        None => grants
            .iter()
            .filter_map(|g| covers(g, &call).map(|scope| (g, scope)))
            .collect(),
    };
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
        if let Some(refused) = trusted_refusal(&call, grants, now) {
            return refused;
        }
        let detail = match &call.unknown_writes {
            Some(why) => format!("no grant covers this {} call: {why}", tool.as_str()),
            None => format!("no grant covers this {} call", tool.as_str()),
        };
        return deny(DenyReason::NoGrant, None, detail);
    }
    if let Some((grant, _)) = live
        .iter()
        .find(|(g, _)| g.max_taint.is_some_and(|max| labels.taint > max))
    {
        return deny(
            DenyReason::TaintTooHigh,
            Some(grant),
            format!(
                "the session has seen {} data; grant {} allows at most {} (max_taint)",
                labels.taint.as_str(),
                grant.id,
                grant.max_taint.map_or("any", Class::as_str)
            ),
        );
    }
    if let Some(denied) = unsafe_literal_address(&call.args, &live) {
        return denied;
    }
    let arguments = Arguments::Builtin(args);
    let provenance = Provenance::new(seen, tool.facts(), arguments, vouched(&call, &live));
    if let Some((grant, _)) = live.iter().find(|(g, _)| g.carried)
        && let Err(traced) = provenance.confidentiality()
    {
        return deny(
            DenyReason::TaintTooHigh,
            Some(grant),
            format!(
                "grant {} refuses a call that carries a secret (max_taint = \"carried\"): {}",
                grant.id,
                traced.lines().first().map_or("", String::as_str)
            ),
        );
    }
    let (refused, ruled) = rules_of(
        live.iter()
            .map(|(g, _)| (g.id.as_str(), &g.args[..], g.per_session)),
        arguments,
        seen,
    );
    if let Some(miss) = refused {
        let grant = live
            .iter()
            .find(|(g, _)| g.id == miss.grant)
            .map(|(g, _)| *g);
        return deny(
            DenyReason::DeniedByGrant,
            grant,
            format!("grant {} refuses this call: {miss}", miss.grant),
        );
    }
    last_step(&call, &live, labels, &provenance, ruled)
}

/// The covering grants' rules on the call's arguments and their counts per session (each
/// grant as its id, its rules and its `per_session`): the first value a rule refuses, and
/// what the rules and counts ask about.
pub(crate) fn rules_of<'g>(
    grants: impl Iterator<Item = (&'g str, &'g [crate::grants::ArgumentRule], Option<u64>)>,
    arguments: Arguments<'_>,
    seen: Seen<'_>,
) -> (Option<RuleMiss>, Ruled) {
    let grants: Vec<_> = grants.collect();
    let mut ruled = Ruled::default();
    if grants.iter().any(|(_, rules, _)| !rules.is_empty()) {
        let json = arguments.json();
        for (id, rules, _) in &grants {
            for miss in misses(id, rules, &json, seen.values) {
                match miss.otherwise {
                    crate::grants::Otherwise::Deny => return (Some(miss), ruled),
                    crate::grants::Otherwise::Ask => ruled.asks.push(miss),
                }
            }
        }
    }
    ruled.count = over_count(grants.iter().map(|(id, _, n)| (*id, *n)), seen.uses).map(
        |(grant, limit, used)| {
            Box::new(CountReached {
                grant: grant.to_string(),
                limit,
                used,
            })
        },
    );
    (None, ruled)
}

/// What the live covering grants vouch for in `call`: their command prefixes' words, its paths
/// (the grants cover them, or the call would not be covered), its URL's host when a grant's
/// `hosts` name it.
fn vouched<'g>(call: &Call, live: &[&(&'g Grant, Option<Scope>)]) -> Vouched<'g> {
    let words = live
        .iter()
        .flat_map(|(g, _)| g.commands.iter().flatten())
        .map(|w| crate::provenance::normal::text_form(w))
        .collect();
    Vouched {
        words,
        paths: true,
        hosts: live.iter().any(|(g, _)| !g.hosts.is_empty())
            && matches!(
                call.args.reach(),
                CallReach::Url(_) | CallReach::Clone { .. }
            ),
        rules: live.iter().flat_map(|(g, _)| g.args.iter()).collect(),
    }
}
