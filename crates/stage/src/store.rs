//! The changeset store: one SQLite database per session under `<workspace>/.airlock/sessions/`,
//! contents in the shared [`BlobStore`]. It never touches the working tree.
//!
//! Invariants kept on every write, each inside one `BEGIN IMMEDIATE` transaction (two processes
//! on the same session serialize on SQLite's lock instead of failing):
//! - the base fingerprint of a path is taken when it is first touched and kept afterwards;
//! - a change that leaves a path as it was underneath (content and mode, link target, a directory
//!   that exists) removes the entry rather than staging a no-op;
//! - a file, symlink or delete at `p` drops the staged entries below `p`;
//! - a `Delete` of a directory with entries staged below it means "the old contents are gone and
//!   the entries below describe the new directory" (an overlay opaque directory);
//! - as in git, a directory that exists only through the entries staged below it disappears
//!   with them; `stage_dir` makes one explicit.

use crate::blobs::BlobStore;
use crate::model::{
    Change, ChangesetHash, ChangesetSnapshot, ContentHash, Fingerprint, Flag, NotVerified,
    SnapshotHasher, StagedEntry, StagedNode, Verdict, VerdictRecord, VerdictSource,
    VerifiedChangeset,
};
use airlock_types::RelPath;
use cap_std::ambient_authority;
use cap_std::fs::{Dir, MetadataExt};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use std::cell::{Cell, RefCell};
use std::ffi::OsStr;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

pub use crate::STATE_DIR;
/// Schema version stored in `PRAGMA user_version`.
const SCHEMA_VERSION: i64 = 3;
/// How long a writer waits for another process holding the session's lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest accepted session name.
const MAX_SESSION_NAME: usize = 64;

/// Default ceiling on the bytes a session's changeset may hold (the sizes of its staged
/// writes): 2 GiB. The operator sets another with [`Store::set_max_staged_bytes`].
pub const DEFAULT_MAX_STAGED_BYTES: u64 = 2 << 30;

/// The sum of the sizes of a changeset's staged writes.
const STAGED_BYTES_SQL: &str = "SELECT COALESCE(SUM(json_extract(change, '$.size')), 0) FROM entries WHERE json_extract(change, '$.op') = 'write'";

/// This connection's running total of [`STAGED_BYTES_SQL`]: computed once, then kept by
/// triggers on every write this connection makes to `entries` (temporary objects: they belong
/// to the connection, never to the file), and computed again when another connection has
/// committed since (`PRAGMA data_version`). A replaced row fires its delete trigger
/// (`recursive_triggers`). So a write checks the ceiling in O(1), not O(entries).
const STAGED_TOTAL_SQL: &str = "
PRAGMA recursive_triggers = ON;
CREATE TEMP TABLE IF NOT EXISTS staged_total (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    bytes INTEGER NOT NULL,
    data_version INTEGER NOT NULL
);
CREATE TEMP TRIGGER IF NOT EXISTS staged_total_insert AFTER INSERT ON main.entries
WHEN json_extract(NEW.change, '$.op') = 'write'
BEGIN UPDATE staged_total SET bytes = bytes + json_extract(NEW.change, '$.size'); END;
CREATE TEMP TRIGGER IF NOT EXISTS staged_total_delete AFTER DELETE ON main.entries
WHEN json_extract(OLD.change, '$.op') = 'write'
BEGIN UPDATE staged_total SET bytes = bytes - json_extract(OLD.change, '$.size'); END;
CREATE TEMP TRIGGER IF NOT EXISTS staged_total_update AFTER UPDATE OF change ON main.entries
BEGIN UPDATE staged_total SET bytes = bytes
    - COALESCE(CASE WHEN json_extract(OLD.change, '$.op') = 'write' THEN json_extract(OLD.change, '$.size') END, 0)
    + COALESCE(CASE WHEN json_extract(NEW.change, '$.op') = 'write' THEN json_extract(NEW.change, '$.size') END, 0);
END;
";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS entries (
    path BLOB PRIMARY KEY NOT NULL,
    change TEXT NOT NULL,
    base TEXT NOT NULL,
    session_local INTEGER NOT NULL,
    flagged TEXT
) STRICT;
CREATE TABLE IF NOT EXISTS verdict (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    changeset TEXT NOT NULL,
    verdict TEXT NOT NULL,
    detail TEXT NOT NULL,
    provenance TEXT,
    seal TEXT
) STRICT;
";

/// Why a staging operation failed. Every variant names the path or file involved.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// The session name is not usable as a file name.
    #[error(
        "the session name `{0}` is invalid: use 1 to 64 letters, digits, `_`, `-` or `.`, not starting with `.` or `-`"
    )]
    InvalidSession(String),
    /// A filesystem operation failed.
    #[error("could not {action} `{path}`: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path involved.
        path: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The database file cannot be opened as a changeset.
    #[error(
        "the changeset database `{path}` is unreadable or corrupt ({detail}); move it aside to start a new changeset"
    )]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },
    /// A database operation failed.
    #[error("the changeset database `{path}` failed: {source}")]
    Db {
        /// The database file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: rusqlite::Error,
    },
    /// The path is absent from the workspace and the changeset.
    #[error("`{0}` does not exist in the workspace or the changeset")]
    NotFound(String),
    /// The path is a directory where a file was expected.
    #[error("`{0}` is a directory")]
    IsADirectory(String),
    /// The path exists and is not a directory.
    #[error("`{0}` already exists and is not a directory")]
    AlreadyExists(String),
    /// The path lies in airlock's own state directory.
    #[error("`{0}` is inside `.airlock/`, airlock's own state directory, and cannot be staged")]
    Reserved(String),
    /// A symlink's target leaves the workspace.
    #[error("`{path}` is a symlink that leads outside the workspace (to `{target}`)")]
    SymlinkEscape {
        /// The link.
        path: String,
        /// Its target.
        target: String,
    },
    /// Too many symlinks were followed.
    #[error("too many levels of symbolic links while resolving `{0}`")]
    SymlinkLoop(String),
    /// The path is not a directory where one was expected.
    #[error("`{0}` is not a directory")]
    NotADirectory(String),
    /// The path is neither a regular file nor a symlink to one.
    #[error("`{0}` is not a regular file")]
    NotAFile(String),
    /// An ancestor of the path is a file, a symlink or something else that is not a directory.
    #[error("cannot stage `{path}`: `{parent}` is not a directory")]
    ParentNotDir {
        /// The path being staged.
        path: String,
        /// The ancestor in the way.
        parent: String,
    },
    /// A directory deleted in this changeset cannot be recreated empty.
    #[error(
        "cannot recreate the directory `{0}` deleted in this changeset; stage files below it instead"
    )]
    RecreateDeletedDir(String),
    /// A staged write names content the blob store does not hold.
    #[error("cannot stage `{path}`: its content {hash} is missing from the blob store")]
    MissingBlob {
        /// The path being staged.
        path: String,
        /// The missing content hash.
        hash: String,
    },
    /// A stored entry cannot be decoded.
    #[error("the staged entry for `{path}` cannot be decoded ({detail})")]
    BadEntry {
        /// The entry's path.
        path: String,
        /// What was wrong.
        detail: String,
    },
    /// The changeset has no passing verdict for its current hash.
    #[error(transparent)]
    NotVerified(#[from] NotVerified),
    /// A batch would take the changeset's staged bytes past the session's ceiling; nothing of
    /// it was staged.
    #[error(
        "staging this would bring the session's staged contents to {after} bytes, over its ceiling of {limit} bytes ({before} bytes are staged now); nothing of it was staged. `discard` drops the session's staged changes, or the operator raises the ceiling with `--max-staged BYTES` or `[limits] max_staged_bytes` in the user config"
    )]
    OverCeiling {
        /// The ceiling, in bytes.
        limit: u64,
        /// Bytes staged before the batch.
        before: u64,
        /// Bytes the batch would have left staged.
        after: u64,
    },
    /// The changeset changed between the apply and the clean-up after it.
    #[error(
        "the changeset changed after it was applied (applied {applied}, now {current}); its entries were kept"
    )]
    ChangedSinceApply {
        /// The applied snapshot's hash.
        applied: String,
        /// The current hash.
        current: String,
    },
}

