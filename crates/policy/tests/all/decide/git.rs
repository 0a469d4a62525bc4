//! The git tools: `git_status` and `git_diff` read below their grant's `paths`; `git_clone`
//! needs both its host and its destination covered, writes its destination (so boxmaker's
//! folders are refused), and its result is untrusted whatever the grant says.

use policy::args::{ArgsError, ToolName, parse};
use policy::decide::{Decision, Labels};
use proto::DenyReason;

use super::*;

const GIT: &str = r#"
[[grant]]
id = "look"
tool = ["git_status", "git_diff"]
paths = ["{root}/work"]
untrusted = false

[[grant]]
id = "clone"
tool = "git_clone"
hosts = ["git.example.org"]
paths = ["{root}/work"]
untrusted = false
on_untrusted = "allow"
"#;

fn clone(tree: &Tree, url: &str, path: &str) -> Decision {
    let arguments = serde_json::json!({ "url": url, "path": path }).to_string();
    tree.decide(
        &tree.grants(GIT),
        ToolName::GitClone,
        &arguments,
        Labels::default(),
    )
}

#[test]
fn git_status_and_git_diff_are_covered_below_their_paths_only() {
    let tree = Tree::new();
    let grants = tree.grants(GIT);
    for tool in [ToolName::GitStatus, ToolName::GitDiff] {
        let inside = serde_json::json!({ "path": tree.path("work") }).to_string();
        let outside = serde_json::json!({ "path": tree.path("notes") }).to_string();
        let decision = tree.decide(&grants, tool, &inside, Labels::default());
        assert_eq!(allowed_grant(&decision), Some("look"), "{decision:?}");
        let Decision::Allow(allowed) = &decision else {
            unreachable!()
        };
        assert!(
            !allowed.untrusted,
            "git_status and git_diff take the grant's labels"
        );
        let decision = tree.decide(&grants, tool, &outside, Labels::default());
        assert_eq!(reason(&decision), Some(DenyReason::NoGrant), "{decision:?}");
        assert!(!tool.has_side_effects());
    }
}

#[test]
fn git_clone_needs_its_host_and_its_destination_and_is_always_untrusted() {
    let tree = Tree::new();
    let decision = clone(
        &tree,
        "https://git.example.org/a/b.git",
        &tree.path("work/b"),
    );
    let Decision::Allow(allowed) = &decision else {
        panic!("not allowed: {decision:?}")
    };
    assert_eq!(allowed.grant, "clone");
    assert!(
        allowed.untrusted,
        "a clone's output is untrusted whatever the grant says"
    );
    assert!(ToolName::GitClone.has_side_effects());
    let other_host = clone(
        &tree,
        "https://evil.example.org/a.git",
        &tree.path("work/b"),
    );
    assert_eq!(reason(&other_host), Some(DenyReason::NoGrant));
    let other_place = clone(
        &tree,
        "https://git.example.org/a.git",
        &tree.path("notes/b"),
    );
    assert_eq!(reason(&other_place), Some(DenyReason::NoGrant));
    let protected = clone(
        &tree,
        "https://git.example.org/a.git",
        &tree.path("boxmaker/x"),
    );
    assert_eq!(reason(&protected), Some(DenyReason::ProtectedPath));
}

#[test]
fn git_clone_is_refused_after_untrusted_input_when_its_grant_says_so() {
    let tree = Tree::new();
    let grants = tree.grants(&GIT.replace("on_untrusted = \"allow\"", "on_untrusted = \"deny\""));
    let arguments =
        serde_json::json!({ "url": "https://git.example.org/a.git", "path": tree.path("work/a") })
            .to_string();
    let labels = Labels {
        untrusted: true,
        ..Labels::default()
    };
    let decision = tree.decide(&grants, ToolName::GitClone, &arguments, labels);
    assert_eq!(
        reason(&decision),
        Some(DenyReason::UntrustedInput),
        "{decision:?}"
    );
}

#[test]
fn git_clone_takes_only_https_urls_and_git_diff_only_relative_filters() {
    let shape = |tool, args: &str| match parse(tool, args) {
        Err(ArgsError::Shape(detail)) => detail,
        Ok(parsed) => panic!("parsed: {parsed:?}"),
    };
    let ssh = shape(
        ToolName::GitClone,
        r#"{"url":"git@github.com:a/b.git","path":"/x"}"#,
    );
    assert!(ssh.contains("SSH keys"), "{ssh}");
    let file = shape(
        ToolName::GitClone,
        r#"{"url":"file:///srv/repo","path":"/x"}"#,
    );
    assert!(file.contains("https://"), "{file}");
    let user = shape(
        ToolName::GitClone,
        r#"{"url":"https://me@git.example.org/a","path":"/x"}"#,
    );
    assert!(user.contains("user information"), "{user}");
    shape(ToolName::GitClone, r#"{"url":"https://git.example.org/a"}"#);
    for bad in ["-p", "/etc", "a/../../b", ":(top)x"] {
        let args = serde_json::json!({ "path": "/x", "paths": [bad] }).to_string();
        shape(ToolName::GitDiff, &args);
    }
    assert!(
        parse(
            ToolName::GitDiff,
            r#"{"path":"/x","staged":true,"paths":["src/a.rs"]}"#
        )
        .is_ok()
    );
    shape(ToolName::GitStatus, r#"{"path":"/x","staged":true}"#);
}

#[test]
fn a_git_clone_grant_needs_hosts_and_paths_and_status_takes_no_hosts() {
    let tree = Tree::new();
    let problems = |text: &str| {
        let text = text.replace("{root}", &tree.root().display().to_string());
        parse_file(&text, Path::new("g.toml"), &tree.root())
            .problems
            .into_iter()
            .map(|p| p.message)
            .collect::<Vec<_>>()
    };
    let no_hosts = problems("[[grant]]\nid=\"c\"\ntool=\"git_clone\"\npaths=[\"{root}/work\"]\n");
    assert_eq!(
        no_hosts,
        ["git_clone needs hosts: the hosts it may clone from"]
    );
    let no_paths =
        problems("[[grant]]\nid=\"c\"\ntool=\"git_clone\"\nhosts=[\"git.example.org\"]\n");
    assert_eq!(
        no_paths,
        ["git_clone needs paths: the files and folders it may open"]
    );
    let hosts = problems(
        "[[grant]]\nid=\"s\"\ntool=\"git_status\"\npaths=[\"{root}\"]\nhosts=[\"a.org\"]\n",
    );
    assert_eq!(hosts, ["git_status does not take hosts"]);
}
