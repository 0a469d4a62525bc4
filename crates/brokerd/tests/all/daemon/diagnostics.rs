//! Diagnostics after a write (`[[diagnostics]]` in `brokerd.toml`): the checker's lines for the
//! written file appended to the write's answer, capped; one line for a checker that fails or
//! times out; a checker that runs the project's code only as a `shell` call a shell grant
//! covers, decided and recorded as one; nothing when no entry covers the file.

use std::fs;

use testkit::{AgentClient, BrokerProcess};

use super::{FAST, content};

/// A checker that runs no project code: Python's parser on the written file, printing
/// `FILE:LINE: MESSAGE`.
const PYTHON: &str = r#"
[[diagnostics]]
workspace = "{work}"
extensions = ["py"]
command = ["/usr/bin/python3", "-c", '''
import ast, sys
try:
    ast.parse(open(sys.argv[1]).read(), sys.argv[1])
except SyntaxError as e:
    print(f"{e.filename}:{e.lineno}: {e.msg}")
    sys.exit(1)
''', "{file}"]
runs_project_code = false
format = "gcc"
name = "python-ast"
"#;

/// `grep -Hn TODO`, in gcc's format: one diagnostic per line holding TODO, at most 2 shown.
const TODOS: &str = r#"
[[diagnostics]]
workspace = "{work}"
extensions = ["txt"]
command = ["grep", "-Hn", "TODO", "{file}"]
runs_project_code = false
format = "gcc"
name = "todo"
max = 2
"#;

/// `bash -n` as a checker that (the owner says) runs the project's code.
const BASH_AS_PROJECT_CODE: &str = r#"
[[diagnostics]]
workspace = "{work}"
extensions = ["sh"]
command = ["bash", "-n", "{file}"]
runs_project_code = true
format = "gcc"
"#;

/// `grep -Hn TODO` as a checker that (the owner says) runs the project's code: the broker's
/// shell checker can tell what it writes (`bash -n FILE` it cannot: `bash` runs a script).
const GREP_AS_PROJECT_CODE: &str = r#"
[[diagnostics]]
workspace = "{work}"
extensions = ["sh"]
command = ["grep", "-Hn", "TODO", "{file}"]
runs_project_code = true
format = "gcc"
name = "todo"
"#;

/// The shell grant that covers `grep` in the work folder.
const SHELL_GREP: &str = r#"
[[grant]]
id = "shell-grep"
tool = "shell"
commands = ["grep"]
paths = ["{work}"]
"#;

fn write(client: &mut AgentClient, id: u64, path: &std::path::Path, text: &str) -> String {
    let args = serde_json::json!({ "path": path, "content": text }).to_string();
    let response = client.call(id, "write_file", &args).unwrap();
    content(&response).to_string()
}

fn config(entries: &[&str]) -> String {
    format!("{FAST}{}", entries.concat())
}

/// The audit log's records of `call_id`, as JSON.
fn records_of(broker: &BrokerProcess, call_id: u64) -> Vec<serde_json::Value> {
    let log = fs::read_to_string(broker.state.join(proto::dirs::AUDIT_FILE)).unwrap();
    log.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .map(|record| record["event"].clone())
        .filter(|event| event["call_id"] == call_id)
        .collect()
}

/// The call id the checker of write `id` is recorded under.
fn checker_call(id: u64) -> u64 {
    (1 << 62) + id
}

#[test]
fn a_python_write_gets_its_syntax_error_with_file_and_line() {
    let broker = BrokerProcess::start(super::WORK, &config(&[PYTHON]));
    let mut client = AgentClient::open(&broker.socket(), None);
    let file = broker.work.join("a.py");
    let answer = write(&mut client, 1, &file, "x = 1\ndef f(:\n    pass\n");
    assert!(
        answer.contains("diagnostics (python-ast) for a.py: 1\n  a.py:2: invalid syntax"),
        "{answer}"
    );
    let clean = write(&mut client, 2, &broker.work.join("b.py"), "x = 1\n");
    assert!(
        clean.contains("diagnostics (python-ast) for b.py: none"),
        "{clean}"
    );
    // It ran under the write grant's walls: no shell call was recorded for it.
    assert!(records_of(&broker, checker_call(1)).is_empty());
}

