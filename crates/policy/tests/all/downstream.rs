//! Grants of downstream MCP servers' tools: how they are read (every problem with its line)
//! and how a call of `server.tool` is decided against them and the pin of its definition.

use std::path::{Path, PathBuf};

use policy::decide::{AskReason, Labels};
use policy::downstream::{Listed, Pattern, Verdict, decide, visible};
use policy::grants::{ParsedFile, parse_file};
use proto::{Class, DenyReason, Timestamp};

const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

fn parse(text: &str) -> ParsedFile {
    parse_file(text, Path::new("g.toml"), Path::new("/home/owner"))
}

fn problems(text: &str) -> Vec<(Option<usize>, String)> {
    parse(text)
        .problems
        .into_iter()
        .map(|p| (p.line, p.message))
        .collect()
}

#[test]
fn tool_grants_and_server_grants_are_read_with_their_pins() {
    let parsed = parse(&format!(
        r#"
[[grant]]
id = "git-box"
server = "git"
paths = ["~/src"]
hosts = ["github.com"]

[[grant]]
id = "git-read"
tool = ["git.git_status", "git.*"]
class = "secret"
approval = "ask"
pins = {{ "git.git_status" = "{A}", "git.git_log" = "{B}" }}
"#
    ));
    assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
    assert!(parsed.grants.is_empty());
    let downstream = parsed.downstream;
    assert_eq!(downstream.servers.len(), 1);
    let (paths, hosts) = downstream.box_of("git");
    assert_eq!(paths, vec![PathBuf::from("/home/owner/src")]);
    assert_eq!(hosts[0].host, "github.com");
    assert_eq!(downstream.tools.len(), 2);
    assert_eq!(
        downstream.tools[0].pattern,
        Pattern::Tool("git_status".into())
    );
    assert_eq!(downstream.tools[1].pattern, Pattern::Every);
    assert_eq!(downstream.tools[1].pin("git_log"), Some(B));
    assert_eq!(downstream.tools[1].class, Class::Secret);
    assert_eq!(downstream.tools[1].origin.line, 8);
}

#[test]
fn every_mistake_is_named_with_its_line() {
    let unnamed_pin = format!("id = \"a\"\ntool = \"git.x\"\npins = {{ \"git.y\" = \"{A}\" }}");
    let cases: [(&str, &str); 9] = [
        (
            "id = \"a\"\ntool = [\"git.x\", \"read_file\"]",
            "is one of boxmaker's tools",
        ),
        ("id = \"a\"\ntool = \"Git.x\"", "is not a server name"),
        ("id = \"a\"\ntool = \"git.\"", "names no tool of server git"),
        (&unnamed_pin, "a tool this grant does not name"),
        (
            "id = \"a\"\ntool = \"git.x\"\npins = { \"git.x\" = \"abc\" }",
            "64 lower-case hex digits",
        ),
        (
            "id = \"a\"\ntool = \"git.x\"\npaths = [\"/tmp\"]",
            "unknown key \"paths\" in a grant of downstream tools",
        ),
        (
            "id = \"a\"\nserver = \"git\"\ntool = \"git.x\"",
            "either server",
        ),
        (
            "id = \"a\"\nserver = \"git\"\ncommands = [\"ls\"]",
            "unknown key \"commands\"",
        ),
        ("server = \"git\"", "a grant needs an id"),
    ];
    for (body, says) in cases {
        let found = problems(&format!("\n[[grant]]\n{body}\n"));
        assert!(
            found
                .iter()
                .any(|(line, m)| m.contains(says) && line.is_some()),
            "{body}: {found:?}"
        );
    }
    // One id for a grant of boxmaker's tools and one of a downstream server's: a problem.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.toml"),
        "[[grant]]\nid = \"x\"\ntool = \"git.*\"\n\n[[grant]]\nid = \"x\"\ntool = \"consult\"\n",
    )
    .unwrap();
    let problems = policy::grants::load_dir(dir.path(), Path::new("/home/owner")).unwrap_err();
    assert!(problems[0].message.contains("already used"), "{problems:?}");
}

