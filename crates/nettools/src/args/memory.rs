//! The memory tools' argument shapes and schemas (seed M6b/04 names `recall`, `memory` and
//! `ask_memory`, `MemoryArgs` and `RecallArgs`; their fields are boxmaker's): strict
//! (`deny_unknown_fields`), with caps. The store behind them is `crates/memory`, reached only
//! through the broker.

use serde::{Deserialize, Serialize};

use proto::text::cut_at_boundary;

use super::consult::QUESTION_CAP;

pub use proto::tools::schemas::{ask_memory_schema, memory_schema, recall_schema};

/// The most bytes of an entry's text.
pub const TEXT_CAP: usize = 16_384;
/// The most bytes of a recall query.
pub const QUERY_CAP: usize = 4_096;
/// The most tags on an entry, a filter or a grant.
pub const MAX_TAGS: usize = 16;
/// The most bytes of one tag.
pub const TAG_CAP: usize = 64;
/// The entries a recall returns when it names no `limit`.
pub const DEFAULT_LIMIT: usize = 10;
/// The most entries a recall may ask for.
pub const MAX_LIMIT: usize = 50;

/// `memory`'s arguments: `text` (and optional `tags`) to add an entry, or `forget` an id.
/// Exactly one of `text` and `forget`; unknown keys are errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryArgs {
    /// What to remember.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Its tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The id of an entry to forget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forget: Option<u64>,
}

/// What a `memory` call does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryAction<'a> {
    /// Add an entry.
    Add {
        /// Its text.
        text: &'a str,
        /// Its tags.
        tags: &'a [String],
    },
    /// Forget entry `id`.
    Forget(u64),
}

impl MemoryArgs {
    /// What the call does ([`parse_memory`] made sure it is exactly one thing).
    pub fn action(&self) -> MemoryAction<'_> {
        match (&self.text, self.forget) {
            (Some(text), _) => MemoryAction::Add {
                text,
                tags: &self.tags,
            },
            (None, Some(id)) => MemoryAction::Forget(id),
            (None, None) => MemoryAction::Add {
                text: "",
                tags: &self.tags,
            },
        }
    }
}

/// `recall`'s arguments. Unknown keys are errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecallArgs {
    /// What to look for: FTS5 syntax, or plain words.
    pub query: String,
    /// Only entries carrying every one of these tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The most entries returned (default [`DEFAULT_LIMIT`], at most [`MAX_LIMIT`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

impl RecallArgs {
    /// The limit, or the default.
    pub fn limit(&self) -> usize {
        self.limit.unwrap_or(DEFAULT_LIMIT)
    }
}

/// `ask_memory`'s arguments. Unknown keys are errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskMemoryArgs {
    /// The question, cut to [`QUESTION_CAP`] bytes on a character boundary.
    pub question: String,
    /// Whether the broker will ask its consult model (set by the broker, never by the model:
    /// a key of this name is unknown). With a model the call has side effects.
    #[serde(skip)]
    pub consults: bool,
}

/// Parses `memory` arguments: exactly one of `text` and `forget`, `tags` only with `text`,
/// the text within [`TEXT_CAP`] and not blank, the tags valid ([`check_tags`]).
pub fn parse_memory(arguments: &str) -> Result<MemoryArgs, String> {
    let mut args: MemoryArgs = serde_json::from_str(arguments).map_err(|e| e.to_string())?;
    match (&args.text, args.forget) {
        (Some(_), Some(_)) => {
            return Err("give either text (to remember) or forget (an id), not both".to_string());
        }
        (None, None) => {
            return Err("give text (to remember) or forget (an id)".to_string());
        }
        (None, Some(_)) if !args.tags.is_empty() => {
            return Err("tags go with text; forget takes an id alone".to_string());
        }
        (Some(text), None) => {
            if text.trim().is_empty() {
                return Err("text is empty".to_string());
            }
            if text.len() > TEXT_CAP {
                return Err(format!(
                    "text is {} bytes, more than the {TEXT_CAP} an entry may hold",
                    text.len()
                ));
            }
        }
        (None, Some(_)) => {}
    }
    args.tags = check_tags(&args.tags)?;
    Ok(args)
}

/// Parses `recall` arguments: the query within [`QUERY_CAP`] (any text: bad FTS5 syntax is
/// read as plain words, never refused), valid tags, `limit` from 1 to [`MAX_LIMIT`].
pub fn parse_recall(arguments: &str) -> Result<RecallArgs, String> {
    let mut args: RecallArgs = serde_json::from_str(arguments).map_err(|e| e.to_string())?;
    if args.query.len() > QUERY_CAP {
        return Err(format!(
            "query is {} bytes, more than the {QUERY_CAP} a query may have",
            args.query.len()
        ));
    }
    if let Some(limit) = args.limit
        && !(1..=MAX_LIMIT).contains(&limit)
    {
        return Err(format!("limit is {limit}; it must be 1 to {MAX_LIMIT}"));
    }
    args.tags = check_tags(&args.tags)?;
    Ok(args)
}

