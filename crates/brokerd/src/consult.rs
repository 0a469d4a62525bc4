//! `consult`: the model's question to another model, sent by the broker as one chat completion
//! to an OpenAI-compatible server on this machine (seed M6b/04). The argument shape, the cap and
//! the body are pure and live in `policy::consult`, re-exported here at the seed's path; this
//! module sends them ([`ConsultClient`]).

use std::net::IpAddr;
use std::time::Duration;

use ::policy::args::{ArgsError, consult_question};
use ::policy::hosts::{authority, split_host_port};

pub use ::policy::consult::{
    CONSULT, Consult, ConsultArgs, DEFAULT_TEMPERATURE_MILLI, QUESTION_CAP, cap_bytes,
    consult_schema, question_body, question_of, wire_body,
};

/// Why the broker cannot start with its `consult` configuration: what `brokerd` prints before
/// it refuses to start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConsultStartError {
    /// The URL is not `http://` to a loopback address.
    #[error("consult url {0:?} must be http:// to 127.0.0.1, ::1 or localhost")]
    NotLoopbackHttp(String),
    /// The variable named by `api_key_env` is not set or empty.
    #[error("consult api_key_env names {0}, which is not set")]
    MissingKey(String),
}

/// Checks that `url` is `http://` to a loopback host (`127.0.0.0/8`, `::1`, `localhost`, with
/// any port) and returns it without a trailing slash.
pub fn parse_loopback_http(url: &str) -> Result<String, ConsultStartError> {
    let refuse = || ConsultStartError::NotLoopbackHttp(url.to_string());
    let rest = url.strip_prefix("http://").ok_or_else(refuse)?;
    let authority = authority(rest);
    if authority.contains('@') {
        return Err(refuse());
    }
    let (host, _port) = split_host_port(authority).map_err(|_| refuse())?;
    let loopback = host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if !loopback {
        return Err(refuse());
    }
    Ok(url.trim_end_matches('/').to_string())
}

/// A secret that never appears in `Debug` output or logs.
#[derive(Clone, PartialEq, Eq)]
struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Why a `consult` call got no answer: the sentence the call fails with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConsultError {
    /// The arguments are not `consult`'s (the broker only sends decided ones, so this is a
    /// caller's mistake, refused rather than sent as an empty question).
    #[error("the consult arguments do not fit: {}", .0.detail())]
    Arguments(ArgsError),
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
#[derive(Debug, Clone)]
pub struct ConsultClient {
    consult: Consult,
    endpoint: String,
    key: Option<Secret>,
    timeout_ms: u64,
}

impl ConsultClient {
    /// Checks `consult` and reads its API key from the environment, once. `consult_ms` is the
    /// time limit of each question.
    pub fn start(consult: Consult, consult_ms: u64) -> Result<ConsultClient, ConsultStartError> {
        ConsultClient::start_with_env(consult, consult_ms, |name| std::env::var(name).ok())
    }

    /// [`ConsultClient::start`] with the environment given as a lookup, so that the key can
    /// come from somewhere other than this process's variables (a test, an embedder).
    pub fn start_with_env(
        consult: Consult,
        consult_ms: u64,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<ConsultClient, ConsultStartError> {
        let base = parse_loopback_http(&consult.url)?;
        let key = match &consult.api_key_env {
            Some(name) => match env(name) {
                Some(value) if !value.is_empty() => Some(Secret(value)),
                _ => return Err(ConsultStartError::MissingKey(name.clone())),
            },
            None => None,
        };
        Ok(ConsultClient {
            endpoint: format!("{base}/chat/completions"),
            consult,
            key,
            timeout_ms: consult_ms,
        })
    }

    /// Sends one question (the call's arguments as JSON text, parsed as strictly as
    /// `args::parse` does) and returns the answer's text, capped at [`QUESTION_CAP`] bytes,
    /// with whether it was cut.
    pub fn run(&self, arguments: &str) -> Result<(String, bool), ConsultError> {
        let question = consult_question(arguments).map_err(ConsultError::Arguments)?;
        let body = question_body(Some(&self.consult), &question);
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_millis(self.timeout_ms)))
            .http_status_as_error(false)
            .build()
            .into();
        let mut request = agent
            .post(&self.endpoint)
            .header("Content-Type", "application/json");
        if let Some(Secret(key)) = &self.key {
            request = request.header("Authorization", &format!("Bearer {key}"));
        }
        let timeout_ms = self.timeout_ms;
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
                body: tools::clean::clean_output(text.as_bytes())
                    .chars()
                    .take(200)
                    .collect(),
            });
        }
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| ConsultError::Malformed(format!("{e}")))?;
        let answer = value
            .pointer("/choices/0/message/content")
            .and_then(|c| c.as_str())
            .ok_or_else(|| ConsultError::Malformed("no choices[0].message.content".to_string()))?;
        // Another model's text, cleaned as every tool's output is before the agent reads it.
        let answer = tools::clean::clean_output(answer.as_bytes());
        Ok(cap_bytes(&answer, QUESTION_CAP))
    }
}
