//! The changeset's life cycle: status, diff, discard, verify (bound to the changeset's hash),
//! apply (only a `VerifiedChangeset`, all-or-nothing, journaled), undo, journal and recover.

use super::local_list;
use super::shell::run_exposure;
use super::{Call, Confined, ExecCtx, failure, success};
use crate::api::{Approval, ApprovalRequest, CallContext};
use crate::args::{DiffArgs, Int, VerifyArgs};
use crate::output::Status;
use crate::session::prepare_session_run;
use airlock_policy::host_exec::{self, HostExecGrant};
use airlock_policy::{Decision, Stage};
use airlock_stage::Flag;
use airlock_stage::apply::{ApplyContext, ApplyError, HostExecGate, apply_verified};
use airlock_stage::journal::Journal;
use airlock_stage::undo::{UndoError, undo_last};
use airlock_stage::{VerdictRecord, VerdictSource, diff as sdiff};
use airlock_types::display::Shown;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

pub(crate) fn status(k: &ExecCtx<'_>) -> crate::CallOutcome {
    let snap = match k.store.snapshot() {
        Ok(s) => s,
        Err(e) => return failure(e.to_string(), Status::Failed),
    };
    airlock_sandbox::timing::mark("status: snapshot");
    // One pass over the sorted entries: each line comes from its own entry (linear in the
    // number of staged paths; no lookup per line).
    let mut entries: Vec<Value> = Vec::with_capacity(snap.entries.len());
    let mut text = String::new();
    // Ignored build outputs (session-local: seen by later commands, never applied) are
    // listed by group (installed package or output directory) after the staged entries.
    let mut local = std::collections::BTreeMap::<String, u64>::new();
    for e in &snap.entries {
        if e.session_local {
            tally_session_local(&mut local, e);
            continue;
        }
        let code = sdiff::status_letter(e);
        // The text is for a terminal: the path escaped (`{}`); the JSON keeps it exact.
        let path = e.path.display();
        let _ = write!(text, "{code} {}", e.path);
        let mut v = json!({ "status": code.to_string(), "path": path });
        if let Some(flag) = &e.flagged {
            let shown = super::flag_text(flag);
            let _ = write!(text, "  (flagged: {})", Shown::name(&shown));
            v["flagged"] = json!(shown);
            v["flag"] = json!(flag.name());
        }
        text.push('\n');
        entries.push(v);
    }
    airlock_sandbox::timing::mark("status: lines");
    let mut out = json!({ "changeset": snap.hash.to_hex(), "entries": entries });
    let hooks = if local.is_empty() {
        Vec::new()
    } else {
        super::local_hooks::find(k.root, k.store, &snap)
    };
    if let Some(block) = local_list::text(&local, &hooks) {
        text.push_str(&block);
    }
    if let Some(v) = local_list::json(&local, &hooks) {
        out["session_local"] = v;
    }
    out["text"] = json!(text);
    success(out, false)
}

/// Counts a session-local entry under its group (directories themselves are not outputs).
fn tally_session_local(
    local: &mut std::collections::BTreeMap<String, u64>,
    e: &airlock_stage::StagedEntry,
) {
    if !matches!(e.change, airlock_stage::Change::Dir { .. }) {
        *local
            .entry(local_list::group_of(&e.path.display()))
            .or_default() += 1;
    }
}

pub(crate) fn diff(k: &ExecCtx<'_>, p: &Call<'_, DiffArgs>) -> crate::CallOutcome {
    let snap = match k.store.snapshot() {
        Ok(s) => s,
        Err(e) => return failure(e.to_string(), Status::Failed),
    };
    let filter: Vec<_> = p.paths.iter().filter_map(Confined::rel).cloned().collect();
    // Ignored build outputs are left out unless a path names them; one line says how many.
    let mut local = std::collections::BTreeMap::<String, u64>::new();
    let mut shown_snap = snap.clone();
    shown_snap.entries.retain(|e| {
        let named = filter.iter().any(|f| e.path.starts_with(f));
        if e.session_local && !named {
            if filter.is_empty() {
                tally_session_local(&mut local, e);
            }
            return false;
        }
        true
    });
    match sdiff::unified_diff(k.store, &shown_snap, &filter) {
        Ok(mut text) => {
            if let Some(block) = local_list::text(&local, &[]) {
                text.push_str(&block);
                text.push_str("(`diff PATH` shows one)\n");
            }
            let (shown, cut) = crate::output::cut(&text, 256 * 1024);
            let mut body = shown.to_string();
            if cut > 0 {
                body.push_str(&format!("\n[… {cut} more bytes of diff not shown; pass `paths` to see one file at a time]\n"));
            }
            success(json!(body), cut > 0)
        }
        Err(e) => failure(e.to_string(), Status::Failed),
    }
}

