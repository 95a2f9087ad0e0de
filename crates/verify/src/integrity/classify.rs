//! What the changeset did to the test definition, and whether its code reaches for the run's
//! machinery. Every changed path is judged by what it is on the base and in the staged tree:
//! test configuration (any change), an existing test module (only pure additions of new tests
//! are free), a deleted test, or source. The text the change adds is scanned for the handful
//! of things a forged verdict needs: an early process exit outside a program's entry point,
//! the runner's report channel or output format, inherited descriptors, airlock's own
//! machinery.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use airlock_types::Concern;
use serde::{Deserialize, Serialize};

use super::items;
use crate::detect::FileSource;

/// One concern with the paths behind it and one sentence for the operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConcernReport {
    /// What kind of concern.
    pub kind: Concern,
    /// The workspace-relative paths behind it (bounded).
    pub paths: Vec<String>,
    /// One sentence per path, at most a few.
    pub detail: Vec<String>,
}

/// A changed path as the staged tree has it.
enum Staged {
    Deleted,
    File(Vec<u8>),
    Other,
}

fn staged_state(layers: &[PathBuf], rel: &str) -> Staged {
    use std::os::unix::fs::FileTypeExt;
    use std::os::unix::fs::MetadataExt;
    for layer in layers.iter().rev() {
        let p = layer.join(rel);
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_char_device() && m.rdev() == 0 => return Staged::Deleted,
            Ok(m) if m.is_file() => {
                return std::fs::read(&p).map_or(Staged::Other, Staged::File);
            }
            Ok(_) => return Staged::Other,
            Err(_) => continue,
        }
    }
    Staged::Other
}

fn name_of(rel: &str) -> &str {
    rel.rsplit('/').next().unwrap_or(rel)
}

fn ext_of(rel: &str) -> &str {
    let n = name_of(rel);
    n.rsplit_once('.').map_or("", |(_, e)| e)
}

fn in_test_dir(rel: &str) -> bool {
    rel.split('/')
        .rev()
        .skip(1)
        .any(|c| matches!(c, "test" | "tests" | "testing" | "__tests__" | "spec"))
}

/// Paths that only session-local installs and caches hold: not the project's test definition.
fn installed(rel: &str) -> bool {
    rel.split('/').any(|c| {
        matches!(
            c,
            ".venv" | "venv" | "site-packages" | "node_modules" | "target" | "__pycache__"
        )
    })
}

const JS_EXT: &[&str] = &["js", "jsx", "ts", "tsx", "mjs", "cjs", "mts", "cts"];

fn is_python_test(rel: &str) -> bool {
    let n = name_of(rel);
    ext_of(rel) == "py"
        && n != "conftest.py"
        && (n.starts_with("test_") || n.ends_with("_test.py") || in_test_dir(rel))
}

fn is_js_test(rel: &str) -> bool {
    let n = name_of(rel);
    JS_EXT.contains(&ext_of(rel))
        && (n.contains(".test.") || n.contains(".spec.") || in_test_dir(rel))
}

/// A file whose change is a change of the test configuration, by name alone.
fn config_by_name(rel: &str) -> bool {
    let n = name_of(rel);
    let prefixes = [
        "jest.config.",
        "vitest.config.",
        "vitest.workspace.",
        "vite.config.",
        ".mocharc",
        "ava.config.",
        "karma.conf.",
        "babel.config.",
        ".babelrc",
        "jest.setup.",
        "vitest.setup.",
        "setupTests.",
        ".nycrc",
        ".c8rc",
        ".taprc",
    ];
    matches!(
        n,
        "conftest.py" | "pytest.ini" | "tox.ini" | "noxfile.py" | "build.rs" | ".pytest.ini"
    ) || prefixes.iter().any(|p| n.starts_with(p))
        || rel == ".cargo/config.toml"
        || rel == ".cargo/config"
        || rel.ends_with("/.cargo/config.toml")
        || rel.ends_with("/.cargo/config")
}

