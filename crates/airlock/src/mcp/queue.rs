//! The approval queue: how a gated call reaches the operator when the MCP client cannot ask
//! (no elicitation, or a headless run). The call waits, bounded ([`queue_timeout`], default
//! 120 s), while its question sits as a file in the session's state directory
//! (`.airlock/approvals/<session>/<id>.json`); `airlock approvals` lists the questions and
//! `airlock approvals once|session|deny ID` answers one from another terminal (the answer is
//! written beside it atomically as `<id>.answer`). Unanswered, the call is denied with a reason
//! that says the wait for the operator timed out. Answers are read only for the question they
//! name; anything but `once`, `session` or `deny` is a denial. Where `notify-send` exists, a
//! desktop notification names the question and the command that answers it.

use airlock_kernel::{Approval, ApprovalRequest, Cancel};
use airlock_types::display::{Escape, Shown, escape_for_terminal};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long a queued question waits for the operator by default.
pub const DEFAULT_QUEUE_TIMEOUT: Duration = Duration::from_secs(120);

/// The queue timeout in force (`AIRLOCK_APPROVAL_QUEUE_SECS`; `0` turns the queue off, so such
/// calls are denied at once).
pub fn queue_timeout() -> Duration {
    std::env::var("AIRLOCK_APPROVAL_QUEUE_SECS")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_QUEUE_TIMEOUT)
}

/// One queued question, as `airlock approvals --json` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// The question's id (what `airlock approvals once|session|deny` names).
    pub id: String,
    /// The tool that waits.
    pub tool: String,
    /// What the call would do.
    pub summary: String,
    /// The stage that asked.
    pub stage: String,
    /// The rule that asked.
    pub rule: String,
    /// Why it needs approval.
    pub reason: String,
    /// When the question was queued (Unix ms).
    pub created_ms: u64,
    /// When the call stops waiting (Unix ms).
    pub expires_ms: u64,
}

impl Pending {
    /// As JSON (the question file, and `airlock approvals --json`).
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id, "tool": self.tool, "summary": self.summary, "stage": self.stage,
            "rule": self.rule, "reason": self.reason, "created_ms": self.created_ms,
            "expires_ms": self.expires_ms,
        })
    }

    /// From a question file's JSON; `None` if it is not one.
    pub fn from_json(v: &Value) -> Option<Pending> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        Some(Pending {
            id: s("id")?,
            tool: s("tool")?,
            summary: s("summary")?,
            stage: s("stage")?,
            rule: s("rule")?,
            reason: s("reason")?,
            created_ms: v.get("created_ms")?.as_u64()?,
            expires_ms: v.get("expires_ms")?.as_u64()?,
        })
    }
}

/// The queue directory of one session.
pub fn dir(workspace: &Path, session: &str) -> PathBuf {
    workspace.join(".airlock").join("approvals").join(session)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut tmp, bytes)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Put `req` to the operator through the queue and wait for the answer, at most `timeout`;
