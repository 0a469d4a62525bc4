//! The turn loop over real HTTP on loopback, against the testkit's scripted server (seed M3a/16
//! rule 5, and the issue's list).

use crate::support::{FixedPort, Fixture, tool_messages};
use loopd::llama::LlamaError;
use loopd::tools::{ALREADY_CALLED, FakeTools, Pending, denial_text};
use loopd::turn::{TurnError, TurnEvent};
use proto::{Class, DenyReason, Timestamp, ToolResponse};

const FIND_THEN_CALL: &str = r#"{"turns":[{"replies":[
  {"call":[{"name":"find_tool","arguments":{"query":"echo"}}]},
  {"call":[{"name":"call_tool","arguments":{"name":"echo","arguments":{"text":"hi"}}}]},
  {"say":"It said hi."}]}]}"#;

#[test]
fn a_plain_answer_ends_the_turn_with_its_text() {
    let mut fx = Fixture::new(r#"{"turns":[{"replies":[{"say":"Hello there."}]}]}"#);
    let (result, events) = fx.turn(&FakeTools::new(), "hi");
    assert_eq!(result.unwrap(), "Hello there.");
    assert_eq!(
        events,
        [
            TurnEvent::AssistantText {
                text: "Hello there.".into()
            },
            TurnEvent::TurnDone {
                text: "Hello there.".into()
            }
        ]
    );
}

#[test]
fn a_plain_answer_also_works_without_streaming() {
    let mut fx = Fixture::with(r#"{"turns":[{"replies":[{"say":"Whole."}]}]}"#, |c| {
        c.stream = false
    });
    let (result, _) = fx.turn(&FakeTools::new(), "hi");
    assert_eq!(result.unwrap(), "Whole.");
    assert_eq!(fx.server.request_json()[0]["stream"], false);
}

#[test]
fn find_then_call_goes_through_the_port_with_the_target_tool() {
    let mut fx = Fixture::new(FIND_THEN_CALL);
    let fake = FakeTools::new();
    let (result, events) = fx.turn(&fake, "say hi");
    assert_eq!(result.unwrap(), "It said hi.");
    let calls = fake.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].tool, "echo");
    assert_eq!(calls[0].arguments, r#"{"text":"hi"}"#);
    assert_eq!(calls[0].session, "test-session");
    assert_eq!(calls[0].call_id, 2, "the second tool call of the session");
    let results = tool_messages(&fx.server);
    assert!(results[0].starts_with("1 tool(s) match:\n{\"name\":\"echo\""));
    assert_eq!(results[1], "hi");
    let started: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            TurnEvent::ToolCallStarted { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(started, ["find_tool", "call_tool"]);
    assert!(events.contains(&TurnEvent::ToolResult {
        name: "call_tool".into(),
        content: "hi".into(),
        class: Class::Public,
        untrusted: false,
        truncated: false
    }));
}

#[test]
fn the_assistant_message_with_tool_calls_is_sent_back_with_empty_string_content() {
    let mut fx = Fixture::new(FIND_THEN_CALL);
    let (result, _) = fx.turn(&FakeTools::new(), "say hi");
    assert!(result.is_ok(), "{result:?}");
    let last = fx.server.request_json().pop().unwrap();
    let assistant: Vec<&serde_json::Value> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .collect();
    assert_eq!(assistant.len(), 2);
    for message in assistant {
        assert_eq!(message["content"], "");
        assert!(message["tool_calls"].is_array());
    }
}

#[test]
fn a_denial_becomes_its_sentence_for_the_model_and_an_event_naming_the_target_tool() {
    let mut fx = Fixture::new(
        r#"{"turns":[{"replies":[
        {"call":[{"name":"call_tool","arguments":{"name":"read_file","arguments":{"path":"/etc/passwd"}}}]},
        {"say":"Denied."}]}]}"#,
    );
    let (result, events) = fx.turn(&FakeTools::new(), "read it");
    assert_eq!(result.unwrap(), "Denied.");
    assert!(events.contains(&TurnEvent::ToolDenied {
        name: "read_file".into(),
        reason: DenyReason::NoGrant
    }));
    assert_eq!(
        tool_messages(&fx.server),
        [denial_text(DenyReason::NoGrant)]
    );
    let result_event = events.iter().find_map(|e| match e {
        TurnEvent::ToolResult { name, content, .. } => Some((name.clone(), content.clone())),
        _ => None,
    });
    assert_eq!(
        result_event,
        Some((
            "call_tool".to_string(),
            denial_text(DenyReason::NoGrant).to_string()
        ))
    );
}

