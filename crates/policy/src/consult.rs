//! `consult`'s configuration and the body of its question (seed M6b/04): the exact JSON the
//! broker POSTs; its argument shape and cap are `nettools::args::consult`'s, re-exported here. Sending it is
//! the broker's (`brokerd::consult::ConsultClient`); everything here is pure.

use serde::{Deserialize, Serialize};
use serde_json::json;

pub use nettools::args::consult::{ConsultArgs, QUESTION_CAP, cap_bytes};
pub use proto::tools::schemas::consult_schema;

/// The tool's name.
pub const CONSULT: &str = "consult";

/// The temperature when the configuration names none, in thousandths.
pub const DEFAULT_TEMPERATURE_MILLI: u32 = 600;

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
