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
use std::hash::{BuildHasher, Hash, Hasher};
use std::io::BufRead;
use std::sync::LazyLock;

use foldhash::fast::RandomState as FoldHasher;
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
/// Most failures kept in the structured list (the verdict JSON's `failures`), whatever the
/// text budget.
pub const MAX_FAILURES: usize = 200;
/// Longest line read from runner output; the rest of a longer line is skipped.
pub const MAX_LINE_BYTES: usize = 16 * 1024;
/// Bytes reserved at the end of the budget for the "omitted" line.
const RESERVE: usize = 220;
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
    let bytes = text.as_bytes();
    let Some(first) = memchr::memchr(0x1b, bytes) else {
        return Cow::Borrowed(text);
    };
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    out.extend_from_slice(&bytes[..first]);
    let mut i = first;
    while i < bytes.len() {
        if bytes[i] != 0x1b {
            // Plain text up to the next escape, copied at once.
            let end = memchr::memchr(0x1b, &bytes[i..]).map_or(bytes.len(), |n| i + n);
            out.extend_from_slice(&bytes[i..end]);
            i = end;
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

/// Whether some byte for which `before` holds is followed by an ASCII digit (the only digits
/// a line number parses from).
fn has_number_after(bytes: &[u8], before: impl Fn(u8) -> bool) -> bool {
    bytes
        .windows(2)
        .any(|w| w[1].is_ascii_digit() && before(w[0]))
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
    /// installed packages (`node_modules`, a Python `site-packages` or `dist-packages`, a
    /// virtualenv's `.venv`), or climbs with `..`.
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
            || rel.split('/').any(|c| {
                matches!(
                    c,
                    ".." | "" | "node_modules" | "site-packages" | "dist-packages" | ".venv"
                )
            })
        {
            return None;
        }
        Some(rel.to_string())
    }

    /// Every workspace location mentioned on one line, in order.
    pub fn locations_in(&self, line: &str) -> Vec<Location> {
        let mut found = Vec::new();
        // Each regex runs only on lines that can hold its kind of location (most message
        // lines hold none): Python's names its `File "`; the others put the line number right
        // after a `:` or `(`.
        if line.contains("File \"") {
            for caps in PY_FRAME_RE.captures_iter(line) {
                if let (Some(file), Some(n)) = (self.relative(&caps[1]), caps[2].parse().ok()) {
                    found.push(Location {
                        file,
                        line: n,
                        column: None,
                    });
                }
            }
        }
        if !found.is_empty() || !has_number_after(line.as_bytes(), |b| matches!(b, b':' | b'(')) {
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

/// The values an assertion message states, each under the name its runner gives it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Values {
    /// The expected value (jest/vitest `Expected`, node's `expected:`).
    pub expected: Option<String>,
    /// The received or actual value (jest/vitest `Received`, node's `actual:`).
    pub received: Option<String>,
    /// The left side of a comparison whose runner does not say which side is expected
    /// (Rust's `left:`, pytest's `assert L == R`).
    pub left: Option<String>,
    /// The right side of such a comparison.
    pub right: Option<String>,
}

impl Values {
    /// Copies the values onto `failure`.
    pub fn apply(self, failure: &mut Failure) {
        failure.expected = self.expected;
        failure.received = self.received;
        failure.left = self.left;
        failure.right = self.right;
    }
}

/// The values of an assertion message, as its runner names them: jest `Expected:`/`Received:`,
/// vitest's `- Expected`/`+ Received` diff and node's `expected:`/`actual:` give expected and
/// received; Rust's `left:`/`right:` and pytest's `assert L == R` give left and right (which
/// side is the expected one is the test author's choice, so it is never guessed). Only the
/// assertion message is read: a line of quoted source code is not an assertion.
pub fn assertion_values(text: &str) -> Values {
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
    // pytest's rewritten assertion, as the first line of its message: `assert 5 == 6`.
    static PYTEST_EQ: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^(?:AssertionError: )?assert (.+?) == (.+)$").expect("regex")
    });
    let text = strip_ansi(text);
    // Each regex runs only when the text holds its label: most messages hold none of them.
    let grab = |label: &str, re: &Regex| {
        if !text.contains(label) {
            return None;
        }
        re.captures(&text)
            .map(|c| truncate_marked(c[1].trim(), 200))
    };
    let mut v = Values::default();
    if let Some(e) = grab("Expected", &JEST_E)
        && let Some(r) = grab("Received", &JEST_R)
    {
        v.expected = Some(e);
        v.received = Some(r);
        return v;
    }
    if let Some(l) = grab("left:", &RUST_L)
        && let Some(r) = grab("right:", &RUST_R)
    {
        v.left = Some(l);
        v.right = Some(r);
        return v;
    }
    if let Some(e) = grab("expected:", &NODE_E)
        && let Some(a) = grab("actual:", &NODE_A)
    {
        v.expected = Some(e);
        v.received = Some(a);
        return v;
    }
    if let Some(first) = text.lines().map(str::trim).find(|l| !l.is_empty())
        && let Some(c) = PYTEST_EQ.captures(first)
    {
        v.left = Some(truncate_marked(c[1].trim(), 200));
        v.right = Some(truncate_marked(c[2].trim(), 200));
        return v;
    }
    if let Some((expected, received)) = diff_block(&text) {
        v.expected = Some(truncate_marked(&expected.join("\n"), 200));
        v.received = Some(truncate_marked(&received.join("\n"), 200));
    }
    v
}

/// vitest's diff, "- Expected\n+ Received\n\n- 6\n+ 5": its `-` and `+` lines (at most 8).
fn diff_block(text: &str) -> Option<(Vec<&str>, Vec<&str>)> {
    let mut lines = text.lines().map(str::trim);
    if !lines.any(|l| l == "- Expected") {
        return None;
    }
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
    (!expected.is_empty() || !received.is_empty()).then_some((expected, received))
}

/// Expected / received values only (see [`assertion_values`]): `(None, None)` for a
/// comparison whose runner names no expected side.
pub fn expected_received(text: &str) -> (Option<String>, Option<String>) {
    let v = assertion_values(text);
    (v.expected, v.received)
}

/// The sanitiser's result.
#[derive(Debug, Clone, Default)]
pub struct Sanitized {
    /// Rendered diagnostics, within the budget.
    pub text: String,
    /// The distinct failures kept (folded representatives), at most [`MAX_FAILURES`], in the
    /// order the text shows them: the changed files' tests first, then file by file in turn.
    pub failures: Vec<Failure>,
    /// Failures (occurrences) left out of `text`.
    pub omitted: u64,
    /// Distinct failures left out of `failures` (beyond [`MAX_FAILURES`]).
    pub failures_omitted: u64,
}

struct Entry {
    failure: Failure,
    key: u64,
    count: u64,
    relation: Relation,
}

/// How a failure relates to the change; failures are shown closest first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
enum Relation {
    #[default]
    Unrelated,
    /// A test that reaches a changed module: its imports name one, or its stack passes
    /// through a changed file.
    Reaches,
    /// A changed module's own test: its failure is located in a changed file; its test file
    /// is named after a changed module; it is a Go test of a changed package; its Rust test
    /// path goes through a changed module; it is a doc test written in a changed file.
    Own,
}

/// What a change touched, for putting first the tests that exercise it. A failure is the
/// changed module's own when its file is a changed file; when its test file's name without
/// test affixes (`test_calc.py`, `calc_test.go`, `calc.test.ts`, `calc.spec.js`,
/// `calc-test.js`, `tests/calc.rs`), or that name up to a `-` or `_` (`calc-parser-test.js`),
/// is a changed module's name (`calc.py`, `calc/__init__.py`, `src/calc.rs`,
/// `calc/index.ts`), a package's root module (`index.js`, `src/lib.rs`) being tested by the
/// index of a test directory (`test/index.test.js`); when its Rust test path names a changed
/// module (`calc::tests::adds`) or it is a doc test of a changed file (`src/calc.rs - add
/// (line 3)`); or when it is a Go test of a changed package (its file in the package's
/// directory, or its id, `./pkg/calc::TestAdd`, naming it). It reaches the change when a
/// workspace frame of its stack is a changed file or its test file's imports name a changed
/// module.
#[derive(Default)]
struct Changed {
    paths: HashSet<String>,
    modules: HashSet<String>,
    go_dirs: HashSet<String>,
    /// Reads the head of a workspace file (see [`Sanitizer::set_file_reader`]).
    reader: Option<FileReader>,
    /// Whether a test file's imports name a changed module, per file read.
    imports: HashMap<String, bool>,
}

/// Reads the first bytes of a workspace-relative file (`None`: absent or unreadable).
pub type FileReader = Box<dyn Fn(&str) -> Option<String>>;

/// Most test files whose imports are read.
const MAX_IMPORT_FILES: usize = 1024;

/// True when one of the import lines of `text` (`import …`, `from … import`, `use …`,
/// `require(…)`, `export … from`, a Go import path line) names one of `modules`.
fn imports_name(text: &str, modules: &HashSet<String>) -> bool {
    text.lines().take(400).any(|l| {
        let t = l.trim_start();
        let import = t.starts_with("import ")
            || t.starts_with("import(")
            || t.starts_with("from ")
            || t.starts_with("use ")
            || t.starts_with("pub use ")
            || t.contains("require(")
            || (t.starts_with("export ") && t.contains(" from "))
            || (t.starts_with('"') && t.trim_end().ends_with('"'));
        import
            && t.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .any(|tok| !tok.is_empty() && modules.contains(tok))
    })
}

/// File names that stand for their directory as a module.
const DIR_MODULES: [&str; 5] = ["__init__", "index", "mod", "lib", "main"];

/// A directory of sources whose root module is the package's own (`src/lib.rs`).
const SOURCE_DIRS: [&str; 1] = ["src"];

/// Directories left out when naming the module an index test tests: test directories and
/// `src/` (`test/index.test.js` and `src/__tests__/index.test.ts` test the package's root).
const TEST_DIRS: [&str; 6] = ["test", "tests", "__tests__", "spec", "specs", "src"];

fn parent_dir(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(d, _)| d)
}

