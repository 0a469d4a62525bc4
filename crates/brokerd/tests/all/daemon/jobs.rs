//! Background jobs through a real broker: a job outlives its call, is tailed, killed, and
//! reaped with its session; another session's job is answered as one that does not exist;
//! `job_lifetime_ms` kills a job; no job process outlives the broker (SIGTERM, kill -9); a ring
//! smaller than the output keeps the newest bytes and counts the rest; the guard rails refuse
//! `bash_bg` as they refuse `shell`.

use std::time::{Duration, Instant};

use proto::{AgentFrame, BrokerFrame, DenyReason, ToolResponse};
use serde_json::{Value, json};
use testkit::{AgentClient, BrokerProcess, processes_named};

use super::{FAST, content, denied, eventually};

const JOBS: &str = r#"
[[grant]]
id = "jobs"
tool = "bash_bg"
commands = ["sleep", "echo", "seq", "rm", "cat"]
paths = ["{work}"]
untrusted = false
on_untrusted = "allow"

[[grant]]
id = "sh"
tool = "shell"
commands = ["sleep", "echo"]
paths = ["{work}"]
untrusted = false
on_untrusted = "allow"
"#;

/// The header and body of a result.
fn result(response: &ToolResponse) -> (Value, String) {
    let (header, body) = content(response).split_once('\n').unwrap();
    (serde_json::from_str(header).unwrap(), body.to_string())
}

fn start(
    client: &mut AgentClient,
    id: u64,
    command: &str,
    broker: &BrokerProcess,
) -> (Value, String) {
    let args = json!({ "command": command, "cwd": broker.work }).to_string();
    result(&client.call(id, "bash_bg", &args).unwrap())
}

fn tail(client: &mut AgentClient, id: u64, job: u64) -> ToolResponse {
    client
        .call(id, "bash_tail", &json!({ "job": job }).to_string())
        .unwrap()
}

fn kill(client: &mut AgentClient, id: u64, job: u64) -> ToolResponse {
    client
        .call(id, "bash_kill", &json!({ "job": job }).to_string())
        .unwrap()
}

/// The processes [`processes_named`] counts, each with its status lines, for a failure.
fn described(marker: &str) -> String {
    let mut out = String::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(marker) {
            let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
            let wanted: Vec<&str> = status
                .lines()
                .filter(|l| l.starts_with("State") || l.starts_with("PPid") || l.starts_with("Pid"))
                .collect();
            out.push_str(&format!("\n{cmdline:.200} {wanted:?}"));
        }
    }
    out
}

#[test]
fn a_job_outlives_its_call_is_tailed_killed_and_reaped_with_its_session() {
    let broker = BrokerProcess::start(JOBS, FAST);
    let mut client = AgentClient::open(&broker.socket(), None);
    let started = Instant::now();
    let (header, body) = start(&mut client, 1, "echo started && sleep 3001.1", &broker);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "bash_bg returns at once"
    );
    assert_eq!(header["job"], 1, "{header}");
    assert_eq!(header["state"], "running");
    assert_eq!(header["containment"], "bubblewrap");
    let sandbox = super::walls(&broker);
    assert!(sandbox.starts_with("bubblewrap:"), "{sandbox}");
    assert!(
        sandbox.contains("a fresh box of its own for the job (no warm worker yet)"),
        "{sandbox}"
    );
    assert!(body.contains("bash_tail"), "{body}");
    // The call has answered; the job runs on.
    assert!(eventually(|| processes_named("sleep 3001.1") > 0));
    let mut seen = String::new();
    let mut call = 2;
    assert!(eventually(|| {
        call += 1;
        let (header, body) = result(&tail(&mut client, call, 1));
        assert_eq!(header["state"], "running", "{header}");
        seen.push_str(&body);
        seen.contains("started")
    }));
    assert_eq!(seen, "started\n", "each byte is read once");
    let (header, body) = result(&kill(&mut client, 100, 1));
    assert_eq!(header["state"], "killed", "{header}");
    assert_eq!(header["was_running"], true);
    assert!(body.contains("killed"), "{body}");
    assert_eq!(
        processes_named("sleep 3001.1"),
        0,
        "the kill leaves no process"
    );
    let (header, _) = result(&tail(&mut client, 101, 1));
    assert_eq!(
        (header["state"].as_str(), header["bytes"].as_u64()),
        (Some("killed"), Some(0))
    );
    // A second job dies with its session.
    let (header, _) = start(&mut client, 102, "sleep 3001.2", &broker);
    assert_eq!(
        header["job"], 102,
        "a job is numbered by the call that started it"
    );
    assert!(eventually(|| processes_named("sleep 3001.2") > 0));
    assert!(matches!(
        client.send(&AgentFrame::Close {}),
        Some(BrokerFrame::Closed {})
    ));
    assert!(
        eventually(|| processes_named("sleep 3001.2") == 0),
        "the session's end kills its jobs"
    );
}

