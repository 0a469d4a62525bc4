//! A box with a network ([`sandbox::Network`]): the command reaches the proxy socket only
//! through the relay on `127.0.0.1:P` in the box's own network namespace, sees the proxy in its
//! environment, and reaches nothing else: not a listener on the host's loopback, not a public
//! address, not UDP, not IPv6, no port of its own. The test is the proxy: a Unix listener that
//! answers each connection with what it heard.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::time::Duration;

use sandbox::{
    BoxError, CommandSpec, Exit, FileWalls, Limits, Network, PROXY_IN_BOX, Policy, spawn_boxed,
};

use crate::escape::launcher;

const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

struct Scene {
    _root: tempfile::TempDir,
    grant: PathBuf,
    socket: PathBuf,
}

/// A granted folder, and a fake proxy on a Unix socket answering `proxy heard: <first line>`
/// on every connection, each in a thread of its own.
fn scene() -> Scene {
    let root = tempfile::tempdir_in("/var/tmp").unwrap();
    let grant = root.path().join("grant");
    std::fs::create_dir_all(&grant).unwrap();
    let socket = root.path().join("proxy.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(&stream);
                let mut line = String::new();
                if reader.read_line(&mut line).is_ok() {
                    let mut writer = &stream;
                    let _ = writeln!(writer, "proxy heard: {}", line.trim_end());
                }
            });
        }
    });
    Scene {
        _root: root,
        grant,
        socket,
    }
}

impl Scene {
    fn policy(&self) -> Policy {
        Policy {
            read_write: vec![self.grant.clone()],
            tmp_bytes: 1 << 20,
            limits: Limits {
                cpu_seconds: 30,
                processes: 32,
                memory: 256 << 20,
                ..Limits::default()
            },
            launcher: Some(launcher()),
            file_walls: FileWalls::Bubblewrap,
            network: Some(Network::new(&self.socket)),
            ..Policy::default()
        }
    }

    /// Runs `script` in a box of `policy`: exit code, standard output, standard error.
    fn run(&self, script: &str, env: &[(&str, &str)], policy: &Policy) -> (i32, String, String) {
        let mut vars = vec![("PATH".into(), PATH.into())];
        vars.extend(env.iter().map(|(k, v)| ((*k).into(), (*v).into())));
        let spec = CommandSpec {
            program: "/bin/bash".into(),
            args: vec!["-c".into(), script.into()],
            env: vars,
            cwd: self.grant.clone(),
        };
        let child = spawn_boxed(&spec, policy, Duration::from_secs(20)).unwrap();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let ended = child
            .finish(&mut |b| out.extend_from_slice(b), &mut |b| {
                err.extend_from_slice(b)
            })
            .unwrap();
        // The relay never keeps a box up after its command.
        assert!(!ended.timed_out, "{}", String::from_utf8_lossy(&err));
        let code = match ended.exit {
            Some(Exit::Code(code)) => code,
            other => panic!("ended by {other:?}"),
        };
        (
            code,
            String::from_utf8_lossy(&out).into_owned(),
            String::from_utf8_lossy(&err).into_owned(),
        )
    }
}

/// Connects to `127.0.0.1:$1`, sends a line, prints the answer.
const ASK: &str = "exec 3<>\"/dev/tcp/$HOST/$PORT\" || exit 7; echo \"CONNECT granted.test:443 HTTP/1.1\" >&3; head -n 1 <&3";

#[test]
fn the_command_reaches_its_proxy_through_the_relay_named_in_its_environment() {
    let s = scene();
    let script = format!(
        "echo \"$HTTPS_PROXY $HTTP_PROXY $https_proxy $http_proxy [${{NO_PROXY-unset}}] [${{no_proxy-unset}}]\"; PORT=${{HTTPS_PROXY##*:}}; HOST=127.0.0.1; for i in 1 2 3; do {ASK}; done"
    );
    let (code, out, err) = s.run(
        &script,
        &[
            ("NO_PROXY", "*"),
            ("no_proxy", "*"),
            ("HTTPS_PROXY", "http://evil"),
        ],
        &s.policy(),
    );
    assert_eq!(code, 0, "{out}{err}");
    let url = "http://127.0.0.1:3128";
    let heard = "proxy heard: CONNECT granted.test:443 HTTP/1.1\n";
    assert_eq!(
        out,
        format!(
            "{url} {url} {url} {url} [unset] [unset]\n{}",
            heard.repeat(3)
        )
    );
}

#[test]
fn the_relay_listens_on_the_port_the_policy_names() {
    let s = scene();
    let mut policy = s.policy();
    policy.network = Some(Network {
        port: 8118,
        ..Network::new(&s.socket)
    });
    let script = format!("echo \"$HTTPS_PROXY\"; PORT=8118; HOST=127.0.0.1; {ASK}");
    let (code, out, err) = s.run(&script, &[], &policy);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        out,
        "http://127.0.0.1:8118\nproxy heard: CONNECT granted.test:443 HTTP/1.1\n"
    );
}

#[test]
fn a_command_that_ignores_the_proxy_reaches_nothing() {
    let s = scene();
    let host_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let host_port = host_listener.local_addr().unwrap().port().to_string();
    let connect = "exec 3<>\"/dev/tcp/$HOST/$PORT\" && echo connected";
    // On the host, the listener is there to be reached.
    let ran = std::process::Command::new("/bin/bash")
        .args(["-c", connect])
        .env("HOST", "127.0.0.1")
        .env("PORT", &host_port)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&ran.stdout), "connected\n");
    for (host, port, refusal) in [
        // Landlock: no port but the relay's.
        ("127.0.0.1", host_port.as_str(), "Permission denied"),
        ("1.1.1.1", "443", "Permission denied"),
        // The relay's port elsewhere: the box's namespace has no route out.
        ("1.1.1.1", "3128", "Network is unreachable"),
        // seccomp: no IPv6 socket.
        ("::1", "3128", "Operation not permitted"),
    ] {
        let (code, out, err) = s.run(connect, &[("HOST", host), ("PORT", port)], &s.policy());
        assert_ne!(code, 0, "{host}:{port}: {out}{err}");
        assert!(!out.contains("connected"), "{host}:{port}: {out}{err}");
        assert!(
            err.contains(refusal),
            "{host}:{port}, wanted {refusal}: {err}"
        );
    }
}

