//! The job tools in `decide`: `bash_bg` is judged as `shell` is (coverage by `commands`, `cwd`
//! in the paths, the same guard rails with the same reasons), under grants of its own; a
//! `bash_bg` grant covers `bash_tail` and `bash_kill`; a `shell` grant covers none of them.

use std::path::Path;

use policy::args::{ToolArgs, ToolName, parse};
use policy::decide::{Decision, Labels};
use policy::grants::{Grant, parse_file};
use proto::DenyReason;

use super::*;

fn bash_bg(tree: &Tree, grants: &[Grant], command: &str, cwd: &str) -> Decision {
    let arguments = serde_json::json!({ "command": command, "cwd": cwd }).to_string();
    tree.decide(grants, ToolName::BashBg, &arguments, Labels::default())
}

fn shell(tree: &Tree, grants: &[Grant], command: &str, cwd: &str) -> Decision {
    let arguments = serde_json::json!({ "command": command, "cwd": cwd }).to_string();
    tree.decide(grants, ToolName::Shell, &arguments, Labels::default())
}

const JOBS: &str = "[[grant]]\nid=\"jobs\"\ntool=\"bash_bg\"\ncommands=[\"rm\", \"cat\", \"sleep\", \"python3 -m http.server\"]\npaths=[\"{root}/work\"]\n";
const SHELL: &str = "[[grant]]\nid=\"sh\"\ntool=\"shell\"\ncommands=[\"rm\", \"cat\", \"sleep\"]\npaths=[\"{root}/work\"]\n";

#[test]
fn bash_bg_is_covered_by_its_commands_and_paths_and_not_by_a_shell_grant() {
    let tree = Tree::new();
    let work = tree.path("work");
    let jobs = tree.grants(JOBS);
    let shells = tree.grants(SHELL);
    assert_eq!(
        allowed_grant(&bash_bg(&tree, &jobs, "python3 -m http.server 8000", &work)),
        Some("jobs")
    );
    assert_eq!(
        reason(&bash_bg(&tree, &jobs, "python3 evil.py", &work)),
        Some(DenyReason::NoGrant)
    );
    assert_eq!(
        reason(&bash_bg(&tree, &jobs, "sleep 5", &tree.path("notes"))),
        Some(DenyReason::NoGrant),
        "cwd outside the grant's paths"
    );
    assert_eq!(
        reason(&bash_bg(&tree, &shells, "sleep 5", &work)),
        Some(DenyReason::NoGrant),
        "a shell grant does not start jobs"
    );
    assert_eq!(
        reason(&shell(&tree, &jobs, "sleep 5", &work)),
        Some(DenyReason::NoGrant),
        "a bash_bg grant does not run shell"
    );
}

