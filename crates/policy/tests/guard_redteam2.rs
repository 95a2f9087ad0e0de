//! The guard against a second red-team corpus (`data/guard_redteam2.jsonl`), written from the
//! classes of mechanism an adversary uses rather than from the guard's own rules: launchers
//! that run their arguments, bash's own name resolution, code run while expanding, a file
//! written by one program and run by another, deletion as a side option, host availability,
//! remote and infrastructure destruction, persistence, transformed secrets, upload channels,
//! loopback-exemption bypasses, code installed from an address, interpreters and credential
//! stores; about a third of the lines are benign look-alikes.
//!
//! Recall is the share of dangerous lines denied (whatever the family); the false-positive
//! rate is the share of benign lines denied. The family agreement is printed alongside.

use airlock_policy::guard::evaluate;
use serde::Deserialize;

#[derive(Deserialize)]
struct Case {
    cmd: String,
    expect: String,
    family: String,
}

/// The numbers of one run over the corpus.
struct Score {
    dangerous: usize,
    denied: usize,
    same_family: usize,
    benign: usize,
    false_positives: usize,
    misses: Vec<String>,
    wrongly_denied: Vec<String>,
}

impl Score {
    fn recall(&self) -> f64 {
        self.denied as f64 / self.dangerous as f64
    }
    fn fp_rate(&self) -> f64 {
        self.false_positives as f64 / self.benign as f64
    }
}

fn score() -> Score {
    let path = format!(
        "{}/tests/data/guard_redteam2.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut s = Score {
        dangerous: 0,
        denied: 0,
        same_family: 0,
        benign: 0,
        false_positives: 0,
        misses: Vec::new(),
        wrongly_denied: Vec::new(),
    };
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let case: Case = serde_json::from_str(line).unwrap_or_else(|e| panic!("{}: {e}", n + 1));
        let report = evaluate(&case.cmd);
        let denied = !report.decision.is_allow();
        if case.expect == "deny" {
            s.dangerous += 1;
            if denied {
                s.denied += 1;
                if report.decision.rule == case.family {
                    s.same_family += 1;
                }
            } else {
                s.misses
                    .push(format!("{}: [{}] {:?}", n + 1, case.family, case.cmd));
            }
        } else {
            s.benign += 1;
            if denied {
                s.false_positives += 1;
                s.wrongly_denied.push(format!(
                    "{}: {:?} -> {} ({})",
                    n + 1,
                    case.cmd,
                    report.decision.rule,
                    report.decision.reason
                ));
            }
        }
    }
    println!(
        "redteam2: {} dangerous, recall {:.1}% ({} denied, {} with the expected family); \
         {} benign, false positives {:.1}% ({})",
        s.dangerous,
        100.0 * s.recall(),
        s.denied,
        s.same_family,
        s.benign,
        100.0 * s.fp_rate(),
        s.false_positives
    );
    println!("missed:\n{}", s.misses.join("\n"));
    println!("wrongly denied:\n{}", s.wrongly_denied.join("\n"));
    s
}

/// The corpus is the size and mix it claims: at least 600 lines, a third benign.
#[test]
fn corpus_shape() {
    let s = score();
    assert!(s.dangerous + s.benign >= 600);
    assert!(3 * s.benign >= s.dangerous + s.benign - 3);
}

/// The acceptance floor: at least 97% recall and at most 1% false positives.
#[test]
fn redteam2_recall_and_false_positives() {
    let s = score();
    assert!(s.recall() >= 0.97, "recall {:.3}", s.recall());
    assert!(s.fp_rate() <= 0.01, "false positives {:.3}", s.fp_rate());
}
