//! `bx demo` as CI runs it: no terminal and no flag.

use std::process::{Command, Stdio};

#[test]
fn bx_demo_without_a_terminal_or_a_flag_finishes_explains_and_leaves_nothing() {
    let output = Command::new(testkit::binary("bx").unwrap())
        .arg("demo")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for step in [
        "Step 1 of 6",
        // This machine has the full box, so shell joins the demo.
        "Between steps 1 and 2, a command in the box",
        "\"containment\":\"bubblewrap\",\"exit_code\":1",
        "Denied: no grant allows this call.",
        "Denied: this path belongs to boxmaker itself",
        "grant edit-notes says approval = \"ask\"",
        "no --approve or --refuse: refusing, so the demo never waits",
        "the session has received untrusted content",
        "Denied: this session has seen data too sensitive for this call.",
        "the chain holds",
    ] {
        assert!(stdout.contains(step), "{step:?} is missing from:\n{stdout}");
    }
    let folder = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("temporary folder: "))
        .unwrap();
    assert!(
        !std::path::Path::new(folder).exists(),
        "{folder} was left behind"
    );
    let pid = stdout
        .split("(brokerd, pid ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap();
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "brokerd {pid} is still running"
    );
}

#[test]
fn bx_demo_with_approve_lets_the_asking_calls_run() {
    let output = Command::new(testkit::binary("bx").unwrap())
        .args(["demo", "--approve"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("--approve: approving once."), "{stdout}");
    assert!(
        stdout.contains("approved once; the call runs now"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("Denied: the owner refused this call."),
        "{stdout}"
    );
}

#[test]
fn bx_demo_names_the_build_command_for_a_missing_or_foreign_binary() {
    use std::os::unix::fs::PermissionsExt;
    let dir = testkit::temp_dir();
    let bx = dir.path().join("bx");
    std::fs::copy(testkit::binary("bx").unwrap(), &bx).unwrap();
    let run = || {
        let output = Command::new(&bx)
            .arg("demo")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, stderr) = run();
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("brokerd is missing") && stderr.contains("`cargo build`"),
        "{stderr}"
    );
    for name in ["brokerd", "loopd"] {
        let fake = dir.path().join(name);
        std::fs::write(
            &fake,
            format!("#!/bin/sh\necho '{name} 0.1.0 (build 0000)'\n"),
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let (code, stderr) = run();
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("is from another build (build 0000")
            && stderr.contains("rebuild them together"),
        "{stderr}"
    );
}
