//! `decide` against 10, 1,000 and 10,000 grants: a read that the last grant covers, and a
//! read that no grant covers (every grant is tried); and the same two through the grant index
//! (`decide_indexed`, `…_indexed` rows), which looks only at the grants of the call's tool
//! and folders. The reference in the same run is the
//! path resolution alone (`resolve_args`), the file-system part every decision pays.
//!
//! The provenance check (`provenance/…`) of a call against a session that has seen 10,000
//! values in 100 untrusted results: a mail (recipient, amount, IBAN, subject, a body of 60
//! words), a `shell` command that carries words of those results (`20` and the `1` of `2>&1`
//! occur in them: read quickly, then by the parser) and a clean one (read quickly only), beside
//! the shell parser's part alone (`shell_script_words_only`); and indexing into an empty index
//! one result of 100 values, an untrusted mail of 4 KiB and a web page of 64 KiB.
//!
//! Rules on arguments (`rules/…`): a downstream payment decided after untrusted input against
//! that index under a grant with an allow list, a cap and a count, against the same call under
//! the same grant without them (the floor, in the same run).
#![allow(clippy::unwrap_used, clippy::expect_used)]
// criterion's macros make public functions without docs.
#![allow(missing_docs)]

use std::path::Path;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use policy::args::{ToolName, parse};
use policy::decide::{GrantIndex, Labels, Protected, Seen, decide, decide_indexed, resolve_args};
use policy::grants::parse_file;
use policy::provenance::{Caps, Source, Value, ValueIndex, ValueKind};
use policy::shell::PathEnforcement;
use proto::{Class, Timestamp};

