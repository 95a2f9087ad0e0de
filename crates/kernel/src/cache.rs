//! Per-workspace build and test caches: directories under the workspace's airlock state
//! (`.airlock/cache/<domain>/<name>`) that sandboxed runs of this workspace, and only they, see
//! writable at [`airlock_sandbox::CACHE_ROOT`]`/<name>`, pointed at by the variables the tools
//! read (`GOCACHE`, `CARGO_TARGET_DIR`, `PYTHONPYCACHEPREFIX`, pytest's `cache_dir`,
//! `XDG_CACHE_HOME`, jest's `--cacheDirectory`). What a run writes there is neither staged nor applied, and persists
//! across runs.
//!
//! Two domains keep the agent's commands from writing what a verification reads: `exec`
//! (`bash`/`exec` runs) and `verify` (verification runs, on the base and on the changeset).
//! The agent's files cannot reach either: `.airlock/` is denied to the file tools and masked in
//! every sandbox. The test code of a verification still runs in the verify domain, so a cache is
//! state the project's (possibly staged) code can write; [`drop_all`] empties every domain.
//!
//! A Rust workspace's package cache lives apart: the exec domain's cargo home, outside the
//! workspace, is what a run granted network fills (`cargo fetch`). The verify domain's
//! `cargo-home` cache holds what the host checked of it before each verification (archives whose
//! checksum the lockfile pins, and the registry index: see [`crate::cargo_home`]).

use airlock_sandbox::CacheBind;
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

/// The caches' directory under the workspace: inside airlock's state, never staged.
pub const CACHE_DIR: &str = ".airlock/cache";

/// Which runs share a cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheDomain {
    /// The agent's commands (`bash`, `airlock exec`).
    Exec,
    /// Verification runs: only they write it.
    Verify,
}

impl CacheDomain {
    /// The domain's directory name.
    pub fn name(self) -> &'static str {
        match self {
            CacheDomain::Exec => "exec",
            CacheDomain::Verify => "verify",
        }
    }

    /// Every domain.
    pub const ALL: [CacheDomain; 2] = [CacheDomain::Exec, CacheDomain::Verify];
}

