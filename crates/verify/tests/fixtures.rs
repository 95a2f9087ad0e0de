//! The real runners (node:test, vitest, jest, cargo, pytest, go) on the fixture projects in
//! `fixtures/`, through `run_verification` and the real sandbox. Each runner has five states:
//! pass, fail (one failing assertion), syntax (a compile / parse error), empty (no tests) and
//! hang (a test that never ends, run with a 5 s timeout).
//!
//! Needs the runners installed: `bash scripts/ci-deps-verify.sh`.

use std::path::{Path, PathBuf};
use std::time::Duration;

mod host;
use airlock_verify::{
    Counts, FailureKind, RunnerKind, Verdict, VerdictReport, VerifyInput, VerifyOptions,
    run_verification,
};

const BUDGET: usize = 4096;

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

struct Workspace {
    _dir: tempfile::TempDir,
    root: PathBuf,
    scratch: tempfile::TempDir,
}

/// A private copy of `fixtures/<runner>/<state>`; node projects get a `node_modules` link to
/// the installed runners (exposed read-only in the sandbox).
fn workspace(runner: &str, state: &str) -> Workspace {
    let dir = tempfile::Builder::new()
        .prefix(&format!("verify-{runner}-{state}-"))
        .tempdir()
        .unwrap();
    let root = dir.path().join("ws");
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(fixtures().join(runner).join(state))
        .arg(&root)
        .status()
        .unwrap();
    assert!(status.success());
    if matches!(runner, "vitest" | "jest") {
        std::os::unix::fs::symlink(node_modules(), root.join("node_modules")).unwrap();
    }
    Workspace {
        _dir: dir,
        root,
        scratch: tempfile::tempdir().unwrap(),
    }
}

fn options(timeout_secs: u64) -> VerifyOptions {
    VerifyOptions {
        timeout: Duration::from_secs(timeout_secs),
        budget_bytes: BUDGET,
        home_binds: host::home_binds(&[".cargo", ".rustup", ".pyenv"]),
        ro_binds: vec![node_modules()],
        // What a front end passes: this process's environment.
        host_env: std::env::vars_os().collect(),
        ..VerifyOptions::default()
    }
}

fn verify(ws: &Workspace, opts: &VerifyOptions) -> VerdictReport {
    let input = VerifyInput {
        workspace: &ws.root,
        layers: Vec::new(),
        changeset_hash: "blake3:fixture".into(),
        scratch_dir: ws.scratch.path(),
        baseline_cache: None,
    };
    let report = run_verification(&input, opts).expect("verification runs");
    assert_eq!(report.changeset, "blake3:fixture");
    assert!(
        report.diagnostics.len() <= BUDGET,
        "diagnostics over budget: {}",
        report.diagnostics.len()
    );
    assert!(
        !report.degraded,
        "the fixtures must run with kernel isolation"
    );
    report
}

fn counts(passed: u64, failed: u64, skipped: u64) -> Counts {
    Counts {
        passed,
        failed,
        skipped,
    }
}

/// No process of the run survives: nothing on the host still has the workspace in its command
/// line or as its working directory.
fn assert_no_survivors(ws: &Workspace) {
    let needle = ws.root.to_string_lossy().into_owned();
    let mut survivors = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cwd = std::fs::read_link(entry.path().join("cwd")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(&needle)
            || cwd.to_string_lossy().contains(&needle)
        {
            survivors.push(pid.to_string());
        }
    }
    assert!(survivors.is_empty(), "surviving processes: {survivors:?}");
}

struct Expect {
    runner: &'static str,
    kind: RunnerKind,
    fail_file: &'static str,
    fail_line: u32,
    fail_message: &'static str,
    syntax_file: &'static str,
    syntax_message: &'static str,
}

