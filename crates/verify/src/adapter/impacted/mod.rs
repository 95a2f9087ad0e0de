//! The tests related to a change (`verify --impacted-first`, `--impacted`), in each runner's
//! own terms, derived from the paths the changeset touches:
//! - vitest: `vitest related --run FILE…` (its module graph), the `run` subcommand replaced;
//! - jest: `--findRelatedTests FILE…` (its module graph);
//! - cargo: `-p NAME` for each crate owning a changed source (the nearest `Cargo.toml` with a
//!   `[package]`), instead of `--workspace`; a change to a crate's integration tests alone adds
//!   `--test NAME` for each;
//! - go: the packages (directories) of the changed `.go` files instead of `./...`;
//! - pytest: the test files that import a changed module, directly or through the workspace's
//!   other modules, read statically from their import statements, plus changed test files.
//!
//! A change that touches what every test depends on (a lockfile, the runner's configuration, a
//! manifest) selects everything, and so does a selection that is the whole suite; a change
//! that no test reaches (a README) selects nothing. node:test and generic commands have no
//! related-tests selection. The selection is advice: a run of it says nothing about the rest of
//! the suite, and only the whole suite can unlock apply.

mod python;
mod tree;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::Plan;
use crate::model::RunnerKind;
use tree::Tree;

/// What a change relates to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Related {
    /// Some of the tests: run them with [`apply`].
    Selected(Selection),
    /// No test is related (why).
    Nothing(String),
    /// Every test is (why): there is nothing smaller to run first.
    Everything(String),
    /// The runner has no related-tests selection (why).
    Unsupported(String),
}

/// The related tests, in the runner's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// What is selected: changed source files (vitest, jest), packages (`./pkg`, go), crates
    /// (cargo) or test files (pytest).
    pub names: Vec<String>,
    /// cargo: the integration-test targets (`--test NAME`) when only they changed.
    pub test_targets: Vec<String>,
    /// One sentence on how the selection was found.
    pub note: String,
}

/// The tests of a `kind` project related to `changed` (workspace-relative paths, as
/// [`super::select::changed_paths`] lists them), the workspace seen through its layers.
pub fn related(
    kind: RunnerKind,
    workspace: &Path,
    layers: &[PathBuf],
    changed: &[String],
) -> Related {
    if changed.is_empty() {
        return Related::Nothing("the changeset is empty".into());
    }
    let tree = Tree::new(workspace, layers);
    match kind {
        RunnerKind::Vitest | RunnerKind::Jest => js(&tree, changed),
        RunnerKind::Cargo => cargo(&tree, changed),
        RunnerKind::Go => go(&tree, changed),
        RunnerKind::Pytest => python::related(&tree, changed),
        RunnerKind::Node | RunnerKind::Junit | RunnerKind::Command => Related::Unsupported(
            format!("the {kind} runner has no way to select the tests related to a change"),
        ),
    }
}

/// Rewrites `plan` to run the selection.
pub fn apply(plan: &mut Plan, sel: &Selection) {
    let names = sel.names.iter().map(OsString::from);
    match plan.kind {
        RunnerKind::Pytest => plan.argv.extend(names),
        RunnerKind::Go => {
            plan.argv.retain(|a| a != "./...");
            plan.argv.extend(names);
        }
        RunnerKind::Cargo => {
            plan.argv.retain(|a| a != "--workspace" && a != "--all");
            let at = plan
                .argv
                .iter()
                .position(|a| a == "--")
                .unwrap_or(plan.argv.len());
            let mut words: Vec<OsString> = Vec::new();
            for name in &sel.names {
                words.extend(["-p".into(), name.into()]);
            }
            for target in &sel.test_targets {
                words.extend(["--test".into(), target.into()]);
            }
            plan.argv.splice(at..at, words);
        }
        RunnerKind::Vitest => {
            let program = plan.argv.iter().position(|a| {
                let a = a.to_string_lossy();
                let base = a.rsplit('/').next().unwrap_or(&a);
                base == "vitest" || base.starts_with("vitest.")
            });
            let at = program.map_or(0, |i| i + 1);
            match plan.argv.get(at).and_then(|a| a.to_str()) {
                Some("run" | "related" | "watch" | "dev") => plan.argv[at] = "related".into(),
                _ => plan.argv.insert(at, "related".into()),
            }
            if !plan.argv.iter().any(|a| a == "--run") {
                plan.argv.insert(at + 1, "--run".into());
            }
            plan.argv.extend(names);
        }
        RunnerKind::Jest => {
            plan.argv.push("--findRelatedTests".into());
            plan.argv.extend(names);
        }
        RunnerKind::Node | RunnerKind::Junit | RunnerKind::Command => {}
    }
}

