//! Crash recovery of `git_commit`, which never commits again. Before git touches anything, the
//! commit's intent (branch, the commit it starts from, the message) is written beside the
//! journal's `pending` record (`.airlock/git/commit-<record>.json`). A record left `pending` or
//! `unknown` is resolved by looking at the branch: still at the starting commit → nothing was
//! committed (`rolled_back`: git's index may hold the paths added); one new commit on top of it
//! with the recorded message → `completed`; anything else → `needs_attention`. No intent file →
//! git never ran (`rolled_back`).

use super::{Git, GitError};
use airlock_stage::journal::{Journal, RecordState};
use airlock_stage::recover::{RecoveryOutcome, Resolution};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// What a `git_commit` is about to do.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CommitIntent {
    /// The journal record.
    pub(crate) record: i64,
    /// The branch ref (`refs/heads/main`).
    pub(crate) branch: String,
    /// The commit the branch pointed at (`None` before the first commit).
    pub(crate) before: Option<String>,
    /// The message.
    pub(crate) message: String,
    /// The session was unrestricted.
    pub(crate) unrestricted: bool,
}

fn dir(root: &Path) -> PathBuf {
    root.join(".airlock").join("git")
}

fn file(root: &Path, record: i64) -> PathBuf {
    dir(root).join(format!("commit-{record}.json"))
}

impl CommitIntent {
    /// Write the intent durably (temp file, fsync, rename).
    pub(crate) fn write(&self, root: &Path) -> Result<(), GitError> {
        let d = dir(root);
        std::fs::create_dir_all(&d).map_err(|e| GitError::io("cannot create .airlock/git", e))?;
        let tmp = d.join(format!(".commit-{}.tmp", self.record));
        let body = serde_json::to_vec(self).unwrap_or_default();
        let io = |e| GitError::io("cannot write the commit intent", e);
        {
            use std::io::Write as _;
            let mut f = std::fs::File::create(&tmp).map_err(io)?;
            f.write_all(&body).map_err(io)?;
            f.sync_all().map_err(io)?;
        }
        std::fs::rename(&tmp, file(root, self.record)).map_err(io)?;
        if let Ok(d) = std::fs::File::open(&d) {
            let _ = d.sync_all();
        }
        Ok(())
    }

    /// Remove a finished commit's intent.
    pub(crate) fn remove(root: &Path, record: i64) {
        let _ = std::fs::remove_file(file(root, record));
    }

    fn read(root: &Path, record: i64) -> Option<CommitIntent> {
        serde_json::from_slice(&std::fs::read(file(root, record)).ok()?).ok()
    }
}

/// Resolve every interrupted `git_commit` of `root`'s journal; the outcomes, as `recover`
/// reports them. Runs before the stage's own recovery, which leaves the rest.
pub(crate) fn recover_commits(
    root: &Path,
    journal: &Journal,
    scratch: &Path,
    path_var: Option<&OsString>,
) -> Vec<RecoveryOutcome> {
    let Ok(records) = journal.records() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for rec in records
        .iter()
        .filter(|r| r.tool == "git_commit" && r.state.is_unresolved())
    {
        let (resolution, note) = match CommitIntent::read(root, rec.id) {
            None => (
                Resolution::RolledBack,
                "the commit had not started when the process stopped: nothing was committed, and it is not run again".to_string(),
            ),
            Some(intent) => judge(root, scratch, path_var, &intent),
        };
        let state = match resolution {
            Resolution::RolledBack => RecordState::RolledBack,
            Resolution::Completed => RecordState::Completed,
            _ => RecordState::NeedsAttention,
        };
        if journal.resolve(rec.id, state, &note).is_err() {
            continue;
        }
        if resolution == Resolution::Completed {
            let _ = journal.mark_durable(rec.id);
        }
        if resolution != Resolution::NeedsAttention {
            CommitIntent::remove(root, rec.id);
        }
        out.push(RecoveryOutcome {
            record: rec.id,
            tool: rec.tool.clone(),
            outcome: resolution,
            note,
            details: Vec::new(),
            removed: Vec::new(),
        });
    }
    out
}

fn judge(
    root: &Path,
    scratch: &Path,
    path_var: Option<&OsString>,
    intent: &CommitIntent,
) -> (Resolution, String) {
    let git = match Git::open(root, scratch, path_var, None, &[], false) {
        Ok(g) => g,
        Err(e) => {
            return (
                Resolution::NeedsAttention,
                format!(
                    "the repository cannot be read to decide the interrupted commit ({e}); check by hand"
                ),
            );
        }
    };
    let rev = |r: &str| {
        git.run(&["rev-parse", "--verify", "-q", r])
            .ok()
            .map(|o| String::from_utf8_lossy(&o).trim().to_string())
    };
    let now = rev(&intent.branch);
    if now == intent.before {
        return (
            Resolution::RolledBack,
            format!(
                "no commit was made on {} before the process stopped (git's index may hold the paths it had added); it is not run again",
                intent.branch
            ),
        );
    }
    let Some(now) = now else {
        return (
            Resolution::NeedsAttention,
            format!("{} no longer exists; check by hand", intent.branch),
        );
    };
    let parent = rev(&format!("{now}^"));
    let message = git
        .run(&["log", "-1", "--format=%B", &now])
        .map(|o| String::from_utf8_lossy(&o).trim().to_string())
        .unwrap_or_default();
    if parent == intent.before && message == intent.message.trim() {
        (
            Resolution::Completed,
            format!(
                "the commit {} on {} had been made before the process stopped; it is kept and not made again",
                &now[..now.len().min(12)],
                intent.branch
            ),
        )
    } else {
        (
            Resolution::NeedsAttention,
            format!(
                "{} moved to {} and that is not the interrupted commit alone; check by hand",
                intent.branch,
                &now[..now.len().min(12)]
            ),
        )
    }
}
