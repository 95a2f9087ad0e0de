//! The Bash Guard: parse a shell script with a real bash parser (brush-parser), normalise its
//! words (quotes, escapes, `$'…'`, variables assigned earlier, trivially static substitutions),
//! walk every command the script can run — through pipelines, lists, compound commands,
//! substitutions, `bash -c` / `eval` strings, wrappers, `xargs`, `find -exec`, `parallel` and
//! the commands other commands carry in their arguments (ssh's remote command, tar's program
//! options, git's command-valued configuration, tmux, `at`, `docker exec`, editor escapes) —
//! and deny the dangerous families with a stable rule id (CLI.md).
//!
//! Invariants: [`evaluate`] is pure and never panics; anything the guard cannot understand
//! fails closed (`unparseable`, `dynamic_command`); a [`GuardedScript`] exists only for a script
//! the guard allowed.
//!
//! ```
//! use airlock_policy::guard::{evaluate, guard};
//! let report = evaluate("a=rm; $a -rf /");
//! assert_eq!(report.decision.rule, "destruction");
//! assert!(guard("cargo test --workspace").is_ok());
//! ```

mod command;
mod effects;
mod inline;
mod normalize;
mod parse;
mod programs;
mod rules;
mod walk;

use crate::decision::{Decision, Stage};

/// The guard's verdict on one script, with the script as the guard understood it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardReport {
    /// The decision (stage [`Stage::Guard`]); an allow carries the rule `allow`.
    pub decision: Decision,
    /// The commands the script runs after normalisation, `; `-separated.
    pub normalized: String,
}

/// A script the guard allowed. Only this module can build one, so holding a `GuardedScript`
/// proves the script went through the guard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardedScript {
    script: String,
    normalized: String,
}

impl GuardedScript {
    /// The script exactly as submitted.
    pub fn script(&self) -> &str {
        &self.script
    }
    /// The commands the script runs after normalisation.
    pub fn normalized(&self) -> &str {
        &self.normalized
    }
}

/// The rule families, in the order they win when several match one script: the most harmful
/// effect names the denial, and `privilege` only stands when nothing worse is underneath.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Family {
    Destruction,
    RemoteExec,
    Exfiltration,
    Persistence,
    EnvDump,
    InlineInterpreter,
    DynamicCommand,
    Privilege,
    HostAvailability,
    Unparseable,
}

impl Family {
    pub(crate) fn rule(self) -> &'static str {
        match self {
            Family::Destruction => "destruction",
            Family::RemoteExec => "remote_exec",
            Family::Exfiltration => "exfiltration",
            Family::Persistence => "persistence",
            Family::EnvDump => "env_dump",
            Family::InlineInterpreter => "inline_interpreter",
            Family::DynamicCommand => "dynamic_command",
            Family::Privilege => "privilege",
            Family::HostAvailability => "host_availability",
            Family::Unparseable => "unparseable",
        }
    }
}

/// One match of a rule family, with its human sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    pub(crate) family: Family,
    pub(crate) reason: String,
}

/// Judge one shell script. Pure; never panics; an allow has the rule `allow`.
pub fn evaluate(script: &str) -> GuardReport {
    let outcome = walk::analyse(script);
    let worst = outcome
        .findings
        .iter()
        .enumerate()
        .min_by_key(|(i, f)| (f.family, *i))
        .map(|(_, f)| f.clone());
    let decision = match worst {
        Some(f) => Decision::deny(Stage::Guard, f.family.rule(), f.reason),
        None => Decision::allow(
            Stage::Guard,
            "allow",
            "No command in the script matches a forbidden family.",
        ),
    };
    GuardReport {
        decision,
        normalized: outcome.normalized,
    }
}

/// Judge a script and, when it is allowed, wrap it as a [`GuardedScript`].
pub fn guard(script: &str) -> Result<GuardedScript, GuardReport> {
    let report = evaluate(script);
    if report.decision.is_allow() {
        Ok(GuardedScript {
            script: script.to_owned(),
            normalized: report.normalized,
        })
    } else {
        Err(report)
    }
}

#[cfg(test)]
mod tests;
