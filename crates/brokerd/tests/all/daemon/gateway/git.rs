//! PyPI `mcp-server-git` (installed by `scripts/test-deps`) behind the gateway: its tools are
//! listed once pinned, a granted one works on a repository in its box's folder and is audited,
//! an ungranted one is refused, and a repository outside the grant is out of its reach.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use proto::DenyReason;
use testkit::BrokerProcess;

use super::{catalog, content, denied, failed, owner_view};

/// A repository with one commit of `file` and a change to it not staged.
fn repository(at: &Path) {
    std::fs::create_dir_all(at).unwrap();
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(at)
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(at.join("file"), "one\n").unwrap();
    git(&["add", "file"]);
    git(&["commit", "-q", "-m", "first"]);
    std::fs::write(at.join("file"), "one\ntwo\n").unwrap();
}

#[test]
fn mcp_server_git_works_on_its_granted_repository_and_nowhere_else() {
    let config = format!(
        "{}\n{}",
        super::super::FAST,
        testkit::python::mcp_git_server("call_ms = 20000\nstart_ms = 60000")
    );
    let box_grant = "[[grant]]\nid = \"git-box\"\nserver = \"git\"\npaths = [\"{work}\"]\n";
    let broker = BrokerProcess::start(box_grant, &config);
    let repo = broker.work.join("repo");
    repository(&repo);
    let outside_root = testkit::temp_dir();
    let outside = outside_root.path().canonicalize().unwrap().join("other");
    repository(&outside);

    let (servers, _) = owner_view(&broker, &[]);
    let git = servers.iter().find(|s| s.name == "git").unwrap();
    assert_eq!(git.error, None, "{}", broker.log());
    let names: Vec<&str> = git.tools.iter().map(|t| t.name.as_str()).collect();
    for name in ["git.git_status", "git.git_diff_unstaged", "git.git_commit"] {
        assert!(names.contains(&name), "{names:?}");
    }
    let pin = |name: &str| {
        let tool = git.tools.iter().find(|t| t.name == name).unwrap();
        format!("{:?} = {:?}", tool.name, tool.hash)
    };
    let grants = format!(
        "{box_grant}\n[[grant]]\nid = \"git-read\"\ntool = [\"git.git_status\", \"git.git_diff_unstaged\"]\non_untrusted = \"allow\"\npins = {{ {}, {} }}\n",
        pin("git.git_status"),
        pin("git.git_diff_unstaged")
    );
    broker.write_grants("grants.toml", &grants);
    assert!(broker.wait_for_log("grants reloaded", 1, Duration::from_secs(60)));

    let mut client = testkit::AgentClient::open(&broker.socket(), None);
    let listed: Vec<String> = catalog(&mut client).into_iter().map(|t| t.name).collect();
    assert!(listed.contains(&"git.git_status".to_string()), "{listed:?}");
    assert!(
        !listed.contains(&"git.git_commit".to_string()),
        "{listed:?}"
    );

    let status = serde_json::json!({ "repo_path": repo }).to_string();
    let response = client.call(1, "git.git_status", &status).unwrap();
    let text = content(&response);
    assert!(text.contains("file"), "{text}");
    let diff = client.call(2, "git.git_diff_unstaged", &status).unwrap();
    assert!(content(&diff).contains("+two"), "{diff:?}");

    let commit = serde_json::json!({ "repo_path": repo, "message": "m" }).to_string();
    assert_eq!(
        denied(&client.call(3, "git.git_commit", &commit).unwrap()),
        DenyReason::NoGrant
    );

    // A repository outside the box's folder does not exist for the server.
    let elsewhere = serde_json::json!({ "repo_path": outside }).to_string();
    let response = client.call(4, "git.git_status", &elsewhere).unwrap();
    let message = failed(&response);
    assert!(!message.contains("Changes not staged"), "{message}");

    let audit = std::fs::read_to_string(broker.state.join("audit.jsonl")).unwrap();
    assert!(
        audit.contains("\"git.git_status\""),
        "the call is not in the audit log"
    );
    let (code, verified) = super::super::audit_verify(&broker);
    assert_eq!(code, 0, "{verified}");
}
