//! Each command against a running broker and against none, with bad input.

use std::fs;

use proto::ToolResponse;
use testkit::{AgentClient, BrokerProcess, OwnerClient};

use super::{bx, bx_in};

const ASK_WRITE: &str = r#"
[[grant]]
id = "ask-write"
tool = "write_file"
paths = ["{work}"]
untrusted = false
approval = "ask"

[[grant]]
id = "questions"
tool = "ask"
"#;

#[test]
fn with_no_broker_the_socket_commands_exit_3_and_say_what_to_do() {
    let root = testkit::temp_dir();
    let (config, state, runtime) = (
        root.path().join("c"),
        root.path().join("s"),
        root.path().join("r"),
    );
    for args in [
        &["approvals"][..],
        &["approve", "1"],
        &["refuse", "1"],
        &["answer", "1", "yes"],
        &["status"],
        &["watch"],
    ] {
        let ran = bx_in(&config, &state, &runtime, args);
        assert_eq!(ran.code, 3, "{args:?}: {}", ran.stderr);
        assert!(
            ran.stderr.contains("no broker is running on") && ran.stderr.contains("owner.sock"),
            "{args:?}: {}",
            ran.stderr
        );
    }
    // The commands that need no broker work without one.
    let ran = bx_in(&config, &state, &runtime, &["grants", "check"]);
    assert_eq!(ran.code, 0, "{}", ran.stdout);
    let ran = bx_in(&config, &state, &runtime, &["audit", "verify"]);
    assert_eq!(ran.code, 1);
    assert!(
        ran.stderr.contains("there is no audit log"),
        "{}",
        ran.stderr
    );
}

#[test]
fn bad_usage_exits_2() {
    let broker = BrokerProcess::start("", "");
    assert_eq!(bx(&broker, &["approve", "three"]).code, 2);
    assert_eq!(bx(&broker, &["frobnicate"]).code, 2);
    assert_eq!(bx(&broker, &["answer", "1", "  "]).code, 2);
    let help = bx(&broker, &["--help"]);
    assert_eq!(help.code, 0);
    assert!(
        help.stdout
            .contains("Exit status: 0 done, 1 refused or failed, 2 bad usage, 3 no broker running")
    );
    assert!(
        help.stdout.contains("Owner power rests on the uid"),
        "{}",
        help.stdout
    );
}

