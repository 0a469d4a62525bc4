//! Paths: protected folders, `..`, symbolic links in, out and into protected folders, prefix
//! siblings, `~`, and glob rules (resolved like folders, escapes, both readings for a deny).

use std::fs;

use policy::args::{ArgsError, ToolName, parse};
use policy::decide::{AskReason, Decision, Labels, decide};
use policy::paths::MAX_PATH_BYTES;
use proto::{Class, DenyReason};

use super::*;

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
    assert_eq!(
        parse(ToolName::ReadFile, &arguments).map(|_| ()),
        Err(ArgsError::Shape(format!(
            "path is {} bytes, longer than the {MAX_PATH_BYTES} a path may have",
            long.len()
        )))
    );
    let args = policy::args::ToolArgs::ReadFile(tools::fs::ReadFileArgs {
        path: long,
        ..Default::default()
    });
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
