//! The escape suite: each attempt runs first unsandboxed, where it must succeed (otherwise the
//! test would pass while testing nothing), then in a box granting one folder read-write,
//! where it must meet the exact refusal. Every test fails, never skips, without bubblewrap.
//!
//! The scene of each test: `<root>/grant` (granted read-write, with a protected folder
//! `<root>/grant/.boxmaker` masked), `<root>/outside/secret` beside it, under `/var/tmp` so
//! that it is neither in the box's private `/tmp` nor granted. Every box is launched through
//! `sandbox-launcher`, so it has the Landlock layer; `landlock.rs` widens bubblewrap's binds to
//! show what Landlock alone stops, and `without_bubblewrap.rs` runs attempts in the box of
//! Landlock, seccomp, rlimits and the cgroup alone.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use sandbox::{
    CommandSpec, Ended, Exit, FileWalls, Limits, Policy, Sent, WarmBox, spawn_boxed,
    spawn_command_worker,
};

pub(crate) mod kernel;
mod landlock;
mod process;
mod without_bubblewrap;
mod worker;

/// The box's launcher: this crate's `sandbox-launcher`.
pub(super) fn launcher() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_sandbox-launcher"))
}

const SECRET: &str = "outside-secret-7f3a";
const PROTECTED_SECRET: &str = "protected-secret-91c2";
const PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
const PINNED_TOOL: &str = "#!/bin/sh\necho tool ran\n";
/// Moves the pinned program's folder aside and makes another with a program of its own.
const MOVE_PINNED_FOLDER: &str = "mv \"$GRANT/bin\" \"$GRANT/moved\" && mkdir \"$GRANT/bin\" && echo 'echo evil' > \"$GRANT/bin/tool\" && echo changed";

struct Scene {
    _root: tempfile::TempDir,
    grant: PathBuf,
    outside: PathBuf,
    protected: PathBuf,
    walls: FileWalls,
}

pub(super) struct Ran {
    pub(super) code: Option<i32>,
    pub(super) stdout: String,
    pub(super) stderr: String,
}

fn scene() -> Scene {
    scene_with(FileWalls::Bubblewrap)
}

fn scene_with(walls: FileWalls) -> Scene {
    let root = tempfile::tempdir_in("/var/tmp").unwrap();
    let grant = root.path().join("grant");
    let outside = root.path().join("outside");
    let protected = grant.join(".boxmaker");
    fs::create_dir_all(&protected).unwrap();
    fs::create_dir_all(grant.join("sub")).unwrap();
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("secret"), SECRET).unwrap();
    fs::write(protected.join("secret"), PROTECTED_SECRET).unwrap();
    let scene = Scene {
        _root: root,
        grant,
        outside,
        protected,
        walls,
    };
    scene.restore_pinned();
    scene
}

impl Scene {
    /// A program in the grant the policy pins, as the broker pins its own binaries.
    fn pinned(&self) -> PathBuf {
        self.grant.join("bin/tool")
    }

