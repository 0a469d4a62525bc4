//! The scripted server answers like an OpenAI-compatible server, including llama.cpp's quirk.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use testkit::ScriptServer;

fn server(script: &str) -> ScriptServer {
    ScriptServer::from_json(script)
}

fn post(url: &str, body: &str) -> (u16, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut response = agent
        .post(url)
        .header("Content-Type", "application/json")
        .send(body)
        .unwrap();
    let status = response.status().as_u16();
    (status, response.body_mut().read_to_string().unwrap())
}

#[test]
fn a_whole_answer_is_a_chat_completion_with_tool_calls() {
    let server = server(r#"{"turns":[{"replies":[{"say":"hi","call":[{"name":"clock"}]}]}]}"#);
    let url = format!("{}/chat/completions", server.base_url());
    let (status, body) = post(&url, r#"{"messages":[{"role":"user","content":"x"}]}"#);
    assert_eq!(status, 200);
    let value: serde_json::Value = serde_json::from_str(&body).unwrap();
    let message = &value["choices"][0]["message"];
    assert_eq!(message["content"], "hi");
    assert_eq!(message["tool_calls"][0]["function"]["name"], "clock");
    assert_eq!(message["tool_calls"][0]["id"], "call_1_1_1");
    assert_eq!(value["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn a_streamed_answer_is_server_sent_events_ending_in_done() {
    let server = server(r#"{"turns":[{"replies":[{"say":"hello world"}]}]}"#);
    let url = format!("{}/chat/completions", server.base_url());
    let (_, body) = post(
        &url,
        r#"{"stream":true,"messages":[{"role":"user","content":"x"}]}"#,
    );
    assert!(body.trim_end().ends_with("data: [DONE]"), "{body}");
    let text: String = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert_eq!(text, "hello world");
}

#[test]
fn null_content_beside_tool_calls_gets_http_500_like_llama_cpp() {
    let server = server(r#"{"turns":[{"replies":[{"say":"a"},{"say":"b"}]}]}"#);
    let url = format!("{}/chat/completions", server.base_url());
    let body = r#"{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[]},{"role":"tool","content":"r","tool_call_id":"1"}]}"#;
    let (status, text) = post(&url, body);
    assert_eq!(status, 500);
    assert!(text.contains("content"), "{text}");
}

#[test]
fn other_paths_bad_bodies_and_missing_replies_are_errors_that_say_why() {
    let server = server(r#"{"turns":[{"replies":[{"say":"a"}]}]}"#);
    let base = server.base_url();
    assert_eq!(post(&format!("{base}/models"), "{}").0, 404);
    let url = format!("{base}/chat/completions");
    let (status, text) = post(&url, "not json");
    assert_eq!(status, 400);
    assert!(text.contains("not JSON"));
    let two_users = r#"{"messages":[{"role":"user","content":"x"},{"role":"user","content":"y"}]}"#;
    let (status, text) = post(&url, two_users);
    assert_eq!(status, 500);
    assert!(text.contains("has no turn"), "{text}");
}

#[test]
fn a_missing_binary_is_named_with_the_command_that_builds_it() {
    let error = testkit::binary("no-such-daemon").unwrap_err().to_string();
    assert!(error.contains("no-such-daemon is missing"), "{error}");
    assert!(error.contains("cargo build"), "{error}");
}
