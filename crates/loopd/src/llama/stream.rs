//! Turning a chat completion (whole, or streamed as Server-Sent Events) into a [`Reply`].

use std::io::BufRead;

use serde_json::Value;

use super::{LlamaError, Reply, ToolCall};

/// Reads a whole (non-streamed) chat completion body.
pub(crate) fn parse_completion(body: &str) -> Result<Reply, LlamaError> {
    let value: Value = serde_json::from_str(body)
        .map_err(|e| LlamaError::Malformed(format!("{e}; body starts {:?}", excerpt(body))))?;
    server_error(&value)?;
    let choice = first_choice(&value)?;
    let message = choice
        .get("message")
        .ok_or_else(|| LlamaError::Malformed("choices[0] has no message".to_string()))?;
    let content = match message.get("content") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(other) => {
            return Err(LlamaError::Malformed(format!(
                "message.content is not a string: {other}"
            )));
        }
    };
    let tool_calls = match message.get("tool_calls") {
        None | Some(Value::Null) => Vec::new(),
        Some(calls) => serde_json::from_value::<Vec<ToolCall>>(calls.clone())
            .map_err(|e| LlamaError::Malformed(format!("message.tool_calls: {e}")))?,
    };
    Ok(Reply {
        content,
        tool_calls,
        finish_reason: finish_reason(choice),
    })
}

/// Reads a streamed chat completion, calling `on_text` with each piece of content. At most
/// `limit` bytes are read.
pub(crate) fn read_stream(
    reader: impl BufRead,
    limit: usize,
    on_text: &mut dyn FnMut(&str),
) -> Result<Reply, StreamError> {
    let mut assembly = Assembly::default();
    let mut read = 0usize;
    for line in reader.lines() {
        let line = line.map_err(StreamError::Io)?;
        read += line.len() + 1;
        if read > limit {
            return Err(StreamError::Llama(LlamaError::Malformed(format!(
                "the streamed answer is longer than {limit} bytes"
            ))));
        }
        let Some(data) = line.strip_prefix("data:") else {
            continue;
        };
        let data = data.trim();
        if data == "[DONE]" {
            return assembly.finish().map_err(StreamError::Llama);
        }
        assembly.add(data, on_text).map_err(StreamError::Llama)?;
    }
    if assembly.chunks == 0 {
        return Err(StreamError::Llama(LlamaError::Malformed(
            "the stream ended without any data event".to_string(),
        )));
    }
    assembly.finish().map_err(StreamError::Llama)
}

/// A stream failed to read (the caller maps I/O errors, e.g. a timeout) or was not valid.
#[derive(Debug)]
pub(crate) enum StreamError {
    Io(std::io::Error),
    Llama(LlamaError),
}

/// Pieces of a streamed answer, put together.
#[derive(Default)]
struct Assembly {
    content: String,
    calls: Vec<ToolCall>,
    finish_reason: Option<String>,
    chunks: usize,
}

impl Assembly {
    fn add(&mut self, data: &str, on_text: &mut dyn FnMut(&str)) -> Result<(), LlamaError> {
        let value: Value = serde_json::from_str(data).map_err(|e| {
            LlamaError::Malformed(format!(
                "stream event is not JSON ({e}): {:?}",
                excerpt(data)
            ))
        })?;
        server_error(&value)?;
        self.chunks += 1;
        let Some(choice) = value.get("choices").and_then(|c| c.get(0)) else {
            return Ok(()); // usage-only or keep-alive events carry no choice
        };
        if let Some(reason) = finish_reason(choice) {
            self.finish_reason = Some(reason);
        }
        let Some(delta) = choice.get("delta") else {
            return Ok(());
        };
        if let Some(text) = delta.get("content").and_then(Value::as_str)
            && !text.is_empty()
        {
            self.content.push_str(text);
            on_text(text);
        }
        if let Some(pieces) = delta.get("tool_calls").and_then(Value::as_array) {
            for (position, piece) in pieces.iter().enumerate() {
                self.add_call_piece(position, piece)?;
            }
        }
        Ok(())
    }

    fn add_call_piece(&mut self, position: usize, piece: &Value) -> Result<(), LlamaError> {
        let index = match piece.get("index") {
            Some(index) => index
                .as_u64()
                .and_then(|i| usize::try_from(i).ok())
                .ok_or_else(|| LlamaError::Malformed(format!("tool call index {index}")))?,
            None => position,
        };
        if index > self.calls.len() + 64 {
            return Err(LlamaError::Malformed(format!(
                "tool call index {index} skips ahead"
            )));
        }
        while self.calls.len() <= index {
            self.calls.push(ToolCall {
                id: String::new(),
                name: String::new(),
                arguments: String::new(),
            });
        }
        let Some(call) = self.calls.get_mut(index) else {
            return Ok(());
        };
        if let Some(id) = piece.get("id").and_then(Value::as_str) {
            call.id = id.to_string();
        }
        if let Some(function) = piece.get("function") {
            // OpenAI sends the name once; llama-cpp-python repeats it whole in every piece.
            if let Some(name) = function.get("name").and_then(Value::as_str)
                && call.name != name
            {
                call.name.push_str(name);
            }
            match function.get("arguments") {
                Some(Value::String(text)) => call.arguments.push_str(text),
                Some(Value::Null) | None => {}
                Some(object) => call.arguments.push_str(&object.to_string()),
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<Reply, LlamaError> {
        if let Some(position) = self.calls.iter().position(|c| c.name.is_empty()) {
            return Err(LlamaError::Malformed(format!(
                "streamed tool call {position} has no name"
            )));
        }
        Ok(Reply {
            content: self.content,
            tool_calls: self.calls,
            finish_reason: self.finish_reason,
        })
    }
}

fn first_choice(value: &Value) -> Result<&Value, LlamaError> {
    value
        .get("choices")
        .and_then(|c| c.get(0))
        .ok_or_else(|| LlamaError::Malformed("no choices[0] in the answer".to_string()))
}

fn finish_reason(choice: &Value) -> Option<String> {
    choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn server_error(value: &Value) -> Result<(), LlamaError> {
    match value.get("error") {
        None | Some(Value::Null) => Ok(()),
        Some(error) => {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| error.to_string());
            Err(LlamaError::Server(message))
        }
    }
}

/// The first 200 characters of `text`, for error messages.
pub(crate) fn excerpt(text: &str) -> String {
    text.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(text: &str) -> Result<Reply, String> {
        let mut seen = String::new();
        let reply = read_stream(text.as_bytes(), 1 << 20, &mut |t| seen.push_str(t)).map_err(
            |e| match e {
                StreamError::Io(e) => e.to_string(),
                StreamError::Llama(e) => e.to_string(),
            },
        )?;
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
                finish_reason: Some("stop".into())
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
        )
        .unwrap();
        assert_eq!(reply.content, "");
        assert_eq!(reply.tool_calls[0].name, "clock");
    }

    #[test]
    fn a_body_that_is_not_a_completion_says_what_is_missing() {
        assert!(parse_completion("{}").is_err_and(|e| e.to_string().contains("no choices[0]")));
        assert!(parse_completion("<html>").is_err_and(|e| e.to_string().contains("<html>")));
    }
}
