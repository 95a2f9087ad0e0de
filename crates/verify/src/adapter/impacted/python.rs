//! pytest: the test files that import a changed module, directly or through other modules of
//! the workspace, read statically from their import statements (`import pkg.mod`, `from pkg
//! import mod`, `from pkg.mod import x`, `from . import x`, `from .mod import x`).

use std::collections::{BTreeSet, HashMap, HashSet};

use super::tree::Tree;
use super::{Related, Selection};

/// Files whose change can alter how every test runs.
const CONFIG: [&str; 6] = [
    "pyproject.toml",
    "setup.cfg",
    "setup.py",
    "pytest.ini",
    "tox.ini",
    "conftest.py",
];

fn is_test_file(name: &str) -> bool {
    name.ends_with(".py") && (name.starts_with("test_") || name.ends_with("_test.py"))
}

fn parent(rel: &str) -> &str {
    rel.rsplit_once('/').map_or("", |(d, _)| d)
}

/// The dotted module name of `rel` (a `.py` file): its stem, under every enclosing directory
/// that holds an `__init__.py` (`src/pkg/mod.py` → `pkg.mod`; `pkg/__init__.py` → `pkg`).
pub(crate) fn module_name(rel: &str, packages: &HashSet<String>) -> String {
    let stem = rel
        .rsplit('/')
        .next()
        .unwrap_or(rel)
        .trim_end_matches(".py");
    let mut parts: Vec<&str> = Vec::new();
    if stem != "__init__" {
        parts.push(stem);
    }
    let mut dir = parent(rel);
    while !dir.is_empty() && packages.contains(dir) {
        parts.push(dir.rsplit('/').next().unwrap_or(dir));
        dir = parent(dir);
    }
    parts.reverse();
    parts.join(".")
}

/// The modules `text` (the source of module `module`; `is_package` for an `__init__.py`)
/// imports, absolute: `import a.b` gives `a.b`; `from a import b` gives `a` and `a.b`;
/// relative forms are resolved against the module's package.
pub(crate) fn imports(text: &str, module: &str, is_package: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let mut stmt = line.split('#').next().unwrap_or("").trim().to_string();
        if !(stmt.starts_with("import ") || stmt.starts_with("from ")) {
            continue;
        }
        // Parenthesised and backslash-continued statements span lines.
        while (stmt.contains('(') && !stmt.contains(')')) || stmt.ends_with('\\') {
            let Some(next) = lines.next() else { break };
            stmt = format!(
                "{} {}",
                stmt.trim_end_matches('\\'),
                next.split('#').next().unwrap_or("").trim()
            );
        }
        let stmt = stmt.replace(['(', ')', '\\'], " ");
        if let Some(rest) = stmt.strip_prefix("import ") {
            for part in rest.split(',') {
                if let Some(name) = part.split_whitespace().next() {
                    out.push(name.to_string());
                }
            }
        } else if let Some(rest) = stmt.strip_prefix("from ") {
            let Some((from, names)) = rest.split_once(" import ") else {
                continue;
            };
            let Some(base) = absolute(from.trim(), module, is_package) else {
                continue;
            };
            for part in names.split(',') {
                match part.split_whitespace().next() {
                    Some("*") | None => {}
                    Some(name) if base.is_empty() => out.push(name.to_string()),
                    Some(name) => out.push(format!("{base}.{name}")),
                }
            }
            if !base.is_empty() {
                out.push(base);
            }
        }
    }
    out
}

/// `from`'s module made absolute: `.x` in package `a.b` is `a.b.x`, `..` is `a`.
fn absolute(from: &str, module: &str, is_package: bool) -> Option<String> {
    let dots = from.chars().take_while(|&c| c == '.').count();
    let rest = &from[dots..];
    if dots == 0 {
        return Some(rest.to_string());
    }
    let mut package: Vec<&str> = module.split('.').filter(|p| !p.is_empty()).collect();
    if !is_package {
        package.pop()?;
    }
    for _ in 1..dots {
        package.pop()?;
    }
    if !rest.is_empty() {
        package.push(rest);
    }
    Some(package.join("."))
}