fn check_runner(e: &Expect) {
    // pass
    let ws = workspace(e.runner, "pass");
    let r = verify(&ws, &options(120));
    assert_eq!(r.runner, e.kind);
    assert_eq!(r.verdict, Verdict::Passed, "{}", r.diagnostics);
    assert_eq!(r.tests, counts(2, 0, 1), "{}", r.diagnostics);
    assert!(r.failures.is_empty());

    // fail: the failing assertion's message and file:line reach the model.
    let ws = workspace(e.runner, "fail");
    let r = verify(&ws, &options(120));
    assert_eq!(r.verdict, Verdict::Failed, "{}", r.diagnostics);
    assert_eq!(r.tests, counts(1, 1, 1), "{}", r.diagnostics);
    assert_eq!(r.failures.len(), 1, "{:?}", r.failures);
    let f = &r.failures[0];
    assert_eq!(f.kind, FailureKind::Test);
    assert_eq!(f.file.as_deref(), Some(e.fail_file), "{f:?}");
    assert_eq!(f.line, Some(e.fail_line), "{f:?}");
    assert!(f.message.contains(e.fail_message), "{f:?}");
    let location = format!("{}:{}", e.fail_file, e.fail_line);
    assert!(r.diagnostics.contains(&location), "{}", r.diagnostics);
    assert!(r.diagnostics.contains(e.fail_message), "{}", r.diagnostics);
    assert!(
        !r.diagnostics.contains('\x1b'),
        "ANSI left in {}",
        r.diagnostics
    );
    assert!(!r.diagnostics.contains("node_modules"), "{}", r.diagnostics);

    // syntax / compile error: failed, with the diagnostics.
    let ws = workspace(e.runner, "syntax");
    let r = verify(&ws, &options(120));
    assert_eq!(r.verdict, Verdict::Failed, "{}", r.diagnostics);
    let c = r
        .failures
        .iter()
        .find(|f| f.kind == FailureKind::Compile)
        .unwrap_or_else(|| panic!("no compile failure in {:?}", r.failures));
    assert_eq!(c.file.as_deref(), Some(e.syntax_file), "{c:?}");
    assert!(c.message.contains(e.syntax_message), "{c:?}");
    assert!(r.diagnostics.contains(e.syntax_file), "{}", r.diagnostics);

    // empty: no test ran, never a pass.
    let ws = workspace(e.runner, "empty");
    let r = verify(&ws, &options(120));
    assert_eq!(r.verdict, Verdict::NoTests, "{}", r.diagnostics);
    assert_eq!(r.tests.ran(), 0);

    // hang: timeout, nothing survives.
    let ws = workspace(e.runner, "hang");
    let started = std::time::Instant::now();
    let r = verify(&ws, &options(5));
    assert_eq!(r.verdict, Verdict::Timeout, "{}", r.diagnostics);
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_no_survivors(&ws);
}

#[test]
fn node_test_runner() {
    check_runner(&Expect {
        runner: "node",
        kind: RunnerKind::Node,
        fail_file: "test/math.test.js",
        fail_line: 10,
        fail_message: "5 !== 6",
        syntax_file: "test/math.test.js",
        syntax_message: "SyntaxError",
    });
}

#[test]
fn vitest_runner() {
    check_runner(&Expect {
        runner: "vitest",
        kind: RunnerKind::Vitest,
        fail_file: "tests/math.test.js",
        fail_line: 9,
        fail_message: "expected 5 to be 6",
        syntax_file: "tests/math.test.js",
        syntax_message: "Failed to parse source",
    });
}

#[test]
fn jest_runner() {
    check_runner(&Expect {
        runner: "jest",
        kind: RunnerKind::Jest,
        fail_file: "__tests__/math.test.js",
        fail_line: 8,
        fail_message: "Expected: 6",
        syntax_file: "__tests__/math.test.js",
        syntax_message: "SyntaxError",
    });
}

#[test]
fn cargo_runner() {
    check_runner(&Expect {
        runner: "cargo",
        kind: RunnerKind::Cargo,
        fail_file: "src/lib.rs",
        fail_line: 16,
        fail_message: "sum of 2 and 3",
        syntax_file: "src/lib.rs",
        syntax_message: "cannot find value `undefined_value`",
    });
}

#[test]
fn pytest_runner() {
    check_runner(&Expect {
        runner: "pytest",
        kind: RunnerKind::Pytest,
        fail_file: "tests/test_math.py",
        fail_line: 11,
        fail_message: "assert 5 == 6",
        syntax_file: "tests/test_math.py",
        syntax_message: "SyntaxError",
    });
}

