//! `consult`'s argument shape and the body of its question (seed M6b/04): what the model may
//! send, the cap on a character boundary, and the exact JSON the broker POSTs. Sending it is
//! the broker's (`brokerd::consult::ConsultClient`); everything here is pure.

use serde::{Deserialize, Serialize};
use serde_json::json;

use proto::text::cut_at_boundary;

pub use proto::tools::schemas::consult_schema;

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

/// Where `consult` questions go: the owner's configuration (`[consult]` in `brokerd.toml`).
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

/// Cut `text` to `cap` bytes on a character boundary; the flag says whether it was cut.
pub fn cap_bytes(text: &str, cap: usize) -> (String, bool) {
    let cut = cut_at_boundary(text, cap);
    (cut.to_string(), cut.len() < text.len())
}

/// The `question` field of `arguments`, capped, or empty when it is missing or not a string
/// (the seed's contract, for [`wire_body`]; `args::parse` refuses such arguments instead).
pub fn question_of(arguments: &str) -> String {
    let extracted = match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(serde_json::Value::Object(obj)) => obj
            .get("question")
            .and_then(|v| v.as_str())
            .map(str::to_string),
        _ => None,
    };
    extracted.map_or_else(String::new, |question| cap_bytes(&question, QUESTION_CAP).0)
}

/// The exact JSON body the broker POSTs (and records) for a call's raw `arguments`: the body of
/// [`question_of`] them (seed M6b/04: keys other than `question` are dropped, a missing
/// question is the empty one). The broker's client sends only parsed questions
/// ([`question_body`]), so a call whose arguments `parse` refuses is never sent.
pub fn wire_body(consult: Option<&Consult>, arguments: &str) -> String {
    question_body(consult, &question_of(arguments))
}

/// The exact JSON body for one question: no history, no tools. Without a configuration the
/// model is `""` and the temperature 0.6 (the seed's defaults).
pub fn question_body(consult: Option<&Consult>, question: &str) -> String {
    let model = consult.map_or("", |c| c.model.as_str());
    let temperature = consult.map_or(
        f64::from(DEFAULT_TEMPERATURE_MILLI) / 1000.0,
        Consult::temperature,
    );
    json!({
        "model": model,
        "temperature": temperature,
        "messages": [{"role": "user", "content": question}],
    })
    .to_string()
}