    /// Writes the pinned program afresh (after an attempt on the host changed it).
    fn restore_pinned(&self) {
        fs::create_dir_all(self.pinned().parent().unwrap()).unwrap();
        let _ = fs::remove_file(self.pinned());
        fs::write(self.pinned(), PINNED_TOOL).unwrap();
        fs::set_permissions(self.pinned(), fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn env(&self, extra: &[(&str, String)]) -> Vec<(String, String)> {
        let mut env = vec![
            ("PATH".to_string(), PATH.to_string()),
            ("GRANT".to_string(), self.grant.display().to_string()),
            ("OUTSIDE".to_string(), self.outside.display().to_string()),
            ("PROT".to_string(), self.protected.display().to_string()),
            ("HOST_PID".to_string(), std::process::id().to_string()),
        ];
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
        env
    }

    fn policy(&self) -> Policy {
        Policy {
            read_only: Vec::new(),
            read_write: vec![self.grant.clone()],
            masked: vec![self.protected.clone()],
            tmp_bytes: 1 << 20,
            files: Vec::new(),
            limits: Limits {
                cpu_seconds: 30,
                address_space: 512 << 20,
                file_size: 1 << 20,
                open_files: 256,
                processes: 32,
                memory: 256 << 20,
                output_bytes: 8 << 20,
            },
            launcher: Some(launcher()),
            file_walls: self.walls,
            network: None,
            pinned: vec![self.pinned()],
        }
    }

    /// Runs `script` unsandboxed, as the broker's own child would be without the box.
    fn host(&self, script: &str, extra: &[(&str, String)]) -> Ran {
        let out = Command::new("/bin/bash")
            .arg("-c")
            .arg(script)
            .envs(self.env(extra))
            .current_dir(&self.grant)
            .output()
            .unwrap();
        Ran {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    fn boxed_with(
        &self,
        script: &str,
        extra: &[(&str, String)],
        policy: &Policy,
        timeout: Duration,
    ) -> (Ended, Ran) {
        let spec = self.spec(script, extra);
        let child = spawn_boxed(&spec, policy, timeout).unwrap();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let ended = child
            .finish(&mut |b| out.extend_from_slice(b), &mut |b| {
                err.extend_from_slice(b)
            })
            .unwrap();
        let code = match ended.exit {
            Some(Exit::Code(code)) => Some(code),
            _ => None,
        };
        (
            ended,
            Ran {
                code,
                stdout: String::from_utf8_lossy(&out).into_owned(),
                stderr: String::from_utf8_lossy(&err).into_owned(),
            },
        )
    }

    fn boxed(&self, script: &str, extra: &[(&str, String)]) -> Ran {
        self.boxed_with(script, extra, &self.policy(), Duration::from_secs(20))
            .1
    }

    /// Runs `script` through a command worker in a box of the same policy, after a first
    /// command, so that the attempt meets a worker that has served before.
    fn warm(&self, script: &str, extra: &[(&str, String)]) -> Ran {
        let mut worker = spawn_command_worker(&self.policy()).unwrap();
        let first = self.spec("true", extra);
        let (ended, _) = run_warm(&mut worker, &first, Duration::from_secs(20));
        assert_eq!(ended.exit, Some(Exit::Code(0)));
        run_warm(
            &mut worker,
            &self.spec(script, extra),
            Duration::from_secs(20),
        )
        .1
    }

    fn spec(&self, script: &str, extra: &[(&str, String)]) -> CommandSpec {
        CommandSpec {
            program: "/bin/bash".into(),
            args: vec!["-c".into(), script.into()],
            env: self
                .env(extra)
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            cwd: self.grant.clone(),
        }
    }

    /// The attempt succeeds unsandboxed (exit 0, `shows` in its output)…
    fn escapes_on_host(&self, script: &str, extra: &[(&str, String)], shows: &str) {
        let ran = self.host(script, extra);
        assert_eq!(
            ran.code,
            Some(0),
            "unsandboxed: {}{}",
            ran.stdout,
            ran.stderr
        );
        assert!(
            ran.stdout.contains(shows),
            "unsandboxed: {}{}",
            ran.stdout,
            ran.stderr
        );
    }

    /// …and in the box fails with `refusal` on standard error, without showing `shows`: in a
    /// fresh box and through a warm box's command worker alike (with bubblewrap, where a box
    /// takes a worker).
    fn refused_in_box(&self, script: &str, extra: &[(&str, String)], shows: &str, refusal: &str) {
        let fresh = self.boxed(script, extra);
        let warm = (self.walls == FileWalls::Bubblewrap).then(|| self.warm(script, extra));
        for (path, ran) in std::iter::once(("fresh", fresh)).chain(warm.map(|w| ("warm", w))) {
            self.refused(path, ran, shows, refusal);
        }
    }

    fn refused(&self, path: &str, ran: Ran, shows: &str, refusal: &str) {
        assert_ne!(ran.code, Some(0), "{path}: {}{}", ran.stdout, ran.stderr);
        assert!(
            !ran.stdout.contains(shows),
            "{path}: {}{}",
            ran.stdout,
            ran.stderr
        );
        assert!(
            ran.stderr.contains(refusal),
            "{path}, wanted {refusal:?}: {}{}",
            ran.stdout,
            ran.stderr
        );
    }

    fn attempt(&self, script: &str, shows: &str, refusal: &str) {
        self.escapes_on_host(script, &[], shows);
        self.refused_in_box(script, &[], shows, refusal);
    }
}

/// Runs `spec` through `worker`; how it ended and what it wrote.
pub(super) fn run_warm(
    worker: &mut WarmBox,
    spec: &CommandSpec,
    timeout: Duration,
) -> (Ended, Ran) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let ended = worker
        .run_command(
            spec,
            timeout,
            30,
            8 << 20,
            &mut |b| out.extend_from_slice(b),
            &mut |b| err.extend_from_slice(b),
            &mut Sent::default(),
        )
        .unwrap();
    let code = match ended.exit {
        Some(Exit::Code(code)) => Some(code),
        _ => None,
    };
    (
        ended,
        Ran {
            code,
            stdout: String::from_utf8_lossy(&out).into_owned(),
            stderr: String::from_utf8_lossy(&err).into_owned(),
        },
    )
}

const NO_FILE: &str = "No such file or directory";

#[test]
fn the_granted_folder_is_readable_and_writable_in_the_box() {
    let s = scene();
    let ran = s.boxed(
        "echo inside > \"$GRANT/made\" && cat \"$GRANT/made\" && pwd",
        &[],
    );
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    assert_eq!(ran.stdout, format!("inside\n{}\n", s.grant.display()));
    assert_eq!(
        fs::read_to_string(s.grant.join("made")).unwrap(),
        "inside\n"
    );
}

#[test]
fn reading_outside_the_grant_by_absolute_path_is_refused() {
    scene().attempt("cat \"$OUTSIDE/secret\"", SECRET, NO_FILE);
}

#[test]
fn reading_outside_the_grant_through_dot_dot_is_refused() {
    scene().attempt("cat \"$GRANT/../outside/secret\"", SECRET, NO_FILE);
}

#[test]
fn a_symlink_planted_in_the_grant_pointing_out_leads_nowhere() {
    scene().attempt(
        "ln -sfn \"$OUTSIDE/secret\" \"$GRANT/link\" && cat \"$GRANT/link\"",
        SECRET,
        NO_FILE,
    );
}

#[test]
fn a_hard_link_to_a_file_outside_cannot_be_made() {
    scene().attempt(
        "rm -f \"$GRANT/hard\"; ln \"$OUTSIDE/secret\" \"$GRANT/hard\" && cat \"$GRANT/hard\"",
        SECRET,
        NO_FILE,
    );
}

#[test]
fn proc_self_root_does_not_lead_to_the_host() {
    scene().attempt("cat \"/proc/self/root$OUTSIDE/secret\"", SECRET, NO_FILE);
}

#[test]
fn the_brokers_environ_is_not_in_the_boxs_proc() {
    scene().attempt(
        "grep -qa PATH= \"/proc/$HOST_PID/environ\" && echo read",
        "read",
        NO_FILE,
    );
}

#[test]
fn the_brokers_cwd_is_not_in_the_boxs_proc() {
    scene().attempt(
        "ls \"/proc/$HOST_PID/cwd/\" >/dev/null && echo listed",
        "listed",
        NO_FILE,
    );
}

#[test]
fn the_broker_cannot_be_signalled_from_the_box() {
    scene().attempt(
        "kill -0 \"$HOST_PID\" && echo alive",
        "alive",
        "No such process",
    );
}

#[test]
fn writing_outside_the_grant_by_absolute_path_is_refused_and_leaves_no_file() {
    let s = scene();
    let script = "echo x > \"$OUTSIDE/new\" && echo wrote";
    s.escapes_on_host(script, &[], "wrote");
    fs::remove_file(s.outside.join("new")).unwrap();
    s.refused_in_box(script, &[], "wrote", NO_FILE);
    assert!(!s.outside.join("new").exists());
}

#[test]
fn the_system_folders_are_read_only() {
    let s = scene();
    let script = "touch /usr/local/boxmaker-escape-probe && echo wrote";
    s.escapes_on_host(script, &[], "wrote");
    fs::remove_file("/usr/local/boxmaker-escape-probe").unwrap();
    s.refused_in_box(script, &[], "wrote", "Read-only file system");
}

#[test]
fn the_boxs_root_is_read_only() {
    let s = scene();
    let script = "mkdir /boxmaker-escape-probe && echo made";
    s.escapes_on_host(script, &[], "made");
    fs::remove_dir("/boxmaker-escape-probe").unwrap();
    s.refused_in_box(script, &[], "made", "Read-only file system");
}

#[test]
fn a_protected_folder_under_the_granted_parent_cannot_be_read() {
    scene().attempt(
        "cat \"$PROT/secret\"",
        PROTECTED_SECRET,
        "Permission denied",
    );
}

#[test]
fn a_protected_folder_under_the_granted_parent_cannot_be_written() {
    let s = scene();
    let script = "echo x > \"$PROT/new\" && echo wrote";
    s.escapes_on_host(script, &[], "wrote");
    fs::remove_file(s.protected.join("new")).unwrap();
    s.refused_in_box(script, &[], "wrote", "Permission denied");
    assert!(!s.protected.join("new").exists());
}

#[test]
fn etc_shadow_is_not_in_the_box() {
    scene().attempt("cat /etc/shadow", "root:", NO_FILE);
}

#[test]
fn run_and_its_sockets_are_not_in_the_box() {
    scene().attempt("ls /run/ && echo listed", "listed", NO_FILE);
}

#[test]
fn sys_is_not_in_the_box() {
    scene().attempt("ls /sys/fs/cgroup/ && echo listed", "listed", NO_FILE);
}

#[test]
fn an_inherited_descriptor_of_the_broker_is_not_in_the_box() {
    let s = scene();
    let file = rustix::fs::open(
        s.outside.join("secret"),
        rustix::fs::OFlags::RDONLY,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&file).to_string();
    let script = "cat <&\"$FD\"";
    s.escapes_on_host(script, &[("FD", fd.clone())], SECRET);
    s.refused_in_box(script, &[("FD", fd)], SECRET, "Bad file descriptor");
}

#[test]
fn the_brokers_environment_is_not_in_the_box() {
    let s = scene();
    // cargo sets CARGO_MANIFEST_DIR in the test's own environment; the box gets only its spec's.
    let script = "test -n \"$CARGO_MANIFEST_DIR\" && echo inherited";
    let host = Command::new("/bin/bash")
        .arg("-c")
        .arg(script)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&host.stdout).contains("inherited"));
    let ran = s.boxed(script, &[]);
    assert_eq!(ran.code, Some(1), "{}{}", ran.stdout, ran.stderr);
    let env = s.boxed("env", &[]).stdout;
    let mut names: Vec<&str> = env.lines().filter_map(|l| l.split('=').next()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "GRANT", "HOST_PID", "OUTSIDE", "PATH", "PROT", "PWD", "SHLVL", "_"
        ]
    );
}

