//! The diagnostics sanitiser: turns raw failures into the short, exact text a model can act on.
//!
//! Invariants: ANSI escapes are stripped; locations are workspace-relative (frames outside the
//! workspace or inside `node_modules` are dropped); identical failures are folded (`×12`); the
//! rendered text never exceeds the byte budget and always ends by saying how many failures were
//! left out. Memory is bounded: the sanitiser keeps at most what fits in the budget plus a bounded
//! set of fingerprints, whatever the number of failures fed to it.
//!
//! ```
//! use airlock_verify::sanitize::Sanitizer;
//! use airlock_verify::Failure;
//!
//! let mut s = Sanitizer::new(512);
//! for _ in 0..3 {
//!     s.push(Failure { test: "adds".into(), file: Some("src/lib.rs".into()), line: Some(12),
//!                      message: "left: 4, right: 5".into(), ..Failure::default() });
//! }
//! let out = s.finish();
//! assert!(out.text.contains("(×3)"));
//! assert!(out.text.len() <= 512);
//! ```

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::BufRead;
use std::sync::LazyLock;

use regex::Regex;

use crate::model::{Failure, FailureKind};

/// Default diagnostics budget: 4 KiB.
pub const DEFAULT_BUDGET: usize = 4096;
/// Longest message kept per failure, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 600;
/// Most message lines kept per failure.
pub const MAX_MESSAGE_LINES: usize = 10;
/// Most workspace stack frames kept per failure.
pub const MAX_FRAMES: usize = 4;
/// Most failures kept in the structured list.
pub const MAX_FAILURES: usize = 50;
/// Longest line read from runner output; the rest of a longer line is skipped.
pub const MAX_LINE_BYTES: usize = 16 * 1024;
/// Bytes reserved at the end of the budget for the "omitted" line.
const RESERVE: usize = 120;
/// Most fingerprints of omitted failures remembered for folding (bounded memory).
const MAX_OMITTED_FINGERPRINTS: usize = 65_536;

static FRAME_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?:file://)?([^\s()'"<>,\[\]:]+\.[A-Za-z][A-Za-z0-9]{0,5}):(\d+)(?::(\d+))?"#)
        .expect("static regex")
});
static PY_FRAME_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"File "([^"]+)", line (\d+)"#).expect("static regex"));
static PAREN_POS_RE: LazyLock<Regex> = LazyLock::new(|| {
    // Babel / TypeScript style: `path: message (5:28)` or `path(5,28): error`.
    Regex::new(
        r#"([^\s()'"<>,\[\]:]+\.[A-Za-z][A-Za-z0-9]{0,5})(?::.*\((\d+):(\d+)\)|\((\d+),(\d+)\))"#,
    )
    .expect("static regex")
});

/// Removes ANSI escape sequences (colours, cursor moves, OSC titles). A small state machine
/// rather than a regex: it runs on every output line.
pub fn strip_ansi(text: &str) -> Cow<'_, str> {
    if !text.contains('\x1b') {
        return Cow::Borrowed(text);
    }
    let bytes = text.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != 0x1b {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        i += 1;
        match bytes.get(i) {
            Some(b'[') => {
                // CSI: parameters and intermediates, then one final byte in 0x40..=0x7e.
                i += 1;
                while i < bytes.len() && !(0x40..=0x7e).contains(&bytes[i]) {
                    i += 1;
                }
                i += 1;
            }
            Some(b']') => {
                // OSC: up to BEL or ESC \.
                i += 1;
                while i < bytes.len() {
                    if bytes[i] == 0x07 {
                        i += 1;
                        break;
                    }
                    if bytes[i] == 0x1b && bytes.get(i + 1) == Some(&b'\\') {
                        i += 2;
                        break;
                    }
                    i += 1;
                }
            }
            Some(_) => i += 1,
            None => {}
        }
    }
    // Only whole escape sequences (ASCII) were removed, so the rest is still UTF-8.
    Cow::Owned(
        String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
    )
}

/// A source location inside the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// Workspace-relative path, `/`-separated.
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column, when given.
    pub column: Option<u32>,
}

impl Location {
    /// `file:line[:col]`.
    pub fn render(&self) -> String {
        match self.column {
            Some(c) => format!("{}:{}:{}", self.file, self.line, c),
            None => format!("{}:{}", self.file, self.line),
        }
    }
}

