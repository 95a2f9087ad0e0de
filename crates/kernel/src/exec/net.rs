//! The network grant of one run: the operator's `[net]` rules and `--allow-net` items, presets
//! resolved from the configuration the sandboxed toolchains read, adapted to the sandbox
//! proxy's [`NetGate`].
//!
//! Presets read only files the sandboxed toolchain itself reads: the workspace's `.npmrc` and
//! `.cargo/config.toml` (or `.cargo/config`) on disk, never staged ones (a staged edit cannot
//! widen a grant before it is applied), and nothing under the caller's `$HOME`, which the
//! sandbox does not show. Without such a file a preset names the toolchain's built-in registry.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::Duration;

use airlock_policy::net::{NetPolicy, NetRuleSet, PresetSources, resolve_preset};
use airlock_sandbox::net::{NetAccess, NetDecision, NetGate};

/// A question to the operator from a run's proxy: the `host:port`, the sentence of the ask
/// rule, and where the answer goes.
pub(crate) struct Question {
    label: String,
    reason: String,
    answer: mpsc::Sender<Result<(), String>>,
}

/// How long a connection waits for the operator's answer before it is refused.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(300);

/// `host:port` labels approved per (workspace, session).
type Approved = Mutex<HashMap<(PathBuf, String), HashSet<String>>>;

/// Where a granted run's questions to the operator arrive.
pub(crate) type Questions = mpsc::Receiver<Question>;

/// Hosts the operator approved for the rest of a session, per (workspace, session), for as
/// long as this process lives (never persisted).
fn session_approved() -> &'static Approved {
    static APPROVED: OnceLock<Approved> = OnceLock::new();
    APPROVED.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The policy of one run, as the proxy asks it.
#[derive(Debug)]
struct RunGate {
    policy: NetPolicy,
    command: String,
    /// (workspace, session): the key of the session's approvals.
    session: (PathBuf, String),
    /// Hosts approved for this run only.
    approved: Mutex<HashSet<String>>,
    /// Where questions to the operator go (none: no `ask` rule applies).
    asker: Option<mpsc::Sender<Question>>,
}

impl RunGate {
    fn ask(&self, label: &str, reason: &str) -> Result<(), String> {
        let lock = |m: &'static Mutex<_>| m.lock().unwrap_or_else(|p| p.into_inner());
        if self
            .approved
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(label)
            || lock(session_approved())
                .get(&self.session)
                .is_some_and(|s: &HashSet<String>| s.contains(label))
        {
            return Ok(());
        }
        let Some(asker) = &self.asker else {
            return Err(format!("{reason} No operator was reachable to approve it."));
        };
        let (tx, rx) = mpsc::channel();
        let q = Question {
            label: label.to_string(),
            reason: reason.to_string(),
            answer: tx,
        };
        if asker.send(q).is_err() {
            return Err(format!(
                "{reason} The run ended before the operator answered."
            ));
        }
        match rx.recv_timeout(ANSWER_TIMEOUT) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(why)) => Err(format!("{reason} Not approved: {why}.")),
            Err(_) => Err(format!("{reason} No answer came from the operator.")),
        }
    }
}

impl NetGate for RunGate {
    fn decide(&self, host: &str, port: u16) -> NetDecision {
        let r = self.policy.decide(host, port, &self.command);
        if r.rule == airlock_policy::net::RULE_ASK {
            let label = format!("{}:{port}", host.to_ascii_lowercase());
            return match self.ask(&label, &r.reason) {
                Ok(()) => NetDecision {
                    allowed: true,
                    rule: "net_approved".into(),
                    reason: format!("{label} was approved by the operator."),
                },
                Err(reason) => NetDecision {
                    allowed: false,
                    rule: r.rule.to_string(),
                    reason,
                },
            };
        }
        NetDecision {
            allowed: r.allowed,
            rule: r.rule.to_string(),
            reason: r.reason,
        }
    }
}

/// Puts the questions of a run's proxy to `approver`, one at a time, until `done`; an answer
/// for the session is remembered for `(root, session)`.
pub(crate) fn serve_questions(
    questions: Questions,
    approver: &dyn crate::api::Approver,
    root: &Path,
    session: &str,
    command: &str,
    done: &std::sync::atomic::AtomicBool,
) {
    use crate::api::{Approval, ApprovalRequest};
    while !done.load(std::sync::atomic::Ordering::SeqCst) {
        let Ok(q) = questions.recv_timeout(Duration::from_millis(50)) else {
            continue;
        };
        let req = ApprovalRequest {
            tool: "bash".into(),
            summary: format!("let `{command}` connect to {}", q.label),
            decision: airlock_policy::Decision::ask(
                airlock_policy::Stage::Permission,
                airlock_policy::net::RULE_ASK,
                q.reason.clone(),
            ),
        };
        let answer = match approver.approve(&req) {
            Approval::Once => Ok(()),
            Approval::Session => {
                session_approved()
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .entry((root.to_path_buf(), session.to_string()))
                    .or_default()
                    .insert(q.label.clone());
                Ok(())
            }
            Approval::Deny(why) => Err(why),
        };
        let _ = q.answer.send(answer);
    }
}

