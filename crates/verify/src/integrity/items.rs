//! Items of a source file, for comparing a test module on the base with its staged version:
//! top-level blocks (Python by indentation, Rust and Go by balanced braces outside strings and
//! comments), each with its text, the names it binds and the identifiers it references. A
//! change that only *adds* items which bind no name the base items bind or reference adds
//! tests; anything else changes the tests that were there.

use std::collections::BTreeSet;

/// One item: its normalised text, the names it binds, the identifiers it uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Item {
    pub(crate) text: String,
    pub(crate) binds: BTreeSet<String>,
    pub(crate) uses: BTreeSet<String>,
    /// The item runs or changes code for the other items by its mere presence (an autouse
    /// fixture, a module mark, `init`, an inner attribute, a glob import, a macro).
    pub(crate) ambient: bool,
}

fn identifiers(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut cur = String::new();
    for c in text.chars() {
        if c.is_alphanumeric() || c == '_' {
            cur.push(c);
        } else if !cur.is_empty() {
            if !cur.starts_with(|d: char| d.is_ascii_digit()) {
                out.insert(std::mem::take(&mut cur));
            } else {
                cur.clear();
            }
        }
    }
    if !cur.is_empty() && !cur.starts_with(|d: char| d.is_ascii_digit()) {
        out.insert(cur);
    }
    out
}

fn item(text: String, binds: BTreeSet<String>, ambient: bool) -> Item {
    let uses = identifiers(&text);
    Item {
        text,
        binds,
        uses,
        ambient,
    }
}

/// Python names whose mere definition changes how pytest or unittest runs a module's tests.
const PY_MAGIC: &[&str] = &[
    "pytestmark",
    "pytest_plugins",
    "collect_ignore",
    "collect_ignore_glob",
    "setup_module",
    "teardown_module",
    "setUpModule",
    "tearDownModule",
    "setup_function",
    "teardown_function",
    "load_tests",
    "__getattr__",
];

/// Top-level Python blocks (a decorated definition is one block with its decorators; a class
/// is split into its header and one item per member, so a new method is a new item).
pub(crate) fn python(src: &str) -> Vec<Item> {
    let lines: Vec<&str> = src.lines().collect();
    let mut blocks: Vec<Vec<&str>> = Vec::new();
    let mut cur: Vec<&str> = Vec::new();
    let mut open_decorators = false;
    for line in &lines {
        let t = line.trim_end();
        let top = !t.is_empty() && !t.starts_with([' ', '\t']);
        if top && !t.starts_with('#') && !open_decorators && !cur.is_empty() {
            blocks.push(std::mem::take(&mut cur));
        }
        if top && !t.starts_with('#') {
            open_decorators = t.starts_with('@');
        }
        if t.is_empty() && cur.is_empty() {
            continue;
        }
        cur.push(t);
    }
    if !cur.is_empty() {
        blocks.push(cur);
    }
    let mut out = Vec::new();
    for b in blocks {
        let head = b
            .iter()
            .find(|l| !l.starts_with('@') && !l.starts_with('#'))
            .copied()
            .unwrap_or("");
        if head.starts_with("class ") {
            out.extend(python_class(&b, head));
        } else {
            out.push(python_block(&b, head));
        }
    }
    out
}

