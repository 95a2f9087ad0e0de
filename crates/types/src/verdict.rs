//! A verification's [`Verdict`] and the [`VerdictSource`] of the command behind it. Both are
//! stored by the stage as their names (`passed`, `operator_cli`) and parsed back into these
//! enums, so the gate in front of apply compares enums, never strings.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The outcome of a verification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The command exited 0, at least one test ran and none failed (failures that already
    /// existed on the base, when a baseline was asked for, do not count).
    Passed,
    /// A test failed, or the code did not compile / parse.
    Failed,
    /// The run executed no test. Never a pass.
    NoTests,
    /// The run did not finish within its timeout; the whole process tree was killed.
    Timeout,
    /// The runner could not run or crashed (missing runner, signal, OOM, no report, cancelled).
    Error,
}

impl Verdict {
    /// Every verdict, in declaration order.
    pub const ALL: [Verdict; 5] = [
        Verdict::Passed,
        Verdict::Failed,
        Verdict::NoTests,
        Verdict::Timeout,
        Verdict::Error,
    ];

    /// The verdict's JSON name.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Passed => "passed",
            Verdict::Failed => "failed",
            Verdict::NoTests => "no_tests",
            Verdict::Timeout => "timeout",
            Verdict::Error => "error",
        }
    }

    /// Parse [`Verdict::name`]; `None` for anything else.
    pub fn parse(name: &str) -> Option<Verdict> {
        Verdict::ALL.into_iter().find(|v| v.name() == name)
    }

    /// True only for [`Verdict::Passed`].
    pub fn is_pass(self) -> bool {
        self == Verdict::Passed
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where the command behind a verdict came from. The model never chooses a command whose
/// verdict unlocks apply: only the project's own declaration (detection), the operator's
/// configuration, the operator's command line, or an operator rule naming that command can.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictSource {
    /// The runner airlock detected from the project's files.
    Detected,
    /// The test command in the operator's configuration.
    OperatorConfig,
    /// `airlock verify -- CMD` on the operator's command line.
    OperatorCli,
    /// A command the agent passed that an operator rule allows (or the operator approved).
    OperatorRule,
    /// A command the agent chose: the verdict is advice only.
    Agent,
    /// Recorded without provenance (by an earlier airlock): trusted for nothing.
    Unrecorded,
    /// A run of selected tests only (`verify --only`), whoever chose the command: it says
    /// nothing about the rest of the suite, so it is advice only.
    Partial,
}

impl VerdictSource {
    /// Every source, in declaration order.
    pub const ALL: [VerdictSource; 7] = [
        VerdictSource::Detected,
        VerdictSource::OperatorConfig,
        VerdictSource::OperatorCli,
        VerdictSource::OperatorRule,
        VerdictSource::Agent,
        VerdictSource::Unrecorded,
        VerdictSource::Partial,
    ];

    /// True when a passing verdict from this source may unlock apply.
    pub fn unlocks_apply(self) -> bool {
        matches!(
            self,
            VerdictSource::Detected
                | VerdictSource::OperatorConfig
                | VerdictSource::OperatorCli
                | VerdictSource::OperatorRule
        )
    }

    /// The snake_case name used in the verdict JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictSource::Detected => "detected",
            VerdictSource::OperatorConfig => "operator_config",
            VerdictSource::OperatorCli => "operator_cli",
            VerdictSource::OperatorRule => "operator_rule",
            VerdictSource::Agent => "agent",
            VerdictSource::Unrecorded => "unrecorded",
            VerdictSource::Partial => "partial",
        }
    }

    /// Parse [`VerdictSource::as_str`]; anything else is [`VerdictSource::Unrecorded`].
    pub fn parse(s: &str) -> VerdictSource {
        match s {
            "detected" => VerdictSource::Detected,
            "operator_config" => VerdictSource::OperatorConfig,
            "operator_cli" => VerdictSource::OperatorCli,
            "operator_rule" => VerdictSource::OperatorRule,
            "agent" => VerdictSource::Agent,
            "partial" => VerdictSource::Partial,
            _ => VerdictSource::Unrecorded,
        }
    }
}