#[test]
fn another_session_gets_for_a_job_what_it_gets_for_one_that_does_not_exist() {
    let broker = BrokerProcess::start(JOBS, FAST);
    let mut owner = AgentClient::open(&broker.socket(), None);
    let (header, _) = start(&mut owner, 1, "echo mine && sleep 3001.3", &broker);
    assert_eq!(header["job"], 1);
    let mut other = AgentClient::open(&broker.socket(), None);
    let mut stranger = AgentClient::open(&broker.socket(), None);
    let theirs = tail(&mut other, 1, 1);
    let none = tail(&mut stranger, 1, 1);
    assert!(matches!(theirs, ToolResponse::Failed { .. }), "{theirs:?}");
    assert_eq!(
        theirs, none,
        "the answer does not say whether the id exists elsewhere"
    );
    assert_eq!(kill(&mut other, 2, 1), kill(&mut stranger, 2, 1));
    // The owner's job still runs, and its output is all still unread.
    let mut seen = String::new();
    let mut call = 10;
    assert!(eventually(|| {
        call += 1;
        let (header, body) = result(&tail(&mut owner, call, 1));
        assert_eq!(header["state"], "running", "{header}");
        seen.push_str(&body);
        seen == "mine\n"
    }));
    assert_eq!(result(&kill(&mut owner, 99, 1)).0["state"], "killed");
}

#[test]
fn job_lifetime_ms_kills_a_job() {
    let config = format!("{FAST}job_lifetime_ms = 700\n");
    let broker = BrokerProcess::start(JOBS, &config);
    let mut client = AgentClient::open(&broker.socket(), None);
    let (header, _) = start(&mut client, 1, "sleep 3001.4", &broker);
    assert_eq!(header["lifetime_ms"], 700);
    assert!(eventually(|| processes_named("sleep 3001.4") > 0));
    let mut call = 1;
    let mut last = Value::Null;
    assert!(
        eventually(|| {
            call += 1;
            last = result(&tail(&mut client, call, 1)).0;
            last["state"] == "timed_out"
        }),
        "{last}"
    );
    assert_eq!(last["exit_code"], Value::Null);
    assert!(last["duration_ms"].as_u64().unwrap() < 5_000, "{last}");
    assert_eq!(processes_named("sleep 3001.4"), 0);
}

