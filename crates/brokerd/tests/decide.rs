//! `decide`, row by row: each reason it can give, each grant field and each default, and the
//! path rules (`..`, symbolic links, protected folders, prefix siblings, `~`, globs).

use std::fs;
use std::path::{Path, PathBuf};

use brokerd::args::{ToolName, parse};
use brokerd::grants::{Grant, parse_file};
use brokerd::policy::{AskReason, Decision, Labels, Protected, Scope, decide};
use proto::{Class, DenyReason, Timestamp};

/// A temporary tree: `root/notes/a.md`, `root/notes-private/b.md`, `root/boxmaker/grants/`.
struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        let dir = testkit::temp_dir();
        for folder in ["notes", "notes-private", "boxmaker/grants", "work"] {
            fs::create_dir_all(dir.path().join(folder)).unwrap();
        }
        fs::write(dir.path().join("notes/a.md"), "a").unwrap();
        fs::write(dir.path().join("notes-private/b.md"), "b").unwrap();
        Tree { dir }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    fn path(&self, rest: &str) -> String {
        self.root().join(rest).display().to_string()
    }

    fn grants(&self, text: &str) -> Vec<Grant> {
        let text = text.replace("{root}", &self.root().display().to_string());
        let parsed = parse_file(&text, Path::new("g.toml"), &self.root().join("home"));
        assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
        parsed.grants
    }

    fn protected(&self) -> Protected {
        Protected::new(&[self.root().join("boxmaker")])
    }

    fn decide(
        &self,
        grants: &[Grant],
        tool: ToolName,
        arguments: &str,
        labels: Labels,
    ) -> Decision {
        let args = parse(tool, arguments).unwrap();
        decide(&args, grants, labels, now(), &self.protected())
    }

    fn read(&self, grants: &[Grant], path: &str) -> Decision {
        let arguments = serde_json::json!({ "path": path }).to_string();
        self.decide(grants, ToolName::ReadFile, &arguments, Labels::default())
    }
}

fn now() -> Timestamp {
    Timestamp::parse("2026-11-30T12:00:00Z").unwrap()
}

fn reason(decision: &Decision) -> Option<DenyReason> {
    match decision {
        Decision::Deny(denied) => Some(denied.reason),
        _ => None,
    }
}

fn allowed_grant(decision: &Decision) -> Option<&str> {
    match decision {
        Decision::Allow(allowed) => Some(allowed.grant.as_str()),
        _ => None,
    }
}

const NOTES: &str = "[[grant]]\nid = \"notes\"\ntool = \"read_file\"\npaths = [\"{root}/notes\"]\n";

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

// ---- protected folders and paths ----

#[test]
fn a_path_into_boxmakers_folders_is_protected_whatever_a_grant_says() {
    let tree = Tree::new();
    let grants = tree.grants("[[grant]]\nid=\"all\"\ntool=\"read_file\"\npaths=[\"/\"]\n");
    let decision = tree.read(&grants, &tree.path("boxmaker/grants/g.toml"));
    assert_eq!(reason(&decision), Some(DenyReason::ProtectedPath));
}

#[test]
fn dot_dot_is_resolved_before_any_check() {
    let tree = Tree::new();
    let grants = tree.grants(NOTES);
    let sneaky = format!("{}/notes/../notes-private/b.md", tree.root().display());
    assert_eq!(
        reason(&tree.read(&grants, &sneaky)),
        Some(DenyReason::NoGrant)
    );
    let into_box = format!("{}/notes/../boxmaker/grants/x", tree.root().display());
    assert_eq!(
        reason(&tree.read(&grants, &into_box)),
        Some(DenyReason::ProtectedPath)
    );
}

#[test]
fn a_symlink_out_of_a_granted_folder_is_judged_by_its_target() {
    let tree = Tree::new();
    std::os::unix::fs::symlink(
        tree.root().join("notes-private/b.md"),
        tree.root().join("notes/link"),
    )
    .unwrap();
    let grants = tree.grants(NOTES);
    assert_eq!(
        reason(&tree.read(&grants, &tree.path("notes/link"))),
        Some(DenyReason::NoGrant)
    );
}

