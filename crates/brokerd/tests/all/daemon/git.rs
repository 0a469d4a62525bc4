//! The git tools through the daemon: `git_status` and `git_diff` in a box holding the granted
//! folder, listed by the catalog; `git_clone` over https from the testkit's TLS server (a bare
//! repository served by git's dumb HTTP protocol, the test CA handed to git), its result
//! untrusted and its header naming where it ran; a `file://` URL and a destination in
//! boxmaker's folders refused.

use std::path::Path;

use proto::{DenyReason, ToolResponse};
use testkit::tls_server::{TestCa, TlsResponse, TlsServer};
use testkit::{AgentClient, BrokerProcess};

use super::{FAST, content, denied, git};

const GIT: &str = r#"
[[grant]]
id = "git-look"
tool = ["git_status", "git_diff"]
paths = ["{work}"]
untrusted = false

[[grant]]
id = "git-clone"
tool = "git_clone"
hosts = ["localhost:{port}"]
paths = ["{work}"]
untrusted = false
on_untrusted = "allow"
"#;

fn repository(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.email", "test@example.com"]);
    git(dir, &["config", "user.name", "Test"]);
    std::fs::write(dir.join("readme.md"), "hello from the server\n").unwrap();
    git(dir, &["add", "readme.md"]);
    git(dir, &["commit", "-q", "-m", "first"]);
}

fn header(response: &ToolResponse) -> (serde_json::Value, String) {
    let (header, body) = content(response).split_once('\n').unwrap();
    (serde_json::from_str(header).unwrap(), body.to_string())
}

#[test]
fn git_status_and_git_diff_run_in_a_box_and_are_listed() {
    let broker = BrokerProcess::start(&GIT.replace("{port}", "443"), FAST);
    let repo = broker.work.join("app");
    repository(&repo);
    std::fs::write(repo.join("readme.md"), "hello from the server\nchanged\n").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    let Some(proto::BrokerFrame::Tools { tools }) = client.send(&proto::AgentFrame::ListTools {})
    else {
        panic!("no tools frame")
    };
    for name in ["git_status", "git_diff", "git_clone"] {
        assert!(tools.iter().any(|t| t.name == name), "{name}: {tools:?}");
    }
    let args = serde_json::json!({ "path": broker.work }).to_string();
    let status = client.call(1, "git_status", &args).unwrap();
    let (fields, body) = header(&status);
    assert_eq!(fields["repository"], repo.display().to_string());
    assert!(
        super::walls(&broker).as_str().starts_with("bubblewrap"),
        "{fields}"
    );
    assert!(body.contains("modified:   readme.md"), "{body}");
    let diff = client.call(2, "git_diff", &args).unwrap();
    let (fields, body) = header(&diff);
    assert_eq!(fields["exit_code"], 0, "{body}");
    assert!(body.contains("+changed"), "{body}");
    let ToolResponse::Result { untrusted, .. } = &diff else {
        unreachable!()
    };
    assert!(!untrusted, "git_diff takes the grant's labels");
    let escape = serde_json::json!({ "path": broker.work, "paths": ["../x"] }).to_string();
    let escaping = client.call(3, "git_diff", &escape).unwrap();
    assert!(
        matches!(&escaping, ToolResponse::Failed { message } if message.contains("../x")),
        "{escaping:?}"
    );
}

#[test]
fn git_clone_over_https_lands_in_the_granted_folder_untrusted() {
    let ca = TestCa::new("boxmaker git test CA");
    let server = TlsServer::start(&ca.issue(&["localhost"])).unwrap();
    let source = tempfile::tempdir().unwrap();
    repository(&source.path().join("source"));
    let bare = source.path().join("repo.git");
    git(
        source.path(),
        &["clone", "-q", "--bare", "source", bare.to_str().unwrap()],
    );
    git(&bare, &["update-server-info"]);
    server.route_folder("/repo.git", &bare);
    server.route(
        "/repo.git/info/refs?service=git-upload-pack",
        TlsResponse::ok("text/plain", std::fs::read(bare.join("info/refs")).unwrap()),
    );
    let roots = source.path().join("ca.pem");
    std::fs::write(&roots, ca.cert_pem()).unwrap();
    let broker = BrokerProcess::start_with_env(
        &GIT.replace("{port}", &server.port().to_string()),
        FAST,
        &[("BOXMAKER_EXTRA_ROOTS", roots.to_str().unwrap())],
    );
    let mut client = AgentClient::open(&broker.socket(), None);
    let destination = broker.work.join("clone");
    let url = server.url("localhost", "/repo.git");
    let args = serde_json::json!({ "url": url, "path": destination }).to_string();
    let response = client.call(1, "git_clone", &args).unwrap();
    let ToolResponse::Result { untrusted, .. } = &response else {
        panic!("not a result: {response:?}");
    };
    assert!(untrusted, "a clone is untrusted whatever the grant says");
    let (fields, _) = header(&response);
    assert_eq!(fields["address"], "127.0.0.1");
    let port = server.port();
    assert_eq!(
        super::walls(&broker).as_str(),
        format!(
            "bubblewrap: git sees only the grant's folders (read-write) and a read-only system; protected folders masked; Landlock fully enforced; network: only localhost:{port}, through the broker's proxy, each connection checked again there; every capability dropped; https only, no redirect followed"
        ),
        "{fields}"
    );
    assert_eq!(fields["containment"], "bubblewrap");
    // git reached the server through the box's proxy, which logs each connection.
    assert!(
        broker.log().contains("proxy: connected"),
        "{}",
        broker.log()
    );
    assert_eq!(
        std::fs::read_to_string(destination.join("readme.md")).unwrap(),
        "hello from the server\n"
    );
    let file = serde_json::json!({ "url": format!("file://{}", bare.display()), "path": broker.work.join("f") });
    let not_https = client.call(2, "git_clone", &file.to_string()).unwrap();
    assert!(
        matches!(&not_https, ToolResponse::Failed { message } if message.starts_with("the arguments do not fit git_clone: ")),
        "{not_https:?}"
    );
    let protected = serde_json::json!({ "url": url, "path": broker.state.join("clone") });
    assert_eq!(
        denied(&client.call(3, "git_clone", &protected.to_string()).unwrap()),
        DenyReason::ProtectedPath
    );
    assert!(!broker.state.join("clone").exists());
}
