//! Runner detection: which test runner a project uses, read from its manifest files through a
//! [`FileSource`] so the caller can hand in the merged (workspace + staged) view.
//!
//! Order: package.json (vitest, jest, node:test), Cargo.toml, go.mod, then Python markers.
//! Detection never runs anything; a project it does not recognise gets `None`.

use std::path::{Path, PathBuf};

use crate::model::RunnerKind;

/// Read access to a project's files by workspace-relative path (`/`-separated).
pub trait FileSource {
    /// The file's bytes, or `None` if it does not exist or cannot be read.
    fn read(&self, rel: &str) -> Option<Vec<u8>>;
    /// True when a file or directory exists at `rel`.
    fn exists(&self, rel: &str) -> bool;
}

/// A [`FileSource`] over a plain directory, with optional overlay directories on top (the
/// topmost wins). Paths with `..` or a leading `/` are refused.
#[derive(Debug, Clone)]
pub struct DirSource {
    roots: Vec<PathBuf>,
}

impl DirSource {
    /// A source over one directory.
    pub fn new(root: impl Into<PathBuf>) -> DirSource {
        DirSource {
            roots: vec![root.into()],
        }
    }

    /// A source over `root` with `layers` stacked on top, the last one topmost.
    pub fn layered(root: &Path, layers: &[PathBuf]) -> DirSource {
        let mut roots: Vec<PathBuf> = layers.iter().rev().cloned().collect();
        roots.push(root.to_path_buf());
        DirSource { roots }
    }

    fn resolve(&self, rel: &str) -> Option<PathBuf> {
        if rel.starts_with('/') || rel.split('/').any(|c| c == "..") {
            return None;
        }
        self.roots
            .iter()
            .map(|root| root.join(rel))
            .find(|p| std::fs::symlink_metadata(p).is_ok())
    }
}

impl FileSource for DirSource {
    fn read(&self, rel: &str) -> Option<Vec<u8>> {
        std::fs::read(self.resolve(rel)?).ok()
    }

    fn exists(&self, rel: &str) -> bool {
        self.resolve(rel).is_some()
    }
}

/// Detects the project's test runner, or `None` when nothing is recognised.
pub fn detect(src: &dyn FileSource) -> Option<RunnerKind> {
    let node = src.read("package.json").and_then(|b| detect_node(&b));
    if let Some((kind, true)) = node {
        return Some(kind);
    }
    // A package.json that names no test runner (tooling only) does not hide another ecosystem.
    if let Some(kind) = detect_other(src) {
        return Some(kind);
    }
    node.map(|(kind, _)| kind)
}

/// Cargo, Go and Python markers.
fn detect_other(src: &dyn FileSource) -> Option<RunnerKind> {
    if src.exists("Cargo.toml") {
        return Some(RunnerKind::Cargo);
    }
    if src.exists("go.mod") {
        return Some(RunnerKind::Go);
    }
    if src.exists("pytest.ini") || src.exists("conftest.py") {
        return Some(RunnerKind::Pytest);
    }
    if let Some(bytes) = src.read("pyproject.toml") {
        let text = String::from_utf8_lossy(&bytes);
        if text.contains("[tool.pytest") || text.contains("pytest") || src.exists("tests") {
            return Some(RunnerKind::Pytest);
        }
    }
    if let Some(bytes) = src.read("setup.cfg")
        && String::from_utf8_lossy(&bytes).contains("[tool:pytest]")
    {
        return Some(RunnerKind::Pytest);
    }
    if src.exists("tests") && (src.exists("setup.py") || src.exists("requirements.txt")) {
        return Some(RunnerKind::Pytest);
    }
    if src.exists("pyproject.toml") || src.exists("setup.py") {
        return Some(RunnerKind::Pytest);
    }
    None
}