#[test]
fn a_symlink_into_a_granted_folder_is_covered() {
    let tree = Tree::new();
    std::os::unix::fs::symlink(
        tree.root().join("notes/a.md"),
        tree.root().join("work/into"),
    )
    .unwrap();
    let grants = tree.grants(NOTES);
    let Decision::Allow(allowed) = tree.read(&grants, &tree.path("work/into")) else {
        panic!()
    };
    assert_eq!(
        allowed.args.canonical_json(),
        serde_json::json!({"path": tree.path("notes/a.md")}).to_string()
    );
}

#[test]
fn a_symlink_to_a_protected_folder_is_protected() {
    let tree = Tree::new();
    std::os::unix::fs::symlink(tree.root().join("boxmaker"), tree.root().join("notes/box"))
        .unwrap();
    let grants = tree.grants(NOTES);
    assert_eq!(
        reason(&tree.read(&grants, &tree.path("notes/box/grants/g.toml"))),
        Some(DenyReason::ProtectedPath)
    );
}

#[test]
fn dot_dot_after_a_missing_folder_cannot_step_around_a_symlink() {
    let tree = Tree::new();
    std::os::unix::fs::symlink(
        tree.root().join("notes-private"),
        tree.root().join("notes/link"),
    )
    .unwrap();
    std::os::unix::fs::symlink(tree.root().join("boxmaker"), tree.root().join("notes/cfg"))
        .unwrap();
    let grants = tree.grants(NOTES);
    // The kernel would follow notes/link to notes-private, then nope/.. back to it.
    for sneaky in [
        "notes/link/nope/../b.md",
        "notes/cfg/nope/../grants/evil.toml",
    ] {
        let decision = tree.read(&grants, &tree.path(sneaky));
        let Decision::Deny(denied) = decision else {
            panic!("{sneaky} was allowed")
        };
        assert_eq!(denied.reason, DenyReason::InvalidArguments, "{sneaky}");
        assert!(
            denied.detail.contains("after a folder that does not exist"),
            "{}",
            denied.detail
        );
    }
}

#[test]
fn a_dangling_symlink_on_the_way_is_refused() {
    let tree = Tree::new();
    std::os::unix::fs::symlink(
        tree.root().join("nowhere"),
        tree.root().join("notes/dangling"),
    )
    .unwrap();
    let grants = tree.grants(NOTES);
    let decision = tree.read(&grants, &tree.path("notes/dangling"));
    assert_eq!(reason(&decision), Some(DenyReason::InvalidArguments));
}

#[test]
fn a_path_longer_than_path_max_is_refused_quickly() {
    let tree = Tree::new();
    let grants = tree.grants(NOTES);
    let long = format!("{}{}", tree.path("notes"), "/a".repeat(40_000));
    let arguments = serde_json::json!({ "path": long }).to_string();
    assert!(parse(ToolName::ReadFile, &arguments).is_err());
    let args = brokerd::args::ToolArgs::ReadFile(tools::fs::ReadFileArgs { path: long });
    let decision = decide(&args, &grants, Labels::default(), now(), &tree.protected());
    assert_eq!(reason(&decision), Some(DenyReason::InvalidArguments));
}

#[test]
fn the_labels_are_the_strictest_of_every_covering_grant() {
    let tree = Tree::new();
    let grants = tree.grants(
        "[[grant]]\nid=\"home\"\ntool=\"read_file\"\npaths=[\"{root}\"]\nclass=\"public\"\nuntrusted=false\n[[grant]]\nid=\"sec\"\ntool=\"read_file\"\npaths=[\"{root}/notes\"]\nclass=\"secret\"\napproval=\"ask\"\n",
    );
    let Decision::Ask(allowed, AskReason::GrantAsks) = tree.read(&grants, &tree.path("notes/a.md"))
    else {
        panic!()
    };
    assert_eq!(allowed.grant, "sec", "the grant that asks decides");
    assert_eq!(
        allowed.class,
        Class::Secret,
        "but a secret file stays secret"
    );
    assert!(allowed.untrusted);
    let Decision::Allow(outside) = tree.read(&grants, &tree.path("work/x")) else {
        panic!()
    };
    assert_eq!(outside.class, Class::Public);
    assert!(!outside.untrusted);
}

