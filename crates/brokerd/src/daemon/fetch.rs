//! `http_fetch` as the broker runs it: every hop (the first URL and each redirect) decided
//! again as a call of its own ([`hop_decider`]), and the result or error as an [`Outcome`].
//! Where a box can have a network, the fetch runs in one (the `fetcher` crate's
//! `brokerd-fetch box-fetch`, or `brokerd box-fetch` without it, [`serve`]): the
//! worker resolves nothing and reaches each hop through the box's relay, and the broker's proxy
//! for that box asks [`hop_decider`] for each `CONNECT`, then resolves and classifies the host;
//! the page is read and converted inside the box. Elsewhere it runs in the broker's process,
//! each hop's addresses checked and pinned there.

use std::sync::Arc;

use proto::{DenyReason, Timestamp};
use serde_json::json;

use nettools::web::HostVerdict;

use super::runner::{DirectRunner, Outcome, RunContext};
use policy::args::{ToolArgs, ToolName};
use policy::decide::{Allowed, Decision, decide};
use policy::grants::HostRule;

pub use ::fetcher::{FetchRequest, REQUEST, fetch_outcome, serve, serve_warm};

/// Decides each hop of `allowed`'s fetch: the deciding grant's host rules when a call for that
/// host and port would run unasked, or the sentence saying why it may not be fetched. The
/// call's own first hop was decided already (and may have been approved by the owner), so it
/// keeps its deciding grant's rules. Each other hop allowed raises the run's labels
/// ([`RunContext::raised`]) to its own grant's: the page may come from there.
pub fn hop_decider(
    allowed: &Allowed,
    context: &RunContext,
) -> impl Fn(&str, u16) -> Result<Vec<HostRule>, String> + Send + Sync + 'static {
    let first = match &allowed.args {
        ToolArgs::HttpFetch(args) => policy::hosts::https_host(&args.url).ok(),
        _ => None,
    };
    let first_rules = allowed.hosts.clone();
    let context = context.clone();
    move |host: &str, port: u16| {
        let url = if host.contains(':') {
            format!("https://[{host}]:{port}/")
        } else {
            format!("https://{host}:{port}/")
        };
        // Spelled as the grants and the call's URL are: lower case, no trailing dot, one
        // spelling per IPv6 address.
        if first.is_some() && policy::hosts::https_host(&url).ok() == first {
            return Ok(first_rules.clone());
        }
        let args = policy::args::parse(ToolName::HttpFetch, &json!({ "url": url }).to_string())
            .map_err(|e| format!("{url} is not a URL http_fetch takes: {e}"))?;
        match decide(
            &args,
            &context.grants,
            context.labels,
            Timestamp::now(),
            &context.protected,
        ) {
            Decision::Allow(hop) => {
                context.raised.raise(hop.class, hop.untrusted);
                Ok(hop.hosts)
            }
            Decision::Ask(hop, _) => Err(format!(
                "grant {} covers it but asks the owner first, and a redirect is never asked for",
                hop.grant
            )),
            Decision::Deny(denied) => Err(format!(
                "no grant lets http_fetch reach it ({})",
                denied.reason.model_text()
            )),
        }
    }
}

/// What a fetch in a box answers, given the box's outcome and what its proxy refused last: a
/// failure that a refused tunnel caused becomes the refusal's denial, in the proxy's words.
pub fn boxed_outcome(outcome: Outcome, refused: Option<super::proxy::Refused>) -> Outcome {
    use super::proxy::RefusalKind;
    match (outcome, refused) {
        (Outcome::Failed(_), Some(refused)) => match refused.kind {
            RefusalKind::NotGranted => Outcome::Denied(DenyReason::NoGrant, refused.reason),
            RefusalKind::UnsafeAddress => {
                Outcome::Denied(DenyReason::UnsafeAddress, refused.reason)
            }
            RefusalKind::Other => Outcome::Failed(refused.reason),
        },
        (outcome, _) => outcome,
    }
}

impl DirectRunner {
    /// Runs `http_fetch` in the broker's process: each hop decided by [`hop_decider`], its
    /// addresses checked and pinned here.
    pub(super) fn fetch(
        &self,
        args: &nettools::web::HttpFetchArgs,
        allowed: &Allowed,
        context: &RunContext,
    ) -> Outcome {
        let decider = hop_decider(allowed, context);
        // Why the last hop refused was refused, for the denial's detail.
        let why = Arc::new(std::sync::Mutex::new(None::<String>));
        let noted = Arc::clone(&why);
        // Private addresses only where the grant deciding that hop names its host itself, as
        // the proxy judges a boxed fetch's hops.
        let mut options = nettools::web::FetchOptions::with_verdicts(
            move |host: &str, port: u16| match decider(host, port) {
                Ok(rules) if policy::grants::names_itself(&rules, host, port) => {
                    HostVerdict::NamedItself
                }
                Ok(_) => HostVerdict::Granted,
                Err(reason) => {
                    if let Ok(mut noted) = noted.lock() {
                        *noted = Some(reason);
                    }
                    HostVerdict::Refused
                }
            },
        )
        .with_timeout(context.limit);
        options.resolver = Arc::clone(&self.resolver);
        for root in &self.root_certificates {
            options = options.with_root_certificate(root.clone());
        }
        match fetch_outcome(nettools::web::http_fetch(args, &options)) {
            Outcome::Denied(DenyReason::NoGrant, detail) => {
                let why = why.lock().ok().and_then(|mut w| w.take());
                let detail = match why {
                    Some(why) => format!("{detail}: {why}"),
                    None => detail,
                };
                Outcome::Denied(DenyReason::NoGrant, detail)
            }
            other => other,
        }
    }
}
