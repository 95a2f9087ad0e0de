//! The `bash` tool: a guarded script runs in the sandbox over workspace + staged changes; what
//! it writes (the overlay's upper layer) is harvested into the changeset, never onto the disk.
//!
//! Invariants: `.airlock/` is hidden from the command and never harvested; paths the
//! workspace's ignore rules exclude are staged session-local (seen by later commands, never
//! applied); a symlink pointing outside the workspace, or a sensitive file, is staged but flagged
//! so apply refuses it.

use super::failure;
use crate::api::CallContext;
use crate::chain::Prepared;
use crate::kernel::Kernel;
use airlock_policy::RelPath;
use airlock_sandbox::{SandboxSpec, UpperChange};
use airlock_stage::Change;
use airlock_stage::store::StageOp;
use serde_json::{Value, json};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Default wall-clock limit of one command.
const DEFAULT_TIMEOUT: u64 = 120;
/// Output kept in memory per stream (head + tail); the middle is spooled for paging.
const OUTPUT_LIMIT: usize = 32 * 1024;

/// Toolchain directories under $HOME exposed read-only inside the sandbox when they exist.
const HOME_TOOLCHAINS: &[&str] = &[
    ".cargo",
    ".rustup",
    ".pyenv",
    ".npm",
    ".nvm",
    ".deno",
    ".bun",
    "go",
    ".local/bin",
    ".local/lib",
];

/// The per-run scratch directories (outside the workspace, so overlay layers never nest).
pub(crate) struct RunDirs {
    pub(crate) _base: tempfile::TempDir,
    pub(crate) layer: PathBuf,
    pub(crate) upper: PathBuf,
    pub(crate) work: PathBuf,
}

/// Make scratch dirs and materialise the session's changeset as an overlay lower layer.
pub(crate) fn prepare_run(
    k: &Kernel,
) -> Result<(RunDirs, airlock_stage::ChangesetSnapshot), String> {
    let snapshot = k.store.snapshot().map_err(|e| e.to_string())?;
    let base =
        run_base().map_err(|e| format!("cannot create the sandbox's scratch directory: {e}"))?;
    let layer = base.path().join("layer");
    let upper = base.path().join("upper");
    let work = base.path().join("work");
    for d in [&layer, &upper, &work] {
        std::fs::create_dir_all(d).map_err(|e| format!("cannot create `{}`: {e}", d.display()))?;
    }
    airlock_stage::layer::materialize_layer_over(&snapshot, k.store.blobs(), &layer, &k.root)
        .map_err(|e| format!("cannot materialise the staged changes for the sandbox: {e}"))?;
    Ok((
        RunDirs {
            _base: base,
            layer,
            upper,
            work,
        },
        snapshot,
    ))
}

fn run_base() -> std::io::Result<tempfile::TempDir> {
    let dir = std::env::var_os("AIRLOCK_RUN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("airlock-runs"));
    std::fs::create_dir_all(&dir)?;
    tempfile::Builder::new().prefix("run-").tempdir_in(dir)
}

/// Toolchain dirs of the real $HOME to expose read-only.
pub(crate) fn home_binds() -> Vec<PathBuf> {
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
        return Vec::new();
    };
    HOME_TOOLCHAINS
        .iter()
        .map(|d| home.join(d))
        .filter(|p| p.is_dir())
        .collect()
}

/// Spool directory for outputs that overflow their in-memory cap.
pub(crate) fn spool_dir(k: &Kernel) -> PathBuf {
    k.root.join(".airlock").join("spool").join(k.session())
}

