//! `bx mcp` with npm's clients as its clients, at the versions `scripts/npm/sdk` pins
//! (installed by `scripts/test-deps`): the TypeScript SDK's `StdioClientTransport` driven by
//! `tests/mcp/typescript.cjs`, and MCP Inspector's CLI. Each is started as from the owner's
//! shell (`HOME`, `PATH`, `XDG_RUNTIME_DIR`) against a broker started there, and starts
//! `bx mcp` with no folder flags and its own filtered environment, so `bx mcp` finds the broker
//! from the record in the config folder. Each test fails, never skips, when the packages are
//! missing.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, channel};

use serde_json::{Value, json};
use testkit::{BrokerProcess, OwnerClient};

use super::waiting::{CONFIG, PATIENCE, abandoned};
use super::{GRANTS, bx, call_tool};

/// The folder of `scripts/npm/sdk`'s packages; panics naming `scripts/test-deps` when the SDK
/// is not installed there.
fn sdk_folder() -> PathBuf {
    let folder = testkit::npm::folder("sdk");
    let sdk = folder.join("node_modules/@modelcontextprotocol/sdk/package.json");
    assert!(
        sdk.exists(),
        "{} is missing: run scripts/test-deps (or set BOXMAKER_NPM_DIR)",
        sdk.display()
    );
    folder
}

/// `program` as the owner's shell starts it, in the work folder: `broker`'s `HOME` and
/// `XDG_RUNTIME_DIR`, the test's `PATH`, nothing else.
fn from_shell(broker: &BrokerProcess, program: impl Into<PathBuf>) -> Command {
    let mut command = Command::new(program.into());
    command
        .current_dir(&broker.work)
        .env_clear()
        .env("HOME", broker.home())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("XDG_RUNTIME_DIR", broker.xdg_runtime_dir())
        .stdin(Stdio::null());
    command
}

/// The TypeScript SDK client running `plan` against `bx mcp ARGS` (no folder flags).
fn client(broker: &BrokerProcess, plan: &Value, args: &[&str]) -> Command {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/typescript.cjs");
    let mut command = from_shell(broker, "node");
    command
        .arg(script)
        .arg(sdk_folder())
        .arg(plan.to_string())
        .arg("--")
        .arg(testkit::binary("bx").unwrap())
        .arg("mcp")
        .args(args);
    command
}

/// The client's JSON lines, one step's answer each, `{"done": true}` last.
fn steps(output: &Output) -> Vec<Value> {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.last(), Some(&json!({ "done": true })), "{stdout}");
    lines
}

/// A client running in the background, its lines read as they come.
struct Running {
    child: Child,
    lines: Receiver<Value>,
}

