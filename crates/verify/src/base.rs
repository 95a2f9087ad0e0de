//! The identity of a base run, for the baseline cache: a failure counts as pre-existing only if
//! the same test fails on *exactly* this base, so the key covers everything that decides a
//! test result — the whole base tree, the runner's exact argv, the environment that reaches the
//! sandbox, the program that runs and the toolchain directories exposed to it.
//!
//! The tree is fingerprinted by metadata, as git's index does: every entry's path, type, mode,
//! size, inode, modification and change times (and a symlink's target). Any write, rename or
//! mode change moves the change time, which user space cannot set back, so an edited base can
//! never present an earlier base's key. Only `.airlock/` (airlock's own state) is left out.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Entries of a toolchain directory looked at, at most, per exposed directory (two levels).
const TOOLCHAIN_ENTRIES: usize = 4096;

/// What a base key is made of.
pub(crate) struct KeyParts<'a> {
    /// The workspace (the base tree).
    pub workspace: &'a Path,
    /// airlock's version (adapters and identities may change between versions).
    pub version: &'a str,
    /// The runner's name.
    pub runner: &'a str,
    /// The exact argv the base run uses.
    pub argv: &'a [OsString],
    /// The environment that reaches the sandbox.
    pub env: &'a [(OsString, OsString)],
    /// The program that runs, resolved through `PATH`.
    pub program: Option<PathBuf>,
    /// Toolchain directories exposed to the run.
    pub toolchains: &'a [&'a Path],
    /// The caller's own key material.
    pub salt: &'a str,
}

/// The base key as lowercase hex, or `None` when the tree cannot be read whole (then nothing
/// may be reused or cached).
pub(crate) fn key(parts: &KeyParts<'_>) -> Option<String> {
    let mut h = blake3::Hasher::new();
    h.update(b"airlock-base-v2\0");
    field(&mut h, parts.version.as_bytes());
    field(&mut h, parts.runner.as_bytes());
    field(&mut h, parts.salt.as_bytes());
    h.update(&(parts.argv.len() as u64).to_le_bytes());
    for a in parts.argv {
        field(&mut h, a.as_bytes());
    }
    let mut env: Vec<_> = parts.env.iter().collect();
    env.sort();
    h.update(&(env.len() as u64).to_le_bytes());
    for (k, v) in env {
        field(&mut h, k.as_bytes());
        field(&mut h, v.as_bytes());
    }
    match &parts.program {
        Some(p) => {
            field(&mut h, p.as_os_str().as_bytes());
            stat_into(&mut h, p, true);
        }
        None => field(&mut h, b"<unresolved>"),
    }
    for dir in parts.toolchains {
        field(&mut h, dir.as_os_str().as_bytes());
        toolchain_into(&mut h, dir);
    }
    h.update(&tree_fingerprint(parts.workspace).ok()?);
    Some(h.finalize().to_hex().to_string())
}

/// A fingerprint of every entry below `root` (not following symlinks), `.airlock/` excepted.
pub fn tree_fingerprint(root: &Path) -> io::Result<[u8; 32]> {
    let mut h = blake3::Hasher::new();
    h.update(b"airlock-tree-v1\0");
    walk(&mut h, root, Path::new(""))?;
    Ok(*h.finalize().as_bytes())
}

fn walk(h: &mut blake3::Hasher, root: &Path, rel: &Path) -> io::Result<()> {
    let dir = root.join(rel);
    let mut names: Vec<OsString> = std::fs::read_dir(&dir)?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<io::Result<_>>()?;
    names.sort();
    for name in names {
        if rel.as_os_str().is_empty() && name == ".airlock" {
            continue;
        }
        let child = rel.join(&name);
        let abs = root.join(&child);
        let md = std::fs::symlink_metadata(&abs)?;
        field(h, child.as_os_str().as_bytes());
        metadata_into(h, &md);
        let ft = md.file_type();
        if ft.is_symlink() {
            field(h, std::fs::read_link(&abs)?.as_os_str().as_bytes());
        } else if ft.is_dir() {
            walk(h, root, &child)?;
        }
    }
    Ok(())
}

