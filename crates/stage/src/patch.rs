//! The `apply_patch` tool: a unified or git diff staged into the changeset, all or nothing.
//!
//! Every hunk must match the merged view exactly (context and removed lines, byte for byte); a
//! hunk may land at an offset from its stated line, as with `git apply`, but is never fuzzed.
//! Every file is validated before anything is staged, and then all of it is staged in one
//! transaction. Creates, deletes, renames, copies and mode changes from git headers are honoured.

use crate::store::{StageError, StageOp, Store};
use crate::view;
use airlock_types::RelPath;
use diffy::patch_set::{FileMode, FileOperation, ParseOptions, PatchKind, PatchSet};
use std::collections::HashMap;

/// Why a patch was refused. Nothing is staged when any of these is returned.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The text is not a patch diffy can read.
    #[error("the patch cannot be parsed: {0}")]
    Parse(String),
    /// The patch contains no file changes.
    #[error("the patch contains no file changes")]
    Empty,
    /// A path in the patch is absolute, climbs with `..`, or is otherwise unclean.
    #[error("the patch names `{path}`, which is not a clean workspace-relative path ({reason})")]
    BadPath {
        /// The path as written.
        path: String,
        /// Why it was refused.
        reason: String,
    },
    /// A hunk's context or removed lines do not match the file.
    #[error(
        "hunk #{hunk} of `{path}` (old line {line}) does not apply: its context or removed lines differ from the file; nothing was staged"
    )]
    HunkFailed {
        /// The file.
        path: String,
        /// 1-based hunk number within the file's patch.
        hunk: usize,
        /// The hunk's stated start line in the old file.
        line: usize,
    },
    /// The patch modifies or deletes a file that does not exist.
    #[error("`{0}` does not exist, so the patch cannot change it; nothing was staged")]
    Missing(String),
    /// The patch creates a file that already exists.
    #[error("`{0}` already exists, so the patch cannot create it; nothing was staged")]
    Exists(String),
    /// A deletion whose removed lines are not the whole file.
    #[error("the deletion of `{0}` does not match its content; nothing was staged")]
    DeleteMismatch(String),
    /// Something the patch asks for is not supported (binary patches, submodules, ...).
    #[error("`{path}`: {what} are not supported by apply_patch; nothing was staged")]
    Unsupported {
        /// The file.
        path: String,
        /// What was asked for.
        what: &'static str,
    },
    /// Reading the merged view or staging failed.
    #[error(transparent)]
    Stage(#[from] StageError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineKind {
    Context,
    Delete,
    Insert,
}

#[derive(Debug, Clone)]
struct Hunk {
    old_start: usize,
    old_len: usize,
    lines: Vec<(LineKind, Vec<u8>)>,
}

#[derive(Debug, Clone)]
enum Op {
    Create(RelPath),
    Delete(RelPath),
    Modify(RelPath),
    Rename(RelPath, RelPath),
    Copy(RelPath, RelPath),
}

#[derive(Debug, Clone)]
struct FilePatch {
    op: Op,
    hunks: Vec<Hunk>,
    old_mode: Option<FileMode>,
    new_mode: Option<FileMode>,
    binary: bool,
}

/// A parsed patch: one entry per file, paths already cleaned (a/ b/ prefixes stripped).
#[derive(Debug, Clone)]
pub struct ParsedPatch {
    files: Vec<FilePatch>,
}

impl ParsedPatch {
    /// Every path the patch touches (sources and destinations), so the caller can run each
    /// through the jail first.
    pub fn paths(&self) -> Vec<String> {
        let mut out = Vec::new();
        for f in &self.files {
            match &f.op {
                Op::Create(p) | Op::Delete(p) | Op::Modify(p) => out.push(p.display()),
                Op::Rename(a, b) | Op::Copy(a, b) => {
                    out.push(a.display());
                    out.push(b.display());
                }
            }
        }
        out
    }

    /// The touched paths as [`RelPath`]s.
    pub fn rel_paths(&self) -> Vec<RelPath> {
        let mut out = Vec::new();
        for f in &self.files {
            match &f.op {
                Op::Create(p) | Op::Delete(p) | Op::Modify(p) => out.push(p.clone()),
                Op::Rename(a, b) | Op::Copy(a, b) => {
                    out.push(a.clone());
                    out.push(b.clone());
                }
            }
        }
        out
    }

