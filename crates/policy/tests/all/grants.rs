//! Grant files: the format, its defaults, and every problem with its file and line.

use std::fs;
use std::path::{Path, PathBuf};

use policy::args::ToolName;
use policy::grants::{Approval, OnUntrusted, Problem, load_dir, parse_file};
use proto::{Class, Timestamp};

fn home() -> PathBuf {
    PathBuf::from("/home/owner")
}

/// The problems of `text` as `line: message`.
fn problems(text: &str) -> Vec<String> {
    parse_file(text, Path::new("g.toml"), &home())
        .problems
        .iter()
        .map(|p| format!("{}: {}", p.line.unwrap_or(0), p.message))
        .collect()
}

fn one(text: &str) -> policy::grants::Grant {
    let parsed = parse_file(text, Path::new("g.toml"), &home());
    assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
    assert_eq!(parsed.grants.len(), 1);
    parsed.grants.into_iter().next().unwrap()
}

#[test]
fn a_minimal_grant_gets_the_documented_defaults() {
    let grant = one("[[grant]]\nid = \"notes\"\ntool = \"read_file\"\npaths = [\"~/notes\"]\n");
    assert_eq!(grant.id, "notes");
    assert_eq!(grant.tool, ToolName::ReadFile);
    assert_eq!(grant.class, Class::Private);
    assert!(grant.untrusted);
    assert_eq!(grant.approval, Approval::Auto);
    assert_eq!(grant.max_taint, None);
    assert_eq!(grant.on_untrusted, OnUntrusted::Ask);
    assert_eq!(grant.expires, None);
    assert!(!grant.deny);
    assert_eq!(grant.origin.line, 1);
    assert!(grant.paths[0].covers(Path::new("/home/owner/notes/a.md")));
}