/// Maps paths found in runner output to workspace-relative ones and refuses everything else.
#[derive(Debug, Clone)]
pub struct Locator {
    root: String,
}

impl Locator {
    /// A locator for a workspace visible to the runner at `root` (an absolute path).
    pub fn new(root: &std::path::Path) -> Locator {
        let mut root = root.to_string_lossy().into_owned();
        while root.len() > 1 && root.ends_with('/') {
            root.pop();
        }
        Locator { root }
    }

    /// The workspace-relative form of `path`, or `None` when it lies outside the workspace, in
    /// `node_modules`, or climbs with `..`.
    pub fn relative(&self, path: &str) -> Option<String> {
        let path = path.strip_prefix("file://").unwrap_or(path);
        let rel = if path.starts_with('/') {
            let rest = path.strip_prefix(self.root.as_str())?;
            rest.strip_prefix('/')?
        } else {
            path
        };
        let rel = rel.trim_start_matches("./");
        if rel.is_empty()
            || rel
                .split('/')
                .any(|c| c == ".." || c == "node_modules" || c.is_empty())
        {
            return None;
        }
        Some(rel.to_string())
    }

    /// Every workspace location mentioned on one line, in order.
    pub fn locations_in(&self, line: &str) -> Vec<Location> {
        let mut found = Vec::new();
        for caps in PY_FRAME_RE.captures_iter(line) {
            if let (Some(file), Some(n)) = (self.relative(&caps[1]), caps[2].parse().ok()) {
                found.push(Location {
                    file,
                    line: n,
                    column: None,
                });
            }
        }
        if !found.is_empty() {
            return found;
        }
        for caps in FRAME_RE.captures_iter(line) {
            let Some(file) = self.relative(&caps[1]) else {
                continue;
            };
            let Ok(n) = caps[2].parse() else { continue };
            let column = caps.get(3).and_then(|c| c.as_str().parse().ok());
            found.push(Location {
                file,
                line: n,
                column,
            });
        }
        if found.is_empty() {
            for caps in PAREN_POS_RE.captures_iter(line) {
                let Some(file) = self.relative(&caps[1]) else {
                    continue;
                };
                let line_no = caps
                    .get(2)
                    .or(caps.get(4))
                    .and_then(|m| m.as_str().parse().ok());
                let col = caps
                    .get(3)
                    .or(caps.get(5))
                    .and_then(|m| m.as_str().parse().ok());
                if let Some(n) = line_no {
                    found.push(Location {
                        file,
                        line: n,
                        column: col,
                    });
                }
            }
        }
        found
    }

    /// Workspace frames of a stack trace or traceback, in the order they appear (at most
    /// [`MAX_FRAMES`] distinct ones).
    pub fn frames(&self, text: &str) -> Vec<Location> {
        let mut frames: Vec<Location> = Vec::new();
        for line in text.lines() {
            for loc in self.locations_in(&strip_ansi(line)) {
                if !frames.contains(&loc) {
                    frames.push(loc);
                }
            }
        }
        frames
    }

    /// Fills `failure.file/line/column/stack` from `text` when they are not set yet. `innermost_last`
    /// is true for Python tracebacks (deepest frame last), false for JS and Rust (deepest first).
    pub fn locate(&self, failure: &mut Failure, text: &str, innermost_last: bool) {
        let mut frames = self.frames(text);
        if innermost_last {
            frames.reverse();
        }
        if failure.file.is_none() {
            if let Some(first) = frames.first() {
                failure.file = Some(first.file.clone());
                failure.line = Some(first.line);
                failure.column = first.column;
            }
        } else if let Some(file) = failure.file.take() {
            // A file the runner named must still be workspace-relative.
            failure.file = self.relative(&file);
            if failure.file.is_none() {
                failure.line = None;
                failure.column = None;
            }
        }
        frames.truncate(MAX_FRAMES);
        failure.stack = frames.iter().map(Location::render).collect();
    }
}

