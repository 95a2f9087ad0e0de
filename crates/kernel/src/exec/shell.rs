//! The `bash` tool: a guarded script runs in the sandbox over workspace + staged changes; what
//! it writes (the overlay's upper layer) is harvested into the changeset, never onto the disk.
//!
//! Invariants: `.airlock/` is hidden from the command and never harvested; paths the
//! workspace's ignore rules exclude are staged session-local (seen by later commands, never
//! applied); a symlink pointing outside the workspace, a sensitive file, or a change (write or
//! delete) to a host-exec path ([`airlock_policy::host_exec`]) is staged but flagged so apply
//! refuses it; setuid and setgid bits are dropped from files and directories (and the staged
//! line says so).

use super::{Call, ExecCtx, failure};
use crate::api::CallContext;
use crate::args::{BashArgs, Int};
use crate::output::Status;
use crate::session::{RunSpool, SessionScratch, prepare_session_run, spool_dir};
use airlock_policy::RelPath;
use airlock_policy::host_exec;
use airlock_sandbox::{SandboxSpec, UpperChange};
use airlock_stage::apply::APPLIED_MODE_BITS;
use airlock_stage::store::StageOp;
use airlock_stage::{Change, Flag};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Default wall-clock limit of one command.
const DEFAULT_TIMEOUT: u64 = 120;
/// Output kept in memory per stream (head + tail); the middle is spooled for paging.
const OUTPUT_LIMIT: usize = 32 * 1024;

/// What a run exposes and hides ([`super::exposure`]).
pub(crate) struct RunExposure {
    /// Toolchain paths of `$HOME` bound read-only.
    pub(crate) home_binds: Vec<PathBuf>,
    /// Hidden paths: `.airlock`, the sensitive workspace and staged paths the operator did not
    /// expose (relative), credential entries of the exposed toolchain paths (absolute).
    pub(crate) masked: Vec<PathBuf>,
    /// The workspace-relative masked paths, for the harvest.
    pub(crate) workspace_masked: Vec<PathBuf>,
}

/// The exposure of one run over the workspace and `snapshot`; the workspace scan's cache lives
/// in the session's scratch directory.
pub(crate) fn run_exposure(
    k: &ExecCtx<'_>,
    scratch: &SessionScratch,
    snapshot: &airlock_stage::ChangesetSnapshot,
) -> RunExposure {
    use super::exposure;
    let home = exposure::home_exposure(
        k.settings.home.as_deref(),
        Some(&scratch.dir.join("home.idx")),
    );
    let cache = scratch.dir.join("sensitive.idx");
    let mut index = exposure::WorkspaceIndex::load(&cache);
    let found = index.scan(k.root);
    if let Err(e) = index.save(&cache) {
        tracing::warn!("cannot save the sensitive-file index: {e}");
    }
    // Masked by name, shown by content: a PEM file that holds only certificates (a CA
    // bundle) is public material, read afresh at every run (never from the index's cache).
    let found: Vec<_> = found
        .into_iter()
        .filter(|p| {
            let staged = snapshot
                .entries
                .binary_search_by(|e| e.path.as_bytes().cmp(p.as_bytes()))
                .is_ok();
            staged || !exposure::public_pem(&k.root.join(p.as_path()))
        })
        .collect();
    let staged = snapshot
        .entries
        .iter()
        .filter(|e| !matches!(e.change, Change::Delete))
        .map(|e| &e.path);
    let workspace_masked = exposure::workspace_masks(found, staged, k.expose_sensitive);
    let mut masked = vec![PathBuf::from(".airlock")];
    masked.extend(workspace_masked.iter().cloned());
    masked.extend(home.masked);
    airlock_sandbox::timing::mark("sensitive paths");
    RunExposure {
        home_binds: home.binds,
        masked,
        workspace_masked,
    }
}

