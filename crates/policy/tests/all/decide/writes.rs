//! What a call writes: writes that change what git runs, where a `shell` call without `cwd`
//! runs, and the files a covered command writes.

use std::fs;

use policy::args::{ToolName, parse};
use policy::decide::{Decision, Labels, decide};
use policy::grants::Grant;
use proto::DenyReason;

use super::*;

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
            Some(DenyReason::TrustedPlace),
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
        Some(DenyReason::TrustedPlace),
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
            Some(DenyReason::TrustedPlace),
            "{path}"
        );
    }
}

#[test]
fn a_write_to_the_global_git_config_needs_a_grant_that_names_it() {
    let tree = Tree::new();
    let home = tree.root().join("work/home");
    fs::create_dir_all(home.join(".config/git")).unwrap();
    let protected = tree.protected().with_home(&home, None);
    let broad = tree.grants(WORK_WRITES);
    for path in [home.join(".gitconfig"), home.join(".config/git/config")] {
        let args = parse(
            ToolName::WriteFile,
            &serde_json::json!({"path": path, "content": "x"}).to_string(),
        )
        .unwrap();
        let decision = decide(&args, &broad, Labels::default(), now(), &protected);
        assert_eq!(
            reason(&decision),
            Some(DenyReason::TrustedPlace),
            "{path:?}"
        );
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

#[test]
fn a_write_to_any_trusted_place_needs_a_grant_that_names_it_as_spelled_or_through_its_link() {
    use std::os::unix::fs::symlink;
    let tree = Tree::new();
    let home = tree.root().join("work/home");
    let dotfiles = tree.root().join("work/dotfiles");
    fs::create_dir_all(home.join("app/.vscode")).unwrap();
    fs::create_dir_all(&dotfiles).unwrap();
    fs::write(dotfiles.join("bashrc"), "").unwrap();
    symlink(dotfiles.join("bashrc"), home.join(".bashrc")).unwrap();
    symlink(&dotfiles, home.join("app/.claude")).unwrap();
    let protected = tree.protected().with_home(&home, None);
    let broad = tree.grants(&WORK_WRITES.replace(
        "tool=\"write_file\"",
        "tool=[\"write_file\", \"edit_file\"]",
    ));
    let edit = |grants: &[Grant], tool: ToolName, path: &std::path::Path| {
        let arguments = match tool {
            ToolName::EditFile => {
                serde_json::json!({"path": path, "edits": [{"old_str": "a", "new_str": "b"}]})
            }
            _ => serde_json::json!({"path": path, "content": "x"}),
        };
        let args = parse(tool, &arguments.to_string()).unwrap();
        decide(&args, grants, Labels::default(), now(), &protected)
    };
    let places = [
        home.join(".bashrc"),
        dotfiles.join("bashrc"),
        home.join(".profile"),
        home.join(".ssh/authorized_keys"),
        home.join(".claude.json"),
        home.join(".local/bin/git"),
        home.join(".config/systemd/user/x.service"),
        home.join("app/.claude/settings.json"),
        home.join("app/.vscode/tasks.json"),
        home.join("app/.vscode/settings.json"),
        home.join("app/.envrc"),
        home.join("app/.mcp.json"),
    ];
    for path in &places {
        let decision = edit(&broad, ToolName::WriteFile, path);
        let Decision::Deny(denied) = &decision else {
            panic!("{}: {decision:?}", path.display())
        };
        assert_eq!(
            denied.reason,
            DenyReason::TrustedPlace,
            "{}",
            path.display()
        );
        assert!(
            denied.detail.contains("paths = ["),
            "the detail says how a grant opens it: {}",
            denied.detail
        );
    }
    assert_eq!(
        reason(&edit(&broad, ToolName::EditFile, &home.join(".bashrc"))),
        Some(DenyReason::TrustedPlace)
    );
    assert_eq!(
        allowed_grant(&edit(
            &broad,
            ToolName::WriteFile,
            &home.join("app/notes.md")
        )),
        Some("work")
    );
    // A grant naming the place literally opens it (as spelled: a link is resolved like
    // every grant path).
    for (named, path) in [
        (home.join(".bashrc"), home.join(".bashrc")),
        (home.join(".bashrc"), dotfiles.join("bashrc")),
        (
            home.join("app/.vscode/tasks.json"),
            home.join("app/.vscode/tasks.json"),
        ),
        (
            home.join("app/.claude"),
            home.join("app/.claude/settings.json"),
        ),
        (home.join(".ssh"), home.join(".ssh/authorized_keys")),
    ] {
        let grants = tree.grants(&format!(
            "{WORK_WRITES}[[grant]]\nid=\"named\"\ntool=[\"write_file\", \"edit_file\"]\npaths=[\"{}\"]\non_untrusted=\"allow\"\n",
            named.display()
        ));
        assert_eq!(
            allowed_grant(&edit(&grants, ToolName::WriteFile, &path)),
            Some("named"),
            "{}",
            path.display()
        );
    }
    // A shell redirection is held to the same rule.
    let tee = tree.grants(
        "[[grant]]\nid=\"tee\"\ntool=\"shell\"\ncommands=[\"tee\"]\npaths=[\"{root}/work\"]\non_untrusted=\"allow\"\n",
    );
    for target in ["app/.envrc", ".bashrc", "app/.claude/settings.json"] {
        let arguments = serde_json::json!({"command": format!("tee {target}"), "cwd": home});
        let args = parse(ToolName::Shell, &arguments.to_string()).unwrap();
        let decision = decide(&args, &tee, Labels::default(), now(), &protected);
        assert_eq!(
            reason(&decision),
            Some(DenyReason::TrustedPlace),
            "{target}"
        );
    }
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
    let policy::args::ToolArgs::Shell(args) = &allowed.args else {
        panic!("not shell")
    };
    assert_eq!(args.cwd.as_deref(), Some(tree.path("work").as_str()));
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
            Some(DenyReason::TrustedPlace),
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
    // The place it changes is in the call's scope (the box leaves what its scope names
    // writable); a call that writes no git place has only its folder's.
    let scope = |decision: &Decision| match decision {
        Decision::Allow(allowed) => allowed.scope.clone(),
        other => panic!("not allowed: {other:?}"),
    };
    let work = tree.root().join("work");
    assert_eq!(
        scope(&shell_call(
            &tree,
            &named,
            "git config user.name me",
            "work/app"
        )),
        Some(policy::decide::Scope::Paths(vec![
            work.clone(),
            work.join("app/.git")
        ]))
    );
    assert_eq!(
        scope(&shell_call(&tree, &named, "git status", "work/app")),
        Some(policy::decide::Scope::Paths(vec![work]))
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

// ---- shell: redirections, by whether the box enforces paths ----

fn shell_call_in(
    tree: &Tree,
    grants: &[Grant],
    command: &str,
    walls: policy::shell::PathEnforcement,
) -> Decision {
    let arguments = serde_json::json!({"command": command, "cwd": tree.path("work")}).to_string();
    let args = parse(ToolName::Shell, &arguments).unwrap();
    policy::decide::decide_in(
        &args,
        grants,
        Labels::default(),
        now(),
        &tree.protected(),
        walls,
    )
}

const LS_IN_WORK: &str = "[[grant]]\nid=\"ls\"\ntool=\"shell\"\ncommands=[\"ls\", \"grep\"]\npaths=[\"{root}/work\"]\non_untrusted=\"allow\"\n";

#[test]
fn with_the_box_enforcing_paths_a_redirection_into_the_grant_is_covered() {
    use policy::shell::PathEnforcement::Enforced;
    let tree = Tree::new();
    let grants = tree.grants(LS_IN_WORK);
    for command in [
        "ls > listing.txt",
        "ls 2>&1 | grep x >> found",
        "grep x < listing.txt",
        "ls 2>/dev/null",
    ] {
        assert_eq!(
            allowed_grant(&shell_call_in(&tree, &grants, command, Enforced)),
            Some("ls"),
            "{command}"
        );
    }
}

#[test]
fn with_the_box_enforcing_paths_a_redirection_outside_the_grant_or_into_boxmaker_is_refused() {
    use policy::shell::PathEnforcement::Enforced;
    let tree = Tree::new();
    let grants = tree.grants(LS_IN_WORK);
    let outside = format!("ls > {}", tree.path("notes/x"));
    assert_eq!(
        reason(&shell_call_in(&tree, &grants, &outside, Enforced)),
        Some(DenyReason::NoGrant)
    );
    assert_eq!(
        reason(&shell_call_in(&tree, &grants, "ls > ../notes/x", Enforced)),
        Some(DenyReason::NoGrant)
    );
    let planted = format!("ls > {}", tree.path("boxmaker/grants/planted.toml"));
    assert_eq!(
        reason(&shell_call_in(&tree, &grants, &planted, Enforced)),
        Some(DenyReason::ProtectedPath)
    );
    let read = format!("grep x < {}", tree.path("boxmaker/grants/g.toml"));
    assert_eq!(
        reason(&shell_call_in(&tree, &grants, &read, Enforced)),
        Some(DenyReason::ProtectedPath)
    );
}

#[test]
fn without_the_box_enforcing_paths_every_redirection_is_refused() {
    use policy::shell::PathEnforcement::Unenforced;
    let tree = Tree::new();
    let grants = tree.grants(LS_IN_WORK);
    for command in ["ls > listing.txt", "ls 2>&1", "ls 2>/dev/null"] {
        assert_eq!(
            reason(&shell_call_in(&tree, &grants, command, Unenforced)),
            Some(DenyReason::NoGrant),
            "{command}"
        );
        // `decide` itself keeps the strict rules.
        assert_eq!(
            reason(&shell_call(&tree, &grants, command, "work")),
            Some(DenyReason::NoGrant),
            "{command}"
        );
    }
}