/// Bounds a message: ANSI stripped, stack-frame and code-frame lines dropped, at most
/// [`MAX_MESSAGE_LINES`] lines and [`MAX_MESSAGE_BYTES`] bytes, with an explicit marker.
pub fn clean_message(text: &str) -> String {
    let text = strip_ansi(text);
    let mut lines: Vec<&str> = Vec::new();
    let mut dropped = 0usize;
    let mut last_blank = true;
    for raw in text.lines() {
        let line = raw.trim_end();
        let trimmed = line.trim_start();
        if is_frame_line(trimmed) || is_code_frame_line(trimmed) {
            continue;
        }
        if trimmed.is_empty() {
            if !last_blank {
                last_blank = true;
                lines.push("");
            }
            continue;
        }
        last_blank = false;
        if lines.len() >= MAX_MESSAGE_LINES {
            dropped += 1;
            continue;
        }
        lines.push(line);
    }
    while lines.last() == Some(&"") {
        lines.pop();
    }
    // Dedent: the first line on its own (node and jest indent only the continuation lines),
    // the rest by their common indentation.
    let common = lines
        .iter()
        .skip(1)
        .filter(|l| !l.is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        if i == 0 {
            out.push_str(l.trim_start());
            continue;
        }
        out.push('\n');
        out.push_str(l.get(common..).unwrap_or(l));
    }
    if dropped > 0 {
        out.push_str(&format!("\n… [{dropped} more lines]"));
    }
    truncate_marked(&out, MAX_MESSAGE_BYTES)
}

/// Cuts `text` to at most `max` bytes (on a char boundary) and says how much was cut.
pub fn truncate_marked(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let marker_room = 24;
    let mut cut = max.saturating_sub(marker_room);
    while cut > 0 && !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}… [+{} bytes]", &text[..cut], text.len() - cut)
}

fn is_frame_line(trimmed: &str) -> bool {
    trimmed.starts_with("at ") || trimmed.starts_with("❯ ") || trimmed.starts_with("⎯")
}

fn is_code_frame_line(trimmed: &str) -> bool {
    // jest / babel code frames: `>  8 |     expect(...)`, `   7 |`, `     |    ^`
    let t = trimmed.strip_prefix('>').unwrap_or(trimmed).trim_start();
    let digits = t.chars().take_while(|c| c.is_ascii_digit()).count();
    let rest = t[digits..].trim_start();
    rest.starts_with('|') && (digits > 0 || rest.trim_start_matches('|').trim().starts_with('^'))
}

/// Expected / received values from common assertion formats (jest `Expected:`/`Received:`,
/// vitest's `- Expected`/`+ Received` diff, Rust's `left:`/`right:`, node's `expected:`/`actual:`).
pub fn expected_received(text: &str) -> (Option<String>, Option<String>) {
    static JEST_E: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"(?m)^\s*Expected(?: value)?:\s*(.+)$").expect("regex"));
    static JEST_R: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"(?m)^\s*Received(?: value)?:\s*(.+)$").expect("regex"));
    static RUST_L: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"(?m)^\s*left:\s*(.+)$").expect("regex"));
    static RUST_R: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"(?m)^\s*right:\s*(.+)$").expect("regex"));
    static NODE_E: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"(?m)^\s*expected:\s*(.+?),?$").expect("regex"));
    static NODE_A: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"(?m)^\s*actual:\s*(.+?),?$").expect("regex"));
    let text = strip_ansi(text);
    let grab = |re: &Regex| {
        re.captures(&text)
            .map(|c| truncate_marked(c[1].trim(), 200))
    };
    if let (Some(e), Some(r)) = (grab(&JEST_E), grab(&JEST_R)) {
        return (Some(e), Some(r));
    }
    if let (Some(l), Some(r)) = (grab(&RUST_L), grab(&RUST_R)) {
        return (Some(r), Some(l));
    }
    if let (Some(e), Some(a)) = (grab(&NODE_E), grab(&NODE_A)) {
        return (Some(e), Some(a));
    }
    // pytest's rewritten assertion: `assert 5 == 6` (left is what the code produced).
    static PYTEST_EQ: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"(?m)^\s*assert (.+?) == (.+)$").expect("regex"));
    if let Some(c) = PYTEST_EQ.captures(&text) {
        return (
            Some(truncate_marked(c[2].trim(), 200)),
            Some(truncate_marked(c[1].trim(), 200)),
        );
    }
    // vitest: "- Expected\n+ Received\n\n- 6\n+ 5"
    let mut lines = text.lines().map(str::trim);
    if lines.any(|l| l == "- Expected") {
        let mut expected = Vec::new();
        let mut received = Vec::new();
        for l in lines {
            if l == "+ Received" || l.is_empty() {
                continue;
            }
            if let Some(v) = l.strip_prefix("- ") {
                expected.push(v);
            } else if let Some(v) = l.strip_prefix("+ ") {
                received.push(v);
            } else if is_frame_line(l) {
                break;
            }
            if expected.len() + received.len() >= 8 {
                break;
            }
        }
        if !expected.is_empty() || !received.is_empty() {
            return (
                Some(truncate_marked(&expected.join("\n"), 200)),
                Some(truncate_marked(&received.join("\n"), 200)),
            );
        }
    }
    (None, None)
}

