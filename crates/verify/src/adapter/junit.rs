//! JUnit XML (node:test, vitest, pytest, any `junit` command), read with junit-parser.
//!
//! Counts come from the test cases themselves (node's reporter puts its totals in comments).
//! A case whose name is its own file (vitest, node) or a pytest collection error is a load
//! failure: the file did not parse, so it is reported as a compile-kind failure.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use junit_parser::{TestCase, TestStatus, TestSuite};

use super::{FailureSink, MAX_REPORT_BYTES, Parsed};
use crate::model::{Failure, FailureKind};
use crate::sanitize::{Locator, assertion_values, clean_message};

/// Parses the JUnit file at `path`. A missing or unreadable file sets `report_missing`.
pub fn parse(
    path: &Path,
    locator: &Locator,
    innermost_last: bool,
    sink: &mut dyn FailureSink,
) -> Parsed {
    let mut parsed = Parsed::default();
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(_) => {
            parsed.report_missing = true;
            parsed.report_problem = Some("the runner wrote no JUnit report".into());
            return parsed;
        }
    };
    if meta.len() > MAX_REPORT_BYTES {
        parsed.report_missing = true;
        parsed.report_problem = Some(format!(
            "the JUnit report is {} bytes, over the {} byte limit",
            meta.len(),
            MAX_REPORT_BYTES
        ));
        return parsed;
    }
    let mut xml = String::new();
    if let Err(e) = File::open(path).and_then(|f| BufReader::new(f).read_to_string(&mut xml)) {
        parsed.report_missing = true;
        parsed.report_problem = Some(format!("the JUnit report could not be read: {e}"));
        return parsed;
    }
    let suites = match parse_document(&xml) {
        Ok(s) => s,
        Err(e) => {
            parsed.report_missing = true;
            parsed.report_problem = Some(format!("the JUnit report did not parse: {e}"));
            return parsed;
        }
    };
    parsed.counts_known = true;
    for suite in &suites.suites {
        walk(suite, locator, innermost_last, &mut parsed, sink);
    }
    parsed
}

/// Parses JUnit XML from a string (tests and benchmarks).
pub fn parse_str(
    xml: &str,
    locator: &Locator,
    innermost_last: bool,
    sink: &mut dyn FailureSink,
) -> Parsed {
    let mut parsed = Parsed::default();
    match parse_document(xml) {
        Ok(suites) => {
            parsed.counts_known = true;
            for suite in &suites.suites {
                walk(suite, locator, innermost_last, &mut parsed, sink);
            }
        }
        Err(e) => {
            parsed.report_missing = true;
            parsed.report_problem = Some(format!("the JUnit report did not parse: {e}"));
        }
    }
    parsed
}

/// junit-parser ignores test cases placed directly under a `<testsuites>` root (node's reporter
/// does that for top-level tests), so the root is renamed to `<testsuite>`: its cases become
/// cases and its suites nested suites.
fn parse_document(xml: &str) -> Result<junit_parser::TestSuites, junit_parser::Error> {
    let open = xml.find("<testsuites");
    let close = xml.rfind("</testsuites>");
    let rewritten;
    let text = match open {
        Some(start) => {
            let mut s = String::with_capacity(xml.len());
            s.push_str(&xml[..start]);
            s.push_str("<testsuite");
            let after = start + "<testsuites".len();
            match close {
                Some(end) if end > after => {
                    s.push_str(&xml[after..end]);
                    s.push_str("</testsuite>");
                    s.push_str(&xml[end + "</testsuites>".len()..]);
                }
                _ => s.push_str(&xml[after..]),
            }
            rewritten = s;
            rewritten.as_str()
        }
        None => xml,
    };
    let text = entities_to_cdata(text);
    junit_parser::from_reader(std::io::Cursor::new(text.as_bytes()))
}