fn file_name(path: &str) -> &str {
    path.rsplit_once('/').map_or(path, |(_, f)| f)
}

/// The name of the module a directory stands for, `skipped` directories left out (`""`: the
/// package's root).
fn dir_module<'a>(mut dir: &'a str, skipped: &[&str]) -> &'a str {
    loop {
        let base = file_name(dir);
        if base.is_empty() || !skipped.contains(&base) {
            return base;
        }
        dir = parent_dir(dir);
    }
}

/// The module a source path defines: its file name up to the first dot, or for
/// `__init__.py`, `index.js`, `mod.rs`, `lib.rs`, `main.go` its directory's name (`""`, the
/// package's root module, at the root or in `src/`).
fn module_of(path: &str) -> Option<&str> {
    let name = file_name(path);
    let stem = name.split('.').next().unwrap_or(name);
    if DIR_MODULES.contains(&stem) {
        return Some(dir_module(parent_dir(path), &SOURCE_DIRS));
    }
    (!stem.is_empty()).then_some(stem)
}

/// The module a test file is named after: `test_calc.py`, `calc_test.go`, `calc.test.ts`,
/// `calc.spec.js`, `calc_tests.rs`, `calc-test.js` all name `calc`; an index test names its
/// directory's module, test directories left out (`test/index.test.js`: the package's root,
/// `""`).
fn tested_module(path: &str) -> Option<&str> {
    let name = file_name(path);
    let stem = name.split('.').next().unwrap_or(name);
    let stem = ["test_", "test-"]
        .iter()
        .find_map(|p| stem.strip_prefix(p))
        .unwrap_or(stem);
    let stem = ["_test", "_tests", "_spec", "-test", "-tests", "-spec"]
        .iter()
        .find_map(|s| stem.strip_suffix(s))
        .unwrap_or(stem);
    if DIR_MODULES.contains(&stem) {
        return Some(dir_module(parent_dir(path), &TEST_DIRS));
    }
    (!stem.is_empty()).then_some(stem)
}

/// Whether a test file named after `tested` tests one of `modules`: the same name, or the
/// name and a variant after `-` or `_` (`getPropValue-babelparser-test.js` tests
/// `getPropValue`).
fn names_a_module(tested: &str, modules: &HashSet<String>) -> bool {
    modules.contains(tested)
        || tested
            .match_indices(['-', '_'])
            .any(|(i, _)| i > 0 && modules.contains(&tested[..i]))
}

/// The package directory a Go test id names: `./pkg/calc::TestAdd` is in `pkg/calc`,
/// `.::TestAdd` at the module's root.
fn go_id_dir(id: &str) -> Option<&str> {
    let (pkg, _) = id.split_once("::")?;
    if pkg == "." {
        return Some("");
    }
    pkg.strip_prefix("./")
}

/// The test file a jest or vitest id names first: `test/calc.test.js > adds`.
fn id_test_file(f: &Failure) -> Option<&str> {
    let (file, _) = f.id.as_deref()?.split_once(" > ")?;
    (file.contains('.') && !file.contains(' ')).then_some(file)
}