/// The sanitiser's result.
#[derive(Debug, Clone, Default)]
pub struct Sanitized {
    /// Rendered diagnostics, within the budget.
    pub text: String,
    /// The distinct failures kept (folded representatives), at most [`MAX_FAILURES`].
    pub failures: Vec<Failure>,
    /// Failures (occurrences) left out of `text`.
    pub omitted: u64,
    /// Distinct failures left out of `failures`.
    pub failures_omitted: u64,
}

struct Entry {
    failure: Failure,
    count: u64,
    rendered_len: usize,
}

/// Folds, bounds and renders failures within a byte budget. See the module docs.
pub struct Sanitizer {
    budget: usize,
    header: String,
    entries: Vec<Entry>,
    index: HashMap<u64, usize>,
    omitted_fingerprints: HashSet<u64>,
    omitted: u64,
    distinct_omitted: u64,
    used: usize,
    full: bool,
    notes: Vec<String>,
}

impl Sanitizer {
    /// A sanitiser with a budget in bytes (at least 256 are always allowed).
    pub fn new(budget: usize) -> Sanitizer {
        Sanitizer {
            budget: budget.max(256),
            header: String::new(),
            entries: Vec::new(),
            index: HashMap::new(),
            omitted_fingerprints: HashSet::new(),
            omitted: 0,
            distinct_omitted: 0,
            used: 0,
            full: false,
            notes: Vec::new(),
        }
    }

    /// Sets a one-line header (the verdict summary); it counts against the budget.
    pub fn set_header(&mut self, header: &str) {
        self.header = truncate_marked(&strip_ansi(header), self.budget / 4);
    }

    /// Adds a failure; identical ones (same kind, message, file, line) are folded.
    pub fn push(&mut self, mut failure: Failure) {
        // The fold key is taken on the raw failure so that repeats cost one hash, not a clean.
        let key = fold_key(&failure);
        if let Some(&i) = self.index.get(&key) {
            self.entries[i].count += 1;
            return;
        }
        if self.omitted_fingerprints.contains(&key) {
            self.omitted += 1;
            return;
        }
        let limit = self
            .budget
            .saturating_sub(RESERVE + self.header.len() + self.notes_len());
        if self.full {
            self.omit(key);
            return;
        }
        failure.message = clean_message(&failure.message);
        failure.test = truncate_marked(strip_ansi(&failure.test).trim(), 200);
        let len = render_entry(&failure, 1).len() + 16;
        if self.used + len > limit && !(self.entries.is_empty() && self.used == 0) {
            if limit.saturating_sub(self.used) < 48 {
                self.full = true;
            }
            self.omit(key);
            return;
        }
        self.used += len;
        self.index.insert(key, self.entries.len());
        self.entries.push(Entry {
            failure,
            count: 1,
            rendered_len: len,
        });
    }

    fn omit(&mut self, key: u64) {
        self.omitted += 1;
        self.distinct_omitted += 1;
        if self.omitted_fingerprints.len() < MAX_OMITTED_FINGERPRINTS {
            self.omitted_fingerprints.insert(key);
        }
    }

    /// Adds a free-text note (e.g. the tail of the output for a crash). Notes are rendered after
    /// the failures and cut to what remains of the budget.
    pub fn note(&mut self, text: &str) {
        let text = strip_ansi(text);
        let text = text.trim_matches('\n');
        if !text.is_empty() {
            self.notes.push(text.to_string());
        }
    }

    fn notes_len(&self) -> usize {
        self.notes
            .iter()
            .map(|n| n.len().min(self.budget / 2) + 1)
            .sum()
    }

