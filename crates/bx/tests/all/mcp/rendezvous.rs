//! Clients started without `XDG_RUNTIME_DIR` find a broker started with it: an MCP SDK's
//! default stdio transport keeps only HOME, LOGNAME, PATH, SHELL, TERM and USER, so `bx mcp`,
//! and `bx` and loopd run the same way, read the folder brokerd recorded in its config folder
//! (`proto::rendezvous`). Without a broker, the sentence names `bx mcp`'s own flag.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testkit::BrokerProcess;

use super::{FAST, GRANTS, call_tool, python, script};

/// The Python SDK client in `mode` running `plan` against `bx mcp` with no folder flags, itself
/// started in an owner's shell: `HOME`, `PATH` and `XDG_RUNTIME_DIR` (which the SDK's launcher
/// drops), nothing else.
fn client_from_shell(home: &Path, xdg: &Path, work: &Path, mode: &str, plan: &Value) -> Output {
    Command::new(python(mode))
        .arg(script())
        .arg(mode)
        .arg(plan.to_string())
        .arg("--")
        .arg(testkit::binary("bx").unwrap())
        .arg("mcp")
        .current_dir(work)
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("XDG_RUNTIME_DIR", xdg)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The answers of each call step.
fn answers(output: &Output) -> Vec<Value> {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v.get("text").is_some())
        .collect()
}

#[test]
fn an_sdk_launched_bx_mcp_reaches_a_broker_started_with_xdg_runtime_dir_it_never_sees() {
    let broker = BrokerProcess::start_from_home(GRANTS, FAST);
    std::fs::write(broker.work.join("a.txt"), "alpha from the work folder\n").unwrap();
    let plan = json!([call_tool(
        "read_file",
        json!({ "path": broker.work.join("a.txt") })
    )]);
    // `v1` is the SDK 1.x `stdio_client`, `modern` the 2.x `Client`: each its default transport.
    for mode in ["v1", "modern"] {
        let output = client_from_shell(
            &broker.home(),
            &broker.xdg_runtime_dir(),
            &broker.work,
            mode,
            &plan,
        );
        let answers = answers(&output);
        assert_eq!(answers.len(), 1, "{mode}: {answers:?}");
        assert_eq!(answers[0]["isError"], false, "{mode}: {answers:?}");
        assert!(
            answers[0]["text"]
                .as_str()
                .unwrap()
                .contains("alpha from the work folder"),
            "{mode}: {answers:?}"
        );
    }
    // Its broker stopped, the kept session's client is told of the broker, not of
    // --new-session (a new session would not help).
    stop(&broker);
    let output = client_from_shell(
        &broker.home(),
        &broker.xdg_runtime_dir(),
        &broker.work,
        "v1",
        &plan,
    );
    let answers = answers(&output);
    let text = answers[0]["text"].as_str().unwrap();
    assert!(text.contains("pass --runtime-dir DIR"), "{text}");
    assert!(!text.contains("--new-session"), "{text}");
}

/// SIGTERM, and waits until the broker has removed its record of the runtime folder.
fn stop(broker: &BrokerProcess) {
    let record = broker.config.join(proto::rendezvous::RECORD_FILE);
    assert!(record.exists());
    let pid = broker.pid().unwrap().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while record.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!record.exists(), "{}", broker.log());
}

#[test]
fn without_a_broker_an_sdk_launched_bx_mcp_names_its_own_flag_and_the_likely_cause() {
    let home = testkit::temp_dir();
    let work = home.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let plan = json!([call_tool(
        "read_file",
        json!({ "path": work.join("a.txt") })
    )]);
    let output = client_from_shell(home.path(), &home.path().join("xdg"), &work, "v1", &plan);
    let answers = answers(&output);
    assert_eq!(answers[0]["isError"], true, "{answers:?}");
    let text = answers[0]["text"].as_str().unwrap();
    assert!(text.contains("no broker is running on"), "{text}");
    assert!(text.contains("another XDG_RUNTIME_DIR"), "{text}");
    assert!(text.contains("pass --runtime-dir DIR"), "{text}");
    assert!(!text.contains("--socket"), "{text}");
}

#[test]
fn bx_and_loopd_without_xdg_runtime_dir_find_the_broker_and_its_record_goes_at_its_exit() {
    let broker = BrokerProcess::start_from_home(GRANTS, FAST);
    let only_home = |command: &mut Command| {
        command
            .env_clear()
            .env("HOME", broker.home())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    };
    // bx: its owner socket.
    let mut status = Command::new(testkit::binary("bx").unwrap());
    status.args(["status", "--json"]);
    only_home(&mut status);
    let output = status.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let view: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        view["agent_socket"],
        broker.socket().display().to_string(),
        "{view}"
    );
    // loopd: a call through the agent socket, no --socket given.
    let file = broker.work.join("notes.txt");
    std::fs::write(&file, "the notes\n").unwrap();
    let script = broker.work.join("script.json");
    let read = json!({"name": "call_tool", "arguments": {"name": "read_file", "arguments": {"path": file}}});
    std::fs::write(
        &script,
        json!({"turns": [{"replies": [{"call": [read]}, {"say": "read"}]}]}).to_string(),
    )
    .unwrap();
    let mut chat = Command::new(testkit::binary("loopd").unwrap());
    chat.args([
        "chat", "--port", "broker", "--json", "-m", "read it", "--model",
    ])
    .arg(format!("script:{}", script.display()));
    only_home(&mut chat);
    let output = chat.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result = stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["type"] == "tool_result")
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        result["content"].as_str().unwrap().ends_with("the notes\n"),
        "{result}"
    );
    // A broker stopped as usual removes its record.
    stop(&broker);
}