#[test]
fn every_field_is_read() {
    let grant = one(r#"
[[grant]]
id = "web"
tool = "http_fetch"
hosts = ["docs.rs", "*.example.org", "api.test:8443"]
class = "public"
untrusted = false
approval = "ask"
max_taint = "private"
on_untrusted = "deny"
expires = 2026-12-31T00:00:00Z
deny = false
"#);
    assert_eq!(grant.origin.line, 2);
    assert_eq!(grant.class, Class::Public);
    assert!(!grant.untrusted);
    assert_eq!(grant.approval, Approval::Ask);
    assert_eq!(grant.max_taint, Some(Class::Private));
    assert_eq!(grant.on_untrusted, OnUntrusted::Deny);
    assert_eq!(grant.expires, Timestamp::parse("2026-12-31T00:00:00Z").ok());
    let hosts: Vec<(&str, bool, u16)> = grant
        .hosts
        .iter()
        .map(|h| (h.host.as_str(), h.wildcard, h.port))
        .collect();
    assert_eq!(
        hosts,
        [
            ("docs.rs", false, 443),
            ("example.org", true, 443),
            ("api.test", false, 8443)
        ]
    );
}

#[test]
fn expires_may_also_be_a_string() {
    let grant =
        one("[[grant]]\nid=\"a\"\ntool=\"consult\"\nexpires=\"2027-01-01T01:00:00+01:00\"\n");
    assert_eq!(grant.expires, Timestamp::parse("2027-01-01T00:00:00Z").ok());
}

#[test]
fn a_consult_grant_with_no_constraints_loads_and_is_untrusted() {
    let grant = one("[[grant]]\nid = \"ask\"\ntool = \"consult\"\n");
    assert_eq!(grant.tool, ToolName::Consult);
    assert!(grant.untrusted);
}

#[test]
fn consult_does_not_take_paths_or_hosts() {
    assert_eq!(
        problems("[[grant]]\nid=\"c\"\ntool=\"consult\"\npaths=[\"/a\"]\nhosts=[\"x.org\"]\n"),
        [
            "4: consult does not take paths",
            "5: consult does not take hosts"
        ]
    );
}

#[test]
fn each_tool_refuses_the_constraints_it_does_not_take() {
    assert_eq!(
        problems("[[grant]]\nid=\"f\"\ntool=\"http_fetch\"\nhosts=[\"a.org\"]\npaths=[\"/a\"]\n"),
        ["5: http_fetch does not take paths"]
    );
    assert_eq!(
        problems(
            "[[grant]]\nid=\"r\"\ntool=\"read_file\"\npaths=[\"/a\"]\nhosts=[\"a.org\"]\ncommands=[\"ls\"]\n"
        ),
        [
            "5: read_file does not take hosts",
            "6: read_file does not take commands"
        ]
    );
}

#[test]
fn an_allow_grant_without_its_constraint_covers_nothing_and_is_a_problem() {
    assert_eq!(
        problems("[[grant]]\nid=\"r\"\ntool=\"read_file\"\n"),
        ["1: read_file needs paths: the files and folders it may open"]
    );
    assert_eq!(
        problems("[[grant]]\nid=\"s\"\ntool=\"shell\"\n"),
        ["1: shell needs commands: the command prefixes it may run"]
    );
    assert_eq!(
        problems("[[grant]]\nid=\"h\"\ntool=\"http_fetch\"\n"),
        ["1: http_fetch needs hosts: the hosts it may fetch from"]
    );
    assert_eq!(
        problems("[[grant]]\nid=\"h\"\ntool=\"http_fetch\"\nhosts = []\n"),
        ["1: http_fetch needs hosts: the hosts it may fetch from"]
    );
}

#[test]
fn a_deny_grant_without_constraints_is_valid() {
    let grant = one("[[grant]]\nid=\"no-shell\"\ntool=\"shell\"\ndeny=true\n");
    assert!(grant.deny);
}

#[test]
fn an_unknown_tool_names_every_known_tool() {
    assert_eq!(
        problems("[[grant]]\nid=\"x\"\ntool=\"rm_rf\"\n"),
        [
            "3: unknown tool \"rm_rf\"; the known tools are read_file, write_file, edit_file, list_files, glob, grep, shell, bash_bg, http_fetch, web_search, git_status, git_diff, git_clone, consult, ask, recall, memory, ask_memory, delegate, and the groups read and write"
        ]
    );
}

#[test]
fn unknown_keys_missing_keys_and_wrong_types_are_named_with_their_lines() {
    let text = "[[grant]]\ntool = \"read_file\"\npaths = \"/a\"\nclass = \"top\"\nuntrusted = \"yes\"\nmaxtaint = \"secret\"\napproval = \"later\"\non_untrusted = 1\nexpires = \"soon\"\n";
    assert_eq!(
        problems(text),
        [
            "1: a grant needs an id",
            "3: paths must be a list of strings",
            "4: class is \"top\"; it must be one of public, private, secret",
            "5: untrusted must be true or false",
            "6: unknown key \"maxtaint\" in a grant; the keys are id, tool, paths, hosts, commands, class, untrusted, approval, max_taint, on_untrusted, expires, deny, tags, args, per_session",
            "7: approval is \"later\"; it must be one of auto, ask",
            "8: on_untrusted must be a string",
            "9: expires \"soon\" is not an RFC 3339 date and time with an offset, such as 2026-12-31T00:00:00Z",
        ]
    );
}

#[test]
fn bad_ids_paths_hosts_and_commands_are_named() {
    let text = r#"[[grant]]
id = "has space"
tool = "read_file"
paths = ["relative/notes", "/ok", "/bad[glob"]
[[grant]]
id = "h"
tool = "http_fetch"
hosts = ["exa mple.org", "a.org:0", "fine.org"]
[[grant]]
id = "s"
tool = "shell"
commands = ["git status", "", "'unclosed"]
"#;
    let found = problems(text);
    assert_eq!(found.len(), 7, "{found:#?}");
    assert!(found[0].starts_with("2: id \"has space\""), "{found:#?}");
    assert!(
        found[1].starts_with("4: path \"relative/notes\" must be absolute"),
        "{found:#?}"
    );
    assert!(
        found[2].starts_with("4: path \"/bad[glob\" is not a valid glob"),
        "{found:#?}"
    );
    assert!(
        found[3].starts_with("8: host \"exa mple.org\""),
        "{found:#?}"
    );
    assert!(
        found[4].starts_with("8: host \"a.org:0\" has an invalid port"),
        "{found:#?}"
    );
    assert!(
        found[5].starts_with("12: command prefix \"\": the prefix is empty"),
        "{found:#?}"
    );
    assert!(
        found[6].starts_with("12: command prefix \"'unclosed\""),
        "{found:#?}"
    );
}

#[test]
fn toml_that_does_not_parse_is_named_with_its_line() {
    let found = problems("[[grant]]\nid = \"a\"\ntool = read_file\n");
    assert_eq!(found.len(), 1);
    assert!(found[0].starts_with("3: not valid TOML"), "{found:?}");
}

#[test]
fn unknown_top_level_keys_and_a_grant_that_is_not_a_table_list_are_problems() {
    assert_eq!(
        problems("version = 2\n[grant]\nid=\"a\"\n"),
        [
            "1: unknown top-level key \"version\"; a grant file holds [[grant]] tables",
            "2: grant must be written as [[grant]] tables"
        ]
    );
}

#[test]
fn prefixes_that_run_other_programs_are_warnings_not_problems() {
    let parsed = parse_file(
        "[[grant]]\nid=\"s\"\ntool=\"shell\"\ncommands=[\"git status\", \"env\", \"xargs\"]\n",
        Path::new("g.toml"),
        &home(),
    );
    assert!(parsed.problems.is_empty());
    assert_eq!(parsed.grants.len(), 1);
    assert_eq!(parsed.warnings.len(), 2, "{:?}", parsed.warnings);
    assert!(parsed.warnings.iter().all(|w| w.line == Some(4)));
}

#[test]
fn ipv6_hosts_go_in_brackets_and_nothing_may_follow_them_but_a_port() {
    let grant =
        one("[[grant]]\nid=\"v6\"\ntool=\"http_fetch\"\nhosts=[\"[::1]\", \"[fd00::1]:8443\"]\n");
    let hosts: Vec<(&str, u16)> = grant
        .hosts
        .iter()
        .map(|h| (h.host.as_str(), h.port))
        .collect();
    assert_eq!(hosts, [("::1", 443), ("fd00::1", 8443)]);
    for bad in ["[::1]x:8443", "[docs.rs]", "::1:8443", "[::1"] {
        let text = format!("[[grant]]\nid=\"h\"\ntool=\"http_fetch\"\nhosts=[\"{bad}\"]\n");
        let found = problems(&text);
        assert_eq!(found.len(), 1, "{bad}: {found:?}");
        assert!(
            found[0].starts_with(&format!("4: host \"{bad}\" has ")),
            "{found:?}"
        );
    }
}

#[test]
fn a_grant_path_with_dot_dot_after_a_missing_folder_is_a_problem() {
    let found = problems("[[grant]]\nid=\"p\"\ntool=\"read_file\"\npaths=[\"/no/such/../etc\"]\n");
    assert_eq!(found.len(), 1);
    assert!(
        found[0].contains("after a folder that does not exist"),
        "{found:?}"
    );
}

#[test]
fn files_that_are_not_toml_are_named_in_a_warning() {
    let dir = testkit::temp_dir();
    fs::write(
        dir.path().join("a.toml"),
        "[[grant]]\nid=\"a\"\ntool=\"consult\"\n",
    )
    .unwrap();
    fs::write(
        dir.path().join("b.TOML"),
        "[[grant]]\nid=\"b\"\ntool=\"consult\"\n",
    )
    .unwrap();
    let set = load_dir(dir.path(), &home()).unwrap();
    assert_eq!(set.grants.len(), 1);
    assert_eq!(set.warnings.len(), 1);
    assert_eq!(set.warnings[0].file, dir.path().join("b.TOML"));
    assert!(set.warnings[0].message.contains("only files named *.toml"));
}

#[test]
fn a_folder_loads_its_toml_files_in_name_order() {
    let dir = testkit::temp_dir();
    fs::write(
        dir.path().join("b.toml"),
        "[[grant]]\nid=\"b\"\ntool=\"consult\"\n",
    )
    .unwrap();
    fs::write(
        dir.path().join("a.toml"),
        "[[grant]]\nid=\"a\"\ntool=\"consult\"\n",
    )
    .unwrap();
    fs::write(dir.path().join("notes.txt"), "not a grant file").unwrap();
    let set = load_dir(dir.path(), &home()).unwrap();
    let ids: Vec<&str> = set.grants.iter().map(|g| g.id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
}

#[test]
fn an_empty_or_missing_folder_holds_no_grants() {
    let dir = testkit::temp_dir();
    assert!(load_dir(dir.path(), &home()).unwrap().grants.is_empty());
    assert!(
        load_dir(&dir.path().join("missing"), &home())
            .unwrap()
            .grants
            .is_empty()
    );
}

#[test]
fn one_problem_anywhere_means_no_grants_at_all() {
    let dir = testkit::temp_dir();
    fs::write(
        dir.path().join("a.toml"),
        "[[grant]]\nid=\"a\"\ntool=\"consult\"\n",
    )
    .unwrap();
    fs::write(
        dir.path().join("b.toml"),
        "[[grant]]\nid=\"b\"\ntool=\"nope\"\n",
    )
    .unwrap();
    let problems: Vec<Problem> = load_dir(dir.path(), &home()).unwrap_err();
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].file, dir.path().join("b.toml"));
    assert_eq!(problems[0].line, Some(3));
    assert!(problems[0].to_string().starts_with(&format!(
        "{}:3: unknown tool",
        dir.path().join("b.toml").display()
    )));
}

