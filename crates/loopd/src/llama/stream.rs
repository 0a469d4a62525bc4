//! Turning a chat completion (whole, or streamed as Server-Sent Events) into a [`Reply`].
//!
//! Memory stays bounded by what arrived: the stream is read a line at a time from a reader that
//! stops after the limit (so a line that never ends is cut there, compressed or not), only
//! choice 0 is read, a tool call exists only once a piece gave it an id, a name or arguments,
//! and calls past `keep` are only counted (their indexes, 8 bytes each).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read};

use super::wire::{
    Delta, Envelope, Piece, PieceFunction, StreamChoice, WholeChoice, WholeMessage, arguments_text,
    check_shape, choice_zero, excerpt, for_each_element, optional_string, parse, server_error,
};
use super::{LlamaError, Reply, ToolCall};

/// Reads a whole (non-streamed) chat completion body, keeping at most `keep` tool calls.
pub(crate) fn parse_completion(body: &str, keep: usize) -> Result<Reply, LlamaError> {
    check_shape("the answer", body)?;
    let envelope: Envelope<'_> = serde_json::from_str(body)
        .map_err(|e| LlamaError::Malformed(format!("{e}; body starts {:?}", excerpt(body))))?;
    if let Some(error) = envelope.error {
        return Err(server_error(error));
    }
    let choice = match envelope.choices {
        Some(choices) => choice_zero(choices)?,
        None => None,
    }
    .ok_or_else(|| LlamaError::Malformed("no choices[0] in the answer".to_string()))?;
    let choice: WholeChoice<'_> = parse("choices[0]", choice.get())?;
    let message = choice
        .message
        .ok_or_else(|| LlamaError::Malformed("choices[0] has no message".to_string()))?;
    let message: WholeMessage<'_> = parse("choices[0].message", message.get())?;
    let mut tool_calls = Vec::new();
    let mut calls_left_out = 0usize;
    if let Some(calls) = message.tool_calls {
        for_each_element(calls, |_, call| {
            if tool_calls.len() < keep {
                tool_calls.push(parse::<ToolCall>("message.tool_calls", call.get())?);
            } else {
                calls_left_out += 1;
            }
            Ok(())
        })?;
    }
    read_something(Reply {
        content: message.content.unwrap_or_default(),
        tool_calls,
        finish_reason: optional_string("choices[0].finish_reason", choice.finish_reason)?,
        calls_left_out,
    })
}

/// `reply`, unless nothing in it could be read: no text, no tool call and no `finish_reason`
/// is an answer made of parts loopd could not read (or of none), never an empty answer to
/// store. An empty text the server closed with a `finish_reason` is the model's own.
fn read_something(reply: Reply) -> Result<Reply, LlamaError> {
    if reply.content.is_empty()
        && reply.tool_calls.is_empty()
        && reply.calls_left_out == 0
        && reply.finish_reason.is_none()
    {
        return Err(LlamaError::Malformed(
            "it has no text, no tool call and no finish_reason: nothing in it could be read"
                .to_string(),
        ));
    }
    Ok(reply)
}

/// Reads a streamed chat completion, calling `on_text` with each piece of content and keeping
/// at most `keep` tool calls. At most `limit` bytes are read, counted before they are buffered.
/// A stream that ends without `data: [DONE]` and without a `finish_reason` was cut off: an
/// error, not an answer.
pub(crate) fn read_stream(
    reader: impl Read,
    limit: usize,
    keep: usize,
    on_text: &mut dyn FnMut(&str),
) -> Result<Reply, StreamError> {
    let mut reader = BufReader::new(reader.take(limit as u64 + 1));
    let mut assembly = Assembly::new(keep);
    let mut line = Vec::new();
    let mut read = 0usize;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(StreamError::Io)?;
        if n == 0 {
            break;
        }
        read += n;
        if read > limit {
            return Err(malformed(format!(
                "the streamed answer is longer than {limit} bytes"
            )));
        }
        let text = std::str::from_utf8(&line)
            .map_err(|e| malformed(format!("the stream is not UTF-8 text ({e})")))?;
        let Some(data) = text.strip_prefix("data:") else {
            continue;
        };
        let data = data.trim();
        if data == "[DONE]" {
            return assembly.finish().map_err(StreamError::Llama);
        }
        assembly.add(data, on_text).map_err(StreamError::Llama)?;
    }
    if assembly.events == 0 {
        return Err(malformed(
            "the stream ended without any data event".to_string(),
        ));
    }
    if assembly.finish_reason.is_none() {
        return Err(malformed(
            "the stream was cut off: it ended without a finish_reason and without data: [DONE]"
                .to_string(),
        ));
    }
    assembly.finish().map_err(StreamError::Llama)
}