#[test]
fn the_diagnostics_are_capped_at_max_and_other_files_are_left_out() {
    let broker = BrokerProcess::start(super::WORK, &config(&[TODOS]));
    let mut client = AgentClient::open(&broker.socket(), None);
    let answer = write(
        &mut client,
        1,
        &broker.work.join("notes.txt"),
        "TODO one\nfine\nTODO two\nTODO three\n",
    );
    assert!(
        answer.contains(
            "diagnostics (todo) for notes.txt: 3, the first 2 shown\n  notes.txt:1: TODO one\n  notes.txt:3: TODO two"
        ),
        "{answer}"
    );
    assert!(!answer.contains("TODO three\n  "), "{answer}");
}

#[test]
fn a_failing_checker_and_a_slow_one_add_one_line_each() {
    let failing = r#"
[[diagnostics]]
workspace = "{work}"
extensions = ["c"]
command = ["/nonexistent/checker", "{file}"]
runs_project_code = false
format = "gcc"
name = "missing"
[[diagnostics]]
workspace = "{work}"
extensions = ["md"]
command = ["sleep", "30"]
runs_project_code = false
format = "lines"
name = "slow"
timeout_ms = 300
"#;
    let broker = BrokerProcess::start(super::WORK, &config(&[failing]));
    let mut client = AgentClient::open(&broker.socket(), None);
    let failed = write(&mut client, 1, &broker.work.join("a.c"), "int x;\n");
    assert!(
        failed.contains("diagnostics (missing) for a.c: the checker failed with exit code 127 and reported nothing for this file:"),
        "{failed}"
    );
    let slow = write(&mut client, 2, &broker.work.join("a.md"), "# title\n");
    assert!(
        slow.contains("diagnostics (slow) for a.md: the checker did not finish within its limit of 300 ms; none shown"),
        "{slow}"
    );
    // The writes themselves happened.
    assert_eq!(
        fs::read_to_string(broker.work.join("a.md")).unwrap(),
        "# title\n"
    );
}

#[test]
fn a_file_no_entry_covers_gets_the_plain_answer() {
    let broker = BrokerProcess::start(super::WORK, &config(&[PYTHON]));
    let mut client = AgentClient::open(&broker.socket(), None);
    let answer = write(&mut client, 1, &broker.work.join("a.txt"), "def f(:\n");
    assert!(!answer.contains("diagnostics"), "{answer}");
}

#[test]
fn a_checker_that_runs_project_code_is_refused_without_a_shell_grant_and_recorded_so() {
    let broker = BrokerProcess::start(super::WORK, &config(&[BASH_AS_PROJECT_CODE]));
    let mut client = AgentClient::open(&broker.socket(), None);
    let file = broker.work.join("run.sh");
    let answer = write(&mut client, 1, &file, "if true; then\n");
    assert!(
        answer.contains("diagnostics (bash) for run.sh: not run: it can run the project's code, so it runs only as a shell call a shell grant covers, and this one was refused"),
        "{answer}"
    );
    let records = records_of(&broker, checker_call(1));
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["type"], "answered");
    assert_eq!(records[0]["tool"], "shell");
    assert_eq!(records[0]["answer"]["kind"], "denied", "{records:?}");
    assert_eq!(fs::read_to_string(&file).unwrap(), "if true; then\n");
}

#[test]
fn a_checker_that_runs_project_code_runs_as_a_shell_call_its_grant_covers() {
    let grants = format!("{}{SHELL_GREP}", super::WORK);
    let broker = BrokerProcess::start(&grants, &config(&[GREP_AS_PROJECT_CODE]));
    let mut client = AgentClient::open(&broker.socket(), None);
    let file = broker.work.join("run.sh");
    let answer = write(&mut client, 1, &file, "echo one\n# TODO two\n");
    assert!(
        answer.contains("diagnostics (todo) for run.sh: 1\n  run.sh:2: # TODO two"),
        "{answer}"
    );
    // Decided and answered as a shell call of its grant, under its own call id.
    let records = records_of(&broker, checker_call(1));
    let types: Vec<&str> = records.iter().filter_map(|r| r["type"].as_str()).collect();
    assert_eq!(types, ["decided", "answered"], "{records:?}");
    assert!(
        records
            .iter()
            .all(|r| r["tool"] == "shell" && r["grant"] == "shell-grep")
    );
    // The shell grant labels its output untrusted (the default): so is the write's answer.
    let args = serde_json::json!({ "path": broker.work.join("b.sh"), "content": "true\n" });
    let response = client.call(2, "write_file", &args.to_string()).unwrap();
    let proto::ToolResponse::Result { untrusted, .. } = response else {
        panic!("{response:?}")
    };
    assert!(
        untrusted,
        "the checker's output is the shell grant's: untrusted"
    );
    let (code, verified) = super::audit_verify(&broker);
    assert_eq!(code, 0, "{verified}");
}