/// The part of a configuration file that is test configuration, as comparable text; `None`
/// when the file holds none.
fn config_section(rel: &str, bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    match name_of(rel) {
        "pyproject.toml" => {
            let v: toml::Value = toml::from_str(&text).ok()?;
            v.get("tool")?.get("pytest").map(|t| t.to_string())
        }
        "setup.cfg" => ini_section(&text, "tool:pytest"),
        "Cargo.toml" => cargo_test_keys(&text),
        "package.json" => package_test_keys(&text),
        "Makefile" | "makefile" | "GNUmakefile" => make_test_target(&text),
        _ => None,
    }
}

fn ini_section(text: &str, name: &str) -> Option<String> {
    let mut out = String::new();
    let mut inside = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            inside = t.trim_matches(|c| c == '[' || c == ']').trim() == name;
            continue;
        }
        if inside {
            out.push_str(t);
            out.push('\n');
        }
    }
    (!out.is_empty()).then_some(out)
}

fn cargo_test_keys(text: &str) -> Option<String> {
    let Ok(v) = toml::from_str::<toml::Value>(text) else {
        // Unparseable: compare the whole file (fails closed).
        return Some(text.to_string());
    };
    let mut out = BTreeMap::new();
    for key in ["test", "bench", "example"] {
        if let Some(x) = v.get(key) {
            out.insert(key.to_string(), x.to_string());
        }
    }
    for (table, keys) in [
        (
            "lib",
            &["test", "doctest", "harness", "path", "proc-macro"][..],
        ),
        (
            "package",
            &["autotests", "autobenches", "build", "autolib"][..],
        ),
    ] {
        for k in keys {
            if let Some(x) = v.get(table).and_then(|t| t.get(k)) {
                out.insert(format!("{table}.{k}"), x.to_string());
            }
        }
    }
    if let Some(bins) = v.get("bin").and_then(|b| b.as_array()) {
        for (i, b) in bins.iter().enumerate() {
            for k in ["test", "doctest", "harness"] {
                if let Some(x) = b.get(k) {
                    out.insert(format!("bin.{i}.{k}"), x.to_string());
                }
            }
        }
    }
    if let Some(p) = v.get("profile").and_then(|p| p.get("test")) {
        out.insert("profile.test".into(), p.to_string());
    }
    if let Some(d) = v.get("features").and_then(|f| f.get("default")) {
        out.insert("features.default".into(), d.to_string());
    }
    (!out.is_empty()).then(|| format!("{out:?}"))
}

fn package_test_keys(text: &str) -> Option<String> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(text) else {
        return Some(text.to_string());
    };
    let mut out = BTreeMap::new();
    if let Some(scripts) = v.get("scripts").and_then(|s| s.as_object()) {
        for (k, x) in scripts {
            if k.contains("test") {
                out.insert(format!("scripts.{k}"), x.to_string());
            }
        }
    }
    for key in [
        "jest", "vitest", "ava", "mocha", "c8", "nyc", "tap", "babel",
    ] {
        if let Some(x) = v.get(key) {
            out.insert(key.to_string(), x.to_string());
        }
    }
    (!out.is_empty()).then(|| format!("{out:?}"))
}

fn make_test_target(text: &str) -> Option<String> {
    let has = text.lines().any(|l| {
        l.split_once(':').is_some_and(|(t, rest)| {
            !rest.starts_with('=') && t.split_whitespace().any(|w| w == "test" || w == "check")
        })
    });
    has.then(|| text.to_string())
}

/// Python source that defines pytest hooks is a plugin, whatever its name.
fn defines_pytest_hooks(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    text.lines().any(|l| {
        let t = l.trim_start();
        t.starts_with("def pytest_") || t.starts_with("async def pytest_")
    })
}

fn go_test_config(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("//go:build") || l.starts_with("// +build"))
        .collect();
    if text.contains("func TestMain(") {
        out.push("TestMain");
    }
    out.join("\n")
}

/// Collects concerns per kind.
#[derive(Default)]
struct Found(BTreeMap<Concern, (Vec<String>, Vec<String>)>);

