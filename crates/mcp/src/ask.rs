//! Asking the MCP client's user about a call that waits for the owner, when `brokerd.toml`
//! lets that client answer: by `elicitation/create` on the handshake revisions
//! ([`ask_in_client`]), by `InputRequired` on 2026-07-28 (the gate returns
//! [`approval_question`] with a [`request_state`] handle); [`decision`] reads the answer.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::JsonObject;
use rmcp::service::RequestContext;
use serde_json::{Value, json};

use loopd::tools::ToolPort;

/// Whether the client can be asked through elicitation during this request: it declared
/// the capability, on a revision with the handshake (on 2026-07-28 a server asks the client
/// only by returning `InputRequired`, which this server does not do yet).
pub(crate) fn elicits(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|version| version.has_initialize())
        && context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.elicitation.is_some())
}

/// The most characters of a call shown in the client's question.
const ASKED_CHARS: usize = 500;

/// Asks the client's user whether the waiting call may run, and gives the broker the answer:
/// accepted with `approve` runs it once; `refuse` or a decline refuses it; a dismissal leaves
/// it to the owner in `bx`.
pub(crate) async fn ask_in_client(
    peer: rmcp::Peer<RoleServer>,
    port: Arc<dyn ToolPort>,
    approval: u64,
    call: String,
) {
    let params = approval_question(&call);
    let approve = match peer.create_elicitation(params).await {
        Ok(result) => serde_json::to_value(&result)
            .ok()
            .as_ref()
            .and_then(decision),
        Err(error) => {
            tracing::info!(%error, "the client did not answer the approval's question");
            None
        }
    };
    if let Some(approve) = approve {
        let sent = tokio::task::spawn_blocking(move || port.answer(approve)).await;
        tracing::info!(
            approval,
            approve,
            sent = matches!(sent, Ok(true)),
            "the client answered the approval"
        );
    }
}

/// Whether a waiting call may be put to the client as `InputRequired` (2026-07-28, the
/// client able to answer an elicitation).
pub(crate) fn elicits_by_input(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|version| !version.has_initialize())
        && context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.elicitation.is_some())
}

/// The key of the approval's question among an `InputRequired`'s requests.
pub(crate) const APPROVAL_INPUT: &str = "approval";

/// A fresh `requestState`: 32 random bytes in hex, a handle to a call this server keeps (it
/// carries nothing the client could change to any effect).
pub(crate) fn request_state() -> String {
    let mut bytes = [0u8; 32];
    if getrandom::fill(&mut bytes).is_err() {
        // No randomness: a handle nobody can guess cannot be made, so none is reused.
        bytes.iter_mut().for_each(|b| *b = 0);
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The question put to the client's user about a waiting call (`call`: its tool and
/// arguments, cut to [`ASKED_CHARS`]).
pub(crate) fn approval_question(call: &str) -> rmcp::model::ElicitRequestParams {
    let shown: String = call.chars().take(ASKED_CHARS).collect();
    let cut = if shown.len() < call.len() { " …" } else { "" };
    let message = format!(
        "boxmaker: the owner's grants ask before this call runs:\n{shown}{cut}\nApprove runs it once; refuse denies it. The call's arguments come from the model: read them before you approve."
    );
    let schema = match json!({
        "type": "object",
        "properties": {
            "decision": { "type": "string", "title": "Decision", "enum": ["approve", "refuse"] }
        },
        "required": ["decision"],
    }) {
        Value::Object(object) => object,
        _ => JsonObject::new(),
    };
    rmcp::model::ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: rmcp::model::ElicitationSchema::from_json_schema(schema)
            .unwrap_or_else(|_| rmcp::model::ElicitationSchema::new(Default::default())),
    }
}

/// The decision in an elicitation's result: accepted with `approve` (true) or `refuse`, or
/// declined (false); `None` when it was dismissed or is not one.
pub(crate) fn decision(result: &Value) -> Option<bool> {
    match result.get("action").and_then(Value::as_str) {
        Some("accept") => Some(
            result
                .get("content")
                .and_then(|c| c.get("decision"))
                .and_then(Value::as_str)
                == Some("approve"),
        ),
        Some("decline") => Some(false),
        _ => None,
    }
}
