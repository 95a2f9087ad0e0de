//! The changeset's life cycle: status, diff, discard, verify (bound to the changeset's hash),
//! apply (only a `VerifiedChangeset`, all-or-nothing, journaled), undo, journal and recover.

use super::shell::run_exposure;
use super::{failure, success};
use crate::api::{Approval, ApprovalRequest, CallContext};
use crate::chain::Prepared;
use crate::kernel::Kernel;
use crate::session::prepare_session_run;
use airlock_policy::host_exec::{self, HostExecGrant};
use airlock_policy::{Decision, Stage};
use airlock_stage::apply::{ApplyContext, ApplyError, apply_verified};
use airlock_stage::journal::Journal;
use airlock_stage::undo::{UndoError, undo_last};
use airlock_stage::{VerdictRecord, VerdictSource, diff as sdiff};
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
    airlock_sandbox::timing::mark("status: snapshot");
    // One pass over the sorted entries: each line comes from its own entry (linear in the
    // number of staged paths; no lookup per line).
    let mut entries: Vec<Value> = Vec::with_capacity(snap.entries.len());
    let mut text = String::new();
    for e in &snap.entries {
        let code = sdiff::status_letter(e);
        let path = e.path.display();
        text.push(code);
        text.push(' ');
        text.push_str(&path);
        let mut v = json!({ "status": code.to_string(), "path": path });
        if e.session_local {
            v["session_local"] = json!(true);
            text.push_str("  (session-local, never applied)");
        }
        if let Some(flag) = &e.flagged {
            text.push_str(&format!("  (flagged: {flag})"));
            v["flagged"] = json!(flag);
        }
        text.push('\n');
        entries.push(v);
    }
    airlock_sandbox::timing::mark("status: lines");
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
        Ok(n) => {
            let freed = collect_blobs(k);
            success(
                json!(format!("Discarded {n} staged change(s).{freed}")),
                false,
            )
        }
        Err(e) => failure(e.to_string(), 1),
    }
}

/// How long `discard` spends removing blobs; the rest waits for the next collection.
const DISCARD_GC_BUDGET: Duration = Duration::from_secs(2);