impl StageError {
    pub(crate) fn io(action: &'static str, path: &RelPath, source: io::Error) -> StageError {
        StageError::Io {
            action,
            path: path.display(),
            source,
        }
    }
}

/// One staging operation, for [`Store::stage_batch`].
#[derive(Debug, Clone)]
pub enum StageOp {
    /// Write a file; `mode: None` keeps the staged or base mode, or uses `0o644`.
    Write {
        /// The path.
        path: RelPath,
        /// The new content.
        content: Vec<u8>,
        /// Permission bits.
        mode: Option<u32>,
    },
    /// Delete a file, symlink or directory (strict: the path must exist in the merged view).
    Delete {
        /// The path.
        path: RelPath,
    },
    /// Create a symbolic link.
    Symlink {
        /// The path.
        path: RelPath,
        /// Link target bytes.
        target: Vec<u8>,
        /// Why the link is flagged, if it is.
        flagged: Option<Flag>,
    },
    /// Create a directory.
    Dir {
        /// The path.
        path: RelPath,
        /// Permission bits.
        mode: u32,
    },
    /// Move a file or symlink (delete `from`, write `to` with the same content and mode).
    Move {
        /// Source.
        from: RelPath,
        /// Destination.
        to: RelPath,
    },
    /// The general form used by the sandbox harvest: any change, lenient about what is there.
    /// A `Change::Write` must name content already in the blob store; it may have been stored
    /// with [`BlobStore::put_deferred`], as the batch flushes the blob store before it commits.
    Entry {
        /// The path.
        path: RelPath,
        /// The change.
        change: Change,
        /// Ignored by the workspace's ignore rules.
        session_local: bool,
        /// Why the entry is flagged, if it is.
        flagged: Option<Flag>,
    },
}

/// A session's changeset. `Send + Sync`; one per (workspace, session).
#[derive(Debug)]
pub struct Store {
    workspace: PathBuf,
    session: String,
    db_path: PathBuf,
    ws: Dir,
    blobs: BlobStore,
    conn: Mutex<Connection>,
    /// The ceiling on the changeset's staged bytes ([`DEFAULT_MAX_STAGED_BYTES`]).
    max_staged: AtomicU64,
}

