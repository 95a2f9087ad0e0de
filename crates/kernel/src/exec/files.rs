//! File tools. Reads see workspace + changeset merged; writes stage into the changeset and never
//! touch the working tree.

use super::{failure, success};
use crate::chain::Prepared;
use crate::kernel::Kernel;
use crate::output::{DEFAULT_BUDGET, cut, untrusted};
use airlock_policy::RelPath;
use airlock_stage::view::{self, NodeKind};
use serde_json::{Value, json};
use std::fmt::Write as _;

const DEFAULT_LINES: u64 = 2000;
const MAX_LINE_CHARS: usize = 2000;

fn arg_str<'a>(p: &'a Prepared<'_>, k: &str) -> Option<&'a str> {
    p.args.get(k).and_then(Value::as_str)
}

fn rel_or_root<'a>(p: &'a Prepared<'_>) -> Option<&'a RelPath> {
    p.rels.first().and_then(Option::as_ref)
}

/// The i-th confined path; the chain guarantees it for file tools.
fn rel_at<'a>(p: &'a Prepared<'_>, i: usize) -> Result<&'a RelPath, crate::CallOutcome> {
    p.rels
        .get(i)
        .and_then(Option::as_ref)
        .ok_or_else(|| failure("The call names no file path.", 1))
}

/// Heuristic used by git and ripgrep: a NUL byte in the first 8 KiB, or invalid UTF-8.
fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(8192)].contains(&0) || std::str::from_utf8(bytes).is_err()
}

