//! `consult`: the model's question to another model, sent by the broker as one chat completion
//! to an OpenAI-compatible server on this machine (seed M6b/04).

use std::net::IpAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;

use proto::ToolSchema;

/// The tool's name.
pub const CONSULT: &str = "consult";

/// `question` and the answer are cut to this many bytes, on a character boundary.
pub const QUESTION_CAP: usize = 16_384;

/// The temperature when the configuration names none, in thousandths.
pub const DEFAULT_TEMPERATURE_MILLI: u32 = 600;

/// The model's `consult` arguments. Unknown keys are errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsultArgs {
    /// The question, alone: no history travels with it.
    pub question: String,
}

/// `consult`'s schema.
pub fn consult_schema() -> ToolSchema {
    ToolSchema {
        name: CONSULT.to_string(),
        description: "Ask another model one question and get its answer. It sees only the question. Needs a grant from the owner.".to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "question": { "type": "string", "description": "The whole question, with any context the other model needs." }
            },
            "required": ["question"]
        }),
    }
}

/// Where `consult` questions go: the owner's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Consult {
    /// The server's API base, loopback `http` only, e.g. `http://127.0.0.1:8081/v1`.
    pub url: String,
    /// The `model` field sent.
    #[serde(default)]
    pub model: String,
    /// The temperature in thousandths (600 is 0.6).
    #[serde(default = "default_temperature_milli")]
    pub temperature_milli: u32,
    /// The environment variable holding the server's API key, read once when the broker starts.
    #[serde(default)]
    pub api_key_env: Option<String>,
}

fn default_temperature_milli() -> u32 {
    DEFAULT_TEMPERATURE_MILLI
}

impl Consult {
    /// The temperature sent.
    pub fn temperature(&self) -> f64 {
        f64::from(self.temperature_milli) / 1000.0
    }
}

/// Cut `text` to `cap` bytes on a character boundary.
pub fn cap_bytes(text: &str, cap: usize) -> (String, bool) {
    if text.len() <= cap {
        return (text.to_string(), false);
    }
    let mut boundary = cap;
    while !text.is_char_boundary(boundary) {
        boundary -= 1;
    }
    match text.get(..boundary) {
        Some(cut) => (cut.to_string(), true),
        None => (String::new(), true),
    }
}

/// The `question` field of `arguments`, capped, or empty when it is missing or not a string.
pub fn question_of(arguments: &str) -> String {
    let extracted = match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(serde_json::Value::Object(obj)) => obj
            .get("question")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string(),
        _ => String::new(),
    };
    cap_bytes(&extracted, QUESTION_CAP).0
}

/// The exact JSON body the broker POSTs (and records). No history, no tools.
pub fn wire_body(consult: Option<&Consult>, arguments: &str) -> String {
    let model = consult.map(|c| c.model.as_str()).unwrap_or("");
    let temperature = consult
        .map(Consult::temperature)
        .unwrap_or(f64::from(DEFAULT_TEMPERATURE_MILLI) / 1000.0);
    wire_body_parts(model, temperature, &question_of(arguments))
}

fn wire_body_parts(model: &str, temperature: f64, question: &str) -> String {
    json!({
        "model": model,
        "temperature": temperature,
        "messages": [{"role": "user", "content": question}],
    })
    .to_string()
}

/// Why the `consult` configuration cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConsultConfigError {
    /// The URL is not `http://` to a loopback address.
    #[error("consult url {0:?} must be http:// to 127.0.0.1, ::1 or localhost")]
    NotLoopbackHttp(String),
}

/// Checks that `url` is `http://` to a loopback host and returns it without a trailing slash.
pub fn parse_loopback_http(url: &str) -> Result<String, ConsultConfigError> {
    let refuse = || ConsultConfigError::NotLoopbackHttp(url.to_string());
    let rest = url.strip_prefix("http://").ok_or_else(refuse)?;
    let authority = rest.split('/').next().unwrap_or("");
    if authority.contains('@') {
        return Err(refuse());
    }
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        authority.split(':').next().unwrap_or("")
    };
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if !loopback {
        return Err(refuse());
    }
    Ok(url.trim_end_matches('/').to_string())
}

