//! The coding tools through the daemon: read before write, edit_file, and the walkers, with
//! grants on the groups read and write.

use std::fs;

use proto::{DenyReason, ToolResponse};
use testkit::{AgentClient, BrokerProcess};

use super::{FAST, content, denied, path_args};

/// The groups read and write on the work folder; the owner asked about every write, to show
/// that read before write refuses before anyone is asked.
const CODING: &str = r#"
[[grant]]
id = "code-read"
tool = "read"
paths = ["{work}"]
class = "private"
untrusted = false

[[grant]]
id = "code-write"
tool = ["write"]
paths = ["{work}"]
untrusted = false
on_untrusted = "allow"
approval = "ask"
"#;

fn edit_args(path: &std::path::Path, old: &str, new: &str) -> String {
    serde_json::json!({
        "path": path.display().to_string(),
        "edits": [{ "old_str": old, "new_str": new }]
    })
    .to_string()
}

#[test]
fn a_write_to_a_file_not_read_is_refused_before_the_owner_is_asked() {
    let broker = BrokerProcess::start(CODING, FAST);
    let file = broker.work.join("a.txt");
    fs::write(&file, "one\n").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    let refused = client
        .call(1, "edit_file", &edit_args(&file, "one", "two"))
        .unwrap();
    assert_eq!(denied(&refused), DenyReason::ReadBeforeWrite);
    let ToolResponse::Denied { reason } = &refused else {
        panic!("{refused:?}")
    };
    assert!(reason.model_text().contains("read it with read_file first"));
    // Nothing waits for the owner: the refusal came before the approval.
    let log = fs::read_to_string(broker.state.join("audit.jsonl")).unwrap();
    assert!(!log.contains("approval_requested"), "{log}");
    assert_eq!(fs::read_to_string(&file).unwrap(), "one\n");
}

#[test]
fn a_read_then_a_change_by_someone_else_refuses_the_write_until_read_again() {
    let broker = BrokerProcess::start(&CODING.replace("approval = \"ask\"\n", ""), FAST);
    let file = broker.work.join("a.txt");
    fs::write(&file, "one\n").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    let read = serde_json::json!({ "path": file.display().to_string(), "limit": 1 }).to_string();
    client.call(1, "read_file", &read).unwrap();
    let edited = client
        .call(2, "edit_file", &edit_args(&file, "one", "two"))
        .unwrap();
    assert!(content(&edited).contains("+two"), "{edited:?}");
    // The session's own edit counts as a read of what it left.
    let again = client
        .call(3, "edit_file", &edit_args(&file, "two", "three"))
        .unwrap();
    assert!(content(&again).contains("+three"), "{again:?}");
    fs::write(&file, "changed behind its back\n").unwrap();
    let refused = client
        .call(
            4,
            "write_file",
            &serde_json::json!({"path": file.display().to_string(), "content": "x"}).to_string(),
        )
        .unwrap();
    assert_eq!(denied(&refused), DenyReason::ReadBeforeWrite);
    client.call(5, "read_file", &path_args(&file)).unwrap();
    let written = client
        .call(
            6,
            "write_file",
            &serde_json::json!({"path": file.display().to_string(), "content": "x"}).to_string(),
        )
        .unwrap();
    assert!(
        matches!(written, ToolResponse::Result { .. }),
        "{written:?}"
    );
    // A new file needs no read.
    let new = broker.work.join("new.txt");
    let created = client
        .call(7, "edit_file", &edit_args(&new, "", "hi\n"))
        .unwrap();
    assert!(
        matches!(created, ToolResponse::Result { .. }),
        "{created:?}"
    );
}

#[test]
fn the_walkers_run_through_the_broker_and_are_listed_with_their_schemas() {
    let broker = BrokerProcess::start(CODING, FAST);
    fs::create_dir_all(broker.work.join("src")).unwrap();
    fs::write(broker.work.join("src/lib.rs"), "fn needle() {}\n").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    let work = broker.work.display().to_string();
    let grep = serde_json::json!({ "pattern": "needle", "path": work, "output_mode": "content" });
    let found = client.call(1, "grep", &grep.to_string()).unwrap();
    assert!(
        content(&found).ends_with(&format!("{work}/src/lib.rs:1:fn needle() {{}}")),
        "{found:?}"
    );
    let glob = serde_json::json!({ "pattern": "**/*.rs", "path": work });
    let globbed = client.call(2, "glob", &glob.to_string()).unwrap();
    assert!(
        content(&globbed).ends_with(&format!("{work}/src/lib.rs")),
        "{globbed:?}"
    );
    let list = serde_json::json!({ "path": work, "recursive": true });
    let listed = client.call(3, "list_files", &list.to_string()).unwrap();
    assert!(
        content(&listed).contains("src/lib.rs (15 bytes)"),
        "{listed:?}"
    );
    let Some(proto::BrokerFrame::Tools { tools }) = client.send(&proto::AgentFrame::ListTools {})
    else {
        panic!("no tools frame")
    };
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "read_file",
            "write_file",
            "edit_file",
            "list_files",
            "glob",
            "grep"
        ]
    );
    assert_eq!(tools[0], tools::fs::broker_read_file_schema());
    assert_eq!(tools[5], tools::search::grep_schema());
}
