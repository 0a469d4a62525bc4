//! The parts of a chat completion loopd reads, deserialized straight from the text: no JSON
//! tree is built, unknown fields are skipped as they are read, and arrays are walked one
//! element at a time, so the memory a body costs is what loopd keeps of it, not its shape.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::LlamaError;

/// A whole completion or one stream event: the server's error, and the choices as raw JSON.
#[derive(Deserialize)]
pub(crate) struct Envelope<'a> {
    #[serde(default, borrow)]
    pub error: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub choices: Option<&'a RawValue>,
}

/// Choice 0 of a whole completion; its message is read with [`parse`], as an object.
#[derive(Deserialize)]
pub(crate) struct WholeChoice<'a> {
    #[serde(default, borrow)]
    pub message: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub finish_reason: Option<&'a RawValue>,
}

/// The message of a whole completion; its tool calls are read one at a time.
#[derive(Deserialize)]
pub(crate) struct WholeMessage<'a> {
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default, borrow)]
    pub tool_calls: Option<&'a RawValue>,
}

/// Choice 0 of a stream event; its delta is read with [`parse`], as an object.
#[derive(Deserialize)]
pub(crate) struct StreamChoice<'a> {
    #[serde(default, borrow)]
    pub delta: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub finish_reason: Option<&'a RawValue>,
}

/// What one stream event adds; its tool call pieces are read one at a time.
#[derive(Deserialize)]
pub(crate) struct Delta<'a> {
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default, borrow)]
    pub tool_calls: Option<&'a RawValue>,
}

/// One piece of a streamed tool call; its function is read with [`parse`], as an object.
#[derive(Deserialize)]
pub(crate) struct Piece<'a> {
    #[serde(default)]
    pub index: Option<u64>,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default, borrow)]
    pub function: Option<&'a RawValue>,
}

/// The function part of a streamed tool call piece.
#[derive(Deserialize)]
pub(crate) struct PieceFunction<'a> {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default, borrow)]
    pub arguments: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct IndexOnly {
    #[serde(default)]
    index: Option<u64>,
}

/// The deepest nesting of arrays and objects loopd reads in an answer or a stream event, as
/// deep as serde_json goes when it builds a value; no chat completion comes near it.
pub(crate) const MAX_DEPTH: usize = 128;

/// Refuses `text` (an answer or a stream event, named `what`) unless it is a JSON object nested
/// at most [`MAX_DEPTH`] levels. serde_json skips unknown fields, and takes raw values, at any
/// depth without a word, so an answer nested 100,000 levels deep would otherwise read as one
/// that says nothing. One pass over the bytes, strings skipped.
pub(crate) fn check_shape(what: &str, text: &str) -> Result<(), LlamaError> {
    let bytes = text.as_bytes();
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(LlamaError::Malformed(format!(
            "{what} is not a JSON object: {:?}",
            excerpt(text)
        )));
    }
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &byte in bytes {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(LlamaError::Malformed(format!(
                        "{what} is nested deeper than {MAX_DEPTH} levels"
                    )));
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// A member that must be a string when present (`finish_reason`): its text, `None` for `null`,
/// and an error naming `what` for any other JSON.
pub(crate) fn optional_string(
    what: &str,
    raw: Option<&RawValue>,
) -> Result<Option<String>, LlamaError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    serde_json::from_str::<Option<String>>(raw.get()).map_err(|_| {
        LlamaError::Malformed(format!(
            "{what} must be a string or null, not {:?}",
            excerpt(raw.get())
        ))
    })
}

/// Reads the JSON object `text` as `T`, or says what is wrong with `what`. Only an object is
/// read: serde would also read a struct from an array, by position, so `"delta": []` would
/// pass for a delta that says nothing.
pub(crate) fn parse<'a, T: Deserialize<'a>>(what: &str, text: &'a str) -> Result<T, LlamaError> {
    if text.trim_start().as_bytes().first() != Some(&b'{') {
        return Err(LlamaError::Malformed(format!(
            "{what} is not a JSON object: {:?}",
            excerpt(text)
        )));
    }
    serde_json::from_str(text).map_err(|e| LlamaError::Malformed(format!("{what}: {e}")))
}

/// Calls `f` with the position and raw text of each element of the JSON array `raw`, one at a
/// time, without collecting them.
pub(crate) fn for_each_element<'a>(
    raw: &'a RawValue,
    mut f: impl FnMut(usize, &'a RawValue) -> Result<(), LlamaError>,
) -> Result<(), LlamaError> {
    struct Each<'f, F> {
        f: &'f mut F,
        failure: &'f mut Option<LlamaError>,
    }
    impl<'de, F: FnMut(usize, &'de RawValue) -> Result<(), LlamaError>> Visitor<'de> for Each<'_, F> {
        type Value = ();
        fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
            formatter.write_str("a JSON array")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            let mut position = 0usize;
            while let Some(element) = seq.next_element::<&'de RawValue>()? {
                if let Err(error) = (self.f)(position, element) {
                    *self.failure = Some(error);
                    return Err(de::Error::custom("stopped"));
                }
                position += 1;
            }
            Ok(())
        }
    }
    let mut failure = None;
    let mut deserializer = serde_json::Deserializer::from_str(raw.get());
    let walked = deserializer.deserialize_seq(Each {
        f: &mut f,
        failure: &mut failure,
    });
    if let Some(error) = failure {
        return Err(error);
    }
    walked.map_err(|e| LlamaError::Malformed(format!("expected an array: {e}")))
}

