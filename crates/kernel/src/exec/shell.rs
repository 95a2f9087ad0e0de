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
use airlock_policy::RelPath;
use airlock_policy::host_exec;
use airlock_sandbox::{SandboxSpec, UpperChange};
use airlock_stage::Change;
use airlock_stage::apply::APPLIED_MODE_BITS;
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

/// A session's scratch directories, kept between its commands (commands of one session are
/// serialised by the session lock, so one set is enough): `layer`, the materialised changeset,
/// reused while the changeset's hash is unchanged (`layer.key`); `upper` and `work`, the
/// overlay's, left empty by every run; and `host.sock`, the session's warm sandbox
/// host. They live outside the workspace (overlayfs refuses nested layers), in a 0700
/// directory of the caller's: `$AIRLOCK_RUN_DIR`, else `$XDG_RUNTIME_DIR/airlock`, else
/// `$TMPDIR/airlock-<uid>`.
pub(crate) struct SessionScratch {
    pub(crate) dir: PathBuf,
    pub(crate) layer: PathBuf,
    pub(crate) upper: PathBuf,
    pub(crate) work: PathBuf,
    /// A shared lock on [`IN_USE`] for as long as the run lasts: pruning passes it by.
    _in_use: std::fs::File,
}

/// Held (shared) by every run in a session's scratch directory; pruning takes it exclusively.
const IN_USE: &str = "in-use.lock";

/// Scratch directories of sessions that ran no command for this long are removed when another
/// session makes its scratch. They hold only derived data (empty overlay directories, the
/// cached staged layer, an idle host's socket).
const SCRATCH_MAX_IDLE: Duration = Duration::from_secs(24 * 3600);

/// Prefix a scratch directory is renamed to before it is removed (an interrupted removal is
/// finished by the next prune).
const PRUNING: &str = ".pruning-";

/// A session's scratch directory name: 16 lowercase hex digits.
fn is_scratch_name(name: &std::ffi::OsStr) -> bool {
    let b = name.as_bytes();
    b.len() == 16 && b.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// Takes `path`'s flock without waiting; a missing file is a free lock. `None`: held by someone.
fn try_lock_exclusive(path: &Path) -> Option<Option<std::fs::File>> {
    match std::fs::OpenOptions::new().read(true).open(path) {
        Ok(f) => {
            match rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => Some(Some(f)),
                Err(_) => None,
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(None),
        Err(_) => None,
    }
}

/// Removes the scratch directories under `base` idle for `max_idle` or longer, except `keep`
/// and any that a run (shared [`IN_USE`] lock) or a live warm host (`host.sock.lock`) holds.
/// Best effort: whatever cannot be removed now is left for a later prune.
pub(crate) fn prune_idle_scratch(base: &Path, keep: &Path, max_idle: Duration) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    let now = std::time::SystemTime::now();
    for entry in entries.flatten() {
        let (path, name) = (entry.path(), entry.file_name());
        if path == keep {
            continue;
        }
        let leftover = name.as_bytes().starts_with(PRUNING.as_bytes());
        let Ok(md) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !md.is_dir() || !(leftover || is_scratch_name(&name)) {
            continue;
        }
        if leftover {
            let _ = airlock_sandbox::remove_tree(&path);
            continue;
        }
        let idle = md
            .modified()
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .unwrap_or_default();
        if idle < max_idle {
            continue;
        }
        let (Some(_run), Some(_host)) = (
            try_lock_exclusive(&path.join(IN_USE)),
            try_lock_exclusive(&path.join("host.sock.lock")),
        ) else {
            continue;
        };
        let mut doomed = OsString::from(PRUNING);
        doomed.push(&name);
        let doomed = base.join(doomed);
        if std::fs::rename(&path, &doomed).is_ok() {
            tracing::info!(dir = %path.display(), "removing idle sandbox scratch");
            let _ = airlock_sandbox::remove_tree(&doomed);
        }
    }
}

/// Opens `dir`'s [`IN_USE`] lock shared, creating it; `None` if `dir` was pruned meanwhile
/// (the lock file at that path is no longer the one locked).
fn lock_in_use(dir: &Path) -> std::io::Result<Option<std::fs::File>> {
    use std::os::unix::fs::MetadataExt;
    let path = dir.join(IN_USE);
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)?;
    rustix::fs::flock(&f, rustix::fs::FlockOperation::LockShared)?;
    let held = f.metadata()?;
    Ok(match std::fs::metadata(&path) {
        Ok(now) if now.ino() == held.ino() && now.dev() == held.dev() => Some(f),
        _ => None,
    })
}