#[test]
fn a_pending_approval_is_an_event_and_then_the_final_answer_reaches_the_model() {
    let mut fx = Fixture::new(
        r#"{"turns":[{"replies":[
        {"call":[{"name":"call_tool","arguments":{"name":"shell","arguments":{"command":"ls"}}}]},
        {"say":"Listed."}]}]}"#,
    );
    let expires = Timestamp::parse("2026-12-01T00:00:00Z").unwrap();
    let mut port = FixedPort::new(ToolResponse::Result {
        content: "a.txt\nb.txt".into(),
        class: Class::Private,
        untrusted: true,
        truncated: false,
    });
    port.pending = vec![Pending {
        approval: 7,
        expires,
        answerable: false,
    }];
    let (result, events) = fx.turn(&port, "list");
    assert_eq!(result.unwrap(), "Listed.");
    let pending_at = events
        .iter()
        .position(|e| {
            *e == TurnEvent::ApprovalPending {
                approval: 7,
                tool: "shell".into(),
                expires,
            }
        })
        .unwrap();
    let result_at = events
        .iter()
        .position(|e| {
            matches!(
                e,
                TurnEvent::ToolResult {
                    class: Class::Private,
                    untrusted: true,
                    ..
                }
            )
        })
        .unwrap();
    assert!(pending_at < result_at);
    assert_eq!(tool_messages(&fx.server), ["a.txt\nb.txt"]);
}

#[test]
fn a_failed_tool_is_reported_to_the_model_without_an_event() {
    let mut fx = Fixture::new(
        r#"{"turns":[{"replies":[{"call":[{"name":"shell","arguments":{"command":"x"}}]},{"say":"ok"}]}]}"#,
    );
    let port = FixedPort::new(ToolResponse::Failed {
        message: "no such command".into(),
    });
    let (_, events) = fx.turn(&port, "run");
    assert_eq!(
        tool_messages(&fx.server),
        ["The tool failed: no such command"]
    );
    assert!(!events.iter().any(|e| matches!(
        e,
        TurnEvent::ToolDenied { .. } | TurnEvent::ApprovalPending { .. }
    )));
}

#[test]
fn a_port_that_returns_a_pending_frame_as_final_has_failed() {
    let mut fx = Fixture::new(
        r#"{"turns":[{"replies":[{"call":[{"name":"shell","arguments":{"command":"x"}}]},{"say":"ok"}]}]}"#,
    );
    let port = FixedPort::new(ToolResponse::PendingApproval {
        approval: 1,
        expires: Timestamp::now(),
        answerable: false,
    });
    let (_, events) = fx.turn(&port, "run");
    assert_eq!(
        tool_messages(&fx.server),
        ["The tool failed: the tool broker gave no final answer"]
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, TurnEvent::ApprovalPending { .. }))
    );
}

#[test]
fn a_direct_call_keeps_its_name_in_every_event() {
    let mut fx = Fixture::new(
        r#"{"turns":[{"replies":[{"call":[{"name":"shell","arguments":{"command":"x"}}]},{"say":"ok"}]}]}"#,
    );
    let (_, events) = fx.turn(&FakeTools::new(), "run");
    assert!(events.contains(&TurnEvent::ToolDenied {
        name: "shell".into(),
        reason: DenyReason::NoGrant
    }));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, TurnEvent::ToolCallStarted { name, .. } if name == "shell"))
    );
}

#[test]
fn local_answers_send_no_port_event() {
    let mut fx = Fixture::new(
        r#"{"turns":[{"replies":[{"call":[{"name":"clock"},{"name":"find_tool","arguments":{"query":"x"}}]},{"say":"ok"}]}]}"#,
    );
    let fake = FakeTools::new();
    let (_, events) = fx.turn(&fake, "time?");
    assert!(
        fake.calls().is_empty(),
        "clock and find_tool never reach the port"
    );
    assert!(!events.iter().any(|e| matches!(
        e,
        TurnEvent::ToolDenied { .. } | TurnEvent::ApprovalPending { .. }
    )));
    let results = tool_messages(&fx.server);
    assert!(Timestamp::parse(&results[0]).is_ok(), "{}", results[0]);
}

