//! Runner adapters: how each runner is steered to a structured reporter, and how its output is
//! read back into counts and [`Failure`]s.
//!
//! Every parser streams (line by line from spools, or a size-capped report file) and hands each
//! failure to a [`FailureSink`] as soon as it is complete, so memory stays bounded.

pub mod cargo;
pub mod doctest;
pub mod generic;
pub mod gotest;
pub mod impacted;
pub mod jest;
pub mod junit;
pub mod node;
pub mod pytrace;
pub mod select;

use std::ffi::OsString;

use crate::detect::FileSource;
use crate::model::{Counts, Failure, RunnerKind};

/// Largest report file (JUnit XML, jest JSON) the adapters will parse.
pub const MAX_REPORT_BYTES: u64 = 64 * 1024 * 1024;

/// Directory, relative to the workspace, where reporters write their files. It is created in a
/// private layer on top of the workspace and lands in the thrown-away upper dir.
pub const REPORT_DIR: &str = ".airlock-verify";

/// Receives failures as the parsers find them.
pub trait FailureSink {
    /// One failing test or compile error.
    fn failure(&mut self, failure: Failure);
}

impl<F: FnMut(Failure)> FailureSink for F {
    fn failure(&mut self, failure: Failure) {
        self(failure)
    }
}

/// How a run's results are read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportFormat {
    /// A JUnit XML file at the plan's report path (plus node's load errors on stdout).
    Junit,
    /// jest's `--json --outputFile` file.
    JestJson,
    /// cargo JSON messages interleaved with libtest's human output on stdout.
    CargoLibtest,
    /// `go test -json` events on stdout, build errors on stderr.
    GoJson,
    /// Recognised summary lines and the tail of the output.
    Generic,
}

/// The command to run and how to read it.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Which runner this is.
    pub kind: RunnerKind,
    /// The command.
    pub argv: Vec<OsString>,
    /// Extra environment.
    pub env: Vec<(String, String)>,
    /// Workspace-relative path of the report file, if the runner writes one.
    pub report: Option<String>,
    /// How to parse the results.
    pub format: ReportFormat,
    /// A binary the plan needs inside the workspace (`node_modules/.bin/vitest`), checked before
    /// running so a missing install is an `error` verdict with a clear reason.
    pub requires: Option<String>,
    /// The key of airlock's pytest witness channel, when the plan loads the witness plugin
    /// (see [`crate::integrity`]).
    pub witness: Option<String>,
    /// The plan asks libtest for its per-test log on standard error (`--logfile`).
    pub libtest_log: bool,
    /// Steps of the command come after the runner (a script's `jest && tsc`): when the
    /// runner fails, they never run, so failures that already failed on the base cannot
    /// make such a run pass (see `crate::verdict`).
    pub steps_after_runner: bool,
}

/// What the parsers learned, apart from the failures themselves.
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    /// Test counts.
    pub counts: Counts,
    /// True when a report or summary gave the counts (false: nothing recognised).
    pub counts_known: bool,
    /// True when the report file the plan expected was not there or did not parse.
    pub report_missing: bool,
    /// Why the report could not be read.
    pub report_problem: Option<String>,
    /// The runner itself said there were no tests.
    pub said_no_tests: bool,
    /// Where the run's independent signals disagree (see [`crate::integrity`]).
    pub disagreements: Vec<String>,
    /// The independent signals the run was checked against.
    pub signals: Vec<String>,
}

/// A plan of `kind` running `argv`, reading no report (for unit tests of argv rewrites).
#[cfg(test)]
pub(crate) fn test_plan(kind: RunnerKind, argv: &[&str]) -> Plan {
    Plan {
        kind,
        argv: os(argv),
        env: Vec::new(),
        report: None,
        format: ReportFormat::Generic,
        requires: None,
        witness: None,
        libtest_log: false,
        steps_after_runner: false,
    }
}