/// The API key could not be read when the broker started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretStartError {
    /// The variable named by `api_key_env` is not set or empty.
    #[error("consult api_key_env names {0}, which is not set")]
    Missing(String),
}

/// A secret that never appears in `Debug` output or logs.
#[derive(Clone, PartialEq, Eq)]
struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Why a `consult` call got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConsultError {
    /// No server answered within `consult_ms`.
    #[error("the consult server did not answer within {0} ms")]
    Timeout(u64),
    /// The server cannot be reached.
    #[error("the consult server at {url} cannot be reached: {cause}")]
    Unreachable {
        /// The URL.
        url: String,
        /// The cause.
        cause: String,
    },
    /// The server answered with an error status.
    #[error("the consult server answered HTTP {status}: {body}")]
    Status {
        /// The status.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// The answer is not a chat completion with text.
    #[error("the consult server's answer is not a chat completion: {0}")]
    Malformed(String),
}

/// The broker's `consult` client: configuration checked and key read once, at start.
#[derive(Debug)]
pub struct ConsultClient {
    consult: Consult,
    endpoint: String,
    key: Option<Secret>,
    timeout: Duration,
}

/// Either start error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConsultStartError {
    /// The URL is not loopback http.
    #[error(transparent)]
    Config(#[from] ConsultConfigError),
    /// The key is missing.
    #[error(transparent)]
    Secret(#[from] SecretStartError),
}

impl ConsultClient {
    /// Checks `consult` and reads its API key from the environment, once. `consult_ms` is the
    /// time limit of each question.
    pub fn start(consult: Consult, consult_ms: u64) -> Result<ConsultClient, ConsultStartError> {
        let base = parse_loopback_http(&consult.url)?;
        let key = match &consult.api_key_env {
            Some(name) => match std::env::var(name) {
                Ok(value) if !value.is_empty() => Some(Secret(value)),
                _ => return Err(SecretStartError::Missing(name.clone()).into()),
            },
            None => None,
        };
        Ok(ConsultClient {
            endpoint: format!("{base}/chat/completions"),
            consult,
            key,
            timeout: Duration::from_millis(consult_ms),
        })
    }

    /// Sends one question (the call's arguments as JSON text) and returns the answer's text,
    /// capped at [`QUESTION_CAP`] bytes, with whether it was cut.
    pub fn run(&self, arguments: &str) -> Result<(String, bool), ConsultError> {
        let body = wire_body(Some(&self.consult), arguments);
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(self.timeout))
            .http_status_as_error(false)
            .build()
            .into();
        let mut request = agent
            .post(&self.endpoint)
            .header("Content-Type", "application/json");
        if let Some(Secret(key)) = &self.key {
            request = request.header("Authorization", &format!("Bearer {key}"));
        }
        let timeout_ms = u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX);
        let mut response = request.send(&body).map_err(|e| match e {
            ureq::Error::Timeout(_) => ConsultError::Timeout(timeout_ms),
            other => ConsultError::Unreachable {
                url: self.endpoint.clone(),
                cause: other.to_string(),
            },
        })?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(4 * 1024 * 1024)
            .lossy_utf8(true)
            .read_to_string()
            .map_err(|e| match e {
                ureq::Error::Timeout(_) => ConsultError::Timeout(timeout_ms),
                other => ConsultError::Malformed(other.to_string()),
            })?;
        if status >= 400 {
            return Err(ConsultError::Status {
                status,
                body: text.chars().take(200).collect(),
            });
        }
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| ConsultError::Malformed(format!("{e}")))?;
        let answer = value
            .pointer("/choices/0/message/content")
            .and_then(|c| c.as_str())
            .ok_or_else(|| ConsultError::Malformed("no choices[0].message.content".to_string()))?;
        Ok(cap_bytes(answer, QUESTION_CAP))
    }
}
