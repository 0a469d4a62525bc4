//! `covers_script` on a 1-line script and a 100-line script (`git status && ls -la | grep foo`
//! on every line), with a few granted prefixes; and, for scale, a 1-line script that is refused
//! at the first word and one refused by the token screen (a redirection).

use brokerd::policy::shell::covers_script;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

fn prefixes() -> Vec<Vec<String>> {
    [
        &["git", "status"][..],
        &["git", "log"],
        &["ls"],
        &["cargo", "test"],
        &["grep"],
        &["wc", "-l"],
    ]
    .iter()
    .map(|p| p.iter().map(|w| (*w).to_owned()).collect())
    .collect()
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
