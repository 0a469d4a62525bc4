//! The grant index gives the decision the whole list gives: random grant lists (file tools,
//! walkers, `git_clone` with hosts, `shell`; folders, globs, deny grants with and without
//! paths, the same folder twice) against random calls, decided both ways.

use policy::decide::{GrantIndex, Seen, decide_indexed, decide_seen};
use policy::shell::PathEnforcement;
use proptest::prelude::*;

use super::*;

const TOOLS: &[&str] = &[
    "read_file",
    "write_file",
    "grep",
    "list_files",
    "git_clone",
    "shell",
];
const PATHS: &[&str] = &[
    "{root}/notes",
    "{root}/notes/sub",
    "{root}/notes-private",
    "{root}/work",
    "{root}/notes/*.md",
    "{root}/work/**/*.txt",
];

/// One grant's table: tool, one or two paths (or none for a deny grant), deny or not.
fn table(i: usize, (tool, paths, deny): &(usize, Vec<usize>, bool)) -> String {
    let tool = TOOLS[*tool];
    let mut text = format!("[[grant]]\nid = \"g{i}\"\ntool = \"{tool}\"\n");
    if !(*deny && paths.is_empty()) {
        let listed: Vec<String> = paths.iter().map(|p| format!("{:?}", PATHS[*p])).collect();
        let listed = if listed.is_empty() {
            vec![format!("{:?}", PATHS[0])]
        } else {
            listed
        };
        text.push_str(&format!("paths = [{}]\n", listed.join(", ")));
    }
    match tool {
        "git_clone" if !*deny => text.push_str("hosts = [\"example.org\"]\n"),
        "git_clone" => text.push_str("hosts = [\"evil.example\"]\n"),
        "shell" => text.push_str("commands = [\"ls\"]\n"),
        _ => {}
    }
    if *deny {
        text.push_str("deny = true\n");
    }
    text
}

fn call(tree: &Tree, (tool, at): (usize, usize)) -> (ToolName, String) {
    let places = [
        "notes/a.md",
        "notes/sub/c.md",
        "notes-private/b.md",
        "work/x.txt",
        "other/y",
        "notes",
        "work",
    ];
    let path = tree.path(places[at % places.len()]);
    let tool = TOOLS[tool];
    let arguments = match tool {
        "write_file" => serde_json::json!({"path": path, "content": "x"}),
        "grep" => serde_json::json!({"pattern": "a", "path": path}),
        "git_clone" => serde_json::json!({"url": "https://example.org/r.git", "path": path}),
        "shell" => serde_json::json!({"command": "ls", "cwd": tree.path("work")}),
        _ => serde_json::json!({"path": path}),
    };
    (ToolName::parse(tool).unwrap(), arguments.to_string())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn the_indexed_decision_is_the_decision_of_the_whole_list(
        tables in prop::collection::vec(
            (0..TOOLS.len(), prop::collection::vec(0..PATHS.len(), 0..3), any::<bool>()),
            0..24,
        ),
        calls in prop::collection::vec((0..TOOLS.len(), 0..7usize), 1..8),
    ) {
        let tree = Tree::new();
        fs::create_dir_all(tree.root().join("notes/sub")).unwrap();
        let text: String = tables.iter().enumerate().map(|(i, t)| table(i, t)).collect();
        let grants = tree.grants(&text);
        let index = GrantIndex::new(&grants);
        for spec in calls {
            let (tool, arguments) = call(&tree, spec);
            let Ok(args) = parse(tool, &arguments) else { continue };
            let seen = Seen::labels_only(Labels::default());
            let plain = decide_seen(&args, &grants, seen, now(), &tree.protected(), PathEnforcement::Enforced);
            let indexed = decide_indexed(
                &args, (&grants, &index), seen, now(), &tree.protected(), PathEnforcement::Enforced,
            );
            prop_assert_eq!(plain, indexed, "{}\n{}", text, arguments);
        }
    }
}