/// junit-parser (on quick-xml 0.42) drops entity references inside element text, so
/// `TestContext.&lt;anonymous&gt;` would lose its brackets and split across lines. Text nodes
/// holding entities are decoded here and wrapped in CDATA, which it keeps verbatim.
fn entities_to_cdata(xml: &str) -> String {
    let mut out = String::with_capacity(xml.len() + xml.len() / 16);
    let mut rest = xml;
    while !rest.is_empty() {
        let (chunk, tail) = if rest.starts_with("<!--") {
            split_after(rest, "-->")
        } else if rest.starts_with("<![CDATA[") {
            split_after(rest, "]]>")
        } else if rest.starts_with('<') {
            split_tag(rest)
        } else {
            let end = rest.find('<').unwrap_or(rest.len());
            let (text, tail) = rest.split_at(end);
            if text.contains('&') {
                out.push_str("<![CDATA[");
                out.push_str(&decode_entities(text).replace("]]>", "]]]]><![CDATA[>"));
                out.push_str("]]>");
            } else {
                out.push_str(text);
            }
            rest = tail;
            continue;
        };
        out.push_str(chunk);
        rest = tail;
    }
    out
}

fn split_after<'s>(s: &'s str, end: &str) -> (&'s str, &'s str) {
    match s.find(end) {
        Some(i) => s.split_at(i + end.len()),
        None => (s, ""),
    }
}

/// A tag up to its closing `>`, skipping `>` inside quoted attribute values.
fn split_tag(s: &str) -> (&str, &str) {
    let mut quote: Option<u8> = None;
    for (i, b) in s.bytes().enumerate() {
        match (quote, b) {
            (None, b'"' | b'\'') => quote = Some(b),
            (Some(q), _) if q == b => quote = None,
            (None, b'>') => return s.split_at(i + 1),
            _ => {}
        }
    }
    (s, "")
}