#[test]
fn a_boxed_command_starts_with_no_signal_blocked_and_sigpipe_not_ignored() {
    // The test ignores SIGPIPE, as every Rust program does, and bubblewrap is started with
    // every signal blocked until its `exec`: neither may reach the command.
    let s = scene();
    let script = "(yes; echo \"yes ended $?\" >&2) | head -c 1 >/dev/null; \
                  grep '^SigBlk:' /proc/self/status";
    assert_eq!(s.host(script, &[]).stderr, "yes ended 141\n");
    let ran = s.boxed(script, &[]);
    assert_eq!(ran.stderr, "yes ended 141\n");
    assert_eq!(ran.stdout, "SigBlk:\t0000000000000000\n");
}

/// Each attempt on a pinned program: it succeeds on the host (the program is written afresh
/// after it), and is refused in the box with `refusal`, the program unchanged.
fn pinned_attempts(s: &Scene, attempts: &[(&str, &str)]) {
    for (script, refusal) in attempts {
        s.escapes_on_host(script, &[], "changed");
        let _ = fs::remove_dir_all(s.grant.join("moved"));
        s.restore_pinned();
        s.refused_in_box(script, &[], "changed", refusal);
        assert_eq!(fs::read_to_string(s.pinned()).unwrap(), PINNED_TOOL);
    }
    // It still runs in the box, and the rest of the grant is still writable.
    let ran = s.boxed("\"$GRANT/bin/tool\" && echo x > \"$GRANT/sub/beside\"", &[]);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    assert_eq!(ran.stdout, "tool ran\n");
    assert_eq!(
        fs::read_to_string(s.grant.join("sub/beside")).unwrap(),
        "x\n"
    );
}

