//! The verdict report and its parts, serialised exactly as the verdict JSON of CLI.md
//! (`verdict`, `changeset`, `runner`, `tests`, `failures`, `diagnostics`, `duration_ms`), plus a
//! few optional extra fields that are omitted when they carry nothing.

use serde::{Deserialize, Serialize};

/// Which test runner (and so which adapter) a verification uses. Serialised with the lowercase
/// names of CLI.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunnerKind {
    /// Node's built-in runner, `node --test`, read through its JUnit reporter.
    Node,
    /// vitest, read through its JUnit reporter.
    Vitest,
    /// jest, read through its `--json` result file.
    Jest,
    /// `cargo test`: cargo's JSON messages for compile errors, libtest's human output for tests.
    Cargo,
    /// pytest, read through its JUnit report and airlock's witness plugin.
    Pytest,
    /// `go test -json`.
    Go,
    /// Any command that writes a JUnit XML file to `$AIRLOCK_JUNIT_OUTPUT`.
    Junit,
    /// Any command: its exit code, recognised summary lines and the tail of its output.
    Command,
}

impl RunnerKind {
    /// The CLI name of the runner (`node`, `vitest`, ...).
    pub fn name(self) -> &'static str {
        match self {
            RunnerKind::Node => "node",
            RunnerKind::Vitest => "vitest",
            RunnerKind::Jest => "jest",
            RunnerKind::Cargo => "cargo",
            RunnerKind::Pytest => "pytest",
            RunnerKind::Go => "go",
            RunnerKind::Junit => "junit",
            RunnerKind::Command => "command",
        }
    }

    /// Parses a CLI name; `None` for anything else (the caller reports it as a usage error).
    pub fn from_name(name: &str) -> Option<RunnerKind> {
        let kind = match name {
            "node" => RunnerKind::Node,
            "vitest" => RunnerKind::Vitest,
            "jest" => RunnerKind::Jest,
            "cargo" => RunnerKind::Cargo,
            "pytest" => RunnerKind::Pytest,
            "go" => RunnerKind::Go,
            "junit" => RunnerKind::Junit,
            "command" => RunnerKind::Command,
            _ => return None,
        };
        Some(kind)
    }
}

impl std::fmt::Display for RunnerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The outcome of a verification: the shared [`airlock_types::Verdict`], re-exported so the
/// report, the rules and the stage's record all name one type.
pub use airlock_types::Verdict;

/// Test counts as the runner reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Tests that passed.
    pub passed: u64,
    /// Tests that failed or errored.
    pub failed: u64,
    /// Tests skipped, ignored, pending or todo.
    pub skipped: u64,
}

impl Counts {
    /// Tests that actually ran (passed + failed).
    pub fn ran(&self) -> u64 {
        self.passed + self.failed
    }

    /// Adds another set of counts to this one.
    pub fn add(&mut self, other: Counts) {
        self.passed += other.passed;
        self.failed += other.failed;
        self.skipped += other.skipped;
    }
}

/// What kind of problem a [`Failure`] describes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// A test's assertion failed or the test threw.
    #[default]
    Test,
    /// The code did not compile, or a test file did not parse / load.
    Compile,
}

/// One failing test (or one compile error), already sanitised: ANSI stripped, message bounded,
/// location workspace-relative.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// The test's name (for a compile error, the file or `"(compile)"`).
    pub test: String,
    /// The workspace-relative file of the failing assertion, when known.
    pub file: Option<String>,
    /// Its 1-based line, when known.
    pub line: Option<u32>,
    /// The assertion or error message (bounded).
    pub message: String,
    /// The column, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
    /// The expected value, when the runner gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// The received (actual) value, when the runner gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received: Option<String>,
    /// The left operand of a comparison whose sides the runner does not name as expected or
    /// actual (Rust's `assert_eq!` `left:`, pytest's `assert L == R`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left: Option<String>,
    /// The right operand of such a comparison.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub right: Option<String>,
    /// The test's full identity, in a form `verify --only` accepts and translates to the
    /// runner's own selection: a pytest node id (`tests/test_a.py::TestX::test_y[p1]`), a
    /// vitest/jest `file > describe > … > name`, a cargo test path (`module::tests::name`), a
    /// go `./pkg::TestX/sub`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Stack frames inside the workspace, innermost first, as `file:line[:col]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stack: Vec<String>,
    /// Test failure or compile error.
    #[serde(default, skip_serializing_if = "is_test_kind")]
    pub kind: FailureKind,
    /// True when the same test also fails on the unchanged base (baseline runs only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pre_existing: bool,
}

