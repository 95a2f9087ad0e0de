//! The kernel's public surface, shared by the CLI and the MCP server.

use airlock_policy::Decision;
use airlock_policy::modes::{PermissionMode, Profile, WorkMode};
use airlock_stage::journal::JournalNotice;
use serde::Serialize;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// One tool as front ends list it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ToolSpec {
    /// Tool name (`read_file`, `bash`, …).
    pub name: String,
    /// What it does and how it fits the stage → verify → fix → apply loop.
    pub description: String,
    /// JSON Schema (draft 2020-12) of its arguments.
    #[serde(rename = "inputSchema")]
    pub input_schema: serde_json::Value,
    /// True when the tool never changes anything.
    #[serde(rename = "readOnly")]
    pub read_only: bool,
}

/// The result of one call, as `airlock call --json` prints it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CallOutcome {
    /// True when the tool ran and succeeded.
    pub ok: bool,
    /// The tool's output (text or structured JSON); for a denial, the decision JSON.
    pub output: serde_json::Value,
    /// True when the output was cut (the output itself says how to get the rest).
    pub truncated: bool,
    /// Present when a stage of the chain denied the call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub denial: Option<Decision>,
    /// How the call ended (the CLI maps it to its exit code).
    #[serde(skip)]
    pub status: crate::output::Status,
}

/// A cancellation flag shared between a front end and a running call. Cancelling kills a
/// running sandbox; nothing is half-applied.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A fresh, un-cancelled flag.
    pub fn new() -> Cancel {
        Cancel::default()
    }
    /// Request cancellation.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst)
    }
    /// True once cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
    /// The shared flag, for lower layers that poll it.
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.0.clone()
    }
}

/// A gated call awaiting the operator.
#[derive(Debug, Clone, Serialize)]
pub struct ApprovalRequest {
    /// Tool name.
    pub tool: String,
    /// A short human summary of what would happen.
    pub summary: String,
    /// The decision that asked.
    pub decision: Decision,
}

/// The operator's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// Run this call only.
    Once,
    /// Run this and identical later calls of this session (never persisted).
    Session,
    /// Refuse, with the reason to report.
    Deny(String),
}

/// Something that can ask the operator (a TTY prompt, MCP elicitation).
pub trait Approver: Send + Sync {
    /// Ask about `req`. Must not block forever: no operator reachable means `Deny`.
    fn approve(&self, req: &ApprovalRequest) -> Approval;
}

/// An approver for when no operator is reachable: denies every gated call.
#[derive(Debug, Clone, Default)]
pub struct DenyAll(pub String);

impl Approver for DenyAll {
    fn approve(&self, _req: &ApprovalRequest) -> Approval {
        let why = if self.0.is_empty() {
            "no operator is reachable to approve it"
        } else {
            &self.0
        };
        Approval::Deny(why.to_string())
    }
}

/// Per-call context from the front end.
pub struct CallContext<'a> {
    /// Cancellation flag.
    pub cancel: Cancel,
    /// Who approves gated calls.
    pub approver: &'a dyn Approver,
    /// What the operator said for this one call, outside the tool's arguments. Only an
    /// operator's front end (the CLI's dedicated commands) fills it; the MCP server and
    /// `airlock call` — the agent's channels — leave it empty.
    pub operator: OperatorInputs,
}

impl<'a> CallContext<'a> {
    /// A context with no operator inputs: what every agent-facing front end builds.
    pub fn new(cancel: Cancel, approver: &'a dyn Approver) -> CallContext<'a> {
        CallContext {
            cancel,
            approver,
            operator: OperatorInputs::default(),
        }
    }
}

/// Inputs for one call that only the operator can give (never part of a tool's arguments, so
/// never reachable by the model).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OperatorInputs {
    /// `airlock verify -- CMD`: the operator's own test command; its verdict can unlock apply.
    pub verify_command: Option<Vec<String>>,
    /// `airlock verify --runner NAME`: the operator's choice of runner (adapter).
    pub verify_runner: Option<String>,
    /// `airlock apply --allow-host-exec PATH`: staged paths whose content the host would
    /// execute by itself, which the operator lets this one apply write anyway.
    pub allow_host_exec: Vec<String>,
    /// `--memory BYTES` on `exec`/`verify`: this run's memory ceiling.
    pub memory_bytes: Option<u64>,
    /// `--cpu-secs N` on `exec`/`verify`: this run's CPU-time ceiling.
    pub cpu_secs: Option<u64>,
    /// `--disk BYTES` on `exec`/`verify`: the most this run may write to its overlay.
    pub disk_bytes: Option<u64>,
    /// `--allow-net HOST|preset:NAME` on `exec`: hosts this run may reach through airlock's
    /// proxy, added to the user config's `[net]` grants.
    pub allow_net: Vec<String>,
    /// `airlock apply --accept-test-changes`: the operator has reviewed what the verdict's
    /// concerns name (changed tests or test configuration, …) and applies anyway.
    pub accept_concerns: bool,
}