/// A plan's argv as strings (for unit tests of argv rewrites).
#[cfg(test)]
pub(crate) fn test_argv(p: &Plan) -> Vec<String> {
    p.argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// `cargo test …` (any options before the subcommand).
fn is_cargo_test(argv: &[OsString]) -> bool {
    let program = argv
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .is_some_and(|n| n == "cargo");
    program
        && argv
            .iter()
            .skip(1)
            .find(|a| {
                !a.to_string_lossy().starts_with('-') && !a.to_string_lossy().starts_with('+')
            })
            .is_some_and(|a| a == "test" || a == "t")
}

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

/// The command and reporter wiring for `kind`. `explicit` is the user's command, if any: the
/// reporter flags are appended to it for runners that accept trailing flags.
pub fn plan(
    kind: RunnerKind,
    explicit: Option<&[String]>,
    visible_root: &std::path::Path,
    src: &dyn FileSource,
) -> Plan {
    let report_abs = |name: &str| {
        visible_root
            .join(REPORT_DIR)
            .join(name)
            .to_string_lossy()
            .into_owned()
    };
    let local_bin = |name: &str| {
        let rel = format!("node_modules/.bin/{name}");
        if src.exists(&rel) || explicit.is_none() {
            Some(rel)
        } else {
            None
        }
    };
    // Nothing a project could test for (CI detection, colour): the output is not a terminal,
    // and the sanitiser strips colour codes anyway. What a plan does add is named in the
    // verdict's environment note.
    let mut env: Vec<(String, String)> = Vec::new();
    let explicit_argv = explicit.map(|c| c.iter().map(OsString::from).collect::<Vec<_>>());
    // airlock's witness module for the runner (see `crate::integrity::witness`).
    let witness_abs = |kind: RunnerKind| {
        crate::integrity::witness::module_for(kind).map_or_else(String::new, |(file, _)| {
            report_abs(&format!("{}/{file}", crate::integrity::witness::DIR))
        })
    };
    match kind {
        RunnerKind::Node => {
            let report = format!("{REPORT_DIR}/node.xml");
            let mut argv = explicit_argv.unwrap_or_else(|| os(&["node", "--test"]));
            // Node options must precede the file arguments: insert them after the program.
            let at = 1.min(argv.len());
            argv.splice(
                at..at,
                os(&[
                    "--test-reporter=junit",
                    &format!("--test-reporter-destination={}", report_abs("node.xml")),
                    "--test-reporter=spec",
                    "--test-reporter-destination=stdout",
                    &format!("--test-reporter={}", witness_abs(RunnerKind::Node)),
                    "--test-reporter-destination=stderr",
                ]),
            );
            Plan {
                kind,
                argv,
                env,
                report: Some(report),
                format: ReportFormat::Junit,
                requires: None,
                witness: Some(crate::integrity::witness::random_key()),
                libtest_log: false,
                steps_after_runner: false,
            }
        }
        RunnerKind::Vitest => {
            let requires = local_bin("vitest");
            let mut argv = explicit_argv
                .unwrap_or_else(|| os(&[requires.as_deref().unwrap_or("vitest"), "run"]));
            argv.extend(os(&[
                "--reporter=junit",
                &format!("--outputFile.junit={}", report_abs("vitest.xml")),
                "--reporter=default",
                &format!("--reporter={}", witness_abs(RunnerKind::Vitest)),
                "--passWithNoTests",
                "--watch=false",
            ]));
            Plan {
                kind,
                argv,
                env,
                report: Some(format!("{REPORT_DIR}/vitest.xml")),
                format: ReportFormat::Junit,
                requires: explicit.is_none().then_some(requires).flatten(),
                witness: Some(crate::integrity::witness::random_key()),
                libtest_log: false,
                steps_after_runner: false,
            }
        }
        RunnerKind::Jest => {
            let requires = local_bin("jest");
            let mut argv =
                explicit_argv.unwrap_or_else(|| os(&[requires.as_deref().unwrap_or("jest")]));
            argv.extend(os(&[
                "--ci",
                "--json",
                &format!("--outputFile={}", report_abs("jest.json")),
                "--reporters=default",
                &format!("--reporters={}", witness_abs(RunnerKind::Jest)),
            ]));
            // jest refuses flags it does not know: `--testLocationInResults` came with jest 21,
            // `--passWithNoTests` with jest 22.
            let major = jest::installed_major(src);
            if major.is_none_or(|m| m >= 21) {
                argv.push("--testLocationInResults".into());
            }
            if major.is_none_or(|m| m >= 22) {
                argv.push("--passWithNoTests".into());
            }
            argv.push("--watchAll=false".into());
            Plan {
                kind,
                argv,
                env,
                report: Some(format!("{REPORT_DIR}/jest.json")),
                format: ReportFormat::JestJson,
                requires: explicit.is_none().then_some(requires).flatten(),
                witness: Some(crate::integrity::witness::random_key()),
                libtest_log: false,
                steps_after_runner: false,
            }
        }
        RunnerKind::Pytest => {
            let mut argv = explicit_argv.unwrap_or_else(|| os(&["python3", "-m", "pytest", "-q"]));
            // airlock's witness plugin (a second, live account of every test; see
            // `crate::integrity::witness`), which also points pytest's JUnit report at its
            // file: the path is in no argument and no variable. The cache provider is left as
            // the project has it: the caller's cache layer points its directory elsewhere.
            argv.extend(os(&["-p", crate::integrity::witness::MODULE]));
            env.push(("PYTHONDONTWRITEBYTECODE".into(), "1".into()));
            Plan {
                kind,
                argv,
                env,
                report: Some(format!("{REPORT_DIR}/pytest.xml")),
                format: ReportFormat::Junit,
                requires: None,
                witness: Some(crate::integrity::witness::random_key()),
                libtest_log: false,
                steps_after_runner: false,
            }
        }
        RunnerKind::Cargo => {
            env.push(("CARGO_TERM_COLOR".into(), "never".into()));
            env.push(("RUST_BACKTRACE".into(), "0".into()));
            let mut argv = explicit_argv.unwrap_or_else(|| {
                os(&[
                    "cargo",
                    "test",
                    "--offline",
                    "--no-fail-fast",
                    "--message-format=json-diagnostic-short",
                ])
            });
            // libtest's own per-test log on standard error: the ledger's second account of
            // the run (`crate::integrity::libtest`). Only for `cargo test` itself.
            let libtest_log = is_cargo_test(&argv);
            if libtest_log {
                if !argv.iter().any(|a| a == "--") {
                    argv.push("--".into());
                }
                argv.extend(os(&crate::integrity::libtest::LOGFILE_ARGS));
            }
            Plan {
                kind,
                argv,
                env,
                report: None,
                format: ReportFormat::CargoLibtest,
                requires: None,
                witness: None,
                libtest_log,
                steps_after_runner: false,
            }
        }
        RunnerKind::Go => {
            env.push(("GOFLAGS".into(), "-mod=mod".into()));
            env.push(("GOPROXY".into(), "off".into()));
            let argv = explicit_argv.unwrap_or_else(|| os(&["go", "test", "-json", "./..."]));
            Plan {
                kind,
                argv,
                env,
                report: None,
                format: ReportFormat::GoJson,
                requires: None,
                witness: None,
                libtest_log: false,
                steps_after_runner: false,
            }
        }
        RunnerKind::Junit => {
            env.push(("AIRLOCK_JUNIT_OUTPUT".into(), report_abs("junit.xml")));
            Plan {
                kind,
                argv: explicit_argv.unwrap_or_default(),
                env,
                report: Some(format!("{REPORT_DIR}/junit.xml")),
                format: ReportFormat::Junit,
                requires: None,
                witness: None,
                libtest_log: false,
                steps_after_runner: false,
            }
        }
        RunnerKind::Command => Plan {
            kind,
            argv: explicit_argv.unwrap_or_default(),
            env,
            report: None,
            format: ReportFormat::Generic,
            requires: None,
            witness: None,
            libtest_log: false,
            steps_after_runner: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::DirSource;
    use std::path::Path;

    #[test]
    fn explicit_node_command_keeps_options_before_files() {
        let src = DirSource::new("/nonexistent");
        let cmd = vec!["node".to_string(), "--test".into(), "test/a.test.js".into()];
        let p = plan(RunnerKind::Node, Some(&cmd), Path::new("/ws"), &src);
        let argv: Vec<String> = p
            .argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(argv[0], "node");
        assert_eq!(argv.last().map(String::as_str), Some("test/a.test.js"));
        assert!(argv.contains(&"--test-reporter-destination=/ws/.airlock-verify/node.xml".into()));
        assert_eq!(p.report.as_deref(), Some(".airlock-verify/node.xml"));
    }

    #[test]
    fn missing_local_binaries_are_required() {
        let src = DirSource::new("/nonexistent");
        let p = plan(RunnerKind::Vitest, None, Path::new("/ws"), &src);
        assert_eq!(p.requires.as_deref(), Some("node_modules/.bin/vitest"));
        let p = plan(RunnerKind::Cargo, None, Path::new("/ws"), &src);
        assert!(p.requires.is_none());
        assert_eq!(p.format, ReportFormat::CargoLibtest);
    }
}
