//! A model's mistakes get a way forward: arguments that do not fit a tool fail with the
//! argument named and what it must be (a failure the model can correct, not a denial), and a
//! path that does not exist fails with the nearest existing folder and a close name, only from
//! what the grants let the call reach.

use std::fs;

use proto::{DenyReason, ToolResponse};
use testkit::{AgentClient, BrokerProcess};

use super::gateway::failed;
use super::{FAST, WORK, denied, path_args};

/// Read, write, edit and walk in the work folder; the folder `secrets` is denied to reads.
const EVERY_FILE_TOOL: &str = r#"
[[grant]]
id = "read-work"
tool = "read_file"
paths = ["{work}"]
class = "private"
untrusted = false

[[grant]]
id = "deny-secrets"
tool = "read_file"
paths = ["{work}/secrets"]
deny = true

[[grant]]
id = "edit-work"
tool = "edit_file"
paths = ["{work}"]
untrusted = false
on_untrusted = "allow"

[[grant]]
id = "list-work"
tool = "list_files"
paths = ["{work}"]
untrusted = false

[[grant]]
id = "glob-work"
tool = "glob"
paths = ["{work}"]
untrusted = false

[[grant]]
id = "grep-work"
tool = "grep"
paths = ["{work}"]
untrusted = false
"#;

/// The failure's text as the model reads it (after the result header, when it has one).
fn failure_text(response: &ToolResponse) -> String {
    let message = failed(response);
    match message.split_once('\n') {
        Some((header, body)) if header.starts_with('{') => body.to_string(),
        _ => message.to_string(),
    }
}