impl SessionScratch {
    /// Empties the upper layer (after a harvest, or before a run after a crash). The sandbox
    /// resets `work` itself before it mounts (and a warm host right after each run).
    pub(crate) fn clear_run_dirs(&self) -> std::io::Result<()> {
        empty_dir(&self.upper)?;
        match std::fs::create_dir(&self.work) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
            _ => Ok(()),
        }
    }
}

impl Drop for SessionScratch {
    /// Whatever happened to the run (harvested, cancelled, failed), its upper layer goes.
    fn drop(&mut self) {
        let _ = self.clear_run_dirs();
    }
}

/// The private directory holding every session's scratch: made 0700, and refused unless it is a
/// real directory owned by this user (a shared `/tmp` must not let anyone else plant it).
fn scratch_base() -> std::io::Result<PathBuf> {
    let uid = rustix::process::geteuid().as_raw();
    // The operator's choice is binding; the runtime directory is only a preference.
    if let Some(d) = std::env::var_os("AIRLOCK_RUN_DIR") {
        return private_dir(&PathBuf::from(d), uid);
    }
    if let Some(x) = std::env::var_os("XDG_RUNTIME_DIR").filter(|x| Path::new(x).is_dir())
        && let Ok(dir) = private_dir(&PathBuf::from(x).join("airlock"), uid)
    {
        return Ok(dir);
    }
    private_dir(&std::env::temp_dir().join(format!("airlock-{uid}")), uid)
}

/// `dir`, created if need be, as a real directory owned by `uid` with mode 0700.
fn private_dir(dir: &Path, uid: u32) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let md = std::fs::symlink_metadata(dir)?;
    if !md.is_dir() || md.uid() != uid {
        return Err(std::io::Error::other(format!(
            "`{}` is not a directory of this user's; refusing to keep sandbox scratch there",
            dir.display()
        )));
    }
    if md.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(dir.to_path_buf())
}