fn grants_text(n: usize) -> String {
    let mut text = String::new();
    for i in 0..n {
        text.push_str(&format!(
            "[[grant]]\nid=\"g{i}\"\ntool=\"read_file\"\npaths=[\"/srv/data/{i}\"]\n"
        ));
    }
    text
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("decide");
    let protected = Protected::new(&[Path::new("/root/.config/boxmaker").to_path_buf()]);
    let now = Timestamp::now();
    for n in [10usize, 1_000, 10_000] {
        let parsed = parse_file(&grants_text(n), Path::new("g.toml"), Path::new("/root"));
        let grants = parsed.grants;
        let last = format!(r#"{{"path":"/srv/data/{}/file.txt"}}"#, n - 1);
        let covered = match parse(ToolName::ReadFile, &last) {
            Ok(args) => args,
            Err(e) => panic!("bench args: {e}"),
        };
        let uncovered = match parse(ToolName::ReadFile, r#"{"path":"/srv/other/file.txt"}"#) {
            Ok(args) => args,
            Err(e) => panic!("bench args: {e}"),
        };
        group.bench_with_input(BenchmarkId::new("covered_by_last", n), &n, |b, _| {
            b.iter(|| decide(&covered, &grants, Labels::default(), now, &protected))
        });
        group.bench_with_input(BenchmarkId::new("no_grant", n), &n, |b, _| {
            b.iter(|| decide(&uncovered, &grants, Labels::default(), now, &protected))
        });
        let index = GrantIndex::new(&grants);
        let indexed = |args| {
            decide_indexed(
                args,
                (&grants, &index),
                Seen::labels_only(Labels::default()),
                now,
                &protected,
                PathEnforcement::Unenforced,
            )
        };
        assert_eq!(
            indexed(&covered),
            decide(&covered, &grants, Labels::default(), now, &protected)
        );
        group.bench_with_input(
            BenchmarkId::new("covered_by_last_indexed", n),
            &n,
            |b, _| b.iter(|| indexed(&covered)),
        );
        group.bench_with_input(BenchmarkId::new("no_grant_indexed", n), &n, |b, _| {
            b.iter(|| indexed(&uncovered))
        });
    }
    let args = match parse(ToolName::ReadFile, r#"{"path":"/srv/data/1/file.txt"}"#) {
        Ok(args) => args,
        Err(e) => panic!("bench args: {e}"),
    };
    group.bench_function("resolve_args_only", |b| b.iter(|| resolve_args(&args)));
    group.finish();
}

/// One untrusted result of 100 values: addresses, amounts, codes and words, all new.
fn result_text(n: usize) -> String {
    let mut text = String::new();
    for i in 0..25 {
        let v = n * 25 + i;
        text.push_str(&format!(
            "From user{v}@host{v}.example: pay {v},{:03}.50 to ref-{v}x and word{v} today.\n",
            v % 1000
        ));
    }
    text
}

fn bench_provenance(c: &mut Criterion) {
    let mut group = c.benchmark_group("provenance");
    let mut index = ValueIndex::new(*b"bench-key-123456", Caps::default());
    index.add(
        Source::OwnerWords,
        "pay the invoice from Bob, bob@corp.example, 1,250.00",
    );
    index.add(Source::Grant, "cargo test");
    for n in 0..100 {
        let source = Source::Result {
            call_id: n as u64,
            tool: "read_inbox",
            class: Class::Private,
            untrusted: true,
        };
        index.add(source, &result_text(n));
    }
    assert!(index.overflow().is_none());
    let body = "Hi Bob, thanks for the invoice. I have paid it today as agreed; the amount \
                should arrive within two days. Let me know if anything is missing or if the \
                reference is wrong, and say hello to the team from me. We could meet next \
                week to go over the plans for the new office and the budget.";
    let mail = [
        Value {
            name: "recipient",
            kind: ValueKind::Identifier,
            text: "user4242@host4242.example",
        },
        Value {
            name: "amount",
            kind: ValueKind::Identifier,
            text: "1250",
        },
        Value {
            name: "iban",
            kind: ValueKind::Identifier,
            text: "DE89 3704 0044 0532 0130 00",
        },
        Value {
            name: "subject",
            kind: ValueKind::Identifier,
            text: "Invoice paid",
        },
        Value {
            name: "body",
            kind: ValueKind::FreeText,
            text: body,
        },
    ];
    let shell = [Value {
        name: "command",
        kind: ValueKind::ShellCommand,
        text: "cargo test -p policy --release -- provenance 2>&1 | tail -n 20",
    }];
    println!(
        "provenance: {} entries, {} bytes counted",
        index.len(),
        index.bytes()
    );
    group.bench_function("check_mail_call_10k_values", |b| {
        b.iter(|| index.check(&mail))
    });
    group.bench_function("check_mail_identifiers_only_10k_values", |b| {
        b.iter(|| index.check(&mail[..4]))
    });
    group.bench_function("check_shell_call_10k_values", |b| {
        b.iter(|| index.check(&shell))
    });
    let clean_shell = [Value {
        name: "command",
        kind: ValueKind::ShellCommand,
        text: "cargo test -p policy --release -- provenance | tail",
    }];
    assert!(index.check(&clean_shell).clean());
    group.bench_function("check_clean_shell_call_10k_values", |b| {
        b.iter(|| index.check(&clean_shell))
    });
    // The reference for the shell call: reading its words alone (the parser the decision runs
    // for coverage anyway).
    group.bench_function("shell_script_words_only", |b| {
        b.iter(|| policy::shell::script_words(shell[0].text))
    });
    let one = result_text(1_000);
    group.bench_function("index_one_result_of_100_values_empty_index", |b| {
        b.iter_batched(
            || ValueIndex::new(*b"bench-key-123456", Caps::default()),
            |mut index| {
                index.add(
                    Source::Result {
                        call_id: 1_000,
                        tool: "read_inbox",
                        class: Class::Private,
                        untrusted: true,
                    },
                    &one,
                );
                index
            },
            criterion::BatchSize::LargeInput,
        )
    });
    group.finish();
    let mut group = c.benchmark_group("provenance");
    group.sample_size(20);
    for (name, text) in [
        ("index_untrusted_mail_4kib_empty_index", mail_text(4 << 10)),
        ("index_web_page_64kib_empty_index", page_text(64 << 10)),
    ] {
        group.bench_function(name, |b| {
            b.iter_batched(
                || ValueIndex::new(*b"bench-key-123456", Caps::default()),
                |mut index| {
                    index.add(
                        Source::Result {
                            call_id: 7,
                            tool: "fetch",
                            class: Class::Public,
                            untrusted: true,
                        },
                        &text,
                    );
                    index
                },
                criterion::BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

/// Words of ordinary prose, cycled through by [`prose`].
const WORDS: &[&str] = &[
    "the",
    "report",
    "for",
    "Thursday's",
    "meeting",
    "is",
    "attached;",
    "please",
    "review",
    "the",
    "budget",
    "and",
    "send",
    "comments",
    "to",
    "our",
    "team",
    "before",
    "Friday.",
    "(see",
    "below)",
    "Thanks",
    "again",
    "for",
    "the",
    "update",
    "on",
    "the",
    "project,",
    "and",
    "the",
    "customer's",
    "invoice",
    "details",
    "in",
    "section",
    "two",
];

/// `bytes` of prose (a pseudo-random walk over [`WORDS`]) with, now and then, an address, an
/// amount, a line break and, when `links`, a link.
fn prose(mut seed: u64, bytes: usize, links: bool, text: &mut String) {
    let goal = text.len() + bytes;
    while text.len() < goal {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let r = usize::try_from(seed >> 33).unwrap_or(0);
        match r % 29 {
            0 if links => text.push_str(&format!(
                "https://site{}.example/docs/page-{}?id={} ",
                r % 97,
                r % 1000,
                r % 10_000
            )),
            1 => text.push_str(&format!("person{}@mail{}.example ", r % 500, r % 50)),
            2 => text.push_str(&format!("${},{:03}.{:02} ", r % 100, r % 1000, r % 100)),
            3 => text.push('\n'),
            _ => {
                text.push_str(WORDS[r % WORDS.len()]);
                text.push(' ');
            }
        }
    }
}

/// A received mail of about `bytes`: headers and a body.
fn mail_text(bytes: usize) -> String {
    let mut text = String::from(
        "From: Alice Example <alice@corp.example>\nTo: bob@corp.example\nSubject: Quarterly report\nDate: Fri, 4 Dec 2026 10:00:00 +0000\n\n",
    );
    let body = bytes.saturating_sub(text.len());
    prose(7, body, true, &mut text);
    text
}

/// A web page's text of about `bytes`.
fn page_text(bytes: usize) -> String {
    let mut text = String::from("Example page\n");
    let body = bytes.saturating_sub(text.len());
    prose(11, body, true, &mut text);
    text
}

/// A downstream payment under a grant with rules on its arguments, and under the same grant
/// without them.
fn bench_rules(c: &mut Criterion) {
    use policy::decide::{GrantUses, Seen};
    use policy::downstream::{self, CallOf, Downstream, Listed};
    let mut index = ValueIndex::new(*b"bench-key-123456", Caps::default());
    index.add(
        Source::OwnerWords,
        "pay the rent to DE21 7015 0000 0941 2288 13",
    );
    for n in 0..100 {
        let source = Source::Result {
            call_id: n as u64,
            tool: "read_inbox",
            class: Class::Private,
            untrusted: true,
        };
        index.add(source, &result_text(n));
    }
    let pin = "ab".repeat(32);
    let grant = |rules: &str| {
        let text = format!(
            "[[grant]]\nid = \"pay\"\ntool = \"bank.send_money\"\npins = {{ \"bank.send_money\" = \"{pin}\" }}\non_untrusted = \"provenance\"\n{rules}"
        );
        let parsed = parse_file(&text, Path::new("g.toml"), Path::new("/home/x"));
        assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
        Downstream {
            tools: parsed.downstream.tools,
            ..Downstream::default()
        }
    };
    let ruled = grant(
        "per_session = 5\n[grant.args.recipient]\nallow = [\"DE21 7015 0000 0941 2288 13\", \"SE45 5000 0000 0583 9825 7466\"]\notherwise = \"ask\"\n[grant.args.amount]\nmin = 0\nmax = 500\notherwise = \"ask\"\n",
    );
    let plain = grant("");
    let schema = serde_json::json!({"type": "object", "properties": {
        "recipient": {"type": "string"}, "amount": {"type": "number"}, "subject": {"type": "string"}
    }});
    let arguments = serde_json::json!({"recipient": "DE21 7015 0000 0941 2288 13", "amount": 120, "subject": "rent"});
    let uses = GrantUses::default();
    let labels = Labels {
        taint: Class::Private,
        untrusted: true,
    };
    let decide = |grants: &Downstream| {
        let seen = Seen {
            labels,
            values: Some(&index),
            uses: Some(&uses),
        };
        let call = CallOf {
            input_schema: &schema,
            arguments: &arguments,
        };
        downstream::decide_seen(
            grants,
            Listed::new("bank", "send_money", &pin),
            call,
            seen,
            Timestamp::now(),
        )
    };
    assert!(matches!(decide(&ruled), downstream::Verdict::Allow(_)));
    let mut group = c.benchmark_group("rules");
    group.bench_function("payment_with_rules_10k_values", |b| {
        b.iter(|| decide(&ruled))
    });
    group.bench_function("payment_without_rules_10k_values", |b| {
        b.iter(|| decide(&plain))
    });
    group.finish();
}

criterion_group!(benches, bench, bench_provenance, bench_rules);
criterion_main!(benches);
