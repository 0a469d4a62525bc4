//! loopd against a model server that tries to make it use unbounded memory, calls or writes
//! (the issue's causes 1-4). Peak memory is that of the `loopd` child alone (`wait4`), checked
//! against the same binary's peak for a plain answer, never inferred from timing.

use std::io::Write;

use crate::support::raw::{
    RawServer, baseline_peak_kib, chat, close_delimited_head, event, session_messages,
    streamed_answer,
};
use loopd::llama::{LlamaClient, LlamaConfig, Message, ToolCall};
use loopd::session::{Session, SessionIds};
use loopd::tools::{FakeTools, Registry, STOPPED_BEFORE_RUNNING};
use loopd::turn::{Limits, Runtime, TurnEvent, run_turn};
use testkit::ScriptServer;

const MIB: usize = 1 << 20;

/// The peak a hostile test may reach: the plain-answer peak plus one answer's limit (16 MiB)
/// for the line being read, and as much again for what is kept of it.
fn allowed_kib(baseline: i64) -> i64 {
    baseline + 40 * 1024
}

#[test]
fn streamed_tool_call_pieces_by_the_hundred_thousand_cost_memory_only_for_what_arrived() {
    let dir = testkit::temp_dir();
    let baseline = baseline_peak_kib(&dir.path().join("baseline"));
    // 15 MB of pieces, each at the next index; every other piece starts a call, the others
    // add nothing. (An index that jumps ahead fails the turn: see `unreadable_output`.)
    let mut body = String::new();
    let mut calls = 0usize;
    let mut index = 0u64;
    while body.len() < 15 * MIB {
        let mut pieces = Vec::new();
        for _ in 0..500 {
            pieces.push(format!(r#"{{"index":{index}}}"#));
            index += 1;
            calls += 1;
            pieces.push(format!(
                r#"{{"index":{index},"id":"c{index}","function":{{"name":"x","arguments":"{{}}"}}}}"#
            ));
            index += 1;
        }
        body.push_str(&event(&format!(
            r#"{{"choices":[{{"index":0,"delta":{{"tool_calls":[{}]}}}}]}}"#,
            pieces.join(",")
        )));
    }
    body.push_str(&event(
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
    ));
    body.push_str("data: [DONE]\n\n");
    let server = RawServer::start(move |request, stream| {
        if request.number == 0 {
            stream.write_all(close_delimited_head("text/event-stream", "").as_bytes())?;
            stream.write_all(body.as_bytes())
        } else {
            stream.write_all(streamed_answer("done").as_bytes())
        }
    });
    let state = dir.path().join("state");
    let run = chat(&server.base_url(), &state, "go", &["--json"]);
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    let messages = session_messages(&state);
    assert_eq!(
        messages.len(),
        1 + 1 + 33 + 1,
        "user, assistant, 33 results, answer"
    );
    assert_eq!(messages[1]["tool_calls"].as_array().unwrap().len(), 33);
    let last_result = messages[34]["content"].as_str().unwrap();
    assert!(
        last_result.contains(&format!("{} tool call(s)", calls - 32)),
        "{last_result}"
    );
    eprintln!(
        "pieces at every index: {calls} calls in 15 MB, peak {:.1} MiB (plain answer {:.1} MiB)",
        run.peak_mib(),
        baseline as f64 / 1024.0
    );
    assert!(
        run.peak_kib < allowed_kib(baseline),
        "peak {} KiB",
        run.peak_kib
    );
}

/// A deflate stream (inside gzip) that inflates to `prefix` and then the letter `a` forever:
/// the head to send once, then the chunk to send again and again (13 bytes give 2,064 `a`).
fn gzip_bomb(prefix: &str) -> (Vec<u8>, Vec<u8>) {
    struct Bits {
        bytes: Vec<u8>,
        used: usize,
    }
    impl Bits {
        fn push(&mut self, value: u32, count: u32) {
            for i in 0..count {
                if self.used.is_multiple_of(8) {
                    self.bytes.push(0);
                }
                if (value >> i) & 1 == 1 {
                    *self.bytes.last_mut().unwrap() |= 1 << (self.used % 8);
                }
                self.used += 1;
            }
        }
        fn code(&mut self, code: u32, length: u32) {
            for i in (0..length).rev() {
                self.push((code >> i) & 1, 1);
            }
        }
        fn literal(&mut self, byte: u8) {
            assert!(byte < 144);
            self.code(0x30 + u32::from(byte), 8);
        }
        fn repeat_last_258_times(&mut self, groups: usize) {
            for _ in 0..groups * 8 {
                self.code(0xc5, 8); // length 258 (symbol 285, fixed code)
                self.code(0, 5); // distance 1
            }
        }
    }
    let mut bits = Bits {
        bytes: vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff],
        used: 80,
    };
    bits.push(0, 1); // not the last block
    bits.push(1, 2); // fixed Huffman codes
    for byte in prefix.bytes().chain([b'a']) {
        bits.literal(byte);
    }
    bits.repeat_last_258_times(4096);
    let head_end = bits.used / 8;
    bits.repeat_last_258_times(4096);
    let chunk = bits.bytes[head_end..head_end + 13 * 4096].to_vec();
    bits.bytes.truncate(head_end);
    (bits.bytes, chunk)
}

#[test]
fn a_line_without_an_end_is_cut_at_the_answer_limit_plain_or_gzip() {
    let dir = testkit::temp_dir();
    let baseline = baseline_peak_kib(&dir.path().join("baseline"));
    let line = r#"data: {"choices":[{"index":0,"delta":{"content":""#;
    let (bomb_head, bomb_chunk) = gzip_bomb(line);
    let (whole_head, whole_chunk) = gzip_bomb(r#"{"choices":[{"index":0,"message":{"content":""#);
    for case in ["plain stream", "gzip stream", "gzip whole answer"] {
        let (head, first, chunk) = match case {
            "plain stream" => (
                close_delimited_head("text/event-stream", ""),
                line.as_bytes().to_vec(),
                vec![b'a'; MIB],
            ),
            "gzip stream" => (
                close_delimited_head("text/event-stream", "Content-Encoding: gzip\r\n"),
                bomb_head.clone(),
                bomb_chunk.clone(),
            ),
            _ => (
                close_delimited_head("application/json", "Content-Encoding: gzip\r\n"),
                whole_head.clone(),
                whole_chunk.clone(),
            ),
        };
        let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = std::sync::Arc::clone(&sent);
        let server = RawServer::start(move |_, stream| {
            stream.write_all(head.as_bytes())?;
            stream.write_all(&first)?;
            // Until loopd hangs up (or 2 GiB, should it never).
            for _ in 0..(2048 * MIB / chunk.len()) {
                stream.write_all(&chunk)?;
                counter.fetch_add(chunk.len(), std::sync::atomic::Ordering::SeqCst);
            }
            Ok(())
        });
        let state = dir.path().join(case.replace(' ', "-"));
        let extra: &[&str] = if case.contains("whole") {
            &["--no-stream"]
        } else {
            &[]
        };
        let run = chat(&server.base_url(), &state, "go", extra);
        assert_eq!(run.code, Some(1), "{case}: {}{}", run.stdout, run.stderr);
        assert!(
            run.stdout.contains("longer than 16777216 bytes"),
            "{case}: {}",
            run.stdout
        );
        let sent = sent.load(std::sync::atomic::Ordering::SeqCst);
        eprintln!(
            "{case}: {:.1} MiB sent on the wire, peak {:.1} MiB (plain answer {:.1} MiB)",
            sent as f64 / MIB as f64,
            run.peak_mib(),
            baseline as f64 / 1024.0
        );
        assert!(
            run.peak_kib < allowed_kib(baseline),
            "{case}: peak {} KiB",
            run.peak_kib
        );
        assert_eq!(
            session_messages(&state).len(),
            1,
            "{case}: nothing half-read is stored"
        );
    }
}

fn many_calls_script(calls: usize) -> String {
    let calls: Vec<String> = (0..calls)
        .map(|n| {
            format!(r#"{{"name":"call_tool","arguments":{{"name":"echo","arguments":{{"text":"{n}"}}}}}}"#)
        })
        .collect();
    format!(
        r#"{{"turns":[{{"replies":[{{"call":[{}]}},{{"say":"done"}}]}}]}}"#,
        calls.join(",")
    )
}

#[test]
fn a_reply_with_100000_tool_calls_runs_the_limit_and_answers_the_rest_in_one_sentence() {
    let dir = testkit::temp_dir();
    let baseline = baseline_peak_kib(&dir.path().join("baseline"));
    // Whole answers carry 100,000 calls in 8 MB; streamed ones 25,000 in 14 MB.
    for (calls, extra) in [(100_000usize, "--no-stream"), (25_000, "--json")] {
        let server = ScriptServer::from_json(&many_calls_script(calls));
        let state = dir.path().join(format!("state-{calls}"));
        let run = chat(&server.base_url(), &state, "go", &[extra]);
        assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
        let messages = session_messages(&state);
        assert_eq!(messages.len(), 36, "user, assistant, 33 results, answer");
        assert_eq!(messages[1]["tool_calls"].as_array().unwrap().len(), 33);
        let results: Vec<&str> = messages[2..34]
            .iter()
            .map(|m| m["content"].as_str().unwrap())
            .collect();
        assert_eq!(results, (0..32).map(|n| n.to_string()).collect::<Vec<_>>());
        let sentence = messages[34]["content"].as_str().unwrap();
        assert!(
            sentence.contains(&format!(
                "limit of 32 tool calls, so {} tool call(s)",
                calls - 32
            )),
            "{sentence}"
        );
        assert!(
            run.stdout.len() < 64 * 1024,
            "printed {} bytes",
            run.stdout.len()
        );
        let last = server.request_json().pop().unwrap();
        assert_eq!(last["tool_choice"], "none");
        eprintln!(
            "{calls} calls: peak {:.1} MiB (plain answer {:.1} MiB), printed {} bytes",
            run.peak_mib(),
            baseline as f64 / 1024.0,
            run.stdout.len()
        );
        assert!(
            run.peak_kib < allowed_kib(baseline),
            "peak {} KiB",
            run.peak_kib
        );
    }
}

#[test]
fn the_tool_call_limit_spans_every_round_of_a_turn() {
    let call = |n: usize| {
        format!(
            r#"{{"name":"call_tool","arguments":{{"name":"echo","arguments":{{"text":"{n}"}}}}}}"#
        )
    };
    let round = |from: usize| (from..from + 20).map(call).collect::<Vec<_>>().join(",");
    let server = ScriptServer::from_json(&format!(
        r#"{{"turns":[{{"replies":[{{"call":[{}]}},{{"call":[{}]}},{{"say":"done"}}]}}]}}"#,
        round(0),
        round(20)
    ));
    let dir = testkit::temp_dir();
    let registry = Registry::demo();
    let mut session = Session::create(
        dir.path(),
        SessionIds {
            id: "s".into(),
            resume_token: None,
        },
        "x",
        &registry.core_schemas(),
    )
    .unwrap();
    let client = LlamaClient::new(LlamaConfig {
        base_url: server.base_url(),
        ..LlamaConfig::default()
    });
    let fake = FakeTools::new();
    let rt = Runtime {
        model: &client,
        port: &fake,
        registry: &registry,
        limits: Limits::default(),
        children: None,
    };
    assert_eq!(
        run_turn(&rt, &mut session, "go", &mut |_| {}).unwrap(),
        "done"
    );
    assert_eq!(fake.calls().len(), 32);
    let last = server.request_json().pop().unwrap();
    let messages = last["messages"].as_array().unwrap();
    let second = messages
        .iter()
        .filter(|m| m["role"] == "assistant")
        .nth(1)
        .unwrap();
    assert_eq!(
        second["tool_calls"].as_array().unwrap().len(),
        13,
        "12 within the limit and one"
    );
    let sentence = messages.last().unwrap()["content"].as_str().unwrap();
    assert!(
        sentence.contains("so 8 tool call(s) of this reply"),
        "{sentence}"
    );
    assert_eq!(last["tool_choice"], "none");
}

/// A session as a loopd without limits left it when killed: one reply of `calls` calls to
/// `echo`, of which the first `answered` have results.
fn crashed_session(root: &std::path::Path, calls: usize, answered: usize) -> Session {
    let registry = Registry::demo();
    let mut session = Session::create(
        root,
        SessionIds {
            id: "crashed".into(),
            resume_token: None,
        },
        "x",
        &registry.core_schemas(),
    )
    .unwrap();
    let tool_calls: Vec<ToolCall> = (1..=calls)
        .map(|n| ToolCall {
            id: format!("call_{n}"),
            name: "call_tool".into(),
            arguments: format!(r#"{{"name":"echo","arguments":{{"text":"{n}"}}}}"#),
        })
        .collect();
    let mut messages = vec![Message::user("go"), Message::assistant("", tool_calls)];
    messages.extend((1..=answered).map(|n| Message::tool(&format!("call_{n}"), &n.to_string())));
    session.append_all(&messages).unwrap();
    session
}

/// Write system calls of this process so far (all threads).
fn writes_so_far() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("syscw: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn calls_a_crash_left_without_results_are_sent_again_only_within_the_limit() {
    let dir = testkit::temp_dir();
    let mut session = crashed_session(dir.path(), 100_000, 10);
    let server =
        ScriptServer::from_json(r#"{"turns":[{"replies":[]},{"replies":[{"say":"ok"}]}]}"#);
    let client = LlamaClient::new(LlamaConfig {
        base_url: server.base_url(),
        ..LlamaConfig::default()
    });
    let fake = FakeTools::new();
    let registry = Registry::demo();
    let rt = Runtime {
        model: &client,
        port: &fake,
        registry: &registry,
        limits: Limits::default(),
        children: None,
    };
    let mut events = Vec::new();
    let writes = writes_so_far();
    let answer = run_turn(&rt, &mut session, "next", &mut |e| events.push(e.clone()));
    let writes = writes_so_far() - writes;
    assert_eq!(answer.unwrap(), "ok");
    let sent: Vec<u64> = fake.calls().iter().map(|r| r.call_id).collect();
    assert_eq!(
        sent,
        (11..=32).collect::<Vec<u64>>(),
        "the rest of the turn's 32, in order"
    );
    assert!(events.contains(&TurnEvent::CallsNotRun {
        count: 100_000 - 32,
        text: STOPPED_BEFORE_RUNNING.to_string()
    }));
    assert!(writes < 5_000, "{writes} write calls for 99,968 answers");
    assert!(session.unanswered_calls().is_empty());
    let request = server.request_json().pop().unwrap();
    let results = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .count();
    assert_eq!(results, 100_000, "every stored call has its result");
}

#[test]
fn a_crashed_session_with_100000_open_calls_resumes_in_bounded_memory_and_output() {
    let dir = testkit::temp_dir();
    let baseline = baseline_peak_kib(&dir.path().join("baseline"));
    let state = dir.path().join("state");
    drop(crashed_session(&state.join("sessions"), 100_000, 0));
    let server =
        ScriptServer::from_json(r#"{"turns":[{"replies":[]},{"replies":[{"say":"ok"}]}]}"#);
    let run = chat(
        &server.base_url(),
        &state,
        "next",
        &["--session", "crashed"],
    );
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.stdout.matches("\n  result ").count(),
        32,
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("  skip   99968 call(s): Not run: loopd stopped before running it."),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.len() < 64 * 1024,
        "printed {} bytes",
        run.stdout.len()
    );
    eprintln!(
        "resume after 100,000 open calls: peak {:.1} MiB (plain answer {:.1} MiB)",
        run.peak_mib(),
        baseline as f64 / 1024.0
    );
    // The session holds 100,000 calls (8.6 MB on disk) and gets 100,000 answers (6.5 MB): it
    // is read once, its open calls are parsed once, and the next request carries all of it.
    assert!(
        run.peak_kib < allowed_kib(baseline) + 40 * 1024,
        "peak {} KiB",
        run.peak_kib
    );
}
