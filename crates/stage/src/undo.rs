//! Undo: revert the last committed apply from its backups. The undo is itself an all-or-nothing,
//! journaled effect (recoverable like an apply), and refuses — writing nothing — when any path it
//! would restore changed since the apply.

use crate::apply::engine::Source;
use crate::apply::{ApplyContext, ApplyError, Confined, Conflict, is_link_refusal, run_protocol};
use crate::journal::{FileEffect, Journal, JournalError, NewRecord, RecordId};
use crate::model::Fingerprint;
use airlock_types::RelPath;
use serde::Serialize;
use std::collections::HashSet;
use std::io;
use std::path::Path;

/// What an undo did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UndoReport {
    /// The undo's journal record.
    pub record: RecordId,
    /// The apply it reverted.
    pub reverted: RecordId,
    /// Paths given back their content from before the apply.
    pub restored: Vec<RelPath>,
    /// Paths the apply had created, now removed.
    pub removed: Vec<RelPath>,
}

/// Why an undo did not happen.
#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    /// No committed apply is left to undo.
    #[error("there is no applied change to undo")]
    NothingToUndo,
    /// Paths changed since the apply; nothing was written.
    #[error("{} changed since the last apply ({}); nothing was undone — restore or keep those edits first", if .0.len() == 1 { "1 file".to_string() } else { format!("{} files", .0.len()) }, .0.iter().take(5).map(|c| c.path.display()).collect::<Vec<_>>().join(", "))]
    Conflict(Vec<Conflict>),
    /// An interrupted apply or undo must be resolved first.
    #[error("journal record {0} was interrupted and is unresolved; run `airlock recover` first")]
    Unresolved(RecordId),
    /// A backup needed to restore a path is missing or damaged.
    #[error("the backup of `{}` is missing or damaged ({why}); nothing was undone", path.display())]
    BadBackup {
        /// The path whose original cannot be restored.
        path: RelPath,
        /// What is wrong.
        why: String,
    },
    /// An I/O error part-way through.
    #[error("{}", if *rolled_back {
        format!("undoing failed at `{path}` ({source}); the workspace was left as it was before the undo")
    } else {
        format!("undoing failed at `{path}` ({source}) and the workspace could not be fully restored; run `airlock recover`")
    })]
    Io {
        /// The path.
        path: String,
        /// The OS error.
        source: io::Error,
        /// True when the workspace was restored to its state before the undo.
        rolled_back: bool,
    },
    /// The journal could not record the undo.
    #[error(transparent)]
    Journal(#[from] JournalError),
}

impl UndoError {
    /// The paths of a conflict (for the CLI's exit code 5), if this is one.
    pub fn conflict_paths(&self) -> Option<Vec<RelPath>> {
        match self {
            UndoError::Conflict(conflicts) => {
                Some(conflicts.iter().map(|c| c.path.clone()).collect())
            }
            _ => None,
        }
    }
}

/// Revert the last committed apply that has not been undone yet.
pub fn undo_last(
    workspace: &Path,
    journal: &Journal,
    ctx: &ApplyContext,
) -> Result<UndoReport, UndoError> {
    if !journal.is_owner() {
        return Err(JournalError::NotOwner.into());
    }
    let records = journal.records()?;
    if let Some(r) = records
        .iter()
        .find(|r| r.state.is_unresolved() && matches!(r.tool.as_str(), "apply" | "undo"))
    {
        return Err(UndoError::Unresolved(r.id));
    }
    let reverted: HashSet<RecordId> = records
        .iter()
        .filter(|r| r.tool == "undo" && r.state.took_effect())
        .filter_map(|r| r.reverts)
        .collect();
    let target = records
        .iter()
        .rev()
        .find(|r| r.tool == "apply" && r.state.took_effect() && !reverted.contains(&r.id))
        .ok_or(UndoError::NothingToUndo)?;

    let conf = Confined::open(workspace).map_err(|source| UndoError::Io {
        path: workspace.display().to_string(),
        source,
        rolled_back: true,
    })?;

    // Every path must still hold exactly what the apply wrote.
    let mut conflicts = Vec::new();
    let mut files = Vec::with_capacity(target.files.len());
    let mut sources = Vec::with_capacity(target.files.len());
    let mut report = UndoReport {
        record: 0,
        reverted: target.id,
        restored: Vec::new(),
        removed: Vec::new(),
    };
    for f in &target.files {
        let (now, mode) = match conf.fingerprint_with_mode(&f.path) {
            Ok(x) => x,
            Err(e) if is_link_refusal(&e) => (Fingerprint::Other, None),
            Err(source) => {
                return Err(UndoError::Io {
                    path: f.path.display(),
                    source,
                    rolled_back: true,
                });
            }
        };
        if now != f.post {
            conflicts.push(Conflict {
                path: f.path.clone(),
                expected: f.post.clone(),
                found: now,
            });
            continue;
        }
        let source = match &f.pre {
            Fingerprint::File { .. } => {
                let backup = f.backup.clone().ok_or_else(|| UndoError::BadBackup {
                    path: f.path.clone(),
                    why: "no backup was recorded".into(),
                })?;
                check_backup(&conf, &backup, &f.pre).map_err(|why| UndoError::BadBackup {
                    path: f.path.clone(),
                    why,
                })?;
                Source::Backup(backup)
            }
            Fingerprint::Symlink { target } => Source::Symlink(target.clone()),
            Fingerprint::Dir => Source::Dir(f.dir_mode.unwrap_or(0o755)),
            Fingerprint::Absent => Source::Nothing,
            Fingerprint::Other => {
                return Err(UndoError::BadBackup {
                    path: f.path.clone(),
                    why: "the original was not a file, symlink or directory".into(),
                });
            }
        };
        if f.pre == Fingerprint::Absent {
            report.removed.push(f.path.clone());
        } else {
            report.restored.push(f.path.clone());
        }
        files.push(FileEffect {
            path: f.path.clone(),
            pre: f.post.clone(),
            post: f.pre.clone(),
            backup: None,
            dir_mode: mode,
        });
        sources.push(source);
    }
    if !conflicts.is_empty() {
        return Err(UndoError::Conflict(conflicts));
    }

    let id = journal.begin(NewRecord {
        session: ctx.session.clone(),
        turn: ctx.turn,
        tool: "undo".into(),
        args_hash: crate::journal::args_hash(&serde_json::json!({ "reverts": target.id })),
        files,
        with_backups: true,
        reverts: Some(target.id),
    })?;
    report.record = id;
    let record = journal.record(id)?;
    run_protocol(&conf, journal, &record, &sources, ctx).map_err(|e| match e {
        ApplyError::Io {
            path,
            source,
            rolled_back,
        } => UndoError::Io {
            path,
            source,
            rolled_back,
        },
        ApplyError::Journal(j) => UndoError::Journal(j),
        other => UndoError::Io {
            path: String::new(),
            source: io::Error::other(other.to_string()),
            rolled_back: true,
        },
    })?;
    Ok(report)
}

fn check_backup(conf: &Confined, backup: &str, want: &Fingerprint) -> Result<(), String> {
    let rel = RelPath::new(backup).map_err(|e| e.to_string())?;
    match conf.fingerprint(&rel) {
        Ok(fp) if &fp == want => Ok(()),
        Ok(Fingerprint::Absent) => Err(format!("{backup} does not exist")),
        Ok(_) => Err(format!("{backup} no longer matches the original")),
        Err(e) => Err(format!("{backup}: {e}")),
    }
}