#[test]
fn no_job_process_outlives_a_broker_stopped_by_sigterm_or_killed() {
    let mut broker = BrokerProcess::start(JOBS, FAST);
    let mut client = AgentClient::open(&broker.socket(), None);
    start(&mut client, 1, "sleep 3001.5", &broker);
    assert!(eventually(|| processes_named("sleep 3001.5") > 0));
    let pid = broker.pid().unwrap().to_string();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(
        broker.wait_for_log("brokerd stopped", 1, Duration::from_secs(10)),
        "{}",
        broker.log()
    );
    assert!(
        broker.log().contains("killed the running jobs"),
        "{}",
        broker.log()
    );
    assert_eq!(
        processes_named("sleep 3001.5"),
        0,
        "stopped before the broker exits"
    );
    // kill -9: nothing of the broker runs to stop the job; the box dies with it.
    broker.spawn();
    let mut client = AgentClient::open(&broker.socket(), None);
    start(&mut client, 1, "sleep 3001.6", &broker);
    // Once the command runs, bubblewrap's own parent-death signal is set (a broker killed
    // before that leaves the box to the next start's sweep of a dead broker's cgroups).
    assert!(
        eventually(|| processes_named("sleep 3001.6") == 3),
        "{}",
        described("sleep 3001.6")
    );
    broker.kill();
    assert!(
        eventually(|| processes_named("sleep 3001.6") == 0),
        "a job outlived a broker killed with SIGKILL: {}",
        described("sleep 3001.6")
    );
    broker.spawn();
    let mut client = AgentClient::open(&broker.socket(), None);
    let (header, _) = start(&mut client, 1, "echo again", &broker);
    assert_eq!(header["job"], 1, "the restarted broker runs jobs");
}

#[test]
fn after_a_restart_a_resumed_sessions_old_job_id_names_no_new_job() {
    let mut broker = BrokerProcess::start(JOBS, FAST);
    let mut client = AgentClient::open(&broker.socket(), None);
    let (header, _) = start(&mut client, 1, "echo before", &broker);
    assert_eq!(header["job"], 1);
    let resume = client.session.clone().unwrap();
    broker.restart();
    let mut again = AgentClient::open(&broker.socket(), Some(resume));
    let (header, _) = start(&mut again, 2, "echo after", &broker);
    assert_eq!(header["job"], 2, "the new job takes its own call's id");
    let old = again
        .call(3, "bash_tail", &json!({ "job": 1 }).to_string())
        .unwrap();
    let ToolResponse::Failed { message } = &old else {
        panic!("the old id reached a job: {old:?}");
    };
    assert!(message.contains("no job 1"), "{message}");
}

/// The box cgroups `brokerd` process `pid` made, under every controller.
fn box_cgroups_of(pid: u32) -> Vec<std::path::PathBuf> {
    let prefix = format!("box-{pid}-");
    [
        "/sys/fs/cgroup/pids/boxmaker",
        "/sys/fs/cgroup/memory/boxmaker",
        "/sys/fs/cgroup/boxmaker",
    ]
    .iter()
    .filter_map(|parent| std::fs::read_dir(parent).ok())
    .flat_map(|entries| entries.flatten())
    .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
    .map(|e| e.path())
    .collect()
}

#[test]
fn a_broker_killed_at_any_moment_leaves_no_box_process_and_no_box_cgroup() {
    // The broker's warden (its own binary, started with the first box) kills and removes the
    // broker's box cgroups once the broker is gone, however early in a box's start it died:
    // no waiting here for bubblewrap's own parent-death signal to be set.
    let mut broker = BrokerProcess::start(JOBS, FAST);
    let mut client = AgentClient::open(&broker.socket(), None);
    start(&mut client, 1, "sleep 3002.5", &broker);
    let pid = broker.pid().unwrap();
    assert_eq!(
        processes_named(&format!("--boxmaker-cgroup-warden {pid}")),
        1,
        "one warden for the broker"
    );
    assert!(
        !box_cgroups_of(pid).is_empty(),
        "the job's box has a cgroup"
    );
    let args = json!({ "command": "sleep 3002.6", "cwd": broker.work }).to_string();
    client.start_call(2, "bash_bg", &args);
    std::thread::sleep(Duration::from_millis(3));
    broker.kill();
    assert!(
        eventually(|| processes_named("sleep 3002.") == 0),
        "a box outlived a broker killed with SIGKILL: {}",
        described("sleep 3002.")
    );
    assert!(
        eventually(|| box_cgroups_of(pid).is_empty()),
        "the dead broker's cgroups are still there: {:?}",
        box_cgroups_of(pid)
    );
    assert!(eventually(|| processes_named(&format!(
        "--boxmaker-cgroup-warden {pid}"
    )) == 0));
}