/// The file a rustdoc test is written in: `src/calc.rs - calc::add (line 12)`.
fn doc_test_file(test: &str) -> Option<&str> {
    let (file, item) = test.split_once(" - ")?;
    (item.ends_with(')') && item.contains("(line ")).then_some(file)
}

impl Changed {
    fn new<S: AsRef<str>>(paths: impl IntoIterator<Item = S>) -> Changed {
        let mut c = Changed::default();
        for p in paths {
            let p = p.as_ref().trim_start_matches("./");
            if p.is_empty() {
                continue;
            }
            if let Some(m) = module_of(p) {
                c.modules.insert(m.to_string());
            }
            if p.ends_with(".go") {
                c.go_dirs.insert(parent_dir(p).to_string());
            }
            c.paths.insert(p.to_string());
        }
        c
    }

    fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    fn relation(&mut self, f: &Failure) -> Relation {
        if self.is_empty() {
            return Relation::Unrelated;
        }
        if self.is_own(f) {
            return Relation::Own;
        }
        if self.reaches(f) {
            return Relation::Reaches;
        }
        Relation::Unrelated
    }

    /// Whether `f` is a test of a changed module (see [`Relation::Own`]).
    fn is_own(&self, f: &Failure) -> bool {
        if let Some(file) = f.file.as_deref()
            && (self.paths.contains(file)
                || tested_module(file).is_some_and(|m| names_a_module(m, &self.modules))
                || (file.ends_with(".go") && self.go_dirs.contains(parent_dir(file))))
        {
            return true;
        }
        // A JS test located where it threw (a source file) is still its test file's test.
        if let Some(file) = id_test_file(f)
            && tested_module(file).is_some_and(|m| names_a_module(m, &self.modules))
        {
            return true;
        }
        let path = f.id.as_deref().unwrap_or(&f.test);
        if !self.go_dirs.is_empty() && go_id_dir(path).is_some_and(|d| self.go_dirs.contains(d)) {
            return true;
        }
        if doc_test_file(&f.test).is_some_and(|file| self.paths.contains(file)) {
            return true;
        }
        // A Rust test path names its module chain: `calc::tests::adds`.
        path.rsplit_once("::").is_some_and(|(modules, _)| {
            modules
                .split("::")
                .any(|s| !s.is_empty() && self.modules.contains(s))
        })
    }

    /// A rustdoc test's panic is reported at the line of the program rustdoc built around
    /// the snippet: moved to the line of the source file (see [`crate::adapter::doctest`]).
    fn place_doc_test(&self, f: &mut Failure) {
        let (Some(file), Some(line), Some(reader)) =
            (f.file.as_deref(), f.line, self.reader.as_ref())
        else {
            return;
        };
        if doc_test_file(&f.test) != Some(file) {
            return;
        }
        let Some(text) = reader(file) else {
            return;
        };
        if let Some(real) = crate::adapter::doctest::source_line(&f.test, &text, line, f.column)
            && real != line
        {
            f.line = Some(real);
            // At the code block's opening line the column says nothing.
            let opening = text
                .lines()
                .nth(real as usize - 1)
                .is_some_and(|l| l.contains("```"));
            if opening {
                f.column = None;
            }
        }
    }

    /// Whether `f` reaches a changed module (see [`Relation::Reaches`]).
    fn reaches(&mut self, f: &Failure) -> bool {
        let frame_file = |frame: &str| -> bool {
            let file = frame.split(':').next().unwrap_or("");
            self.paths.contains(file)
        };
        if f.stack.iter().any(|fr| frame_file(fr)) {
            return true;
        }
        let (Some(file), Some(reader)) = (f.file.as_deref(), self.reader.as_ref()) else {
            return false;
        };
        if let Some(&known) = self.imports.get(file) {
            return known;
        }
        if self.imports.len() >= MAX_IMPORT_FILES {
            return false;
        }
        let hit = reader(file).is_some_and(|text| imports_name(&text, &self.modules));
        self.imports.insert(file.to_string(), hit);
        hit
    }
}

/// Folds, bounds and renders failures within a byte budget. See the module docs.
pub struct Sanitizer {
    budget: usize,
    header: String,
    entries: Vec<Option<Entry>>,
    live: usize,
    /// Kept failures per [`Relation`] (indexed by it): eviction looks for a kept failure only
    /// when one less closely related exists.
    live_by_relation: [usize; 3],
    /// Seeds the fold keys. Keyed per sanitiser, so output crafted to collide cannot slow the
    /// folding down.
    hasher: FoldHasher,
    index: HashMap<u64, usize, FoldHasher>,
    omitted_fingerprints: HashSet<u64, FoldHasher>,
    /// Occurrences not kept (beyond [`MAX_FAILURES`] distinct failures).
    dropped: u64,
    /// Distinct failures not kept.
    dropped_distinct: u64,
    notes: Vec<String>,
    changed: Changed,
}

impl Sanitizer {
    /// A sanitiser with a budget in bytes (at least 256 are always allowed).
    pub fn new(budget: usize) -> Sanitizer {
        Sanitizer {
            budget: budget.max(256),
            header: String::new(),
            entries: Vec::new(),
            live: 0,
            live_by_relation: [0; 3],
            hasher: FoldHasher::default(),
            index: HashMap::default(),
            omitted_fingerprints: HashSet::default(),
            dropped: 0,
            dropped_distinct: 0,
            notes: Vec::new(),
            changed: Changed::default(),
        }
    }

    /// The workspace-relative paths the change touched: failures of the tests that exercise
    /// them are shown first (see the rules on relatedness in the module docs). Call before the
    /// first [`Sanitizer::push`].
    pub fn set_changed<S: AsRef<str>>(&mut self, paths: impl IntoIterator<Item = S>) {
        let reader = self.changed.reader.take();
        self.changed = Changed::new(paths);
        self.changed.reader = reader;
    }

    /// How to read a failing test file's head, so that a test whose imports name a changed
    /// module counts as exercising the change (`from calc import add`, `import { add } from
    /// '../src/math.js'`, `use crate::calc`).
    pub fn set_file_reader(&mut self, reader: FileReader) {
        self.changed.reader = Some(reader);
    }

    /// Sets a one-line header (the verdict summary); it counts against the budget.
    pub fn set_header(&mut self, header: &str) {
        self.header = truncate_marked(&strip_ansi(header), self.budget / 4);
    }

