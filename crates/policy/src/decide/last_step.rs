//! The last step of a decision, once some live grant covers the call and none refuses it
//! outright: refuse after untrusted input, ask (after untrusted input, by provenance, by a
//! rule on an argument or a count per session, by `approval`), or run, each by the strictest
//! live covering grant.

use proto::DenyReason;

use super::integrity::Provenance;
use super::on_arguments::RuleMiss;
use super::{Allowed, AskReason, Call, CountReached, Decision, Scope, Traced, deny};
use crate::grants::{Approval, Grant, OnUntrusted};

/// What the rules on the call's arguments and the grants' counts per session ask about.
#[derive(Debug, Default)]
pub(crate) struct Ruled {
    /// The values outside a rule that says `otherwise = "ask"`.
    pub(crate) asks: Vec<RuleMiss>,
    /// The grant whose `per_session` count the call would pass.
    pub(crate) count: Option<Box<CountReached>>,
}

impl Ruled {
    /// The id of the grant that asks by a rule or a count, if one does.
    pub(crate) fn asking_grant(&self) -> Option<&str> {
        self.asks
            .first()
            .map(|miss| miss.grant.as_str())
            .or(self.count.as_ref().map(|c| c.grant.as_str()))
    }

    /// `traced` (what provenance asks about, if it does) with what the rules and the count
    /// ask about.
    pub(crate) fn into_traced(self, mut traced: Traced) -> Traced {
        traced.misses = self.asks;
        traced.count = self.count;
        traced
    }
}

/// The last step (see the module documentation). The labels describe the data, not the grant
/// that lets the call run: of every live covering grant, the highest class, and untrusted if
/// any says so, so a broad public grant over a folder does not make a secret file below it
/// public.
pub(super) fn last_step(
    call: &Call,
    live: &[&(&Grant, Option<Scope>)],
    labels: super::Labels,
    provenance: &Provenance<'_>,
    ruled: Ruled,
) -> Decision {
    let tool = call.args.tool();
    let Some((first, first_scope)) = live.first().copied() else {
        return deny(
            DenyReason::NoGrant,
            None,
            format!("no grant covers this {} call", tool.as_str()),
        );
    };
    let class = live
        .iter()
        .map(|(g, _)| g.class)
        .max()
        .unwrap_or(first.class);
    // Search results and a clone's output are the web's text, and a consulted model's answer
    // is another model's (its question may carry untrusted text), whatever a grant says. A
    // write's result echoes what it wrote: it carries its arguments' labels.
    let untrusted = if tool.echoes_arguments() {
        provenance.carries_untrusted()
    } else {
        tool.always_untrusted() || live.iter().any(|(g, _)| g.untrusted)
    };
    let mut counted: Vec<String> = live
        .iter()
        .filter(|(g, _)| g.per_session.is_some())
        .map(|(g, _)| g.id.clone())
        .collect();
    counted.dedup();
    let allowed = |grant: &Grant, scope: &Option<Scope>, traced: Traced| Allowed {
        grant: grant.id.clone(),
        class,
        untrusted,
        args: call.args.clone(),
        scope: scope.clone(),
        hosts: grant.hosts.clone(),
        traced,
        counted: counted.clone(),
    };
    let mut asking: Option<(&Grant, &Option<Scope>, AskReason, Traced)> = None;
    if labels.untrusted && call.args.has_side_effects() {
        if let Some((grant, _)) = live
            .iter()
            .find(|(g, _)| g.on_untrusted == OnUntrusted::Deny)
        {
            return deny(
                DenyReason::UntrustedInput,
                Some(grant),
                format!(
                    "the session has received untrusted content and grant {} refuses {} after that",
                    grant.id,
                    tool.as_str()
                ),
            );
        }
        if let Some((grant, scope)) = live
            .iter()
            .find(|(g, _)| g.on_untrusted == OnUntrusted::Ask)
        {
            return Decision::Ask(
                allowed(grant, scope, Traced::default()),
                AskReason::AfterUntrusted,
            );
        }
        if let Some((grant, scope)) = live
            .iter()
            .find(|(g, _)| g.on_untrusted == OnUntrusted::Provenance)
            && let Err(traced) = provenance.integrity()
        {
            asking = Some((grant, scope, AskReason::Provenance, traced));
        }
    }
    // A rule or a count that asks: one ask, naming every value that asks (with the
    // provenance findings, when provenance asks too), so one approval answers it whole.
    if let Some(id) = ruled.asking_grant()
        && let Some((grant, scope)) = live.iter().find(|(g, _)| g.id == id)
    {
        let traced = asking.take().map(|(_, _, _, t)| t).unwrap_or_default();
        asking = Some((
            grant,
            scope,
            AskReason::ArgumentRule,
            ruled.into_traced(traced),
        ));
    }
    if let Some((grant, scope, reason, traced)) = asking {
        return Decision::Ask(allowed(grant, scope, traced), reason);
    }
    if let Some((grant, scope)) = live.iter().find(|(g, _)| g.approval == Approval::Ask) {
        return Decision::Ask(
            allowed(grant, scope, Traced::default()),
            AskReason::GrantAsks,
        );
    }
    Decision::Allow(allowed(first, first_scope, Traced::default()))
}