#[test]
fn approvals_approve_and_an_approval_answered_twice() {
    let broker = BrokerProcess::start(ASK_WRITE, "");
    let target = broker.work.join("a.txt");
    let mut client = AgentClient::open(&broker.socket(), None);
    let args = serde_json::json!({ "path": target, "content": "x" }).to_string();
    let id = client.call_pending(1, "write_file", &args);
    let listed = bx(&broker, &["approvals"]);
    assert_eq!(listed.code, 0);
    assert!(
        listed
            .stdout
            .contains(&format!("approval {id}: write_file")),
        "{}",
        listed.stdout
    );
    assert!(
        listed
            .stdout
            .contains("grant ask-write says approval = \"ask\""),
        "{}",
        listed.stdout
    );
    let json = bx(&broker, &["approvals", "--json"]);
    let views: Vec<proto::PendingView> = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(views.len(), 1);
    assert_eq!(views[0].arguments, args);
    let unknown = bx(&broker, &["approve", "999"]);
    assert_eq!(unknown.code, 1);
    assert!(
        unknown.stderr.contains("there is no approval 999"),
        "{}",
        unknown.stderr
    );
    let first = bx(&broker, &["approve", &id.to_string()]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(matches!(
        client.finish_call().1,
        Ok(ToolResponse::Result { .. })
    ));
    let twice = bx(&broker, &["refuse", &id.to_string()]);
    assert_eq!(twice.code, 1);
    assert!(
        twice.stderr.contains(&format!(
            "approval {id} is no longer pending: it was approved"
        )),
        "{}",
        twice.stderr
    );
    assert!(target.exists());
    let nothing = bx(&broker, &["approvals"]);
    assert!(
        nothing.stdout.contains("Nothing waits for you."),
        "{}",
        nothing.stdout
    );
}

#[test]
fn answer_gives_the_model_the_owners_text_and_refuses_a_call_approval() {
    let broker = BrokerProcess::start(ASK_WRITE, "");
    let mut client = AgentClient::open(&broker.socket(), None);
    let id = client.call_pending(
        1,
        "ask",
        r#"{"question":"Which branch?","choices":["main","dev"]}"#,
    );
    let listed = bx(&broker, &["approvals"]);
    assert!(
        listed.stdout.contains("question:  Which branch?"),
        "{}",
        listed.stdout
    );
    assert!(
        listed.stdout.contains("choice 2:  dev"),
        "{}",
        listed.stdout
    );
    let ran = bx(&broker, &["answer", &id.to_string(), "dev, please"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let ToolResponse::Result { content, .. } = client.finish_call().1.unwrap() else {
        panic!()
    };
    assert!(content.ends_with("\ndev, please"), "{content}");
    let write = serde_json::json!({ "path": broker.work.join("b"), "content": "b" }).to_string();
    let call = client.call_pending(2, "write_file", &write);
    let wrong = bx(&broker, &["answer", &call.to_string(), "yes"]);
    assert_eq!(wrong.code, 1);
    assert!(wrong.stderr.contains("not a question"), "{}", wrong.stderr);
}

#[test]
fn model_controlled_arguments_are_printed_with_escapes_and_bidi_controls_made_visible() {
    let broker = BrokerProcess::start(ASK_WRITE, "");
    let mut client = AgentClient::open(&broker.socket(), None);
    let hostile = format!("{}/a\u{1b}[2J\u{202e}txt.exe", broker.work.display());
    let args = serde_json::json!({ "path": hostile, "content": "\u{1b}]0;owned\u{7}\r\nrm -rf ~" })
        .to_string();
    client.call_pending(1, "write_file", &args);
    // A question is shown parsed: its escapes are the raw characters themselves.
    let mut asker = AgentClient::open(&broker.socket(), None);
    let question =
        serde_json::json!({ "question": "Proceed?\u{1b}[1A\u{1b}[2K\u{202e}yes" }).to_string();
    asker.call_pending(1, "ask", &question);
    for listing in [bx(&broker, &["approvals"]).stdout, watch_until(&broker, 2)] {
        assert!(!listing.contains('\u{1b}'), "{listing:?}");
        assert!(!listing.contains('\u{202e}'), "{listing:?}");
        assert!(!listing.contains('\u{7}'), "{listing:?}");
        assert!(
            listing.contains("\\u001b[2J\\u{202e}txt.exe"),
            "{listing:?}"
        );
        assert!(
            listing.contains("Proceed?\\x1b[1A\\x1b[2K\\u{202e}yes"),
            "{listing:?}"
        );
    }
}

/// `bx watch` until it has printed `pending` pending approvals.
fn watch_until(broker: &BrokerProcess, pending: usize) -> String {
    use std::io::{BufRead, BufReader};
    let mut child = std::process::Command::new(testkit::binary("bx").unwrap())
        .arg("--runtime-dir")
        .arg(&broker.runtime)
        .arg("watch")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    while seen.matches("labels:").count() < pending {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap() == 0 {
            break;
        }
        seen.push_str(&line);
    }
    let _ = child.kill();
    let _ = child.wait();
    seen
}

#[test]
fn grants_check_names_file_and_line_and_preset_refuses_to_overwrite() {
    let broker = BrokerProcess::start("", "");
    fs::write(broker.work.join("Cargo.toml"), "").unwrap();
    let ran = bx(
        &broker,
        &[
            "grants",
            "preset",
            "coding",
            "--workspace",
            broker.work.to_str().unwrap(),
        ],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let written = fs::read_to_string(broker.config.join("grants/coding.toml")).unwrap();
    // This machine has the full box (bubblewrap), so the preset offers shell, and says which
    // toolchain folders brokerd.toml should bind read-only for it.
    assert!(written.contains("tool = \"shell\""), "{written}");
    assert!(
        ran.stdout
            .contains("shell's box sees only the workspace and the system"),
        "{}",
        ran.stdout
    );
    assert!(written.contains("on_untrusted = \"allow\""));
    let check = bx(&broker, &["grants", "check"]);
    assert_eq!(check.code, 0, "{}", check.stdout);
    assert!(
        check.stdout.contains("grant(s), no problems"),
        "{}",
        check.stdout
    );
    let again = bx(
        &broker,
        &[
            "grants",
            "preset",
            "coding",
            "--workspace",
            broker.work.to_str().unwrap(),
        ],
    );
    assert_eq!(again.code, 1);
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);
    broker.write_grants(
        "broken.toml",
        "[[grant]]\nid = \"x\"\ntool = \"nonsense\"\n",
    );
    let check = bx(&broker, &["grants", "check"]);
    assert_eq!(check.code, 1);
    assert!(
        check
            .stdout
            .contains("broken.toml:3: unknown tool \"nonsense\""),
        "{}",
        check.stdout
    );
    // The running broker reports the same problem.
    assert!(broker.wait_for_log(
        "grants reloaded with problems",
        1,
        std::time::Duration::from_secs(10)
    ));
    let status = bx(&broker, &["status"]);
    assert_eq!(status.code, 0);
    assert!(status.stdout.contains("broken.toml:3"), "{}", status.stdout);
    assert!(status.stdout.contains("walls:"), "{}", status.stdout);
}

#[test]
fn audit_verify_checks_the_chain_through_the_ledger() {
    let broker = BrokerProcess::start("", "");
    let mut client = AgentClient::open(&broker.socket(), None);
    let _ = client.call(1, "read_file", r#"{"path":"/etc/hostname"}"#);
    let ran = bx(&broker, &["audit", "verify"]);
    assert_eq!(ran.code, 0, "{}", ran.stdout);
    assert!(ran.stdout.contains("the chain holds"), "{}", ran.stdout);
    let _ = OwnerClient::open(&broker.owner_socket());
}