    /// Adds a failure; identical ones (same kind, message, file, line) are folded. At most
    /// [`MAX_FAILURES`] distinct failures are kept; beyond that, a failure related to the
    /// change takes the place of the last one kept that is less closely related.
    pub fn push(&mut self, mut failure: Failure) {
        self.changed.place_doc_test(&mut failure);
        // The fold key is taken on the raw failure so that repeats cost one hash, not a clean.
        let key = fold_key(&self.hasher, &failure);
        if let Some(&i) = self.index.get(&key)
            && let Some(e) = self.entries[i].as_mut()
        {
            e.count += 1;
            // The same failure from a test closer to the change (a shared helper failing in
            // several test files): that test names the folded entry.
            let mut folded = failure;
            if e.relation < Relation::Own {
                let relation = self.changed.relation(&folded);
                if relation > e.relation {
                    self.live_by_relation[e.relation as usize] -= 1;
                    self.live_by_relation[relation as usize] += 1;
                    let mut replacement = cleaned(folded);
                    replacement.also = std::mem::take(&mut e.failure.also);
                    replacement.also_more = e.failure.also_more;
                    folded = std::mem::replace(&mut e.failure, replacement);
                    e.relation = relation;
                }
            }
            // Every folded test stays named: the JSON lists it, `--only` takes it.
            let name = folded.id.unwrap_or(folded.test);
            if e.failure.also.len() < crate::model::MAX_ALSO {
                e.failure.also.push(name);
            } else {
                e.failure.also_more += 1;
            }
            return;
        }
        if self.omitted_fingerprints.contains(&key) {
            self.dropped += 1;
            return;
        }
        let relation = self.changed.relation(&failure);
        if self.live >= MAX_FAILURES && !self.evict_below(relation) {
            self.drop_distinct(key, 1);
            return;
        }
        self.index.insert(key, self.entries.len());
        self.entries.push(Some(Entry {
            failure: cleaned(failure),
            key,
            count: 1,
            relation,
        }));
        self.live += 1;
        self.live_by_relation[relation as usize] += 1;
    }

    /// Drops the last kept failure less closely related to the change than `relation`; false
    /// when there is none.
    fn evict_below(&mut self, relation: Relation) -> bool {
        if self.live_by_relation[..relation as usize]
            .iter()
            .all(|&n| n == 0)
        {
            return false;
        }
        let Some(i) = self
            .entries
            .iter()
            .rposition(|e| e.as_ref().is_some_and(|e| e.relation < relation))
        else {
            return false;
        };
        if let Some(e) = self.entries[i].take() {
            self.index.remove(&e.key);
            self.live -= 1;
            self.live_by_relation[e.relation as usize] -= 1;
            self.drop_distinct(e.key, e.count);
        }
        true
    }

    fn drop_distinct(&mut self, key: u64, count: u64) {
        self.dropped += count;
        self.dropped_distinct += 1;
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

    /// Renders everything within the budget: groups of failures (parameterised cases folded
    /// into one entry that names their ids) in order — the changed modules' own tests first,
    /// then tests that reach the change, then the rest; within each, one group per file in
    /// turn, so no single file takes the whole budget.
    pub fn finish(self) -> Sanitized {
        let mut out = String::new();
        if !self.header.is_empty() {
            out.push_str(&self.header);
            out.push('\n');
        }
        let groups = order_groups(group_entries(self.entries.into_iter().flatten()));
        let mut omitted = self.dropped;
        let mut omitted_distinct = self.dropped_distinct;
        let hard_limit = self.budget.saturating_sub(RESERVE);
        for group in &groups {
            let text = render_group(group);
            if out.len() + text.len() + 1 > hard_limit {
                omitted += group.iter().map(|e| e.count).sum::<u64>();
                omitted_distinct += group.len() as u64;
                continue;
            }
            out.push_str(&text);
            out.push('\n');
        }
        let failures: Vec<Failure> = groups
            .into_iter()
            .flatten()
            .map(|e| e.failure)
            .take(MAX_FAILURES)
            .collect();
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
                "{omitted} more failures omitted ({omitted_distinct} distinct; the JSON `failures` lists {}, `failures_omitted` {}); diagnostics budget {} bytes: raise it with `--budget BYTES` (MCP argument `budget`)\n",
                failures.len(),
                self.dropped_distinct,
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
            failures_omitted: self.dropped_distinct,
        }
    }
}

/// A failure's message cleaned and its names bounded, as it is kept.
fn cleaned(mut failure: Failure) -> Failure {
    failure.message = clean_message(&failure.message);
    failure.test = truncate_marked(strip_ansi(&failure.test).trim(), 200);
    if let Some(id) = failure.id.take() {
        failure.id = Some(truncate_marked(strip_ansi(&id).trim(), 400));
    }
    failure
}

/// The name a failure is shown and rerun by: its full id when known.
fn label(f: &Failure) -> &str {
    f.id.as_deref().unwrap_or(&f.test)
}

/// The family of a parameterised case: its label without the parameter part (`test_x[a-1]`
/// → `test_x`) or without its last segment (`TestX/sub` → `TestX`, `d > each case` → `d`).
fn family(label: &str) -> Option<&str> {
    if label.ends_with(']')
        && let Some(i) = label.rfind('[')
        && i > 0
    {
        return Some(&label[..i]);
    }
    [" > ", "/", "::"]
        .iter()
        .filter_map(|sep| label.rfind(sep))
        .max()
        .map(|i| &label[..i])
}

/// What tells a member of a group from the group's first: its parameter part (`[b-2]`) or
/// last segment (`sub`, `each case 2`).
fn distinct_part<'l>(first: &str, label: &'l str) -> &'l str {
    if label.ends_with(']')
        && let Some(i) = label.rfind('[')
        && i > 0
        && first.get(..i) == label.get(..i)
    {
        return &label[i..];
    }
    let common = first
        .bytes()
        .zip(label.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    let head = &label[..common.min(label.len())];
    let cut = [" > ", "/", "::"]
        .iter()
        .filter_map(|sep| head.rfind(sep).map(|i| i + sep.len()))
        .max()
        .unwrap_or(0);
    label.get(cut..).unwrap_or(label)
}

/// Kind, pre-existing or not, file, line, column and family: what the cases of one
/// parameterised test share.
type GroupKey = (
    FailureKind,
    bool,
    Option<String>,
    Option<u32>,
    Option<u32>,
    String,
);

/// Groups failures that are cases of one parameterised test: same kind and location
/// (file:line:column) and same family, in arrival order.
fn group_entries(entries: impl Iterator<Item = Entry>) -> Vec<Vec<Entry>> {
    let mut groups: Vec<Vec<Entry>> = Vec::new();
    let mut by_key: HashMap<GroupKey, usize> = HashMap::new();
    for e in entries {
        let f = &e.failure;
        let key = f
            .file
            .is_some()
            .then(|| family(label(f)))
            .flatten()
            .map(|fam| {
                (
                    f.kind,
                    f.pre_existing,
                    f.file.clone(),
                    f.line,
                    f.column,
                    fam.to_string(),
                )
            });
        match key {
            Some(k) => match by_key.get(&k) {
                Some(&g) => groups[g].push(e),
                None => {
                    by_key.insert(k, groups.len());
                    groups.push(vec![e]);
                }
            },
            None => groups.push(vec![e]),
        }
    }
    groups
}

