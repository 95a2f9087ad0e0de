//! Status letters and git-style unified diffs of a changeset snapshot against its bases.
//!
//! The old side is the base the change was staged against (its content is kept in the blob
//! store at first touch, so the diff stays right even if the disk moved on); the new side is the
//! staged change. Binary content is summarised, never dumped. Names and content lines are
//! escaped for the terminal ([`airlock_types::display`]): `\t` kept, `\r` and ESC written as
//! `\r` and `\x1b`, bidi characters as `\u{202e}`.

use crate::model::{Change, ChangesetSnapshot, Fingerprint, StagedEntry};
use crate::store::{StageError, Store};
use airlock_types::RelPath;
use airlock_types::display::{Escape, escape_for_terminal};
use similar::TextDiff;
use std::fmt::Write as _;

/// Lines of context around each change.
const CONTEXT: usize = 3;
/// Bytes inspected for a NUL when deciding whether content is binary (as git does).
const BINARY_SNIFF: usize = 8000;

/// One status line per staged path: `A` (nothing was there), `M` (modified or replaced), or
/// `D` (deleted). Sorted by path.
pub fn status(snapshot: &ChangesetSnapshot) -> Vec<(char, RelPath)> {
    snapshot
        .entries
        .iter()
        .map(|e| (status_letter(e), e.path.clone()))
        .collect()
}

/// The status letter of one entry.
pub fn status_letter(e: &StagedEntry) -> char {
    match (&e.change, &e.base) {
        (Change::Delete, _) => 'D',
        (_, Fingerprint::Absent) => 'A',
        _ => 'M',
    }
}

/// One side of a diff.
enum Side {
    Absent,
    Content { bytes: Vec<u8>, mode: u32 },
    Dir,
    Other,
}

const SYMLINK_MODE: u32 = 0o120000;
const FILE_MODE: u32 = 0o100000;

fn git_mode(mode: u32) -> String {
    format!("{mode:06o}")
}

fn old_side(store: &Store, e: &StagedEntry) -> Result<Side, StageError> {
    Ok(match &e.base {
        Fingerprint::Absent => Side::Absent,
        Fingerprint::Dir => Side::Dir,
        Fingerprint::Other => Side::Other,
        Fingerprint::Symlink { target } => Side::Content {
            bytes: target.clone(),
            mode: SYMLINK_MODE,
        },
        Fingerprint::File { hash, mode } => match store.blobs().get(hash) {
            Ok(bytes) => Side::Content {
                bytes,
                mode: FILE_MODE | mode,
            },
            // The base is normally kept at first touch; without it, the disk serves only if it
            // still holds exactly the base.
            Err(err) => match base_from_disk(store, &e.path, hash) {
                Some(bytes) => Side::Content {
                    bytes,
                    mode: FILE_MODE | mode,
                },
                None => return Err(StageError::io("read the base of", &e.path, err)),
            },
        },
    })
}

fn base_from_disk(
    store: &Store,
    path: &RelPath,
    hash: &crate::model::ContentHash,
) -> Option<Vec<u8>> {
    let md = store
        .workspace_dir()
        .symlink_metadata(path.as_path())
        .ok()?;
    if !md.is_file() {
        return None;
    }
    let bytes = store.workspace_dir().read(path.as_path()).ok()?;
    (crate::model::ContentHash::of(&bytes) == *hash).then_some(bytes)
}

fn new_side(store: &Store, e: &StagedEntry) -> Result<Side, StageError> {
    Ok(match &e.change {
        Change::Delete => Side::Absent,
        Change::Dir { .. } => Side::Dir,
        Change::Symlink { target } => Side::Content {
            bytes: target.clone(),
            mode: SYMLINK_MODE,
        },
        Change::Write { content, mode, .. } => Side::Content {
            bytes: store
                .blobs()
                .get(content)
                .map_err(|err| StageError::io("read the staged content of", &e.path, err))?,
            mode: FILE_MODE | mode,
        },
    })
}

fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(BINARY_SNIFF)].contains(&0) || std::str::from_utf8(bytes).is_err()
}

fn selected(e: &StagedEntry, paths: &[RelPath]) -> bool {
    paths.is_empty() || paths.iter().any(|p| e.path.starts_with(p))
}

/// A git-style unified diff of the entries of `snapshot` at or below `paths` (all when empty).
pub fn unified_diff(
    store: &Store,
    snapshot: &ChangesetSnapshot,
    paths: &[RelPath],
) -> Result<String, StageError> {
    let mut out = String::new();
    for e in snapshot.entries.iter().filter(|e| selected(e, paths)) {
        let old = old_side(store, e)?;
        let new = new_side(store, e)?;
        // Shown on a terminal: the name escaped (its `Display` form), as is every content line.
        write_entry(&mut out, &e.path.to_string(), &old, &new);
    }
    Ok(out)
}

