//! `go test -json` (test2json events, one per line). Counts are the `pass` / `fail` / `skip`
//! events that name a test; a failing test's `output` events hold `    x_test.go:12: message`
//! lines, whose file is relative to the package directory (derived from the import path and the
//! module path in go.mod). Build errors (`./x.go:3:2: undefined: y`, on stderr or in
//! `build-output` events) become compile-kind failures.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use regex::Regex;
use serde::Deserialize;

use super::{FailureSink, Parsed};
use crate::model::{Failure, FailureKind};
use crate::sanitize::Locator;

/// Most output lines kept per running test.
const MAX_TEST_LINES: usize = 30;
/// Most tests buffered at once (parallel tests); beyond this, output is not kept.
const MAX_RUNNING: usize = 1024;
/// Most indented hint lines (`have (int)`, `want (int, int)`, notes) kept per build error.
const MAX_HINT_LINES: usize = 6;
/// Most parents remembered as failing through a subtest.
const MAX_FAILED_PARENTS: usize = 4096;

static GO_LOC_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s+([\w./-]+\.go):(\d+): (.*)$").expect("regex"));
static GO_BUILD_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^([\w./-]+\.go):(\d+):(\d+): (.+)$").expect("regex"));

#[derive(Debug, Deserialize)]
struct Event {
    #[serde(rename = "Action")]
    action: String,
    #[serde(rename = "Package", default)]
    package: String,
    #[serde(rename = "ImportPath", default)]
    import_path: String,
    #[serde(rename = "Test", default)]
    test: Option<String>,
    #[serde(rename = "Output", default)]
    output: Option<String>,
}

/// Streaming parser of `go test -json` output.
pub struct GoParser<'a> {
    locator: &'a Locator,
    module: Option<String>,
    running: HashMap<(String, String), Vec<String>>,
    /// Tests with a failed subtest (package, name): their own failure, when it says nothing
    /// more, is folded into the subtests'.
    failed_parents: HashSet<(String, String)>,
    /// The last build error, open for its indented hint lines.
    pending: Option<Failure>,
    parsed: Parsed,
}