/// `why_queue` says why the client could not ask (part of a timeout's reason).
pub fn ask(
    workspace: &Path,
    session: &str,
    req: &ApprovalRequest,
    timeout: Duration,
    cancel: &Cancel,
    why_queue: &str,
) -> Approval {
    if timeout.is_zero() {
        return Approval::Deny(format!(
            "it needs the operator's approval, but {why_queue}, and the approval queue is off \
             (AIRLOCK_APPROVAL_QUEUE_SECS=0); ask the operator to allow it"
        ));
    }
    static SEQ: AtomicU64 = AtomicU64::new(1);
    let id = format!(
        "{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let dir = dir(workspace, session);
    let question = dir.join(format!("{id}.json"));
    let answer = dir.join(format!("{id}.answer"));
    let created = now_ms();
    let pending = Pending {
        id: id.clone(),
        tool: req.tool.clone(),
        summary: req.summary.clone(),
        stage: req.decision.stage.as_str().to_string(),
        rule: req.decision.rule.to_string(),
        reason: req.decision.reason.clone(),
        created_ms: created,
        expires_ms: created + timeout.as_millis() as u64,
    };
    let queued = std::fs::create_dir_all(&dir)
        .and_then(|_| write_atomic(&question, pending.to_json().to_string().as_bytes()));
    if let Err(e) = queued {
        return Approval::Deny(format!(
            "it needs the operator's approval, but {why_queue}, and the approval queue could \
             not be written ({e})"
        ));
    }
    tracing::warn!(
        "approval needed for `{}` ({}): answer with `airlock approvals once|session|deny {id}`",
        Shown::name(&req.tool),
        Shown::name(&req.summary)
    );
    notify(&format!(
        "`{}`: {}\nAnswer: airlock approvals once|session|deny {id}",
        Shown::name(&req.tool),
        Shown::name(&req.summary)
    ));
    let start = Instant::now();
    let result = loop {
        if let Ok(text) = std::fs::read_to_string(&answer) {
            break match text.trim() {
                "once" => Approval::Once,
                "session" => Approval::Session,
                "deny" => Approval::Deny("the operator denied it".into()),
                _ => Approval::Deny(
                    "the operator's answer was not one of once, session or deny".into(),
                ),
            };
        }
        if cancel.is_cancelled() {
            break Approval::Deny("the call was cancelled while awaiting approval".into());
        }
        if start.elapsed() >= timeout {
            break Approval::Deny(format!(
                "waiting for the operator timed out after {} s ({why_queue}; the question \
                 waited in airlock's approval queue, answered with `airlock approvals`)",
                timeout.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = std::fs::remove_file(&question);
    let _ = std::fs::remove_file(&answer);
    result
}

/// A desktop notification where one can be shown (`notify-send` on the PATH); best effort,
/// never waited on by the call.
fn notify(body: &str) {
    let child = std::process::Command::new("notify-send")
        .args(["--app-name=airlock", "airlock: approval needed", body])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Ok(mut child) = child {
        std::thread::spawn(move || {
            let _ = child.wait();
        });
    }
}

/// The questions waiting in a session's queue, oldest first (expired ones are removed).
pub fn list(workspace: &Path, session: &str) -> Vec<Pending> {
    let dir = dir(workspace, session);
    let mut out = Vec::new();
    let now = now_ms();
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let Some(p) = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .and_then(|v| Pending::from_json(&v))
        else {
            continue;
        };
        if p.expires_ms + 5_000 < now {
            // Its call stopped waiting (or its server died): nobody reads an answer any more.
            let _ = std::fs::remove_file(&path);
            let _ = std::fs::remove_file(path.with_extension("answer"));
            continue;
        }
        if path.with_extension("answer").exists() {
            continue;
        }
        out.push(p);
    }
    out.sort_by_key(|p| (p.created_ms, p.id.clone()));
    out
}

/// Answer question `id` with `once`, `session` or `deny`.
pub fn answer(workspace: &Path, session: &str, id: &str, decision: &str) -> Result<(), String> {
    if !matches!(decision, "once" | "session" | "deny") {
        return Err(format!("`{decision}`: answer once, session or deny"));
    }
    if !valid_id(id) || !list(workspace, session).iter().any(|p| p.id == id) {
        return Err(format!(
            "no question `{id}` is waiting in session `{session}` (see `airlock approvals`)"
        ));
    }
    let path = dir(workspace, session).join(format!("{id}.answer"));
    write_atomic(&path, decision.as_bytes()).map_err(|e| format!("{}: {e}", path.display()))
}

/// `airlock approvals` on the command line.
#[derive(clap::Args, Debug)]
pub struct ApprovalsArgs {
    /// `once`, `session` or `deny`, then the question's ID; nothing lists the waiting questions.
    #[arg(num_args = 0..=2, value_name = "ANSWER ID")]
    pub answer: Vec<String>,
}

/// Run `airlock approvals`; returns the exit code (0 done, 1 no such question, 2 usage).
pub fn command(args: &ApprovalsArgs, workspace: &Path, session: &str, json: bool) -> i32 {
    match args.answer.as_slice() {
        [] => {
            let pending = list(workspace, session);
            if json {
                let all: Vec<Value> = pending.iter().map(Pending::to_json).collect();
                let all = Value::Array(all).to_string();
                println!("{}", escape_for_terminal(&all, Escape::Json));
            } else if pending.is_empty() {
                println!("No question is waiting for the operator in session `{session}`.");
            } else {
                let now = now_ms();
                for p in pending {
                    println!(
                        "{}  {}: {}\n    why: {} ({}/{}); waits {} s more",
                        Shown::name(&p.id),
                        Shown::name(&p.tool),
                        Shown::name(&p.summary),
                        Shown::name(&p.reason),
                        Shown::name(&p.stage),
                        Shown::name(&p.rule),
                        p.expires_ms.saturating_sub(now) / 1000
                    );
                }
                println!("Answer with `airlock approvals once|session|deny ID`.");
            }
            0
        }
        [decision, id] => match answer(workspace, session, id, decision) {
            Ok(()) => {
                println!("Answered {}: {}.", Shown::name(id), Shown::name(decision));
                0
            }
            Err(e) => {
                eprintln!("airlock: approvals: {}", Shown::text(&e));
                if matches!(decision.as_str(), "once" | "session" | "deny") {
                    1
                } else {
                    2
                }
            }
        },
        _ => {
            eprintln!("airlock: approvals: give an answer (once, session or deny) and an ID");
            2
        }
    }
}