/// True when importing `imported` runs the code of module `changed`: the same module, or a
/// module inside the changed package.
fn reaches(imported: &str, changed: &str) -> bool {
    imported == changed
        || imported
            .strip_prefix(changed)
            .is_some_and(|r| r.starts_with('.'))
}

/// The pytest selection for `changed` (workspace-relative paths): the test files reached.
pub(crate) fn related(tree: &Tree, changed: &[String]) -> Related {
    if let Some(config) = changed
        .iter()
        .find(|p| CONFIG.contains(&p.rsplit('/').next().unwrap_or(p)) && parent(p).is_empty())
    {
        return Related::Everything(format!("{config} configures every test"));
    }
    let py = tree.files(&|n| n.ends_with(".py"));
    let packages: HashSet<String> = py
        .iter()
        .filter(|p| p.ends_with("/__init__.py"))
        .map(|p| parent(p).to_string())
        .collect();
    let tests: Vec<&String> = py
        .iter()
        .filter(|p| is_test_file(p.rsplit('/').next().unwrap_or(p)))
        .collect();
    if tests.is_empty() {
        return Related::Nothing("no pytest test file (`test_*.py`, `*_test.py`) exists".into());
    }
    // Each module's imports, read once.
    let graph: HashMap<&String, (String, Vec<String>)> = py
        .iter()
        .map(|rel| {
            let module = module_name(rel, &packages);
            let text = tree.read(rel).unwrap_or_default();
            let found = imports(&text, &module, rel.ends_with("__init__.py"));
            (rel, (module, found))
        })
        .collect();
    let mut affected: Vec<String> = Vec::new();
    let mut reached: BTreeSet<&String> = BTreeSet::new();
    let mut selected: BTreeSet<String> = BTreeSet::new();
    for path in changed {
        let name = path.rsplit('/').next().unwrap_or(path);
        if path.ends_with(".py") {
            affected.push(module_name(path, &packages));
            if is_test_file(name) && tree.is_file(path) {
                selected.insert(path.clone());
            }
        } else if let Some(dir) = data_dir(path, &tests) {
            // A data file next to tests (fixtures, expected output): the tests beside it.
            selected.extend(
                tests
                    .iter()
                    .filter(|t| parent(t) == dir)
                    .map(|t| t.to_string()),
            );
        }
    }
    // Every module that reaches a changed one, to a fixed point.
    loop {
        let before = reached.len();
        for (rel, (module, found)) in &graph {
            if reached.contains(rel) {
                continue;
            }
            if found.iter().any(|i| affected.iter().any(|c| reaches(i, c))) {
                reached.insert(rel);
                affected.push(module.clone());
            }
        }
        if reached.len() == before {
            break;
        }
    }
    for rel in &reached {
        let name = rel.rsplit('/').next().unwrap_or(rel);
        if name == "conftest.py" {
            // A conftest applies to every test in its directory and below.
            let dir = parent(rel);
            selected.extend(
                tests
                    .iter()
                    .filter(|t| dir.is_empty() || t.starts_with(&format!("{dir}/")))
                    .map(|t| t.to_string()),
            );
        } else if is_test_file(name) {
            selected.insert(rel.to_string());
        }
    }
    finish(selected, tests.len())
}

/// The directory of tests a changed data file belongs to: its own directory or the nearest
/// enclosing one that holds test files (never the workspace root).
fn data_dir<'a>(path: &str, tests: &[&'a String]) -> Option<&'a str> {
    let mut dir = parent(path);
    while !dir.is_empty() {
        if let Some(t) = tests.iter().find(|t| parent(t) == dir) {
            return Some(parent(t));
        }
        dir = parent(dir);
    }
    None
}