fn is_test_kind(kind: &FailureKind) -> bool {
    *kind == FailureKind::Test
}

impl Failure {
    /// The identity used to recognise the same failure across runs (baseline): kind, test
    /// (its full [`Failure::id`] when known, else its name) and file.
    pub fn identity(&self) -> String {
        format!(
            "{:?}\u{1f}{}\u{1f}{}",
            self.kind,
            self.id.as_deref().unwrap_or(&self.test),
            self.file.as_deref().unwrap_or("")
        )
    }
}

/// The result of [`crate::run_verification`]; serialises to the verdict JSON of CLI.md.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerdictReport {
    /// passed | failed | no_tests | timeout | error.
    pub verdict: Verdict,
    /// The content hash of the verified changeset, as the caller gave it.
    pub changeset: String,
    /// The runner (adapter) that was used.
    pub runner: RunnerKind,
    /// Test counts as the runner reported them.
    pub tests: Counts,
    /// Failures and compile errors (bounded; see `failures_omitted`).
    pub failures: Vec<Failure>,
    /// Bounded, sanitised text for the model.
    pub diagnostics: String,
    /// Wall time of the verification, the base run of a baseline included.
    pub duration_ms: u64,
    /// True when the run had no kernel isolation (degraded backend, operator opt-in).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub degraded: bool,
    /// The sandbox tier the tests ran in (`full`, `landlock`, `degraded`); absent when no
    /// sandbox ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    /// Failures left out of `failures` to keep the report bounded.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failures_omitted: u64,
    /// The process exit code, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Whether failures were compared against a baseline run on the unchanged base.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub baseline: bool,
    /// What the baseline compared against (baseline runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<BaseReport>,
    /// The exact command that ran (empty when nothing ran).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub argv: Vec<String>,
    /// Where the run's environment differs from the host's, one short note each (no network,
    /// masked files, a fresh `HOME`, variables not passed, …), so a sandbox artefact can be
    /// told from a real failure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub environment: Vec<String>,
    /// The resource ceiling the run hit (`memory`, `cpu`, `disk`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling: Option<String>,
    /// The ceilings in force, how each was enforced and what the run used (the sandbox's
    /// `limits` object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<serde_json::Value>,
    /// Which tests the verdict covers, with `--impacted` / `--impacted-first` (absent
    /// otherwise): `impacted` (only the tests related to the change ran) or `full`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Scope>,
    /// What the impacted phase selected and found (`--impacted`, `--impacted-first`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impacted: Option<ImpactedReport>,
    /// What the integrity checks found: disagreeing signals (which make a would-be pass an
    /// `error`) and concerns (what the changeset did to the test definition), absent when
    /// there is nothing to say.
    #[serde(default, skip_serializing_if = "crate::integrity::Integrity::is_clear")]
    pub integrity: crate::integrity::Integrity,
    /// The proof of this run, made by the harness only (never read from JSON: a report read
    /// back attests nothing). Private, so no code outside this crate makes a report.
    #[serde(skip)]
    pub(crate) attestation: crate::integrity::Attestation,
}

/// Whether a verification runs the tests related to the change (see
/// [`crate::adapter::impacted`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ImpactedMode {
    /// The whole suite only.
    #[default]
    Off,
    /// Only the related tests (advisory: the caller must not let it unlock apply).
    Only,
    /// The related tests first: if they fail, that verdict (scope `impacted`) at once;
    /// otherwise the whole suite's verdict (scope `full`).
    First,
}