/// A call's `argv`, when it can run as a program without a shell: its first word is a path, or
/// names a program in a directory the sandbox shows (the system directories and the exposed
/// toolchains). Otherwise (a builtin such as `cd`, or no such program) `None`: bash runs the
/// guarded equivalent, with bash's own semantics and errors.
fn direct_argv(
    argv: Option<&[String]>,
    path: Option<&std::ffi::OsStr>,
    visible: &[PathBuf],
) -> Option<Vec<String>> {
    use std::os::unix::fs::PermissionsExt;
    let argv = argv.filter(|a| !a.is_empty())?.to_vec();
    let name = argv.first()?;
    if name.contains('/') {
        return Some(argv);
    }
    if name.is_empty() || name == "." || name == ".." {
        return None;
    }
    let found = std::env::split_paths(path?).any(|dir| {
        let shown = ["/usr", "/bin", "/sbin", "/lib"]
            .iter()
            .any(|sys| dir.starts_with(sys))
            || visible.iter().any(|v| dir.starts_with(v));
        shown
            && std::fs::metadata(dir.join(name))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    });
    found.then_some(argv)
}

pub(crate) fn bash(
    k: &ExecCtx<'_>,
    p: &Call<'_, BashArgs>,
    ctx: &CallContext<'_>,
) -> crate::CallOutcome {
    let Some(script) = &p.script else {
        return failure("bash needs a command.", Status::Failed);
    };
    let timeout = p.args.timeout_secs.map_or(DEFAULT_TIMEOUT, Int::get);
    let _serial = match k.session_run() {
        Ok(g) => g,
        Err(e) => return failure(e, Status::Failed),
    };

    // The namespace backend is tried directly; only when a run fails is the host probed, so
    // the error names what is missing (no user namespaces, no overlayfs, old Landlock).
    let forced_degraded = k.settings.forced_degraded;
    if forced_degraded && !k.allow_degraded {
        return failure(
            "AIRLOCK_SANDBOX=degraded asks for no kernel isolation, which needs the operator's --allow-degraded; the command did not run.",
            Status::Failed,
        );
    }
    airlock_sandbox::timing::mark("session lock");
    let (dirs, snapshot) = match prepare_session_run(&k.run_place()) {
        Ok(x) => x,
        Err(e) => return failure(e, Status::Failed),
    };
    airlock_sandbox::timing::mark("scratch dirs and layer");
    let exposure = run_exposure(k, &dirs, &snapshot);
    // This run's spool: removed when the run ends unless the result names its files.
    let mut spool = RunSpool::new(spool_dir(&k.run_place())).ok();
    let argv = match direct_argv(
        p.args.argv.as_deref(),
        k.settings.path.as_deref(),
        &exposure.home_binds,
    ) {
        Some(argv) => argv.into_iter().map(OsString::from).collect(),
        None => vec![
            OsString::from("/bin/bash"),
            OsString::from("-c"),
            OsString::from(script.script()),
        ],
    };
    // The workspace's exec caches (GOCACHE, CARGO_TARGET_DIR, …): writable, outside the
    // changeset, never applied.
    let caches =
        match crate::cache::prepare(k.root, crate::cache::CacheDomain::Exec, &k.settings.env) {
            Ok(c) => c,
            Err(e) => {
                return failure(
                    format!("The workspace's caches could not be prepared: {e}"),
                    Status::Failed,
                );
            }
        };
    let (net, questions) = match super::net::access_for(
        k.root,
        k.session(),
        k.net,
        &ctx.operator.allow_net,
        script.script(),
    ) {
        Ok(Some((access, questions))) => (Some(access), questions),
        Ok(None) => (None, None),
        Err(e) => return failure(e, Status::Failed),
    };
    let mut spec = SandboxSpec::new(k.root.clone(), dirs.upper.clone(), dirs.work.clone(), argv);
    spec.layers = vec![dirs.layer.clone()];
    spec.cwd = k.root.clone();
    spec.timeout = Duration::from_secs(timeout);
    spec.output_limit = OUTPUT_LIMIT;
    spec.spool_dir = spool.as_ref().map(|s| s.dir.clone());
    spec.home_binds = exposure.home_binds.clone();
    spec.masked = exposure.masked.clone();
    spec.env = vec![
        // Read-only git commands (`status`, `diff`) must not rewrite `.git/index` for a stat
        // refresh: every change under `.git` is a host-exec change that apply refuses.
        (OsString::from("GIT_OPTIONAL_LOCKS"), OsString::from("0")),
    ];
    spec.env.extend(caches.env);
    spec.cache_binds = caches.binds;
    spec.ro_binds = caches.ro_binds;
    let granted = net.is_some();
    if granted {
        // The user's own package caches under a granted preset: writable through a layer of
        // the session's, the host's copy never written.
        let presets = super::net::granted_presets(k.net, &ctx.operator.allow_net);
        super::net::layer_preset_caches(&mut spec, k.settings.home.as_deref(), &presets, &dirs.dir);
    } else {
        for (name, value) in super::net::UNGRANTED_ENV.iter().rev() {
            spec.env
                .insert(0, (OsString::from(name), OsString::from(value)));
        }
    }
    super::net::expose_cargo_cache(&mut spec, k.settings.home.as_deref(), k.root, granted);
    spec.net = net;
    spec.cancel = Some(ctx.cancel.flag());
    spec.warm_host = Some(dirs.warm_host_socket());
    // The operator's ceilings for this run (never the model's: they are no tool argument).
    if let Some(m) = ctx.operator.memory_bytes {
        spec.limits.memory = Some(m);
    }
    if let Some(c) = ctx.operator.cpu_secs {
        spec.limits.cpu_seconds = Some(c);
    }
    if let Some(d) = ctx.operator.disk_bytes {
        spec.limits.upper_bytes = d;
    }

    airlock_sandbox::timing::mark("spec");
    // A run whose grant has `ask` rules: its proxy's questions go to the operator while it runs.
    let done = std::sync::atomic::AtomicBool::new(false);
    let ran = std::thread::scope(|s| {
        if let Some(q) = questions {
            let (done, command) = (&done, script.script());
            s.spawn(move || {
                super::net::serve_questions(q, ctx.approver, k.root, k.session(), command, done);
            });
        }
        let ran = run_sandboxed(k, &spec, forced_degraded);
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        ran
    });
    let outcome = match ran {
        Ok(o) => o,
        Err(e) => {
            return failure(
                format!("The sandbox failed to run the command: {e}"),
                Status::Failed,
            );
        }
    };
    if outcome.cancelled {
        return failure(
            "The command was cancelled and killed; nothing it wrote was staged.",
            Status::Cancelled,
        );
    }
    airlock_sandbox::timing::mark("sandbox returned");
    // Past the write ceiling, nothing of the run is kept: staging it would copy up to the
    // ceiling again into the store.
    let over_disk = outcome.ceiling == Some(airlock_sandbox::Ceiling::Disk);
    let staged = if over_disk {
        Vec::new()
    } else {
        match harvest_into_store(k, &dirs, &exposure.workspace_masked) {
            Ok(s) => s,
            Err(e) => {
                return failure(
                    format!("The command ran, but its changes could not be staged: {e}"),
                    Status::Failed,
                );
            }
        }
    };
    airlock_sandbox::timing::mark("harvested");
    let exit_code = if outcome.timed_out {
        124
    } else if outcome.ceiling.is_some() && outcome.exit_code.is_none() && outcome.signal.is_none() {
        // Killed by the supervisor at a ceiling: reported like a SIGKILL, with `ceiling`.
        137
    } else {
        outcome
            .exit_code
            .unwrap_or(128 + outcome.signal.unwrap_or(0))
    };
    let stdout = outcome.stdout.text_lossy();
    let stderr = outcome.stderr.text_lossy();
    if outcome.stdout.spool.is_some() || outcome.stderr.spool.is_some() {
        // The output names its spool files for the operator: keep them.
        if let Some(s) = spool.as_mut() {
            s.keep();
        }
    }
    let truncated = outcome.stdout.omitted_bytes > 0 || outcome.stderr.omitted_bytes > 0;
    let mut out = json!({
        "exit_code": exit_code,
        "stdout": stdout,
        "stderr": stderr,
        "staged": staged,
        "duration_ms": outcome.duration.as_millis() as u64,
    });
    if outcome.timed_out {
        out["timed_out"] = json!(true);
        out["note"] = json!(format!(
            "The command hit its {timeout}s limit and everything it started was killed."
        ));
    }
    out["limits"] = serde_json::to_value(&outcome.limits).unwrap_or(Value::Null);
    if let Some(c) = outcome.ceiling {
        out["ceiling"] = ceiling_json(c, &outcome.limits);
        out["note"] = json!(ceiling_note(c, &outcome.limits));
    }
    if outcome.degraded {
        out["degraded"] = json!("degraded: no kernel isolation");
    }
    out["tier"] = json!(outcome.tier.name());
    if outcome.warm {
        out["warm_host"] = json!(true);
    }
    if let Some(report) = &outcome.net {
        super::net::report_into(&mut out, report);
    }
    if !granted
        && exit_code != 0
        && !outcome.timed_out
        && let Some(note) =
            super::net::refused_note(script.script(), &format!("{stderr}\n{stdout}"))
    {
        out["network"] = json!("refused by policy");
        out["note"] = json!(match out.get("note").and_then(Value::as_str) {
            Some(n) => format!("{n} {note}"),
            None => note,
        });
    }
    crate::CallOutcome {
        ok: exit_code == 0,
        output: out,
        truncated,
        denial: None,
        status: if outcome.timed_out {
            Status::TimedOut
        } else if exit_code == 0 {
            Status::Ok
        } else {
            Status::Exited(exit_code)
        },
    }
}