fn metadata_into(h: &mut blake3::Hasher, md: &std::fs::Metadata) {
    for n in [
        md.mode() as i64,
        md.size() as i64,
        md.ino() as i64,
        md.dev() as i64,
        md.mtime(),
        md.mtime_nsec(),
        md.ctime(),
        md.ctime_nsec(),
    ] {
        h.update(&n.to_le_bytes());
    }
}

fn stat_into(h: &mut blake3::Hasher, p: &Path, follow: bool) {
    let md = if follow {
        std::fs::metadata(p)
    } else {
        std::fs::symlink_metadata(p)
    };
    match md {
        Ok(md) => metadata_into(h, &md),
        Err(_) => field(h, b"<missing>"),
    }
}

/// A toolchain directory, two levels deep (e.g. `~/.rustup/toolchains/<name>`): an update that
/// adds, removes or rewrites a toolchain changes the metadata seen here.
fn toolchain_into(h: &mut blake3::Hasher, dir: &Path) {
    stat_into(h, dir, false);
    let mut seen = 0usize;
    let mut level = vec![dir.to_path_buf()];
    for _ in 0..2 {
        let mut next = Vec::new();
        for d in &level {
            let Ok(rd) = std::fs::read_dir(d) else {
                continue;
            };
            let mut names: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
            names.sort();
            for p in names {
                if seen >= TOOLCHAIN_ENTRIES {
                    return;
                }
                seen += 1;
                field(h, p.as_os_str().as_bytes());
                stat_into(h, &p, false);
                if std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir()) {
                    next.push(p);
                }
            }
        }
        level = next;
    }
}

/// The file `program` names: itself when it has a slash, else the first executable match in
/// `path` — symlinks resolved, so a toolchain switch behind a link is seen.
pub(crate) fn resolve_program(program: &OsStr, path: Option<&OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let p = Path::new(program);
    if program.as_bytes().contains(&b'/') {
        return std::fs::canonicalize(p).ok();
    }
    std::env::split_paths(path?).find_map(|dir| {
        let cand = dir.join(p);
        let md = std::fs::metadata(&cand).ok()?;
        (md.is_file() && md.permissions().mode() & 0o111 != 0)
            .then(|| std::fs::canonicalize(&cand).ok())
            .flatten()
    })
}

fn field(h: &mut blake3::Hasher, bytes: &[u8]) {
    h.update(&(bytes.len() as u64).to_le_bytes());
    h.update(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_edit_anywhere_in_the_tree_changes_the_fingerprint() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::create_dir_all(root.join("src/deep")).unwrap();
        std::fs::write(root.join("src/deep/a.js"), "a").unwrap();
        std::fs::write(root.join("b.js"), "b").unwrap();
        let first = tree_fingerprint(root).unwrap();
        assert_eq!(first, tree_fingerprint(root).unwrap(), "stable");

        // airlock's own state is not part of the base.
        std::fs::create_dir_all(root.join(".airlock/baseline")).unwrap();
        std::fs::write(root.join(".airlock/baseline/x"), "x").unwrap();
        assert_eq!(first, tree_fingerprint(root).unwrap());

        // Same size, same content length: still a different base.
        std::fs::write(root.join("src/deep/a.js"), "z").unwrap();
        let edited = tree_fingerprint(root).unwrap();
        assert_ne!(first, edited);
        // Restoring the bytes does not restore the key (the change time moved on).
        std::fs::write(root.join("src/deep/a.js"), "a").unwrap();
        assert_ne!(first, tree_fingerprint(root).unwrap());

        let before = tree_fingerprint(root).unwrap();
        std::os::unix::fs::symlink("b.js", root.join("link")).unwrap();
        assert_ne!(before, tree_fingerprint(root).unwrap());
    }

    #[test]
    fn programs_resolve_through_path_and_links() {
        let t = tempfile::tempdir().unwrap();
        let bin = t.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let real = t.path().join("real-tool");
        std::fs::write(&real, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink(&real, bin.join("tool")).unwrap();
        let found = resolve_program(OsStr::new("tool"), Some(bin.as_os_str())).unwrap();
        assert_eq!(found, real.canonicalize().unwrap());
        assert_eq!(
            resolve_program(OsStr::new("nope"), Some(bin.as_os_str())),
            None
        );
    }
}
