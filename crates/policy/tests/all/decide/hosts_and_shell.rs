//! Hosts (exact, by subdomain, literal private addresses), `shell` prefixes and folders, and
//! `consult`; and the property that no path outside every granted folder is ever covered.

use std::path::PathBuf;

use policy::args::ToolName;
use policy::decide::{Decision, Labels};
use policy::grants::Grant;
use proto::{Class, DenyReason};

use super::*;

// ---- hosts ----

fn fetch(tree: &Tree, grants: &[Grant], url: &str) -> Decision {
    let arguments = serde_json::json!({ "url": url }).to_string();
    tree.decide(grants, ToolName::HttpFetch, &arguments, Labels::default())
}

#[test]
fn hosts_match_exactly_or_by_subdomain_on_their_port() {
    let tree = Tree::new();
    let grants = tree.grants("[[grant]]\nid=\"w\"\ntool=\"http_fetch\"\nhosts=[\"docs.rs\", \"*.example.org\", \"api.test:8443\"]\n");
    for (url, covered) in [
        ("https://docs.rs/serde", true),
        ("https://DOCS.RS./x", true),
        ("https://docs.rs:8443/", false),
        ("https://www.example.org/", true),
        ("https://a.b.example.org/", true),
        ("https://example.org/", false),
        ("https://badexample.org/", false),
        ("https://api.test:8443/v1", true),
        ("https://api.test/v1", false),
        ("https://docs.rs.evil.com/", false),
    ] {
        let decision = fetch(&tree, &grants, url);
        assert_eq!(
            allowed_grant(&decision).is_some(),
            covered,
            "{url}: {decision:?}"
        );
    }
}

#[test]
fn only_a_rule_without_a_wildcard_on_the_same_port_names_a_host_itself() {
    let rules: Vec<policy::grants::HostRule> =
        ["docs.rs", "*.example.org", "api.test:8443", "[0:0::1]"]
            .iter()
            .map(|h| policy::grants::host_rule(h).unwrap())
            .collect();
    for (host, port, named) in [
        ("docs.rs", 443, true),
        ("docs.rs", 8443, false),
        ("www.example.org", 443, false),
        ("api.test", 8443, true),
        ("api.test", 443, false),
        ("::1", 443, true),
        ("other.test", 443, false),
    ] {
        assert_eq!(
            policy::grants::names_itself(&rules, host, port),
            named,
            "{host}:{port}"
        );
    }
}

#[test]
fn a_literal_private_address_is_unsafe_unless_the_grant_names_it() {
    let tree = Tree::new();
    let wide = tree
        .grants("[[grant]]\nid=\"w\"\ntool=\"http_fetch\"\nhosts=[\"127.0.0.1\", \"10.0.0.1\"]\n");
    assert_eq!(
        allowed_grant(&fetch(&tree, &wide, "https://127.0.0.1/")),
        Some("w")
    );
    assert_eq!(
        allowed_grant(&fetch(&tree, &wide, "https://10.0.0.1/")),
        Some("w")
    );
    // Another spelling of a named address is the address.
    assert_eq!(
        allowed_grant(&fetch(&tree, &wide, "https://0x7f.1/")),
        Some("w")
    );
    let other = tree.grants("[[grant]]\nid=\"x\"\ntool=\"http_fetch\"\nhosts=[\"*.test\"]\n");
    assert_eq!(
        reason(&fetch(&tree, &other, "https://127.0.0.1/")),
        Some(DenyReason::NoGrant)
    );
}

// ---- shell and consult ----

fn shell(tree: &Tree, grants: &[Grant], command: &str, cwd: Option<&str>) -> Decision {
    let arguments = serde_json::json!({ "command": command, "cwd": cwd }).to_string();
    let arguments = arguments.replace(",\"cwd\":null", "");
    tree.decide(grants, ToolName::Shell, &arguments, Labels::default())
}