pub(crate) fn bash(k: &Kernel, p: &Prepared<'_>, ctx: &CallContext<'_>) -> crate::CallOutcome {
    let Some(script) = &p.script else {
        return failure("bash needs a command.", 1);
    };
    let timeout = p
        .args
        .get("timeout_secs")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_TIMEOUT);
    let _serial = match k.session_run() {
        Ok(g) => g,
        Err(e) => return failure(e, 1),
    };

    // The namespace backend is tried directly; only when a run fails is the host probed, so
    // the error names what is missing (no user namespaces, no overlayfs, old Landlock).
    let forced_degraded = std::env::var("AIRLOCK_SANDBOX").as_deref() == Ok("degraded");
    if forced_degraded && !k.config.allow_degraded {
        return failure(
            "AIRLOCK_SANDBOX=degraded asks for no kernel isolation, which needs the operator's --allow-degraded; the command did not run.",
            1,
        );
    }
    airlock_sandbox::timing::mark("session lock");
    let (dirs, _snapshot) = match prepare_run(k) {
        Ok(x) => x,
        Err(e) => return failure(e, 1),
    };
    airlock_sandbox::timing::mark("scratch dirs and layer");
    let spool = spool_dir(k);
    let _ = std::fs::create_dir_all(&spool);
    let mut spec = SandboxSpec::new(
        k.root.clone(),
        dirs.upper.clone(),
        dirs.work.clone(),
        vec![
            OsString::from("/bin/bash"),
            OsString::from("-c"),
            OsString::from(script.script()),
        ],
    );
    spec.layers = vec![dirs.layer.clone()];
    spec.cwd = k.root.clone();
    spec.timeout = Duration::from_secs(timeout);
    spec.output_limit = OUTPUT_LIMIT;
    spec.spool_dir = Some(spool);
    spec.home_binds = home_binds();
    spec.masked = vec![PathBuf::from(".airlock")];
    spec.env = vec![(OsString::from("CARGO_NET_OFFLINE"), OsString::from("true"))];
    spec.cancel = Some(ctx.cancel.flag());

    airlock_sandbox::timing::mark("spec");
    let outcome = match run_sandboxed(k, &spec, forced_degraded) {
        Ok(o) => o,
        Err(e) => return failure(format!("The sandbox failed to run the command: {e}"), 1),
    };
    if outcome.cancelled {
        return failure(
            "The command was cancelled and killed; nothing it wrote was staged.",
            130,
        );
    }
    airlock_sandbox::timing::mark("sandbox returned");
    let staged = match harvest_into_store(k, &dirs.upper) {
        Ok(s) => s,
        Err(e) => {
            return failure(
                format!("The command ran, but its changes could not be staged: {e}"),
                1,
            );
        }
    };
    airlock_sandbox::timing::mark("harvested");
    let exit_code = if outcome.timed_out {
        124
    } else {
        outcome
            .exit_code
            .unwrap_or(128 + outcome.signal.unwrap_or(0))
    };
    let stdout = outcome.stdout.text_lossy();
    let stderr = outcome.stderr.text_lossy();
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
    if outcome.degraded {
        out["degraded"] = json!("degraded: no kernel isolation");
    }
    crate::CallOutcome {
        ok: exit_code == 0,
        output: out,
        truncated,
        denial: None,
        exit_code,
    }
}

/// Run `spec` in the namespace sandbox; on a host that lacks what it needs, fall back to the
/// degraded backend only when the operator opted in (`--allow-degraded`).
fn run_sandboxed(
    k: &Kernel,
    spec: &SandboxSpec,
    forced_degraded: bool,
) -> Result<airlock_sandbox::Outcome, String> {
    use airlock_sandbox::Backend;
    if forced_degraded {
        return airlock_sandbox::DegradedBackend::new()
            .run(spec)
            .map_err(|e| e.to_string());
    }
    match airlock_sandbox::NamespaceBackend::new().run(spec) {
        Ok(o) => Ok(o),
        Err(e) => match airlock_sandbox::probe() {
            Err(missing) if k.config.allow_degraded => {
                tracing::warn!(
                    "no kernel isolation ({missing}); running degraded as the operator allowed"
                );
                airlock_sandbox::DegradedBackend::new()
                    .run(spec)
                    .map_err(|e| e.to_string())
            }
            Err(missing) => Err(format!(
                "{missing} (the operator may opt in to running without kernel isolation with --allow-degraded)"
            )),
            Ok(_) => Err(e.to_string()),
        },
    }
}