pub(crate) fn discard(k: &ExecCtx<'_>) -> crate::CallOutcome {
    match k.store.discard() {
        Ok(n) => {
            let freed = collect_blobs(k);
            success(
                json!(format!("Discarded {n} staged change(s).{freed}")),
                false,
            )
        }
        Err(e) => failure(e.to_string(), Status::Failed),
    }
}

/// How long `discard` spends removing blobs; the rest waits for the next collection.
const DISCARD_GC_BUDGET: Duration = Duration::from_secs(2);

/// Reclaims the blobs nothing names any more (after a discard), within a time budget; best
/// effort: a collection that cannot run now, or runs out of time, leaves its garbage for the
/// next one. Returns a sentence for the result (empty when nothing was freed).
pub(crate) fn collect_blobs(k: &ExecCtx<'_>) -> String {
    match airlock_stage::gc::collect_within(k.root, Some(DISCARD_GC_BUDGET)) {
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

pub(crate) fn verify(
    k: &ExecCtx<'_>,
    p: &Call<'_, VerifyArgs>,
    ctx: &CallContext<'_>,
) -> crate::CallOutcome {
    let _serial = match k.session_run() {
        Ok(g) => g,
        Err(e) => return failure(e, Status::Failed),
    };
    let (dirs, snapshot) = match prepare_session_run(&k.run_place()) {
        Ok(x) => x,
        Err(e) => return failure(e, Status::Failed),
    };
    let exposure = run_exposure(k, &dirs, &snapshot);
    let timeout = p.args.timeout_secs.map_or(300, Int::get);
    let runner = match p.args.runner.as_deref() {
        None | Some("auto") => None,
        Some(name) => match airlock_verify::RunnerKind::from_name(name) {
            Some(r) => Some(r),
            None => {
                return failure(
                    format!(
                        "Unknown runner `{name}`; use auto, node, vitest, jest, cargo, pytest, go or command."
                    ),
                    Status::Usage,
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
    // A run of selected tests says nothing about the others: advice, whoever chose it.
    if !p.args.only.is_empty() {
        source = VerdictSource::Partial;
    }
    let budget = p
        .args
        .budget
        .map(|b| usize::try_from(b.get()).unwrap_or(usize::MAX))
        .or(k.verify_budget)
        .unwrap_or(airlock_verify::sanitize::DEFAULT_BUDGET);
    // The verify caches: written by verification runs only, never by the agent's commands.
    let caches =
        match crate::cache::prepare(k.root, crate::cache::CacheDomain::Verify, &k.settings.env) {
            Ok(c) => c,
            Err(e) => {
                return failure(
                    format!("The workspace's caches could not be prepared: {e}"),
                    Status::Failed,
                );
            }
        };
    // The workspace's package cache, filled by a granted `cargo fetch`, is the exec domain's:
    // verify reads only what the host checked of it, copied into the verify domain.
    let mut cache_binds = caches.binds;
    let mut cargo_env = Vec::new();
    let mut sealed = None;
    if let Some(exec_home) = super::net::cargo_cache(k.settings.home.as_deref(), k.root)
        && exec_home.is_dir()
    {
        match seal_cargo_home(k.root, &dirs.layer, &exec_home) {
            Ok((bind, report)) => {
                let inside = bind.inside.to_string_lossy().into_owned();
                cargo_env.push(("CARGO_HOME".to_string(), inside));
                cache_binds.push(bind);
                sealed = Some(report);
            }
            Err(e) => {
                return failure(
                    format!("The workspace's cargo cache could not be checked: {e}"),
                    Status::Failed,
                );
            }
        }
    }
    // Session-local writes that change how code runs: concerns of this verdict.
    let hooks = super::local_hooks::find(k.root, k.store, &snapshot);
    let opts = airlock_verify::VerifyOptions {
        timeout: Duration::from_secs(timeout),
        runner,
        command,
        baseline: p.args.baseline,
        budget_bytes: budget,
        only: p.args.only.clone(),
        impacted: match p.args.impacted.as_deref() {
            Some("first") => airlock_verify::ImpactedMode::First,
            Some("only") => airlock_verify::ImpactedMode::Only,
            _ => airlock_verify::ImpactedMode::Off,
        },
        home_binds: exposure.home_binds,
        masked: exposure.masked,
        cancel: Some(ctx.cancel.flag()),
        allow_degraded: k.allow_degraded,
        memory: ctx.operator.memory_bytes,
        cpu_secs: ctx.operator.cpu_secs,
        disk: ctx.operator.disk_bytes,
        host_env: k.settings.env.clone(),
        env: caches
            .env
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })
            .chain(cargo_env)
            .collect(),
        cache_binds,
        ro_binds: caches.ro_binds,
        source,
        local_hooks: hooks
            .iter()
            .map(|h| (h.path.clone(), h.why.to_string()))
            .collect(),
    };
    let scratch = dirs
        .upper
        .parent()
        .unwrap_or(Path::new("/tmp"))
        .join("verify");
    let _ = std::fs::create_dir_all(&scratch);
    let cache = k.root.join(".airlock").join("baseline");
    let input = airlock_verify::VerifyInput {
        workspace: k.root,
        layers: vec![dirs.layer.clone()],
        changeset_hash: snapshot.hash.to_hex(),
        scratch_dir: &scratch,
        // The harness keys the base by the whole base tree, argv, environment and toolchain.
        baseline_cache: Some((&cache, String::new())),
    };
    let report = match airlock_verify::run_verification(&input, &opts) {
        Ok(r) => r,
        Err(e @ airlock_verify::VerifyError::Selection(_)) => {
            return failure(format!("Verification could not run: {e}"), Status::Usage);
        }
        Err(e) => return failure(format!("Verification could not run: {e}"), Status::Failed),
    };
    // Only the tests related to the change ran: advice, whoever chose the command.
    let impacted_only = report.scope == Some(airlock_verify::Scope::Impacted);
    if impacted_only {
        source = VerdictSource::Partial;
    }
    // The gate reads the typed verdict; the JSON below is only what the caller is shown.
    let verdict = report.verdict;
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
                let why = if impacted_only {
                    "only the tests related to the change ran (`impacted`), so this verdict \
                     cannot unlock apply (`airlock verify` runs the whole suite)"
                } else if source == VerdictSource::Partial {
                    "only the selected tests ran (`only`), so this verdict cannot unlock apply \
                     (`airlock verify` without `--only` runs the whole suite)"
                } else {
                    "the agent chose this command, so this verdict cannot unlock apply \
                     (`airlock verify` runs the project's own)"
                };
                *d = json!(format!("advisory: {why}.\n{text}"));
            }
        }
    }
    if let (Some(report), Some(obj)) = (&sealed, detail.as_object_mut()) {
        if report.sealed.mismatched > 0
            && let Some(d) = obj.get_mut("diagnostics")
            && let Some(text) = d.as_str()
        {
            *d = json!(format!(
                "note: {} archive(s) in the workspace's cargo cache did not match Cargo.lock \
                 and were left out.\n{text}",
                report.sealed.mismatched
            ));
        }
        obj.insert(
            "cargo_cache".into(),
            serde_json::to_value(report).unwrap_or(Value::Null),
        );
    }
    let attested = report.attestation();
    let seen_local = local_list::groups(snapshot.entries.iter());
    note_concerns(&mut detail, &report, &seen_local, &hooks, verdict);
    let record = VerdictRecord {
        changeset: snapshot.hash,
        verdict: attested.verdict(),
        source: attested.source(),
        detail: detail.clone(),
    };
    let stored = match verdict_key(k) {
        Ok(key) => k.store.record_sealed_verdict(&record, &attested.seal(&key)),
        Err(why) => {
            if let Some(obj) = detail.as_object_mut() {
                obj.insert("unsealed".into(), json!(why));
            }
            k.store.record_verdict(&VerdictRecord {
                detail: detail.clone(),
                ..record
            })
        }
    };
    if let Err(e) = stored {
        return failure(
            format!("The verdict could not be stored: {e}"),
            Status::Failed,
        );
    }
    let passed = verdict.is_pass();
    crate::CallOutcome {
        ok: passed,
        output: detail,
        truncated: false,
        denial: None,
        status: if passed {
            Status::Ok
        } else {
            Status::NotVerified
        },
    }
}

/// The operator's verdict key (made on first use), or why there is none.
fn verdict_key(k: &ExecCtx<'_>) -> Result<airlock_stage::VerdictKey, String> {
    let dir = k.settings.state_dir().ok_or_else(|| {
        "no state directory (neither XDG_STATE_HOME nor HOME is set), so the verdict could not be sealed and apply will refuse it".to_string()
    })?;
    airlock_stage::load_or_create_key(&dir).map_err(|e| {
        format!(
            "the verdict key in {} could not be read or made ({e}), so the verdict could not be sealed and apply will refuse it",
            dir.display()
        )
    })
}

/// Adds to the verdict JSON what makes apply the operator's decision, and a line to its
/// diagnostics for a pass that the agent cannot apply on its own.
fn note_concerns(
    detail: &mut Value,
    report: &airlock_verify::VerdictReport,
    seen_local: &std::collections::BTreeMap<String, u64>,
    hooks: &[super::local_hooks::LocalHook],
    verdict: airlock_stage::Verdict,
) {
    let Some(obj) = detail.as_object_mut() else {
        return;
    };
    if !hooks.is_empty() {
        obj.insert("session_local_hooks".into(), json!(hooks));
    }
    if let Some(v) = local_list::json(seen_local, hooks) {
        obj.insert("session_local".into(), v);
    }
    let concerns = report.attestation().concerns();
    if concerns.is_empty() || !verdict.is_pass() {
        return;
    }
    obj.insert("apply_needs_operator".into(), json!(concerns));
    let mut lines = vec![
        "apply needs the operator: the tests passed, but what they prove depends on what this changeset changed:".to_string(),
    ];
    for c in &report.integrity.concerns {
        for d in c.detail.iter().take(3) {
            lines.push(format!("  - {}: {d}", c.kind.describe()));
        }
    }
    if let Some(d) = obj.get_mut("diagnostics")
        && let Some(text) = d.as_str()
    {
        *d = json!(format!("{}\n{text}", lines.join("\n")));
    }
}

/// What the host checked of the workspace's cargo cache before a verification.
#[derive(Debug, serde::Serialize)]
struct CargoSeal {
    #[serde(flatten)]
    sealed: crate::cargo_home::Sealed,
    /// Checksums of the staged `Cargo.lock` that differed from the workspace's for the same
    /// name and version (the workspace's were used).
    overruled_pins: usize,
    /// Time the check took.
    millis: u64,
}

/// Fills the verify domain's cargo home from the exec domain's `exec_home`: the archives
/// whose checksum the lockfiles pin (the workspace's `Cargo.lock`, then what the staged one
/// adds) and the registry index. Returns its bind and what was done.
fn seal_cargo_home(
    root: &Path,
    layer: &Path,
    exec_home: &Path,
) -> std::io::Result<(airlock_sandbox::CacheBind, CargoSeal)> {
    use airlock_verify::FileSource;
    let started = std::time::Instant::now();
    let bind = crate::cache::verify_cargo_home(root)?;
    let disk = std::fs::read_to_string(root.join("Cargo.lock")).ok();
    let staged = airlock_verify::DirSource::layered(root, &[layer.to_path_buf()])
        .read("Cargo.lock")
        .and_then(|b| String::from_utf8(b).ok());
    let (pins, overruled_pins) = crate::cargo_home::pins(disk.as_deref(), staged.as_deref());
    let sealed = crate::cargo_home::seal(exec_home, &bind.host, &pins)?;
    let millis = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    tracing::info!(
        ?sealed,
        overruled_pins,
        millis,
        "checked the workspace's cargo cache"
    );
    Ok((
        bind,
        CargoSeal {
            sealed,
            overruled_pins,
            millis,
        },
    ))
}

/// The command a verification runs and where it came from. The operator's command line wins;
/// then a command the agent passed (advisory unless an operator rule vouched for exactly that
/// command); then the operator's configured command; else the runner detected from the project.
fn verify_command(
    k: &ExecCtx<'_>,
    p: &Call<'_, VerifyArgs>,
    ctx: &CallContext<'_>,
) -> (Option<Vec<String>>, VerdictSource) {
    if let Some(cmd) = &ctx.operator.verify_command {
        return (Some(cmd.clone()), VerdictSource::OperatorCli);
    }
    if let Some(cmd) = p.args.command.clone() {
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
/// project declares (its test script's runner, `command` when verify cannot read that script)
/// makes the verdict the agent's: another runner runs other tests.
fn runner_overrides_project(
    k: &ExecCtx<'_>,
    p: &Call<'_, VerifyArgs>,
    ctx: &CallContext<'_>,
    layer: &Path,
) -> bool {
    let chosen = match p.args.runner.as_deref() {
        None | Some("auto") => return false,
        Some(r) => r,
    };
    if ctx.operator.verify_runner.as_deref() == Some(chosen) {
        return false;
    }
    let src = airlock_verify::DirSource::layered(k.root, &[layer.to_path_buf()]);
    airlock_verify::project::kind(None, None, &src).map(|d| d.name()) != Some(chosen)
}

fn open_journal(k: &ExecCtx<'_>) -> Result<Journal, crate::CallOutcome> {
    Journal::open(k.root)
        .map(|(j, _)| j)
        .map_err(|e| failure(format!("The journal cannot be opened: {e}"), Status::Failed))
}

pub(crate) fn apply(k: &ExecCtx<'_>, call: &CallContext<'_>) -> crate::CallOutcome {
    let _serial = match k.session_run() {
        Ok(g) => g,
        Err(e) => return failure(e, Status::Failed),
    };
    let verified = match k.store.verified() {
        Ok(v) => v,
        Err(e) => return failure(format!("Nothing was applied: {e}"), Status::NotVerified),
    };
    if let Err(o) = check_seal(k, &verified, call) {
        return o;
    }
    airlock_sandbox::timing::mark("verified changeset loaded");
    // Only the operator's own front end fills this; nothing the model sends reaches it.
    let grant = HostExecGrant::new(&call.operator.allow_host_exec);
    // Host-exec paths first: every one is named, and nothing is written.
    if let Some(reason) = ungranted_host_exec(k, &verified.snapshot().entries, &grant) {
        return host_exec_refusal(reason);
    }
    airlock_sandbox::timing::mark("host-exec paths judged");
    // Re-confine every target through the jail at apply time.
    for e in &verified.snapshot().entries {
        if e.session_local {
            continue;
        }
        if let Some(flag) = &e.flagged
            && !(grant.allows(&e.path) && lifts(flag))
        {
            let d = Decision::deny(
                Stage::Jail,
                "jail_flagged_entry",
                format!(
                    "`{}` cannot be applied: {}; discard or fix it.",
                    e.path,
                    super::flag_text(flag)
                ),
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
        host_exec: std::sync::Arc::new(PolicyHostExec(grant)),
        ..ApplyContext::new(k.session(), turn_id(k))
    };
    // The blobs of the snapshot are read during the apply: no collection meanwhile.
    let pin = match k.store.blobs().pin() {
        Ok(p) => p,
        Err(e) => {
            return failure(
                format!("Nothing was applied: the blob store: {e}"),
                Status::Failed,
            );
        }
    };
    let applied = apply_verified(k.root, &verified, k.store.blobs(), &journal, &ctx);
    drop(pin);
    match applied {
        Ok(report) => {
            // Each call is a turn of its own: the committed apply is durable work, never redone.
            let _ = journal.finish_turn(&ctx.session, ctx.turn);
            if let Err(e) = k.store.clear_applied(&verified.snapshot().hash) {
                return failure(
                    format!("Applied, but the staged entries could not be cleared: {e}"),
                    Status::Failed,
                );
            }
            // The applied contents are on disk now (and undo reads its backups, not blobs):
            // their blobs go unless another session names them. Only this changeset's blobs
            // are looked at, so the cost follows the apply's size.
            let applied = airlock_stage::gc::blobs_of(&verified.snapshot().entries);
            if let Err(e) = airlock_stage::gc::collect_some(k.root, &applied) {
                tracing::warn!("{e}");
            }
            success(serde_json::to_value(&report).unwrap_or(Value::Null), false)
        }
        Err(e @ ApplyError::Conflict(_)) => {
            failure(format!("Nothing was applied: {e}"), Status::Conflict)
        }
        // A refusal is not an internal error: the changeset is not applicable as it stands.
        Err(e @ ApplyError::Refused { .. }) => {
            failure(format!("Nothing was applied: {e}"), Status::NotVerified)
        }
        Err(e) => failure(format!("Nothing was applied: {e}"), Status::Failed),
    }
}

/// What `apply` says when the changeset holds host-exec changes the operator did not grant, or
/// `None`. Judged by name, through the changeset's links, and below directories git takes for
/// repositories by their shape, on disk now or once the changeset is applied.
fn ungranted_host_exec(
    k: &ExecCtx<'_>,
    entries: &[airlock_stage::StagedEntry],
    grant: &HostExecGrant,
) -> Option<String> {
    let changes: std::collections::HashMap<std::path::PathBuf, &airlock_stage::Change> = entries
        .iter()
        .filter(|e| !e.session_local)
        .map(|e| (e.path.as_path().to_path_buf(), &e.change))
        .collect();
    let unchanged = std::collections::HashMap::new();
    let mut shapes = crate::host_shape::ShapeJudge::new(
        k.root,
        |p: &Path| crate::host_shape::post_apply_node(k.root, &unchanged, p),
        |p: &Path| crate::host_shape::post_apply_node(k.root, &changes, p),
        crate::host_shape::changeset_links(entries),
        |p: &Path| crate::host_shape::post_apply_link(k.root, &changes, p),
    );
    let mut refused = Vec::new();
    let mut linked: Vec<String> = Vec::new();
    for e in entries {
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
            if let Some((named, link)) = shapes.via_link(&e.path) {
                let note = format!(
                    " `{}` is `{}` through the link `{}`.",
                    e.path,
                    named.display(),
                    link.display()
                );
                if linked.len() < host_exec::LISTED {
                    linked.push(note);
                }
            }
            refused.push((e.path.clone(), h, anchor));
        }
    }
    host_exec::apply_refusal_of(&refused).map(|mut reason| {
        // After "Nothing was applied." and before the per-path sentences.
        let at = "Nothing was applied.".len();
        reason.insert_str(at, &linked.concat());
        reason
    })
}

/// The verdict's seal must authenticate, its base must be the tree on disk now, and its
/// concerns need the operator: `--accept-test-changes` on the command line, or a yes to the
/// question the call puts (the agent's call never completes it by itself).
fn check_seal(
    k: &ExecCtx<'_>,
    verified: &airlock_stage::VerifiedChangeset,
    call: &CallContext<'_>,
) -> Result<(), crate::CallOutcome> {
    let refuse = |why: String| failure(format!("Nothing was applied: {why}"), Status::NotVerified);
    let key = verdict_key(k).map_err(refuse)?;
    let seal = match k.store.verdict_seal() {
        Ok(Some(s)) => s,
        Ok(None) => {
            return Err(refuse(
                "the verdict carries no seal (it was recorded without the operator's verdict key, or by an older airlock); run `airlock verify` again".into(),
            ));
        }
        Err(e) => return Err(refuse(format!("{e}; run `airlock verify` again"))),
    };
    let v = verified.verdict();
    if !airlock_verify::integrity::authentic(
        &seal,
        &key,
        &v.changeset.to_hex(),
        v.verdict,
        v.source,
    ) {
        return Err(refuse(
            "the stored verdict's seal does not authenticate: it was not recorded by airlock's verify, or it was edited; run `airlock verify` again".into(),
        ));
    }
    let now = airlock_verify::integrity::base_fingerprint(k.root)
        .map_err(|e| refuse(format!("the workspace could not be fingerprinted: {e}")))?;
    let moved = seal.base.moved(&now);
    if !moved.is_empty() {
        // A staged path that changed on disk is the sharper diagnosis: a conflict (exit 5).
        let conflicts: Vec<airlock_stage::apply::Conflict> = verified
            .snapshot()
            .entries
            .iter()
            .filter(|e| !e.session_local)
            .filter_map(|e| {
                let found = airlock_stage::fingerprint_path(&airlock_stage::model::abs_path(
                    k.root, &e.path,
                ))
                .ok()?;
                (found != e.base).then(|| airlock_stage::apply::Conflict {
                    path: e.path.clone(),
                    expected: e.base.clone(),
                    found,
                })
            })
            .collect();
        if !conflicts.is_empty() {
            let e = ApplyError::Conflict(conflicts);
            return Err(failure(
                format!("Nothing was applied: {e}"),
                Status::Conflict,
            ));
        }
        let shown: Vec<&str> = moved.iter().take(8).map(String::as_str).collect();
        let more = moved.len().saturating_sub(shown.len());
        let tail = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        return Err(refuse(format!(
            "the workspace changed since the changeset was verified ({}{tail}), so the tree that would result was never tested; run `airlock verify` again",
            shown.join(", ")
        )));
    }
    if seal.concerns.is_empty() || call.operator.accept_concerns {
        return Ok(());
    }
    let summary = concern_summary(verified, &seal);
    let req = ApprovalRequest {
        tool: "apply".into(),
        summary,
        decision: Decision::ask(
            Stage::Permission,
            "apply_needs_operator",
            "The tests passed, but the changeset changed what they test; the operator decides.",
        ),
    };
    match call.approver.approve(&req) {
        Approval::Once | Approval::Session => Ok(()),
        Approval::Deny(why) => {
            let d = Decision::deny(
                Stage::Permission,
                "apply_needs_operator",
                format!(
                    "Not applied: {}. The operator can review it (`airlock diff`) and run `airlock apply --accept-test-changes` ({why}).",
                    req.summary.lines().next().unwrap_or("")
                ),
            );
            Err(denial(d))
        }
    }
}

/// The concerns of a verdict and the staged diff of the paths behind them (bounded), for the
/// operator's question.
fn concern_summary(
    verified: &airlock_stage::VerifiedChangeset,
    seal: &airlock_stage::VerdictSeal,
) -> String {
    let names: Vec<&str> = seal.concerns.iter().map(|c| c.describe()).collect();
    let mut text = format!("apply although {}", names.join("; "));
    let paths: Vec<String> = verified
        .verdict()
        .detail
        .pointer("/integrity/concerns")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("detail").and_then(Value::as_array))
        .flatten()
        .filter_map(Value::as_str)
        .take(8)
        .map(str::to_string)
        .collect();
    for p in paths {
        text.push_str("\n  - ");
        text.push_str(&p);
    }
    if let Some(hooks) = verified
        .verdict()
        .detail
        .get("session_local_hooks")
        .and_then(Value::as_array)
    {
        for h in hooks.iter().take(5) {
            text.push_str(&format!(
                "\n  - session-local `{}`",
                h.get("path").and_then(Value::as_str).unwrap_or("?")
            ));
        }
    }
    text
}

/// The stage's second look at host-exec paths during apply: the policy's classification by name
/// and the operator's `--allow-host-exec` grant.
struct PolicyHostExec(HostExecGrant);

impl HostExecGate for PolicyHostExec {
    fn ungranted(&self, path: &airlock_policy::RelPath) -> Option<String> {
        if self.0.allows(path) {
            return None;
        }
        host_exec::classify(path).map(|h| format!("{} ({})", h.what, h.why))
    }

    fn lifts_flag(&self, path: &airlock_policy::RelPath, flag: &Flag) -> bool {
        self.0.allows(path) && lifts(flag)
    }
}

/// True for the one kind of flag a grant may lift: a host-exec flag of a kind this build
/// knows (compared by kind; no other flag, and no unreadable one, is ever lifted).
fn lifts(flag: &Flag) -> bool {
    matches!(flag, Flag::HostExec { kind } if host_exec::is_host_exec_flag(kind))
}

/// `apply` refused because the changeset touches host-exec paths the operator did not name:
/// exit 4, the decision (stage `jail`, rule `jail_host_exec`) with one sentence per path.
fn host_exec_refusal(reason: String) -> crate::CallOutcome {
    let d = Decision::deny(Stage::Jail, host_exec::RULE, reason);
    crate::CallOutcome {
        ok: false,
        output: d.to_json(),
        truncated: false,
        status: Status::NotVerified,
        denial: Some(d),
    }
}

fn denial(d: Decision) -> crate::CallOutcome {
    crate::CallOutcome {
        ok: false,
        output: d.to_json(),
        truncated: false,
        status: Status::Denied,
        denial: Some(d),
    }
}

/// The agent turn an effect belongs to: `AIRLOCK_TURN` when the front end sets it, otherwise
/// the current time in milliseconds (unique per call).
fn turn_id(k: &ExecCtx<'_>) -> u64 {
    k.settings.turn.unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        t.as_millis() as u64
    })
}

pub(crate) fn undo(k: &ExecCtx<'_>) -> crate::CallOutcome {
    let _serial = match k.session_run() {
        Ok(g) => g,
        Err(e) => return failure(e, Status::Failed),
    };
    let journal = match open_journal(k) {
        Ok(j) => j,
        Err(o) => return o,
    };
    let ctx = ApplyContext::new(k.session(), turn_id(k));
    match undo_last(k.root, &journal, &ctx) {
        Ok(report) => {
            let _ = journal.finish_turn(&ctx.session, ctx.turn);
            success(serde_json::to_value(&report).unwrap_or(Value::Null), false)
        }
        Err(e @ UndoError::Conflict(_)) => {
            failure(format!("Nothing was undone: {e}"), Status::Conflict)
        }
        Err(e) => failure(format!("Nothing was undone: {e}"), Status::Failed),
    }
}

pub(crate) fn journal(k: &ExecCtx<'_>) -> crate::CallOutcome {
    let journal = match open_journal(k) {
        Ok(j) => j,
        Err(o) => return o,
    };
    match journal.records() {
        Ok(records) => success(serde_json::to_value(&records).unwrap_or(Value::Null), false),
        Err(e) => failure(e.to_string(), Status::Failed),
    }
}

pub(crate) fn recover(k: &ExecCtx<'_>) -> crate::CallOutcome {
    let _serial = match k.session_run() {
        Ok(g) => g,
        Err(e) => return failure(e, Status::Failed),
    };
    let journal = match open_journal(k) {
        Ok(j) => j,
        Err(o) => return o,
    };
    let commits = crate::git::recover::recover_commits(
        k.root,
        &journal,
        &k.settings.temp_dir.join("airlock-git"),
        k.settings.path.as_ref(),
    );
    match airlock_stage::recover::recover(k.root, &journal) {
        Ok(outcomes) => {
            let outcomes: Vec<_> = commits.into_iter().chain(outcomes).collect();
            // Records this process already resolved at start-up come first, then any new ones.
            let mut all: Vec<Value> = k.startup_outcomes.clone();
            all.extend(
                outcomes
                    .iter()
                    .map(|o| serde_json::to_value(o).unwrap_or(Value::Null)),
            );
            // Temp files of interrupted applies anywhere in the workspace (also those whose
            // record was resolved earlier, or whose journal was lost).
            match airlock_stage::recover::sweep_temps(k.root, &journal) {
                Ok(cleaned) => all.extend(
                    cleaned
                        .iter()
                        .map(|o| serde_json::to_value(o).unwrap_or(Value::Null)),
                ),
                Err(e) => return failure(e.to_string(), Status::Failed),
            }
            let attention = all.iter().any(|v| v["outcome"] == "needs_attention");
            crate::CallOutcome {
                ok: !attention,
                output: Value::Array(all),
                truncated: false,
                denial: None,
                status: if attention {
                    Status::Failed
                } else {
                    Status::Ok
                },
            }
        }
        Err(e) => failure(e.to_string(), Status::Failed),
    }
}

pub(crate) fn ask_user(question: &str, ctx: &CallContext<'_>) -> crate::CallOutcome {
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

#[cfg(test)]
mod tests {
    use super::*;
    use airlock_policy::RelPath;
    use airlock_stage::{
        BlobStore, Change, ChangesetSnapshot, StagedEntry, Verdict, VerifiedChangeset,
        fingerprint_path,
    };
    use std::sync::Arc;

    struct Ws {
        _dir: tempfile::TempDir,
        root: std::path::PathBuf,
        blobs: BlobStore,
    }

    impl Ws {
        fn new() -> Ws {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().join("ws");
            std::fs::create_dir_all(root.join(".git/objects/ab")).unwrap();
            std::fs::write(root.join(".git/objects/ab/cd"), b"object").unwrap();
            std::fs::create_dir_all(root.join("sub")).unwrap();
            let blobs = BlobStore::open(root.join(".airlock/blobs")).unwrap();
            Ws {
                _dir: dir,
                root,
                blobs,
            }
        }
        fn stage(&self, rel: &str, change: Change) -> StagedEntry {
            StagedEntry {
                path: RelPath::new(rel).unwrap(),
                change,
                base: fingerprint_path(&self.root.join(rel)).unwrap(),
                session_local: false,
                flagged: None,
            }
        }
        fn write(&self, rel: &str, bytes: &[u8]) -> StagedEntry {
            let content = self.blobs.put(bytes).unwrap();
            let size = bytes.len() as u64;
            self.stage(
                rel,
                Change::Write {
                    content,
                    size,
                    mode: 0o644,
                },
            )
        }
    }

    fn verified(entries: Vec<StagedEntry>) -> VerifiedChangeset {
        let snapshot = ChangesetSnapshot::new("s", entries);
        let record = airlock_stage::VerdictRecord {
            changeset: snapshot.hash,
            verdict: Verdict::Passed,
            source: VerdictSource::Detected,
            detail: Value::Null,
        };
        VerifiedChangeset::attest(snapshot, Some(&record)).unwrap()
    }

    fn ctx(grant: &[&str]) -> ApplyContext {
        ApplyContext {
            host_exec: Arc::new(PolicyHostExec(HostExecGrant::new(grant))),
            ..ApplyContext::new("s", 1)
        }
    }

    /// The stage's own refusal of host-exec paths, with the policy's gate the kernel gives it:
    /// refused unless the operator granted them, and a grant lifts only the host-exec flag.
    #[test]
    fn the_stage_refuses_host_exec_entries_the_operator_did_not_grant() {
        let ws = Ws::new();
        let (j, _) = Journal::open(&ws.root).unwrap();
        let gitfile = || ws.write("sub/.git", b"gitdir: ../evil");
        let wipe = || ws.stage(".git/objects/ab/cd", Change::Delete);
        for entries in [
            vec![gitfile()],
            vec![wipe()],
            vec![ws.write("ok", b"x"), gitfile()],
        ] {
            let err =
                apply_verified(&ws.root, &verified(entries), &ws.blobs, &j, &ctx(&[])).unwrap_err();
            assert!(
                matches!(&err, ApplyError::Refused { why, .. } if why.contains("--allow-host-exec")),
                "{err}"
            );
            assert!(!ws.root.join("ok").exists() && !ws.root.join("sub/.git").exists());
            assert!(ws.root.join(".git/objects/ab/cd").exists());
        }
        // The copy-up of an existing control directory changes nothing and is not refused.
        let v = verified(vec![ws.stage(".git", Change::Dir { mode: 0o755 })]);
        apply_verified(&ws.root, &v, &ws.blobs, &j, &ctx(&[])).unwrap();
        // Granted: applied, flagged by the harvest or not.
        let mut flagged_wipe = wipe();
        flagged_wipe.flagged =
            host_exec::classify(&flagged_wipe.path).map(|h| Flag::host_exec(h.kind));
        assert!(flagged_wipe.flagged.is_some());
        let v = verified(vec![gitfile(), flagged_wipe]);
        apply_verified(
            &ws.root,
            &v,
            &ws.blobs,
            &j,
            &ctx(&["sub/.git", ".git/objects"]),
        )
        .unwrap();
        assert!(ws.root.join("sub/.git").is_file());
        assert!(!ws.root.join(".git/objects/ab/cd").exists());
        // A grant lifts only the host-exec flag, never another reason.
        let mut escape = ws.stage(
            ".git/hooks",
            Change::Symlink {
                target: b"/etc".to_vec(),
            },
        );
        escape.flagged = Some(Flag::LinkOutside);
        let err = apply_verified(
            &ws.root,
            &verified(vec![escape]),
            &ws.blobs,
            &j,
            &ctx(&[".git"]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("outside the workspace"), "{err}");
        // Nor a flag whose kind this build does not know, or whose stored name it cannot read
        // (an older airlock's text): compared by kind, never by text.
        for flag in [
            Flag::host_exec("no_such_tool"),
            Flag::Unknown(host_exec::flag_text("git")),
            Flag::Sensitive {
                rule: "jail_sensitive".into(),
            },
        ] {
            let mut e = ws.stage(".git/info/x", Change::Delete);
            e.flagged = Some(flag.clone());
            let err = apply_verified(&ws.root, &verified(vec![e]), &ws.blobs, &j, &ctx(&[".git"]))
                .unwrap_err();
            assert!(err.to_string().contains("flagged"), "{flag:?}: {err}");
        }
    }
}
