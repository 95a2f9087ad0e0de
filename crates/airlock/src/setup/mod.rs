//! `airlock setup CLIENT`: the operator registers airlock in a coding agent's configuration.
//!
//! One table per client says which files hold what ([`plan`]): the MCP server entry (the
//! absolute path of this airlock binary, `--workspace <abs> --mode build mcp`), the client's
//! own shell and write tools switched off without hiding airlock's, approval settings that
//! leave the decision to airlock's gate, a generous tool timeout, and the trust steps the
//! client needs (performed only with `--trust`). [`execute`] merges that into the existing
//! files ([`edit`]): other keys survive, a `.bak` copy is kept of every file changed, each file
//! is replaced atomically, and a file that does not parse stops the run before anything is
//! written. `--print` renders the same plan without touching anything; docs/INTEGRATIONS.md
//! embeds that output, so the documentation and the command cannot disagree.

pub mod edit;

use edit::{Format, Op};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The coding agents `airlock setup` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// Claude Code (`claude`).
    Claude,
    /// Codex CLI (`codex`).
    Codex,
    /// Gemini CLI (`gemini`).
    Gemini,
    /// Cursor (editor and `cursor-agent`).
    Cursor,
    /// Goose.
    Goose,
}

impl Client {
    /// Every client, in the order the docs list them.
    pub const ALL: [Client; 5] = [
        Client::Claude,
        Client::Codex,
        Client::Gemini,
        Client::Cursor,
        Client::Goose,
    ];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Client::Claude => "claude",
            Client::Codex => "codex",
            Client::Gemini => "gemini",
            Client::Cursor => "cursor",
            Client::Goose => "goose",
        }
    }

    /// Parse a command-line name.
    pub fn parse(s: &str) -> Option<Client> {
        Client::ALL.into_iter().find(|c| c.name() == s)
    }

    fn title(self) -> &'static str {
        match self {
            Client::Claude => "Claude Code",
            Client::Codex => "Codex CLI",
            Client::Gemini => "Gemini CLI",
            Client::Cursor => "Cursor",
            Client::Goose => "Goose",
        }
    }

    /// The scope used when none is named.
    pub fn default_scope(self) -> Scope {
        match self {
            Client::Codex | Client::Goose => Scope::User,
            _ => Scope::Project,
        }
    }
}

/// Where the configuration goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The user's own configuration (every project).
    User,
    /// This workspace only.
    Project,
}

impl Scope {
    /// Parse `user` or `project`.
    pub fn parse(s: &str) -> Option<Scope> {
        match s {
            "user" => Some(Scope::User),
            "project" => Some(Scope::Project),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Project => "project",
        }
    }
}

/// What the operator asked for.
#[derive(Debug, Clone)]
pub struct Options {
    /// The client to configure.
    pub client: Client,
    /// The scope (`None`: the client's default).
    pub scope: Option<Scope>,
    /// The workspace, absolute.
    pub workspace: PathBuf,
    /// The airlock binary the client starts, absolute.
    pub binary: PathBuf,
    /// The user's home directory.
    pub home: PathBuf,
    /// `CODEX_HOME`, if set.
    pub codex_home: Option<PathBuf>,
    /// `XDG_CONFIG_HOME`, if set.
    pub xdg_config_home: Option<PathBuf>,
    /// Perform the client's trust step for the workspace too.
    pub trust: bool,
    /// Extra server arguments before `mcp` (e.g. `--permission ask`).
    pub server_args: Vec<String>,
}

/// One file and the changes airlock makes to it.
#[derive(Debug, Clone)]
pub struct FilePlan {
    /// The file.
    pub path: PathBuf,
    /// Its format.
    pub format: Format,
    /// The changes.
    pub ops: Vec<Op>,
}

/// Everything `airlock setup` does for one client.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The client.
    pub client: Client,
    /// The scope.
    pub scope: Scope,
    /// The files and their changes.
    pub files: Vec<FilePlan>,
    /// Steps left to the operator (trust prompts and the like), one sentence each.
    pub steps: Vec<String>,
    /// The client's own health check and what it should report.
    pub check: String,
}