/// One cache: its directory name and the variables that point a tool at it.
struct Kind {
    name: &'static str,
    /// Only verification runs get it (nothing of an agent's command would use it).
    verify_only: bool,
    /// Each variable and its value, given the cache's path inside the sandbox.
    vars: fn(&str) -> Vec<(&'static str, String)>,
}

const KINDS: &[Kind] = &[
    Kind {
        name: "go-build",
        verify_only: false,
        vars: |p| vec![("GOCACHE", p.to_string())],
    },
    Kind {
        name: "cargo-target",
        verify_only: false,
        vars: |p| vec![("CARGO_TARGET_DIR", p.to_string())],
    },
    Kind {
        name: "pycache",
        verify_only: false,
        // Bytecode goes to the cache (never the workspace), so it may be written: an empty
        // PYTHONDONTWRITEBYTECODE is unset for Python.
        vars: |p| {
            vec![
                ("PYTHONPYCACHEPREFIX", p.to_string()),
                ("PYTHONDONTWRITEBYTECODE", String::new()),
            ]
        },
    },
    Kind {
        name: "pytest",
        verify_only: false,
        vars: |p| {
            // Only the cache's directory: enabling or disabling the plugin on the command line
            // as well makes pytest warn, which `filterwarnings = error` turns into an error.
            vec![("PYTEST_ADDOPTS", format!("-o cache_dir={p}"))]
        },
    },
    Kind {
        // jest reads no variable for it: the verify plan passes `--cacheDirectory` when the
        // run binds this cache (`airlock_verify::adapter::jest::use_cache`).
        name: "jest",
        verify_only: true,
        vars: |_| Vec::new(),
    },
    Kind {
        name: "xdg",
        verify_only: false,
        vars: |p| vec![("XDG_CACHE_HOME", p.to_string())],
    },
];

/// What a run needs for its caches: the writable binds, the variables, and read-only binds of
/// host caches it may read (the host's `GOMODCACHE` when set outside `$HOME`).
#[derive(Debug, Default, Clone)]
pub struct RunCaches {
    /// Writable binds of the domain's cache directories.
    pub binds: Vec<CacheBind>,
    /// Variables pointing the tools at them.
    pub env: Vec<(OsString, OsString)>,
    /// Host directories exposed read-only.
    pub ro_binds: Vec<PathBuf>,
}

/// The directory of `domain`'s caches for the workspace `root`.
pub fn domain_dir(root: &Path, domain: CacheDomain) -> PathBuf {
    root.join(CACHE_DIR).join(domain.name())
}

/// Creates `domain`'s cache directories (0700) and returns what a run needs to use them. A
/// Rust workspace's first `cargo-target` cache is seeded with a copy of its own `target/`.
/// `host_env` is the caller's environment (for `GOMODCACHE`).
pub fn prepare(
    root: &Path,
    domain: CacheDomain,
    host_env: &[(OsString, OsString)],
) -> io::Result<RunCaches> {
    let dir = domain_dir(root, domain);
    std::fs::create_dir_all(&dir)?;
    set_private(&root.join(CACHE_DIR))?;
    let mut out = RunCaches::default();
    for kind in KINDS
        .iter()
        .filter(|k| domain == CacheDomain::Verify || !k.verify_only)
    {
        let host = dir.join(kind.name);
        if !host.is_dir() {
            if kind.name == "cargo-target" {
                seed_target(root, &host)?;
            }
            std::fs::create_dir_all(&host)?;
        }
        let bind = CacheBind::named(&host, kind.name);
        let inside = bind.inside.to_string_lossy().into_owned();
        for (k, v) in (kind.vars)(&inside) {
            out.env.push((k.into(), v.into()));
        }
        out.binds.push(bind);
    }
    // The host's module cache, read-only, when it lies outside the toolchain paths of `$HOME`
    // that every run sees anyway.
    if let Some((_, m)) = host_env.iter().find(|(k, _)| k == "GOMODCACHE") {
        let m = PathBuf::from(m);
        if m.is_absolute() && m.is_dir() && !m.starts_with(root) {
            out.env
                .push(("GOMODCACHE".into(), m.clone().into_os_string()));
            out.ro_binds.push(m);
        }
    }
    Ok(out)
}

fn set_private(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// Seeds a new `cargo-target` cache at `dest` with a copy of the workspace's own `target/`
/// (what the developer built before): into a temporary name, renamed when whole. Nothing to do
/// for a workspace without `Cargo.toml` and `target/`.
fn seed_target(root: &Path, dest: &Path) -> io::Result<()> {
    let src = root.join("target");
    let is_dir = std::fs::symlink_metadata(&src).is_ok_and(|m| m.is_dir());
    if !is_dir || !root.join("Cargo.toml").is_file() {
        return Ok(());
    }
    let tmp = dest.with_extension("seeding");
    let _ = remove_tree(&tmp);
    copy_tree(&src, &tmp)?;
    std::fs::rename(&tmp, dest)
}

/// Copies regular files, directories and symlinks (nothing else), keeping permission bits and
/// the files' access and modification times.
fn copy_tree(src: &Path, dst: &Path) -> io::Result<()> {
    std::fs::create_dir(dst)?;
    for entry in std::fs::read_dir(src)? {
        let entry = entry?;
        let from = entry.path();
        let to = dst.join(entry.file_name());
        let ft = entry.file_type()?;
        if ft.is_dir() {
            copy_tree(&from, &to)?;
        } else if ft.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&from)?, &to)?;
        } else if ft.is_file() {
            std::fs::copy(&from, &to)?;
            // Cargo judges freshness by modification times: a copy keeps them, or every
            // dependency would look rebuilt after the one copied before it.
            let meta = entry.metadata()?;
            let times = std::fs::FileTimes::new()
                .set_accessed(meta.accessed()?)
                .set_modified(meta.modified()?);
            // The owner may set the times through a read-only descriptor (the copy may be 0444).
            std::fs::File::open(&to)?.set_times(times)?;
        }
    }
    Ok(())
}

/// Removes `p` whatever its depth or modes (a sandboxed command writes the caches; a missing
/// `p` is gone already): [`airlock_sandbox::tree`].
fn remove_tree(p: &Path) -> io::Result<()> {
    airlock_sandbox::tree::remove_tree_counted(p).map(drop)
}

/// The verify domain's cargo home of the workspace `root` (made if missing, 0700), bound
/// writable at [`airlock_sandbox::CACHE_ROOT`]`/cargo-home`. Only a verification of a workspace
/// whose exec cargo home exists uses it (its `CARGO_HOME`).
pub fn verify_cargo_home(root: &Path) -> io::Result<CacheBind> {
    let host = domain_dir(root, CacheDomain::Verify).join(crate::cargo_home::NAME);
    std::fs::create_dir_all(&host)?;
    set_private(&root.join(CACHE_DIR))?;
    set_private(&host)?;
    Ok(CacheBind::named(&host, crate::cargo_home::NAME))
}

