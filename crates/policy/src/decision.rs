//! The decision record every stage of the chain returns, serialised as the Decision JSON of
//! `CLI.md`: `{"decision", "stage", "rule", "reason"}`.

use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;

/// The outcome of one stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ruling {
    /// The call may proceed to the next stage.
    Allow,
    /// The call is refused; nothing happens.
    Deny,
    /// The operator must approve the call first.
    Ask,
}

impl Ruling {
    /// The most restrictive of two verdicts: deny beats ask beats allow.
    pub fn most_restrictive(self, other: Ruling) -> Ruling {
        fn rank(v: Ruling) -> u8 {
            match v {
                Ruling::Allow => 0,
                Ruling::Ask => 1,
                Ruling::Deny => 2,
            }
        }
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }
}

/// The stage of the chain that made a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// Work mode × permission mode × access profile × user rules.
    Permission,
    /// Path confinement to the workspace.
    Jail,
    /// The static bash guard.
    Guard,
    /// JSON Schema validation of the tool arguments.
    Validation,
}

impl Stage {
    /// The lowercase name used in JSON and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Permission => "permission",
            Stage::Jail => "jail",
            Stage::Guard => "guard",
            Stage::Validation => "validation",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One stage's decision: the verdict, the stage, a stable rule id and one human sentence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// allow, deny or ask.
    pub decision: Ruling,
    /// Which stage decided.
    pub stage: Stage,
    /// A stable, machine-matchable rule id (`jail_escape`, `destruction`, …).
    pub rule: Cow<'static, str>,
    /// One human sentence that says why, and where useful what to do instead.
    pub reason: String,
}

impl Decision {
    /// A decision with the given verdict.
    pub fn new(
        decision: Ruling,
        stage: Stage,
        rule: impl Into<Cow<'static, str>>,
        reason: impl Into<String>,
    ) -> Self {
        Decision {
            decision,
            stage,
            rule: rule.into(),
            reason: reason.into(),
        }
    }
    /// An allow decision.
    pub fn allow(
        stage: Stage,
        rule: impl Into<Cow<'static, str>>,
        reason: impl Into<String>,
    ) -> Self {
        Self::new(Ruling::Allow, stage, rule, reason)
    }
    /// A deny decision.
    pub fn deny(
        stage: Stage,
        rule: impl Into<Cow<'static, str>>,
        reason: impl Into<String>,
    ) -> Self {
        Self::new(Ruling::Deny, stage, rule, reason)
    }
    /// An ask decision.
    pub fn ask(
        stage: Stage,
        rule: impl Into<Cow<'static, str>>,
        reason: impl Into<String>,
    ) -> Self {
        Self::new(Ruling::Ask, stage, rule, reason)
    }
    /// True when the verdict is allow.
    pub fn is_allow(&self) -> bool {
        self.decision == Ruling::Allow
    }
    /// The decision as a JSON object (the Decision JSON of CLI.md).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

/// The human form, for a terminal: the rule and reason escaped ([`airlock_types::display`]), so a
/// path quoted in a reason cannot drive the screen. The JSON form ([`Decision::to_json`]) is exact.
impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verb = match self.decision {
            Ruling::Allow => "allowed",
            Ruling::Deny => "denied",
            Ruling::Ask => "needs approval",
        };
        write!(
            f,
            "{verb} by {} ({}): {}",
            self.stage,
            airlock_types::display::Shown::name(&self.rule),
            airlock_types::display::Shown::text(&self.reason)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deny_beats_ask_beats_allow() {
        use Ruling::*;
        assert_eq!(Allow.most_restrictive(Ask), Ask);
        assert_eq!(Ask.most_restrictive(Deny), Deny);
        assert_eq!(Deny.most_restrictive(Allow), Deny);
        assert_eq!(Allow.most_restrictive(Allow), Allow);
    }

    #[test]
    fn serialises_as_cli_decision_json() {
        let d = Decision::deny(Stage::Guard, "destruction", "Removes the root directory.");
        let v = d.to_json();
        assert_eq!(v["decision"], "deny");
        assert_eq!(v["stage"], "guard");
        assert_eq!(v["rule"], "destruction");
        assert_eq!(v["reason"], "Removes the root directory.");
    }
}
