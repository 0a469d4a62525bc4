//! The broker of an owner who is not root (`nobody`, who has no cgroup of its own here): `shell`
//! runs in a box all the same, in a user namespace, killed whole at its time limit, and every
//! header says what a box without a cgroup lacks.

use std::fs;

use testkit::{AgentClient, BrokerProcess, NOBODY};

use super::{FAST, content};

const SHELL_IN_WORK: &str = r#"
[[grant]]
id = "shell-work"
tool = "shell"
commands = ["id", "touch", "sleep"]
paths = ["{work}"]
untrusted = false
on_untrusted = "allow"
"#;

#[test]
fn a_broker_of_an_owner_who_is_not_root_and_has_no_cgroup_boxes_shell_and_says_what_is_missing() {
    // No cgroup of its own: the folders `bx doctor` tells root to make for it are not there.
    for controller in ["pids", "memory"] {
        let _ = fs::remove_dir(format!("/sys/fs/cgroup/{controller}/boxmaker/uid-{NOBODY}"));
    }
    let broker = BrokerProcess::start_as(NOBODY, SHELL_IN_WORK, FAST);
    let mut client = AgentClient::open_as(NOBODY, &broker.socket(), None);
    let mut shell = |id: u64, command: &str| {
        let args = serde_json::json!({ "command": command, "cwd": broker.work }).to_string();
        let response = client.call(id, "shell", &args).unwrap();
        let text = content(&response).to_string();
        let (header, body) = text.split_once('\n').unwrap();
        let header: serde_json::Value = serde_json::from_str(header).unwrap();
        (header, body.to_string())
    };
    let (header, body) = shell(1, "id -u && touch made");
    assert_eq!(header["exit_code"], 0, "{header} {body}\n{}", broker.log());
    assert_eq!(body, format!("{NOBODY}\n"));
    assert!(broker.work.join("made").exists());
    assert_eq!(header["containment"], "bubblewrap");
    let walls = super::walls(&broker);
    assert!(walls.starts_with("bubblewrap:"), "{walls}");
    assert!(
        walls.contains(&format!(
            "CPU and file size limited; {} (`bx doctor` says how to delegate one)",
            sandbox::WITHOUT_CGROUP
        )),
        "{walls}"
    );
    // Killed whole at its time limit (the broker's shell_ms, 5 s here) by its PID namespace.
    let (header, _) = shell(2, "sleep 27.1831");
    assert_eq!(header["timed_out"], true, "{header}");
    assert_eq!(testkit::processes_named("27.1831"), 0);
}
