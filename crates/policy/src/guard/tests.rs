//! Unit tests of the guard's public behaviour on single constructs.

use super::*;
use crate::decision::Verdict;

fn rule(script: &str) -> String {
    evaluate(script).decision.rule.into_owned()
}

#[test]
fn allow_has_rule_allow() {
    let r = evaluate("cargo test");
    assert_eq!(r.decision.decision, Verdict::Allow);
    assert_eq!(r.decision.rule, "allow");
    assert_eq!(r.normalized, "cargo test");
}

#[test]
fn guarded_script_only_for_allowed() {
    let g = guard("ls -la").unwrap_or_else(|r| panic!("denied: {r:?}"));
    assert_eq!(g.script(), "ls -la");
    assert_eq!(g.normalized(), "ls -la");
    assert!(guard("rm -rf /").is_err());
}

#[test]
fn reason_names_the_command() {
    let r = evaluate("rm -rf /");
    assert_eq!(
        r.decision.reason,
        "`rm -rf /` recursively removes the filesystem root."
    );
}

#[test]
fn variables_resolve() {
    assert_eq!(rule("a=rm; $a -rf /"), "destruction");
    assert_eq!(rule("y=/; rm -rf $y"), "destruction");
    assert_eq!(rule("$x"), "dynamic_command");
}

#[test]
fn debug_print() {
    if let Ok(path) = std::env::var("GUARD_DEBUG_FILE") {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        for line in text.lines() {
            let r = evaluate(line);
            eprintln!("{:<20} {line}    => {}", r.decision.rule, r.decision.reason);
        }
    }
}
