//! Downstream tool names as strict model providers take them: a server behind the gateway
//! (written here on the official Python SDK) has a tool with a dot in its name, one whose
//! `__` spelling collides with it, and one too long; `bx mcp --catalog all` lists every name
//! matching `^[a-zA-Z0-9_-]{1,64}$`, a call by the listed name or by the owner's dotted name
//! (directly or through `call_tool`) reaches the same tool, and the approval and the audit log keep the dotted name.

use std::io::{BufRead, BufReader};
use std::time::Duration;

use proto::{OwnerReply, OwnerRequest};
use serde_json::{Value, json};
use testkit::{BrokerProcess, OwnerClient};

use super::{FAST, bx, call, call_tool, run, start};

/// The server: each tool says its own name.
const SERVER: &str = r#"
from mcp.server.fastmcp import FastMCP

mcp = FastMCP("names")

def add(name):
    def tool(text: str) -> str:
        return "ran " + name + ": " + text
    mcp.add_tool(tool, name=name, description="Says it is " + name + ".")

for name in ["read.text", "read_text", "echo", "l" * 70]:
    add(name)

mcp.run()
"#;

const LONG: &str = "llllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllll";

fn strict(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[test]
fn listed_downstream_names_fit_strict_providers_and_both_spellings_reach_the_same_tool() {
    let script = testkit::temp_dir();
    let folder = script.path().canonicalize().unwrap();
    std::fs::write(folder.join("names.py"), SERVER).unwrap();
    let venv = testkit::python::venv("BOXMAKER_MCP1_VENV", "/opt/boxmaker-mcp1");
    let mut read_only = testkit::python::python_folders(&venv);
    read_only.push(folder.display().to_string());
    let config = format!(
        "{FAST}\n[[mcp.servers]]\nname = \"names\"\ncommand = [{:?}, {:?}]\nread_only = {read_only:?}\nstart_ms = 60000\n",
        venv.join("bin/python").display().to_string(),
        folder.join("names.py").display().to_string(),
    );
    let box_grant = "[[grant]]\nid = \"names-box\"\nserver = \"names\"\npaths = [\"{work}\"]\n";
    let broker = BrokerProcess::start(box_grant, &config);

    let mut owner = OwnerClient::open(&broker.owner_socket());
    let Some(OwnerReply::Downstream { servers, .. }) =
        owner.send(&OwnerRequest::Downstream { hashes: Vec::new() })
    else {
        panic!("no downstream view: {}", broker.log());
    };
    let tools = &servers[0].tools;
    assert_eq!(tools.len(), 4, "{tools:?}\n{}", broker.log());
    let mut grants = box_grant.to_string();
    for (n, tool) in tools.iter().enumerate() {
        let ask = if tool.name == "names.echo" {
            "approval = \"ask\"\n"
        } else {
            ""
        };
        grants.push_str(&format!(
            "\n[[grant]]\nid = \"tool-{n}\"\ntool = {:?}\non_untrusted = \"allow\"\n{ask}pins = {{ {:?} = {:?} }}\n",
            tool.name, tool.name, tool.hash
        ));
    }
    broker.write_grants("grants.toml", &grants);
    assert!(broker.wait_for_log("grants reloaded", 1, Duration::from_secs(60)));

    // Every listed name matches the pattern and names one tool.
    let (answers, _) = run(
        &broker,
        "modern",
        &json!([{ "op": "list" }]),
        &["--catalog", "all"],
    );
    let listed: Vec<(String, Value)> = answers[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap().to_string(), t["title"].clone()))
        .collect();
    for (name, _) in &listed {
        assert!(strict(name), "{name} does not fit: {listed:?}");
    }
    let mut unique: Vec<&String> = listed.iter().map(|(n, _)| n).collect();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), listed.len(), "{listed:?}");
    // Each downstream tool is listed under a spelling of its own, titled with the owner's.
    let spelled = |dotted: &str| -> String {
        let found = listed.iter().find(|(_, title)| title == dotted);
        found
            .unwrap_or_else(|| panic!("{dotted}: {listed:?}"))
            .0
            .clone()
    };
    let dotted = [
        "names.read.text".to_string(),
        "names.read_text".to_string(),
        format!("names.{LONG}"),
    ];
    let spellings: Vec<String> = dotted.iter().map(|d| spelled(d)).collect();
    assert!(
        spellings[0].starts_with("names__read_text_"),
        "{spellings:?}"
    );
    assert!(
        spellings[1].starts_with("names__read_text_"),
        "{spellings:?}"
    );
    assert_eq!(spellings[2].len(), 64, "{spellings:?}");
    assert_eq!(spelled("names.echo"), "names__echo");

    // By either spelling, each call reaches the same tool.
    let mut plan = Vec::new();
    for (owners, listed) in dotted.iter().zip(&spellings) {
        plan.push(call(owners, json!({ "text": "dotted" })));
        plan.push(call(listed, json!({ "text": "listed" })));
    }
    // Through the core's call_tool too, by either spelling.
    plan.push(call_tool(&spellings[0], json!({ "text": "core" })));
    plan.push(call_tool(&dotted[0], json!({ "text": "core" })));
    let (answers, _) = run(&broker, "modern", &Value::Array(plan), &[]);
    for answer in &answers[6..8] {
        assert!(
            answer["text"]
                .as_str()
                .unwrap()
                .contains("ran read.text: core"),
            "{answer}"
        );
    }
    for (n, owners) in dotted.iter().enumerate() {
        let tool = owners.trim_start_matches("names.");
        for (answer, how) in [(&answers[2 * n], "dotted"), (&answers[2 * n + 1], "listed")] {
            assert_eq!(answer["isError"], false, "{owners} {how}: {answer}");
            assert!(
                answer["text"]
                    .as_str()
                    .unwrap()
                    .contains(&format!("ran {tool}: {how}")),
                "{owners} {how}: {answer}"
            );
        }
    }

    // A call by the listed name waits for the owner under the dotted name.
    let mut child = start(
        &broker,
        "modern",
        &json!([call("names__echo", json!({ "text": "asked" }))]),
        &[],
    );
    let pending = owner.wait_pending();
    assert_eq!(pending.tool, "names.echo");
    let approvals = bx(&broker, &["approvals"]);
    assert!(
        approvals.stdout.contains("names.echo"),
        "{}",
        approvals.stdout
    );
    assert!(
        !approvals.stdout.contains("names__"),
        "{}",
        approvals.stdout
    );
    let approved = bx(&broker, &["approve", &pending.approval.0.to_string()]);
    assert_eq!(approved.code, 0, "{}", approved.stderr);
    let lines: Vec<Value> = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    assert!(child.wait().unwrap().success());
    let result = lines.iter().find(|l| l.get("isError").is_some()).unwrap();
    assert!(
        result["text"].as_str().unwrap().contains("ran echo: asked"),
        "{result}"
    );

    // The audit log keeps the owner's spelling.
    let audit = std::fs::read_to_string(broker.state.join(proto::dirs::AUDIT_FILE)).unwrap();
    for owners in dotted.iter().chain([&"names.echo".to_string()]) {
        assert!(
            audit.contains(&format!("\"tool\":\"{owners}\"")),
            "{owners}: {audit}"
        );
    }
    assert!(!audit.contains("names__"), "{audit}");
}
