//! Arguments that do not fit a tool, said the way a model can act on: which argument, and what
//! it must be ("argument `path` must be a string; got 5"). Such a call is answered as a
//! failure, which the model can correct and send again; `InvalidArguments` (a denial) stays for
//! what the decision refuses. One place for boxmaker's own tools (checked against the schema
//! the broker lists for them, once `policy::args::parse` refused the arguments) and for a
//! downstream server's tools (checked against the tool's own input schema).

use std::path::Path;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::paths::LocationSegment;
use jsonschema::types::JsonType;
use jsonschema::{ValidationError, Validator};
use serde_json::Value;

/// The most misfits named in one answer.
pub const MISFITS_NAMED: usize = 5;

/// The most bytes of a misfit answer.
pub const MESSAGE_CAP: usize = 2048;

/// The most characters of a wrong value shown back.
const SHOWN_CHARS: usize = 60;

/// The most characters of an argument's description quoted when it is missing.
const DESCRIPTION_CHARS: usize = 120;

/// Why `arguments` do not fit the input schema `schema` (compiled as `validator`) of `tool`:
/// one sentence per misfit, each naming the argument, at most [`MISFITS_NAMED`]; empty when
/// they fit. With `closed`, a key the schema does not list is a misfit too (boxmaker's own
/// tools refuse unknown keys; a downstream schema says so itself, with `additionalProperties`).
pub fn misfits(
    tool: &str,
    validator: &Validator,
    schema: &Value,
    arguments: &Value,
    closed: bool,
) -> Vec<String> {
    let Value::Object(given) = arguments else {
        return vec![not_an_object(tool, arguments)];
    };
    let properties = schema.get("properties").and_then(Value::as_object);
    let mut found = Vec::new();
    if closed && let Some(properties) = properties {
        found.extend(
            given
                .keys()
                .filter(|key| !properties.contains_key(*key))
                .map(|key| unknown(tool, key, schema)),
        );
    }
    found.extend(
        validator
            .iter_errors(arguments)
            .flat_map(|error| sentences(tool, schema, &error)),
    );
    // An unknown key is named once, when the schema refuses it too (`additionalProperties`).
    let mut named: Vec<String> = Vec::new();
    for misfit in found {
        if !named.contains(&misfit) {
            named.push(misfit);
        }
    }
    named.truncate(MISFITS_NAMED);
    named
}

/// The sentence for arguments that are not a JSON object at all.
pub fn not_an_object(tool: &str, arguments: &Value) -> String {
    format!(
        "the arguments of {tool} must be a JSON object of named arguments; got {}",
        kind_of(arguments)
    )
}

/// The sentence for arguments that are not JSON: what the parser said.
pub fn not_json(tool: &str, error: &serde_json::Error) -> String {
    format!("the arguments of {tool} must be a JSON object; they are not JSON ({error})")
}

/// The sentence for a path argument that is not absolute, with where it would be inside
/// `folder` (the tool's granted folder), when there is one.
pub fn relative_path(argument: &str, path: &str, folder: Option<&Path>) -> String {
    let inside = match folder {
        Some(folder) => format!(
            " (relative to the granted folder {}: {})",
            folder.display(),
            folder.join(path).display()
        ),
        None => String::new(),
    };
    format!(
        "argument `{argument}` must be an absolute path; got `{}`{inside}",
        shown_text(path)
    )
}

/// The answer's message: the misfits, one after the other, within [`MESSAGE_CAP`] bytes (the
/// audit record keeps it whole).
pub fn message(misfits: &[String]) -> String {
    proto::text::cut_at_boundary(&misfits.join("; "), MESSAGE_CAP).to_string()
}

fn unknown(tool: &str, key: &str, schema: &Value) -> String {
    let names: Vec<String> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().map(|k| format!("`{k}`")).collect())
        .unwrap_or_default();
    let takes = if names.is_empty() {
        format!("{tool} takes no arguments")
    } else {
        format!("{tool} takes {}", names.join(", "))
    };
    format!(
        "argument `{}` is not one of {tool}'s arguments; {takes}",
        shown_text(key)
    )
}

