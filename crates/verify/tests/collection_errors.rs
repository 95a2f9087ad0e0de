//! An error in code that `conftest.py` imports stops pytest before it writes a report: the
//! verdict is `failed` with the error's own file, line and column, not an `error` with a
//! traceback in a stderr tail. Real pytest through the real sandbox.
//!
//! Needs pytest for the host's `python3`: `bash scripts/ci-deps-verify.sh`.

use std::time::Duration;

mod host;
use airlock_verify::{FailureKind, Verdict, VerifyInput, VerifyOptions, run_verification};

#[test]
fn a_syntax_error_in_code_conftest_imports_is_a_located_failure() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    std::fs::create_dir_all(root.join("lib")).unwrap();
    std::fs::write(root.join("conftest.py"), "import lib.core\n").unwrap();
    std::fs::write(root.join("lib/__init__.py"), "").unwrap();
    std::fs::write(root.join("lib/core.py"), "def f():\n    return 1\n").unwrap();
    std::fs::write(root.join("test_a.py"), "def test_a():\n    assert True\n").unwrap();
    // The change: a syntax error on the second line of the library.
    let layer = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(layer.path().join("lib")).unwrap();
    std::fs::write(
        layer.path().join("lib/core.py"),
        "def f():\n    return (1\n",
    )
    .unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let input = VerifyInput {
        workspace: &root,
        layers: vec![layer.path().to_path_buf()],
        changeset_hash: "blake3:collection".into(),
        scratch_dir: scratch.path(),
        baseline_cache: None,
    };
    let opts = VerifyOptions {
        timeout: Duration::from_secs(120),
        home_binds: host::home_binds(&[".cargo", ".rustup", ".pyenv"]),
        host_env: std::env::vars_os().collect(),
        ..VerifyOptions::default()
    };
    let r = run_verification(&input, &opts).expect("verification runs");
    assert_eq!(r.verdict, Verdict::Failed, "{}", r.diagnostics);
    let f = r
        .failures
        .iter()
        .find(|f| f.file.as_deref() == Some("lib/core.py"))
        .unwrap_or_else(|| panic!("no failure located in lib/core.py: {:#?}", r.failures));
    assert_eq!(f.kind, FailureKind::Compile, "{f:?}");
    assert!(f.line.is_some_and(|l| l <= 3), "{f:?}");
    assert!(
        f.message.contains("SyntaxError") || f.message.contains("was never closed"),
        "{f:?}"
    );
}
