//! What kind of effect a tool has, which is all the Permission stage looks at besides its name
//! and subjects.

use std::fmt;

/// The effect class of a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolClass {
    /// Reads the workspace merged with staged changes: `read_file`, `list_dir`, `glob`, `grep`,
    /// `status`, `diff`.
    Read,
    /// Stages a change (never touches the workspace): `write_file`, `edit_file`, `apply_patch`,
    /// `delete_file`, `move_file`, `discard`.
    Write,
    /// Runs a shell command in the sandbox over workspace + staged changes: `bash`.
    Exec,
    /// Runs the project's tests in a fresh sandbox; read-only on the workspace: `verify`.
    Verify,
    /// Touches the real workspace: `apply`, `undo`.
    Apply,
    /// About the session itself, changing nothing (listing tools, explaining a decision).
    Meta,
    /// Asks the operator a question: `ask_user`.
    AskUser,
    /// Records or publishes the repository's history outside airlock's staging: `git_commit`,
    /// `git_push`. Denied by the readonly, plan and allowlist profiles and in DISCUSS and PLAN;
    /// in AUTO only an operator allow rule lets it run; in ASK the operator is asked.
    Publish,
}

impl ToolClass {
    /// The class of a built-in tool, or `None` for a name airlock does not know (which the
    /// caller must deny).
    pub fn of(tool: &str) -> Option<ToolClass> {
        Some(match tool {
            "read_file" | "list_dir" | "glob" | "grep" | "status" | "diff" | "git_status"
            | "git_diff" | "git_log" | "git_show" | "git_blame" => ToolClass::Read,
            "git_commit" | "git_push" => ToolClass::Publish,
            "write_file" | "edit_file" | "apply_patch" | "delete_file" | "move_file"
            | "discard" => ToolClass::Write,
            "bash" => ToolClass::Exec,
            "verify" => ToolClass::Verify,
            "apply" | "undo" => ToolClass::Apply,
            "ask_user" => ToolClass::AskUser,
            "tools" | "explain" => ToolClass::Meta,
            _ => return None,
        })
    }

    /// The lowercase name used in messages.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolClass::Read => "read",
            ToolClass::Write => "write",
            ToolClass::Exec => "exec",
            ToolClass::Verify => "verify",
            ToolClass::Apply => "apply",
            ToolClass::Meta => "meta",
            ToolClass::AskUser => "ask_user",
            ToolClass::Publish => "publish",
        }
    }

    /// The indefinite article before the name, for sentences: `an exec`, `a write`.
    pub fn article(self) -> &'static str {
        match self {
            ToolClass::Exec | ToolClass::Apply | ToolClass::AskUser => "an",
            _ => "a",
        }
    }

    /// True for classes whose rule subjects are command text rather than paths: `bash`, and
    /// `verify` with an explicit command.
    pub fn takes_commands(self) -> bool {
        matches!(self, ToolClass::Exec | ToolClass::Verify)
    }

    /// True for classes that change nothing anywhere (read, meta, asking the operator).
    pub fn is_read_only(self) -> bool {
        matches!(self, ToolClass::Read | ToolClass::Meta | ToolClass::AskUser)
    }
}

impl fmt::Display for ToolClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One call as the Permission stage sees it.
#[derive(Debug, Clone, Copy)]
pub struct ToolRequest<'a> {
    /// Tool name.
    pub tool: &'a str,
    /// Its effect class.
    pub class: ToolClass,
    /// The paths it touches as the agent gave them (workspace-relative), or for `bash` (and
    /// `verify` given a command) the command text; for `apply`/`undo`, the changeset's paths.
    pub subjects: &'a [String],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_built_in_tools() {
        assert_eq!(ToolClass::of("grep"), Some(ToolClass::Read));
        assert_eq!(ToolClass::of("move_file"), Some(ToolClass::Write));
        assert_eq!(ToolClass::of("bash"), Some(ToolClass::Exec));
        assert_eq!(ToolClass::of("undo"), Some(ToolClass::Apply));
        assert_eq!(ToolClass::of("ask_user"), Some(ToolClass::AskUser));
        assert_eq!(ToolClass::of("rm"), None);
        assert_eq!(ToolClass::of("git_log"), Some(ToolClass::Read));
        assert_eq!(ToolClass::of("git_push"), Some(ToolClass::Publish));
        assert!(!ToolClass::Publish.is_read_only());
        assert!(!ToolClass::Verify.is_read_only());
    }

    #[test]
    fn class_names_take_their_article() {
        let named = |c: ToolClass| format!("{} {c}", c.article());
        assert_eq!(named(ToolClass::Exec), "an exec");
        assert_eq!(named(ToolClass::Write), "a write");
        assert_eq!(named(ToolClass::Apply), "an apply");
        assert_eq!(named(ToolClass::AskUser), "an ask_user");
        assert_eq!(named(ToolClass::Read), "a read");
    }
}