fn malformed(text: String) -> StreamError {
    StreamError::Llama(LlamaError::Malformed(text))
}

/// A stream failed to read (the caller maps I/O errors, e.g. a timeout) or was not valid.
#[derive(Debug)]
pub(crate) enum StreamError {
    Io(std::io::Error),
    Llama(LlamaError),
}

/// Pieces of a streamed answer, put together.
struct Assembly {
    content: String,
    /// The calls kept, by their `index`.
    calls: BTreeMap<u64, ToolCall>,
    /// The indexes of calls past `keep`.
    left_out: BTreeSet<u64>,
    /// The index the next new call must have: one past the highest so far.
    next_index: u64,
    keep: usize,
    finish_reason: Option<String>,
    events: usize,
}

impl Assembly {
    fn new(keep: usize) -> Assembly {
        Assembly {
            content: String::new(),
            calls: BTreeMap::new(),
            left_out: BTreeSet::new(),
            next_index: 0,
            keep,
            finish_reason: None,
            events: 0,
        }
    }

    fn add(&mut self, data: &str, on_text: &mut dyn FnMut(&str)) -> Result<(), LlamaError> {
        check_shape("a stream event", data)?;
        let envelope: Envelope<'_> = serde_json::from_str(data).map_err(|e| {
            LlamaError::Malformed(format!(
                "stream event is not JSON ({e}): {:?}",
                excerpt(data)
            ))
        })?;
        if let Some(error) = envelope.error {
            return Err(server_error(error));
        }
        self.events += 1;
        // Usage-only and keep-alive events carry no choice; other choices are not read.
        let Some(choice) = envelope.choices.map(choice_zero).transpose()?.flatten() else {
            return Ok(());
        };
        let choice: StreamChoice<'_> = parse("stream event choices[0]", choice.get())?;
        if let Some(reason) = optional_string(
            "stream event choices[0].finish_reason",
            choice.finish_reason,
        )? {
            self.finish_reason = Some(reason);
        }
        let Some(delta) = choice.delta else {
            return Ok(());
        };
        let Delta {
            content,
            tool_calls,
        } = parse("stream event choices[0].delta", delta.get())?;
        if let Some(text) = content
            && !text.is_empty()
        {
            self.content.push_str(&text);
            on_text(&text);
        }
        if let Some(pieces) = tool_calls {
            for_each_element(pieces, |position, piece| {
                self.add_call_piece(position, parse("delta.tool_calls", piece.get())?)
            })?;
        }
        Ok(())
    }

    fn add_call_piece(&mut self, position: usize, piece: Piece<'_>) -> Result<(), LlamaError> {
        let index = piece.index.unwrap_or(position as u64);
        // Calls are numbered from 0 as they begin: a piece further on cannot be read as any.
        if index > self.next_index {
            return Err(LlamaError::Malformed(format!(
                "a tool call piece has index {index}, past the next call's index {}",
                self.next_index
            )));
        }
        self.next_index = self.next_index.max(index.saturating_add(1));
        let id = piece.id.filter(|id| !id.is_empty());
        let (name, arguments) = match piece.function {
            Some(function) => {
                let function: PieceFunction<'_> =
                    parse("delta.tool_calls[].function", function.get())?;
                let arguments = match function.arguments {
                    Some(raw) => arguments_text(raw).map_err(|e| {
                        LlamaError::Malformed(format!("tool call {index} arguments: {e}"))
                    })?,
                    None => String::new(),
                };
                (function.name.filter(|n| !n.is_empty()), arguments)
            }
            None => (None, String::new()),
        };
        if id.is_none() && name.is_none() && arguments.is_empty() {
            return Ok(()); // a piece that adds nothing makes no call
        }
        if !self.calls.contains_key(&index) && self.calls.len() >= self.keep {
            self.left_out.insert(index);
            return Ok(());
        }
        let call = self.calls.entry(index).or_default();
        if let Some(id) = id {
            call.id = id;
        }
        // OpenAI sends the name once; llama-cpp-python repeats it whole in every piece.
        if let Some(name) = name
            && call.name != name
        {
            call.name.push_str(&name);
        }
        call.arguments.push_str(&arguments);
        Ok(())
    }

    fn finish(self) -> Result<Reply, LlamaError> {
        if let Some((index, _)) = self.calls.iter().find(|(_, c)| c.name.is_empty()) {
            return Err(LlamaError::Malformed(format!(
                "streamed tool call {index} has no name"
            )));
        }
        read_something(Reply {
            content: self.content,
            tool_calls: self.calls.into_values().collect(),
            finish_reason: self.finish_reason,
            calls_left_out: self.left_out.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(text: &str) -> Result<Reply, String> {
        let mut seen = String::new();
        let reply = read_stream(text.as_bytes(), 1 << 20, usize::MAX, &mut |t| {
            seen.push_str(t)
        })
        .map_err(|e| match e {
            StreamError::Io(e) => e.to_string(),
            StreamError::Llama(e) => e.to_string(),
        })?;
        assert_eq!(seen, reply.content);
        Ok(reply)
    }

    #[test]
    fn streamed_text_pieces_are_joined_and_passed_on() {
        let reply = stream(
            "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"}}]}\n\n\
             data: {\"choices\":[{\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n\
             data: [DONE]\n",
        );
        assert_eq!(
            reply,
            Ok(Reply {
                content: "Hello".into(),
                tool_calls: vec![],
                finish_reason: Some("stop".into()),
                calls_left_out: 0
            })
        );
    }

    #[test]
    fn streamed_tool_calls_are_assembled_by_index() {
        let reply = stream(
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"echo\",\"arguments\":\"{\\\"te\"}}]}}]}\n\
             data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"xt\\\":1}\"}}]}}]}\n\
             data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"b\",\"function\":{\"name\":\"clock\",\"arguments\":\"\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\
             data: [DONE]\n",
        )
        .unwrap();
        assert_eq!(reply.tool_calls.len(), 2);
        assert_eq!(reply.tool_calls[0].arguments, "{\"text\":1}");
        assert_eq!(reply.tool_calls[1].name, "clock");
    }

    #[test]
    fn a_name_repeated_in_every_piece_is_kept_once() {
        let piece = |args: &str| {
            format!(
                "data: {{\"choices\":[{{\"delta\":{{\"tool_calls\":[{{\"index\":0,\"id\":\"x\",\"function\":{{\"name\":\"find_tool\",\"arguments\":{args:?}}}}}]}}}}]}}\n"
            )
        };
        let text = format!(
            "{}{}{}data: [DONE]\n",
            piece("{"),
            piece("\"query\": \"a\""),
            piece("}")
        );
        let reply = stream(&text).unwrap();
        assert_eq!(reply.tool_calls[0].name, "find_tool");
        assert_eq!(reply.tool_calls[0].arguments, "{\"query\": \"a\"}");
    }

    #[test]
    fn an_error_event_in_a_stream_is_the_servers_error() {
        let reply = stream("data: {\"error\":{\"message\":\"context too long\"}}\n");
        assert_eq!(
            reply,
            Err("the model server reported an error: context too long".to_string())
        );
    }

    #[test]
    fn a_stream_with_no_events_is_malformed() {
        assert!(stream("hello\n").is_err_and(|e| e.contains("without any data event")));
    }

    #[test]
    fn a_whole_completion_with_null_content_is_read_as_empty_text() {
        let reply = parse_completion(
            r#"{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"clock","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#,
            usize::MAX,
        )
        .unwrap();
        assert_eq!(reply.content, "");
        assert_eq!(reply.tool_calls[0].name, "clock");
    }

    #[test]
    fn a_body_that_is_not_a_completion_says_what_is_missing() {
        assert!(parse_completion("{}", 9).is_err_and(|e| e.to_string().contains("no choices[0]")));
        assert!(parse_completion("<html>", 9).is_err_and(|e| e.to_string().contains("<html>")));
    }

    fn event(choices: &str) -> String {
        format!("data: {{\"choices\":{choices}}}\n\n")
    }

    #[test]
    fn a_stream_cut_off_before_finish_reason_and_done_is_an_error_not_an_answer() {
        let text = event(r#"[{"index":0,"delta":{"content":"Half an ans"}}]"#);
        let error = stream(&text).unwrap_err();
        assert!(error.contains("cut off"), "{error}");
        let finished = format!(
            "{text}{}",
            event(r#"[{"index":0,"delta":{},"finish_reason":"stop"}]"#)
        );
        assert_eq!(stream(&finished).unwrap().content, "Half an ans");
    }

    #[test]
    fn only_the_choice_with_index_0_is_read_in_streams_and_whole_answers() {
        let text = format!(
            "{}{}{}data: [DONE]\n",
            event(
                r#"[{"index":1,"delta":{"content":"NOT"}},{"index":0,"delta":{"content":"yes"}}]"#
            ),
            event(
                r#"[{"index":1,"delta":{"tool_calls":[{"index":0,"id":"x","function":{"name":"shell","arguments":"{}"}}]}}]"#
            ),
            event(r#"[{"index":0,"delta":{},"finish_reason":"stop"}]"#),
        );
        let reply = stream(&text).unwrap();
        assert_eq!(reply.content, "yes");
        assert!(reply.tool_calls.is_empty());
        let whole = parse_completion(
            r#"{"choices":[{"index":1,"message":{"content":"NOT"}},{"index":0,"message":{"content":"yes"},"finish_reason":"stop"}]}"#,
            9,
        )
        .unwrap();
        assert_eq!(
            (whole.content.as_str(), whole.finish_reason.as_deref()),
            ("yes", Some("stop"))
        );
    }

    #[test]
    fn a_piece_whose_index_jumps_ahead_is_an_error_even_when_it_adds_nothing() {
        for pieces in [
            // Pieces that add nothing, 64 apart.
            (0..1000)
                .map(|n| format!(r#"{{"index":{}}}"#, n * 64))
                .collect::<Vec<_>>(),
            // A whole call far ahead.
            vec![r#"{"index":9999999,"id":"a","function":{"name":"clock"}}"#.to_string()],
            // A second call that skips one.
            vec![
                r#"{"index":0,"id":"a","function":{"name":"clock"}}"#.to_string(),
                r#"{"index":2,"id":"b","function":{"name":"clock"}}"#.to_string(),
            ],
        ] {
            let text = format!(
                "{}{}data: [DONE]\n",
                event(&format!(
                    r#"[{{"delta":{{"tool_calls":[{}]}}}}]"#,
                    pieces.join(",")
                )),
                event(r#"[{"delta":{},"finish_reason":"tool_calls"}]"#),
            );
            let error = stream(&text).unwrap_err();
            assert!(error.contains("past the next call's index"), "{error}");
        }
        // Pieces of calls already begun, in any order, and pieces that add nothing, are fine.
        let text = format!(
            "{}{}data: [DONE]\n",
            event(
                r#"[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"clock"}},{"index":1},{"index":1,"id":"b","function":{"name":"echo"}},{"index":0,"function":{"arguments":"{}"}}]}}]"#
            ),
            event(r#"[{"delta":{},"finish_reason":"tool_calls"}]"#),
        );
        let reply = stream(&text).unwrap();
        let names: Vec<&str> = reply.tool_calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["clock", "echo"]);
    }

    #[test]
    fn an_answer_with_nothing_readable_is_an_error_streamed_or_whole() {
        let deep = format!(r#"{{"x":{}1{}}}"#, "[".repeat(100_000), "]".repeat(100_000));
        let events = [
            deep.clone(),
            "{}".to_string(),
            r#"{"choices":[]}"#.to_string(),
            r#"{"choices":[{"index":3,"delta":{"content":"other"},"finish_reason":"stop"}]}"#
                .to_string(),
            r#"{"choices":[{"delta":{}}]}"#.to_string(),
        ];
        for data in &events {
            let error = stream(&format!("data: {data}\n\ndata: [DONE]\n")).unwrap_err();
            assert!(
                error.contains("nested deeper") || error.contains("nothing in it could be read"),
                "{error}"
            );
        }
        for body in [
            deep.as_str(),
            r#"{"choices":[{"message":{}}]}"#,
            r#"{"choices":[{"message":{"content":null,"tool_calls":[]}}]}"#,
        ] {
            let error = parse_completion(body, 9).unwrap_err().to_string();
            assert!(
                error.contains("nested deeper") || error.contains("nothing in it could be read"),
                "{error}"
            );
        }
        // Said empty, with a finish_reason: the model's own empty answer.
        let empty = stream(
            "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n",
        );
        assert_eq!(empty.map(|r| r.content), Ok(String::new()));
    }

    #[test]
    fn parts_of_the_wrong_type_are_errors_streamed_or_whole() {
        for choice in [
            r#"{"delta":{"content":"a"},"finish_reason":5}"#,
            r#"{"delta":{"content":7},"finish_reason":"stop"}"#,
            r#"{"delta":"text","finish_reason":"stop"}"#,
            r#"{"delta":{"tool_calls":{"index":0}},"finish_reason":"stop"}"#,
            r#"{"delta":{"tool_calls":[{"index":"0","id":"a","function":{"name":"x"}}]}}"#,
            r#"{"delta":{"tool_calls":[{"index":-1}]}}"#,
            r#"{"delta":{"tool_calls":[{"index":0,"function":{"name":["x"]}}]}}"#,
            // Arrays where objects belong (serde reads a struct from an array by position).
            r#"{"delta":[],"finish_reason":"stop"}"#,
            r#"{"delta":["text"],"finish_reason":"stop"}"#,
            r#"{"delta":{"tool_calls":[["a",{"name":"x"}]]},"finish_reason":"stop"}"#,
            r#"{"delta":{"tool_calls":[{"index":0,"id":"a","function":["x","{}"]}]}}"#,
        ] {
            let text = format!("{}data: [DONE]\n", event(&format!("[{choice}]")));
            assert!(stream(&text).is_err(), "{choice}");
        }
        for event in ["not json", "[1,2]", "5", "{\"choices\":", "\"text\""] {
            let error = stream(&format!("data: {event}\n\ndata: [DONE]\n")).unwrap_err();
            assert!(
                error.contains("not JSON") || error.contains("not a JSON object"),
                "{error}"
            );
        }
        for body in [
            r#"{"choices":[{"message":{"content":"a"},"finish_reason":["stop"]}]}"#,
            r#"{"choices":[{"message":{"content":{"text":"a"}},"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"message":{"tool_calls":[{"id":"a","function":{}}]}}]}"#,
            r#"{"choices":[{"message":[""],"finish_reason":"stop"}]}"#,
            r#"{"choices":[[{"content":"a"},"stop"]]}"#,
            r#"{"choices":[{"message":{"tool_calls":[["a",{"name":"x"}]]},"finish_reason":"stop"}]}"#,
            "[]",
        ] {
            assert!(parse_completion(body, 9).is_err(), "{body}");
        }
    }

    #[test]
    fn calls_past_keep_are_counted_not_kept() {
        let calls: Vec<String> = (0..50)
            .map(|n| format!(r#"{{"index":{n},"id":"c{n}","function":{{"name":"clock","arguments":"{{}}"}}}}"#))
            .collect();
        let mut text = event(&format!(
            r#"[{{"delta":{{"tool_calls":[{}]}}}}]"#,
            calls.join(",")
        ));
        // More pieces for calls already left out do not count them twice.
        text.push_str(&event(
            r#"[{"delta":{"tool_calls":[{"index":49,"function":{"arguments":"x"}}]}}]"#,
        ));
        text.push_str("data: [DONE]\n");
        let mut seen = String::new();
        let reply = read_stream(text.as_bytes(), 1 << 20, 3, &mut |t| seen.push_str(t)).unwrap();
        let ids: Vec<&str> = reply.tool_calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["c0", "c1", "c2"]);
        assert_eq!(reply.calls_left_out, 47);
        let whole = format!(
            r#"{{"choices":[{{"message":{{"content":"","tool_calls":[{}]}}}}]}}"#,
            calls
                .iter()
                .map(|c| c.replace(r#""index":"#, r#""n":"#))
                .collect::<Vec<_>>()
                .join(",")
        );
        let reply = parse_completion(&whole, 3).unwrap();
        assert_eq!((reply.tool_calls.len(), reply.calls_left_out), (3, 47));
    }

    #[test]
    fn a_line_that_never_ends_is_cut_at_the_limit() {
        let endless = std::io::repeat(b'a');
        let error = read_stream(endless, 1000, 9, &mut |_| {}).unwrap_err();
        assert!(
            matches!(&error, StreamError::Llama(LlamaError::Malformed(m)) if m.contains("longer than 1000 bytes")),
            "{error:?}"
        );
    }
}
