//! The `airlock` command line (contract: CLI.md). Every command is a thin layer over the
//! kernel: tools run through the whole chain, denials print the decision JSON and exit 3.
//!
//! Exit codes: 0 success · 1 internal error · 2 usage · 3 denied · 4 not verified/not passed ·
//! 5 conflict.

use crate::approve::TtyApprover;
use airlock_kernel::{
    CallContext, CallOutcome, Cancel, Kernel, KernelConfig, OperatorInputs, Settings, Status,
};
use airlock_policy::modes::{PermissionMode, Profile, WorkMode};
use airlock_types::display::{Escape, Shown, escape_for_terminal};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};
use std::io::{BufRead, Read, Write};
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

/// Exit code: success.
pub const EXIT_OK: i32 = 0;
/// Exit code: internal error.
pub const EXIT_INTERNAL: i32 = 1;
/// Exit code: usage error.
pub const EXIT_USAGE: i32 = 2;
/// Exit code: denied by the chain.
pub const EXIT_DENIED: i32 = 3;
/// Exit code: verification did not pass, or apply refused the changeset.
pub const EXIT_NOT_VERIFIED: i32 = 4;
/// Exit code: conflict.
pub const EXIT_CONFLICT: i32 = 5;
/// Exit code of a command killed at its time limit (as `timeout(1)`).
pub const EXIT_TIMED_OUT: i32 = 124;
/// Exit code of a cancelled command (as after SIGINT).
pub const EXIT_CANCELLED: i32 = 130;

/// The exit code of a call's outcome: the one table (CLI.md, *Exit codes*; `exec` exits with
/// its command's own code).
pub fn exit_code(status: Status) -> i32 {
    match status {
        Status::Ok => EXIT_OK,
        Status::Failed => EXIT_INTERNAL,
        Status::Usage => EXIT_USAGE,
        Status::Denied => EXIT_DENIED,
        Status::NotVerified => EXIT_NOT_VERIFIED,
        Status::Conflict => EXIT_CONFLICT,
        Status::TimedOut => EXIT_TIMED_OUT,
        Status::Cancelled => EXIT_CANCELLED,
        Status::Exited(code) => code,
    }
}

#[derive(Parser, Debug)]
#[command(
    name = "airlock",
    version,
    about = "A zero-trust execution kernel for AI coding agents: every tool call is decided, \
             confined, staged and verified before anything touches the workspace."
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Debug, Clone)]
struct Global {
    /// Workspace root (default: the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Session name; each session has its own staged changes.
    #[arg(long, global = true, default_value = "default")]
    session: String,
    /// Work mode: discuss (read-only), plan (plan artifacts only) or build [default: the user
    /// config's `[defaults] mode`, else discuss].
    #[arg(long, global = true, env = "AIRLOCK_MODE", value_parser = one_of::<WorkMode>(&["discuss", "plan", "build"]))]
    mode: Option<WorkMode>,
    /// Permission mode: auto, or ask the operator for gated calls [default: the user config's
    /// `[defaults] permission`, else auto].
    #[arg(long, global = true, env = "AIRLOCK_PERMISSION", value_parser = one_of::<PermissionMode>(&["auto", "ask"]))]
    permission: Option<PermissionMode>,
    /// Access profile (default: the user config's `[defaults] profile`, else the widest the
    /// mode allows, never unrestricted).
    #[arg(long, global = true, env = "AIRLOCK_PROFILE", value_parser = one_of::<Profile>(&["readonly", "plan", "allowlist", "allow-all"]))]
    profile: Option<Profile>,
    /// Honour the workspace-local `.airlock/config.toml` (ignored by default).
    #[arg(long, global = true)]
    allow_local_config: bool,
    /// Operator opt-in: on a host without user namespaces or overlayfs, run commands without
    /// kernel isolation (a copy of the workspace; every result says so) instead of refusing.
    #[arg(long, global = true)]
    allow_degraded: bool,
    /// Most a session may stage, in bytes (suffixes K, M, G accepted): a write or a command's
    /// harvest that would take the session's staged contents past it fails, nothing of it
    /// staged [default: the user config's `[limits] max_staged_bytes`, else 2G].
    #[arg(long, global = true, value_name = "BYTES", value_parser = parse_bytes)]
    max_staged: Option<u64>,
    /// Machine output (JSON) on stdout; logs always go to stderr.
    #[arg(long, global = true)]
    json: bool,
    /// The sandbox tier for every command of this invocation: full (namespaces), landlock
    /// (a copy under Landlock and seccomp, no namespaces) or degraded (no kernel isolation;
    /// needs --allow-degraded) [default: the strongest the host offers, down to
    /// AIRLOCK_SANDBOX_WEAKEST].
    #[arg(long, global = true, value_name = "TIER", value_parser = one_of::<airlock_sandbox::Tier>(&["full", "landlock", "degraded"]))]
    sandbox: Option<airlock_sandbox::Tier>,
    /// Ask the person at the terminal to switch this one process to an unrestricted session
    /// (confirmed on /dev/tty; never over MCP, never from a config file).
    #[arg(long, global = true)]
    unrestricted: bool,
    /// What `main` read from the environment (no flag).
    #[arg(skip)]
    settings: Settings,
}

