//! The reasons `decide` gives, each grant field and each default, and the strictest covering
//! grant winning on every axis.

use policy::args::ToolName;
use policy::decide::{AskReason, Decision, Labels, Scope};
use proto::{Class, DenyReason};

use super::*;

// ---- the reasons decide gives ----

#[test]
fn a_call_no_grant_covers_is_no_grant() {
    let tree = Tree::new();
    let grants = tree.grants(NOTES);
    assert_eq!(
        reason(&tree.read(&grants, &tree.path("work/x"))),
        Some(DenyReason::NoGrant)
    );
    assert_eq!(
        reason(&tree.read(&[], &tree.path("notes/a.md"))),
        Some(DenyReason::NoGrant)
    );
}

#[test]
fn a_grant_covers_only_its_own_tool() {
    let tree = Tree::new();
    let grants = tree.grants(NOTES);
    let arguments =
        serde_json::json!({"path": tree.path("notes/a.md"), "content": "x"}).to_string();
    let decision = tree.decide(&grants, ToolName::WriteFile, &arguments, Labels::default());
    assert_eq!(reason(&decision), Some(DenyReason::NoGrant));
}

#[test]
fn a_covered_call_is_allowed_with_the_grants_labels_and_resolved_arguments() {
    let tree = Tree::new();
    let grants = tree.grants(NOTES);
    let Decision::Allow(allowed) =
        tree.read(&grants, &format!("{}/notes/./a.md", tree.root().display()))
    else {
        panic!("not allowed");
    };
    assert_eq!(allowed.grant, "notes");
    assert_eq!(allowed.class, Class::Private);
    assert!(allowed.untrusted);
    assert_eq!(
        allowed.args.canonical_json(),
        serde_json::json!({"path": tree.path("notes/a.md")}).to_string()
    );
    assert_eq!(
        allowed.scope,
        Some(Scope::Paths(vec![tree.root().join("notes")]))
    );
}

#[test]
fn an_expired_grant_is_grant_expired() {
    let tree = Tree::new();
    let grants = tree.grants(&format!("{NOTES}expires = 2026-11-30T11:59:59Z\n"));
    let decision = tree.read(&grants, &tree.path("notes/a.md"));
    assert_eq!(reason(&decision), Some(DenyReason::GrantExpired));
    let later = tree.grants(&format!("{NOTES}expires = 2026-12-01T00:00:00Z\n"));
    assert_eq!(
        allowed_grant(&tree.read(&later, &tree.path("notes/a.md"))),
        Some("notes")
    );
}

#[test]
fn a_live_grant_wins_over_an_expired_one() {
    let tree = Tree::new();
    let grants = tree.grants(&format!(
        "{NOTES}expires = 2020-01-01T00:00:00Z\n[[grant]]\nid=\"fresh\"\ntool=\"read_file\"\npaths=[\"{{root}}\"]\n"
    ));
    assert_eq!(
        allowed_grant(&tree.read(&grants, &tree.path("notes/a.md"))),
        Some("fresh")
    );
}

#[test]
fn a_deny_grant_wins_over_any_allow_grant_whatever_the_order() {
    let tree = Tree::new();
    let deny =
        "[[grant]]\nid=\"no\"\ntool=\"read_file\"\npaths=[\"{root}/notes/a.md\"]\ndeny=true\n";
    for text in [format!("{NOTES}{deny}"), format!("{deny}{NOTES}")] {
        let grants = tree.grants(&text);
        let decision = tree.read(&grants, &tree.path("notes/a.md"));
        let Decision::Deny(denied) = decision else {
            panic!("not denied")
        };
        assert_eq!(denied.reason, DenyReason::DeniedByGrant);
        assert_eq!(denied.grant.as_deref(), Some("no"));
    }
}

#[test]
fn an_expired_deny_grant_forbids_nothing() {
    let tree = Tree::new();
    let grants = tree.grants(&format!(
        "{NOTES}[[grant]]\nid=\"no\"\ntool=\"read_file\"\ndeny=true\nexpires=2020-01-01T00:00:00Z\n"
    ));
    assert_eq!(
        allowed_grant(&tree.read(&grants, &tree.path("notes/a.md"))),
        Some("notes")
    );
}

#[test]
fn a_deny_grant_without_paths_forbids_every_call_of_its_tool() {
    let tree = Tree::new();
    let grants = tree.grants(&format!(
        "{NOTES}[[grant]]\nid=\"no\"\ntool=\"read_file\"\ndeny=true\n"
    ));
    assert_eq!(
        reason(&tree.read(&grants, &tree.path("notes/a.md"))),
        Some(DenyReason::DeniedByGrant)
    );
}

