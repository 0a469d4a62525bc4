//! The one place that opens a decided folder: between the decision and the run, the folder
//! a grant decided on may not be swapped for a symbolic link.

use std::fs;
use std::path::Path;

use brokerd::files::{FileOutcome, FileRunError, WalkContext, run_file_call};
use policy::args::{ToolName, parse};
use policy::decide::{Decision, Labels, Protected, decide};
use policy::grants::parse_file;
use proto::Timestamp;
use tools::fs::{Expected, FileError, sha256_hex};

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
        expected: None,
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
        expected: None,
    };
    let Ok(FileOutcome::Grepped(found)) = run_file_call(&allowed, 1024, &walk) else {
        panic!("grep did not run")
    };
    assert_eq!(
        found.output,
        root.join("proj/main.rs").display().to_string()
    );
}

/// A grant on `root/work` for `tool`, and the decision for `arguments`.
fn decided(root: &Path, tool: ToolName, arguments: serde_json::Value) -> policy::decide::Allowed {
    let text = format!(
        "[[grant]]\nid=\"work\"\ntool=\"write\"\npaths=[\"{}/work\"]\n",
        root.display()
    );
    let parsed = parse_file(&text, Path::new("g.toml"), &root.join("home"));
    assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
    let args = parse(tool, &arguments.to_string()).unwrap();
    let protected = Protected::new(&[root.join("boxmaker")]);
    let Decision::Allow(allowed) = decide(
        &args,
        &parsed.grants,
        Labels::default(),
        Timestamp::now(),
        &protected,
    ) else {
        panic!("not allowed")
    };
    allowed
}

fn run_expecting(
    allowed: &policy::decide::Allowed,
    expected: &Expected,
) -> Result<FileOutcome, FileRunError> {
    let protected = Protected::new(&[]);
    let walk = WalkContext {
        grants: &[],
        protected: &protected,
        expected: Some(expected),
    };
    run_file_call(allowed, 1024, &walk)
}

#[test]
fn an_edit_of_a_file_changed_between_the_decision_and_the_write_is_refused_as_unread() {
    let dir = testkit::temp_dir();
    let root = dir.path().canonicalize().unwrap();
    fs::create_dir_all(root.join("work")).unwrap();
    let file = root.join("work/notes.txt");
    fs::write(&file, "alpha\nbeta\n").unwrap();
    // The session read this content; the decision expects it.
    let expected = Expected::Sha256(sha256_hex(b"alpha\nbeta\n"));
    let allowed = decided(
        &root,
        ToolName::EditFile,
        serde_json::json!({"path": file.display().to_string(),
            "edits": [{"old_str": "beta", "new_str": "gamma"}]}),
    );
    // Someone else changes the file after the decision, keeping the text the edit looks for.
    fs::write(&file, "alpha\nbeta\nsomeone else's line\n").unwrap();
    let error = run_expecting(&allowed, &expected).unwrap_err();
    assert!(
        matches!(error, FileRunError::File(FileError::Unread { .. })),
        "{error}"
    );
    assert!(
        error.to_string().contains("read it with read_file first"),
        "{error}"
    );
    assert_eq!(
        fs::read_to_string(&file).unwrap(),
        "alpha\nbeta\nsomeone else's line\n"
    );
    assert_eq!(
        fs::read_dir(root.join("work")).unwrap().count(),
        1,
        "no temporary file left"
    );
    // With the content the session read, the same decision runs.
    fs::write(&file, "alpha\nbeta\n").unwrap();
    assert!(run_expecting(&allowed, &expected).is_ok());
    assert_eq!(fs::read_to_string(&file).unwrap(), "alpha\ngamma\n");
}