#[test]
fn a_folder_never_covers_a_sibling_sharing_its_prefix() {
    let tree = Tree::new();
    let grants = tree.grants(NOTES);
    assert_eq!(
        reason(&tree.read(&grants, &tree.path("notes-private/b.md"))),
        Some(DenyReason::NoGrant)
    );
    assert_eq!(
        allowed_grant(&tree.read(&grants, &tree.path("notes"))),
        Some("notes")
    );
}

#[test]
fn a_file_that_does_not_exist_yet_is_judged_by_its_resolved_folder() {
    let tree = Tree::new();
    let grants = tree.grants(NOTES);
    assert_eq!(
        allowed_grant(&tree.read(&grants, &tree.path("notes/new/deeper.md"))),
        Some("notes")
    );
}

#[test]
fn tilde_expands_to_the_owners_home() {
    let tree = Tree::new();
    fs::create_dir_all(tree.root().join("home/docs")).unwrap();
    let grants = tree.grants("[[grant]]\nid=\"h\"\ntool=\"read_file\"\npaths=[\"~/docs\"]\n");
    assert_eq!(
        allowed_grant(&tree.read(&grants, &tree.path("home/docs/x"))),
        Some("h")
    );
    assert_eq!(
        reason(&tree.read(&grants, &tree.path("home/other"))),
        Some(DenyReason::NoGrant)
    );
}

#[test]
fn globs_cover_what_they_match_and_everything_below_it() {
    let tree = Tree::new();
    let grants = tree.grants("[[grant]]\nid=\"g\"\ntool=\"read_file\"\npaths=[\"{root}/*/a.md\", \"{root}/work/**/*.rs\"]\n");
    assert_eq!(
        allowed_grant(&tree.read(&grants, &tree.path("notes/a.md"))),
        Some("g")
    );
    assert_eq!(
        allowed_grant(&tree.read(&grants, &tree.path("work/src/deep/main.rs"))),
        Some("g")
    );
    assert_eq!(
        reason(&tree.read(&grants, &tree.path("notes/sub/a.md"))),
        Some(DenyReason::NoGrant)
    );
    assert_eq!(
        reason(&tree.read(&grants, &tree.path("work/src/main.py"))),
        Some(DenyReason::NoGrant)
    );
}

