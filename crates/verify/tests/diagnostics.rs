//! Diagnostics an agent can act on, from the real runners (pytest, cargo, go, vitest, jest) on
//! the projects in `fixtures/diag/`, through `run_verification` and the real sandbox: the
//! budget is spread across files with the changed module's tests first, parameterised cases
//! are folded with their ids, every value is printed once, Rust's `left`/`right` stay
//! left/right, nothing is invented where the runner gave no expected value, identities are
//! full, the runner's hint lines stay with their failure, and the counts of what was left out
//! agree between the text and the JSON.
//!
//! Needs the runners installed: `bash scripts/ci-deps-verify.sh`.

use std::path::{Path, PathBuf};
use std::time::Duration;

mod host;
use airlock_verify::{VerdictReport, VerifyInput, VerifyOptions, run_verification};
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn node_modules() -> PathBuf {
    let nm = fixtures().join("node_deps/node_modules");
    assert!(
        nm.join(".bin/vitest").exists() && nm.join(".bin/jest").exists(),
        "the fixture runners are not installed: run `bash scripts/ci-deps-verify.sh`"
    );
    nm
}

/// The TypeScript compiler (`bash scripts/ci-deps-vdiag.sh`).
fn ts_modules() -> PathBuf {
    let nm = fixtures().join("ts_deps/node_modules");
    assert!(
        nm.join(".bin/tsc").exists(),
        "the TypeScript compiler is not installed: run `bash scripts/ci-deps-vdiag.sh`"
    );
    nm
}

struct Workspace {
    _dir: tempfile::TempDir,
    root: PathBuf,
    layer: PathBuf,
    scratch: tempfile::TempDir,
}

/// A private copy of `fixtures/diag/<name>` and an empty staged layer over it.
fn workspace(name: &str) -> Workspace {
    let dir = tempfile::Builder::new()
        .prefix(&format!("vdiag-{name}-"))
        .tempdir()
        .unwrap();
    let root = dir.path().join("ws");
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(fixtures().join("diag").join(name))
        .arg(&root)
        .status()
        .unwrap();
    assert!(status.success());
    if matches!(name, "vitest" | "jest") {
        std::os::unix::fs::symlink(node_modules(), root.join("node_modules")).unwrap();
    }
    if name == "tsc" {
        std::os::unix::fs::symlink(ts_modules(), root.join("node_modules")).unwrap();
    }
    let layer = dir.path().join("layer");
    std::fs::create_dir_all(&layer).unwrap();
    Workspace {
        _dir: dir,
        root,
        layer,
        scratch: tempfile::tempdir().unwrap(),
    }
}

/// Stages `rel` (the workspace's own file with a trailing comment line) in the layer.
fn stage(ws: &Workspace, rel: &str, comment: &str) {
    let mut text = std::fs::read_to_string(ws.root.join(rel)).unwrap();
    text.push_str(comment);
    text.push('\n');
    let dest = ws.layer.join(rel);
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    std::fs::write(dest, text).unwrap();
}

fn options(budget: usize) -> VerifyOptions {
    VerifyOptions {
        timeout: Duration::from_secs(180),
        budget_bytes: budget,
        home_binds: host::home_binds(&[".cargo", ".rustup", ".pyenv"]),
        ro_binds: vec![node_modules()],
        host_env: std::env::vars_os().collect(),
        ..VerifyOptions::default()
    }
}

fn verify(ws: &Workspace, opts: &VerifyOptions) -> (VerdictReport, Value) {
    let input = VerifyInput {
        workspace: &ws.root,
        layers: vec![ws.layer.clone()],
        changeset_hash: "blake3:diag".into(),
        scratch_dir: ws.scratch.path(),
        baseline_cache: None,
    };
    let report = run_verification(&input, opts).expect("verification runs");
    assert!(
        report.diagnostics.len() <= opts.budget_bytes.max(256),
        "diagnostics over budget: {}",
        report.diagnostics.len()
    );
    assert!(
        !report.degraded,
        "the fixtures must run with kernel isolation"
    );
    let json = serde_json::to_value(&report).unwrap();
    (report, json)
}

fn ids(json: &Value) -> Vec<String> {
    json["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap_or("").to_string())
        .collect()
}

fn failure_with_id<'j>(json: &'j Value, id: &str) -> &'j Value {
    json["failures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
        .unwrap_or_else(|| panic!("no failure {id} in {:#}", json["failures"]))
}

/// The numbers of the text's "omitted" line: (occurrences, distinct, JSON list, JSON omitted).
fn omitted_line(text: &str) -> Option<(u64, u64, u64, u64)> {
    let line = text.lines().find(|l| l.contains("more failures omitted"))?;
    let nums: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    Some((nums[0], nums[1], nums[2], nums[3]))
}

fn first_fail_line(text: &str) -> &str {
    text.lines()
        .find(|l| l.starts_with("FAIL ") || l.starts_with("(×"))
        .unwrap_or("")
}

