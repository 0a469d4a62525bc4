//! Attempts to outlast the box or reach the broker through a socket it left under a grant.

use std::time::Duration;

use super::{alive, scene};

#[test]
fn a_process_ignoring_sigterm_is_killed_with_the_box_at_its_time_limit() {
    let s = scene();
    let script = "trap '' TERM; kill -TERM $$; echo survived; exec sleep 41.4213";
    // Unsandboxed, only the shell: it survives its own SIGTERM.
    let host = s.host("trap '' TERM; kill -TERM $$; echo survived", &[]);
    assert_eq!(host.code, Some(0));
    assert_eq!(host.stdout, "survived\n");
    let (ended, ran) = s.boxed_with(script, &[], &s.policy(), Duration::from_millis(500));
    assert_eq!(ran.stdout, "survived\n");
    assert!(ended.timed_out, "{ended:?}");
    assert_eq!(alive("41.4213"), Vec::<i32>::new());
}

#[test]
fn a_broker_socket_in_a_protected_folder_under_the_grant_cannot_be_reached() {
    let s = scene();
    let path = s.protected.join("agent.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let addr = path.display().to_string();
    s.escapes_on_host(super::UNIX_CONNECT, &[("ADDR", addr.clone())], "connected");
    s.refused_in_box(
        super::UNIX_CONNECT,
        &[("ADDR", addr)],
        "connected",
        "PermissionError",
    );
}

#[test]
fn the_boxs_processes_are_its_own() {
    let s = scene();
    // Unsandboxed, the broker's processes are listed; in the box only the box's.
    let script = "test -d \"/proc/$HOST_PID\" && echo listed";
    s.escapes_on_host(script, &[], "listed");
    let ran = s.boxed("ls /proc | grep -c '^[0-9]'", &[]);
    let count: u32 = ran.stdout.trim().parse().unwrap();
    assert!(count <= 4, "{}", ran.stdout);
}

#[test]
fn the_command_holds_no_descriptor_but_the_standard_three() {
    // The launcher's binary reaches the box as a descriptor bubblewrap inherits; neither the
    // command of a fresh box nor one of a command worker holds it, or anything else.
    let s = scene();
    // `; true`: so that bash runs `ls` as its child instead of becoming it.
    let script = "ls /proc/$$/fd; true";
    for ran in [s.boxed(script, &[]), s.warm(script, &[])] {
        assert_eq!(
            (ran.code, ran.stdout.as_str()),
            (Some(0), "0\n1\n2\n"),
            "{}",
            ran.stderr
        );
    }
}