/// Reclaims the blobs nothing names any more (after a discard), within a time budget; best
/// effort: a collection that cannot run now, or runs out of time, leaves its garbage for the
/// next one. Returns a sentence for the result (empty when nothing was freed).
pub(crate) fn collect_blobs(k: &Kernel) -> String {
    match airlock_stage::gc::collect_within(&k.root, Some(DISCARD_GC_BUDGET)) {
        Ok(r) if r.removed > 0 || r.unfinished => {
            let mut said = format!(
                " Freed {} stored blob(s) ({} bytes).",
                r.removed, r.removed_bytes
            );
            if r.unfinished {
                said.push_str(" More are left for the next collection (`airlock gc`).");
            }
            said
        }
        Ok(r) => {
            if let Some(why) = r.skipped {
                tracing::info!("blob collection skipped: {why}");
            }
            String::new()
        }
        Err(e) => {
            tracing::warn!("{e}");
            String::new()
        }
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
    let exposure = run_exposure(k, &dirs, &snapshot);
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
    let (command, mut source) = verify_command(k, p, ctx);
    if source.unlocks_apply()
        && source != VerdictSource::OperatorCli
        && runner_overrides_project(k, p, ctx, &dirs.layer)
    {
        source = VerdictSource::Agent;
    }
    let opts = airlock_verify::VerifyOptions {
        timeout: Duration::from_secs(timeout),
        runner,
        command,
        baseline: p
            .args
            .get("baseline")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        home_binds: exposure.home_binds,
        masked: exposure.masked,
        cancel: Some(ctx.cancel.flag()),
        allow_degraded: k.config.allow_degraded,
        memory: ctx.operator.memory_bytes,
        cpu_secs: ctx.operator.cpu_secs,
        disk: ctx.operator.disk_bytes,
        host_env: k.config.settings.env.clone(),
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
        // The harness keys the base by the whole base tree, argv, environment and toolchain.
        baseline_cache: Some((&cache, String::new())),
    };
    let report = match airlock_verify::run_verification(&input, &opts) {
        Ok(r) => r,
        Err(e) => return failure(format!("Verification could not run: {e}"), 1),
    };
    let verdict = report.verdict.to_string();
    let mut detail = serde_json::to_value(&report).unwrap_or(Value::Null);
    // The verdict says which command ran and where it came from.
    if let Some(obj) = detail.as_object_mut() {
        let argv = obj.remove("argv").unwrap_or_else(|| json!([]));
        obj.insert(
            "command".into(),
            json!({ "argv": argv, "source": source.as_str() }),
        );
        if !source.unlocks_apply() {
            obj.insert("advisory".into(), json!(true));
            if let Some(d) = obj.get_mut("diagnostics")
                && let Some(text) = d.as_str()
            {
                *d = json!(format!(
                    "advisory: the agent chose this command, so this verdict cannot unlock apply \
                     (`airlock verify` runs the project's own).\n{text}"
                ));
            }
        }
    }
    let record = VerdictRecord {
        changeset: snapshot.hash,
        verdict: verdict.clone(),
        source,
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

/// The command a verification runs and where it came from. The operator's command line wins;
/// then a command the agent passed (advisory unless an operator rule vouched for exactly that
/// command); then the operator's configured command; else the runner detected from the project.
fn verify_command(
    k: &Kernel,
    p: &Prepared<'_>,
    ctx: &CallContext<'_>,
) -> (Option<Vec<String>>, VerdictSource) {
    if let Some(cmd) = &ctx.operator.verify_command {
        return (Some(cmd.clone()), VerdictSource::OperatorCli);
    }
    let agent = p.args.get("command").and_then(Value::as_array).map(|a| {
        a.iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect::<Vec<_>>()
    });
    if let Some(cmd) = agent {
        let source = if p.vouched.is_some() {
            VerdictSource::OperatorRule
        } else {
            VerdictSource::Agent
        };
        return (Some(cmd), source);
    }
    match &k.verify_command {
        Some(cmd) => (Some(cmd.clone()), VerdictSource::OperatorConfig),
        None => (None, VerdictSource::Detected),
    }
}

/// A runner the agent forced (not `auto`, not the operator's `--runner`) that is not the one the
/// project declares makes the verdict the agent's: another runner runs other tests.
fn runner_overrides_project(
    k: &Kernel,
    p: &Prepared<'_>,
    ctx: &CallContext<'_>,
    layer: &Path,
) -> bool {
    let chosen = match p.args.get("runner").and_then(Value::as_str) {
        None | Some("auto") => return false,
        Some(r) => r,
    };
    if ctx.operator.verify_runner.as_deref() == Some(chosen) {
        return false;
    }
    let src = airlock_verify::DirSource::layered(&k.root, &[layer.to_path_buf()]);
    airlock_verify::detect(&src).map(|d| d.name()) != Some(chosen)
}

fn open_journal(k: &Kernel) -> Result<Journal, crate::CallOutcome> {
    Journal::open(&k.root)
        .map(|(j, _)| j)
        .map_err(|e| failure(format!("The journal cannot be opened: {e}"), 1))
}

pub(crate) fn apply(k: &Kernel, call: &CallContext<'_>) -> crate::CallOutcome {
    let _serial = match k.session_run() {
        Ok(g) => g,
        Err(e) => return failure(e, 1),
    };
    let verified = match k.store.verified() {
        Ok(v) => v,
        Err(e) => return failure(format!("Nothing was applied: {e}"), EXIT_NOT_VERIFIED),
    };
    airlock_sandbox::timing::mark("verified changeset loaded");
    // Only the operator's own front end fills this; nothing the model sends reaches it.
    let grant = HostExecGrant::new(&call.operator.allow_host_exec);
    // Host-exec paths first: every one is named, and nothing is written.
    // Judged by name, and below directories git takes for repositories by their shape, on
    // disk now or once the changeset is applied.
    let changes: std::collections::HashMap<std::path::PathBuf, &airlock_stage::Change> = verified
        .snapshot()
        .entries
        .iter()
        .filter(|e| !e.session_local)
        .map(|e| (e.path.as_path().to_path_buf(), &e.change))
        .collect();
    let unchanged = std::collections::HashMap::new();
    let mut shapes = crate::host_shape::ShapeJudge::new(
        &k.root,
        |p: &Path| crate::host_shape::post_apply_node(&k.root, &unchanged, p),
        |p: &Path| crate::host_shape::post_apply_node(&k.root, &changes, p),
    );
    let mut refused = Vec::new();
    for e in &verified.snapshot().entries {
        if e.session_local || grant.allows(&e.path) {
            continue;
        }
        // A directory entry over an existing directory (an overlay copy-up) changes nothing.
        let no_op = matches!(e.change, airlock_stage::Change::Dir { .. })
            && e.base == airlock_stage::Fingerprint::Dir;
        if no_op {
            continue;
        }
        if let Some((h, anchor)) = shapes.classify(&e.path) {
            refused.push((e.path.clone(), h, anchor));
        }
    }
    if let Some(reason) = host_exec::apply_refusal_of(&refused) {
        return host_exec_refusal(reason);
    }
    airlock_sandbox::timing::mark("host-exec paths judged");
    // Re-confine every target through the jail at apply time.
    for e in &verified.snapshot().entries {
        if e.session_local {
            continue;
        }
        if let Some(flag) = &e.flagged
            && !(grant.allows(&e.path) && host_exec::is_host_exec_flag(&e.path, flag))
        {
            let d = Decision::deny(
                Stage::Jail,
                "jail_flagged_entry",
                format!("`{}` cannot be applied: {flag}; discard or fix it.", e.path),
            );
            return denial(d);
        }
        let no_op = matches!(e.change, airlock_stage::Change::Dir { .. })
            && e.base == airlock_stage::Fingerprint::Dir;
        // A copy-up of an existing host-exec directory is confined as if granted: it writes
        // nothing, and the stage's apply skips it.
        let for_entry = if no_op {
            HostExecGrant::from_paths(vec![e.path.clone()])
        } else {
            grant.clone()
        };
        if let Err(d) =
            k.jail
                .confine_rel_granted(&e.path, airlock_policy::jail::Access::Write, &for_entry)
        {
            return denial(d);
        }
    }
    let journal = match open_journal(k) {
        Ok(j) => j,
        Err(o) => return o,
    };
    let ctx = ApplyContext {
        host_exec: grant,
        ..ApplyContext::new(k.session(), turn_id(k))
    };
    // The blobs of the snapshot are read during the apply: no collection meanwhile.
    let pin = match k.store.blobs().pin() {
        Ok(p) => p,
        Err(e) => return failure(format!("Nothing was applied: the blob store: {e}"), 1),
    };
    let applied = apply_verified(&k.root, &verified, k.store.blobs(), &journal, &ctx);
    drop(pin);
    match applied {
        Ok(report) => {
            // Each call is a turn of its own: the committed apply is durable work, never redone.
            let _ = journal.finish_turn(&ctx.session, ctx.turn);
            if let Err(e) = k.store.clear_applied(&verified.snapshot().hash) {
                return failure(
                    format!("Applied, but the staged entries could not be cleared: {e}"),
                    1,
                );
            }
            // The applied contents are on disk now (and undo reads its backups, not blobs):
            // their blobs go unless another session names them. Only this changeset's blobs
            // are looked at, so the cost follows the apply's size.
            let applied = airlock_stage::gc::blobs_of(&verified.snapshot().entries);
            if let Err(e) = airlock_stage::gc::collect_some(&k.root, &applied) {
                tracing::warn!("{e}");
            }
            success(serde_json::to_value(&report).unwrap_or(Value::Null), false)
        }
        Err(e @ ApplyError::Conflict(_)) => {
            failure(format!("Nothing was applied: {e}"), EXIT_CONFLICT)
        }
        // A refusal is not an internal error: the changeset is not applicable as it stands.
        Err(e @ ApplyError::Refused { .. }) => {
            failure(format!("Nothing was applied: {e}"), EXIT_NOT_VERIFIED)
        }
        Err(e) => failure(format!("Nothing was applied: {e}"), 1),
    }
}

/// `apply` refused because the changeset touches host-exec paths the operator did not name:
/// exit 4, the decision (stage `jail`, rule `jail_host_exec`) with one sentence per path.
fn host_exec_refusal(reason: String) -> crate::CallOutcome {
    let d = Decision::deny(Stage::Jail, host_exec::RULE, reason);
    crate::CallOutcome {
        ok: false,
        output: d.to_json(),
        truncated: false,
        exit_code: EXIT_NOT_VERIFIED,
        denial: Some(d),
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
fn turn_id(k: &Kernel) -> u64 {
    k.config.settings.turn.unwrap_or_else(|| {
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
    let ctx = ApplyContext::new(k.session(), turn_id(k));
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
            // Temp files of interrupted applies anywhere in the workspace (also those whose
            // record was resolved earlier, or whose journal was lost).
            match airlock_stage::recover::sweep_temps(&k.root, &journal) {
                Ok(cleaned) => all.extend(
                    cleaned
                        .iter()
                        .map(|o| serde_json::to_value(o).unwrap_or(Value::Null)),
                ),
                Err(e) => return failure(e.to_string(), 1),
            }
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