/// The operator's flag that raises a ceiling.
fn ceiling_flag(c: airlock_sandbox::Ceiling) -> &'static str {
    match c {
        airlock_sandbox::Ceiling::Memory => "--memory",
        airlock_sandbox::Ceiling::Cpu => "--cpu-secs",
        airlock_sandbox::Ceiling::Disk => "--disk",
    }
}

/// `{"name", "limit", "flag"}`: the ceiling a run hit, its value, and the flag that raises it.
fn ceiling_json(c: airlock_sandbox::Ceiling, l: &airlock_sandbox::LimitsReport) -> Value {
    let limit = match c {
        airlock_sandbox::Ceiling::Memory => json!(l.memory.bytes),
        airlock_sandbox::Ceiling::Cpu => json!(l.cpu.seconds),
        airlock_sandbox::Ceiling::Disk => json!(l.disk.bytes),
    };
    json!({ "name": c.name(), "limit": limit, "flag": ceiling_flag(c) })
}

/// One sentence for the model and the operator: which ceiling, what happened, how to raise it.
fn ceiling_note(c: airlock_sandbox::Ceiling, l: &airlock_sandbox::LimitsReport) -> String {
    let mib = |b: u64| format!("{} MiB", b >> 20);
    let flag = ceiling_flag(c);
    match c {
        airlock_sandbox::Ceiling::Memory => format!(
            "The command hit its memory ceiling ({}) and the kernel killed the largest process; the operator can raise it with `airlock exec {flag} BYTES`.",
            mib(l.memory.bytes)
        ),
        airlock_sandbox::Ceiling::Cpu => format!(
            "The command used up its CPU-time ceiling ({} s) and was killed; the operator can raise it with `airlock exec {flag} N`.",
            l.cpu.seconds.unwrap_or(0)
        ),
        airlock_sandbox::Ceiling::Disk => format!(
            "The command wrote more than its ceiling ({}; it had written {}) into the workspace, or wrote while the host's disk was nearly full, and was killed; nothing it wrote was staged. The operator can raise the ceiling with `airlock exec {flag} BYTES`.",
            mib(l.disk.bytes),
            mib(l.disk.used_bytes)
        ),
    }
}