#[test]
fn pytest_changed_module_first_parameters_folded_ids_complete() {
    let ws = workspace("pytest");
    // The change touches the `calc` package; its tests (tests/test_calc.py) run after a file
    // with twelve long failures that would otherwise eat the whole budget.
    stage(&ws, "calc/__init__.py", "# staged");
    let (r, json) = verify(&ws, &options(512));
    let text = &r.diagnostics;
    assert_eq!(r.tests.failed, 18, "{text}");
    // The JSON list is complete (its own cap is far above 18), whatever the text budget.
    assert_eq!(r.failures.len(), 18, "{text}");
    assert_eq!(r.failures_omitted, 0);
    // Full pytest node ids: file, class, parameter id.
    let all = ids(&json);
    for id in [
        "tests/test_calc.py::TestAdd::test_sum[one]",
        "tests/test_calc.py::TestAdd::test_sum[six]",
        "tests/test_calc.py::test_parse_rejects_words",
        "tests/test_a_shout.py::test_shout_is_quiet[lima]",
    ] {
        assert!(all.iter().any(|i| i == id), "{id} missing from {all:?}");
    }
    // The changed module's tests come first.
    assert!(
        first_fail_line(text).contains("tests/test_calc.py"),
        "{text}"
    );
    // Parameterised cases are folded with their ids, not repeated.
    assert!(
        text.contains("tests/test_calc.py::TestAdd::test_sum[one], [two], [three] (+2 more)"),
        "{text}"
    );
    assert_eq!(text.matches("test_sum[").count(), 1, "{text}");
    // "DID NOT RAISE" has no expected or received value: none is invented from other lines.
    let raise = failure_with_id(&json, "tests/test_calc.py::test_parse_rejects_words");
    assert!(
        raise["message"].as_str().unwrap().contains("DID NOT RAISE"),
        "{raise}"
    );
    for key in ["expected", "received", "left", "right"] {
        assert!(raise.get(key).is_none(), "{key} invented: {raise}");
    }
    // pytest's `assert L == R` names no expected side: left and right, once in the text.
    let one = failure_with_id(&json, "tests/test_calc.py::TestAdd::test_sum[one]");
    assert_eq!(one["left"], "2", "{one}");
    assert_eq!(one["right"], "3", "{one}");
    assert!(one.get("expected").is_none(), "{one}");
    assert!(!text.contains("expected: "), "{text}");
    // What the text left out is counted the same way as in the JSON, and the way to see more
    // names the real flag and argument.
    let (occurrences, distinct, listed, json_omitted) =
        omitted_line(text).unwrap_or_else(|| panic!("no omitted line in {text}"));
    assert_eq!(listed, r.failures.len() as u64, "{text}");
    assert_eq!(json_omitted, r.failures_omitted, "{text}");
    assert_eq!(occurrences, distinct, "{text}");
    // Shown (the five folded sums) and left out add up to the JSON's distinct failures.
    assert_eq!(5 + distinct, listed + json_omitted, "{text}");
    assert!(text.contains("--budget BYTES"), "{text}");
    assert!(text.contains("`budget`"), "{text}");

    // A larger budget shows everything: no omitted line, each parameter folded, both files.
    let (r, _) = verify(&ws, &options(64 * 1024));
    let text = &r.diagnostics;
    assert!(omitted_line(text).is_none(), "{text}");
    assert_eq!(text.matches("test_sum[").count(), 1, "{text}");
    assert!(
        text.contains(
            "tests/test_a_shout.py::test_shout_is_quiet[alpha], [bravo], [charlie] (+9 more)"
        ),
        "{text}"
    );
    assert!(text.contains("test_parse_rejects_words"), "{text}");
    assert_eq!(r.failures.len(), 18);
}

#[test]
fn cargo_left_right_stay_left_right_and_paths_are_full() {
    let ws = workspace("cargo");
    let (r, json) = verify(&ws, &options(4096));
    assert_eq!(r.tests.failed, 1, "{}", r.diagnostics);
    let f = failure_with_id(&json, "calc::tests::adds");
    assert_eq!(f["left"], "4", "{f}");
    assert_eq!(f["right"], "5", "{f}");
    assert!(
        f.get("expected").is_none() && f.get("received").is_none(),
        "{f}"
    );
    let text = &r.diagnostics;
    assert_eq!(text.matches("left: 4").count(), 1, "{text}");
    assert_eq!(text.matches("right: 5").count(), 1, "{text}");
    assert!(
        !text.contains("expected:") && !text.contains("received:"),
        "{text}"
    );
}