impl Running {
    fn start(mut command: Command) -> Running {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (sender, lines) = channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if sender
                    .send(serde_json::from_str::<Value>(&line).unwrap())
                    .is_err()
                {
                    return;
                }
            }
        });
        Running { child, lines }
    }

    /// The next line; panics when none comes within [`PATIENCE`].
    fn next(&self) -> Value {
        match self.lines.recv_timeout(PATIENCE) {
            Ok(value) => value,
            Err(e) => panic!("the client said nothing more: {e}"),
        }
    }

    /// Reads lines up to the call's `count`th progress notification; panics on any other line
    /// (the call's answer, or its timeout, came first).
    fn progress(&self, count: u64) -> Value {
        loop {
            let line = self.next();
            assert!(line.get("seen").is_some(), "not progress: {line}");
            if line["seen"] == count {
                return line;
            }
        }
    }

    /// The first line that is not a progress notification.
    fn answer(&self) -> Value {
        loop {
            let line = self.next();
            if line.get("seen").is_none() {
                return line;
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The grants of [`GRANTS`] (`write_file` below `{work}/asked` asks the owner).
fn asking_broker() -> BrokerProcess {
    let broker = BrokerProcess::start_from_home(GRANTS, CONFIG);
    std::fs::create_dir_all(broker.work.join("asked")).unwrap();
    broker
}

#[test]
fn the_typescript_sdks_default_stdio_transport_lists_and_calls_through_a_broker_it_finds_by_record()
{
    let broker = BrokerProcess::start_from_home(GRANTS, CONFIG);
    std::fs::write(broker.work.join("a.txt"), "alpha from the work folder\n").unwrap();
    let read = call_tool("read_file", json!({ "path": broker.work.join("a.txt") }));
    let plan = json!([{ "op": "env" }, { "op": "list" }, read]);
    let output = client(&broker, &plan, &[]).output().unwrap();
    let lines = steps(&output);
    // The SDK drops XDG_RUNTIME_DIR, which the client itself has.
    let inherited = lines[0]["inherited"].as_array().unwrap();
    assert!(inherited.contains(&json!("HOME")), "{inherited:?}");
    assert!(
        !inherited.contains(&json!("XDG_RUNTIME_DIR")),
        "{inherited:?}"
    );
    let names: Vec<&str> = lines[1]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["clock", "find_tool", "call_tool"]);
    let result = &lines[2];
    assert_eq!(result["isError"], false, "{result}");
    assert!(
        result["text"]
            .as_str()
            .unwrap()
            .contains("alpha from the work folder"),
        "{result}"
    );
    assert_eq!(result["meta"]["boxmaker/class"], "private", "{result}");
    // The record is what found it: without it, the same call reaches no broker.
    let record = broker.config.join(proto::rendezvous::RECORD_FILE);
    let aside = broker.root.path().join("record-aside");
    std::fs::rename(&record, &aside).unwrap();
    let output = client(&broker, &json!([read]), &[]).output().unwrap();
    std::fs::rename(&aside, &record).unwrap();
    let lines = steps(&output);
    assert_eq!(lines[0]["isError"], true, "{}", lines[0]);
    let text = lines[0]["text"].as_str().unwrap();
    assert!(text.contains("no broker is running on"), "{text}");
}

/// The client's request timeout, shorter than the owner's wait.
const TIMEOUT_MS: u64 = 3000;
/// `bx mcp --progress-every`, in seconds: a sixth of the timeout.
const EVERY: &str = "0.5";
/// Progress notifications that span more than the timeout: `bx mcp` sends one at once, then
/// one every 0.5 s, so the 9th is sent at least 4 s after the first.
const SPANNING: u64 = TIMEOUT_MS / 500 + 3;

/// A `call_tool` of `write_file` below `asked` with the SDK's `timeout` of [`TIMEOUT_MS`] and
/// `resetTimeoutOnProgress` `reset`.
fn waiting_write(broker: &BrokerProcess, file: &str, reset: bool) -> Value {
    let mut step = call_tool(
        "write_file",
        json!({ "path": broker.work.join("asked").join(file), "content": "made\n" }),
    );
    step["timeout"] = json!(TIMEOUT_MS);
    step["reset"] = json!(reset);
    json!([step])
}

#[test]
fn a_typescript_client_that_resets_its_timeout_on_progress_outwaits_it_and_gets_the_approved_result()
 {
    let broker = asking_broker();
    let plan = waiting_write(&broker, "reset.txt", true);
    let running = Running::start(client(&broker, &plan, &["--progress-every", EVERY]));
    let first = running.progress(1);
    assert!(
        first["message"]
            .as_str()
            .unwrap()
            .contains("waiting for the owner"),
        "{first}"
    );
    // Still waiting after notifications spanning more than its timeout.
    running.progress(SPANNING);
    let pending = OwnerClient::open(&broker.owner_socket()).wait_pending();
    assert!(!broker.work.join("asked/reset.txt").exists());
    let approved = bx(&broker, &["approve", &pending.approval.0.to_string()]);
    assert_eq!(approved.code, 0, "{}", approved.stderr);
    let result = running.answer();
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(
        std::fs::read_to_string(broker.work.join("asked/reset.txt")).unwrap(),
        "made\n"
    );
    assert_eq!(running.next(), json!({ "done": true }));
}

#[test]
fn a_typescript_client_that_does_not_reset_on_progress_times_out_and_its_call_is_withdrawn() {
    let broker = asking_broker();
    let plan = waiting_write(&broker, "no-reset.txt", false);
    let running = Running::start(client(&broker, &plan, &["--progress-every", EVERY]));
    running.progress(1);
    let pending = OwnerClient::open(&broker.owner_socket()).wait_pending();
    // Nobody approves: the SDK's own timeout ends the call (-32001, RequestTimeout) and it
    // tells `bx mcp`, which withdraws the approval.
    let answer = running.answer();
    assert_eq!(answer["code"], -32001, "{answer}");
    assert_eq!(running.next(), json!({ "done": true }));
    abandoned(&broker, pending.approval.0);
    assert!(!broker.work.join("asked/no-reset.txt").exists());
}

#[test]
fn a_typescript_client_terminated_while_its_call_waits_leaves_it_abandoned_and_unrun() {
    let broker = asking_broker();
    let plan = waiting_write(&broker, "terminated.txt", true);
    let mut running = Running::start(client(&broker, &plan, &["--progress-every", EVERY]));
    running.progress(1);
    let pending = OwnerClient::open(&broker.owner_socket()).wait_pending();
    let pid = running.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = running.child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(15),
        "{status}"
    );
    // It leaves `bx approvals`, and `bx approve` says it was abandoned.
    abandoned(&broker, pending.approval.0);
    let listed = bx(&broker, &["approvals", "--json"]);
    assert_eq!(listed.stdout.trim(), "[]", "{}", listed.stderr);
    assert!(!broker.work.join("asked/terminated.txt").exists());
    // Recorded as abandoned.
    let audit = std::fs::read_to_string(broker.state.join(proto::dirs::AUDIT_FILE)).unwrap();
    let resolved: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| {
            e["event"]["type"] == "approval_resolved"
                && e["event"]["approval"] == pending.approval.0
        })
        .collect();
    assert_eq!(resolved.len(), 1, "{audit}");
    assert_eq!(
        resolved[0]["event"]["resolution"]["kind"], "abandoned",
        "{audit}"
    );
    let verified = bx(&broker, &["audit", "verify"]);
    assert_eq!(verified.code, 0, "{}", verified.stderr);
}