fn py_def_name(head: &str) -> Option<String> {
    let rest = head
        .strip_prefix("async def ")
        .or_else(|| head.strip_prefix("def "))
        .or_else(|| head.strip_prefix("class "))?;
    let name: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

fn python_block(b: &[&str], head: &str) -> Item {
    let text = b.join("\n").trim_end().to_string();
    let mut binds = BTreeSet::new();
    let mut ambient = text.contains("autouse");
    if let Some(name) = py_def_name(head) {
        binds.insert(name);
    } else if let Some(rest) = head
        .strip_prefix("import ")
        .or_else(|| head.split_once(" import ").map(|(_, r)| r))
    {
        for part in rest.trim_matches(|c| c == '(' || c == ')').split(',') {
            let name = part.split(" as ").last().unwrap_or("").trim();
            let name = name.split('.').next().unwrap_or("").trim();
            if name == "*" {
                ambient = true;
            } else if !name.is_empty() {
                binds.insert(name.to_string());
            }
        }
    } else {
        // An assignment or any other statement: it binds what stands before `=`, and runs
        // when the module loads.
        let target = head.split('=').next().unwrap_or("");
        binds.extend(identifiers(target));
        ambient = true;
    }
    if binds.iter().any(|n| PY_MAGIC.contains(&n.as_str())) {
        ambient = true;
    }
    item(text, binds, ambient)
}

fn python_class(b: &[&str], head: &str) -> Vec<Item> {
    let name = py_def_name(head).unwrap_or_default();
    let start = b.iter().position(|l| *l == head).unwrap_or(0);
    let header: Vec<&str> = b[..=start].to_vec();
    let mut out = vec![item(
        header.join("\n"),
        BTreeSet::from([name.clone()]),
        false,
    )];
    let body = &b[start + 1..];
    let indent = body
        .iter()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .unwrap_or(4);
    let mut cur: Vec<String> = Vec::new();
    let mut open_decorators = false;
    let mut members: Vec<Vec<String>> = Vec::new();
    for line in body {
        let level = line.len() - line.trim_start().len();
        let t = line.trim_start();
        let member_start = !t.is_empty() && level <= indent && !t.starts_with('#');
        if member_start && !open_decorators && !cur.is_empty() {
            members.push(std::mem::take(&mut cur));
        }
        if member_start {
            open_decorators = t.starts_with('@');
        }
        if t.is_empty() && cur.is_empty() {
            continue;
        }
        cur.push(line.to_string());
    }
    if !cur.is_empty() {
        members.push(cur);
    }
    for m in members {
        let refs: Vec<&str> = m.iter().map(|l| l.trim_start()).collect();
        let head = refs
            .iter()
            .find(|l| !l.starts_with('@') && !l.starts_with('#'))
            .copied()
            .unwrap_or("");
        let mut it = python_block(&refs, head);
        it.binds = it
            .binds
            .into_iter()
            .map(|n| format!("{name}.{n}"))
            .collect();
        it.text = format!("{name}::{}", m.join("\n").trim_end());
        // A member that is not a definition (`pytestmark = …`, `__test__ = False`) changes
        // the whole class.
        it.ambient = it.ambient || py_def_name(head).is_none();
        out.push(it);
    }
    out
}

/// A brace-language lexer state: what the next characters are part of.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lex {
    Code,
    Line,
    Block(u32),
    Str(char),
    Raw(usize),
}

