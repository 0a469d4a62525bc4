//! A client for OpenAI-compatible chat completions with tools: llama.cpp's `llama-server`,
//! llama-cpp-python's server, Ollama, vLLM.
//!
//! What it sends (`POST {base}/chat/completions`, `Content-Type: application/json`, and
//! `Authorization: Bearer …` when a key is set): `model`, `messages`, `tools` (each
//! `{"type":"function","function":{name,description,parameters}}`; left out when there is none,
//! as in the verifier's requests), `tool_choice` (the turn
//! loop sends one on every request), `stream`, and `max_tokens`/`temperature` when configured. Assistant messages
//! always carry a string `content`, never `null` (llama.cpp answers 500 to `null`).
//!
//! What it reads: of `choices`, only the choice whose `index` is 0 (its position when it has no
//! `index`); its `message.content` and `.tool_calls[]` (`id`, `function.name`,
//! `function.arguments` as a string or any other JSON, kept as its text) and `finish_reason`;
//! when streaming, Server-Sent Events `data:` lines whose choice 0 `delta` carries `content`
//! pieces and `tool_calls[]` pieces by `index`, up to `data: [DONE]`. An `error` object in a
//! body or an event is the server's error.
//!
//! What it bounds (a model server may be broken or hostile): the whole exchange takes at most
//! the configured timeout; an answer, whole or streamed, is at most [`ANSWER_LIMIT`] bytes after
//! decompression, counted before anything is buffered (a line without an end is cut there);
//! an error body is read for at most 64 KiB; no JSON tree is built (unknown fields are skipped
//! as they are read); tool calls past [`ChatRequest::keep_calls`] are counted, not kept; a
//! stream that ends without `finish_reason` or `[DONE]` is an error, never an answer; and no
//! redirect is followed.
//!
//! What it refuses, as it refuses a cut stream (the turn fails and stores nothing): an answer
//! or event that is not a JSON object or is nested deeper than 128 levels, a tool call piece
//! whose `index` skips past the next call's, a part of the wrong type (`finish_reason` that is
//! not a string included), and an answer in which nothing could be read (no text, no tool call
//! and no `finish_reason`).

mod client;
mod message;
mod stream;
mod wire;

pub use client::{ANSWER_LIMIT, LlamaClient, LlamaConfig};
pub use message::{Message, Role, ToolCall};
pub use proto::ToolSchema;

use serde::Serialize;
use serde_json::value::RawValue;

/// What the model is asked for: the conversation and tools as raw JSON fragments, so that a
/// session's prefix is replayed byte for byte.
#[derive(Debug, Clone)]
pub struct ChatRequest<'a> {
    /// Each message's JSON, in order (the system message first).
    pub messages: Vec<&'a RawValue>,
    /// The `tools` array's JSON.
    pub tools: &'a RawValue,
    /// `tool_choice`; `None` leaves the server's default.
    pub tool_choice: Option<ToolChoice>,
    /// How many of the reply's tool calls the caller can use: the model keeps at most this many
    /// (the first to arrive) and only counts the others ([`Reply::calls_left_out`]), so a reply
    /// with a million calls costs no more memory than one with this many. Never sent.
    pub keep_calls: usize,
}

/// The body loopd POSTs: the client's settings around a [`ChatRequest`].
///
/// `messages` is the last field, so the body of a session's next request starts with the bytes
/// of this one up to its closing `]}`.
#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    /// Left out when empty (the verifier's requests): some servers refuse `"tools": []`.
    #[serde(skip_serializing_if = "no_tools")]
    tools: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'a ToolChoice>,
    messages: &'a [&'a RawValue],
}

/// Whether a `tools` array is empty.
fn no_tools(tools: &&RawValue) -> bool {
    tools.get().trim() == "[]"
}

/// Which tool calls the model may or must make in one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// `"auto"`: the model decides.
    Auto,
    /// `"none"`: no tool calls, an answer.
    None,
    /// `"required"`: at least one tool call.
    Required,
    /// `{"type":"function","function":{"name":…}}`: this tool.
    Function(String),
}

