//! Atomic apply: write a [`VerifiedChangeset`] to the real workspace all-or-nothing, under the
//! journal, so a crash at any instant leaves a state `recover` can return to exactly the pre- or
//! the post-image.
//!
//! Order: refusals (flagged entries, `.airlock/**`, host-exec paths the operator did not
//! grant, as judged by the caller's [`HostExecGate`]) → conflict check (every path must still match
//! the base it was staged against; nothing is written otherwise) → journal intent → the protocol
//! in [`engine`](self). Every filesystem operation goes through directory handles opened with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, so no symlink is ever followed.

mod confined;
pub(crate) mod engine;

pub(crate) use confined::Confined;
pub(crate) use confined::is_link_refusal;
pub(crate) use confined::{Parent, unlink_existing};

use crate::blobs::BlobStore;
use crate::journal::{FileEffect, Journal, JournalError, NewRecord, RecordId};
use crate::model::{Change, Fingerprint, Flag, VerifiedChangeset};
use airlock_types::RelPath;
use engine::Source;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The step of the protocol about to run (for fault injection in tests and diagnostics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Writing a temp file beside its target.
    Temp,
    /// Backing up an original.
    Backup,
    /// Removing an original (delete, or a change between file and directory).
    Remove,
    /// Creating a directory.
    Mkdir,
    /// Renaming a temp into place.
    Rename,
    /// Making directories durable.
    Sync,
    /// Restoring a pre-image during rollback.
    Rollback,
}

/// One step of the protocol.
#[derive(Debug)]
pub struct Step<'a> {
    /// What is about to happen.
    pub phase: Phase,
    /// The path it concerns.
    pub path: &'a RelPath,
}

/// Called before every mutating step; an error is treated as that step's I/O error. Used to
/// inject faults (EIO at a chosen step, or a SIGKILL of the whole process) in tests.
pub trait FaultHook: Send + Sync {
    /// About to run `step`.
    fn before(&self, step: &Step<'_>) -> io::Result<()>;
}

/// The host-exec judgement apply asks of its caller, as a second line behind the caller's own
/// refusal: which paths the host acts on by itself (git control entries, hooks, ...) and which
/// of them the operator named with `--allow-host-exec`. The stage knows no such paths itself;
/// the kernel builds the gate from the policy's classification and the operator's grant.
pub trait HostExecGate: Send + Sync {
    /// For a host-exec path the operator did not grant: what it is, as a noun phrase with its
    /// reason (`a git control entry (git runs ...)`). `None` for any other path.
    fn ungranted(&self, path: &RelPath) -> Option<String>;
    /// True only when the operator granted `path` and `flag` is a [`Flag::HostExec`] of a kind
    /// the caller knows: the one flag a grant lifts (never, say, a symlink leaving the
    /// workspace, nor a flag whose stored name this build cannot read).
    fn lifts_flag(&self, path: &RelPath, flag: &Flag) -> bool;
}

/// The gate of a context nobody configured: it knows no host-exec path and lifts no flag, so
/// every flagged entry (the harvest flags changes to host-exec paths) stays refused. The kernel
/// replaces it with the policy's gate for every apply.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHostExecGrant;

impl HostExecGate for NoHostExecGrant {
    fn ungranted(&self, _: &RelPath) -> Option<String> {
        None
    }
    fn lifts_flag(&self, _: &RelPath, _: &Flag) -> bool {
        false
    }
}

/// Who is applying: recorded in the journal.
#[derive(Clone)]
pub struct ApplyContext {
    /// Session name.
    pub session: String,
    /// Turn number.
    pub turn: u64,
    /// Fault injection (tests only; `None` in normal use).
    pub faults: Option<Arc<dyn FaultHook>>,
    /// Which host-exec paths are refused and which flags the operator's `--allow-host-exec`
    /// lifts. [`NoHostExecGrant`] by default.
    pub host_exec: Arc<dyn HostExecGate>,
}

impl ApplyContext {
    /// A context for `session`'s `turn`.
    pub fn new(session: impl Into<String>, turn: u64) -> ApplyContext {
        ApplyContext {
            session: session.into(),
            turn,
            faults: None,
            host_exec: Arc::new(NoHostExecGrant),
        }
    }
}

impl Default for ApplyContext {
    fn default() -> ApplyContext {
        ApplyContext::new(String::new(), 0)
    }
}

impl fmt::Debug for ApplyContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApplyContext")
            .field("session", &self.session)
            .field("turn", &self.turn)
            .field("faults", &self.faults.is_some())
            .finish_non_exhaustive()
    }
}