#[test]
fn a_shell_call_is_covered_by_its_command_prefixes_and_its_folder() {
    let tree = Tree::new();
    let grants = tree.grants("[[grant]]\nid=\"git\"\ntool=\"shell\"\ncommands=[\"git status\", \"ls\"]\npaths=[\"{root}/work\"]\n");
    let work = tree.path("work");
    assert_eq!(
        allowed_grant(&shell(&tree, &grants, "git status && ls -la", Some(&work))),
        Some("git")
    );
    assert_eq!(
        reason(&shell(&tree, &grants, "git push", Some(&work))),
        Some(DenyReason::NoGrant)
    );
    assert_eq!(
        reason(&shell(
            &tree,
            &grants,
            "git status",
            Some(&tree.path("notes"))
        )),
        Some(DenyReason::NoGrant)
    );
    assert_eq!(
        reason(&shell(&tree, &grants, "ls", Some(&tree.path("boxmaker")))),
        Some(DenyReason::ProtectedPath)
    );
    assert_eq!(
        allowed_grant(&shell(&tree, &grants, "ls", None)),
        Some("git")
    );
}

#[test]
fn a_deny_grant_on_a_command_refuses_any_script_that_runs_it() {
    let tree = Tree::new();
    let grants = tree.grants(
        "[[grant]]\nid=\"git\"\ntool=\"shell\"\ncommands=[\"git\"]\n[[grant]]\nid=\"no-push\"\ntool=\"shell\"\ncommands=[\"git push\"]\ndeny=true\n",
    );
    for script in [
        "git push",
        "git status; git push origin",
        "git log | sh -c 'git push'",
        "git --no-pager push",
        "git -C . push origin",
        "/usr/bin/git push",
    ] {
        let Decision::Deny(denied) = shell(&tree, &grants, script, None) else {
            panic!("{script} was not denied");
        };
        assert_eq!(denied.reason, DenyReason::DeniedByGrant, "{script}");
        assert_eq!(denied.grant.as_deref(), Some("no-push"));
    }
    assert_eq!(
        allowed_grant(&shell(&tree, &grants, "git status && git log", None)),
        Some("git")
    );
}

#[test]
fn a_deny_shell_grant_without_commands_refuses_every_script() {
    let tree = Tree::new();
    let grants = tree.grants(
        "[[grant]]\nid=\"ls\"\ntool=\"shell\"\ncommands=[\"ls\"]\n[[grant]]\nid=\"none\"\ntool=\"shell\"\ndeny=true\n",
    );
    assert_eq!(
        reason(&shell(&tree, &grants, "ls", None)),
        Some(DenyReason::DeniedByGrant)
    );
}

#[test]
fn consult_is_covered_by_a_grant_without_constraints() {
    let tree = Tree::new();
    let grants = tree.grants("[[grant]]\nid=\"c\"\ntool=\"consult\"\nclass=\"public\"\n");
    let decision = tree.decide(
        &grants,
        ToolName::Consult,
        r#"{"question":"hi"}"#,
        Labels::default(),
    );
    let Decision::Allow(allowed) = decision else {
        panic!()
    };
    assert_eq!(allowed.scope, None);
    assert_eq!(allowed.class, Class::Public);
}

#[test]
fn a_consult_answer_is_untrusted_whatever_the_grant_says() {
    let tree = Tree::new();
    let grants = tree
        .grants("[[grant]]\nid=\"c\"\ntool=\"consult\"\nuntrusted=false\non_untrusted=\"allow\"\n");
    let decision = tree.decide(
        &grants,
        ToolName::Consult,
        r#"{"question":"hi"}"#,
        Labels::default(),
    );
    let Decision::Allow(allowed) = decision else {
        panic!("{decision:?}")
    };
    assert!(allowed.untrusted, "another model's answer is untrusted");
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn decide_never_covers_a_path_outside_every_granted_folder(
            parts in proptest::collection::vec(prop_oneof!["notes", "notes-private", "work", "..", ".", "a.md", "x", "notes2"], 1..6)
        ) {
            let tree = Tree::new();
            let grants = tree.grants(NOTES);
            let path = format!("{}/{}", tree.root().display(), parts.join("/"));
            if let Decision::Allow(allowed) = tree.read(&grants, &path) {
                let resolved: serde_json::Value = serde_json::from_str(&allowed.args.canonical_json()).unwrap();
                let resolved = PathBuf::from(resolved["path"].as_str().unwrap());
                prop_assert!(resolved.starts_with(tree.root().join("notes")), "{path} -> {resolved:?}");
            }
        }
    }
}
