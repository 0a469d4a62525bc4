//! `bx doctor` with no broker running: on this machine (root, bubblewrap installed, v1
//! cgroups) every wall is found and a real box runs.

use super::bx_in;

#[test]
fn bx_doctor_finds_every_wall_and_builds_a_box_with_no_broker_running() {
    let dir = tempfile::tempdir().unwrap();
    let ran = bx_in(dir.path(), dir.path(), dir.path(), &["doctor"]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    for wall in [
        "bubblewrap",
        "user namespaces",
        "seccomp",
        "cgroup",
        "landlock",
        "a box",
    ] {
        assert!(
            ran.stdout
                .lines()
                .any(|l| l.starts_with("ok") && l.contains(wall)),
            "{wall}: {}",
            ran.stdout
        );
    }
    assert!(
        ran.stdout.contains(
            "bubblewrap, Landlock fully enforced, seccomp, rlimits and a cgroup ran /bin/true"
        ),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout.contains(
            "boxes: bubblewrap, Landlock fully enforced, seccomp, rlimits and a cgroup\n"
        ),
        "{}",
        ran.stdout
    );
}

#[test]
fn bx_doctor_as_an_owner_without_a_cgroup_prints_the_delegation_and_still_builds_a_box() {
    use std::os::unix::fs::PermissionsExt;
    let uid = testkit::NOBODY;
    let v1 = std::path::Path::new("/sys/fs/cgroup/pids/tasks").exists();
    for controller in ["pids", "memory"] {
        let _ = std::fs::remove_dir(format!("/sys/fs/cgroup/{controller}/boxmaker/uid-{uid}"));
    }
    let bx = testkit::RunnableCopy::of(&testkit::binary("bx").unwrap());
    let dir = testkit::temp_dir();
    std::os::unix::fs::chown(dir.path(), Some(uid), Some(uid)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let output = bx
        .command_as(uid)
        .arg("--config-dir")
        .arg(dir.path())
        .arg("--state-dir")
        .arg(dir.path())
        .arg("--runtime-dir")
        .arg(dir.path())
        .arg("doctor")
        .env("HOME", dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // A wall is missing, so it exits 1; and says which, and how to get it.
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("MISSING  cgroup "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        lines[at].contains(&format!("uid {uid} is not root")),
        "{stdout}"
    );
    if v1 {
        let folders = format!(
            "/sys/fs/cgroup/pids/boxmaker/uid-{uid} /sys/fs/cgroup/memory/boxmaker/uid-{uid}"
        );
        assert_eq!(
            lines[at + 1].trim(),
            format!("mkdir -p {folders}"),
            "{stdout}"
        );
        assert_eq!(
            lines[at + 2].trim(),
            format!("chown {uid}: {folders}"),
            "{stdout}"
        );
    }
    assert!(
        stdout.contains("without it: boxes with bubblewrap are built without one: no limit on the number of their processes or on their memory together"),
        "{stdout}"
    );
    // The box is built all the same, and the boxes line says what it lacks.
    assert!(
        stdout.contains(
            "bubblewrap, Landlock fully enforced, seccomp, rlimits and no cgroup ran /bin/true"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "boxes: bubblewrap, Landlock fully enforced, seccomp and rlimits; {}\n",
            sandbox::WITHOUT_CGROUP
        )),
        "{stdout}"
    );
}