    /// The same patch with its paths replaced, in the order of [`ParsedPatch::rel_paths`], by
    /// the paths a jail confined them to (a path through a directory link becomes the link's
    /// target). The stage then writes exactly where the jail said, without resolving anything
    /// again. Refused when the list does not have one path per touched path.
    pub fn confined_to(&self, confined: &[RelPath]) -> Result<ParsedPatch, PatchError> {
        let expected = self.rel_paths().len();
        if confined.len() != expected {
            return Err(PatchError::BadPath {
                path: self.paths().join(", "),
                reason: format!(
                    "the patch touches {expected} path(s) but {} were confined",
                    confined.len()
                ),
            });
        }
        let mut next = confined.iter().cloned();
        let mut take = || next.next().expect("one confined path per touched path");
        let files = self
            .files
            .iter()
            .map(|f| {
                let op = match &f.op {
                    Op::Create(_) => Op::Create(take()),
                    Op::Delete(_) => Op::Delete(take()),
                    Op::Modify(_) => Op::Modify(take()),
                    Op::Rename(..) => Op::Rename(take(), take()),
                    Op::Copy(..) => Op::Copy(take(), take()),
                };
                FilePatch { op, ..f.clone() }
            })
            .collect();
        Ok(ParsedPatch { files })
    }

