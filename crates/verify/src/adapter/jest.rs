//! jest's `--json --outputFile` result: counts from `numPassedTests` / `numFailedTests` /
//! `numPendingTests` + `numTodoTests`, failures from `assertionResults[].failureMessages`, and
//! suites that failed to run (syntax errors) from `testResults[].message`.

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use serde::Deserialize;

use super::{FailureSink, MAX_REPORT_BYTES, Parsed};
use crate::detect::FileSource;
use crate::model::{Failure, FailureKind};
use crate::sanitize::{Locator, assertion_values};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct JestReport {
    #[serde(default)]
    num_passed_tests: u64,
    #[serde(default)]
    num_failed_tests: u64,
    #[serde(default)]
    num_pending_tests: u64,
    #[serde(default)]
    num_todo_tests: u64,
    #[serde(default)]
    num_runtime_error_test_suites: u64,
    #[serde(default)]
    test_results: Vec<SuiteResult>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SuiteResult {
    #[serde(default)]
    name: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    assertion_results: Vec<AssertionResult>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AssertionResult {
    #[serde(default)]
    full_name: String,
    #[serde(default)]
    ancestor_titles: Vec<String>,
    #[serde(default)]
    title: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    failure_messages: Vec<String>,
    #[serde(default)]
    location: Option<TestLocation>,
}

#[derive(Debug, Deserialize)]
struct TestLocation {
    line: u32,
}

/// Parses jest's JSON result file.
pub fn parse(path: &Path, locator: &Locator, sink: &mut dyn FailureSink) -> Parsed {
    let mut parsed = Parsed::default();
    let report: JestReport = match std::fs::metadata(path) {
        Err(_) => {
            parsed.report_missing = true;
            parsed.report_problem = Some("jest wrote no JSON result file".into());
            return parsed;
        }
        Ok(m) if m.len() > MAX_REPORT_BYTES => {
            parsed.report_missing = true;
            parsed.report_problem = Some(format!(
                "the jest result file is {} bytes, over the {} byte limit",
                m.len(),
                MAX_REPORT_BYTES
            ));
            return parsed;
        }
        Ok(_) => match File::open(path)
            .map_err(|e| e.to_string())
            .and_then(|f| serde_json::from_reader(BufReader::new(f)).map_err(|e| e.to_string()))
        {
            Ok(r) => r,
            Err(e) => {
                parsed.report_missing = true;
                parsed.report_problem = Some(format!("the jest result file did not parse: {e}"));
                return parsed;
            }
        },
    };
    read_report(report, locator, &mut parsed, sink);
    parsed
}

/// Parses jest's JSON result from a string.
pub fn parse_str(json: &str, locator: &Locator, sink: &mut dyn FailureSink) -> Parsed {
    let mut parsed = Parsed::default();
    match serde_json::from_str::<JestReport>(json) {
        Ok(report) => read_report(report, locator, &mut parsed, sink),
        Err(e) => {
            parsed.report_missing = true;
            parsed.report_problem = Some(format!("the jest result file did not parse: {e}"));
        }
    }
    parsed
}

fn read_report(
    report: JestReport,
    locator: &Locator,
    parsed: &mut Parsed,
    sink: &mut dyn FailureSink,
) {
    parsed.counts_known = true;
    parsed.counts.passed = report.num_passed_tests;
    parsed.counts.failed = report.num_failed_tests;
    parsed.counts.skipped = report.num_pending_tests + report.num_todo_tests;
    let _ = report.num_runtime_error_test_suites;
    for suite in report.test_results {
        let suite_file = locator.relative(&suite.name);
        let mut any_failed = false;
        for a in suite.assertion_results {
            if a.status != "failed" {
                continue;
            }
            any_failed = true;
            let text = a.failure_messages.join("\n");
            let id = test_id(suite_file.as_deref(), &a.ancestor_titles, &a.title);
            let mut failure = Failure {
                test: full_name(&a),
                message: strip_error_prefix(&text),
                id,
                ..Failure::default()
            };
            assertion_values(&text).apply(&mut failure);
            locator.locate(&mut failure, &text, false);
            if failure.file.is_none() {
                failure.file = suite_file.clone();
                failure.line = a.location.map(|l| l.line);
            }
            sink.failure(failure);
        }
        if !any_failed && suite.status == "failed" && !suite.message.trim().is_empty() {
            // The suite failed to run: a syntax error or a throw at load time.
            let message: String = suite
                .message
                .lines()
                .filter(|l| !l.contains("Test suite failed to run"))
                .collect::<Vec<_>>()
                .join("\n");
            let mut failure = Failure {
                test: suite_file.clone().unwrap_or_else(|| suite.name.clone()),
                message: message.clone(),
                kind: FailureKind::Compile,
                ..Failure::default()
            };
            locator.locate(&mut failure, &message, false);
            sink.failure(failure);
        }
    }
}

/// The major version of the project's installed jest (`node_modules/jest`, else
/// `node_modules/jest-cli`), when it can be read.
pub fn installed_major(src: &dyn FileSource) -> Option<u32> {
    [
        "node_modules/jest/package.json",
        "node_modules/jest-cli/package.json",
    ]
    .iter()
    .find_map(|p| {
        let json: serde_json::Value = serde_json::from_slice(&src.read(p)?).ok()?;
        let version = json.get("version")?.as_str()?;
        version.split('.').next()?.parse().ok()
    })
}

/// jest's `fullName` (absent before jest 21): the describe titles and the title, space-joined.
/// The name of the per-workspace cache in which jest keeps its transform and haste-map caches
/// across verifications ([`use_cache`]).
pub const CACHE_NAME: &str = "jest";

/// Points a jest run at the workspace's jest cache when the run binds one (at
/// [`airlock_sandbox::CACHE_ROOT`]`/`[`CACHE_NAME`]): jest has no variable for its cache
/// directory, whose default lies in the run's fresh `/tmp`, so `--cacheDirectory` goes right
/// after airlock's own report flag, in the argv or in the script step it was spliced into.
pub fn use_cache(plan: &mut super::Plan, binds: &[airlock_sandbox::CacheBind]) {
    if plan.kind != crate::model::RunnerKind::Jest {
        return;
    }
    let inside = Path::new(airlock_sandbox::CACHE_ROOT).join(CACHE_NAME);
    if !binds.iter().any(|b| b.inside == inside) {
        return;
    }
    let flag = format!("--cacheDirectory={}", inside.display());
    let report = format!("/{}/jest.json", super::REPORT_DIR);
    let is_report = |a: &std::ffi::OsStr| {
        a.to_str()
            .is_some_and(|a| a.starts_with("--outputFile=") && a.ends_with(&report))
    };
    if let Some(at) = plan.argv.iter().position(|a| is_report(a)) {
        plan.argv.insert(at + 1, flag.into());
        return;
    }
    // `sh -c SCRIPT`: after the report flag's word (quoted or not) in the script.
    if plan.argv.len() >= 3 && plan.argv[0] == "sh" && plan.argv[1] == "-c" {
        let Some(script) = plan.argv[2].to_str() else {
            return;
        };
        if let Some(i) = script.find(&report) {
            let mut end = i + report.len();
            if script[end..].starts_with('\'') {
                end += 1;
            }
            let updated = format!("{} {flag}{}", &script[..end], &script[end..]);
            plan.argv[2] = updated.into();
        }
    }
}

fn full_name(a: &AssertionResult) -> String {
    if !a.full_name.is_empty() {
        return a.full_name.clone();
    }
    let mut parts: Vec<&str> = a.ancestor_titles.iter().map(String::as_str).collect();
    parts.push(&a.title);
    parts.join(" ")
}

/// A jest test's full identity: `file > describe > … > title` (what `verify --only` takes).
fn test_id(file: Option<&str>, ancestors: &[String], title: &str) -> Option<String> {
    if title.is_empty() {
        return None;
    }
    let mut parts: Vec<&str> = file.into_iter().collect();
    parts.extend(ancestors.iter().map(String::as_str));
    parts.push(title);
    Some(parts.join(" > "))
}

/// jest prefixes assertion messages with `Error: `; the matcher text after it is what matters.
fn strip_error_prefix(text: &str) -> String {
    text.strip_prefix("Error: ").unwrap_or(text).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RunnerKind;

    struct Files(Vec<(&'static str, &'static str)>);

    impl FileSource for Files {
        fn read(&self, rel: &str) -> Option<Vec<u8>> {
            self.0
                .iter()
                .find(|(p, _)| *p == rel)
                .map(|(_, t)| t.as_bytes().to_vec())
        }
        fn exists(&self, rel: &str) -> bool {
            self.0.iter().any(|(p, _)| *p == rel)
        }
    }

    /// The cache flag goes right after airlock's report flag: in the argv, in a script step
    /// where the flag was spliced bare or quoted, and nowhere without the cache's bind.
    #[test]
    fn the_jest_cache_is_passed_after_the_report_flag() {
        let bind =
            airlock_sandbox::CacheBind::named("/host/ws/.airlock/cache/verify/jest", CACHE_NAME);
        let cache = "--cacheDirectory=/var/cache/airlock/jest";
        let plan = |argv: &[&str]| crate::adapter::test_plan(RunnerKind::Jest, argv);
        let report = "--outputFile=/ws/.airlock-verify/jest.json";
        let mut p = plan(&["jest", "--ci", "--json", report, "--watchAll=false"]);
        use_cache(&mut p, std::slice::from_ref(&bind));
        assert_eq!(p.argv[4], cache);
        assert_eq!(p.argv[3], report);

        let script = format!("tsc && jest --ci {report} --watchAll=false && echo done");
        let mut p = plan(&["sh", "-c", &script]);
        use_cache(&mut p, std::slice::from_ref(&bind));
        assert_eq!(
            p.argv[2],
            format!("tsc && jest --ci {report} {cache} --watchAll=false && echo done").as_str()
        );

        let quoted = "jest '--outputFile=/my ws/.airlock-verify/jest.json' --ci";
        let mut p = plan(&["sh", "-c", quoted]);
        use_cache(&mut p, std::slice::from_ref(&bind));
        assert_eq!(
            p.argv[2],
            format!("jest '--outputFile=/my ws/.airlock-verify/jest.json' {cache} --ci").as_str()
        );

        let mut p = plan(&["jest", report]);
        use_cache(&mut p, &[]);
        assert_eq!(p.argv.len(), 2);
    }

    fn jest_flags(version: &'static str) -> Vec<String> {
        let files = Files(vec![
            ("package.json", r#"{"devDependencies":{"jest":"*"}}"#),
            ("node_modules/.bin/jest", ""),
            ("node_modules/jest/package.json", version),
        ]);
        let plan = crate::adapter::plan(RunnerKind::Jest, None, Path::new("/ws"), &files);
        plan.argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn flags_the_installed_jest_does_not_know_are_left_out() {
        let old = jest_flags(r#"{"version":"20.0.4"}"#);
        assert!(old.contains(&"--ci".to_string()), "{old:?}");
        assert!(
            !old.contains(&"--testLocationInResults".to_string()),
            "{old:?}"
        );
        assert!(!old.contains(&"--passWithNoTests".to_string()), "{old:?}");
        let v21 = jest_flags(r#"{"version":"21.2.1"}"#);
        assert!(
            v21.contains(&"--testLocationInResults".to_string()),
            "{v21:?}"
        );
        assert!(!v21.contains(&"--passWithNoTests".to_string()), "{v21:?}");
        for v in [r#"{"version":"29.7.0"}"#, "not json"] {
            let new = jest_flags(v);
            assert!(
                new.contains(&"--testLocationInResults".to_string()),
                "{new:?}"
            );
            assert!(new.contains(&"--passWithNoTests".to_string()), "{new:?}");
        }
    }

    #[test]
    fn a_result_without_full_names_names_tests_by_their_titles() {
        // jest 20 writes neither `fullName` nor `ancestorTitles`.
        let json = r#"{"numFailedTests":1,"numPassedTests":0,"testResults":[
            {"name":"/ws/__tests__/src/propName-test.js","status":"failed","message":"",
             "assertionResults":[{"status":"failed","title":"should return correct name",
               "failureMessages":["AssertionError: 'x' == 'foo'\n    at Object.<anonymous> (/ws/__tests__/src/propName-test.js:31:12)"]}]}]}"#;
        let mut failures = Vec::new();
        parse_str(json, &Locator::new(Path::new("/ws")), &mut |f| {
            failures.push(f)
        });
        assert_eq!(failures[0].test, "should return correct name");
        assert_eq!(
            failures[0].id.as_deref(),
            Some("__tests__/src/propName-test.js > should return correct name")
        );
        assert_eq!(failures[0].line, Some(31));
    }

    #[test]
    fn failures_and_suite_errors() {
        let json = r#"{"numFailedTests":1,"numPassedTests":1,"numPendingTests":1,"numTodoTests":0,
          "testResults":[
            {"name":"/ws/__tests__/math.test.js","status":"failed","message":"",
             "assertionResults":[
               {"fullName":"add adds small numbers","status":"passed","failureMessages":[]},
               {"fullName":"add adds large numbers","status":"failed","location":{"line":7,"column":3},
                "failureMessages":["Error: expect(received).toBe(expected) // Object.is equality\n\nExpected: 6\nReceived: 5\n    at Object.toBe (/ws/__tests__/math.test.js:8:23)\n    at Promise.then.completed (/ws/node_modules/jest-circus/build/utils.js:298:28)"]}]},
            {"name":"/ws/__tests__/bad.test.js","status":"failed",
             "message":"  ● Test suite failed to run\n\n    SyntaxError: /ws/__tests__/bad.test.js: Unexpected token, expected \",\" (5:28)\n\n    > 5 |     expect(add(2, 2)).toBe(4;\n","assertionResults":[]}]}"#;
        let mut failures = Vec::new();
        let parsed = parse_str(json, &Locator::new(Path::new("/ws")), &mut |f| {
            failures.push(f)
        });
        assert_eq!(
            (
                parsed.counts.passed,
                parsed.counts.failed,
                parsed.counts.skipped
            ),
            (1, 1, 1)
        );
        assert_eq!(failures.len(), 2);
        assert_eq!(failures[0].test, "add adds large numbers");
        assert_eq!(failures[0].file.as_deref(), Some("__tests__/math.test.js"));
        assert_eq!(failures[0].line, Some(8));
        assert_eq!(failures[0].expected.as_deref(), Some("6"));
        assert_eq!(
            failures[0].stack.len(),
            1,
            "node_modules frames are trimmed"
        );
        assert_eq!(failures[1].kind, FailureKind::Compile);
        assert_eq!(failures[1].file.as_deref(), Some("__tests__/bad.test.js"));
        assert_eq!(failures[1].line, Some(5));
        assert!(failures[1].message.contains("SyntaxError"));
    }
}
