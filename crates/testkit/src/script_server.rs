//! A real HTTP server on loopback that answers `POST /v1/chat/completions` from a
//! [`loopd::script::Script`], the way the script player does in process: the reply is chosen
//! by the request's own messages, so the server keeps no state but the log of requests.

use std::io::Cursor;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use loopd::llama::{Reply, ToolCall};
use loopd::script::{ReplyKind, Script};
use serde_json::{Value, json};
use tiny_http::{Header, Response, Server};

/// A running scripted server; stopped when dropped.
pub struct ScriptServer {
    server: Arc<Server>,
    base_url: String,
    requests: Arc<Mutex<Vec<String>>>,
    thread: Option<JoinHandle<()>>,
}

impl ScriptServer {
    /// Starts a server for `script` on 127.0.0.1 with a free port.
    pub fn start(script: Script) -> std::io::Result<ScriptServer> {
        let server = Server::http("127.0.0.1:0").map_err(std::io::Error::other)?;
        let port = server
            .server_addr()
            .to_ip()
            .map(|addr| addr.port())
            .ok_or_else(|| std::io::Error::other("the server has no IP address"))?;
        let server = Arc::new(server);
        let requests = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(script);
        let thread = {
            let server = Arc::clone(&server);
            let requests = Arc::clone(&requests);
            std::thread::spawn(move || serve(&server, &script, &requests))
        };
        Ok(ScriptServer {
            server,
            base_url: format!("http://127.0.0.1:{port}/v1"),
            requests,
            thread: Some(thread),
        })
    }

    /// Starts a server for the script written as JSON `text` (no placeholders). A script that
    /// does not parse is a mistake in the test, so it panics with the parser's message.
    pub fn from_json(text: &str) -> ScriptServer {
        let script = match Script::parse(text, &Default::default()) {
            Ok(script) => script,
            Err(error) => panic!("invalid test script: {error}"),
        };
        match ScriptServer::start(script) {
            Ok(server) => server,
            Err(error) => panic!("cannot start the script server: {error}"),
        }
    }

    /// The API base to give a client, e.g. `http://127.0.0.1:41234/v1`.
    pub fn base_url(&self) -> String {
        self.base_url.clone()
    }