/// Parses `ask_memory` arguments: a question that is not blank, cut to [`QUESTION_CAP`] bytes.
pub fn parse_ask_memory(arguments: &str) -> Result<AskMemoryArgs, String> {
    let mut args: AskMemoryArgs = serde_json::from_str(arguments).map_err(|e| e.to_string())?;
    if args.question.trim().is_empty() {
        return Err("the question is empty".to_string());
    }
    args.question = cut_at_boundary(&args.question, QUESTION_CAP).to_string();
    Ok(args)
}

/// Checks tags (at most [`MAX_TAGS`], each 1 to [`TAG_CAP`] bytes of letters, digits, `-`,
/// `_`, `.`, `:` or `/`) and returns them with repeats dropped, in order.
pub fn check_tags(tags: &[String]) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for tag in tags {
        let valid = !tag.is_empty()
            && tag.len() <= TAG_CAP
            && tag
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '/'));
        if !valid {
            return Err(format!(
                "tag {tag:?} must be 1 to {TAG_CAP} bytes of letters, digits, '-', '_', '.', ':' or '/'"
            ));
        }
        if !out.contains(tag) {
            out.push(tag.clone());
        }
    }
    if out.len() > MAX_TAGS {
        return Err(format!(
            "{} tags; at most {MAX_TAGS} are allowed",
            out.len()
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_takes_text_and_tags_or_an_id_to_forget_and_nothing_else() {
        let add = parse_memory(r#"{"text":"likes tea","tags":["home","home"]}"#).unwrap();
        assert_eq!(
            add.action(),
            MemoryAction::Add {
                text: "likes tea",
                tags: &["home".to_string()]
            }
        );
        let forget = parse_memory(r#"{"forget":3}"#).unwrap();
        assert_eq!(forget.action(), MemoryAction::Forget(3));
        for (bad, why) in [
            (r#"{"text":"a","forget":1}"#, "not both"),
            (r#"{}"#, "give text"),
            (r#"{"forget":1,"tags":["x"]}"#, "tags go with text"),
            (r#"{"text":"  "}"#, "text is empty"),
            (r#"{"text":"a","tags":["no spaces"]}"#, "must be 1 to 64"),
            (r#"{"text":"a","colour":"red"}"#, "unknown field"),
            (r#"{"forget":-1}"#, "invalid value"),
        ] {
            let error = parse_memory(bad).unwrap_err();
            assert!(error.contains(why), "{bad}: {error}");
        }
        let long = serde_json::json!({ "text": "a".repeat(TEXT_CAP + 1) }).to_string();
        assert!(parse_memory(&long).unwrap_err().contains("16384"));
    }

    #[test]
    fn recall_takes_a_query_with_optional_tags_and_limit_and_any_query_text() {
        let args = parse_recall(r#"{"query":"NEAR(\"a b"}"#).unwrap();
        assert_eq!(args.limit(), DEFAULT_LIMIT);
        assert_eq!(
            parse_recall(r#"{"query":"x","limit":50}"#).unwrap().limit(),
            50
        );
        for (bad, why) in [
            (r#"{"query":"x","limit":0}"#, "1 to 50"),
            (r#"{"query":"x","limit":51}"#, "1 to 50"),
            (r#"{"query":"x","top":3}"#, "unknown field"),
            (r#"{"tags":["a"]}"#, "missing field"),
        ] {
            let error = parse_recall(bad).unwrap_err();
            assert!(error.contains(why), "{bad}: {error}");
        }
    }

    #[test]
    fn ask_memory_takes_a_question_and_the_consult_flag_is_not_the_models() {
        let args = parse_ask_memory(r#"{"question":"where?"}"#).unwrap();
        assert!(!args.consults);
        let error = parse_ask_memory(r#"{"question":"where?","consults":true}"#).unwrap_err();
        assert!(error.contains("unknown field"), "{error}");
        assert!(parse_ask_memory(r#"{"question":" "}"#).is_err());
    }

    #[test]
    fn each_schema_names_exactly_the_fields_its_args_accept() {
        for (schema, fields) in [
            (recall_schema(), vec!["query", "tags", "limit"]),
            (memory_schema(), vec!["text", "tags", "forget"]),
            (ask_memory_schema(), vec!["question"]),
        ] {
            let properties = schema.parameters["properties"].as_object().unwrap();
            let names: Vec<&str> = properties.keys().map(String::as_str).collect();
            assert_eq!(names, fields, "{}", schema.name);
        }
    }
}