/// What an apply did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApplyReport {
    /// The journal record.
    pub record: RecordId,
    /// Paths written (files, symlinks, directories).
    pub written: Vec<RelPath>,
    /// Paths deleted.
    pub deleted: Vec<RelPath>,
    /// Parent directories that did not exist and were created.
    pub created_dirs: Vec<RelPath>,
    /// Ignored (session-local) entries, never applied.
    pub skipped_session_local: Vec<RelPath>,
}

/// A path whose disk state no longer matches the base it was staged against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Conflict {
    /// The path.
    pub path: RelPath,
    /// The base recorded when the change was staged.
    pub expected: Fingerprint,
    /// What is on disk now.
    pub found: Fingerprint,
}

/// Why an apply did not happen.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// Files changed on disk since they were staged; nothing was written.
    #[error("{} changed on disk since it was staged ({}); nothing was written — review the changes and stage again", plural(.0.len()), list(.0.iter().map(|c| &c.path)))]
    Conflict(Vec<Conflict>),
    /// An entry may not be applied; nothing was written.
    #[error("airlock refuses to apply `{}`: {why}; nothing was written", path.display())]
    Refused {
        /// The path.
        path: RelPath,
        /// Why.
        why: String,
    },
    /// An I/O error part-way through.
    #[error("{}", io_sentence(path, source, *rolled_back))]
    Io {
        /// The path being written (or the workspace).
        path: String,
        /// The OS error.
        source: io::Error,
        /// True when the workspace was restored to its state before the apply.
        rolled_back: bool,
    },
    /// The journal could not record the apply.
    #[error(transparent)]
    Journal(#[from] JournalError),
}

fn plural(n: usize) -> String {
    if n == 1 {
        "1 file".to_string()
    } else {
        format!("{n} files")
    }
}

fn list<'a>(paths: impl Iterator<Item = &'a RelPath>) -> String {
    let all: Vec<String> = paths.map(|p| p.display()).collect();
    if all.len() <= 5 {
        all.join(", ")
    } else {
        format!("{}, and {} more", all[..5].join(", "), all.len() - 5)
    }
}

fn io_sentence(path: &str, source: &io::Error, rolled_back: bool) -> String {
    if rolled_back {
        format!(
            "writing `{path}` failed ({source}); the workspace was restored to its state before the apply"
        )
    } else {
        format!(
            "writing `{path}` failed ({source}) and the workspace could not be fully restored; run `airlock recover`"
        )
    }
}

/// True for paths airlock keeps for itself.
pub(crate) fn is_internal(p: &RelPath) -> bool {
    p.components().next().is_some_and(|c| c == ".airlock")
}

/// The mode bits apply writes: permissions and the sticky bit, never setuid or setgid (a
/// staged file or directory must not run with, or hand out, another identity). The sticky bit
/// only restricts who may delete entries of a directory, so it is kept.
pub const APPLIED_MODE_BITS: u32 = 0o1777;

const LINK_REFUSAL: &str =
    "a parent directory is a symbolic link, and airlock never follows links while applying";