impl Store {
    /// Open (creating if needed) the changeset of `session` in `workspace`. Creates `.airlock/`
    /// with a `.gitignore` of `*` so the state directory never shows up in the project.
    pub fn open(workspace: &Path, session: &str) -> Result<Store, StageError> {
        validate_session(session)?;
        let state = workspace.join(STATE_DIR);
        let io_err = |action, p: &Path, source| StageError::Io {
            action,
            path: p.display().to_string(),
            source,
        };
        // A repository could ship `.airlock` as a symlink to redirect airlock's state: refuse it.
        match std::fs::symlink_metadata(&state) {
            Ok(md) if !md.is_dir() => {
                return Err(io_err(
                    "use",
                    &state,
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        "it exists and is not a real directory (a symlink or a file)",
                    ),
                ));
            }
            _ => {}
        }
        std::fs::create_dir_all(state.join("sessions")).map_err(|e| io_err("create", &state, e))?;
        let gi = state.join(".gitignore");
        if !gi.exists() {
            std::fs::write(&gi, b"*\n").map_err(|e| io_err("write", &gi, e))?;
        }
        let blobs = BlobStore::open(state.join("blobs"))
            .map_err(|e| io_err("create", &state.join("blobs"), e))?;
        let ws = Dir::open_ambient_dir(workspace, ambient_authority())
            .map_err(|e| io_err("open", workspace, e))?;
        let db_path = state.join("sessions").join(format!("{session}.db"));
        let conn = open_db(&db_path)?;
        Ok(Store {
            workspace: workspace.to_path_buf(),
            session: session.to_string(),
            db_path,
            ws,
            blobs,
            conn: Mutex::new(conn),
            max_staged: AtomicU64::new(DEFAULT_MAX_STAGED_BYTES),
        })
    }

    /// The workspace root.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The session name.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// Sets the ceiling on the bytes the changeset may hold (the sizes of its staged writes): a
    /// batch that would take it past the ceiling fails whole ([`StageError::OverCeiling`]);
    /// one that shrinks it always goes through. The operator's setting, never the workspace's.
    pub fn set_max_staged_bytes(&self, limit: u64) {
        self.max_staged.store(limit, Ordering::Relaxed);
    }

    /// The ceiling on the changeset's staged bytes.
    pub fn max_staged_bytes(&self) -> u64 {
        self.max_staged.load(Ordering::Relaxed)
    }

    /// The bytes the changeset holds now: the sum of the sizes of its staged writes.
    pub fn staged_bytes(&self) -> Result<u64, StageError> {
        let conn = self.lock();
        staged_bytes_in(&conn).map_err(|e| self.db(e))
    }

    /// The blob store holding staged contents.
    pub fn blobs(&self) -> &BlobStore {
        &self.blobs
    }

    /// The database file of this session.
    pub fn db_path(&self) -> &Path {
        &self.db_path
    }

    /// A capability handle on the workspace root (no access outside it).
    pub fn workspace_dir(&self) -> &Dir {
        &self.ws
    }

    /// Stage a file write.
    pub fn stage_write(
        &self,
        path: &RelPath,
        content: &[u8],
        mode: Option<u32>,
    ) -> Result<(), StageError> {
        self.stage_batch([StageOp::Write {
            path: path.clone(),
            content: content.to_vec(),
            mode,
        }])
        .map(drop)
    }

    /// Stage a delete. Deleting a path that exists only in the changeset removes its entry.
    pub fn stage_delete(&self, path: &RelPath) -> Result<(), StageError> {
        self.stage_batch([StageOp::Delete { path: path.clone() }])
            .map(drop)
    }

    /// Stage a symbolic link.
    pub fn stage_symlink(
        &self,
        path: &RelPath,
        target: &[u8],
        flagged: Option<Flag>,
    ) -> Result<(), StageError> {
        self.stage_batch([StageOp::Symlink {
            path: path.clone(),
            target: target.to_vec(),
            flagged,
        }])
        .map(drop)
    }

    /// Stage a directory.
    pub fn stage_dir(&self, path: &RelPath, mode: u32) -> Result<(), StageError> {
        self.stage_batch([StageOp::Dir {
            path: path.clone(),
            mode,
        }])
        .map(drop)
    }

    /// Stage a move of a file or symlink: delete `from`, write `to` with its content and mode.
    pub fn stage_move(&self, from: &RelPath, to: &RelPath) -> Result<(), StageError> {
        self.stage_batch([StageOp::Move {
            from: from.clone(),
            to: to.clone(),
        }])
        .map(drop)
    }

    /// Stage any change (the sandbox harvest's form). A `Change::Write` must name content
    /// already in the blob store.
    pub fn stage_entry(
        &self,
        path: &RelPath,
        change: Change,
        session_local: bool,
        flagged: Option<Flag>,
    ) -> Result<(), StageError> {
        self.stage_batch([StageOp::Entry {
            path: path.clone(),
            change,
            session_local,
            flagged,
        }])
        .map(drop)
    }

    /// Apply many operations in one transaction: all of them or none. Returns how many ran.
    pub fn stage_batch(&self, ops: impl IntoIterator<Item = StageOp>) -> Result<usize, StageError> {
        let ops: Vec<StageOp> = ops.into_iter().collect();
        // Held until the entries naming the blobs are committed: the collector does not run
        // meanwhile (see `crate::gc`).
        let _pin = self.blobs.pin().map_err(|e| StageError::Io {
            action: "lock",
            path: self.blobs.dir().display().to_string(),
            source: e,
        })?;
        // Contents go to the blob store first (immutable, content-addressed): a rolled-back
        // transaction leaves at most an unreferenced blob.
        let mut hashes = Vec::with_capacity(ops.len());
        for op in &ops {
            hashes.push(match op {
                StageOp::Write { path, content, .. } => Some(
                    self.blobs
                        .put_deferred(content)
                        .map_err(|e| StageError::io("store the content of", path, e))?,
                ),
                _ => None,
            });
        }
        // Harvested writes may name blobs stored with `put_deferred`: flush those too.
        let wrote = hashes.iter().any(Option::is_some)
            || ops.iter().any(|op| {
                matches!(
                    op,
                    StageOp::Entry {
                        change: Change::Write { .. },
                        ..
                    }
                )
            });
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.db(e))?;
        let n = ops.len();
        let before = staged_bytes_in(&tx).map_err(|e| self.db(e))?;
        {
            let cx = Ctx {
                conn: &tx,
                ws: &self.ws,
                blobs: &self.blobs,
                db_path: &self.db_path,
                unsynced: Cell::new(wrote),
                parent_memo: RefCell::new(None),
            };
            for (op, hash) in ops.into_iter().zip(hashes) {
                cx.run(op, hash)?;
            }
            // The session's ceiling: a batch that grows the changeset past it is rolled back.
            let (after, limit) = (
                staged_bytes_in(&tx).map_err(|e| self.db(e))?,
                self.max_staged_bytes(),
            );
            if after > limit && after > before {
                return Err(StageError::OverCeiling {
                    limit,
                    before,
                    after,
                });
            }
            // Every blob the entries name is on disk before the entries are.
            if cx.unsynced.get() {
                self.blobs.sync().map_err(|e| StageError::Io {
                    action: "flush the blob store",
                    path: self.blobs.dir().display().to_string(),
                    source: e,
                })?;
            }
        }
        tx.commit().map_err(|e| self.db(e))?;
        Ok(n)
    }

    /// What the changeset makes of `path` as a layer over the disk, or `None` where the disk
    /// shows through: the jail resolves the agent's paths in this merged view.
    pub fn staged_node(&self, path: &RelPath) -> Result<Option<StagedNode>, StageError> {
        let conn = self.lock();
        let cx = self.ctx(&conn);
        let Some(e) = cx.entry(path)? else {
            return Ok(None);
        };
        Ok(Some(match e.change {
            Change::Write { .. } => StagedNode::File,
            Change::Symlink { target } => StagedNode::Symlink(target),
            Change::Dir { .. } => StagedNode::Dir {
                opaque: e.base != Fingerprint::Dir,
            },
            // A directory deleted and then written below again: only what is staged shows.
            Change::Delete if cx.has_below(path)? => StagedNode::Dir { opaque: true },
            Change::Delete => StagedNode::Deleted,
        }))
    }

    /// The staged entry at `path`, if any.
    pub fn get(&self, path: &RelPath) -> Result<Option<StagedEntry>, StageError> {
        let conn = self.lock();
        self.ctx(&conn).entry(path)
    }

    /// Every staged symbolic link that is to be applied (not session-local) with its target
    /// bytes, sorted by path: what the host-exec judge follows links through.
    pub fn staged_symlinks(&self) -> Result<Vec<(RelPath, Vec<u8>)>, StageError> {
        let conn = self.lock();
        let links = self.ctx(&conn).query_entries(
            "SELECT path, change, base, session_local, flagged FROM entries \
             WHERE session_local = 0 AND change LIKE '{\"op\":\"symlink\"%' ORDER BY path",
            [],
        )?;
        Ok(links
            .into_iter()
            .filter_map(|e| match e.change {
                Change::Symlink { target } => Some((e.path, target)),
                _ => None,
            })
            .collect())
    }

    /// An immutable snapshot of the changeset with its content hash.
    pub fn snapshot(&self) -> Result<ChangesetSnapshot, StageError> {
        let conn = self.lock();
        let (entries, hash) = self.ctx(&conn).all_entries_hashed()?;
        Ok(ChangesetSnapshot::from_sorted(
            self.session.clone(),
            entries,
            hash,
        ))
    }

    /// Drop every staged entry and the verdict. Returns how many entries were dropped. The
    /// blobs they named stay until [`crate::gc::collect`] runs.
    pub fn discard(&self) -> Result<usize, StageError> {
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.db(e))?;
        let n = tx
            .execute("DELETE FROM entries", [])
            .map_err(|e| self.db(e))?;
        tx.execute("DELETE FROM verdict", [])
            .map_err(|e| self.db(e))?;
        tx.commit().map_err(|e| self.db(e))?;
        Ok(n)
    }

    /// Record the verdict of a verification run (replacing the previous one).
    pub fn record_verdict(&self, v: &VerdictRecord) -> Result<(), StageError> {
        let detail = serde_json::to_string(&v.detail).map_err(|e| StageError::BadEntry {
            path: "verdict".into(),
            detail: e.to_string(),
        })?;
        let conn = self.lock();
        conn.execute(
            "INSERT OR REPLACE INTO verdict (id, changeset, verdict, detail, provenance, seal) VALUES (1, ?1, ?2, ?3, ?4, NULL)",
            params![v.changeset.to_hex(), v.verdict.name(), detail, v.source.as_str()],
        )
        .map_err(|e| self.db(e))?;
        Ok(())
    }

    /// Record the verdict of a verification run with its seal (made by airlock's verify path;
    /// apply checks it against the operator's key).
    pub fn record_sealed_verdict(
        &self,
        v: &VerdictRecord,
        seal: &airlock_types::VerdictSeal,
    ) -> Result<(), StageError> {
        let bad = |e: serde_json::Error| StageError::BadEntry {
            path: "verdict".into(),
            detail: e.to_string(),
        };
        let detail = serde_json::to_string(&v.detail).map_err(bad)?;
        let seal = serde_json::to_string(seal).map_err(bad)?;
        let conn = self.lock();
        conn.execute(
            "INSERT OR REPLACE INTO verdict (id, changeset, verdict, detail, provenance, seal) VALUES (1, ?1, ?2, ?3, ?4, ?5)",
            params![v.changeset.to_hex(), v.verdict.name(), detail, v.source.as_str(), seal],
        )
        .map_err(|e| self.db(e))?;
        Ok(())
    }

    /// The seal stored with the last verdict (`None`: no verdict, or one without a seal). The
    /// caller checks it.
    pub fn verdict_seal(&self) -> Result<Option<airlock_types::VerdictSeal>, StageError> {
        let conn = self.lock();
        let seal: Option<String> = conn
            .query_row("SELECT seal FROM verdict WHERE id = 1", [], |r| r.get(0))
            .optional()
            .map_err(|e| self.db(e))?
            .flatten();
        let Some(seal) = seal else { return Ok(None) };
        serde_json::from_str(&seal)
            .map(Some)
            .map_err(|e| StageError::BadEntry {
                path: "verdict".into(),
                detail: format!("the verdict's seal does not parse: {e}"),
            })
    }

    /// The last recorded verdict, if any.
    pub fn last_verdict(&self) -> Result<Option<VerdictRecord>, StageError> {
        let conn = self.lock();
        let row = conn
            .query_row(
                "SELECT changeset, verdict, detail, provenance FROM verdict WHERE id = 1",
                [],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, Option<String>>(3)?,
                    ))
                },
            )
            .optional()
            .map_err(|e| self.db(e))?;
        let Some((hash, verdict, detail, provenance)) = row else {
            return Ok(None);
        };
        let bad = |detail: String| StageError::BadEntry {
            path: "verdict".into(),
            detail,
        };
        Ok(Some(VerdictRecord {
            changeset: ChangesetHash::from_hex(&hash)
                .ok_or_else(|| bad(format!("bad hash `{hash}`")))?,
            verdict: Verdict::parse(&verdict)
                .ok_or_else(|| bad(format!("unknown verdict `{verdict}`")))?,
            source: provenance
                .as_deref()
                .map(VerdictSource::parse)
                .unwrap_or(VerdictSource::Unrecorded),
            detail: serde_json::from_str(&detail).map_err(|e| bad(e.to_string()))?,
        }))
    }

    /// The current snapshot, attested by the last verdict: only a passing verdict for exactly
    /// the current hash yields one.
    pub fn verified(&self) -> Result<VerifiedChangeset, StageError> {
        let snapshot = self.snapshot()?;
        let verdict = self.last_verdict()?;
        Ok(VerifiedChangeset::attest(snapshot, verdict.as_ref())?)
    }

    /// After a successful apply of the snapshot with `snapshot_hash`: drop the applied
    /// (non-session-local) entries and the verdict. Refuses when the changeset changed since.
    pub fn clear_applied(&self, snapshot_hash: &ChangesetHash) -> Result<(), StageError> {
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.db(e))?;
        {
            let cx = self.ctx(&tx);
            let (_, current) = cx.all_entries_hashed()?;
            if current != *snapshot_hash {
                return Err(StageError::ChangedSinceApply {
                    applied: snapshot_hash.to_hex(),
                    current: current.to_hex(),
                });
            }
        }
        tx.execute("DELETE FROM entries WHERE session_local = 0", [])
            .map_err(|e| self.db(e))?;
        tx.execute("DELETE FROM verdict", [])
            .map_err(|e| self.db(e))?;
        tx.commit().map_err(|e| self.db(e))?;
        Ok(())
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves the connection usable (SQLite rolls back an
        // unfinished transaction when it is dropped), so a poisoned lock is safe to take.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn ctx<'a>(&'a self, conn: &'a Connection) -> Ctx<'a> {
        Ctx {
            conn,
            ws: &self.ws,
            blobs: &self.blobs,
            db_path: &self.db_path,
            unsynced: Cell::new(false),
            parent_memo: RefCell::new(None),
        }
    }

    fn db(&self, source: rusqlite::Error) -> StageError {
        db_error(&self.db_path, source)
    }
}

