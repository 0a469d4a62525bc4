//! The box where bubblewrap or user namespaces are missing, forced here with
//! `FileWalls::LandlockOnly`: Landlock over the same paths, seccomp refusing every socket but
//! `AF_UNIX` and every `connect`, rlimits, every capability dropped and the cgroup. No mount or
//! PID namespace hides anything, so the refusals are Landlock's (`Permission denied`) and
//! seccomp's (`Operation not permitted`).

use std::fs;
use std::time::Duration;

use sandbox::{Containment, FileWalls, Policy};

use super::{MOVE_PINNED_FOLDER, SECRET, Scene, UNIX_CONNECT, kernel, pinned_attempts, scene_with};

const DENIED: &str = "Permission denied";

fn scene() -> Scene {
    scene_with(FileWalls::LandlockOnly)
}

#[test]
fn without_bubblewrap_the_granted_folder_is_readable_and_writable() {
    let s = scene();
    let ran = s.boxed(
        "echo inside > \"$GRANT/sub/made\" && cat \"$GRANT/sub/made\" && echo \"$TMPDIR\"",
        &[],
    );
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    assert!(ran.stdout.starts_with("inside\n"), "{}", ran.stdout);
    assert_eq!(
        fs::read_to_string(s.grant.join("sub/made")).unwrap(),
        "inside\n"
    );
    // Its scratch folder is its own, and goes with the box.
    let tmpdir = ran.stdout.lines().nth(1).unwrap().to_string();
    assert!(tmpdir.contains("boxmaker-box-"), "{tmpdir}");
    assert!(!std::path::Path::new(&tmpdir).exists());
}

#[test]
fn without_bubblewrap_a_folder_holding_a_protected_folder_takes_no_new_file_itself() {
    // Landlock grants a right beneath a folder, protected folder included, so the grant's
    // folder itself gets no rule: only what lies beside the protected folder is granted.
    let s = scene();
    let script = "echo x > \"$GRANT/new\" && echo wrote";
    s.escapes_on_host(script, &[], "wrote");
    fs::remove_file(s.grant.join("new")).unwrap();
    s.refused_in_box(script, &[], "wrote", DENIED);
}

#[test]
fn without_bubblewrap_a_pinned_program_in_the_grant_cannot_be_rewritten_replaced_or_removed() {
    // Landlock's write rules leave the pinned program out (its folder gets no rule itself, as
    // a folder holding a protected folder does); its read rule keeps it runnable.
    pinned_attempts(
        &scene(),
        &[
            (
                "echo 'echo evil' > \"$GRANT/bin/tool\" && echo changed",
                DENIED,
            ),
            (
                "echo 'echo evil' > \"$GRANT/sub/evil\" && mv -f \"$GRANT/sub/evil\" \"$GRANT/bin/tool\" && echo changed",
                DENIED,
            ),
            ("rm -f \"$GRANT/bin/tool\" && echo changed", DENIED),
            (MOVE_PINNED_FOLDER, DENIED),
        ],
    );
}

#[test]
fn without_bubblewrap_the_command_is_held_by_the_cgroup() {
    let s = scene();
    let spec = sandbox::CommandSpec {
        program: "/bin/true".into(),
        args: Vec::new(),
        env: Vec::new(),
        cwd: s.grant.clone(),
    };
    let child = sandbox::spawn_boxed(&spec, &s.policy(), Duration::from_secs(10)).unwrap();
    assert_eq!(child.containment(), Containment::Cgroup);
    let ended = child.finish(&mut |_| {}, &mut |_| {}).unwrap();
    assert_eq!(ended.exit, Some(sandbox::Exit::Code(0)));
}