/// The sentences for one validation error (several for several unexpected keys).
fn sentences(tool: &str, schema: &Value, error: &ValidationError<'_>) -> Vec<String> {
    let at = argument_name(error);
    let got = shown(error.instance());
    let must = |what: String| match &at {
        Some(name) => format!("argument `{name}` must be {what}; got {got}"),
        None => format!("the arguments of {tool} must be {what}; got {got}"),
    };
    let one = match error.kind() {
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().unwrap_or_default();
            let full = match &at {
                Some(parent) => format!("{parent}.{name}"),
                None => name.to_string(),
            };
            let wanted = match &at {
                None => schema.get("properties").and_then(|p| p.get(name)),
                Some(_) => None,
            };
            let what = wanted.map(describe).unwrap_or_default();
            format!("argument `{full}` is missing{what}")
        }
        ValidationErrorKind::AdditionalProperties { unexpected }
        | ValidationErrorKind::UnevaluatedProperties { unexpected } => {
            return unexpected
                .iter()
                .map(|key| match &at {
                    Some(parent) => format!(
                        "argument `{parent}.{}` is not one it takes",
                        shown_text(key)
                    ),
                    None => unknown(tool, key, schema),
                })
                .collect();
        }
        ValidationErrorKind::Type { kind } => must(type_kind(kind)),
        ValidationErrorKind::Minimum { limit } => must(format!("at least {limit}")),
        ValidationErrorKind::Maximum { limit } => must(format!("at most {limit}")),
        ValidationErrorKind::ExclusiveMinimum { limit } => must(format!("more than {limit}")),
        ValidationErrorKind::ExclusiveMaximum { limit } => must(format!("less than {limit}")),
        ValidationErrorKind::Enum { options } => must(format!("one of {options}")),
        ValidationErrorKind::Constant { expected_value } => must(format!("{expected_value}")),
        ValidationErrorKind::MinLength { limit } => must(format!("at least {limit} characters")),
        ValidationErrorKind::MaxLength { limit } => must(format!("at most {limit} characters")),
        ValidationErrorKind::MinItems { limit } => must(format!("at least {limit} items")),
        ValidationErrorKind::MaxItems { limit } => must(format!("at most {limit} items")),
        _ => match &at {
            Some(name) => format!("argument `{name}`: {error}"),
            None => format!("the arguments of {tool}: {error}"),
        },
    };
    vec![one]
}

/// The argument an error is about, as a model writes it (`edits[0].old_str`), or `None` for
/// the arguments object itself.
fn argument_name(error: &ValidationError<'_>) -> Option<String> {
    let mut name = String::new();
    for segment in error.instance_path().iter() {
        match segment {
            LocationSegment::Index(index) if !name.is_empty() => {
                name.push_str(&format!("[{index}]"));
            }
            other => {
                if !name.is_empty() {
                    name.push('.');
                }
                name.push_str(&other.to_string());
            }
        }
    }
    (!name.is_empty()).then_some(name)
}

/// ": it must be a string (The absolute path of the file.)", from an argument's schema.
fn describe(wanted: &Value) -> String {
    let kind = match wanted.get("type") {
        Some(Value::String(name)) => type_name(name).to_string(),
        Some(Value::Array(names)) => names
            .iter()
            .filter_map(Value::as_str)
            .map(type_name)
            .collect::<Vec<_>>()
            .join(" or "),
        _ => String::new(),
    };
    let description = wanted
        .get("description")
        .and_then(Value::as_str)
        .map(|d| proto::text::cut_at_boundary(d, DESCRIPTION_CHARS).to_string());
    match (kind.is_empty(), description) {
        (true, None) => String::new(),
        (true, Some(d)) => format!(": {d}"),
        (false, None) => format!(": it must be {kind}"),
        (false, Some(d)) => format!(": it must be {kind} ({d})"),
    }
}

fn type_kind(kind: &TypeKind) -> String {
    match kind {
        TypeKind::Single(one) => json_type(*one).to_string(),
        TypeKind::Multiple(set) => set.iter().map(json_type).collect::<Vec<_>>().join(" or "),
    }
}

