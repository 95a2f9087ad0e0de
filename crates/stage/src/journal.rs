//! The mutation journal: a durable SQLite log (`.airlock/journal.db`) of every effect airlock has
//! on the real workspace or the outside world. Each effect is written `pending` before it happens
//! and `committed` or `failed` after; a `pending` record found when the journal is opened becomes
//! `unknown`, and `recover` resolves the ones it can. Records carry a hash of the canonical
//! arguments, never the arguments themselves, so secrets never reach the journal.
//!
//! One process owns a workspace's journal at a time (an advisory lock on `.airlock/journal.lock`);
//! others may read it but never re-label records they do not own.

use crate::model::Fingerprint;
use airlock_types::RelPath;
use rusqlite::{Connection, ErrorCode, OptionalExtension, params};
use serde::Serialize;
use std::ffi::OsStr;
use std::fmt;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Schema version stored in `PRAGMA user_version`.
const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS records (
    id          INTEGER PRIMARY KEY,
    session     TEXT    NOT NULL,
    turn        INTEGER NOT NULL,
    tool        TEXT    NOT NULL,
    args_hash   TEXT    NOT NULL,
    state       TEXT    NOT NULL,
    reverts     INTEGER,
    backup_dir  TEXT,
    started_at  INTEGER NOT NULL,
    ended_at    INTEGER,
    error       TEXT,
    durable     INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE TABLE IF NOT EXISTS record_files (
    record    INTEGER NOT NULL REFERENCES records(id),
    seq       INTEGER NOT NULL,
    path      BLOB    NOT NULL,
    pre       TEXT    NOT NULL,
    post      TEXT    NOT NULL,
    backup    TEXT,
    dir_mode  INTEGER,
    PRIMARY KEY (record, seq)
) STRICT;
CREATE TABLE IF NOT EXISTS turns (
    session     TEXT    NOT NULL,
    turn        INTEGER NOT NULL,
    finished_at INTEGER NOT NULL,
    PRIMARY KEY (session, turn)
) STRICT;
";

/// A journal record's id.
pub type RecordId = i64;

/// Where a record stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordState {
    /// Written before the effect; no outcome yet.
    Pending,
    /// The effect happened completely.
    Committed,
    /// The effect failed and was undone (or never started).
    Failed,
    /// Found `pending` when the journal was opened: the process died mid-effect.
    Unknown,
    /// Recovery restored the state from before the effect.
    RolledBack,
    /// Recovery found the effect had completed and finished its bookkeeping.
    Completed,
    /// Recovery could not decide safely; a person has to look.
    NeedsAttention,
}

impl RecordState {
    /// The stored (and serialized) name.
    pub fn as_str(self) -> &'static str {
        match self {
            RecordState::Pending => "pending",
            RecordState::Committed => "committed",
            RecordState::Failed => "failed",
            RecordState::Unknown => "unknown",
            RecordState::RolledBack => "rolled_back",
            RecordState::Completed => "completed",
            RecordState::NeedsAttention => "needs_attention",
        }
    }

    fn parse(s: &str) -> Option<RecordState> {
        Some(match s {
            "pending" => RecordState::Pending,
            "committed" => RecordState::Committed,
            "failed" => RecordState::Failed,
            "unknown" => RecordState::Unknown,
            "rolled_back" => RecordState::RolledBack,
            "completed" => RecordState::Completed,
            "needs_attention" => RecordState::NeedsAttention,
            _ => return None,
        })
    }

    /// True for states with no recorded outcome (`pending`, `unknown`).
    pub fn is_unresolved(self) -> bool {
        matches!(self, RecordState::Pending | RecordState::Unknown)
    }

    /// True when the effect is known to have happened (`committed`, `completed`).
    pub fn took_effect(self) -> bool {
        matches!(self, RecordState::Committed | RecordState::Completed)
    }
}

