//! The coding tools (`edit_file`, `list_files`, `glob`, `grep`) decided like the file tools,
//! and grants that name several tools or a group.

use super::*;

#[test]
fn a_read_group_grant_covers_grep_glob_and_list_files_below_its_folder_only() {
    let tree = Tree::new();
    let grants = tree.grants("[[grant]]\nid=\"code\"\ntool=\"read\"\npaths=[\"{root}/notes\"]\n");
    assert_eq!(grants.len(), 4);
    let notes = tree.path("notes");
    for (tool, arguments) in [
        (
            ToolName::Grep,
            serde_json::json!({ "pattern": "a", "path": notes }),
        ),
        (
            ToolName::Glob,
            serde_json::json!({ "pattern": "*.md", "path": notes }),
        ),
        (
            ToolName::ListFiles,
            serde_json::json!({ "path": notes, "recursive": true }),
        ),
        (
            ToolName::ReadFile,
            serde_json::json!({ "path": tree.path("notes/a.md"), "offset": 2 }),
        ),
    ] {
        let decision = tree.decide(&grants, tool, &arguments.to_string(), Labels::default());
        assert_eq!(
            allowed_grant(&decision),
            Some("code"),
            "{tool:?}: {decision:?}"
        );
    }
    let outside = serde_json::json!({ "pattern": "a", "path": tree.path("notes-private") });
    let decision = tree.decide(
        &grants,
        ToolName::Grep,
        &outside.to_string(),
        Labels::default(),
    );
    assert_eq!(reason(&decision), Some(DenyReason::NoGrant));
    let edit = serde_json::json!({ "path": tree.path("notes/a.md"), "edits": [{ "old_str": "a", "new_str": "b" }] });
    let decision = tree.decide(
        &grants,
        ToolName::EditFile,
        &edit.to_string(),
        Labels::default(),
    );
    assert_eq!(reason(&decision), Some(DenyReason::NoGrant));
}

#[test]
fn a_grant_naming_one_tool_covers_only_that_tool() {
    let tree = Tree::new();
    let grants = tree.grants("[[grant]]\nid=\"g\"\ntool=\"grep\"\npaths=[\"{root}/notes\"]\n");
    let glob = serde_json::json!({ "pattern": "*", "path": tree.path("notes") });
    let decision = tree.decide(
        &grants,
        ToolName::Glob,
        &glob.to_string(),
        Labels::default(),
    );
    assert_eq!(reason(&decision), Some(DenyReason::NoGrant));
}

#[test]
fn edit_file_is_a_write_and_a_walk_into_boxmaker_s_folder_is_refused() {
    let tree = Tree::new();
    let grants =
        tree.grants("[[grant]]\nid=\"w\"\ntool=[\"write\", \"grep\"]\npaths=[\"{root}\"]\n");
    let edit = serde_json::json!({ "path": tree.path("notes/a.md"), "edits": [{ "old_str": "", "new_str": "b" }] });
    let decision = tree.decide(
        &grants,
        ToolName::EditFile,
        &edit.to_string(),
        Labels::default(),
    );
    assert_eq!(allowed_grant(&decision), Some("w"));
    let inside = serde_json::json!({ "pattern": "x", "path": tree.path("boxmaker/grants") });
    let decision = tree.decide(
        &grants,
        ToolName::Grep,
        &inside.to_string(),
        Labels::default(),
    );
    assert_eq!(reason(&decision), Some(DenyReason::ProtectedPath));
}