    /// How many files the patch changes.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// True when the patch changes nothing.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

fn clean(raw: &str, prefix: &str) -> Result<RelPath, PatchError> {
    let raw_trimmed = raw.trim_end_matches(['\r']);
    let stripped = raw_trimmed.strip_prefix(prefix).unwrap_or(raw_trimmed);
    if stripped.starts_with('/') {
        return Err(PatchError::BadPath {
            path: raw.to_string(),
            reason: "absolute paths are refused".into(),
        });
    }
    RelPath::new(stripped).map_err(|e| PatchError::BadPath {
        path: raw.to_string(),
        reason: e.to_string(),
    })
}

/// Parse a unified diff or a git diff (detected by a `diff --git` line).
pub fn parse_patch(text: &str) -> Result<ParsedPatch, PatchError> {
    let git = text.starts_with("diff --git ") || text.contains("\ndiff --git ");
    let opts = if git {
        ParseOptions::gitdiff()
    } else {
        ParseOptions::unidiff()
    };
    let mut files = Vec::new();
    for fp in PatchSet::parse(text, opts) {
        let fp = fp.map_err(|e| PatchError::Parse(e.to_string()))?;
        let op = match fp.operation() {
            FileOperation::Create(p) => Op::Create(clean(p, "b/")?),
            FileOperation::Delete(p) => Op::Delete(clean(p, "a/")?),
            FileOperation::Modify { original, modified } => {
                let a = clean(original, "a/")?;
                let b = clean(modified, "b/")?;
                if a == b {
                    Op::Modify(a)
                } else {
                    Op::Rename(a, b)
                }
            }
            FileOperation::Rename { from, to } => Op::Rename(clean(from, "a/")?, clean(to, "b/")?),
            FileOperation::Copy { from, to } => Op::Copy(clean(from, "a/")?, clean(to, "b/")?),
        };
        let (hunks, binary) = match fp.patch() {
            PatchKind::Binary(_) => (Vec::new(), true),
            PatchKind::Text(p) => (
                p.hunks()
                    .iter()
                    .map(|h| Hunk {
                        old_start: h.old_range().start(),
                        old_len: h.old_range().len(),
                        lines: h
                            .lines()
                            .iter()
                            .map(|l| match l {
                                diffy::Line::Context(s) => {
                                    (LineKind::Context, s.as_bytes().to_vec())
                                }
                                diffy::Line::Delete(s) => (LineKind::Delete, s.as_bytes().to_vec()),
                                diffy::Line::Insert(s) => (LineKind::Insert, s.as_bytes().to_vec()),
                            })
                            .collect(),
                    })
                    .collect(),
                false,
            ),
        };
        files.push(FilePatch {
            op,
            hunks,
            old_mode: fp.old_mode().copied(),
            new_mode: fp.new_mode().copied(),
            binary,
        });
    }
    if files.is_empty() {
        return Err(PatchError::Empty);
    }
    Ok(ParsedPatch { files })
}

/// Split into lines, each keeping its `\n` (the last may lack one).
fn lines(bytes: &[u8]) -> Vec<&[u8]> {
    bytes.split_inclusive(|b| *b == b'\n').collect()
}

/// Apply `hunks` to `old` exactly; on failure, the 1-based hunk number and its stated line.
fn apply_hunks(old: &[u8], hunks: &[Hunk]) -> Result<Vec<u8>, (usize, usize)> {
    let image = lines(old);
    let mut out: Vec<u8> = Vec::with_capacity(old.len());
    let mut pos = 0usize;
    for (i, h) in hunks.iter().enumerate() {
        let pre: Vec<&[u8]> = h
            .lines
            .iter()
            .filter(|(k, _)| *k != LineKind::Insert)
            .map(|(_, l)| l.as_slice())
            .collect();
        let expected = if h.old_len == 0 {
            h.old_start
        } else {
            h.old_start.saturating_sub(1)
        };
        let fits = |p: usize| p + pre.len() <= image.len() && image[p..p + pre.len()] == pre[..];
        // Exact position first, then the nearest offset (never before the previous hunk).
        let max = image.len().saturating_sub(pre.len());
        let found = (0..=expected.max(image.len()))
            .flat_map(|d| {
                let fwd = expected.checked_add(d);
                let back = if d > 0 { expected.checked_sub(d) } else { None };
                [fwd, back]
            })
            .flatten()
            .filter(|p| *p >= pos && *p <= max)
            .find(|p| fits(*p));
        let Some(at) = found else {
            return Err((i + 1, h.old_start));
        };
        for l in &image[pos..at] {
            out.extend_from_slice(l);
        }
        for (k, l) in &h.lines {
            if *k != LineKind::Delete {
                out.extend_from_slice(l);
            }
        }
        pos = at + pre.len();
    }
    for l in &image[pos..] {
        out.extend_from_slice(l);
    }
    Ok(out)
}

/// The state of a file while the patch is validated: content and mode, or absent.
type Pending = HashMap<RelPath, Option<(Vec<u8>, u32)>>;

fn current(
    store: &Store,
    pending: &Pending,
    p: &RelPath,
) -> Result<Option<(Vec<u8>, u32)>, PatchError> {
    if let Some(state) = pending.get(p) {
        return Ok(state.clone());
    }
    match view::stat_merged(store, p)? {
        None => Ok(None),
        Some(m) => match m.kind {
            view::NodeKind::File => {
                let bytes = view::read_merged(store, p)?.unwrap_or_default();
                let mode = merged_mode(store, p)?;
                Ok(Some((bytes, mode)))
            }
            view::NodeKind::Symlink => Err(PatchError::Unsupported {
                path: p.display(),
                what: "patches to symlinks",
            }),
            _ => Err(PatchError::Unsupported {
                path: p.display(),
                what: "patches to directories and special files",
            }),
        },
    }
}

fn merged_mode(store: &Store, p: &RelPath) -> Result<u32, PatchError> {
    if let Some(e) = store.get(p)?
        && let crate::model::Change::Write { mode, .. } = e.change
    {
        return Ok(mode);
    }
    use cap_std::fs::MetadataExt;
    let md = store
        .workspace_dir()
        .symlink_metadata(p.as_path())
        .map_err(|e| StageError::io("inspect", p, e))?;
    Ok(md.mode() & 0o7777)
}

fn mode_bits(m: &FileMode, path: &RelPath) -> Result<u32, PatchError> {
    match m {
        FileMode::Regular => Ok(0o644),
        FileMode::Executable => Ok(0o755),
        FileMode::Symlink => Err(PatchError::Unsupported {
            path: path.display(),
            what: "symlink patches",
        }),
        FileMode::Gitlink => Err(PatchError::Unsupported {
            path: path.display(),
            what: "submodule (gitlink) patches",
        }),
    }
}

/// The new mode: the patch's when it states a change (or a new file's), else the old one.
fn new_mode(f: &FilePatch, path: &RelPath, old: Option<u32>) -> Result<u32, PatchError> {
    match (&f.new_mode, &f.old_mode, old) {
        (Some(n), Some(o), Some(old)) if n == o => Ok(old),
        (Some(n), _, _) => mode_bits(n, path),
        (None, _, Some(old)) => Ok(old),
        (None, _, None) => Ok(0o644),
    }
}

fn patched(f: &FilePatch, path: &RelPath, old: &[u8]) -> Result<Vec<u8>, PatchError> {
    apply_hunks(old, &f.hunks).map_err(|(hunk, line)| PatchError::HunkFailed {
        path: path.display(),
        hunk,
        line,
    })
}

/// Validate every file of `patch` against the merged view, then stage them all in one
/// transaction. Returns the paths staged (written or deleted).
pub fn stage_patch(store: &Store, patch: &ParsedPatch) -> Result<Vec<RelPath>, PatchError> {
    let mut pending: Pending = HashMap::new();
    let mut order: Vec<RelPath> = Vec::new();
    let mut touch = |pending: &mut Pending, p: &RelPath, state: Option<(Vec<u8>, u32)>| {
        if !order.contains(p) {
            order.push(p.clone());
        }
        pending.insert(p.clone(), state);
    };
    for f in &patch.files {
        let first = match &f.op {
            Op::Create(p) | Op::Delete(p) | Op::Modify(p) | Op::Rename(p, _) | Op::Copy(p, _) => p,
        };
        if f.binary {
            return Err(PatchError::Unsupported {
                path: first.display(),
                what: "binary patches",
            });
        }
        for m in [&f.old_mode, &f.new_mode].into_iter().flatten() {
            mode_bits(m, first)?;
        }
        match &f.op {
            Op::Create(p) => {
                if current(store, &pending, p)?.is_some() {
                    return Err(PatchError::Exists(p.display()));
                }
                let content = patched(f, p, b"")?;
                let mode = new_mode(f, p, None)?;
                touch(&mut pending, p, Some((content, mode)));
            }
            Op::Delete(p) => {
                let Some((old, _)) = current(store, &pending, p)? else {
                    return Err(PatchError::Missing(p.display()));
                };
                if !f.hunks.is_empty() && !patched(f, p, &old)?.is_empty() {
                    return Err(PatchError::DeleteMismatch(p.display()));
                }
                touch(&mut pending, p, None);
            }
            Op::Modify(p) => {
                let Some((old, mode)) = current(store, &pending, p)? else {
                    return Err(PatchError::Missing(p.display()));
                };
                let content = patched(f, p, &old)?;
                let mode = new_mode(f, p, Some(mode))?;
                touch(&mut pending, p, Some((content, mode)));
            }
            Op::Rename(from, to) | Op::Copy(from, to) => {
                let Some((old, mode)) = current(store, &pending, from)? else {
                    return Err(PatchError::Missing(from.display()));
                };
                if current(store, &pending, to)?.is_some() {
                    return Err(PatchError::Exists(to.display()));
                }
                let content = patched(f, to, &old)?;
                let mode = new_mode(f, to, Some(mode))?;
                if matches!(f.op, Op::Rename(..)) {
                    touch(&mut pending, from, None);
                }
                touch(&mut pending, to, Some((content, mode)));
            }
        }
    }
    // Deletes first, so a path renamed onto a deleted one's place is written after it goes.
    let mut ops = Vec::new();
    for p in &order {
        if matches!(pending.get(p), Some(None)) && view::stat_merged(store, p)?.is_some() {
            ops.push(StageOp::Delete { path: p.clone() });
        }
    }
    for p in &order {
        if let Some(Some((content, mode))) = pending.get(p) {
            ops.push(StageOp::Write {
                path: p.clone(),
                content: content.clone(),
                mode: Some(*mode),
            });
        }
    }
    store.stage_batch(ops)?;
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hunk(old_start: usize, old_len: usize, lines: &[(LineKind, &str)]) -> Hunk {
        Hunk {
            old_start,
            old_len,
            lines: lines
                .iter()
                .map(|(k, l)| (*k, l.as_bytes().to_vec()))
                .collect(),
        }
    }

    #[test]
    fn hunks_apply_exactly_or_at_an_offset() {
        use LineKind::*;
        let old = b"a\nb\nc\nd\n";
        let h = hunk(2, 2, &[(Context, "b\n"), (Delete, "c\n"), (Insert, "C\n")]);
        assert_eq!(
            apply_hunks(old, std::slice::from_ref(&h)).unwrap(),
            b"a\nb\nC\nd\n"
        );
        // Stated one line off: found at the nearest offset.
        let off = Hunk {
            old_start: 1,
            ..h.clone()
        };
        assert_eq!(apply_hunks(old, &[off]).unwrap(), b"a\nb\nC\nd\n");
        // A context line that differs is never fuzzed.
        let bad = hunk(2, 2, &[(Context, "B\n"), (Delete, "c\n"), (Insert, "C\n")]);
        assert_eq!(apply_hunks(old, &[bad]).unwrap_err(), (1, 2));
    }

    #[test]
    fn paths_are_cleaned_and_escapes_refused() {
        let p = parse_patch("--- a/src/x.rs\n+++ b/src/x.rs\n@@ -1 +1 @@\n-a\n+b\n").unwrap();
        assert_eq!(p.paths(), vec!["src/x.rs".to_string()]);
        for bad in [
            "--- a/../../etc/passwd\n+++ b/../../etc/passwd\n@@ -1 +1 @@\n-a\n+b\n",
            "--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-a\n+b\n",
        ] {
            assert!(
                matches!(parse_patch(bad), Err(PatchError::BadPath { .. })),
                "{bad}"
            );
        }
    }
}