impl fmt::Display for RecordState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One path an effect touches: what was there before, what is there after, and where the
/// original was backed up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileEffect {
    /// Workspace-relative path.
    pub path: RelPath,
    /// On-disk state before the effect.
    pub pre: Fingerprint,
    /// On-disk state after the effect.
    pub post: Fingerprint,
    /// Backup of the original, relative to the workspace (`.airlock/backups/<record>/<n>`), when
    /// the original is a file or symlink.
    pub backup: Option<String>,
    /// Permission bits of an original directory, so a rollback can recreate it as it was.
    pub dir_mode: Option<u32>,
}

/// A record about to be written `pending`.
#[derive(Debug, Clone, Default)]
pub struct NewRecord {
    /// Session name.
    pub session: String,
    /// Turn number within the session.
    pub turn: u64,
    /// Tool (`apply`, `undo`, `bash`, `git_commit`, `git_push`, …).
    pub tool: String,
    /// Hash of the canonical arguments ([`args_hash`]).
    pub args_hash: String,
    /// Paths touched; the journal fills in each `backup` location when `with_backups` is set.
    pub files: Vec<FileEffect>,
    /// Give the record a backup directory `.airlock/backups/<id>/`; each file whose `pre` is a
    /// file or symlink is backed up to `<dir>/<index>`.
    pub with_backups: bool,
    /// The record this one reverts (undo).
    pub reverts: Option<RecordId>,
}

/// A stored journal record (`airlock journal --json` prints these).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JournalRecord {
    /// Record id (increasing).
    pub id: RecordId,
    /// Session name.
    pub session: String,
    /// Turn number.
    pub turn: u64,
    /// Tool.
    pub tool: String,
    /// Hash of the canonical arguments.
    pub args_hash: String,
    /// Where the record stands.
    pub state: RecordState,
    /// The record this one reverts.
    pub reverts: Option<RecordId>,
    /// Backup directory, relative to the workspace.
    pub backup_dir: Option<String>,
    /// Paths touched, in execution order.
    pub files: Vec<FileEffect>,
    /// Milliseconds since the Unix epoch when the record was written.
    pub started_at: i64,
    /// Milliseconds since the Unix epoch when the outcome was written.
    pub ended_at: Option<i64>,
    /// Why it failed, or what recovery found.
    pub error: Option<String>,
    /// The record's turn finished (the work is part of the durable history).
    pub durable: bool,
}

/// Why the journal could not be used.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The `.airlock` directory or lock file could not be prepared.
    #[error("cannot prepare the journal at {path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// SQLite refused an operation.
    #[error("the journal at {path} could not be read or written: {source}")]
    Sqlite {
        /// The database path.
        path: PathBuf,
        /// The SQLite error.
        source: rusqlite::Error,
    },
    /// A stored record is not understood (written by a newer airlock, or edited by hand).
    #[error("journal record {id} is not understood: {why}")]
    BadRecord {
        /// Record id.
        id: RecordId,
        /// What is wrong.
        why: String,
    },
    /// No such record.
    #[error("journal record {0} does not exist")]
    NoRecord(RecordId),
    /// Another airlock process owns the journal.
    #[error(
        "another airlock process is using the journal of this workspace; wait for it to finish and try again"
    )]
    NotOwner,
}

/// The journal of one workspace.
pub struct Journal {
    conn: Mutex<Connection>,
    db_path: PathBuf,
    owner: bool,
    // Held for the journal's lifetime: the advisory lock marking this process as the owner.
    _lock: Option<fs::File>,
}

impl fmt::Debug for Journal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Journal")
            .field("db_path", &self.db_path)
            .field("owner", &self.owner)
            .finish()
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// BLAKE3 of the canonical JSON of `args` (object keys sorted, no whitespace), hex. The journal
/// stores this instead of the arguments so a secret in them is never written down.
pub fn args_hash(args: &serde_json::Value) -> String {
    let mut out = String::new();
    canonical_json(args, &mut out);
    blake3::hash(out.as_bytes()).to_hex().to_string()
}