#[test]
fn the_same_call_twice_in_a_row_is_answered_already_called() {
    let mut fx = Fixture::new(
        r#"{"turns":[{"replies":[
        {"call":[{"name":"call_tool","arguments":{"name":"echo","arguments":{"text":"a"}}}]},
        {"call":[{"name":"call_tool","arguments":{"arguments":{"text":"a"},"name":"echo"}}]},
        {"say":"done"}]}]}"#,
    );
    let fake = FakeTools::new();
    let (_, events) = fx.turn(&fake, "x");
    assert_eq!(fake.calls().len(), 1);
    assert_eq!(tool_messages(&fx.server), ["a", ALREADY_CALLED]);
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, TurnEvent::ToolDenied { .. }))
            .count(),
        0
    );
}

#[test]
fn the_same_call_again_after_another_call_runs_again() {
    let mut fx = Fixture::new(
        r#"{"turns":[{"replies":[
        {"call":[{"name":"call_tool","arguments":{"name":"echo","arguments":{"text":"a"}}},
                 {"name":"clock"},
                 {"name":"call_tool","arguments":{"name":"echo","arguments":{"text":"a"}}}]},
        {"say":"done"}]}]}"#,
    );
    let fake = FakeTools::new();
    fx.turn(&fake, "x").0.unwrap();
    assert_eq!(fake.calls().len(), 2);
    let ids: Vec<u64> = fake.calls().iter().map(|r| r.call_id).collect();
    assert_eq!(ids, [1, 3]);
}

#[test]
fn the_same_call_in_the_next_turn_runs_again() {
    let mut fx = Fixture::new(
        r#"{"turns":[
        {"replies":[{"call":[{"name":"call_tool","arguments":{"name":"echo","arguments":{"text":"a"}}}]},{"say":"1"}]},
        {"replies":[{"call":[{"name":"call_tool","arguments":{"name":"echo","arguments":{"text":"a"}}}]},{"say":"2"}]}]}"#,
    );
    let fake = FakeTools::new();
    fx.turn(&fake, "x").0.unwrap();
    fx.turn(&fake, "y").0.unwrap();
    assert_eq!(fake.calls().len(), 2);
}

#[test]
fn arguments_that_are_not_json_are_a_clear_error_for_the_model_and_reach_no_port() {
    let mut fx = Fixture::new(
        r#"{"turns":[{"replies":[
        {"call":[{"name":"shell","arguments_text":"{command: ls"}]},
        {"say":"sorry"}]}]}"#,
    );
    let fake = FakeTools::new();
    let (result, _) = fx.turn(&fake, "x");
    assert_eq!(result.unwrap(), "sorry");
    assert!(fake.calls().is_empty());
    let message = &tool_messages(&fx.server)[0];
    assert!(
        message.starts_with("The arguments of shell are not valid JSON"),
        "{message}"
    );
    assert!(message.contains("JSON object"), "{message}");
}

#[test]
fn empty_arguments_mean_no_arguments() {
    let mut fx = Fixture::new(
        r#"{"turns":[{"replies":[{"call":[{"name":"shell","arguments_text":""}]},{"say":"ok"}]}]}"#,
    );
    let fake = FakeTools::new();
    fx.turn(&fake, "x").0.unwrap();
    assert_eq!(fake.calls()[0].arguments, "{}");
}

#[test]
fn a_long_result_is_capped_for_the_model() {
    let mut fx = Fixture::new(
        r#"{"turns":[{"replies":[{"call":[{"name":"shell","arguments":{"command":"x"}}]},{"say":"ok"}]}]}"#,
    );
    fx.limits.result_cap = 10;
    let port = FixedPort::new(ToolResponse::Result {
        content: "0123456789abcdef".into(),
        class: Class::Public,
        untrusted: false,
        truncated: false,
    });
    let (_, events) = fx.turn(&port, "x");
    assert_eq!(tool_messages(&fx.server), ["0123456789\n[truncated]"]);
    assert!(events.iter().any(|e| matches!(
        e,
        TurnEvent::ToolResult {
            truncated: true,
            ..
        }
    )));
}

#[test]
fn calls_past_the_per_turn_limit_are_not_run_and_the_model_must_answer() {
    let mut fx = Fixture::new(
        r#"{"turns":[{"replies":[
        {"call":[{"name":"call_tool","arguments":{"name":"echo","arguments":{"text":"1"}}},
                 {"name":"call_tool","arguments":{"name":"echo","arguments":{"text":"2"}}},
                 {"name":"call_tool","arguments":{"name":"echo","arguments":{"text":"3"}}}]},
        {"say":"enough"}]}]}"#,
    );
    fx.limits.max_tool_calls = 2;
    let fake = FakeTools::new();
    assert_eq!(fx.turn(&fake, "x").0.unwrap(), "enough");
    assert_eq!(fake.calls().len(), 2);
    let results = tool_messages(&fx.server);
    assert!(
        results[2].contains("limit of 2 tool calls"),
        "{}",
        results[2]
    );
    let last = fx.server.request_json().pop().unwrap();
    assert_eq!(last["tool_choice"], "none");
    assert_eq!(fx.server.request_json()[0]["tool_choice"], "auto");
}