/// Why setup stopped (nothing was written).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The client has no configuration of that scope.
    #[error("{client} has no {scope}-scope configuration; use --scope {other}")]
    Scope {
        /// The client.
        client: &'static str,
        /// The scope asked for.
        scope: &'static str,
        /// The scope to use.
        other: &'static str,
    },
    /// An existing file cannot be merged into; nothing was changed.
    #[error("{path}: {source}; nothing was changed")]
    Edit {
        /// The file.
        path: String,
        /// Why.
        source: edit::EditError,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
}

fn k(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

fn strs(items: &[&str]) -> Vec<Value> {
    items.iter().map(|s| json!(s)).collect()
}

/// The plan for `opts`: which files get which keys, what is left to the operator.
pub fn plan(opts: &Options) -> Result<Plan, SetupError> {
    let scope = opts.scope.unwrap_or(opts.client.default_scope());
    let ws = opts.workspace.to_string_lossy().to_string();
    let bin = opts.binary.to_string_lossy().to_string();
    let mut args = vec!["--workspace".to_string(), ws.clone()];
    args.extend(["--mode".to_string(), "build".to_string()]);
    args.extend(opts.server_args.iter().cloned());
    args.push("mcp".to_string());
    let home = &opts.home;
    let wsp = &opts.workspace;
    let mut files = Vec::new();
    let mut steps = Vec::new();
    let check = match opts.client {
        Client::Claude => {
            let entry = json!({ "type": "stdio", "command": bin, "args": args, "env": {} });
            let mut reg = match scope {
                Scope::Project => vec![Op::Set(
                    k(&["projects", &ws, "mcpServers", "airlock"]),
                    entry,
                )],
                Scope::User => vec![Op::Set(k(&["mcpServers", "airlock"]), entry)],
            };
            if opts.trust {
                reg.push(Op::Set(
                    k(&["projects", &ws, "hasTrustDialogAccepted"]),
                    json!(true),
                ));
            } else {
                steps.push(format!(
                    "Trust the workspace once: run `claude` in {ws} and accept the trust \
                     dialog (or run setup again with --trust); until then Claude Code ignores \
                     the workspace's permission rules."
                ));
            }
            files.push(FilePlan {
                path: home.join(".claude.json"),
                format: Format::Json,
                ops: reg,
            });
            let settings = match scope {
                Scope::Project => wsp.join(".claude/settings.local.json"),
                Scope::User => home.join(".claude/settings.json"),
            };
            files.push(FilePlan {
                path: settings,
                format: Format::Json,
                ops: vec![
                    Op::Union(
                        k(&["permissions", "deny"]),
                        strs(&["Bash", "Edit", "Write", "NotebookEdit"]),
                    ),
                    Op::Union(k(&["permissions", "allow"]), strs(&["mcp__airlock"])),
                    Op::Set(k(&["env", "MCP_TOOL_TIMEOUT"]), json!("900000")),
                ],
            });
            steps.push(
                "Claude Code's own Read, Grep and Glob stay on; they see the disk, not the \
                 staged changes (airlock's instructions tell the model to prefer airlock's)."
                    .to_string(),
            );
            "claude mcp list   # airlock: … - ✔ Connected".to_string()
        }
        Client::Codex => {
            let path = match scope {
                Scope::User => opts
                    .codex_home
                    .clone()
                    .unwrap_or_else(|| home.join(".codex"))
                    .join("config.toml"),
                Scope::Project => wsp.join(".codex/config.toml"),
            };
            files.push(FilePlan {
                path,
                format: Format::Toml,
                ops: vec![
                    Op::Set(k(&["approval_policy"]), json!("never")),
                    Op::Set(k(&["sandbox_mode"]), json!("read-only")),
                    Op::Set(k(&["features", "shell_tool"]), json!(false)),
                    Op::Set(
                        k(&["mcp_servers", "airlock"]),
                        json!({
                            "command": bin,
                            "args": args,
                            "startup_timeout_sec": 20,
                            "tool_timeout_sec": 900,
                            "default_tools_approval_mode": "approve",
                        }),
                    ),
                ],
            });
            if scope == Scope::Project {
                let user = opts
                    .codex_home
                    .clone()
                    .unwrap_or_else(|| home.join(".codex"))
                    .join("config.toml");
                if opts.trust {
                    files.push(FilePlan {
                        path: user,
                        format: Format::Toml,
                        ops: vec![Op::Set(
                            k(&["projects", &ws, "trust_level"]),
                            json!("trusted"),
                        )],
                    });
                } else {
                    steps.push(format!(
                        "Codex reads a project's .codex/config.toml only in a trusted project: \
                         accept the prompt when `codex` starts in {ws} (or run setup again \
                         with --trust)."
                    ));
                }
            }
            steps.push(
                "approval_policy = \"never\" with a read-only sandbox and no shell tool leaves \
                 every change and command to airlock; default_tools_approval_mode = \"approve\" \
                 lets airlock's tools run without Codex's own prompt."
                    .to_string(),
            );
            "codex mcp list   # airlock … enabled".to_string()
        }
        Client::Gemini => {
            let path = match scope {
                Scope::Project => wsp.join(".gemini/settings.json"),
                Scope::User => home.join(".gemini/settings.json"),
            };
            files.push(FilePlan {
                path,
                format: Format::Json,
                ops: vec![
                    Op::Set(
                        k(&["mcpServers", "airlock"]),
                        json!({ "command": bin, "args": args, "timeout": 900000, "trust": true }),
                    ),
                    // Built-ins are named by tool name or class name; the class name
                    // `WriteFileTool` leaves airlock's own `write_file` visible.
                    Op::Union(
                        k(&["tools", "exclude"]),
                        strs(&["run_shell_command", "replace", "WriteFileTool"]),
                    ),
                    Op::Without(
                        k(&["tools", "exclude"]),
                        strs(&["write_file"]),
                        "it would hide airlock's write_file too",
                    ),
                    // A headless run excludes the built-ins that need approval by name, and
                    // that name hides an MCP tool of the same name; allowing the name keeps
                    // airlock's `write_file` (the built-in stays excluded by class name).
                    Op::Union(k(&["tools", "allowed"]), strs(&["write_file"])),
                ],
            });
            if opts.trust {
                files.push(FilePlan {
                    path: home.join(".gemini/trustedFolders.json"),
                    format: Format::Json,
                    ops: vec![Op::Set(vec![ws.clone()], json!("TRUST_FOLDER"))],
                });
            } else {
                steps.push(format!(
                    "Gemini CLI shows airlock as Disabled until the folder is trusted: accept \
                     the prompt when `gemini` starts in {ws}, or run setup again with --trust \
                     (adds it to ~/.gemini/trustedFolders.json)."
                ));
            }
            steps.push(
                "`trust: true` skips Gemini CLI's own confirmation for airlock's tools (airlock \
                 decides); `tools.allowed: [\"write_file\"]` keeps airlock's write_file in \
                 headless runs; `tools.core` would hide airlock's tools, so do not set it."
                    .to_string(),
            );
            "gemini mcp list   # ✓ airlock: … - Connected".to_string()
        }
        Client::Cursor => {
            let (mcp, cli) = match scope {
                Scope::Project => (wsp.join(".cursor/mcp.json"), wsp.join(".cursor/cli.json")),
                Scope::User => (
                    home.join(".cursor/mcp.json"),
                    home.join(".cursor/cli-config.json"),
                ),
            };
            files.push(FilePlan {
                path: mcp,
                format: Format::Json,
                ops: vec![Op::Set(
                    k(&["mcpServers", "airlock"]),
                    json!({ "type": "stdio", "command": bin, "args": args }),
                )],
            });
            files.push(FilePlan {
                path: cli,
                format: Format::Json,
                ops: vec![
                    Op::Union(
                        k(&["permissions", "deny"]),
                        strs(&["Shell(*)", "Write(**)"]),
                    ),
                    Op::Union(k(&["permissions", "allow"]), strs(&["Mcp(airlock, *)"])),
                ],
            });
            steps.push(
                "In the Cursor editor, enable airlock under Settings → MCP and turn off \
                 auto-run for terminal commands; `cursor-agent` asks once to approve the \
                 project's MCP servers."
                    .to_string(),
            );
            "cursor-agent mcp list   # airlock: ready".to_string()
        }
        Client::Goose => {
            if scope == Scope::Project {
                return Err(SetupError::Scope {
                    client: "goose",
                    scope: "project",
                    other: "user",
                });
            }
            let path = opts
                .xdg_config_home
                .clone()
                .unwrap_or_else(|| home.join(".config"))
                .join("goose/config.yaml");
            files.push(FilePlan {
                path,
                format: Format::Yaml,
                ops: vec![
                    Op::Set(
                        k(&["extensions", "developer"]),
                        json!({ "type": "builtin", "name": "developer", "enabled": false, "bundled": true }),
                    ),
                    Op::Set(
                        k(&["extensions", "airlock"]),
                        json!({
                            "type": "stdio", "name": "airlock", "enabled": true, "cmd": bin,
                            "args": args, "envs": {}, "env_keys": [], "timeout": 900,
                        }),
                    ),
                ],
            });
            steps.push(
                "The built-in developer extension (Goose's shell and file editing) is \
                 disabled; comments in config.yaml are not kept (config.yaml.bak has them)."
                    .to_string(),
            );
            "goose info -v   # extensions: airlock enabled".to_string()
        }
    };
    Ok(Plan {
        client: opts.client,
        scope,
        files,
        steps,
        check,
    })
}

/// A path as the operator reads it: under the home directory as `~/…`.
pub fn show_path(path: &Path, home: &Path) -> String {
    match path.strip_prefix(home) {
        Ok(rest) if home != Path::new("/") => format!("~/{}", rest.display()),
        _ => path.display().to_string(),
    }
}

/// The plan as text (`--print`): per file the keys airlock sets and the fragment they make.
pub fn render(plan: &Plan, home: &Path) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# {} ({} scope)", plan.client.title(), plan.scope.name());
    for f in &plan.files {
        let _ = writeln!(s, "\n{} ({}):", show_path(&f.path, home), f.format.name());
        for op in &f.ops {
            let _ = writeln!(s, "  {op}");
        }
        let _ = writeln!(s);
        for line in edit::fragment(f.format, &f.ops).lines() {
            if line.is_empty() {
                let _ = writeln!(s);
            } else {
                let _ = writeln!(s, "    {line}");
            }
        }
    }
    if !plan.steps.is_empty() {
        let _ = writeln!(s, "\nThen:");
        for step in &plan.steps {
            let _ = writeln!(s, "  - {step}");
        }
    }
    let _ = writeln!(s, "\nCheck: {}", plan.check);
    s
}