/// The sum of the sizes of the staged writes ([`Store::staged_bytes`]): this connection's
/// running total ([`STAGED_TOTAL_SQL`]), computed afresh when another connection committed
/// since it was.
fn staged_bytes_in(conn: &Connection) -> rusqlite::Result<u64> {
    let version: i64 = conn.query_row("PRAGMA data_version", [], |r| r.get(0))?;
    let kept: Option<(i64, i64)> = conn
        .query_row(
            "SELECT bytes, data_version FROM staged_total WHERE id = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let n = match kept {
        Some((n, v)) if v == version => n,
        _ => {
            let n: i64 = conn.query_row(STAGED_BYTES_SQL, [], |r| r.get(0))?;
            conn.execute(
                "INSERT OR REPLACE INTO staged_total (id, bytes, data_version) VALUES (1, ?1, ?2)",
                params![n, version],
            )?;
            n
        }
    };
    Ok(n.max(0).unsigned_abs())
}

fn db_error(path: &Path, source: rusqlite::Error) -> StageError {
    use rusqlite::ffi::ErrorCode;
    match source.sqlite_error_code() {
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => StageError::Corrupt {
            path: path.to_path_buf(),
            detail: source.to_string(),
        },
        _ => StageError::Db {
            path: path.to_path_buf(),
            source,
        },
    }
}

fn validate_session(name: &str) -> Result<(), StageError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_SESSION_NAME
        && !name.starts_with(['.', '-'])
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(StageError::InvalidSession(name.to_string()))
    }
}

/// Opens (creating if need be) a session database. Two processes opening a new database at the
/// same moment can get SQLITE_BUSY where SQLite does not call the busy handler (switching the
/// journal mode, creating the schema): such an open is retried until `BUSY_TIMEOUT`.
fn open_db(path: &Path) -> Result<Connection, StageError> {
    let start = std::time::Instant::now();
    loop {
        match open_db_once(path) {
            Err(StageError::Db { source, .. })
                if matches!(
                    source.sqlite_error_code(),
                    Some(rusqlite::ffi::ErrorCode::DatabaseBusy)
                        | Some(rusqlite::ffi::ErrorCode::DatabaseLocked)
                ) && start.elapsed() < BUSY_TIMEOUT =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

fn open_db_once(path: &Path) -> Result<Connection, StageError> {
    let err = |e| db_error(path, e);
    let conn = Connection::open(path).map_err(err)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(err)?;
    // Keep the `-wal` file when the last connection closes: recreating it (and re-initialising
    // the `-shm` index) on every open costs a short-lived CLI call half a millisecond. Durability
    // is unchanged: the WAL is checkpointed as before, only not unlinked.
    let mut persist = 1;
    conn.file_control(
        Some(rusqlite::MAIN_DB),
        rusqlite::FileControl::PersistWal(&mut persist),
    )
    .map_err(err)?;
    // journal_mode answers with a row; WAL survives in the file once set.
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(err)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StageError::Corrupt {
            path: path.to_path_buf(),
            detail: format!("journal mode is `{mode}`, not WAL"),
        });
    }
    // journal_size_limit = 0: the last connection's checkpoint at close also truncates the kept
    // WAL. Otherwise its already-copied frames look new to the next process (opening rebuilds
    // the index from the file), which would copy and fsync them again at every close.
    conn.execute_batch(
        "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; PRAGMA journal_size_limit = 0;",
    )
    .map_err(err)?;
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(err)?;
    if version > SCHEMA_VERSION {
        return Err(StageError::Corrupt {
            path: path.to_path_buf(),
            detail: format!(
                "schema version {version} is newer than this airlock ({SCHEMA_VERSION})"
            ),
        });
    }
    if version < SCHEMA_VERSION {
        // Under the write lock, read the version again: another process may have migrated.
        conn.execute_batch("BEGIN IMMEDIATE").map_err(err)?;
        let migrated = (|| {
            let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
            if version == 1 {
                // Version 1 verdicts carry no provenance: they stay untrusted (NULL).
                conn.execute_batch("ALTER TABLE verdict ADD COLUMN provenance TEXT;")?;
            }
            if (1..3).contains(&version) {
                // Verdicts from before seals carry none: apply refuses them (verify again).
                conn.execute_batch("ALTER TABLE verdict ADD COLUMN seal TEXT;")?;
            }
            if version < SCHEMA_VERSION {
                conn.execute_batch(&format!("{SCHEMA} PRAGMA user_version = {SCHEMA_VERSION};"))?;
            }
            conn.execute_batch("COMMIT")
        })();
        if let Err(e) = migrated {
            let _ = conn.execute_batch("ROLLBACK");
            // A store that cannot take the migration is not one of ours.
            return Err(StageError::Corrupt {
                path: path.to_path_buf(),
                detail: format!("cannot migrate the schema: {e}"),
            });
        }
    }
    // Check the shape: a foreign SQLite file with an `entries` table of another layout is not ours.
    conn.prepare("SELECT path, change, base, session_local, flagged FROM entries LIMIT 0")
        .map_err(|e| StageError::Corrupt {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
    conn.execute_batch(STAGED_TOTAL_SQL).map_err(err)?;
    Ok(conn)
}

/// What lies at a path in the merged view (workspace + changeset), without following a final
/// symlink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Node {
    Absent,
    File { src: FileSrc, size: u64, mode: u32 },
    Dir,
    Symlink(Vec<u8>),
    Other,
}

/// Where a merged file's bytes live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FileSrc {
    Blob(ContentHash),
    Disk,
}

/// The store's working context: a connection (or transaction), the workspace handle and blobs.
pub(crate) struct Ctx<'a> {
    pub(crate) conn: &'a Connection,
    pub(crate) ws: &'a Dir,
    pub(crate) blobs: &'a BlobStore,
    db_path: &'a Path,
    /// Blobs were written with `put_deferred` and must be flushed before the commit.
    unsynced: Cell<bool>,
    /// The directory the last operation staged, as the merged view shows it now (a directory),
    /// and the `covered` that [`Ctx::check_parents`] finds for a path right below it: a batch
    /// that stages a deep tree parents first (a harvest) then checks each entry's parents in
    /// one step instead of one per level. Taken by the next operation; set only by
    /// [`Ctx::change`] after its writes.
    parent_memo: RefCell<Option<(RelPath, bool)>>,
}