/// The choice whose `index` is 0 (a choice without `index` counts by its position), if any.
pub(crate) fn choice_zero(choices: &RawValue) -> Result<Option<&RawValue>, LlamaError> {
    let mut found = None;
    for_each_element(choices, |position, choice| {
        if found.is_none() {
            let index = parse::<IndexOnly>("choices", choice.get())?.index;
            if index.unwrap_or(position as u64) == 0 {
                found = Some(choice);
            }
        }
        Ok(())
    })?;
    Ok(found)
}

/// A JSON string's text; `None` for `null` or anything else.
pub(crate) fn string_of(raw: &RawValue) -> Option<String> {
    serde_json::from_str::<String>(raw.get()).ok()
}

/// Arguments as the model sent them: a JSON string's text, `""` for `null`, and any other JSON
/// value as its own text.
pub(crate) fn arguments_text(raw: &RawValue) -> Result<String, serde_json::Error> {
    let text = raw.get().trim();
    match text.as_bytes().first() {
        Some(b'"') => serde_json::from_str::<String>(text),
        _ if text == "null" => Ok(String::new()),
        _ => Ok(text.to_string()),
    }
}

/// The server's `error` member as an error: its `message` when it has one, else its JSON.
pub(crate) fn server_error(raw: &RawValue) -> LlamaError {
    #[derive(Deserialize)]
    struct WithMessage {
        message: String,
    }
    let message = serde_json::from_str::<WithMessage>(raw.get())
        .map(|e| e.message)
        .ok()
        .or_else(|| string_of(raw))
        .unwrap_or_else(|| raw.get().to_string());
    LlamaError::Server(excerpt(&message))
}

/// The first 200 characters of `text`, for error messages.
pub(crate) fn excerpt(text: &str) -> String {
    text.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_string()).unwrap()
    }

    #[test]
    fn choice_zero_is_found_by_index_not_by_position() {
        let choices = raw(r#"[{"index":1,"x":"one"},{"index":0,"x":"zero"}]"#);
        let found = choice_zero(&choices).unwrap().unwrap();
        assert_eq!(found.get(), r#"{"index":0,"x":"zero"}"#);
        let choices = raw(r#"[{"x":"first"},{"x":"second"}]"#);
        assert_eq!(
            choice_zero(&choices).unwrap().unwrap().get(),
            r#"{"x":"first"}"#
        );
        assert!(choice_zero(&raw(r#"[{"index":3}]"#)).unwrap().is_none());
    }

    #[test]
    fn an_error_in_the_callback_stops_the_walk_and_is_returned_as_it_is() {
        let mut seen = 0;
        let result = for_each_element(&raw("[1,2,3]"), |_, _| {
            seen += 1;
            Err(LlamaError::Server("stop".into()))
        });
        assert_eq!(result, Err(LlamaError::Server("stop".into())));
        assert_eq!(seen, 1);
        let error = for_each_element(&raw("{}"), |_, _| Ok(())).unwrap_err();
        assert!(
            matches!(&error, LlamaError::Malformed(m) if m.starts_with("expected an array")),
            "{error:?}"
        );
    }

    #[test]
    fn only_json_objects_within_the_depth_limit_pass_the_shape_check() {
        let nested = |depth: usize| {
            format!(
                r#"{{"a":{}"x\"[[["{}}}"#,
                "[".repeat(depth - 1),
                "]".repeat(depth - 1)
            )
        };
        assert_eq!(check_shape("it", &nested(MAX_DEPTH)), Ok(()));
        let deep = check_shape("it", &nested(MAX_DEPTH + 1)).unwrap_err();
        assert_eq!(
            deep.to_string(),
            "the model server's answer is not a chat completion: it is nested deeper than 128 levels"
        );
        assert!(check_shape("it", &nested(100_000)).is_err());
        // Brackets inside strings, escaped quotes included, do not count.
        let text = format!(r#"{{"a":"{}\"{}"}}"#, "[".repeat(500), "{".repeat(500));
        assert_eq!(check_shape("it", &text), Ok(()));
        for not_object in ["[]", "5", "\"x\"", "null", "", "hello"] {
            let error = check_shape("it", not_object).unwrap_err().to_string();
            assert!(error.contains("it is not a JSON object"), "{error}");
        }
    }

    #[test]
    fn a_finish_reason_of_another_type_is_an_error_not_nothing() {
        assert_eq!(optional_string("f", None), Ok(None));
        assert_eq!(optional_string("f", Some(&raw("null"))), Ok(None));
        assert_eq!(
            optional_string("f", Some(&raw(r#""stop""#))),
            Ok(Some("stop".into()))
        );
        for other in ["5", "{}", "[\"stop\"]", "true"] {
            let error = optional_string("f", Some(&raw(other))).unwrap_err();
            assert!(
                error.to_string().contains("f must be a string or null"),
                "{error}"
            );
        }
    }

    #[test]
    fn arguments_keep_their_text_and_strings_are_decoded() {
        assert_eq!(
            arguments_text(&raw(r#""{\"a\":1}""#)).unwrap(),
            r#"{"a":1}"#
        );
        assert_eq!(arguments_text(&raw(r#"{"a": 1}"#)).unwrap(), r#"{"a": 1}"#);
        assert_eq!(arguments_text(&raw("null")).unwrap(), "");
    }

    #[test]
    fn a_server_error_is_its_message_cut_to_an_excerpt() {
        let long = "x".repeat(10_000);
        let error = server_error(&raw(&format!(r#"{{"message":"{long}"}}"#)));
        assert_eq!(error, LlamaError::Server("x".repeat(200)));
        assert_eq!(
            server_error(&raw(r#""plain""#)),
            LlamaError::Server("plain".into())
        );
        assert_eq!(
            server_error(&raw(r#"{"code":5}"#)),
            LlamaError::Server(r#"{"code":5}"#.into())
        );
    }
}