/// Which tests a verdict covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The whole suite.
    Full,
    /// Only the tests related to the change: says nothing about the rest of the suite.
    Impacted,
}

/// What the impacted phase found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImpactedStatus {
    /// The related tests ran.
    Ran,
    /// No test is related to the changed files: nothing ran in this phase.
    NoneRelated,
    /// Every test is related (a lockfile, the runner's configuration, or a selection that is
    /// the whole suite): nothing smaller ran first.
    Everything,
    /// The runner has no related-tests selection.
    Unsupported,
}

/// The impacted phase of a verification: what it selected, and what the run of it gave.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImpactedReport {
    /// What the phase found.
    pub status: ImpactedStatus,
    /// One sentence: how the selection was made, or why nothing was selected.
    pub note: String,
    /// How many paths the changeset touches.
    pub changed: usize,
    /// The selection: changed modules (vitest, jest), packages (go), crates (cargo), test
    /// files (pytest); at most 50 (`selected_total` counts them all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selected: Vec<String>,
    /// How many were selected.
    #[serde(default, skip_serializing_if = "is_zero_usize")]
    pub selected_total: usize,
    /// The verdict of the related tests' run (when they ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Their counts (when they ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests: Option<Counts>,
    /// The exact command of that run (when they ran).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub argv: Vec<String>,
    /// Wall time of that run (0 when nothing ran).
    pub duration_ms: u64,
}

fn is_zero_usize(n: &usize) -> bool {
    *n == 0
}

/// The unchanged base a baseline run compared against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseReport {
    /// The base's identity: a fingerprint of the whole base tree, the runner's exact argv, the
    /// environment that reaches the sandbox and the toolchain. A cached base result is reused
    /// only under exactly this identity.
    pub id: String,
    /// The base run's verdict.
    pub verdict: Verdict,
    /// The base run's counts.
    pub tests: Counts,
    /// True when the base result came from the cache (an identical base was run before).
    pub reused: bool,
    /// Wall time of the base run (0 when reused).
    pub duration_ms: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl VerdictReport {
    /// What this run attests, to be sealed for apply (see [`crate::integrity::seal`]).
    pub fn attestation(&self) -> &crate::integrity::Attestation {
        &self.attestation
    }

    /// True only for [`Verdict::Passed`].
    pub fn passed(&self) -> bool {
        self.verdict.is_pass()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialises_to_the_cli_shape() {
        let report = VerdictReport {
            verdict: Verdict::NoTests,
            changeset: "abc".into(),
            runner: RunnerKind::Pytest,
            tests: Counts::default(),
            failures: vec![Failure {
                test: "t".into(),
                file: Some("a.py".into()),
                line: Some(3),
                message: "boom".into(),
                ..Failure::default()
            }],
            diagnostics: "d".into(),
            duration_ms: 5,
            degraded: false,
            tier: None,
            failures_omitted: 0,
            exit_code: None,
            baseline: false,
            base: None,
            argv: Vec::new(),
            environment: Vec::new(),
            ceiling: None,
            limits: None,
            scope: None,
            impacted: None,
            integrity: Default::default(),
            attestation: Default::default(),
        };
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "verdict": "no_tests", "changeset": "abc", "runner": "pytest",
                "tests": {"passed": 0, "failed": 0, "skipped": 0},
                "failures": [{"test": "t", "file": "a.py", "line": 3, "message": "boom"}],
                "diagnostics": "d", "duration_ms": 5
            })
        );
    }

    #[test]
    fn runner_names_round_trip() {
        for kind in [
            RunnerKind::Node,
            RunnerKind::Vitest,
            RunnerKind::Jest,
            RunnerKind::Cargo,
            RunnerKind::Pytest,
            RunnerKind::Go,
            RunnerKind::Junit,
            RunnerKind::Command,
        ] {
            assert_eq!(RunnerKind::from_name(kind.name()), Some(kind));
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.name()));
        }
        assert_eq!(RunnerKind::from_name("mocha"), None);
    }
}