    /// Renders everything within the budget.
    pub fn finish(self) -> Sanitized {
        let mut out = String::new();
        if !self.header.is_empty() {
            out.push_str(&self.header);
            out.push('\n');
        }
        let mut failures = Vec::new();
        let mut failures_omitted = self.distinct_omitted;
        let mut omitted = self.omitted;
        let hard_limit = self.budget.saturating_sub(RESERVE);
        for entry in self.entries {
            let text = render_entry(&entry.failure, entry.count);
            debug_assert!(text.len() <= entry.rendered_len);
            if out.len() + text.len() + 1 > hard_limit {
                omitted += entry.count;
                failures_omitted += 1;
                continue;
            }
            out.push_str(&text);
            out.push('\n');
            if failures.len() < MAX_FAILURES {
                failures.push(entry.failure);
            } else {
                failures_omitted += 1;
            }
        }
        for note in &self.notes {
            let room = hard_limit.saturating_sub(out.len() + 1);
            if room < 40 {
                break;
            }
            let cut = if note.len() > room {
                // Keep the end of a note: for output tails the last lines matter most.
                let mut start = note.len() - (room - 24);
                while !note.is_char_boundary(start) {
                    start += 1;
                }
                format!("[{} bytes cut] …{}", start, &note[start..])
            } else {
                note.clone()
            };
            out.push_str(&cut);
            out.push('\n');
        }
        if omitted > 0 {
            out.push_str(&format!(
                "{omitted} more failures omitted (diagnostics budget {} bytes; raise the budget to see them)\n",
                self.budget
            ));
        }
        if out.len() > self.budget {
            // Cannot happen with the reserve above; kept as a last guard so the bound holds.
            out = truncate_marked(&out, self.budget);
        }
        Sanitized {
            text: out,
            failures,
            omitted,
            failures_omitted,
        }
    }
}

fn fold_key(f: &Failure) -> u64 {
    let mut h = DefaultHasher::new();
    f.kind.hash(&mut h);
    f.message.hash(&mut h);
    f.file.hash(&mut h);
    f.line.hash(&mut h);
    if f.file.is_none() {
        // Without a location only an identical test name makes two failures "the same".
        f.test.hash(&mut h);
    }
    h.finish()
}

fn render_entry(f: &Failure, count: u64) -> String {
    let mut s = String::new();
    if count > 1 {
        s.push_str(&format!("(×{count}) "));
    }
    s.push_str(match f.kind {
        FailureKind::Test => "FAIL ",
        FailureKind::Compile => "ERROR ",
    });
    if let Some(file) = &f.file {
        s.push_str(file);
        if let Some(line) = f.line {
            s.push_str(&format!(":{line}"));
            if let Some(col) = f.column {
                s.push_str(&format!(":{col}"));
            }
        }
        s.push(' ');
    }
    s.push_str(&f.test);
    if f.pre_existing {
        s.push_str(" [pre-existing]");
    }
    for line in f.message.lines() {
        s.push_str("\n  ");
        s.push_str(line);
    }
    if let Some(e) = &f.expected {
        s.push_str(&format!(
            "\n  expected: {}",
            e.replace('\n', "\n            ")
        ));
    }
    if let Some(r) = &f.received {
        s.push_str(&format!(
            "\n  received: {}",
            r.replace('\n', "\n            ")
        ));
    }
    for frame in f.stack.iter().skip(1) {
        s.push_str(&format!("\n  at {frame}"));
    }
    s
}

/// Reads `reader` line by line with a bounded line length (longer lines are cut to
/// [`MAX_LINE_BYTES`] and the rest skipped), invalid UTF-8 replaced, ANSI stripped, and calls
/// `f` for each. Memory stays bounded whatever the input size.
pub fn for_each_line<R: BufRead>(reader: R, f: impl FnMut(&str)) -> std::io::Result<()> {
    for_each_line_max(reader, MAX_LINE_BYTES, f)
}

/// [`for_each_line`] with a given line-length bound.
pub fn for_each_line_max<R: BufRead>(
    mut reader: R,
    max_line: usize,
    mut f: impl FnMut(&str),
) -> std::io::Result<()> {
    let mut buf: Vec<u8> = Vec::with_capacity(1024);
    loop {
        buf.clear();
        let mut overflow = false;
        loop {
            let available = match reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                break;
            }
            let (chunk, done) = match memchr_newline(available) {
                Some(i) => (&available[..i], Some(i + 1)),
                None => (available, None),
            };
            if !overflow {
                let room = max_line.saturating_sub(buf.len());
                if chunk.len() > room {
                    buf.extend_from_slice(&chunk[..room]);
                    overflow = true;
                } else {
                    buf.extend_from_slice(chunk);
                }
            }
            match done {
                Some(n) => {
                    reader.consume(n);
                    break;
                }
                None => {
                    let n = available.len();
                    reader.consume(n);
                }
            }
        }
        if buf.is_empty() && !overflow {
            // Either EOF or an empty line; tell them apart by peeking.
            if reader.fill_buf()?.is_empty() && buf.is_empty() {
                // An empty last line before EOF is dropped, like `str::lines`.
                return Ok(());
            }
        }
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        let text = String::from_utf8_lossy(&buf);
        f(&strip_ansi(&text));
    }
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

