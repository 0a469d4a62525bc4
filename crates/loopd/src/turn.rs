//! One turn of a conversation: the person's message in, the model's requests and tool calls,
//! the final answer out. Every tool call goes through [`dispatch`] and, when it is not answered
//! locally, through the [`ToolPort`] (seed M3a/16, rule 5).

use std::borrow::Cow;

use proto::{Class, DenyReason, Timestamp, ToolRequest, ToolResponse};
use serde::Serialize;

use crate::criteria::{AgentRole, CriteriaError, Criterion, CtxIsolated, VerifyOutcome};
use crate::llama::{LlamaError, Message, Model, ToolCall, ToolChoice};
use crate::session::{Session, SessionError};
use crate::tools::{
    ALREADY_CALLED, CALL_TOOL, Dispatch, FIND_TOOL, Registry, STOPPED_BEFORE_RUNNING, ToolPort,
    cap_result, denial_text, dispatch, over_limit_text,
};

/// Limits on one turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Model requests per turn; a turn that needs more fails with [`TurnError::TooManyRounds`].
    pub max_rounds: usize,
    /// Tool calls per turn, across its rounds. Of a reply that goes past it, only the calls
    /// within it and one more are kept; that one is answered with [`over_limit_text`] for all
    /// the calls not run, and the model must answer. Calls a stopped loopd left without a
    /// result are sent again only within it.
    pub max_tool_calls: usize,
    /// Bytes of one tool result the model sees ([`cap_result`]); never below the broker's cap.
    pub result_cap: usize,
    /// The `tool_choice` of each turn's first request (e.g. to make a small model start with a
    /// tool); `None`: `auto`. Every other request says `auto`, and `none` once the turn's
    /// [`Limits::max_tool_calls`] are spent.
    pub first_tool_choice: Option<ToolChoice>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_rounds: 16,
            max_tool_calls: 32,
            result_cap: 32 * 1024,
            first_tool_choice: None,
        }
    }
}

/// What a turn needs: the model, the port, the registry and the limits.
pub struct Runtime<'a> {
    /// Answers chat requests.
    pub model: &'a dyn Model,
    /// Decides and runs tool calls.
    pub port: &'a dyn ToolPort,
    /// What `find_tool` searches and `call_tool` accepts.
    pub registry: &'a Registry,
    /// The turn's limits.
    pub limits: Limits,
    /// Where the child sessions a `delegate` call opens are run ([`crate::delegate`]); `None`:
    /// the open's answer goes to the model as it is, and nobody runs the child.
    pub children: Option<&'a dyn Children>,
}

/// Runs the child sessions a call opens (implemented by [`crate::delegate`]'s hosts).
pub trait Children {
    /// When `response`, the port's final answer to `request`, opened a child session: runs
    /// it and returns what the model reads of the call instead. `None`: the call opened none.
    fn opened(
        &self,
        rt: &Runtime<'_>,
        request: &ToolRequest,
        response: &ToolResponse,
        on_event: &mut dyn FnMut(&TurnEvent),
    ) -> Option<CallOutcome>;
}

