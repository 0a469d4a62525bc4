//! `edit_file` and `read_file` by lines on real files, and their invariants under proptest.

use std::fs;
use std::path::Path;

use proptest::prelude::*;
use tools::fs::{
    Edit, EditFileArgs, FileError, GrantedDir, READ_CAP, ReadFileArgs, apply_edits, edit_file,
    read_file,
};

fn edit(path: &Path, edits: Vec<Edit>) -> Result<tools::fs::EditFileResult, FileError> {
    edit_file(
        &GrantedDir::for_target(path, path).unwrap(),
        &EditFileArgs {
            path: path.display().to_string(),
            edits,
        },
    )
}

fn one(old: &str, new: &str) -> Edit {
    Edit {
        old_str: old.into(),
        new_str: new.into(),
        replace_all: false,
    }
}

#[test]
fn an_edit_replaces_its_one_occurrence_and_keeps_every_other_byte() {
    let dir = testkit::temp_dir();
    let path = dir.path().join("a.rs");
    let original: &[u8] = b"fn a() {\r\n    todo!()\r\n}\xff\xfe tail without newline";
    fs::write(&path, original).unwrap();
    let result = edit(&path, vec![one("todo!()", "1")]).unwrap();
    assert_eq!(
        fs::read(&path).unwrap(),
        b"fn a() {\r\n    1\r\n}\xff\xfe tail without newline"
    );
    assert_eq!(result.replacements, 1);
    assert_eq!(result.original_bytes, original.len() as u64);
    assert!(result.diff.contains("-    todo!()"), "{}", result.diff);
    assert!(result.diff.contains("+    1"), "{}", result.diff);
}

#[test]
fn edits_apply_in_order_each_on_what_the_previous_left() {
    let dir = testkit::temp_dir();
    let path = dir.path().join("a.txt");
    fs::write(&path, "one two\n").unwrap();
    edit(&path, vec![one("one", "three"), one("three two", "done")]).unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), "done\n");
}

#[test]
fn an_empty_old_str_creates_a_missing_file_and_appends_to_an_existing_one() {
    let dir = testkit::temp_dir();
    let path = dir.path().join("new.txt");
    let created = edit(&path, vec![one("", "hello\n")]).unwrap();
    assert!(created.created);
    assert!(
        created.diff.starts_with("--- /dev/null"),
        "{}",
        created.diff
    );
    edit(&path, vec![one("", "world\n")]).unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), "hello\nworld\n");
}

#[test]
fn several_occurrences_without_replace_all_are_an_error_and_nothing_is_written() {
    let dir = testkit::temp_dir();
    let path = dir.path().join("a.txt");
    fs::write(&path, "x x x\n").unwrap();
    let error = edit(&path, vec![one("x x x", "y"), one("x", "z")]).unwrap_err();
    // The first edit applies in memory; the second finds no x in the "y\n" it left: nothing
    // is written.
    assert!(
        matches!(error, FileError::EditNotFound { edit: 2, .. }),
        "{error}"
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), "x x x\n");
    let error = edit(&path, vec![one("x", "z")]).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "edit 1: old_str found 3 times in {}; add surrounding lines to make it unique, or set replace_all",
            path.display()
        )
    );
    let all = Edit {
        replace_all: true,
        ..one("x", "z")
    };
    assert_eq!(edit(&path, vec![all]).unwrap().replacements, 3);
    assert_eq!(fs::read_to_string(&path).unwrap(), "z z z\n");
}

#[test]
fn a_missing_file_with_a_non_empty_old_str_is_not_found() {
    let dir = testkit::temp_dir();
    let path = dir.path().join("absent.txt");
    let error = edit(&path, vec![one("a", "b")]).unwrap_err();
    assert!(matches!(error, FileError::NotFound(_)), "{error}");
    assert!(!path.exists());
}

const SOURCE: &str = "fn main() {\n    let total = compute(1, 2);\n    println!(\"{total}\");\n}\n";

#[test]
fn a_one_character_typo_is_answered_with_the_closest_line_and_its_number() {
    let dir = testkit::temp_dir();
    let path = dir.path().join("main.rs");
    fs::write(&path, SOURCE).unwrap();
    let error = edit(&path, vec![one("let totl = compute(1, 2);", "")]).unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("is at line 2:\n    let total = compute(1, 2);"),
        "{text}"
    );
}

