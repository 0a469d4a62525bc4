//! `covers_script` on a 1-line script and a 100-line script (`git status && ls -la | grep foo`
//! on every line), with a few granted prefixes; and, for scale, a 1-line script that is refused
//! at the first word and one refused by the token screen (a redirection). The reference in the
//! same run is brush-parser alone (tokenize and parse, the same options), so the ratio is what
//! the checker adds on top of the parser.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// criterion's macros make public functions without docs.
#![allow(missing_docs)]

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use policy::shell::covers_script;

fn prefixes() -> Vec<Vec<String>> {
    testkit::prefixes(testkit::COVERAGE_PREFIXES)
}

/// Tokenizes and parses `script` with brush-parser, as the checker configures it.
fn brush_parse(script: &str) -> bool {
    let options = brush_parser::ParserOptions {
        enable_extended_globbing: false,
        posix_mode: false,
        sh_mode: false,
        tilde_expansion: true,
    };
    brush_parser::uncached_tokenize_str(script, &options.tokenizer_options())
        .ok()
        .and_then(|tokens| {
            brush_parser::parse_tokens(&tokens, &options, &brush_parser::SourceInfo::default()).ok()
        })
        .is_some()
}

fn bench(c: &mut Criterion) {
    let prefixes = prefixes();
    let line = "git status && ls -la | grep foo\n";
    let mut group = c.benchmark_group("covers_script");
    for lines in [1usize, 100] {
        let script = line.repeat(lines);
        assert_eq!(covers_script(&script, &prefixes), Ok(()));
        group.throughput(Throughput::Bytes(script.len() as u64));
        group.bench_with_input(BenchmarkId::new("covered", lines), &script, |b, script| {
            b.iter(|| covers_script(std::hint::black_box(script), &prefixes));
        });
        group.bench_with_input(
            BenchmarkId::new("brush_parse_only", lines),
            &script,
            |b, script| {
                b.iter(|| brush_parse(std::hint::black_box(script)));
            },
        );
    }
    let refused = "rm -rf / && git status";
    assert!(covers_script(refused, &prefixes).is_err());
    group.throughput(Throughput::Bytes(refused.len() as u64));
    group.bench_function("no_prefix/1", |b| {
        b.iter(|| covers_script(std::hint::black_box(refused), &prefixes));
    });
    let redirect = "git status > out.txt";
    assert!(covers_script(redirect, &prefixes).is_err());
    group.throughput(Throughput::Bytes(redirect.len() as u64));
    group.bench_function("redirection/1", |b| {
        b.iter(|| covers_script(std::hint::black_box(redirect), &prefixes));
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