/// How a kernel is opened: the operator's choices, never the model's.
#[derive(Debug, Clone)]
pub struct KernelConfig {
    /// Workspace root.
    pub workspace: PathBuf,
    /// Session name.
    pub session: String,
    /// `discuss`, `plan` or `build`.
    pub mode: WorkMode,
    /// `auto` or `ask`.
    pub permission: PermissionMode,
    /// `readonly`, `plan`, `allowlist`, `allow-all`; `None` = the widest the mode allows.
    pub profile: Option<Profile>,
    /// Honour `.airlock/config.toml` in the workspace.
    pub allow_local_config: bool,
    /// Operator opt-in: when the host lacks user namespaces or overlayfs (or
    /// `AIRLOCK_SANDBOX=degraded` asks for it), run commands in the degraded copy backend, whose
    /// every result says `degraded: no kernel isolation`. Off: such hosts get a clear error.
    pub allow_degraded: bool,
    /// What the front end read from its process environment.
    pub settings: Settings,
}

/// What airlock takes from its process environment. The front end reads it once (the
/// `airlock` binary in `main`) and passes it down in [`KernelConfig`]: library code never reads
/// environment variables itself.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `AIRLOCK_RUN_DIR`: the directory for session scratch (binding when set).
    pub run_dir: Option<PathBuf>,
    /// `XDG_RUNTIME_DIR`: session scratch goes to `<it>/airlock` when it is a usable directory.
    pub runtime_dir: Option<PathBuf>,
    /// The system's temporary directory (`TMPDIR`, else `/tmp`): session scratch goes to
    /// `<it>/airlock-<uid>` when neither of the above is usable.
    pub temp_dir: PathBuf,
    /// `AIRLOCK_SANDBOX=degraded`: run commands without kernel isolation, which still needs
    /// the operator's `--allow-degraded`.
    pub forced_degraded: bool,
    /// `AIRLOCK_TURN`: the agent turn effects are journaled under (unset or not a number: the
    /// time of each call).
    pub turn: Option<u64>,
    /// `HOME`: whose toolchain directories sandboxed commands see, and the user config's
    /// fallback location.
    pub home: Option<PathBuf>,
    /// `XDG_CONFIG_HOME`: the user config's location (`<it>/airlock/config.toml`).
    pub xdg_config_home: Option<PathBuf>,
    /// `XDG_STATE_HOME`: the operator's state (`<it>/airlock/verdict.key`, else
    /// `$HOME/.local/state/airlock/`).
    pub xdg_state_home: Option<PathBuf>,
    /// `PATH`: where a `bash` call's `argv` program is looked up.
    pub path: Option<OsString>,
    /// The whole environment, from which the sandbox passes only its allow-list (part of the
    /// identity of a cached base run).
    pub env: Vec<(OsString, OsString)>,
}

impl Default for Settings {
    /// No variable set: scratch under `/tmp`, no `HOME`, no `PATH`.
    fn default() -> Settings {
        Settings {
            run_dir: None,
            runtime_dir: None,
            temp_dir: PathBuf::from("/tmp"),
            forced_degraded: false,
            turn: None,
            home: None,
            xdg_config_home: None,
            xdg_state_home: None,
            path: None,
            env: Vec::new(),
        }
    }
}