#[test]
fn max_taint_refuses_a_call_once_the_session_has_seen_more() {
    let tree = Tree::new();
    let grants = tree.grants(&format!("{NOTES}max_taint = \"private\"\n"));
    let arguments = serde_json::json!({"path": tree.path("notes/a.md")}).to_string();
    for (taint, expected) in [
        (Class::Public, None),
        (Class::Private, None),
        (Class::Secret, Some(DenyReason::TaintTooHigh)),
    ] {
        let labels = Labels {
            taint,
            untrusted: false,
        };
        let decision = tree.decide(&grants, ToolName::ReadFile, &arguments, labels);
        assert_eq!(reason(&decision), expected, "{taint:?}");
    }
}

#[test]
fn without_max_taint_any_taint_is_accepted() {
    let tree = Tree::new();
    let grants = tree.grants(NOTES);
    let arguments = serde_json::json!({"path": tree.path("notes/a.md")}).to_string();
    let labels = Labels {
        taint: Class::Secret,
        untrusted: true,
    };
    assert_eq!(
        allowed_grant(&tree.decide(&grants, ToolName::ReadFile, &arguments, labels)),
        Some("notes")
    );
}

fn write_grant(on_untrusted: Option<&str>) -> String {
    let mut text =
        "[[grant]]\nid=\"w\"\ntool=\"write_file\"\npaths=[\"{root}/work\"]\n".to_string();
    if let Some(value) = on_untrusted {
        text.push_str(&format!("on_untrusted = \"{value}\"\n"));
    }
    text
}

#[test]
fn after_untrusted_content_a_side_effect_follows_on_untrusted() {
    let tree = Tree::new();
    let arguments =
        serde_json::json!({"path": tree.path("work/out.txt"), "content": "x"}).to_string();
    let tainted = Labels {
        taint: Class::Public,
        untrusted: true,
    };
    let cases: [(Option<&str>, &str); 4] = [
        (None, "ask"),
        (Some("ask"), "ask"),
        (Some("allow"), "allow"),
        (Some("deny"), "deny"),
    ];
    for (setting, expected) in cases {
        let grants = tree.grants(&write_grant(setting));
        let decision = tree.decide(&grants, ToolName::WriteFile, &arguments, tainted);
        let got = match &decision {
            Decision::Allow(_) => "allow",
            Decision::Ask(_, AskReason::AfterUntrusted) => "ask",
            Decision::Deny(d) if d.reason == DenyReason::UntrustedInput => "deny",
            other => panic!("{other:?}"),
        };
        assert_eq!(got, expected, "{setting:?}");
    }
}

#[test]
fn before_untrusted_content_on_untrusted_does_not_apply() {
    let tree = Tree::new();
    let grants = tree.grants(&write_grant(Some("deny")));
    let arguments =
        serde_json::json!({"path": tree.path("work/out.txt"), "content": "x"}).to_string();
    let decision = tree.decide(&grants, ToolName::WriteFile, &arguments, Labels::default());
    assert_eq!(allowed_grant(&decision), Some("w"));
}

#[test]
fn reading_has_no_side_effects_so_untrusted_content_does_not_stop_it() {
    let tree = Tree::new();
    let grants = tree.grants(&format!("{NOTES}on_untrusted = \"deny\"\n"));
    let arguments = serde_json::json!({"path": tree.path("notes/a.md")}).to_string();
    let labels = Labels {
        taint: Class::Public,
        untrusted: true,
    };
    assert_eq!(
        allowed_grant(&tree.decide(&grants, ToolName::ReadFile, &arguments, labels)),
        Some("notes")
    );
}

#[test]
fn a_grant_that_asks_returns_a_decision_that_needs_the_owner() {
    let tree = Tree::new();
    let grants = tree.grants(&format!("{NOTES}approval = \"ask\"\n"));
    let decision = tree.read(&grants, &tree.path("notes/a.md"));
    assert!(matches!(decision, Decision::Ask(ref a, AskReason::GrantAsks) if a.grant == "notes"));
}