impl<'a> GoParser<'a> {
    /// `go_mod` is the content of go.mod, used to map import paths to directories.
    pub fn new(locator: &'a Locator, go_mod: Option<&str>) -> GoParser<'a> {
        let module = go_mod.and_then(|text| {
            text.lines()
                .find_map(|l| l.trim().strip_prefix("module "))
                .map(|m| m.trim().trim_matches('"').to_string())
        });
        GoParser {
            locator,
            module,
            running: HashMap::new(),
            failed_parents: HashSet::new(),
            pending: None,
            parsed: Parsed::default(),
        }
    }

    fn package_dir(&self, package: &str) -> String {
        match &self.module {
            Some(m) if package == m => String::new(),
            Some(m) => package
                .strip_prefix(m.as_str())
                .and_then(|r| r.strip_prefix('/'))
                .map(|r| format!("{r}/"))
                .unwrap_or_default(),
            None => String::new(),
        }
    }

    /// Feeds one stdout line.
    pub fn line(&mut self, line: &str, sink: &mut dyn FailureSink) {
        let Ok(ev) = serde_json::from_str::<Event>(line) else {
            // Not JSON: maybe a build error printed by an older go.
            self.build_line(line, sink);
            return;
        };
        // A test2json stream was read: its counts (possibly zero) are known.
        self.parsed.counts_known = true;
        if ev.action == "build-output" {
            if let Some(out) = &ev.output {
                for l in out.lines() {
                    self.build_line(l, sink);
                }
            }
            return;
        }
        self.flush(sink);
        let Some(test) = ev.test else {
            if ev.action == "output"
                && let Some(out) = ev.output.as_deref()
                && out.starts_with("FAIL")
                && out.contains("[setup failed]")
            {
                self.parsed.report_problem = Some(out.trim().to_string());
            }
            let _ = ev.import_path;
            return;
        };
        let key = (ev.package.clone(), test.clone());
        match ev.action.as_str() {
            "run" if self.running.len() < MAX_RUNNING => {
                self.running.insert(key, Vec::new());
            }
            "output" => {
                if let (Some(buf), Some(out)) = (self.running.get_mut(&key), ev.output)
                    && buf.len() < MAX_TEST_LINES
                {
                    buf.push(out.trim_end().to_string());
                }
            }
            "pass" => {
                self.parsed.counts_known = true;
                self.parsed.counts.passed += 1;
                self.running.remove(&key);
            }
            "skip" => {
                self.parsed.counts_known = true;
                self.parsed.counts.skipped += 1;
                self.running.remove(&key);
            }
            "fail" => {
                self.parsed.counts_known = true;
                self.parsed.counts.failed += 1;
                let lines = self.running.remove(&key).unwrap_or_default();
                let dir = self.package_dir(&ev.package);
                let mut failure = Failure {
                    test,
                    ..Failure::default()
                };
                let mut message = Vec::new();
                for l in &lines {
                    let t = l.trim_start();
                    if t.starts_with("=== ") || t.starts_with("--- ") {
                        continue;
                    }
                    if let Some(caps) = GO_LOC_RE.captures(l) {
                        if failure.file.is_none() {
                            failure.file = self.locator.relative(&format!("{dir}{}", &caps[1]));
                            failure.line = caps[2].parse().ok();
                        }
                        message.push(caps[3].to_string());
                    } else if !l.trim().is_empty() {
                        message.push(l.trim().to_string());
                    }
                }
                let own = (ev.package.clone(), failure.test.clone());
                if let Some((parent, _)) = failure.test.rsplit_once('/')
                    && self.failed_parents.len() < MAX_FAILED_PARENTS
                {
                    self.failed_parents
                        .insert((ev.package.clone(), parent.to_string()));
                }
                if message.is_empty() && self.failed_parents.contains(&own) {
                    // Failed only through its subtests, which carry the messages.
                    return;
                }
                failure.message = message.join("\n");
                failure.id = Some(self.test_id(&ev.package, &failure.test));
                sink.failure(failure);
            }
            _ => {}
        }
    }

    /// A go test's full identity: `./pkg/dir::TestX/sub` (`.::TestX` at the module root; the
    /// import path when go.mod is unknown).
    fn test_id(&self, package: &str, test: &str) -> String {
        let pkg = match &self.module {
            Some(_) => {
                let dir = self.package_dir(package);
                let dir = dir.trim_end_matches('/');
                if dir.is_empty() {
                    ".".to_string()
                } else {
                    format!("./{dir}")
                }
            }
            None => package.to_string(),
        };
        format!("{pkg}::{test}")
    }

    /// Feeds one line of stderr (or build output). A build or vet error's indented lines
    /// (`have (int)` / `want (int, int)`, notes) stay with it.
    pub fn build_line(&mut self, line: &str, sink: &mut dyn FailureSink) {
        if line.starts_with(['\t', ' '])
            && !line.trim().is_empty()
            && let Some(p) = self.pending.as_mut()
        {
            if p.message.lines().count() <= MAX_HINT_LINES {
                p.message.push('\n');
                p.message.push_str(line.trim());
            }
            return;
        }
        self.flush(sink);
        let trimmed = line.trim_start();
        let trimmed = trimmed.strip_prefix("vet: ").unwrap_or(trimmed);
        if let Some(caps) = GO_BUILD_RE.captures(trimmed) {
            let mut f = Failure {
                test: "(compile)".into(),
                message: caps[4].to_string(),
                kind: FailureKind::Compile,
                ..Failure::default()
            };
            f.file = self.locator.relative(&caps[1]);
            if f.file.is_some() {
                f.line = caps[2].parse().ok();
                f.column = caps[3].parse().ok();
            }
            self.pending = Some(f);
        }
    }

    fn flush(&mut self, sink: &mut dyn FailureSink) {
        if let Some(f) = self.pending.take() {
            sink.failure(f);
        }
    }

    /// Ends the stream (a build error still open goes to `sink`).
    pub fn finish(mut self, sink: &mut dyn FailureSink) -> Parsed {
        self.flush(sink);
        self.parsed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn events_counts_and_locations() {
        let out = r#"{"Action":"start","Package":"example.com/m/calc"}
{"Action":"run","Package":"example.com/m/calc","Test":"TestAdd"}
{"Action":"output","Package":"example.com/m/calc","Test":"TestAdd","Output":"=== RUN   TestAdd\n"}
{"Action":"output","Package":"example.com/m/calc","Test":"TestAdd","Output":"    calc_test.go:9: add(2, 3) = 5, want 6\n"}
{"Action":"output","Package":"example.com/m/calc","Test":"TestAdd","Output":"--- FAIL: TestAdd (0.00s)\n"}
{"Action":"fail","Package":"example.com/m/calc","Test":"TestAdd","Elapsed":0}
{"Action":"run","Package":"example.com/m/calc","Test":"TestSub"}
{"Action":"pass","Package":"example.com/m/calc","Test":"TestSub","Elapsed":0}
{"Action":"skip","Package":"example.com/m/calc","Test":"TestLater","Elapsed":0}
{"Action":"fail","Package":"example.com/m/calc","Elapsed":0.01}"#;
        let locator = Locator::new(Path::new("/ws"));
        let mut failures = Vec::new();
        let mut sink = |f: Failure| failures.push(f);
        let mut p = GoParser::new(&locator, Some("module example.com/m\n\ngo 1.22\n"));
        for l in out.lines() {
            p.line(l, &mut sink);
        }
        let parsed = p.finish(&mut sink);
        assert_eq!(
            (
                parsed.counts.passed,
                parsed.counts.failed,
                parsed.counts.skipped
            ),
            (1, 1, 1)
        );
        assert_eq!(failures[0].file.as_deref(), Some("calc/calc_test.go"));
        assert_eq!(failures[0].line, Some(9));
        assert_eq!(failures[0].message, "add(2, 3) = 5, want 6");
    }

    #[test]
    fn build_errors() {
        let locator = Locator::new(Path::new("/ws"));
        let mut failures = Vec::new();
        let mut sink = |f: Failure| failures.push(f);
        let mut p = GoParser::new(&locator, None);
        p.build_line("# example.com/m/calc", &mut sink);
        p.build_line("./calc.go:4:9: undefined: y", &mut sink);
        p.line(
            r#"{"ImportPath":"example.com/m/calc","Action":"build-output","Output":"calc/calc.go:5:1: syntax error\n"}"#,
            &mut sink,
        );
        p.finish(&mut sink);
        assert_eq!(failures.len(), 2);
        assert_eq!(failures[0].file.as_deref(), Some("calc.go"));
        assert_eq!(failures[1].file.as_deref(), Some("calc/calc.go"));
        assert_eq!(failures[1].kind, FailureKind::Compile);
    }
}