/// Removes everything inside `dir` (creating it if missing), whatever the entries' modes.
fn empty_dir(dir: &Path) -> std::io::Result<()> {
    match std::fs::read_dir(dir) {
        Ok(rd) => {
            for entry in rd {
                let path = entry?.path();
                airlock_sandbox::remove_tree(&path)?;
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir(dir),
        Err(e) => Err(e),
    }
}

/// The session's scratch, ready for a run: empty `upper`/`work`, and `layer` holding exactly
/// the current changeset (re-materialised only when its hash changed).
pub(crate) fn prepare_session_run(
    k: &ExecCtx<'_>,
) -> Result<(SessionScratch, airlock_stage::ChangesetSnapshot), String> {
    let snapshot = k.store.snapshot().map_err(|e| e.to_string())?;
    let base = scratch_base()
        .map_err(|e| format!("cannot create the sandbox's scratch directory: {e}"))?;
    let mut key = blake3::Hasher::new();
    key.update(k.root.as_os_str().as_bytes());
    key.update(b"\0");
    key.update(k.session().as_bytes());
    let dir = base.join(&key.finalize().to_hex()[..16]);
    let io = |what: &str, p: &Path, e: std::io::Error| {
        format!("cannot prepare the sandbox's {what} `{}`: {e}", p.display())
    };
    // A directory pruned between its creation and its lock is made again (twice at most: a
    // prune only takes directories idle for a day).
    let mut attempts = 0;
    let in_use = loop {
        attempts += 1;
        match std::fs::create_dir(&dir) {
            Ok(()) => prune_idle_scratch(&base, &dir, SCRATCH_MAX_IDLE),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io("scratch directory", &dir, e)),
        }
        match lock_in_use(&dir).map_err(|e| io("scratch lock", &dir, e))? {
            Some(f) => break f,
            None if attempts < 3 => continue,
            None => {
                return Err(io(
                    "scratch directory",
                    &dir,
                    std::io::Error::other("removed while in use"),
                ));
            }
        }
    };
    // The directory's mtime is its last use: pruning measures idleness by it.
    let _ = std::fs::File::open(&dir).and_then(|d| d.set_modified(std::time::SystemTime::now()));
    let scratch = SessionScratch {
        layer: dir.join("layer"),
        upper: dir.join("upper"),
        work: dir.join("work"),
        dir,
        _in_use: in_use,
    };
    scratch
        .clear_run_dirs()
        .map_err(|e| io("overlay directories", &scratch.upper, e))?;
    let key_file = scratch.dir.join("layer.key");
    let want = snapshot.hash.to_hex();
    let cached =
        std::fs::read_to_string(&key_file).is_ok_and(|k| k == want) && scratch.layer.is_dir();
    if !cached {
        // The key goes first and comes back last: a layer interrupted halfway is never reused.
        match std::fs::remove_file(&key_file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("layer key", &key_file, e)),
        }
        empty_dir(&scratch.layer).map_err(|e| io("staged layer", &scratch.layer, e))?;
        // The snapshot's blobs are read now: no collection meanwhile.
        let _pin = k
            .store
            .blobs()
            .pin()
            .map_err(|e| io("blob store", k.store.blobs().dir(), e))?;
        airlock_stage::layer::materialize_layer_over(
            &snapshot,
            k.store.blobs(),
            &scratch.layer,
            k.root,
        )
        .map_err(|e| format!("cannot materialise the staged changes for the sandbox: {e}"))?;
        std::fs::write(&key_file, &want).map_err(|e| io("layer key", &key_file, e))?;
    }
    Ok((scratch, snapshot))
}

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
    let home = exposure::home_exposure(Some(&scratch.dir.join("home.idx")));
    let cache = scratch.dir.join("sensitive.idx");
    let mut index = exposure::WorkspaceIndex::load(&cache);
    let found = index.scan(k.root);
    if let Err(e) = index.save(&cache) {
        tracing::warn!("cannot save the sensitive-file index: {e}");
    }
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
fn direct_argv(argv: Option<&[String]>, visible: &[PathBuf]) -> Option<Vec<String>> {
    use std::os::unix::fs::PermissionsExt;
    let argv = argv.filter(|a| !a.is_empty())?.to_vec();
    let name = argv.first()?;
    if name.contains('/') {
        return Some(argv);
    }
    if name.is_empty() || name == "." || name == ".." {
        return None;
    }
    let path = std::env::var_os("PATH")?;
    let found = std::env::split_paths(&path).any(|dir| {
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

/// Spool directory for outputs that overflow their in-memory cap.
pub(crate) fn spool_dir(k: &ExecCtx<'_>) -> PathBuf {
    k.root.join(".airlock").join("spool").join(k.session())
}

/// Runs whose spooled output is kept per session (a result names its spool files for the
/// operator); older ones are removed.
pub(crate) const SPOOL_KEEP_RUNS: usize = 4;
/// Bytes of spooled output kept per session across those runs (the newest run's are always
/// kept; each stream's spool is capped by the sandbox's `spool_bytes`).
pub(crate) const SPOOL_KEEP_BYTES: u64 = 256 << 20;
/// Marks a run directory whose result named its spool files.
const SPOOL_KEPT: &str = ".kept";

/// One run's spool directory, `<spool>/run-<ms since epoch>-<random>`. Unless [`RunSpool::keep`]
/// is called (the result shows the output and names the files), the directory goes when the run
/// ends, whatever the path out (error, cancel, panic). Then the session's spool is pruned to
/// the newest [`SPOOL_KEEP_RUNS`] kept runs within [`SPOOL_KEEP_BYTES`]; unmarked directories of
/// runs that died (crashed airlock) and stray files go too. Runs of one session are serialised
/// by the session lock, so no other run's directory is in use meanwhile.
pub(crate) struct RunSpool {
    pub(crate) dir: PathBuf,
    session_dir: PathBuf,
    kept: bool,
}

impl RunSpool {
    pub(crate) fn new(session_dir: PathBuf) -> std::io::Result<RunSpool> {
        std::fs::create_dir_all(&session_dir)?;
        // A workspace could ship `.airlock/spool/…` as a symlink: never write or prune through
        // one (the output's middle is then dropped, and said so).
        if !real_dirs_below_state(&session_dir) {
            return Err(std::io::Error::other(
                "the spool directory is not a real directory",
            ));
        }
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        let dir = tempfile::Builder::new()
            .prefix(&format!("run-{ms:016}-"))
            .tempdir_in(&session_dir)?
            .keep();
        Ok(RunSpool {
            dir,
            session_dir,
            kept: false,
        })
    }

    /// The result names this run's spool files: keep them (within the session's bounds).
    pub(crate) fn keep(&mut self) {
        if std::fs::write(self.dir.join(SPOOL_KEPT), b"").is_ok() {
            self.kept = true;
        }
    }
}

impl Drop for RunSpool {
    fn drop(&mut self) {
        if !self.kept {
            let _ = airlock_sandbox::remove_tree(&self.dir);
        }
        prune_spool(&self.session_dir, SPOOL_KEEP_RUNS, SPOOL_KEEP_BYTES);
    }
}

/// Keeps the newest `keep_runs` kept run directories of `dir` within `keep_bytes` (the newest
/// always), removing every other entry. Best effort.
pub(crate) fn prune_spool(dir: &Path, keep_runs: usize, keep_bytes: u64) {
    if !real_dirs_below_state(dir) {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut runs: Vec<(std::ffi::OsString, PathBuf)> = Vec::new();
    for e in rd.flatten() {
        let (name, path) = (e.file_name(), e.path());
        let is_run = name.as_bytes().starts_with(b"run-")
            && e.file_type().is_ok_and(|t| t.is_dir())
            && path.join(SPOOL_KEPT).exists();
        if is_run {
            runs.push((name, path));
        } else {
            // A run that never finished (its airlock died), or anything else: not ours to keep.
            let _ = airlock_sandbox::remove_tree(&path);
        }
    }
    // Names start with a fixed-width timestamp: newest last.
    runs.sort();
    let mut bytes = 0u64;
    for (i, (_, path)) in runs.iter().rev().enumerate() {
        bytes += dir_bytes(path);
        if i > 0 && (i >= keep_runs || bytes > keep_bytes) {
            let _ = airlock_sandbox::remove_tree(path);
        }
    }
}

/// True when `dir` and its ancestors up to the `.airlock` directory are real directories (no
/// symlink among them).
fn real_dirs_below_state(dir: &Path) -> bool {
    for d in dir.ancestors() {
        if !std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir()) {
            return false;
        }
        if d.file_name().is_some_and(|n| n == ".airlock") {
            return true;
        }
    }
    false
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
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
    let forced_degraded = std::env::var("AIRLOCK_SANDBOX").as_deref() == Ok("degraded");
    if forced_degraded && !k.allow_degraded {
        return failure(
            "AIRLOCK_SANDBOX=degraded asks for no kernel isolation, which needs the operator's --allow-degraded; the command did not run.",
            Status::Failed,
        );
    }
    airlock_sandbox::timing::mark("session lock");
    let (dirs, snapshot) = match prepare_session_run(k) {
        Ok(x) => x,
        Err(e) => return failure(e, Status::Failed),
    };
    airlock_sandbox::timing::mark("scratch dirs and layer");
    let exposure = run_exposure(k, &dirs, &snapshot);
    // This run's spool: removed when the run ends unless the result names its files.
    let mut spool = RunSpool::new(spool_dir(k)).ok();
    let argv = match direct_argv(p.args.argv.as_deref(), &exposure.home_binds) {
        Some(argv) => argv.into_iter().map(OsString::from).collect(),
        None => vec![
            OsString::from("/bin/bash"),
            OsString::from("-c"),
            OsString::from(script.script()),
        ],
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
        (OsString::from("CARGO_NET_OFFLINE"), OsString::from("true")),
        // Read-only git commands (`status`, `diff`) must not rewrite `.git/index` for a stat
        // refresh: every change under `.git` is a host-exec change that apply refuses.
        (OsString::from("GIT_OPTIONAL_LOCKS"), OsString::from("0")),
    ];
    spec.cancel = Some(ctx.cancel.flag());
    spec.warm_host = Some(dirs.dir.join("host.sock"));
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
    let outcome = match run_sandboxed(k, &spec, forced_degraded) {
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
        match harvest_into_store(k, &dirs.upper, &exposure.workspace_masked) {
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
    if outcome.warm {
        out["warm_host"] = json!(true);
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
    match airlock_sandbox::NamespaceBackend::new().run(spec) {
        Ok(o) => Ok(o),
        Err(e) => match airlock_sandbox::probe() {
            Err(missing) if k.allow_degraded => {
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
///
/// Nothing at or below a `masked` path (workspace-relative: a secret the command saw as empty)
/// is staged, and neither is the deletion or replacement of a directory holding one: the real
/// secret is never changed because the command saw a mask in its place.
pub(crate) fn harvest_into_store(
    k: &ExecCtx<'_>,
    upper: &Path,
    masked: &[PathBuf],
) -> Result<Vec<String>, String> {
    let changes = airlock_sandbox::harvest(upper).map_err(|e| e.to_string())?;
    // The blobs written below are named only when the batch commits: no collection meanwhile.
    let _pin = k
        .store
        .blobs()
        .pin()
        .map_err(|e| format!("locking the blob store: {e}"))?;
    let mut summary = Vec::new();
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
    );
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
            UpperChange::Unsupported { .. } => false,
        };
        if holds_mask && replaces {
            summary.push(format!(
                "! {rel} (holds a masked sensitive file: its removal or replacement was not staged)"
            ));
            continue;
        }
        let is_dir = matches!(change, UpperChange::Dir { .. });
        let session_local = ignore.is_ignored(&rel, is_dir);
        let sensitive = airlock_policy::jail::sensitive_rule(&rel).map(|d| d.reason);
        // What the host would run by itself (a `.git` entry, `.envrc`, …): flagged, so apply
        // refuses it unless the operator names it. Any other flag takes precedence.
        let host_exec = if session_local {
            None
        } else {
            shapes.classify(&rel).map(|(h, _)| host_exec::flag_for(h))
        };
        let on_disk = std::fs::symlink_metadata(k.root.join(rel.as_path())).ok();
        let mut dropped = None;
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
                    for gone in lower_entries_below(k, &rel) {
                        let flagged = host_exec::flag(&gone);
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
            let local = if session_local {
                " (session-local)"
            } else {
                ""
            };
            let flag = mark
                .as_ref()
                .map(|m| format!(" (flagged: {m})"))
                .unwrap_or_default();
            let bits = dropped
                .map(|b| format!(" ({b} dropped: airlock never applies setuid or setgid bits)"))
                .unwrap_or_default();
            summary.push(format!("{code} {rel}{local}{flag}{bits}"));
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

/// Which of setuid and setgid `mode` carries, in words, or `None`.
fn special_bits(mode: u32) -> Option<&'static str> {
    match (mode & 0o4000 != 0, mode & 0o2000 != 0) {
        (true, true) => Some("setuid and setgid bits"),
        (true, false) => Some("setuid bit"),
        (false, true) => Some("setgid bit"),
        (false, false) => None,
    }
}

fn lower_entries_below(k: &ExecCtx<'_>, dir: &RelPath) -> Vec<RelPath> {
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