fn file_name(rel: &str) -> &str {
    rel.rsplit('/').next().unwrap_or(rel)
}

fn parent(rel: &str) -> &str {
    rel.rsplit_once('/').map_or("", |(d, _)| d)
}

/// Sources in a JavaScript module graph.
const JS_SOURCES: [&str; 14] = [
    "js", "mjs", "cjs", "jsx", "ts", "mts", "cts", "tsx", "vue", "svelte", "json", "css", "snap",
    "node",
];

/// Files that configure how every JavaScript test runs.
fn js_config(name: &str) -> bool {
    matches!(
        name,
        "package.json"
            | "package-lock.json"
            | "yarn.lock"
            | "pnpm-lock.yaml"
            | "bun.lock"
            | "bun.lockb"
            | ".babelrc"
            | ".npmrc"
    ) || [
        "tsconfig",
        "vitest.",
        "vite.config",
        "jest.config",
        "babel.config",
    ]
    .iter()
    .any(|p| name.starts_with(p))
}

fn js(tree: &Tree, changed: &[String]) -> Related {
    let mut files = Vec::new();
    for path in changed {
        let name = file_name(path);
        if js_config(name) {
            return Related::Everything(format!("{path} configures every test"));
        }
        let ext = name.rsplit_once('.').map_or("", |(_, e)| e);
        if !JS_SOURCES.contains(&ext) {
            continue;
        }
        if !tree.is_file(path) {
            return Related::Everything(format!(
                "{path} was deleted, and the runner cannot trace the tests of a deleted module"
            ));
        }
        files.push(path.clone());
    }
    if files.is_empty() {
        return Related::Nothing("no changed file is a JavaScript or TypeScript module".into());
    }
    Related::Selected(Selection {
        note: format!(
            "the tests that import the {} changed module(s), as the runner's module graph finds them",
            files.len()
        ),
        names: files,
        test_targets: Vec::new(),
    })
}

/// The `[package]` name of the manifest `rel`; `Err` for a manifest without one (a virtual
/// workspace), `Ok(None)` when there is no such manifest.
fn package_name(tree: &Tree, rel: &str) -> Result<Option<String>, ()> {
    let Some(text) = tree.read(rel) else {
        return Ok(None);
    };
    let table: toml::Table = toml::from_str(&text).map_err(|_| ())?;
    match table
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(|n| n.as_str())
    {
        Some(name) => Ok(Some(name.to_string())),
        None => Err(()),
    }
}

/// One crate's share of the change.
struct CrateChange {
    name: String,
    dir: String,
    /// The integration tests changed (`tests/NAME.rs`, `tests/NAME/main.rs`).
    tests: Vec<String>,
    /// Something other than integration tests changed.
    other: bool,
}