/// package.json: the `test` script names the runner first; then devDependencies/dependencies.
/// The flag says whether the package declares it (false: node's runner as the fallback).
fn detect_node(bytes: &[u8]) -> Option<(RunnerKind, bool)> {
    let json: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let script = json
        .get("scripts")
        .and_then(|s| s.get("test"))
        .and_then(|t| t.as_str())
        .unwrap_or("");
    if script.contains("vitest") {
        return Some((RunnerKind::Vitest, true));
    }
    if script.contains("jest") {
        return Some((RunnerKind::Jest, true));
    }
    if script.contains("node --test") || script.contains("node --experimental-test") {
        return Some((RunnerKind::Node, true));
    }
    let has_dep = |name: &str| {
        ["devDependencies", "dependencies"]
            .iter()
            .any(|section| json.get(section).and_then(|d| d.get(name)).is_some())
    };
    if has_dep("vitest") {
        return Some((RunnerKind::Vitest, true));
    }
    if has_dep("jest") {
        return Some((RunnerKind::Jest, true));
    }
    // A package.json with neither: node's built-in runner is always available; a test script
    // of another runner still declares the project's tests.
    let declared = !script.trim().is_empty() && !script.contains("no test specified");
    Some((RunnerKind::Node, declared))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct MapSource(HashMap<&'static str, &'static str>);

    impl FileSource for MapSource {
        fn read(&self, rel: &str) -> Option<Vec<u8>> {
            self.0.get(rel).map(|s| s.as_bytes().to_vec())
        }
        fn exists(&self, rel: &str) -> bool {
            self.0.contains_key(rel)
        }
    }

    fn detect_map(files: &[(&'static str, &'static str)]) -> Option<RunnerKind> {
        detect(&MapSource(files.iter().copied().collect()))
    }

    #[test]
    fn node_projects_by_script_then_dependency() {
        let vitest = r#"{"scripts":{"test":"vitest run"}}"#;
        let jest_dep = r#"{"devDependencies":{"jest":"29"}}"#;
        let node = r#"{"scripts":{"test":"node --test"}}"#;
        let both = r#"{"scripts":{"test":"jest"},"devDependencies":{"vitest":"3"}}"#;
        assert_eq!(
            detect_map(&[("package.json", vitest)]),
            Some(RunnerKind::Vitest)
        );
        assert_eq!(
            detect_map(&[("package.json", jest_dep)]),
            Some(RunnerKind::Jest)
        );
        assert_eq!(
            detect_map(&[("package.json", node)]),
            Some(RunnerKind::Node)
        );
        assert_eq!(
            detect_map(&[("package.json", both)]),
            Some(RunnerKind::Jest)
        );
        assert_eq!(
            detect_map(&[("package.json", "{}")]),
            Some(RunnerKind::Node)
        );
    }

    #[test]
    fn a_package_json_that_declares_no_tests_does_not_hide_another_ecosystem() {
        let tooling = r#"{"devDependencies":{"prettier":"3"}}"#;
        assert_eq!(
            detect_map(&[("package.json", tooling), ("Cargo.toml", "[package]")]),
            Some(RunnerKind::Cargo)
        );
        assert_eq!(
            detect_map(&[("package.json", tooling), ("go.mod", "module x")]),
            Some(RunnerKind::Go)
        );
        assert_eq!(
            detect_map(&[("package.json", tooling), ("pytest.ini", "")]),
            Some(RunnerKind::Pytest)
        );
        // Alone, it is node's built-in runner, as before.
        assert_eq!(
            detect_map(&[("package.json", tooling)]),
            Some(RunnerKind::Node)
        );
    }

    #[test]
    fn other_ecosystems() {
        assert_eq!(
            detect_map(&[("Cargo.toml", "[package]")]),
            Some(RunnerKind::Cargo)
        );
        assert_eq!(detect_map(&[("go.mod", "module x")]), Some(RunnerKind::Go));
        assert_eq!(detect_map(&[("pytest.ini", "")]), Some(RunnerKind::Pytest));
        assert_eq!(
            detect_map(&[("setup.cfg", "[tool:pytest]\n")]),
            Some(RunnerKind::Pytest)
        );
        assert_eq!(
            detect_map(&[("pyproject.toml", "[project]"), ("tests", "")]),
            Some(RunnerKind::Pytest)
        );
        assert_eq!(detect_map(&[("README.md", "hi")]), None);
    }

    #[test]
    fn dir_source_layers_win_and_refuse_escapes() {
        let base = tempfile::tempdir().unwrap();
        let layer = tempfile::tempdir().unwrap();
        std::fs::write(base.path().join("a"), "base").unwrap();
        std::fs::write(layer.path().join("a"), "layer").unwrap();
        std::fs::write(base.path().join("b"), "only base").unwrap();
        let src = DirSource::layered(base.path(), &[layer.path().to_path_buf()]);
        assert_eq!(src.read("a").unwrap(), b"layer");
        assert_eq!(src.read("b").unwrap(), b"only base");
        assert!(!src.exists("../etc/passwd"));
        assert!(!src.exists("/etc/passwd"));
    }
}