/// What happens during a turn, for the person watching (terminal, log, owner).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TurnEvent {
    /// A piece of the model's text as it streams.
    TextDelta {
        /// The piece.
        text: String,
    },
    /// The model's whole text for one request (may precede tool calls).
    AssistantText {
        /// The text.
        text: String,
    },
    /// The model called a tool.
    ToolCallStarted {
        /// The name the model called (`call_tool` for a call through it).
        name: String,
        /// The arguments as the model wrote them.
        arguments: String,
    },
    /// The broker is waiting for the owner to approve a call.
    ApprovalPending {
        /// The approval's number.
        approval: u64,
        /// The tool the broker decides on.
        tool: String,
        /// When the approval request expires.
        expires: Timestamp,
    },
    /// The broker refused a call.
    ToolDenied {
        /// The tool the broker decided on.
        name: String,
        /// Why.
        reason: DenyReason,
    },
    /// A call's result, as the model sees it.
    ToolResult {
        /// The name the model called.
        name: String,
        /// The text the model sees (capped).
        content: String,
        /// The result's label.
        class: Class,
        /// Whether it came from outside the owner's control.
        untrusted: bool,
        /// Whether loopd's cap cut it.
        truncated: bool,
    },
    /// Calls were answered `text` in one batch without running, e.g. those a stopped loopd
    /// left without a result past the turn's limit.
    CallsNotRun {
        /// How many.
        count: usize,
        /// The answer each of them got.
        text: String,
    },
    /// The turn ended with the model's answer.
    TurnDone {
        /// The final text.
        text: String,
    },
    /// The turn ended without an answer.
    TurnFailed {
        /// Why, for a person.
        error: String,
    },
    /// Code mode: the speaking role changed (the seed's `role` delta).
    Role {
        /// Who speaks from now on.
        role: AgentRole,
        /// For the verifier: how isolated its context is.
        #[serde(skip_serializing_if = "Option::is_none")]
        ctx_isolated: Option<CtxIsolated>,
    },
    /// Code mode: the verification of the owner's criteria ended (the seed's `verify_done`).
    VerifyDone {
        /// How it ended.
        outcome: VerifyOutcome,
        /// Verification passes run.
        passes: usize,
        /// Corrections fed back to the builder (at most two).
        corrections: usize,
        /// Every criterion with its state and the verifier's last finding.
        criteria: Vec<Criterion>,
    },
    /// An event of a child session's turn, run by loopd for a `delegate` call of this one
    /// ([`crate::delegate`]).
    Child {
        /// The child's session id.
        session: String,
        /// What happened in the child.
        event: Box<TurnEvent>,
    },
}

/// Why a turn ended without an answer. The session stays usable for the next turn.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// The model server failed.
    #[error(transparent)]
    Model(#[from] LlamaError),
    /// The session could not be written.
    #[error("the session could not be saved: {0}")]
    Session(#[from] SessionError),
    /// The model kept calling tools past the round limit.
    #[error(
        "the turn stopped after {0} model requests without a final answer (raise --max-rounds)"
    )]
    TooManyRounds(usize),
    /// Code mode: the verifier's request failed.
    #[error("the verification pass failed: {0}")]
    Verifier(LlamaError),
    /// Code mode: the criteria could not be kept in the session's folder.
    #[error("the criteria could not be saved: {0}")]
    Criteria(#[from] CriteriaError),
}

/// What one tool call gives the model: the text and its labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallOutcome {
    /// The result text (not yet capped).
    pub text: String,
    /// Its confidentiality label.
    pub class: Class,
    /// Whether it came from outside the owner's control.
    pub untrusted: bool,
}

/// Runs one turn: appends `user`, asks the model until it answers without tool calls, and
/// returns that answer. Events go to `on_event`; `TurnDone` or `TurnFailed` is always last.
pub fn run_turn(
    rt: &Runtime<'_>,
    session: &mut Session,
    user: &str,
    on_event: &mut dyn FnMut(&TurnEvent),
) -> Result<String, TurnError> {
    let result = turn(rt, session, user, on_event);
    match &result {
        Ok(text) => on_event(&TurnEvent::TurnDone { text: text.clone() }),
        Err(error) => on_event(&TurnEvent::TurnFailed {
            error: error.to_string(),
        }),
    }
    result
}

