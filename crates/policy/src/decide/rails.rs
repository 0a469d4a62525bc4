//! The refusals that come before any grant's verdict, whatever a grant says: the guard rails
//! of a script, and a URL that names an unsafe address literally.

use std::net::IpAddr;
use std::path::PathBuf;

use proto::DenyReason;
use tools::shell::ShellArgs;

use super::{Decision, Protected, Scope, deny};
use crate::args::{CallReach, ToolArgs, ToolName};
use crate::grants::Grant;
use crate::hosts::https_host;
use crate::paths::resolve;
use crate::shell;

/// A URL whose host is a literal unsafe address (loopback, private, link-local, metadata) is
/// refused here unless the grant names that address itself; host names are checked by the
/// tool after resolution.
pub(super) fn unsafe_literal_address(
    args: &ToolArgs,
    live: &[&(&Grant, Option<Scope>)],
) -> Option<Decision> {
    let url = match args.reach() {
        CallReach::Url(url) | CallReach::Clone { url, .. } => url,
        _ => return None,
    };
    let (host, _) = https_host(url).ok()?;
    let ip: IpAddr = host.parse().ok()?;
    let named = live
        .iter()
        .any(|(g, _)| g.hosts.iter().any(|h| !h.wildcard && h.host == host));
    let (grant, _) = live.first()?;
    (nettools::web::address::classify(ip).is_some() && !named).then(|| {
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

/// The guard rails on a `shell` or `bash_bg` call, in seed 003's order, whatever a grant says:
/// a catastrophic command (`CatastrophicCommand`), a command sent to the background
/// (`BackgroundCommand`; a job is in the background already, and refusing `&` there too keeps
/// every process of the script the box's own), and any literal word or redirection target of
/// the script inside a protected folder (`ProtectedPath`). The granted bases `rm` may not
/// remove are those of the grants of the call's own tool.
pub(super) fn guard_rails(
    args: &ShellArgs,
    tool: ToolName,
    grants: &[Grant],
    protected: &Protected,
) -> Option<Decision> {
    let cwd = PathBuf::from(args.cwd.as_deref().unwrap_or("/"));
    let granted: Vec<PathBuf> = grants
        .iter()
        .filter(|g| g.tool == tool && !g.deny)
        .flat_map(|g| g.paths.iter().map(|p| p.base()))
        .collect();
    let place = shell::Place {
        cwd: &cwd,
        home: protected.home.as_deref(),
        granted: &granted,
    };
    if let Some(what) = shell::catastrophic(&args.command, &place) {
        return Some(deny(DenyReason::CatastrophicCommand, None, what));
    }
    if shell::backgrounded(&args.command) {
        return Some(deny(
            DenyReason::BackgroundCommand,
            None,
            "the script sends a command to the background with `&`".into(),
        ));
    }
    for word in shell::path_words(&args.command) {
        let path = if word == "~" || word.starts_with("~/") {
            match &protected.home {
                Some(home) => home.join(word.trim_start_matches('~').trim_start_matches('/')),
                None => continue,
            }
        } else if word.starts_with('~') {
            continue;
        } else {
            cwd.join(&word)
        };
        // A word that does not resolve names no place the kernel could reach either.
        let Ok(resolved) = resolve(&path) else {
            continue;
        };
        if let Some(folder) = protected.holding(&resolved) {
            return Some(deny(
                DenyReason::ProtectedPath,
                None,
                format!(
                    "the script names {}, inside boxmaker's folder {}",
                    resolved.display(),
                    folder.display()
                ),
            ));
        }
    }
    None
}
