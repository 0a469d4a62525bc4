//! loopd against a model server that bends the protocol (the issue's causes 7-9): redirects to
//! another host, streams cut off before their end, and choices other than 0.

use std::io::Write;
use std::time::Duration;

use crate::support::raw::{
    RawServer, close_delimited_head, event, sized_response, streamed_answer,
};
use loopd::llama::{LlamaClient, LlamaConfig, LlamaError};
use loopd::session::{Session, SessionIds};
use loopd::tools::{FakeTools, Registry};
use loopd::turn::{Limits, Runtime, TurnError, run_turn};

/// A session in a temporary folder, and a way to run turns against `url`.
struct Talk {
    session: Session,
    client: LlamaClient,
    registry: Registry,
    _dir: tempfile::TempDir,
}

impl Talk {
    fn new(url: &str, stream: bool) -> Talk {
        let dir = testkit::temp_dir();
        let registry = Registry::demo();
        let ids = SessionIds {
            id: "s".into(),
            resume_token: None,
        };
        let session = Session::create(dir.path(), ids, "x", &registry.core_schemas()).unwrap();
        let client = LlamaClient::new(LlamaConfig {
            base_url: url.to_string(),
            stream,
            timeout: Duration::from_secs(20),
            ..LlamaConfig::default()
        });
        Talk {
            session,
            client,
            registry,
            _dir: dir,
        }
    }

    fn turn(&mut self, user: &str) -> Result<String, TurnError> {
        let fake = FakeTools::new();
        let rt = Runtime {
            model: &self.client,
            port: &fake,
            registry: &self.registry,
            limits: Limits::default(),
            children: None,
        };
        run_turn(&rt, &mut self.session, user, &mut |_| {})
    }

    fn roles(&self) -> Vec<String> {
        self.session
            .request(None)
            .messages
            .iter()
            .map(|m| {
                serde_json::from_str::<serde_json::Value>(m.get()).unwrap()["role"].to_string()
            })
            .collect()
    }
}

#[test]
fn a_redirect_is_not_followed_and_the_error_names_its_location() {
    let elsewhere = RawServer::start_on("127.0.0.2", |_, stream| {
        stream.write_all(streamed_answer("the answer from another host").as_bytes())
    });
    let target = format!("http://{}/v1/chat/completions", elsewhere.address());
    for status in [
        "301 Moved Permanently",
        "302 Found",
        "307 Temporary Redirect",
        "308 Permanent Redirect",
    ] {
        let location = target.clone();
        let server = RawServer::start(move |_, stream| {
            write!(
                stream,
                "HTTP/1.1 {status}\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
        });
        let mut talk = Talk::new(&server.base_url(), true);
        let error = talk.turn("hi").unwrap_err();
        assert!(
            matches!(&error, TurnError::Model(LlamaError::Redirect { location, .. }) if *location == target),
            "{status}: {error:?}"
        );
        let text = error.to_string();
        assert!(
            text.contains(&target) && text.contains("follows no redirect"),
            "{text}"
        );
    }
    assert_eq!(
        elsewhere.requests(),
        0,
        "nothing was sent to the other host"
    );
}

#[test]
fn a_stream_cut_off_before_its_end_fails_the_turn_and_stores_no_answer() {
    let server = RawServer::start(|request, stream| {
        if request.number > 0 {
            return stream.write_all(streamed_answer("whole").as_bytes());
        }
        stream.write_all(close_delimited_head("text/event-stream", "").as_bytes())?;
        for piece in ["I will now delete", " nothing"] {
            let chunk = format!(r#"{{"choices":[{{"index":0,"delta":{{"content":"{piece}"}}}}]}}"#);
            stream.write_all(event(&chunk).as_bytes())?;
        }
        Ok(()) // the connection closes: no finish_reason, no [DONE]
    });
    let mut talk = Talk::new(&server.base_url(), true);
    let error = talk.turn("first").unwrap_err().to_string();
    assert!(error.contains("cut off"), "{error}");
    assert_eq!(
        talk.roles(),
        ["\"system\"", "\"user\""],
        "nothing half-read is stored"
    );
    assert_eq!(talk.turn("second").unwrap(), "whole");
    assert_eq!(
        talk.roles(),
        ["\"system\"", "\"user\"", "\"user\"", "\"assistant\""]
    );
}

#[test]
fn deltas_of_a_second_choice_are_not_mixed_into_the_answer() {
    let server = RawServer::start(|request, stream| {
        if request.body.contains("\"stream\":false") {
            let body = r#"{"choices":[{"index":1,"message":{"content":"other"},"finish_reason":"stop"},{"index":0,"message":{"content":"zero"},"finish_reason":"stop"}]}"#;
            return stream.write_all(sized_response("application/json", body).as_bytes());
        }
        let mut body = String::new();
        for (index, text) in [(0, "ze"), (1, "OTHER"), (0, "ro"), (1, "MORE")] {
            body.push_str(&event(&format!(
                r#"{{"choices":[{{"index":{index},"delta":{{"content":"{text}"}}}}]}}"#
            )));
        }
        body.push_str(&event(
            r#"{"choices":[{"index":1,"delta":{"tool_calls":[{"index":0,"id":"x","function":{"name":"shell","arguments":"{}"}}]}}]}"#,
        ));
        body.push_str(&event(
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        ));
        body.push_str("data: [DONE]\n\n");
        stream.write_all(sized_response("text/event-stream", &body).as_bytes())
    });
    for stream in [true, false] {
        let mut talk = Talk::new(&server.base_url(), stream);
        assert_eq!(talk.turn("hi").unwrap(), "zero", "stream: {stream}");
        assert_eq!(talk.roles().len(), 3, "no tool call of choice 1 was taken");
    }
}