/// Groups of the changed modules' own tests first, then those that reach the change, then the
/// rest; within each class, one group per file in turn, each file's groups in arrival order.
fn order_groups(groups: Vec<Vec<Entry>>) -> Vec<Vec<Entry>> {
    let mut classes: [Vec<Vec<Entry>>; 3] = Default::default();
    for g in groups {
        let class = match g.iter().map(|e| e.relation).max().unwrap_or_default() {
            Relation::Own => 0,
            Relation::Reaches => 1,
            Relation::Unrelated => 2,
        };
        classes[class].push(g);
    }
    classes.into_iter().flat_map(round_robin).collect()
}

fn round_robin(groups: Vec<Vec<Entry>>) -> Vec<Vec<Entry>> {
    let mut files: Vec<std::collections::VecDeque<Vec<Entry>>> = Vec::new();
    let mut index: HashMap<Option<String>, usize> = HashMap::new();
    for g in groups {
        let file = g[0].failure.file.clone();
        let i = *index.entry(file).or_insert_with(|| {
            files.push(std::collections::VecDeque::new());
            files.len() - 1
        });
        files[i].push_back(g);
    }
    let mut out = Vec::new();
    loop {
        let mut any = false;
        for q in &mut files {
            if let Some(g) = q.pop_front() {
                out.push(g);
                any = true;
            }
        }
        if !any {
            return out;
        }
    }
}

/// Most ids of a folded group named in the text; the rest are counted.
const MAX_FOLDED_IDS: usize = 3;

fn render_group(group: &[Entry]) -> String {
    let first = &group[0];
    let mut name = label(&first.failure).to_string();
    for e in group.iter().skip(1).take(MAX_FOLDED_IDS - 1) {
        name.push_str(", ");
        name.push_str(distinct_part(label(&first.failure), label(&e.failure)));
    }
    if group.len() > MAX_FOLDED_IDS {
        name.push_str(&format!(" (+{} more)", group.len() - MAX_FOLDED_IDS));
    }
    // Identical failures of other tests, folded into this one (`×N`): named too, the rest
    // counted (the JSON's `also` lists them all).
    let also = &first.failure.also;
    if !also.is_empty() {
        let shown: Vec<&str> = also
            .iter()
            .take(MAX_FOLDED_IDS)
            .map(String::as_str)
            .collect();
        let more = also.len() - shown.len() + first.failure.also_more as usize;
        let tail = if more > 0 {
            format!(", +{more} more")
        } else {
            String::new()
        };
        name.push_str(&format!(" [also {}{tail}]", shown.join(", ")));
    }
    let count: u64 = first.count;
    render_entry(&first.failure, &name, count)
}

fn fold_key(hasher: &FoldHasher, f: &Failure) -> u64 {
    let mut h = hasher.build_hasher();
    f.kind.hash(&mut h);
    // A new failure never folds into a pre-existing one (`--baseline`): it would hide there.
    f.pre_existing.hash(&mut h);
    f.message.hash(&mut h);
    f.file.hash(&mut h);
    f.line.hash(&mut h);
    if f.file.is_none() {
        // Without a location only an identical test name makes two failures "the same".
        f.test.hash(&mut h);
    }
    h.finish()
}

/// The message as the text shows it: a runner's `- Expected`/`+ Received` diff is left out
/// when the message's first line already states every value in it.
fn message_for_text(message: &str) -> Cow<'_, str> {
    let Some((expected, received)) = diff_block(message) else {
        return Cow::Borrowed(message);
    };
    let headline = message.lines().next().unwrap_or("");
    let stated = expected
        .iter()
        .chain(received.iter())
        .all(|v| !v.is_empty() && headline.contains(v));
    if !stated {
        return Cow::Borrowed(message);
    }
    let mut out = Vec::new();
    let mut in_diff = false;
    for line in message.lines() {
        let t = line.trim();
        if t == "- Expected" {
            in_diff = true;
            continue;
        }
        if in_diff && (t.is_empty() || t.starts_with("- ") || t.starts_with("+ ")) {
            continue;
        }
        in_diff = false;
        out.push(line);
    }
    while out.last().is_some_and(|l| l.trim().is_empty()) {
        out.pop();
    }
    Cow::Owned(out.join("\n"))
}

fn render_entry(f: &Failure, name: &str, count: u64) -> String {
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
    s.push_str(name);
    if f.pre_existing {
        s.push_str(" [pre-existing]");
    }
    let message = message_for_text(&f.message);
    for line in message.lines() {
        s.push_str("\n  ");
        s.push_str(line);
    }
    // Each value once: airlock's own line only when the message does not already show it.
    for (tag, value) in [
        ("expected", &f.expected),
        ("received", &f.received),
        ("left", &f.left),
        ("right", &f.right),
    ] {
        if let Some(v) = value
            && !message.contains(v.as_str())
        {
            let pad = " ".repeat(tag.len() + 4);
            s.push_str(&format!(
                "\n  {tag}: {}",
                v.replace('\n', &format!("\n{pad}"))
            ));
        }
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
        // Most lines lie whole inside the reader's buffer: handed over from there, uncopied.
        let available = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let whole = whole_lines(available, max_line, &mut f);
        if whole > 0 {
            reader.consume(whole);
            continue;
        }
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
        emit_line(&buf, &mut f);
    }
}

/// Calls `f` for each whole line at the start of `bytes` (the UTF-8 check done once for them
/// all) and returns how many bytes they took with their newlines. An empty line with nothing
/// after it in `bytes` stops it: whether it is the last one (and so dropped) is for the
/// caller to find out.
fn whole_lines(bytes: &[u8], max_line: usize, f: &mut impl FnMut(&str)) -> usize {
    let Some(last_newline) = memchr::memrchr(b'\n', bytes) else {
        return 0;
    };
    let lines = &bytes[..last_newline];
    let valid = match std::str::from_utf8(lines) {
        Ok(text) => text,
        // Up to the first invalid byte: the rest goes line by line.
        Err(e) => std::str::from_utf8(&lines[..e.valid_up_to()]).unwrap_or(""),
    };
    let mut taken = 0;
    while taken <= last_newline {
        let rest = &bytes[taken..=last_newline];
        let Some(i) = memchr_newline(rest).filter(|&i| i > 0 || taken + 1 < bytes.len()) else {
            break;
        };
        let end = taken + i;
        if end <= valid.len() && i <= max_line {
            let mut line = &valid[taken..end];
            if let Some(stripped) = line.strip_suffix('\r') {
                line = stripped;
            }
            f(&strip_ansi(line));
        } else {
            emit_line(&rest[..i.min(max_line)], f);
        }
        taken = end + 1;
    }
    taken
}

