//! The changeset's life cycle: status, diff, discard, verify (bound to the changeset's hash),
//! apply (only a `VerifiedChangeset`, all-or-nothing, journaled), undo, journal and recover.

use super::shell::{home_binds, prepare_session_run};
use super::{failure, success};
use crate::api::{Approval, ApprovalRequest, CallContext};
use crate::chain::Prepared;
use crate::kernel::Kernel;
use airlock_policy::{Decision, Stage};
use airlock_stage::apply::{ApplyContext, ApplyError, apply_verified};
use airlock_stage::journal::Journal;
use airlock_stage::undo::{UndoError, undo_last};
use airlock_stage::{VerdictRecord, diff as sdiff};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

/// Exit code: verification did not pass / not verified.
pub(crate) const EXIT_NOT_VERIFIED: i32 = 4;
/// Exit code: conflict.
pub(crate) const EXIT_CONFLICT: i32 = 5;

pub(crate) fn status(k: &Kernel) -> crate::CallOutcome {
    let snap = match k.store.snapshot() {
        Ok(s) => s,
        Err(e) => return failure(e.to_string(), 1),
    };
    let entries: Vec<Value> = sdiff::status(&snap)
        .into_iter()
        .map(|(code, path)| {
            let e = snap.entries.iter().find(|e| e.path == path);
            let mut v = json!({ "status": code.to_string(), "path": path.display() });
            if e.map(|e| e.session_local).unwrap_or(false) {
                v["session_local"] = json!(true);
            }
            if let Some(flag) = e.and_then(|e| e.flagged.clone()) {
                v["flagged"] = json!(flag);
            }
            v
        })
        .collect();
    let mut text = String::new();
    for e in &entries {
        text.push_str(&format!(
            "{} {}",
            e["status"].as_str().unwrap_or("?"),
            e["path"].as_str().unwrap_or("")
        ));
        if e.get("session_local").is_some() {
            text.push_str("  (session-local, never applied)");
        }
        if let Some(f) = e.get("flagged").and_then(Value::as_str) {
            text.push_str(&format!("  (flagged: {f})"));
        }
        text.push('\n');
    }
    success(
        json!({ "changeset": snap.hash.to_hex(), "entries": entries, "text": text }),
        false,
    )
}

pub(crate) fn diff(k: &Kernel, p: &Prepared<'_>) -> crate::CallOutcome {
    let snap = match k.store.snapshot() {
        Ok(s) => s,
        Err(e) => return failure(e.to_string(), 1),
    };
    let filter: Vec<_> = p.rels.iter().flatten().cloned().collect();
    match sdiff::unified_diff(&k.store, &snap, &filter) {
        Ok(text) => {
            let (shown, cut) = crate::output::cut(&text, 256 * 1024);
            let mut body = shown.to_string();
            if cut > 0 {
                body.push_str(&format!("\n[… {cut} more bytes of diff not shown; pass `paths` to see one file at a time]\n"));
            }
            success(json!(body), cut > 0)
        }
        Err(e) => failure(e.to_string(), 1),
    }
}

pub(crate) fn discard(k: &Kernel) -> crate::CallOutcome {
    match k.store.discard() {
        Ok(n) => success(json!(format!("Discarded {n} staged change(s).")), false),
        Err(e) => failure(e.to_string(), 1),
    }
}

