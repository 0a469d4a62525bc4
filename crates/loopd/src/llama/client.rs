//! The HTTP side: one POST per request, whole or streamed.

use std::io::Read;
use std::time::Duration;

use super::stream::{StreamError, parse_completion, read_stream};
use super::wire::excerpt;
use super::{ChatRequest, LlamaError, Model, Reply, request_body};

/// The most bytes one answer may have, whole or streamed, after decompression.
pub const ANSWER_LIMIT: usize = 16 * 1024 * 1024;

/// The most bytes of an error body read (the start of it is shown).
const ERROR_BODY_LIMIT: u64 = 64 * 1024;

/// How to reach the model server and what to ask it for.
#[derive(Debug, Clone, PartialEq)]
pub struct LlamaConfig {
    /// The API base, e.g. `http://127.0.0.1:8080/v1`; `/chat/completions` is appended.
    pub base_url: String,
    /// The `model` field (llama.cpp ignores it; Ollama and vLLM need it).
    pub model_name: String,
    /// Ask for a streamed answer.
    pub stream: bool,
    /// The longest one request may take, from connecting to the last byte.
    pub timeout: Duration,
    /// `max_tokens`, when set.
    pub max_tokens: Option<u32>,
    /// `temperature`, when set.
    pub temperature: Option<f64>,
    /// Sent as `Authorization: Bearer …` when set; never logged.
    pub api_key: Option<String>,
}

impl Default for LlamaConfig {
    fn default() -> Self {
        LlamaConfig {
            base_url: "http://127.0.0.1:8080/v1".to_string(),
            model_name: "default".to_string(),
            stream: true,
            timeout: Duration::from_secs(300),
            max_tokens: None,
            temperature: None,
            api_key: None,
        }
    }
}

/// A blocking client for one OpenAI-compatible server.
pub struct LlamaClient {
    config: LlamaConfig,
    url: String,
    agent: ureq::Agent,
}

impl LlamaClient {
    /// A client for `config`; no connection is made until the first request.
    pub fn new(config: LlamaConfig) -> LlamaClient {
        let url = format!("{}/chat/completions", config.base_url.trim_end_matches('/'));
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(config.timeout))
            .http_status_as_error(false)
            // A redirect could send the conversation, and take the answer, from another host.
            .max_redirects(0)
            .build()
            .into();
        LlamaClient { config, url, agent }
    }

    /// The settings this client sends with.
    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    fn transport_error(&self, error: ureq::Error) -> LlamaError {
        match error {
            ureq::Error::Timeout(_) => self.timeout(),
            ureq::Error::ConnectionFailed | ureq::Error::HostNotFound => LlamaError::Unreachable {
                url: self.url.clone(),
                cause: error.to_string(),
            },
            ureq::Error::Io(io) => self.io_error(io),
            other => LlamaError::Transport {
                url: self.url.clone(),
                cause: other.to_string(),
            },
        }
    }

    fn io_error(&self, io: std::io::Error) -> LlamaError {
        use std::io::ErrorKind::*;
        if let Some(ureq::Error::Timeout(_)) =
            io.get_ref().and_then(|e| e.downcast_ref::<ureq::Error>())
        {
            return self.timeout();
        }
        match io.kind() {
            TimedOut | WouldBlock => self.timeout(),
            ConnectionRefused | NotFound | AddrNotAvailable | HostUnreachable
            | NetworkUnreachable => LlamaError::Unreachable {
                url: self.url.clone(),
                cause: io.to_string(),
            },
            _ => LlamaError::Transport {
                url: self.url.clone(),
                cause: io.to_string(),
            },
        }
    }

    fn timeout(&self) -> LlamaError {
        LlamaError::Timeout {
            url: self.url.clone(),
            seconds: self.config.timeout.as_secs_f64(),
        }
    }
}

impl Model for LlamaClient {
    fn complete(
        &self,
        request: &ChatRequest<'_>,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Reply, LlamaError> {
        let body = request_body(&self.config, request)?;
        let mut post = self
            .agent
            .post(&self.url)
            .header("Content-Type", "application/json");
        if let Some(key) = &self.config.api_key {
            post = post.header("Authorization", &format!("Bearer {key}"));
        }
        let mut response = post.send(&body).map_err(|e| self.transport_error(e))?;
        let status = response.status().as_u16();
        if (300..400).contains(&status) {
            let location = response
                .headers()
                .get("location")
                .map(|v| excerpt(&String::from_utf8_lossy(v.as_bytes())))
                .unwrap_or_default();
            return Err(LlamaError::Redirect {
                url: self.url.clone(),
                status,
                location,
            });
        }
        if status >= 400 {
            let mut start = Vec::new();
            // The start is enough to show; a body that fails halfway still shows what came.
            let _ = response
                .body_mut()
                .as_reader()
                .take(ERROR_BODY_LIMIT)
                .read_to_end(&mut start);
            return Err(LlamaError::Status {
                url: self.url.clone(),
                status,
                body: excerpt(&String::from_utf8_lossy(&start)),
            });
        }
        let event_stream = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if event_stream {
            let reader = response.body_mut().as_reader();
            return read_stream(reader, ANSWER_LIMIT, request.keep_calls, on_text).map_err(|e| {
                match e {
                    StreamError::Io(io) => self.io_error(io),
                    StreamError::Llama(error) => error,
                }
            });
        }
        let text = response
            .body_mut()
            .with_config()
            .limit(ANSWER_LIMIT as u64)
            .read_to_string()
            .map_err(|e| match e {
                ureq::Error::BodyExceedsLimit(_) => {
                    LlamaError::Malformed(format!("the answer is longer than {ANSWER_LIMIT} bytes"))
                }
                other => self.transport_error(other),
            })?;
        let reply = parse_completion(&text, request.keep_calls)?;
        if !reply.content.is_empty() {
            on_text(&reply.content);
        }
        Ok(reply)
    }
}
