//! Recovery after a crash: every apply or undo the journal left `pending`/`unknown` is inspected
//! path by path (pre-image, post-image, or neither) and resolved deterministically — rolled back
//! to the pre-images, or marked completed when every path already holds its post-image. Anything
//! else is reported as needing attention and left untouched. Nothing is ever redone blindly, and
//! running recovery twice is safe.

use crate::apply::engine::{self, Found};
use crate::apply::{Confined, FaultHook, remove_backups};
use crate::journal::{Journal, JournalError, JournalRecord, RecordId, RecordState};
use crate::model::Fingerprint;
use airlock_types::RelPath;
use rustix::fd::AsFd;
use serde::Serialize;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// How a record was resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    /// Every path was returned to its pre-image.
    RolledBack,
    /// Every path already held its post-image; only the bookkeeping was finished.
    Completed,
    /// Recovery could not decide safely and changed nothing; see the details.
    NeedsAttention,
    /// Committed work of a turn that never finished: kept as it is, not redone.
    Kept,
    /// Leftover temp files of an interrupted apply or undo were removed (see `removed`).
    Cleaned,
}

/// What recovery found at one path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileFinding {
    /// The path.
    pub path: RelPath,
    /// `pre`, `post`, `missing`, `other` or `unreadable`.
    pub found: &'static str,
    /// The state found, when it is neither image.
    pub actual: Option<Fingerprint>,
    /// The pre-image.
    pub pre: Fingerprint,
    /// The post-image.
    pub post: Fingerprint,
    /// The error, when the path could not be inspected.
    pub error: Option<String>,
}

/// The resolution of one journal record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecoveryOutcome {
    /// Record id.
    pub record: RecordId,
    /// The record's tool (`apply`, `undo`, `bash`, …).
    pub tool: String,
    /// What recovery did.
    pub outcome: Resolution,
    /// One sentence for a person.
    pub note: String,
    /// Per-path findings (for `needs_attention`, the paths that decided it).
    pub details: Vec<FileFinding>,
    /// airlock's own temp files (`.airlock-tmp-<record>-<n>`, `.airlock-rst-<record>-<n>`)
    /// removed, relative to the workspace.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<PathBuf>,
}