impl fmt::Display for VerdictSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a passing verdict is not the agent's to apply on its own: the run passed, but what it
/// proves depends on something the changeset itself changed. Each concern makes `apply` an
/// operator decision (the agent's call asks the operator, showing what changed). Stored by
/// its [`Concern::name`], parsed back by [`Concern::parse`]; an unknown name parses to
/// [`Concern::Unknown`], which is still a concern (fail closed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Concern {
    /// A test that exists on the base was changed or deleted.
    TestChanged,
    /// Test configuration changed: what the runner collects, how it reports or what counts
    /// as a pass (`conftest.py`, `pytest.ini`, a `[tool.pytest]` section, a jest/vitest
    /// config, a package.json `test` script, `harness`/test targets in `Cargo.toml`,
    /// `build.rs`, `.cargo/config.toml`, `TestMain`, build tags, Makefile test targets...).
    TestConfig,
    /// Changed code reaches for the run's machinery: early process exits, the report
    /// channel, inherited descriptors, the runner's own output format or internals.
    RunMachinery,
    /// The verification read session-local files (ignored paths such as `.venv`,
    /// `node_modules`) that change how code runs: interpreter start-up hooks, files inside
    /// installed packages that no installer record vouches for, launchers in
    /// `node_modules/.bin`.
    SessionLocalHook,
    /// The run executed fewer tests than the base's own run, or skipped tests the base ran.
    FewerTests,
    /// A concern recorded under a name this build does not know: still a concern.
    Unknown,
}

impl Concern {
    /// Every concern, in declaration order.
    pub const ALL: [Concern; 6] = [
        Concern::TestChanged,
        Concern::TestConfig,
        Concern::RunMachinery,
        Concern::SessionLocalHook,
        Concern::FewerTests,
        Concern::Unknown,
    ];

    /// The stable snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            Concern::TestChanged => "test_changed",
            Concern::TestConfig => "test_config",
            Concern::RunMachinery => "run_machinery",
            Concern::SessionLocalHook => "session_local_hook",
            Concern::FewerTests => "fewer_tests",
            Concern::Unknown => "unknown",
        }
    }

    /// Parse [`Concern::name`]; anything else is [`Concern::Unknown`] (still a concern).
    pub fn parse(name: &str) -> Concern {
        Concern::ALL
            .into_iter()
            .find(|c| c.name() == name)
            .unwrap_or(Concern::Unknown)
    }

    /// What it means, in a few words, for the operator.
    pub fn describe(self) -> &'static str {
        match self {
            Concern::TestChanged => "existing tests were changed or deleted",
            Concern::TestConfig => "the test configuration changed",
            Concern::RunMachinery => "changed code reaches for the test run's machinery",
            Concern::SessionLocalHook => {
                "the run depended on session-local files that change how code runs"
            }
            Concern::FewerTests => "fewer tests ran than on the base",
            Concern::Unknown => "a concern this version of airlock does not know",
        }
    }
}

impl fmt::Display for Concern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_names_parse_and_serde_round_trip() {
        for v in Verdict::ALL {
            assert_eq!(Verdict::parse(v.name()), Some(v));
            let json = serde_json::to_string(&v).unwrap();
            assert_eq!(json, format!("\"{}\"", v.name()));
            assert_eq!(serde_json::from_str::<Verdict>(&json).unwrap(), v);
            assert_eq!(v.to_string(), v.name());
            assert_eq!(v.is_pass(), v == Verdict::Passed);
        }
        for bad in ["", "Passed", "PASSED", "pass", "passed ", "ok"] {
            assert_eq!(Verdict::parse(bad), None, "{bad:?}");
        }
        assert!(serde_json::from_str::<Verdict>("\"Passed\"").is_err());
    }

    #[test]
    fn source_names_parse_and_serde_round_trip() {
        for s in VerdictSource::ALL {
            assert_eq!(VerdictSource::parse(s.as_str()), s);
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.as_str()));
            assert_eq!(serde_json::from_str::<VerdictSource>(&json).unwrap(), s);
        }
        assert_eq!(VerdictSource::parse("operator"), VerdictSource::Unrecorded);
        assert_eq!(VerdictSource::parse(""), VerdictSource::Unrecorded);
    }

    #[test]
    fn concern_names_parse_and_unknown_names_stay_concerns() {
        for c in Concern::ALL {
            assert_eq!(Concern::parse(c.name()), c);
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{}\"", c.name()));
        }
        assert_eq!(Concern::parse("tests_rewritten"), Concern::Unknown);
        assert_eq!(Concern::parse(""), Concern::Unknown);
    }

    #[test]
    fn only_operator_and_project_sources_unlock_apply() {
        let unlocking: Vec<_> = VerdictSource::ALL
            .into_iter()
            .filter(|s| s.unlocks_apply())
            .collect();
        assert_eq!(
            unlocking,
            [
                VerdictSource::Detected,
                VerdictSource::OperatorConfig,
                VerdictSource::OperatorCli,
                VerdictSource::OperatorRule
            ]
        );
    }
}