fn canonical_json(v: &serde_json::Value, out: &mut String) {
    match v {
        serde_json::Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::Value::String((*k).clone()).to_string());
                out.push(':');
                canonical_json(&m[k.as_str()], out);
            }
            out.push('}');
        }
        serde_json::Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The backup directory of record `id`, relative to the workspace.
pub fn backup_dir_of(id: RecordId) -> String {
    format!(".airlock/backups/{id}")
}

/// What [`Journal::open`] tells the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JournalNotice {
    /// Another airlock process owns the journal: its pending records are left as they are.
    NotOwner,
    /// The journal was damaged and moved aside, and a new one was started.
    Quarantined {
        /// The journal's path.
        path: PathBuf,
        /// What was wrong with it.
        why: String,
        /// Where it was moved.
        moved_to: PathBuf,
    },
    /// A record was still pending (its process stopped mid-effect) and is now `unknown`:
    /// recovery resolves it.
    MarkedUnknown {
        /// The record.
        id: RecordId,
        /// Its tool.
        tool: String,
    },
}

impl fmt::Display for JournalNotice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JournalNotice::NotOwner => f.write_str(
                "another airlock process owns this workspace's journal; its pending records are left as they are",
            ),
            JournalNotice::Quarantined {
                path,
                why,
                moved_to,
            } => write!(
                f,
                "the journal {} was damaged ({why}); it was moved to {} and a new journal was started — \
                 records in the old one are not recovered automatically, so check the workspace by hand",
                path.display(),
                moved_to.display()
            ),
            JournalNotice::MarkedUnknown { id, tool } => write!(
                f,
                "journal record {id} ({tool}) was still pending: the process stopped mid-effect; it is now `unknown` — run `airlock recover`"
            ),
        }
    }
}

impl Journal {
    /// Open (creating if needed) `<workspace>/.airlock/journal.db`. If this process becomes the
    /// owner, records still `pending` become `unknown`. A damaged database is moved aside (with a
    /// timestamp) and a new one started; the returned notices say so, and say which records
    /// became `unknown`.
    pub fn open(workspace: &Path) -> Result<(Journal, Vec<JournalNotice>), JournalError> {
        let dir = workspace.join(".airlock");
        fs::create_dir_all(&dir).map_err(|source| JournalError::Io {
            path: dir.clone(),
            source,
        })?;
        let db_path = dir.join("journal.db");
        let mut notices = Vec::new();
        let lock = take_lock(&dir.join("journal.lock"))?;
        let owner = lock.is_some();
        if !owner {
            notices.push(JournalNotice::NotOwner);
        }

        let conn = match open_checked(&db_path) {
            Ok(c) => c,
            Err(Damage::Damaged(why)) => {
                if !owner {
                    return Err(JournalError::NotOwner);
                }
                let moved = quarantine(&db_path)?;
                notices.push(JournalNotice::Quarantined {
                    path: db_path.clone(),
                    why,
                    moved_to: moved,
                });
                open_checked(&db_path).map_err(|d| match d {
                    Damage::Damaged(why) => JournalError::BadRecord { id: 0, why },
                    Damage::Other(source) => JournalError::Sqlite {
                        path: db_path.clone(),
                        source,
                    },
                })?
            }
            Err(Damage::Other(source)) => {
                return Err(JournalError::Sqlite {
                    path: db_path,
                    source,
                });
            }
        };

        let journal = Journal {
            conn: Mutex::new(conn),
            db_path,
            owner,
            _lock: lock,
        };
        if owner {
            let stale = journal.mark_pending_unknown()?;
            for (id, tool) in stale {
                notices.push(JournalNotice::MarkedUnknown { id, tool });
            }
        }
        Ok((journal, notices))
    }

    /// True when this process owns the journal (may resolve and recover records).
    pub fn is_owner(&self) -> bool {
        self.owner
    }