impl Settings {
    /// The settings that the environment `vars` (name, value) describes, with `temp_dir` as the
    /// system's temporary directory: the front end passes its process's.
    pub fn from_vars(
        vars: impl IntoIterator<Item = (OsString, OsString)>,
        temp_dir: PathBuf,
    ) -> Settings {
        let env: Vec<(OsString, OsString)> = vars.into_iter().collect();
        let get = |name: &str| {
            env.iter()
                .rev()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        Settings {
            run_dir: get("AIRLOCK_RUN_DIR").map(PathBuf::from),
            runtime_dir: get("XDG_RUNTIME_DIR").map(PathBuf::from),
            temp_dir,
            forced_degraded: get("AIRLOCK_SANDBOX").is_some_and(|v| v == "degraded"),
            turn: get("AIRLOCK_TURN").and_then(|t| t.to_str().and_then(|t| t.parse().ok())),
            home: get("HOME").map(PathBuf::from),
            xdg_config_home: get("XDG_CONFIG_HOME").map(PathBuf::from),
            xdg_state_home: get("XDG_STATE_HOME").map(PathBuf::from),
            path: get("PATH"),
            env: env.clone(),
        }
    }
}

impl Settings {
    /// The operator's state directory for airlock (the verdict key): `$XDG_STATE_HOME/airlock`,
    /// else `$HOME/.local/state/airlock`; `None` without either (verdicts then cannot be
    /// sealed, and apply refuses them).
    pub fn state_dir(&self) -> Option<PathBuf> {
        let abs = |p: &PathBuf| p.is_absolute().then(|| p.clone());
        self.xdg_state_home
            .as_ref()
            .and_then(abs)
            .map(|d| d.join("airlock"))
            .or_else(|| {
                self.home
                    .as_ref()
                    .and_then(abs)
                    .map(|h| h.join(".local/state/airlock"))
            })
    }
}

/// Something the operator should know about how the kernel was opened.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// A note of the configuration loader: a workspace-local config ignored or honoured, a key
    /// that only the command line may set, ….
    Config(String),
    /// A note of the journal on opening: another process owns it, or a damaged one was moved
    /// aside.
    Journal(JournalNotice),
    /// The journal could not be opened at start-up, so nothing was recovered.
    JournalUnavailable(String),
    /// An operation interrupted by an earlier crash was recovered at start-up.
    RecoveredAtStartup {
        /// The recovery's outcome for the record, as the `recover` tool reports it.
        outcome: serde_json::Value,
    },
    /// Recovery at start-up failed; `airlock recover` retries it.
    RecoveryFailed(String),
}

impl std::fmt::Display for Notice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Notice::Config(text) => f.write_str(text),
            Notice::Journal(n) => write!(f, "{n}"),
            Notice::JournalUnavailable(e) => write!(f, "the journal cannot be opened: {e}"),
            Notice::RecoveredAtStartup { outcome } => {
                write!(
                    f,
                    "recovered an interrupted operation at start-up: {outcome}"
                )
            }
            Notice::RecoveryFailed(e) => write!(f, "recovery at start-up failed: {e}"),
        }
    }
}

/// The bash guard's verdict for one command string, with the normalised command.
pub fn guard_check(script: &str) -> GuardCheck {
    let report = airlock_policy::guard::evaluate(script);
    GuardCheck {
        decision: report.decision,
        normalized: report.normalized,
    }
}

/// A guard verdict as the CLI prints it.
#[derive(Debug, Clone)]
pub struct GuardCheck {
    /// The decision.
    pub decision: Decision,
    /// The command after normalisation.
    pub normalized: String,
}

/// Bash reserved words: as the first word they would not name a program, so [`shell_join`]
/// quotes them.
const RESERVED: &[&str] = &[
    "!", "[[", "]]", "{", "}", "case", "coproc", "do", "done", "elif", "else", "esac", "fi", "for",
    "function", "if", "in", "select", "then", "time", "until", "while",
];