/// Most paths and sentences kept per concern.
const KEEP: usize = 8;

impl Found {
    fn add(&mut self, kind: Concern, path: &str, why: String) {
        let e = self.0.entry(kind).or_default();
        if e.0.len() < KEEP {
            e.0.push(path.to_string());
            e.1.push(why);
        }
    }

    fn finish(self) -> Vec<ConcernReport> {
        self.0
            .into_iter()
            .map(|(kind, (paths, detail))| ConcernReport {
                kind,
                paths,
                detail,
            })
            .collect()
    }
}

/// The project paths the layers change (files, links and whiteouts), installed packages,
/// build outputs, caches and airlock's report directory left out; at most `MAX` of them
/// (more: `None`, and the caller fails closed).
fn project_changes(layers: &[PathBuf]) -> Option<Vec<String>> {
    const MAX: usize = 50_000;
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) -> bool {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return true;
        };
        for e in entries.flatten() {
            let path = e.path();
            let Ok(rel) = path.strip_prefix(root) else {
                continue;
            };
            let rel = rel.to_string_lossy().into_owned();
            let name = e.file_name();
            let skip = installed(&rel)
                || matches!(name.to_string_lossy().as_ref(), ".git" | ".airlock")
                || rel == crate::adapter::REPORT_DIR;
            if skip {
                continue;
            }
            match e.file_type() {
                Ok(t) if t.is_dir() => {
                    if !walk(root, &path, out) {
                        return false;
                    }
                }
                Ok(_) => {
                    out.push(rel);
                    if out.len() > MAX {
                        return false;
                    }
                }
                Err(_) => {}
            }
        }
        true
    }
    let mut out = Vec::new();
    for layer in layers {
        if !walk(layer, layer, &mut out) {
            return None;
        }
    }
    out.sort();
    out.dedup();
    Some(out)
}

/// Judges every project path the changeset in `layers` changes over `workspace`.
pub(crate) fn judge(workspace: &Path, layers: &[PathBuf]) -> Vec<ConcernReport> {
    let base = crate::detect::DirSource::new(workspace);
    let mut found = Found::default();
    let Some(changed) = project_changes(layers) else {
        found.add(
            Concern::TestChanged,
            "",
            "the changeset touches too many files to judge each; an operator must review it".into(),
        );
        return found.finish();
    };
    for rel in &changed {
        if installed(rel) || rel.starts_with(crate::adapter::REPORT_DIR) {
            continue;
        }
        let old = base.read(rel);
        let new = match staged_state(layers, rel) {
            Staged::File(b) => Some(b),
            Staged::Deleted => None,
            Staged::Other => continue,
        };
        judge_path(rel, old.as_deref(), new.as_deref(), &mut found);
    }
    found.finish()
}

fn judge_path(rel: &str, old: Option<&[u8]>, new: Option<&[u8]>, found: &mut Found) {
    if old.is_none() && new.is_none() {
        return;
    }
    if config_by_name(rel) {
        found.add(
            Concern::TestConfig,
            rel,
            format!("`{rel}` is test configuration and changed"),
        );
        return;
    }
    let section = |b: Option<&[u8]>| b.and_then(|b| config_section(rel, b));
    if (old.is_some() || new.is_some()) && section(old) != section(new) {
        found.add(
            Concern::TestConfig,
            rel,
            format!("the test configuration in `{rel}` changed"),
        );
    }
    let ext = ext_of(rel);
    if ext == "py"
        && (old.is_some_and(defines_pytest_hooks) || new.is_some_and(defines_pytest_hooks))
    {
        found.add(
            Concern::TestConfig,
            rel,
            format!("`{rel}` defines pytest hooks (a plugin) and changed"),
        );
    }
    if rel.ends_with("_test.go") && old.map(go_test_config) != new.map(go_test_config) {
        found.add(
            Concern::TestConfig,
            rel,
            format!("`{rel}` changed its build constraints or TestMain"),
        );
    }
    match (old, new) {
        (Some(_), None) if is_test_path(rel) => found.add(
            Concern::TestChanged,
            rel,
            format!("the test file `{rel}` was deleted"),
        ),
        (Some(o), Some(n)) => {
            if let Err(why) = test_items_only_added(rel, o, n) {
                found.add(Concern::TestChanged, rel, format!("in `{rel}`: {why}"));
            }
        }
        _ => {}
    }
    if let Some(n) = new {
        for why in super::reach::scan(rel, old, n) {
            found.add(Concern::RunMachinery, rel, why);
        }
    }
}