/// Splits Rust or Go source into top-level items: text up to a `;` at depth 0 or a `}` that
/// returns to depth 0, comments (but not doc comments) removed and whitespace folded.
/// `go` selects Go's literals (backquoted raw strings, no lifetimes).
pub(crate) fn braces(src: &str, go: bool) -> Vec<String> {
    let chars: Vec<char> = src.chars().collect();
    let mut items = Vec::new();
    let mut cur = String::new();
    let mut depth: i64 = 0;
    let mut paren: i64 = 0;
    let mut state = Lex::Code;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied().unwrap_or('\0');
        match state {
            Lex::Line => {
                if c == '\n' {
                    state = Lex::Code;
                    cur.push('\n');
                }
                i += 1;
                continue;
            }
            Lex::Block(n) => {
                if c == '*' && next == '/' {
                    state = if n <= 1 { Lex::Code } else { Lex::Block(n - 1) };
                    i += 2;
                } else if c == '/' && next == '*' && !go {
                    state = Lex::Block(n + 1);
                    i += 2;
                } else {
                    i += 1;
                }
                continue;
            }
            Lex::Str(q) => {
                cur.push(c);
                if c == '\\' && q != '`' {
                    if let Some(n) = chars.get(i + 1) {
                        cur.push(*n);
                    }
                    i += 2;
                    continue;
                }
                if c == q {
                    state = Lex::Code;
                }
                i += 1;
                continue;
            }
            Lex::Raw(hashes) => {
                cur.push(c);
                if c == '"' && chars[i + 1..].iter().take(hashes).all(|h| *h == '#') {
                    for _ in 0..hashes {
                        cur.push('#');
                    }
                    i += 1 + hashes;
                    state = Lex::Code;
                    continue;
                }
                i += 1;
                continue;
            }
            Lex::Code => {}
        }
        // Code.
        if c == '/' && next == '/' {
            let third = chars.get(i + 2).copied().unwrap_or('\0');
            let doc = !go && (third == '/' || third == '!');
            if doc {
                // Doc comments are part of the item (they hold doctests): keep the line.
                while i < chars.len() && chars[i] != '\n' {
                    cur.push(chars[i]);
                    i += 1;
                }
                continue;
            }
            state = Lex::Line;
            i += 2;
            continue;
        }
        if c == '/' && next == '*' {
            state = Lex::Block(1);
            i += 2;
            continue;
        }
        if c == '"' {
            state = Lex::Str('"');
        } else if go && c == '`' {
            state = Lex::Str('`');
        } else if !go && c == 'r' && (next == '"' || next == '#') && !prev_ident(&chars, i) {
            let hashes = chars[i + 1..].iter().take_while(|h| **h == '#').count();
            if chars.get(i + 1 + hashes) == Some(&'"') {
                for k in 0..=hashes + 1 {
                    cur.push(chars[i + k]);
                }
                i += hashes + 2;
                state = Lex::Raw(hashes);
                continue;
            }
        } else if c == '\'' {
            // A char literal ('a', '\n', '\u{1F600}') or, in Rust, a lifetime ('a): a literal
            // closes within a few characters.
            let close = chars[i + 1..]
                .iter()
                .take(12)
                .position(|x| *x == '\'')
                .map(|p| i + 1 + p);
            let is_literal = match close {
                Some(end) => go || end == i + 2 || chars[i + 1] == '\\',
                None => false,
            };
            if is_literal && let Some(end) = close {
                for ch in &chars[i..=end] {
                    cur.push(*ch);
                }
                i = end + 1;
                continue;
            }
        }
        cur.push(c);
        match c {
            '{' => depth += 1,
            '(' | '[' => paren += 1,
            ')' | ']' => paren -= 1,
            '}' => {
                depth -= 1;
                if depth == 0 && paren == 0 && !continues(&chars[i + 1..], go) {
                    items.push(fold(&cur));
                    cur.clear();
                }
            }
            ';' if depth == 0 && paren == 0 => {
                items.push(fold(&cur));
                cur.clear();
            }
            _ => {}
        }
        i += 1;
    }
    if !fold(&cur).is_empty() {
        items.push(fold(&cur));
    }
    items.retain(|s| !s.is_empty());
    items
}

/// After a closing brace at depth 0, the item goes on (`} else {`, `};`, `})`, `}()`).
fn continues(rest: &[char], go: bool) -> bool {
    let next = rest.iter().find(|c| !c.is_whitespace()).copied();
    match next {
        Some(';' | ')' | ',' | '.' | '(') => true,
        Some('e') if !go => rest
            .iter()
            .collect::<String>()
            .trim_start()
            .starts_with("else"),
        _ => false,
    }
}

