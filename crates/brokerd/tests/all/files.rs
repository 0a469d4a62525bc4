//! The one place that opens a decided folder: between the decision and the run, the folder
//! a grant decided on may not be swapped for a symbolic link.

use std::fs;
use std::path::Path;

use brokerd::files::{FileOutcome, FileRunError, WalkContext, run_file_call};
use policy::args::{ToolName, parse};
use policy::decide::{Decision, Labels, Protected, decide};
use policy::grants::parse_file;
use proto::Timestamp;

#[test]
fn a_folder_swapped_for_a_symbolic_link_between_decision_and_run_is_refused() {
    let dir = testkit::temp_dir();
    let root = dir.path().canonicalize().unwrap();
    fs::create_dir_all(root.join("work/sub")).unwrap();
    fs::create_dir_all(root.join("boxmaker/grants")).unwrap();
    let text = format!(
        "[[grant]]\nid=\"work\"\ntool=\"write_file\"\npaths=[\"{}/work\"]\n",
        root.display()
    );
    let parsed = parse_file(&text, Path::new("g.toml"), &root.join("home"));
    assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
    let target = root.join("work/sub/g.toml").display().to_string();
    let arguments = serde_json::json!({"path": target, "content": "x"}).to_string();
    let args = parse(ToolName::WriteFile, &arguments).unwrap();
    let now = Timestamp::parse("2026-11-30T12:00:00Z").unwrap();
    let protected = Protected::new(&[root.join("boxmaker")]);
    let Decision::Allow(allowed) =
        decide(&args, &parsed.grants, Labels::default(), now, &protected)
    else {
        panic!("not allowed")
    };
    // Between the decision and the run, work/sub becomes a link into the grants folder.
    fs::remove_dir(root.join("work/sub")).unwrap();
    std::os::unix::fs::symlink(root.join("boxmaker/grants"), root.join("work/sub")).unwrap();
    let walk = WalkContext {
        grants: &parsed.grants,
        protected: &protected,
    };
    let error = run_file_call(&allowed, 1024, &walk).unwrap_err();
    assert!(
        matches!(error, FileRunError::File(tools::fs::FileError::Moved(_))),
        "{error}"
    );
    assert!(!root.join("boxmaker/grants/g.toml").exists());
    // Without the swap the same decision runs.
    fs::remove_file(root.join("work/sub")).unwrap();
    fs::create_dir(root.join("work/sub")).unwrap();
    assert!(run_file_call(&allowed, 1024, &walk).is_ok());
    assert_eq!(
        fs::read_to_string(root.join("work/sub/g.toml")).unwrap(),
        "x"
    );
}

#[test]
fn a_walk_leaves_out_boxmakers_folders_and_what_a_deny_grant_covers() {
    let dir = testkit::temp_dir();
    let root = dir.path().canonicalize().unwrap();
    fs::create_dir_all(root.join("proj/keys")).unwrap();
    fs::create_dir_all(root.join("boxmaker")).unwrap();
    fs::write(root.join("proj/main.rs"), "needle\n").unwrap();
    fs::write(root.join("proj/keys/id.pem"), "needle\n").unwrap();
    fs::write(root.join("boxmaker/ledger"), "needle\n").unwrap();
    let text = format!(
        "[[grant]]\nid=\"all\"\ntool=\"read\"\npaths=[\"{r}\"]\n[[grant]]\nid=\"pem\"\ntool=\"grep\"\npaths=[\"{r}/**/*.pem\"]\ndeny=true\n",
        r = root.display()
    );
    let parsed = parse_file(&text, Path::new("g.toml"), &root.join("home"));
    assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
    let arguments =
        serde_json::json!({"pattern": "needle", "path": root.display().to_string()}).to_string();
    let args = parse(ToolName::Grep, &arguments).unwrap();
    let now = proto::Timestamp::now();
    let protected = Protected::new(&[root.join("boxmaker")]);
    let Decision::Allow(allowed) =
        decide(&args, &parsed.grants, Labels::default(), now, &protected)
    else {
        panic!("not allowed")
    };
    let walk = WalkContext {
        grants: &parsed.grants,
        protected: &protected,
    };
    let Ok(FileOutcome::Grepped(found)) = run_file_call(&allowed, 1024, &walk) else {
        panic!("grep did not run")
    };
    assert_eq!(
        found.output,
        root.join("proj/main.rs").display().to_string()
    );
}
