//! `consult`'s argument shape (seed M6b/04): what the model may send, and the cap on a
//! character boundary. Where the question goes and the body the broker POSTs are `policy`'s
//! (`policy::consult`).

use serde::{Deserialize, Serialize};

use proto::text::cut_at_boundary;

/// `question` and the answer are cut to this many bytes, on a character boundary.
pub const QUESTION_CAP: usize = 16_384;

/// The model's `consult` arguments. Unknown keys are errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsultArgs {
    /// The question, alone: no history travels with it.
    pub question: String,
}

/// Cut `text` to `cap` bytes on a character boundary; the flag says whether it was cut.
pub fn cap_bytes(text: &str, cap: usize) -> (String, bool) {
    let cut = cut_at_boundary(text, cap);
    (cut.to_string(), cut.len() < text.len())
}
