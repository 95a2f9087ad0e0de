//! 100 MB of runner output must not raise the process's peak memory by more than a few MB:
//! output is spooled by the sandbox and parsed line by line. Alone in its own test binary so
//! the peak (VmHWM) is this run's.

use std::path::Path;
use std::time::Duration;

use airlock_verify::{RunnerKind, Verdict, VerifyInput, VerifyOptions, run_verification};

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn hundred_megabytes_of_output_in_bounded_memory() {
    let ws = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("README"), "nothing").unwrap();
    let before = peak_rss_kib();
    let opts = VerifyOptions {
        timeout: Duration::from_secs(120),
        // 100 MiB of distinct-looking failure lines, then a summary the generic adapter reads.
        command: Some(vec![
            "sh".into(),
            "-c".into(),
            "yes -- '--- FAIL: TestSomethingFairlyLong (0.00s) \u{1b}[31mred\u{1b}[0m xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' | head -c 104857600; \
             echo; echo '3 passed, 1 failed'; exit 1"
                .into(),
        ]),
        ..VerifyOptions::default()
    };
    let input = VerifyInput {
        workspace: ws.path(),
        layers: Vec::new(),
        changeset_hash: "h".into(),
        scratch_dir: scratch.path(),
        baseline_cache: None,
    };
    let report = run_verification(&input, &opts).unwrap();
    let after = peak_rss_kib();
    assert_eq!(report.runner, RunnerKind::Command);
    assert_eq!(report.verdict, Verdict::Failed);
    assert!(report.tests.failed > 400_000, "{:?}", report.tests);
    assert!(report.diagnostics.len() <= 4096);
    assert!(report.diagnostics.contains("(×"), "{}", report.diagnostics);
    let grown_mib = (after.saturating_sub(before)) as f64 / 1024.0;
    eprintln!("peak RSS before {before} KiB, after {after} KiB (+{grown_mib:.1} MiB)");
    assert!(grown_mib < 8.0, "peak memory grew by {grown_mib:.1} MiB");
    assert!(!Path::new(&scratch.path().join("run")).exists());
}
