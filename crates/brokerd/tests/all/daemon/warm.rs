//! The file tools' warm boxes through a real broker: a session's next call in the same folder
//! is answered by the box its first call built (the same process), a write gets a read-write
//! box of its own while the read box stays mounted read-only, another session never shares a
//! box, a closed session's and an idle box end, a folder renamed and replaced gets a new box
//! that sees the new folder, a box killed between calls is replaced, and `warm_idle_ms = 0`
//! keeps none. `shell` the same way, through the sandbox's command worker: one worker a
//! session and grant, which its commands cannot kill.

use std::fs;
use std::path::{Path, PathBuf};

use proto::{AgentFrame, BrokerFrame};
use testkit::{AgentClient, BrokerProcess};

use super::{FAST, content, eventually, path_args};

const GRANTS: &str = r#"
[[grant]]
id = "read-work"
tool = "read_file"
paths = ["{work}"]
class = "private"
untrusted = false

[[grant]]
id = "grep-work"
tool = "grep"
paths = ["{work}"]
class = "private"
untrusted = false

[[grant]]
id = "write-work"
tool = "write_file"
paths = ["{work}"]
untrusted = false
on_untrusted = "allow"
"#;

/// The pids of the file tools' warm workers (`brokerd-files box-file --warm`, not the bubblewrap
/// around them) below the broker's process.
fn warm_workers(broker: &BrokerProcess) -> Vec<u32> {
    workers(broker, &[b"box-file", b"--warm"])
}

/// The pids of the command workers below the broker's process.
fn command_workers(broker: &BrokerProcess) -> Vec<u32> {
    workers(broker, &[b"--boxmaker-command-worker"])
}

/// The pids of brokerd processes below the broker whose arguments hold each of `marks`.
pub(super) fn workers(broker: &BrokerProcess, marks: &[&[u8]]) -> Vec<u32> {
    let Some(root) = broker.pid() else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let is_worker = marks.iter().all(|mark| args.contains(mark));
        // brokerd's file worker, its fetcher or its launcher (a command worker), or brokerd
        // standing in.
        let is_brokerd = fs::read_link(entry.path().join("exe")).is_ok_and(|exe| {
            exe.file_name().is_some_and(|n| {
                [
                    "brokerd",
                    "brokerd-launcher",
                    "brokerd-files",
                    "brokerd-fetch",
                ]
                .iter()
                .any(|name| n == *name)
            })
        });
        if is_worker && is_brokerd && pid != root && descends_from(pid, root) {
            found.push(pid);
        }
    }
    found.sort_unstable();
    found
}

/// Whether `root` is an ancestor of `pid`.
fn descends_from(mut pid: u32, root: u32) -> bool {
    for _ in 0..64 {
        let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) else {
            return false;
        };
        let parent = status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))
            .and_then(|p| p.trim().parse::<u32>().ok());
        match parent {
            Some(p) if p == root => return true,
            Some(p) if p > 1 => pid = p,
            _ => return false,
        }
    }
    false
}

/// Kills the worker `pid` and waits until its box is gone too (bubblewrap's init, its parent,
/// holds the box's pipes until it has seen the worker end).
fn kill_box_of(pid: u32) {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let init = status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .unwrap()
        .trim()
        .to_string();
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert!(
        eventually(|| !Path::new(&format!("/proc/{init}")).exists()),
        "the box's init {init} still runs"
    );
}

/// The body of a result (after its header line).
fn body(response: &proto::ToolResponse) -> String {
    let text = content(response);
    text.split_once('\n').map_or("", |(_, b)| b).to_string()
}

/// The options of the mount at `point` in the mount namespace of `pid`.
fn mount_options(pid: u32, point: &Path) -> Option<String> {
    let info = fs::read_to_string(format!("/proc/{pid}/mountinfo")).ok()?;
    let point = point.to_str()?;
    info.lines()
        .rev()
        .find_map(|l| {
            let fields: Vec<&str> = l.split(' ').collect();
            (fields.get(4) == Some(&point)).then(|| fields.get(5).map(|o| o.to_string()))
        })
        .flatten()
}

