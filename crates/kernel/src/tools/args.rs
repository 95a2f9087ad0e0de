//! Typed arguments of every tool. Their JSON Schemas (draft 2020-12, via schemars) are what
//! `airlock tools` and MCP `tools/list` publish and what the validator enforces: unknown
//! fields, wrong types and out-of-range values are denied before anything runs.

use schemars::JsonSchema;
use serde::Deserialize;

/// `read_file`: read a file of workspace + staged changes.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFileArgs {
    /// Workspace-relative path.
    pub path: String,
    /// First line to return, 1-based (default 1).
    #[schemars(range(min = 1))]
    pub offset: Option<u64>,
    /// Maximum number of lines to return (default 2000).
    #[schemars(range(min = 1, max = 100000))]
    pub limit: Option<u64>,
}

/// `list_dir`: list a directory of workspace + staged changes.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDirArgs {
    /// Workspace-relative directory (default: the workspace root).
    pub path: Option<String>,
}

/// `glob`: find files by glob pattern.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobArgs {
    /// Glob pattern, e.g. `src/**/*.rs`.
    #[schemars(length(min = 1, max = 4096))]
    pub pattern: String,
    /// Directory to search under (default: the workspace root).
    pub path: Option<String>,
}

/// `grep`: search file contents with a regular expression.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// Regular expression (Rust regex syntax).
    #[schemars(length(min = 1, max = 4096))]
    pub pattern: String,
    /// Directory or file to search (default: the workspace root).
    pub path: Option<String>,
    /// Only files matching this glob, e.g. `*.ts`.
    pub glob: Option<String>,
    /// Case-insensitive matching.
    #[serde(default)]
    pub case_insensitive: bool,
    /// Maximum matching lines to return (default 200).
    #[schemars(range(min = 1, max = 10000))]
    pub max_results: Option<u64>,
}

/// Content encoding of `write_file`.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// The content is the text itself.
    #[default]
    Utf8,
    /// The content is base64 (for binary files).
    Base64,
}

/// `write_file`: stage a whole file (created or replaced).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFileArgs {
    /// Workspace-relative path.
    pub path: String,
    /// The full new content.
    pub content: String,
    /// `utf8` (default) or `base64`.
    #[serde(default)]
    #[schemars(extend("default" = "utf8"))]
    pub encoding: Encoding,
    /// Make the file executable (mode 755 instead of 644).
    #[serde(default)]
    pub executable: Option<bool>,
}

/// `edit_file`: replace an exact string in a file.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditFileArgs {
    /// Workspace-relative path.
    pub path: String,
    /// The exact text to replace; must occur exactly once unless `replace_all`.
    #[schemars(length(min = 1))]
    pub old_string: String,
    /// The replacement text.
    pub new_string: String,
    /// Replace every occurrence.
    #[serde(default)]
    pub replace_all: bool,
}

/// `apply_patch`: stage a unified or git diff.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyPatchArgs {
    /// The patch text (unified diff or `git diff` output).
    #[schemars(length(min = 1))]
    pub patch: String,
}

/// `delete_file`: stage the removal of a file or directory.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteFileArgs {
    /// Workspace-relative path.
    pub path: String,
}

/// `move_file`: stage a rename.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveFileArgs {
    /// Existing workspace-relative path.
    pub from: String,
    /// New workspace-relative path.
    pub to: String,
}

/// `bash`: run a shell command in the sandbox over workspace + staged changes. Exactly one of
/// `command` and `argv` is given; the kernel checks it ([`exactly_one_of`]), since model APIs
/// refuse a schema that says so with a top-level `oneOf`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashArgs {
    /// The command (bash syntax). Its writes are staged, never written to the workspace.
    #[schemars(length(min = 1, max = 65536))]
    pub command: Option<String>,
    /// Instead of `command`: a program and its arguments, run directly with no shell (no expansion, globbing or redirection; nothing to quote). A shell builtin with no program of that name (`cd`, `export`, …) still runs in bash. The guard checks it as the equivalent quoted command.
    #[schemars(length(min = 1, max = 4096))]
    pub argv: Option<Vec<String>>,
    /// Wall-clock limit in seconds (default 120).
    #[schemars(range(min = 1, max = 3600))]
    pub timeout_secs: Option<u64>,
}

/// `verify`: run the project's tests over workspace + staged changes.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyArgs {
    /// `auto` (default) or a runner: node, vitest, jest, cargo, pytest, go, command. A runner
    /// other than the project's own makes the verdict advisory.
    pub runner: Option<String>,
    /// An explicit test command (argv), instead of the detected runner. It passes the bash
    /// guard; its verdict is advisory (feedback only: it cannot unlock apply) unless an
    /// operator rule allows exactly this command.
    pub command: Option<Vec<String>>,
    /// Wall-clock limit in seconds (default 300).
    #[schemars(range(min = 1, max = 7200))]
    pub timeout_secs: Option<u64>,
    /// Also run on the unchanged workspace and mark failures that already existed.
    #[serde(default)]
    pub baseline: bool,
}

/// `diff`: staged changes as a unified diff.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiffArgs {
    /// Limit to these workspace-relative paths.
    #[serde(default)]
    pub paths: Vec<String>,
}

/// Tools without arguments (`status`, `discard`, `apply`, `undo`, `journal`, `recover`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("properties" = {}))]
pub struct NoArgs {}

/// `ask_user`: put a question to the operator (ASK mode only).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskUserArgs {
    /// The question.
    #[schemars(length(min = 1, max = 4096))]
    pub question: String,
}

/// The rule a tool's schema cannot state in a form every model API accepts: `bash` takes
/// exactly one of `command` and `argv` (present keys, as the schema's `required` counted them).
/// A violation is a denial at stage `validation` naming the argument, like a schema violation.
pub fn exactly_one_of(
    tool: &str,
    args: &serde_json::Value,
) -> Result<(), airlock_policy::Decision> {
    if tool != "bash" {
        return Ok(());
    }
    let (pointer, what) = match (args.get("command").is_some(), args.get("argv").is_some()) {
        (true, false) | (false, true) => return Ok(()),
        (true, true) => ("/argv", "give `command` or `argv`, not both"),
        (false, false) => ("/", "`command` or `argv` is required"),
    };
    Err(airlock_policy::Decision::deny(
        airlock_policy::Stage::Validation,
        "command_or_argv",
        format!("Argument `{pointer}` of `{tool}` is invalid: {what}."),
    ))
}