/// The exclusive upper bound of the paths strictly below `p` (`p/` .. `p0`, as `0` follows `/`).
fn below_bounds(p: &RelPath) -> (Vec<u8>, Vec<u8>) {
    let mut lo = p.as_bytes().to_vec();
    lo.push(b'/');
    let mut hi = p.as_bytes().to_vec();
    hi.push(b'/' + 1);
    (lo, hi)
}

/// The proper ancestors of `p`, top-down.
pub(crate) fn ancestors(p: &RelPath) -> Vec<RelPath> {
    let mut out = Vec::new();
    let mut cur = p.parent();
    while let Some(q) = cur {
        cur = q.parent();
        out.push(q);
    }
    out.reverse();
    out
}

impl<'a> Ctx<'a> {
    fn db(&self, e: rusqlite::Error) -> StageError {
        db_error(self.db_path, e)
    }

    fn decode(
        &self,
        path: Vec<u8>,
        change: String,
        base: String,
        local: i64,
        flagged: Option<String>,
    ) -> Result<StagedEntry, StageError> {
        let display = airlock_types::path::escape_bytes(&path);
        let bad = |detail: String| StageError::BadEntry {
            path: display.clone(),
            detail,
        };
        let path = RelPath::new(OsStr::from_bytes(&path)).map_err(|e| bad(e.to_string()))?;
        Ok(StagedEntry {
            path,
            change: serde_json::from_str(&change).map_err(|e| bad(e.to_string()))?,
            base: serde_json::from_str(&base).map_err(|e| bad(e.to_string()))?,
            session_local: local != 0,
            flagged: flagged.as_deref().map(Flag::parse),
        })
    }

    fn query_entries(
        &self,
        sql: &str,
        args: impl rusqlite::Params,
    ) -> Result<Vec<StagedEntry>, StageError> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(|e| self.db(e))?;
        let rows = stmt
            .query_map(args, |r| {
                Ok((
                    r.get::<_, Vec<u8>>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, Option<String>>(4)?,
                ))
            })
            .map_err(|e| self.db(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (p, c, b, l, f) = row.map_err(|e| self.db(e))?;
            out.push(self.decode(p, c, b, l, f)?);
        }
        Ok(out)
    }

    pub(crate) fn entry(&self, p: &RelPath) -> Result<Option<StagedEntry>, StageError> {
        Ok(self
            .query_entries(
                "SELECT path, change, base, session_local, flagged FROM entries WHERE path = ?1",
                [p.as_bytes()],
            )?
            .pop())
    }

    pub(crate) fn all_entries(&self) -> Result<Vec<StagedEntry>, StageError> {
        self.query_entries(
            "SELECT path, change, base, session_local, flagged FROM entries ORDER BY path",
            [],
        )
    }