/// Run `spec` in the namespace sandbox; on a host that lacks what it needs, fall back to the
/// degraded backend only when the operator opted in (`--allow-degraded`).
fn run_sandboxed(
    k: &ExecCtx<'_>,
    spec: &SandboxSpec,
    forced_degraded: bool,
) -> Result<airlock_sandbox::Outcome, String> {
    use airlock_sandbox::Backend;
    if forced_degraded {
        return airlock_sandbox::DegradedBackend::new()
            .run(spec)
            .map_err(|e| e.to_string());
    }
    // The full tier directly; on a host that lacks it, the weakest tier the operator allows
    // (the Landlock tier, or the degraded one with --allow-degraded), else an error naming the
    // restriction and its fix.
    airlock_sandbox::run_best(spec, k.allow_degraded).map_err(|e| e.to_string())
}

/// Reads a file of the upper layer. A file the command made unreadable (`chmod 000`) is made
/// readable by its owner first: the upper layer is the session's own scratch, and the mode
/// staged is the one the harvest read before (root, who reads it anyway, sees no difference).
fn read_upper_file(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::read(path) {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            let mode = std::fs::symlink_metadata(path)?.permissions().mode();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode | 0o400))?;
            std::fs::read(path)
        }
        other => other,
    }
}

/// Turn the upper layer into staged changes; returns `["A path", …]` lines.
///
/// Nothing at or below a `masked` path (workspace-relative: a secret the command saw as empty)
/// is staged, and neither is the deletion or replacement of a directory holding one: the real
/// secret is never changed because the command saw a mask in its place.
pub(crate) fn harvest_into_store(
    k: &ExecCtx<'_>,
    dirs: &SessionScratch,
    masked: &[PathBuf],
) -> Result<Vec<String>, String> {
    let upper = dirs.upper.as_path();
    let limit = stageable_path_bytes(k.root, dirs);
    let changes = airlock_sandbox::harvest_within(upper, limit).map_err(|e| e.to_string())?;
    check_staged_ceiling(k, upper, &changes, masked)?;
    // The blobs written below are named only when the batch commits: no collection meanwhile.
    let _pin = k
        .store
        .blobs()
        .pin()
        .map_err(|e| format!("locking the blob store: {e}"))?;
    let mut summary = Vec::new();
    // Summary lines of changes that may leave their path as the workspace has it.
    let mut unsure: Vec<Unsure> = Vec::new();
    // Ignored build outputs: one line for all of them, by top-level directory.
    let mut local = std::collections::BTreeMap::<String, u64>::new();
    // Harvest lists parents before children, so a directory's delete precedes anything staged
    // below it (a delete drops staged entries below it).
    let mut batch: Vec<StageOp> = Vec::new();
    let mut ignore = airlock_stage::view::IgnoreRules::new(k.root);
    // Host-exec paths by name, and below directories git takes for repositories by their
    // shape before the command (the merged view) or after it (its upper layer over that).
    let mut shapes = crate::host_shape::ShapeJudge::new(
        k.root,
        |p: &Path| crate::host_shape::merged_node(k.store, p),
        |p: &Path| crate::host_shape::upper_node(upper, k.store, p),
        harvest_links(k, &changes, &mut ignore),
        |p: &Path| crate::host_shape::upper_link(upper, k.store, p),
    );
    let mut too_long = Vec::new();
    for change in changes {
        let path = change.path().to_path_buf();
        if let UpperChange::TooLong { limit, .. } = change {
            too_long.push((path, limit));
            continue;
        }
        let Ok(rel) = RelPath::new(&path) else {
            continue;
        };
        if rel
            .components()
            .next()
            .map(|c| c.as_bytes() == b".airlock")
            .unwrap_or(false)
        {
            continue; // airlock's own state is never harvested
        }
        if airlock_policy::jail::has_control_char(rel.as_bytes()) {
            // A name that could disguise itself and the lines around it on the operator's
            // screen is never staged; the line shows it escaped (`{rel}`).
            summary.push(format!(
                "! {rel} (a name with a control, bidi or invisible character: not staged; rename it with printable characters only)"
            ));
            continue;
        }
        if masked.iter().any(|m| path.starts_with(m)) {
            summary.push(format!("! {rel} (a masked sensitive file: not staged)"));
            continue;
        }
        let holds_mask = masked.iter().any(|m| m.starts_with(&path));
        let replaces = match &change {
            UpperChange::Delete { .. } | UpperChange::File { .. } | UpperChange::Symlink { .. } => {
                true
            }
            UpperChange::Dir { opaque, .. } => *opaque,
            UpperChange::Unsupported { .. } | UpperChange::TooLong { .. } => false,
        };
        if holds_mask && replaces {
            summary.push(format!(
                "! {rel} (holds a masked sensitive file: its removal or replacement was not staged)"
            ));
            continue;
        }
        let is_dir = matches!(change, UpperChange::Dir { .. });
        // An ignored path the changeset already holds as a change to apply (the agent wrote
        // it on purpose, e.g. with `write_file`) stays one: a command rewriting it does not
        // hide it.
        let session_local = ignore.is_ignored(&rel, is_dir)
            && k.store
                .get(&rel)
                .map_err(|e| e.to_string())?
                .is_none_or(|e| e.session_local);
        let sensitive = airlock_policy::jail::sensitive_rule(&rel).map(|d| Flag::Sensitive {
            rule: d.rule.to_string(),
        });
        // What the host would run by itself (a `.git` entry, `.envrc`, …): flagged, so apply
        // refuses it unless the operator names it. Any other flag takes precedence.
        let host_exec = if session_local {
            None
        } else {
            shapes.classify(&rel).map(|(h, _)| Flag::host_exec(h.kind))
        };
        let on_disk = std::fs::symlink_metadata(k.root.join(rel.as_path())).ok();
        let mut dropped = None;
        let (staged, mark) = match change {
            UpperChange::Unsupported { kind, .. } => {
                summary.push(format!("! {rel} (a {kind}: not staged)"));
                continue;
            }
            UpperChange::TooLong { .. } => continue,
            UpperChange::File { mode, .. } => {
                let bytes = read_upper_file(&upper.join(&path))
                    .map_err(|e| format!("reading `{rel}` from the sandbox: {e}"))?;
                let content = k
                    .store
                    .blobs()
                    .put_deferred(&bytes)
                    .map_err(|e| e.to_string())?;
                dropped = special_bits(mode);
                (
                    Change::Write {
                        content,
                        size: bytes.len() as u64,
                        mode: mode & APPLIED_MODE_BITS,
                    },
                    sensitive.clone().or(host_exec.clone()),
                )
            }
            UpperChange::Delete { .. } => (Change::Delete, host_exec.clone()),
            UpperChange::Symlink { target, .. } => {
                let flag = symlink_escape(k.root, &rel, &target)
                    .or(sensitive.clone())
                    .or(host_exec.clone());
                (
                    Change::Symlink {
                        target: target.as_os_str().as_bytes().to_vec(),
                    },
                    flag,
                )
            }
            UpperChange::Dir { mode, opaque, .. } => {
                if opaque {
                    // The directory was replaced: everything below it in the lower layers is gone.
                    for gone in lower_entries_below(k, &rel)? {
                        let flagged = host_exec::classify(&gone).map(|h| Flag::host_exec(h.kind));
                        batch.push(StageOp::Entry {
                            path: gone,
                            change: Change::Delete,
                            session_local,
                            flagged,
                        });
                    }
                }
                dropped = special_bits(mode);
                if let Some(bits) = dropped {
                    summary.push(format!(
                        "! {rel}/ ({bits} dropped: airlock never applies setuid or setgid bits)"
                    ));
                }
                // Over an existing directory (a copy-up) the entry changes nothing on apply.
                let existing_dir = on_disk.as_ref().is_some_and(|m| m.is_dir());
                (
                    Change::Dir {
                        mode: mode & APPLIED_MODE_BITS,
                    },
                    if existing_dir {
                        None
                    } else {
                        host_exec.clone()
                    },
                )
            }
        };
        if !matches!(staged, Change::Dir { .. }) {
            let code = match &staged {
                Change::Delete => 'D',
                _ if on_disk.is_some() => 'M',
                _ => 'A',
            };
            let flag = mark
                .as_ref()
                .map(|m| format!(" (flagged: {})", crate::exec::flag_text(m)))
                .unwrap_or_default();
            let bits = dropped
                .map(|b| format!(" ({b} dropped: airlock never applies setuid or setgid bits)"))
                .unwrap_or_default();
            if session_local && mark.is_none() && dropped.is_none() {
                *local
                    .entry(super::local_list::group_of(&rel.display()))
                    .or_default() += 1;
            } else {
                let local = if session_local {
                    " (session-local)"
                } else {
                    ""
                };
                summary.push(format!("{code} {rel}{local}{flag}{bits}"));
                if code != 'A' {
                    unsure.push(Unsure {
                        line: summary.len() - 1,
                        had_entry: code == 'D'
                            || k.store.get(&rel).map_err(|e| e.to_string())?.is_some(),
                        path: rel.clone(),
                    });
                }
            }
        }
        batch.push(StageOp::Entry {
            path: rel,
            change: staged,
            session_local,
            flagged: mark,
        });
    }
    if let Some(block) = super::local_list::text(&local, &[]) {
        summary.extend(block.lines().map(str::to_string));
    }
    summary.extend(too_long_summary(&too_long));
    if batch.is_empty() {
        return Ok(summary);
    }
    // One flush for every blob of the harvest, before the changeset names them.
    k.store
        .blobs()
        .sync()
        .map_err(|e| format!("flushing staged contents: {e}"))?;
    k.store.stage_batch(batch).map_err(|e| e.to_string())?;
    settle_summary(k, summary, unsure)
}

