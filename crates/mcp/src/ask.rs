//! Asking the MCP client's user about a call that waits for the owner, when `brokerd.toml`
//! lets that client answer: by `elicitation/create` on the handshake revisions
//! ([`ask_in_client`]), by `InputRequired` on 2026-07-28 (the gate returns the
//! [`Question`]'s form with a [`request_state`] handle); [`Question::reply`] reads the answer.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::JsonObject;
use rmcp::service::RequestContext;
use serde_json::{Value, json};

use toolport::ToolPort;

/// How the client's user can be asked during a request, if at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AskBy {
    /// An `elicitation/create` request (the handshake revisions).
    Elicitation,
    /// An `InputRequired` result and the client's retry (2026-07-28, where a server sends its
    /// client no request within a call).
    InputRequired,
}

/// How this request's client can be asked: it declared elicitation, on the revision it speaks.
pub(crate) fn asks_by(context: &RequestContext<RoleServer>) -> Option<AskBy> {
    let version = context.protocol_version()?;
    let elicits = context
        .client_capabilities()
        .is_some_and(|capabilities| capabilities.elicitation.is_some());
    match (elicits, version.has_initialize()) {
        (false, _) => None,
        (true, true) => Some(AskBy::Elicitation),
        (true, false) => Some(AskBy::InputRequired),
    }
}

/// The most characters of a call shown in the client's question.
const ASKED_CHARS: usize = 500;

/// What the client's user is asked about a waiting call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Question {
    /// Whether a call may run: its tool and arguments.
    Approval(String),
    /// The model's `ask`: its question and the choices it offers.
    Ask(String, Vec<String>),
}

/// The user's answer to a [`Question`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    /// Run the call once (`true`) or refuse it.
    Approve(bool),
    /// The answer to the model's question.
    Text(String),
}

impl Question {
    /// The question about a waiting call of `tool` with `arguments` (JSON text).
    pub(crate) fn of(tool: &str, arguments: &str) -> Question {
        if tool == "ask"
            && let Ok(Value::Object(args)) = serde_json::from_str::<Value>(arguments)
            && let Some(question) = args.get("question").and_then(Value::as_str)
        {
            let choices = args
                .get("choices")
                .and_then(Value::as_array)
                .map(|c| {
                    c.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            return Question::Ask(question.to_string(), choices);
        }
        Question::Approval(format!("{tool} {arguments}"))
    }

    /// The elicitation that puts it to the client's user.
    pub(crate) fn params(&self) -> rmcp::model::ElicitRequestParams {
        let (message, schema) = match self {
            Question::Approval(call) => {
                let shown: String = call.chars().take(ASKED_CHARS).collect();
                let cut = if shown.len() < call.len() { " …" } else { "" };
                (
                    format!(
                        "boxmaker: the owner's grants ask before this call runs:\n{shown}{cut}\nApprove runs it once; refuse denies it. The call's arguments come from the model: read them before you approve."
                    ),
                    json!({
                        "type": "object",
                        "properties": {
                            "decision": { "type": "string", "title": "Decision", "enum": ["approve", "refuse"] }
                        },
                        "required": ["decision"],
                    }),
                )
            }
            Question::Ask(question, choices) => {
                let shown: String = question.chars().take(ASKED_CHARS).collect();
                let offered = if choices.is_empty() {
                    String::new()
                } else {
                    format!("\nIt offers: {}", choices.join(" | "))
                };
                (
                    format!(
                        "boxmaker: the model asks you (its words, not boxmaker's):\n{shown}{offered}"
                    ),
                    json!({
                        "type": "object",
                        "properties": {
                            "answer": { "type": "string", "title": "Your answer" }
                        },
                        "required": ["answer"],
                    }),
                )
            }
        };
        let schema = match schema {
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

    /// The reply in an elicitation's result (as JSON): for an approval, accepted with
    /// `approve` or `refuse`, or declined (a refusal); for a question, the accepted answer.
    /// `None` when it was dismissed (or declined, for a question): the owner answers then.
    pub(crate) fn reply(&self, result: &Value) -> Option<Reply> {
        let action = result.get("action").and_then(Value::as_str);
        let field = |name: &str| {
            result
                .get("content")
                .and_then(|c| c.get(name))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        match (self, action) {
            (Question::Approval(_), Some("accept")) => Some(Reply::Approve(
                field("decision").as_deref() == Some("approve"),
            )),
            (Question::Approval(_), Some("decline")) => Some(Reply::Approve(false)),
            (Question::Ask(..), Some("accept")) => field("answer").map(Reply::Text),
            _ => None,
        }
    }
}

/// Gives the broker the client's reply; whether it was sent.
pub(crate) fn send(port: &dyn ToolPort, reply: &Reply) -> bool {
    match reply {
        Reply::Approve(approve) => port.answer(*approve),
        Reply::Text(text) => port.reply(text),
    }
}

/// Puts `question` to the client's user and gives the broker the reply; a dismissal leaves
/// the call to the owner in `bx`.
pub(crate) async fn ask_in_client(
    peer: rmcp::Peer<RoleServer>,
    port: Arc<dyn ToolPort>,
    approval: u64,
    question: Question,
) {
    let reply = match peer.create_elicitation(question.params()).await {
        Ok(result) => serde_json::to_value(&result)
            .ok()
            .as_ref()
            .and_then(|r| question.reply(r)),
        Err(error) => {
            tracing::info!(%error, "the client did not answer the question about a waiting call");
            None
        }
    };
    if let Some(reply) = reply {
        let sent = tokio::task::spawn_blocking(move || send(port.as_ref(), &reply)).await;
        tracing::info!(
            approval,
            sent = matches!(sent, Ok(true)),
            "the client answered a waiting call"
        );
    }
}

/// The key of the question among an `InputRequired`'s requests.
pub(crate) const APPROVAL_INPUT: &str = "approval";

/// A fresh `requestState`: 32 random bytes in hex, a handle to a call this server keeps (it
/// carries nothing the client could change to any effect). `None` without randomness: then
/// no handle is made, and the owner answers in `bx`.
pub(crate) fn request_state() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
