//! Verify runs what the project runs: explicit commands keep their structured adapter, and
//! real open-source projects (fetched and set up by `scripts/ci-deps-realprojects.sh`, the way
//! their developers set them up) get the runner's own counts, through the real sandbox.

use std::path::{Path, PathBuf};
use std::time::Duration;

use airlock_verify::{
    RunnerKind, Verdict, VerdictReport, VerifyInput, VerifyOptions, run_verification,
};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// A private copy of `dir` as a workspace.
struct Workspace {
    _dir: tempfile::TempDir,
    root: PathBuf,
    scratch: tempfile::TempDir,
}

fn copy_of(dir: &Path) -> Workspace {
    let tmp = tempfile::Builder::new()
        .prefix("verify-real-")
        .tempdir()
        .unwrap();
    let root = tmp.path().join("ws");
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(dir)
        .arg(&root)
        .status()
        .unwrap();
    assert!(status.success());
    Workspace {
        _dir: tmp,
        root,
        scratch: tempfile::tempdir().unwrap(),
    }
}

fn options(command: Option<&str>) -> VerifyOptions {
    let home = PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into()));
    VerifyOptions {
        timeout: Duration::from_secs(120),
        command: command.map(|c| c.split_whitespace().map(str::to_string).collect()),
        home_binds: [".cargo", ".rustup", ".pyenv", "go/pkg/mod"]
            .iter()
            .map(|d| home.join(d))
            .filter(|p| p.exists())
            .collect(),
        host_env: std::env::vars_os().collect(),
        ..VerifyOptions::default()
    }
}

fn verify_with(ws: &Workspace, layers: Vec<PathBuf>, opts: &VerifyOptions) -> VerdictReport {
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

#[test]
fn explicit_go_test_keeps_the_go_adapter() {
    let ws = copy_of(&fixtures().join("go/fail"));
    let r = verify_with(&ws, Vec::new(), &options(Some("go test ./...")));
    assert_eq!(r.runner, RunnerKind::Go, "{r:#?}");
    assert_eq!(r.verdict, Verdict::Failed, "{r:#?}");
    assert!(r.tests.failed >= 1 && r.tests.passed >= 1, "{r:#?}");
    assert!(
        r.failures
            .iter()
            .any(|f| f.file.as_deref() == Some("calc/calc_test.go") && f.line.is_some()),
        "{r:#?}"
    );
    assert_eq!(r.argv[..3], ["go", "test", "-json"]);
}
