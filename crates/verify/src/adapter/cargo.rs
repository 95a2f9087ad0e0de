//! `cargo test --message-format=json…`: cargo's JSON messages (compile errors) and libtest's
//! human output arrive interleaved on stdout; this state machine reads both, one line at a time.
//!
//! libtest: `test result: FAILED. 1 passed; 1 failed; 1 ignored; …` gives the counts (summed
//! over test binaries); each `---- name stdout ----` section holds a panic
//! `panicked at src/lib.rs:16:9:` followed by the message (`left:`/`right:` for `assert_eq!`).
//! The same parser reads plain `cargo test` output (no JSON), as used by explicit commands.

use std::sync::LazyLock;

use regex::Regex;
use serde::Deserialize;

use super::{FailureSink, Parsed};
use crate::model::{Failure, FailureKind};
use crate::sanitize::{Locator, assertion_values};

/// Most lines kept per failure section.
const MAX_SECTION_LINES: usize = 40;

static RESULT_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored").expect("regex")
});
static PANIC_RE: LazyLock<Regex> = LazyLock::new(|| {
    // 1.73+: `thread 'name' (id) panicked at src/lib.rs:16:9:`; older: `panicked at 'msg', src/lib.rs:16:9`
    Regex::new(r"panicked at (?:'(.*)', )?([^\s:]+):(\d+):(\d+):?$").expect("regex")
});
static RUSTC_ERROR_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^error(?:\[E\d+\])?: (.+)$").expect("regex"));
static RUSTC_ARROW_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*--> ([^\s:]+):(\d+):(\d+)$").expect("regex"));

/// The test named by libtest's `---- name stdout ----` (or `stderr`) section header.
fn section_name(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("---- ")?;
    let name = rest
        .strip_suffix(" stdout ----")
        .or_else(|| rest.strip_suffix(" stderr ----"))?;
    (!name.is_empty()).then_some(name)
}

#[derive(Debug, Deserialize)]
struct CargoMessage {
    reason: String,
    #[serde(default)]
    message: Option<Diagnostic>,
    #[serde(default)]
    success: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct Diagnostic {
    #[serde(default)]
    level: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    code: Option<DiagnosticCode>,
    #[serde(default)]
    spans: Vec<Span>,
    /// The `help:` and `note:` sub-diagnostics, with their suggested replacements.
    #[serde(default)]
    children: Vec<Diagnostic>,
}

#[derive(Debug, Deserialize)]
struct DiagnosticCode {
    code: String,
}

#[derive(Debug, Deserialize)]
struct Span {
    file_name: String,
    line_start: u32,
    column_start: u32,
    #[serde(default)]
    is_primary: bool,
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    suggested_replacement: Option<String>,
}

/// Most `help:`/`note:` lines kept per compile error.
const MAX_HINTS: usize = 4;

/// rustc's `help:` and `note:` lines of a diagnostic, each with its suggested code when it
/// has one: `help: consider importing this struct: `use std::collections::HashMap;``.
fn hint_lines(diag: &Diagnostic) -> Vec<String> {
    diag.children
        .iter()
        .filter(|c| matches!(c.level.as_str(), "help" | "note") && !c.message.is_empty())
        .take(MAX_HINTS)
        .map(|c| {
            let suggestion = c
                .spans
                .iter()
                .filter_map(|s| s.suggested_replacement.as_deref())
                .map(str::trim)
                .find(|s| !s.is_empty() && !s.contains('\n'));
            match suggestion {
                Some(code) => format!("{}: {}: `{code}`", c.level, c.message),
                None => format!("{}: {}", c.level, c.message),
            }
        })
        .collect()
}

/// Streaming parser of cargo + libtest output.
pub struct CargoParser<'a> {
    locator: &'a Locator,
    parsed: Parsed,
    section: Option<(String, Vec<String>)>,
    /// A human-format rustc error waiting for its `-->` line.
    pending_error: Option<String>,
    /// A human-format rustc error already located, open for its `help:`/`note:` lines until
    /// the blank line that ends it.
    open_error: Option<Failure>,
    /// `build-finished` reported failure.
    pub build_failed: bool,
}