fn read(client: &mut AgentClient, id: u64, path: PathBuf) -> proto::ToolResponse {
    client.call(id, "read_file", &path_args(&path)).unwrap()
}

#[test]
fn a_sessions_next_file_calls_are_answered_by_the_box_its_first_call_built() {
    let broker = BrokerProcess::start(GRANTS, FAST);
    fs::write(broker.work.join("a.txt"), "alpha\n").unwrap();
    fs::write(broker.work.join("b.txt"), "beta\n").unwrap();
    assert_eq!(warm_workers(&broker), Vec::<u32>::new());
    let mut client = AgentClient::open(&broker.socket(), None);
    let first = read(&mut client, 1, broker.work.join("a.txt"));
    assert!(body(&first).contains("alpha"), "{first:?}");
    let header: serde_json::Value =
        serde_json::from_str(content(&first).lines().next().unwrap()).unwrap();
    assert!(
        super::walls(&broker).as_str().starts_with("bubblewrap:"),
        "{header}"
    );
    let workers = warm_workers(&broker);
    assert_eq!(workers.len(), 1, "one warm box after the first call");
    // The worker is brokerd's small file worker, not brokerd: a box starts it in a fraction of
    // the time.
    let exe = fs::read_link(format!("/proc/{}/exe", workers[0])).unwrap();
    assert_eq!(exe.file_name().unwrap(), "brokerd-files", "{exe:?}");
    let second = read(&mut client, 2, broker.work.join("b.txt"));
    assert!(body(&second).contains("beta"), "{second:?}");
    let args = serde_json::json!({ "pattern": "alpha", "path": broker.work }).to_string();
    let grep = client.call(3, "grep", &args).unwrap();
    assert!(body(&grep).contains("a.txt"), "{grep:?}");
    assert_eq!(
        warm_workers(&broker),
        workers,
        "the read and the walker used the same box"
    );
}

#[test]
fn a_warm_boxs_walkers_keep_an_index_that_sees_changes_made_outside_the_box() {
    let broker = BrokerProcess::start(GRANTS, FAST);
    fs::create_dir_all(broker.work.join("src")).unwrap();
    fs::write(broker.work.join("src/a.txt"), "needle\n").unwrap();
    fs::write(broker.work.join("src/d.txt"), "needle\n").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    let args = serde_json::json!({ "pattern": "needle", "path": broker.work }).to_string();
    let first = body(&client.call(1, "grep", &args).unwrap());
    assert!(
        first.contains("a.txt") && first.contains("d.txt"),
        "{first}"
    );
    let workers = warm_workers(&broker);
    assert_eq!(workers.len(), 1, "one warm box after the first call");
    // The worker holds an inotify instance: its index was built, and watches, inside the box.
    let fds: Vec<PathBuf> = fs::read_dir(format!("/proc/{}/fd", workers[0]))
        .unwrap()
        .flatten()
        .filter_map(|fd| fs::read_link(fd.path()).ok())
        .collect();
    assert!(
        fds.iter().any(|l| l == Path::new("anon_inode:inotify")),
        "{fds:?}"
    );
    // Changed outside the box, between two calls: a file made, one renamed, one deleted.
    fs::write(broker.work.join("src/b.txt"), "needle too\n").unwrap();
    fs::rename(broker.work.join("src/a.txt"), broker.work.join("src/c.txt")).unwrap();
    fs::remove_file(broker.work.join("src/d.txt")).unwrap();
    let second = body(&client.call(2, "grep", &args).unwrap());
    let names: Vec<&str> = second
        .lines()
        .filter_map(|l| l.rsplit('/').next())
        .collect();
    assert_eq!(names, ["b.txt", "c.txt"], "{second}");
    assert_eq!(warm_workers(&broker), workers, "the same box answered");
}