fn grants(text: &str) -> policy::downstream::Downstream {
    let parsed = parse(text);
    assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
    parsed.downstream
}

fn reason(verdict: &Verdict) -> DenyReason {
    match verdict {
        Verdict::Deny(denied) => denied.reason,
        other => panic!("not a denial: {other:?}"),
    }
}

#[test]
fn a_call_is_covered_only_while_its_definition_hashes_to_the_pin() {
    let now = Timestamp::now();
    let set = grants(&format!(
        "[[grant]]\nid = \"g\"\ntool = \"git.*\"\non_untrusted = \"allow\"\npins = {{ \"git.status\" = \"{A}\" }}\n"
    ));
    let labels = Labels::default();
    let Verdict::Allow(cleared) = decide(&set, Listed::new("git", "status", A), labels, now) else {
        panic!("not allowed")
    };
    assert_eq!(
        (cleared.grant.as_str(), cleared.class, cleared.untrusted),
        ("g", Class::Private, true)
    );
    // Changed since pinned, never pinned, never named: no grant covers it, and it is hidden.
    for (tool, hash) in [("status", B), ("log", A), ("status", A)] {
        let server = if tool == "status" && hash == A {
            "other"
        } else {
            "git"
        };
        assert_eq!(
            reason(&decide(&set, Listed::new(server, tool, hash), labels, now)),
            DenyReason::NoGrant
        );
        assert!(!visible(&set, server, tool, hash, now));
    }
    assert!(visible(&set, "git", "status", A, now));
}

#[test]
fn deny_expiry_taint_untrusted_input_and_approval_decide_as_for_boxmakers_tools() {
    let now = Timestamp::now();
    let pinned = format!("pins = {{ \"git.status\" = \"{A}\" }}");
    let denied = grants(&format!(
        "[[grant]]\nid = \"g\"\ntool = \"git.*\"\n{pinned}\n\n[[grant]]\nid = \"d\"\ntool = \"git.status\"\ndeny = true\n"
    ));
    assert_eq!(
        reason(&decide(
            &denied,
            Listed::new("git", "status", A),
            Labels::default(),
            now
        )),
        DenyReason::DeniedByGrant
    );
    let expired = grants(&format!(
        "[[grant]]\nid = \"g\"\ntool = \"git.status\"\nexpires = 2020-01-01T00:00:00Z\n{pinned}\n"
    ));
    assert_eq!(
        reason(&decide(
            &expired,
            Listed::new("git", "status", A),
            Labels::default(),
            now
        )),
        DenyReason::GrantExpired
    );
    let strict = grants(&format!(
        "[[grant]]\nid = \"g\"\ntool = \"git.status\"\nmax_taint = \"public\"\non_untrusted = \"deny\"\n{pinned}\n"
    ));
    let private = Labels {
        taint: Class::Private,
        untrusted: false,
    };
    assert_eq!(
        reason(&decide(
            &strict,
            Listed::new("git", "status", A),
            private,
            now
        )),
        DenyReason::TaintTooHigh
    );
    let after = Labels {
        taint: Class::Public,
        untrusted: true,
    };
    assert_eq!(
        reason(&decide(
            &strict,
            Listed::new("git", "status", A),
            after,
            now
        )),
        DenyReason::UntrustedInput
    );
    let default = grants(&format!(
        "[[grant]]\nid = \"g\"\ntool = \"git.status\"\n{pinned}\n"
    ));
    assert!(matches!(
        decide(&default, Listed::new("git", "status", A), after, now),
        Verdict::Ask(_, AskReason::AfterUntrusted)
    ));
    let asks = grants(&format!(
        "[[grant]]\nid = \"g\"\ntool = \"git.status\"\napproval = \"ask\"\n{pinned}\n"
    ));
    assert!(matches!(
        decide(
            &asks,
            Listed::new("git", "status", A),
            Labels::default(),
            now
        ),
        Verdict::Ask(_, AskReason::GrantAsks)
    ));
}