#[test]
fn bash_bg_without_cwd_runs_in_its_own_grants_first_folder() {
    let tree = Tree::new();
    let grants = tree.grants(&format!(
        "{SHELL}{}",
        JOBS.replace("{root}/work", "{root}/notes")
    ));
    let args = parse(ToolName::BashBg, r#"{"command":"sleep 5"}"#).unwrap();
    let Decision::Allow(allowed) =
        policy::decide::decide(&args, &grants, Labels::default(), now(), &tree.protected())
    else {
        panic!("not allowed");
    };
    let ToolArgs::BashBg(script) = &allowed.args else {
        panic!("{:?}", allowed.args)
    };
    assert_eq!(script.cwd.as_deref(), Some(tree.path("notes").as_str()));
    assert_eq!(allowed.grant, "jobs");
}

#[test]
fn the_guard_rails_refuse_bash_bg_with_shells_reasons() {
    let tree = Tree::new();
    let work = tree.path("work");
    let grants = tree.grants(JOBS);
    let grants_folder = tree.path("boxmaker/grants");
    for (script, expected) in [
        ("rm -rf .", DenyReason::CatastrophicCommand),
        ("rm -rf ~", DenyReason::CatastrophicCommand),
        ("sleep 10 &", DenyReason::BackgroundCommand),
        (
            &format!("cat {grants_folder}/g.toml") as &str,
            DenyReason::ProtectedPath,
        ),
        ("cat ../boxmaker/grants/g.toml", DenyReason::ProtectedPath),
    ] {
        let as_job = bash_bg(&tree, &grants, script, &work);
        assert_eq!(reason(&as_job), Some(expected), "{script}: {as_job:?}");
        let as_shell = shell(&tree, &tree.grants(SHELL), script, &work);
        assert_eq!(reason(&as_job), reason(&as_shell), "{script}");
    }
    assert_eq!(
        reason(&bash_bg(&tree, &grants, "sleep 5", &tree.path("boxmaker"))),
        Some(DenyReason::ProtectedPath),
        "cwd in a protected folder"
    );
}

#[test]
fn a_bash_bg_grant_covers_tail_and_kill_and_a_shell_grant_does_not() {
    let tree = Tree::new();
    let jobs = tree.grants(JOBS);
    let shells = tree.grants(SHELL);
    for (tool, arguments) in [
        (ToolName::BashTail, r#"{"job":1}"#),
        (ToolName::BashTail, r#"{"job":1,"max_bytes":100}"#),
        (ToolName::BashKill, r#"{"job":1}"#),
    ] {
        let decision = tree.decide(&jobs, tool, arguments, Labels::default());
        assert_eq!(allowed_grant(&decision), Some("jobs"), "{decision:?}");
        let decision = tree.decide(&shells, tool, arguments, Labels::default());
        assert_eq!(reason(&decision), Some(DenyReason::NoGrant));
    }
    // A deny grant that forbids every job forbids reading and killing them too; one that
    // forbids some commands only stops starting those.
    let all = tree.grants(&format!(
        "{JOBS}[[grant]]\nid=\"no\"\ntool=\"bash_bg\"\ndeny=true\n"
    ));
    let some = tree.grants(&format!(
        "{JOBS}[[grant]]\nid=\"no\"\ntool=\"bash_bg\"\ndeny=true\ncommands=[\"rm\"]\n"
    ));
    let tail = |grants: &[Grant]| {
        tree.decide(
            grants,
            ToolName::BashTail,
            r#"{"job":1}"#,
            Labels::default(),
        )
    };
    assert_eq!(reason(&tail(&all)), Some(DenyReason::DeniedByGrant));
    assert_eq!(allowed_grant(&tail(&some)), Some("jobs"));
    assert_eq!(
        reason(&bash_bg(&tree, &some, "rm x", &tree.path("work"))),
        Some(DenyReason::DeniedByGrant)
    );
}

#[test]
fn the_job_tools_arguments_are_strict() {
    for (tool, arguments, expected) in [
        (
            ToolName::BashBg,
            r#"{"command":"sleep 1","timeout_secs":5}"#,
            "timeout_secs",
        ),
        (ToolName::BashTail, r#"{"job":0}"#, "job is 0"),
        (
            ToolName::BashTail,
            r#"{"job":1,"max_bytes":0}"#,
            "max_bytes is 0",
        ),
        (ToolName::BashTail, r#"{"job":-1}"#, "invalid value"),
        (ToolName::BashKill, r#"{"job":"1"}"#, "invalid type"),
        (ToolName::BashKill, r#"{"job":1,"signal":9}"#, "signal"),
    ] {
        let error = parse(tool, arguments).unwrap_err().detail();
        assert!(error.contains(expected), "{arguments}: {error}");
    }
    let args = parse(ToolName::BashBg, r#"{"command":"sleep 1","cwd":"/tmp"}"#).unwrap();
    assert_eq!(
        args.canonical_json(),
        r#"{"command":"sleep 1","cwd":"/tmp"}"#
    );
    assert!(args.has_side_effects());
    assert!(ToolName::BashKill.has_side_effects());
    assert!(!ToolName::BashTail.has_side_effects());
}

#[test]
fn a_grant_cannot_name_bash_tail_or_bash_kill_and_bash_bg_needs_commands() {
    for (text, expected) in [
        (
            "[[grant]]\nid=\"t\"\ntool=\"bash_tail\"\n",
            "a bash_bg grant covers it",
        ),
        (
            "[[grant]]\nid=\"t\"\ntool=[\"bash_bg\", \"bash_kill\"]\ncommands=[\"sleep\"]\npaths=[\"/tmp\"]\n",
            "bash_kill is not granted by name",
        ),
        (
            "[[grant]]\nid=\"t\"\ntool=\"bash_bg\"\npaths=[\"/tmp\"]\n",
            "bash_bg needs commands",
        ),
        (
            "[[grant]]\nid=\"t\"\ntool=\"bash_bg\"\ncommands=[\"sleep\"]\nhosts=[\"docs.rs\"]\ndeny=true\n",
            "a deny grant of bash_bg does not take hosts",
        ),
    ] {
        let parsed = parse_file(text, Path::new("g.toml"), Path::new("/home/x"));
        assert!(
            parsed.problems.iter().any(|p| p.message.contains(expected)),
            "{text}: {:?}",
            parsed.problems
        );
    }
}