fn finish(selected: BTreeSet<String>, all: usize) -> Related {
    if selected.is_empty() {
        return Related::Nothing("no test file imports a changed module".into());
    }
    if selected.len() >= all {
        return Related::Everything(format!("all {all} test files reach a changed module"));
    }
    let note = format!(
        "{} of {all} test files import a changed module (directly or through the workspace's modules), or changed",
        selected.len()
    );
    Related::Selected(Selection {
        names: selected.into_iter().collect(),
        test_targets: Vec::new(),
        note,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::impacted::tests::project;

    #[test]
    fn module_names_follow_packages() {
        let packages: HashSet<String> =
            ["src/pkg".to_string(), "src/pkg/sub".into(), "tests".into()]
                .into_iter()
                .collect();
        assert_eq!(module_name("src/pkg/sub/m.py", &packages), "pkg.sub.m");
        assert_eq!(module_name("src/pkg/__init__.py", &packages), "pkg");
        assert_eq!(module_name("tests/test_a.py", &packages), "tests.test_a");
        assert_eq!(module_name("calc.py", &packages), "calc");
    }

    #[test]
    fn import_forms() {
        let text = "import os, pkg.a as x\n\
                    from pkg import b, c as d  # comment\n\
                    from pkg.e import (\n    f,\n    g,\n)\n\
                    from . import h\n\
                    from ..up import i\n\
                    if True:\n    from pkg.lazy import z\n\
                    x = 'import nothing'\n";
        let found = imports(text, "tests.sub.test_m", false);
        for want in [
            "os",
            "pkg.a",
            "pkg",
            "pkg.b",
            "pkg.c",
            "pkg.e",
            "pkg.e.f",
            "pkg.e.g",
            "tests.sub.h",
            "tests.up.i",
            "tests.up",
            "pkg.lazy",
        ] {
            assert!(
                found.iter().any(|f| f == want),
                "{want} missing from {found:?}"
            );
        }
        assert!(!found.iter().any(|f| f == "nothing"), "{found:?}");
        // In a package's __init__, `.` is the package itself.
        assert_eq!(
            imports("from .m import x", "pkg", true),
            ["pkg.m.x", "pkg.m"]
        );
        assert!(reaches("pkg.m", "pkg.m") && reaches("pkg.m.x", "pkg.m"));
        assert!(!reaches("pkg.mod", "pkg.m") && !reaches("pkg", "pkg.m"));
    }

    #[test]
    fn test_files_reached_directly_or_through_modules() {
        let dir = project(&[
            ("src/pkg/__init__.py", ""),
            ("src/pkg/util.py", "def f(): pass\n"),
            ("src/pkg/api.py", "from .util import f\n"),
            ("src/pkg/other.py", "import json\n"),
            ("tests/test_util.py", "from pkg.util import f\n"),
            ("tests/test_api.py", "from pkg import api\n"),
            ("tests/test_other.py", "import pkg.other\n"),
            ("tests/data/case.txt", "x"),
            ("tests/data/test_data.py", "import os\n"),
            ("README.md", "x"),
        ]);
        let tree = Tree::new(dir.path(), &[]);
        let Related::Selected(sel) = related(&tree, &["src/pkg/util.py".into()]) else {
            panic!("nothing selected");
        };
        assert_eq!(sel.names, ["tests/test_api.py", "tests/test_util.py"]);
        let Related::Selected(sel) = related(&tree, &["tests/test_other.py".into()]) else {
            panic!("nothing selected");
        };
        assert_eq!(sel.names, ["tests/test_other.py"]);
        let Related::Selected(sel) = related(&tree, &["tests/data/case.txt".into()]) else {
            panic!("nothing selected");
        };
        assert_eq!(sel.names, ["tests/data/test_data.py"]);
        assert!(matches!(
            related(&tree, &["README.md".into()]),
            Related::Nothing(_)
        ));
        assert!(matches!(
            related(&tree, &["pyproject.toml".into()]),
            Related::Everything(_)
        ));
        // The package's __init__ runs for every import of the package.
        let Related::Selected(sel) = related(&tree, &["src/pkg/__init__.py".into()]) else {
            panic!("nothing selected");
        };
        assert_eq!(sel.names.len(), 3, "{:?}", sel.names);
    }
}
