//! The generic adapter for any command: recognised summary lines give the counts (libtest,
//! pytest, jest, vitest, node's spec and TAP reporters, go's `--- PASS/FAIL`, and the plain
//! `N passed, N failed` line); libtest panics, rustc and tsc diagnostics
//! (`file(line,col): error TSxxxx: msg`) give failures; the tail of the output goes to the model.
//!
//! A command whose output shows no recognisable count never passes (it is `no_tests`): an exit
//! code alone does not prove that a test ran.

use std::sync::LazyLock;

use regex::Regex;

use super::cargo::CargoParser;
use super::{FailureSink, Parsed};
use crate::model::{Counts, Failure, FailureKind};
use crate::sanitize::Locator;

static PYTEST_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^=*\s*((?:\d+ \w+(?:, )?)+) in [\d.]+s(?: \([^)]*\))?\s*=*$").expect("regex")
});
static COUNT_WORD_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(\d+) (\w+)").expect("regex"));
static JEST_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^Tests:\s+(.+?),?\s*(\d+) total$").expect("regex"));
static VITEST_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*Tests\s+(.+?)\s*\((\d+)\)$").expect("regex"));
static NODE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:ℹ|#) (pass|fail|skipped|skip|todo|cancelled) (\d+)$").expect("regex")
});
static PLAIN_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:\w+: )?(\d+) passed, (\d+) failed(?:, (\d+) skipped)?$").expect("regex")
});
static TSC_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^([^\s()]+)\((\d+),(\d+)\): error (TS\d+): (.+)$").expect("regex")
});

#[derive(Debug, Default, Clone, Copy)]
struct Family {
    seen: bool,
    counts: Counts,
}

impl Family {
    fn add(&mut self, counts: Counts) {
        self.seen = true;
        self.counts.add(counts);
    }
}

/// Streaming generic parser.
pub struct GenericParser<'a> {
    locator: &'a Locator,
    cargo: CargoParser<'a>,
    pytest: Family,
    jest: Family,
    vitest: Family,
    node: Family,
    go: Family,
    plain: Family,
    /// The last TypeScript error, open for its indented elaboration lines.
    tsc_open: Option<Failure>,
}

/// Most elaboration lines kept per TypeScript error.
const MAX_TSC_LINES: usize = 4;