#[test]
fn output_past_the_ring_keeps_the_newest_bytes_and_says_how_many_were_dropped() {
    let config = format!("{FAST}job_ring_bytes = 1024\n");
    let broker = BrokerProcess::start(JOBS, &config);
    let mut client = AgentClient::open(&broker.socket(), None);
    // 100,000 lines of 7 bytes, then END: 700,004 bytes through a ring of 1,024.
    start(&mut client, 1, "seq 100000 199999 && echo END", &broker);
    let (mut returned, mut dropped, mut call) = (0, 0, 1);
    let mut last = (Value::Null, String::new());
    let mut seen = String::new();
    assert!(eventually(|| {
        call += 1;
        last = result(&tail(&mut client, call, 1));
        seen.push_str(&last.1);
        returned += last.0["bytes"].as_u64().unwrap();
        dropped += last.0["dropped_bytes"].as_u64().unwrap();
        last.0["state"] == "exited" && last.0["unread_bytes"] == 0
    }));
    let (header, _) = last;
    assert_eq!(header["exit_code"], 0, "{header}");
    assert_eq!(header["total_bytes"], 700_004);
    assert_eq!(
        returned + dropped,
        700_004,
        "every byte was returned or counted as dropped"
    );
    assert!(
        dropped >= 700_004u64.saturating_sub(1024 * call),
        "{dropped}"
    );
    assert!(dropped > 0);
    // Nothing is dropped in the middle of what the last reads returned: the newest bytes.
    assert!(
        seen.ends_with("199998\n199999\nEND\n"),
        "{}",
        &seen[seen.len().saturating_sub(200)..]
    );
}

#[test]
fn the_guard_rails_refuse_bash_bg_as_they_refuse_shell_and_a_shell_grant_starts_no_job() {
    let broker = BrokerProcess::start(JOBS, FAST);
    let mut client = AgentClient::open(&broker.socket(), None);
    let grants = broker.config.join("grants/grants.toml");
    let mut call = 0;
    for (script, reason) in [
        ("rm -rf ~".to_string(), DenyReason::CatastrophicCommand),
        ("sleep 5 &".to_string(), DenyReason::BackgroundCommand),
        (
            format!("cat {}", grants.display()),
            DenyReason::ProtectedPath,
        ),
    ] {
        for tool in ["bash_bg", "shell"] {
            call += 1;
            let args = json!({ "command": script, "cwd": broker.work }).to_string();
            let response = client.call(call, tool, &args).unwrap();
            assert_eq!(denied(&response), reason, "{tool} {script}");
        }
    }
    let only_shell = BrokerProcess::start(
        "[[grant]]\nid = \"sh\"\ntool = \"shell\"\ncommands = [\"sleep\"]\npaths = [\"{work}\"]\n",
        FAST,
    );
    let mut client = AgentClient::open(&only_shell.socket(), None);
    let args = json!({ "command": "sleep 1", "cwd": only_shell.work }).to_string();
    assert_eq!(
        denied(&client.call(1, "bash_bg", &args).unwrap()),
        DenyReason::NoGrant
    );
    assert_eq!(denied(&tail(&mut client, 2, 1)), DenyReason::NoGrant);
    let Some(BrokerFrame::Tools { tools }) = client.send(&AgentFrame::ListTools {}) else {
        panic!("no catalog");
    };
    assert!(
        tools.iter().all(|t| !t.name.starts_with("bash_")),
        "{tools:?}"
    );
    // With a bash_bg grant the catalog lists the three.
    let mut client = AgentClient::open(&broker.socket(), None);
    let Some(BrokerFrame::Tools { tools }) = client.send(&AgentFrame::ListTools {}) else {
        panic!("no catalog");
    };
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    for name in ["bash_bg", "bash_tail", "bash_kill"] {
        assert!(names.contains(&name), "{names:?}");
    }
}
