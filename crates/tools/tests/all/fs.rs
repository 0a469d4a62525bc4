//! `read_file` and `write_file` on real files.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use tools::fs::{
    FileError, GrantedDir, READ_CAP, ReadFileArgs, WriteFileArgs, read_file, write_file,
};

/// The folder that holds `path`, as the broker would hand it to the tool.
fn folder_of(path: &std::path::Path) -> GrantedDir {
    GrantedDir::for_target(path, path).unwrap()
}

fn read(path: &std::path::Path, cap: usize) -> Result<tools::fs::ReadFileResult, FileError> {
    read_file(
        &folder_of(path),
        &ReadFileArgs {
            path: path.display().to_string(),
            ..Default::default()
        },
        cap,
    )
}

fn write(path: &std::path::Path, content: &str) -> Result<tools::fs::WriteFileResult, FileError> {
    write_file(
        &folder_of(path),
        &WriteFileArgs {
            path: path.display().to_string(),
            content: content.into(),
        },
    )
}

#[test]
fn a_text_file_is_read_whole_with_its_size() {
    let dir = testkit::temp_dir();
    let path = dir.path().join("a.txt");
    fs::write(&path, "héllo\n").unwrap();
    let result = read(&path, READ_CAP).unwrap();
    assert_eq!(result.content, "héllo\n");
    assert_eq!(result.size, 7);
    assert!(!result.truncated);
}

#[test]
fn invalid_utf8_is_replaced_per_sequence() {
    let dir = testkit::temp_dir();
    let path = dir.path().join("bin");
    fs::write(&path, [b'a', 0xFF, 0xFE, b'b', 0xE2, 0x82, b'c']).unwrap();
    assert_eq!(
        read(&path, READ_CAP).unwrap().content,
        "a\u{FFFD}\u{FFFD}b\u{FFFD}c"
    );
}

#[test]
fn a_file_over_the_cap_is_cut_on_a_character_boundary_and_marked() {
    let dir = testkit::temp_dir();
    let path = dir.path().join("big");
    fs::write(&path, "ab日本").unwrap(); // 2 + 3 + 3 bytes
    let result = read(&path, 4).unwrap();
    assert_eq!(result.content, "ab");
    assert!(result.truncated);
    assert_eq!(result.size, 8);
    let exact = read(&path, 8).unwrap();
    assert!(!exact.truncated);
}

#[test]
fn the_default_cap_is_one_mebibyte() {
    let dir = testkit::temp_dir();
    let path = dir.path().join("big");
    fs::write(&path, vec![b'x'; READ_CAP + 10]).unwrap();
    let result = read(&path, READ_CAP).unwrap();
    assert_eq!(READ_CAP, 1_048_576);
    assert_eq!(result.content.len(), READ_CAP);
    assert!(result.truncated);
}

#[test]
fn directories_pipes_devices_and_missing_files_are_named_errors() {
    let dir = testkit::temp_dir();
    let fifo = dir.path().join("fifo");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let cases = [
        (dir.path().to_path_buf(), "a directory"),
        (fifo, "a pipe"),
        ("/dev/null".into(), "a device"),
        (dir.path().join("missing"), "does not exist"),
    ];
    for (path, words) in cases {
        let error = read(&path, READ_CAP).unwrap_err().to_string();
        assert!(
            error.contains(words) && error.contains(&path.display().to_string()),
            "{error}"
        );
    }
}

#[test]
fn a_relative_path_is_refused() {
    let dir = GrantedDir::open(std::path::Path::new("/tmp")).unwrap();
    let error = read_file(
        &dir,
        &ReadFileArgs {
            path: "notes.txt".into(),
            ..Default::default()
        },
        READ_CAP,
    )
    .unwrap_err();
    assert!(matches!(error, FileError::NotAbsolute(_)));
    let error = write_file(
        &dir,
        &WriteFileArgs {
            path: "../x".into(),
            content: String::new(),
        },
    );
    assert!(matches!(error, Err(FileError::NotAbsolute(_))));
    assert!(matches!(
        GrantedDir::open(std::path::Path::new("tmp")),
        Err(FileError::NotAbsolute(_))
    ));
}

