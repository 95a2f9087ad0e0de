//! The three axes of the Permission stage: [`WorkMode`], [`PermissionMode`] and the access
//! [`Profile`], plus the [`OperatorGrant`] that alone can switch a session to
//! [`Profile::Unrestricted`].
//!
//! Every axis only narrows. `FromStr` parses exactly what the command line accepts
//! (`--mode discuss|plan|build`, `--permission auto|ask`,
//! `--profile readonly|plan|allowlist|allow-all`): neither `execute` (internal) nor
//! `unrestricted` (operator-only) can be reached from a string, so no config file and no tool
//! argument can name them.
//!
//! ```
//! use airlock_policy::modes::{Profile, WorkMode};
//! assert_eq!("plan".parse::<WorkMode>().unwrap(), WorkMode::Plan);
//! assert!("unrestricted".parse::<Profile>().is_err());
//! assert_eq!(WorkMode::Build.default_profile(), Profile::AllowAll);
//! ```

use std::fmt;
use std::str::FromStr;

/// What the session is for. Narrows which tools may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum WorkMode {
    /// Read-only tools only (the default).
    #[default]
    Discuss,
    /// Read, and write plan artifacts only (`plans/**`, `PLAN.md`, configurable).
    Plan,
    /// No extra ceiling.
    Build,
    /// Internal: carrying out an approved plan. Same ceiling as [`WorkMode::Build`]; not
    /// reachable through `FromStr`.
    Execute,
}

impl WorkMode {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkMode::Discuss => "discuss",
            WorkMode::Plan => "plan",
            WorkMode::Build => "build",
            WorkMode::Execute => "execute",
        }
    }

    /// The widest profile this mode allows when none is given (never unrestricted).
    pub fn default_profile(self) -> Profile {
        match self {
            WorkMode::Discuss => Profile::Readonly,
            WorkMode::Plan => Profile::Plan,
            WorkMode::Build | WorkMode::Execute => Profile::AllowAll,
        }
    }
}

impl fmt::Display for WorkMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for WorkMode {
    type Err = ParseModeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "discuss" => Ok(WorkMode::Discuss),
            "plan" => Ok(WorkMode::Plan),
            "build" => Ok(WorkMode::Build),
            _ => Err(ParseModeError::new(
                "work mode",
                s,
                "discuss, plan or build",
            )),
        }
    }
}

/// Whether authorised calls run without routine approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PermissionMode {
    /// Authorised capabilities run without approval; `ask_user` is denied (the default).
    #[default]
    Auto,
    /// Gated calls (shell commands, apply, undo) ask the operator first.
    Ask,
}

impl PermissionMode {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            PermissionMode::Auto => "auto",
            PermissionMode::Ask => "ask",
        }
    }
}

impl fmt::Display for PermissionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PermissionMode {
    type Err = ParseModeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(PermissionMode::Auto),
            "ask" => Ok(PermissionMode::Ask),
            _ => Err(ParseModeError::new("permission mode", s, "auto or ask")),
        }
    }
}

/// Which tools exist for the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Profile {
    /// Read tools only, whatever the mode.
    Readonly,
    /// Read tools, and writes to plan artifacts only.
    Plan,
    /// Read tools; anything else only when a user `allow` rule matches.
    Allowlist,
    /// Every tool, still bounded by the jail, the guard, validation and the sandbox.
    AllowAll,
    /// Operator-only, per session, never persisted: lifts the workspace jail and the profile's
    /// tool limits, and lets `git_push` carry credentials; the bash guard and the sandbox still
    /// apply, and sensitive files and airlock state stay denied. Reachable only through an
    /// [`OperatorGrant`], never through `FromStr`.
    Unrestricted,
}

impl Profile {
    /// The lowercase name used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Readonly => "readonly",
            Profile::Plan => "plan",
            Profile::Allowlist => "allowlist",
            Profile::AllowAll => "allow-all",
            Profile::Unrestricted => "unrestricted",
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Profile {
    type Err = ParseModeError;
    /// Parses `readonly`, `plan`, `allowlist` and `allow-all`. `unrestricted` is refused: it
    /// takes an [`OperatorGrant`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "readonly" => Ok(Profile::Readonly),
            "plan" => Ok(Profile::Plan),
            "allowlist" => Ok(Profile::Allowlist),
            "allow-all" => Ok(Profile::AllowAll),
            _ => Err(ParseModeError::new(
                "access profile",
                s,
                "readonly, plan, allowlist or allow-all (unrestricted is an operator grant, not a name)",
            )),
        }
    }
}

/// A string that names no mode, permission mode or profile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{given}` is not a {what}; expected {expected}")]
pub struct ParseModeError {
    what: &'static str,
    given: String,
    expected: &'static str,
}

impl ParseModeError {
    fn new(what: &'static str, given: &str, expected: &'static str) -> Self {
        ParseModeError {
            what,
            given: given.to_string(),
            expected,
        }
    }
}

/// The operator's explicit, in-process permission to run a session unrestricted.
///
/// It is neither `Clone`, `Default`, `Serialize` nor `Deserialize`, so it cannot be read from a
/// config file, a tool argument or a persisted session. The only constructor is
/// [`OperatorGrant::from_cli_flag`], which the binary calls when the operator passes the
/// unrestricted flag on its own command line; nothing else in airlock calls it (grep for it).
/// [`crate::permission::Policy::grant_unrestricted`] consumes it;
/// [`crate::jail::Jail::set_unrestricted`] borrows it, so one grant covers both.
#[derive(Debug)]
#[must_use = "a grant does nothing until given to Policy::grant_unrestricted / Jail::set_unrestricted"]
pub struct OperatorGrant {
    _operator_only: (),
}

impl OperatorGrant {
    /// The grant for an operator who switched unrestricted on with a command-line flag of this
    /// process. Call it from the CLI flag handler only.
    pub fn from_cli_flag() -> OperatorGrant {
        OperatorGrant { _operator_only: () }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_lowercase_names() {
        for m in [WorkMode::Discuss, WorkMode::Plan, WorkMode::Build] {
            assert_eq!(m.to_string().parse::<WorkMode>().unwrap(), m);
        }
        for p in [PermissionMode::Auto, PermissionMode::Ask] {
            assert_eq!(p.to_string().parse::<PermissionMode>().unwrap(), p);
        }
        for p in [
            Profile::Readonly,
            Profile::Plan,
            Profile::Allowlist,
            Profile::AllowAll,
        ] {
            assert_eq!(p.to_string().parse::<Profile>().unwrap(), p);
        }
    }

    #[test]
    fn operator_only_values_do_not_parse() {
        assert!("unrestricted".parse::<Profile>().is_err());
        assert!("Unrestricted".parse::<Profile>().is_err());
        assert!("execute".parse::<WorkMode>().is_err());
        assert!("BUILD".parse::<WorkMode>().is_err());
        let e = "yolo".parse::<PermissionMode>().unwrap_err();
        assert!(e.to_string().contains("`yolo`"));
    }

    #[test]
    fn default_profile_is_never_unrestricted() {
        assert_eq!(WorkMode::Discuss.default_profile(), Profile::Readonly);
        assert_eq!(WorkMode::Plan.default_profile(), Profile::Plan);
        assert_eq!(WorkMode::Execute.default_profile(), Profile::AllowAll);
        assert_eq!(WorkMode::default(), WorkMode::Discuss);
        assert_eq!(PermissionMode::default(), PermissionMode::Auto);
    }
}