#[test]
fn a_model_that_never_stops_calling_hits_the_round_limit_with_a_clear_message() {
    let mut fx = Fixture::new(
        r#"{"turns":[{"replies":[
        {"call":[{"name":"clock"}]},{"call":[{"name":"find_tool","arguments":{"query":"a"}}]},{"call":[{"name":"clock"}]}]}]}"#,
    );
    fx.limits.max_rounds = 3;
    let (result, events) = fx.turn(&FakeTools::new(), "x");
    assert!(matches!(result, Err(TurnError::TooManyRounds(3))));
    let TurnEvent::TurnFailed { error } = events.last().unwrap() else {
        panic!()
    };
    assert!(
        error.contains("3 model requests") && error.contains("--max-rounds"),
        "{error}"
    );
}

#[test]
fn a_server_that_is_down_fails_the_turn_clearly() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut fx = Fixture::with(r#"{"turns":[]}"#, |c| {
        c.base_url = format!("http://127.0.0.1:{port}/v1")
    });
    let (result, events) = fx.turn(&FakeTools::new(), "x");
    assert!(
        matches!(
            result,
            Err(TurnError::Model(LlamaError::Unreachable { .. }))
        ),
        "{result:?}"
    );
    let TurnEvent::TurnFailed { error } = events.last().unwrap() else {
        panic!()
    };
    assert!(
        error.contains("cannot be reached") && error.contains(&port.to_string()),
        "{error}"
    );
}

#[test]
fn a_server_error_fails_the_turn_with_its_status_and_body() {
    let mut fx = Fixture::new(
        r#"{"turns":[{"replies":[{"http_status":500,"body":"{\"error\":\"out of memory\"}"}]}]}"#,
    );
    let (result, _) = fx.turn(&FakeTools::new(), "x");
    let error = result.unwrap_err().to_string();
    assert!(
        error.contains("HTTP 500") && error.contains("out of memory"),
        "{error}"
    );
}

#[test]
fn a_server_that_hangs_past_the_timeout_fails_the_turn() {
    let mut fx = Fixture::with(r#"{"turns":[{"replies":[{"hang_ms":3000}]}]}"#, |c| {
        c.timeout = std::time::Duration::from_millis(300)
    });
    let (result, events) = fx.turn(&FakeTools::new(), "x");
    assert!(
        matches!(result, Err(TurnError::Model(LlamaError::Timeout { .. }))),
        "{result:?}"
    );
    let TurnEvent::TurnFailed { error } = events.last().unwrap() else {
        panic!()
    };
    assert!(error.contains("did not answer within 0.3 s"), "{error}");
}

#[test]
fn a_body_that_is_not_a_completion_fails_the_turn_as_malformed() {
    for stream in [true, false] {
        let mut fx = Fixture::with(
            r#"{"turns":[{"replies":[{"raw_body":"<html>oops</html>"}]}]}"#,
            |c| c.stream = stream,
        );
        let (result, _) = fx.turn(&FakeTools::new(), "x");
        let error = result.unwrap_err().to_string();
        assert!(
            error.contains("not a chat completion") && error.contains("<html>"),
            "{error}"
        );
    }
}

#[test]
fn a_failed_turn_leaves_the_session_usable_for_the_next_one() {
    let mut fx = Fixture::new(
        r#"{"turns":[{"replies":[{"http_status":503,"body":"loading model"}]},{"replies":[{"say":"back"}]}]}"#,
    );
    let error = fx.turn(&FakeTools::new(), "first").0.unwrap_err();
    assert!(
        matches!(
            &error,
            TurnError::Model(LlamaError::Status { status: 503, body, .. }) if body.contains("loading model")
        ),
        "{error:?}"
    );
    assert_eq!(fx.turn(&FakeTools::new(), "second").0.unwrap(), "back");
    let users = fx.server.last_contents("user");
    assert_eq!(users, ["first", "second"]);
}