fn turn(
    rt: &Runtime<'_>,
    session: &mut Session,
    user: &str,
    on_event: &mut dyn FnMut(&TurnEvent),
) -> Result<String, TurnError> {
    finish_interrupted_calls(rt, session, on_event)?;
    session.append(&Message::user(user))?;
    let limit = rt.limits.max_tool_calls;
    let mut calls_made = 0usize;
    let mut previous: Option<(String, String)> = None;
    for round in 0..rt.limits.max_rounds {
        let remaining = limit.saturating_sub(calls_made);
        // Always said: llama-cpp-python's `chatml-function-calling` renders no tools into a
        // request without a `tool_choice`, so a model there could never make a second call.
        let tool_choice = if remaining == 0 {
            ToolChoice::None
        } else if round == 0 {
            rt.limits
                .first_tool_choice
                .clone()
                .unwrap_or(ToolChoice::Auto)
        } else {
            ToolChoice::Auto
        };
        let reply = {
            let mut request = session.request(Some(tool_choice));
            request.keep_calls = remaining.saturating_add(1);
            let mut on_text = |text: &str| {
                on_event(&TurnEvent::TextDelta {
                    text: text.to_string(),
                })
            };
            rt.model.complete(&request, &mut on_text)?
        };
        if !reply.content.is_empty() {
            on_event(&TurnEvent::AssistantText {
                text: reply.content.clone(),
            });
        }
        // Kept: the calls within the limit, and one more to answer for all the others.
        let made = reply.tool_calls.len().saturating_add(reply.calls_left_out);
        let not_run = made.saturating_sub(remaining);
        let mut calls = reply.tool_calls;
        calls.truncate(remaining.saturating_add(1));
        let calls = with_ids(calls, session.tool_calls_so_far());
        session.append(&Message::assistant(&reply.content, calls.clone()))?;
        if calls.is_empty() {
            return Ok(reply.content);
        }
        let first_number = session.tool_calls_so_far() - calls.len() as u64 + 1;
        for (offset, call) in calls.iter().enumerate() {
            on_event(&TurnEvent::ToolCallStarted {
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            });
            let outcome = if offset >= remaining {
                local(over_limit_text(limit, not_run))
            } else {
                let key = (call.name.clone(), normalized(&call.arguments));
                let outcome = if previous.as_ref() == Some(&key) {
                    local(ALREADY_CALLED.to_string())
                } else {
                    let call_id = first_number + offset as u64;
                    checked_call(rt, &session.ids().id, call_id, call, on_event)
                };
                calls_made += 1;
                previous = Some(key);
                outcome
            };
            record_result(rt, session, call, outcome, on_event)?;
        }
    }
    Err(TurnError::TooManyRounds(rt.limits.max_rounds))
}

/// Calls left without a result by a crash are sent again with the same numbers, as far as they
/// are within their turn's limit of tool calls: the broker answers a number it has seen with
/// the answer it gave, and runs one it has not. The others are answered
/// [`STOPPED_BEFORE_RUNNING`], all in one write.
fn finish_interrupted_calls(
    rt: &Runtime<'_>,
    session: &mut Session,
    on_event: &mut dyn FnMut(&TurnEvent),
) -> Result<(), TurnError> {
    let before_turn = session.tool_calls_before_turn();
    let mut stopped = Vec::new();
    for (call_id, call) in session.unanswered_calls() {
        let in_turn = call_id.saturating_sub(before_turn);
        if in_turn <= rt.limits.max_tool_calls as u64 {
            let outcome = checked_call(rt, &session.ids().id, call_id, &call, on_event);
            record_result(rt, session, &call, outcome, on_event)?;
        } else {
            stopped.push(call.id);
        }
    }
    if !stopped.is_empty() {
        let count = stopped.len();
        session.append_all(
            stopped
                .into_iter()
                .map(|id| Message::tool(&id, STOPPED_BEFORE_RUNNING)),
        )?;
        on_event(&TurnEvent::CallsNotRun {
            count,
            text: STOPPED_BEFORE_RUNNING.to_string(),
        });
    }
    Ok(())
}

fn record_result(
    rt: &Runtime<'_>,
    session: &mut Session,
    call: &ToolCall,
    outcome: CallOutcome,
    on_event: &mut dyn FnMut(&TurnEvent),
) -> Result<(), TurnError> {
    let (content, truncated) = cap_result(&outcome.text, rt.limits.result_cap);
    on_event(&TurnEvent::ToolResult {
        name: call.name.clone(),
        content: content.clone(),
        class: outcome.class,
        untrusted: outcome.untrusted,
        truncated,
    });
    session.append(&Message::tool(&call.id, &content))?;
    Ok(())
}

/// Gives every call an id (some servers send none), unique within the session.
fn with_ids(calls: Vec<ToolCall>, calls_before: u64) -> Vec<ToolCall> {
    calls
        .into_iter()
        .enumerate()
        .map(|(i, mut call)| {
            if call.id.is_empty() {
                call.id = format!("call_{}", calls_before + i as u64 + 1);
            }
            call
        })
        .collect()
}