fn is_test_path(rel: &str) -> bool {
    is_python_test(rel)
        || is_js_test(rel)
        || rel.ends_with("_test.go")
        || (ext_of(rel) == "rs" && in_test_dir(rel))
}

fn test_items_only_added(rel: &str, old: &[u8], new: &[u8]) -> Result<(), String> {
    if old == new {
        return Ok(());
    }
    let (o, n) = (String::from_utf8_lossy(old), String::from_utf8_lossy(new));
    if is_python_test(rel) {
        return items::only_adds(&items::python(&o), &items::python(&n));
    }
    if rel.ends_with("_test.go") {
        return items::only_adds(&items::go(&o), &items::go(&n));
    }
    if is_js_test(rel) {
        return Err("an existing test file changed".into());
    }
    if ext_of(rel) == "rs" {
        if in_test_dir(rel) {
            return items::only_adds(&items::rust(&o), &items::rust(&n));
        }
        return rust_test_items_only_added(&o, &n);
    }
    Ok(())
}

/// The test parts of a Rust source file: `#[cfg(test)]` modules (compared item by item),
/// `#[test]` functions outside them, and doc-test code blocks.
fn rust_test_items_only_added(old: &str, new: &str) -> Result<(), String> {
    let (old_mods, old_fns) = rust_test_parts(old);
    let (new_mods, new_fns) = rust_test_parts(new);
    for (name, body) in &old_mods {
        let Some(staged) = new_mods.get(name) else {
            return Err(format!(
                "the test module `{name}` was removed or changed its cfg"
            ));
        };
        items::only_adds(&items::rust(body), &items::rust(staged))
            .map_err(|why| format!("module `{name}`: {why}"))?;
    }
    items::only_adds(&old_fns, &new_fns)?;
    let old_docs = doc_blocks(old);
    let new_docs = doc_blocks(new);
    if let Some(gone) = old_docs.iter().find(|d| !new_docs.contains(d)) {
        let first: String = gone.lines().next().unwrap_or("").chars().take(40).collect();
        return Err(format!("a doc test changed or was removed (`{first}`)"));
    }
    Ok(())
}

type TestParts = (BTreeMap<String, String>, Vec<items::Item>);

fn rust_test_parts(src: &str) -> TestParts {
    let mut mods = BTreeMap::new();
    let mut fns = Vec::new();
    for it in items::rust(src) {
        let t = &it.text;
        let is_test_mod = t.contains("#[cfg(test)]") && t.contains("mod ");
        if is_test_mod && let (Some(a), Some(b)) = (t.find('{'), t.rfind('}')) {
            let name = it.binds.iter().next().cloned().unwrap_or_default();
            mods.insert(name, t[a + 1..b].to_string());
            continue;
        }
        let head = t.split(" fn ").next().unwrap_or("");
        if head.contains("test]") || head.contains("test(") || head.contains("#[should_panic") {
            fns.push(it);
        }
    }
    (mods, fns)
}