/// Refuses a harvest whose files would take the changeset past the session's ceiling on staged
/// bytes, before any of their contents is stored (the store's own check at commit is the
/// authority; this one keeps a refused harvest from filling the blob store first). A file
/// replacing a staged write counts by how much it grows it.
fn check_staged_ceiling(
    k: &ExecCtx<'_>,
    upper: &Path,
    changes: &[UpperChange],
    masked: &[PathBuf],
) -> Result<(), String> {
    let limit = k.store.max_staged_bytes();
    let before = k.store.staged_bytes().map_err(|e| e.to_string())?;
    let mut after = i128::from(before);
    for c in changes {
        let UpperChange::File { path, .. } = c else {
            continue;
        };
        if path.starts_with(".airlock") || masked.iter().any(|m| path.starts_with(m)) {
            continue;
        }
        let size = std::fs::symlink_metadata(upper.join(path)).map_or(0, |m| m.len());
        let old = match RelPath::new(path).ok().map(|r| k.store.get(&r)) {
            Some(Ok(Some(e))) => match e.change {
                Change::Write { size, .. } => size,
                _ => 0,
            },
            _ => 0,
        };
        after += i128::from(size) - i128::from(old);
    }
    let after = u64::try_from(after.max(0)).unwrap_or(u64::MAX);
    if after > limit && after > before {
        return Err(airlock_stage::store::StageError::OverCeiling {
            limit,
            before,
            after,
        }
        .to_string());
    }
    Ok(())
}