#[test]
fn a_pinned_program_in_the_grant_cannot_be_rewritten_replaced_or_removed() {
    // The broker pins its own binaries, which a grant on their folder would otherwise let a
    // command replace: the next box, or the next broker, would run the command's code.
    pinned_attempts(
        &scene(),
        &[
            (
                "echo 'echo evil' > \"$GRANT/bin/tool\" && echo changed",
                "Read-only file system",
            ),
            (
                "echo 'echo evil' > \"$GRANT/sub/evil\" && mv -f \"$GRANT/sub/evil\" \"$GRANT/bin/tool\" && echo changed",
                "Device or resource busy",
            ),
            (
                "rm -f \"$GRANT/bin/tool\" && echo changed",
                "Device or resource busy",
            ),
            (
                "chmod 777 \"$GRANT/bin/tool\" && echo changed",
                "Read-only file system",
            ),
            // Its folder moved aside and another put in its place.
            (MOVE_PINNED_FOLDER, "Device or resource busy"),
            (
                "rm -rf \"$GRANT/bin\" && echo changed",
                "Device or resource busy",
            ),
        ],
    );
}

#[test]
fn remounting_the_root_read_write_is_refused() {
    let s = scene();
    // Unsandboxed, in a mount namespace of its own, so the host's mounts stay as they were.
    s.escapes_on_host(
        "unshare -m sh -c 'mount -o remount,rw / && echo remounted'",
        &[],
        "remounted",
    );
    s.refused_in_box(
        "mount -o remount,rw / && echo remounted",
        &[],
        "remounted",
        "permission denied",
    );
}