/// Turn the upper layer into staged changes; returns `["A path", …]` lines.
pub(crate) fn harvest_into_store(k: &Kernel, upper: &Path) -> Result<Vec<String>, String> {
    let changes = airlock_sandbox::harvest(upper).map_err(|e| e.to_string())?;
    let mut summary = Vec::new();
    // Harvest lists parents before children, so a directory's delete precedes anything staged
    // below it (a delete drops staged entries below it).
    let mut batch: Vec<StageOp> = Vec::new();
    let mut ignore = airlock_stage::view::IgnoreRules::new(&k.root);
    for change in changes {
        let path = change.path().to_path_buf();
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
        let is_dir = matches!(change, UpperChange::Dir { .. });
        let session_local = ignore.is_ignored(&rel, is_dir);
        let sensitive = airlock_policy::jail::sensitive_rule(&rel).map(|d| d.reason);
        let (staged, mark) = match change {
            UpperChange::Unsupported { kind, .. } => {
                summary.push(format!("! {rel} (a {kind}: not staged)"));
                continue;
            }
            UpperChange::File { mode, .. } => {
                let bytes = std::fs::read(upper.join(&path))
                    .map_err(|e| format!("reading `{rel}` from the sandbox: {e}"))?;
                let content = k
                    .store
                    .blobs()
                    .put_deferred(&bytes)
                    .map_err(|e| e.to_string())?;
                (
                    Change::Write {
                        content,
                        size: bytes.len() as u64,
                        mode: mode & 0o7777,
                    },
                    sensitive.clone(),
                )
            }
            UpperChange::Delete { .. } => (Change::Delete, None),
            UpperChange::Symlink { target, .. } => {
                let flag = symlink_escape(&k.root, &rel, &target).or(sensitive.clone());
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
                    for gone in lower_entries_below(k, &rel) {
                        batch.push(StageOp::Entry {
                            path: gone,
                            change: Change::Delete,
                            session_local,
                            flagged: None,
                        });
                    }
                }
                (
                    Change::Dir {
                        mode: mode & 0o7777,
                    },
                    None,
                )
            }
        };
        if !matches!(staged, Change::Dir { .. }) {
            let on_disk = std::fs::symlink_metadata(k.root.join(rel.as_path())).is_ok();
            let code = match &staged {
                Change::Delete => 'D',
                _ if on_disk => 'M',
                _ => 'A',
            };
            let local = if session_local {
                " (session-local)"
            } else {
                ""
            };
            let flag = mark
                .as_ref()
                .map(|m| format!(" (flagged: {m})"))
                .unwrap_or_default();
            summary.push(format!("{code} {rel}{local}{flag}"));
        }
        batch.push(StageOp::Entry {
            path: rel,
            change: staged,
            session_local,
            flagged: mark,
        });
    }
    if batch.is_empty() {
        return Ok(summary);
    }
    // One flush for every blob of the harvest, before the changeset names them.
    k.store
        .blobs()
        .sync()
        .map_err(|e| format!("flushing staged contents: {e}"))?;
    k.store.stage_batch(batch).map_err(|e| e.to_string())?;
    Ok(summary)
}

fn lower_entries_below(k: &Kernel, dir: &RelPath) -> Vec<RelPath> {
    let abs = k.root.join(dir.as_path());
    let Ok(rd) = std::fs::read_dir(&abs) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| dir.join(e.file_name()).ok())
        .collect()
}

/// A symlink whose target leaves the workspace is flagged (the jail refuses it at apply).
fn symlink_escape(root: &Path, link: &RelPath, target: &Path) -> Option<String> {
    if target.is_absolute() {
        if target.starts_with(root) {
            return None;
        }
        return Some(format!(
            "symbolic link `{link}` points outside the workspace to `{}`",
            target.display()
        ));
    }
    let mut depth: i64 = link.components().count() as i64 - 1;
    for c in target.components() {
        match c {
            std::path::Component::ParentDir => depth -= 1,
            std::path::Component::Normal(_) => depth += 1,
            _ => {}
        }
        if depth < 0 {
            return Some(format!(
                "symbolic link `{link}` points outside the workspace to `{}`",
                target.display()
            ));
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