#[test]
fn a_write_gets_a_read_write_box_and_the_read_box_stays_read_only() {
    let broker = BrokerProcess::start(GRANTS, FAST);
    fs::write(broker.work.join("a.txt"), "alpha\n").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    read(&mut client, 1, broker.work.join("a.txt"));
    let readers = warm_workers(&broker);
    assert_eq!(readers.len(), 1);
    let args = serde_json::json!({ "path": broker.work.join("new.txt"), "content": "made\n" });
    let wrote = client.call(2, "write_file", &args.to_string()).unwrap();
    content(&wrote);
    assert_eq!(
        fs::read_to_string(broker.work.join("new.txt")).unwrap(),
        "made\n"
    );
    let both = warm_workers(&broker);
    assert_eq!(both.len(), 2, "{both:?}");
    let writer = *both.iter().find(|p| !readers.contains(p)).unwrap();
    let ro = mount_options(readers[0], &broker.work).unwrap();
    let rw = mount_options(writer, &broker.work).unwrap();
    assert!(ro.split(',').any(|o| o == "ro"), "read box: {ro}");
    assert!(rw.split(',').any(|o| o == "rw"), "write box: {rw}");
    // The next write goes to the write box, the next read to the read box.
    let args = serde_json::json!({ "path": broker.work.join("new2.txt"), "content": "again\n" });
    content(&client.call(3, "write_file", &args.to_string()).unwrap());
    read(&mut client, 4, broker.work.join("new2.txt"));
    assert_eq!(warm_workers(&broker), both);
}

#[test]
fn another_session_gets_a_box_of_its_own_and_a_closed_sessions_box_ends() {
    let broker = BrokerProcess::start(GRANTS, FAST);
    fs::write(broker.work.join("a.txt"), "alpha\n").unwrap();
    let mut one = AgentClient::open(&broker.socket(), None);
    read(&mut one, 1, broker.work.join("a.txt"));
    let first = warm_workers(&broker);
    assert_eq!(first.len(), 1);
    let mut two = AgentClient::open(&broker.socket(), None);
    read(&mut two, 1, broker.work.join("a.txt"));
    let both = warm_workers(&broker);
    assert_eq!(both.len(), 2, "{both:?}");
    assert!(matches!(
        one.send(&AgentFrame::Close {}),
        Some(BrokerFrame::Closed {})
    ));
    assert!(
        eventually(|| !warm_workers(&broker).contains(&first[0])),
        "the closed session's box still runs"
    );
    let left = warm_workers(&broker);
    assert_eq!(left.len(), 1, "{left:?}");
    read(&mut two, 2, broker.work.join("a.txt"));
    assert_eq!(
        warm_workers(&broker),
        left,
        "the other session kept its box"
    );
}

#[test]
fn a_granted_folder_renamed_and_replaced_gets_a_new_box_that_sees_the_new_folder() {
    let broker = BrokerProcess::start(GRANTS, FAST);
    fs::write(broker.work.join("a.txt"), "old folder\n").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    assert!(body(&read(&mut client, 1, broker.work.join("a.txt"))).contains("old folder"));
    let before = warm_workers(&broker);
    assert_eq!(before.len(), 1);
    // The old box still has the old folder bound; it must not answer for the new one.
    fs::rename(&broker.work, broker.root.path().join("work.old")).unwrap();
    fs::create_dir(&broker.work).unwrap();
    fs::write(broker.work.join("a.txt"), "new folder\n").unwrap();
    let again = read(&mut client, 2, broker.work.join("a.txt"));
    assert!(body(&again).contains("new folder"), "{again:?}");
    let after = warm_workers(&broker);
    assert!(
        after.iter().any(|p| !before.contains(p)),
        "no new box: {before:?} {after:?}"
    );
}

#[test]
fn a_warm_box_killed_between_calls_is_replaced_and_the_call_answered() {
    let broker = BrokerProcess::start(GRANTS, FAST);
    fs::write(broker.work.join("a.txt"), "alpha\n").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    read(&mut client, 1, broker.work.join("a.txt"));
    let before = warm_workers(&broker);
    assert_eq!(before.len(), 1);
    kill_box_of(before[0]);
    assert!(eventually(|| warm_workers(&broker).is_empty()));
    let again = read(&mut client, 2, broker.work.join("a.txt"));
    assert!(body(&again).contains("alpha"), "{again:?}");
    let after = warm_workers(&broker);
    assert_eq!(after.len(), 1);
    assert_ne!(after, before);
}