impl ToolChoice {
    /// Reads `auto`, `none`, `required`, or a tool's name.
    pub fn parse(text: &str) -> ToolChoice {
        match text {
            "auto" => ToolChoice::Auto,
            "none" => ToolChoice::None,
            "required" => ToolChoice::Required,
            name => ToolChoice::Function(name.to_string()),
        }
    }
}

impl Serialize for ToolChoice {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ToolChoice::Auto => serializer.serialize_str("auto"),
            ToolChoice::None => serializer.serialize_str("none"),
            ToolChoice::Required => serializer.serialize_str("required"),
            ToolChoice::Function(name) => serde_json::json!({
                "type": "function",
                "function": { "name": name }
            })
            .serialize(serializer),
        }
    }
}

/// The exact JSON body for `request` under `config`, or why it cannot be written (a value JSON
/// has no form for).
pub fn request_body(config: &LlamaConfig, request: &ChatRequest<'_>) -> Result<String, LlamaError> {
    let body = Body {
        model: &config.model_name,
        messages: &request.messages,
        tools: request.tools,
        tool_choice: request.tool_choice.as_ref(),
        stream: config.stream,
        max_tokens: config.max_tokens,
        temperature: config.temperature,
    };
    serde_json::to_string(&body).map_err(|e| LlamaError::Encode(e.to_string()))
}

/// The `tools` array for `schemas`, in the wire form `{"type":"function","function":…}`, or
/// why it cannot be written.
pub fn tools_json(schemas: &[ToolSchema]) -> Result<String, serde_json::Error> {
    #[derive(Serialize)]
    struct Wrapped<'a> {
        #[serde(rename = "type")]
        kind: &'static str,
        function: &'a ToolSchema,
    }
    let wrapped: Vec<Wrapped<'_>> = schemas
        .iter()
        .map(|function| Wrapped {
            kind: "function",
            function,
        })
        .collect();
    serde_json::to_string(&wrapped)
}

/// The model's answer for one request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Reply {
    /// The text (empty when the model only called tools).
    pub content: String,
    /// The tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Why the model stopped (`stop`, `tool_calls`, `length`, …), when the server says.
    pub finish_reason: Option<String>,
    /// Tool calls of this reply past [`ChatRequest::keep_calls`]: counted, not kept.
    pub calls_left_out: usize,
}

/// Something that answers chat requests: the HTTP client, or loopd's script player.
pub trait Model: Send + Sync {
    /// Answers `request`, calling `on_text` with each piece of text as it arrives.
    fn complete(
        &self,
        request: &ChatRequest<'_>,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Reply, LlamaError>;
}

/// Why the model gave no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlamaError {
    /// Nothing listens at the address, or it cannot be reached.
    #[error(
        "the model server at {url} cannot be reached ({cause}): start one there (README: a small local model), or pass --model URL naming one that runs"
    )]
    Unreachable {
        /// The URL tried.
        url: String,
        /// What the connection attempt reported.
        cause: String,
    },
    /// The server took longer than the configured timeout.
    #[error("the model server at {url} did not answer within {seconds:.1} s")]
    Timeout {
        /// The URL tried.
        url: String,
        /// The timeout.
        seconds: f64,
    },
    /// The server answered with an HTTP error status.
    #[error("the model server at {url} answered HTTP {status}: {body}")]
    Status {
        /// The URL tried.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// The server answered with a redirect, which loopd never follows (it could send the
    /// conversation, and take the answer, from another host).
    #[error(
        "the model server at {url} answered HTTP {status} with a redirect to {location:?}; loopd follows no redirect (give the final address with --model)"
    )]
    Redirect {
        /// The URL tried.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The start of the `Location` header (empty when there is none).
        location: String,
    },
    /// The request could not be written as JSON.
    #[error("cannot write the request as JSON: {0}")]
    Encode(String),
    /// The server reported an error inside a successful response.
    #[error("the model server reported an error: {0}")]
    Server(String),
    /// The answer is not an OpenAI-compatible chat completion.
    #[error("the model server's answer is not a chat completion: {0}")]
    Malformed(String),
    /// The connection failed in another way.
    #[error("the request to the model server at {url} failed: {cause}")]
    Transport {
        /// The URL tried.
        url: String,
        /// What failed.
        cause: String,
    },
    /// The script player has no answer for this request.
    #[error("the script has no reply for this request: {0}")]
    Script(String),
}
