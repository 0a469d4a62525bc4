//! Chat messages and tool calls in the OpenAI-compatible wire form.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::wire::arguments_text;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The fixed instructions at the start of a session.
    System,
    /// The person.
    User,
    /// The model.
    Assistant,
    /// A tool result, answering one tool call.
    Tool,
}

/// One message of a conversation, as sent to the model and kept in `messages.jsonl`.
///
/// `content` is always a string: llama.cpp-family servers answer HTTP 500 to an assistant
/// message whose `content` is `null` beside its `tool_calls`, so loopd sends `""` instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its text (possibly empty).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub content: String,
    /// The tool calls of an assistant message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The call a tool message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    /// A user message.
    pub fn user(text: &str) -> Message {
        Message::plain(Role::User, text)
    }

    /// A system message.
    pub fn system(text: &str) -> Message {
        Message::plain(Role::System, text)
    }

    /// An assistant message with its text and tool calls.
    pub fn assistant(text: &str, tool_calls: Vec<ToolCall>) -> Message {
        Message {
            tool_calls,
            ..Message::plain(Role::Assistant, text)
        }
    }

    /// The result of the tool call `id`.
    pub fn tool(id: &str, text: &str) -> Message {
        Message {
            tool_call_id: Some(id.to_string()),
            ..Message::plain(Role::Tool, text)
        }
    }

    fn plain(role: Role, text: &str) -> Message {
        Message {
            role,
            content: text.to_string(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(deserializer)?.unwrap_or_default())
}

/// A tool call the model made: its id, the tool's name and the arguments as JSON text.
///
/// Written as `{"id":…,"type":"function","function":{"name":…,"arguments":"…"}}`. Read from
/// the same form, where `arguments` may also be any other JSON value (some servers send an
/// object), kept as its text without building a JSON tree, and `null` or a missing `id` or
/// `arguments` is empty.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "WireToolCall")]
pub struct ToolCall {
    /// The id the tool result must name.
    pub id: String,
    /// The tool.
    pub name: String,
    /// The arguments as the model wrote them.
    pub arguments: String,
}

impl Serialize for ToolCall {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Wire<'a> {
            id: &'a str,
            #[serde(rename = "type")]
            kind: &'static str,
            function: Function<'a>,
        }
        #[derive(Serialize)]
        struct Function<'a> {
            name: &'a str,
            arguments: &'a str,
        }
        Wire {
            id: &self.id,
            kind: "function",
            function: Function {
                name: &self.name,
                arguments: &self.arguments,
            },
        }
        .serialize(serializer)
    }
}

/// A tool call as it is read; `type` is not checked.
#[derive(Deserialize)]
struct WireToolCall {
    #[serde(default, deserialize_with = "null_as_empty")]
    id: String,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    #[serde(default)]
    arguments: Option<Box<RawValue>>,
}

impl TryFrom<WireToolCall> for ToolCall {
    type Error = serde_json::Error;

    fn try_from(wire: WireToolCall) -> Result<ToolCall, serde_json::Error> {
        let arguments = match &wire.function.arguments {
            Some(raw) => arguments_text(raw)?,
            None => String::new(),
        };
        Ok(ToolCall {
            id: wire.id,
            name: wire.function.name,
            arguments,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_assistant_message_with_tool_calls_sends_an_empty_string_not_null() {
        let message = Message::assistant(
            "",
            vec![ToolCall {
                id: "c1".into(),
                name: "clock".into(),
                arguments: "{}".into(),
            }],
        );
        assert_eq!(
            serde_json::to_string(&message).ok(),
            Some(r#"{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"clock","arguments":"{}"}}]}"#.to_string())
        );
    }

    #[test]
    fn null_content_and_object_arguments_are_read() {
        let text = r#"{"role":"assistant","content":null,"tool_calls":[{"id":"x","type":"function","function":{"name":"echo","arguments":{"text":"hi"}}}]}"#;
        let message: Message = serde_json::from_str(text)
            .map_err(|e| e.to_string())
            .unwrap();
        assert_eq!(message.content, "");
        assert_eq!(message.tool_calls[0].arguments, r#"{"text":"hi"}"#);
    }

    #[test]
    fn a_call_without_id_or_arguments_reads_them_as_empty_and_round_trips() {
        let call: ToolCall =
            serde_json::from_str(r#"{"id":null,"function":{"name":"clock","arguments":null}}"#)
                .unwrap();
        assert_eq!(
            call,
            ToolCall {
                name: "clock".into(),
                ..ToolCall::default()
            }
        );
        let text = serde_json::to_string(&call).unwrap();
        assert_eq!(
            text,
            r#"{"id":"","type":"function","function":{"name":"clock","arguments":""}}"#
        );
        assert_eq!(serde_json::from_str::<ToolCall>(&text).unwrap(), call);
    }

    #[test]
    fn a_tool_message_names_its_call() {
        assert_eq!(
            serde_json::to_string(&Message::tool("c1", "ok")).ok(),
            Some(r#"{"role":"tool","content":"ok","tool_call_id":"c1"}"#.to_string())
        );
    }
}