    /// Every entry, sorted by path bytes, with the changeset hash. The hash is fed the stored
    /// JSON text of each row, which is exactly what [`ChangesetSnapshot::compute_hash`] would
    /// serialize (the rows are written by `put` with the same serializer), so a snapshot costs
    /// one decode per entry and no re-encoding.
    pub(crate) fn all_entries_hashed(
        &self,
    ) -> Result<(Vec<StagedEntry>, ChangesetHash), StageError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT path, change, base, session_local, flagged FROM entries ORDER BY path",
            )
            .map_err(|e| self.db(e))?;
        let mut rows = stmt.query([]).map_err(|e| self.db(e))?;
        let mut out = Vec::new();
        let mut hasher = SnapshotHasher::new();
        let mut rest = Vec::new();
        while let Some(r) = rows.next().map_err(|e| self.db(e))? {
            let get = |e| self.db(e);
            let path: Vec<u8> = r.get(0).map_err(get)?;
            let change: String = r.get(1).map_err(get)?;
            let base: String = r.get(2).map_err(get)?;
            let local: i64 = r.get(3).map_err(get)?;
            let flagged: Option<String> = r.get(4).map_err(get)?;
            rest.clear();
            rest.push(b'[');
            rest.extend_from_slice(change.as_bytes());
            rest.push(b',');
            rest.extend_from_slice(base.as_bytes());
            rest.extend_from_slice(if local != 0 { b",true," } else { b",false," });
            let _ = serde_json::to_writer(&mut rest, &flagged);
            rest.push(b']');
            hasher.entry(&path, &rest);
            out.push(self.decode(path, change, base, local, flagged)?);
        }
        Ok((out, hasher.finish()))
    }

    /// Entries strictly below `p` (all entries when `p` is `None`), sorted by path bytes.
    pub(crate) fn entries_below(
        &self,
        p: Option<&RelPath>,
    ) -> Result<Vec<StagedEntry>, StageError> {
        match p {
            None => self.all_entries(),
            Some(p) => {
                let (lo, hi) = below_bounds(p);
                self.query_entries(
                    "SELECT path, change, base, session_local, flagged FROM entries \
                     WHERE path >= ?1 AND path < ?2 ORDER BY path",
                    params![lo, hi],
                )
            }
        }
    }

    pub(crate) fn has_below(&self, p: &RelPath) -> Result<bool, StageError> {
        let (lo, hi) = below_bounds(p);
        let mut stmt = self
            .conn
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM entries WHERE path >= ?1 AND path < ?2)")
            .map_err(|e| self.db(e))?;
        stmt.query_row(params![lo, hi], |r| r.get::<_, bool>(0))
            .map_err(|e| self.db(e))
    }

    fn drop_below(&self, p: &RelPath) -> Result<usize, StageError> {
        let (lo, hi) = below_bounds(p);
        let mut stmt = self
            .conn
            .prepare_cached("DELETE FROM entries WHERE path >= ?1 AND path < ?2")
            .map_err(|e| self.db(e))?;
        stmt.execute(params![lo, hi]).map_err(|e| self.db(e))
    }

    fn remove(&self, p: &RelPath) -> Result<(), StageError> {
        let mut stmt = self
            .conn
            .prepare_cached("DELETE FROM entries WHERE path = ?1")
            .map_err(|e| self.db(e))?;
        stmt.execute([p.as_bytes()]).map_err(|e| self.db(e))?;
        Ok(())
    }

    fn put(&self, e: &StagedEntry) -> Result<(), StageError> {
        let enc = |v: Result<String, serde_json::Error>| {
            v.map_err(|err| StageError::BadEntry {
                path: e.path.display(),
                detail: err.to_string(),
            })
        };
        let change = enc(serde_json::to_string(&e.change))?;
        let base = enc(serde_json::to_string(&e.base))?;
        let mut stmt = self
            .conn
            .prepare_cached(
                "INSERT OR REPLACE INTO entries (path, change, base, session_local, flagged) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(|err| self.db(err))?;
        stmt.execute(params![
            e.path.as_bytes(),
            change,
            base,
            e.session_local as i64,
            e.flagged.as_ref().map(Flag::name)
        ])
        .map_err(|err| self.db(err))?;
        Ok(())
    }

    /// The on-disk node at `p`: no symlink followed, at `p` or above it. Where a disk
    /// ancestor is a symlink or a file, the workspace's own tree has nothing at `p`
    /// (whatever the link leads to is another path). The parent is opened in one
    /// `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` and `p` looked at from it.
    pub(crate) fn disk_node(&self, p: &RelPath) -> Result<Node, StageError> {
        use rustix::fd::AsFd;
        use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
        use rustix::io::Errno;
        let parent_fd;
        let dir = match p.parent() {
            None => self.ws.as_fd(),
            Some(parent) => match rustix::fs::openat2(
                self.ws,
                parent.as_path(),
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
                ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
            ) {
                Ok(fd) => {
                    parent_fd = fd;
                    parent_fd.as_fd()
                }
                Err(Errno::LOOP | Errno::NOTDIR | Errno::NOENT | Errno::XDEV) => {
                    return Ok(Node::Absent);
                }
                // A kernel without openat2.
                Err(Errno::NOSYS) => return self.disk_node_walked(p),
                Err(e) => return Err(StageError::io("inspect", p, e.into())),
            },
        };
        let name = p.file_name();
        let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(Errno::NOENT | Errno::NOTDIR) => return Ok(Node::Absent),
            Err(e) => return Err(StageError::io("inspect", p, e.into())),
        };
        Ok(match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => Node::Dir,
            FileType::Symlink => {
                let t = rustix::fs::readlinkat(dir, name, Vec::new())
                    .map_err(|e| StageError::io("read the link", p, e.into()))?;
                Node::Symlink(t.into_bytes())
            }
            FileType::RegularFile => Node::File {
                src: FileSrc::Disk,
                size: u64::try_from(st.st_size).unwrap_or(0),
                mode: st.st_mode & 0o7777,
            },
            _ => Node::Other,
        })
    }

    /// [`Ctx::disk_node`] through cap-std's own walk (which refuses escapes but follows
    /// symlinks inside the root): for kernels without `openat2`.
    fn disk_node_walked(&self, p: &RelPath) -> Result<Node, StageError> {
        let md = match self.ws.symlink_metadata(p.as_path()) {
            Ok(m) => m,
            Err(e) if is_absent(&e) => return Ok(Node::Absent),
            Err(e) => return Err(StageError::io("inspect", p, e)),
        };
        let ft = md.file_type();
        Ok(if ft.is_dir() {
            Node::Dir
        } else if ft.is_symlink() {
            let t = self
                .ws
                .read_link_contents(p.as_path())
                .map_err(|e| StageError::io("read the link", p, e))?;
            Node::Symlink(t.as_os_str().as_bytes().to_vec())
        } else if ft.is_file() {
            Node::File {
                src: FileSrc::Disk,
                size: md.len(),
                mode: md.mode() & 0o7777,
            }
        } else {
            Node::Other
        })
    }

    /// Read a disk file at `p` (which the caller found to be a regular file).
    pub(crate) fn read_disk(&self, p: &RelPath) -> Result<Vec<u8>, StageError> {
        let mut f = self
            .ws
            .open(p.as_path())
            .map_err(|e| StageError::io("read", p, e))?;
        let mut buf = Vec::new();
        f.read_to_end(&mut buf)
            .map_err(|e| StageError::io("read", p, e))?;
        Ok(buf)
    }

    /// The base fingerprint of `p` on disk. A regular file's content is also kept in the blob
    /// store so diffs can show the base even after the disk changes.
    fn base_fingerprint(&self, p: &RelPath) -> Result<Fingerprint, StageError> {
        Ok(match self.disk_node(p)? {
            Node::Absent => Fingerprint::Absent,
            Node::Dir => Fingerprint::Dir,
            Node::Symlink(target) => Fingerprint::Symlink { target },
            Node::Other => Fingerprint::Other,
            Node::File { mode, .. } => {
                let bytes = self.read_disk(p)?;
                self.unsynced.set(true);
                let hash = self
                    .blobs
                    .put_deferred(&bytes)
                    .map_err(|e| StageError::io("keep the base of", p, e))?;
                Fingerprint::File { hash, mode }
            }
        })
    }

    /// One step of a merged walk: the node at `q` whose parent is a merged directory, and
    /// whether the disk below `q` is hidden. `covered` says whether the disk at `q` is hidden.
    pub(crate) fn step(&self, q: &RelPath, covered: bool) -> Result<(Node, bool), StageError> {
        // airlock's own state is never part of the merged view.
        if q.components().next() == Some(OsStr::new(STATE_DIR)) {
            return Ok((Node::Absent, true));
        }
        match self.entry(q)? {
            Some(e) => Ok(match e.change {
                Change::Write {
                    content,
                    size,
                    mode,
                } => (
                    Node::File {
                        src: FileSrc::Blob(content),
                        size,
                        mode,
                    },
                    true,
                ),
                Change::Symlink { target } => (Node::Symlink(target), true),
                Change::Dir { .. } => (Node::Dir, covered || e.base != Fingerprint::Dir),
                Change::Delete => {
                    if self.has_below(q)? {
                        (Node::Dir, true)
                    } else {
                        (Node::Absent, true)
                    }
                }
            }),
            None if covered => Ok(if self.has_below(q)? {
                (Node::Dir, true)
            } else {
                (Node::Absent, true)
            }),
            None => match self.disk_node(q)? {
                Node::Absent if self.has_below(q)? => Ok((Node::Dir, true)),
                n => Ok((n, false)),
            },
        }
    }

    /// The merged node at `p` without following symlinks anywhere: a path below a file or a
    /// symlink is absent.
    pub(crate) fn lstat(&self, p: &RelPath) -> Result<(Node, bool), StageError> {
        let mut covered = false;
        for q in ancestors(p) {
            let (n, c) = self.step(&q, covered)?;
            if n != Node::Dir {
                return Ok((Node::Absent, true));
            }
            covered = c;
        }
        self.step(p, covered)
    }

    /// Check that every ancestor of `p` is (or will implicitly be) a directory; returns whether
    /// the disk at `p` is hidden by a staged ancestor or an absent one.
    fn check_parents(&self, p: &RelPath) -> Result<bool, StageError> {
        let mut covered = false;
        for q in ancestors(p) {
            let (n, c) = self.step(&q, covered)?;
            match n {
                Node::Dir => covered = c,
                // Missing directories are created implicitly.
                Node::Absent => covered = true,
                _ => {
                    return Err(StageError::ParentNotDir {
                        path: p.display(),
                        parent: q.display(),
                    });
                }
            }
        }
        Ok(covered)
    }

    fn run(&self, op: StageOp, hash: Option<ContentHash>) -> Result<(), StageError> {
        // What the last operation left for its children; anything else recomputes.
        let memo = self.parent_memo.take();
        let touched: [Option<&RelPath>; 2] = match &op {
            StageOp::Write { path, .. }
            | StageOp::Delete { path }
            | StageOp::Symlink { path, .. }
            | StageOp::Dir { path, .. }
            | StageOp::Entry { path, .. } => [Some(path), None],
            StageOp::Move { from, to } => [Some(from), Some(to)],
        };
        for p in touched.into_iter().flatten() {
            if p.components().next() == Some(OsStr::new(STATE_DIR)) {
                return Err(StageError::Reserved(p.display()));
            }
        }
        match op {
            StageOp::Write {
                path,
                content,
                mode,
            } => {
                let Some(hash) = hash else {
                    return Err(StageError::MissingBlob {
                        path: path.display(),
                        hash: String::new(),
                    });
                };
                self.write(&path, hash, content.len() as u64, mode, true)
            }
            StageOp::Delete { path } => self.change(&path, Change::Delete, false, None, true),
            StageOp::Symlink {
                path,
                target,
                flagged,
            } => self.change(&path, Change::Symlink { target }, false, flagged, true),
            StageOp::Dir { path, mode } => {
                self.change(&path, Change::Dir { mode }, false, None, true)
            }
            StageOp::Move { from, to } => self.move_path(&from, &to),
            StageOp::Entry {
                path,
                change,
                session_local,
                flagged,
            } => {
                if let Change::Write { content, .. } = &change
                    && !self.blobs.contains(content)
                {
                    return Err(StageError::MissingBlob {
                        path: path.display(),
                        hash: content.to_hex(),
                    });
                }
                // A harvest's entry may use what the previous one found for its parent.
                self.parent_memo.replace(memo);
                self.change(&path, change, session_local, flagged, false)
            }
        }
    }

    fn write(
        &self,
        path: &RelPath,
        content: ContentHash,
        size: u64,
        mode: Option<u32>,
        strict: bool,
    ) -> Result<(), StageError> {
        let mode = match mode {
            Some(m) => m & 0o7777,
            None => match self.entry(path)? {
                Some(StagedEntry {
                    change: Change::Write { mode, .. },
                    ..
                }) => mode,
                _ => match self.lstat(path)?.0 {
                    Node::File { mode, .. } => mode,
                    _ => 0o644,
                },
            },
        };
        self.change(
            path,
            Change::Write {
                content,
                size,
                mode,
            },
            false,
            None,
            strict,
        )
    }

    /// The core rule set shared by every operation (see the module docs). The parents are
    /// checked from scratch unless the previous operation of the batch staged the parent
    /// directory itself ([`Ctx::parent_memo`]); a directory staged here leaves its own.
    fn change(
        &self,
        path: &RelPath,
        change: Change,
        session_local: bool,
        flagged: Option<Flag>,
        strict: bool,
    ) -> Result<(), StageError> {
        let covered = match self.parent_memo.take() {
            Some((dir, c)) if path.parent().as_ref() == Some(&dir) => c,
            _ => self.check_parents(path)?,
        };
        let is_dir = matches!(change, Change::Dir { .. });
        self.change_below(path, covered, change, session_local, flagged, strict)?;
        if is_dir && let (Node::Dir, c) = self.step(path, covered)? {
            // What `check_parents` finds for a path right below `path`: its ancestors' answer
            // (`covered`) is unchanged by an entry below them, and `path` is a directory now.
            self.parent_memo.replace(Some((path.clone(), c)));
        }
        Ok(())
    }

    /// [`Ctx::change`] with its parents checked: `covered` is what [`Ctx::check_parents`]
    /// returned for `path`.
    fn change_below(
        &self,
        path: &RelPath,
        covered: bool,
        change: Change,
        session_local: bool,
        flagged: Option<Flag>,
        strict: bool,
    ) -> Result<(), StageError> {
        // Setuid and setgid bits are never staged (apply never writes them either).
        let change = match change {
            Change::Write {
                content,
                size,
                mode,
            } => Change::Write {
                content,
                size,
                mode: mode & crate::apply::APPLIED_MODE_BITS,
            },
            Change::Dir { mode } => Change::Dir {
                mode: mode & crate::apply::APPLIED_MODE_BITS,
            },
            other => other,
        };
        let existing = self.entry(path)?;
        let (current, _) = self.step(path, covered)?;
        if strict {
            match (&change, &current) {
                (Change::Write { .. } | Change::Symlink { .. }, Node::Dir) => {
                    return Err(StageError::IsADirectory(path.display()));
                }
                (Change::Delete, Node::Absent) => {
                    return Err(StageError::NotFound(path.display()));
                }
                (Change::Dir { .. }, Node::File { .. } | Node::Symlink(_) | Node::Other) => {
                    return Err(StageError::AlreadyExists(path.display()));
                }
                _ => {}
            }
        }
        if matches!(change, Change::Dir { .. })
            && matches!(
                existing,
                Some(StagedEntry {
                    change: Change::Delete,
                    base: Fingerprint::Dir,
                    ..
                })
            )
        {
            if current == Node::Dir {
                // Already an (opaque) directory through the entries below it.
                return Ok(());
            }
            return Err(StageError::RecreateDeletedDir(path.display()));
        }
        if !matches!(change, Change::Dir { .. }) {
            self.drop_below(path)?;
        }
        let base = match &existing {
            Some(e) => e.base.clone(),
            None => self.base_fingerprint(path)?,
        };
        // What the merged view shows at `path` with no entry there.
        let underneath = if covered {
            Fingerprint::Absent
        } else {
            base.clone()
        };
        let unchanged = match (&change, &underneath) {
            (Change::Write { content, mode, .. }, Fingerprint::File { hash, mode: m }) => {
                content == hash && mode == m
            }
            (Change::Symlink { target }, Fingerprint::Symlink { target: t }) => target == t,
            (Change::Dir { .. }, Fingerprint::Dir) => true,
            (Change::Delete, Fingerprint::Absent) => true,
            _ => false,
        };
        if unchanged {
            return self.remove(path);
        }
        self.put(&StagedEntry {
            path: path.clone(),
            change,
            base,
            session_local,
            flagged,
        })
    }

    fn move_path(&self, from: &RelPath, to: &RelPath) -> Result<(), StageError> {
        if from == to {
            return match self.lstat(from)?.0 {
                Node::Absent => Err(StageError::NotFound(from.display())),
                Node::Dir => Err(StageError::IsADirectory(from.display())),
                _ => Ok(()),
            };
        }
        let entry = self.entry(from)?;
        let flagged = entry.as_ref().and_then(|e| e.flagged.clone());
        let session_local = entry.as_ref().is_some_and(|e| e.session_local);
        match self.lstat(from)?.0 {
            Node::Absent => Err(StageError::NotFound(from.display())),
            Node::Dir => Err(StageError::IsADirectory(from.display())),
            Node::Other => Err(StageError::io(
                "move",
                from,
                io::Error::new(io::ErrorKind::Unsupported, "not a file or symlink"),
            )),
            Node::Symlink(target) => {
                self.change(to, Change::Symlink { target }, session_local, flagged, true)?;
                self.change(from, Change::Delete, false, None, true)
            }
            Node::File { src, size, mode } => {
                let content = match src {
                    FileSrc::Blob(h) => h,
                    FileSrc::Disk => {
                        let bytes = self.read_disk(from)?;
                        self.unsynced.set(true);
                        self.blobs
                            .put_deferred(&bytes)
                            .map_err(|e| StageError::io("store the content of", from, e))?
                    }
                };
                self.change(
                    to,
                    Change::Write {
                        content,
                        size,
                        mode,
                    },
                    session_local,
                    None,
                    true,
                )?;
                self.change(from, Change::Delete, false, None, true)
            }
        }
    }
}

