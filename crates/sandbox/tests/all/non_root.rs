//! The box's core for an owner who is not root: a box built (bubblewrap in a user namespace, the
//! Landlock layer, seccomp), a command run, its walls held (a write and a read outside the grant
//! refused), and the box killed whole at its time limit. The builder is a copy of this test
//! binary run as another user (`child_entry`), its launcher a copy too (see
//! `testkit::RunnableCopy`), so it works from any checkout.
//!
//! Twice: as `nobody`, who has no cgroup of its own, so the box is built without one and
//! says so (and a box without bubblewrap, which only a cgroup holds together, is refused); and,
//! on cgroup v1, as a user whose boxmaker cgroup folders root delegated as `bx doctor` says,
//! whose box has its process and memory limits.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sandbox::{CommandSpec, Exit, FileWalls, Limits, Policy, spawn_boxed};

use crate::escape::{alive, launcher};

/// The body a child process of this binary runs, chosen by this variable.
const BODY: &str = "BOXMAKER_NON_ROOT_TEST_BODY";
const PATH: &str = "/usr/local/bin:/usr/bin:/bin";
const SECRET: &str = "outside-secret-4d1e";
/// In the command line of what the box at its time limit leaves running, if anything.
const MARKER: &str = "29.7183";
/// A user of no login that the delegated test gives cgroup folders to.
const DELEGATED: u32 = 65533;

/// What the builder saw, one `@@name=value` line each (newlines as `\n`).
fn report(name: &str, value: &str) {
    println!("@@{name}={}", value.replace('\n', "\\n"));
}

/// Runs `script` in a box granting `grant` read-write, for at most `timeout`; reports its exit
/// code, whether it timed out, and its output under `name`.
fn boxed(name: &str, script: &str, grant: &Path, outside: &Path, timeout: Duration) {
    boxed_in(FileWalls::Bubblewrap, name, script, grant, outside, timeout);
}

