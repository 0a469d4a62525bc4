//! `consult`: the wire body of seed M6b/04 and one real POST to a scripted server.

use brokerd::consult::{
    Consult, ConsultClient, ConsultError, ConsultStartError, QUESTION_CAP, cap_bytes,
    parse_loopback_http, question_of, wire_body,
};
use testkit::ScriptServer;

fn consult(url: &str) -> Consult {
    Consult {
        url: url.to_string(),
        model: "small".into(),
        temperature_milli: 200,
        api_key_env: None,
    }
}

#[test]
fn the_wire_body_has_the_question_alone_with_no_history_and_no_tools() {
    assert_eq!(
        wire_body(None, r#"{"question":"Why?"}"#),
        r#"{"model":"","temperature":0.6,"messages":[{"role":"user","content":"Why?"}]}"#
    );
    let c = consult("http://127.0.0.1:1/v1");
    assert_eq!(
        wire_body(Some(&c), r#"{"question":"Why?","history":[1]}"#),
        r#"{"model":"small","temperature":0.2,"messages":[{"role":"user","content":"Why?"}]}"#
    );
}

#[test]
fn a_missing_or_odd_question_is_empty_and_a_long_one_is_capped() {
    assert_eq!(question_of("{}"), "");
    assert_eq!(question_of("not json"), "");
    assert_eq!(question_of(r#"{"question":5}"#), "");
    let long = serde_json::json!({"question": "é".repeat(QUESTION_CAP)}).to_string();
    assert_eq!(question_of(&long).len(), QUESTION_CAP);
    assert_eq!(cap_bytes("aé", 2), ("a".to_string(), true));
}

#[test]
fn only_loopback_http_servers_are_accepted() {
    for good in [
        "http://127.0.0.1:8080/v1",
        "http://localhost:1/v1/",
        "http://[::1]:9/v1",
        "http://127.5.0.1/",
    ] {
        assert!(parse_loopback_http(good).is_ok(), "{good}");
    }
    for bad in [
        "https://127.0.0.1/v1",
        "http://10.0.0.1/v1",
        "http://example.org/v1",
        "http://user@127.0.0.1/",
        "ftp://localhost/",
    ] {
        assert!(
            matches!(parse_loopback_http(bad), Err(ConsultStartError::NotLoopbackHttp(ref url)) if url == bad),
            "{bad}"
        );
    }
    assert_eq!(
        parse_loopback_http("http://localhost:1/v1/").as_deref(),
        Ok("http://localhost:1/v1")
    );
}

#[test]
fn a_named_key_that_is_not_set_stops_the_start() {
    let mut c = consult("http://127.0.0.1:1/v1");
    c.api_key_env = Some("BOXMAKER_TEST_KEY_THAT_IS_NOT_SET".into());
    let error = ConsultClient::start(c, 1000).unwrap_err();
    assert!(matches!(error, ConsultStartError::MissingKey(_)));
    assert!(
        error
            .to_string()
            .contains("BOXMAKER_TEST_KEY_THAT_IS_NOT_SET")
    );
}

#[test]
fn the_key_never_shows_in_debug_output() {
    let mut c = consult("http://127.0.0.1:1/v1");
    c.api_key_env = Some("BOXMAKER_TEST_CONSULT_KEY".into());
    let env = |name: &str| (name == "BOXMAKER_TEST_CONSULT_KEY").then(|| "sk-very-secret".into());
    let client = ConsultClient::start_with_env(c, 1000, env).unwrap();
    let shown = format!("{client:?}");
    assert!(!shown.contains("sk-very-secret"), "{shown}");
}

#[test]
fn one_question_is_posted_and_the_answer_comes_back() {
    let server = ScriptServer::from_json(r#"{"turns":[{"replies":[{"say":"Because."}]}]}"#);
    let client = ConsultClient::start(consult(&server.base_url()), 5000).unwrap();
    assert_eq!(
        client.run(r#"{"question":"Why?"}"#),
        Ok(("Because.".to_string(), false))
    );
    assert_eq!(
        server.requests(),
        [r#"{"model":"small","temperature":0.2,"messages":[{"role":"user","content":"Why?"}]}"#]
    );
}

#[test]
fn a_long_answer_is_capped() {
    let long = "x".repeat(QUESTION_CAP + 10);
    let script = format!(r#"{{"turns":[{{"replies":[{{"say":"{long}"}}]}}]}}"#);
    let server = ScriptServer::from_json(&script);
    let client = ConsultClient::start(consult(&server.base_url()), 5000).unwrap();
    let (answer, cut) = client.run(r#"{"question":"q"}"#).unwrap();
    assert_eq!(answer.len(), QUESTION_CAP);
    assert!(cut);
}

#[test]
fn a_server_that_errs_hangs_or_is_down_gives_a_clear_error() {
    let server =
        ScriptServer::from_json(r#"{"turns":[{"replies":[{"http_status":503,"body":"busy"}]}]}"#);
    let client = ConsultClient::start(consult(&server.base_url()), 5000).unwrap();
    assert_eq!(
        client.run(r#"{"question":"q"}"#),
        Err(ConsultError::Status {
            status: 503,
            body: "busy".into()
        })
    );

    let hanging = ScriptServer::from_json(r#"{"turns":[{"replies":[{"hang_ms":3000}]}]}"#);
    let client = ConsultClient::start(consult(&hanging.base_url()), 200).unwrap();
    assert_eq!(
        client.run(r#"{"question":"q"}"#),
        Err(ConsultError::Timeout(200))
    );

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let client =
        ConsultClient::start(consult(&format!("http://127.0.0.1:{port}/v1")), 1000).unwrap();
    assert!(matches!(
        client.run(r#"{"question":"q"}"#),
        Err(ConsultError::Unreachable { .. })
    ));
}
