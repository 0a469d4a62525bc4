//! `bx mcp` with the official Python MCP SDK as its client (PyPI `mcp`, installed by
//! `scripts/test-deps`), over stdio, on both eras: the 2026-07-28 revision (no `initialize`,
//! versions in each request's `_meta`), the handshake of 2025-11-25 from the same SDK, and an
//! SDK 1.x client. Each test fails, never skips, when the SDK is missing. `typescript` does the
//! same with npm's TypeScript SDK and MCP Inspector's CLI.

mod clients;
mod elicit;
mod garbage;
mod gateway;
mod http;
mod idle;
mod mistakes;
mod names;
mod rendezvous;
mod typescript;
mod waiting;

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};
use testkit::{BrokerProcess, OwnerClient};

use super::bx;

/// The test client (`tests/mcp/client.py`).
fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/client.py")
}

/// The Python with the SDK for `mode`: 2.x for `modern`, `auto` and `legacy`, 1.x for `v1`
/// (the venvs of `scripts/test-deps`).
fn python(mode: &str) -> PathBuf {
    let (variable, default) = if mode == "v1" {
        ("BOXMAKER_MCP1_VENV", "/opt/boxmaker-mcp1")
    } else {
        ("BOXMAKER_MCP_VENV", "/opt/boxmaker-mcp2")
    };
    let venv = std::env::var_os(variable).map_or_else(|| PathBuf::from(default), PathBuf::from);
    let python = venv.join("bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/test-deps (or set {variable})",
        python.display()
    );
    python
}

/// `bx` with `broker`'s folders and `mcp ARGS`, the program first.
fn bx_mcp(broker: &BrokerProcess, args: &[&OsStr]) -> Vec<OsString> {
    let mut command: Vec<OsString> = vec![testkit::binary("bx").unwrap().into()];
    for (flag, folder) in [
        ("--config-dir", &broker.config),
        ("--state-dir", &broker.state),
        ("--runtime-dir", &broker.runtime),
    ] {
        command.push(flag.into());
        command.push(folder.into());
    }
    command.push("mcp".into());
    command.extend(args.iter().map(|a| a.to_os_string()));
    command
}

/// `bx mcp ARGS` on `broker`'s folders as a process of its own, in the work folder.
fn bx_mcp_command(broker: &BrokerProcess, args: &[&OsStr]) -> Command {
    let words = bx_mcp(broker, args);
    let mut command = Command::new(&words[0]);
    command.args(&words[1..]).current_dir(&broker.work);
    command
}

/// Starts the client in `mode` running `plan` against `bx mcp ARGS` on `broker`'s folders.
fn start(broker: &BrokerProcess, mode: &str, plan: &Value, args: &[&str]) -> Child {
    start_with(broker, mode, plan, args, &[])
}

/// [`start`] with `env` set for the client (`BOXMAKER_TEST_ELICIT`).
fn start_with(
    broker: &BrokerProcess,
    mode: &str,
    plan: &Value,
    args: &[&str],
    env: &[(&str, &str)],
) -> Child {
    let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    Command::new(python(mode))
        .arg(script())
        .arg(mode)
        .arg(plan.to_string())
        .arg("--")
        .args(bx_mcp(broker, &args))
        .current_dir(&broker.work)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Runs the client to its end: one JSON value per step, then the protocol it spoke.
fn run(broker: &BrokerProcess, mode: &str, plan: &Value, args: &[&str]) -> (Vec<Value>, String) {
    let output = start(broker, mode, plan, args).wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{mode}: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &Value| v.get("progress").is_none() || v.get("text").is_some())
        .collect();
    let done = lines.pop().unwrap();
    assert_eq!(done["done"], true, "{stdout}");
    (lines, done["protocol"].as_str().unwrap().to_string())
}

fn call(name: &str, arguments: Value) -> Value {
    json!({ "op": "call", "name": name, "arguments": arguments })
}

fn call_tool(name: &str, arguments: Value) -> Value {
    call("call_tool", json!({ "name": name, "arguments": arguments }))
}

const GRANTS: &str = r#"
[[grant]]
id = "read-work"
tool = "read_file"
paths = ["{work}"]
class = "private"
untrusted = false

[[grant]]
id = "read-notes"
tool = "read_file"
paths = ["{work}/notes"]
untrusted = true

[[grant]]
id = "write-work"
tool = "write_file"
paths = ["{work}/out"]
untrusted = false
on_untrusted = "deny"

[[grant]]
id = "ask-write"
tool = "write_file"
paths = ["{work}/asked"]
untrusted = false
approval = "ask"
on_untrusted = "allow"
"#;

const FAST: &str = "idle_timeout_ms = 1000\nshell_ms = 5000\n";