fn prev_ident(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

fn fold(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Rust items with what they bind: `fn NAME`, `mod NAME`, `struct/enum/const/static/type
/// NAME`, `macro_rules! NAME`, `use … NAME` (a glob or a macro makes the item ambient, as does
/// an inner attribute).
pub(crate) fn rust(src: &str) -> Vec<Item> {
    braces(src, false)
        .into_iter()
        .map(|text| {
            let mut binds = BTreeSet::new();
            let mut ambient = text.starts_with("#!") || text.contains("macro_rules!");
            let words: Vec<&str> = text
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '!' || c == '*'))
                .filter(|w| !w.is_empty())
                .collect();
            for (k, w) in words.iter().enumerate() {
                let binder = matches!(
                    *w,
                    "fn" | "mod"
                        | "struct"
                        | "enum"
                        | "const"
                        | "static"
                        | "type"
                        | "trait"
                        | "union"
                        | "macro_rules!"
                );
                if binder && let Some(name) = words.get(k + 1) {
                    binds.insert(name.trim_end_matches('!').to_string());
                    break;
                }
                if *w == "use" {
                    let rest = text.split_once("use ").map_or("", |(_, r)| r);
                    if rest.contains('*') {
                        ambient = true;
                    }
                    binds.extend(
                        rest.split([',', '{', '}', ';', ':'])
                            .filter_map(|p| p.split(" as ").last())
                            .map(str::trim)
                            .filter(|n| !n.is_empty() && *n != "*" && *n != "self")
                            .map(str::to_string),
                    );
                    break;
                }
            }
            item(text, binds, ambient)
        })
        .collect()
}

/// Go top-level declarations with what they bind; `init` functions and package-level
/// variables initialised by a call run before the tests and are ambient.
pub(crate) fn go(src: &str) -> Vec<Item> {
    braces(src, true)
        .into_iter()
        .flat_map(|text| {
            // Go has no `;` after most declarations: split a run of declarations at each
            // keyword that starts one.
            let mut parts = Vec::new();
            let mut cur = String::new();
            for word in text.split(' ') {
                if matches!(
                    word,
                    "func" | "var" | "const" | "type" | "import" | "package"
                ) && !cur.is_empty()
                    && cur_balanced(&cur)
                {
                    parts.push(std::mem::take(&mut cur).trim().to_string());
                }
                cur.push_str(word);
                cur.push(' ');
            }
            if !cur.trim().is_empty() {
                parts.push(cur.trim().to_string());
            }
            parts
        })
        .map(|text| {
            let words: Vec<&str> = text
                .split([' ', '(', ')'])
                .filter(|w| !w.is_empty())
                .collect();
            let mut binds = BTreeSet::new();
            let mut ambient = false;
            match words.first().copied() {
                Some("func") => {
                    // `func (r T) Name(` binds Name; `func Name(` binds Name.
                    let name = if text.starts_with("func (") {
                        text.split_once(')')
                            .map(|(_, r)| r.trim_start())
                            .and_then(|r| r.split('(').next())
                    } else {
                        words.get(1).copied()
                    };
                    if let Some(n) = name {
                        binds.insert(n.trim().to_string());
                        ambient |= n.trim() == "init" || n.trim() == "TestMain";
                    }
                }
                Some("var" | "const" | "type") => {
                    if let Some(n) = words.get(1) {
                        binds.insert((*n).to_string());
                    }
                    ambient = words[0] == "var" && text.contains('(') && text.contains('=');
                }
                Some("import") => ambient = text.contains(" . \"") || text.contains(" _ \""),
                _ => {}
            }
            item(text, binds, ambient)
        })
        .collect()
}

fn cur_balanced(s: &str) -> bool {
    let open = s.matches('{').count() + s.matches('(').count();
    let close = s.matches('}').count() + s.matches(')').count();
    open == close
}

/// How the staged items of a test module relate to the base's: `None` when the change only
/// adds items that bind nothing the base binds or uses and change nothing ambiently; else the
/// first base item that is gone or changed, or the new item that reaches the old tests.
pub(crate) fn only_adds(base: &[Item], staged: &[Item]) -> Result<(), String> {
    let mut remaining: Vec<&Item> = staged.iter().collect();
    for b in base {
        match remaining.iter().position(|s| s.text == b.text) {
            Some(k) => {
                remaining.remove(k);
            }
            None => {
                let name = b
                    .binds
                    .iter()
                    .next()
                    .cloned()
                    .unwrap_or_else(|| b.text.chars().take(40).collect::<String>());
                return Err(format!("`{name}` was changed or removed"));
            }
        }
    }
    let bound: BTreeSet<&String> = base.iter().flat_map(|b| b.binds.iter()).collect();
    let used: BTreeSet<&String> = base.iter().flat_map(|b| b.uses.iter()).collect();
    for n in remaining {
        if n.ambient {
            let what: String = n.text.chars().take(60).collect();
            return Err(format!(
                "a new item changes how the existing tests run (`{what}`)"
            ));
        }
        if let Some(name) = n
            .binds
            .iter()
            .find(|x| bound.contains(x) || used.contains(x) || short_in(x, &bound, &used))
        {
            return Err(format!(
                "a new item binds `{name}`, a name the existing tests define or use"
            ));
        }
    }
    Ok(())
}

/// A class member's qualified name (`Class.name`) whose short name the base uses.
fn short_in(name: &str, bound: &BTreeSet<&String>, used: &BTreeSet<&String>) -> bool {
    let Some((_, short)) = name.split_once('.') else {
        return false;
    };
    let short = short.to_string();
    used.contains(&short)
        && !bound.iter().any(|b| b.as_str() == name)
        && bound.iter().any(|b| b.ends_with(&format!(".{short}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PY: &str = "import pytest\nfrom calc import add\n\n\n@pytest.fixture\ndef two():\n    return 2\n\n\ndef test_add(two):\n    assert add(two, 3) == 5\n\n\nclass TestMore:\n    def test_a(self):\n        assert add(1, 1) == 2\n";

    #[test]
    fn python_new_tests_only_add() {
        let with_new = format!(
            "{PY}\n    def test_b(self):\n        assert add(0, 0) == 0\n\n\ndef test_new():\n    assert add(1, 2) == 3\n"
        );
        assert_eq!(only_adds(&python(PY), &python(&with_new)), Ok(()));
        let import_more = format!("import math\n{PY}");
        assert_eq!(only_adds(&python(PY), &python(&import_more)), Ok(()));
    }

    #[test]
    fn python_changes_that_reach_old_tests_are_named() {
        let cases = [
            PY.replace("== 5", "== -1"),
            PY.replace("def test_add(two):\n    assert add(two, 3) == 5\n", ""),
            format!("{PY}\ndef test_add(two):\n    pass\n"),
            format!("{PY}\nfrom fake import add\n"),
            format!("{PY}\n@pytest.fixture\ndef two():\n    return 3\n"),
            format!("{PY}\npytestmark = pytest.mark.skip\n"),
            format!("{PY}\n@pytest.fixture(autouse=True)\ndef patch(monkeypatch):\n    pass\n"),
            PY.replace(
                "class TestMore:\n",
                "class TestMore:\n    __test__ = False\n",
            ),
            format!("{PY}\n    def test_a(self):\n        pass\n"),
        ];
        for c in &cases {
            assert!(only_adds(&python(PY), &python(c)).is_err(), "{c}");
        }
    }

    const RS: &str = "pub fn add(a: i32, b: i32) -> i32 { a + b }\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n    // a comment\n    #[test]\n    fn adds() {\n        assert_eq!(add(2, 3), 5, \"{}\", '}');\n    }\n}\n";

    #[test]
    fn rust_items_split_at_depth_zero_outside_strings_and_comments() {
        let items = braces(RS, false);
        assert_eq!(items.len(), 2, "{items:?}");
        let inner = braces(
            "use super::*; #[test] fn adds() { let s = r#\"}\"#; let c = '{'; let l: &'static str = \"x\"; }",
            false,
        );
        assert_eq!(inner.len(), 2, "{inner:?}");
    }

    #[test]
    fn rust_new_tests_only_add_and_shadowing_macros_do_not() {
        let body = |extra: &str| {
            format!(
                "use super::*;\n{extra}\n#[test]\nfn adds() {{\n    assert_eq!(add(2, 3), 5);\n}}\n"
            )
        };
        let base = rust(&body(""));
        assert_eq!(
            only_adds(
                &base,
                &rust(&format!(
                    "{}\n#[test]\nfn more() {{ assert!(add(1, 1) == 2); }}\n",
                    body("")
                ))
            ),
            Ok(())
        );
        assert!(
            only_adds(
                &base,
                &rust(&body(
                    "macro_rules! assert_eq { ($a:expr, $b:expr) => {}; }"
                ))
            )
            .is_err()
        );
        assert!(only_adds(&base, &rust(&body("use crate::fake::add;"))).is_err());
        assert!(only_adds(&base, &rust(&body("#![cfg(any())]"))).is_err());
        assert!(only_adds(&base, &rust(&body("").replace("5", "-1"))).is_err());
    }

    #[test]
    fn go_new_tests_only_add_and_init_does_not() {
        let base = "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"x\")\n\t}\n}\n";
        let added = format!(
            "{base}\nfunc TestMore(t *testing.T) {{\n\tif Add(1, 1) != 2 {{\n\t\tt.Fatal(`}}`)\n\t}}\n}}\n"
        );
        assert_eq!(only_adds(&go(base), &go(&added)), Ok(()));
        let init = format!("{base}\nfunc init() {{ Add = func(a, b int) int {{ return 5 }} }}\n");
        assert!(only_adds(&go(base), &go(&init)).is_err());
        let main = format!("{base}\nfunc TestMain(m *testing.M) {{ }}\n");
        assert!(only_adds(&go(base), &go(&main)).is_err());
    }
}