impl<'a> GenericParser<'a> {
    /// A parser mapping paths through `locator`.
    pub fn new(locator: &'a Locator) -> GenericParser<'a> {
        GenericParser {
            locator,
            cargo: CargoParser::new(locator),
            pytest: Family::default(),
            jest: Family::default(),
            vitest: Family::default(),
            node: Family::default(),
            go: Family::default(),
            plain: Family::default(),
            tsc_open: None,
        }
    }

    /// Feeds one line of stdout or stderr.
    pub fn line(&mut self, line: &str, sink: &mut dyn FailureSink) {
        self.cargo.line(line, sink);
        let trimmed = line.trim();
        if let Some(open) = self.tsc_open.as_mut() {
            // tsc's elaboration: indented lines under the error (`  The types of 'y.z' …`).
            if line.starts_with(' ') && !trimmed.is_empty() {
                if open.message.lines().count() <= MAX_TSC_LINES {
                    open.message.push('\n');
                    open.message.push_str(trimmed);
                }
                return;
            }
            if let Some(f) = self.tsc_open.take() {
                sink.failure(f);
            }
        }
        if may_be_tsc(trimmed)
            && trimmed.contains("): error TS")
            && let Some(caps) = TSC_RE.captures(trimmed)
        {
            let mut f = Failure {
                test: "(compile)".into(),
                message: format!("error {}: {}", &caps[4], &caps[5]),
                kind: FailureKind::Compile,
                ..Failure::default()
            };
            f.file = self.locator.relative(&caps[1]);
            if f.file.is_some() {
                f.line = caps[2].parse().ok();
                f.column = caps[3].parse().ok();
            }
            self.tsc_open = Some(f);
            return;
        }
        if may_be_pytest(trimmed)
            && trimmed.contains(" in ")
            && let Some(caps) = PYTEST_RE.captures(trimmed)
        {
            let mut c = Counts::default();
            for w in COUNT_WORD_RE.captures_iter(&caps[1]) {
                let n: u64 = w[1].parse().unwrap_or(0);
                match &w[2] {
                    "passed" | "xpassed" => c.passed += n,
                    "failed" | "error" | "errors" => c.failed += n,
                    "skipped" | "xfailed" => c.skipped += n,
                    _ => {}
                }
            }
            self.pytest.add(c);
            return;
        }
        if trimmed.starts_with("Tests:")
            && let Some(caps) = JEST_RE.captures(trimmed)
        {
            self.jest.add(words(&caps[1]));
            return;
        }
        if trimmed.starts_with("Tests ")
            && let Some(caps) = VITEST_RE.captures(line)
        {
            self.vitest.add(words(&caps[1]));
            return;
        }
        if (trimmed.starts_with('ℹ') || trimmed.starts_with('#'))
            && let Some(caps) = NODE_RE.captures(trimmed)
        {
            let n: u64 = caps[2].parse().unwrap_or(0);
            let mut c = Counts::default();
            match &caps[1] {
                "pass" => c.passed = n,
                "fail" | "cancelled" => c.failed = n,
                _ => c.skipped = n,
            }
            self.node.add(c);
            return;
        }
        if trimmed.starts_with("--- ")
            && let Some((outcome, test)) = go_result(line)
        {
            let mut c = Counts::default();
            match outcome {
                "PASS" => c.passed = 1,
                "FAIL" => {
                    c.failed = 1;
                    sink.failure(Failure {
                        test: test.to_string(),
                        message: "failed".into(),
                        ..Failure::default()
                    });
                }
                _ => c.skipped = 1,
            }
            self.go.add(c);
            return;
        }
        if (trimmed.ends_with("failed") || trimmed.ends_with("skipped"))
            && trimmed.contains(" passed, ")
            && let Some(caps) = PLAIN_RE.captures(trimmed)
        {
            self.plain.add(Counts {
                passed: caps[1].parse().unwrap_or(0),
                failed: caps[2].parse().unwrap_or(0),
                skipped: caps
                    .get(3)
                    .and_then(|m| m.as_str().parse().ok())
                    .unwrap_or(0),
            });
        }
    }

    /// Ends the stream: counts from the most specific family that was seen.
    pub fn finish(mut self, sink: &mut dyn FailureSink) -> Parsed {
        if let Some(f) = self.tsc_open.take() {
            sink.failure(f);
        }
        let families = [
            self.pytest,
            self.jest,
            self.vitest,
            self.node,
            self.go,
            self.plain,
        ];
        let mut parsed = self.cargo.finish(sink);
        if !parsed.counts_known
            && let Some(f) = families.iter().find(|f| f.seen)
        {
            parsed.counts_known = true;
            parsed.counts = f.counts;
        }
        parsed
    }
}

// Cheap tests that most lines fail, before the regexes run: each is implied by its regex.

/// [`TSC_RE`]: a path up to the first `(`, which no space or `)` comes before.
fn may_be_tsc(trimmed: &str) -> bool {
    memchr::memchr3(b'(', b')', b' ', trimmed.as_bytes())
        .is_some_and(|i| i > 0 && trimmed.as_bytes()[i] == b'(')
}

/// [`PYTEST_RE`]: a count after the `=` rule, a duration (or its parenthesised note) before
/// the closing rule.
fn may_be_pytest(trimmed: &str) -> bool {
    if !trimmed.ends_with(['s', ')', '=']) {
        return false;
    }
    let starts_with_count = trimmed
        .trim_start_matches('=')
        .trim_start()
        .starts_with(char::is_numeric);
    let end = trimmed.trim_end_matches('=').trim_end();
    starts_with_count && (end.ends_with('s') || end.ends_with(')'))
}

/// go test's `--- FAIL: TestName (0.00s)` (indented for subtests): the outcome and the test's
/// name, up to the first whitespace.
fn go_result(line: &str) -> Option<(&str, &str)> {
    let rest = line.trim_start().strip_prefix("--- ")?;
    let (outcome, rest) = rest.split_at_checked(4)?;
    if !matches!(outcome, "PASS" | "FAIL" | "SKIP") {
        return None;
    }
    let rest = rest.strip_prefix(": ")?;
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    (end > 0).then(|| (outcome, &rest[..end]))
}

/// `1 failed | 1 passed | 1 skipped` or `1 failed, 1 skipped, 1 passed`.
fn words(text: &str) -> Counts {
    let mut c = Counts::default();
    for w in COUNT_WORD_RE.captures_iter(text) {
        let n: u64 = w[1].parse().unwrap_or(0);
        match &w[2] {
            "passed" => c.passed += n,
            "failed" => c.failed += n,
            "skipped" | "pending" | "todo" => c.skipped += n,
            _ => {}
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn run(output: &str) -> (Parsed, Vec<Failure>) {
        let locator = Locator::new(Path::new("/ws"));
        let mut failures = Vec::new();
        let mut sink = |f: Failure| failures.push(f);
        let mut p = GenericParser::new(&locator);
        for l in output.lines() {
            p.line(l, &mut sink);
        }
        let parsed = p.finish(&mut sink);
        (parsed, failures)
    }

    fn counts(p: &Parsed) -> (u64, u64, u64) {
        (p.counts.passed, p.counts.failed, p.counts.skipped)
    }

    #[test]
    fn recognises_summaries() {
        let (p, _) = run("===== 1 failed, 2 passed, 1 skipped in 0.05s =====");
        assert_eq!(counts(&p), (2, 1, 1));
        let (p, _) = run("3 passed in 0.01s");
        assert_eq!(counts(&p), (3, 0, 0));
        let (p, _) = run("Tests:       1 failed, 1 skipped, 1 passed, 3 total");
        assert_eq!(counts(&p), (1, 1, 1));
        let (p, _) = run("      Tests  1 failed | 1 passed | 1 skipped (3)");
        assert_eq!(counts(&p), (1, 1, 1));
        let (p, _) = run("ℹ tests 3\nℹ pass 1\nℹ fail 1\nℹ skipped 1");
        assert_eq!(counts(&p), (1, 1, 1));
        let (p, _) = run("# pass 2\n# fail 0");
        assert_eq!(counts(&p), (2, 0, 0));
        let (p, f) = run("--- PASS: TestA (0.00s)\n--- FAIL: TestB (0.00s)");
        assert_eq!(counts(&p), (1, 1, 0));
        assert_eq!(f[0].test, "TestB");
        let (p, _) = run("summary: 4 passed, 0 failed, 2 skipped");
        assert_eq!(counts(&p), (4, 0, 2));
        let (p, _) = run("test result: ok. 5 passed; 0 failed; 0 ignored; 0 measured");
        assert_eq!(counts(&p), (5, 0, 0));
    }

    #[test]
    fn unrecognised_output_has_no_counts() {
        let (p, f) = run("all good\nexit 0");
        assert!(!p.counts_known);
        assert!(f.is_empty());
    }

    #[test]
    fn go_results_are_read_like_go_prints_them() {
        assert_eq!(
            go_result("    --- FAIL: TestA/sub_case (0.01s)"),
            Some(("FAIL", "TestA/sub_case"))
        );
        assert_eq!(go_result("--- SKIP: TestB"), Some(("SKIP", "TestB")));
        assert_eq!(
            go_result("--- PASS: TestC\t(0.00s)"),
            Some(("PASS", "TestC"))
        );
        for not_a_result in [
            "--- FAIL:  TestA",
            "--- FAIL:",
            "--- FAILED: TestA",
            "---  FAIL: TestA",
            "x --- FAIL: TestA",
            "--- é: TestA",
        ] {
            assert_eq!(go_result(not_a_result), None, "{not_a_result}");
        }
    }

    #[test]
    fn tsc_diagnostics() {
        let (_, f) =
            run("src/a.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'.");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].kind, FailureKind::Compile);
        assert_eq!(f[0].file.as_deref(), Some("src/a.ts"));
        assert_eq!((f[0].line, f[0].column), (Some(3), Some(7)));
        assert!(f[0].message.starts_with("error TS2322"));
    }
}
