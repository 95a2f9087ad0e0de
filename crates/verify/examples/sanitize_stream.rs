//! Streams a large synthetic runner output through the generic adapter and the sanitiser, and
//! reports throughput and peak memory (VmHWM) — the numbers in docs/bench/verify.md.
//!
//! `cargo run --release -p airlock-verify --example sanitize_stream -- [MEGABYTES] [FILE…]`
//!
//! With files (real runners' output), the stream is their contents over and over instead of
//! the synthetic mix. `-- junit [MEGABYTES]` writes a JUnit report of that size instead (one
//! case in ten failing) and reads it with the JUnit adapter.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use airlock_verify::adapter::generic::GenericParser;
use airlock_verify::adapter::junit;
use airlock_verify::sanitize::{Locator, Sanitizer};
use airlock_verify::{Failure, OutputText};

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// One timed read of a file: its size, how long it took, and the peak memory around it.
struct Run {
    mib: f64,
    secs: f64,
    before_kib: u64,
    after_kib: u64,
}

impl Run {
    /// Times `work`, which reads the file at `path`, with a locator for a workspace at `/ws` and
    /// a fresh sanitiser.
    fn measure<R>(path: &Path, work: impl FnOnce(&Locator, Sanitizer) -> R) -> (R, Run) {
        let bytes = std::fs::metadata(path).expect("size").len();
        let before_kib = peak_rss_kib();
        let start = Instant::now();
        let locator = Locator::new(Path::new("/ws"));
        let result = work(&locator, Sanitizer::new(4096));
        let secs = start.elapsed().as_secs_f64();
        let run = Run {
            mib: bytes as f64 / (1024.0 * 1024.0),
            secs,
            before_kib,
            after_kib: peak_rss_kib(),
        };
        (result, run)
    }

    fn mib_per_s(&self) -> f64 {
        self.mib / self.secs
    }

    fn print_peak(&self) {
        println!(
            "peak RSS before parsing {} KiB, after {} KiB (+{:.2} MiB)",
            self.before_kib,
            self.after_kib,
            (self.after_kib.saturating_sub(self.before_kib)) as f64 / 1024.0
        );
    }
}

/// Writes a JUnit report of about `mb` MiB at `path`.
fn write_junit(path: &Path, mb: u64) {
    let mut w = BufWriter::new(std::fs::File::create(path).expect("report"));
    w.write_all(b"<testsuites><testsuite name=\"s\">")
        .expect("write");
    let (mut written, mut i) = (0u64, 0u64);
    while written < mb * 1024 * 1024 {
        let case = if i % 10 == 0 {
            format!(
                "<testcase classname=\"tests/a_{}.test.js\" name=\"case {i}\"><failure message=\"expected {i} to be 0\">AssertionError: expected {i} to be 0\n\n- Expected\n+ Received\n\n- 0\n+ {i}\n\n \u{276f} tests/a_{}.test.js:{}:5\n</failure></testcase>\n",
                i % 50,
                i % 50,
                i % 300 + 1
            )
        } else {
            format!("<testcase classname=\"tests/a.test.js\" name=\"case {i}\"/>\n")
        };
        w.write_all(case.as_bytes()).expect("write");
        written += case.len() as u64;
        i += 1;
    }
    w.write_all(b"</testsuite></testsuites>\n").expect("write");
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("junit") {
        let mb = std::env::args()
            .nth(2)
            .and_then(|s| s.parse().ok())
            .unwrap_or(60);
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("report.xml");
        write_junit(&path, mb);
        let ((parsed, out), run) = Run::measure(&path, |locator, mut sanitizer| {
            let parsed = junit::parse(&path, locator, false, &mut |f: Failure| sanitizer.push(f));
            (parsed, sanitizer.finish())
        });
        println!(
            "JUnit report {:.1} MiB, {:?}, {:.2} s, {:.1} MiB/s, diagnostics {} bytes",
            run.mib,
            parsed.counts,
            run.secs,
            run.mib_per_s(),
            out.text.len()
        );
        run.print_peak();
        return;
    }
    let mb: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let samples: Vec<Vec<u8>> = std::env::args()
        .skip(2)
        .map(|f| std::fs::read(&f).unwrap_or_else(|e| panic!("{f}: {e}")))
        .collect();
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("stdout.log");
    {
        // A realistic mix: passing lines, failures (many distinct, many repeated), ANSI colour,
        // stack frames inside and outside the workspace.
        let mut w = BufWriter::new(std::fs::File::create(&path).expect("spool"));
        let mut written = 0u64;
        let mut i = 0u64;
        while !samples.is_empty() && written < mb * 1024 * 1024 {
            for sample in &samples {
                w.write_all(sample).expect("write");
                written += sample.len() as u64;
            }
        }
        while written < mb * 1024 * 1024 {
            let chunk = format!(
                "test suite::case_{i} ... ok\n\
                 \x1b[31m--- FAIL: TestDistinct{i} (0.00s)\x1b[0m\n\
                 --- FAIL: TestRepeated (0.00s)\n\
                 \x20   at Object.<anonymous> (/ws/src/thing_{}.test.js:{}:7)\n\
                 \x20   at runTest (/ws/node_modules/jest-circus/build/run.js:316:40)\n",
                i % 97,
                i % 400 + 1
            );
            w.write_all(chunk.as_bytes()).expect("write");
            written += chunk.len() as u64;
            i += 1;
        }
        w.write_all(b"summary: 10 passed, 2 failed\n")
            .expect("write");
    }
    let ((failures, out), run) = Run::measure(&path, |locator, mut sanitizer| {
        let mut failures = 0u64;
        let mut sink = |f: Failure| {
            failures += 1;
            sanitizer.push(f);
        };
        let mut parser = GenericParser::new(locator);
        OutputText::Spool(path.clone())
            .for_each_line(|l| parser.line(l, &mut sink))
            .expect("read spool");
        parser.finish(&mut sink);
        (failures, sanitizer.finish())
    });
    println!(
        "input {:.1} MiB, {failures} failures, {:.2} s, {:.1} MiB/s, diagnostics {} bytes, omitted {}",
        run.mib,
        run.secs,
        run.mib_per_s(),
        out.text.len(),
        out.omitted
    );
    run.print_peak();
}