fn decode_entities(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let after = &rest[amp + 1..];
        let decoded = after.find(';').filter(|&semi| semi <= 10).and_then(|semi| {
            let name = &after[..semi];
            let ch = match name {
                "lt" => Some('<'),
                "gt" => Some('>'),
                "amp" => Some('&'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                _ => {
                    let num = name.strip_prefix('#')?;
                    let code = match num.strip_prefix('x').or_else(|| num.strip_prefix('X')) {
                        Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                        None => num.parse().ok()?,
                    };
                    char::from_u32(code)
                }
            }?;
            Some((ch, semi))
        });
        match decoded {
            Some((ch, semi)) => {
                out.push(ch);
                rest = &after[semi + 1..];
            }
            None => {
                out.push('&');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn walk(
    suite: &TestSuite,
    locator: &Locator,
    innermost_last: bool,
    parsed: &mut Parsed,
    sink: &mut dyn FailureSink,
) {
    for case in &suite.cases {
        match &case.status {
            TestStatus::Success => parsed.counts.passed += 1,
            TestStatus::Skipped(_) => parsed.counts.skipped += 1,
            TestStatus::Failure(f) => {
                parsed.counts.failed += 1;
                sink.failure(failure_of(
                    case,
                    &f.message,
                    &f.text,
                    false,
                    locator,
                    innermost_last,
                ));
            }
            TestStatus::Error(e) => {
                parsed.counts.failed += 1;
                let collection = e.message.contains("collection failure");
                sink.failure(failure_of(
                    case,
                    &e.message,
                    &e.text,
                    collection,
                    locator,
                    innermost_last,
                ));
            }
        }
    }
    for inner in &suite.suites {
        walk(inner, locator, innermost_last, parsed, sink);
    }
}

fn failure_of(
    case: &TestCase,
    message: &str,
    text: &str,
    collection_error: bool,
    locator: &Locator,
    innermost_last: bool,
) -> Failure {
    let name = if case.original_name.is_empty() {
        case.name.clone()
    } else {
        case.original_name.clone()
    };
    let looks_like_file =
        |s: &str| s.starts_with('/') && !s.contains(' ') && Path::new(s).extension().is_some();
    let own_file = case.classname.as_deref() == Some(name.as_str()) || looks_like_file(&name);
    let kind = if collection_error || own_file {
        FailureKind::Compile
    } else {
        FailureKind::Test
    };
    let (body, pytest_lines) = message_body(text);
    let message = if body.trim().is_empty() {
        clean_message(message)
    } else {
        clean_message(&body)
    };
    // pytest's `E` lines are its assertion message; the rest of its text is quoted source,
    // whose `assert` lines are no statement about values.
    let values = if pytest_lines {
        assertion_values(&body)
    } else {
        assertion_values(text)
    };
    let mut failure = Failure {
        test: locator.relative(&name).unwrap_or_else(|| name.clone()),
        file: case.file.clone(),
        line: case.line.and_then(|l| u32::try_from(l).ok()),
        message,
        kind,
        ..Failure::default()
    };
    values.apply(&mut failure);
    locator.locate(&mut failure, text, innermost_last);
    if kind == FailureKind::Test {
        let classname = case.classname.as_deref().unwrap_or("");
        failure.id = if innermost_last {
            pytest_node_id(
                classname,
                &name,
                &locator.frames(text),
                failure.file.as_deref(),
            )
        } else if looks_like_source_file(classname) {
            // vitest: the case's classname is its file, its name the describe chain.
            Some(format!("{classname} > {name}"))
        } else if classname == "test" {
            // node:test's reporter: the name is what `--test-name-pattern` matches.
            Some(name)
        } else {
            None
        };
    }
    failure
}

fn looks_like_source_file(s: &str) -> bool {
    !s.is_empty()
        && !s.contains(' ')
        && Path::new(s)
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.chars().all(|c| c.is_ascii_alphanumeric()))
}

/// A pytest node id (`tests/test_a.py::TestX::test_y[p1]`) from the JUnit classname
/// (`tests.test_a.TestX`) and name (`test_y[p1]`): the longest dotted prefix of the classname
/// that names a file of the traceback (or the failure's file) is the module, the rest its
/// class chain. Without such a file, the leading lower-case parts are taken as the module.
fn pytest_node_id(
    classname: &str,
    name: &str,
    frames: &[crate::sanitize::Location],
    file: Option<&str>,
) -> Option<String> {
    if classname.is_empty() || name.is_empty() {
        return None;
    }
    let parts: Vec<&str> = classname.split('.').collect();
    // The workspace-relative file a module path names: itself, or a traceback file ending in
    // it (pytest's rootdir below the workspace root).
    let file_of = |cand: &str| -> Option<String> {
        let suffix = format!("/{cand}");
        file.into_iter()
            .chain(frames.iter().map(|f| f.file.as_str()))
            .find(|f| *f == cand || f.ends_with(&suffix))
            .map(str::to_string)
    };
    let found = (1..=parts.len())
        .rev()
        .find_map(|k| file_of(&format!("{}.py", parts[..k].join("/"))).map(|f| (k, f)));
    let (split, module_file) = match found {
        Some(hit) => hit,
        None => {
            let classes = parts
                .iter()
                .rev()
                .take_while(|p| p.starts_with(|c: char| c.is_ascii_uppercase()))
                .count();
            if classes >= parts.len() {
                return None;
            }
            let split = parts.len() - classes;
            (split, format!("{}.py", parts[..split].join("/")))
        }
    };
    let mut id = module_file;
    for class in &parts[split..] {
        id.push_str("::");
        id.push_str(class);
    }
    id.push_str("::");
    id.push_str(name);
    Some(id)
}

/// The assertion part of a failure text: node's `cause:` block, pytest's `E ` lines, or the
/// text up to its first stack frame; and whether it was pytest's `E` lines.
fn message_body(text: &str) -> (String, bool) {
    if let Some(idx) = text.find("cause: ") {
        let cause = &text[idx + "cause: ".len()..];
        return (cut_at_frames(cause), false);
    }
    let e_lines: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("E ").or_else(|| (l == "E").then_some("")))
        .collect();
    if !e_lines.is_empty() {
        return (e_lines.join("\n"), true);
    }
    (cut_at_frames(text), false)
}

fn cut_at_frames(text: &str) -> String {
    let mut out = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("at ") || t.starts_with("❯ ") {
            break;
        }
        out.push(line);
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(xml: &str, root: &str, innermost_last: bool) -> (Parsed, Vec<Failure>) {
        let mut failures = Vec::new();
        let parsed = parse_str(
            xml,
            &Locator::new(Path::new(root)),
            innermost_last,
            &mut |f| failures.push(f),
        );
        (parsed, failures)
    }

    #[test]
    fn node_junit_with_cause_block() {
        let xml = r#"<?xml version="1.0" encoding="utf-8"?>
<testsuites>
	<testcase name="adds small numbers" time="0.000801" classname="test"/>
	<testcase name="adds large numbers" time="0.001001" classname="test" failure="x">
		<failure type="testCodeFailure" message="Expected values to be strictly equal:5 !== 6">
[Error [ERR_TEST_FAILURE]: Expected values to be strictly equal:

5 !== 6
] {
  code: 'ERR_TEST_FAILURE',
  cause: AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:
  
  5 !== 6
  
      at TestContext.&lt;anonymous> (file:///ws/test/math.test.js:10:10)
      at Test.run (node:internal/test_runner/test:796:25) {
    generatedMessage: true,
    actual: 5,
    expected: 6,
    operator: 'strictEqual'
  }
}
		</failure>
	</testcase>
	<testcase name="not yet" time="0.000131" classname="test">
		<skipped type="skipped" message="true"/>
	</testcase>
</testsuites>"#;
        let (parsed, failures) = run(xml, "/ws", false);
        assert_eq!(
            (
                parsed.counts.passed,
                parsed.counts.failed,
                parsed.counts.skipped
            ),
            (1, 1, 1)
        );
        let f = &failures[0];
        assert_eq!(f.test, "adds large numbers");
        assert_eq!(f.file.as_deref(), Some("test/math.test.js"));
        assert_eq!(f.line, Some(10));
        assert!(f.message.contains("5 !== 6"), "{}", f.message);
        assert_eq!(f.expected.as_deref(), Some("6"));
        assert_eq!(f.received.as_deref(), Some("5"));
        assert_eq!(f.kind, FailureKind::Test);
    }

    #[test]
    fn pytest_failure_and_collection_error() {
        let xml = r#"<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" errors="1" failures="1" skipped="0" tests="3"><testcase classname="tests.test_math" name="test_ok" time="0.000" /><testcase classname="tests.test_math" name="test_adds_large_numbers" time="0.001"><failure message="assert 5 == 6&#10; +  where 5 = add(2, 3)">def test_adds_large_numbers():
&gt;       assert add(2, 3) == 6
E       assert 5 == 6
E        +  where 5 = add(2, 3)

tests/test_math.py:11: AssertionError</failure></testcase><testcase classname="" name="tests.test_other" time="0.000"><error message="collection failure">/usr/lib/python3.11/ast.py:50: in parse
    return compile(source, filename, mode, flags,
E     File "/ws/tests/test_other.py", line 5
E       assert add(2, 2) == 4 +
E                              ^
E   SyntaxError: invalid syntax</error></testcase></testsuite></testsuites>"#;
        let (parsed, failures) = run(xml, "/ws", true);
        assert_eq!((parsed.counts.passed, parsed.counts.failed), (1, 2));
        assert_eq!(failures[0].file.as_deref(), Some("tests/test_math.py"));
        assert_eq!(failures[0].line, Some(11));
        assert!(failures[0].message.starts_with("assert 5 == 6"));
        assert_eq!(failures[1].kind, FailureKind::Compile);
        assert_eq!(failures[1].file.as_deref(), Some("tests/test_other.py"));
        assert_eq!(failures[1].line, Some(5));
        assert!(failures[1].message.contains("SyntaxError: invalid syntax"));
    }

    #[test]
    fn pytest_node_ids_keep_class_parameter_and_rootdir() {
        let frames = |files: &[&str]| -> Vec<crate::sanitize::Location> {
            files
                .iter()
                .map(|f| crate::sanitize::Location {
                    file: f.to_string(),
                    line: 1,
                    column: None,
                })
                .collect()
        };
        assert_eq!(
            pytest_node_id(
                "tests.test_a.TestX",
                "test_y[p1]",
                &frames(&["tests/test_a.py"]),
                None
            )
            .as_deref(),
            Some("tests/test_a.py::TestX::test_y[p1]")
        );
        // The failure's innermost frame is the code under test; the test file is still found.
        assert_eq!(
            pytest_node_id(
                "tests.test_a",
                "test_z",
                &frames(&["src/calc.py", "py/tests/test_a.py"]),
                Some("src/calc.py")
            )
            .as_deref(),
            Some("py/tests/test_a.py::test_z")
        );
        // No traceback file: the lower-case parts are the module.
        assert_eq!(
            pytest_node_id("pkg.test_m.TestOuter.TestInner", "test_w", &[], None).as_deref(),
            Some("pkg/test_m.py::TestOuter::TestInner::test_w")
        );
    }

    #[test]
    fn vitest_failure_and_parse_error() {
        let xml = r#"<testsuites name="vitest tests" tests="2" failures="2" errors="0" time="0">
    <testsuite name="tests/math.test.js" tests="1" failures="1" errors="0" skipped="0" time="0">
        <testcase classname="tests/math.test.js" name="add &gt; adds large numbers" time="0.004">
            <failure message="expected 5 to be 6 // Object.is equality" type="AssertionError">
AssertionError: expected 5 to be 6 // Object.is equality

- Expected
+ Received

- 6
+ 5

 ❯ tests/math.test.js:9:23
            </failure>
        </testcase>
        <testcase classname="tests/bad.test.js" name="tests/bad.test.js" time="0">
            <failure message="Failed to parse source" type="Error">
Error: Failed to parse source
  File: /ws/tests/bad.test.js:1:0
 ❯ TransformPluginContext._formatLog ../../node_modules/vite/dist/node/chunks/config.js:29250:43
            </failure>
        </testcase>
    </testsuite>
</testsuites>"#;
        let (parsed, failures) = run(xml, "/ws", false);
        assert_eq!(parsed.counts.failed, 2);
        assert_eq!(failures[0].test, "add > adds large numbers");
        assert_eq!(failures[0].file.as_deref(), Some("tests/math.test.js"));
        assert_eq!(failures[0].line, Some(9));
        assert_eq!(failures[0].expected.as_deref(), Some("6"));
        assert_eq!(failures[1].kind, FailureKind::Compile);
        assert_eq!(failures[1].file.as_deref(), Some("tests/bad.test.js"));
    }

    #[test]
    fn entities_in_text_survive() {
        let xml = r#"<testsuite><testcase name="t &amp; u" classname="c"><failure message="m &lt;x&gt;">at TestContext.&lt;anonymous&gt; (file:///ws/a.test.js:3:1)
&gt;       assert f() == &apos;a&apos; &#x41;&#66;</failure></testcase></testsuite>"#;
        let (_, failures) = run(xml, "/ws", false);
        assert_eq!(failures[0].test, "t & u");
        assert_eq!(failures[0].file.as_deref(), Some("a.test.js"));
        assert_eq!(failures[0].stack, vec!["a.test.js:3:1".to_string()]);
        assert_eq!(
            decode_entities("&gt;  x == &apos;a&apos; &#x41;&#66; &bogus; & tail"),
            ">  x == 'a' AB &bogus; & tail"
        );
        let body = entities_to_cdata("<a b=\"x>y\">1 &lt; 2<!-- &amp; --></a>");
        assert_eq!(body, "<a b=\"x>y\"><![CDATA[1 < 2]]><!-- &amp; --></a>");
    }

    #[test]
    fn missing_or_broken_reports_are_flagged() {
        let mut sink = |_f: Failure| {};
        let p = parse(
            Path::new("/nonexistent/report.xml"),
            &Locator::new(Path::new("/ws")),
            false,
            &mut sink,
        );
        assert!(p.report_missing);
        let (p, _) = run("<testsuites><testcase", "/ws", false);
        assert!(p.report_missing);
    }
}
