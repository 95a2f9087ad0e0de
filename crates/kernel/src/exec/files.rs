//! File tools. Reads see workspace + changeset merged; writes stage into the changeset and never
//! touch the working tree.

use super::{Call, ExecCtx, failure, success};
use crate::args::{
    ApplyPatchArgs, DeleteFileArgs, EditFileArgs, Encoding, GlobArgs, GrepArgs, Int, ListDirArgs,
    MoveFileArgs, ReadFileArgs, WriteFileArgs,
};
use crate::output::{DEFAULT_BUDGET, Status, cut, untrusted};
use airlock_policy::RelPath;
use airlock_stage::view::{self, NodeKind};
use serde_json::json;
use std::fmt::Write as _;

const DEFAULT_LINES: u64 = 2000;
const MAX_LINE_CHARS: usize = 2000;

/// Heuristic used by git and ripgrep: a NUL byte in the first 8 KiB, or invalid UTF-8.
fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(8192)].contains(&0) || std::str::from_utf8(bytes).is_err()
}

pub(crate) fn read_file(k: &ExecCtx<'_>, p: &Call<'_, ReadFileArgs>) -> crate::CallOutcome {
    let Some(rel) = p.rel_or_root() else {
        return failure("read_file needs a path.", Status::Failed);
    };
    let bytes = match view::read_merged(k.store, rel) {
        Ok(Some(b)) => b,
        Ok(None) => {
            return failure(
                format!("`{rel}` does not exist in the workspace or the staged changes."),
                Status::Failed,
            );
        }
        Err(e) => return failure(e.to_string(), Status::Failed),
    };
    if is_binary(&bytes) {
        return success(
            json!(format!(
                "`{rel}` is a binary file of {} bytes; its content is not shown.",
                bytes.len()
            )),
            false,
        );
    }
    let text = String::from_utf8_lossy(&bytes);
    let offset = p.args.offset.map_or(1, Int::get).max(1);
    let limit = p.args.limit.map_or(DEFAULT_LINES, Int::get);
    let total_lines = text.lines().count() as u64;
    let mut body = String::new();
    let mut shown = 0u64;
    let mut truncated = false;
    for (i, line) in text.lines().enumerate().skip((offset - 1) as usize) {
        if shown >= limit {
            truncated = true;
            break;
        }
        let n = i as u64 + 1;
        let (line, cut_chars) = if line.chars().count() > MAX_LINE_CHARS {
            let kept: String = line.chars().take(MAX_LINE_CHARS).collect();
            (kept, line.chars().count() - MAX_LINE_CHARS)
        } else {
            (line.to_string(), 0)
        };
        let _ = write!(body, "{n:>6}\t{line}");
        if cut_chars > 0 {
            let _ = write!(body, " [… {cut_chars} more characters on this line]");
        }
        body.push('\n');
        shown += 1;
        if body.len() > DEFAULT_BUDGET {
            truncated = n < total_lines;
            break;
        }
    }
    let next = offset + shown;
    if next <= total_lines {
        let _ = writeln!(
            body,
            "[… {} more lines not shown; call read_file with offset={next} to read on]",
            total_lines - next + 1
        );
        truncated = true;
    }
    success(json!(untrusted(&rel.display(), &body)), truncated)
}

fn kind_name(k: &NodeKind) -> &'static str {
    match k {
        NodeKind::File => "file",
        NodeKind::Dir => "dir",
        NodeKind::Symlink => "symlink",
        NodeKind::Other => "other",
    }
}

pub(crate) fn list_dir(k: &ExecCtx<'_>, p: &Call<'_, ListDirArgs>) -> crate::CallOutcome {
    let dir = p.rel_or_root();
    let entries = match view::list_merged(k.store, dir) {
        Ok(e) => e,
        Err(e) => return failure(e.to_string(), Status::Failed),
    };
    let mut out = String::new();
    for e in &entries {
        let mark = e.staged.map(|c| format!(" [{c}]")).unwrap_or_default();
        let name = e.path.file_name().to_string_lossy();
        let slash = if matches!(e.kind, NodeKind::Dir) {
            "/"
        } else {
            ""
        };
        let size = if matches!(e.kind, NodeKind::File) {
            format!("  {} bytes", e.size)
        } else {
            String::new()
        };
        let _ = writeln!(out, "{name}{slash}  ({}){size}{mark}", kind_name(&e.kind));
    }
    let (shown, cut_bytes) = cut(&out, DEFAULT_BUDGET);
    let mut text = shown.to_string();
    if cut_bytes > 0 {
        let _ = writeln!(
            text,
            "\n[… {cut_bytes} more bytes of listing not shown; list a subdirectory to see the rest]"
        );
    }
    let label = dir.map(|d| d.display()).unwrap_or_else(|| ".".into());
    success(json!(untrusted(&label, &text)), cut_bytes > 0)
}