fn json_type(kind: JsonType) -> &'static str {
    match kind {
        JsonType::Array => "an array",
        JsonType::Boolean => "true or false",
        JsonType::Integer => "an integer",
        JsonType::Null => "null",
        JsonType::Number => "a number",
        JsonType::Object => "an object",
        JsonType::String => "a string",
    }
}

fn type_name(name: &str) -> &str {
    match name {
        "array" => "an array",
        "boolean" => "true or false",
        "integer" => "an integer",
        "null" => "null",
        "number" => "a number",
        "object" => "an object",
        "string" => "a string",
        other => other,
    }
}

/// What a value is, for an object that was expected.
fn kind_of(value: &Value) -> String {
    match value {
        Value::Object(_) => "an object".to_string(),
        Value::Array(_) => "an array".to_string(),
        other => shown(other),
    }
}

/// A value as JSON, cut to [`SHOWN_CHARS`].
fn shown(value: &Value) -> String {
    let text = value.to_string();
    let cut = cut_chars(&text);
    if cut.len() < text.len() {
        format!("{cut}…")
    } else {
        text
    }
}

/// A text, cut to [`SHOWN_CHARS`].
fn shown_text(text: &str) -> String {
    let cut = cut_chars(text);
    if cut.len() < text.len() {
        format!("{cut}…")
    } else {
        text.to_string()
    }
}

fn cut_chars(text: &str) -> &str {
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(schema: &Value, arguments: Value) -> Vec<String> {
        let validator = jsonschema::validator_for(schema).unwrap();
        misfits("t", &validator, schema, &arguments, true)
    }

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": { "type": "string", "description": "The absolute path of the file." },
                "limit": { "type": "integer", "minimum": 1, "maximum": 9 },
                "edits": { "type": "array", "items": { "type": "object", "properties": { "old": { "type": "string" } }, "required": ["old"] } }
            },
            "required": ["path"]
        })
    }

    #[test]
    fn each_misfit_names_its_argument_and_what_it_must_be() {
        assert_eq!(
            check(&schema(), json!({})),
            ["argument `path` is missing: it must be a string (The absolute path of the file.)"]
        );
        assert_eq!(
            check(&schema(), json!({"path": 5})),
            ["argument `path` must be a string; got 5"]
        );
        assert_eq!(
            check(&schema(), json!({"path": "/a", "limit": 0})),
            ["argument `limit` must be at least 1; got 0"]
        );
        assert_eq!(
            check(&schema(), json!({"path": "/a", "limit": 10})),
            ["argument `limit` must be at most 9; got 10"]
        );
        assert_eq!(
            check(&schema(), json!({"path": "/a", "file": 1})),
            ["argument `file` is not one of t's arguments; t takes `path`, `limit`, `edits`"]
        );
        let mut closed = schema();
        closed["additionalProperties"] = json!(false);
        assert_eq!(
            check(&closed, json!({"path": "/a", "file": 1})),
            ["argument `file` is not one of t's arguments; t takes `path`, `limit`, `edits`"]
        );
        assert_eq!(
            check(&schema(), json!({"path": "/a", "edits": [{"old": 1}]})),
            ["argument `edits[0].old` must be a string; got 1"]
        );
        assert_eq!(
            check(&schema(), json!([1])),
            ["the arguments of t must be a JSON object of named arguments; got an array"]
        );
        assert!(check(&schema(), json!({"path": "/a"})).is_empty());
    }

    #[test]
    fn a_long_wrong_value_is_cut() {
        let long = "x".repeat(500);
        let found = check(&schema(), json!({ "path": "/a", "limit": long }));
        assert!(found[0].len() < 150, "{found:?}");
        assert!(found[0].ends_with("…"), "{found:?}");
    }

    #[test]
    fn a_relative_path_says_where_it_would_be_in_the_granted_folder() {
        assert_eq!(
            relative_path("path", "src/main.rs", Some(Path::new("/w"))),
            "argument `path` must be an absolute path; got `src/main.rs` (relative to the granted folder /w: /w/src/main.rs)"
        );
        assert_eq!(
            relative_path("cwd", "src", None),
            "argument `cwd` must be an absolute path; got `src`"
        );
    }
}
