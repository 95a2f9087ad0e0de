//! Verdict integrity against forging test code, on the real runners through
//! `run_verification` and the real sandbox: a jest suite small enough to run in band (the test
//! shares jest's process) writes jest's JSON result file itself and exits 0; vitest and
//! node:test tests that try the same. None of it may be a pass.
//!
//! Needs the runners installed: `bash scripts/ci-deps-verify.sh`.

use std::path::{Path, PathBuf};
use std::time::Duration;

mod host;
use airlock_verify::{Verdict, VerdictReport, VerifyInput, VerifyOptions, run_verification};

fn node_modules() -> PathBuf {
    let nm = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/node_deps/node_modules");
    assert!(
        nm.join(".bin/jest").exists(),
        "the fixture runners are not installed: run `bash scripts/ci-deps-verify.sh`"
    );
    nm
}

fn project(files: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    for (rel, body) in files {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }
    std::os::unix::fs::symlink(node_modules(), root.join("node_modules")).unwrap();
    (dir, root)
}

fn verify(root: &Path) -> VerdictReport {
    let scratch = tempfile::tempdir().unwrap();
    let input = VerifyInput {
        workspace: root,
        layers: Vec::new(),
        changeset_hash: "blake3:integrity".into(),
        scratch_dir: scratch.path(),
        baseline_cache: None,
    };
    let opts = VerifyOptions {
        timeout: Duration::from_secs(120),
        home_binds: host::home_binds(&[".cargo", ".rustup", ".pyenv"]),
        ro_binds: vec![node_modules()],
        host_env: std::env::vars_os().collect(),
        ..VerifyOptions::default()
    };
    run_verification(&input, &opts).expect("verification runs")
}

const SUM: &str = "module.exports = (a, b) => a - b;\n";

#[test]
fn jest_in_band_with_a_forged_result_file_is_not_a_pass() {
    let forge = r#"const fs = require("fs");
const sum = require("./sum");
const out = process.argv.find((a) => a.startsWith("--outputFile="));
test("adds", () => {
  expect(sum(2, 3)).toBe(5);
});
test("zz forges", () => {
  if (out) {
    fs.writeFileSync(out.split("=")[1], JSON.stringify({ success: true, numFailedTests: 0, numPassedTests: 2, numTotalTests: 2, numPendingTests: 0, numRuntimeErrorTestSuites: 0, numFailedTestSuites: 0, testResults: [] }));
  }
  process.exit(0);
});
"#;
    let (_d, root) = project(&[
        (
            "package.json",
            r#"{"name":"f","private":true,"scripts":{"test":"jest"}}"#,
        ),
        ("sum.js", SUM),
        ("sum.test.js", forge),
    ]);
    let r = verify(&root);
    assert_ne!(r.verdict, Verdict::Passed, "{}", r.diagnostics);
}

#[test]
fn jest_honest_runs_agree_with_the_witness() {
    let (_d, root) = project(&[
        (
            "package.json",
            r#"{"name":"f","private":true,"scripts":{"test":"jest"}}"#,
        ),
        ("sum.js", "module.exports = (a, b) => a + b;\n"),
        (
            "sum.test.js",
            "const sum = require('./sum');\ntest('adds', () => { expect(sum(2, 3)).toBe(5); });\ntest.skip('later', () => {});\n",
        ),
    ]);
    let r = verify(&root);
    assert_eq!(r.verdict, Verdict::Passed, "{}", r.diagnostics);
    assert!(r.integrity.disagreements.is_empty(), "{:?}", r.integrity);
    let (_d, root) = project(&[
        (
            "package.json",
            r#"{"name":"f","private":true,"scripts":{"test":"jest"}}"#,
        ),
        ("sum.js", SUM),
        (
            "sum.test.js",
            "const sum = require('./sum');\ntest('adds', () => { expect(sum(2, 3)).toBe(5); });\n",
        ),
    ]);
    let r = verify(&root);
    assert_eq!(r.verdict, Verdict::Failed, "{}", r.diagnostics);
}

#[test]
fn vitest_and_node_tests_that_exit_early_are_not_a_pass() {
    let (_d, root) = project(&[
        (
            "package.json",
            r#"{"name":"f","private":true,"type":"module","scripts":{"test":"vitest run"}}"#,
        ),
        ("sum.js", "export const sum = (a, b) => a - b;\n"),
        (
            "sum.test.js",
            "import { test, expect } from 'vitest';\nimport { sum } from './sum.js';\ntest('adds', () => { expect(sum(2, 3)).toBe(5); });\n",
        ),
        (
            "zz.test.js",
            "import { test } from 'vitest';\ntest('leaves', () => { process.exit(0); });\n",
        ),
    ]);
    let r = verify(&root);
    assert_ne!(r.verdict, Verdict::Passed, "{}", r.diagnostics);
    let (_d, root) = project(&[
        (
            "package.json",
            r#"{"name":"f","private":true,"type":"module","scripts":{"test":"node --test"}}"#,
        ),
        ("sum.js", "export const sum = (a, b) => a - b;\n"),
        (
            "test/sum.test.js",
            "import { test } from 'node:test';\nimport assert from 'node:assert';\nimport { sum } from '../sum.js';\ntest('adds', () => { assert.equal(sum(2, 3), 5); });\n",
        ),
        (
            "test/zz.test.js",
            "import { test } from 'node:test';\ntest('leaves', () => { process.exit(0); });\n",
        ),
    ]);
    let r = verify(&root);
    assert_ne!(r.verdict, Verdict::Passed, "{}", r.diagnostics);
}
