//! loopd's own cost per turn against the scripted server on loopback: one turn is three model
//! requests (find_tool, call_tool echo, the answer) with their session writes. The reference in
//! the same run is the same three request bodies POSTed with the same HTTP client and nothing
//! else, so the difference is what loopd adds.
//!
//! `history`: the cost of one turn as `loopd chat --session ID -m …` pays it, after 10, 1,000
//! and 10,000 earlier messages: opening the session (reading and checking `messages.jsonl`),
//! the turn with its two synced writes, and the request body built from every message. The
//! model answers in process, so the server's own work on a long body is not measured.
//! `open_and_build_body_after_N` is the part of it that grows with the history, without the
//! synced writes whose cost depends on the disk.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// criterion's macros make public functions without docs.
#![allow(missing_docs)]

use std::time::Duration;

use criterion::{BatchSize, Criterion, black_box, criterion_group, criterion_main};
use loopd::llama::{
    ChatRequest, LlamaClient, LlamaConfig, LlamaError, Message, Model, Reply, ToolCall,
    request_body,
};
use loopd::script::Script;
use loopd::session::{MESSAGES_FILE, Session, SessionIds};
use loopd::tools::{FakeTools, Registry};
use loopd::turn::{Limits, Runtime, run_turn};
use testkit::ScriptServer;

const SCRIPT: &str = r#"{"turns":[{"replies":[
  {"call":[{"name":"find_tool","arguments":{"query":"echo"}}]},
  {"call":[{"name":"call_tool","arguments":{"name":"echo","arguments":{"text":"hi"}}}]},
  {"say":"It said hi."}]}]}"#;

fn turn(c: &mut Criterion) {
    let script = match Script::parse(SCRIPT, &Default::default()) {
        Ok(script) => script,
        Err(e) => panic!("bench script: {e}"),
    };
    let server = match ScriptServer::start(script) {
        Ok(server) => server,
        Err(e) => panic!("bench server: {e}"),
    };
    let registry = Registry::demo();
    let fake = FakeTools::new();
    let dir = testkit::temp_dir();
    let mut group = c.benchmark_group("turn");
    group.measurement_time(Duration::from_secs(10));
    for stream in [false, true] {
        let client = LlamaClient::new(LlamaConfig {
            base_url: server.base_url(),
            stream,
            ..LlamaConfig::default()
        });
        let rt = Runtime {
            model: &client,
            port: &fake,
            registry: &registry,
            limits: Limits::default(),
            children: None,
        };
        let mut n = 0u64;
        let label = if stream {
            "loopd_streamed"
        } else {
            "loopd_whole"
        };
        group.bench_function(label, |b| {
            b.iter_batched(
                || {
                    n += 1;
                    let ids = SessionIds {
                        id: format!("bench-{stream}-{n}"),
                        resume_token: None,
                    };
                    match Session::create(dir.path(), ids, "bench", &registry.core_schemas()) {
                        Ok(session) => session,
                        Err(e) => panic!("bench session: {e}"),
                    }
                },
                |mut session| run_turn(&rt, &mut session, "say hi", &mut |_| {}).is_ok(),
                BatchSize::PerIteration,
            )
        });
    }

    // The reference: the same three request bodies, POSTed and read whole, nothing else.
    let bodies: Vec<String> = server.requests().into_iter().take(3).collect();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let url = format!("{}/chat/completions", server.base_url());
    group.bench_function("bare_http_3_posts", |b| {
        b.iter(|| {
            bodies
                .iter()
                .map(|body| {
                    agent
                        .post(&url)
                        .header("Content-Type", "application/json")
                        .send(body)
                        .ok()
                        .and_then(|mut r| r.body_mut().read_to_string().ok())
                        .map_or(0, |t| t.len())
                })
                .sum::<usize>()
        })
    });
    group.finish();
}

/// Answers "ok" after building the request body, as the HTTP client would before sending it.
struct BodyOnly(LlamaConfig);

impl Model for BodyOnly {
    fn complete(
        &self,
        request: &ChatRequest<'_>,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Reply, LlamaError> {
        black_box(request_body(&self.0, request)?.len());
        on_text("ok");
        Ok(Reply {
            content: "ok".to_string(),
            finish_reason: Some("stop".to_string()),
            ..Reply::default()
        })
    }
}

/// `count` messages as `messages.jsonl` holds them: turns of a question, a tool call, its
/// result and an answer.
fn history(count: usize) -> String {
    let mut text = String::new();
    for n in 0..count {
        let message = match n % 4 {
            0 => Message::user(&format!("question {n}: what does the file say?")),
            1 => Message::assistant(
                "",
                vec![ToolCall {
                    id: format!("call_{n}"),
                    name: "call_tool".to_string(),
                    arguments: r#"{"name":"echo","arguments":{"text":"a line of the file"}}"#
                        .to_string(),
                }],
            ),
            2 => Message::tool(&format!("call_{}", n - 1), "a line of the file"),
            _ => Message::assistant(&format!("The file says: a line of the file ({n})."), vec![]),
        };
        match serde_json::to_string(&message) {
            Ok(line) => text.push_str(&line),
            Err(e) => panic!("bench message: {e}"),
        }
        text.push('\n');
    }
    text
}

fn turn_after_history(c: &mut Criterion) {
    let registry = Registry::demo();
    let fake = FakeTools::new();
    let model = BodyOnly(LlamaConfig::default());
    let rt = Runtime {
        model: &model,
        port: &fake,
        registry: &registry,
        limits: Limits::default(),
        children: None,
    };
    let dir = testkit::temp_dir();
    let mut group = c.benchmark_group("history");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(10));
    let mut n = 0u64;
    for count in [10usize, 1_000, 10_000] {
        let lines = history(count);
        group.bench_function(format!("open_and_turn_after_{count}"), |b| {
            b.iter_batched(
                || {
                    n += 1;
                    let id = format!("history-{count}-{n}");
                    let ids = SessionIds {
                        id: id.clone(),
                        resume_token: None,
                    };
                    if let Err(e) =
                        Session::create(dir.path(), ids, "bench", &registry.core_schemas())
                    {
                        panic!("bench session: {e}");
                    }
                    if let Err(e) = std::fs::write(dir.path().join(&id).join(MESSAGES_FILE), &lines)
                    {
                        panic!("bench history: {e}");
                    }
                    id
                },
                |id| {
                    let mut session = match Session::open(dir.path(), &id) {
                        Ok(session) => session,
                        Err(e) => panic!("bench open: {e}"),
                    };
                    run_turn(&rt, &mut session, "and now?", &mut |_| {}).is_ok()
                },
                BatchSize::PerIteration,
            )
        });
        // The part of that which grows with the history: reading and checking the session,
        // and the request body built from every message (no synced write).
        let id = format!("history-{count}-read");
        let ids = SessionIds {
            id: id.clone(),
            resume_token: None,
        };
        if let Err(e) = Session::create(dir.path(), ids, "bench", &registry.core_schemas()) {
            panic!("bench session: {e}");
        }
        if let Err(e) = std::fs::write(dir.path().join(&id).join(MESSAGES_FILE), &lines) {
            panic!("bench history: {e}");
        }
        group.bench_function(format!("open_and_build_body_after_{count}"), |b| {
            b.iter(|| {
                let session = match Session::open(dir.path(), &id) {
                    Ok(session) => session,
                    Err(e) => panic!("bench open: {e}"),
                };
                request_body(&model.0, &session.request(None)).map_or(0, |body| body.len())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, turn, turn_after_history);
criterion_main!(benches);