    /// Every request body received so far, exactly as it arrived.
    pub fn requests(&self) -> Vec<String> {
        self.requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The `content` of each message with this `role` in the last request received.
    pub fn last_contents(&self, role: &str) -> Vec<String> {
        let Some(last) = self.request_json().pop() else {
            return Vec::new();
        };
        last.get("messages")
            .and_then(Value::as_array)
            .map(|messages| {
                messages
                    .iter()
                    .filter(|m| m.get("role").and_then(Value::as_str) == Some(role))
                    .filter_map(|m| m.get("content").and_then(Value::as_str))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every request body received so far, as JSON (bodies that are not JSON are skipped).
    pub fn request_json(&self) -> Vec<Value> {
        self.requests()
            .iter()
            .filter_map(|body| serde_json::from_str(body).ok())
            .collect()
    }
}

impl Drop for ScriptServer {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(server: &Server, script: &Arc<Script>, requests: &Arc<Mutex<Vec<String>>>) {
    while let Ok(mut request) = server.recv() {
        let mut body = String::new();
        let read = request.as_reader().read_to_string(&mut body);
        let is_chat = request.url().ends_with("/chat/completions");
        if is_chat {
            requests
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(body.clone());
        }
        let script = Arc::clone(script);
        // Each request on its own thread, so a hanging reply does not block the next one.
        std::thread::spawn(move || {
            let answer = match (read, is_chat) {
                (Err(e), _) => Answer::Status(400, format!("cannot read the body: {e}")),
                (Ok(_), false) => Answer::Status(404, "only POST /v1/chat/completions".into()),
                (Ok(_), true) => answer_for(&script, &body),
            };
            let response = match answer {
                Answer::Hang(ms) => {
                    std::thread::sleep(Duration::from_millis(ms));
                    return;
                }
                Answer::Status(code, text) => json_response(code, text.into_bytes()),
                Answer::Json(value) => json_response(200, value.to_string().into_bytes()),
                Answer::Raw(text) => json_response(200, text.into_bytes()),
                Answer::Events(text) => Response::from_data(text.into_bytes())
                    .with_header(header("Content-Type", "text/event-stream")),
            };
            let _ = request.respond(response);
        });
    }
}

enum Answer {
    Hang(u64),
    Status(u16, String),
    Json(Value),
    Raw(String),
    Events(String),
}

fn answer_for(script: &Script, body: &str) -> Answer {
    let request: Value = match serde_json::from_str(body) {
        Ok(value) => value,
        Err(e) => return Answer::Status(400, format!("the body is not JSON: {e}")),
    };
    let Some(messages) = request.get("messages").and_then(Value::as_array) else {
        return Answer::Status(400, "the body has no messages array".into());
    };
    if let Some(problem) = llama_cpp_rejects(messages) {
        return Answer::Status(500, problem);
    }
    let stream = request.get("stream").and_then(Value::as_bool) == Some(true);
    match script.reply_for(messages) {
        Err(problem) => Answer::Status(500, format!("script: {problem}")),
        Ok(ReplyKind::Status(code, text)) => Answer::Status(code, text),
        Ok(ReplyKind::Hang(ms)) => Answer::Hang(ms),
        Ok(ReplyKind::Raw(text)) => Answer::Raw(text),
        Ok(ReplyKind::Answer(reply)) if stream => Answer::Events(events(&reply)),
        Ok(ReplyKind::Answer(reply)) => Answer::Json(completion(&reply)),
    }
}

/// The llama.cpp quirk, reproduced: an assistant message with `content: null` beside its
/// `tool_calls` gets HTTP 500.
fn llama_cpp_rejects(messages: &[Value]) -> Option<String> {
    messages.iter().find_map(|m| {
        let null_content = m.get("content").is_some_and(Value::is_null);
        let has_calls = m.get("tool_calls").is_some();
        (null_content && has_calls)
            .then(|| "Assistant message must contain either 'content' or 'tool_calls'!".into())
    })
}

fn wire_calls(calls: &[ToolCall]) -> Value {
    Value::Array(
        calls
            .iter()
            .map(|c| {
                json!({"id": c.id, "type": "function",
                       "function": {"name": c.name, "arguments": c.arguments}})
            })
            .collect(),
    )
}

fn completion(reply: &Reply) -> Value {
    let mut message = json!({"role": "assistant", "content": reply.content});
    if !reply.tool_calls.is_empty() {
        message["tool_calls"] = wire_calls(&reply.tool_calls);
    }
    json!({
        "id": "chatcmpl-script",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
    })
}

/// The reply as Server-Sent Events: the text in pieces of a few characters, each tool call's
/// name first and its arguments in two halves, then `[DONE]`. Like llama-cpp-python, every
/// piece of a tool call repeats its name.
fn events(reply: &Reply) -> String {
    let mut out = String::new();
    let mut push = |delta: Value, finish: Option<&str>| {
        let chunk = json!({"object": "chat.completion.chunk",
                           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        out.push_str(&format!("data: {chunk}\n\n"));
    };
    push(json!({"role": "assistant"}), None);
    let chars: Vec<char> = reply.content.chars().collect();
    for piece in chars.chunks(4) {
        push(json!({"content": piece.iter().collect::<String>()}), None);
    }
    for (index, call) in reply.tool_calls.iter().enumerate() {
        push(
            json!({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                   "function": {"name": call.name, "arguments": ""}}]}),
            None,
        );
        let half = call
            .arguments
            .char_indices()
            .nth(call.arguments.chars().count() / 2);
        let cut = half.map_or(call.arguments.len(), |(at, _)| at);
        for part in [&call.arguments[..cut], &call.arguments[cut..]] {
            push(
                json!({"tool_calls": [{"index": index,
                                       "function": {"name": call.name, "arguments": part}}]}),
                None,
            );
        }
    }
    push(json!({}), reply.finish_reason.as_deref());
    out.push_str("data: [DONE]\n\n");
    out
}

fn json_response(code: u16, body: Vec<u8>) -> Response<Cursor<Vec<u8>>> {
    Response::from_data(body)
        .with_status_code(code)
        .with_header(header("Content-Type", "application/json"))
}

fn header(name: &str, value: &str) -> Header {
    match Header::from_bytes(name.as_bytes(), value.as_bytes()) {
        Ok(header) => header,
        Err(()) => panic!("invalid test header {name}: {value}"),
    }
}