/// What [`execute`] did to one file.
#[derive(Debug)]
pub struct FileReport {
    /// The file.
    pub path: PathBuf,
    /// The changes made (empty: it already had them).
    pub changed: Vec<Op>,
    /// The copy of the previous content, if the file existed and changed.
    pub backup: Option<PathBuf>,
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> SetupError + '_ {
    move |source| SetupError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Merge the plan into the files: all are parsed and merged first, so a malformed file stops
/// the run before anything is written; then each changed file is backed up (`.bak`) and
/// replaced atomically (same permissions).
pub fn execute(plan: &Plan) -> Result<Vec<FileReport>, SetupError> {
    let mut merged = Vec::new();
    for f in &plan.files {
        let old = match std::fs::read_to_string(&f.path) {
            Ok(t) => Some(t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io_err(&f.path)(e)),
        };
        let m =
            edit::merge(f.format, old.as_deref(), &f.ops).map_err(|source| SetupError::Edit {
                path: f.path.display().to_string(),
                source,
            })?;
        merged.push((f, old, m));
    }
    let mut reports = Vec::new();
    for (f, old, m) in merged {
        let mut backup = None;
        if !m.changed.is_empty() {
            let dir = f.path.parent().unwrap_or(Path::new("."));
            std::fs::create_dir_all(dir).map_err(io_err(dir))?;
            let perms = std::fs::metadata(&f.path).ok().map(|m| m.permissions());
            if let Some(old) = &old {
                let mut bak = f.path.clone().into_os_string();
                bak.push(".bak");
                let bak = PathBuf::from(bak);
                std::fs::write(&bak, old).map_err(io_err(&bak))?;
                if let Some(p) = &perms {
                    std::fs::set_permissions(&bak, p.clone()).map_err(io_err(&bak))?;
                }
                backup = Some(bak);
            }
            let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io_err(dir))?;
            std::io::Write::write_all(&mut tmp, m.text.as_bytes()).map_err(io_err(&f.path))?;
            tmp.as_file().sync_all().map_err(io_err(&f.path))?;
            if let Some(p) = perms {
                std::fs::set_permissions(tmp.path(), p).map_err(io_err(&f.path))?;
            }
            tmp.persist(&f.path).map_err(|e| io_err(&f.path)(e.error))?;
        }
        reports.push(FileReport {
            path: f.path.clone(),
            changed: m.changed,
            backup,
        });
    }
    Ok(reports)
}