impl<'a> CargoParser<'a> {
    /// A parser mapping paths through `locator`.
    pub fn new(locator: &'a Locator) -> CargoParser<'a> {
        CargoParser {
            locator,
            parsed: Parsed::default(),
            section: None,
            pending_error: None,
            open_error: None,
            build_failed: false,
        }
    }

    /// Feeds one line of stdout (or stderr: only human rustc errors matter there).
    pub fn line(&mut self, line: &str, sink: &mut dyn FailureSink) {
        if line.starts_with("{\"reason\":") {
            self.json(line, sink);
            return;
        }
        if line.starts_with("test result:")
            && let Some(caps) = RESULT_RE.captures(line)
        {
            self.close_section(sink);
            self.parsed.counts_known = true;
            self.parsed.counts.passed += caps[1].parse::<u64>().unwrap_or(0);
            self.parsed.counts.failed += caps[2].parse::<u64>().unwrap_or(0);
            self.parsed.counts.skipped += caps[3].parse::<u64>().unwrap_or(0);
            return;
        }
        if let Some(test) = section_name(line) {
            self.close_section(sink);
            self.section = Some((test.to_string(), Vec::new()));
            return;
        }
        if line == "failures:" || line.starts_with("running ") {
            self.close_section(sink);
            return;
        }
        if let Some((_, lines)) = &mut self.section {
            if lines.len() < MAX_SECTION_LINES {
                lines.push(line.to_string());
            }
            return;
        }
        // Human rustc diagnostics (plain `cargo test` without JSON).
        if self.open_error.is_some() && self.hint_line(line) {
            return;
        }
        self.flush_error(sink);
        if let Some(msg) = self.pending_error.take()
            && let Some(caps) = RUSTC_ARROW_RE.captures(line)
        {
            let mut f = Failure {
                test: "(compile)".into(),
                message: msg,
                kind: FailureKind::Compile,
                ..Failure::default()
            };
            f.file = self.locator.relative(&caps[1]);
            f.line = caps[2].parse().ok();
            f.column = caps[3].parse().ok();
            self.open_error = Some(f);
            return;
        }
        if line.starts_with("error")
            && let Some(caps) = RUSTC_ERROR_RE.captures(line)
        {
            let msg = caps[1].to_string();
            if !msg.starts_with("test failed")
                && !msg.contains("target failed")
                && !msg.starts_with("could not compile")
            {
                self.pending_error = Some(msg);
            }
        }
    }

    fn json(&mut self, line: &str, sink: &mut dyn FailureSink) {
        let Ok(msg) = serde_json::from_str::<CargoMessage>(line) else {
            return;
        };
        match msg.reason.as_str() {
            "build-finished" if msg.success == Some(false) => {
                self.build_failed = true;
            }
            "compiler-message" => {
                let Some(diag) = msg.message else { return };
                if diag.level != "error" {
                    return;
                }
                let primary = diag
                    .spans
                    .iter()
                    .find(|s| s.is_primary)
                    .or(diag.spans.first());
                let mut message = match &diag.code {
                    Some(code) => format!("error[{}]: {}", code.code, diag.message),
                    None => format!("error: {}", diag.message),
                };
                if let Some(label) = primary.and_then(|s| s.label.as_deref()) {
                    message.push_str(&format!(" ({label})"));
                }
                for hint in hint_lines(&diag) {
                    message.push('\n');
                    message.push_str(&hint);
                }
                let mut f = Failure {
                    test: "(compile)".into(),
                    message,
                    kind: FailureKind::Compile,
                    ..Failure::default()
                };
                if let Some(span) = primary {
                    f.file = self.locator.relative(&span.file_name);
                    if f.file.is_some() {
                        f.line = Some(span.line_start);
                        f.column = Some(span.column_start);
                    }
                }
                sink.failure(f);
            }
            _ => {}
        }
    }

    fn close_section(&mut self, sink: &mut dyn FailureSink) {
        let Some((test, lines)) = self.section.take() else {
            return;
        };
        let mut failure = Failure {
            test,
            ..Failure::default()
        };
        let mut message: Vec<&str> = Vec::new();
        let mut in_panic = false;
        for line in &lines {
            // The regex runs only on the panic line (a section also holds the backtrace).
            if let Some(caps) = line
                .contains("panicked at ")
                .then(|| PANIC_RE.captures(line))
                .flatten()
            {
                if let Some(file) = self.locator.relative(&caps[2]) {
                    failure.file = Some(file);
                    failure.line = caps[3].parse().ok();
                    failure.column = caps[4].parse().ok();
                }
                if let Some(m) = caps.get(1) {
                    message.push(m.as_str());
                }
                in_panic = true;
                continue;
            }
            if in_panic {
                if line.is_empty()
                    || line.starts_with("stack backtrace:")
                    || line.starts_with("note: ")
                {
                    in_panic = false;
                    continue;
                }
                message.push(line);
            }
        }
        if message.is_empty() {
            // No panic line (e.g. a test returning Err): keep what the test printed.
            message = lines
                .iter()
                .map(String::as_str)
                .filter(|l| !l.is_empty())
                .collect();
        }
        let text = message.join("\n");
        assertion_values(&text).apply(&mut failure);
        failure.message = text;
        // libtest names a test by its full path (`module::tests::name`): `--exact` selects it.
        failure.id = Some(failure.test.clone());
        sink.failure(failure);
    }

    /// Ends the stream and returns what was learned.
    pub fn finish(mut self, sink: &mut dyn FailureSink) -> Parsed {
        self.flush_error(sink);
        self.close_section(sink);
        self.parsed
    }

    /// Reads one line of an open human-format error: its code frame, `help:`/`note:` lines
    /// (`= help:` too) and the suggested code after a help (`1 + use std::…;`). False at the
    /// blank line or any other line that ends the error.
    fn hint_line(&mut self, line: &str) -> bool {
        static SUGGESTION_RE: LazyLock<Regex> =
            LazyLock::new(|| Regex::new(r"^\s*\d+\s*\+\s+(\S.*)$").expect("regex"));
        let Some(open) = self.open_error.as_mut() else {
            return false;
        };
        if line.trim().is_empty() {
            return false;
        }
        let t = line.trim_start();
        let t = t.strip_prefix("= ").unwrap_or(t);
        let hints = open.message.lines().count().saturating_sub(1);
        if t.starts_with("help:") || t.starts_with("note:") {
            if hints < MAX_HINTS {
                open.message.push('\n');
                open.message.push_str(t);
            }
            return true;
        }
        if let Some(caps) = SUGGESTION_RE.captures(line) {
            let last = open.message.lines().last().unwrap_or("");
            if last.starts_with("help:") && !last.ends_with('`') {
                open.message.push_str(&format!(": `{}`", caps[1].trim()));
            }
            return true;
        }
        // The code frame: `  |`, `2 |     code`, `  |     ^^^ label`, `...`.
        line.starts_with(' ') || line.starts_with(|c: char| c.is_ascii_digit()) || t == "..."
    }

    fn flush_error(&mut self, sink: &mut dyn FailureSink) {
        if let Some(f) = self.open_error.take() {
            sink.failure(f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn section_headers_name_their_test() {
        assert_eq!(
            section_name("---- calc::tests::adds stdout ----"),
            Some("calc::tests::adds")
        );
        assert_eq!(section_name("---- a stderr ----"), Some("a"));
        assert_eq!(
            section_name("---- a stdout ---- stdout ----"),
            Some("a stdout ----")
        );
        for not_a_header in [
            "----  stdout ----",
            "---- a stdout",
            "--- a stdout ----",
            "",
        ] {
            assert_eq!(section_name(not_a_header), None, "{not_a_header}");
        }
    }

    const FAIL_OUTPUT: &str = r#"{"reason":"compiler-artifact","fresh":true}
{"reason":"build-finished","success":true}

running 3 tests
test tests::adds_small_numbers ... ok
test tests::not_yet ... ignored
test tests::adds_large_numbers ... FAILED

failures:

---- tests::adds_large_numbers stdout ----

thread 'tests::adds_large_numbers' (2922) panicked at src/lib.rs:16:9:
assertion `left == right` failed: sum of 2 and 3
  left: 5
 right: 6
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace


failures:
    tests::adds_large_numbers

test result: FAILED. 1 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.14s

running 0 tests

test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s
"#;

    fn run(output: &str) -> (Parsed, Vec<Failure>, bool) {
        let locator = Locator::new(Path::new("/ws"));
        let mut failures = Vec::new();
        let mut sink = |f: Failure| failures.push(f);
        let mut p = CargoParser::new(&locator);
        for line in output.lines() {
            p.line(line, &mut sink);
        }
        let build_failed = p.build_failed;
        let parsed = p.finish(&mut sink);
        (parsed, failures, build_failed)
    }

    #[test]
    fn libtest_failure_with_location_and_values() {
        let (parsed, failures, build_failed) = run(FAIL_OUTPUT);
        assert!(!build_failed);
        assert!(parsed.counts_known);
        assert_eq!(
            (
                parsed.counts.passed,
                parsed.counts.failed,
                parsed.counts.skipped
            ),
            (1, 1, 1)
        );
        assert_eq!(failures.len(), 1);
        let f = &failures[0];
        assert_eq!(f.test, "tests::adds_large_numbers");
        assert_eq!(f.file.as_deref(), Some("src/lib.rs"));
        assert_eq!((f.line, f.column), (Some(16), Some(9)));
        assert!(f.message.contains("sum of 2 and 3"));
        // `assert_eq!(left, right)` names no expected side: kept as left and right.
        assert_eq!(f.left.as_deref(), Some("5"));
        assert_eq!(f.right.as_deref(), Some("6"));
        assert_eq!((&f.expected, &f.received), (&None, &None));
        assert_eq!(f.id.as_deref(), Some("tests::adds_large_numbers"));
    }

    #[test]
    fn old_panic_format() {
        let out = "---- t stdout ----\nthread 't' panicked at 'boom', src/main.rs:3:5\nnote: x\n\ntest result: FAILED. 0 passed; 1 failed; 0 ignored;";
        let (_, failures, _) = run(out);
        assert_eq!(failures[0].message, "boom");
        assert_eq!(failures[0].line, Some(3));
    }

    #[test]
    fn json_compile_error() {
        let out = r#"{"reason":"compiler-message","message":{"rendered":"x","level":"error","message":"cannot find value `undefined_value` in this scope","code":{"code":"E0425","explanation":"..."},"spans":[{"file_name":"src/lib.rs","line_start":2,"column_start":13,"is_primary":true,"label":"not found in this scope"}]}}
{"reason":"compiler-message","message":{"rendered":"x","level":"warning","message":"unused","spans":[]}}
{"reason":"build-finished","success":false}"#;
        let (parsed, failures, build_failed) = run(out);
        assert!(build_failed);
        assert!(!parsed.counts_known);
        assert_eq!(failures.len(), 1);
        assert_eq!(failures[0].kind, FailureKind::Compile);
        assert_eq!(failures[0].file.as_deref(), Some("src/lib.rs"));
        assert_eq!((failures[0].line, failures[0].column), (Some(2), Some(13)));
        assert!(
            failures[0]
                .message
                .starts_with("error[E0425]: cannot find value")
        );
    }

    #[test]
    fn human_compile_error() {
        let out = "error[E0425]: cannot find value `x` in this scope\n --> src/lib.rs:2:13\n  |\nerror: could not compile `f` (lib test) due to 1 previous error";
        let (_, failures, _) = run(out);
        assert_eq!(failures.len(), 1);
        assert_eq!(failures[0].line, Some(2));
    }
}
