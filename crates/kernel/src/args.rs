//! Typed arguments of every tool. Their JSON Schemas (draft 2020-12, via schemars) are what
//! `airlock tools` and MCP `tools/list` publish; parsing into these types (serde, unknown
//! fields denied) plus each type's [`Check`] of the bounds its schema states is the validation:
//! unknown fields, wrong types and out-of-range values are denied before anything runs.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::borrow::Cow;

/// Why arguments are invalid: the JSON pointer of the offending value and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// JSON pointer (`/` for the whole object).
    pub pointer: String,
    /// What is wrong, in words.
    pub message: String,
}

impl Invalid {
    fn at(field: &str, message: impl Into<String>) -> Invalid {
        Invalid {
            pointer: if field.is_empty() {
                "/".into()
            } else {
                format!("/{field}")
            },
            message: message.into(),
        }
    }
}

/// The bounds a type's schema states that serde's types cannot: string lengths (in characters),
/// integer ranges, item counts, which fields must be present.
pub trait Check {
    /// Check the parsed arguments; `raw` is the object they were parsed from (for presence),
    /// `max_file_bytes` the operator's per-file limit.
    fn check(&self, raw: &Map<String, Value>, max_file_bytes: u64) -> Result<(), Invalid>;
}

/// An integer argument as JSON Schema counts integers: `2` and `2.0` alike. Its schema is
/// `u64`'s; out-of-range values (negative, huge) parse and are refused by [`Check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Int(i128);

impl Int {
    /// The value, clamped to `u64` (checked bounds make the clamp moot).
    pub fn get(self) -> u64 {
        u64::try_from(self.0).unwrap_or(if self.0 < 0 { 0 } else { u64::MAX })
    }
}

impl<'de> Deserialize<'de> for Int {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Int, D::Error> {
        let n = serde_json::Number::deserialize(d)?;
        if let Some(u) = n.as_u64() {
            return Ok(Int(u as i128));
        }
        if let Some(i) = n.as_i64() {
            return Ok(Int(i as i128));
        }
        match n.as_f64() {
            Some(f) if f.fract() == 0.0 => Ok(Int(if f >= 1e38 {
                i128::MAX
            } else if f <= -1e38 {
                i128::MIN
            } else {
                f as i128
            })),
            _ => Err(serde::de::Error::custom(format!("{n} is not an integer"))),
        }
    }
}

impl JsonSchema for Int {
    fn schema_name() -> Cow<'static, str> {
        u64::schema_name()
    }
    fn schema_id() -> Cow<'static, str> {
        u64::schema_id()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        u64::json_schema(generator)
    }
    fn inline_schema() -> bool {
        true
    }
}

fn len(field: &str, s: &str, min: usize, max: Option<usize>) -> Result<(), Invalid> {
    let n = s.chars().count();
    if n < min {
        return Err(Invalid::at(
            field,
            format!("is shorter than {min} character(s)"),
        ));
    }
    match max {
        Some(max) if n > max => Err(Invalid::at(
            field,
            format!("is longer than {max} character(s)"),
        )),
        _ => Ok(()),
    }
}

fn range(field: &str, n: Option<Int>, min: i128, max: Option<i128>) -> Result<(), Invalid> {
    let Some(Int(n)) = n else { return Ok(()) };
    if n < min || max.is_some_and(|m| n > m) {
        let max = max.map(|m| m.to_string()).unwrap_or_else(|| "∞".into());
        return Err(Invalid::at(field, format!("must be in {min}..={max}")));
    }
    Ok(())
}

/// `read_file`: read a file of workspace + staged changes.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFileArgs {
    /// Workspace-relative path.
    pub path: String,
    /// First line to return, 1-based (default 1).
    #[schemars(range(min = 1))]
    pub offset: Option<Int>,
    /// Maximum number of lines to return (default 2000).
    #[schemars(range(min = 1, max = 100000))]
    pub limit: Option<Int>,
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
    pub max_results: Option<Int>,
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

