//! A call on what a grant names itself: the granted folder walked in the box, whose folders
//! above the grant are out of its reach; a file granted by name read, edited and written in
//! the broker's process (a box holds folders), its header saying so. testkit makes a broker's
//! folders in `/var/tmp`, outside the box's own `/tmp`, where an owner's files are; below
//! `/tmp` every folder is within the box's reach, and a call that opened the grant's parent
//! passed unnoticed.

use std::fs;

use proto::ToolResponse;
use testkit::{AgentClient, BrokerProcess};

use super::{FAST, content, path_args};

/// The read group on the work folder.
const READ_WORK: &str = r#"
[[grant]]
id = "read-work"
tool = "read"
paths = ["{work}"]
class = "private"
untrusted = false
"#;

/// The read and write groups on one file of the work folder, and nothing else.
const ONE_FILE: &str = r#"
[[grant]]
id = "read-notes"
tool = "read"
paths = ["{work}/notes.txt"]
class = "private"
untrusted = false

[[grant]]
id = "write-notes"
tool = "write"
paths = ["{work}/notes.txt"]
untrusted = false
on_untrusted = "allow"
"#;

/// The session's warm box (the default), and a fresh box per call.
const BOXES: [&str; 2] = ["", "[sandbox]\nwarm_idle_ms = 0\n"];

/// The header of a result (its first line) as JSON, and the rest.
fn result(response: &ToolResponse) -> (serde_json::Value, String) {
    let text = content(response);
    let (header, body) = text.split_once('\n').unwrap_or((text, ""));
    (serde_json::from_str(header).unwrap(), body.to_string())
}

fn assert_boxed(broker: &BrokerProcess, header: &serde_json::Value) {
    assert_eq!(header["sandbox"], "box", "{header}");
    let walls = super::walls(broker);
    assert!(walls.starts_with("bubblewrap"), "{header}");
}

#[test]
fn the_granted_folder_itself_is_walked_in_the_box() {
    for config in BOXES {
        let broker = BrokerProcess::start(READ_WORK, &format!("{FAST}{config}"));
        assert!(
            !broker.work.starts_with("/tmp"),
            "{}",
            broker.work.display()
        );
        fs::write(broker.work.join("a.txt"), "alpha\n").unwrap();
        fs::create_dir(broker.work.join("src")).unwrap();
        fs::write(broker.work.join("src/b.txt"), "alpha beta\n").unwrap();
        let mut client = AgentClient::open(&broker.socket(), None);
        let work = broker.work.display().to_string();
        let grep = serde_json::json!({ "pattern": "alpha", "path": work }).to_string();
        let (header, body) = result(&client.call(1, "grep", &grep).unwrap());
        assert_boxed(&broker, &header);
        assert_eq!(header["files"], 2, "{config}: {header}\n{body}");
        let glob = serde_json::json!({ "pattern": "**/*.txt", "path": work }).to_string();
        let (header, body) = result(&client.call(2, "glob", &glob).unwrap());
        assert_boxed(&broker, &header);
        assert!(
            body.contains("src/b.txt") && body.contains("a.txt"),
            "{body}"
        );
        let (header, body) = result(
            &client
                .call(3, "list_files", &path_args(&broker.work))
                .unwrap(),
        );
        assert_boxed(&broker, &header);
        assert!(
            body.contains("a.txt (6 bytes)") && body.contains("src/"),
            "{body}"
        );
        // The folder is no file to read, and the error says so.
        let read = client
            .call(4, "read_file", &path_args(&broker.work))
            .unwrap();
        let ToolResponse::Failed { message } = &read else {
            panic!("{config}: {read:?}")
        };
        assert!(message.contains("a directory"), "{message}");
    }
}

#[test]
fn a_file_granted_by_name_is_read_edited_and_written_and_its_header_says_where() {
    let broker = BrokerProcess::start(ONE_FILE, FAST);
    assert!(
        !broker.work.starts_with("/tmp"),
        "{}",
        broker.work.display()
    );
    let notes = broker.work.join("notes.txt");
    fs::write(broker.work.join("other.txt"), "secret\n").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    // Made by the write its grant names, then read, edited and written again.
    let write = |text: &str| serde_json::json!({ "path": notes, "content": text }).to_string();
    let made = client.call(1, "write_file", &write("one\n")).unwrap();
    assert_one_file(&broker, &result(&made).0);
    let (header, body) = result(&client.call(2, "read_file", &path_args(&notes)).unwrap());
    assert_one_file(&broker, &header);
    assert!(body.contains("one"), "{body}");
    let edit = serde_json::json!({
        "path": notes.display().to_string(),
        "edits": [{ "old_str": "one", "new_str": "two" }]
    })
    .to_string();
    let edited = client.call(3, "edit_file", &edit).unwrap();
    assert_one_file(&broker, &result(&edited).0);
    assert_eq!(fs::read_to_string(&notes).unwrap(), "two\n");
    let wrote = client.call(4, "write_file", &write("three\n")).unwrap();
    assert_one_file(&broker, &result(&wrote).0);
    assert_eq!(fs::read_to_string(&notes).unwrap(), "three\n");
    // The file beside it is no part of the grant.
    let other = client
        .call(5, "read_file", &path_args(&broker.work.join("other.txt")))
        .unwrap();
    assert!(matches!(other, ToolResponse::Denied { .. }), "{other:?}");
}

/// The header of a call under a grant on one file says it ran in the broker's process.
fn assert_one_file(broker: &BrokerProcess, header: &serde_json::Value) {
    assert_eq!(header["sandbox"], "none", "{header}");
    let walls = super::walls(broker);
    assert!(
        walls.starts_with("none: the grant names this one file"),
        "{header}"
    );
}