#[test]
fn a_relative_path_is_invalid_arguments() {
    let tree = Tree::new();
    let grants = tree.grants(NOTES);
    assert_eq!(
        reason(&tree.read(&grants, "notes/a.md")),
        Some(DenyReason::InvalidArguments)
    );
}

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
    let other =
        tree.grants("[[grant]]\nid=\"x\"\ntool=\"http_fetch\"\ndeny=false\nhosts=[\"*.0.0.1\"]\n");
    assert_eq!(
        reason(&fetch(&tree, &other, "https://127.0.0.1/")),
        Some(DenyReason::UnsafeAddress)
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

// ---- glob rules: resolved like folders, escapes, both readings for a deny ----

#[test]
fn a_globs_literal_prefix_is_resolved_like_a_folder() {
    let tree = Tree::new();
    // `~` is a symbolic link (as on Fedora Silverblue, /home -> /var/home).
    fs::create_dir_all(tree.root().join("var/home/proj")).unwrap();
    fs::write(tree.root().join("var/home/proj/key.pem"), "k").unwrap();
    std::os::unix::fs::symlink(tree.root().join("var/home"), tree.root().join("home")).unwrap();
    let grants = tree.grants(
        "[[grant]]\nid=\"all\"\ntool=\"read_file\"\npaths=[\"~\"]\n[[grant]]\nid=\"pem\"\ntool=\"read_file\"\npaths=[\"~/proj/**/*.pem\"]\ndeny=true\n",
    );
    let decision = tree.read(&grants, &tree.path("home/proj/key.pem"));
    assert_eq!(reason(&decision), Some(DenyReason::DeniedByGrant));
    let decision = tree.read(&grants, &tree.path("var/home/proj/key.pem"));
    assert_eq!(reason(&decision), Some(DenyReason::DeniedByGrant));
}

#[test]
fn a_folder_name_with_glob_characters_is_named_by_escaping_them() {
    let tree = Tree::new();
    fs::create_dir_all(tree.root().join("mail/[Gmail]")).unwrap();
    fs::create_dir_all(tree.root().join("mail/G")).unwrap();
    fs::write(tree.root().join("mail/[Gmail]/m1"), "m").unwrap();
    fs::write(tree.root().join("mail/G/m2"), "m").unwrap();
    let grants = tree.grants(
        "[[grant]]\nid=\"gmail\"\ntool=\"read_file\"\npaths=[\"{root}/mail/\\\\[Gmail\\\\]\"]\n",
    );
    assert_eq!(
        allowed_grant(&tree.read(&grants, &tree.path("mail/[Gmail]/m1"))),
        Some("gmail")
    );
    assert_eq!(
        reason(&tree.read(&grants, &tree.path("mail/G/m2"))),
        Some(DenyReason::NoGrant)
    );
}

#[test]
fn a_deny_with_glob_characters_covers_its_literal_and_its_glob_reading() {
    let tree = Tree::new();
    fs::create_dir_all(tree.root().join("mail/[Gmail]")).unwrap();
    fs::create_dir_all(tree.root().join("mail/G")).unwrap();
    let grants = tree.grants(
        "[[grant]]\nid=\"mail\"\ntool=\"read_file\"\npaths=[\"{root}/mail\"]\n[[grant]]\nid=\"no\"\ntool=\"read_file\"\npaths=[\"{root}/mail/[Gmail]\"]\ndeny=true\n",
    );
    for path in ["mail/[Gmail]/m1", "mail/G/m2"] {
        assert_eq!(
            reason(&tree.read(&grants, &tree.path(path))),
            Some(DenyReason::DeniedByGrant),
            "{path}"
        );
    }
    assert_eq!(
        allowed_grant(&tree.read(&grants, &tree.path("mail/x"))),
        Some("mail")
    );
}

#[test]
fn an_allow_with_glob_characters_covers_only_its_glob_reading() {
    let tree = Tree::new();
    fs::create_dir_all(tree.root().join("w/[s]")).unwrap();
    fs::create_dir_all(tree.root().join("w/s")).unwrap();
    let grants = tree.grants("[[grant]]\nid=\"s\"\ntool=\"read_file\"\npaths=[\"{root}/w/[s]\"]\n");
    assert_eq!(
        allowed_grant(&tree.read(&grants, &tree.path("w/s/f"))),
        Some("s")
    );
    assert_eq!(
        reason(&tree.read(&grants, &tree.path("w/[s]/f"))),
        Some(DenyReason::NoGrant)
    );
}

// ---- writes that change what git runs ----

fn write(tree: &Tree, grants: &[Grant], path: &str) -> Decision {
    let arguments = serde_json::json!({"path": path, "content": "x"}).to_string();
    tree.decide(grants, ToolName::WriteFile, &arguments, Labels::default())
}

const WORK_WRITES: &str = "[[grant]]\nid=\"work\"\ntool=\"write_file\"\npaths=[\"{root}/work\"]\non_untrusted=\"allow\"\n";

#[test]
fn a_write_into_dot_git_needs_a_grant_that_names_it() {
    let tree = Tree::new();
    fs::create_dir_all(tree.root().join("work/app/.git/hooks")).unwrap();
    let broad = tree.grants(WORK_WRITES);
    for path in [
        "work/app/.git/config",
        "work/app/.git/config.worktree",
        "work/app/.git/hooks/pre-commit",
        "work/app/.git",
        "work/other/.git",
    ] {
        assert_eq!(
            reason(&write(&tree, &broad, &tree.path(path))),
            Some(DenyReason::NoGrant),
            "{path}"
        );
    }
    assert_eq!(
        allowed_grant(&write(&tree, &broad, &tree.path("work/app/.gitignore"))),
        Some("work")
    );
    let globbed = tree.grants(
        "[[grant]]\nid=\"glob\"\ntool=\"write_file\"\npaths=[\"{root}/work/**\"]\non_untrusted=\"allow\"\n",
    );
    assert_eq!(
        reason(&write(&tree, &globbed, &tree.path("work/app/.git/config"))),
        Some(DenyReason::NoGrant),
        "a ** glob does not name .git"
    );
    let named = tree.grants(
        "[[grant]]\nid=\"git\"\ntool=\"write_file\"\npaths=[\"{root}/work/app/.git\"]\non_untrusted=\"allow\"\n[[grant]]\nid=\"any-git\"\ntool=\"write_file\"\npaths=[\"{root}/work/*/.git\"]\non_untrusted=\"allow\"\n",
    );
    assert_eq!(
        allowed_grant(&write(&tree, &named, &tree.path("work/app/.git/config"))),
        Some("git")
    );
    assert_eq!(
        allowed_grant(&write(&tree, &named, &tree.path("work/b/.git/config"))),
        Some("any-git")
    );
}

#[test]
fn a_write_into_a_folder_that_looks_like_a_bare_repository_needs_a_grant_that_names_it() {
    let tree = Tree::new();
    fs::create_dir_all(tree.root().join("work/planted/objects")).unwrap();
    fs::create_dir_all(tree.root().join("work/planted/refs")).unwrap();
    let broad = tree.grants(WORK_WRITES);
    for path in [
        "work/planted/config",
        "work/planted/HEAD",
        "work/planted/hooks",
    ] {
        assert_eq!(
            reason(&write(&tree, &broad, &tree.path(path))),
            Some(DenyReason::NoGrant),
            "{path}"
        );
    }
}

#[test]
fn a_write_to_the_global_git_config_needs_a_grant_that_names_it() {
    let tree = Tree::new();
    let home = tree.root().join("work/home");
    fs::create_dir_all(home.join(".config/git")).unwrap();
    let protected = tree
        .protected()
        .with_home(&home, &brokerd::policy::git::global_configs(&home, None));
    let broad = tree.grants(WORK_WRITES);
    for path in [home.join(".gitconfig"), home.join(".config/git/config")] {
        let args = parse(
            ToolName::WriteFile,
            &serde_json::json!({"path": path, "content": "x"}).to_string(),
        )
        .unwrap();
        let decision = decide(&args, &broad, Labels::default(), now(), &protected);
        assert_eq!(reason(&decision), Some(DenyReason::NoGrant), "{path:?}");
    }
    let named = tree.grants(&format!(
        "{WORK_WRITES}[[grant]]\nid=\"cfg\"\ntool=\"write_file\"\npaths=[\"{}\"]\non_untrusted=\"allow\"\n",
        home.join(".gitconfig").display()
    ));
    let args = parse(
        ToolName::WriteFile,
        &serde_json::json!({"path": home.join(".gitconfig"), "content": "x"}).to_string(),
    )
    .unwrap();
    assert!(matches!(
        decide(&args, &named, Labels::default(), now(), &protected),
        Decision::Allow(_)
    ));
}

// ---- shell: where a call without cwd runs ----

#[test]
fn a_shell_call_without_cwd_runs_in_the_deciding_grants_first_folder() {
    let tree = Tree::new();
    let grants = tree.grants(
        "[[grant]]\nid=\"ls\"\ntool=\"shell\"\ncommands=[\"ls\"]\npaths=[\"{root}/work\", \"{root}/notes\"]\n",
    );
    let Decision::Allow(allowed) = tree.decide(
        &grants,
        ToolName::Shell,
        r#"{"command":"ls"}"#,
        Labels::default(),
    ) else {
        panic!("not allowed")
    };
    let brokerd::args::ToolArgs::Shell(args) = &allowed.args else {
        panic!("not shell")
    };
    assert_eq!(args.cwd.as_deref(), Some(tree.path("work").as_str()));
}

// ---- between the decision and the run ----

#[test]
fn a_folder_swapped_for_a_symbolic_link_between_decision_and_run_is_refused() {
    use brokerd::files::{FileRunError, run_file_call};
    let tree = Tree::new();
    fs::create_dir_all(tree.root().join("work/sub")).unwrap();
    let grants = tree.grants(WORK_WRITES);
    let Decision::Allow(allowed) = write(&tree, &grants, &tree.path("work/sub/g.toml")) else {
        panic!("not allowed")
    };
    // Between the decision and the run, work/sub becomes a link into the grants folder.
    fs::remove_dir(tree.root().join("work/sub")).unwrap();
    std::os::unix::fs::symlink(
        tree.root().join("boxmaker/grants"),
        tree.root().join("work/sub"),
    )
    .unwrap();
    let error = run_file_call(&allowed, 1024).unwrap_err();
    assert!(
        matches!(error, FileRunError::File(tools::fs::FileError::Moved(_))),
        "{error}"
    );
    assert!(!tree.root().join("boxmaker/grants/g.toml").exists());
    // Without the swap the same decision runs.
    fs::remove_file(tree.root().join("work/sub")).unwrap();
    fs::create_dir(tree.root().join("work/sub")).unwrap();
    assert!(run_file_call(&allowed, 1024).is_ok());
    assert_eq!(
        fs::read_to_string(tree.root().join("work/sub/g.toml")).unwrap(),
        "x"
    );
}

// ---- shell: what a covered command writes ----

fn shell_call(tree: &Tree, grants: &[Grant], command: &str, cwd: &str) -> Decision {
    let arguments = serde_json::json!({"command": command, "cwd": tree.path(cwd)}).to_string();
    tree.decide(grants, ToolName::Shell, &arguments, Labels::default())
}

const TOOLS_IN_WORK: &str = "[[grant]]\nid=\"tools\"\ntool=\"shell\"\ncommands=[\"git\", \"cp\", \"touch\", \"tee\"]\npaths=[\"{root}/work\"]\non_untrusted=\"allow\"\n";

#[test]
fn a_file_a_command_writes_must_be_inside_the_grant_and_outside_boxmakers_folders() {
    let tree = Tree::new();
    fs::create_dir_all(tree.root().join("work/app")).unwrap();
    let grants = tree.grants(TOOLS_IN_WORK);
    let planted = format!(
        "git log --format=x --output={}/boxmaker/grants/planted.toml",
        tree.root().display()
    );
    assert_eq!(
        reason(&shell_call(&tree, &grants, &planted, "work")),
        Some(DenyReason::ProtectedPath)
    );
    let outside = format!("cp a.txt {}/notes/copied", tree.root().display());
    assert_eq!(
        reason(&shell_call(&tree, &grants, &outside, "work")),
        Some(DenyReason::NoGrant)
    );
    assert_eq!(
        reason(&shell_call(&tree, &grants, "touch ../notes/x", "work")),
        Some(DenyReason::NoGrant)
    );
    assert_eq!(
        allowed_grant(&shell_call(
            &tree,
            &grants,
            "touch app/x && tee app/y",
            "work"
        )),
        Some("tools")
    );
}

#[test]
fn a_command_that_writes_git_config_needs_a_grant_that_names_dot_git() {
    let tree = Tree::new();
    fs::create_dir_all(tree.root().join("work/app/.git")).unwrap();
    let grants = tree.grants(TOOLS_IN_WORK);
    for command in [
        "git config core.fsmonitor 'touch /tmp/pwned'",
        "touch .git/config",
        "cp evil .git/hooks/pre-commit",
    ] {
        assert_eq!(
            reason(&shell_call(&tree, &grants, command, "work/app")),
            Some(DenyReason::NoGrant),
            "{command}"
        );
    }
    assert_eq!(
        allowed_grant(&shell_call(&tree, &grants, "git status", "work/app")),
        Some("tools")
    );
    let named = tree.grants(&TOOLS_IN_WORK.replace(
        "paths=[\"{root}/work\"]",
        "paths=[\"{root}/work\", \"{root}/work/app/.git\"]",
    ));
    assert_eq!(
        allowed_grant(&shell_call(
            &tree,
            &named,
            "git config user.name me",
            "work/app"
        )),
        Some("tools")
    );
}

#[test]
fn a_write_the_checker_cannot_know_is_covered_by_no_grant() {
    let tree = Tree::new();
    let grants = tree.grants(
        "[[grant]]\nid=\"x\"\ntool=\"shell\"\ncommands=[\"xargs\", \"ls\"]\npaths=[\"{root}/work\"]\n",
    );
    let Decision::Deny(denied) = shell_call(&tree, &grants, "ls | xargs rm", "work") else {
        panic!("not refused")
    };
    assert_eq!(denied.reason, DenyReason::NoGrant);
}
