//! The optional Podman backend, end to end: `shell` in a container of an image imported from a
//! local tarball (a few of this machine's programs and their libraries), run by a real broker.
//! Where Podman is not installed (CI does not install it), each test says so and skips.

use std::process::Command;

use testkit::{AgentClient, BrokerProcess};

/// The programs the image holds.
const PROGRAMS: &[&str] = &["bash", "cat", "ls", "touch", "sleep", "id"];

use super::content;

const GRANTS: &str = r#"
[[grant]]
id = "work-shell"
tool = "shell"
commands = ["touch", "ls", "cat", "sleep", "id"]
paths = ["{work}"]
untrusted = false
on_untrusted = "allow"
"#;

fn run(
    broker: &BrokerProcess,
    id: u64,
    command: &str,
    timeout: Option<u64>,
) -> (serde_json::Value, String) {
    let mut client = AgentClient::open(&broker.socket(), None);
    let mut args = serde_json::json!({ "command": command, "cwd": broker.work });
    if let Some(secs) = timeout {
        args["timeout_secs"] = secs.into();
    }
    let response = client.call(id, "shell", &args.to_string()).unwrap();
    let text = content(&response).to_string();
    let (header, body) = text.split_once('\n').unwrap();
    (serde_json::from_str(header).unwrap(), body.to_string())
}

#[test]
fn shell_runs_in_a_container_of_the_image_with_only_the_granted_folder_and_no_network() {
    let Some(podman) = brokerd::daemon::podman::find_podman(None) else {
        println!(
            "skipped: podman is not installed (the Podman backend is optional; CI does not install it)"
        );
        return;
    };
    let image = testkit::podman::Image::import(&podman, PROGRAMS);
    let config = format!(
        "{}\n[sandbox]\npodman_image = {:?}\n",
        super::FAST,
        image.name
    );
    let broker = BrokerProcess::start(GRANTS, &config);
    let (header, body) = run(
        &broker,
        1,
        "touch made-in-container && ls /sys/class/net && id -u",
        None,
    );
    assert!(
        super::walls(&broker).as_str().contains("podman container"),
        "{header}"
    );
    assert_eq!(header["exit_code"], 0, "{header} {body}");
    assert_eq!(
        body.split_whitespace().collect::<Vec<_>>(),
        ["lo", "0"],
        "{body}"
    );
    assert!(broker.work.join("made-in-container").exists());
    // This machine's files outside the grant are not in the container.
    let elsewhere = testkit::temp_dir();
    let outside = elsewhere.path().join("outside.txt");
    std::fs::write(&outside, "not granted").unwrap();
    let (header, body) = run(&broker, 2, &format!("cat {}", outside.display()), None);
    assert_ne!(header["exit_code"], 0, "{body}");
    assert!(body.contains("No such file"), "{body}");
    // The call's time limit stops the container.
    let (header, _) = run(&broker, 3, "sleep 30", Some(2));
    assert_eq!(header["timed_out"], true, "{header}");
    let walls = std::process::Command::new(testkit::binary("bx").unwrap())
        .arg("--config-dir")
        .arg(&broker.config)
        .arg("--state-dir")
        .arg(&broker.state)
        .arg("--runtime-dir")
        .arg(&broker.runtime)
        .arg("status")
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&walls.stdout);
    assert!(status.contains("Podman container"), "{status}");
}

#[test]
fn a_podman_image_without_podman_is_a_start_error_naming_it() {
    let broker_config =
        "[sandbox]\npodman_image = \"localhost/x:1\"\npodman = \"/nonexistent/podman\"\n";
    let root = testkit::temp_dir();
    let config = root.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("brokerd.toml"), broker_config).unwrap();
    let runtime = root.path().join("rt");
    std::fs::create_dir_all(&runtime).unwrap();
    std::fs::set_permissions(
        &runtime,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let output = Command::new(testkit::binary("brokerd").unwrap())
        .arg("--config-dir")
        .arg(&config)
        .arg("--state-dir")
        .arg(root.path().join("state"))
        .arg("--runtime-dir")
        .arg(&runtime)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("podman_image") && stderr.contains("/nonexistent/podman"),
        "{stderr}"
    );
}
