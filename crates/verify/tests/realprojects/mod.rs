//! What the tests on real projects (`real_projects.rs`, `impacted.rs`) share: the projects set
//! up by `scripts/ci-deps-realprojects.sh` in `target/realprojects/`, staged layers over them,
//! and a verification through the real sandbox.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use airlock_verify::{VerdictReport, VerifyInput, VerifyOptions, run_verification};

/// A workspace for one verification: the project (or a private copy, kept by `_dir`) and a
/// scratch directory.
pub struct Workspace {
    pub _dir: Option<tempfile::TempDir>,
    pub root: PathBuf,
    pub scratch: tempfile::TempDir,
}

/// The set-up project `name`.
pub fn project(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/realprojects")
        .join(name);
    assert!(
        dir.exists(),
        "{} is missing: run `bash scripts/ci-deps-realprojects.sh`",
        dir.display()
    );
    dir.canonicalize().unwrap()
}

/// The project itself as the (read-only) workspace.
pub fn in_place(name: &str) -> Workspace {
    Workspace {
        _dir: None,
        root: project(name),
        scratch: tempfile::tempdir().unwrap(),
    }
}

/// A staged layer: `rel` of the project with `from` replaced by `to`.
pub fn staged(ws: &Workspace, rel: &str, from: &str, to: &str) -> tempfile::TempDir {
    let layer = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(ws.root.join(rel)).unwrap();
    assert!(text.contains(from), "{rel} has no {from:?}");
    let path = layer.path().join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
    layer
}

/// Options with the host's toolchains exposed and its environment passed down.
pub fn options(timeout: Duration) -> VerifyOptions {
    VerifyOptions {
        timeout,
        home_binds: crate::host::home_binds(&[".cargo", ".rustup", ".pyenv", "go/pkg/mod"]),
        host_env: std::env::vars_os().collect(),
        ..VerifyOptions::default()
    }
}

/// One verification of `ws` with `layers` over it, with kernel isolation.
pub fn verify_with(ws: &Workspace, layers: Vec<PathBuf>, opts: &VerifyOptions) -> VerdictReport {
    let input = VerifyInput {
        workspace: &ws.root,
        layers,
        changeset_hash: "blake3:real".into(),
        scratch_dir: ws.scratch.path(),
        baseline_cache: None,
    };
    let report = run_verification(&input, opts).expect("verification runs");
    assert!(!report.degraded, "real projects run with kernel isolation");
    report
}

/// Tests the report counts.
pub fn total(r: &VerdictReport) -> u64 {
    r.tests.passed + r.tests.failed + r.tests.skipped
}