#[test]
fn mounting_a_file_system_is_refused() {
    let s = scene();
    fs::create_dir(s.grant.join("m")).unwrap();
    s.escapes_on_host(
        "unshare -m sh -c 'mount -t tmpfs none \"$GRANT/m\" && echo mounted'",
        &[],
        "mounted",
    );
    s.refused_in_box(
        "mount -t tmpfs none \"$GRANT/m\" && echo mounted",
        &[],
        "mounted",
        "permission denied",
    );
}

#[test]
fn a_new_user_namespace_cannot_be_made() {
    // seccomp refuses `unshare` first; under it, bubblewrap's --disable-userns (ENOSPC).
    scene().attempt(
        "unshare -U true && echo made",
        "made",
        "unshare failed: Operation not permitted",
    );
}

#[test]
fn tcp_to_a_listener_on_the_hosts_loopback_is_refused() {
    let s = scene();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let script = "exec 3<>\"/dev/tcp/127.0.0.1/$PORT\" && echo connected";
    s.escapes_on_host(script, &[("PORT", port.clone())], "connected");
    // seccomp refuses the socket itself; under it, the box's own network namespace.
    s.refused_in_box(
        script,
        &[("PORT", port)],
        "connected",
        "socket: Operation not permitted",
    );
}

#[test]
fn udp_to_a_listener_on_the_hosts_loopback_never_arrives() {
    let s = scene();
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_nonblocking(true).unwrap();
    let port = socket.local_addr().unwrap().port().to_string();
    let script = "echo datagram > \"/dev/udp/127.0.0.1/$PORT\" && echo sent";
    s.escapes_on_host(script, &[("PORT", port.clone())], "sent");
    let mut buf = [0u8; 64];
    assert_eq!(socket.recv(&mut buf).unwrap(), 9);
    // In the box the datagram goes to the box's own loopback: sending is not an error, and
    // nothing reaches the host's listener (loopback delivery is done when `echo` returns).
    s.boxed(script, &[("PORT", port)]);
    assert_eq!(
        socket.recv(&mut buf).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock
    );
}

