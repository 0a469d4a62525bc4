//! `dispatch` of `find_tool` over registries of 10, 1,000 and 10,000 tools: the substring
//! search of the seed plus the BM25 ranking and the rendering, as the model's query reaches
//! them; beside it, in the same run, the seed's `Registry::find` alone as the reference.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// criterion's macros make public functions without docs.
#![allow(missing_docs)]

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use proto::ToolSchema;
use serde_json::json;
use toolport::{Dispatch, Entry, FIND_TOOL, Registry, dispatch};

const WORDS: &[&str] = &[
    "read", "write", "file", "folder", "search", "issue", "ticket", "calendar", "mail", "send",
    "list", "create", "delete", "update", "image", "page", "fetch", "query", "database", "table",
    "user", "account", "invoice", "report", "chart", "deploy", "build", "test", "log", "metric",
];

/// A registry of `n` tools with names and descriptions drawn from a small vocabulary, so that
/// queries match a realistic share of them.
fn registry(n: usize) -> Registry {
    let word = |i: usize| WORDS[i % WORDS.len()];
    let entries = (0..n)
        .map(|i| Entry {
            schema: ToolSchema {
                name: format!("{}_{}_{i}", word(i), word(i / 7 + 3)),
                description: format!(
                    "{} the {} of a {} and {} its {}.",
                    word(i * 3 + 1),
                    word(i * 5 + 2),
                    word(i / 3),
                    word(i * 11 + 4),
                    word(i / 13 + 5)
                ),
                parameters: json!({"type":"object","properties":{
                    "id": {"type":"string","description": format!("The {} to {}.", word(i + 9), word(i + 2))}
                }}),
            },
            core: false,
        })
        .collect();
    Registry::new(entries)
}

fn find_tool(c: &mut Criterion) {
    let mut group = c.benchmark_group("dispatch_find_tool");
    for n in [10usize, 1_000, 10_000] {
        let registry = registry(n);
        for (label, query) in [("substring", "invoice"), ("words", "send a mail report")] {
            let arguments = json!({ "query": query }).to_string();
            group.bench_with_input(BenchmarkId::new(label, n), &n, |b, _| {
                b.iter(|| match dispatch(&registry, FIND_TOOL, &arguments) {
                    Dispatch::Local(text) => text.len(),
                    Dispatch::Port { .. } => 0,
                })
            });
            // The reference: the seed's substring search alone, no ranking, no rendering.
            group.bench_with_input(
                BenchmarkId::new(format!("{label}_find_only"), n),
                &n,
                |b, _| b.iter(|| registry.find(query).len()),
            );
        }
    }
    group.finish();
}

fn build(c: &mut Criterion) {
    let mut group = c.benchmark_group("registry_new");
    for n in [10usize, 1_000, 10_000] {
        let entries = registry(n).entries().to_vec();
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter_batched(
                || entries.clone(),
                Registry::new,
                criterion::BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, find_tool, build);
criterion_main!(benches);
