//! `ask`'s argument shape and schema (seed 003 names the tool; its schema is written here): the
//! model asks the owner a question, with optional choices, and waits for the answer. No side
//! effects, no paths, no hosts. The broker holds the question as a pending approval; the answer
//! comes back as a result labelled `public` and trusted (it is the owner's own text).

use serde::{Deserialize, Serialize};

use proto::text::cut_at_boundary;

use super::consult::QUESTION_CAP;

pub use proto::tools::schemas::ask_schema;

/// The tool's name.
pub const ASK: &str = "ask";

/// The most choices a question may offer.
pub const MAX_CHOICES: usize = 16;

/// The most bytes of one choice.
pub const CHOICE_CAP: usize = 256;

/// What an `ask` that nobody answered before its expiry gives the model.
pub const NOT_ANSWERED: &str = "The owner did not answer.";

/// The model's `ask` arguments. Unknown keys are errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskArgs {
    /// The question, as the owner will read it.
    pub question: String,
    /// Answers the owner may pick from (the owner may still write another).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<String>,
}

/// Parses `ask` arguments: unknown keys refused, the question cut to [`QUESTION_CAP`] bytes,
/// at most [`MAX_CHOICES`] choices of at most [`CHOICE_CAP`] bytes each.
pub fn parse_ask(arguments: &str) -> Result<AskArgs, String> {
    let mut args: AskArgs = serde_json::from_str(arguments).map_err(|e| e.to_string())?;
    if args.question.trim().is_empty() {
        return Err("the question is empty".to_string());
    }
    if args.choices.len() > MAX_CHOICES {
        return Err(format!(
            "{} choices; at most {MAX_CHOICES} are allowed",
            args.choices.len()
        ));
    }
    args.question = cut_at_boundary(&args.question, QUESTION_CAP).to_string();
    for choice in &mut args.choices {
        *choice = cut_at_boundary(choice, CHOICE_CAP).to_string();
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ask_takes_a_question_and_optional_choices_and_nothing_else() {
        let args = parse_ask(r#"{"question":"Deploy?","choices":["yes","no"]}"#).unwrap();
        assert_eq!(args.choices, ["yes", "no"]);
        assert!(
            parse_ask(r#"{"question":"Deploy?"}"#)
                .unwrap()
                .choices
                .is_empty()
        );
        assert!(parse_ask(r#"{"question":"x","path":"/"}"#).is_err());
        assert!(parse_ask(r#"{"question":"  "}"#).is_err());
        let schema = ask_schema();
        let properties = schema.parameters["properties"].as_object().unwrap();
        assert_eq!(
            properties.keys().collect::<Vec<_>>(),
            ["question", "choices"]
        );
    }
}
