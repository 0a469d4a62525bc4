//! What an approval's ending means: the call's final answer (refused, expired, answered), the
//! owner's message, the refusal for an id that no longer waits, and the owner's view of an
//! approval loaded from the ledger.

use ledger::{Answer, ApprovalRow, Field};
use proto::{
    ApprovalId, AskWhy, Class, DenyReason, GrantId, OwnerErrorCode, PendingKind, PendingView,
    Resolution, ToolResponse,
};

use super::super::Broker;
use super::super::render::render;
use super::{Ending, OwnerAnswer, OwnerRefusal};

/// The call's final answer when the ending gives one (refused, expired, answered), and what to
/// tell the owner.
pub(super) fn final_answer(
    broker: &Broker,
    view: &PendingView,
    ending: &Ending,
) -> (Option<(Answer, ToolResponse, String)>, String) {
    let id = view.approval;
    let denied = |reason: DenyReason, detail: &str| {
        Some((
            Answer::Denied { reason },
            ToolResponse::Denied { reason },
            detail.to_string(),
        ))
    };
    let ask_result = |text: &str| {
        let rendered = render(
            policy::ask::ASK,
            Class::Public,
            false,
            serde_json::Map::new(),
            text,
            broker.config.result_cap,
        );
        let response = ToolResponse::Result {
            content: rendered.text.clone(),
            class: Class::Public,
            untrusted: false,
            truncated: rendered.truncated,
        };
        let answer = Answer::Result {
            text: Field::of(&rendered.text),
            class: Class::Public,
            untrusted: false,
            truncated: rendered.truncated,
        };
        Some((answer, response, String::new()))
    };
    match (ending, view.kind) {
        (Ending::Owner(OwnerAnswer::Once), _) => (
            None,
            format!("approval {id}: approved once; the call runs now"),
        ),
        (Ending::Owner(OwnerAnswer::ForSession), _) => {
            let grant = view.grant.as_ref().map_or("(none)", GrantId::as_str);
            let mut message = format!(
                "approval {id}: approved, and grant {grant} for the rest of session {}",
                view.session
            );
            if view.why.scoped_to_values(&view.values) {
                let values: Vec<String> = view.values.iter().map(ToString::to_string).collect();
                message.push_str(&format!(
                    ", for these values only: {}; a value of another call of it that came only from untrusted results asks again",
                    values.join("; ")
                ));
            } else if view.why == AskWhy::AfterUntrusted {
                message.push_str(&format!(
                    "; this turns the integrity check (on_untrusted) off for grant {grant} in this session"
                ));
            }
            (None, message)
        }
        (Ending::Owner(OwnerAnswer::Refuse), _) => (
            denied(DenyReason::ApprovalRefused, "the owner refused"),
            format!("approval {id}: refused"),
        ),
        (Ending::Owner(OwnerAnswer::Text(text)), _) => {
            (ask_result(text), format!("question {id}: answered"))
        }
        (Ending::Expired, PendingKind::Approval) => (
            denied(DenyReason::ApprovalExpired, "nobody answered in time"),
            format!("approval {id} expired"),
        ),
        (Ending::Expired, PendingKind::Question) => (
            ask_result(policy::ask::NOT_ANSWERED),
            format!("question {id} expired"),
        ),
        (Ending::Abandoned(why), _) => (None, format!("approval {id} abandoned: {why}")),
    }
}

/// The refusal for an id that is not waiting: unknown, or already settled (and how).
pub(super) fn not_pending(broker: &Broker, id: ApprovalId) -> OwnerRefusal {
    match broker.with_ledger(|l| l.approval(id)) {
        Ok(Some(row)) => {
            let how = match row.resolution {
                Some(Resolution::ApprovedOnce) => "it was approved".to_string(),
                Some(Resolution::ApprovedForSession) => {
                    "it was approved for its session".to_string()
                }
                Some(Resolution::Refused) => "it was refused".to_string(),
                Some(Resolution::Answered { .. }) => "it was answered".to_string(),
                Some(Resolution::Expired) => "it expired".to_string(),
                Some(Resolution::Abandoned { why }) => format!("it was abandoned ({why})"),
                None => "it is being settled right now".to_string(),
            };
            OwnerRefusal::new(
                OwnerErrorCode::NotPending,
                format!("approval {id} is no longer pending: {how}"),
            )
        }
        Ok(None) => OwnerRefusal::new(
            OwnerErrorCode::UnknownApproval,
            format!("there is no approval {id}; `bx approvals` lists the pending ones"),
        ),
        Err(error) => OwnerRefusal::new(
            OwnerErrorCode::Internal,
            format!("approval {id} cannot be read from the ledger: {error}"),
        ),
    }
}

/// The owner's view of an approval the ledger holds (after a restart: the arguments are whole
/// when they were short enough to be recorded whole).
pub(super) fn view_of(broker: &Broker, row: &ApprovalRow) -> PendingView {
    let arguments = match &row.arguments {
        Field::Text { text } => text.clone(),
        Field::Digest { sha256, size } => {
            format!("({size} bytes, SHA-256 {sha256}; shown whole once the client is back)")
        }
    };
    let question = (row.why == AskWhy::Question).then(|| {
        policy::ask::parse_ask(&arguments).map_or_else(|_| arguments.clone(), |a| a.question)
    });
    let choices = policy::ask::parse_ask(&arguments)
        .map(|a| a.choices)
        .unwrap_or_default();
    PendingView {
        approval: row.id,
        kind: if question.is_some() {
            PendingKind::Question
        } else {
            PendingKind::Approval
        },
        session: row.session.clone(),
        parent: broker.children.binding(&row.session).map(|b| b.parent),
        call_id: row.call_id,
        tool: row.tool.clone(),
        arguments,
        grant: row.grant.clone(),
        why: row.why,
        taint: row.taint,
        untrusted: row.untrusted,
        untrusted_by: broker
            .with_ledger(|l| l.untrusted_by(&row.session))
            .ok()
            .flatten(),
        question,
        choices,
        provenance: row.provenance.clone(),
        values: row.values.clone(),
        requested: row.requested,
        expires: row.expires,
    }
}

/// The refusal for an answer of the wrong kind: a text for an approval, or an approval's answer
/// for a question.
pub(super) fn wrong_kind(
    id: ApprovalId,
    kind: PendingKind,
    tool: &str,
    answer: &OwnerAnswer,
) -> Result<(), OwnerRefusal> {
    match (answer, kind) {
        (OwnerAnswer::Text(_), PendingKind::Approval) => Err(OwnerRefusal::new(
            OwnerErrorCode::WrongKind,
            format!(
                "approval {id} is a {tool} call, not a question: use `bx approve {id}` or `bx refuse {id}`"
            ),
        )),
        (OwnerAnswer::Text(_), PendingKind::Question) | (_, PendingKind::Approval) => Ok(()),
        (_, PendingKind::Question) => Err(OwnerRefusal::new(
            OwnerErrorCode::WrongKind,
            format!("approval {id} is a question: answer it with `bx answer {id} TEXT`"),
        )),
    }
}