#[test]
fn other_indentation_is_answered_with_the_lines_as_they_are() {
    let dir = testkit::temp_dir();
    let path = dir.path().join("main.rs");
    fs::write(&path, SOURCE).unwrap();
    let old = "\tlet total = compute(1, 2);\n\tprintln!(\"{total}\");";
    let text = edit(&path, vec![one(old, "")]).unwrap_err().to_string();
    assert!(
        text.contains("(similarity 1.00) is at line 2:\n    let total = compute(1, 2);\n    println!(\"{total}\");"),
        "{text}"
    );
}

#[test]
fn crlf_lines_are_found_as_the_closest_text_of_an_lf_old_str() {
    let dir = testkit::temp_dir();
    let path = dir.path().join("win.txt");
    fs::write(&path, "alpha\r\nbeta\r\ngamma\r\n").unwrap();
    let text = edit(&path, vec![one("beta\ngamma", "")])
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("(similarity 1.00) is at line 2:\nbeta\ngamma"),
        "{text}"
    );
    assert_eq!(fs::read(&path).unwrap(), b"alpha\r\nbeta\r\ngamma\r\n");
}

#[test]
fn nothing_similar_gives_no_hint() {
    let text = tools::fs::closest_hint(SOURCE.as_bytes(), "completely unrelated words here");
    assert_eq!(text, "");
}

fn read_lines(
    path: &Path,
    offset: Option<u64>,
    limit: Option<u64>,
    cap: usize,
) -> tools::fs::ReadFileResult {
    read_file(
        &GrantedDir::for_target(path, path).unwrap(),
        &ReadFileArgs {
            path: path.display().to_string(),
            offset,
            limit,
        },
        cap,
    )
    .unwrap()
}

#[test]
fn read_file_reads_a_window_of_lines_and_counts_them_all() {
    let dir = testkit::temp_dir();
    let path = dir.path().join("lines.txt");
    fs::write(&path, "1\n2\n3\n4\n5").unwrap();
    let result = read_lines(&path, Some(2), Some(2), READ_CAP);
    assert_eq!(result.content, "2\n3\n");
    assert_eq!(result.total_lines, 5);
    assert_eq!(result.start_line, Some(2));
    assert_eq!(read_lines(&path, Some(5), None, READ_CAP).content, "5");
    assert_eq!(read_lines(&path, Some(9), None, READ_CAP).content, "");
    assert_eq!(read_lines(&path, None, None, READ_CAP).start_line, None);
}

#[test]
fn read_file_says_which_lines_came_back_and_the_offset_that_reads_on() {
    let dir = testkit::temp_dir();
    let path = dir.path().join("nineteen.txt");
    let text: String = (1..=19).map(|n| format!("line {n}\n")).collect();
    fs::write(&path, &text).unwrap();
    let head = read_lines(&path, None, Some(5), READ_CAP);
    assert_eq!(head.lines().as_deref(), Some("1-5 of 19"));
    assert_eq!(head.next_offset(), Some(6));
    let middle = read_lines(&path, Some(6), Some(5), READ_CAP);
    assert_eq!(middle.lines().as_deref(), Some("6-10 of 19"));
    assert_eq!(middle.next_offset(), Some(11));
    // At the end of the file nothing follows, whether the window reached it or went past it.
    for (offset, limit) in [(Some(15), Some(5)), (Some(15), None), (None, None)] {
        let tail = read_lines(&path, offset, limit, READ_CAP);
        assert_eq!(tail.next_offset(), None, "{offset:?} {limit:?}");
        assert!(
            tail.lines().unwrap().ends_with("-19 of 19"),
            "{:?}",
            tail.lines()
        );
    }
    let past = read_lines(&path, Some(30), None, READ_CAP);
    assert_eq!(past.lines().as_deref(), Some("none of 19"));
    assert_eq!(past.next_offset(), None);
    let nothing = read_lines(&path, None, Some(0), READ_CAP);
    assert_eq!(nothing.lines().as_deref(), Some("none of 19"));
    assert_eq!(nothing.next_offset(), Some(1));
    // The cap cuts line 3 ("line 3\n" ends at byte 21): lines 1-2 came whole, read on from 3.
    let cut = read_lines(&path, None, None, 18);
    assert!(cut.truncated);
    assert_eq!(cut.lines().as_deref(), Some("1-2 of 19"));
    assert_eq!(cut.next_offset(), Some(3));
    // A first line longer than the cap: part of it came back, and the next line follows.
    let part = read_lines(&path, Some(4), None, 3);
    assert_eq!(part.lines().as_deref(), Some("part of line 4 of 19"));
    assert_eq!(part.next_offset(), Some(5));
}

