//! `verify --only ID…`: the full ids a failing run reports rerun exactly those tests, through
//! each real runner's own selection (pytest node ids, `cargo test -- --exact`, `go test -run`
//! per package, vitest/jest `-t` with a file filter), in the real sandbox.
//!
//! Needs the runners installed: `bash scripts/ci-deps-verify.sh`.

use std::path::{Path, PathBuf};
use std::time::Duration;

mod host;
use airlock_verify::{VerdictReport, VerifyError, VerifyInput, VerifyOptions, run_verification};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn node_modules() -> PathBuf {
    fixtures().join("node_deps/node_modules")
}

struct Workspace {
    _dir: tempfile::TempDir,
    root: PathBuf,
    scratch: tempfile::TempDir,
}

fn workspace(name: &str) -> Workspace {
    let dir = tempfile::Builder::new()
        .prefix(&format!("vdiag-only-{name}-"))
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
        assert!(
            node_modules().join(".bin/vitest").exists(),
            "the fixture runners are not installed: run `bash scripts/ci-deps-verify.sh`"
        );
        std::os::unix::fs::symlink(node_modules(), root.join("node_modules")).unwrap();
    }
    Workspace {
        _dir: dir,
        root,
        scratch: tempfile::tempdir().unwrap(),
    }
}

fn run(ws: &Workspace, only: &[&str]) -> Result<VerdictReport, VerifyError> {
    let opts = VerifyOptions {
        timeout: Duration::from_secs(180),
        only: only.iter().map(|s| s.to_string()).collect(),
        home_binds: host::home_binds(&[".cargo", ".rustup", ".pyenv"]),
        ro_binds: vec![node_modules()],
        host_env: std::env::vars_os().collect(),
        ..VerifyOptions::default()
    };
    let input = VerifyInput {
        workspace: &ws.root,
        layers: Vec::new(),
        changeset_hash: "blake3:only".into(),
        scratch_dir: ws.scratch.path(),
        baseline_cache: None,
    };
    run_verification(&input, &opts)
}

/// Runs the whole suite, then `--only` the given id of its failures: exactly that test fails.
fn reruns_one(name: &str, id: &str, passed: u64, failed: u64) -> VerdictReport {
    let ws = workspace(name);
    let full = run(&ws, &[]).unwrap();
    assert!(
        full.failures.iter().any(|f| f.id.as_deref() == Some(id)),
        "{id} not among {:?}",
        full.failures.iter().map(|f| &f.id).collect::<Vec<_>>()
    );
    let r = run(&ws, &[id]).unwrap();
    assert_eq!(
        (r.tests.passed, r.tests.failed),
        (passed, failed),
        "{:?}\n{}",
        r.argv,
        r.diagnostics
    );
    assert!(
        r.failures.iter().all(|f| f.id.as_deref() == Some(id)),
        "{:?}",
        r.failures
    );
    r
}

#[test]
fn pytest_node_id_with_class_and_parameter() {
    reruns_one(
        "pytest",
        "tests/test_calc.py::TestAdd::test_sum[three]",
        0,
        1,
    );
}

#[test]
fn cargo_exact_test_path() {
    let r = reruns_one("cargo", "calc::tests::adds", 0, 1);
    assert!(
        r.argv
            .ends_with(&["--exact".into(), "calc::tests::adds".into()])
    );
}

#[test]
fn go_subtest_in_its_package() {
    // The parent runs too (it holds the subtest) and fails with it.
    reruns_one("go", "./calc::TestAdd/big", 0, 2);
}

#[test]
fn vitest_and_jest_full_names() {
    reruns_one(
        "vitest",
        "tests/math.test.js > math > add > add(2, 2) is 5",
        0,
        1,
    );
    reruns_one(
        "jest",
        "__tests__/math.test.js > math > add > add(2, 2) is 5",
        0,
        1,
    );
}

#[test]
fn a_command_without_selection_is_refused() {
    let ws = workspace("pytest");
    let opts = VerifyOptions {
        command: Some(vec!["true".into()]),
        only: vec!["x".into()],
        ..VerifyOptions::default()
    };
    let input = VerifyInput {
        workspace: &ws.root,
        layers: Vec::new(),
        changeset_hash: "h".into(),
        scratch_dir: ws.scratch.path(),
        baseline_cache: None,
    };
    let e = run_verification(&input, &opts).unwrap_err();
    assert!(matches!(e, VerifyError::Selection(_)), "{e}");
}

/// A baseline of selected tests is another base than the whole suite's: never reused for it.
#[test]
fn a_partial_base_is_not_the_whole_suites_base() {
    let ws = workspace("pytest");
    let cache = tempfile::tempdir().unwrap();
    let run = |only: &[&str]| {
        let opts = VerifyOptions {
            timeout: Duration::from_secs(180),
            baseline: true,
            only: only.iter().map(|s| s.to_string()).collect(),
            home_binds: host::home_binds(&[".pyenv"]),
            host_env: std::env::vars_os().collect(),
            ..VerifyOptions::default()
        };
        let input = VerifyInput {
            workspace: &ws.root,
            layers: Vec::new(),
            changeset_hash: "blake3:base".into(),
            scratch_dir: ws.scratch.path(),
            baseline_cache: Some((cache.path(), "salt".into())),
        };
        run_verification(&input, &opts).unwrap()
    };
    let full = run(&[]);
    let partial = run(&["tests/test_calc.py::TestAdd::test_sum[two]"]);
    let (full_base, partial_base) = (full.base.unwrap(), partial.base.unwrap());
    assert_ne!(full_base.id, partial_base.id);
    assert!(!partial_base.reused);
    assert_eq!(partial_base.tests.failed, 1, "{partial_base:?}");
    assert_eq!(full_base.tests.failed, 18, "{full_base:?}");
    assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 2);
}