#[test]
fn arguments_that_do_not_fit_fail_naming_the_argument_and_what_it_must_be() {
    let broker = BrokerProcess::start(WORK, FAST);
    let file = broker.work.join("a.txt");
    fs::write(&file, "a\n").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    let cases: [(&str, String, &str); 9] = [
        (
            "read_file",
            "{}".to_string(),
            "argument `path` is missing: it must be a string (The absolute path of the file.)",
        ),
        (
            "read_file",
            format!(r#"{{"path":{:?},"file":"a.txt"}}"#, file),
            "argument `file` is not one of read_file's arguments; read_file takes `path`, `offset`, `limit`",
        ),
        (
            "read_file",
            r#"{"path":5}"#.to_string(),
            "argument `path` must be a string; got 5",
        ),
        (
            "read_file",
            format!(r#"{{"path":{:?},"limit":"2"}}"#, file),
            "argument `limit` must be an integer; got \"2\"",
        ),
        (
            "shell",
            r#"{"command":"true","timeout_secs":0}"#.to_string(),
            "argument `timeout_secs` must be at least 1; got 0",
        ),
        (
            "web_search",
            r#"{"query":"x","max_results":11}"#.to_string(),
            "argument `max_results` must be at most 10; got 11",
        ),
        (
            "edit_file",
            format!(
                r#"{{"path":{:?},"edits":[{{"old_str":1,"new_str":"b"}}]}}"#,
                file
            ),
            "argument `edits[0].old_str` must be a string; got 1",
        ),
        (
            "read_file",
            "[1]".to_string(),
            "the arguments of read_file must be a JSON object of named arguments; got an array",
        ),
        (
            "edit_file",
            format!(r#"{{"path":{:?},"edits":[]}}"#, file),
            "the arguments do not fit edit_file: edits is empty: give at least one edit",
        ),
    ];
    for (id, (tool, arguments, expected)) in cases.iter().enumerate() {
        let response = client.call(id as u64 + 1, tool, arguments).unwrap();
        assert_eq!(failure_text(&response), *expected, "{tool} {arguments}");
    }
    // Not JSON at all: what the parser said.
    let broken = client.call(20, "read_file", "{\"path\":").unwrap();
    assert!(
        failure_text(&broken)
            .starts_with("the arguments of read_file must be a JSON object; they are not JSON ("),
        "{broken:?}"
    );
    // Each is on the record as a failure, with the arguments as the model sent them.
    let log = fs::read_to_string(broker.state.join("audit.jsonl")).unwrap();
    assert_eq!(log.matches("\"kind\":\"failed\"").count(), 10, "{log}");
    assert!(
        log.contains("argument `timeout_secs` must be at least 1"),
        "{log}"
    );
    assert_eq!(super::audit_verify(&broker).0, 0);
    // What the decision refuses is still a denial: a tool that does not exist, a path no grant
    // covers.
    let unknown = client.call(21, "launch_rockets", "{}").unwrap();
    assert_eq!(denied(&unknown), DenyReason::InvalidArguments);
    let ungranted = client
        .call(
            22,
            "read_file",
            &path_args(std::path::Path::new("/etc/hostname")),
        )
        .unwrap();
    assert_eq!(denied(&ungranted), DenyReason::NoGrant);
}

#[test]
fn a_relative_path_fails_naming_the_argument_and_where_it_would_be_in_the_granted_folder() {
    let broker = BrokerProcess::start(WORK, FAST);
    let mut client = AgentClient::open(&broker.socket(), None);
    let response = client
        .call(1, "read_file", r#"{"path":"src/main.rs"}"#)
        .unwrap();
    let work = broker.work.display();
    assert_eq!(
        failure_text(&response),
        format!(
            "argument `path` must be an absolute path; got `src/main.rs` (relative to the granted folder {work}: {work}/src/main.rs)"
        )
    );
    // A shell call's `cwd` too; no grant of shell: no folder to say it would be in.
    let response = client
        .call(2, "shell", r#"{"command":"ls","cwd":"src"}"#)
        .unwrap();
    assert_eq!(
        failure_text(&response),
        "argument `cwd` must be an absolute path; got `src`"
    );
    let write = client
        .call(3, "write_file", r#"{"path":"./notes.md","content":"x"}"#)
        .unwrap();
    assert!(
        failure_text(&write)
            .starts_with("argument `path` must be an absolute path; got `./notes.md`"),
        "{write:?}"
    );
}

#[test]
fn a_path_that_does_not_exist_fails_with_the_nearest_folder_and_a_close_name() {
    let broker = BrokerProcess::start(EVERY_FILE_TOOL, FAST);
    let work = broker.work.clone();
    fs::create_dir_all(work.join("src")).unwrap();
    fs::write(work.join("src/main.rs"), "fn main() {}\n").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    let shown = |p: &str| work.join(p).display().to_string();
    // A file name typed wrong, in a folder that exists.
    let read = client
        .call(1, "read_file", &path_args(&work.join("src/mian.rs")))
        .unwrap();
    assert_eq!(
        failure_text(&read),
        format!(
            "{} does not exist; the nearest existing folder is {}; did you mean {}?",
            shown("src/mian.rs"),
            shown("src"),
            shown("src/main.rs")
        )
    );
    // A folder name typed wrong: the same file in the folder meant.
    let edit = client
        .call(
            2,
            "edit_file",
            &serde_json::json!({"path": work.join("scr/main.rs"), "edits": [{"old_str": "a", "new_str": "b"}]})
                .to_string(),
        )
        .unwrap();
    assert!(
        failure_text(&edit).ends_with(&format!(
            "; the nearest existing folder is {}; did you mean {}?",
            work.display(),
            shown("src/main.rs")
        )),
        "{edit:?}"
    );
    // The walkers, on a folder that does not exist.
    for (id, tool, arguments) in [
        (
            3,
            "list_files",
            serde_json::json!({"path": work.join("scr")}),
        ),
        (
            4,
            "glob",
            serde_json::json!({"path": work.join("scr"), "pattern": "*.rs"}),
        ),
        (
            5,
            "grep",
            serde_json::json!({"path": work.join("scr"), "pattern": "main"}),
        ),
    ] {
        let response = client.call(id, tool, &arguments.to_string()).unwrap();
        assert!(
            failure_text(&response).ends_with(&format!("; did you mean {}?", shown("src"))),
            "{tool}: {response:?}"
        );
    }
    // Nothing close: the nearest folder alone.
    let far = client
        .call(6, "read_file", &path_args(&work.join("src/lib/other.rs")))
        .unwrap();
    assert!(
        failure_text(&far).ends_with(&format!(
            "; the nearest existing folder is {}",
            shown("src")
        )),
        "{far:?}"
    );
}

#[test]
fn a_missing_path_names_nothing_the_grants_keep_from_the_call() {
    let broker = BrokerProcess::start(EVERY_FILE_TOOL, FAST);
    let work = broker.work.clone();
    fs::create_dir_all(work.join("secrets")).unwrap();
    fs::write(work.join("secrets/key.pem"), "private\n").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    // `secret` is one letter from `secrets`, which a deny grant keeps from read_file.
    let response = client
        .call(1, "read_file", &path_args(&work.join("secret")))
        .unwrap();
    let text = failure_text(&response);
    assert!(!text.contains("secrets"), "{text}");
    assert!(!text.contains("did you mean"), "{text}");
    assert!(
        text.ends_with(&format!(
            "; the nearest existing folder is {}",
            work.display()
        )),
        "{text}"
    );

    // A grant by pattern: the folder above the missing path is not granted, so nothing is named.
    let only_notes = r#"
[[grant]]
id = "read-md"
tool = "read_file"
paths = ["{work}/**/*.md"]
untrusted = false
"#;
    let broker = BrokerProcess::start(only_notes, FAST);
    let work = broker.work.clone();
    fs::create_dir_all(work.join("notes")).unwrap();
    fs::write(work.join("notes/a.md"), "a\n").unwrap();
    fs::write(work.join("private.txt"), "p\n").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    let response = client
        .call(1, "read_file", &path_args(&work.join("nots/a.md")))
        .unwrap();
    let text = failure_text(&response);
    assert_eq!(
        text,
        format!("{} does not exist", work.join("nots/a.md").display())
    );
}

#[test]
fn every_argument_a_tools_schema_lists_is_one_its_parser_takes_and_no_other() {
    use brokerd::args::{ToolName, parse};
    for tool in ToolName::KNOWN.iter().chain(&ToolName::JOB_COMPANIONS) {
        let schema = tool.schema();
        let listed: Vec<&String> = schema.parameters["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        for key in &listed {
            let arguments = serde_json::json!({ *key: null }).to_string();
            let error = parse(*tool, &arguments).map(|_| ()).unwrap_err().detail();
            assert!(
                !error.contains("unknown"),
                "{} lists {key} and its parser refuses it: {error}",
                tool.as_str()
            );
        }
        // The parser names what it takes when it refuses a key: the same as the schema.
        let error = parse(*tool, r#"{"zz-not-an-argument":0}"#)
            .map(|_| ())
            .unwrap_err()
            .detail();
        if let Some(expected) = error.split("expected one of ").nth(1) {
            let mut taken: Vec<&str> = expected
                .split(", ")
                .map(|k| k.trim_matches(|c: char| c == '`' || c.is_whitespace()))
                .map(|k| k.split('`').next().unwrap())
                .collect();
            let mut listed: Vec<&str> = listed.iter().map(|k| k.as_str()).collect();
            taken.sort_unstable();
            listed.sort_unstable();
            assert_eq!(taken, listed, "{}: {error}", tool.as_str());
        }
    }
}