/// `bash`: run a shell command in the sandbox over workspace + staged changes.
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
    pub timeout_secs: Option<Int>,
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
    pub timeout_secs: Option<Int>,
    /// Also run on the unchanged workspace and mark failures that already existed.
    #[serde(default)]
    pub baseline: bool,
    /// Bytes of diagnostics text (256 to 65536; default 4096, or the operator's
    /// `[verify] budget`). The JSON `failures` list has its own cap (200).
    #[schemars(range(min = 256, max = 65536))]
    pub budget: Option<Int>,
    /// Run only these tests, by the `id` of a failure of an earlier verdict (pytest node id,
    /// `file > describe > name`, cargo test path, `./pkg::TestX/sub`). Advisory: a run of some
    /// tests cannot unlock apply.
    #[serde(default)]
    #[schemars(length(max = 1000), inner(length(min = 1, max = 4096)))]
    pub only: Vec<String>,
    /// Run the tests related to the staged changes (vitest related, jest
    /// --findRelatedTests, the changed crates or Go packages, the pytest files importing a
    /// changed module). `first`: those first; if they fail, that verdict at once (`scope:
    /// impacted`, advisory), else the whole suite's verdict (`scope: full`, which can unlock
    /// apply). `only`: just those (advisory). Not with `only` test ids.
    #[schemars(extend("enum" = ["first", "only"]))]
    pub impacted: Option<String>,
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

impl Check for ReadFileArgs {
    fn check(&self, _: &Map<String, Value>, _: u64) -> Result<(), Invalid> {
        range("offset", self.offset, 1, None)?;
        range("limit", self.limit, 1, Some(100000))
    }
}

impl Check for ListDirArgs {
    fn check(&self, _: &Map<String, Value>, _: u64) -> Result<(), Invalid> {
        Ok(())
    }
}

impl Check for GlobArgs {
    fn check(&self, _: &Map<String, Value>, _: u64) -> Result<(), Invalid> {
        len("pattern", &self.pattern, 1, Some(4096))
    }
}

impl Check for GrepArgs {
    fn check(&self, _: &Map<String, Value>, _: u64) -> Result<(), Invalid> {
        len("pattern", &self.pattern, 1, Some(4096))?;
        range("max_results", self.max_results, 1, Some(10000))
    }
}

/// The `maxLength` of `write_file`'s content: characters ≤ bytes, so it is a cheap first bound
/// (base64 included); the executor checks bytes.
pub fn content_max_chars(max_file_bytes: u64) -> u64 {
    max_file_bytes * 4 / 3 + 4
}

impl Check for WriteFileArgs {
    fn check(&self, _: &Map<String, Value>, max_file_bytes: u64) -> Result<(), Invalid> {
        let max = usize::try_from(content_max_chars(max_file_bytes)).unwrap_or(usize::MAX);
        len("content", &self.content, 0, Some(max))
    }
}

impl Check for EditFileArgs {
    fn check(&self, _: &Map<String, Value>, _: u64) -> Result<(), Invalid> {
        len("old_string", &self.old_string, 1, None)
    }
}

impl Check for ApplyPatchArgs {
    fn check(&self, _: &Map<String, Value>, _: u64) -> Result<(), Invalid> {
        len("patch", &self.patch, 1, None)
    }
}

impl Check for DeleteFileArgs {
    fn check(&self, _: &Map<String, Value>, _: u64) -> Result<(), Invalid> {
        Ok(())
    }
}

impl Check for MoveFileArgs {
    fn check(&self, _: &Map<String, Value>, _: u64) -> Result<(), Invalid> {
        Ok(())
    }
}

impl Check for BashArgs {
    fn check(&self, raw: &Map<String, Value>, _: u64) -> Result<(), Invalid> {
        // Exactly one of `command` and `argv` is given (present, even as null: the schema's
        // `oneOf` of two `required`).
        if raw.contains_key("command") == raw.contains_key("argv") {
            return Err(Invalid::at("", "give exactly one of `command` and `argv`"));
        }
        if let Some(c) = &self.command {
            len("command", c, 1, Some(65536))?;
        }
        if let Some(argv) = &self.argv
            && !(1..=4096).contains(&argv.len())
        {
            return Err(Invalid::at("argv", "must hold 1 to 4096 words"));
        }
        range("timeout_secs", self.timeout_secs, 1, Some(3600))
    }
}

