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