#[test]
fn a_path_outside_the_granted_folder_is_refused() {
    let dir = testkit::temp_dir();
    let granted = GrantedDir::open(dir.path()).unwrap();
    let error = read_file(
        &granted,
        &ReadFileArgs {
            path: "/etc/hostname".into(),
            ..Default::default()
        },
        READ_CAP,
    )
    .unwrap_err();
    assert!(matches!(error, FileError::Outside { .. }), "{error}");
    let error = write_file(
        &granted,
        &WriteFileArgs {
            path: dir.path().display().to_string(),
            content: "x".into(),
        },
    )
    .unwrap_err();
    // The granted folder itself is no file to write, and the error says what it is.
    assert!(
        matches!(
            error,
            FileError::NotAFile {
                kind: "a directory",
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn a_folder_swapped_for_a_symbolic_link_after_the_decision_is_refused() {
    let dir = testkit::temp_dir();
    let root = dir.path().canonicalize().unwrap();
    let work = root.join("work");
    let elsewhere = root.join("elsewhere");
    fs::create_dir_all(work.join("sub")).unwrap();
    fs::create_dir_all(&elsewhere).unwrap();
    fs::write(elsewhere.join("secret"), "s").unwrap();
    // The decision checked work/sub/…; then sub is swapped for a link to elsewhere.
    let granted = GrantedDir::open(&work).unwrap();
    fs::remove_dir(work.join("sub")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, work.join("sub")).unwrap();
    let read_error = read_file(
        &granted,
        &ReadFileArgs {
            path: work.join("sub/secret").display().to_string(),
            ..Default::default()
        },
        READ_CAP,
    )
    .unwrap_err();
    assert!(matches!(read_error, FileError::Moved(_)), "{read_error}");
    let write_error = write_file(
        &granted,
        &WriteFileArgs {
            path: work.join("sub/planted").display().to_string(),
            content: "x".into(),
        },
    )
    .unwrap_err();
    assert!(matches!(write_error, FileError::Moved(_)), "{write_error}");
    assert!(!elsewhere.join("planted").exists());
    // The granted folder itself swapped before it is opened: refused too.
    let moved = root.join("moved");
    fs::rename(&work, &moved).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &work).unwrap();
    let error = GrantedDir::open(&work).unwrap_err();
    assert!(matches!(error, FileError::Moved(_)), "{error}");
}

#[test]
fn writing_creates_a_file_and_replacing_keeps_its_permissions() {
    let dir = testkit::temp_dir();
    let path = dir.path().join("script.sh");
    let created = write(&path, "one").unwrap();
    assert!(created.created && created.previous_size.is_none());
    fs::set_permissions(&path, fs::Permissions::from_mode(0o751)).unwrap();
    let replaced = write(&path, "two, longer").unwrap();
    assert!(!replaced.created);
    assert_eq!(replaced.previous_size, Some(3));
    assert_eq!(replaced.bytes, 11);
    assert_eq!(fs::read_to_string(&path).unwrap(), "two, longer");
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o7777,
        0o751
    );
}

#[test]
fn a_write_leaves_no_temporary_file_behind() {
    let dir = testkit::temp_dir();
    write(&dir.path().join("a"), "x").unwrap();
    write(&dir.path().join("a"), "y").unwrap();
    let names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["a"]);
}

#[test]
fn a_write_that_the_file_system_refuses_is_an_error_naming_the_path() {
    // /proc takes no new files, even from root.
    let error = write(std::path::Path::new("/proc/boxmaker-test"), "x").unwrap_err();
    assert!(error.to_string().contains("/proc/boxmaker-test"), "{error}");
    assert!(!std::path::Path::new("/proc/boxmaker-test").exists());
}

#[test]
fn a_symlink_a_directory_and_a_missing_folder_are_not_written() {
    let dir = testkit::temp_dir();
    let target = dir.path().join("target");
    fs::write(&target, "t").unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    assert!(matches!(write(&link, "x"), Err(FileError::Symlink(_))));
    assert!(matches!(
        write(dir.path(), "x"),
        Err(FileError::NotAFile { .. })
    ));
    let granted = GrantedDir::open(dir.path()).unwrap();
    let missing = WriteFileArgs {
        path: dir.path().join("no/such/file").display().to_string(),
        content: "x".into(),
    };
    assert!(matches!(
        write_file(&granted, &missing),
        Err(FileError::NoFolder(_))
    ));
    assert_eq!(fs::read_to_string(&target).unwrap(), "t");
}

#[test]
fn unknown_argument_fields_are_refused() {
    let error = |result: Result<(), serde_json::Error>| result.err().map(|e| e.to_string());
    let read =
        error(serde_json::from_str::<ReadFileArgs>(r#"{"path":"/a","max_bytes":5}"#).map(drop));
    assert!(
        read.as_ref()
            .is_some_and(|e| e.starts_with("unknown field `max_bytes`")),
        "{read:?}"
    );
    // Not an unknown field but a missing one: refused too, and for that reason.
    let missing = error(serde_json::from_str::<WriteFileArgs>(r#"{"path":"/a"}"#).map(drop));
    assert!(
        missing
            .as_ref()
            .is_some_and(|e| e.starts_with("missing field `content`")),
        "{missing:?}"
    );
    let write = error(
        serde_json::from_str::<WriteFileArgs>(r#"{"path":"/a","content":"","mode":1}"#).map(drop),
    );
    assert!(
        write
            .as_ref()
            .is_some_and(|e| e.starts_with("unknown field `mode`")),
        "{write:?}"
    );
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn what_is_written_is_read_back(content in "\\PC{0,200}") {
            let dir = testkit::temp_dir();
            let path = dir.path().join("f");
            write(&path, &content).unwrap();
            prop_assert_eq!(read(&path, READ_CAP).unwrap().content, content);
        }

        #[test]
        fn any_cap_gives_a_prefix_of_valid_text(content in "\\PC{0,40}", cap in 0usize..64) {
            let dir = testkit::temp_dir();
            let path = dir.path().join("f");
            fs::write(&path, &content).unwrap();
            let result = read(&path, cap).unwrap();
            prop_assert!(content.starts_with(&result.content));
            prop_assert!(result.content.len() <= cap);
            prop_assert_eq!(result.truncated, content.len() > cap);
        }
    }
}

#[test]
fn a_write_reports_a_unified_diff_of_what_changed() {
    let dir = testkit::temp_dir();
    let path = dir.path().join("a.txt");
    let name = path.display().to_string();
    let created = write(&path, "one\ntwo\n").unwrap();
    assert_eq!(
        created.diff,
        format!("--- /dev/null\n+++ {name}\n@@ -0,0 +1,2 @@\n+one\n+two\n")
    );
    let changed = write(&path, "one\n2\n").unwrap();
    assert_eq!(
        changed.diff,
        format!("--- {name}\n+++ {name}\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n")
    );
    assert_eq!(
        write(&path, "one\n2\n").unwrap().diff,
        "",
        "no change, no diff"
    );
}

#[test]
fn a_write_over_a_binary_or_huge_file_gives_a_summary_instead_of_a_diff() {
    let dir = testkit::temp_dir();
    let binary = dir.path().join("bin");
    fs::write(&binary, [0xFF, 0xFE, 0x00]).unwrap();
    let result = write(&binary, "text").unwrap();
    assert!(
        result.diff.contains("is not UTF-8 text; not diffed"),
        "{}",
        result.diff
    );
    let big = dir.path().join("big");
    fs::write(&big, vec![b'x'; tools::fs::DIFF_LIMIT + 1]).unwrap();
    let result = write(&big, "small").unwrap();
    assert!(
        result.diff.contains("too large to diff, now 5 bytes"),
        "{}",
        result.diff
    );
}