pub(crate) fn verify(k: &Kernel, p: &Prepared<'_>, ctx: &CallContext<'_>) -> crate::CallOutcome {
    let _serial = match k.session_run() {
        Ok(g) => g,
        Err(e) => return failure(e, 1),
    };
    let (dirs, snapshot) = match prepare_session_run(k) {
        Ok(x) => x,
        Err(e) => return failure(e, 1),
    };
    let timeout = p
        .args
        .get("timeout_secs")
        .and_then(Value::as_u64)
        .unwrap_or(300);
    let runner = match p.args.get("runner").and_then(Value::as_str) {
        None | Some("auto") => None,
        Some(name) => match airlock_verify::RunnerKind::from_name(name) {
            Some(r) => Some(r),
            None => {
                return failure(
                    format!(
                        "Unknown runner `{name}`; use auto, node, vitest, jest, cargo, pytest, go or command."
                    ),
                    2,
                );
            }
        },
    };
    let command = ctx.operator.verify_command.clone().or_else(|| {
        p.args.get("command").and_then(Value::as_array).map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
    });
    let opts = airlock_verify::VerifyOptions {
        timeout: Duration::from_secs(timeout),
        runner,
        command,
        baseline: p
            .args
            .get("baseline")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        home_binds: home_binds(),
        cancel: Some(ctx.cancel.flag()),
        allow_degraded: k.config.allow_degraded,
        memory: ctx.operator.memory_bytes,
        cpu_secs: ctx.operator.cpu_secs,
        disk: ctx.operator.disk_bytes,
        ..airlock_verify::VerifyOptions::default()
    };
    let scratch = dirs
        .upper
        .parent()
        .unwrap_or(Path::new("/tmp"))
        .join("verify");
    let _ = std::fs::create_dir_all(&scratch);
    let cache = k.root.join(".airlock").join("baseline");
    let input = airlock_verify::VerifyInput {
        workspace: &k.root,
        layers: vec![dirs.layer.clone()],
        changeset_hash: snapshot.hash.to_hex(),
        scratch_dir: &scratch,
        baseline_cache: Some((&cache, base_key(&snapshot))),
    };
    let report = match airlock_verify::run_verification(&input, &opts) {
        Ok(r) => r,
        Err(e) => return failure(format!("Verification could not run: {e}"), 1),
    };
    let detail = serde_json::to_value(&report).unwrap_or(Value::Null);
    let verdict = detail["verdict"].as_str().unwrap_or("error").to_string();
    let record = VerdictRecord {
        changeset: snapshot.hash,
        verdict: verdict.clone(),
        detail: detail.clone(),
    };
    if let Err(e) = k.store.record_verdict(&record) {
        return failure(format!("The verdict could not be stored: {e}"), 1);
    }
    let passed = verdict == "passed";
    crate::CallOutcome {
        ok: passed,
        output: detail,
        truncated: false,
        denial: None,
        exit_code: if passed { 0 } else { EXIT_NOT_VERIFIED },
    }
}

/// The baseline cache key: the fingerprints every staged path was staged against.
fn base_key(snapshot: &airlock_stage::ChangesetSnapshot) -> String {
    let bases: Vec<_> = snapshot
        .entries
        .iter()
        .map(|e| (e.path.display(), &e.base))
        .collect();
    let bytes = serde_json::to_vec(&bases).unwrap_or_default();
    airlock_stage::ContentHash::of(&bytes).to_hex()
}

fn open_journal(k: &Kernel) -> Result<Journal, crate::CallOutcome> {
    Journal::open(&k.root)
        .map(|(j, _)| j)
        .map_err(|e| failure(format!("The journal cannot be opened: {e}"), 1))
}

pub(crate) fn apply(k: &Kernel, _ctx: &CallContext<'_>) -> crate::CallOutcome {
    let _serial = match k.session_run() {
        Ok(g) => g,
        Err(e) => return failure(e, 1),
    };
    let verified = match k.store.verified() {
        Ok(v) => v,
        Err(e) => return failure(format!("Nothing was applied: {e}"), EXIT_NOT_VERIFIED),
    };
    // Re-confine every target through the jail at apply time.
    for e in &verified.snapshot().entries {
        if e.session_local {
            continue;
        }
        if let Some(flag) = &e.flagged {
            let d = Decision::deny(
                Stage::Jail,
                "jail_flagged_entry",
                format!("`{}` cannot be applied: {flag}; discard or fix it.", e.path),
            );
            return denial(d);
        }
        if let Err(d) = k
            .jail
            .confine_rel(&e.path, airlock_policy::jail::Access::Write)
        {
            return denial(d);
        }
    }
    let journal = match open_journal(k) {
        Ok(j) => j,
        Err(o) => return o,
    };
    let ctx = ApplyContext::new(k.session(), turn_id());
    match apply_verified(&k.root, &verified, k.store.blobs(), &journal, &ctx) {
        Ok(report) => {
            // Each call is a turn of its own: the committed apply is durable work, never redone.
            let _ = journal.finish_turn(&ctx.session, ctx.turn);
            if let Err(e) = k.store.clear_applied(&verified.snapshot().hash) {
                return failure(
                    format!("Applied, but the staged entries could not be cleared: {e}"),
                    1,
                );
            }
            success(serde_json::to_value(&report).unwrap_or(Value::Null), false)
        }
        Err(e @ ApplyError::Conflict(_)) => {
            failure(format!("Nothing was applied: {e}"), EXIT_CONFLICT)
        }
        Err(e) => failure(format!("Nothing was applied: {e}"), 1),
    }
}

fn denial(d: Decision) -> crate::CallOutcome {
    crate::CallOutcome {
        ok: false,
        output: d.to_json(),
        truncated: false,
        exit_code: 3,
        denial: Some(d),
    }
}

