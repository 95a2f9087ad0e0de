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