#[test]
fn rustc_help_lines_stay_with_their_error() {
    let ws = workspace("cargo_help");
    let (r, _) = verify(&ws, &options(4096));
    let f = r
        .failures
        .iter()
        .find(|f| f.message.contains("HashMap"))
        .unwrap_or_else(|| panic!("{:?}", r.failures));
    assert!(
        f.message
            .contains("help: consider importing this struct: `use std::collections::HashMap;`"),
        "{f:?}"
    );
    assert!(
        r.diagnostics.contains("help: consider importing"),
        "{}",
        r.diagnostics
    );

    // The same from plain `cargo test` (rustc's human format), as an explicit command runs.
    let mut opts = options(4096);
    opts.runner = Some(airlock_verify::RunnerKind::Cargo);
    opts.command = Some(vec!["cargo".into(), "test".into(), "--offline".into()]);
    let (r, _) = verify(&ws, &opts);
    let f = r
        .failures
        .iter()
        .find(|f| f.message.contains("HashMap"))
        .unwrap_or_else(|| panic!("{:?}\n{}", r.failures, r.diagnostics));
    assert_eq!(
        (f.file.as_deref(), f.line),
        (Some("src/lib.rs"), Some(2)),
        "{f:?}"
    );
    assert!(
        f.message
            .contains("help: consider importing this struct: `use std::collections::HashMap;`"),
        "{f:?}"
    );
}

#[test]
fn go_subtests_fold_with_package_ids_and_hints_are_kept() {
    let ws = workspace("go");
    stage(&ws, "calc/calc.go", "// staged");
    let (r, json) = verify(&ws, &options(4096));
    let text = &r.diagnostics;
    assert_eq!(r.tests.failed, 3, "{text}");
    let all = ids(&json);
    assert!(
        all.contains(&"./calc::TestAdd/small".to_string()),
        "{all:?}"
    );
    assert!(all.contains(&"./calc::TestAdd/big".to_string()), "{all:?}");
    // The parent fails only through its subtests: no empty entry of its own.
    assert_eq!(r.failures.len(), 2, "{:?}", r.failures);
    assert!(text.contains("./calc::TestAdd/small, big"), "{text}");
    assert!(!text.contains("--- FAIL"), "{text}");

    // A type error's have/want lines stay with it.
    let ws = workspace("go_note");
    let (r, _) = verify(&ws, &options(4096));
    let f = r
        .failures
        .iter()
        .find(|f| f.message.contains("not enough arguments"))
        .unwrap_or_else(|| panic!("{:?} {}", r.failures, r.diagnostics));
    assert!(f.message.contains("have (int)"), "{f:?}");
    assert!(f.message.contains("want (int, int)"), "{f:?}");
}

#[test]
fn vitest_each_cases_fold_with_full_names_and_values_print_once() {
    let ws = workspace("vitest");
    let (r, json) = verify(&ws, &options(4096));
    let text = &r.diagnostics;
    assert_eq!(r.tests.failed, 3, "{text}");
    let all = ids(&json);
    assert!(
        all.contains(&"tests/math.test.js > math > add > add(2, 2) is 5".to_string()),
        "{all:?}"
    );
    assert!(
        text.contains("add(1, 1) is 3, add(2, 2) is 5, add(3, 3) is 7"),
        "{text}"
    );
    // The headline states both values; neither the runner's diff nor airlock's lines repeat them.
    assert!(text.contains("expected 2 to be 3"), "{text}");
    assert!(!text.contains("- Expected"), "{text}");
    assert!(!text.contains("expected: 3"), "{text}");
}

#[test]
fn jest_each_cases_fold_with_full_names_and_values_print_once() {
    let ws = workspace("jest");
    let (r, json) = verify(&ws, &options(4096));
    let text = &r.diagnostics;
    assert_eq!(r.tests.failed, 3, "{text}");
    let all = ids(&json);
    assert!(
        all.contains(&"__tests__/math.test.js > math > add > add(3, 3) is 7".to_string()),
        "{all:?}"
    );
    assert!(
        text.contains("add(1, 1) is 3, add(2, 2) is 5, add(3, 3) is 7"),
        "{text}"
    );
    assert_eq!(text.matches("Expected: 3").count(), 1, "{text}");
    assert!(!text.contains("expected: 3"), "{text}");
}

#[test]
fn typescript_elaboration_stays_with_its_error() {
    let ws = workspace("tsc");
    let mut opts = options(4096);
    opts.ro_binds.push(ts_modules());
    opts.command = Some(
        ["node_modules/.bin/tsc", "--noEmit", "--pretty", "false"]
            .map(String::from)
            .to_vec(),
    );
    let (r, _) = verify(&ws, &opts);
    let f = r
        .failures
        .iter()
        .find(|f| f.message.contains("TS2322"))
        .unwrap_or_else(|| panic!("{:?}\n{}", r.failures, r.diagnostics));
    assert_eq!(
        (f.file.as_deref(), f.line),
        (Some("src/point.ts"), Some(7)),
        "{f:?}"
    );
    assert!(
        f.message
            .contains("The types of 'y.z' are incompatible between these types.\nType 'string' is not assignable to type 'number'."),
        "{f:?}"
    );
    assert!(
        r.diagnostics.contains("The types of 'y.z'"),
        "{}",
        r.diagnostics
    );
}