    /// The database path.
    pub fn path(&self) -> &Path {
        &self.db_path
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        match self.conn.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn sql(&self, source: rusqlite::Error) -> JournalError {
        JournalError::Sqlite {
            path: self.db_path.clone(),
            source,
        }
    }

    fn mark_pending_unknown(&self) -> Result<Vec<(RecordId, String)>, JournalError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare("SELECT id, tool FROM records WHERE state = 'pending' ORDER BY id")
            .map_err(|e| self.sql(e))?;
        let rows: Vec<(RecordId, String)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|it| it.collect())
            .map_err(|e| self.sql(e))?;
        drop(stmt);
        conn.execute(
            "UPDATE records SET state = 'unknown' WHERE state = 'pending'",
            [],
        )
        .map_err(|e| self.sql(e))?;
        Ok(rows)
    }

    /// Write `rec` as `pending` (durably) and return its id.
    pub fn begin(&self, rec: NewRecord) -> Result<RecordId, JournalError> {
        if !self.owner {
            return Err(JournalError::NotOwner);
        }
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(|e| self.sql(e))?;
        tx.execute(
            "INSERT INTO records (session, turn, tool, args_hash, state, reverts, started_at)
             VALUES (?1, ?2, ?3, ?4, 'pending', ?5, ?6)",
            params![
                rec.session,
                rec.turn as i64,
                rec.tool,
                rec.args_hash,
                rec.reverts,
                now_ms()
            ],
        )
        .map_err(|e| self.sql(e))?;
        let id = tx.last_insert_rowid();
        let backup_dir = rec.with_backups.then(|| backup_dir_of(id));
        if let Some(dir) = &backup_dir {
            tx.execute(
                "UPDATE records SET backup_dir = ?1 WHERE id = ?2",
                params![dir, id],
            )
            .map_err(|e| self.sql(e))?;
        }
        {
            let mut ins = tx
                .prepare(
                    "INSERT INTO record_files (record, seq, path, pre, post, backup, dir_mode)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .map_err(|e| self.sql(e))?;
            for (seq, f) in rec.files.iter().enumerate() {
                let backup = match (&backup_dir, &f.pre) {
                    (Some(dir), Fingerprint::File { .. } | Fingerprint::Symlink { .. }) => {
                        Some(format!("{dir}/{seq}"))
                    }
                    _ => f.backup.clone(),
                };
                ins.execute(params![
                    id,
                    seq as i64,
                    f.path.as_bytes(),
                    to_json(&f.pre),
                    to_json(&f.post),
                    backup,
                    f.dir_mode.map(i64::from),
                ])
                .map_err(|e| self.sql(e))?;
            }
        }
        tx.commit().map_err(|e| self.sql(e))?;
        Ok(id)
    }

    fn set_state(
        &self,
        id: RecordId,
        state: RecordState,
        error: Option<&str>,
    ) -> Result<(), JournalError> {
        if !self.owner {
            return Err(JournalError::NotOwner);
        }
        let n = self
            .conn()
            .execute(
                "UPDATE records SET state = ?1, ended_at = ?2, error = COALESCE(?3, error) WHERE id = ?4",
                params![state.as_str(), now_ms(), error, id],
            )
            .map_err(|e| self.sql(e))?;
        if n == 0 {
            return Err(JournalError::NoRecord(id));
        }
        Ok(())
    }

    /// Mark `id` committed: the effect happened completely.
    pub fn commit(&self, id: RecordId) -> Result<(), JournalError> {
        self.set_state(id, RecordState::Committed, None)
    }

    /// Mark `id` failed, with the reason.
    pub fn fail(&self, id: RecordId, why: &str) -> Result<(), JournalError> {
        self.set_state(id, RecordState::Failed, Some(why))
    }

    /// Record what recovery decided for `id` (`rolled_back`, `completed`, `needs_attention`).
    pub fn resolve(
        &self,
        id: RecordId,
        state: RecordState,
        detail: &str,
    ) -> Result<(), JournalError> {
        self.set_state(id, state, Some(detail))
    }

    /// Mark every record of `session`'s `turn` durable: the turn finished.
    pub fn finish_turn(&self, session: &str, turn: u64) -> Result<(), JournalError> {
        if !self.owner {
            return Err(JournalError::NotOwner);
        }
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(|e| self.sql(e))?;
        tx.execute(
            "UPDATE records SET durable = 1 WHERE session = ?1 AND turn = ?2",
            params![session, turn as i64],
        )
        .map_err(|e| self.sql(e))?;
        tx.execute(
            "INSERT OR REPLACE INTO turns (session, turn, finished_at) VALUES (?1, ?2, ?3)",
            params![session, turn as i64, now_ms()],
        )
        .map_err(|e| self.sql(e))?;
        tx.commit().map_err(|e| self.sql(e))
    }

    /// Mark one record durable (recovery acknowledges committed work of a lost turn).
    pub fn mark_durable(&self, id: RecordId) -> Result<(), JournalError> {
        if !self.owner {
            return Err(JournalError::NotOwner);
        }
        self.conn()
            .execute("UPDATE records SET durable = 1 WHERE id = ?1", params![id])
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Every record, oldest first.
    pub fn records(&self) -> Result<Vec<JournalRecord>, JournalError> {
        self.query_records("SELECT id FROM records ORDER BY id", [])
    }

    /// One record.
    pub fn record(&self, id: RecordId) -> Result<JournalRecord, JournalError> {
        self.query_records("SELECT id FROM records WHERE id = ?1", [id])?
            .pop()
            .ok_or(JournalError::NoRecord(id))
    }

    fn query_records<P: rusqlite::Params>(
        &self,
        ids_sql: &str,
        p: P,
    ) -> Result<Vec<JournalRecord>, JournalError> {
        let conn = self.conn();
        let ids: Vec<RecordId> = {
            let mut stmt = conn.prepare(ids_sql).map_err(|e| self.sql(e))?;
            stmt.query_map(p, |r| r.get(0))
                .and_then(|it| it.collect())
                .map_err(|e| self.sql(e))?
        };
        let mut rec_stmt = conn
            .prepare(
                "SELECT id, session, turn, tool, args_hash, state, reverts, backup_dir,
                        started_at, ended_at, error, durable FROM records WHERE id = ?1",
            )
            .map_err(|e| self.sql(e))?;
        let mut file_stmt = conn
            .prepare(
                "SELECT path, pre, post, backup, dir_mode FROM record_files
                 WHERE record = ?1 ORDER BY seq",
            )
            .map_err(|e| self.sql(e))?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let row = rec_stmt
                .query_row([id], |r| {
                    Ok((
                        r.get::<_, RecordId>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, i64>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, String>(4)?,
                        r.get::<_, String>(5)?,
                        r.get::<_, Option<RecordId>>(6)?,
                        r.get::<_, Option<String>>(7)?,
                        r.get::<_, i64>(8)?,
                        r.get::<_, Option<i64>>(9)?,
                        r.get::<_, Option<String>>(10)?,
                        r.get::<_, i64>(11)?,
                    ))
                })
                .optional()
                .map_err(|e| self.sql(e))?;
            let Some(row) = row else { continue };
            let state = RecordState::parse(&row.5).ok_or_else(|| JournalError::BadRecord {
                id,
                why: format!("unknown state `{}`", row.5),
            })?;
            let raw_files: Vec<RawFile> = file_stmt
                .query_map([id], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                })
                .and_then(|it| it.collect())
                .map_err(|e| self.sql(e))?;
            let mut files = Vec::with_capacity(raw_files.len());
            for (path, pre, post, backup, dir_mode) in raw_files {
                let bad = |why: String| JournalError::BadRecord { id, why };
                let path = RelPath::new(OsStr::from_bytes(&path))
                    .map_err(|e| bad(format!("bad path: {e}")))?;
                let pre: Fingerprint =
                    serde_json::from_str(&pre).map_err(|e| bad(format!("bad pre-state: {e}")))?;
                let post: Fingerprint =
                    serde_json::from_str(&post).map_err(|e| bad(format!("bad post-state: {e}")))?;
                files.push(FileEffect {
                    path,
                    pre,
                    post,
                    backup,
                    dir_mode: dir_mode.map(|m| m as u32),
                });
            }
            out.push(JournalRecord {
                id: row.0,
                session: row.1,
                turn: row.2 as u64,
                tool: row.3,
                args_hash: row.4,
                state,
                reverts: row.6,
                backup_dir: row.7,
                files,
                started_at: row.8,
                ended_at: row.9,
                error: row.10,
                durable: row.11 != 0,
            });
        }
        Ok(out)
    }
}

