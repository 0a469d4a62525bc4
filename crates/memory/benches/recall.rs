//! `cargo bench -p memory --bench recall`: `Store::recall` (limit 10: FTS5 MATCH, BM25 order,
//! the join to the entries, the snippet, each row read back as an entry) on 1,000, 100,000 and
//! 1,000,000 generated entries, beside the floor: a plain FTS5 `MATCH ... ORDER BY rank LIMIT
//! 10` through rusqlite on the same database, reading only the rowids. Median and p99 of each,
//! for a rare word, a common word and a two-word phrase.
//!
//! `BOXMAKER_BENCH_SIZES=1000,100000` picks the sizes; `BOXMAKER_BENCH_ROUNDS` how many times
//! each query set is run (default 20). Each store is generated in one transaction through one
//! prepared statement per table.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use memory::{NewEntry, Recall, Scope, Store};
use proto::{Class, Timestamp};

const VOCABULARY: usize = 20_000;
const WORDS_PER_ENTRY: usize = 12;

/// A small deterministic generator (xorshift), so every run builds the same store.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A word index with a Zipf-like skew: low indexes are common, high ones rare.
    fn word(&mut self) -> usize {
        let u = (self.next() % 1_000_000) as f64 / 1_000_000.0;
        ((VOCABULARY as f64).powf(u) as usize).saturating_sub(1)
    }
}

fn word(n: usize) -> String {
    // Letters only, so FTS5's tokenizer keeps each word whole.
    let mut out = String::new();
    let mut n = n + 1;
    while n > 0 {
        out.push((b'a' + (n % 26) as u8) as char);
        n /= 26;
    }
    format!("w{out}")
}

fn generate(store: &mut Store, entries: usize) -> Duration {
    let words: Vec<String> = (0..VOCABULARY).map(word).collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let texts: Vec<String> = (0..entries)
        .map(|_| {
            (0..WORDS_PER_ENTRY)
                .map(|_| words[rng.word()].as_str())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let tags = vec!["bench".to_string()];
    let at = Timestamp::now();
    let started = Instant::now();
    store
        .add_all(texts.iter().map(|text| NewEntry {
            text,
            tags: &tags,
            session: "bench",
            class: Class::Private,
            untrusted: false,
            at,
        }))
        .unwrap();
    started.elapsed()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn show(d: Duration) -> String {
    let micros = d.as_secs_f64() * 1e6;
    if micros >= 1000.0 {
        format!("{:.2} ms", micros / 1000.0)
    } else {
        format!("{micros:.0} µs")
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing: run small then.
    let benching = std::env::args().any(|a| a == "--bench");
    let sizes: Vec<usize> = match std::env::var("BOXMAKER_BENCH_SIZES") {
        Ok(text) => text
            .split(',')
            .filter_map(|s| s.trim().parse().ok())
            .collect(),
        Err(_) if benching => vec![1_000, 100_000, 1_000_000],
        Err(_) => vec![1_000],
    };
    let rounds: usize = std::env::var("BOXMAKER_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(if benching { 20 } else { 1 });
    println!(
        "| entries | query | recall median | recall p99 | FTS5 MATCH median | FTS5 MATCH p99 | ratio (median) |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|");
    for size in sizes {
        let dir = tempfile::Builder::new()
            .prefix("boxmaker-memory-bench-")
            .tempdir()
            .unwrap();
        let mut store = Store::open(&dir.path().join("memory.sqlite")).unwrap();
        let took = generate(&mut store, size);
        eprintln!("{size} entries generated in {:.1} s", took.as_secs_f64());
        // Rare words sit at the end of the vocabulary, common ones at its start.
        let classes: [(&str, Vec<String>); 3] = [
            (
                "rare word",
                (0..25).map(|k| word(VOCABULARY - 1 - k * 37)).collect(),
            ),
            ("common word", (0..25).map(|k| word(k * 3)).collect()),
            (
                "two words",
                (0..25)
                    .map(|k| format!("{} {}", word(k * 3 + 1), word(500 + k * 11)))
                    .collect(),
            ),
        ];
        let floor_sql =
            "SELECT rowid FROM entries_fts WHERE entries_fts MATCH ?1 ORDER BY rank LIMIT 10";
        for (label, queries) in &classes {
            let mut ours = Vec::new();
            let mut floor = Vec::new();
            // One untimed pass warms the page cache for both.
            for query in queries {
                let recall = Recall {
                    query,
                    tags: &[],
                    scope: Scope::All,
                    limit: 10,
                    terms_only: false,
                };
                store.recall(&recall).unwrap();
            }
            for _ in 0..rounds {
                for query in queries {
                    let recall = Recall {
                        query,
                        tags: &[],
                        scope: Scope::All,
                        limit: 10,
                        terms_only: false,
                    };
                    let started = Instant::now();
                    let found = store.recall(&recall).unwrap();
                    ours.push(started.elapsed());
                    std::hint::black_box(found);

                    let started = Instant::now();
                    let mut statement = store.connection().prepare_cached(floor_sql).unwrap();
                    let ids: Vec<i64> = statement
                        .query_map([query.as_str()], |row| row.get(0))
                        .unwrap()
                        .collect::<Result<_, _>>()
                        .unwrap();
                    floor.push(started.elapsed());
                    std::hint::black_box(ids);
                }
            }
            ours.sort();
            floor.sort();
            let (om, op) = (percentile(&ours, 0.5), percentile(&ours, 0.99));
            let (fm, fp) = (percentile(&floor, 0.5), percentile(&floor, 0.99));
            println!(
                "| {size} | {label} | {} | {} | {} | {} | {:.2}× |",
                show(om),
                show(op),
                show(fm),
                show(fp),
                om.as_secs_f64() / fm.as_secs_f64().max(1e-9)
            );
        }
    }
}