pub(crate) fn glob(k: &ExecCtx<'_>, p: &Call<'_, GlobArgs>) -> crate::CallOutcome {
    let pattern = p.args.pattern.as_str();
    let matcher = match globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
    {
        Ok(g) => g.compile_matcher(),
        Err(e) => {
            return failure(
                format!("The glob `{pattern}` is invalid: {e}."),
                Status::Failed,
            );
        }
    };
    let under = p.rel_or_root();
    let files = match view::walk_merged(k.store, under, true) {
        Ok(f) => f,
        Err(e) => return failure(e.to_string(), Status::Failed),
    };
    let mut out = String::new();
    let mut count = 0usize;
    let mut skipped = 0usize;
    for f in &files {
        let full = f.path.as_path();
        let relative = under
            .and_then(|u| full.strip_prefix(u.as_path()).ok())
            .unwrap_or(full);
        if matcher.is_match(full) || matcher.is_match(relative) {
            if is_sensitive(&f.path) {
                skipped += 1;
                continue;
            }
            count += 1;
            let _ = writeln!(out, "{}", f.path);
        }
    }
    let skipped_note = skipped_note(skipped);
    if count == 0 {
        return success(
            json!(format!("No file matches `{pattern}`.{skipped_note}")),
            false,
        );
    }
    let (shown, cut_bytes) = cut(&out, DEFAULT_BUDGET);
    let mut text = shown.to_string();
    if cut_bytes > 0 {
        let _ = writeln!(
            text,
            "\n[… {cut_bytes} more bytes of matches not shown; narrow the pattern or the path]"
        );
    }
    success(
        json!(format!(
            "{count} file(s) match `{pattern}`:\n{text}{}",
            skipped_note.trim_start()
        )),
        cut_bytes > 0,
    )
}

/// A sensitive file (`.env`, keys, credentials): `read_file` refuses it, so `grep` and `glob`
/// never show its lines or list it.
fn is_sensitive(rel: &RelPath) -> bool {
    airlock_policy::jail::sensitive_rule(rel).is_some()
}

/// The note saying how many sensitive files a search skipped (empty when none).
fn skipped_note(skipped: usize) -> String {
    if skipped == 0 {
        String::new()
    } else {
        format!(
            " [{skipped} sensitive file(s) skipped: .env, keys and credentials are never searched or listed]"
        )
    }
}

pub(crate) fn grep(k: &ExecCtx<'_>, p: &Call<'_, GrepArgs>) -> crate::CallOutcome {
    let pattern = p.args.pattern.as_str();
    let ci = p.args.case_insensitive;
    let re = match regex::RegexBuilder::new(pattern)
        .case_insensitive(ci)
        .size_limit(1 << 22)
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            return failure(
                format!("The pattern `{pattern}` is not a valid regular expression: {e}"),
                Status::Failed,
            );
        }
    };
    let file_glob = match p.args.glob.as_deref() {
        Some(g) => match globset::Glob::new(g) {
            Ok(g) => Some(g.compile_matcher()),
            Err(e) => return failure(format!("The glob `{g}` is invalid: {e}."), Status::Failed),
        },
        None => None,
    };
    let max = p.args.max_results.map_or(200, Int::get) as usize;
    let under = p.rel_or_root();
    // A single file may be named directly.
    let files = match under.map(|u| view::stat_merged(k.store, u)) {
        Some(Ok(Some(e))) if matches!(e.kind, NodeKind::File) => vec![e],
        _ => match view::walk_merged(k.store, under, true) {
            Ok(f) => f,
            Err(e) => return failure(e.to_string(), Status::Failed),
        },
    };
    let mut out = String::new();
    let mut hits = 0usize;
    let mut more = 0usize;
    let mut skipped = 0usize;
    for f in &files {
        if let Some(g) = &file_glob
            && !g.is_match(f.path.as_path())
            && !g.is_match(f.path.file_name())
        {
            continue;
        }
        if is_sensitive(&f.path) {
            skipped += 1;
            continue;
        }
        let Ok(Some(bytes)) = view::read_merged(k.store, &f.path) else {
            continue;
        };
        if is_binary(&bytes) {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        for (i, line) in text.lines().enumerate() {
            if re.is_match(line) {
                if hits >= max {
                    more += 1;
                    continue;
                }
                hits += 1;
                let line: String = line.chars().take(500).collect();
                let _ = writeln!(out, "{}:{}: {line}", f.path, i + 1);
            }
        }
    }
    let skipped_note = skipped_note(skipped);
    if hits == 0 {
        return success(
            json!(format!("No line matches `{pattern}`.{skipped_note}")),
            false,
        );
    }
    let (shown, cut_bytes) = cut(&out, DEFAULT_BUDGET);
    let mut text = shown.to_string();
    let truncated = more > 0 || cut_bytes > 0;
    if more > 0 {
        let _ = writeln!(
            text,
            "[… {more} more matching lines not shown; raise max_results or narrow path/glob]"
        );
    } else if cut_bytes > 0 {
        let _ = writeln!(
            text,
            "[… {cut_bytes} more bytes not shown; narrow path/glob]"
        );
    }
    if skipped > 0 {
        let _ = writeln!(text, "{}", skipped_note.trim_start());
    }
    success(json!(untrusted("grep results", &text)), truncated)
}