fn cargo(tree: &Tree, changed: &[String]) -> Related {
    const SHARED: [&str; 5] = [
        "Cargo.lock",
        ".cargo/config.toml",
        ".cargo/config",
        "rust-toolchain",
        "rust-toolchain.toml",
    ];
    let mut crates: Vec<CrateChange> = Vec::new();
    for path in changed {
        if SHARED.contains(&path.as_str()) {
            return Related::Everything(format!("{path} applies to every crate"));
        }
        let mut dir = parent(path);
        let owner = loop {
            let manifest = if dir.is_empty() {
                "Cargo.toml".to_string()
            } else {
                format!("{dir}/Cargo.toml")
            };
            match package_name(tree, &manifest) {
                Ok(Some(name)) => break Some((name, dir.to_string())),
                Err(()) if &manifest == path => {
                    return Related::Everything(format!("{path} configures every crate"));
                }
                Err(()) => break None,
                Ok(None) if dir.is_empty() => break None,
                Ok(None) => dir = parent(dir),
            }
        };
        let Some((name, dir)) = owner else { continue };
        let inner = if dir.is_empty() {
            path.as_str()
        } else {
            &path[dir.len() + 1..]
        };
        let source = inner.ends_with(".rs")
            || inner == "Cargo.toml"
            || ["src/", "tests/", "benches/", "examples/"]
                .iter()
                .any(|d| inner.starts_with(d));
        if !source {
            continue;
        }
        let test = inner.strip_prefix("tests/").and_then(|t| {
            t.strip_suffix("/main.rs")
                .or_else(|| t.strip_suffix(".rs"))
                .filter(|n| !n.contains('/'))
        });
        let at = match crates.iter().position(|c| c.name == name) {
            Some(i) => i,
            None => {
                crates.push(CrateChange {
                    name,
                    dir,
                    tests: Vec::new(),
                    other: false,
                });
                crates.len() - 1
            }
        };
        match test {
            Some(t) if tree.is_file(path) => crates[at].tests.push(t.to_string()),
            _ => crates[at].other = true,
        }
    }
    cargo_selection(tree, crates)
}

fn cargo_selection(tree: &Tree, mut crates: Vec<CrateChange>) -> Related {
    if crates.is_empty() {
        return Related::Nothing("no changed file belongs to a crate's sources or tests".into());
    }
    crates.sort_by(|a, b| a.name.cmp(&b.name));
    let test_targets: Vec<String> = match &crates[..] {
        [one] if !one.other => one.tests.clone(),
        _ => Vec::new(),
    };
    // A single-package project: its crate is the whole suite.
    let single = crates.len() == 1
        && crates[0].dir.is_empty()
        && tree
            .read("Cargo.toml")
            .and_then(|t| toml::from_str::<toml::Table>(&t).ok())
            .is_some_and(|t| !t.contains_key("workspace"));
    if single && test_targets.is_empty() {
        return Related::Everything(format!(
            "the changed crate `{}` is the whole project",
            crates[0].name
        ));
    }
    let note = if test_targets.is_empty() {
        "the tests of the crate(s) owning the change".to_string()
    } else {
        format!(
            "the changed integration test(s) of crate `{}`",
            crates[0].name
        )
    };
    Related::Selected(Selection {
        names: crates.into_iter().map(|c| c.name).collect(),
        test_targets,
        note,
    })
}

fn go(tree: &Tree, changed: &[String]) -> Related {
    let mut packages: Vec<String> = Vec::new();
    for path in changed {
        let name = file_name(path);
        if matches!(name, "go.mod" | "go.sum" | "go.work" | "go.work.sum")
            && parent(path).is_empty()
            || path.starts_with("vendor/")
        {
            return Related::Everything(format!("{path} applies to every package"));
        }
        // A file of a package's testdata belongs to that package's tests.
        let dir = match path.split_once("/testdata/") {
            Some((pkg, _)) => pkg,
            None if path.starts_with("testdata/") => "",
            None if name.ends_with(".go") => parent(path),
            None => continue,
        };
        // Packages of nested modules are not part of this module's `./...`.
        let mut up = dir;
        let mut nested = false;
        while !up.is_empty() {
            nested |= tree.is_file(&format!("{up}/go.mod"));
            up = parent(up);
        }
        let has_go = tree
            .list(dir)
            .iter()
            .any(|(n, is_dir)| !is_dir && n.ends_with(".go"));
        if nested || !has_go {
            continue;
        }
        let pkg = if dir.is_empty() {
            ".".to_string()
        } else {
            format!("./{dir}")
        };
        if !packages.contains(&pkg) {
            packages.push(pkg);
        }
    }
    if packages.is_empty() {
        return Related::Nothing("no changed file belongs to a Go package of this module".into());
    }
    packages.sort();
    Related::Selected(Selection {
        note: format!("the tests of the {} changed package(s)", packages.len()),
        names: packages,
        test_targets: Vec::new(),
    })
}

#[cfg(test)]
mod tests;