impl Check for VerifyArgs {
    fn check(&self, _: &Map<String, Value>, _: u64) -> Result<(), Invalid> {
        range("timeout_secs", self.timeout_secs, 1, Some(7200))?;
        range("budget", self.budget, 256, Some(65536))?;
        if self.only.len() > 1000 {
            return Err(Invalid::at("only", "must hold at most 1000 test ids"));
        }
        for id in &self.only {
            len("only", id, 1, Some(4096))?;
        }
        match self.impacted.as_deref() {
            None | Some("first" | "only") => {}
            Some(_) => return Err(Invalid::at("impacted", "must be `first` or `only`")),
        }
        if self.impacted.is_some() && !self.only.is_empty() {
            return Err(Invalid::at(
                "impacted",
                "cannot be combined with `only` test ids",
            ));
        }
        Ok(())
    }
}

impl Check for DiffArgs {
    fn check(&self, _: &Map<String, Value>, _: u64) -> Result<(), Invalid> {
        Ok(())
    }
}

impl Check for NoArgs {
    fn check(&self, _: &Map<String, Value>, _: u64) -> Result<(), Invalid> {
        Ok(())
    }
}

impl Check for AskUserArgs {
    fn check(&self, _: &Map<String, Value>, _: u64) -> Result<(), Invalid> {
        len("question", &self.question, 1, Some(4096))
    }
}

/// The rule a tool's schema cannot state in a form every model API accepts: `bash` takes
/// exactly one of `command` and `argv` (present keys, as a schema's `required` counts them).
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

/// `git_status`: git's status beside airlock's staged changes.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitStatusArgs {
    /// First line of the report to return, 1-based (default 1).
    #[schemars(range(min = 1))]
    pub offset: Option<Int>,
    /// Maximum number of lines to return (default 2000).
    #[schemars(range(min = 1, max = 100000))]
    pub limit: Option<Int>,
}

/// `git_diff`: git's diff of the work tree (or the index with `cached`) against the index or a
/// revision.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitDiffArgs {
    /// Compare against this revision (a commit, branch, tag or range such as `main..HEAD`)
    /// instead of the index.
    #[schemars(length(min = 1, max = 256))]
    pub rev: Option<String>,
    /// Show what git's index holds against HEAD (or `rev`) instead of the work tree.
    #[serde(default)]
    pub cached: bool,
    /// Limit to these workspace-relative paths.
    #[serde(default)]
    pub paths: Vec<String>,
    /// First line to return, 1-based (default 1).
    #[schemars(range(min = 1))]
    pub offset: Option<Int>,
    /// Maximum number of lines to return (default 2000).
    #[schemars(range(min = 1, max = 100000))]
    pub limit: Option<Int>,
}

/// `git_log`: commit history.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitLogArgs {
    /// Start from this revision or range (default HEAD).
    #[schemars(length(min = 1, max = 256))]
    pub rev: Option<String>,
    /// Only commits touching this workspace-relative path.
    pub path: Option<String>,
    /// Number of commits (default 50).
    #[schemars(range(min = 1, max = 1000))]
    pub max_count: Option<Int>,
    /// Skip this many commits first (for paging; default 0).
    #[schemars(range(min = 0, max = 10000000))]
    pub skip: Option<Int>,
    /// Include each commit's patch.
    #[serde(default)]
    pub patch: bool,
}

/// `git_show`: one commit (message and patch), or one file as of a commit.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitShowArgs {
    /// The commit, branch or tag.
    #[schemars(length(min = 1, max = 256))]
    pub rev: String,
    /// Show this workspace-relative file as of `rev` instead of the commit.
    pub path: Option<String>,
    /// First line to return, 1-based (default 1).
    #[schemars(range(min = 1))]
    pub offset: Option<Int>,
    /// Maximum number of lines to return (default 2000).
    #[schemars(range(min = 1, max = 100000))]
    pub limit: Option<Int>,
}

/// `git_blame`: who last changed each line of a file.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitBlameArgs {
    /// Workspace-relative file.
    pub path: String,
    /// Blame the file as of this revision (default: the work tree).
    #[schemars(length(min = 1, max = 256))]
    pub rev: Option<String>,
    /// First line of the file, 1-based (default 1).
    #[schemars(range(min = 1))]
    pub offset: Option<Int>,
    /// Number of lines (default 2000).
    #[schemars(range(min = 1, max = 100000))]
    pub limit: Option<Int>,
}