fn doc_blocks(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for line in src.lines() {
        let t = line.trim_start();
        let Some(doc) = t.strip_prefix("///").or_else(|| t.strip_prefix("//!")) else {
            continue;
        };
        let d = doc.trim();
        if d.starts_with("```") {
            match cur.take() {
                Some(block) => out.push(block),
                None => cur = Some(String::new()),
            }
            continue;
        }
        if let Some(block) = &mut cur {
            block.push_str(d);
            block.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge_one(rel: &str, old: Option<&str>, new: Option<&str>) -> Vec<Concern> {
        let mut f = Found::default();
        judge_path(rel, old.map(str::as_bytes), new.map(str::as_bytes), &mut f);
        f.finish().into_iter().map(|c| c.kind).collect()
    }

    #[test]
    fn source_changes_and_new_tests_raise_nothing() {
        assert!(
            judge_one(
                "calc.py",
                Some("def add(a, b):\n    return a + b\n"),
                Some("def add(a, b):\n    return b + a\n")
            )
            .is_empty()
        );
        assert!(
            judge_one(
                "tests/test_new.py",
                None,
                Some("def test_x():\n    assert 1\n")
            )
            .is_empty()
        );
        assert!(judge_one("src/lib.rs", Some("pub fn a() {}\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() { assert!(true); }\n}\n"), Some("pub fn a() { let _ = 1; }\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() { assert!(true); }\n    #[test]\n    fn u() { assert!(true); }\n}\n")).is_empty());
        assert!(
            judge_one(
                "Cargo.toml",
                Some("[package]\nname = \"x\"\n[dependencies]\n"),
                Some("[package]\nname = \"x\"\n[dependencies]\nitoa = \"1\"\n")
            )
            .is_empty()
        );
        assert!(
            judge_one(
                "package.json",
                Some(r#"{"scripts":{"test":"vitest run"},"dependencies":{}}"#),
                Some(r#"{"scripts":{"test":"vitest run"},"dependencies":{"a":"1"}}"#)
            )
            .is_empty()
        );
    }

    #[test]
    fn test_definition_changes_are_named() {
        assert_eq!(
            judge_one("conftest.py", None, Some("x = 1\n")),
            [Concern::TestConfig]
        );
        assert_eq!(
            judge_one(
                "pytest.ini",
                Some("[pytest]\n"),
                Some("[pytest]\naddopts = -k 'not add'\n")
            ),
            [Concern::TestConfig]
        );
        assert_eq!(
            judge_one(
                "pyproject.toml",
                Some("[tool.pytest.ini_options]\naddopts = \"-q\"\n"),
                Some("[tool.pytest.ini_options]\naddopts = \"-q -k 'not add'\"\n")
            ),
            [Concern::TestConfig]
        );
        assert_eq!(
            judge_one(
                "package.json",
                Some(r#"{"scripts":{"test":"vitest run"}}"#),
                Some(r#"{"scripts":{"test":"vitest run --passWithNoTests -t nothing"}}"#)
            ),
            [Concern::TestConfig]
        );
        assert_eq!(
            judge_one(
                "Cargo.toml",
                Some("[package]\nname = \"x\"\n"),
                Some("[package]\nname = \"x\"\n[lib]\ntest = false\n")
            ),
            [Concern::TestConfig]
        );
        assert_eq!(
            judge_one(
                "test_calc.py",
                Some("def test_add():\n    assert add(2, 3) == 5\n"),
                Some("def test_add():\n    assert add(2, 3) == -1\n")
            ),
            [Concern::TestChanged]
        );
        assert_eq!(
            judge_one(
                "test_calc.py",
                Some("def test_add():\n    assert 1\n"),
                None
            ),
            [Concern::TestChanged]
        );
        assert_eq!(
            judge_one(
                "src/lib.rs",
                Some("/// ```\n/// assert_eq!(x::a(), 1);\n/// ```\npub fn a() -> i32 { 1 }\n"),
                Some("/// ```\n/// let _ = x::a();\n/// ```\npub fn a() -> i32 { 2 }\n")
            ),
            [Concern::TestChanged]
        );
        assert_eq!(
            judge_one(
                "helpers/plugin.py",
                Some("def helper():\n    pass\n"),
                Some(
                    "def helper():\n    pass\ndef pytest_runtest_makereport(item, call):\n    pass\n"
                )
            ),
            [Concern::TestConfig, Concern::RunMachinery]
        );
        assert_eq!(
            judge_one(
                "x_test.go",
                Some("package x\n"),
                Some("//go:build never\n\npackage x\n")
            ),
            [Concern::TestConfig]
        );
    }
}
