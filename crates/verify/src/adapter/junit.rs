//! JUnit XML (node:test, vitest, pytest, any `junit` command), read as a stream of XML
//! events (quick-xml): a report is never held whole, whatever its size.
//!
//! Counts come from the test cases themselves (node's reporter puts its totals in comments),
//! wherever they sit inside the report's root element (`<testsuites>`, `<testsuite>` or
//! `<testrun>`; node's reporter puts top-level tests right under `<testsuites>`). A case whose
//! name is its own file (vitest, node) or a pytest collection error is a load failure: the
//! file did not parse, so it is reported as a compile-kind failure.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

use super::{FailureSink, MAX_REPORT_BYTES, Parsed};
use crate::model::{Failure, FailureKind};
use crate::sanitize::{Locator, assertion_values, clean_message};

/// Most bytes of a failure's text kept; the rest of a longer one is skipped.
const MAX_FAILURE_TEXT: usize = 256 * 1024;
/// Failures held back until the report is known to parse, so that a broken report gives
/// none; beyond this many they go on as they come (memory stays bounded).
const HELD_FAILURES: usize = 10_000;

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
    match File::open(path) {
        Ok(file) => read_report(
            BufReader::with_capacity(64 * 1024, file),
            locator,
            innermost_last,
            sink,
        ),
        Err(e) => {
            parsed.report_missing = true;
            parsed.report_problem = Some(format!("the JUnit report could not be read: {e}"));
            parsed
        }
    }
}

/// Parses JUnit XML from a string (tests and benchmarks).
pub fn parse_str(
    xml: &str,
    locator: &Locator,
    innermost_last: bool,
    sink: &mut dyn FailureSink,
) -> Parsed {
    read_report(xml.as_bytes(), locator, innermost_last, sink)
}

fn read_report(
    input: impl BufRead,
    locator: &Locator,
    innermost_last: bool,
    sink: &mut dyn FailureSink,
) -> Parsed {
    let mut parsed = Parsed::default();
    let mut held: Vec<Failure> = Vec::new();
    let mut flowing = false;
    let read = read_cases(input, |case| {
        let (message, text, error) = match &case.status {
            Status::Passed => {
                parsed.counts.passed += 1;
                return;
            }
            Status::Skipped => {
                parsed.counts.skipped += 1;
                return;
            }
            Status::Failed {
                message,
                text,
                error,
            } => (message, text, *error),
        };
        parsed.counts.failed += 1;
        let collection = error && message.contains("collection failure");
        let failure = failure_of(&case, message, text, collection, locator, innermost_last);
        if flowing {
            sink.failure(failure);
            return;
        }
        held.push(failure);
        if held.len() >= HELD_FAILURES {
            flowing = true;
            held.drain(..).for_each(|f| sink.failure(f));
        }
    });
    match read {
        Ok(()) => {
            parsed.counts_known = true;
            held.into_iter().for_each(|f| sink.failure(f));
        }
        Err(e) => {
            parsed.report_missing = true;
            parsed.report_problem = Some(format!("the JUnit report did not parse: {e}"));
        }
    }
    parsed
}

/// One `<testcase>`, as the report gives it.
#[derive(Debug, Default)]
struct Case {
    /// The `name` attribute.
    name: String,
    classname: Option<String>,
    group: Option<String>,
    file: Option<String>,
    line: Option<u64>,
    status: Status,
}

#[derive(Debug, Default)]
enum Status {
    #[default]
    Passed,
    Skipped,
    /// A `<failure>` or (`error`) an `<error>`: its `message` attribute and its text.
    Failed {
        message: String,
        text: String,
        error: bool,
    },
}

fn is_root(name: &str) -> bool {
    matches!(name, "testsuites" | "testsuite" | "testrun")
}

/// Calls `on_case` for each `<testcase>` inside the report's first root element, in order;
/// what follows that element is not read. An error: malformed XML, no root element, or the
/// report ending inside an element.
fn read_cases(input: impl BufRead, mut on_case: impl FnMut(Case)) -> Result<(), String> {
    let mut reader = Reader::from_reader(input);
    let mut buf = Vec::new();
    let mut skipped = Vec::new();
    // How deep inside the root element the reader is (0: not inside it yet).
    let mut depth = 0usize;
    loop {
        match next_event(&mut reader, &mut buf)? {
            Event::Start(e) if depth == 0 && !is_root(e.name().as_ref()) => {
                skip(&mut reader, &e, &mut skipped)?;
            }
            Event::Start(e) if depth > 0 && e.name().as_ref() == "testcase" => {
                let mut case = case_attributes(&e)?;
                case.status = case_status(&mut reader)?;
                on_case(case);
            }
            Event::Start(_) => depth += 1,
            Event::Empty(e) if depth == 0 && is_root(e.name().as_ref()) => return Ok(()),
            Event::Empty(e) if depth > 0 && e.name().as_ref() == "testcase" => {
                on_case(case_attributes(&e)?);
            }
            Event::End(_) if depth == 1 => return Ok(()),
            Event::End(_) => depth = depth.saturating_sub(1),
            Event::Eof if depth == 0 => {
                return Err("no <testsuites> or <testsuite> element".into());
            }
            Event::Eof => return Err("the report ends inside an element".into()),
            _ => {}
        }
    }
}

