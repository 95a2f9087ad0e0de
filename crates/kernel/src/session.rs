//! A session's run state outside the workspace: the session lock that serialises its
//! commands, its scratch directories (the materialised changeset layer, the overlay's upper and
//! work directories, the warm sandbox host's socket), pruning of idle scratch, and the per-run
//! spool of outputs that overflow their in-memory cap.
//!
//! The executors (`exec::shell`, `exec::workflow`) take a [`SessionRun`] lock, then
//! [`prepare_session_run`], then hand the directories to the sandbox.

use crate::api::Settings;
use airlock_stage::store::Store;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why a session's run could not start: its lock or its scratch could not be had. The
/// executors report it as the call's failure (its Display is the message).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionError {
    /// The session's lock directory cannot be created.
    #[error("cannot create `{}`: {source}", dir.display())]
    LockDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    /// The session's lock file cannot be opened.
    #[error("cannot open the session lock `{}`: {source}", path.display())]
    LockOpen {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The session's lock cannot be taken.
    #[error("cannot lock the session `{session}`: {source}")]
    Lock {
        session: String,
        source: rustix::io::Errno,
    },
    /// The changeset cannot be read.
    #[error("{0}")]
    Snapshot(#[from] airlock_stage::store::StageError),
    /// No private directory for the scratch can be made.
    #[error("cannot create the sandbox's scratch directory: {0}")]
    ScratchBase(#[source] std::io::Error),
    /// A part of the session's scratch cannot be prepared.
    #[error("cannot prepare the sandbox's {what} `{}`: {source}", path.display())]
    Prepare {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// The changeset cannot be materialised as the sandbox's staged layer.
    #[error("cannot materialise the staged changes for the sandbox: {0}")]
    Materialise(#[source] std::io::Error),
}

impl From<SessionError> for String {
    /// The message a failed call reports.
    fn from(e: SessionError) -> String {
        e.to_string()
    }
}

/// A session's scratch directories, kept between its commands (commands of one session are
/// serialised by the session lock, so one set is enough): `layer`, the materialised changeset,
/// reused while the changeset's hash is unchanged (`layer.key`); `upper` and `work`, the
/// overlay's, left empty by every run; and `host.sock`, the session's warm sandbox
/// host. They live outside the workspace (overlayfs refuses nested layers), in a 0700
/// directory of the caller's ([`Settings`]): `$AIRLOCK_RUN_DIR`, else
/// `$XDG_RUNTIME_DIR/airlock`, else `$TMPDIR/airlock-<uid>`.
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

/// The session's warm sandbox host listens on this socket in its scratch directory.
const WARM_HOST_SOCKET: &str = "host.sock";

/// Held by a live warm host (the sandbox's host takes it next to its socket); pruning passes
/// a scratch directory by while it is held.
const WARM_HOST_LOCK: &str = "host.sock.lock";

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

/// What a clean-up removed: directories, the bytes their files held, and how many it passed by
/// because they are in use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Reclaimed {
    /// Directories removed.
    pub removed: usize,
    /// Bytes the files in them held.
    pub bytes: u64,
    /// Directories left because a run or a live warm host holds them.
    pub in_use: usize,
}

/// Removes the scratch directories under `base` idle for `max_idle` or longer, except `keep`
/// and any that a run (shared [`IN_USE`] lock) or a live warm host (`host.sock.lock`) holds,
/// whatever their depth ([`airlock_sandbox::tree`]). Best effort: whatever cannot be removed
/// now is left for a later prune.
pub(crate) fn prune_idle_scratch(base: &Path, keep: &Path, max_idle: Duration) -> Reclaimed {
    let mut done = Reclaimed::default();
    let Ok(entries) = std::fs::read_dir(base) else {
        return done;
    };
    let now = std::time::SystemTime::now();
    let remove = |path: &Path, done: &mut Reclaimed| {
        if let Ok(bytes) = airlock_sandbox::tree::remove_tree_counted(path) {
            done.removed += 1;
            done.bytes += bytes;
        }
    };
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
            remove(&path, &mut done);
            continue;
        }
        let idle = md
            .modified()
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .unwrap_or_default();
        if idle < max_idle {
            done.in_use += 1;
            continue;
        }
        let (Some(_run), Some(_host)) = (
            try_lock_exclusive(&path.join(IN_USE)),
            try_lock_exclusive(&path.join(WARM_HOST_LOCK)),
        ) else {
            done.in_use += 1;
            continue;
        };
        let mut doomed = OsString::from(PRUNING);
        doomed.push(&name);
        let doomed = base.join(doomed);
        if std::fs::rename(&path, &doomed).is_ok() {
            tracing::info!(dir = %path.display(), "removing idle sandbox scratch");
            remove(&doomed, &mut done);
        }
    }
    done
}

/// A scratch directory younger than this is never collected by `gc`: it may be between its
/// creation and its run's lock.
pub(crate) const GC_SCRATCH_MIN_IDLE: Duration = Duration::from_secs(60);

/// `gc`'s pass over the sandbox scratch of every session of this user (`settings` choose the
/// directory): each scratch directory no run and no live warm host holds, idle for
/// [`GC_SCRATCH_MIN_IDLE`], goes (it holds derived data only; a later run makes it again).
pub(crate) fn collect_scratch(settings: &Settings) -> Reclaimed {
    match scratch_base(settings) {
        Ok(base) => prune_idle_scratch(&base, Path::new(""), GC_SCRATCH_MIN_IDLE),
        Err(_) => Reclaimed::default(),
    }
}

/// `gc`'s pass over the workspace's spools (`.airlock/spool/<session>/`): a session without a
/// changeset database loses its whole spool; every other session's spool is pruned as after
/// its runs ([`prune_spool`]: unfinished runs go, kept ones within the bounds stay), unless a
/// command of the session holds its run lock now.
pub(crate) fn collect_spools(root: &Path) -> Reclaimed {
    let mut done = Reclaimed::default();
    let state = root.join(".airlock");
    let spool = state.join("spool");
    if !real_dirs_below_state(&spool) {
        return done;
    }
    let Ok(rd) = std::fs::read_dir(&spool) else {
        return done;
    };
    for e in rd.flatten() {
        let (name, path) = (e.file_name(), e.path());
        let mut db = name.clone();
        db.push(".db");
        let mut lock = name.clone();
        lock.push(".lock");
        let Some(_held) = try_lock_exclusive(&state.join("locks").join(&lock)) else {
            done.in_use += 1;
            continue;
        };
        if state.join("sessions").join(&db).is_file() && e.file_type().is_ok_and(|t| t.is_dir()) {
            let pruned = prune_spool(&path, SPOOL_KEEP_RUNS, SPOOL_KEEP_BYTES);
            done.removed += pruned.removed;
            done.bytes += pruned.bytes;
        } else if let Ok(bytes) = airlock_sandbox::tree::remove_tree_counted(&path) {
            done.removed += 1;
            done.bytes += bytes;
        }
    }
    done
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
    /// The socket of the session's warm sandbox host (started on first use, reused by later
    /// runs of the session, gone with the scratch directory when it is pruned).
    pub(crate) fn warm_host_socket(&self) -> PathBuf {
        self.dir.join(WARM_HOST_SOCKET)
    }

    /// Empties the upper layer (after a harvest, or before a run after a crash). The sandbox
    /// resets `work` itself before it mounts (and a warm host right after each run).
    pub(crate) fn clear_run_dirs(&self) -> std::io::Result<()> {
        empty_dir(&self.upper)?;
        // A verification's own scratch (`verify/<run>`), left behind only by a crash.
        let verify = self.dir.join("verify");
        if verify.is_dir() {
            empty_dir(&verify)?;
        }
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
fn scratch_base(settings: &Settings) -> std::io::Result<PathBuf> {
    let uid = rustix::process::geteuid().as_raw();
    // The operator's choice is binding; the runtime directory is only a preference.
    if let Some(d) = &settings.run_dir {
        return private_dir(d, uid);
    }
    if let Some(x) = settings.runtime_dir.as_ref().filter(|x| x.is_dir())
        && let Ok(dir) = private_dir(&x.join("airlock"), uid)
    {
        return Ok(dir);
    }
    private_dir(&settings.temp_dir.join(format!("airlock-{uid}")), uid)
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

/// Removes everything inside `dir` (creating it if missing), whatever the entries' modes and
/// however deep a command built its tree (by directory handles, never by a path past
/// `PATH_MAX`: [`airlock_sandbox::tree`]).
fn empty_dir(dir: &Path) -> std::io::Result<()> {
    match airlock_sandbox::tree::empty_dir_counted(dir) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir(dir),
        Err(e) => Err(e),
    }
}

/// Where a session's run takes place: the workspace, the session and its store, and the front
/// end's settings (which choose the scratch directory).
pub(crate) struct RunPlace<'k> {
    /// The workspace root (canonical).
    pub(crate) root: &'k Path,
    /// The session name.
    pub(crate) session: &'k str,
    /// The session's staging store.
    pub(crate) store: &'k Store,
    /// What the front end read from its environment.
    pub(crate) settings: &'k Settings,
}

/// The session's scratch, ready for a run: empty `upper`/`work`, and `layer` holding exactly
/// the current changeset (re-materialised only when its hash changed).
pub(crate) fn prepare_session_run(
    k: &RunPlace<'_>,
) -> Result<(SessionScratch, airlock_stage::ChangesetSnapshot), SessionError> {
    let snapshot = k.store.snapshot()?;
    let base = scratch_base(k.settings).map_err(SessionError::ScratchBase)?;
    let mut key = blake3::Hasher::new();
    key.update(k.root.as_os_str().as_bytes());
    key.update(b"\0");
    key.update(k.session.as_bytes());
    let dir = base.join(&key.finalize().to_hex()[..16]);
    let io = |what: &'static str, p: &Path, e: std::io::Error| SessionError::Prepare {
        what,
        path: p.to_path_buf(),
        source: e,
    };
    // A directory pruned between its creation and its lock is made again (twice at most: a
    // prune only takes directories idle for a day).
    let mut attempts = 0;
    let in_use = loop {
        attempts += 1;
        match std::fs::create_dir(&dir) {
            Ok(()) => {
                prune_idle_scratch(&base, &dir, SCRATCH_MAX_IDLE);
            }
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
        .map_err(SessionError::Materialise)?;
        std::fs::write(&key_file, &want).map_err(|e| io("layer key", &key_file, e))?;
    }
    Ok((scratch, snapshot))
}

/// Spool directory for outputs that overflow their in-memory cap.
pub(crate) fn spool_dir(k: &RunPlace<'_>) -> PathBuf {
    k.root.join(".airlock").join("spool").join(k.session)
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
        let _ = prune_spool(&self.session_dir, SPOOL_KEEP_RUNS, SPOOL_KEEP_BYTES);
    }
}

/// Keeps the newest `keep_runs` kept run directories of `dir` within `keep_bytes` (the newest
/// always), removing every other entry, whatever its depth. Best effort; says what went.
pub(crate) fn prune_spool(dir: &Path, keep_runs: usize, keep_bytes: u64) -> Reclaimed {
    let mut done = Reclaimed::default();
    if !real_dirs_below_state(dir) {
        return done;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return done;
    };
    let mut remove = |path: &Path| {
        if let Ok(bytes) = airlock_sandbox::tree::remove_tree_counted(path) {
            done.removed += 1;
            done.bytes += bytes;
        }
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
            remove(&path);
        }
    }
    // Names start with a fixed-width timestamp: newest last.
    runs.sort();
    let mut bytes = 0u64;
    for (i, (_, path)) in runs.iter().rev().enumerate() {
        bytes += dir_bytes(path);
        if i > 0 && (i >= keep_runs || bytes > keep_bytes) {
            remove(path);
        }
    }
    done
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
