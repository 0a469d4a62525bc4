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

/// Reading on a project inside a git work tree whose root is not granted, with deny grants
/// hiding the keys from `grep` and a folder from `list_files`.
const PROJECT: &str = r#"
[[grant]]
id = "proj-read"
tool = "read"
paths = ["{work}/proj"]
class = "private"
untrusted = false

[[grant]]
id = "no-keys"
tool = "grep"
paths = ["{work}/proj/**/*.pem"]
deny = true

[[grant]]
id = "no-secret-listing"
tool = "list_files"
paths = ["{work}/proj/secret"]
deny = true
"#;

/// A git work tree at `work` (its `.gitignore` leaves out `*.log`, its `.git/info/exclude`
/// `*.tmp`) holding the granted `proj`.
fn project(broker: &BrokerProcess) -> std::path::PathBuf {
    let proj = broker.work.join("proj");
    fs::create_dir_all(broker.work.join(".git/info")).unwrap();
    fs::write(broker.work.join(".git/info/exclude"), "*.tmp\n").unwrap();
    fs::write(broker.work.join(".gitignore"), "*.log\n").unwrap();
    fs::create_dir_all(proj.join("src")).unwrap();
    fs::create_dir_all(proj.join("secret")).unwrap();
    fs::write(proj.join("src/main.rs"), "needle\n").unwrap();
    fs::write(proj.join("src/id.pem"), "needle\n").unwrap();
    fs::write(proj.join("build.log"), "needle\n").unwrap();
    fs::write(proj.join("scratch.tmp"), "needle\n").unwrap();
    fs::write(proj.join("secret/plan.txt"), "needle\n").unwrap();
    proj
}

fn header_and_body(response: &ToolResponse) -> (serde_json::Value, String) {
    let text = content(response);
    let (header, body) = text.split_once('\n').unwrap_or((text, ""));
    (serde_json::from_str(header).unwrap(), body.to_string())
}

#[test]
fn the_walkers_run_in_brokerds_worker_in_a_box_and_leave_out_what_the_grants_and_ignore_files_do() {
    let broker = BrokerProcess::start(PROJECT, FAST);
    let proj = project(&broker);
    let mut client = AgentClient::open(&broker.socket(), None);
    let path = proj.display().to_string();
    let grep = serde_json::json!({ "pattern": "needle", "path": path });
    let (header, body) = header_and_body(&client.call(1, "grep", &grep.to_string()).unwrap());
    assert!(
        super::walls(&broker)
            .as_str()
            .starts_with("bubblewrap: brokerd's worker walks only the granted folder"),
        "{header}"
    );
    // The key is denied to grep; build.log is ignored by the .gitignore above the grant and
    // scratch.tmp by the repository's .git/info/exclude, which the box binds read-only
    // although the rest of the repository's .git stays outside.
    let mut found: Vec<&str> = body.lines().collect();
    found.sort();
    assert_eq!(
        found,
        [
            format!("{path}/secret/plan.txt"),
            format!("{path}/src/main.rs")
        ],
        "{body}"
    );
    let glob = serde_json::json!({ "pattern": "**/*", "path": path });
    let (header, body) = header_and_body(&client.call(2, "glob", &glob.to_string()).unwrap());
    assert!(
        super::walls(&broker).as_str().starts_with("bubblewrap:"),
        "{header}"
    );
    assert!(
        body.contains("src/id.pem"),
        "only grep is denied the key: {body}"
    );
    assert!(!body.contains("build.log"), "{body}");
    assert!(!body.contains("scratch.tmp"), "{body}");
    let list = serde_json::json!({ "path": path, "recursive": true });
    let (header, body) = header_and_body(&client.call(3, "list_files", &list.to_string()).unwrap());
    assert!(
        super::walls(&broker).as_str().starts_with("bubblewrap:"),
        "{header}"
    );
    assert_eq!(
        body, "src/\nsrc/id.pem (7 bytes)\nsrc/main.rs (7 bytes)",
        "the secret folder is denied to list_files"
    );
}

#[test]
fn without_file_walls_the_walkers_run_in_the_broker_and_the_header_says_so() {
    let config = format!("{FAST}[sandbox]\nfile_walls = false\n");
    let broker = BrokerProcess::start(PROJECT, &config);
    let proj = project(&broker);
    let mut client = AgentClient::open(&broker.socket(), None);
    let path = proj.display().to_string();
    let grep = serde_json::json!({ "pattern": "needle", "path": path, "output_mode": "count" });
    let (header, body) = header_and_body(&client.call(1, "grep", &grep.to_string()).unwrap());
    assert!(
        super::walls(&broker)
            .as_str()
            .starts_with("none: [sandbox] file_walls = false"),
        "{header}"
    );
    // The same answer as in the box: the deny grant and the ignore file above the grant hold.
    let mut found: Vec<&str> = body.lines().collect();
    found.sort();
    assert_eq!(
        found,
        [
            format!("{path}/secret/plan.txt:1"),
            format!("{path}/src/main.rs:1")
        ],
        "{body}"
    );
    let list = serde_json::json!({ "path": path, "recursive": true });
    let (header, body) = header_and_body(&client.call(2, "list_files", &list.to_string()).unwrap());
    assert!(
        super::walls(&broker).as_str().starts_with("none:"),
        "{header}"
    );
    assert_eq!(body, "src/\nsrc/id.pem (7 bytes)\nsrc/main.rs (7 bytes)");
}