#[test]
fn go_runner() {
    check_runner(&Expect {
        runner: "go",
        kind: RunnerKind::Go,
        fail_file: "calc/calc_test.go",
        fail_line: 13,
        fail_message: "Add(2, 3) = 5, want 6",
        syntax_file: "calc/calc_test.go",
        syntax_message: "undefined: undefinedValue",
    });
}

/// A layer on top of the workspace is what gets tested; the workspace itself is untouched.
#[test]
fn layers_are_tested_and_writes_are_thrown_away() {
    let ws = workspace("pytest", "fail");
    let layer = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(layer.path().join("tests")).unwrap();
    // The staged fix: the failing test now expects the right sum.
    let fixed = std::fs::read_to_string(ws.root.join("tests/test_math.py"))
        .unwrap()
        .replace("add(2, 3) == 6", "add(2, 3) == 5");
    std::fs::write(layer.path().join("tests/test_math.py"), fixed).unwrap();
    let before = std::fs::read_to_string(ws.root.join("tests/test_math.py")).unwrap();
    let input = VerifyInput {
        workspace: &ws.root,
        layers: vec![layer.path().to_path_buf()],
        changeset_hash: "blake3:fix".into(),
        scratch_dir: ws.scratch.path(),
        baseline_cache: None,
    };
    let r = run_verification(&input, &options(120)).unwrap();
    assert_eq!(r.verdict, Verdict::Passed, "{}", r.diagnostics);
    assert_eq!(r.tests, counts(2, 0, 1));
    let after = std::fs::read_to_string(ws.root.join("tests/test_math.py")).unwrap();
    assert_eq!(before, after);
    assert!(!ws.root.join(".airlock-verify").exists());
}

/// With a baseline, a failure that already fails on the base is marked pre-existing and does
/// not block a patch; a new failure still does. The baseline is cached per base key.
#[test]
fn baseline_marks_pre_existing_failures() {
    let ws = workspace("pytest", "fail");
    let cache = tempfile::tempdir().unwrap();
    let good = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(good.path().join("tests")).unwrap();
    std::fs::write(
        good.path().join("tests/test_new.py"),
        "from calc import add\n\n\ndef test_new_feature():\n    assert add(1, 1) == 2\n",
    )
    .unwrap();
    let bad = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(bad.path().join("tests")).unwrap();
    std::fs::write(
        bad.path().join("tests/test_new.py"),
        "from calc import add\n\n\ndef test_new_feature():\n    assert add(1, 1) == 3\n",
    )
    .unwrap();
    let mut opts = options(120);
    opts.baseline = true;
    let run = |layer: &Path| {
        let input = VerifyInput {
            workspace: &ws.root,
            layers: vec![layer.to_path_buf()],
            changeset_hash: "blake3:patch".into(),
            scratch_dir: ws.scratch.path(),
            baseline_cache: Some((cache.path(), "base-1".into())),
        };
        run_verification(&input, &opts).unwrap()
    };

    let r = run(good.path());
    assert_eq!(r.verdict, Verdict::Passed, "{}", r.diagnostics);
    assert_eq!(r.tests, counts(2, 1, 1));
    assert_eq!(r.failures.len(), 1);
    assert!(r.failures[0].pre_existing);
    assert!(
        r.diagnostics.contains("[pre-existing]"),
        "{}",
        r.diagnostics
    );
    let cached: Vec<_> = std::fs::read_dir(cache.path()).unwrap().flatten().collect();
    assert_eq!(cached.len(), 1, "one cached baseline");

    let r = run(bad.path());
    assert_eq!(r.verdict, Verdict::Failed, "{}", r.diagnostics);
    let new: Vec<_> = r.failures.iter().filter(|f| !f.pre_existing).collect();
    assert_eq!(new.len(), 1);
    assert_eq!(new[0].test, "test_new_feature");

    // The cache is what gets used: emptied, the old failure no longer counts as pre-existing.
    let path = cached[0].path();
    let mut record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    record["failing"] = serde_json::json!([]);
    std::fs::write(&path, serde_json::to_vec(&record).unwrap()).unwrap();
    let r = run(good.path());
    assert_eq!(r.verdict, Verdict::Failed, "{}", r.diagnostics);
}