#[test]
fn a_grant_id_used_twice_is_named_at_the_second_use() {
    let dir = testkit::temp_dir();
    fs::write(
        dir.path().join("a.toml"),
        "[[grant]]\nid=\"x\"\ntool=\"consult\"\n",
    )
    .unwrap();
    fs::write(
        dir.path().join("b.toml"),
        "\n[[grant]]\nid=\"x\"\ntool=\"consult\"\n",
    )
    .unwrap();
    let problems = load_dir(dir.path(), &home()).unwrap_err();
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].line, Some(2));
    assert!(
        problems[0].message.contains("already used at"),
        "{}",
        problems[0]
    );
}

#[test]
fn a_huge_file_is_refused_without_being_parsed() {
    let dir = testkit::temp_dir();
    let mut text = String::new();
    while text.len() <= policy::grants::MAX_FILE_BYTES as usize {
        text.push_str("# padding padding padding padding padding padding padding padding\n");
    }
    fs::write(dir.path().join("big.toml"), &text).unwrap();
    let problems = load_dir(dir.path(), &home()).unwrap_err();
    assert!(
        problems[0].message.contains("grant files are at most"),
        "{}",
        problems[0]
    );
}

#[test]
fn ten_thousand_grants_in_one_file_load() {
    let mut text = String::new();
    for i in 0..10_000 {
        text.push_str(&format!(
            "[[grant]]\nid=\"g{i}\"\ntool=\"read_file\"\npaths=[\"/data/{i}\"]\n"
        ));
    }
    let parsed = parse_file(&text, Path::new("g.toml"), &home());
    assert!(parsed.problems.is_empty());
    assert_eq!(parsed.grants.len(), 10_000);
    assert_eq!(parsed.grants[9_999].origin.line, 39_997);
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_loader_never_panics_on_any_text(text in "\\PC{0,200}") {
            let _ = parse_file(&text, Path::new("g.toml"), &home());
        }

        #[test]
        fn the_loader_never_panics_on_grant_shaped_text(
            key in "[a-z_]{1,12}", value in "[\"a-z0-9\\[\\]/*~.:, =]{0,30}", tool in "[a-z_]{0,12}"
        ) {
            let text = format!("[[grant]]\nid = \"g\"\ntool = \"{tool}\"\n{key} = {value}\n");
            let _ = parse_file(&text, Path::new("g.toml"), &home());
        }
    }
}

