//! Model output loopd cannot read (issue 31's item 9): answers nested too deep, tool call
//! pieces whose `index` jumps ahead, parts of the wrong type, events that are not JSON
//! objects, and answers in which nothing can be read. Each fails the turn with a sentence
//! saying what was wrong, and stores no answer, as a cut-off stream does; never an empty
//! answer with exit status 0.

use std::io::Write;

use crate::cli::{loopd_with, text};
use crate::support::raw::{RawServer, event, session_messages, sized_response};

/// Nested `depth` levels deep inside a member no one reads.
fn deep(depth: usize) -> String {
    format!(
        r#"{{"id":"x","pad":{}1{}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    )
}

/// A stream of `events`, then `[DONE]`.
fn stream_of(events: &[String]) -> String {
    let mut body: String = events.iter().map(|e| event(e)).collect();
    body.push_str("data: [DONE]\n\n");
    sized_response("text/event-stream", &body)
}

const STOP: &str = r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#;

/// Runs one `loopd chat` turn against a server that answers with `response`: its exit code,
/// what it printed, and the roles stored in the session.
fn turn_against(response: String, whole: bool) -> (Option<i32>, String, Vec<String>) {
    let server = RawServer::start(move |_, stream| stream.write_all(response.as_bytes()));
    let dir = testkit::temp_dir();
    let state = dir.path().join("state");
    let url = server.base_url();
    let state_arg = state.display().to_string();
    let mut args = vec![
        "chat",
        "--port",
        "fake",
        "--model",
        &url,
        "--state-dir",
        &state_arg,
        "-m",
        "hi",
    ];
    if whole {
        args.push("--no-stream");
    }
    let output = loopd_with(&args, "", &[]);
    let (out, err) = text(&output);
    let roles = session_messages(&state)
        .iter()
        .map(|m| m["role"].as_str().unwrap_or_default().to_string())
        .collect();
    (output.status.code(), format!("{out}{err}"), roles)
}

#[test]
fn a_streamed_answer_that_cannot_be_read_fails_the_turn_and_stores_no_answer() {
    let jumps: Vec<String> = (0..200)
        .map(|n| format!(r#"{{"index":{}}}"#, n * 64))
        .collect();
    let jumping = format!(
        r#"{{"choices":[{{"index":0,"delta":{{"tool_calls":[{}]}}}}]}}"#,
        jumps.join(",")
    );
    let jumping_apart: Vec<String> = (0..50)
        .map(|n| {
            format!(
                r#"{{"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":{},"function":{{"arguments":""}}}}]}}}}]}}"#,
                n * 64
            )
        })
        .chain([STOP.to_string()])
        .collect();
    let cases: Vec<(&str, Vec<String>, &str)> = vec![
        (
            "an event nested 100,000 levels deep",
            vec![deep(100_000), STOP.to_string()],
            "a stream event is nested deeper than 128 levels",
        ),
        (
            "tool call pieces whose index jumps by 64, in one event",
            vec![jumping, STOP.to_string()],
            "a tool call piece has index 64, past the next call's index 1",
        ),
        (
            "tool call pieces whose index jumps by 64, one an event",
            jumping_apart,
            "a tool call piece has index 64, past the next call's index 1",
        ),
        (
            "a finish_reason that is not a string",
            vec![r#"{"choices":[{"index":0,"delta":{"content":""},"finish_reason":5}]}"#.into()],
            "finish_reason must be a string or null",
        ),
        (
            "text that is not a string",
            vec![
                r#"{"choices":[{"index":0,"delta":{"content":{"a":1}}}]}"#.into(),
                STOP.into(),
            ],
            "invalid type",
        ),
        (
            "tool calls that are not an array",
            vec![
                r#"{"choices":[{"index":0,"delta":{"tool_calls":{"index":0}}}]}"#.into(),
                STOP.into(),
            ],
            "expected an array",
        ),
        (
            "an event that is an array",
            vec!["[]".into()],
            "a stream event is not a JSON object",
        ),
        (
            "a delta that is an array",
            vec![r#"{"choices":[{"index":0,"delta":[],"finish_reason":"stop"}]}"#.into()],
            "stream event choices[0].delta is not a JSON object",
        ),
        (
            "an event that is not JSON",
            vec!["{\"choices\": oops".into(), STOP.into()],
            "stream event is not JSON",
        ),
        (
            "events with no choice 0",
            vec![
                r#"{"choices":[{"index":3,"delta":{"content":"other"},"finish_reason":"stop"}]}"#
                    .into(),
                r#"{"usage":{"total_tokens":5}}"#.into(),
            ],
            "nothing in it could be read",
        ),
    ];
    for (what, events, sentence) in cases {
        let (code, printed, roles) = turn_against(stream_of(&events), false);
        assert_eq!(code, Some(1), "{what}: {printed}");
        assert!(
            printed.contains("! turn failed: the model server's answer is not a chat completion: ")
                && printed.contains(sentence),
            "{what}: {printed}"
        );
        assert_eq!(roles, ["user"], "{what}: no answer is stored");
    }
}

#[test]
fn a_whole_answer_that_cannot_be_read_fails_the_turn_and_stores_no_answer() {
    let stop = r#"{"choices":[{"index":0,"message":{"content":""},"finish_reason":"stop"}],"#;
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "an answer nested 100,000 levels deep",
            format!("{stop}{}", &deep(100_000)[1..]),
            "the answer is nested deeper than 128 levels",
        ),
        (
            "a message with no text, no call and no finish_reason",
            r#"{"choices":[{"index":0,"message":{"content":null,"tool_calls":[]}}]}"#.into(),
            "nothing in it could be read",
        ),
        (
            "a finish_reason that is not a string",
            r#"{"choices":[{"index":0,"message":{"content":""},"finish_reason":{"a":1}}]}"#.into(),
            "finish_reason must be a string or null",
        ),
        (
            "a tool call without a name",
            r#"{"choices":[{"index":0,"message":{"tool_calls":[{"id":"a","function":{}}]},"finish_reason":"tool_calls"}]}"#.into(),
            "missing field `name`",
        ),
        (
            "a message that is an array",
            r#"{"choices":[{"index":0,"message":[],"finish_reason":"stop"}]}"#.into(),
            "choices[0].message is not a JSON object",
        ),
        (
            "an answer that is an array",
            "[{}]".into(),
            "the answer is not a JSON object",
        ),
    ];
    for (what, body, sentence) in cases {
        let response = sized_response("application/json", &body);
        let (code, printed, roles) = turn_against(response, true);
        assert_eq!(code, Some(1), "{what}: {printed}");
        assert!(
            printed.contains("! turn failed: the model server's answer is not a chat completion: ")
                && printed.contains(sentence),
            "{what}: {printed}"
        );
        assert_eq!(roles, ["user"], "{what}: no answer is stored");
    }
}

#[test]
fn an_empty_answer_the_server_closed_with_a_finish_reason_is_still_an_answer() {
    for whole in [false, true] {
        let response = if whole {
            sized_response(
                "application/json",
                r#"{"choices":[{"index":0,"message":{"content":""},"finish_reason":"stop"}]}"#,
            )
        } else {
            stream_of(&[STOP.to_string()])
        };
        let (code, printed, roles) = turn_against(response, whole);
        assert_eq!(code, Some(0), "{printed}");
        assert_eq!(roles, ["user", "assistant"]);
    }
}