/// Why recovery could not run.
#[derive(Debug, thiserror::Error)]
pub enum RecoverError {
    /// The journal could not be read or updated.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The workspace could not be opened.
    #[error("cannot open the workspace {path}: {source}")]
    Workspace {
        /// The workspace.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
}

/// Resolve every interrupted apply and undo in `workspace`'s journal.
pub fn recover(workspace: &Path, journal: &Journal) -> Result<Vec<RecoveryOutcome>, RecoverError> {
    recover_with(workspace, journal, None)
}

/// [`recover`] with a fault hook (tests crash recovery itself to prove it idempotent).
pub fn recover_with(
    workspace: &Path,
    journal: &Journal,
    faults: Option<&dyn FaultHook>,
) -> Result<Vec<RecoveryOutcome>, RecoverError> {
    if !journal.is_owner() {
        return Err(JournalError::NotOwner.into());
    }
    let conf = Confined::open(workspace).map_err(|source| RecoverError::Workspace {
        path: workspace.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    for rec in journal.records()? {
        if rec.state.is_unresolved() {
            let outcome = if is_file_effect(&rec.tool) {
                resolve_files(&conf, &rec, faults)
            } else {
                RecoveryOutcome {
                    record: rec.id,
                    tool: rec.tool.clone(),
                    outcome: Resolution::NeedsAttention,
                    note: format!(
                        "the process stopped while `{}` was running; whether it took effect is unknown, and airlock does not run it again — check by hand",
                        rec.tool
                    ),
                    details: Vec::new(),
                    removed: Vec::new(),
                }
            };
            let state = match outcome.outcome {
                Resolution::RolledBack => RecordState::RolledBack,
                Resolution::Completed => RecordState::Completed,
                _ => RecordState::NeedsAttention,
            };
            journal.resolve(rec.id, state, &outcome.note)?;
            match outcome.outcome {
                Resolution::RolledBack => remove_backups(&conf, &rec),
                // Its turn was lost with the process; the note already says it is kept.
                Resolution::Completed => journal.mark_durable(rec.id)?,
                _ => {}
            }
            out.push(outcome);
        } else if rec.state.took_effect() && !rec.durable {
            journal.mark_durable(rec.id)?;
            out.push(RecoveryOutcome {
                record: rec.id,
                tool: rec.tool.clone(),
                outcome: Resolution::Kept,
                note: format!(
                    "`{}` had completed before its turn was interrupted; it is kept as it is and not redone",
                    rec.tool
                ),
                details: Vec::new(),
                removed: Vec::new(),
            });
        }
    }
    Ok(out)
}

/// Tools whose records carry file effects recovery can resolve.
fn is_file_effect(tool: &str) -> bool {
    matches!(tool, "apply" | "undo")
}

fn finding(rec_file: &crate::journal::FileEffect, found: &io::Result<Found>) -> FileFinding {
    let (label, actual, error) = match found {
        Ok(Found::Pre) => ("pre", None, None),
        Ok(Found::Post) => ("post", None, None),
        Ok(Found::Missing) => ("missing", Some(Fingerprint::Absent), None),
        Ok(Found::Other(fp)) => ("other", Some(fp.clone()), None),
        Err(e) => ("unreadable", None, Some(e.to_string())),
    };
    FileFinding {
        path: rec_file.path.clone(),
        found: label,
        actual,
        pre: rec_file.pre.clone(),
        post: rec_file.post.clone(),
        error,
    }
}

fn resolve_files(
    conf: &Confined,
    rec: &JournalRecord,
    faults: Option<&dyn FaultHook>,
) -> RecoveryOutcome {
    let found: Vec<io::Result<Found>> = rec
        .files
        .iter()
        .map(|f| engine::classify(conf, f))
        .collect();
    let mut removed = Vec::new();
    let outcome = |outcome, note: String, details, temps: &mut Vec<PathBuf>| RecoveryOutcome {
        record: rec.id,
        tool: rec.tool.clone(),
        outcome,
        note,
        details,
        removed: std::mem::take(temps),
    };
    let odd: Vec<FileFinding> = rec
        .files
        .iter()
        .zip(&found)
        .filter(|(_, f)| matches!(f, Err(_) | Ok(Found::Other(_))))
        .map(|(file, f)| finding(file, f))
        .collect();
    if !odd.is_empty() {
        // The forward protocol never resumes, so its temps are of no use to anyone; the paths
        // themselves are left exactly as they are.
        let note_temps = match engine::remove_temps(conf, rec.id, &rec.files) {
            Ok(r) => {
                removed = r;
                String::new()
            }
            Err(e) => format!(" (a temp file could not be removed: {e})"),
        };
        return outcome(
            Resolution::NeedsAttention,
            format!(
                "{} of {} paths hold neither the state before nor the state after the {}; nothing was changed — compare them with the backups in {}",
                odd.len(),
                rec.files.len(),
                rec.tool,
                rec.backup_dir.as_deref().unwrap_or(".airlock/backups")
            ) + &note_temps,
            odd,
            &mut removed,
        );
    }
    if found.iter().all(|f| matches!(f, Ok(Found::Post))) {
        match engine::remove_temps(conf, rec.id, &rec.files) {
            Ok(r) => removed = r,
            Err(e) => {
                return outcome(
                    Resolution::NeedsAttention,
                    format!(
                        "every path already holds its new state, but a temp file could not be removed: {e}"
                    ),
                    Vec::new(),
                    &mut removed,
                );
            }
        }
        return outcome(
            Resolution::Completed,
            format!(
                "the {} had written every path before it was interrupted; it was finished, not redone",
                rec.tool
            ),
            Vec::new(),
            &mut removed,
        );
    }
    // The rollback removes the temps first; listing them here says which.
    if let Ok(r) = engine::remove_temps(conf, rec.id, &rec.files) {
        removed = r;
    }
    match engine::rollback(conf, rec.id, &rec.files, faults) {
        Ok(()) => outcome(
            Resolution::RolledBack,
            format!(
                "the {} was interrupted part-way; all {} paths were restored to their state before it",
                rec.tool,
                rec.files.len()
            ),
            Vec::new(),
            &mut removed,
        ),
        Err(step) => {
            let details = rec
                .files
                .iter()
                .map(|f| finding(f, &engine::classify(conf, f)))
                .filter(|f| f.found != "pre")
                .collect();
            outcome(
                Resolution::NeedsAttention,
                format!(
                    "restoring `{}` failed ({}); the paths listed still differ from their state before the {}",
                    step.path, step.source, rec.tool
                ),
                details,
                &mut removed,
            )
        }
    }
}

/// Find and remove every temp file an apply or undo of this workspace left behind: files and
/// symlinks anywhere in the workspace (not inside `.airlock/`, never through a symlink) named
/// exactly `.airlock-tmp-<record>-<n>` or `.airlock-rst-<record>-<n>`, except those of a record
/// still unresolved (`pending` or `unknown`: its protocol may still need them). Covers temps
/// whose record recovery already resolved, or whose journal was lost. One outcome
/// ([`Resolution::Cleaned`]) per record, listing what was removed. It walks the whole workspace,
/// so it is for an explicit `recover`, not for every start.
pub fn sweep_temps(
    workspace: &Path,
    journal: &Journal,
) -> Result<Vec<RecoveryOutcome>, RecoverError> {
    if !journal.is_owner() {
        return Err(JournalError::NotOwner.into());
    }
    let conf = Confined::open(workspace).map_err(|source| RecoverError::Workspace {
        path: workspace.to_path_buf(),
        source,
    })?;
    let records = journal.records()?;
    let unresolved: std::collections::HashSet<RecordId> = records
        .iter()
        .filter(|r| r.state.is_unresolved())
        .map(|r| r.id)
        .collect();
    let mut found: std::collections::BTreeMap<RecordId, Vec<PathBuf>> = Default::default();
    let mut failed: std::collections::BTreeMap<RecordId, Vec<String>> = Default::default();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let crate::apply::Parent::Dir(fd) = (match conf.dir(Some(&rel)) {
            Ok(p) => p,
            // A directory that turned into a symlink meanwhile is never entered.
            Err(_) => continue,
        }) else {
            continue;
        };
        let Ok(dir) = rustix::fs::Dir::read_from(&fd) else {
            continue;
        };
        for entry in dir.flatten() {
            let name = std::ffi::OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." || (rel.as_os_str().is_empty() && name == ".airlock") {
                continue;
            }
            let path = rel.join(name);
            let Ok(st) = rustix::fs::statat(&fd, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
            else {
                continue;
            };
            let kind = rustix::fs::FileType::from_raw_mode(st.st_mode);
            match kind {
                rustix::fs::FileType::Directory => stack.push(path),
                rustix::fs::FileType::RegularFile | rustix::fs::FileType::Symlink => {
                    let Some(id) = engine::temp_record(name) else {
                        continue;
                    };
                    if unresolved.contains(&id) {
                        continue;
                    }
                    match crate::apply::unlink_existing(fd.as_fd(), name) {
                        Ok(true) => found.entry(id).or_default().push(path),
                        Ok(false) => {}
                        Err(e) => failed
                            .entry(id)
                            .or_default()
                            .push(format!("`{}`: {e}", path.display())),
                    }
                }
                _ => {}
            }
        }
    }
    for id in failed.keys() {
        found.entry(*id).or_default();
    }
    Ok(found
        .into_iter()
        .map(|(id, removed)| {
            let tool = records
                .iter()
                .find(|r| r.id == id)
                .map(|r| r.tool.clone())
                .unwrap_or_else(|| "unknown".into());
            let what = if tool == "unknown" {
                "apply or undo (its journal record is gone)".to_string()
            } else {
                tool.clone()
            };
            let mut note = format!(
                "removed {} leftover temp file(s) of an interrupted {what}",
                removed.len()
            );
            if let Some(errs) = failed.get(&id) {
                note.push_str(&format!("; could not remove {}", errs.join(", ")));
            }
            RecoveryOutcome {
                record: id,
                outcome: Resolution::Cleaned,
                note,
                tool,
                details: Vec::new(),
                removed,
            }
        })
        .collect())
}
