//! Scripted model turns: the player behind `--model script:FILE`, and the format the testkit's
//! HTTP server replays, so a conversation can run with no model at all.
//!
//! A script is JSON:
//!
//! ```json
//! {"turns": [
//!   {"user": "Say hi through echo.",
//!    "replies": [
//!      {"call": [{"name": "find_tool", "arguments": {"query": "echo"}}]},
//!      {"call": [{"name": "call_tool", "arguments": {"name": "echo", "arguments": {"text": "hi"}}}]},
//!      {"say": "Done."}]}
//! ]}
//! ```
//!
//! Which reply answers a request is read off the request itself: the number of user messages
//! picks the turn, the number of assistant messages since the last user message picks the
//! reply. So the player keeps no state, a failed turn does not shift the next one, and the
//! same script gives the same answers over HTTP and in process.
//!
//! In code mode, loopd's relaunches and corrections are user messages too, each picking the next
//! turn (a turn without `user` is one loopd drives), and the verifier's isolated requests are
//! answered from `verifier`, a list of replies, one per verification pass.
//!
//! The child sessions loopd runs for `delegate` (their requests are told apart by their
//! system prompt, [`CHILD_PROMPT`]) are answered from `child`, a list of replies picked, as a
//! turn's are, by the number of assistant messages since the child's task: every child of a
//! conversation plays the same list.
//!
//! A reply is one of: `say` (text) with optional `call` (tool calls); `http_status` with
//! `body` (an HTTP error); `hang_ms` (no answer for that long); `raw_body` (a 200 whose body is
//! this text). A call has `name` and either `arguments` (any JSON, sent as its text) or
//! `arguments_text` (sent exactly, e.g. text that is not JSON). Placeholders such as
//! `{workspace}` in any string are replaced by their values when the script is loaded.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::delegate::CHILD_PROMPT;
use crate::llama::{ChatRequest, LlamaError, Model, Reply, ToolCall};
use crate::verify::{PASS_PREFIX, VERIFIER_PROMPT};

/// A whole script.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// What the script shows, for people.
    #[serde(default)]
    pub description: String,
    /// The turns, in order.
    pub turns: Vec<ScriptTurn>,
    /// Code mode: the verifier's replies, one per verification pass in order (the verifier's
    /// requests are told apart by their system prompt, [`VERIFIER_PROMPT`], and the pass by
    /// the number after [`PASS_PREFIX`] that starts their one message).
    #[serde(default)]
    pub verifier: Vec<ReplySpec>,
    /// The replies of every child session loopd runs for `delegate`, in order within the
    /// child's one turn (its requests are told apart by their system prompt, [`CHILD_PROMPT`]).
    #[serde(default)]
    pub child: Vec<ReplySpec>,
}

/// One turn: what the person says (when the script drives input) and the model's replies.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptTurn {
    /// The person's message, used when the script is the input.
    #[serde(default)]
    pub user: Option<String>,
    /// The model's replies within the turn, in order.
    pub replies: Vec<ReplySpec>,
}

/// One scripted answer. Exactly one kind of field group is set; see [`ReplySpec::kind`].
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ReplySpec {
    /// The assistant's text.
    #[serde(default)]
    pub say: Option<String>,
    /// The assistant's tool calls.
    #[serde(default)]
    pub call: Vec<CallSpec>,
    /// Answer with this HTTP error status.
    #[serde(default)]
    pub http_status: Option<u16>,
    /// The body of the HTTP error.
    #[serde(default)]
    pub body: Option<String>,
    /// Give no answer for this many milliseconds.
    #[serde(default)]
    pub hang_ms: Option<u64>,
    /// Answer 200 with exactly this body.
    #[serde(default)]
    pub raw_body: Option<String>,
}

/// One scripted tool call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallSpec {
    /// The tool.
    pub name: String,
    /// The arguments, sent as their JSON text.
    #[serde(default)]
    pub arguments: Option<Value>,
    /// The arguments text, sent as it is.
    #[serde(default)]
    pub arguments_text: Option<String>,
}

/// What a reply does.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplyKind {
    /// A normal answer.
    Answer(Reply),
    /// An HTTP error status with a body.
    Status(u16, String),
    /// No answer for this many milliseconds.
    Hang(u64),
    /// A 200 with this body.
    Raw(String),
}