/// Keeps the last lines of a stream within a byte bound (for crash and generic diagnostics).
#[derive(Debug, Clone)]
pub struct Tail {
    max_bytes: usize,
    lines: std::collections::VecDeque<String>,
    bytes: usize,
    dropped_lines: u64,
}

impl Tail {
    /// A tail keeping at most `max_bytes` of the most recent lines.
    pub fn new(max_bytes: usize) -> Tail {
        Tail {
            max_bytes,
            lines: std::collections::VecDeque::new(),
            bytes: 0,
            dropped_lines: 0,
        }
    }

    /// Appends one line, dropping the oldest lines beyond the bound.
    pub fn push(&mut self, line: &str) {
        let line = truncate_marked(line, self.max_bytes.max(64));
        self.bytes += line.len() + 1;
        self.lines.push_back(line);
        while self.bytes > self.max_bytes && self.lines.len() > 1 {
            if let Some(old) = self.lines.pop_front() {
                self.bytes -= old.len() + 1;
                self.dropped_lines += 1;
            }
        }
    }

    /// The kept lines, preceded by a marker when earlier lines were dropped.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if self.dropped_lines > 0 {
            out.push_str(&format!("[{} earlier lines omitted]\n", self.dropped_lines));
        }
        for l in &self.lines {
            out.push_str(l);
            out.push('\n');
        }
        out
    }

    /// True when no line was pushed.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn failure(test: &str, msg: &str, file: &str, line: u32) -> Failure {
        Failure {
            test: test.into(),
            file: Some(file.into()),
            line: Some(line),
            message: msg.into(),
            ..Failure::default()
        }
    }

    #[test]
    fn strips_ansi_sequences() {
        assert_eq!(strip_ansi("\x1b[32m- 6\x1b[39m ok"), "- 6 ok");
        assert_eq!(strip_ansi("\x1b]0;title\x07plain"), "plain");
        assert_eq!(strip_ansi("no escapes"), "no escapes");
    }

    #[test]
    fn locator_keeps_only_workspace_frames() {
        let loc = Locator::new(Path::new("/ws/proj"));
        let line = "    at TestContext.<anonymous> (file:///ws/proj/test/math.test.js:10:10)";
        assert_eq!(
            loc.locations_in(line),
            vec![Location {
                file: "test/math.test.js".into(),
                line: 10,
                column: Some(10)
            }]
        );
        assert!(
            loc.locations_in("at Test.run (node:internal/test_runner/test:796:25)")
                .is_empty()
        );
        assert!(
            loc.locations_in("at x (/ws/proj/node_modules/jest-circus/build/utils.js:298:28)")
                .is_empty()
        );
        assert!(loc.locations_in("at x (/elsewhere/a.js:1:1)").is_empty());
        assert!(loc.locations_in(" ❯ ../../x/config.js:29250:43").is_empty());
        assert_eq!(
            loc.locations_in("thread 't' panicked at src/lib.rs:12:5:")[0].render(),
            "src/lib.rs:12:5"
        );
        assert_eq!(
            loc.locations_in(r#"E     File "/ws/proj/tests/test_math.py", line 5"#)[0].render(),
            "tests/test_math.py:5"
        );
        assert_eq!(
            loc.locations_in("SyntaxError: /ws/proj/t/a.test.js: Unexpected token (5:28)")[0]
                .render(),
            "t/a.test.js:5:28"
        );
        assert_eq!(
            loc.locations_in("src/a.ts(3,7): error TS2322: Type 'string'")[0].render(),
            "src/a.ts:3:7"
        );
        // A prefix of the root is not the root.
        assert!(loc.locations_in("/ws/project/a.js:1").is_empty());
    }

    #[test]
    fn clean_message_drops_frames_and_bounds_length() {
        let msg = "Error: expected 1\n\n    at foo (/x.js:1:1)\n      7 |   x\n    > 8 |   y\n        |   ^\nsecond";
        assert_eq!(clean_message(msg), "Error: expected 1\n\nsecond");
        let long = "x".repeat(5000);
        let cleaned = clean_message(&long);
        assert!(cleaned.len() <= MAX_MESSAGE_BYTES);
        assert!(cleaned.contains("bytes]"));
        let many: String = (0..40).map(|i| format!("line {i}\n")).collect();
        assert!(clean_message(&many).contains("[30 more lines]"));
    }

    #[test]
    fn expected_and_received_formats() {
        assert_eq!(
            expected_received("Expected: 6\nReceived: 5"),
            (Some("6".into()), Some("5".into()))
        );
        assert_eq!(
            expected_received("assertion failed\n  left: 5\n right: 6"),
            (Some("6".into()), Some("5".into()))
        );
        assert_eq!(
            expected_received("\x1b[32m- Expected\x1b[39m\n+ Received\n\n- 6\n+ 5\n\n ❯ a.js:1:1"),
            (Some("6".into()), Some("5".into()))
        );
        assert_eq!(
            expected_received("  actual: 5,\n  expected: 6,\n"),
            (Some("6".into()), Some("5".into()))
        );
        assert_eq!(
            expected_received("assert 5 == 6\n +  where 5 = add(2, 3)"),
            (Some("6".into()), Some("5".into()))
        );
        assert_eq!(expected_received("plain"), (None, None));
    }

    #[test]
    fn folds_identical_failures_and_respects_the_budget() {
        let mut s = Sanitizer::new(1024);
        for i in 0..12 {
            s.push(failure(&format!("case {i}"), "boom", "src/a.rs", 3));
        }
        for i in 0..500 {
            s.push(failure(
                "other",
                &format!("distinct failure number {i}"),
                "src/b.rs",
                i,
            ));
        }
        let out = s.finish();
        assert!(
            out.text.contains("(×12) FAIL src/a.rs:3 case 0"),
            "{}",
            out.text
        );
        assert!(out.text.len() <= 1024, "{}", out.text.len());
        let omitted_line = out.text.lines().last().unwrap();
        assert!(
            omitted_line.contains("more failures omitted"),
            "{omitted_line}"
        );
        let shown = out.text.matches("FAIL ").count() as u64;
        // Every one of the 512 occurrences is either shown (folded) or counted as omitted.
        let shown_occurrences = 12 + (shown - 1);
        assert_eq!(shown_occurrences + out.omitted, 512);
    }

    #[test]
    fn nothing_is_cut_silently_even_with_a_tiny_budget() {
        let mut s = Sanitizer::new(10);
        s.push(failure("t", &"m".repeat(1000), "a.js", 1));
        s.push(failure("u", "n", "b.js", 2));
        let out = s.finish();
        assert!(out.text.len() <= 256);
        assert!(out.text.contains("more failures omitted"));
    }

    #[test]
    fn notes_keep_their_end() {
        let mut s = Sanitizer::new(300);
        let note: String = (0..100).map(|i| format!("line {i}\n")).collect();
        s.note(&note);
        let out = s.finish();
        assert!(out.text.contains("line 99"));
        assert!(out.text.contains("bytes cut"));
        assert!(out.text.len() <= 300);
    }

    #[test]
    fn line_reader_bounds_long_lines() {
        let mut input = Vec::new();
        input.extend_from_slice(b"first\r\n\n");
        input.extend(std::iter::repeat_n(b'a', MAX_LINE_BYTES * 3));
        input.extend_from_slice(b"\nlast\x1b[0m");
        let mut lines = Vec::new();
        for_each_line(std::io::Cursor::new(input), |l| lines.push(l.to_string())).unwrap();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[0], "first");
        assert_eq!(lines[1], "");
        assert_eq!(lines[2].len(), MAX_LINE_BYTES);
        assert_eq!(lines[3], "last");
    }

    #[test]
    fn tail_keeps_recent_lines() {
        let mut t = Tail::new(20);
        for i in 0..10 {
            t.push(&format!("l{i}"));
        }
        let r = t.render();
        assert!(r.contains("l9"));
        assert!(!r.contains("l0\n"));
        assert!(r.starts_with("["));
    }
}
