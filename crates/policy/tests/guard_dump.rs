//! Every decision the guard takes on its corpora, one line each (`file:line<TAB>rule<TAB>command`),
//! for a before/after comparison of a refactoring: `cargo test -p airlock-policy --test guard_dump
//! -- --ignored --nocapture > before.txt`, change the code, dump again and `diff` the two.

use airlock_policy::guard::evaluate;
use serde::Deserialize;

#[derive(Deserialize)]
struct Case {
    cmd: String,
}

/// Print the rule the guard names for every line of every corpus.
#[test]
#[ignore = "a tool for comparing builds, not a check"]
fn dump_decisions() {
    let dir = format!("{}/tests/data", env!("CARGO_MANIFEST_DIR"));
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    names.sort();
    for name in names {
        let text = std::fs::read_to_string(format!("{dir}/{name}")).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            let Ok(case) = serde_json::from_str::<Case>(line) else {
                continue;
            };
            let d = evaluate(&case.cmd).decision;
            println!("{name}:{}\t{}\t{:?}\t{}", n + 1, d.rule, case.cmd, d.reason);
        }
    }
}

/// Time every corpus command (200 rounds each) and print the median and p99 of all samples and
/// the p99 of the per-command medians (robust to a busy machine), for all commands and for
/// those that run inline Python or JavaScript. A debug build measures the
/// shape, not the speed: the criterion bench (`benches/guard.rs`) gives release numbers.
#[test]
#[ignore = "a timing tool, not a check"]
fn time_decisions() {
    let dir = format!("{}/tests/data", env!("CARGO_MANIFEST_DIR"));
    let mut all = Vec::new();
    let mut inline = Vec::new();
    let mut medians = (Vec::new(), Vec::new());
    for name in [
        "guard.jsonl",
        "guard_cases.jsonl",
        "guard_redteam.jsonl",
        "guard_redteam2.jsonl",
    ] {
        let text = std::fs::read_to_string(format!("{dir}/{name}")).unwrap_or_default();
        for line in text.lines() {
            let Ok(case) = serde_json::from_str::<Case>(line) else {
                continue;
            };
            let parsed = ["python", "node ", "node -", "tsx ", "bun "]
                .iter()
                .any(|p| case.cmd.contains(p));
            let mut samples = Vec::with_capacity(200);
            for _ in 0..200 {
                let t = std::time::Instant::now();
                std::hint::black_box(evaluate(std::hint::black_box(&case.cmd)));
                samples.push(t.elapsed());
            }
            let mut sorted = samples.clone();
            sorted.sort();
            medians.0.push(sorted[sorted.len() / 2]);
            if parsed {
                inline.extend(samples.iter().copied());
                medians.1.push(sorted[sorted.len() / 2]);
            }
            all.extend(samples);
        }
    }
    for (label, mut s, mut m) in [
        ("all", all, medians.0),
        ("inline python/js", inline, medians.1),
    ] {
        s.sort();
        m.sort();
        let at = |v: &[std::time::Duration], p: f64| v[((v.len() - 1) as f64 * p) as usize];
        println!(
            "{label}: {} samples, median {:?}, p99 {:?}; {} commands, p99 of medians {:?}",
            s.len(),
            at(&s, 0.5),
            at(&s, 0.99),
            m.len(),
            at(&m, 0.99)
        );
    }
}
