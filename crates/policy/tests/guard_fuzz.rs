//! Robustness of the guard: a seeded mutation fuzzer (every denied corpus command stays denied
//! under quoting, wrappers, flag reordering and splitting, variables, nesting in `bash -c`,
//! `eval`, `$( )`, subshells, brace groups and chains) and property tests that the guard never
//! panics, whatever the input and however deep its nesting.

use airlock_policy::Ruling;
use airlock_policy::guard::evaluate;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Deserialize;

#[derive(Deserialize)]
struct Case {
    cmd: String,
    expect: String,
}

fn denied_corpus() -> Vec<String> {
    let mut out = Vec::new();
    for file in ["guard.jsonl", "guard_cases.jsonl"] {
        let path = format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let case: Case = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            let rule = evaluate(&case.cmd).decision.rule;
            if case.expect == "deny" && rule != "unparseable" && !case.cmd.contains('\n') {
                out.push(case.cmd);
            }
        }
    }
    out
}

fn single_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Builtins and keywords a wrapper cannot run and a variable cannot name portably.
fn first_word_is_external(cmd: &str) -> Option<&str> {
    let first = cmd.split_whitespace().next()?;
    let plain = first
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c));
    let builtin = matches!(
        first,
        "." | "source"
            | "eval"
            | "set"
            | "export"
            | "declare"
            | "typeset"
            | "cd"
            | ":"
            | "trap"
            | "alias"
            | "exec"
            | "builtin"
            | "command"
            | "time"
            | "if"
            | "for"
            | "while"
            | "until"
            | "case"
            | "function"
            | "local"
            | "readonly"
    );
    (plain && !builtin && !first.contains('=')).then_some(first)
}

/// Equivalent spellings of a flag, for the commands where they are equivalent.
const FLAG_FORMS: &[(&str, &[&str], &[&str])] = &[
    (
        "-rf",
        &["rm"],
        &[
            "-r -f",
            "-fr",
            "--recursive --force",
            "-f -r",
            "-Rf",
            "-r --force",
        ],
    ),
    ("-fr", &["rm"], &["-f -r", "-rf", "--force --recursive"]),
    ("-Rf", &["rm"], &["-R -f", "-fR", "-rf"]),
    (
        "-xdf",
        &["clean"],
        &["-x -d -f", "-fdx", "-f -x -d", "-dfx"],
    ),
    ("-r", &["rm"], &["-R", "--recursive"]),
    ("-R", &["rm", "chmod", "chown", "chgrp"], &["--recursive"]),
];

fn mutate(cmd: &str, rng: &mut StdRng) -> String {
    let external = first_word_is_external(cmd).map(str::to_owned);
    for _ in 0..8 {
        let choice = rng.random_range(0..14);
        let out = match choice {
            0 => format!("bash -c {}", single_quote(cmd)),
            1 => format!("( {cmd} )"),
            2 => format!("{{ {cmd}\n}}"),
            3 => format!("true && {cmd}"),
            4 => format!("echo start; {cmd}"),
            5 => format!("{cmd}\ntrue"),
            6 => format!("eval {}", single_quote(cmd)),
            7 => format!("x=$( {cmd}\n)"),
            8 => format!("sh <<< {}", single_quote(cmd)),
            9 => {
                let Some(first) = &external else { continue };
                let wrappers = [
                    "env ",
                    "nice ",
                    "timeout 10 ",
                    "nohup ",
                    "command ",
                    "stdbuf -oL ",
                    "env -u DEBUG ",
                    "sudo ",
                    "setsid ",
                    "ionice -c 3 ",
                ];
                let w = wrappers[rng.random_range(0..wrappers.len())];
                let _ = first;
                format!("{w}{cmd}")
            }
            10 => {
                let Some(first) = &external else { continue };
                let rest = &cmd[first.len()..];
                let quoted = match rng.random_range(0..4) {
                    0 => format!("'{first}'"),
                    1 => format!("\"{first}\""),
                    2 if first.starts_with(|c: char| c.is_ascii_alphabetic()) => {
                        format!("\\{first}")
                    }
                    _ if first.len() > 1 => format!("{}''{}", &first[..1], &first[1..]),
                    _ => format!("'{first}'"),
                };
                format!("{quoted}{rest}")
            }
            11 => {
                let Some(first) = &external else { continue };
                let rest = &cmd[first.len()..];
                format!("c={first}; $c{rest}")
            }
            12 => {
                let Some(first) = &external else { continue };
                if first.contains('/') {
                    continue;
                }
                let rest = &cmd[first.len()..];
                format!("/usr/bin/{first}{rest}")
            }
            _ => {
                let words: Vec<&str> = cmd.split(' ').collect();
                let hits: Vec<(usize, &[&str])> = (0..words.len())
                    .filter_map(|i| {
                        FLAG_FORMS.iter().find_map(|(f, cmds, forms)| {
                            let applies = *f == words[i]
                                && i > 0
                                && cmds.contains(&words[i - 1])
                                && !(i > 1 && words[i - 2] == "git" && words[i - 1] == "rm");
                            applies.then_some((i, *forms))
                        })
                    })
                    .collect();
                if hits.is_empty() {
                    continue;
                }
                let (i, forms) = hits[rng.random_range(0..hits.len())];
                let mut words: Vec<String> = words.iter().map(|w| (*w).to_owned()).collect();
                words[i] = forms[rng.random_range(0..forms.len())].to_owned();
                words.join(" ")
            }
        };
        return out;
    }
    format!("( {cmd} )")
}