/// The longest workspace-relative path a harvest stages: what the jail lets any tool name
/// (the workspace's absolute path and it within `MAX_PATH_BYTES`, 4096), and what the harvest
/// can read back from the upper directory by path. Anything longer could never be applied
/// ([`too_long_summary`]); the staged layer is made relative to its own directory, so its
/// location sets no limit.
pub(crate) fn stageable_path_bytes(root: &Path, dirs: &SessionScratch) -> usize {
    let max = airlock_policy::path::MAX_PATH_BYTES;
    (max - 1)
        .saturating_sub(root.as_os_str().len())
        .min((airlock_sandbox::PATH_MAX - 2).saturating_sub(dirs.upper.as_os_str().len()))
}

/// The stable rule id of an upper-directory entry refused for the length of its path: the
/// jail's, which refuses the same paths to every other tool.
pub(crate) const PATH_TOO_LONG_RULE: &str = "jail_too_long";

/// One line for the entries a harvest refused for the length of their path (none when there
/// are none): how many, the limit, and the start of the first.
fn too_long_summary(too_long: &[(PathBuf, usize)]) -> Option<String> {
    let (first, limit) = too_long.first()?;
    let shown: String = first.to_string_lossy().chars().take(60).collect();
    Some(format!(
        "! {shown}… ({} path(s) longer than the {limit} bytes a staged path may have here, the system's {}-byte PATH_MAX less the workspace's or the sandbox scratch's own path; rule {PATH_TOO_LONG_RULE}): these and everything below them were not staged",
        too_long.len(),
        airlock_sandbox::PATH_MAX
    ))
}