#[test]
fn an_idle_box_ends_after_warm_idle_ms_and_zero_keeps_none() {
    let config = format!("{FAST}[sandbox]\nwarm_idle_ms = 300\n");
    let broker = BrokerProcess::start(GRANTS, &config);
    fs::write(broker.work.join("a.txt"), "alpha\n").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    read(&mut client, 1, broker.work.join("a.txt"));
    assert_eq!(warm_workers(&broker).len(), 1);
    assert!(
        eventually(|| warm_workers(&broker).is_empty()),
        "the idle box still runs"
    );
    let config = format!("{FAST}[sandbox]\nwarm_idle_ms = 0\n");
    let cold = BrokerProcess::start(GRANTS, &config);
    fs::write(cold.work.join("a.txt"), "alpha\n").unwrap();
    let mut client = AgentClient::open(&cold.socket(), None);
    let answer = read(&mut client, 1, cold.work.join("a.txt"));
    assert!(body(&answer).contains("alpha"), "{answer:?}");
    assert_eq!(warm_workers(&cold), Vec::<u32>::new());
}

const SHELL: &str = r#"
[[grant]]
id = "sh"
tool = "shell"
commands = ["echo", "kill", "ls", "sleep", "true"]
paths = ["{work}"]
untrusted = false
on_untrusted = "allow"

[[grant]]
id = "sh-other"
tool = "shell"
commands = ["ls"]
paths = ["{other}"]
untrusted = false
on_untrusted = "allow"
"#;

/// Which box a command ran in: its mount namespace, one of its own for each box.
const WHICH_BOX: &str = "ls -l /proc/self/ns/mnt";

/// The namespace in `ls -l`'s output of [`WHICH_BOX`].
fn namespace(body: &str) -> String {
    body.split("mnt:")
        .nth(1)
        .unwrap_or_else(|| panic!("{body}"))
        .trim()
        .to_string()
}

/// A broker granting `shell` in its work folder and in a second folder beside it.
fn shell_broker(config: &str) -> (BrokerProcess, tempfile::TempDir) {
    let other = tempfile::tempdir_in("/var/tmp").unwrap();
    let grants = SHELL.replace("{other}", other.path().to_str().unwrap());
    (BrokerProcess::start(&grants, config), other)
}

fn sh(client: &mut AgentClient, id: u64, command: &str, cwd: &Path) -> (serde_json::Value, String) {
    let args = serde_json::json!({ "command": command, "cwd": cwd }).to_string();
    let response = client.call(id, "shell", &args).unwrap();
    let text = content(&response);
    let (header, body) = text.split_once('\n').unwrap_or((text, ""));
    (serde_json::from_str(header).unwrap(), body.to_string())
}

#[test]
fn a_sessions_shell_calls_share_one_command_worker_and_another_session_gets_its_own() {
    let (broker, _other) = shell_broker(FAST);
    let work = broker.work.clone();
    let mut one = AgentClient::open(&broker.socket(), None);
    let (header, body) = sh(&mut one, 1, WHICH_BOX, &work);
    assert_eq!(header["exit_code"], 0, "{header}");
    assert!(
        super::walls(&broker).as_str().contains("kept warm"),
        "{header}"
    );
    let first_box = namespace(&body);
    let first = command_workers(&broker);
    assert_eq!(first.len(), 1, "{first:?}");
    // The worker is brokerd's small launcher, not brokerd: a box starts it in a fraction of
    // the time.
    let exe = fs::read_link(format!("/proc/{}/exe", first[0])).unwrap();
    assert_eq!(exe.file_name().unwrap(), "brokerd-launcher", "{exe:?}");
    let (header, body) = sh(&mut one, 2, WHICH_BOX, &work);
    assert_eq!(header["exit_code"], 0, "{header} {body}");
    assert_eq!(namespace(&body), first_box, "the same box");
    assert_eq!(command_workers(&broker), first);
    let mut two = AgentClient::open(&broker.socket(), None);
    let (_, body) = sh(&mut two, 1, WHICH_BOX, &work);
    assert_ne!(namespace(&body), first_box, "another session's box");
    assert_eq!(command_workers(&broker).len(), 2);
    assert!(matches!(
        one.send(&AgentFrame::Close {}),
        Some(BrokerFrame::Closed {})
    ));
    assert!(
        eventually(|| !command_workers(&broker).contains(&first[0])),
        "the closed session's command worker still runs"
    );
}