#[test]
fn a_write_over_a_file_changed_or_made_after_the_decision_is_refused_as_unread() {
    let dir = testkit::temp_dir();
    let root = dir.path().canonicalize().unwrap();
    fs::create_dir_all(root.join("work")).unwrap();
    let file = root.join("work/out.txt");
    let allowed = decided(
        &root,
        ToolName::WriteFile,
        serde_json::json!({"path": file.display().to_string(), "content": "mine\n"}),
    );
    // Decided when no file was there; one appears before the write.
    fs::write(&file, "theirs\n").unwrap();
    let error = run_expecting(&allowed, &Expected::Absent).unwrap_err();
    assert!(
        matches!(error, FileRunError::File(FileError::Unread { .. })),
        "{error}"
    );
    assert_eq!(fs::read_to_string(&file).unwrap(), "theirs\n");
    // Decided on content the session read; it changed before the write.
    let expected = Expected::Sha256(sha256_hex(b"what the session read\n"));
    let error = run_expecting(&allowed, &expected).unwrap_err();
    assert!(
        matches!(error, FileRunError::File(FileError::Unread { .. })),
        "{error}"
    );
    assert_eq!(fs::read_to_string(&file).unwrap(), "theirs\n");
    // The content the session read is there: the write replaces it.
    let expected = Expected::Sha256(sha256_hex(b"theirs\n"));
    assert!(run_expecting(&allowed, &expected).is_ok());
    assert_eq!(fs::read_to_string(&file).unwrap(), "mine\n");
}

#[test]
fn the_walk_limits_handed_to_a_box_leave_out_exactly_what_the_deny_grants_cover() {
    let dir = testkit::temp_dir();
    let root = dir.path().canonicalize().unwrap();
    fs::create_dir_all(root.join("proj/[keys]")).unwrap();
    let text = format!(
        "[[grant]]\nid=\"all\"\ntool=\"grep\"\npaths=[\"{r}\"]\n\
         [[grant]]\nid=\"pem\"\ntool=\"grep\"\npaths=[\"{r}/**/*.pem\", \"{r}/proj/[keys]\", \"{r}/notes\"]\ndeny=true\n\
         [[grant]]\nid=\"other-tool\"\ntool=\"glob\"\npaths=[\"{r}/proj\"]\ndeny=true\n",
        r = root.display()
    );
    let parsed = parse_file(&text, Path::new("g.toml"), &root.join("home"));
    assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
    let arguments =
        serde_json::json!({"pattern": "x", "path": root.display().to_string()}).to_string();
    let args = parse(ToolName::Grep, &arguments).unwrap();
    let protected = Protected::new(&[root.join("boxmaker")]);
    let Decision::Allow(allowed) = decide(
        &args,
        &parsed.grants,
        Labels::default(),
        Timestamp::now(),
        &protected,
    ) else {
        panic!("not allowed")
    };
    let limits = brokerd::files::walk_limits(&allowed, &parsed.grants, &protected);
    // Through JSON, as the worker in the box receives them.
    let limits: tools::search::WalkLimits =
        serde_json::from_str(&serde_json::to_string(&limits).unwrap()).unwrap();
    let options = limits.options().unwrap();
    let deny: Vec<_> = parsed
        .grants
        .iter()
        .filter(|g| g.deny && g.tool == ToolName::Grep)
        .flat_map(|g| g.paths.iter())
        .collect();
    for relative in [
        "a.pem",
        "proj/deep/b.pem",
        "proj/b.pem/inside.txt",
        "proj/a.pem.txt",
        "proj/[keys]",
        "proj/[keys]/id",
        "proj/k",
        "proj/main.rs",
        "notes",
        "notes/today.md",
        "notes-private/x",
        "boxmaker/ledger",
        "src/lib.rs",
    ] {
        let path = root.join(relative);
        let covered = deny.iter().any(|rule| rule.covers(&path));
        let protected = path.starts_with(root.join("boxmaker"));
        assert_eq!(
            options.excludes(&path),
            covered || protected,
            "{relative}: covered by a deny grant {covered}, protected {protected}"
        );
    }
    // A deny grant of another tool is not the walker's business.
    assert!(!options.excludes(&root.join("proj/main.rs")));
}