/// The configuration files the presets read, from the workspace at `root`.
fn preset_sources(root: &Path) -> PresetSources {
    let read = |rel: &str| std::fs::read_to_string(root.join(rel)).ok();
    PresetSources {
        npmrc: read(".npmrc").into_iter().collect(),
        pip_conf: Vec::new(),
        cargo_config: [".cargo/config.toml", ".cargo/config"]
            .into_iter()
            .filter_map(read)
            .collect(),
        go_env: Vec::new(),
    }
}

/// The grant of a run of `command` (its text): `None` when nothing is granted to it, so the
/// run keeps no network at all. A malformed `--allow-net` item is an error naming it.
pub(crate) fn access_for(
    root: &Path,
    session: &str,
    config: Option<&NetRuleSet>,
    allow_net: &[String],
    command: &str,
) -> Result<Option<(NetAccess, Option<Questions>)>, String> {
    let mut rules = config.cloned().unwrap_or_default();
    let items: Vec<&str> = allow_net.iter().map(String::as_str).collect();
    rules.extend(NetRuleSet::parse(&items, &[]).map_err(|e| e.to_string())?);
    if rules.is_empty() {
        return Ok(None);
    }
    let policy = resolve(root, &rules);
    if !policy.grants_any(command) {
        return Ok(None);
    }
    let (asker, questions) = if rules.ask.is_empty() {
        (None, None)
    } else {
        let (tx, rx) = mpsc::channel();
        (Some(tx), Some(rx))
    };
    let gate = RunGate {
        policy,
        command: command.to_string(),
        session: (root.to_path_buf(), session.to_string()),
        approved: Mutex::new(HashSet::new()),
        asker,
    };
    Ok(Some((NetAccess::new(Arc::new(gate)), questions)))
}

/// `rules` resolved for the workspace `root`: each preset's hosts read from the toolchains'
/// configuration there.
pub(crate) fn resolve(root: &Path, rules: &NetRuleSet) -> airlock_policy::net::NetPolicy {
    let sources = preset_sources(root);
    rules.resolve(|p| resolve_preset(p, &sources))
}

/// The result fields of a granted run: `hosts_contacted`, `hosts_refused` and, when something
/// was refused, a note saying so and how to grant it.
pub(crate) fn report_into(out: &mut serde_json::Value, report: &airlock_sandbox::net::NetReport) {
    out["hosts_contacted"] = serde_json::json!(report.hosts_contacted);
    out["hosts_refused"] = serde_json::to_value(&report.hosts_refused).unwrap_or_default();
    if let Some(first) = report.hosts_refused.first() {
        let more = report.hosts_refused.len() - 1;
        let tail = if more > 0 {
            format!(" ({more} more in hosts_refused)")
        } else {
            String::new()
        };
        let note = format!("{} [rule {}]{tail}", first.reason, first.rule);
        match out.get("note").and_then(|n| n.as_str()) {
            Some(n) => out["note"] = serde_json::json!(format!("{n} {note}")),
            None => out["note"] = serde_json::json!(note),
        }
    }
}

/// The workspace's persistent cargo package cache, outside the workspace and outside the
/// changeset: `<home>/.cache/airlock/cargo-home/<workspace name>-<hash>`. Only for a workspace
/// with a `Cargo.toml` at its root, and only when `$HOME` is known. (Outside the workspace:
/// every run masks `.airlock/`, and a bind at the same path keeps `verify` unchanged.)
///
/// It is the exec domain's: a run granted network sees it read-write as `CARGO_HOME`, so
/// `cargo fetch` fills it; the workspace's later commands see it read-only as `CARGO_HOME`, once
/// it exists, so they build offline against what was fetched. `verify` never binds it: it reads
/// the verify domain's cargo home, which the host fills with the archives of this one that match
/// the lockfile's checksums ([`crate::cargo_home::seal`]).
pub(crate) fn cargo_cache(home: Option<&Path>, root: &Path) -> Option<PathBuf> {
    if !root.join("Cargo.toml").is_file() {
        return None;
    }
    let home = home.filter(|h| h.is_absolute())?;
    // FNV-1a of the workspace path: stable across builds, enough to tell workspaces apart.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in root.as_os_str().as_encoded_bytes() {
        hash = (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    let name: String = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(40)
        .collect();
    Some(
        home.join(".cache/airlock/cargo-home")
            .join(format!("{name}-{hash:016x}")),
    )
}

/// Exposes the workspace's cargo cache to `spec`: read-write when `granted` (made if missing),
/// else read-only when it exists. Returns whether it was exposed.
pub(crate) fn expose_cargo_cache(
    spec: &mut airlock_sandbox::SandboxSpec,
    home: Option<&Path>,
    root: &Path,
    granted: bool,
) -> bool {
    let Some(cache) = cargo_cache(home, root) else {
        return false;
    };
    if granted {
        if let Err(e) = std::fs::create_dir_all(&cache) {
            tracing::warn!("cannot make the cargo cache {}: {e}", cache.display());
            return false;
        }
        spec.rw_binds.push(cache.clone());
    } else if cache.is_dir() {
        spec.ro_binds.push(cache.clone());
    } else {
        return false;
    }
    spec.env.push(("CARGO_HOME".into(), cache.into_os_string()));
    true
}