#[test]
fn bx_status_lists_the_walkers_among_the_boxed_file_tools() {
    use proto::{OwnerReply, OwnerRequest};
    let broker = BrokerProcess::start(PROJECT, FAST);
    let mut owner = testkit::OwnerClient::open(&broker.owner_socket());
    let Some(OwnerReply::Status { status }) = owner.send(&OwnerRequest::Status {}) else {
        panic!("no status")
    };
    assert!(
        status.walls.iter().any(|w| w.starts_with(
            "read_file, write_file, edit_file, list_files, glob, grep: brokerd's own worker in a box holding only the granted folder"
        )),
        "{:?}",
        status.walls
    );
    assert!(
        !status
            .walls
            .iter()
            .any(|w| w.contains("in the broker's process") && w.starts_with("list_files")),
        "{:?}",
        status.walls
    );
}

/// A `read_file` call through the broker: its header and body.
fn read_window(
    client: &mut AgentClient,
    id: u64,
    path: &std::path::Path,
    offset: Option<u64>,
    limit: Option<u64>,
) -> (serde_json::Value, String) {
    let mut args = serde_json::json!({ "path": path });
    if let Some(offset) = offset {
        args["offset"] = offset.into();
    }
    if let Some(limit) = limit {
        args["limit"] = limit.into();
    }
    header_and_body(&client.call(id, "read_file", &args.to_string()).unwrap())
}

#[test]
fn read_file_says_which_lines_came_back_and_where_to_read_on_until_the_end() {
    let broker = BrokerProcess::start(super::WORK, FAST);
    let file = broker.work.join("nineteen.txt");
    let text: String = (1..=19).map(|n| format!("line {n}\n")).collect();
    fs::write(&file, &text).unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    let (header, body) = read_window(&mut client, 1, &file, None, Some(5));
    assert_eq!(header["lines"], "1-5 of 19", "{header}");
    assert_eq!(header["next_offset"], 6, "{header}");
    assert_eq!(body, "line 1\nline 2\nline 3\nline 4\nline 5\n");
    let (header, _) = read_window(&mut client, 2, &file, Some(6), Some(5));
    assert_eq!(header["lines"], "6-10 of 19", "{header}");
    assert_eq!(header["next_offset"], 11, "{header}");
    // The end of the file: the lines say so, and no offset reads on.
    let (header, body) = read_window(&mut client, 3, &file, Some(15), Some(10));
    assert_eq!(header["lines"], "15-19 of 19", "{header}");
    assert!(header.get("next_offset").is_none(), "{header}");
    assert!(body.ends_with("line 19\n"), "{body}");
    let (header, _) = read_window(&mut client, 4, &file, None, None);
    assert_eq!(header["lines"], "1-19 of 19", "{header}");
    assert!(header.get("next_offset").is_none(), "{header}");
}

#[test]
fn a_file_longer_than_the_result_cap_is_cut_at_a_line_the_header_names_and_read_on_from_there() {
    let broker = BrokerProcess::start(super::WORK, &format!("{FAST}result_cap = 2048\n"));
    let file = broker.work.join("long.txt");
    let text: String = (1..=1000).map(|n| format!("line {n:04}\n")).collect();
    fs::write(&file, &text).unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    let (header, body) = read_window(&mut client, 1, &file, None, None);
    // Cut by the read, at the end: no middle left out by the rendering.
    assert!(header.get("cut_bytes").is_none(), "{header}");
    assert_eq!(header["truncated"], true, "{header}");
    let next = header["next_offset"].as_u64().unwrap();
    assert_eq!(
        header["lines"],
        format!("1-{} of 1000", next - 1),
        "{header}"
    );
    assert!(
        text.starts_with(&body),
        "the body is not the file's head:\n{body}"
    );
    let whole: String = (1..next).map(|n| format!("line {n:04}\n")).collect();
    assert!(body.starts_with(&whole), "{body}");
    // Reading on from the offset given continues where the last whole line ended.
    let (header, body) = read_window(&mut client, 2, &file, Some(next), None);
    assert!(body.starts_with(&format!("line {next:04}\n")), "{body}");
    assert_eq!(
        header["lines"].as_str().unwrap().split('-').next(),
        Some(next.to_string().as_str()),
        "{header}"
    );
}