/// Why a script cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The file cannot be read.
    #[error("cannot read script {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The text is not a valid script.
    #[error("invalid script {path}: {detail}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong, with line and column or turn and reply.
        detail: String,
    },
}

impl Script {
    /// Reads the script at `path`, replacing `{name}` placeholders by `values`.
    pub fn load(path: &Path, values: &BTreeMap<String, String>) -> Result<Script, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Script::parse(&text, values).map_err(|detail| ScriptError::Invalid {
            path: path.display().to_string(),
            detail,
        })
    }

    /// Reads a script from `text`, replacing `{name}` placeholders by `values`.
    pub fn parse(text: &str, values: &BTreeMap<String, String>) -> Result<Script, String> {
        let mut value: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        fill_placeholders(&mut value, values);
        let script: Script = serde_json::from_value(value).map_err(|e| e.to_string())?;
        for (t, turn) in script.turns.iter().enumerate() {
            for (r, reply) in turn.replies.iter().enumerate() {
                reply
                    .kind(t, r)
                    .map_err(|e| format!("turn {} reply {}: {e}", t + 1, r + 1))?;
            }
        }
        for (p, reply) in script.verifier.iter().enumerate() {
            reply
                .kind(usize::MAX, p)
                .map_err(|e| format!("verifier reply {}: {e}", p + 1))?;
        }
        for (r, reply) in script.child.iter().enumerate() {
            reply
                .kind(CHILD_TURN, r)
                .map_err(|e| format!("child reply {}: {e}", r + 1))?;
        }
        Ok(script)
    }

    /// The user messages of the turns that have one, in order.
    pub fn user_messages(&self) -> Vec<String> {
        self.turns.iter().filter_map(|t| t.user.clone()).collect()
    }

    /// The reply for a request whose messages (as JSON) are `messages`.
    pub fn reply_for(&self, messages: &[Value]) -> Result<ReplyKind, String> {
        let role = |m: &Value| m.get("role").and_then(Value::as_str).map(str::to_string);
        let content = |m: Option<&Value>| {
            m.and_then(|m| m.get("content"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        if content(messages.first()) == VERIFIER_PROMPT {
            let text = content(messages.get(1));
            let pass: usize = text
                .strip_prefix(PASS_PREFIX)
                .and_then(|rest| rest.split('.').next())
                .and_then(|n| n.parse().ok())
                .ok_or("the verifier's message names no pass")?;
            let reply = pass
                .checked_sub(1)
                .and_then(|p| self.verifier.get(p))
                .ok_or_else(|| {
                    format!(
                        "verification pass {pass} has no verifier reply (the script has {})",
                        self.verifier.len()
                    )
                })?;
            return reply.kind(usize::MAX, pass - 1);
        }
        let since_user = messages
            .iter()
            .rev()
            .take_while(|m| role(m).as_deref() != Some("user"))
            .filter(|m| role(m).as_deref() == Some("assistant"))
            .count();
        if content(messages.first()) == CHILD_PROMPT {
            let reply = self.child.get(since_user).ok_or_else(|| {
                format!(
                    "the child has no reply {} (the script has {})",
                    since_user + 1,
                    self.child.len()
                )
            })?;
            return reply.kind(CHILD_TURN, since_user);
        }
        let users = messages
            .iter()
            .filter(|m| role(m).as_deref() == Some("user"))
            .count();
        let Some(turn_index) = users.checked_sub(1) else {
            return Err("the request has no user message".to_string());
        };
        let turn = self.turns.get(turn_index).ok_or_else(|| {
            format!(
                "user message {} has no turn (the script has {})",
                users,
                self.turns.len()
            )
        })?;
        let reply = turn.replies.get(since_user).ok_or_else(|| {
            format!(
                "turn {} has no reply {} (it has {})",
                users,
                since_user + 1,
                turn.replies.len()
            )
        })?;
        reply.kind(turn_index, since_user)
    }
}

impl ReplySpec {
    /// What this reply does; tool call ids are `call_<turn>_<reply>_<n>`, counted from 1.
    pub fn kind(&self, turn: usize, reply: usize) -> Result<ReplyKind, String> {
        let answer = self.say.is_some() || !self.call.is_empty();
        let groups = [
            answer,
            self.http_status.is_some(),
            self.hang_ms.is_some(),
            self.raw_body.is_some(),
        ];
        if groups.iter().filter(|set| **set).count() != 1 {
            return Err(
                "set exactly one of say/call, http_status, hang_ms or raw_body".to_string(),
            );
        }
        if self.body.is_some() && self.http_status.is_none() {
            return Err("body goes with http_status".to_string());
        }
        if let Some(status) = self.http_status {
            return Ok(ReplyKind::Status(
                status,
                self.body.clone().unwrap_or_default(),
            ));
        }
        if let Some(ms) = self.hang_ms {
            return Ok(ReplyKind::Hang(ms));
        }
        if let Some(body) = &self.raw_body {
            return Ok(ReplyKind::Raw(body.clone()));
        }
        let mut tool_calls = Vec::with_capacity(self.call.len());
        for (n, call) in self.call.iter().enumerate() {
            let arguments = match (&call.arguments, &call.arguments_text) {
                (Some(_), Some(_)) => {
                    return Err(format!(
                        "call {} sets both arguments and arguments_text",
                        n + 1
                    ));
                }
                (Some(value), None) => value.to_string(),
                (None, Some(text)) => text.clone(),
                (None, None) => "{}".to_string(),
            };
            tool_calls.push(ToolCall {
                id: format!("call_{}_{}_{}", turn.saturating_add(1), reply + 1, n + 1),
                name: call.name.clone(),
                arguments,
            });
        }
        let finish_reason = if tool_calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        };
        Ok(ReplyKind::Answer(Reply {
            content: self.say.clone().unwrap_or_default(),
            tool_calls,
            finish_reason: Some(finish_reason.to_string()),
            calls_left_out: 0,
        }))
    }
}

/// The turn number a child's replies give their call ids (`call_c_<reply>_<n>` would not be an
/// id; a number no script's turns reach keeps them apart from the parent's).
const CHILD_TURN: usize = 1_000_000 - 1;

/// Replaces `{name}` by `values[name]` in every string of `value`; other braces stay.
fn fill_placeholders(value: &mut Value, values: &BTreeMap<String, String>) {
    match value {
        Value::String(text) => {
            for (name, replacement) in values {
                let placeholder = format!("{{{name}}}");
                if text.contains(&placeholder) {
                    *text = text.replace(&placeholder, replacement);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| fill_placeholders(v, values)),
        Value::Object(map) => map.values_mut().for_each(|v| fill_placeholders(v, values)),
        _ => {}
    }
}

/// The in-process player: answers each request from the script, as the testkit server would
/// over HTTP. `http_status`, `hang_ms` and `raw_body` give the errors the HTTP client would.
#[derive(Debug, Clone)]
pub struct ScriptModel {
    script: Script,
    name: String,
}

impl ScriptModel {
    /// A player for `script`; `name` (the file) appears in errors.
    pub fn new(script: Script, name: &str) -> ScriptModel {
        ScriptModel {
            script,
            name: name.to_string(),
        }
    }

    /// The script being played.
    pub fn script(&self) -> &Script {
        &self.script
    }
}

impl Model for ScriptModel {
    fn complete(
        &self,
        request: &ChatRequest<'_>,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Reply, LlamaError> {
        let messages: Vec<Value> = request
            .messages
            .iter()
            .filter_map(|raw| serde_json::from_str(raw.get()).ok())
            .collect();
        let url = format!("script:{}", self.name);
        match self
            .script
            .reply_for(&messages)
            .map_err(LlamaError::Script)?
        {
            ReplyKind::Answer(mut reply) => {
                if reply.tool_calls.len() > request.keep_calls {
                    reply.calls_left_out = reply.tool_calls.len() - request.keep_calls;
                    reply.tool_calls.truncate(request.keep_calls);
                }
                if !reply.content.is_empty() {
                    on_text(&reply.content);
                }
                Ok(reply)
            }
            ReplyKind::Status(status, body) => Err(LlamaError::Status { url, status, body }),
            ReplyKind::Hang(ms) => Err(LlamaError::Timeout {
                url,
                seconds: ms as f64 / 1000.0,
            }),
            ReplyKind::Raw(body) => Err(LlamaError::Malformed(format!(
                "body starts {:?}",
                body.chars().take(200).collect::<String>()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn values() -> BTreeMap<String, String> {
        BTreeMap::from([("workspace".to_string(), "/w\"s".to_string())])
    }

    #[test]
    fn placeholders_are_filled_inside_strings_even_with_quotes() {
        let script = Script::parse(
            r#"{"turns":[{"user":"look in {workspace}","replies":[{"call":[{"name":"read_file","arguments":{"path":"{workspace}/a {other}"}}]}]}]}"#,
            &values(),
        )
        .unwrap();
        assert_eq!(script.turns[0].user.as_deref(), Some("look in /w\"s"));
        let ReplyKind::Answer(reply) = script.turns[0].replies[0].kind(0, 0).unwrap() else {
            panic!("not an answer");
        };
        assert_eq!(
            reply.tool_calls[0].arguments,
            r#"{"path":"/w\"s/a {other}"}"#
        );
        assert_eq!(reply.tool_calls[0].id, "call_1_1_1");
    }

    #[test]
    fn the_reply_is_chosen_by_user_and_assistant_counts() {
        let script = Script::parse(
            r#"{"turns":[{"replies":[{"say":"a"},{"say":"b"}]},{"replies":[{"say":"c"}]}]}"#,
            &values(),
        )
        .unwrap();
        let say = |messages: Vec<Value>| match script.reply_for(&messages) {
            Ok(ReplyKind::Answer(reply)) => reply.content,
            other => format!("{other:?}"),
        };
        let user = json!({"role":"user","content":"x"});
        let assistant = json!({"role":"assistant","content":""});
        let tool = json!({"role":"tool","content":"","tool_call_id":"1"});
        assert_eq!(say(vec![user.clone()]), "a");
        assert_eq!(
            say(vec![user.clone(), assistant.clone(), tool.clone()]),
            "b"
        );
        assert_eq!(
            say(vec![user.clone(), assistant.clone(), user.clone()]),
            "c"
        );
        assert!(say(vec![user.clone(), user.clone(), user]).contains("has no turn"));
    }

    #[test]
    fn a_reply_with_two_kinds_is_refused_with_its_place() {
        let error = Script::parse(
            r#"{"turns":[{"replies":[{"say":"a"},{"say":"b","hang_ms":5}]}]}"#,
            &values(),
        )
        .unwrap_err();
        assert!(error.starts_with("turn 1 reply 2:"), "{error}");
    }

    #[test]
    fn a_childs_requests_are_answered_from_the_child_list() {
        let script = Script::parse(
            r#"{"turns":[{"replies":[{"say":"parent"}]}],"child":[{"say":"c1"},{"say":"c2"}]}"#,
            &values(),
        )
        .unwrap();
        let say = |messages: Vec<Value>| match script.reply_for(&messages) {
            Ok(ReplyKind::Answer(reply)) => reply.content,
            other => format!("{other:?}"),
        };
        let system = json!({"role":"system","content":CHILD_PROMPT});
        let user = json!({"role":"user","content":"task"});
        let assistant = json!({"role":"assistant","content":""});
        let tool = json!({"role":"tool","content":"","tool_call_id":"1"});
        assert_eq!(say(vec![system.clone(), user.clone()]), "c1");
        assert_eq!(
            say(vec![system.clone(), user.clone(), assistant.clone(), tool]),
            "c2"
        );
        assert!(
            say(vec![system, user.clone(), assistant.clone(), assistant]).contains("no reply 3")
        );
        assert_eq!(say(vec![user]), "parent");
    }

    #[test]
    fn unknown_fields_are_refused() {
        let error = Script::parse(r#"{"turns":[],"x":1}"#, &values()).unwrap_err();
        assert!(error.contains("unknown field `x`"), "{error}");
        let error =
            Script::parse(r#"{"turns":[{"replies":[{"sya":"a"}]}]}"#, &values()).unwrap_err();
        assert!(error.contains("unknown field `sya`"), "{error}");
    }
}