/// The next event, into `buf` (cleared first); an error says where the report broke.
fn next_event<'b>(
    reader: &mut Reader<impl BufRead>,
    buf: &'b mut Vec<u8>,
) -> Result<Event<'b>, String> {
    buf.clear();
    reader
        .read_event_into(buf)
        .map_err(|e| format!("{e} (at byte {})", reader.error_position()))
}

/// Skips the element `start` opened, up to its end (`scratch` holds what is read meanwhile).
fn skip(
    reader: &mut Reader<impl BufRead>,
    start: &BytesStart,
    scratch: &mut Vec<u8>,
) -> Result<(), String> {
    scratch.clear();
    reader
        .read_to_end_into(start.name(), scratch)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// A `<testcase>`'s attributes (its status: passed until its children say otherwise).
fn case_attributes(e: &BytesStart) -> Result<Case, String> {
    let mut case = Case::default();
    for attr in e.attributes() {
        let attr = attr.map_err(|e| e.to_string())?;
        let value = || attribute_value(&attr.value);
        match attr.key.as_ref() {
            "name" => case.name = value()?,
            "classname" => case.classname = Some(value()?),
            "group" => case.group = Some(value()?),
            "file" => case.file = Some(value()?),
            "line" => case.line = value()?.trim().parse().ok(),
            _ => {}
        }
    }
    Ok(case)
}

/// Reads a `<testcase>`'s children up to its end: the last `<skipped>`, `<failure>` or
/// `<error>` decides its status (flaky and rerun records do not).
fn case_status(reader: &mut Reader<impl BufRead>) -> Result<Status, String> {
    let mut status = Status::Passed;
    let mut buf = Vec::new();
    let mut skipped = Vec::new();
    loop {
        match next_event(reader, &mut buf)? {
            Event::Empty(e) => {
                if let Some(s) = outcome(&e)? {
                    status = s;
                }
            }
            Event::Start(e) => {
                let outcome = outcome(&e)?;
                status = match outcome {
                    Some(Status::Failed { message, error, .. }) => Status::Failed {
                        message,
                        text: element_text(reader, e.name().as_ref())?,
                        error,
                    },
                    other => {
                        skip(reader, &e, &mut skipped)?;
                        other.unwrap_or(status)
                    }
                };
            }
            Event::End(_) => return Ok(status),
            Event::Eof => return Err("the report ends inside a <testcase>".into()),
            _ => {}
        }
    }
}

/// An attribute's value with its entity and character references resolved (white space kept
/// as written).
fn attribute_value(raw: &str) -> Result<String, String> {
    quick_xml::escape::unescape(raw)
        .map(|v| v.into_owned())
        .map_err(|e| e.to_string())
}

/// The status an element of a test case gives it, if it gives one.
fn outcome(e: &BytesStart) -> Result<Option<Status>, String> {
    let error = match e.name().as_ref() {
        "skipped" => return Ok(Some(Status::Skipped)),
        "failure" => false,
        "error" => true,
        _ => return Ok(None),
    };
    let mut message = String::new();
    for attr in e.attributes() {
        let attr = attr.map_err(|e| e.to_string())?;
        if attr.key.as_ref() == "message" {
            message = attribute_value(&attr.value)?;
        }
    }
    Ok(Some(Status::Failed {
        message,
        text: String::new(),
        error,
    }))
}

/// The text of the element just opened, up to its end: text, entity references and CDATA,
/// with elements inside it skipped (a line break in their place), trimmed and bounded by
/// [`MAX_FAILURE_TEXT`].
fn element_text(reader: &mut Reader<impl BufRead>, end: &str) -> Result<String, String> {
    let mut text = String::new();
    let mut buf = Vec::new();
    let mut skipped = Vec::new();
    let push = |text: &mut String, piece: &str| {
        let room = MAX_FAILURE_TEXT.saturating_sub(text.len());
        let mut cut = piece.len().min(room);
        while !piece.is_char_boundary(cut) {
            cut -= 1;
        }
        text.push_str(&piece[..cut]);
    };
    loop {
        match next_event(reader, &mut buf)? {
            Event::Text(t) => push(&mut text, &t.xml10_content()),
            Event::CData(c) => push(&mut text, &c.xml10_content()),
            Event::GeneralRef(r) => {
                push(
                    &mut text,
                    &decode_entities(&format!("&{};", r.xml10_content())),
                );
            }
            Event::Start(e) => {
                skip(reader, &e, &mut skipped)?;
                push(&mut text, "\n");
            }
            Event::End(e) if e.name().as_ref() == end => return Ok(text.trim().to_string()),
            Event::End(_) => return Err("a mismatched end tag".into()),
            Event::Eof => return Err("the report ends inside a test's failure".into()),
            _ => {}
        }
    }
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

fn failure_of(
    case: &Case,
    message: &str,
    text: &str,
    collection_error: bool,
    locator: &Locator,
    innermost_last: bool,
) -> Failure {
    let name = match (&case.classname, &case.group) {
        // junit-parser's fallback, kept: the class (or group) and an empty name.
        (Some(prefix), _) | (None, Some(prefix)) if case.name.is_empty() => format!("{prefix}::"),
        _ => case.name.clone(),
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

    fn counts(p: &Parsed) -> (u64, u64, u64) {
        (p.counts.passed, p.counts.failed, p.counts.skipped)
    }

    #[test]
    fn cases_count_wherever_they_sit_in_the_root() {
        let xml = r#"<?xml version="1.0"?>
<testsuites name="all">
  <testcase name="top" classname="test"/>
  <testsuite name="outer"><properties><property name="k" value="v"/></properties>
    <testsuite name="inner">
      <testcase name="skipped"><skipped message="later"/></testcase>
      <testcase name="flaky but passed"><flakyFailure message="once">x</flakyFailure><system-out>out</system-out></testcase>
      <testcase name="last word"><skipped/><failure message="no">boom</failure></testcase>
      <testcase name="errored"><error message="collection failure"/></testcase>
    </testsuite>
  </testsuite>
</testsuites>
<testcase name="after the root is not read"/>"#;
        let (p, failures) = run(xml, "/ws", false);
        assert!(p.counts_known);
        assert_eq!(counts(&p), (2, 2, 1));
        assert_eq!(failures.len(), 2);
        assert_eq!(failures[0].test, "last word");
        assert_eq!(failures[0].message, "boom");
        assert_eq!(failures[1].kind, FailureKind::Compile);

        let (p, failures) = run("<testsuites/>", "/ws", false);
        assert!(p.counts_known && !p.report_missing && failures.is_empty());
        assert_eq!(counts(&p), (0, 0, 0));
    }

    #[test]
    fn a_broken_report_gives_no_failures() {
        let mut xml = String::from("<testsuite>");
        for i in 0..50 {
            xml.push_str(&format!(
                r#"<testcase name="c{i}"><failure message="m{i}"/></testcase>"#
            ));
        }
        for broken in [
            format!("{xml}<testcase name=\"x\">"),
            format!("{xml}</testsuites>"),
            format!("{xml}<testcase name=\"x\"><failure>text"),
            "<other/>".to_string(),
        ] {
            let (p, failures) = run(&broken, "/ws", false);
            assert!(p.report_missing, "{broken}");
            assert!(!p.counts_known, "{broken}");
            assert!(
                p.report_problem
                    .is_some_and(|m| m.contains("did not parse"))
            );
            assert!(failures.is_empty(), "{broken}");
        }
        let (p, failures) = run(&format!("{xml}</testsuite>"), "/ws", false);
        assert_eq!((p.counts.failed, failures.len()), (50, 50));
    }

    #[test]
    fn a_huge_failure_text_is_bounded() {
        let text = "x".repeat(3 * MAX_FAILURE_TEXT);
        let xml = format!(
            r#"<testsuite><testcase name="big"><failure>{text}</failure></testcase></testsuite>"#
        );
        let mut case = None;
        read_cases(xml.as_bytes(), |c| case = Some(c)).unwrap();
        match case.map(|c| c.status) {
            Some(Status::Failed { text, .. }) => assert_eq!(text.len(), MAX_FAILURE_TEXT),
            other => panic!("{other:?}"),
        }
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
        // Text, references and CDATA make one text; a comment adds nothing.
        let xml = r#"<testsuite><testcase name="v"><failure>1 &lt; 2<!-- &amp; --><![CDATA[ & 3 > 2]]></failure></testcase></testsuite>"#;
        let (_, failures) = run(xml, "/ws", false);
        assert_eq!(failures[0].message, "1 < 2 & 3 > 2");
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
