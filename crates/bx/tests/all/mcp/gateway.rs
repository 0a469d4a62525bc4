//! A third-party MCP server behind the broker's gateway, reached by an MCP client through
//! `bx mcp`: the official Python SDK calls PyPI `mcp-server-git` (both installed by
//! `scripts/test-deps`), which runs in its box, through `--catalog all` by its own name and
//! through the core's `call_tool`; its tools carry no annotations of their own.

use std::process::Command;
use std::time::Duration;

use proto::{OwnerReply, OwnerRequest};
use serde_json::json;
use testkit::{BrokerProcess, OwnerClient};

use super::{FAST, call, call_tool, run};

#[test]
fn an_mcp_client_calls_a_downstream_servers_tool_through_bx_mcp() {
    let config = format!(
        "{FAST}\n{}",
        testkit::python::mcp_git_server("start_ms = 60000")
    );
    let box_grant = "[[grant]]\nid = \"git-box\"\nserver = \"git\"\npaths = [\"{work}\"]\n";
    let broker = BrokerProcess::start(box_grant, &config);
    let repo = broker.work.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let init = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&repo)
        .status()
        .unwrap();
    assert!(init.success());
    std::fs::write(repo.join("untracked-file"), "x\n").unwrap();

    let mut owner = OwnerClient::open(&broker.owner_socket());
    let Some(OwnerReply::Downstream { servers, .. }) =
        owner.send(&OwnerRequest::Downstream { hashes: Vec::new() })
    else {
        panic!("no downstream view: {}", broker.log());
    };
    let status = servers[0]
        .tools
        .iter()
        .find(|t| t.name == "git.git_status")
        .unwrap();
    broker.write_grants(
        "grants.toml",
        &format!(
            "{box_grant}\n[[grant]]\nid = \"git-status\"\ntool = \"git.git_status\"\non_untrusted = \"allow\"\npins = {{ \"git.git_status\" = {:?} }}\n",
            status.hash
        ),
    );
    assert!(broker.wait_for_log("grants reloaded", 1, Duration::from_secs(60)));

    let arguments = json!({ "repo_path": repo });
    let plan = json!([{ "op": "list" }, call("git.git_status", arguments.clone())]);
    let (answers, _) = run(&broker, "modern", &plan, &["--catalog", "all"]);
    let tools = answers[0]["tools"].as_array().unwrap();
    let listed = tools
        .iter()
        .find(|t| t["name"] == "git__git_status")
        .unwrap();
    assert_eq!(listed["title"], "git.git_status", "{listed}");
    assert!(listed.get("annotations").is_none(), "{listed}");
    assert!(
        !tools
            .iter()
            .any(|t| t["name"] == "git__git_commit" || t["name"] == "git.git_commit"),
        "{tools:?}"
    );
    let result = &answers[1];
    assert_eq!(result["isError"], false, "{result}");
    assert!(
        result["text"].as_str().unwrap().contains("untracked-file"),
        "{result}"
    );
    assert_eq!(result["meta"]["boxmaker/untrusted"], true, "{result}");

    // Through the core, as a model that found it with find_tool would call it.
    let plan = json!([call_tool("git.git_status", arguments)]);
    let (answers, _) = run(&broker, "v1", &plan, &[]);
    assert!(
        answers[0]["text"]
            .as_str()
            .unwrap()
            .contains("untracked-file"),
        "{}",
        answers[0]
    );
    let audit = std::fs::read_to_string(broker.state.join("audit.jsonl")).unwrap();
    let audited = audit.matches("\"tool\":\"git.git_status\"").count();
    assert!(audited >= 2, "{audit}");
}