#[test]
fn a_first_tool_choice_forces_the_first_request_of_each_turn_and_the_rest_say_auto() {
    let mut fx = Fixture::new(FIND_THEN_CALL);
    fx.limits.first_tool_choice = Some(loopd::llama::ToolChoice::parse("find_tool"));
    fx.turn(&FakeTools::new(), "x").0.unwrap();
    let requests = fx.server.request_json();
    assert_eq!(
        requests[0]["tool_choice"],
        serde_json::json!({"type":"function","function":{"name":"find_tool"}})
    );
    assert_eq!(requests[1]["tool_choice"], "auto");
    assert_eq!(requests[2]["tool_choice"], "auto");
}

#[test]
fn every_request_of_a_turn_with_two_calls_says_auto_and_none_once_the_budget_is_spent() {
    // llama-cpp-python renders the tools only into a request that says `tool_choice`: each
    // request after a call must say it too, or the model can never chain a second call.
    let two_calls = r#"{"turns":[{"replies":[
        {"call":[{"name":"clock"}]},
        {"call":[{"name":"find_tool","arguments":{"query":"echo"}}]},
        {"say":"done"}]},
      {"replies":[{"call":[{"name":"clock"}]},{"say":"again"}]}]}"#;
    // A budget left after both calls: every request says auto, the second turn's first too.
    let mut fx = Fixture::new(two_calls);
    assert_eq!(fx.turn(&FakeTools::new(), "x").0.unwrap(), "done");
    assert_eq!(fx.turn(&FakeTools::new(), "y").0.unwrap(), "again");
    let choices: Vec<serde_json::Value> = fx
        .server
        .request_json()
        .iter()
        .map(|r| r["tool_choice"].clone())
        .collect();
    assert_eq!(choices, ["auto", "auto", "auto", "auto", "auto"]);
    // A budget of two: the request after the second call says none, and `required` is never
    // sent unless asked for (llama-cpp-python answers it with HTTP 500).
    let mut fx = Fixture::new(two_calls);
    fx.limits.max_tool_calls = 2;
    assert_eq!(fx.turn(&FakeTools::new(), "x").0.unwrap(), "done");
    let choices: Vec<serde_json::Value> = fx
        .server
        .request_json()
        .iter()
        .map(|r| r["tool_choice"].clone())
        .collect();
    assert_eq!(choices, ["auto", "auto", "none"]);
}

/// A port whose catalog is `catalog` and that answers every call with its tool's name.
struct CatalogPort {
    catalog: Result<Vec<proto::ToolSchema>, String>,
}

impl loopd::tools::ToolPort for CatalogPort {
    fn call(&self, request: &proto::ToolRequest, _: &mut dyn FnMut(&Pending)) -> ToolResponse {
        ToolResponse::Result {
            content: format!("ran {}", request.tool),
            class: Class::Public,
            untrusted: false,
            truncated: false,
        }
    }

    fn catalog(&self) -> Option<Result<Vec<proto::ToolSchema>, String>> {
        Some(self.catalog.clone())
    }
}

#[test]
fn find_tool_and_call_tool_see_the_ports_catalog_not_the_turns_registry() {
    let script = r#"{"turns":[{"replies":[
        {"call":[{"name":"find_tool","arguments":{"query":"shell"}}]},
        {"call":[{"name":"call_tool","arguments":{"name":"consult","arguments":{"question":"q"}}}]},
        {"call":[{"name":"call_tool","arguments":{"name":"shell","arguments":{"command":"ls"}}}]},
        {"say":"done"}]}]}"#;
    let consult = proto::ToolSchema {
        name: "consult".into(),
        description: "Ask another model a question.".into(),
        parameters: serde_json::json!({"type": "object"}),
    };
    let port = CatalogPort {
        catalog: Ok(vec![consult]),
    };
    let mut fx = Fixture::new(script);
    let (result, events) = fx.turn(&port, "go");
    assert_eq!(result.unwrap(), "done");
    let results: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            TurnEvent::ToolResult { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        [
            "No tool matches.",
            "ran consult",
            "No tool named \"shell\". Use find_tool to search for tools."
        ]
    );
}

#[test]
fn a_catalog_that_cannot_be_read_is_said_so_not_replaced_by_the_registry() {
    let script = r#"{"turns":[{"replies":[
        {"call":[{"name":"find_tool","arguments":{"query":"read"}}]},
        {"say":"done"}]}]}"#;
    let port = CatalogPort {
        catalog: Err("the broker is gone".into()),
    };
    let mut fx = Fixture::new(script);
    let (_, events) = fx.turn(&port, "go");
    assert!(events.contains(&TurnEvent::ToolResult {
        name: "find_tool".into(),
        content: "The tool catalog could not be read (the broker is gone). Try again later.".into(),
        class: Class::Public,
        untrusted: false,
        truncated: false,
    }));
}