/// Any command: many failures are folded and bounded, and nothing is cut silently.
#[test]
fn generic_command_is_bounded_and_never_passes_without_tests() {
    let ws = workspace("pytest", "empty");
    let mut opts = options(60);
    opts.budget_bytes = 1024;
    opts.command = Some(vec![
        "sh".into(),
        "-c".into(),
        "for i in $(seq 1 300); do echo \"--- FAIL: TestCase$i (0.00s)\"; done; \
         for i in $(seq 1 20); do echo '--- FAIL: TestSame (0.00s)'; done; exit 1"
            .into(),
    ]);
    let input = VerifyInput {
        workspace: &ws.root,
        layers: Vec::new(),
        changeset_hash: "h".into(),
        scratch_dir: ws.scratch.path(),
        baseline_cache: None,
    };
    let r = run_verification(&input, &opts).unwrap();
    assert_eq!(r.runner, RunnerKind::Command);
    assert_eq!(r.verdict, Verdict::Failed);
    assert_eq!(r.tests.failed, 320);
    assert!(r.diagnostics.len() <= 1024, "{}", r.diagnostics.len());
    assert!(
        r.diagnostics.contains("more failures omitted"),
        "{}",
        r.diagnostics
    );

    // Exit 0 with no recognisable test count is not a pass.
    opts.command = Some(vec!["true".into()]);
    let r = run_verification(&input, &opts).unwrap();
    assert_eq!(r.verdict, Verdict::NoTests, "{}", r.diagnostics);

    // A runner that does not exist is an error with the reason.
    opts.command = Some(vec!["definitely-not-a-test-runner".into()]);
    let r = run_verification(&input, &opts).unwrap();
    assert_eq!(r.verdict, Verdict::Error, "{}", r.diagnostics);
}

/// Setting the cancel flag stops the run: an `error` verdict, and nothing survives.
#[test]
fn cancellation_stops_the_run() {
    let ws = workspace("node", "hang");
    let mut opts = options(120);
    let cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    opts.cancel = Some(cancel.clone());
    let flag = cancel.clone();
    let setter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    let started = std::time::Instant::now();
    let r = verify(&ws, &opts);
    setter.join().unwrap();
    assert_eq!(r.verdict, Verdict::Error, "{}", r.diagnostics);
    assert!(r.diagnostics.contains("cancelled"), "{}", r.diagnostics);
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_no_survivors(&ws);
}

/// `--runner junit -- CMD`: any command that writes JUnit XML to `$AIRLOCK_JUNIT_OUTPUT`.
#[test]
fn junit_runner_reads_the_commands_report() {
    let ws = workspace("pytest", "empty");
    let mut opts = options(60);
    opts.runner = Some(RunnerKind::Junit);
    opts.command = Some(vec![
        "sh".into(),
        "-c".into(),
        r#"cat > "$AIRLOCK_JUNIT_OUTPUT" <<'XML'
<testsuite name="custom"><testcase name="ok"/><testcase name="bad" classname="x"><failure message="boom">Error: boom &lt;here&gt;
    at check (/WS/lib/check.js:7:3)</failure></testcase></testsuite>
XML
sed -i "s#/WS#$PWD#" "$AIRLOCK_JUNIT_OUTPUT"; exit 1"#
            .into(),
    ]);
    let input = VerifyInput {
        workspace: &ws.root,
        layers: Vec::new(),
        changeset_hash: "h".into(),
        scratch_dir: ws.scratch.path(),
        baseline_cache: None,
    };
    let r = run_verification(&input, &opts).unwrap();
    assert_eq!(r.runner, RunnerKind::Junit);
    assert_eq!(r.verdict, Verdict::Failed, "{}", r.diagnostics);
    assert_eq!(r.tests, counts(1, 1, 0));
    assert_eq!(r.failures[0].file.as_deref(), Some("lib/check.js"));
    assert_eq!(r.failures[0].line, Some(7));
    assert!(r.diagnostics.contains("boom <here>"), "{}", r.diagnostics);

    // No report at all: an error that says so.
    opts.command = Some(vec!["true".into()]);
    let r = run_verification(&input, &opts).unwrap();
    assert_eq!(r.verdict, Verdict::Error, "{}", r.diagnostics);
    assert!(
        r.diagnostics.contains("no JUnit report"),
        "{}",
        r.diagnostics
    );
}