#[test]
fn udp_and_listening_stay_refused_in_a_box_with_a_network() {
    let s = scene();
    let (code, out, err) = s.run(
        "echo datagram > /dev/udp/127.0.0.1/3128 && echo sent",
        &[],
        &s.policy(),
    );
    assert_ne!(code, 0, "{out}{err}");
    assert!(err.contains("Operation not permitted"), "{err}");
    let bind = "/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\", 8080)); s.listen(); print(\"bound\")'";
    let (code, out, err) = s.run(bind, &[], &s.policy());
    assert_ne!(code, 0, "{out}{err}");
    assert!(!out.contains("bound"), "{out}");
    assert!(err.contains("PermissionError"), "{err}");
    // The relay's own port is taken by the relay, and binding it is refused all the same.
    let (_, out, err) = s.run(&bind.replace("8080", "3128"), &[], &s.policy());
    assert!(!out.contains("bound"), "{out}{err}");
}

#[test]
fn the_proxy_socket_is_the_one_socket_in_the_box_and_a_box_without_network_has_none() {
    let s = scene();
    let (code, out, err) = s.run(&format!("ls -l {PROXY_IN_BOX} | cut -c1"), &[], &s.policy());
    assert_eq!((code, out.as_str()), (0, "s\n"), "{err}");
    let offline = Policy {
        network: None,
        ..s.policy()
    };
    let (code, out, err) = s.run(
        &format!(
            "echo \"[${{HTTPS_PROXY-unset}}]\"; ls {PROXY_IN_BOX}; HOST=127.0.0.1; PORT=3128; {ASK}"
        ),
        &[("HTTPS_PROXY", "http://127.0.0.1:3128")],
        &offline,
    );
    assert_ne!(code, 0, "{out}{err}");
    assert_eq!(out, "[unset]\n");
    assert!(err.contains("No such file or directory"), "{err}");
    assert!(err.contains("socket: Operation not permitted"), "{err}");
}

#[test]
fn a_network_needs_bubblewrap_and_a_launcher() {
    let s = scene();
    let spec = CommandSpec {
        program: "/bin/true".into(),
        args: Vec::new(),
        env: Vec::new(),
        cwd: s.grant.clone(),
    };
    let landlock_only = Policy {
        file_walls: FileWalls::LandlockOnly,
        ..s.policy()
    };
    let error = spawn_boxed(&spec, &landlock_only, Duration::from_secs(5)).unwrap_err();
    assert!(matches!(error, BoxError::NoNetwork(_)), "{error}");
    assert!(
        error
            .to_string()
            .starts_with("granted hosts need bubblewrap's network namespace"),
        "{error}"
    );
    let without_launcher = Policy {
        launcher: None,
        ..s.policy()
    };
    let error = spawn_boxed(&spec, &without_launcher, Duration::from_secs(5)).unwrap_err();
    assert_eq!(
        error.to_string(),
        "a box with a network needs a launcher to run its relay"
    );
    let missing = Policy {
        network: Some(Network::new(s.grant.join("no.sock"))),
        ..s.policy()
    };
    let error = spawn_boxed(&spec, &missing, Duration::from_secs(5)).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("the proxy socket must be an absolute path that exists"),
        "{error}"
    );
}

#[test]
fn a_command_worker_takes_no_network() {
    // The worker kills every other process of its box after each command: the relay too.
    let s = scene();
    let error = sandbox::spawn_command_worker(&s.policy()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "no command worker: a command worker's box has no network (its relay would not outlive a command)"
    );
}

#[test]
fn the_relay_is_no_child_of_the_command_but_of_the_boxs_init() {
    let s = scene();
    let script = "echo \"children: $(cat /proc/$$/task/*/children)\"; for p in /proc/[0-9]*; do if tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q -- '[-]-boxmaker-box-relay --detached'; then grep PPid $p/status; fi; done";
    let (code, out, err) = s.run(script, &[], &s.policy());
    assert_eq!(code, 0, "{out}{err}");
    // The only child the shell had was its own `cat`; the relay's parent is PID 1.
    let (children, relays) = out.split_once('\n').unwrap();
    assert_eq!(children.split_whitespace().count(), 2, "{out}");
    assert_eq!(relays, "PPid:\t1\n", "{out}");
}

#[test]
fn in_a_box_with_a_network_ipv4_tcp_is_the_one_socket_family_beside_unix() {
    use crate::escape::kernel::{Tried, family_walk, only_allowed_families};
    let s = scene();
    let (code, out, err) = s.run(&family_walk(), &[], &s.policy());
    assert_eq!(code, 0, "{err}");
    // IPv4 `socket` of the stream type only (the walk asks protocol 0); never a pair.
    let allowed = |t: &Tried| {
        t.family == libc::AF_UNIX
            || (t.family == libc::AF_INET && t.call == "socket" && t.kind == 1)
    };
    only_allowed_families(&out, allowed);
    assert!(
        out.lines().any(|l| l == "socket 2 1 made"),
        "an IPv4 TCP socket is made: {out}"
    );
}