fn staged_ok(rel: &RelPath, verb: &str) -> crate::CallOutcome {
    success(
        json!(format!(
            "Staged: {verb} `{rel}` (the workspace is unchanged until verify and apply)."
        )),
        false,
    )
}

pub(crate) fn write_file(k: &ExecCtx<'_>, p: &Call<'_, WriteFileArgs>) -> crate::CallOutcome {
    let rel = match p.write_rel(0) {
        Ok(r) => r,
        Err(o) => return o,
    };
    let content = p.args.content.as_str();
    let bytes = match p.args.encoding {
        Encoding::Base64 => match base64_decode(content) {
            Some(b) => b,
            None => {
                return failure(
                    "`content` is not valid base64; nothing was staged.",
                    Status::Failed,
                );
            }
        },
        Encoding::Utf8 => content.as_bytes().to_vec(),
    };
    if bytes.len() as u64 > k.max_file_bytes {
        return failure(
            format!(
                "The content is {} bytes; the limit is {} bytes per file. Nothing was staged.",
                bytes.len(),
                k.max_file_bytes
            ),
            Status::Failed,
        );
    }
    let mode = match p.args.executable {
        Some(true) => Some(0o755),
        Some(false) => Some(0o644),
        None => None,
    };
    let existed = matches!(view::stat_merged(k.store, rel), Ok(Some(_)));
    match k
        .writes
        .with(&[rel.as_bytes()], || k.store.stage_write(rel, &bytes, mode))
    {
        Ok(()) => staged_ok(rel, if existed { "replace" } else { "create" }),
        Err(e) => failure(e.to_string(), Status::Failed),
    }
}

pub(crate) fn edit_file(k: &ExecCtx<'_>, p: &Call<'_, EditFileArgs>) -> crate::CallOutcome {
    let rel = match p.write_rel(0) {
        Ok(r) => r,
        Err(o) => return o,
    };
    let old = p.args.old_string.as_str();
    let new = p.args.new_string.as_str();
    let all = p.args.replace_all;
    k.writes.with(&[rel.as_bytes()], || {
        let bytes = match view::read_merged(k.store, rel) {
            Ok(Some(b)) => b,
            Ok(None) => return failure(format!("`{rel}` does not exist; use write_file to create it."), Status::Failed),
            Err(e) => return failure(e.to_string(), Status::Failed),
        };
        let Ok(text) = String::from_utf8(bytes) else {
            return failure(format!("`{rel}` is not UTF-8 text; edit_file works on text only (use write_file)."), Status::Failed);
        };
        let count = text.matches(old).count();
        if count == 0 {
            return failure(format!("`old_string` was not found in `{rel}`; nothing was staged. Read the file and copy the exact text, whitespace included."), Status::Failed);
        }
        if count > 1 && !all {
            return failure(format!("`old_string` matches {count} times in `{rel}`; nothing was staged. Add surrounding context to make it unique, or set replace_all."), Status::Failed);
        }
        let updated = if all { text.replace(old, new) } else { text.replacen(old, new, 1) };
        if updated.len() as u64 > k.max_file_bytes {
            return failure(format!("The edited file would be {} bytes; the limit is {}.", updated.len(), k.max_file_bytes), Status::Failed);
        }
        match k.store.stage_write(rel, updated.as_bytes(), None) {
            Ok(()) => success(json!(format!("Staged: {count} replacement(s) in `{rel}`.")), false),
            Err(e) => failure(e.to_string(), Status::Failed),
        }
    })
}