impl Global {
    /// Fills mode, permission and profile that neither a flag nor an `AIRLOCK_MODE`-style
    /// variable gave from the user config's `[defaults]` (never the workspace-local config).
    fn apply_defaults(&mut self) -> Result<(), airlock_policy::rules::ConfigError> {
        if self.mode.is_some() && self.permission.is_some() && self.profile.is_some() {
            return Ok(());
        }
        let Some(path) = airlock_policy::rules::user_config_path_from(
            self.settings
                .xdg_config_home
                .as_deref()
                .map(|p| p.as_os_str()),
            self.settings.home.as_deref().map(|p| p.as_os_str()),
        ) else {
            return Ok(());
        };
        let d = airlock_policy::rules::load_defaults(&path)?;
        self.mode = self.mode.or(d.mode);
        self.permission = self.permission.or(d.permission);
        self.profile = self.profile.or(d.profile);
        Ok(())
    }
}

/// A flag's parser: one of `names` (clap lists them in help and errors), parsed into `T`.
fn one_of<T>(names: &'static [&'static str]) -> impl TypedValueParser<Value = T>
where
    T: FromStr + Clone + Send + Sync + 'static,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    PossibleValuesParser::new(names).try_map(|s| s.parse::<T>())
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Bash-guard verdict for one command string (`-` reads it from stdin).
    Guard {
        /// The command; `-` reads stdin.
        command: Option<String>,
        /// Read one JSON-encoded command string per line on stdin; print one decision per line.
        #[arg(long)]
        batch: bool,
    },
    /// Jail verdict per path, relative to the workspace.
    Jail {
        /// Check for writing (default: reading).
        #[arg(long)]
        write: bool,
        /// Paths to check.
        #[arg(required = true)]
        paths: Vec<String>,
    },
    /// The decision trail through every stage, executing nothing.
    Explain {
        /// Tool name.
        tool: String,
        /// Arguments as JSON.
        args: Option<String>,
    },
    /// Run one tool through the whole chain.
    Call {
        /// Tool name.
        tool: String,
        /// Arguments as JSON (default `{}`; `-` reads stdin).
        args: Option<String>,
    },
    /// The tools with their JSON Schemas.
    Tools,
    /// Staged changes of the session (A/M/D per path).
    Status,
    /// Staged changes as a unified diff.
    Diff {
        /// Limit to these paths.
        paths: Vec<String>,
    },
    /// Drop the session's staged changes.
    Discard,
    /// Run CMD in the sandbox over workspace + staged changes; what it writes is staged.
    Exec {
        /// Wall-clock limit in seconds (exit 124 when reached).
        #[arg(long)]
        timeout: Option<u64>,
        #[command(flatten)]
        ceilings: Ceilings,
        /// Let this run reach HOST (`example.com`, `*.example.com`, `HOST:PORT`) or a package
        /// registry (`preset:npm`, `preset:pip`, `preset:cargo`, `preset:go`) through airlock's
        /// proxy; repeatable. Without it the run has no network.
        #[arg(long = "allow-net", value_name = "HOST|preset:NAME", value_parser = net_grant)]
        allow_net: Vec<String>,
        /// Command and arguments.
        #[arg(last = true, required = true)]
        argv: Vec<String>,
    },
    /// Run the tests in a fresh sandbox over workspace + staged changes.
    Verify {
        /// Wall-clock limit in seconds.
        #[arg(long)]
        timeout: Option<u64>,
        /// Runner: auto or a runner name (node, vitest, jest, cargo, pytest, go).
        #[arg(long, default_value = "auto")]
        runner: String,
        /// Also run on the unchanged workspace and mark pre-existing failures.
        #[arg(long)]
        baseline: bool,
        /// Bytes of diagnostics text, 256 to 65536 (default 4096 or `[verify] budget`).
        #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
        budget: Option<u64>,
        /// Run only these tests, by the `id` of failures in an earlier verdict; the verdict is
        /// advisory (apply needs the whole suite).
        #[arg(long, value_name = "ID", num_args = 1..)]
        only: Vec<String>,
        /// Run the tests related to the staged changes first: if they fail, that verdict at
        /// once (scope `impacted`, advisory); else the whole suite, whose verdict decides.
        #[arg(long, conflicts_with_all = ["only", "impacted"])]
        impacted_first: bool,
        /// Run only the tests related to the staged changes; the verdict is advisory.
        #[arg(long, conflicts_with = "only")]
        impacted: bool,
        #[command(flatten)]
        ceilings: Ceilings,
        /// The operator's own test command: its verdict can unlock `apply` (a command an agent
        /// passes to the `verify` tool only gives advice).
        #[arg(last = true)]
        argv: Vec<String>,
    },
    /// Write the verified changeset to the workspace atomically.
    Apply {
        /// Let this one apply write a staged path whose content the host would run by itself
        /// (a `.git` entry, `.envrc`, an editor task file); repeat per path.
        #[arg(long = "allow-host-exec", value_name = "PATH")]
        allow_host_exec: Vec<String>,
        /// Apply although the verdict names concerns (changed tests or test configuration,
        /// code reaching for the test run's machinery, session-local hooks): the operator has
        /// reviewed them (`airlock diff`). Without it such an apply asks on the terminal.
        #[arg(long = "accept-test-changes")]
        accept_test_changes: bool,
    },
    /// Revert the last apply.
    Undo,
    /// Journal records, newest last.
    Journal,
    /// Resolve interrupted applies.
    Recover,
    /// Remove stored contents (blobs) that no session's staged changes and no unresolved apply
    /// name any more (`discard` and `apply` do it too).
    Gc,
    /// The workspace's build and test caches (`status` with sizes, `drop` to empty them).
    Cache {
        #[command(subcommand)]
        action: CacheAction,
    },
    /// Serve every tool over MCP on stdio.
    Mcp,
    /// The built-in end-to-end example on a bundled sample project.
    Demo,
    /// Register airlock in a coding agent's configuration (claude, codex, gemini, cursor,
    /// goose); `--print` shows it without writing.
    Setup(crate::setup::SetupArgs),
    /// Questions gated calls of MCP clients that cannot ask are waiting on; answer one with
    /// `once|session|deny ID`.
    Approvals(crate::mcp::queue::ApprovalsArgs),
    /// What this host offers the sandbox (found by trying), the tier commands will get and why,
    /// and the fix for each missing piece; `--install-apparmor` grants airlock user namespaces.
    Doctor(crate::doctor::DoctorArgs),
}