#[test]
fn without_bubblewrap_a_box_with_no_launcher_is_refused() {
    let s = scene();
    let policy = Policy {
        launcher: None,
        ..s.policy()
    };
    let spec = sandbox::CommandSpec {
        program: "/bin/true".into(),
        args: Vec::new(),
        env: Vec::new(),
        cwd: s.grant.clone(),
    };
    let error = sandbox::spawn_boxed(&spec, &policy, Duration::from_secs(10)).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("no file walls: the box names no launcher to apply Landlock"),
        "{error}"
    );
}

#[test]
fn without_bubblewrap_reading_outside_the_grant_is_refused() {
    scene().attempt("cat \"$OUTSIDE/secret\"", SECRET, DENIED);
}

#[test]
fn without_bubblewrap_a_symlink_planted_in_the_grant_pointing_out_is_refused() {
    scene().attempt(
        "ln -sfn \"$OUTSIDE/secret\" \"$GRANT/sub/link\" && cat \"$GRANT/sub/link\"",
        SECRET,
        DENIED,
    );
}

#[test]
fn without_bubblewrap_proc_self_root_does_not_lead_out() {
    scene().attempt("cat \"/proc/self/root$OUTSIDE/secret\"", SECRET, DENIED);
}

#[test]
fn without_bubblewrap_writing_outside_the_grant_is_refused_and_leaves_no_file() {
    let s = scene();
    let script = "echo x > \"$OUTSIDE/new\" && echo wrote";
    s.escapes_on_host(script, &[], "wrote");
    fs::remove_file(s.outside.join("new")).unwrap();
    s.refused_in_box(script, &[], "wrote", DENIED);
    assert!(!s.outside.join("new").exists());
}

#[test]
fn without_bubblewrap_the_system_folders_are_read_only() {
    let s = scene();
    let script = "touch /usr/local/boxmaker-escape-probe && echo wrote";
    s.escapes_on_host(script, &[], "wrote");
    fs::remove_file("/usr/local/boxmaker-escape-probe").unwrap();
    s.refused_in_box(script, &[], "wrote", DENIED);
}

#[test]
fn without_bubblewrap_a_protected_folder_under_the_granted_parent_cannot_be_read() {
    scene().attempt("cat \"$PROT/secret\"", super::PROTECTED_SECRET, DENIED);
}

#[test]
fn without_bubblewrap_a_protected_folder_under_the_granted_parent_cannot_be_written() {
    let s = scene();
    let script = "echo x > \"$PROT/new\" && echo wrote";
    s.escapes_on_host(script, &[], "wrote");
    fs::remove_file(s.protected.join("new")).unwrap();
    s.refused_in_box(script, &[], "wrote", DENIED);
    assert!(!s.protected.join("new").exists());
}

#[test]
fn without_bubblewrap_etc_shadow_cannot_be_read() {
    scene().attempt("cat /etc/shadow", "root:", DENIED);
}

#[test]
fn without_bubblewrap_run_cannot_be_listed() {
    scene().attempt("ls /run/ && echo listed", "listed", DENIED);
}

#[test]
fn without_bubblewrap_the_brokers_environ_cannot_be_read() {
    scene().attempt(
        "grep -qa PATH= \"/proc/$HOST_PID/environ\" && echo read",
        "read",
        DENIED,
    );
}

#[test]
fn without_bubblewrap_the_broker_cannot_be_signalled() {
    scene().attempt(
        "kill -0 \"$HOST_PID\" && echo alive",
        "alive",
        "Operation not permitted",
    );
}

