//! Grants of downstream MCP servers' tools: how they are read (every problem with its line)
//! and how a call of `server.tool` is decided against them and the pin of its definition.

use std::path::{Path, PathBuf};

use policy::decide::{AskReason, Labels};
use policy::downstream::{Pattern, Verdict, decide, visible};
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
    let Verdict::Allow(cleared) = decide(&set, "git", "status", A, labels, now) else {
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
            reason(&decide(&set, server, tool, hash, labels, now)),
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
        reason(&decide(&denied, "git", "status", A, Labels::default(), now)),
        DenyReason::DeniedByGrant
    );
    let expired = grants(&format!(
        "[[grant]]\nid = \"g\"\ntool = \"git.status\"\nexpires = 2020-01-01T00:00:00Z\n{pinned}\n"
    ));
    assert_eq!(
        reason(&decide(
            &expired,
            "git",
            "status",
            A,
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
        reason(&decide(&strict, "git", "status", A, private, now)),
        DenyReason::TaintTooHigh
    );
    let after = Labels {
        taint: Class::Public,
        untrusted: true,
    };
    assert_eq!(
        reason(&decide(&strict, "git", "status", A, after, now)),
        DenyReason::UntrustedInput
    );
    let default = grants(&format!(
        "[[grant]]\nid = \"g\"\ntool = \"git.status\"\n{pinned}\n"
    ));
    assert!(matches!(
        decide(&default, "git", "status", A, after, now),
        Verdict::Ask(_, AskReason::AfterUntrusted)
    ));
    let asks = grants(&format!(
        "[[grant]]\nid = \"g\"\ntool = \"git.status\"\napproval = \"ask\"\n{pinned}\n"
    ));
    assert!(matches!(
        decide(&asks, "git", "status", A, Labels::default(), now),
        Verdict::Ask(_, AskReason::GrantAsks)
    ));
}