#[test]
fn a_narrow_grant_that_asks_is_not_silenced_by_a_broad_one_that_runs() {
    let tree = Tree::new();
    let grants = tree.grants(&format!(
        "[[grant]]\nid=\"quiet\"\ntool=\"read_file\"\npaths=[\"{{root}}\"]\nclass=\"public\"\nuntrusted=false\n{NOTES}approval = \"ask\"\n"
    ));
    let Decision::Ask(allowed, AskReason::GrantAsks) = tree.read(&grants, &tree.path("notes/a.md"))
    else {
        panic!("the narrow grant must ask")
    };
    assert_eq!(allowed.grant, "notes", "the grant that asked is recorded");
    assert_eq!(allowed.class, Class::Private);
    assert!(allowed.untrusted);
    // Outside the narrow grant, the broad one runs alone.
    assert_eq!(
        allowed_grant(&tree.read(&grants, &tree.path("work/x"))),
        Some("quiet")
    );
}

#[test]
fn any_covering_grant_whose_max_taint_is_exceeded_refuses() {
    let tree = Tree::new();
    let grants = tree.grants(&format!(
        "[[grant]]\nid=\"broad\"\ntool=\"read_file\"\npaths=[\"{{root}}\"]\n{NOTES}max_taint = \"private\"\n"
    ));
    let arguments = serde_json::json!({"path": tree.path("notes/a.md")}).to_string();
    let labels = Labels {
        taint: Class::Secret,
        untrusted: false,
    };
    let Decision::Deny(denied) = tree.decide(&grants, ToolName::ReadFile, &arguments, labels)
    else {
        panic!("not refused")
    };
    assert_eq!(denied.reason, DenyReason::TaintTooHigh);
    assert_eq!(denied.grant.as_deref(), Some("notes"));
}

#[test]
fn any_covering_grant_that_refuses_after_untrusted_input_refuses() {
    let tree = Tree::new();
    let grants = tree.grants(
        "[[grant]]\nid=\"broad\"\ntool=\"write_file\"\npaths=[\"{root}\"]\non_untrusted=\"allow\"\n[[grant]]\nid=\"careful\"\ntool=\"write_file\"\npaths=[\"{root}/notes\"]\non_untrusted=\"deny\"\n",
    );
    let labels = Labels {
        taint: Class::Public,
        untrusted: true,
    };
    let write = |path: &str| {
        let arguments = serde_json::json!({"path": tree.path(path), "content": "x"}).to_string();
        tree.decide(&grants, ToolName::WriteFile, &arguments, labels)
    };
    let Decision::Deny(denied) = write("notes/a.md") else {
        panic!("not refused")
    };
    assert_eq!(denied.reason, DenyReason::UntrustedInput);
    assert_eq!(denied.grant.as_deref(), Some("careful"));
    assert_eq!(allowed_grant(&write("work/x")), Some("broad"));
}

#[test]
fn a_memory_grant_with_tags_covers_entries_within_them_and_scopes_reads_to_them() {
    let tree = Tree::new();
    let grants = tree.grants(
        "[[grant]]\nid = \"proj\"\ntool = [\"memory\", \"recall\"]\ntags = [\"proj\", \"db\"]\n",
    );
    let scope = Some(Scope::Tags(vec!["proj".to_string(), "db".to_string()]));
    for arguments in [
        r#"{"text":"x","tags":["proj"]}"#,
        r#"{"text":"x","tags":["db","proj"]}"#,
        r#"{"text":"x"}"#,
        r#"{"forget":3}"#,
    ] {
        let Decision::Allow(allowed) =
            tree.decide(&grants, ToolName::Memory, arguments, Labels::default())
        else {
            panic!("{arguments}: not allowed");
        };
        assert_eq!(allowed.scope, scope, "{arguments}");
    }
    let outside = tree.decide(
        &grants,
        ToolName::Memory,
        r#"{"text":"x","tags":["proj","home"]}"#,
        Labels::default(),
    );
    assert_eq!(reason(&outside), Some(DenyReason::NoGrant));
    let Decision::Allow(read) = tree.decide(
        &grants,
        ToolName::Recall,
        r#"{"query":"x"}"#,
        Labels::default(),
    ) else {
        panic!("recall not allowed");
    };
    assert_eq!(read.scope, scope);
    // A grant without tags covers the whole memory, like consult: no scope.
    let all = tree.grants("[[grant]]\nid = \"all\"\ntool = \"recall\"\n");
    let Decision::Allow(read) = tree.decide(
        &all,
        ToolName::Recall,
        r#"{"query":"x"}"#,
        Labels::default(),
    ) else {
        panic!("recall not allowed");
    };
    assert_eq!(read.scope, None);
    assert_eq!(
        reason(&tree.decide(
            &all,
            ToolName::AskMemory,
            r#"{"question":"x?"}"#,
            Labels::default()
        )),
        Some(DenyReason::NoGrant)
    );
}
