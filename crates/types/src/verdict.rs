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