/// The links the host-exec judge follows for a harvest: the staged ones and this command's own
/// (an ignored one is never applied, so it makes nothing host-exec).
fn harvest_links(
    k: &ExecCtx<'_>,
    changes: &[UpperChange],
    ignore: &mut airlock_stage::view::IgnoreRules,
) -> Vec<(std::path::PathBuf, std::path::PathBuf)> {
    let mut links = crate::host_shape::staged_links(k.store);
    for c in changes {
        if let UpperChange::Symlink { path, target } = c
            && let Ok(rel) = RelPath::new(path)
            && !ignore.is_ignored(&rel, false)
        {
            links.push((path.clone(), target.clone()));
        }
    }
    links
}

/// A summary line whose change may have left its path as the workspace has it: a rewrite
/// with the same content (`sed -i` that matched nothing) or the undoing of a staged change.
struct Unsure {
    line: usize,
    path: RelPath,
    /// Something was staged at (or, for a delete, possibly below) the path before.
    had_entry: bool,
}

/// The summary as the changeset now stands: a path the command left as the workspace has it
/// is not said to be staged; one whose staged change it undid says so.
fn settle_summary(
    k: &ExecCtx<'_>,
    mut summary: Vec<String>,
    unsure: Vec<Unsure>,
) -> Result<Vec<String>, String> {
    let mut keep = vec![true; summary.len()];
    for u in unsure {
        if k.store.get(&u.path).map_err(|e| e.to_string())?.is_some() {
            continue;
        }
        if u.had_entry {
            summary[u.line] = format!("= {} (as in the workspace again: no longer staged)", u.path);
        } else {
            keep[u.line] = false;
        }
    }
    let mut kept = keep.into_iter();
    summary.retain(|_| kept.next().unwrap_or(true));
    Ok(summary)
}