#[test]
fn a_checker_whose_shell_grant_would_ask_is_not_run_and_nothing_waits() {
    // The session is tainted by an untrusted read; the shell grant asks after untrusted input.
    let grants = format!(
        "{}{SHELL_GREP}on_untrusted = \"ask\"\n[[grant]]\nid = \"read-outside\"\ntool = \"read_file\"\npaths = [\"{{work}}/outside\"]\n",
        super::WORK
    );
    let broker = BrokerProcess::start(&grants, &config(&[GREP_AS_PROJECT_CODE]));
    fs::create_dir_all(broker.work.join("outside")).unwrap();
    fs::write(broker.work.join("outside/page.txt"), "from elsewhere\n").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    let read = super::path_args(&broker.work.join("outside/page.txt"));
    client.call(1, "read_file", &read).unwrap();
    let answer = write(&mut client, 2, &broker.work.join("run.sh"), "# TODO\n");
    assert!(
        answer.contains("not run: shell grant shell-grep asks the owner first (AfterUntrusted), and a checker never waits for an approval"),
        "{answer}"
    );
    let records = records_of(&broker, checker_call(2));
    assert!(
        records
            .iter()
            .all(|r| r["type"] != "approval_requested" && r["type"] != "decided"),
        "{records:?}"
    );
    assert_eq!(
        records.last().unwrap()["answer"]["kind"],
        "failed",
        "{records:?}"
    );
}

#[test]
fn cargo_check_reports_a_type_error_as_a_shell_call_a_cargo_grant_covers() {
    // The toolchain that runs this test (its cargo and rustc), bound read-only in the box.
    let cargo = std::path::PathBuf::from(env!("CARGO"));
    let toolchain = cargo.parent().and_then(|bin| bin.parent()).unwrap();
    let entry = format!(
        r#"
[sandbox]
read_only = ["{toolchain}"]
[[diagnostics]]
workspace = "{{work}}"
extensions = ["rs"]
command = ["{cargo}", "check", "--quiet", "--offline", "--message-format=json", "--config", 'build.rustc="{bin}/rustc"']
runs_project_code = true
format = "json-cargo"
name = "cargo check"
timeout_ms = 300000
"#,
        toolchain = toolchain.display(),
        bin = toolchain.join("bin").display(),
        cargo = cargo.display(),
    );
    let grants = format!(
        "{}\n[[grant]]\nid = \"shell-cargo\"\ntool = \"shell\"\ncommands = [\"{}\"]\npaths = [\"{{work}}\"]\n",
        super::WORK,
        cargo.display()
    );
    let broker = BrokerProcess::start(&grants, &format!("{FAST}{entry}"));
    fs::create_dir_all(broker.work.join("src")).unwrap();
    fs::write(
        broker.work.join("Cargo.toml"),
        "[package]\nname = \"probe\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    let main = broker.work.join("src/main.rs");
    let answer = write(
        &mut client,
        1,
        &main,
        "fn main() {\n    let x: u32 = \"no\";\n}\n",
    );
    assert!(
        answer.contains("diagnostics (cargo check) for src/main.rs: "),
        "{answer}"
    );
    assert!(
        answer.contains("  src/main.rs:2: error: mismatched types"),
        "{answer}"
    );
    let records = records_of(&broker, checker_call(1));
    let types: Vec<&str> = records.iter().filter_map(|r| r["type"].as_str()).collect();
    assert_eq!(types, ["decided", "answered"], "{records:?}");
}