pub(crate) fn read_file(k: &Kernel, p: &Prepared<'_>) -> crate::CallOutcome {
    let Some(rel) = rel_or_root(p) else {
        return failure("read_file needs a path.", 1);
    };
    let bytes = match view::read_merged(&k.store, rel) {
        Ok(Some(b)) => b,
        Ok(None) => {
            return failure(
                format!("`{rel}` does not exist in the workspace or the staged changes."),
                1,
            );
        }
        Err(e) => return failure(e.to_string(), 1),
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
    let offset = p
        .args
        .get("offset")
        .and_then(Value::as_u64)
        .unwrap_or(1)
        .max(1);
    let limit = p
        .args
        .get("limit")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_LINES);
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

pub(crate) fn list_dir(k: &Kernel, p: &Prepared<'_>) -> crate::CallOutcome {
    let dir = rel_or_root(p);
    let entries = match view::list_merged(&k.store, dir) {
        Ok(e) => e,
        Err(e) => return failure(e.to_string(), 1),
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

pub(crate) fn glob(k: &Kernel, p: &Prepared<'_>) -> crate::CallOutcome {
    let pattern = arg_str(p, "pattern").unwrap_or("*");
    let matcher = match globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
    {
        Ok(g) => g.compile_matcher(),
        Err(e) => return failure(format!("The glob `{pattern}` is invalid: {e}."), 1),
    };
    let under = rel_or_root(p);
    let files = match view::walk_merged(&k.store, under, true) {
        Ok(f) => f,
        Err(e) => return failure(e.to_string(), 1),
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

pub(crate) fn grep(k: &Kernel, p: &Prepared<'_>) -> crate::CallOutcome {
    let pattern = arg_str(p, "pattern").unwrap_or("");
    let ci = p
        .args
        .get("case_insensitive")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let re = match regex::RegexBuilder::new(pattern)
        .case_insensitive(ci)
        .size_limit(1 << 22)
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            return failure(
                format!("The pattern `{pattern}` is not a valid regular expression: {e}"),
                1,
            );
        }
    };
    let file_glob = match arg_str(p, "glob") {
        Some(g) => match globset::Glob::new(g) {
            Ok(g) => Some(g.compile_matcher()),
            Err(e) => return failure(format!("The glob `{g}` is invalid: {e}."), 1),
        },
        None => None,
    };
    let max = p
        .args
        .get("max_results")
        .and_then(Value::as_u64)
        .unwrap_or(200) as usize;
    let under = rel_or_root(p);
    // A single file may be named directly.
    let files = match under.map(|u| view::stat_merged(&k.store, u)) {
        Some(Ok(Some(e))) if matches!(e.kind, NodeKind::File) => vec![e],
        _ => match view::walk_merged(&k.store, under, true) {
            Ok(f) => f,
            Err(e) => return failure(e.to_string(), 1),
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
        let Ok(Some(bytes)) = view::read_merged(&k.store, &f.path) else {
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

pub(crate) fn write_file(k: &Kernel, p: &Prepared<'_>) -> crate::CallOutcome {
    let rel = match rel_at(p, 0) {
        Ok(r) => r,
        Err(o) => return o,
    };
    let content = arg_str(p, "content").unwrap_or("");
    let bytes = match p.args.get("encoding").and_then(Value::as_str) {
        Some("base64") => match base64_decode(content) {
            Some(b) => b,
            None => return failure("`content` is not valid base64; nothing was staged.", 1),
        },
        _ => content.as_bytes().to_vec(),
    };
    if bytes.len() as u64 > k.max_file_bytes {
        return failure(
            format!(
                "The content is {} bytes; the limit is {} bytes per file. Nothing was staged.",
                bytes.len(),
                k.max_file_bytes
            ),
            1,
        );
    }
    let mode = match p.args.get("executable").and_then(Value::as_bool) {
        Some(true) => Some(0o755),
        Some(false) => Some(0o644),
        None => None,
    };
    let existed = matches!(view::stat_merged(&k.store, rel), Ok(Some(_)));
    match k
        .writes
        .with(&[rel.as_bytes()], || k.store.stage_write(rel, &bytes, mode))
    {
        Ok(()) => staged_ok(rel, if existed { "replace" } else { "create" }),
        Err(e) => failure(e.to_string(), 1),
    }
}

pub(crate) fn edit_file(k: &Kernel, p: &Prepared<'_>) -> crate::CallOutcome {
    let rel = match rel_at(p, 0) {
        Ok(r) => r,
        Err(o) => return o,
    };
    let old = arg_str(p, "old_string").unwrap_or("");
    let new = arg_str(p, "new_string").unwrap_or("");
    let all = p
        .args
        .get("replace_all")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    k.writes.with(&[rel.as_bytes()], || {
        let bytes = match view::read_merged(&k.store, rel) {
            Ok(Some(b)) => b,
            Ok(None) => return failure(format!("`{rel}` does not exist; use write_file to create it."), 1),
            Err(e) => return failure(e.to_string(), 1),
        };
        let Ok(text) = String::from_utf8(bytes) else {
            return failure(format!("`{rel}` is not UTF-8 text; edit_file works on text only (use write_file)."), 1);
        };
        let count = text.matches(old).count();
        if count == 0 {
            return failure(format!("`old_string` was not found in `{rel}`; nothing was staged. Read the file and copy the exact text, whitespace included."), 1);
        }
        if count > 1 && !all {
            return failure(format!("`old_string` matches {count} times in `{rel}`; nothing was staged. Add surrounding context to make it unique, or set replace_all."), 1);
        }
        let updated = if all { text.replace(old, new) } else { text.replacen(old, new, 1) };
        if updated.len() as u64 > k.max_file_bytes {
            return failure(format!("The edited file would be {} bytes; the limit is {}.", updated.len(), k.max_file_bytes), 1);
        }
        match k.store.stage_write(rel, updated.as_bytes(), None) {
            Ok(()) => success(json!(format!("Staged: {count} replacement(s) in `{rel}`.")), false),
            Err(e) => failure(e.to_string(), 1),
        }
    })
}

pub(crate) fn apply_patch(k: &Kernel, p: &Prepared<'_>) -> crate::CallOutcome {
    let Some(patch) = &p.patch else {
        return failure("apply_patch needs a patch.", 1);
    };
    let keys: Vec<&[u8]> = p.rels.iter().flatten().map(|r| r.as_bytes()).collect();
    k.writes.with(&keys, || {
        match airlock_stage::patch::stage_patch(&k.store, patch) {
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
            Err(e) => failure(format!("The patch was not staged: {e}"), 1),
        }
    })
}

pub(crate) fn delete_file(k: &Kernel, p: &Prepared<'_>) -> crate::CallOutcome {
    let rel = match rel_at(p, 0) {
        Ok(r) => r,
        Err(o) => return o,
    };
    k.writes.with(&[rel.as_bytes()], || {
        match view::stat_merged(&k.store, rel) {
            Ok(Some(_)) => {}
            Ok(None) => return failure(format!("`{rel}` does not exist; nothing to delete."), 1),
            Err(e) => return failure(e.to_string(), 1),
        }
        match k.store.stage_delete(rel) {
            Ok(()) => staged_ok(rel, "delete"),
            Err(e) => failure(e.to_string(), 1),
        }
    })
}

pub(crate) fn move_file(k: &Kernel, p: &Prepared<'_>) -> crate::CallOutcome {
    let (from, to) = match (rel_at(p, 0), rel_at(p, 1)) {
        (Ok(f), Ok(t)) => (f, t),
        (Err(o), _) | (_, Err(o)) => return o,
    };
    k.writes.with(&[from.as_bytes(), to.as_bytes()], || {
        match view::stat_merged(&k.store, from) {
            Ok(Some(e)) if matches!(e.kind, NodeKind::File | NodeKind::Symlink) => {}
            Ok(Some(_)) => {
                return failure(
                    format!("`{from}` is a directory; move_file moves files."),
                    1,
                );
            }
            Ok(None) => return failure(format!("`{from}` does not exist."), 1),
            Err(e) => return failure(e.to_string(), 1),
        }
        if let Ok(Some(_)) = view::stat_merged(&k.store, to) {
            return failure(
                format!("`{to}` already exists; delete it first or choose another name."),
                1,
            );
        }
        match k.store.stage_move(from, to) {
            Ok(()) => success(json!(format!("Staged: move `{from}` → `{to}`.")), false),
            Err(e) => failure(e.to_string(), 1),
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