#[test]
fn a_binary_file_is_named_with_its_size_not_shown() {
    let dir = testkit::temp_dir();
    let path = dir.path().join("a.bin");
    fs::write(&path, b"ELF\0\x01\x02").unwrap();
    let result = read_lines(&path, None, None, READ_CAP);
    assert!(result.binary);
    assert_eq!(
        result.content,
        format!("{} is a binary file of 6 bytes; not shown", path.display())
    );
}

proptest! {
    #[test]
    fn reading_by_lines_matches_a_reference_split(
        lines in proptest::collection::vec("[a-zé\r]{0,6}", 0..20),
        end_newline in any::<bool>(),
        offset in 1u64..25,
        limit in 0u64..25,
    ) {
        let mut text = lines.join("\n");
        if end_newline && !text.is_empty() { text.push('\n'); }
        let dir = testkit::temp_dir();
        let path = dir.path().join("f");
        fs::write(&path, &text).unwrap();
        let result = read_lines(&path, Some(offset), Some(limit), READ_CAP);
        let reference: Vec<&str> = text.split_inclusive('\n').collect();
        let want: String = reference.iter().skip(offset as usize - 1).take(limit as usize).copied().collect();
        prop_assert_eq!(&result.content, &want);
        let total = reference.len() as u64;
        prop_assert_eq!(result.total_lines, total);
        let end = (offset + limit - 1).min(total);
        let lines = if limit > 0 && offset <= total {
            format!("{offset}-{end} of {total}")
        } else {
            format!("none of {total}")
        };
        prop_assert_eq!(result.lines(), Some(lines));
        let next = if limit > 0 { end.max(offset - 1) + 1 } else { offset };
        prop_assert_eq!(result.next_offset(), (next <= total).then_some(next));
    }

    #[test]
    fn a_cap_cuts_on_a_character_boundary(text in "[aé日😀\n]{0,40}", cap in 0usize..50) {
        let dir = testkit::temp_dir();
        let path = dir.path().join("f");
        fs::write(&path, &text).unwrap();
        let result = read_lines(&path, Some(1), None, cap);
        prop_assert!(text.starts_with(&result.content));
        prop_assert!(result.content.len() <= cap);
        prop_assert_eq!(result.truncated, text.len() > cap);
        // The lines named whole are whole in the content, and reading on starts after them.
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let whole = lines
            .iter()
            .scan(0usize, |used, line| {
                *used += line.len();
                Some(*used)
            })
            .take_while(|&used| used <= result.content.len())
            .count() as u64;
        prop_assert_eq!(result.end_line, (whole > 0).then_some(whole));
        let next = if result.truncated && whole == 0 { 2 } else { whole + 1 };
        prop_assert_eq!(result.next_offset(), (next <= lines.len() as u64).then_some(next));
    }

    #[test]
    fn replace_all_replaces_every_occurrence_and_keeps_the_bytes_between(
        parts in proptest::collection::vec(proptest::collection::vec(any::<u8>().prop_filter("no marker", |b| *b != b'#'), 0..8), 1..8),
        new in "[a-z#]{0,4}",
    ) {
        let content = parts.join(&b"##"[..]);
        let edits = [Edit { old_str: "##".into(), new_str: new.clone(), replace_all: true }];
        let result = apply_edits(&content, &edits, "/f", false);
        if parts.len() == 1 {
            let not_found = matches!(result, Err(FileError::EditNotFound { .. }));
            prop_assert!(not_found);
        } else {
            let (edited, count) = result.unwrap();
            prop_assert_eq!(count, parts.len() - 1);
            prop_assert_eq!(edited, parts.join(new.as_bytes()));
        }
    }

    #[test]
    fn a_failing_edit_leaves_the_file_as_it_was(text in "[ab\n]{0,30}", good in "[ab]{1,3}") {
        let dir = testkit::temp_dir();
        let path = dir.path().join("f");
        fs::write(&path, &text).unwrap();
        let edits = vec![one(&good, "c"), one("zzz", "y")];
        prop_assert!(edit(&path, edits).is_err());
        prop_assert_eq!(fs::read_to_string(&path).unwrap(), text);
    }
}