/// Arguments that are JSON compare by value (key order and spaces aside); others as text.
fn normalized(arguments: &str) -> String {
    serde_json::from_str::<serde_json::Value>(arguments)
        .map(|v| sorted(v).to_string())
        .unwrap_or_else(|_| arguments.to_string())
}

/// `value` with the keys of every object in sorted order.
fn sorted(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<(String, serde_json::Value)> =
                map.into_iter().map(|(k, v)| (k, sorted(v))).collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            serde_json::Value::Object(entries.into_iter().collect())
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.into_iter().map(sorted).collect())
        }
        other => other,
    }
}

impl CallOutcome {
    /// An answer of loopd's own: public, trusted.
    pub fn local(text: String) -> CallOutcome {
        CallOutcome {
            text,
            class: Class::Public,
            untrusted: false,
        }
    }
}

fn local(text: String) -> CallOutcome {
    CallOutcome::local(text)
}

/// Arguments that are not JSON at all never reach [`dispatch`]: the model is told so. Empty
/// arguments mean none (`{}`), as some servers send them for tools without parameters.
fn checked_call(
    rt: &Runtime<'_>,
    session: &str,
    call_id: u64,
    call: &ToolCall,
    on_event: &mut dyn FnMut(&TurnEvent),
) -> CallOutcome {
    let call = if call.arguments.trim().is_empty() {
        Cow::Owned(ToolCall {
            arguments: "{}".to_string(),
            ..call.clone()
        })
    } else {
        Cow::Borrowed(call)
    };
    if let Err(error) = serde_json::from_str::<serde_json::Value>(&call.arguments) {
        return local(format!(
            "The arguments of {} are not valid JSON ({error}). Call it again with a JSON object.",
            call.name
        ));
    }
    run_call(rt, session, call_id, &call, on_event)
}

/// Runs one tool call: locally when [`dispatch`] says so, otherwise through the port, whose
/// answer becomes the text the model reads (seed M3a/16, rule 5).
pub fn run_call(
    rt: &Runtime<'_>,
    session: &str,
    call_id: u64,
    call: &ToolCall,
    on_event: &mut dyn FnMut(&TurnEvent),
) -> CallOutcome {
    // find_tool and call_tool see the port's tools as they are now.
    let current;
    let registry = if call.name == FIND_TOOL || call.name == CALL_TOOL {
        match rt.port.catalog() {
            None => rt.registry,
            Some(Ok(catalog)) => {
                current = rt.registry.with_catalog(catalog);
                &current
            }
            Some(Err(error)) => {
                return local(format!(
                    "The tool catalog could not be read ({error}). Try again later."
                ));
            }
        }
    } else {
        rt.registry
    };
    let (tool, arguments) = match dispatch(registry, &call.name, &call.arguments) {
        Dispatch::Local(text) => return local(text),
        Dispatch::Port { tool, arguments } => (tool, arguments),
    };
    let request = ToolRequest {
        session: session.to_string(),
        call_id,
        tool,
        arguments,
    };
    let response = rt.port.call(&request, &mut |pending| {
        on_event(&TurnEvent::ApprovalPending {
            approval: pending.approval,
            tool: request.tool.clone(),
            expires: pending.expires,
        });
    });
    if let Some(children) = rt.children
        && let Some(outcome) = children.opened(rt, &request, &response, on_event)
    {
        return outcome;
    }
    outcome_of(response, &request.tool, on_event)
}

/// What the port's final answer to a call of `tool` gives the model (seed M3a/16, rule 5): a
/// denial is also said to `on_event`.
pub(crate) fn outcome_of(
    response: ToolResponse,
    tool: &str,
    on_event: &mut dyn FnMut(&TurnEvent),
) -> CallOutcome {
    match response {
        ToolResponse::Result {
            content,
            class,
            untrusted,
            ..
        } => CallOutcome {
            text: content,
            class,
            untrusted,
        },
        ToolResponse::Failed { message } => local(format!("The tool failed: {message}")),
        ToolResponse::Denied { reason } => {
            on_event(&TurnEvent::ToolDenied {
                name: tool.to_string(),
                reason,
            });
            local(denial_text(reason).to_string())
        }
        ToolResponse::PendingApproval { .. } => {
            local("The tool failed: the tool broker gave no final answer".to_string())
        }
    }
}
