//! What the Landlock layer alone stops: bubblewrap's binds deliberately widened (a test-only
//! box built from `bwrap_args` with one more bind, and without the seccomp filter), so that only
//! Landlock stands between the command and the path or the port. Each attempt succeeds
//! unsandboxed, succeeds again in the widened box without the launcher (so the widening is
//! real), and meets Landlock's refusal with it.

use std::ffi::OsString;
use std::fs;
use std::path::Path;
use std::process::Command;

use sandbox::{CommandSpec, Policy, bwrap_args, find_bwrap};

use super::{Ran, SECRET, Scene, scene};

const DENIED: &str = "Permission denied";

impl Scene {
    /// Runs `script` in the box of `policy` with `extra` binds added (flag and path), straight
    /// through bubblewrap.
    fn widened(
        &self,
        script: &str,
        env: &[(&str, String)],
        policy: &Policy,
        extra: &[(&str, &Path)],
    ) -> Ran {
        let spec = CommandSpec {
            program: "/bin/bash".into(),
            args: vec!["-c".into(), script.into()],
            env: self
                .env(env)
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            cwd: self.grant.clone(),
        };
        let mut args = bwrap_args(&spec, policy).unwrap();
        let at = args
            .windows(2)
            .position(|w| w[0] == "--remount-ro" && w[1] == "/")
            .unwrap();
        for (flag, path) in extra.iter().rev() {
            let words: [OsString; 3] = [flag.into(), path.into(), path.into()];
            args.splice(at..at, words);
        }
        let out = Command::new(find_bwrap().expect("bubblewrap is not installed"))
            .args(&args)
            .output()
            .unwrap();
        Ran {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// The attempt escapes on the host and in the widened box without Landlock, and meets
    /// `refusal` in the widened box with it.
    fn only_landlock_stops(
        &self,
        script: &str,
        env: &[(&str, String)],
        policy: &Policy,
        extra: &[(&str, &Path)],
        shows: &str,
        refusal: &str,
    ) {
        self.escapes_on_host(script, env, shows);
        let without = Policy {
            launcher: None,
            ..policy.clone()
        };
        let ran = self.widened(script, env, &without, extra);
        assert_eq!(
            ran.code,
            Some(0),
            "widened, no Landlock: {}{}",
            ran.stdout,
            ran.stderr
        );
        assert!(
            ran.stdout.contains(shows),
            "widened, no Landlock: {}{}",
            ran.stdout,
            ran.stderr
        );
        let ran = self.widened(script, env, policy, extra);
        assert_ne!(ran.code, Some(0), "widened: {}{}", ran.stdout, ran.stderr);
        assert!(
            !ran.stdout.contains(shows),
            "widened: {}{}",
            ran.stdout,
            ran.stderr
        );
        assert!(
            ran.stderr.contains(refusal),
            "widened, wanted {refusal:?}: {}{}",
            ran.stdout,
            ran.stderr
        );
    }
}

#[test]
fn landlock_refuses_reading_a_folder_bound_by_mistake() {
    let s = scene();
    let outside = s.outside.clone();
    s.only_landlock_stops(
        "cat \"$OUTSIDE/secret\"",
        &[],
        &s.policy(),
        &[("--ro-bind", &outside)],
        SECRET,
        DENIED,
    );
}

#[test]
fn landlock_refuses_writing_a_folder_bound_read_write_by_mistake() {
    let s = scene();
    let outside = s.outside.clone();
    let script = "echo x > \"$OUTSIDE/new\" && echo wrote";
    s.escapes_on_host(script, &[], "wrote");
    fs::remove_file(outside.join("new")).unwrap();
    let without = Policy {
        launcher: None,
        ..s.policy()
    };
    let ran = s.widened(script, &[], &without, &[("--bind", &outside)]);
    assert_eq!(ran.stdout, "wrote\n", "{}", ran.stderr);
    fs::remove_file(outside.join("new")).unwrap();
    let ran = s.widened(script, &[], &s.policy(), &[("--bind", &outside)]);
    assert!(ran.stderr.contains(DENIED), "{}{}", ran.stdout, ran.stderr);
    assert!(!outside.join("new").exists());
}

#[test]
fn landlock_keeps_a_read_only_path_read_only_when_bound_read_write_by_mistake() {
    let s = scene();
    let outside = s.outside.clone();
    let policy = Policy {
        read_only: vec![outside.clone()],
        ..s.policy()
    };
    let script = "cat \"$OUTSIDE/secret\" && : > \"$OUTSIDE/secret\" && echo truncated";
    // Unsandboxed it would empty the secret: run it on a copy.
    let copy = s.outside.join("copy");
    fs::create_dir(&copy).unwrap();
    fs::write(copy.join("secret"), SECRET).unwrap();
    s.escapes_on_host(
        script,
        &[("OUTSIDE", copy.display().to_string())],
        "truncated",
    );
    let ran = s.widened(script, &[], &policy, &[("--bind", &outside)]);
    assert!(
        ran.stdout.contains(SECRET),
        "reading stays allowed: {}{}",
        ran.stdout,
        ran.stderr
    );
    assert!(
        !ran.stdout.contains("truncated"),
        "{}{}",
        ran.stdout,
        ran.stderr
    );
    assert!(ran.stderr.contains(DENIED), "{}{}", ran.stdout, ran.stderr);
    assert_eq!(fs::read_to_string(outside.join("secret")).unwrap(), SECRET);
}

#[test]
fn landlock_refuses_running_a_program_from_a_folder_bound_by_mistake() {
    let s = scene();
    let outside = s.outside.clone();
    // Copied by `cp`, so that no descriptor open for writing lives in this process: a box
    // another test thread forks meanwhile would inherit it until its exec, and running the
    // program then fails with "Text file busy".
    let copied = std::process::Command::new("cp")
        .arg("/bin/echo")
        .arg(outside.join("tool"))
        .status()
        .unwrap();
    assert!(copied.success());
    s.only_landlock_stops(
        "\"$OUTSIDE/tool\" ran",
        &[],
        &s.policy(),
        &[("--ro-bind", &outside)],
        "ran",
        DENIED,
    );
}

#[test]
fn landlock_refuses_tcp_connect_even_in_the_boxs_own_network() {
    // Without seccomp the socket is made; in the box's network namespace nothing listens, so
    // without Landlock the connection is refused by the empty loopback, with it by Landlock.
    let s = scene();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let script = "exec 3<>\"/dev/tcp/127.0.0.1/$PORT\" && echo connected";
    s.escapes_on_host(script, &[("PORT", port.clone())], "connected");
    let without = Policy {
        launcher: None,
        ..s.policy()
    };
    let ran = s.widened(script, &[("PORT", port.clone())], &without, &[]);
    assert!(
        ran.stderr.contains("Connection refused"),
        "{}{}",
        ran.stdout,
        ran.stderr
    );
    let ran = s.widened(script, &[("PORT", port)], &s.policy(), &[]);
    assert!(!ran.stdout.contains("connected"));
    assert!(ran.stderr.contains(DENIED), "{}{}", ran.stdout, ran.stderr);
}

#[test]
fn landlock_refuses_binding_a_tcp_port() {
    let s = scene();
    let script = "/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen(); print(\"bound\")'";
    s.only_landlock_stops(script, &[], &s.policy(), &[], "bound", "PermissionError");
}
