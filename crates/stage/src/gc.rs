//! Garbage collection of the blob store: blobs that nothing can read again are removed.
//!
//! A blob is **live** when any of these names it:
//! - a staged entry of any session (`.airlock/sessions/*.db`): the content of a write, or the
//!   base a path was staged against (diffs show it);
//! - an apply or undo the journal has not resolved (`pending` or `unknown`): its post-images.
//!
//! Nothing else reads the store. Undo restores pre-images from the journal's backups
//! (`.airlock/backups/<record>/`), never from blobs; recovery rolls back from the same backups or
//! finishes bookkeeping; verdicts bind a changeset hash, not blobs; the sandbox's staged layer is
//! a copy.
//!
//! **Concurrency.** Blobs are written before the entry naming them is committed. Every writer
//! holds a [`BlobPin`](crate::blobs::BlobPin) (a shared `flock` on the store's lock file) from
//! its first blob write until its entries are committed, and readers of a snapshot's blobs
//! (apply, the sandbox layer) hold one while they read. The collector takes the same lock
//! exclusively without waiting: if anyone holds a pin it does nothing and says so. Under the
//! exclusive lock no write is in flight, so the live set it reads is complete, and no pin can be
//! taken until it is done. A time-based grace period would not do: a writer finding its blob
//! already present reuses it without rewriting it, however old it is.
//!
//! **Crashes.** The collector only unlinks unreferenced blob files, one at a time, after the live
//! set is known; an interrupted collection leaves some garbage for the next one and never a
//! dangling entry. Any session database or journal it cannot read makes it stop before removing
//! anything (fail closed).