/// What [`execute`] did, as text.
pub fn render_report(plan: &Plan, reports: &[FileReport], home: &Path) -> String {
    let mut s = String::new();
    for r in reports {
        let shown = show_path(&r.path, home);
        if r.changed.is_empty() {
            let _ = writeln!(s, "{shown}: already up to date");
            continue;
        }
        match &r.backup {
            Some(b) => {
                let _ = writeln!(
                    s,
                    "{shown}: updated (previous content in {})",
                    show_path(b, home)
                );
            }
            None => {
                let _ = writeln!(s, "{shown}: created");
            }
        }
        for op in &r.changed {
            let _ = writeln!(s, "  {op}");
        }
    }
    if !plan.steps.is_empty() {
        let _ = writeln!(s, "\nThen:");
        for step in &plan.steps {
            let _ = writeln!(s, "  - {step}");
        }
    }
    let _ = writeln!(s, "\nCheck: {}", plan.check);
    s
}

/// `airlock setup` on the command line.
#[derive(clap::Args, Debug)]
pub struct SetupArgs {
    /// The client to configure.
    #[arg(value_parser = ["claude", "codex", "gemini", "cursor", "goose"])]
    pub client: String,
    /// Show what would be written, change nothing.
    #[arg(long)]
    pub print: bool,
    /// user (every project) or project (this workspace); default per client.
    #[arg(long, value_parser = ["user", "project"])]
    pub scope: Option<String>,
    /// Also mark the workspace trusted in the client (its own trust prompt, answered yes).
    #[arg(long)]
    pub trust: bool,
    /// The airlock binary the client starts (default: this one).
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
}