/// The bash command that runs `argv` as a program with its arguments: each word quoted where
/// needed, and a first word that bash would read otherwise (a reserved word, or `NAME=value`,
/// an assignment) quoted too. The guard and user rules see a `bash` call's `argv` this way.
pub fn shell_join(argv: &[String]) -> String {
    argv.iter()
        .enumerate()
        .map(|(i, a)| {
            let special = i == 0 && (RESERVED.contains(&a.as_str()) || a.contains('='));
            shell_quote(a, special)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn shell_quote(s: &str, force: bool) -> String {
    let safe = !force
        && !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b));
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The script a `bash` call stands for: its `command`, or its `argv` joined by [`shell_join`].
pub(crate) fn bash_script(args: &serde_json::Value) -> Option<String> {
    if let Some(c) = args.get("command") {
        return c.as_str().map(str::to_string);
    }
    bash_argv(args).map(|argv| shell_join(&argv))
}

/// A `bash` call's `argv`: a non-empty array of strings, or `None`.
pub(crate) fn bash_argv(args: &serde_json::Value) -> Option<Vec<String>> {
    string_list(args, "argv")
}

/// Argument `key` as a non-empty list of strings, or `None`.
pub(crate) fn string_list(args: &serde_json::Value, key: &str) -> Option<Vec<String>> {
    let list = args
        .get(key)?
        .as_array()?
        .iter()
        .map(|a| a.as_str().map(str::to_string))
        .collect::<Option<Vec<String>>>()?;
    (!list.is_empty()).then_some(list)
}

#[cfg(test)]
mod settings_tests {
    use super::*;

    fn vars(list: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        list.iter().map(|(k, v)| (k.into(), v.into())).collect()
    }

    #[test]
    fn settings_take_each_variable_from_the_given_environment() {
        let env = vars(&[
            ("AIRLOCK_RUN_DIR", "/run/a"),
            ("XDG_RUNTIME_DIR", "/run/user/0"),
            ("AIRLOCK_SANDBOX", "degraded"),
            ("AIRLOCK_TURN", "42"),
            ("HOME", "/home/u"),
            ("XDG_CONFIG_HOME", "/home/u/.cfg"),
            ("PATH", "/usr/bin:/bin"),
        ]);
        let s = Settings::from_vars(env.clone(), PathBuf::from("/var/tmp"));
        assert_eq!(s.run_dir, Some(PathBuf::from("/run/a")));
        assert_eq!(s.runtime_dir, Some(PathBuf::from("/run/user/0")));
        assert_eq!(s.temp_dir, PathBuf::from("/var/tmp"));
        assert!(s.forced_degraded);
        assert_eq!(s.turn, Some(42));
        assert_eq!(s.home, Some(PathBuf::from("/home/u")));
        assert_eq!(s.xdg_config_home, Some(PathBuf::from("/home/u/.cfg")));
        assert_eq!(s.path, Some(OsString::from("/usr/bin:/bin")));
        assert_eq!(s.env, env);
    }

    #[test]
    fn settings_ignore_what_does_not_ask_for_anything() {
        let s = Settings::from_vars(
            vars(&[("AIRLOCK_SANDBOX", "namespace"), ("AIRLOCK_TURN", "soon")]),
            PathBuf::from("/tmp"),
        );
        assert!(!s.forced_degraded);
        assert_eq!(s.turn, None);
        assert_eq!(s.run_dir, None);
        assert_eq!(s.home, None);
        assert_eq!(s.path, None);
        let d = Settings::default();
        assert_eq!(d.temp_dir, PathBuf::from("/tmp"));
        assert!(!d.forced_degraded && d.env.is_empty());
    }
}

#[cfg(test)]
mod shell_join_tests {
    use super::*;

    #[test]
    fn shell_join_quotes_what_bash_would_read_otherwise() {
        let s = |v: &[&str]| shell_join(&v.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        assert_eq!(
            s(&["sh", "-c", "echo 'hi' > new.txt"]),
            r#"sh -c 'echo '\''hi'\'' > new.txt'"#
        );
        assert_eq!(s(&["true"]), "true");
        assert_eq!(s(&[""]), "''");
        assert_eq!(s(&["if", "x"]), "'if' x");
        assert_eq!(s(&["A=1", "B=2"]), "'A=1' B=2");
        assert_eq!(s(&["rm", "-rf", "$HOME"]), "rm -rf '$HOME'");
    }
}