#[test]
fn an_allow_path_that_reads_as_a_glob_but_exists_literally_gets_a_warning_to_escape() {
    let dir = testkit::temp_dir();
    let mail = dir.path().join("[Gmail]");
    fs::create_dir_all(&mail).unwrap();
    let text = format!(
        "[[grant]]\nid=\"m\"\ntool=\"read_file\"\npaths=[\"{}\"]\n",
        mail.display()
    );
    let parsed = parse_file(&text, Path::new("g.toml"), &home());
    assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
    assert_eq!(parsed.warnings.len(), 1, "{:?}", parsed.warnings);
    assert!(parsed.warnings[0].message.contains("escape"));
    assert_eq!(parsed.warnings[0].line, Some(4));
    // Escaped, it names the folder and needs no warning; a deny never warns (it covers both).
    let escaped = text.replace("[Gmail]", "\\\\[Gmail\\\\]");
    assert!(
        parse_file(&escaped, Path::new("g.toml"), &home())
            .warnings
            .is_empty()
    );
    let deny = text.replace("tool=", "deny=true\ntool=");
    assert!(
        parse_file(&deny, Path::new("g.toml"), &home())
            .warnings
            .is_empty()
    );
}

#[test]
fn an_ask_grant_takes_no_paths_hosts_or_commands() {
    assert!(one("[[grant]]\nid=\"q\"\ntool=\"ask\"\n").paths.is_empty());
    assert_eq!(
        problems("[[grant]]\nid=\"q\"\ntool=\"ask\"\npaths = [\"/tmp\"]\nhosts = [\"a.org\"]\n"),
        ["4: ask does not take paths", "5: ask does not take hosts"]
    );
}

