//! Hosts on `shell` and `bash_bg` grants: they give the deciding grant's box network to
//! exactly those hosts and never change which calls a grant covers.

use policy::args::ToolName;
use policy::decide::{Decision, Labels};
use policy::grants::{Grant, parse_file};
use proto::DenyReason;

use super::*;

fn script(tree: &Tree, grants: &[Grant], tool: ToolName, command: &str) -> Decision {
    let arguments = serde_json::json!({ "command": command, "cwd": tree.path("work") });
    tree.decide(grants, tool, &arguments.to_string(), Labels::default())
}

fn hosts_of(decision: &Decision) -> Vec<String> {
    match decision {
        Decision::Allow(allowed) | Decision::Ask(allowed, _) => {
            allowed.hosts.iter().map(|h| h.written.clone()).collect()
        }
        Decision::Deny(denied) => panic!("denied: {denied:?}"),
    }
}

const CURL: &str = "[[grant]]\nid=\"curl\"\ntool=[\"shell\", \"bash_bg\"]\ncommands=[\"curl\"]\npaths=[\"{root}/work\"]\nhosts=[\"granted.test\", \"*.example.org:8443\"]\n";

#[test]
fn a_shell_or_bash_bg_decision_carries_its_grants_hosts() {
    let tree = Tree::new();
    let grants = tree.grants(CURL);
    for tool in [ToolName::Shell, ToolName::BashBg] {
        assert_eq!(
            hosts_of(&script(&tree, &grants, tool, "curl https://granted.test/")),
            ["granted.test", "*.example.org:8443"],
            "{tool:?}"
        );
    }
    let rules = &grants[0].hosts;
    assert!(rules[0].covers("granted.test", 443));
    assert!(!rules[0].covers("granted.test", 80));
    assert!(rules[1].covers("a.example.org", 8443));
    assert!(!rules[1].covers("example.org", 8443));
}

#[test]
fn hosts_never_widen_what_a_shell_grant_covers() {
    let tree = Tree::new();
    let grants = tree.grants(CURL);
    // The hosts name no command: a script outside the prefixes is still not covered.
    assert_eq!(
        reason(&script(
            &tree,
            &grants,
            ToolName::Shell,
            "wget https://granted.test/"
        )),
        Some(DenyReason::NoGrant)
    );
    // Nor any folder.
    let arguments = serde_json::json!({ "command": "curl x", "cwd": tree.path("notes") });
    assert_eq!(
        reason(&tree.decide(
            &grants,
            ToolName::Shell,
            &arguments.to_string(),
            Labels::default()
        )),
        Some(DenyReason::NoGrant)
    );
}

#[test]
fn only_the_deciding_grants_hosts_reach_the_box() {
    let tree = Tree::new();
    // Both cover `curl`: the first in file order decides, and only its (absent) hosts count.
    let grants = tree.grants(&format!(
        "[[grant]]\nid=\"offline\"\ntool=\"shell\"\ncommands=[\"curl\"]\npaths=[\"{{root}}/work\"]\n{CURL}"
    ));
    let decision = script(
        &tree,
        &grants,
        ToolName::Shell,
        "curl https://granted.test/",
    );
    assert_eq!(allowed_grant(&decision), Some("offline"));
    assert!(hosts_of(&decision).is_empty());
    // A script only the second grant covers gets that grant's hosts.
    let grants = tree.grants(&format!(
        "[[grant]]\nid=\"ls\"\ntool=\"shell\"\ncommands=[\"ls\"]\npaths=[\"{{root}}/work\"]\n{CURL}"
    ));
    let decision = script(
        &tree,
        &grants,
        ToolName::Shell,
        "curl https://granted.test/",
    );
    assert_eq!(allowed_grant(&decision), Some("curl"));
    assert_eq!(hosts_of(&decision), ["granted.test", "*.example.org:8443"]);
    let decision = script(&tree, &grants, ToolName::Shell, "ls");
    assert_eq!(allowed_grant(&decision), Some("ls"));
    assert!(hosts_of(&decision).is_empty());
}

#[test]
fn a_grant_that_asks_carries_its_own_hosts_into_the_question() {
    let tree = Tree::new();
    let grants = tree.grants(&format!(
        "{CURL}[[grant]]\nid=\"ask\"\ntool=\"shell\"\ncommands=[\"curl\"]\npaths=[\"{{root}}/work\"]\nhosts=[\"asked.test\"]\napproval=\"ask\"\n"
    ));
    let decision = script(&tree, &grants, ToolName::Shell, "curl https://asked.test/");
    assert!(matches!(decision, Decision::Ask(..)), "{decision:?}");
    assert_eq!(hosts_of(&decision), ["asked.test"]);
}

#[test]
fn a_deny_grant_of_shell_does_not_take_hosts_and_bad_entries_are_named() {
    for (text, expected) in [
        (
            "[[grant]]\nid=\"d\"\ntool=\"shell\"\ncommands=[\"curl\"]\nhosts=[\"x.test\"]\ndeny=true\n",
            "5: a deny grant of shell does not take hosts",
        ),
        (
            "[[grant]]\nid=\"s\"\ntool=\"shell\"\ncommands=[\"curl\"]\nhosts=[\"x.test:99999\"]\n",
            "5: host \"x.test:99999\" has an invalid port",
        ),
        (
            "[[grant]]\nid=\"s\"\ntool=\"shell\"\ncommands=[\"curl\"]\nhosts=[\"bad host\"]\n",
            "5: host \"bad host\" has a character no host name has (U+0020)",
        ),
        (
            "[[grant]]\nid=\"s\"\ntool=\"shell\"\ncommands=[\"curl\"]\nhosts=[\"*.0.0.1\"]\n",
            "5: host \"*.0.0.1\" must be a host name, an IP address, or *. and a domain",
        ),
    ] {
        let parsed = parse_file(
            text,
            std::path::Path::new("g.toml"),
            std::path::Path::new("/h"),
        );
        let problems: Vec<String> = parsed
            .problems
            .iter()
            .map(|p| format!("{}: {}", p.line.unwrap_or(0), p.message))
            .collect();
        assert!(
            problems.iter().any(|p| p.starts_with(expected)),
            "{text}: {problems:?}"
        );
    }
}