#[test]
fn the_core_tools_are_loopds_tools_array_on_every_era() {
    let broker = BrokerProcess::start(GRANTS, FAST);
    let expected = [
        toolport::clock_schema(),
        toolport::find_tool_schema(),
        toolport::call_tool_schema(),
    ];
    for (mode, protocol) in [
        ("modern", "2026-07-28"),
        ("auto", "2026-07-28"),
        ("legacy", "2025-11-25"),
        ("v1", "2025-11-25"),
    ] {
        let (answers, spoke) = run(&broker, mode, &json!([{ "op": "list" }]), &[]);
        assert_eq!(spoke, protocol, "{mode}");
        let tools = answers[0]["tools"].as_array().unwrap();
        assert_eq!(tools.len(), 3, "{mode}: {tools:?}");
        for (tool, schema) in tools.iter().zip(&expected) {
            assert_eq!(tool["name"], schema.name, "{mode}");
            assert_eq!(tool["description"], schema.description, "{mode}");
            // The same bytes as loopd's tools array, key order included.
            assert_eq!(
                serde_json::to_string(&tool["inputSchema"]).unwrap(),
                serde_json::to_string(&schema.parameters).unwrap(),
                "{mode}"
            );
            assert!(tool["annotations"]["readOnlyHint"].is_boolean(), "{tool}");
        }
    }
}

#[test]
fn an_allowed_call_runs_through_the_broker_with_its_labels_and_a_denied_one_is_an_error() {
    let broker = BrokerProcess::start(GRANTS, FAST);
    std::fs::write(broker.work.join("a.txt"), "alpha from the work folder\n").unwrap();
    for mode in ["modern", "legacy", "v1"] {
        let plan = json!([
            call("find_tool", json!({ "query": "read a file" })),
            call_tool("read_file", json!({ "path": broker.work.join("a.txt") })),
            call_tool(
                "write_file",
                json!({ "path": broker.work.join("elsewhere.txt"), "content": "x" })
            ),
            call("clock", json!({})),
        ]);
        let (answers, _) = run(&broker, mode, &plan, &["--session", mode]);
        assert!(
            answers[0]["text"].as_str().unwrap().contains("read_file"),
            "{mode}: {}",
            answers[0]
        );
        let read = &answers[1];
        assert_eq!(read["isError"], false, "{mode}: {read}");
        assert!(
            read["text"]
                .as_str()
                .unwrap()
                .contains("alpha from the work folder"),
            "{read}"
        );
        assert_eq!(read["meta"]["boxmaker/class"], "private", "{read}");
        assert_eq!(read["meta"]["boxmaker/untrusted"], false, "{read}");
        assert_eq!(
            read["structuredContent"]["header"]["tool"], "read_file",
            "{read}"
        );
        assert!(
            read["structuredContent"]["body"]
                .as_str()
                .unwrap()
                .contains("alpha")
        );
        let denied = &answers[2];
        assert_eq!(denied["isError"], true, "{mode}: {denied}");
        assert_eq!(
            denied["text"],
            toolport::denial_text(proto::DenyReason::NoGrant),
            "{denied}"
        );
        assert!(!broker.work.join("elsewhere.txt").exists());
        assert_eq!(answers[3]["isError"], false);
    }
    // Every call reached the audit log.
    let verified = bx(&broker, &["audit", "verify"]);
    assert_eq!(verified.code, 0, "{}", verified.stderr);
}

#[test]
fn the_whole_catalog_lists_every_granted_tool_with_its_annotations() {
    let broker = BrokerProcess::start(GRANTS, FAST);
    let (answers, _) = run(
        &broker,
        "modern",
        &json!([{ "op": "list" }]),
        &["--catalog", "all"],
    );
    let tools = answers[0]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(&names[..3], ["clock", "find_tool", "call_tool"]);
    assert!(
        names.contains(&"read_file") && names.contains(&"write_file"),
        "{names:?}"
    );
    for tool in tools {
        assert!(tool["annotations"].is_object(), "{tool}");
    }
    let read = tools.iter().find(|t| t["name"] == "read_file").unwrap();
    assert_eq!(read["annotations"]["readOnlyHint"], true);
    // A tool listed by the catalog is called by its own name.
    std::fs::write(broker.work.join("b.txt"), "beta\n").unwrap();
    let plan = json!([call(
        "read_file",
        json!({ "path": broker.work.join("b.txt") })
    )]);
    let (answers, _) = run(&broker, "modern", &plan, &["--catalog", "all"]);
    assert!(
        answers[0]["text"].as_str().unwrap().contains("beta"),
        "{}",
        answers[0]
    );
}