/// The agent turn an effect belongs to: `AIRLOCK_TURN` when the front end sets it, otherwise
/// the current time in milliseconds (unique per call).
fn turn_id() -> u64 {
    std::env::var("AIRLOCK_TURN")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            t.as_millis() as u64
        })
}

pub(crate) fn undo(k: &Kernel) -> crate::CallOutcome {
    let _serial = match k.session_run() {
        Ok(g) => g,
        Err(e) => return failure(e, 1),
    };
    let journal = match open_journal(k) {
        Ok(j) => j,
        Err(o) => return o,
    };
    let ctx = ApplyContext::new(k.session(), turn_id());
    match undo_last(&k.root, &journal, &ctx) {
        Ok(report) => {
            let _ = journal.finish_turn(&ctx.session, ctx.turn);
            success(serde_json::to_value(&report).unwrap_or(Value::Null), false)
        }
        Err(e @ UndoError::Conflict(_)) => {
            failure(format!("Nothing was undone: {e}"), EXIT_CONFLICT)
        }
        Err(e) => failure(format!("Nothing was undone: {e}"), 1),
    }
}

pub(crate) fn journal(k: &Kernel) -> crate::CallOutcome {
    let journal = match open_journal(k) {
        Ok(j) => j,
        Err(o) => return o,
    };
    match journal.records() {
        Ok(records) => success(serde_json::to_value(&records).unwrap_or(Value::Null), false),
        Err(e) => failure(e.to_string(), 1),
    }
}

pub(crate) fn recover(k: &Kernel) -> crate::CallOutcome {
    let _serial = match k.session_run() {
        Ok(g) => g,
        Err(e) => return failure(e, 1),
    };
    let journal = match open_journal(k) {
        Ok(j) => j,
        Err(o) => return o,
    };
    match airlock_stage::recover::recover(&k.root, &journal) {
        Ok(outcomes) => {
            // Records this process already resolved at start-up come first, then any new ones.
            let mut all: Vec<Value> = k.startup_outcomes.clone();
            all.extend(
                outcomes
                    .iter()
                    .map(|o| serde_json::to_value(o).unwrap_or(Value::Null)),
            );
            let attention = all.iter().any(|v| v["outcome"] == "needs_attention");
            crate::CallOutcome {
                ok: !attention,
                output: Value::Array(all),
                truncated: false,
                denial: None,
                exit_code: if attention { 1 } else { 0 },
            }
        }
        Err(e) => failure(e.to_string(), 1),
    }
}

/// What start-up recovery did: notices for the operator, and the per-record outcomes that the
/// `recover` tool reports (so a crash resolved at start-up is still reported by `recover`).
pub(crate) struct StartupRecovery {
    pub(crate) notices: Vec<String>,
    pub(crate) outcomes: Vec<Value>,
}

/// At start-up: resolve interrupted applies before anything else runs.
pub(crate) fn recover_at_startup(root: &Path) -> StartupRecovery {
    let mut out = StartupRecovery {
        notices: Vec::new(),
        outcomes: Vec::new(),
    };
    if !root.join(".airlock").join("journal.db").exists() {
        return out;
    }
    let (journal, notices) = match Journal::open(root) {
        Ok(x) => x,
        Err(e) => {
            out.notices
                .push(format!("the journal cannot be opened: {e}"));
            return out;
        }
    };
    match airlock_stage::recover::recover(root, &journal) {
        Ok(outcomes) => {
            // The journal's own "run `airlock recover`" advice is moot: it just ran.
            out.notices.extend(
                notices
                    .into_iter()
                    .filter(|n| !n.contains("run `airlock recover`")),
            );
            for o in outcomes {
                let v = serde_json::to_value(&o).unwrap_or(Value::Null);
                out.notices.push(format!(
                    "recovered an interrupted operation at start-up: {v}"
                ));
                out.outcomes.push(v);
            }
        }
        Err(e) => {
            out.notices.extend(notices);
            out.notices
                .push(format!("recovery at start-up failed: {e}"));
        }
    }
    out
}

pub(crate) fn ask_user(p: &Prepared<'_>, ctx: &CallContext<'_>) -> crate::CallOutcome {
    let question = p.args.get("question").and_then(Value::as_str).unwrap_or("");
    let req = ApprovalRequest {
        tool: "ask_user".into(),
        summary: question.to_string(),
        decision: Decision::ask(
            Stage::Permission,
            "ask_user",
            "The agent asks the operator a question.",
        ),
    };
    match ctx.approver.approve(&req) {
        Approval::Once | Approval::Session => success(json!("The operator answered: yes."), false),
        Approval::Deny(why) => success(json!(format!("The operator answered: no ({why}).")), false),
    }
}