#[test]
fn denied_commands_stay_denied_under_mutation() {
    let corpus = denied_corpus();
    assert!(corpus.len() > 100, "the corpora should hold many denials");
    let mut rng = StdRng::seed_from_u64(0x5eed_a1c0);
    let mut failures = Vec::new();
    let mut mutants = 0;
    for cmd in &corpus {
        for _ in 0..12 {
            let depth = rng.random_range(1..=3);
            let mut m = cmd.clone();
            for _ in 0..depth {
                m = mutate(&m, &mut rng);
            }
            mutants += 1;
            let r = evaluate(&m);
            // brush cannot parse a `case` pattern's `)` inside `$( )` or `( )`; those fail
            // closed as `unparseable`, still denied.
            let escaped = r.decision.decision != Ruling::Deny
                || (r.decision.rule == "unparseable" && !cmd.contains("case "));
            if escaped {
                failures.push(format!(
                    "{cmd:?} -> {m:?}: {} ({})",
                    r.decision.rule, r.decision.reason
                ));
            }
        }
    }
    assert!(mutants > 3000, "only {mutants} mutants");
    assert!(
        failures.is_empty(),
        "{} of {mutants} mutants escaped:\n{}",
        failures.len(),
        failures
            .iter()
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn mutations_keep_benign_commands_benign() {
    // The same structural mutations on benign commands must not create denials: the
    // mutations themselves are harmless.
    let benign = [
        "cargo test",
        "rm -rf build/",
        "git status",
        "ls -la src",
        "make -j2",
    ];
    let mut rng = StdRng::seed_from_u64(7);
    for cmd in benign {
        for _ in 0..40 {
            let m = mutate(cmd, &mut rng);
            let r = evaluate(&m);
            let privileged = m.contains("sudo ");
            assert!(
                r.decision.decision == Ruling::Allow
                    || (privileged && r.decision.rule == "privilege"),
                "{m:?}: {} ({})",
                r.decision.rule,
                r.decision.reason
            );
        }
    }
}

#[test]
fn deep_nesting_is_refused_not_overflowed() {
    let shapes: [(&str, &str); 7] = [
        ("$(", ")"),
        ("(", ")"),
        ("{ ", "; }"),
        ("if true; then ", "; fi"),
        ("echo \"$(", ")\""),
        ("eval ", ""),
        ("sudo ", ""),
    ];
    for (open, close) in shapes {
        for n in [10usize, 30, 60, 200, 1000] {
            let script = format!("{}rm -rf /{}", open.repeat(n), close.repeat(n));
            let r = evaluate(&script);
            assert_eq!(r.decision.decision, Ruling::Deny, "{open:?} x{n}");
        }
    }
    // Re-parsing a large string many times is bounded too.
    let big = "x".repeat(100_000);
    let repeated = format!("s='echo {big}'; {}", "eval $s; ".repeat(40));
    assert_eq!(evaluate(&repeated).decision.rule, "unparseable");
    let backticks = format!("{}ls{}", "`".repeat(500), "`".repeat(500));
    assert_eq!(evaluate(&backticks).decision.decision, Ruling::Deny);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let script = String::from_utf8_lossy(&bytes);
        let r = evaluate(&script);
        prop_assert_eq!(r.decision.stage, airlock_policy::Stage::Guard);
    }

    #[test]
    fn never_panics_on_shellish_text(script in "[a-z$(){}\\[\\]'\"`;|&<> \\-\n~/=*!#\\\\:.0-9]{0,300}") {
        let r = evaluate(&script);
        prop_assert!(!r.decision.reason.is_empty());
    }

    #[test]
    fn never_panics_on_nesting(depth in 0usize..400, kind in 0usize..6) {
        let (open, close) = [("$(", ")"), ("(", ")"), ("{ ", ";}"), ("`", "`"), ("bash -c \"", "\""), ("${a:-", "}")][kind];
        let script = format!("{}ls{}", open.repeat(depth), close.repeat(depth));
        let _ = evaluate(&script);
    }
}