use crate::blobs::BlobStore;
use crate::model::{Change, ContentHash, Fingerprint};
use crate::store::STATE_DIR;
use rusqlite::{Connection, OpenFlags};
use serde::Serialize;
use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What a collection did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GcReport {
    /// Blobs removed.
    pub removed: usize,
    /// Bytes they held.
    pub removed_bytes: u64,
    /// Blobs kept because something names them.
    pub kept: usize,
    /// Leftover temp files of interrupted blob writes, removed.
    pub removed_temps: usize,
    /// The collection stopped at its time budget; the rest waits for the next one.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unfinished: bool,
    /// Why nothing was collected, when the collection did not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

/// Why a collection stopped before removing anything.
#[derive(Debug, thiserror::Error)]
pub enum GcError {
    /// A file of the state directory could not be read or removed.
    #[error("cannot collect the blob store: `{path}`: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A session database or the journal could not be read; nothing was removed.
    #[error(
        "cannot collect the blob store: `{path}` could not be read ({detail}); nothing was removed"
    )]
    Unreadable {
        /// The database.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> GcError + '_ {
    move |source| GcError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Remove every blob of `workspace`'s store that no session and no unresolved journal record
/// names (see the module docs). Does nothing, and says why in [`GcReport::skipped`], while
/// another process holds a pin.
pub fn collect(workspace: &Path) -> Result<GcReport, GcError> {
    collect_within(workspace, None)
}

/// [`collect`] that stops removing once `budget` has passed (unlinking is the cost: tens of
/// thousands of blobs can take seconds on a slow disk); the report says so in
/// [`GcReport::unfinished`], and the next collection goes on where this one stopped.
pub fn collect_within(workspace: &Path, budget: Option<Duration>) -> Result<GcReport, GcError> {
    let deadline = budget.map(|b| Instant::now() + b);
    let state = workspace.join(STATE_DIR);
    let dir = state.join("blobs");
    match fs::symlink_metadata(&dir) {
        Ok(md) if md.is_dir() => {}
        Ok(_) => {
            return Err(GcError::Io {
                path: dir,
                source: io::Error::new(io::ErrorKind::InvalidData, "not a directory"),
            });
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(GcReport::default()),
        Err(e) => return Err(io_err(&dir)(e)),
    }
    let store = BlobStore::open(&dir).map_err(io_err(&dir))?;
    let Some(_lock) = store.try_collect_lock().map_err(io_err(&dir))? else {
        return Ok(GcReport {
            skipped: Some(
                "another airlock process is staging, applying or preparing a sandbox; nothing was collected"
                    .into(),
            ),
            ..GcReport::default()
        });
    };
    let live = live_set(&state)?;
    sweep(&dir, &live, deadline)
}

/// [`collect`] limited to `candidates` (e.g. the blobs of a changeset just applied): the same
/// live set and locking, without walking the rest of the store, so its cost is proportional to
/// the candidates.
pub fn collect_some(
    workspace: &Path,
    candidates: &HashSet<ContentHash>,
) -> Result<GcReport, GcError> {
    let state = workspace.join(STATE_DIR);
    let dir = state.join("blobs");
    if candidates.is_empty() || !dir.is_dir() {
        return Ok(GcReport::default());
    }
    let store = BlobStore::open(&dir).map_err(io_err(&dir))?;
    let Some(_lock) = store.try_collect_lock().map_err(io_err(&dir))? else {
        return Ok(GcReport {
            skipped: Some(
                "another airlock process is staging, applying or preparing a sandbox; nothing was collected"
                    .into(),
            ),
            ..GcReport::default()
        });
    };
    let live = live_set(&state)?;
    let mut report = GcReport::default();
    for hash in candidates {
        if live.contains(hash) {
            report.kept += 1;
            continue;
        }
        let path = store.path(hash);
        let size = fs::symlink_metadata(&path).map(|m| m.len()).unwrap_or(0);
        if remove(&path)? {
            report.removed += 1;
            report.removed_bytes += size;
        }
    }
    Ok(report)
}

/// The blobs an entry names: its content and its base.
pub fn blobs_of(entries: &[crate::model::StagedEntry]) -> HashSet<ContentHash> {
    let mut out = HashSet::new();
    for e in entries {
        if let Change::Write { content, .. } = &e.change {
            out.insert(*content);
        }
        if let Fingerprint::File { hash, .. } = &e.base {
            out.insert(*hash);
        }
    }
    out
}

/// Every blob hash named by a session's entries or an unresolved journal record.
fn live_set(state: &Path) -> Result<HashSet<ContentHash>, GcError> {
    let mut live = HashSet::new();
    let sessions = state.join("sessions");
    let rd = match fs::read_dir(&sessions) {
        Ok(rd) => Some(rd),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_err(&sessions)(e)),
    };
    for entry in rd.into_iter().flatten() {
        let entry = entry.map_err(io_err(&sessions))?;
        let path = entry.path();
        if path.extension().is_none_or(|x| x != "db") {
            continue;
        }
        let rows = read_rows(&path, "SELECT change, base FROM entries")?;
        for (change, base) in rows {
            let bad = |e: serde_json::Error| GcError::Unreadable {
                path: path.clone(),
                detail: format!("an entry cannot be decoded: {e}"),
            };
            if let Change::Write { content, .. } = serde_json::from_str(&change).map_err(bad)? {
                live.insert(content);
            }
            if let Fingerprint::File { hash, .. } = serde_json::from_str(&base).map_err(bad)? {
                live.insert(hash);
            }
        }
    }
    let journal = state.join("journal.db");
    if journal.exists() {
        let rows = read_rows(
            &journal,
            "SELECT f.pre, f.post FROM record_files f JOIN records r ON r.id = f.record \
             WHERE r.state IN ('pending', 'unknown')",
        )?;
        for (pre, post) in rows {
            for fp in [pre, post] {
                let fp: Fingerprint =
                    serde_json::from_str(&fp).map_err(|e| GcError::Unreadable {
                        path: journal.clone(),
                        detail: format!("a record cannot be decoded: {e}"),
                    })?;
                if let Fingerprint::File { hash, .. } = fp {
                    live.insert(hash);
                }
            }
        }
    }
    Ok(live)
}

/// All rows of a two-text-column query on an existing database.
fn read_rows(path: &Path, sql: &str) -> Result<Vec<(String, String)>, GcError> {
    let unreadable = |e: rusqlite::Error| GcError::Unreadable {
        path: path.to_path_buf(),
        detail: e.to_string(),
    };
    // Read-write without create: a WAL database needs its shared-memory index, and a database
    // removed meanwhile must not be recreated empty.
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(unreadable)?;
    conn.busy_timeout(Duration::from_secs(30))
        .map_err(unreadable)?;
    // A database being created has no schema yet, hence no entries (its first entries will be
    // staged under a pin).
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(unreadable)?;
    if version == 0 {
        return Ok(Vec::new());
    }
    let mut stmt = conn.prepare(sql).map_err(unreadable)?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .map_err(unreadable)?;
    rows.collect::<Result<Vec<_>, _>>().map_err(unreadable)
}

/// Remove the blobs of `dir` not in `live`, and leftover temps of interrupted writes (no write
/// is in flight while the collector holds the lock).
fn sweep(
    dir: &Path,
    live: &HashSet<ContentHash>,
    deadline: Option<Instant>,
) -> Result<GcReport, GcError> {
    let mut report = GcReport::default();
    for fan in fs::read_dir(dir).map_err(io_err(dir))? {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            report.unfinished = true;
            break;
        }
        let fan = fan.map_err(io_err(dir))?;
        let name = fan.file_name();
        let Some(prefix) = name.to_str().filter(|n| is_hex(n, 2)) else {
            continue;
        };
        if !fan.file_type().map_err(io_err(dir))?.is_dir() {
            continue;
        }
        let sub = fan.path();
        for blob in fs::read_dir(&sub).map_err(io_err(&sub))? {
            let blob = blob.map_err(io_err(&sub))?;
            let path = blob.path();
            let ft = blob.file_type().map_err(io_err(&path))?;
            if !ft.is_file() {
                continue;
            }
            let name = blob.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with(".tmp") {
                // `tempfile`'s names: a blob write that never reached its rename.
                remove(&path)?;
                report.removed_temps += 1;
                continue;
            }
            let Some(hash) = ContentHash::from_hex(name).filter(|_| name.starts_with(prefix))
            else {
                continue;
            };
            if live.contains(&hash) {
                report.kept += 1;
                continue;
            }
            let size = blob.metadata().map(|m| m.len()).unwrap_or(0);
            if remove(&path)? {
                report.removed += 1;
                report.removed_bytes += size;
            }
        }
    }
    Ok(report)
}

/// Unlink `path`; `false` if it was already gone.
fn remove(path: &Path) -> Result<bool, GcError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_err(path)(e)),
    }
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}