#[test]
fn a_call_under_another_grant_gets_another_box() {
    let (broker, other) = shell_broker(FAST);
    let work = broker.work.clone();
    let mut client = AgentClient::open(&broker.socket(), None);
    let (_, first) = sh(&mut client, 1, WHICH_BOX, &work);
    let (_, second) = sh(&mut client, 2, WHICH_BOX, other.path());
    assert_ne!(namespace(&first), namespace(&second));
    assert_eq!(command_workers(&broker).len(), 2);
}

#[test]
fn a_command_cannot_kill_its_worker_and_the_next_call_is_answered_by_it() {
    let (broker, _other) = shell_broker(FAST);
    let work = broker.work.clone();
    let mut client = AgentClient::open(&broker.socket(), None);
    sh(&mut client, 1, "true", &work);
    let before = command_workers(&broker);
    assert_eq!(before.len(), 1);
    let (header, body) = sh(&mut client, 2, "kill -9 2", &work);
    assert_eq!(header["exit_code"], 1, "{header} {body}");
    assert!(body.contains("Operation not permitted"), "{body}");
    let (header, body) = sh(&mut client, 3, "echo served", &work);
    assert_eq!(header["exit_code"], 0, "{header} {body}");
    assert_eq!(body, "served\n");
    assert_eq!(command_workers(&broker), before);
}

#[test]
fn a_command_worker_killed_between_calls_is_replaced_and_the_call_answered() {
    let (broker, _other) = shell_broker(FAST);
    let work = broker.work.clone();
    let mut client = AgentClient::open(&broker.socket(), None);
    sh(&mut client, 1, "true", &work);
    let before = command_workers(&broker);
    assert_eq!(before.len(), 1);
    kill_box_of(before[0]);
    assert!(eventually(|| command_workers(&broker).is_empty()));
    let (header, body) = sh(&mut client, 2, "echo again", &work);
    assert_eq!(header["exit_code"], 0, "{header} {body}");
    assert_eq!(body, "again\n");
    let after = command_workers(&broker);
    assert_eq!(after.len(), 1);
    assert_ne!(after, before);
}

#[test]
fn with_warm_idle_ms_zero_each_shell_call_gets_a_fresh_box() {
    let config = format!("{FAST}[sandbox]\nwarm_idle_ms = 0\n");
    let (broker, _other) = shell_broker(&config);
    let work = broker.work.clone();
    let mut client = AgentClient::open(&broker.socket(), None);
    let (header, first) = sh(&mut client, 1, WHICH_BOX, &work);
    assert_eq!(header["exit_code"], 0, "{header}");
    assert!(
        !super::walls(&broker).as_str().contains("kept warm"),
        "{header}"
    );
    let (_, second) = sh(&mut client, 2, WHICH_BOX, &work);
    assert_ne!(namespace(&first), namespace(&second));
    assert_eq!(command_workers(&broker), Vec::<u32>::new());
}

#[test]
fn a_box_in_use_when_its_session_is_closed_ends_after_its_call() {
    let (broker, _other) = shell_broker(FAST);
    let work = broker.work.clone();
    let mut one = AgentClient::open(&broker.socket(), None);
    sh(&mut one, 1, "true", &work);
    assert_eq!(command_workers(&broker).len(), 1);
    // The session is closed from a second connection while its box runs a command.
    let resume = one.session.clone();
    let socket = broker.socket();
    let closer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        let mut other = AgentClient::open(&socket, resume);
        other.send(&AgentFrame::Close {})
    });
    let (header, _) = sh(&mut one, 2, "sleep 1", &work);
    assert_eq!(header["exit_code"], 0, "{header}");
    assert!(matches!(
        closer.join().unwrap(),
        Some(BrokerFrame::Closed {})
    ));
    // The box that served the call is not kept for a session that has ended.
    assert!(
        eventually(|| command_workers(&broker).is_empty()),
        "the closed session's command worker still runs"
    );
}