/// MCP Inspector's CLI (`inspector --cli ARGS`) from the owner's shell, to its end.
fn inspector(broker: &BrokerProcess, args: &[&str]) -> Output {
    from_shell(broker, testkit::npm::program("sdk", "inspector"))
        .arg("--cli")
        .args(args)
        .output()
        .unwrap()
}

/// The Inspector's JSON answer on standard output, which must have succeeded.
fn inspected(output: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// The names of a `tools/list` answer.
fn names(listed: &Value) -> Vec<String> {
    listed["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn mcp_inspectors_cli_lists_the_whole_catalog_and_calls_a_tool_with_bx_mcps_flags_after_the_double_dash()
 {
    let broker = BrokerProcess::start_from_home(GRANTS, CONFIG);
    std::fs::write(broker.work.join("b.txt"), "beta from the work folder\n").unwrap();
    let bx_mcp = testkit::binary("bx").unwrap();
    let bx_mcp = bx_mcp.to_str().unwrap();
    let listed = inspected(&inspector(
        &broker,
        &[
            "--method",
            "tools/list",
            "--",
            bx_mcp,
            "mcp",
            "--catalog",
            "all",
        ],
    ));
    let names = names(&listed);
    assert_eq!(&names[..3], ["clock", "find_tool", "call_tool"]);
    assert!(
        names.iter().any(|n| n == "read_file") && names.iter().any(|n| n == "write_file"),
        "{names:?}"
    );
    let path = format!("path={}", broker.work.join("b.txt").display());
    let called = inspected(&inspector(
        &broker,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "read_file",
            "--tool-arg",
            &path,
            "--",
            bx_mcp,
            "mcp",
            "--catalog",
            "all",
        ],
    ));
    assert_eq!(called["isError"], false, "{called}");
    assert!(
        called["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("beta from the work folder"),
        "{called}"
    );
    assert_eq!(called["_meta"]["boxmaker/class"], "private", "{called}");
}

#[test]
fn bx_mcps_tools_flag_lists_the_catalog_where_mcp_inspector_takes_catalog_as_its_own() {
    let broker = BrokerProcess::start_from_home(GRANTS, CONFIG);
    let bx_mcp = testkit::binary("bx").unwrap();
    let bx_mcp = bx_mcp.to_str().unwrap();
    // Without `--`, Inspector reads `--catalog` as its own option (its catalog file).
    let taken = inspector(
        &broker,
        &[bx_mcp, "mcp", "--catalog", "all", "--method", "tools/list"],
    );
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&taken.stdout),
        String::from_utf8_lossy(&taken.stderr)
    );
    assert!(said.contains("--catalog cannot be combined"), "{said}");
    assert!(!said.contains("read_file"), "{said}");
    // `--tools` is the same flag of bx mcp's, and Inspector leaves it alone.
    let listed = inspected(&inspector(
        &broker,
        &[bx_mcp, "mcp", "--tools", "all", "--method", "tools/list"],
    ));
    let names = names(&listed);
    assert!(
        names.iter().any(|n| n == "read_file") && names.iter().any(|n| n == "write_file"),
        "{names:?}"
    );
}