/// A resolver on the host's loopback answering one query (its id and the response bit set).
fn resolver() -> (String, std::thread::JoinHandle<usize>) {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let port = socket.local_addr().unwrap().port().to_string();
    let answering = std::thread::spawn(move || {
        let mut answered = 0;
        let mut buf = [0u8; 512];
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            let mut reply = buf[..n].to_vec();
            reply[2] |= 0x80;
            socket.send_to(&reply, from).unwrap();
            answered += 1;
            if answered == 1 {
                socket
                    .set_read_timeout(Some(Duration::from_secs(3)))
                    .unwrap();
            }
        }
        answered
    });
    (port, answering)
}

const DNS_QUERY: &str = r#"/usr/bin/python3 -c 'import socket,sys; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5); s.sendto(bytes.fromhex("123401000001000000000000076578616d706c6503636f6d0000010001"), ("127.0.0.1", int(sys.argv[1]))); print("answered", s.recv(512)[:3].hex())' "$PORT""#;

#[test]
fn a_dns_query_to_a_resolver_on_the_hosts_loopback_is_refused() {
    let s = scene();
    let (port, answering) = resolver();
    s.escapes_on_host(DNS_QUERY, &[("PORT", port.clone())], "answered 123481");
    s.refused_in_box(DNS_QUERY, &[("PORT", port)], "answered", "PermissionError");
    // Only the unsandboxed query reached the resolver.
    assert_eq!(answering.join().unwrap(), 1);
}

const UNIX_CONNECT: &str = "/usr/bin/python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(\"connected\")' \"$ADDR\"";