/// A `record_files` row as stored: path bytes, pre and post JSON, backup, directory mode.
type RawFile = (Vec<u8>, String, String, Option<String>, Option<i64>);

fn to_json(f: &Fingerprint) -> String {
    // Fingerprint serialization cannot fail (plain enums, strings and byte vectors).
    serde_json::to_string(f).unwrap_or_else(|_| "{\"kind\":\"other\"}".to_string())
}

fn take_lock(path: &Path) -> Result<Option<fs::File>, JournalError> {
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
        .map_err(|source| JournalError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(file)),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => Ok(None),
        Err(e) => Err(JournalError::Io {
            path: path.to_path_buf(),
            source: e.into(),
        }),
    }
}

enum Damage {
    Damaged(String),
    Other(rusqlite::Error),
}

fn classify(e: rusqlite::Error) -> Damage {
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) | Some(ErrorCode::DatabaseCorrupt) => {
            Damage::Damaged(e.to_string())
        }
        _ => Damage::Other(e),
    }
}

fn open_checked(db_path: &Path) -> Result<Connection, Damage> {
    let conn = Connection::open(db_path).map_err(classify)?;
    conn.busy_timeout(Duration::from_secs(5))
        .map_err(classify)?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(classify)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Damage::Other(rusqlite::Error::ExecuteReturnedResults));
    }
    conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")
        .map_err(classify)?;
    let check: String = conn
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .map_err(classify)?;
    if check != "ok" {
        return Err(Damage::Damaged(format!("integrity check: {check}")));
    }
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(classify)?;
    if version > SCHEMA_VERSION {
        return Err(Damage::Other(rusqlite::Error::InvalidParameterName(
            format!(
                "journal schema {version} is newer than this airlock understands ({SCHEMA_VERSION})"
            ),
        )));
    }
    conn.execute_batch(SCHEMA).map_err(classify)?;
    // An existing table whose shape differs (hand-edited, foreign file) counts as damage.
    let shape_ok = conn
        .prepare("SELECT id, session, turn, tool, args_hash, state, reverts, backup_dir, started_at, ended_at, error, durable FROM records LIMIT 0")
        .is_ok()
        && conn
            .prepare("SELECT record, seq, path, pre, post, backup, dir_mode FROM record_files LIMIT 0")
            .is_ok();
    if !shape_ok {
        return Err(Damage::Damaged(
            "its tables are not airlock's journal tables".into(),
        ));
    }
    conn.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))
        .map_err(classify)?;
    Ok(conn)
}