#[test]
fn tool_takes_a_list_and_the_groups_read_and_write() {
    let parsed = parse_file(
        "[[grant]]\nid = \"code\"\ntool = [\"read\", \"write\", \"read_file\"]\npaths = [\"~/src\"]\n",
        Path::new("g.toml"),
        &home(),
    );
    assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
    let tools: Vec<ToolName> = parsed.grants.iter().map(|g| g.tool).collect();
    assert_eq!(
        tools,
        [
            ToolName::ReadFile,
            ToolName::Grep,
            ToolName::Glob,
            ToolName::ListFiles,
            ToolName::WriteFile,
            ToolName::EditFile
        ]
    );
    assert!(parsed.grants.iter().all(|g| g.id == "code"));
}

#[test]
fn a_wrong_tool_list_is_named_with_its_line() {
    assert_eq!(
        problems("[[grant]]\nid=\"a\"\ntool=[\"read\",\n\"reed\"]\npaths=[\"/a\"]\n"),
        [
            "4: unknown tool \"reed\"; the known tools are read_file, write_file, edit_file, list_files, glob, grep, shell, bash_bg, http_fetch, web_search, git_status, git_diff, git_clone, consult, ask, recall, memory, ask_memory, delegate, and the groups read and write"
        ]
    );
    assert_eq!(
        problems("[[grant]]\nid=\"a\"\ntool=[]\npaths=[\"/a\"]\n"),
        ["3: tool names no tool"]
    );
    assert_eq!(
        problems("[[grant]]\nid=\"a\"\ntool=[\"grep\"]\n"),
        ["1: grep needs paths: the files and folders it may open"]
    );
}

#[test]
fn memory_grants_take_no_paths_hosts_or_commands_and_only_allow_grants_take_tags() {
    let grant =
        one("[[grant]]\nid = \"mem\"\ntool = \"recall\"\ntags = [\"proj\", \"proj\", \"home\"]\n");
    assert_eq!(grant.tool, ToolName::Recall);
    assert_eq!(grant.tags, ["proj", "home"]);
    assert!(
        one("[[grant]]\nid = \"all\"\ntool = \"memory\"\n")
            .tags
            .is_empty()
    );
    assert_eq!(
        problems(
            "[[grant]]\nid = \"m\"\ntool = [\"memory\", \"ask_memory\"]\npaths = [\"/tmp\"]\nhosts = [\"docs.rs\"]\ncommands = [\"ls\"]\n"
        ),
        [
            "4: memory does not take paths",
            "4: ask_memory does not take paths",
            "5: memory does not take hosts",
            "5: ask_memory does not take hosts",
            "6: memory does not take commands",
            "6: ask_memory does not take commands",
        ]
    );
    assert_eq!(
        problems(
            "[[grant]]\nid = \"r\"\ntool = \"read_file\"\npaths = [\"/tmp\"]\ntags = [\"x\"]\n"
        ),
        ["5: read_file does not take tags"]
    );
    assert_eq!(
        problems("[[grant]]\nid = \"d\"\ntool = \"recall\"\ndeny = true\ntags = [\"x\"]\n"),
        ["5: a deny grant forbids all of recall; tags only limit an allow grant"]
    );
    let bad = problems("[[grant]]\nid = \"b\"\ntool = \"recall\"\ntags = [\"two words\"]\n");
    assert_eq!(bad.len(), 1);
    assert!(
        bad[0].starts_with("4: tag \"two words\" must be"),
        "{bad:?}"
    );
}