#[test]
fn a_unix_socket_outside_the_grant_cannot_be_reached_by_path() {
    let s = scene();
    let path = s.outside.join("agent.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let addr = path.display().to_string();
    s.escapes_on_host(UNIX_CONNECT, &[("ADDR", addr.clone())], "connected");
    s.refused_in_box(
        UNIX_CONNECT,
        &[("ADDR", addr)],
        "connected",
        "FileNotFoundError",
    );
}

#[test]
fn an_abstract_unix_socket_of_the_host_cannot_be_reached() {
    use std::os::linux::net::SocketAddrExt;
    let s = scene();
    let name = format!("boxmaker-escape-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(&name).unwrap();
    let _listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    let script = "/usr/bin/python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(\"\\0\"+sys.argv[1]); print(\"connected\")' \"$ADDR\"";
    s.escapes_on_host(script, &[("ADDR", name.clone())], "connected");
    s.refused_in_box(
        script,
        &[("ADDR", name)],
        "connected",
        "ConnectionRefusedError",
    );
}

#[test]
fn a_fork_bomb_meets_the_boxs_process_limit() {
    let script = "perl -e 'for (1..100) { my $p = fork; if (!defined $p) { print STDERR \"fork: $!\\n\"; exit 1 } if (!$p) { sleep 1; exit 0 } } print \"forked 100\\n\"'";
    scene().attempt(
        script,
        "forked 100",
        "fork: Resource temporarily unavailable",
    );
}

#[test]
fn a_memory_bomb_meets_the_boxs_memory_limit() {
    let script = "perl -e 'my $x = \"a\" x (700 << 20); print \"allocated\\n\"'";
    scene().attempt(script, "allocated", "Out of memory");
}

#[test]
fn a_disk_filler_fills_only_the_boxs_small_tmp() {
    let s = scene();
    // Files of 512 KiB, below the file size limit, until 4 MiB: only the tmpfs's size stops it.
    let script = "for i in 1 2 3 4 5 6 7 8; do head -c 524288 /dev/zero > \"$SCRATCH/fill$i\" || exit 1; done && echo filled";
    let outside = s.outside.display().to_string();
    s.escapes_on_host(script, &[("SCRATCH", outside)], "filled");
    s.refused_in_box(
        script,
        &[("SCRATCH", "/tmp".to_string())],
        "filled",
        "No space left on device",
    );
}

#[test]
fn an_output_flood_is_cut_at_the_boxs_output_limit() {
    let s = scene();
    // 32 MiB of output, then a word: unsandboxed all of it arrives.
    let script = "head -c 33554432 /dev/zero && echo flood-done";
    let host = s.host(script, &[]);
    assert_eq!(host.code, Some(0));
    assert!(host.stdout.ends_with("flood-done\n"));
    let (ended, ran) = s.boxed_with(script, &[], &s.policy(), Duration::from_secs(20));
    assert!(ended.output_exceeded, "{ended:?}");
    assert!(!ended.timed_out, "{ended:?}");
    assert_eq!(ran.stdout.len(), 8 << 20);
    assert!(!ran.stdout.contains("flood-done"));
}

#[test]
fn a_file_past_the_size_limit_cannot_be_written_in_the_grant() {
    let s = scene();
    let script = "head -c 4194304 /dev/zero > \"$GRANT/big\" && echo filled";
    s.escapes_on_host(script, &[], "filled");
    fs::remove_file(s.grant.join("big")).unwrap();
    s.refused_in_box(script, &[], "filled", "File size limit exceeded");
}

/// Whether a process whose command line holds `marker` is alive on the host.
pub(super) fn alive(marker: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if let Ok(cmdline) = fs::read(entry.path().join("cmdline"))
            && String::from_utf8_lossy(&cmdline).contains(marker)
        {
            found.push(pid);
        }
    }
    found
}

fn outlives(script: &str, marker: &str) {
    outlives_in(&scene(), script, marker);
}

fn outlives_in(s: &Scene, script: &str, marker: &str) {
    s.escapes_on_host(script, &[], "started");
    // The shell may answer before its background child has exec'd the marked command.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut left = alive(marker);
    while left.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        left = alive(marker);
    }
    assert!(!left.is_empty(), "unsandboxed, nothing outlived the shell");
    for pid in left {
        let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
    }
    let ran = s.boxed(script, &[]);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    assert_eq!(alive(marker), Vec::<i32>::new());
}

#[test]
fn a_setsid_process_does_not_outlive_the_box() {
    outlives(
        "setsid sleep 31.4159 >/dev/null 2>&1 < /dev/null & echo started",
        "31.4159",
    );
}

#[test]
fn a_double_fork_does_not_outlive_the_box() {
    outlives(
        "(sh -c 'sleep 27.1828 >/dev/null 2>&1 < /dev/null &' &) ; echo started",
        "27.1828",
    );
}

#[test]
fn every_capability_is_dropped_and_no_new_privs_is_set_in_the_box() {
    let s = scene();
    let script = "grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status";
    let host = s.host(script, &[]);
    assert!(host.stdout.contains("NoNewPrivs:\t0"), "{}", host.stdout);
    let ran = s.boxed(script, &[]);
    assert_eq!(
        ran.stdout,
        "CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\n"
    );
}