/// Which of setuid and setgid `mode` carries, in words, or `None`.
fn special_bits(mode: u32) -> Option<&'static str> {
    match (mode & 0o4000 != 0, mode & 0o2000 != 0) {
        (true, true) => Some("setuid and setgid bits"),
        (true, false) => Some("setuid bit"),
        (false, true) => Some("setgid bit"),
        (false, false) => None,
    }
}

fn lower_entries_below(k: &ExecCtx<'_>, dir: &RelPath) -> Result<Vec<RelPath>, String> {
    use airlock_stage::view::{NodeKind, list_merged, stat_merged};
    // What the command saw below `dir` before it ran: the disk with the changeset over it, at
    // `dir` itself and not through a symlink. A symlink the command replaced with a directory
    // had nothing below it; the directory it pointed to is never listed.
    let why = |e: airlock_stage::store::StageError| format!("listing what `{dir}` held: {e}");
    match stat_merged(k.store, dir).map_err(why)? {
        Some(e) if e.path == *dir && e.kind == NodeKind::Dir => {}
        _ => return Ok(Vec::new()),
    }
    Ok(list_merged(k.store, Some(dir))
        .map_err(why)?
        .into_iter()
        .filter_map(|e| dir.join(&e.name).ok())
        .collect())
}

/// A symlink whose target leaves the workspace is flagged (the jail refuses it at apply).
fn symlink_escape(root: &Path, link: &RelPath, target: &Path) -> Option<Flag> {
    if target.is_absolute() {
        if target.starts_with(root) {
            return None;
        }
        return Some(Flag::LinkOutside);
    }
    let mut depth: i64 = link.components().count() as i64 - 1;
    for c in target.components() {
        match c {
            std::path::Component::ParentDir => depth -= 1,
            std::path::Component::Normal(_) => depth += 1,
            _ => {}
        }
        if depth < 0 {
            return Some(Flag::LinkOutside);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlink_escape_detection() {
        let root = Path::new("/ws");
        let l = RelPath::new("a/link").unwrap();
        assert!(symlink_escape(root, &l, Path::new("../b")).is_none());
        assert!(symlink_escape(root, &l, Path::new("../../etc")).is_some());
        assert!(symlink_escape(root, &l, Path::new("/etc/passwd")).is_some());
        assert!(symlink_escape(root, &l, Path::new("/ws/x")).is_none());
        assert!(symlink_escape(root, &l, Path::new("c/../../..")).is_some());
    }
}
