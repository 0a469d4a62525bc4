//! What a run gave ([`Outcome`]), as the broker renders it, and as one JSON object on the
//! worker's standard output: [`answer`] writes it in the box, [`outcome`] reads it back.

use proto::DenyReason;
use serde_json::{Map, Value, json};

use crate::files::{FileOutcome, FileRunError};

/// What a run gave, before rendering.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The tool ran: its metadata (the header's fields) and its body.
    Ran {
        /// The header fields.
        fields: Map<String, Value>,
        /// The body text.
        body: String,
    },
    /// The tool failed; the message may carry bytes from outside (a command's output).
    Failed(String),
    /// The tool could not run for a reason the decision could not see (an address that
    /// resolved to a private one).
    Denied(DenyReason, String),
}

/// The header field that carries the SHA-256 of the content a file tool saw (read before
/// write); the broker takes it out before the result is shown.
pub const SEEN_FIELD: &str = "seen_sha256";

fn fields(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The outcome of a file call: its result's header fields and body, a read before write
/// refusal as that denial, or the failure's sentence.
pub fn file_outcome(result: Result<FileOutcome, FileRunError>) -> Outcome {
    match result {
        Ok(FileOutcome::Read(read)) => {
            let mut header = json!({
                "path": read.path, "size": read.size, "truncated": read.truncated,
            });
            // Which lines came back, and where to read on: a window is never taken for the file.
            if let Some(lines) = read.lines() {
                header["lines"] = json!(lines);
            }
            if let Some(next) = read.next_offset() {
                header["next_offset"] = json!(next);
            }
            if read.binary {
                header["binary"] = json!(true);
            }
            header[SEEN_FIELD] = json!(read.sha256);
            Outcome::Ran {
                fields: fields(header),
                body: read.content,
            }
        }
        Ok(FileOutcome::Edited(edited)) => Outcome::Ran {
            fields: fields(json!({
                "path": edited.path, "edits_applied": edited.edits_applied,
                "replacements": edited.replacements, "original_bytes": edited.original_bytes,
                "new_bytes": edited.new_bytes, "created": edited.created,
                SEEN_FIELD: edited.sha256,
            })),
            body: edited.diff,
        },
        Ok(FileOutcome::Listed(listed)) => Outcome::Ran {
            fields: fields(json!({
                "path": listed.path, "entries": listed.entries.len(), "truncated": listed.truncated,
            })),
            body: listed
                .entries
                .iter()
                .map(|e| match (e.is_dir, e.symlink) {
                    (true, _) => format!("{}/", e.path),
                    (_, true) => format!("{} (symbolic link)", e.path),
                    _ => format!("{} ({} bytes)", e.path, e.size),
                })
                .collect::<Vec<_>>()
                .join("\n"),
        },
        Ok(FileOutcome::Globbed(globbed)) => Outcome::Ran {
            fields: fields(json!({
                "files": globbed.files.len(), "truncated": globbed.truncated,
            })),
            body: globbed.files.join("\n"),
        },
        Ok(FileOutcome::Grepped(grepped)) => Outcome::Ran {
            fields: fields(json!({
                "files": grepped.files, "matches": grepped.matches, "truncated": grepped.truncated,
            })),
            body: grepped.output,
        },
        Ok(FileOutcome::Wrote(wrote)) => Outcome::Ran {
            fields: fields(json!({
                "path": wrote.path, "bytes": wrote.bytes, "created": wrote.created,
                "previous_size": wrote.previous_size,
            })),
            body: wrote.diff,
        },
        Err(error @ FileRunError::File(tools::fs::FileError::Unread { .. })) => {
            Outcome::Denied(DenyReason::ReadBeforeWrite, error.to_string())
        }
        Err(error) => Outcome::Failed(error.to_string()),
    }
}

/// The worker's answer for `outcome`, as [`outcome`] reads it back.
pub fn answer(outcome: Outcome) -> Value {
    match outcome {
        Outcome::Ran { fields, body } => json!({ "fields": fields, "body": body }),
        Outcome::Failed(message) => json!({ "failed": message }),
        Outcome::Denied(reason, message) => json!({ "denied": reason, "detail": message }),
    }
}

/// The outcome the worker printed, or a failure naming what went wrong.
pub fn outcome(stdout: &[u8], stderr: &[u8], exit: Option<sandbox::Exit>) -> Outcome {
    let parsed: Option<Map<String, Value>> = serde_json::from_slice(stdout).ok();
    match parsed {
        Some(mut map) => {
            if let Some(Value::String(message)) = map.remove("failed") {
                return Outcome::Failed(message);
            }
            if let Some(denied) = map.remove("denied") {
                let detail = match map.remove("detail") {
                    Some(Value::String(detail)) => detail,
                    _ => String::new(),
                };
                return match serde_json::from_value::<DenyReason>(denied) {
                    Ok(reason) => Outcome::Denied(reason, detail),
                    Err(e) => Outcome::Failed(format!(
                        "the file tool's box refused with a reason the broker does not know ({e}): {detail}"
                    )),
                };
            }
            let fields = match map.remove("fields") {
                Some(Value::Object(fields)) => fields,
                _ => Map::new(),
            };
            let body = match map.remove("body") {
                Some(Value::String(body)) => body,
                _ => String::new(),
            };
            Outcome::Ran { fields, body }
        }
        None => Outcome::Failed(format!(
            "the tool's box ended ({exit:?}) without an answer: {}",
            String::from_utf8_lossy(stderr).trim()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::{Outcome, answer, file_outcome, outcome};
    use crate::files::FileRunError;
    use proto::DenyReason;

    #[test]
    fn a_write_the_worker_refuses_as_unread_reaches_the_broker_as_a_read_before_write_denial() {
        let refused = file_outcome(Err(FileRunError::File(tools::fs::FileError::Unread {
            path: "/w/a.txt".to_string(),
            why: "changed since this session last read it",
        })));
        let text = answer(refused).to_string();
        let Outcome::Denied(reason, detail) = outcome(text.as_bytes(), b"", None) else {
            panic!("not a denial: {text}")
        };
        assert_eq!(reason, DenyReason::ReadBeforeWrite);
        assert!(detail.contains("/w/a.txt changed since"), "{detail}");
    }

    #[test]
    fn a_result_and_a_failure_cross_the_box_unchanged() {
        let mut fields = serde_json::Map::new();
        fields.insert("files".to_string(), serde_json::json!(2));
        let ran = Outcome::Ran {
            fields,
            body: "a\nb".to_string(),
        };
        let text = answer(ran.clone()).to_string();
        assert_eq!(outcome(text.as_bytes(), b"", None), ran);
        let failed = Outcome::Failed("bad pattern".to_string());
        let text = answer(failed.clone()).to_string();
        assert_eq!(outcome(text.as_bytes(), b"", None), failed);
    }
}
