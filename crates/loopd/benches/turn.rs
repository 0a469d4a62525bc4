//! loopd's own cost per turn against the scripted server on loopback: one turn is three model
//! requests (find_tool, call_tool echo, the answer) with their session writes. The reference in
//! the same run is the same three request bodies POSTed with the same HTTP client and nothing
//! else, so the difference is what loopd adds.

use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use loopd::llama::{LlamaClient, LlamaConfig};
use loopd::script::Script;
use loopd::session::{Session, SessionIds};
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

criterion_group!(benches, turn);
criterion_main!(benches);