#[test]
fn without_bubblewrap_a_unix_socket_outside_the_grant_cannot_be_connected_to() {
    let s = scene();
    let path = s.outside.join("agent.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let addr = path.display().to_string();
    s.escapes_on_host(UNIX_CONNECT, &[("ADDR", addr.clone())], "connected");
    s.refused_in_box(
        UNIX_CONNECT,
        &[("ADDR", addr)],
        "connected",
        "PermissionError",
    );
}

#[test]
fn without_bubblewrap_a_datagram_to_a_unix_socket_by_path_is_refused() {
    let s = scene();
    let path = s.outside.join("dgram.sock");
    let listener = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let script = "/usr/bin/python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.sendto(b\"hello\", sys.argv[1]); print(\"sent\")' \"$ADDR\"";
    let addr = path.display().to_string();
    s.escapes_on_host(script, &[("ADDR", addr.clone())], "sent");
    let mut buf = [0u8; 16];
    assert_eq!(listener.recv(&mut buf).unwrap(), 5);
    s.refused_in_box(script, &[("ADDR", addr)], "sent", "PermissionError");
    assert_eq!(
        listener.recv(&mut buf).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock
    );
}

#[test]
fn without_bubblewrap_tcp_to_a_listener_on_loopback_is_refused() {
    let s = scene();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let script = "exec 3<>\"/dev/tcp/127.0.0.1/$PORT\" && echo connected";
    s.escapes_on_host(script, &[("PORT", port.clone())], "connected");
    s.refused_in_box(
        script,
        &[("PORT", port)],
        "connected",
        "socket: Operation not permitted",
    );
}

#[test]
fn without_bubblewrap_udp_to_a_listener_on_loopback_is_refused() {
    let s = scene();
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_nonblocking(true).unwrap();
    let port = socket.local_addr().unwrap().port().to_string();
    let script = "echo datagram > \"/dev/udp/127.0.0.1/$PORT\" && echo sent";
    s.escapes_on_host(script, &[("PORT", port.clone())], "sent");
    let mut buf = [0u8; 64];
    assert_eq!(socket.recv(&mut buf).unwrap(), 9);
    s.refused_in_box(
        script,
        &[("PORT", port)],
        "sent",
        "socket: Operation not permitted",
    );
    assert_eq!(
        socket.recv(&mut buf).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock
    );
}

#[test]
fn without_bubblewrap_an_abstract_unix_socket_cannot_be_reached() {
    use std::os::linux::net::SocketAddrExt;
    let s = scene();
    let name = format!("boxmaker-escape-nobwrap-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(&name).unwrap();
    let _listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    let script = "/usr/bin/python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(\"\\0\"+sys.argv[1]); print(\"connected\")' \"$ADDR\"";
    s.escapes_on_host(script, &[("ADDR", name.clone())], "connected");
    s.refused_in_box(script, &[("ADDR", name)], "connected", "PermissionError");
}

#[test]
fn without_bubblewrap_a_fork_bomb_meets_the_process_limit() {
    let script = "perl -e 'for (1..100) { my $p = fork; if (!defined $p) { print STDERR \"fork: $!\\n\"; exit 1 } if (!$p) { sleep 1; exit 0 } } print \"forked 100\\n\"'";
    scene().attempt(
        script,
        "forked 100",
        "fork: Resource temporarily unavailable",
    );
}

#[test]
fn without_bubblewrap_a_setsid_process_does_not_outlive_the_box() {
    super::outlives_in(
        &scene(),
        "setsid sleep 31.4161 >/dev/null 2>&1 < /dev/null & echo started",
        "31.4161",
    );
}

#[test]
fn without_bubblewrap_every_capability_is_dropped() {
    let s = scene();
    let ran = s.boxed(
        "grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status",
        &[],
    );
    assert_eq!(
        ran.stdout, "CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\n",
        "{}",
        ran.stderr
    );
}

#[test]
fn without_bubblewrap_unshare_and_keyctl_are_refused() {
    let s = scene();
    s.attempt(
        "unshare -m true && echo made",
        "made",
        "unshare failed: Operation not permitted",
    );
    s.attempt(&kernel::syscall("", "250, 0, -3, 0"), "made", kernel::EPERM);
}

#[test]
fn without_bubblewrap_every_socket_family_but_unix_is_refused() {
    let s = scene();
    kernel::every_family_reaches_the_kernel_on_the_host(&s);
    let ran = s.boxed(&kernel::family_walk(), &[]);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    kernel::only_allowed_families(&ran.stdout, kernel::only_unix);
}
