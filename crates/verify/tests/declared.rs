//! A Python project whose Makefile declares `make test` (running pytest) is verified with
//! `make test`, and airlock still reads pytest's structured results. Needs pytest (installed by
//! `scripts/ci-deps-verify.sh`) and make.

use std::time::Duration;

mod host;
use airlock_verify::{RunnerKind, Verdict, VerifyInput, VerifyOptions, run_verification};

#[test]
fn make_test_runs_and_pytest_results_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("tests")).unwrap();
    std::fs::write(ws.join("pyproject.toml"), "[tool.pytest.ini_options]\n").unwrap();
    std::fs::write(
        ws.join("Makefile"),
        ".PHONY: test\ntest:\n\t@echo running the suite\n\tpython3 -m pytest -q tests\n",
    )
    .unwrap();
    std::fs::write(
        ws.join("tests/test_calc.py"),
        "def test_one():\n    assert 1 + 1 == 2\n\n\ndef test_two():\n    assert 2 * 2 == 5\n",
    )
    .unwrap();
    let opts = VerifyOptions {
        timeout: Duration::from_secs(60),
        home_binds: host::home_binds(&[".pyenv", ".local/lib"]),
        host_env: std::env::vars_os().collect(),
        ..VerifyOptions::default()
    };
    let scratch = tempfile::tempdir().unwrap();
    let input = VerifyInput {
        workspace: &ws,
        layers: Vec::new(),
        changeset_hash: "blake3:make".into(),
        scratch_dir: scratch.path(),
        baseline_cache: None,
    };
    let r = run_verification(&input, &opts).unwrap();
    assert_eq!(r.argv, ["make", "test"], "{r:#?}");
    assert_eq!(r.runner, RunnerKind::Pytest, "{r:#?}");
    assert_eq!(r.verdict, Verdict::Failed, "{r:#?}");
    assert_eq!((r.tests.passed, r.tests.failed), (1, 1), "{r:#?}");
    let f = &r.failures[0];
    assert_eq!(f.file.as_deref(), Some("tests/test_calc.py"), "{r:#?}");
    assert_eq!(f.line, Some(6), "{r:#?}");
}
