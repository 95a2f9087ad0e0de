//! The kernel's public surface, shared by the CLI and the MCP server.

use airlock_policy::Decision;
use serde::Serialize;
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
}

/// How a kernel is opened: the operator's choices, never the model's.
#[derive(Debug, Clone)]
pub struct KernelConfig {
    /// Workspace root.
    pub workspace: PathBuf,
    /// Session name.
    pub session: String,
    /// `discuss`, `plan` or `build`.
    pub mode: String,
    /// `auto` or `ask`.
    pub permission: String,
    /// `readonly`, `plan`, `allowlist`, `allow-all`; `None` = the widest the mode allows.
    pub profile: Option<String>,
    /// Honour `.airlock/config.toml` in the workspace.
    pub allow_local_config: bool,
    /// Operator opt-in: when the host lacks user namespaces or overlayfs (or
    /// `AIRLOCK_SANDBOX=degraded` asks for it), run commands in the degraded copy backend, whose
    /// every result says `degraded: no kernel isolation`. Off: such hosts get a clear error.
    pub allow_degraded: bool,
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
