//! `decide` against 10, 1,000 and 10,000 grants: a read that the last grant covers, and a
//! read that no grant covers (every grant is tried). The reference in the same run is the
//! path resolution alone (`resolve_args`), the file-system part every decision pays.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// criterion's macros make public functions without docs.
#![allow(missing_docs)]

use std::path::Path;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use policy::args::{ToolName, parse};
use policy::decide::{Labels, Protected, decide, resolve_args};
use policy::grants::parse_file;
use proto::Timestamp;

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
    }
    let args = match parse(ToolName::ReadFile, r#"{"path":"/srv/data/1/file.txt"}"#) {
        Ok(args) => args,
        Err(e) => panic!("bench args: {e}"),
    };
    group.bench_function("resolve_args_only", |b| b.iter(|| resolve_args(&args)));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