/// [`boxed`] in a box of `walls`.
fn boxed_in(
    walls: FileWalls,
    name: &str,
    script: &str,
    grant: &Path,
    outside: &Path,
    timeout: Duration,
) {
    let launcher = std::env::var("BOXMAKER_TEST_LAUNCHER").unwrap();
    let policy = Policy {
        read_write: vec![grant.to_path_buf()],
        limits: Limits {
            cpu_seconds: 30,
            processes: 32,
            memory: 256 << 20,
            ..Limits::default()
        },
        launcher: Some(PathBuf::from(launcher)),
        file_walls: walls,
        ..Policy::default()
    };
    let spec = CommandSpec {
        program: "/bin/bash".into(),
        args: vec!["-c".into(), script.into()],
        env: vec![
            ("PATH".into(), PATH.into()),
            ("GRANT".into(), grant.into()),
            ("OUTSIDE".into(), outside.into()),
        ],
        cwd: grant.to_path_buf(),
    };
    let child = match spawn_boxed(&spec, &policy, timeout) {
        Ok(child) => child,
        Err(e) => return report(name, &format!("not built: {e}")),
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let ended = child
        .finish(&mut |b| out.extend_from_slice(b), &mut |b| {
            err.extend_from_slice(b)
        })
        .unwrap();
    let code = match ended.exit {
        Some(Exit::Code(code)) => code.to_string(),
        other => format!("{other:?}"),
    };
    report(&format!("{name}.code"), &code);
    report(&format!("{name}.timed_out"), &ended.timed_out.to_string());
    report(&format!("{name}.stdout"), &String::from_utf8_lossy(&out));
    report(&format!("{name}.stderr"), &String::from_utf8_lossy(&err));
}

/// The builder, run by `build_as`; a no-op in an ordinary test run.
#[test]
fn child_entry() {
    if std::env::var_os(BODY).is_none() {
        return;
    }
    let grant = PathBuf::from(std::env::var("BOXMAKER_TEST_GRANT").unwrap());
    let outside = PathBuf::from(std::env::var("BOXMAKER_TEST_OUTSIDE").unwrap());
    let ten = Duration::from_secs(10);
    report("uid", &rustix::process::getuid().as_raw().to_string());
    report(
        "cgroup",
        &match sandbox::box_cgroup() {
            Ok(place) => format!("ok {place}"),
            Err(missing) => format!("missing {missing}"),
        },
    );
    boxed(
        "inside",
        "id -u; echo inside > \"$GRANT/made\" && cat \"$GRANT/made\"",
        &grant,
        &outside,
        ten,
    );
    boxed(
        "write",
        "echo x > \"$OUTSIDE/new\" && echo wrote",
        &grant,
        &outside,
        ten,
    );
    boxed("read", "cat \"$OUTSIDE/secret\"", &grant, &outside, ten);
    boxed(
        "timeout",
        &format!("setsid sleep {MARKER} >/dev/null 2>&1 </dev/null & echo started; sleep 60"),
        &grant,
        &outside,
        Duration::from_secs(2),
    );
    // Without bubblewrap only a cgroup holds the box's processes together.
    boxed_in(
        FileWalls::LandlockOnly,
        "landlock_only",
        "echo ran",
        &grant,
        &outside,
        ten,
    );
    // Beyond every process's rlimits (8 GiB of address space, 1024 open files): only a cgroup
    // stops these.
    boxed(
        "memory",
        "perl -e 'my $x = \"a\" x (700 << 20); print \"allocated\\n\"'",
        &grant,
        &outside,
        ten,
    );
    boxed(
        "fork",
        "perl -e 'for (1..100) { my $p = fork; if (!defined $p) { print STDERR \"fork: $!\\n\"; exit 1 } if (!$p) { sleep 1; exit 0 } } print \"forked 100\\n\"'",
        &grant,
        &outside,
        ten,
    );
}

/// The scene: a granted folder the user owns, an outside folder anyone may write with a secret
/// anyone may read, both in a folder anyone may enter.
struct Scene {
    _root: tempfile::TempDir,
    grant: PathBuf,
    outside: PathBuf,
}

fn scene(uid: u32) -> Scene {
    let root = testkit::temp_dir();
    fs::set_permissions(root.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let grant = root.path().join("grant");
    let outside = root.path().join("outside");
    fs::create_dir(&grant).unwrap();
    fs::create_dir(&outside).unwrap();
    std::os::unix::fs::chown(&grant, Some(uid), Some(uid)).unwrap();
    fs::set_permissions(&outside, fs::Permissions::from_mode(0o777)).unwrap();
    fs::write(outside.join("secret"), SECRET).unwrap();
    fs::set_permissions(outside.join("secret"), fs::Permissions::from_mode(0o644)).unwrap();
    Scene {
        _root: root,
        grant,
        outside,
    }
}

/// Runs the builder as `uid`; what it reported, by name.
fn build_as(uid: u32, s: &Scene) -> std::collections::HashMap<String, String> {
    let test = testkit::RunnableCopy::of_this_test();
    let launcher = testkit::RunnableCopy::of(&launcher());
    let output = test
        .command_as(uid)
        .args([
            "--exact",
            "non_root::child_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(BODY, "build")
        .env("BOXMAKER_TEST_LAUNCHER", launcher.path())
        .env("BOXMAKER_TEST_GRANT", &s.grant)
        .env("BOXMAKER_TEST_OUTSIDE", &s.outside)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .filter_map(|l| l.split_once("@@"))
        .filter_map(|(_, line)| line.split_once('='))
        .map(|(k, v)| (k.to_string(), v.replace("\\n", "\n")))
        .collect()
}

/// Unsandboxed, as `uid`, the attempts the box refuses succeed: writing and reading outside.
fn escapes_unsandboxed(uid: u32, s: &Scene) {
    use std::os::unix::process::CommandExt;
    let out = Command::new("/bin/sh")
        .args(["-c", "echo x > \"$OUTSIDE/new\" && cat \"$OUTSIDE/secret\""])
        .env("OUTSIDE", &s.outside)
        .current_dir("/")
        .uid(uid)
        .gid(uid)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), SECRET);
    fs::remove_file(s.outside.join("new")).unwrap();
}

/// The core every non-root box holds, whatever its cgroup.
fn holds_its_walls(uid: u32, seen: &std::collections::HashMap<String, String>, s: &Scene) {
    let get = |k: &str| seen.get(k).map(String::as_str).unwrap_or("<missing>");
    assert_eq!(get("uid"), uid.to_string());
    assert_eq!(get("inside.code"), "0", "{seen:?}");
    assert_eq!(get("inside.stdout"), format!("{uid}\ninside\n"), "{seen:?}");
    assert_eq!(
        fs::read_to_string(s.grant.join("made")).unwrap(),
        "inside\n"
    );
    assert_ne!(get("write.code"), "0", "{seen:?}");
    assert!(!get("write.stdout").contains("wrote"), "{seen:?}");
    assert!(
        get("write.stderr").contains("No such file or directory"),
        "{seen:?}"
    );
    assert!(!s.outside.join("new").exists());
    assert_ne!(get("read.code"), "0", "{seen:?}");
    assert!(!get("read.stdout").contains(SECRET), "{seen:?}");
    assert_eq!(get("timeout.timed_out"), "true", "{seen:?}");
    assert_eq!(get("timeout.stdout"), "started\n", "{seen:?}");
    assert_eq!(
        alive(MARKER),
        Vec::<i32>::new(),
        "the box outlived its time limit"
    );
}

#[test]
fn an_owner_who_is_not_root_and_has_no_cgroup_gets_a_box_that_holds_its_walls_and_says_so() {
    let uid = testkit::NOBODY;
    // No cgroup of its own: the folders `bx doctor` tells root to make for it are not there.
    for controller in ["pids", "memory"] {
        let _ = fs::remove_dir(format!("/sys/fs/cgroup/{controller}/boxmaker/uid-{uid}"));
    }
    let s = scene(uid);
    escapes_unsandboxed(uid, &s);
    let seen = build_as(uid, &s);
    let cgroup = &seen["cgroup"];
    assert!(
        cgroup.starts_with(&format!("missing uid {uid} is not root")),
        "{cgroup}"
    );
    if Path::new("/sys/fs/cgroup/pids/tasks").exists() {
        // v1: the exact commands that delegate the folders.
        let folders = format!(
            "/sys/fs/cgroup/pids/boxmaker/uid-{uid} /sys/fs/cgroup/memory/boxmaker/uid-{uid}"
        );
        assert!(
            cgroup.contains(&format!("\n    mkdir -p {folders}\n")),
            "{cgroup}"
        );
        assert!(
            cgroup.ends_with(&format!("\n    chown {uid}: {folders}")),
            "{cgroup}"
        );
    }
    holds_its_walls(uid, &seen, &s);
    // A box without bubblewrap, which only a cgroup would hold together, is not built.
    assert!(
        seen["landlock_only"].starts_with(
            "not built: no cgroup for the box, and a box without bubblewrap has nothing else to hold its processes together: uid 65534 is not root"
        ),
        "{seen:?}"
    );
    // What a box without a cgroup costs, as its header says: no limit on its memory or on the
    // number of its processes together.
    assert_eq!(seen["memory.stdout"], "allocated\n", "{seen:?}");
    assert_eq!(seen["fork.stdout"], "forked 100\n", "{seen:?}");
}

#[test]
fn an_owner_who_is_not_root_with_delegated_cgroup_folders_gets_a_box_with_its_limits() {
    let uid = DELEGATED;
    let v1 = ["pids", "memory"].map(|c| PathBuf::from(format!("/sys/fs/cgroup/{c}")));
    assert!(
        v1.iter().all(|c| c.join("tasks").exists()),
        "this test delegates cgroup v1 folders, as `bx doctor` says on a v1 machine; this machine has no v1 pids and memory controllers"
    );
    // The delegation `bx doctor` prints, done by root as an owner's administrator would.
    let folders: Vec<PathBuf> = v1
        .iter()
        .map(|c| c.join(format!("boxmaker/uid-{uid}")))
        .collect();
    for folder in &folders {
        fs::create_dir_all(folder).unwrap();
        std::os::unix::fs::chown(folder, Some(uid), Some(uid)).unwrap();
    }
    let s = scene(uid);
    escapes_unsandboxed(uid, &s);
    let seen = build_as(uid, &s);
    let cgroup = &seen["cgroup"];
    assert!(
        cgroup.starts_with(&format!(
            "ok v1 pids and memory, in {}",
            folders[0].display()
        )),
        "{cgroup}"
    );
    holds_its_walls(uid, &seen, &s);
    assert_eq!(seen["landlock_only.stdout"], "ran\n", "{seen:?}");
    // Killed by the cgroup's memory limit.
    assert!(!seen["memory.stdout"].contains("allocated"), "{seen:?}");
    assert_ne!(seen["memory.code"], "0", "{seen:?}");
    assert!(!seen["fork.stdout"].contains("forked 100"), "{seen:?}");
    assert!(
        seen["fork.stderr"].contains("fork: Resource temporarily unavailable"),
        "{seen:?}"
    );
    // The builder's boxes' cgroups went with it (its warden removes what is left); the folders
    // are given back.
    for folder in &folders {
        for _ in 0..100 {
            if fs::remove_dir(folder).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!folder.exists(), "{} still holds a box", folder.display());
    }
}