fn write_entry(out: &mut String, p: &str, old: &Side, new: &Side) {
    // Writing to a String cannot fail.
    let _ = writeln!(out, "diff --git a/{p} b/{p}");
    let (old_bytes, new_bytes): (&[u8], &[u8]) = match (old, new) {
        (Side::Dir, Side::Dir) => {
            let _ = writeln!(out, "directory {p}/ (mode changed)");
            return;
        }
        (_, Side::Dir) => {
            let _ = writeln!(out, "new directory {p}/");
            return;
        }
        (Side::Dir, Side::Absent) => {
            let _ = writeln!(out, "deleted directory {p}/");
            return;
        }
        (Side::Other, _) | (_, Side::Other) => {
            let _ = writeln!(out, "special file {p} replaced");
            return;
        }
        (Side::Absent, Side::Absent) => return,
        (Side::Absent, Side::Content { bytes, mode }) => {
            let _ = writeln!(out, "new file mode {}", git_mode(*mode));
            (&[], bytes)
        }
        (Side::Content { bytes, mode }, Side::Absent) => {
            let _ = writeln!(out, "deleted file mode {}", git_mode(*mode));
            (bytes, &[])
        }
        (Side::Dir, Side::Content { bytes, mode }) => {
            let _ = writeln!(out, "directory replaced by mode {}", git_mode(*mode));
            (&[], bytes)
        }
        (
            Side::Content {
                bytes: ob,
                mode: om,
            },
            Side::Content {
                bytes: nb,
                mode: nm,
            },
        ) => {
            if om != nm {
                let _ = writeln!(
                    out,
                    "old mode {}\nnew mode {}",
                    git_mode(*om),
                    git_mode(*nm)
                );
            }
            (ob, nb)
        }
    };
    if old_bytes == new_bytes {
        return;
    }
    let a = if matches!(old, Side::Content { .. }) {
        format!("a/{p}")
    } else {
        "/dev/null".to_string()
    };
    let b = if matches!(new, Side::Content { .. }) {
        format!("b/{p}")
    } else {
        "/dev/null".to_string()
    };
    if is_binary(old_bytes) || is_binary(new_bytes) {
        let _ = writeln!(
            out,
            "Binary files {a} and {b} differ ({} → {} bytes)",
            old_bytes.len(),
            new_bytes.len()
        );
        return;
    }
    // Both sides are UTF-8 (checked by `is_binary`).
    let old_text = std::str::from_utf8(old_bytes).unwrap_or_default();
    let new_text = std::str::from_utf8(new_bytes).unwrap_or_default();
    let diff = TextDiff::from_lines(old_text, new_text);
    let body = diff
        .unified_diff()
        .context_radius(CONTEXT)
        .header(&a, &b)
        .to_string();
    // Line by line, so a CR that ends a line (Windows line endings) shows as `\r`, as git
    // shows it, rather than being kept with the line break.
    for (i, line) in body.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&escape_for_terminal(line, Escape::Text));
    }
    if !body.ends_with('\n') {
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rp(s: &str) -> RelPath {
        RelPath::new(s).unwrap()
    }

    #[test]
    fn modified_added_deleted_and_binary() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("m.txt"), "one\ntwo\nthree\n").unwrap();
        std::fs::write(d.path().join("gone.txt"), "bye\n").unwrap();
        std::fs::write(d.path().join("bin"), b"\x00\x01\x02").unwrap();
        let s = Store::open(d.path(), "t").unwrap();
        s.stage_write(&rp("m.txt"), b"one\nTWO\nthree\n", None)
            .unwrap();
        s.stage_write(&rp("new.txt"), b"hello\n", None).unwrap();
        s.stage_delete(&rp("gone.txt")).unwrap();
        s.stage_write(&rp("bin"), b"\x00\xff\x00\xff\x00", None)
            .unwrap();
        let snap = s.snapshot().unwrap();
        let st = status(&snap);
        assert_eq!(
            st,
            vec![
                ('M', rp("bin")),
                ('D', rp("gone.txt")),
                ('M', rp("m.txt")),
                ('A', rp("new.txt"))
            ]
        );
        let text = unified_diff(&s, &snap, &[]).unwrap();
        assert!(
            text.contains("--- a/m.txt\n+++ b/m.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "new file mode 100644\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hello\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("deleted file mode 100644\n--- a/gone.txt\n+++ /dev/null\n"),
            "{text}"
        );
        assert!(
            text.contains("Binary files a/bin and b/bin differ (3 → 5 bytes)"),
            "{text}"
        );
        let only = unified_diff(&s, &snap, &[rp("new.txt")]).unwrap();
        assert!(
            only.contains("b/new.txt") && !only.contains("m.txt"),
            "{only}"
        );
    }

    #[test]
    fn mode_change_and_symlink() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("run.sh"), "echo\n").unwrap();
        let s = Store::open(d.path(), "t").unwrap();
        s.stage_write(&rp("run.sh"), b"echo\n", Some(0o755))
            .unwrap();
        s.stage_symlink(&rp("link"), b"run.sh", None).unwrap();
        let snap = s.snapshot().unwrap();
        let text = unified_diff(&s, &snap, &[]).unwrap();
        assert!(
            text.contains("diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n"),
            "{text}"
        );
        assert!(text.contains("new file mode 120000\n--- /dev/null\n+++ b/link\n@@ -0,0 +1 @@\n+run.sh\n\\ No newline at end of file"), "{text}");
    }

    #[test]
    fn names_and_content_lines_are_escaped_for_the_terminal() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(d.path(), "t").unwrap();
        let name = rp("zz\r\x1b[2A\x1b[J\rM docs/notes.md");
        s.stage_write(
            &name,
            "\x1b[2J\x1b[3J\x1b[H\tok\r\nevil\u{202e}gnp.exe\n".as_bytes(),
            None,
        )
        .unwrap();
        let snap = s.snapshot().unwrap();
        let text = unified_diff(&s, &snap, &[]).unwrap();
        assert!(
            !text
                .chars()
                .any(|c| airlock_types::display::is_control_or_bidi(c) && !"\n\t".contains(c)),
            "{text:?}"
        );
        let shown = "zz\\r\\x1b[2A\\x1b[J\\rM docs/notes.md";
        assert!(
            text.contains(&format!("diff --git a/{shown} b/{shown}\n")),
            "{text}"
        );
        assert!(text.contains(&format!("+++ b/{shown}\n")), "{text}");
        assert!(
            text.contains("+\\x1b[2J\\x1b[3J\\x1b[H\tok\\r\n+evil\\u{202e}gnp.exe\n"),
            "{text}"
        );
    }
}
