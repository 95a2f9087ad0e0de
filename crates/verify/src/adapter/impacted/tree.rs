//! The workspace as a run sees it (the layers over the workspace, whiteouts hiding what they
//! delete), listed and read without following symlinks.

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// Directories never walked: installed packages, environments, caches, build output, version
/// control (and every hidden directory).
const SKIPPED: [&str; 8] = [
    "node_modules",
    "__pycache__",
    "venv",
    "site-packages",
    "target",
    "build",
    "dist",
    "vendor",
];
/// Most entries one walk visits.
const MAX_ENTRIES: usize = 20_000;
/// Most bytes of one file read for its imports.
const MAX_READ: u64 = 1024 * 1024;

/// The merged view of a workspace and its layers.
pub(crate) struct Tree {
    /// The layers topmost first, then the workspace.
    roots: Vec<PathBuf>,
}

impl Tree {
    pub(crate) fn new(workspace: &Path, layers: &[PathBuf]) -> Tree {
        let mut roots: Vec<PathBuf> = layers.iter().rev().cloned().collect();
        roots.push(workspace.to_path_buf());
        Tree { roots }
    }

    /// The entries of the workspace-relative directory `rel` (`""`: the root), sorted by name,
    /// each with true for a directory. A whiteout hides the entry below it; symlinks are left
    /// out.
    pub(crate) fn list(&self, rel: &str) -> Vec<(String, bool)> {
        let mut seen: Vec<String> = Vec::new();
        let mut out = Vec::new();
        for root in &self.roots {
            let dir = if rel.is_empty() {
                root.clone()
            } else {
                root.join(rel)
            };
            match std::fs::symlink_metadata(&dir) {
                Ok(m) if m.is_dir() => {}
                // A file or whiteout in an upper root hides the directories below it.
                Ok(_) => break,
                Err(_) => continue,
            }
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if seen.contains(&name) {
                    continue;
                }
                seen.push(name.clone());
                match entry.file_type() {
                    Ok(t) if t.is_dir() => out.push((name, true)),
                    Ok(t) if t.is_file() => out.push((name, false)),
                    _ => {} // whiteouts, symlinks, devices
                }
            }
        }
        out.sort();
        out
    }

    /// True when the file `rel` exists (a regular file; not deleted by a whiteout).
    pub(crate) fn is_file(&self, rel: &str) -> bool {
        self.top(rel).is_some_and(|p| {
            std::fs::symlink_metadata(p)
                .is_ok_and(|m| m.is_file() && !m.file_type().is_char_device())
        })
    }

    /// The first 1 MiB of the file `rel`, as text.
    pub(crate) fn read(&self, rel: &str) -> Option<String> {
        let path = self.top(rel)?;
        if !std::fs::symlink_metadata(&path).ok()?.is_file() {
            return None;
        }
        let mut buf = Vec::new();
        let file = std::fs::File::open(&path).ok()?;
        std::io::Read::read_to_end(&mut std::io::Read::take(file, MAX_READ), &mut buf).ok()?;
        Some(String::from_utf8_lossy(&buf).into_owned())
    }

    /// The topmost root's path of `rel`, whatever it is there.
    fn top(&self, rel: &str) -> Option<PathBuf> {
        if rel.starts_with('/') || rel.split('/').any(|c| c == "..") {
            return None;
        }
        self.roots
            .iter()
            .map(|r| r.join(rel))
            .find(|p| std::fs::symlink_metadata(p).is_ok())
    }

    /// Every file whose name `keep` accepts, workspace-relative, walking every directory but
    /// hidden ones and [`SKIPPED`] (at most 20 000 entries visited).
    pub(crate) fn files(&self, keep: &dyn Fn(&str) -> bool) -> Vec<String> {
        let mut out = Vec::new();
        let mut queue = vec![String::new()];
        let mut visited = 0;
        while let Some(dir) = queue.pop() {
            for (name, is_dir) in self.list(&dir) {
                visited += 1;
                if visited > MAX_ENTRIES {
                    return out;
                }
                let rel = if dir.is_empty() {
                    name.clone()
                } else {
                    format!("{dir}/{name}")
                };
                if is_dir {
                    if !name.starts_with('.') && !SKIPPED.contains(&name.as_str()) {
                        queue.push(rel);
                    }
                } else if keep(&name) {
                    out.push(rel);
                }
            }
        }
        out.sort();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_add_and_whiteouts_hide() {
        let ws = tempfile::tempdir().unwrap();
        let layer = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(ws.path().join("pkg")).unwrap();
        std::fs::write(ws.path().join("pkg/a.py"), "a").unwrap();
        std::fs::write(ws.path().join("pkg/gone.py"), "g").unwrap();
        std::fs::create_dir_all(ws.path().join(".venv/lib")).unwrap();
        std::fs::write(ws.path().join(".venv/lib/x.py"), "x").unwrap();
        std::fs::create_dir_all(layer.path().join("pkg")).unwrap();
        std::fs::write(layer.path().join("pkg/b.py"), "b").unwrap();
        // A whiteout needs mknod, which an unprivileged test cannot always do: a symlink is
        // left out just the same.
        std::os::unix::fs::symlink("/etc/hostname", layer.path().join("pkg/gone.py")).unwrap();
        let tree = Tree::new(ws.path(), &[layer.path().to_path_buf()]);
        assert_eq!(
            tree.files(&|n| n.ends_with(".py")),
            ["pkg/a.py", "pkg/b.py"]
        );
        assert!(tree.is_file("pkg/a.py") && !tree.is_file("pkg/gone.py"));
        assert_eq!(tree.read("pkg/b.py").as_deref(), Some("b"));
    }
}