#[test]
fn a_call_that_asks_waits_for_the_owner_in_bx_with_progress_and_runs_once_approved() {
    let broker = BrokerProcess::start(GRANTS, FAST);
    std::fs::create_dir_all(broker.work.join("asked")).unwrap();
    let target = broker.work.join("asked/made.txt");
    for (round, mode) in ["modern", "v1"].into_iter().enumerate() {
        let plan = json!([call_tool(
            "write_file",
            json!({ "path": target, "content": format!("round {round}\n") })
        )]);
        let mut child = start(&broker, mode, &plan, &[]);
        let mut owner = OwnerClient::open(&broker.owner_socket());
        let pending = owner.wait_pending();
        assert_eq!(pending.tool, "write_file");
        assert!(!target.exists() || round > 0);
        let approved = bx(&broker, &["approve", &pending.approval.0.to_string()]);
        assert_eq!(approved.code, 0, "{}", approved.stderr);
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let lines: Vec<Value> = stdout
            .lines()
            .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
            .collect();
        assert!(child.wait().unwrap().success());
        let result = lines.iter().find(|l| l.get("isError").is_some()).unwrap();
        assert_eq!(result["isError"], false, "{mode}: {result}");
        assert_eq!(
            std::fs::read_to_string(&target).unwrap(),
            format!("round {round}\n")
        );
        let notes = result["progress"].as_array().unwrap();
        assert!(
            notes
                .iter()
                .any(|n| n.as_str().unwrap().contains("waiting for the owner")),
            "{mode}: {result}"
        );
    }
}

#[test]
fn a_restarted_client_resumes_its_session_and_labels_and_only_new_session_starts_clean() {
    let broker = BrokerProcess::start(GRANTS, FAST);
    std::fs::create_dir_all(broker.work.join("notes")).unwrap();
    std::fs::create_dir_all(broker.work.join("out")).unwrap();
    std::fs::write(broker.work.join("notes/web.txt"), "text from outside\n").unwrap();
    let write = |name: &str| {
        call_tool(
            "write_file",
            json!({ "path": broker.work.join("out").join(name), "content": "x" }),
        )
    };
    // The first client reads untrusted text: its session is tainted.
    let plan = json!([
        write("before.txt"),
        call_tool(
            "read_file",
            json!({ "path": broker.work.join("notes/web.txt") })
        ),
    ]);
    let (answers, _) = run(&broker, "modern", &plan, &["--session", "agent"]);
    assert_eq!(answers[0]["isError"], false, "{}", answers[0]);
    assert_eq!(
        answers[1]["meta"]["boxmaker/untrusted"], true,
        "{}",
        answers[1]
    );
    // A new client process under the same name resumes that session: the write is refused.
    let (answers, _) = run(
        &broker,
        "legacy",
        &json!([write("after.txt")]),
        &["--session", "agent"],
    );
    assert_eq!(answers[0]["isError"], true, "{}", answers[0]);
    assert_eq!(
        answers[0]["text"],
        toolport::denial_text(proto::DenyReason::UntrustedInput),
        "{}",
        answers[0]
    );
    assert!(!broker.work.join("out/after.txt").exists());
    // Only --new-session starts clean.
    let (answers, _) = run(
        &broker,
        "modern",
        &json!([write("fresh.txt")]),
        &["--session", "agent", "--new-session"],
    );
    assert_eq!(answers[0]["isError"], false, "{}", answers[0]);
    let kept = broker.state.join("mcp/agent.json");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&kept).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn a_call_cancelled_while_it_waits_for_the_owner_is_withdrawn_and_never_runs() {
    let broker = BrokerProcess::start(GRANTS, FAST);
    std::fs::create_dir_all(broker.work.join("asked")).unwrap();
    let target = broker.work.join("asked/cancelled.txt");
    // Both eras, from the 2.x SDK: the 1.x SDK sends no notifications/cancelled when a call
    // is cancelled, so no server can learn of it.
    for mode in ["modern", "legacy"] {
        let plan = json!([
            { "op": "cancel", "name": "call_tool",
              "arguments": { "name": "write_file", "arguments": { "path": target, "content": "no\n" } } },
            { "op": "sleep", "seconds": 1 },
            call("clock", json!({})),
        ]);
        let output = start(&broker, mode, &plan, &[]).wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{mode}: {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(stdout.contains("\"cancelled\": true"), "{mode}: {stdout}");
        // The approval is gone: withdrawn, not left for the owner to answer.
        let mut owner = OwnerClient::open(&broker.owner_socket());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !owner.pending().is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert_eq!(owner.pending(), Vec::new(), "{mode}");
        assert!(!target.exists(), "{mode}: the withdrawn call ran");
    }
    let audit = std::fs::read_to_string(broker.state.join(proto::dirs::AUDIT_FILE)).unwrap();
    assert_eq!(
        audit.matches("its client withdrew it").count(),
        2,
        "{audit}"
    );
    let verified = bx(&broker, &["audit", "verify"]);
    assert_eq!(verified.code, 0, "{}", verified.stderr);
}