/// Write `verified` to `workspace` all-or-nothing under `journal`.
pub fn apply_verified(
    workspace: &Path,
    verified: &VerifiedChangeset,
    blobs: &BlobStore,
    journal: &Journal,
    ctx: &ApplyContext,
) -> Result<ApplyReport, ApplyError> {
    let snap = verified.snapshot();
    let mut skipped = Vec::new();
    let mut entries = Vec::new();
    for e in &snap.entries {
        if e.session_local {
            skipped.push(e.path.clone());
            continue;
        }
        if is_internal(&e.path) {
            return Err(ApplyError::Refused {
                path: e.path.clone(),
                why: "paths under `.airlock/` belong to airlock".into(),
            });
        }
        if let Some(why) = &e.flagged
            && !ctx.host_exec.lifts_flag(&e.path, why)
        {
            return Err(ApplyError::Refused {
                path: e.path.clone(),
                why: format!("the entry is flagged ({why})"),
            });
        }
        // A directory entry over an existing directory (an overlay copy-up) changes nothing.
        let no_op = matches!(e.change, Change::Dir { .. }) && e.base == Fingerprint::Dir;
        if !no_op && let Some(what) = ctx.host_exec.ungranted(&e.path) {
            return Err(ApplyError::Refused {
                path: e.path.clone(),
                why: format!(
                    "it is {what}, and the operator did not allow it with --allow-host-exec"
                ),
            });
        }
        entries.push(e);
    }
    if !journal.is_owner() {
        return Err(ApplyError::Journal(JournalError::NotOwner));
    }
    let conf = Confined::open(workspace).map_err(|source| ApplyError::Io {
        path: workspace.display().to_string(),
        source,
        rolled_back: true,
    })?;

    // Paths whose current object is a file or symlink: nothing can exist below them, and
    // looking below them would cross a link.
    let replaced: std::collections::BTreeSet<PathBuf> = entries
        .iter()
        .filter(|e| {
            matches!(
                e.base,
                Fingerprint::File { .. } | Fingerprint::Symlink { .. }
            )
        })
        .map(|e| e.path.as_path().to_path_buf())
        .collect();
    let under_replaced = |p: &Path| p.ancestors().skip(1).any(|a| replaced.contains(a));
    let disk = |p: &RelPath| -> Result<(Fingerprint, Option<u32>), ApplyError> {
        if under_replaced(p.as_path()) {
            return Ok((Fingerprint::Absent, None));
        }
        conf.fingerprint_with_mode(p).map_err(|source| {
            if is_link_refusal(&source) {
                ApplyError::Refused {
                    path: p.clone(),
                    why: LINK_REFUSAL.into(),
                }
            } else {
                ApplyError::Io {
                    path: p.display(),
                    source,
                    rolled_back: true,
                }
            }
        })
    };

    // Conflict check: nothing is written unless every path still matches its base.
    let mut conflicts = Vec::new();
    let mut current = Vec::with_capacity(entries.len());
    for e in &entries {
        let (found, mode) = disk(&e.path)?;
        if found != e.base {
            conflicts.push(Conflict {
                path: e.path.clone(),
                expected: e.base.clone(),
                found,
            });
        } else {
            current.push((found, mode));
        }
    }
    if !conflicts.is_empty() {
        return Err(ApplyError::Conflict(conflicts));
    }

    // Effects, keyed by path bytes so parents sort before their children.
    struct Planned {
        effect: FileEffect,
        source: Source,
        explicit: bool,
    }
    let mut plan: BTreeMap<Vec<u8>, Planned> = BTreeMap::new();
    for (e, (pre, dir_mode)) in entries.iter().zip(current) {
        let (post, source) = match &e.change {
            Change::Write { content, mode, .. } => {
                if !blobs.contains(content) {
                    return Err(ApplyError::Refused {
                        path: e.path.clone(),
                        why: format!("its staged content {content} is missing from the blob store"),
                    });
                }
                (
                    Fingerprint::File {
                        hash: *content,
                        mode: mode & APPLIED_MODE_BITS,
                    },
                    Source::Blob(blobs.path(content)),
                )
            }
            Change::Delete => (Fingerprint::Absent, Source::Nothing),
            Change::Symlink { target } => (
                Fingerprint::Symlink {
                    target: target.clone(),
                },
                Source::Symlink(target.clone()),
            ),
            Change::Dir { mode } => (Fingerprint::Dir, Source::Dir(mode & APPLIED_MODE_BITS)),
        };
        if post == pre {
            continue;
        }
        if pre == Fingerprint::Other {
            return Err(ApplyError::Refused {
                path: e.path.clone(),
                why: "it is a socket, fifo or device on disk".into(),
            });
        }
        plan.insert(
            e.path.as_bytes().to_vec(),
            Planned {
                effect: FileEffect {
                    path: e.path.clone(),
                    pre,
                    post,
                    backup: None,
                    dir_mode,
                },
                source,
                explicit: true,
            },
        );
    }

    // Missing parents become recorded effects, so a rollback removes them again.
    let mut parents_seen: HashMap<PathBuf, bool> = HashMap::new();
    let creating: Vec<RelPath> = plan
        .values()
        .filter(|p| p.effect.post != Fingerprint::Absent)
        .map(|p| p.effect.path.clone())
        .collect();
    for path in creating {
        let mut anc = path.parent();
        while let Some(a) = anc {
            if parents_seen.contains_key(a.as_path()) {
                break;
            }
            parents_seen.insert(a.as_path().to_path_buf(), true);
            if let Some(p) = plan.get(a.as_bytes()) {
                if p.effect.post != Fingerprint::Dir {
                    return Err(ApplyError::Refused {
                        path: path.clone(),
                        why: format!(
                            "the changeset also removes or replaces its parent `{}`",
                            a.display()
                        ),
                    });
                }
            } else {
                let (found, _) = disk(&a)?;
                match found {
                    Fingerprint::Dir => {}
                    Fingerprint::Symlink { .. } => {
                        return Err(ApplyError::Refused {
                            path: path.clone(),
                            why: LINK_REFUSAL.into(),
                        });
                    }
                    Fingerprint::Absent => {
                        plan.insert(
                            a.as_bytes().to_vec(),
                            Planned {
                                effect: FileEffect {
                                    path: a.clone(),
                                    pre: Fingerprint::Absent,
                                    post: Fingerprint::Dir,
                                    backup: None,
                                    dir_mode: None,
                                },
                                source: Source::Dir(0o755),
                                explicit: false,
                            },
                        );
                    }
                    _ => {
                        return Err(ApplyError::Refused {
                            path: path.clone(),
                            why: format!("its parent `{}` is not a directory on disk", a.display()),
                        });
                    }
                }
            }
            anc = a.parent();
        }
    }

    let mut files = Vec::with_capacity(plan.len());
    let mut sources = Vec::with_capacity(plan.len());
    let mut report = ApplyReport {
        record: 0,
        written: Vec::new(),
        deleted: Vec::new(),
        created_dirs: Vec::new(),
        skipped_session_local: skipped,
    };
    for p in plan.into_values() {
        match (&p.effect.post, p.explicit) {
            (_, false) => report.created_dirs.push(p.effect.path.clone()),
            (Fingerprint::Absent, true) => report.deleted.push(p.effect.path.clone()),
            (_, true) => report.written.push(p.effect.path.clone()),
        }
        files.push(p.effect);
        sources.push(p.source);
    }

    let id = journal.begin(NewRecord {
        session: ctx.session.clone(),
        turn: ctx.turn,
        tool: "apply".into(),
        args_hash: crate::journal::args_hash(&serde_json::json!({
            "changeset": snap.hash.to_hex(),
        })),
        files,
        with_backups: true,
        reverts: None,
    })?;
    report.record = id;
    let record = journal.record(id)?;
    run_protocol(&conf, journal, &record, &sources, ctx)?;
    Ok(report)
}