pub(crate) fn apply_patch(k: &ExecCtx<'_>, p: &Call<'_, ApplyPatchArgs>) -> crate::CallOutcome {
    let Some(patch) = &p.patch else {
        return failure("apply_patch needs a patch.", Status::Failed);
    };
    // The stage writes where the jail confined each path, not where the patch text points.
    let rels: Vec<RelPath> = match (0..p.paths.len())
        .map(|i| p.write_rel(i).cloned())
        .collect()
    {
        Ok(r) => r,
        Err(o) => return o,
    };
    let patch = match patch.confined_to(&rels) {
        Ok(patch) => patch,
        Err(e) => return failure(format!("The patch was not staged: {e}"), Status::Failed),
    };
    let keys: Vec<&[u8]> = rels.iter().map(RelPath::as_bytes).collect();
    k.writes.with(&keys, || {
        match airlock_stage::patch::stage_patch(k.store, &patch) {
            Ok(paths) => {
                let list: Vec<String> = paths.iter().map(|p| p.display()).collect();
                success(
                    json!(format!(
                        "Staged the patch: {} file(s): {}.",
                        list.len(),
                        list.join(", ")
                    )),
                    false,
                )
            }
            Err(e) => failure(format!("The patch was not staged: {e}"), Status::Failed),
        }
    })
}

pub(crate) fn delete_file(k: &ExecCtx<'_>, p: &Call<'_, DeleteFileArgs>) -> crate::CallOutcome {
    let rel = match p.write_rel(0) {
        Ok(r) => r,
        Err(o) => return o,
    };
    k.writes.with(&[rel.as_bytes()], || {
        match view::stat_merged(k.store, rel) {
            Ok(Some(_)) => {}
            Ok(None) => {
                return failure(
                    format!("`{rel}` does not exist; nothing to delete."),
                    Status::Failed,
                );
            }
            Err(e) => return failure(e.to_string(), Status::Failed),
        }
        match k.store.stage_delete(rel) {
            Ok(()) => staged_ok(rel, "delete"),
            Err(e) => failure(e.to_string(), Status::Failed),
        }
    })
}

pub(crate) fn move_file(k: &ExecCtx<'_>, p: &Call<'_, MoveFileArgs>) -> crate::CallOutcome {
    let (from, to) = match (p.write_rel(0), p.write_rel(1)) {
        (Ok(f), Ok(t)) => (f, t),
        (Err(o), _) | (_, Err(o)) => return o,
    };
    k.writes.with(&[from.as_bytes(), to.as_bytes()], || {
        match view::stat_merged(k.store, from) {
            Ok(Some(e)) if matches!(e.kind, NodeKind::File | NodeKind::Symlink) => {}
            Ok(Some(_)) => {
                return failure(
                    format!("`{from}` is a directory; move_file moves files."),
                    Status::Failed,
                );
            }
            Ok(None) => return failure(format!("`{from}` does not exist."), Status::Failed),
            Err(e) => return failure(e.to_string(), Status::Failed),
        }
        if let Ok(Some(_)) = view::stat_merged(k.store, to) {
            return failure(
                format!("`{to}` already exists; delete it first or choose another name."),
                Status::Failed,
            );
        }
        match k.store.stage_move(from, to) {
            Ok(()) => success(json!(format!("Staged: move `{from}` → `{to}`.")), false),
            Err(e) => failure(e.to_string(), Status::Failed),
        }
    })
}

/// Standard base64 (with or without padding, whitespace ignored).
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    fn val(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        } as u32)
    }
    let clean: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    let trimmed: &[u8] = {
        let mut end = clean.len();
        while end > 0 && clean[end - 1] == b'=' {
            end -= 1;
        }
        &clean[..end]
    };
    if trimmed.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(trimmed.len() * 3 / 4);
    for chunk in trimmed.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= val(c)? << (18 - 6 * i);
        }
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_binary() {
        assert_eq!(base64_decode("AP8Q").unwrap(), vec![0x00, 0xff, 0x10]);
        assert_eq!(base64_decode("aGk=").unwrap(), b"hi");
        assert_eq!(base64_decode("aGk").unwrap(), b"hi");
        assert!(base64_decode("a*bc").is_none());
    }

    #[test]
    fn binary_detection() {
        assert!(is_binary(b"\x00abc"));
        assert!(is_binary(b"\xff\xfe"));
        assert!(!is_binary("héllo\n".as_bytes()));
    }
}
