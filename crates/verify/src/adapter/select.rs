//! Which tests a run selects, and which paths a change touched.
//!
//! [`restrict`] translates full test identities ([`crate::Failure::id`]) into each runner's
//! own selection, so `verify --only ID…` reruns exactly those tests:
//! - pytest: the node ids as arguments (`tests/test_a.py::TestX::test_y[p1]`);
//! - cargo: `-- --exact PATH…` (libtest's exact name filter, in every test binary);
//! - go: `-run '^(?:TestX)$/^(?:sub)$'` over the named packages (`./pkg::TestX/sub`); ids of
//!   several tests are combined level by level, so sibling combinations may run too;
//! - vitest / jest: `-t '^(?:describe name|…)$'` (the describe chain and name joined by
//!   spaces, as both match it) with the test files as file filters;
//! - node:test: `--test-name-pattern='^(?:name|…)$'`.
//!
//! A run of selected tests says nothing about the rest of the suite: its verdict is advisory
//! (the caller records it as such; it can never unlock apply).
//!
//! [`changed_paths`] lists the workspace-relative paths a changeset's layers hold, so the
//! diagnostics can put first the tests that exercise them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{Plan, REPORT_DIR};
use crate::model::RunnerKind;

/// Most test identities one `--only` may name.
pub const MAX_ONLY: usize = 1000;
/// Most changed paths read from the layers.
const MAX_CHANGED: usize = 10_000;
/// Directories of installed packages, caches and version control: never the change itself.
const SKIPPED_DIRS: [&str; 4] = ["node_modules", ".git", "__pycache__", ".pytest_cache"];

/// Rewrites `plan` to run only the tests `ids` name. An error says why the ids cannot be
/// selected (a runner without a selection syntax, an id of the wrong shape).
pub fn restrict(plan: &mut Plan, ids: &[String]) -> Result<(), String> {
    if ids.is_empty() {
        return Ok(());
    }
    if ids.len() > MAX_ONLY {
        return Err(format!(
            "at most {MAX_ONLY} test ids may be selected at once"
        ));
    }
    if let Some(bad) = ids.iter().find(|i| i.trim().is_empty() || i.contains('\n')) {
        return Err(format!("`{bad}` is not a test id"));
    }
    match plan.kind {
        RunnerKind::Pytest => {
            plan.argv.extend(ids.iter().map(OsString::from));
        }
        RunnerKind::Cargo => {
            if !plan.argv.iter().any(|a| a == "--") {
                plan.argv.push("--".into());
            }
            plan.argv.push("--exact".into());
            plan.argv.extend(ids.iter().map(OsString::from));
        }
        RunnerKind::Go => go(plan, ids)?,
        RunnerKind::Vitest | RunnerKind::Jest => {
            let mut files: Vec<&str> = Vec::new();
            let mut names: Vec<String> = Vec::new();
            for id in ids {
                let mut parts = id.split(" > ");
                let file = parts.next().unwrap_or("");
                let chain: Vec<&str> = parts.collect();
                if chain.is_empty() || file.contains(' ') {
                    return Err(format!(
                        "`{id}` is not a {} test id (`file > describe > … > name`)",
                        plan.kind
                    ));
                }
                if !files.contains(&file) {
                    files.push(file);
                }
                names.push(js_escape(&chain.join(" ")));
            }
            plan.argv.push("-t".into());
            plan.argv.push(format!("^(?:{})$", names.join("|")).into());
            for f in files {
                plan.argv.push(match plan.kind {
                    // jest's positional arguments are regular expressions over the path.
                    RunnerKind::Jest => js_escape(f).into(),
                    _ => f.into(),
                });
            }
        }
        RunnerKind::Node => {
            let names: Vec<String> = ids.iter().map(|i| js_escape(i)).collect();
            let at = 1.min(plan.argv.len());
            plan.argv.insert(
                at,
                format!("--test-name-pattern=^(?:{})$", names.join("|")).into(),
            );
        }
        RunnerKind::Junit | RunnerKind::Command => {
            return Err(format!(
                "the {} runner has no way to select single tests; `--only` needs a recognised runner (pytest, cargo, go, vitest, jest, node)",
                plan.kind
            ));
        }
    }
    Ok(())
}

/// `go test -run` per level over the packages the ids name.
fn go(plan: &mut Plan, ids: &[String]) -> Result<(), String> {
    let mut packages: Vec<&str> = Vec::new();
    let mut levels: Vec<Vec<String>> = Vec::new();
    for id in ids {
        let Some((pkg, test)) = id.split_once("::") else {
            return Err(format!("`{id}` is not a go test id (`./pkg::TestX/sub`)"));
        };
        if pkg.is_empty() || test.is_empty() || pkg.starts_with('-') {
            return Err(format!("`{id}` is not a go test id (`./pkg::TestX/sub`)"));
        }
        if !packages.contains(&pkg) {
            packages.push(pkg);
        }
        for (i, part) in test.split('/').enumerate() {
            if levels.len() <= i {
                levels.push(Vec::new());
            }
            let alt = regex::escape(part);
            if !levels[i].contains(&alt) {
                levels[i].push(alt);
            }
        }
    }
    let pattern: Vec<String> = levels
        .iter()
        .map(|alts| format!("^(?:{})$", alts.join("|")))
        .collect();
    plan.argv.retain(|a| a != "./...");
    let at = plan
        .argv
        .iter()
        .position(|a| a == "test")
        .map_or(plan.argv.len(), |i| i + 1);
    plan.argv
        .splice(at..at, ["-run".into(), OsString::from(pattern.join("/"))]);
    plan.argv.extend(packages.iter().map(OsString::from));
    Ok(())
}