/// The size of one cache.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CacheUsage {
    /// `exec` or `verify`.
    pub domain: &'static str,
    /// The cache's name (`go-build`, `cargo-target`, …).
    pub name: String,
    /// Bytes of the regular files in it.
    pub bytes: u64,
    /// Number of regular files in it.
    pub files: u64,
}

/// Every cache of the workspace `root` with its size, by domain then name; `exec_cargo_home`
/// is the workspace's exec cargo home (outside the workspace), listed as `exec`/`cargo-home`
/// when it exists.
pub fn status(root: &Path, exec_cargo_home: Option<&Path>) -> io::Result<Vec<CacheUsage>> {
    let mut out = Vec::new();
    if let Some(home) = exec_cargo_home.filter(|h| h.is_dir()) {
        let (bytes, files) = usage(home);
        out.push(CacheUsage {
            domain: CacheDomain::Exec.name(),
            name: crate::cargo_home::NAME.to_string(),
            bytes,
            files,
        });
    }
    for domain in CacheDomain::ALL {
        let dir = domain_dir(root, domain);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut names: Vec<_> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.file_name())
            .collect();
        names.sort();
        for name in names {
            let (bytes, files) = usage(&dir.join(&name));
            out.push(CacheUsage {
                domain: domain.name(),
                name: name.to_string_lossy().into_owned(),
                bytes,
                files,
            });
        }
    }
    Ok(out)
}

fn usage(dir: &Path) -> (u64, u64) {
    let mut bytes = 0;
    let mut files = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.filter_map(Result::ok) {
            let Ok(m) = std::fs::symlink_metadata(e.path()) else {
                continue;
            };
            if m.is_dir() {
                stack.push(e.path());
            } else if m.is_file() {
                bytes += m.len();
                files += 1;
            }
        }
    }
    (bytes, files)
}

/// Removes every cache of the workspace `root` (both domains, and its exec cargo home
/// `exec_cargo_home`); returns the bytes freed. The next run starts from empty caches (a Rust
/// workspace's target cache is seeded again; its packages are fetched again).
pub fn drop_all(root: &Path, exec_cargo_home: Option<&Path>) -> io::Result<u64> {
    let freed = status(root, exec_cargo_home)?.iter().map(|u| u.bytes).sum();
    remove_tree(&root.join(CACHE_DIR))?;
    if let Some(home) = exec_cargo_home {
        remove_tree(home)?;
    }
    Ok(freed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_are_apart_and_seeding_copies_the_workspace_target() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("Cargo.toml"), "[package]").unwrap();
        std::fs::create_dir_all(ws.path().join("target/debug")).unwrap();
        std::fs::write(ws.path().join("target/debug/x.rlib"), "rlib").unwrap();
        let exec = prepare(ws.path(), CacheDomain::Exec, &[]).unwrap();
        let verify = prepare(ws.path(), CacheDomain::Verify, &[]).unwrap();
        for a in &exec.binds {
            let b = verify.binds.iter().find(|b| b.inside == a.inside).unwrap();
            assert_ne!(a.host, b.host);
            assert!(a.host.starts_with(ws.path().join(".airlock/cache")));
        }
        // jest's cache only for verification runs (only their plan points jest at it).
        let jest = |c: &RunCaches| c.binds.iter().any(|b| b.inside.ends_with("jest"));
        assert!(jest(&verify) && !jest(&exec));
        let seeded = domain_dir(ws.path(), CacheDomain::Verify).join("cargo-target/debug/x.rlib");
        assert_eq!(std::fs::read(seeded).unwrap(), b"rlib");
        assert!(exec.env.iter().any(|(k, _)| k == "GOCACHE"));
        let home = tempfile::tempdir().unwrap();
        let cargo_home = home.path().join("cargo-home/ws-1");
        std::fs::create_dir_all(cargo_home.join("registry")).unwrap();
        std::fs::write(cargo_home.join("registry/x.crate"), "crate").unwrap();
        let st = status(ws.path(), Some(&cargo_home)).unwrap();
        assert!(
            st.iter()
                .any(|u| u.domain == "verify" && u.name == "cargo-target" && u.bytes == 4)
        );
        assert!(
            st.iter()
                .any(|u| u.domain == "exec" && u.name == "cargo-home" && u.bytes == 5)
        );
        assert_eq!(drop_all(ws.path(), Some(&cargo_home)).unwrap(), 13);
        assert!(status(ws.path(), Some(&cargo_home)).unwrap().is_empty());
        assert!(!cargo_home.exists());
    }
}