/// `git_commit`: commit what airlock applied, or the named paths.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitCommitArgs {
    /// The commit message.
    #[schemars(length(min = 1, max = 20000))]
    pub message: String,
    /// Commit exactly these workspace-relative paths as they are on disk (default: the paths
    /// airlock applied since the last `git_commit`).
    #[serde(default)]
    pub paths: Vec<String>,
}

/// `git_push`: push a branch to a configured remote.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitPushArgs {
    /// The name of one of the repository's configured remotes (`origin`), never a URL.
    #[schemars(length(min = 1, max = 100), regex(pattern = REF_NAME))]
    pub remote: String,
    /// The local branch to push to the branch of the same name (default: the current branch).
    #[schemars(length(min = 1, max = 200), regex(pattern = REF_NAME))]
    pub branch: Option<String>,
}

/// A revision argument: no option (`-…`), no `rev:path` (paths go through the jail as their
/// own argument), only the characters of names, ranges and suffixes.
fn rev(field: &str, r: &Option<String>) -> Result<(), Invalid> {
    let Some(r) = r else { return Ok(()) };
    len(field, r, 1, Some(256))?;
    if r.starts_with('-') {
        return Err(Invalid::at(field, "must not start with `-`"));
    }
    if let Some(c) = r
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "._/~^@{}-+!=".contains(*c)))
    {
        return Err(Invalid::at(
            field,
            format!("holds `{c}`, which no revision name needs (give a path as `path`)"),
        ));
    }
    Ok(())
}

/// The schema's pattern for a branch or remote name, the same rule as [`ref_name`].
const REF_NAME: &str = r"^[A-Za-z0-9_][A-Za-z0-9_-]*([./][A-Za-z0-9_-]+)*$";

/// A branch or remote name: runs of letters, digits, `_` and `-` joined by single `.` or `/`,
/// starting with neither `-` nor a separator (so never an option, a path or `..`) — exactly
/// [`REF_NAME`], so the schema and the types agree on every name.
fn ref_name(field: &str, n: &str, max: usize) -> Result<(), Invalid> {
    len(field, n, 1, Some(max))?;
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let ok = n
        .split(['.', '/'])
        .all(|seg| !seg.is_empty() && seg.chars().all(word))
        && !n.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(Invalid::at(field, "is not a plain branch or remote name"))
    }
}

fn paging(offset: Option<Int>, limit: Option<Int>) -> Result<(), Invalid> {
    range("offset", offset, 1, None)?;
    range("limit", limit, 1, Some(100000))
}

impl Check for GitStatusArgs {
    fn check(&self, _: &Map<String, Value>, _: u64) -> Result<(), Invalid> {
        paging(self.offset, self.limit)
    }
}

impl Check for GitDiffArgs {
    fn check(&self, _: &Map<String, Value>, _: u64) -> Result<(), Invalid> {
        rev("rev", &self.rev)?;
        paging(self.offset, self.limit)
    }
}

impl Check for GitLogArgs {
    fn check(&self, _: &Map<String, Value>, _: u64) -> Result<(), Invalid> {
        rev("rev", &self.rev)?;
        range("max_count", self.max_count, 1, Some(1000))?;
        range("skip", self.skip, 0, Some(10_000_000))
    }
}

impl Check for GitShowArgs {
    fn check(&self, _: &Map<String, Value>, _: u64) -> Result<(), Invalid> {
        rev("rev", &Some(self.rev.clone()))?;
        paging(self.offset, self.limit)
    }
}

impl Check for GitBlameArgs {
    fn check(&self, _: &Map<String, Value>, _: u64) -> Result<(), Invalid> {
        rev("rev", &self.rev)?;
        paging(self.offset, self.limit)
    }
}

impl Check for GitCommitArgs {
    fn check(&self, _: &Map<String, Value>, _: u64) -> Result<(), Invalid> {
        len("message", &self.message, 1, Some(20000))?;
        if self.message.trim().is_empty() {
            return Err(Invalid::at("message", "must not be blank"));
        }
        if self.paths.len() > 10000 {
            return Err(Invalid::at("paths", "must hold at most 10000 paths"));
        }
        Ok(())
    }
}

impl Check for GitPushArgs {
    fn check(&self, _: &Map<String, Value>, _: u64) -> Result<(), Invalid> {
        ref_name("remote", &self.remote, 100)?;
        if let Some(b) = &self.branch {
            ref_name("branch", b, 200)?;
        }
        Ok(())
    }
}
