//! Sanitiser and adapter throughput: runner output streamed line by line through the generic
//! adapter and the sanitiser (a synthetic mix, and real runners' output from `outputs/`:
//! failing cargo, go and jest runs on semver, go-cmp and jsx-ast-utils, passing vitest and
//! pytest runs on zod and packaging); a JUnit report with many cases; folding many failures.

use std::hint::black_box;
use std::io::Cursor;
use std::path::Path;

use airlock_verify::Failure;
use airlock_verify::adapter::generic::GenericParser;
use airlock_verify::adapter::junit;
use airlock_verify::sanitize::{Locator, Sanitizer, for_each_line};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn runner_output(bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes + 256);
    let mut i = 0u64;
    while out.len() < bytes {
        out.extend_from_slice(
            format!(
                "test suite::case_{i} ... ok\n\
                 \x1b[31m--- FAIL: TestDistinct{i} (0.00s)\x1b[0m\n\
                 --- FAIL: TestRepeated (0.00s)\n\
                 \x20   at Object.<anonymous> (/ws/src/thing_{}.test.js:{}:7)\n\
                 \x20   at runTest (/ws/node_modules/jest-circus/build/run.js:316:40)\n",
                i % 97,
                i % 400 + 1
            )
            .as_bytes(),
        );
        i += 1;
    }
    out
}

/// A real runner's output (`benches/outputs/NAME.txt`) repeated to at least `bytes`.
fn real_output(name: &str, bytes: usize) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("benches/outputs")
        .join(format!("{name}.txt"));
    let sample = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::with_capacity(bytes + sample.len());
    while out.len() < bytes {
        out.extend_from_slice(&sample);
    }
    out
}

fn stream(output: &[u8], locator: &Locator) -> usize {
    let mut sanitizer = Sanitizer::new(4096);
    let mut sink = |f: Failure| sanitizer.push(f);
    let mut parser = GenericParser::new(locator);
    for_each_line(Cursor::new(output), |l| parser.line(l, &mut sink)).unwrap();
    parser.finish(&mut sink);
    sanitizer.finish().text.len()
}

fn junit_report(cases: usize) -> String {
    let mut xml = String::from("<testsuites><testsuite name=\"s\">");
    for i in 0..cases {
        if i % 10 == 0 {
            xml.push_str(&format!(
                "<testcase classname=\"tests/a.test.js\" name=\"case {i}\"><failure message=\"expected {i} to be 0\">AssertionError: expected {i} to be 0\n\n- Expected\n+ Received\n\n- 0\n+ {i}\n\n ❯ tests/a.test.js:{}:5\n</failure></testcase>",
                i % 300 + 1
            ));
        } else {
            xml.push_str(&format!(
                "<testcase classname=\"tests/a.test.js\" name=\"case {i}\"/>"
            ));
        }
    }
    xml.push_str("</testsuite></testsuites>");
    xml
}

fn bench(c: &mut Criterion) {
    let locator = Locator::new(Path::new("/ws"));

    let output = runner_output(4 << 20);
    let mut group = c.benchmark_group("stream");
    group.throughput(Throughput::Bytes(output.len() as u64));
    group.sample_size(10);
    group.bench_function("generic_adapter_and_sanitiser_4MiB", |b| {
        b.iter(|| black_box(stream(&output, &locator)))
    });
    for name in ["cargo-fail", "go-fail", "jest-fail", "vitest", "pytest"] {
        let output = real_output(name, 4 << 20);
        group.throughput(Throughput::Bytes(output.len() as u64));
        group.bench_function(format!("{name}_output_4MiB"), |b| {
            b.iter(|| black_box(stream(&output, &locator)))
        });
    }
    group.finish();

    let xml = junit_report(2000);
    let mut group = c.benchmark_group("junit");
    group.throughput(Throughput::Bytes(xml.len() as u64));
    group.bench_function("parse_2000_cases_200_failures", |b| {
        b.iter(|| {
            let mut sanitizer = Sanitizer::new(4096);
            let mut sink = |f: Failure| sanitizer.push(f);
            let parsed = junit::parse_str(&xml, &locator, false, &mut sink);
            black_box((parsed.counts, sanitizer.finish().text.len()))
        })
    });
    group.finish();

    let failures: Vec<Failure> = (0..10_000)
        .map(|i| Failure {
            test: format!("case {i}"),
            file: Some("src/lib.rs".into()),
            line: Some(i % 50),
            message: format!(
                "assertion `left == right` failed\n  left: {}\n right: 0",
                i % 50
            ),
            ..Failure::default()
        })
        .collect();
    let mut group = c.benchmark_group("sanitiser");
    group.throughput(Throughput::Elements(failures.len() as u64));
    group.bench_function("fold_and_bound_10000_failures", |b| {
        b.iter(|| {
            let mut s = Sanitizer::new(4096);
            for f in &failures {
                s.push(f.clone());
            }
            black_box(s.finish().text.len())
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