/// Calls `f` with one line's bytes as text: a trailing `\r` dropped, invalid UTF-8 replaced,
/// ANSI stripped.
fn emit_line(mut bytes: &[u8], f: &mut impl FnMut(&str)) {
    if let [rest @ .., b'\r'] = bytes {
        bytes = rest;
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => f(&strip_ansi(text)),
        Err(_) => f(&strip_ansi(&String::from_utf8_lossy(bytes))),
    }
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', bytes)
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
    fn folded_failures_keep_every_test_id() {
        let mut s = Sanitizer::new(4096);
        for i in 0..7 {
            let mut f = failure(&format!("case {i}"), "boom", "src/shared.js", 3);
            f.id = Some(format!("test/t{i}.test.js > case {i}"));
            s.push(f);
        }
        let out = s.finish();
        assert_eq!(out.failures.len(), 1, "{:?}", out.failures);
        let f = &out.failures[0];
        let mut all: Vec<&str> = vec![f.id.as_deref().unwrap()];
        all.extend(f.also.iter().map(String::as_str));
        all.sort();
        let want: Vec<String> = (0..7)
            .map(|i| format!("test/t{i}.test.js > case {i}"))
            .collect();
        assert_eq!(all, want.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(out.text.contains("(×7)"), "{}", out.text);
        assert!(
            out.text.contains("[also ") && out.text.contains("+3 more]"),
            "{}",
            out.text
        );
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
        // A virtualenv's installed packages are not the workspace's code.
        assert_eq!(
            loc.relative("/ws/proj/.venv/lib/python3.11/site-packages/_pytest/python.py"),
            None
        );
        assert_eq!(loc.relative(".venv/bin/pytest"), None);
        assert_eq!(
            loc.relative("src/venv_tools/a.py").as_deref(),
            Some("src/venv_tools/a.py")
        );
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
        // Rust names no expected side: left and right stay left and right.
        assert_eq!(
            expected_received("assertion failed\n  left: 5\n right: 6"),
            (None, None)
        );
        let v = assertion_values("assertion failed\n  left: 5\n right: 6");
        assert_eq!(
            (v.left.as_deref(), v.right.as_deref()),
            (Some("5"), Some("6"))
        );
        assert_eq!(
            expected_received("\x1b[32m- Expected\x1b[39m\n+ Received\n\n- 6\n+ 5\n\n ❯ a.js:1:1"),
            (Some("6".into()), Some("5".into()))
        );
        assert_eq!(
            expected_received("  actual: 5,\n  expected: 6,\n"),
            (Some("6".into()), Some("5".into()))
        );
        // Nor does pytest's `assert L == R`; and only the message's own first line counts.
        assert_eq!(
            expected_received("assert 5 == 6\n +  where 5 = add(2, 3)"),
            (None, None)
        );
        let v = assertion_values("assert 5 == 6\n +  where 5 = add(2, 3)");
        assert_eq!(
            (v.left.as_deref(), v.right.as_deref()),
            (Some("5"), Some("6"))
        );
        assert_eq!(
            assertion_values("Failed: DID NOT RAISE <class 'ValueError'>\n    assert x == y"),
            Values::default()
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
    fn the_budget_is_spread_across_files_and_the_json_list_has_its_own_cap() {
        let mut s = Sanitizer::new(1400);
        // Forty failures in one file arrive first, then one in each of two others.
        for i in 0..40 {
            s.push(failure(
                &format!("a{i}"),
                &format!("distinct a {i}"),
                "t/a.py",
                i,
            ));
        }
        s.push(failure("b", "only b", "t/b.py", 1));
        s.push(failure("c", "only c", "t/c.py", 1));
        let out = s.finish();
        let shown: Vec<&str> = out.text.lines().filter(|l| l.starts_with("FAIL")).collect();
        assert!(shown.len() >= 3 && shown.len() < 42, "{}", out.text);
        assert!(
            shown[1].contains("t/b.py") && shown[2].contains("t/c.py"),
            "{shown:?}"
        );
        // The JSON list is complete whatever the text budget, in the text's order.
        assert_eq!(out.failures.len(), 42);
        assert_eq!(out.failures[1].file.as_deref(), Some("t/b.py"));
        assert_eq!(out.failures_omitted, 0);
        assert_eq!(out.omitted, 42 - shown.len() as u64);

        let mut s = Sanitizer::new(1 << 20);
        for i in 0..(MAX_FAILURES as u32 + 50) {
            s.push(failure("t", &format!("m{i}"), "t/a.py", i));
        }
        let out = s.finish();
        assert_eq!(out.failures.len(), MAX_FAILURES);
        assert_eq!(out.failures_omitted, 50);
        assert!(
            out.text
                .contains("(50 distinct; the JSON `failures` lists 200, `failures_omitted` 50)"),
            "{}",
            out.text.lines().last().unwrap()
        );
    }

    #[test]
    fn failures_related_to_the_change_come_first_and_are_kept() {
        let mut s = Sanitizer::new(600);
        s.set_changed(["src/calc.py", "pkg/util/strings.go", "src/parser.rs"]);
        for i in 0..MAX_FAILURES as u32 {
            s.push(failure(
                "t",
                &format!("other {i}"),
                "tests/test_other.py",
                i,
            ));
        }
        // Past the cap, related failures still get in, in place of unrelated ones.
        s.push(failure("t", "calc", "tests/test_calc.py", 1));
        s.push(failure("t", "go", "pkg/util/format_test.go", 1));
        s.push(Failure {
            test: "parser::tests::reads".into(),
            message: "rust".into(),
            ..Failure::default()
        });
        s.push(Failure {
            test: "helper".into(),
            message: "through a frame".into(),
            file: Some("tests/test_z.py".into()),
            line: Some(3),
            stack: vec!["tests/test_z.py:3".into(), "src/calc.py:9".into()],
            ..Failure::default()
        });
        s.push(failure("t", "unrelated", "tests/test_more.py", 1));
        let out = s.finish();
        assert_eq!(out.failures.len(), MAX_FAILURES);
        assert_eq!(out.failures_omitted, 5);
        let first: Vec<&str> = out.failures[..4]
            .iter()
            .map(|f| f.message.as_str())
            .collect();
        assert_eq!(first, ["calc", "go", "rust", "through a frame"]);
        let text_first = out.text.lines().next().unwrap();
        assert!(text_first.contains("tests/test_calc.py"), "{}", out.text);
        assert!(tested_module("tests/calc.spec.ts") == Some("calc"));
        assert!(module_of("src/calc/__init__.py") == Some("calc"));
    }

    #[test]
    fn a_test_whose_imports_name_a_changed_module_comes_first() {
        let ws = tempfile::tempdir().unwrap();
        let w = |rel: &str, body: &str| {
            let p = ws.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        };
        w(
            "tests/test_a.py",
            "import os\n\ndef test_a():\n    assert 0\n",
        );
        w("tests/test_b.py", "from pkg.geometry import area\n");
        w(
            "test/c.test.js",
            "import { area } from '../src/geometry.js';\n",
        );
        w("tests/d.rs", "use pkg::geometry::area;\n");
        let mut s = Sanitizer::new(4096);
        s.set_changed(["src/geometry.py"]);
        let root = ws.path().to_path_buf();
        s.set_file_reader(Box::new(move |rel: &str| {
            std::fs::read_to_string(root.join(rel)).ok()
        }));
        for file in [
            "tests/test_a.py",
            "tests/test_b.py",
            "test/c.test.js",
            "tests/d.rs",
        ] {
            s.push(failure("t", file, file, 1));
        }
        let out = s.finish();
        let order: Vec<&str> = out.failures.iter().map(|f| f.message.as_str()).collect();
        assert_eq!(
            order,
            [
                "tests/test_b.py",
                "test/c.test.js",
                "tests/d.rs",
                "tests/test_a.py"
            ]
        );
    }

    fn order_of(changed: &[&str], failures: Vec<Failure>) -> Vec<String> {
        let mut s = Sanitizer::new(1 << 16);
        s.set_changed(changed);
        for f in failures {
            s.push(f);
        }
        s.finish().failures.into_iter().map(|f| f.message).collect()
    }

    #[test]
    fn the_changed_modules_own_tests_come_before_tests_that_only_reach_it() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(ws.path().join("tests")).unwrap();
        std::fs::write(
            ws.path().join("tests/test_shapes.py"),
            "from pkg.geometry import area\n",
        )
        .unwrap();
        let mut s = Sanitizer::new(4096);
        s.set_changed(["src/pkg/geometry.py"]);
        let root = ws.path().to_path_buf();
        s.set_file_reader(Box::new(move |rel: &str| {
            std::fs::read_to_string(root.join(rel)).ok()
        }));
        // Reported first: a test that imports the module, one whose stack passes through it,
        // an unrelated one; then the module's own test file.
        s.push(failure("t", "imports", "tests/test_shapes.py", 1));
        s.push(Failure {
            stack: vec!["tests/test_z.py:3".into(), "src/pkg/geometry.py:9".into()],
            ..failure("t", "through a frame", "tests/test_z.py", 3)
        });
        s.push(failure("t", "unrelated", "tests/test_other.py", 1));
        s.push(failure("t", "own", "tests/test_geometry.py", 1));
        let out = s.finish();
        let order: Vec<&str> = out.failures.iter().map(|f| f.message.as_str()).collect();
        assert_eq!(order, ["own", "imports", "through a frame", "unrelated"]);
        assert!(
            out.text.starts_with("FAIL tests/test_geometry.py:1"),
            "{}",
            out.text
        );
    }

    #[test]
    fn a_package_root_module_is_tested_by_the_index_test_of_its_test_directory() {
        // gensync: `index.js` at the root, tested by `test/index.test.js`.
        let order = order_of(
            &["index.js"],
            vec![
                failure("t", "other", "test/api.test.js", 1),
                failure("t", "own", "test/index.test.js", 1),
            ],
        );
        assert_eq!(order, ["own", "other"]);
        let order = order_of(
            &["src/index.ts"],
            vec![
                failure("t", "other", "src/util.test.ts", 1),
                failure("t", "own", "src/__tests__/index.test.ts", 1),
            ],
        );
        assert_eq!(order, ["own", "other"]);
        // Another directory's index is another module.
        let order = order_of(
            &["src/parser/index.ts"],
            vec![
                failure("t", "root", "test/index.test.ts", 1),
                failure("t", "own", "src/parser/index.test.ts", 1),
            ],
        );
        assert_eq!(order, ["own", "root"]);
        assert_eq!(module_of("index.js"), Some(""));
        assert_eq!(module_of("src/lib.rs"), Some(""));
        assert_eq!(module_of("crates/calc/src/lib.rs"), Some("calc"));
        assert_eq!(tested_module("test/index.test.js"), Some(""));
        assert_eq!(tested_module("cmd/tool/main_test.go"), Some("tool"));
        // A helper in a test directory is not the package.
        assert_eq!(module_of("test/index.js"), Some("test"));
    }

    #[test]
    fn a_test_file_named_with_dashes_tests_its_module_and_variants() {
        // jsx-ast-utils: `src/propName.js` is tested by `__tests__/src/propName-test.js`;
        // `getPropValue-babelparser-test.js` tests `src/getPropValue.js`.
        let order = order_of(
            &["src/propName.js"],
            vec![
                failure("t", "other", "__tests__/src/hasProp-test.js", 1),
                failure("t", "own", "__tests__/src/propName-test.js", 1),
            ],
        );
        assert_eq!(order, ["own", "other"]);
        let order = order_of(
            &["src/getPropValue.js"],
            vec![
                failure("t", "other", "__tests__/src/getProp-test.js", 1),
                failure(
                    "t",
                    "own",
                    "__tests__/src/getPropValue-babelparser-test.js",
                    1,
                ),
            ],
        );
        assert_eq!(order, ["own", "other"]);
        assert_eq!(tested_module("test/test-calc.js"), Some("calc"));
        assert_eq!(tested_module("calc-spec.js"), Some("calc"));
        // A variant names its module, not a module its name merely starts with.
        let order = order_of(
            &["src/get.js"],
            vec![
                failure("t", "longer name", "__tests__/getProp-test.js", 1),
                failure("t", "own", "__tests__/get-parser-test.js", 1),
            ],
        );
        assert_eq!(order, ["own", "longer name"]);
    }

    #[test]
    fn a_folded_failure_is_named_by_the_test_closest_to_the_change() {
        // jsx-ast-utils: a helper of the tests throws in `src/getProp.js` for the tests of
        // `getPropValue` (reported first) and for those of the changed `propName`.
        let thrown = |id: &str, msg: &str| Failure {
            id: Some(id.into()),
            ..failure(id, msg, "src/getProp.js", 16)
        };
        let mut s = Sanitizer::new(4096);
        s.set_changed(["src/propName.js"]);
        s.push(failure("t", "unrelated", "__tests__/src/other-test.js", 3));
        s.push(thrown(
            "__tests__/src/getPropValue-test.js > a",
            "TypeError: x",
        ));
        s.push(thrown("__tests__/src/propName-test.js > b", "TypeError: x"));
        let out = s.finish();
        assert_eq!(out.failures.len(), 2);
        assert_eq!(
            out.failures[0].id.as_deref(),
            Some("__tests__/src/propName-test.js > b")
        );
        assert!(
            out.text
                .starts_with("(×2) FAIL src/getProp.js:16 __tests__/src/propName-test.js > b"),
            "{}",
            out.text
        );
    }

    #[test]
    fn a_go_failure_without_a_file_relates_by_its_package() {
        // A panicking test or an example names no `x_test.go:12:` line: its id names the package.
        let go = |msg: &str, id: &str| Failure {
            test: id.rsplit_once("::").unwrap().1.into(),
            id: Some(id.into()),
            message: msg.into(),
            ..Failure::default()
        };
        let order = order_of(
            &["pkg/util/strings.go"],
            vec![
                failure("TestA", "other package", "pkg/app/app_test.go", 1),
                go("other package, no file", "./pkg/app::ExampleA"),
                go("own package, no file", "./pkg/util::TestPanics"),
            ],
        );
        assert_eq!(
            order,
            [
                "own package, no file",
                "other package",
                "other package, no file"
            ]
        );
        let order = order_of(
            &["main.go"],
            vec![
                go("other", "./cmd::TestX"),
                go("root package", ".::TestMain"),
            ],
        );
        assert_eq!(order, ["root package", "other"]);
    }

    #[test]
    fn a_rust_doc_test_relates_by_the_file_it_is_written_in() {
        // A doc test that no longer compiles has no panic location; its name has its file.
        let order = order_of(
            &["src/parse.rs"],
            vec![
                failure(
                    "test_parse",
                    "integration test",
                    "tests/test_version.rs",
                    38,
                ),
                Failure {
                    test: "src/parse.rs - parse::Error (line 11)".into(),
                    id: Some("src/parse.rs - parse::Error (line 11)".into()),
                    message: "error[E0425]: cannot find function `parse` in this scope".into(),
                    ..Failure::default()
                },
            ],
        );
        assert_eq!(
            order,
            [
                "error[E0425]: cannot find function `parse` in this scope",
                "integration test"
            ]
        );
    }

    #[test]
    fn parameterised_cases_fold_with_their_ids() {
        assert_eq!(family("t.py::T::test_x[a-1]"), Some("t.py::T::test_x"));
        assert_eq!(family("./p::TestX/sub"), Some("./p::TestX"));
        assert_eq!(distinct_part("a::t[x]", "a::t[y-2]"), "[y-2]");
        assert_eq!(
            distinct_part("f.js > d > case 1", "f.js > d > case 2"),
            "case 2"
        );
        let mut s = Sanitizer::new(4096);
        for (i, p) in ["a", "b", "c", "d", "e"].iter().enumerate() {
            s.push(Failure {
                id: Some(format!("t.py::test_x[{p}]")),
                message: format!("assert {i} == 9"),
                ..failure("test_x", "", "t.py", 4)
            });
        }
        let out = s.finish();
        assert!(
            out.text.contains(
                "FAIL t.py:4 t.py::test_x[a], [b], [c] (+2 more)
  assert 0 == 9"
            ),
            "{}",
            out.text
        );
        assert_eq!(out.failures.len(), 5);
        assert!(!out.text.contains("omitted"));
    }

    #[test]
    fn each_value_is_printed_once() {
        let mut s = Sanitizer::new(4096);
        let msg = "AssertionError: expected 2 to be 3 // Object.is equality\n\n- Expected\n+ Received\n\n- 3\n+ 2";
        let mut f = failure("v", msg, "a.test.js", 1);
        assertion_values(msg).apply(&mut f);
        s.push(f);
        let mut g = failure(
            "r",
            "assertion failed\n  left: 4\n right: 5",
            "src/lib.rs",
            2,
        );
        assertion_values(&g.message.clone()).apply(&mut g);
        s.push(g);
        s.push(Failure {
            expected: Some("[1, 2]".into()),
            received: Some("[1]".into()),
            ..failure("j", "lengths differ", "b.test.js", 3)
        });
        let out = s.finish();
        assert!(!out.text.contains("- Expected"), "{}", out.text);
        assert!(out.text.contains("expected 2 to be 3"), "{}", out.text);
        assert_eq!(out.text.matches("left").count(), 1, "{}", out.text);
        assert!(!out.text.contains("expected: 3"), "{}", out.text);
        // Values the message does not show are printed once, under their own name.
        assert!(
            out.text.contains("expected: [1, 2]\n  received: [1]"),
            "{}",
            out.text
        );
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

    /// The lines as `str::split` gives them, each cut to `max` bytes, with the reader's
    /// rules: a trailing `\r` dropped, invalid UTF-8 replaced, ANSI stripped, no line after a
    /// final newline, and an empty last line dropped.
    fn reference_lines(input: &[u8], max: usize) -> Vec<String> {
        let mut pieces: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
        if pieces.last().is_some_and(|p| p.is_empty()) {
            pieces.pop();
        }
        if pieces.last().is_some_and(|p| p.is_empty()) {
            pieces.pop();
        }
        pieces
            .into_iter()
            .map(|p| {
                let mut p = &p[..p.len().min(max)];
                if let [rest @ .., b'\r'] = p {
                    p = rest;
                }
                strip_ansi(&String::from_utf8_lossy(p)).into_owned()
            })
            .collect()
    }

    #[test]
    fn line_reader_gives_the_same_lines_whatever_the_reads() {
        let inputs: [&[u8]; 8] = [
            b"",
            b"\n",
            b"a\n\n",
            b"a\n\n\nb",
            b"one\r\ntwo\r\n\r\nthree",
            b"caf\xc3\xa9 \xff\xfe bad\n\x1b[31mred\x1b[0m\n",
            b"0123456789abcdef0123456789\nshort\n0123456789abcdef\r\n",
            b"\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\n",
        ];
        for input in inputs {
            for max in [5, 16, 1024] {
                let expected = reference_lines(input, max);
                for capacity in [1, 2, 3, 7, 16, 4096] {
                    let mut lines = Vec::new();
                    let reader = std::io::BufReader::with_capacity(capacity, input);
                    for_each_line_max(reader, max, |l| lines.push(l.to_string())).unwrap();
                    assert_eq!(
                        lines,
                        expected,
                        "input {:?}, max {max}, capacity {capacity}",
                        String::from_utf8_lossy(input)
                    );
                }
            }
        }
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