/// What `airlock cache` does.
#[derive(Subcommand, Debug, Clone, Copy)]
enum CacheAction {
    /// Each cache with its size in bytes and files.
    Status,
    /// Remove every cache of the workspace; the next run starts from empty caches.
    Drop,
}

/// Per-run resource ceilings the operator may set on `exec` and `verify`.
#[derive(Args, Debug, Clone, Default)]
struct Ceilings {
    /// Memory ceiling for the run, in bytes (suffixes K, M, G accepted).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    memory: Option<u64>,
    /// CPU-time ceiling for the run, in seconds.
    #[arg(long = "cpu-secs", value_name = "N")]
    cpu_secs: Option<u64>,
    /// Most the run may write to the workspace overlay, in bytes (suffixes K, M, G accepted).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    disk: Option<u64>,
}

fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_uppercase() {
                'K' => 1u64 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => {
                    return Err(format!(
                        "`{s}`: use a number of bytes, optionally with K, M, G or T"
                    ));
                }
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{s}`: use a number of bytes, optionally with K, M, G or T"))?;
    n.checked_mul(mult)
        .filter(|&b| b > 0)
        .ok_or_else(|| format!("`{s}`: out of range"))
}

/// The settings that this process's environment describes. The binary's `main` reads them
/// once and passes them to [`main`]; nothing below it reads environment variables.
pub fn settings_from_env() -> Settings {
    Settings::from_vars(std::env::vars_os(), std::env::temp_dir())
}

/// Entry point with the environment's `settings`; returns the process exit code.
pub fn main(settings: Settings) -> i32 {
    init_logging();
    airlock_sandbox::timing::mark("main");
    let mut cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
            let _ = e.print();
            return code;
        }
    };
    cli.global.settings = settings;
    let result = run(cli);
    airlock_sandbox::timing::mark("done");
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("airlock: {}", Shown::text(&e.to_string()));
            EXIT_INTERNAL
        }
    }
}

/// Logs (`AIRLOCK_LOG`, default `warn`) and, under `AIRLOCK_TIMINGS=1`, the sandbox's phase
/// timings ([`airlock_sandbox::timing`]), both on stderr.
fn init_logging() {
    use tracing_subscriber::prelude::*;
    let filter = tracing_subscriber::EnvFilter::try_from_env("AIRLOCK_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let timings = std::env::var_os("AIRLOCK_TIMINGS").is_some_and(|v| v == "1");
    let _ = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_filter(filter),
        )
        .with(timings.then(airlock_sandbox::timing::stderr_layer))
        .try_init();
}

type CliResult = Result<i32, Box<dyn std::error::Error>>;

fn run(mut cli: Cli) -> CliResult {
    cli.global.apply_defaults()?;
    let g = cli.global.clone();
    if let Some(tier) = g.sandbox {
        airlock_sandbox::settings::force_tier(tier);
    }
    if g.unrestricted
        && !matches!(
            cli.command,
            Command::Call { .. } | Command::Exec { .. } | Command::Explain { .. }
        )
    {
        eprintln!(
            "airlock: --unrestricted applies to `call`, `exec` and `explain` only (never to `mcp`)"
        );
        return Ok(EXIT_USAGE);
    }
    match cli.command {
        Command::Doctor(args) => cmd_doctor(&g, &args),
        Command::Guard { command, batch } => cmd_guard(&g, command, batch),
        Command::Jail { write, paths } => cmd_jail(&g, write, &paths),
        Command::Demo => crate::demo::run(g.json, g.settings.clone()),
        Command::Approvals(args) => {
            let workspace = match &g.workspace {
                Some(w) => w.clone(),
                None => std::env::current_dir()?,
            };
            let workspace = workspace.canonicalize().unwrap_or(workspace);
            Ok(crate::mcp::queue::command(
                &args, &workspace, &g.session, g.json,
            ))
        }
        Command::Setup(args) => Ok(crate::setup::command(
            &args,
            g.workspace.as_deref(),
            g.permission.unwrap_or(PermissionMode::Auto).as_str(),
            g.profile.map(|p| p.as_str()),
        )),
        Command::Mcp => {
            let kernel = Arc::new(open_kernel(&g)?);
            crate::mcp::serve_stdio(kernel)?;
            Ok(EXIT_OK)
        }
        Command::Tools => {
            let kernel = open_kernel(&g)?;
            let tools = crate::mcp::offered_tools(&kernel);
            if g.json {
                println!("{}", serde_json::to_string_pretty(&tools)?);
            } else {
                for t in tools {
                    let first = t.description.lines().next().unwrap_or("");
                    println!("{:<12} {}", t.name, first);
                }
            }
            Ok(EXIT_OK)
        }
        Command::Explain { tool, args } => {
            let kernel = open_kernel(&g)?;
            let args = read_args(args)?;
            let mut trail = kernel.explain(&tool, &args);
            let code = if trail["decision"] == "allow" {
                EXIT_OK
            } else {
                EXIT_DENIED
            };
            trail["exit_code"] = json!(code);
            if g.json {
                println!("{}", json_text(&trail));
            } else {
                let field =
                    |step: &Value, k: &str| Shown::name(step[k].as_str().unwrap_or("")).to_string();
                for step in trail["trail"].as_array().into_iter().flatten() {
                    println!(
                        "{:<11} {:<6} {:<24} {}",
                        field(step, "stage"),
                        field(step, "decision"),
                        field(step, "rule"),
                        field(step, "reason")
                    );
                }
            }
            Ok(code)
        }
        Command::Call { tool, args } => {
            let kernel = open_kernel(&g)?;
            let args = read_args(args)?;
            // `airlock call` is the agent's channel: no operator inputs.
            Ok(call_and_print(
                &kernel,
                &g,
                &tool,
                &args,
                Style::Call,
                OperatorInputs::default(),
            ))
        }
        Command::Status => tool_cmd(&g, "status", json!({})),
        Command::Diff { paths } => tool_cmd(&g, "diff", json!({ "paths": paths })),
        Command::Discard => tool_cmd(&g, "discard", json!({})),
        Command::Exec {
            timeout,
            ceilings,
            allow_net,
            argv,
        } => {
            let mut args = json!({ "argv": argv });
            if let Some(t) = timeout {
                args["timeout_secs"] = json!(t);
            }
            let operator = OperatorInputs {
                memory_bytes: ceilings.memory,
                cpu_secs: ceilings.cpu_secs,
                disk_bytes: ceilings.disk,
                allow_net,
                ..OperatorInputs::default()
            };
            operator_cmd(&g, "bash", args, operator)
        }
        Command::Verify {
            timeout,
            runner,
            baseline,
            budget,
            only,
            impacted_first,
            impacted,
            ceilings,
            argv,
        } => {
            let mut args = json!({ "runner": runner.clone(), "baseline": baseline });
            if impacted_first {
                args["impacted"] = json!("first");
            } else if impacted {
                args["impacted"] = json!("only");
            }
            if let Some(t) = timeout {
                args["timeout_secs"] = json!(t);
            }
            if let Some(b) = budget {
                args["budget"] = json!(b);
            }
            if !only.is_empty() {
                args["only"] = json!(only);
            }
            // The operator's command travels outside the tool's arguments: only this channel
            // can name a command whose verdict unlocks `apply`.
            let operator = OperatorInputs {
                verify_runner: Some(runner),
                verify_command: (!argv.is_empty()).then_some(argv),
                memory_bytes: ceilings.memory,
                cpu_secs: ceilings.cpu_secs,
                disk_bytes: ceilings.disk,
                ..OperatorInputs::default()
            };
            operator_cmd(&g, "verify", args, operator)
        }
        Command::Apply {
            allow_host_exec,
            accept_test_changes,
        } => {
            let operator = OperatorInputs {
                allow_host_exec,
                accept_concerns: accept_test_changes,
                ..OperatorInputs::default()
            };
            operator_cmd(&g, "apply", json!({}), operator)
        }
        Command::Undo => tool_cmd(&g, "undo", json!({})),
        Command::Journal => tool_cmd(&g, "journal", json!({})),
        Command::Recover => tool_cmd(&g, "recover", json!({})),
        Command::Gc => cmd_gc(&g),
        Command::Cache { action } => cmd_cache(&g, action),
    }
}

/// `airlock doctor`: the host report (no kernel is opened: it must work where nothing else
/// does).
fn cmd_doctor(g: &Global, args: &crate::doctor::DoctorArgs) -> CliResult {
    let workspace = match &g.workspace {
        Some(w) => w.clone(),
        None => std::env::current_dir()?,
    };
    let input = crate::doctor::DoctorInput {
        workspace: &workspace,
        user_config: airlock_policy::rules::user_config_path_from(
            g.settings.xdg_config_home.as_deref().map(|p| p.as_os_str()),
            g.settings.home.as_deref().map(|p| p.as_os_str()),
        ),
        allow_local_config: g.allow_local_config,
        allow_degraded: g.allow_degraded,
        path: g.settings.path.clone(),
        json: g.json,
    };
    Ok(crate::doctor::command(args, &input))
}

/// `airlock gc`: an operator's maintenance command, not a tool (nothing an agent decides).
fn cmd_gc(g: &Global) -> CliResult {
    let kernel = open_kernel(g)?;
    let report = match kernel.gc() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("airlock: {e}");
            return Ok(1);
        }
    };
    if g.json {
        println!("{}", serde_json::to_value(&report)?);
        return Ok(0);
    }
    match &report.blobs.skipped {
        Some(why) => println!("{why}"),
        None => println!(
            "Freed {} stored blob(s) ({} bytes); {} still in use.",
            report.blobs.removed, report.blobs.removed_bytes, report.blobs.kept
        ),
    }
    println!(
        "Removed {} spool director(ies) ({} bytes) and {} idle sandbox scratch director(ies) ({} bytes); {} in use left. {} bytes freed in all.",
        report.spool.removed,
        report.spool.bytes,
        report.scratch.removed,
        report.scratch.bytes,
        report.spool.in_use + report.scratch.in_use,
        report.freed_bytes
    );
    Ok(0)
}

/// `airlock cache status|drop`: an operator's maintenance command, not a tool.
fn cmd_cache(g: &Global, action: CacheAction) -> CliResult {
    let kernel = open_kernel(g)?;
    match action {
        CacheAction::Status => {
            let usage = match kernel.cache_status() {
                Ok(u) => u,
                Err(e) => {
                    eprintln!("airlock: reading the caches: {e}");
                    return Ok(1);
                }
            };
            let total: u64 = usage.iter().map(|u| u.bytes).sum();
            if g.json {
                println!("{}", json!({ "caches": usage, "total_bytes": total }));
            } else if usage.is_empty() {
                println!("No caches.");
            } else {
                for u in &usage {
                    println!(
                        "{:<7} {:<13} {:>12} bytes {:>8} files",
                        u.domain, u.name, u.bytes, u.files
                    );
                }
                println!("total {total} bytes");
            }
        }
        CacheAction::Drop => match kernel.cache_drop() {
            Ok(freed) => {
                if g.json {
                    println!("{}", json!({ "dropped_bytes": freed }));
                } else {
                    println!("Dropped the workspace's caches ({freed} bytes).");
                }
            }
            Err(e) => {
                eprintln!("airlock: dropping the caches: {e}");
                return Ok(1);
            }
        },
    }
    Ok(0)
}

fn kernel_config(g: &Global) -> Result<KernelConfig, Box<dyn std::error::Error>> {
    let workspace = match &g.workspace {
        Some(w) => w.clone(),
        None => std::env::current_dir()?,
    };
    Ok(KernelConfig {
        workspace,
        session: g.session.clone(),
        mode: g.mode.unwrap_or(WorkMode::Discuss),
        permission: g.permission.unwrap_or(PermissionMode::Auto),
        profile: g.profile,
        allow_local_config: g.allow_local_config,
        allow_degraded: g.allow_degraded,
        settings: g.settings.clone(),
    })
}

fn open_kernel(g: &Global) -> Result<Kernel, Box<dyn std::error::Error>> {
    let mut kernel = Kernel::open(kernel_config(g)?)?;
    if let Some(limit) = g.max_staged {
        kernel.set_max_staged_bytes(limit);
    }
    if g.unrestricted {
        let session = kernel.session().to_string();
        let grant = crate::unrestricted::confirm(
            std::path::Path::new("/dev/tty"),
            kernel.workspace(),
            &session,
        )?;
        kernel.grant_unrestricted(grant)?;
    }
    for notice in kernel.notices() {
        eprintln!("airlock: {notice}");
    }
    Ok(kernel)
}

fn read_args(args: Option<String>) -> Result<String, Box<dyn std::error::Error>> {
    Ok(match args.as_deref() {
        None => "{}".to_string(),
        Some("-") => {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s)?;
            s
        }
        Some(a) => a.to_string(),
    })
}

fn tool_cmd(g: &Global, tool: &str, args: Value) -> CliResult {
    operator_cmd(g, tool, args, OperatorInputs::default())
}

/// A dedicated command: the tool's arguments plus what the operator said on this command line.
fn operator_cmd(g: &Global, tool: &str, args: Value, operator: OperatorInputs) -> CliResult {
    let kernel = open_kernel(g)?;
    airlock_sandbox::timing::mark("kernel open");
    Ok(call_and_print(
        &kernel,
        g,
        tool,
        &args.to_string(),
        Style::Direct,
        operator,
    ))
}

/// How a tool's outcome is printed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Style {
    /// `airlock call`: `--json` prints `{"ok", "output", "truncated"}`.
    Call,
    /// Dedicated commands (`status`, `verify`, …): `--json` prints the tool's own JSON.
    Direct,
}

/// Run a tool and print its outcome the CLI way; returns the exit code.
fn call_and_print(
    kernel: &Kernel,
    g: &Global,
    tool: &str,
    args: &str,
    style: Style,
    operator: OperatorInputs,
) -> i32 {
    let approver = TtyApprover::default();
    let cancel = Cancel::new();
    let mut ctx = CallContext::new(cancel, &approver);
    ctx.operator = operator;
    let outcome = kernel.call(tool, args, &ctx);
    print_outcome(g, tool, &outcome, style);
    exit_code(outcome.status)
}

fn print_outcome(g: &Global, tool: &str, outcome: &CallOutcome, style: Style) {
    let mut out = std::io::stdout().lock();
    if g.unrestricted {
        // Only a confirmed grant gets this far with the flag set.
        eprintln!(
            "airlock: !!! UNRESTRICTED session: the workspace jail is lifted for this process !!!"
        );
    }
    if let Some(denial) = &outcome.denial {
        // A denial prints its decision JSON (stdout in --json, stderr otherwise).
        if g.json {
            let _ = writeln!(out, "{}", json_text(&denial.to_json()));
        } else {
            eprintln!("airlock: {denial}");
        }
        return;
    }
    if g.json {
        let v = match style {
            Style::Call if g.unrestricted => {
                json!({ "ok": outcome.ok, "output": outcome.output, "truncated": outcome.truncated, "unrestricted": true })
            }
            Style::Call => {
                json!({ "ok": outcome.ok, "output": outcome.output, "truncated": outcome.truncated })
            }
            Style::Direct => outcome.output.clone(),
        };
        let _ = writeln!(out, "{}", json_text(&v));
        return;
    }
    if style == Style::Direct
        && let Some(text) = human_text(tool, &outcome.output)
    {
        let text = Shown::text(&text);
        if outcome.ok || tool == "verify" || tool == "bash" {
            let _ = write!(out, "{text}");
        } else {
            eprint!("airlock: {text}");
        }
        return;
    }
    let text = match &outcome.output {
        Value::String(s) => Shown::text(s).to_string(),
        Value::Null => String::new(),
        other => escape_for_terminal(
            &serde_json::to_string_pretty(other).unwrap_or_default(),
            Escape::Json,
        )
        .into_owned(),
    };
    if outcome.ok {
        let _ = write!(out, "{text}");
        if !text.is_empty() && !text.ends_with('\n') {
            let _ = writeln!(out);
        }
    } else {
        eprintln!("airlock: {}", text.trim_end());
    }
}

/// Human rendering of structured tool outputs; `None` falls back to the generic form.
fn human_text(tool: &str, output: &Value) -> Option<String> {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    match tool {
        "status" => Some(s(&output["text"])),
        "bash" if output.is_object() => {
            // `airlock exec` behaves like the command: its stdout on stdout, stderr on stderr,
            // both escaped, and airlock's own lines last, so the command's output cannot
            // redraw them.
            let mut out = std::io::stdout().lock();
            let _ = write!(out, "{}", Shown::text(&s(&output["stdout"])));
            let _ = out.flush();
            eprint!("{}", Shown::text(&s(&output["stderr"])));
            for line in output["staged"].as_array().into_iter().flatten() {
                eprintln!(
                    "airlock: staged {}",
                    Shown::name(line.as_str().unwrap_or(""))
                );
            }
            if let Some(note) = output["note"].as_str() {
                eprintln!("airlock: {}", Shown::text(note));
            }
            if let Some(d) = output["degraded"].as_str() {
                eprintln!("airlock: {d}");
            }
            Some(String::new())
        }
        "verify" if output.is_object() => {
            // The diagnostics open with the verdict and its counts: said once, with the time.
            let diag = s(&output["diagnostics"]);
            let mut text = if diag.is_empty() {
                let t = &output["tests"];
                format!(
                    "verdict: {} ({} passed, {} failed, {} skipped; runner {})\n",
                    s(&output["verdict"]),
                    t["passed"],
                    t["failed"],
                    t["skipped"],
                    s(&output["runner"]),
                )
            } else {
                diag.to_string()
            };
            if !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!("({} ms)\n", output["duration_ms"]));
            Some(text)
        }
        "apply" if output.is_object() => Some(change_list(
            &format!("Applied (journal record {})", output["record"]),
            &[
                ("written", &output["written"]),
                ("deleted", &output["deleted"]),
            ],
        )),
        "undo" if output.is_object() => Some(change_list(
            &format!(
                "Undone: the apply of journal record {} (record {})",
                output["reverted"], output["record"]
            ),
            &[
                ("restored", &output["restored"]),
                ("removed", &output["removed"]),
            ],
        )),
        _ => None,
    }
}

/// Most paths an apply or undo names in text (`--json` lists them all).
const LISTED_PATHS: usize = 20;

/// `head` with each kind's count on one line, then the paths, escaped for the terminal (the
/// first [`LISTED_PATHS`] of each kind).
fn change_list(head: &str, kinds: &[(&str, &Value)]) -> String {
    let lists: Vec<(&str, Vec<&str>)> = kinds
        .iter()
        .map(|(label, paths)| {
            let paths = paths
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            (*label, paths)
        })
        .collect();
    let counts: Vec<String> = lists
        .iter()
        .map(|(label, paths)| format!("{} {label}", paths.len()))
        .collect();
    let mut text = format!("{head}: {}\n", counts.join(", "));
    for (label, paths) in &lists {
        for p in paths.iter().take(LISTED_PATHS) {
            text.push_str(&format!("  {label} {}\n", Shown::name(p)));
        }
        if paths.len() > LISTED_PATHS {
            text.push_str(&format!(
                "  … and {} more {label} (`--json` lists them all)\n",
                paths.len() - LISTED_PATHS
            ));
        }
    }
    text
}

fn cmd_guard(g: &Global, command: Option<String>, batch: bool) -> CliResult {
    if batch {
        let stdin = std::io::stdin();
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        let mut any_denied = false;
        for (n, line) in stdin.lock().lines().enumerate() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            let cmd: String = match serde_json::from_str(&line) {
                Ok(Value::String(s)) => s,
                _ => {
                    eprintln!("airlock: line {}: not a JSON-encoded string", n + 1);
                    return Ok(EXIT_USAGE);
                }
            };
            let report = airlock_kernel::guard_check(&cmd);
            any_denied |= !report.decision.is_allow();
            let mut v = report.decision.to_json();
            v["normalized"] = json!(report.normalized);
            v["cmd"] = json!(cmd);
            writeln!(out, "{}", json_text(&v))?;
        }
        out.flush()?;
        return Ok(if any_denied { EXIT_DENIED } else { EXIT_OK });
    }
    let cmd = match command.as_deref() {
        None => {
            eprintln!("airlock: guard needs a COMMAND (or `-` to read it from stdin, or --batch)");
            return Ok(EXIT_USAGE);
        }
        Some("-") => {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s)?;
            s
        }
        Some(c) => c.to_string(),
    };
    let report = airlock_kernel::guard_check(&cmd);
    if g.json {
        let mut v = report.decision.to_json();
        v["normalized"] = json!(report.normalized);
        println!("{}", json_text(&v));
    } else if report.decision.is_allow() {
        println!("allow: {}", Shown::text(&report.normalized));
    } else {
        println!("{}", report.decision);
    }
    Ok(if report.decision.is_allow() {
        EXIT_OK
    } else {
        EXIT_DENIED
    })
}

fn cmd_jail(g: &Global, write: bool, paths: &[String]) -> CliResult {
    let kernel = open_kernel(g)?;
    let mut all_ok = true;
    for p in paths {
        let decision = kernel.jail_check(p, write);
        all_ok &= decision.is_allow();
        if g.json {
            let mut v = decision.to_json();
            v["path"] = json!(p);
            println!("{}", json_text(&v));
        } else {
            println!("{}: {decision}", Shown::name(p));
        }
    }
    Ok(if all_ok { EXIT_OK } else { EXIT_DENIED })
}

/// JSON for the terminal: exact once parsed, but every control, C1 or bidi character written as
/// a `\uNNNN` escape ([`Escape::Json`]), so no byte of it acts on the terminal either.
fn json_text(v: &Value) -> String {
    escape_for_terminal(&v.to_string(), Escape::Json).into_owned()
}

/// `--allow-net`'s value: a host rule or a preset (a malformed one is a usage error, exit 2).
fn net_grant(s: &str) -> Result<String, String> {
    airlock_policy::net::GrantItem::parse(s, &[])
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}
