//! The guard rails in `decide`: right after the protected paths, whatever a grant says, each
//! with its own reason.

use policy::args::ToolName;
use policy::decide::{Decision, Labels};
use policy::grants::Grant;
use proto::DenyReason;

use super::*;

fn shell(tree: &Tree, grants: &[Grant], command: &str, cwd: &str) -> Decision {
    let arguments = serde_json::json!({ "command": command, "cwd": cwd }).to_string();
    tree.decide(grants, ToolName::Shell, &arguments, Labels::default())
}

/// A grant that covers `rm`, `cat`, `ls`, `sleep` and `sh` in the work folder.
fn wide(tree: &Tree) -> Vec<Grant> {
    tree.grants(
        "[[grant]]\nid=\"any\"\ntool=\"shell\"\ncommands=[\"rm\", \"cat\", \"ls\", \"sleep\", \"sh\"]\npaths=[\"{root}/work\"]\n",
    )
}

#[test]
fn a_catastrophic_command_is_refused_even_when_a_grant_covers_it() {
    let tree = Tree::new();
    let grants = wide(&tree);
    let work = tree.path("work");
    assert_eq!(
        allowed_grant(&shell(&tree, &grants, "rm -rf build", &work)),
        Some("any")
    );
    for script in [
        "rm -rf .",
        "rm -rf *",
        "rm -rf /",
        "rm -rf ~",
        "cat x > /dev/sda",
    ] {
        let decision = shell(&tree, &grants, script, &work);
        assert_eq!(
            reason(&decision),
            Some(DenyReason::CatastrophicCommand),
            "{script}: {decision:?}"
        );
    }
}

#[test]
fn home_as_a_substitution_is_answered_by_the_rail_not_by_coverage() {
    let tree = Tree::new();
    let grants = wide(&tree);
    let decision = shell(&tree, &grants, "rm -rf $HOME", &tree.path("work"));
    assert_eq!(reason(&decision), Some(DenyReason::CatastrophicCommand));
    let Decision::Deny(denied) = decision else {
        unreachable!()
    };
    assert!(denied.detail.contains("home folder"), "{}", denied.detail);
    assert_eq!(denied.grant, None);
}

#[test]
fn a_background_ampersand_is_refused_with_its_own_reason_after_the_catastrophic_rail() {
    let tree = Tree::new();
    let grants = wide(&tree);
    let work = tree.path("work");
    assert_eq!(
        reason(&shell(&tree, &grants, "sleep 10 &", &work)),
        Some(DenyReason::BackgroundCommand)
    );
    assert_eq!(
        reason(&shell(&tree, &grants, "rm -rf / &", &work)),
        Some(DenyReason::CatastrophicCommand)
    );
    assert!(
        DenyReason::BackgroundCommand
            .model_text()
            .contains("bash_bg")
    );
}

#[test]
fn any_literal_word_or_redirection_target_inside_a_protected_folder_is_refused() {
    let tree = Tree::new();
    let grants = wide(&tree);
    let work = tree.path("work");
    let grants_folder = tree.path("boxmaker/grants");
    for script in [
        format!("cat {grants_folder}/g.toml"),
        "cat ../boxmaker/grants/g.toml".to_owned(),
        format!("ls --color=auto {grants_folder}"),
        format!("ls > {grants_folder}/out"),
        format!("cat < {grants_folder}/g.toml"),
        format!("sh -c 'cat {grants_folder}/g.toml'"),
        format!("cat {grants_folder}/*.toml"),
    ] {
        let decision = shell(&tree, &grants, &script, &work);
        assert_eq!(
            reason(&decision),
            Some(DenyReason::ProtectedPath),
            "{script}: {decision:?}"
        );
    }
    std::os::unix::fs::symlink(tree.path("boxmaker"), tree.path("work/link")).unwrap();
    assert_eq!(
        reason(&shell(&tree, &grants, "cat link/grants/g.toml", &work)),
        Some(DenyReason::ProtectedPath)
    );
    assert_eq!(
        allowed_grant(&shell(&tree, &grants, "cat notes", &work)),
        Some("any")
    );
}