fn quarantine(db_path: &Path) -> Result<PathBuf, JournalError> {
    let stamp = now_ms();
    let target = PathBuf::from(format!("{}.damaged-{stamp}", db_path.display()));
    fs::rename(db_path, &target).map_err(|source| JournalError::Io {
        path: db_path.to_path_buf(),
        source,
    })?;
    for suffix in ["-wal", "-shm"] {
        let side = PathBuf::from(format!("{}{suffix}", db_path.display()));
        if side.exists() {
            let to = PathBuf::from(format!("{}{suffix}", target.display()));
            fs::rename(&side, &to).map_err(|source| JournalError::Io {
                path: side.clone(),
                source,
            })?;
        }
    }
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ContentHash;

    fn rec(tool: &str, turn: u64) -> NewRecord {
        NewRecord {
            session: "s".into(),
            turn,
            tool: tool.into(),
            args_hash: args_hash(&serde_json::json!({"b": 1, "a": [1, 2]})),
            files: vec![FileEffect {
                path: RelPath::new("src/a.rs").unwrap(),
                pre: Fingerprint::File {
                    hash: ContentHash::of(b"old"),
                    mode: 0o644,
                },
                post: Fingerprint::Absent,
                backup: None,
                dir_mode: None,
            }],
            with_backups: true,
            reverts: None,
        }
    }

    #[test]
    fn args_hash_is_canonical() {
        let a = args_hash(&serde_json::json!({"x": {"b": 2, "a": 1}, "y": "secret"}));
        let b = args_hash(&serde_json::json!({"y": "secret", "x": {"a": 1, "b": 2}}));
        let c = args_hash(&serde_json::json!({"y": "other", "x": {"a": 1, "b": 2}}));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(!a.contains("secret"));
    }

    #[test]
    fn lifecycle_and_pending_becomes_unknown_on_reopen() {
        let d = tempfile::tempdir().unwrap();
        {
            let (j, notices) = Journal::open(d.path()).unwrap();
            assert!(notices.is_empty(), "{notices:?}");
            let a = j.begin(rec("apply", 1)).unwrap();
            let b = j.begin(rec("git_push", 1)).unwrap();
            let c = j.begin(rec("bash", 2)).unwrap();
            j.commit(a).unwrap();
            j.fail(b, "remote rejected").unwrap();
            j.finish_turn("s", 1).unwrap();
            let r = j.records().unwrap();
            assert_eq!(r.len(), 3);
            assert_eq!(r[0].state, RecordState::Committed);
            assert!(r[0].durable);
            assert_eq!(
                r[0].files[0].backup.as_deref(),
                Some(format!(".airlock/backups/{a}/0").as_str())
            );
            assert_eq!(r[1].state, RecordState::Failed);
            assert_eq!(r[1].error.as_deref(), Some("remote rejected"));
            assert_eq!(r[2].state, RecordState::Pending);
            assert_eq!(r[2].id, c);
            assert!(!r[2].durable);
        }
        let (j, notices) = Journal::open(d.path()).unwrap();
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert!(notices[0].to_string().contains("unknown"));
        let r = j.records().unwrap();
        assert_eq!(r[2].state, RecordState::Unknown);
        assert_eq!(r[0].state, RecordState::Committed);
        let json = serde_json::to_value(&r[0]).unwrap();
        assert_eq!(json["state"], "committed");
        assert_eq!(json["files"][0]["path"], "src/a.rs");
    }

    #[test]
    fn second_opener_is_not_owner_and_cannot_relabel() {
        let d = tempfile::tempdir().unwrap();
        let (j1, _) = Journal::open(d.path()).unwrap();
        let id = j1.begin(rec("apply", 1)).unwrap();
        let (j2, notices) = Journal::open(d.path()).unwrap();
        assert!(!j2.is_owner());
        assert!(notices[0].to_string().contains("another airlock process"));
        assert_eq!(j2.record(id).unwrap().state, RecordState::Pending);
        assert!(matches!(j2.commit(id), Err(JournalError::NotOwner)));
    }

    #[test]
    fn damaged_journal_is_quarantined_not_reset_silently() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir_all(d.path().join(".airlock")).unwrap();
        let db = d.path().join(".airlock/journal.db");
        fs::write(&db, vec![0x5a; 8192]).unwrap();
        let (j, notices) = Journal::open(d.path()).unwrap();
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert!(notices[0].to_string().contains("damaged"), "{}", notices[0]);
        let moved: Vec<_> = fs::read_dir(d.path().join(".airlock"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with("journal.db.damaged-"))
            .collect();
        assert_eq!(moved.len(), 1);
        assert_eq!(
            fs::read(d.path().join(".airlock").join(&moved[0])).unwrap(),
            vec![0x5a; 8192]
        );
        assert!(j.records().unwrap().is_empty());
        j.begin(rec("apply", 1)).unwrap();
    }
}