/// Run `airlock setup`; returns the exit code (0 done, 1 error, 2 usage).
pub fn command(
    args: &SetupArgs,
    workspace: Option<&Path>,
    permission: &str,
    profile: Option<&str>,
) -> i32 {
    match command_inner(args, workspace, permission, profile) {
        Ok(text) => {
            print!("{text}");
            0
        }
        Err((code, msg)) => {
            eprintln!("airlock: setup: {msg}");
            code
        }
    }
}

fn command_inner(
    args: &SetupArgs,
    workspace: Option<&Path>,
    permission: &str,
    profile: Option<&str>,
) -> Result<String, (i32, String)> {
    let client =
        Client::parse(&args.client).ok_or((2, format!("unknown client {}", args.client)))?;
    let env_path = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let home = env_path("HOME").ok_or((1, "HOME is not set".to_string()))?;
    let cwd = std::env::current_dir().map_err(|e| (1, e.to_string()))?;
    let absolute = |p: &Path| {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            cwd.join(p)
        }
    };
    let workspace = absolute(workspace.unwrap_or(&cwd));
    // `--print` may describe a workspace that does not exist here (the docs do).
    let workspace = if args.print {
        workspace
    } else {
        workspace
            .canonicalize()
            .map_err(|e| (1, format!("workspace {}: {e}", workspace.display())))?
    };
    let binary = match &args.binary {
        Some(b) => absolute(b),
        None => std::env::current_exe().map_err(|e| (1, e.to_string()))?,
    };
    let mut server_args = Vec::new();
    if permission != "auto" {
        server_args.extend(["--permission".to_string(), permission.to_string()]);
    }
    if let Some(p) = profile {
        server_args.extend(["--profile".to_string(), p.to_string()]);
    }
    let opts = Options {
        client,
        scope: args.scope.as_deref().and_then(Scope::parse),
        workspace,
        binary,
        home: home.clone(),
        codex_home: env_path("CODEX_HOME"),
        xdg_config_home: env_path("XDG_CONFIG_HOME"),
        trust: args.trust,
        server_args,
    };
    let plan = plan(&opts).map_err(|e| (2, e.to_string()))?;
    if args.print {
        return Ok(render(&plan, &home));
    }
    let reports = execute(&plan).map_err(|e| (1, e.to_string()))?;
    Ok(render_report(&plan, &reports, &home))
}