/// Forward protocol for a journaled record, then commit; on failure roll back and record
/// `failed` (or leave the record `pending` for `recover` when even the rollback fails).
pub(crate) fn run_protocol(
    conf: &Confined,
    journal: &Journal,
    record: &crate::journal::JournalRecord,
    sources: &[Source],
    ctx: &ApplyContext,
) -> Result<(), ApplyError> {
    let hook = ctx.faults.as_deref();
    match engine::execute(
        conf,
        record.id,
        record.backup_dir.as_deref(),
        &record.files,
        sources,
        hook,
    ) {
        Ok(()) => {
            journal.commit(record.id)?;
            Ok(())
        }
        Err(step) => match engine::rollback(conf, record.id, &record.files, None) {
            Ok(()) => {
                let why = format!("{}: {}", step.path, step.source);
                journal.fail(record.id, &why)?;
                remove_backups(conf, record);
                Err(ApplyError::Io {
                    path: step.path,
                    source: step.source,
                    rolled_back: true,
                })
            }
            Err(_) => Err(ApplyError::Io {
                path: step.path,
                source: step.source,
                rolled_back: false,
            }),
        },
    }
}

/// Drop a record's backups once they can no longer be needed.
pub(crate) fn remove_backups(conf: &Confined, record: &crate::journal::JournalRecord) {
    if let Some(dir) = &record.backup_dir {
        // Best effort: a leftover backup directory wastes space but is never read again.
        let _ = std::fs::remove_dir_all(conf.root_path().join(dir));
    }
}