/// Escapes the characters JavaScript regular expressions treat specially.
fn js_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if "\\^$.*+?()[]{}|/".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Most bytes of a file [`head_reader`] reads.
const MAX_HEAD: u64 = 64 * 1024;

/// A reader of the first 64 KiB of a workspace-relative file as the run sees it (the top
/// layer holding it, else the workspace). Symlinks, whiteouts and paths climbing out read as
/// nothing.
pub fn head_reader(workspace: &Path, layers: &[PathBuf]) -> crate::sanitize::FileReader {
    let mut roots: Vec<PathBuf> = layers.iter().rev().cloned().collect();
    roots.push(workspace.to_path_buf());
    Box::new(move |rel: &str| {
        if rel.starts_with('/') || rel.split('/').any(|c| c == "..") {
            return None;
        }
        for root in &roots {
            let path = root.join(rel);
            match std::fs::symlink_metadata(&path) {
                Ok(m) if m.is_file() => {
                    let mut buf = Vec::new();
                    let file = std::fs::File::open(&path).ok()?;
                    std::io::Read::read_to_end(&mut std::io::Read::take(file, MAX_HEAD), &mut buf)
                        .ok()?;
                    return Some(String::from_utf8_lossy(&buf).into_owned());
                }
                Ok(_) => return None,
                Err(_) => continue,
            }
        }
        None
    })
}

/// The workspace-relative paths of every file, symlink and whiteout the layers hold (at most
/// 10 000), airlock's own report directory and installed packages and caches
/// (`node_modules`, `.git`, `__pycache__`, `.pytest_cache`) left out.
pub fn changed_paths(layers: &[PathBuf]) -> Vec<String> {
    let mut out = Vec::new();
    for layer in layers {
        walk(layer, layer, &mut out);
    }
    out.sort();
    out.dedup();
    out
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if out.len() >= MAX_CHANGED {
            return;
        }
        let path = entry.path();
        let Ok(rel) = path.strip_prefix(root) else {
            continue;
        };
        let rel = rel.to_string_lossy().into_owned();
        if rel == REPORT_DIR || rel == ".airlock" {
            continue;
        }
        match entry.file_type() {
            Ok(t)
                if t.is_dir() && SKIPPED_DIRS.contains(&&*entry.file_name().to_string_lossy()) => {}
            Ok(t) if t.is_dir() => walk(root, &path, out),
            Ok(_) => out.push(rel),
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::{test_argv as argv, test_plan as plan};

    #[test]
    fn each_runner_gets_its_own_selection() {
        let mut p = plan(RunnerKind::Pytest, &["python3", "-m", "pytest"]);
        restrict(&mut p, &["tests/t.py::TestX::test_y[a-1]".into()]).unwrap();
        assert_eq!(argv(&p).last().unwrap(), "tests/t.py::TestX::test_y[a-1]");

        let mut p = plan(RunnerKind::Cargo, &["cargo", "test", "--offline"]);
        restrict(&mut p, &["m::tests::a".into()]).unwrap();
        assert_eq!(argv(&p)[3..], ["--", "--exact", "m::tests::a"]);

        let mut p = plan(RunnerKind::Go, &["go", "test", "-json", "./..."]);
        restrict(
            &mut p,
            &["./calc::TestAdd/small".into(), "./calc::TestAdd/b.c".into()],
        )
        .unwrap();
        assert_eq!(
            argv(&p),
            [
                "go",
                "test",
                "-run",
                r"^(?:TestAdd)$/^(?:small|b\.c)$",
                "-json",
                "./calc"
            ]
        );

        let mut p = plan(RunnerKind::Vitest, &["vitest", "run"]);
        restrict(&mut p, &["tests/a.test.js > d > adds (1+1)".into()]).unwrap();
        assert_eq!(
            argv(&p)[2..],
            ["-t", r"^(?:d adds \(1\+1\))$", "tests/a.test.js"]
        );

        let mut p = plan(RunnerKind::Command, &["make", "test"]);
        assert!(restrict(&mut p, &["x".into()]).is_err());
        let mut p = plan(RunnerKind::Go, &["go", "test"]);
        assert!(restrict(&mut p, &["TestX".into()]).is_err());
    }

    #[test]
    fn head_reader_sees_the_top_layer_and_nothing_outside() {
        let ws = tempfile::tempdir().unwrap();
        let layer = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("a.py"), "old").unwrap();
        std::fs::write(layer.path().join("a.py"), "new").unwrap();
        std::fs::write(ws.path().join("b.py"), "b".repeat(100_000)).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", ws.path().join("l.py")).unwrap();
        let read = head_reader(ws.path(), &[layer.path().to_path_buf()]);
        assert_eq!(read("a.py").as_deref(), Some("new"));
        assert_eq!(read("b.py").map(|t| t.len()), Some(64 * 1024));
        assert_eq!(read("l.py"), None);
        assert_eq!(read("../a.py"), None);
        assert_eq!(read("missing.py"), None);
    }

    #[test]
    fn changed_paths_lists_the_layers_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src/a")).unwrap();
        std::fs::write(dir.path().join("src/a/b.rs"), "x").unwrap();
        std::fs::create_dir_all(dir.path().join(REPORT_DIR)).unwrap();
        std::fs::write(dir.path().join(REPORT_DIR).join("r.xml"), "x").unwrap();
        std::fs::create_dir_all(dir.path().join("web/node_modules/x")).unwrap();
        std::fs::write(dir.path().join("web/node_modules/x/i.js"), "x").unwrap();
        assert_eq!(
            changed_paths(&[dir.path().to_path_buf()]),
            vec!["src/a/b.rs".to_string()]
        );
    }
}