#[test]
fn a_tool_its_grant_declares_read_only_runs_after_untrusted_input_as_a_read() {
    let now = Timestamp::now();
    let after = Labels {
        taint: Class::Public,
        untrusted: true,
    };
    let pinned = format!("pins = {{ \"git.status\" = \"{A}\" }}");
    let with = |read_only: &str| {
        grants(&format!(
            "[[grant]]\nid = \"g\"\ntool = \"git.status\"\non_untrusted = \"deny\"\n{read_only}\n{pinned}\n"
        ))
    };
    let listed = Listed::new("git", "status", A);
    let hinted = Listed {
        read_only_hint: true,
        ..listed
    };
    // (grant's read_only, the server's hint, whether the call is a read)
    let cases = [
        ("", false, false),
        ("", true, false),
        ("read_only = false", true, false),
        ("read_only = true", false, true),
        ("read_only = \"hint\"", true, true),
        ("read_only = \"hint\"", false, false),
    ];
    for (read_only, hint, reads) in cases {
        let set = with(read_only);
        let call = if hint { hinted } else { listed };
        let verdict = decide(&set, call, after, now);
        if reads {
            assert!(
                matches!(verdict, Verdict::Allow(_)),
                "{read_only} {hint}: {verdict:?}"
            );
        } else {
            assert_eq!(reason(&verdict), DenyReason::UntrustedInput, "{read_only}");
        }
        // Before untrusted input, a read and a side effect are decided alike.
        assert!(matches!(
            decide(&set, call, Labels::default(), now),
            Verdict::Allow(_)
        ));
    }
    // A read stays under the rest of its grant: approval and taint still apply.
    let asks = grants(&format!(
        "[[grant]]\nid = \"g\"\ntool = \"git.status\"\nread_only = true\napproval = \"ask\"\n{pinned}\n"
    ));
    assert!(matches!(
        decide(&asks, listed, after, now),
        Verdict::Ask(_, AskReason::GrantAsks)
    ));
    // Of two live covering grants, the one that does not call the tool a read decides.
    let both = grants(&format!(
        "[[grant]]\nid = \"r\"\ntool = \"git.status\"\nread_only = true\n{pinned}\n\n[[grant]]\nid = \"w\"\ntool = \"git.*\"\n{pinned}\n"
    ));
    assert!(matches!(
        decide(&both, listed, after, now),
        Verdict::Ask(_, AskReason::AfterUntrusted)
    ));
}

#[test]
fn read_only_is_true_false_or_hint_and_anything_else_is_named_with_its_line() {
    use policy::downstream::ReadOnly;
    for (written, read) in [
        ("true", ReadOnly::Declared),
        ("false", ReadOnly::No),
        ("\"hint\"", ReadOnly::Hint),
    ] {
        let set = grants(&format!(
            "[[grant]]\nid = \"g\"\ntool = \"git.*\"\nread_only = {written}\n"
        ));
        assert_eq!(set.tools[0].read_only, read, "{written}");
    }
    assert_eq!(
        grants("[[grant]]\nid = \"g\"\ntool = \"git.*\"\n").tools[0].read_only,
        ReadOnly::No
    );
    for bad in ["\"yes\"", "1", "\"readOnlyHint\""] {
        let found = problems(&format!(
            "[[grant]]\nid = \"g\"\ntool = \"git.*\"\nread_only = {bad}\n"
        ));
        assert!(
            found
                .iter()
                .any(|(line, m)| *line == Some(4) && m.contains("read_only must be true")),
            "{bad}: {found:?}"
        );
    }
    // A grant of a server's box has no read_only: its box is what it is.
    let found = problems("[[grant]]\nid = \"b\"\nserver = \"git\"\nread_only = true\n");
    assert!(
        found
            .iter()
            .any(|(_, m)| m.contains("unknown key \"read_only\"")),
        "{found:?}"
    );
}