/// True for errors meaning "nothing is there": not found, or a parent that is not a directory.
pub(crate) fn is_absent(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound
        || e.raw_os_error() == Some(rustix::io::Errno::NOTDIR.raw_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rp(s: &str) -> RelPath {
        RelPath::new(s).unwrap()
    }

    fn setup() -> (tempfile::TempDir, Store) {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.txt"), b"base\n").unwrap();
        std::fs::create_dir(d.path().join("src")).unwrap();
        std::fs::write(d.path().join("src/lib.rs"), b"fn f() {}\n").unwrap();
        let s = Store::open(d.path(), "default").unwrap();
        (d, s)
    }

    #[test]
    fn store_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Store>();
        assert_send_sync::<StageError>();
    }

    #[test]
    fn session_names_are_validated() {
        let d = tempfile::tempdir().unwrap();
        for bad in ["", "../x", ".hidden", "-x", "a/b", &"x".repeat(65)] {
            assert!(
                matches!(
                    Store::open(d.path(), bad),
                    Err(StageError::InvalidSession(_))
                ),
                "{bad}"
            );
        }
        assert!(Store::open(d.path(), "feature-1.2_x").is_ok());
        assert_eq!(
            std::fs::read(d.path().join(".airlock/.gitignore")).unwrap(),
            b"*\n"
        );
    }

    #[test]
    fn base_is_kept_from_first_touch() {
        let (d, s) = setup();
        s.stage_write(&rp("a.txt"), b"one", None).unwrap();
        std::fs::write(d.path().join("a.txt"), b"changed on disk").unwrap();
        s.stage_write(&rp("a.txt"), b"two", None).unwrap();
        let e = s.get(&rp("a.txt")).unwrap().unwrap();
        assert_eq!(
            e.base,
            Fingerprint::File {
                hash: ContentHash::of(b"base\n"),
                mode: e_mode(&d, "a.txt")
            }
        );
        assert!(
            matches!(e.change, Change::Write { content, .. } if content == ContentHash::of(b"two"))
        );
        // The working tree is never touched.
        assert_eq!(
            std::fs::read(d.path().join("a.txt")).unwrap(),
            b"changed on disk"
        );
    }

    fn e_mode(d: &tempfile::TempDir, p: &str) -> u32 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(d.path().join(p)).unwrap().mode() & 0o7777
    }

    #[test]
    fn writing_back_the_base_unstages() {
        let (_d, s) = setup();
        s.stage_write(&rp("a.txt"), b"x", None).unwrap();
        assert!(s.get(&rp("a.txt")).unwrap().is_some());
        s.stage_write(&rp("a.txt"), b"base\n", None).unwrap();
        assert!(s.get(&rp("a.txt")).unwrap().is_none());
        assert!(s.snapshot().unwrap().is_empty());
    }

    #[test]
    fn parent_that_is_a_file_is_refused() {
        let (_d, s) = setup();
        let err = s.stage_write(&rp("a.txt/x"), b"1", None).unwrap_err();
        assert!(matches!(err, StageError::ParentNotDir { .. }), "{err}");
        assert!(err.to_string().contains("`a.txt` is not a directory"));
    }

    /// A verdict stored by a version-1 store (no provenance column) is migrated as
    /// untrusted: it cannot unlock apply until verify runs again.
    #[test]
    fn verdicts_from_before_provenance_unlock_nothing() {
        let (d, s) = setup();
        s.stage_write(&rp("n.txt"), b"new", None).unwrap();
        let hash = s.snapshot().unwrap().hash;
        let path = s.db_path().to_path_buf();
        drop(s);
        {
            let c = rusqlite::Connection::open(&path).unwrap();
            c.execute_batch(
                "DROP TABLE verdict; CREATE TABLE verdict (id INTEGER PRIMARY KEY CHECK (id = 1), \
                 changeset TEXT NOT NULL, verdict TEXT NOT NULL, detail TEXT NOT NULL) STRICT; \
                 PRAGMA user_version = 1;",
            )
            .unwrap();
            c.execute(
                "INSERT INTO verdict VALUES (1, ?1, 'passed', '{}')",
                [hash.to_hex()],
            )
            .unwrap();
        }
        let s = Store::open(d.path(), "default").unwrap();
        assert_eq!(
            s.last_verdict().unwrap().unwrap().source,
            VerdictSource::Unrecorded
        );
        assert!(matches!(
            s.verified(),
            Err(StageError::NotVerified(NotVerified::Unrecorded))
        ));
        for (source, ok) in [
            (VerdictSource::Agent, false),
            (VerdictSource::OperatorCli, true),
        ] {
            s.record_verdict(&VerdictRecord {
                changeset: hash,
                verdict: Verdict::Passed,
                source,
                detail: serde_json::json!({}),
            })
            .unwrap();
            assert_eq!(s.last_verdict().unwrap().unwrap().source, source);
            assert_eq!(s.verified().is_ok(), ok, "{source:?}");
        }
    }

    #[test]
    fn snapshot_hash_from_stored_rows_equals_the_canonical_hash() {
        let (_d, s) = setup();
        s.stage_write(&rp("a.txt"), b"changed \"quoted\"\n", Some(0o755))
            .unwrap();
        s.stage_delete(&rp("src/lib.rs")).unwrap();
        s.stage_symlink(
            &rp("ln"),
            b"a.txt",
            Some(Flag::Unknown("odd \"link\" \u{e9}".into())),
        )
        .unwrap();
        s.stage_dir(&rp("new/dir"), 0o700).unwrap();
        s.stage_entry(
            &rp("cache/x"),
            Change::Write {
                content: s.blobs().put(b"x").unwrap(),
                size: 1,
                mode: 0o600,
            },
            true,
            None,
        )
        .unwrap();
        let snap = s.snapshot().unwrap();
        assert_eq!(snap.entries.len(), 5);
        assert_eq!(snap.hash, ChangesetSnapshot::compute_hash(&snap.entries));
        assert_eq!(
            snap.hash,
            ChangesetSnapshot::new("default", snap.entries.clone()).hash
        );
    }

    /// The verdict column holds the verdict's name, as it always has, and reads back as the
    /// same typed verdict; text that names no verdict is a damaged store and unlocks nothing.
    #[test]
    fn verdict_column_keeps_its_text_and_reads_back_typed() {
        let (_d, s) = setup();
        s.stage_write(&rp("n.txt"), b"new", None).unwrap();
        let hash = s.snapshot().unwrap().hash;
        let column = |s: &Store| -> String {
            s.lock()
                .query_row("SELECT verdict FROM verdict WHERE id = 1", [], |r| r.get(0))
                .unwrap()
        };
        for verdict in Verdict::ALL {
            let record = VerdictRecord {
                changeset: hash,
                verdict,
                source: VerdictSource::OperatorCli,
                detail: serde_json::json!({"verdict": verdict.name()}),
            };
            s.record_verdict(&record).unwrap();
            assert_eq!(column(&s), verdict.name());
            assert_eq!(s.last_verdict().unwrap(), Some(record));
            assert_eq!(
                s.verified().is_ok(),
                verdict == Verdict::Passed,
                "{verdict}"
            );
        }
        for text in ["PASSED", "Passed", "ok", ""] {
            s.lock()
                .execute("UPDATE verdict SET verdict = ?1 WHERE id = 1", [text])
                .unwrap();
            let err = s.last_verdict().unwrap_err();
            assert!(err.to_string().contains("unknown verdict"), "{err}");
            assert!(s.verified().is_err(), "{text:?} unlocked apply");
        }
    }

    #[test]
    fn verdict_binds_to_hash() {
        let (_d, s) = setup();
        s.stage_write(&rp("n.txt"), b"new", None).unwrap();
        assert!(matches!(
            s.verified(),
            Err(StageError::NotVerified(NotVerified::NoVerdict))
        ));
        let snap = s.snapshot().unwrap();
        s.record_verdict(&VerdictRecord {
            changeset: snap.hash,
            verdict: Verdict::Passed,
            source: VerdictSource::Detected,
            detail: serde_json::json!({"tests": 3}),
        })
        .unwrap();
        assert_eq!(s.verified().unwrap().snapshot().hash, snap.hash);
        s.stage_write(&rp("n.txt"), b"newer", None).unwrap();
        assert!(matches!(
            s.verified(),
            Err(StageError::NotVerified(NotVerified::Stale { .. }))
        ));
    }
}
