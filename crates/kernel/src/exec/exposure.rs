//! What a sandboxed command (`bash`, `verify`) may see of the host's and the workspace's
//! secrets.
//!
//! - **Toolchains by allow-list.** `$HOME` inside the sandbox is an empty tmpfs; only the paths
//!   of [`TOOLCHAIN_PATHS`] that exist are bound into it, read-only: a toolchain's binaries and
//!   content caches, never its whole directory (`~/.cargo/credentials.toml`, `~/.npm/_logs`
//!   and `~/.cargo/config.toml` stay out).
//! - **Credential mask.** Whatever the allow-list grows to, credential-named entries found in
//!   an exposed path ([`airlock_policy::jail::host_credential_components`]) are masked:
//!   `/dev/null` over a file, an empty read-only directory over a directory. The scan reads each
//!   exposed directory and, down to [`HOME_SCAN_DEPTH`] levels below `$HOME`, the directories
//!   in it, through the same cached walk as the workspace.
//! - **Workspace secrets.** Every path of the workspace and of the staged changes that the jail
//!   calls sensitive (`.env`, `.env.*`, keys, `.ssh/`, `.git/config`, …) is masked the same
//!   way, except those the operator exposes (`[sandbox] expose_sensitive` in the user config).
//!   The workspace is scanned in full, with a per-session cache ([`WorkspaceIndex`]) that
//!   re-reads only directories whose change time moved.

use airlock_policy::RelPath;
use globset::GlobMatcher;
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// The toolchain paths under `$HOME` a build or test run reads, exposed read-only when they
/// exist. One list for `bash` and `verify`:
///
/// - cargo/rustup: binaries, the registry's index, crate archives and unpacked sources, git
///   dependencies, and rustup's toolchains and settings (its proxies read `settings.toml`);
/// - npm: the content-addressed cache (`_cacache`) and `npx`'s packages, not `_logs`;
/// - go: the module cache and installed binaries;
/// - pyenv, nvm, volta, bun, deno: installed versions, shims and binaries;
/// - `~/.local/bin` and `~/.local/lib` (Python's user site).
///
/// `~/.cargo/config.toml` is not exposed: it is where `cargo login` may keep a registry token.
/// Registry mirrors and source replacement a build needs go in the workspace's own
/// `.cargo/config.toml`.
pub const TOOLCHAIN_PATHS: &[&str] = &[
    ".cargo/bin",
    ".cargo/env",
    ".cargo/registry/index",
    ".cargo/registry/cache",
    ".cargo/registry/src",
    ".cargo/git/db",
    ".cargo/git/checkouts",
    ".rustup/toolchains",
    ".rustup/settings.toml",
    ".rustup/update-hashes",
    ".npm/_cacache",
    ".npm/_npx",
    "go/pkg/mod",
    "go/bin",
    ".pyenv/bin",
    ".pyenv/libexec",
    ".pyenv/plugins",
    ".pyenv/pyenv.d",
    ".pyenv/shims",
    ".pyenv/versions",
    ".pyenv/version",
    ".nvm/nvm.sh",
    ".nvm/alias",
    ".nvm/versions",
    ".volta/bin",
    ".volta/tools",
    ".bun/bin",
    ".bun/install/cache",
    ".deno/bin",
    ".local/bin",
    ".local/lib",
];

/// How deep below `$HOME` the credential scan reads (each exposed directory's own entries are
/// always read): `~/.cargo/credentials.toml` (2) and `~/.cargo/registry/credentials.toml` (3)
/// are found even if a whole `~/.cargo` were exposed.
pub const HOME_SCAN_DEPTH: usize = 3;

/// The toolchain exposure of one `$HOME`.
#[derive(Debug, Default, Clone)]
pub struct HomeExposure {
    /// Absolute paths bound read-only.
    pub binds: Vec<PathBuf>,
    /// Absolute paths inside `binds` to mask (credential files and directories).
    pub masked: Vec<PathBuf>,
}

/// The exposure of the caller's `$HOME` (none without one, or a relative one); `cache` keeps
/// the credential scan's per-directory results between runs.
pub fn home_exposure(home: Option<&Path>, cache: Option<&Path>) -> HomeExposure {
    match home {
        Some(home) if home.is_absolute() => home_exposure_of(home, TOOLCHAIN_PATHS, cache),
        _ => HomeExposure::default(),
    }
}

/// Most bytes of a PEM file read to judge it.
const PEM_MAX: u64 = 16 << 20;

/// True for a regular file named `*.pem` that holds only certificates or public keys (PEM
/// blocks, none of them a private key, encrypted or not): public material such as a CA
/// bundle (`certifi/cacert.pem`), which the tests may read. Anything else (a private key, a
/// file too large or unreadable, a link) is not.
pub(crate) fn public_pem(abs: &Path) -> bool {
    use std::io::Read;
    let named = abs
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.to_ascii_lowercase().ends_with(".pem"));
    let Ok(md) = std::fs::symlink_metadata(abs) else {
        return false;
    };
    if !named || !md.is_file() || md.len() > PEM_MAX {
        return false;
    }
    let mut text = String::new();
    let read = std::fs::File::open(abs).and_then(|f| f.take(PEM_MAX).read_to_string(&mut text));
    if read.is_err() {
        return false;
    }
    let mut blocks = 0;
    for line in text.lines() {
        let Some(label) = line.trim().strip_prefix("-----BEGIN ") else {
            continue;
        };
        let label = label.trim_end_matches('-').trim();
        if !matches!(
            label,
            "CERTIFICATE" | "TRUSTED CERTIFICATE" | "X509 CRL" | "PUBLIC KEY"
        ) {
            return false;
        }
        blocks += 1;
    }
    blocks > 0 && !text.contains("PRIVATE KEY")
}

/// The exposure of `home` for the allow-list `paths` (relative to `home`).
pub fn home_exposure_of(home: &Path, paths: &[&str], cache: Option<&Path>) -> HomeExposure {
    let mut out = HomeExposure::default();
    let mut dirs = Vec::new();
    for rel in paths {
        let rel = Path::new(rel);
        let abs = home.join(rel);
        // A symlink could point anywhere on the host: only real files and directories.
        let Ok(md) = std::fs::symlink_metadata(&abs) else {
            continue;
        };
        if md.file_type().is_symlink() || credential(rel, md.is_dir()) {
            continue;
        }
        if md.is_dir() {
            dirs.push((rel.to_path_buf(), rel.components().count()));
        }
        out.binds.push(abs);
    }
    let mut index = cache.map(WorkspaceIndex::load).unwrap_or_default();
    out.masked = index
        .scan_home(home, &dirs)
        .into_iter()
        .map(|p| home.join(p))
        .collect();
    out.masked.sort();
    if let Some(cache) = cache
        && let Err(e) = index.save(cache)
    {
        tracing::warn!("cannot save the home credential index: {e}");
    }
    out
}

fn credential(rel: &Path, is_dir: bool) -> bool {
    let shown = format!("~/{}", rel.display());
    airlock_policy::jail::host_credential_components(
        rel.components().map(|c| c.as_os_str()),
        is_dir,
        &shown,
    )
    .is_some()
}

/// The sensitive paths of a workspace, found by a full walk whose per-directory results are
/// cached: a directory whose (device, inode, change time, modification time) is unchanged is
/// not read again. A directory's change time moves whenever an entry is added, removed or
/// renamed in it, and cannot be set by a program; entries changed less than
/// [`RACY_SECS`] before a walk are not cached (a second change within the same clock tick
/// would leave the times equal).
#[derive(Debug, Default)]
pub struct WorkspaceIndex {
    dirs: HashMap<PathBuf, DirRecord>,
    /// The last scan read a directory afresh or dropped one: worth saving.
    dirty: bool,
}

/// Seconds within which a directory's change is too recent to trust its cached listing.
pub const RACY_SECS: i64 = 2;

#[derive(Debug, Clone, PartialEq, Eq)]
struct DirRecord {
    key: [i64; 6],
    /// Subdirectories to walk into (not symlinks, not sensitive).
    subdirs: Vec<OsString>,
    /// Sensitive entries.
    sensitive: Vec<OsString>,
}

const CACHE_MAGIC: &[u8; 8] = b"ALSENS01";

impl WorkspaceIndex {
    /// Loads a cache written by [`WorkspaceIndex::save`]; an unreadable or foreign file is an
    /// empty cache.
    pub fn load(path: &Path) -> WorkspaceIndex {
        let mut buf = Vec::new();
        let ok = std::fs::File::open(path)
            .and_then(|mut f| f.read_to_end(&mut buf))
            .is_ok();
        if !ok {
            return WorkspaceIndex::default();
        }
        decode(&buf).unwrap_or_default()
    }

    /// Writes the cache (atomically: a temporary file renamed over `path`), unless the last
    /// scan found every directory as cached.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        if !self.dirty {
            return Ok(());
        }
        let mut buf = CACHE_MAGIC.to_vec();
        put_u64(&mut buf, self.dirs.len() as u64);
        for (p, r) in &self.dirs {
            put_bytes(&mut buf, p.as_os_str().as_bytes());
            for k in r.key {
                put_u64(&mut buf, k as u64);
            }
            for list in [&r.subdirs, &r.sensitive] {
                put_u64(&mut buf, list.len() as u64);
                for n in list {
                    put_bytes(&mut buf, n.as_bytes());
                }
            }
        }
        let tmp = path.with_extension("tmp");
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&buf)?;
        drop(f);
        std::fs::rename(&tmp, path)
    }

    /// Walks `root` and returns its sensitive paths (workspace-relative; a sensitive directory
    /// is returned once, not its content). `.airlock` at the root is skipped (always masked).
    /// Updates the cache.
    pub fn scan(&mut self, root: &Path) -> Vec<RelPath> {
        let classify = |dir: &Path, name: &OsStr, _is_dir: bool| {
            if dir.as_os_str().is_empty() && name == ".airlock" {
                return Entry::Skip;
            }
            match RelPath::new(dir.join(name)) {
                Ok(child) if airlock_policy::jail::sensitive_rule(&child).is_some() => {
                    Entry::Sensitive
                }
                Ok(_) => Entry::Plain,
                Err(_) => Entry::Skip,
            }
        };
        let mut found: Vec<RelPath> = self
            .walk(root, &[(PathBuf::new(), 0)], usize::MAX, &classify)
            .into_iter()
            .filter_map(|p| RelPath::new(p).ok())
            .collect();
        found.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        found
    }

    /// The credential entries of the exposed directories `dirs` (relative to `home`, each with
    /// its depth), down to [`HOME_SCAN_DEPTH`]; paths relative to `home`. Updates the cache.
    pub fn scan_home(&mut self, home: &Path, dirs: &[(PathBuf, usize)]) -> Vec<PathBuf> {
        // Each name is classified with its parent as context (the rules look one name back:
        // `.cargo/config.toml`, `.docker/config.json`), which is all the path adds.
        let classify = |dir: &Path, name: &OsStr, is_dir: bool| {
            let parent = dir.file_name().unwrap_or_default();
            let hit = airlock_policy::jail::host_credential_components(
                [parent, name].into_iter(),
                is_dir,
                "",
            );
            if hit.is_some() {
                Entry::Sensitive
            } else {
                Entry::Plain
            }
        };
        self.walk(home, dirs, HOME_SCAN_DEPTH, &classify)
    }

    /// The cached walk: from each `(start, depth)` below `root`, reads a directory only when
    /// its key changed, descends into subdirectories while the depth is below `max_depth`,
    /// and returns the sensitive entries (relative to `root`).
    fn walk(
        &mut self,
        root: &Path,
        starts: &[(PathBuf, usize)],
        max_depth: usize,
        classify: &dyn Fn(&Path, &OsStr, bool) -> Entry,
    ) -> Vec<PathBuf> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(i64::MAX);
        let mut fresh = HashMap::with_capacity(self.dirs.len());
        let mut found = Vec::new();
        let mut stack: Vec<(PathBuf, usize)> = starts.to_vec();
        // Directories are looked up from the root's descriptor: most of a cached walk's time
        // is path lookups, and the root's own components need not be walked each time.
        let Ok(root_fd) = rustix::fs::open(
            root,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        ) else {
            return found;
        };
        while let Some((rel, depth)) = stack.pop() {
            let st = if rel.as_os_str().is_empty() {
                rustix::fs::fstat(&root_fd)
            } else {
                rustix::fs::statat(&root_fd, &rel, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
            };
            let Ok(st) = st else {
                continue;
            };
            if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::Directory {
                continue;
            }
            // `time_t` is not `i64` on every target.
            #[allow(clippy::unnecessary_cast)]
            let (ctime, mtime) = (st.st_ctime as i64, st.st_mtime as i64);
            let key = [
                st.st_dev as i64,
                st.st_ino as i64,
                ctime,
                st.st_ctime_nsec as i64,
                mtime,
                st.st_mtime_nsec as i64,
            ];
            let record = match self.dirs.remove(&rel) {
                Some(r) if r.key == key => r,
                _ => {
                    self.dirty = true;
                    read_dir_record(root, &rel, key, classify)
                }
            };
            for name in &record.sensitive {
                found.push(rel.join(name));
            }
            if depth < max_depth {
                for name in &record.subdirs {
                    stack.push((rel.join(name), depth + 1));
                }
            }
            let racy = ctime > now - RACY_SECS || mtime > now - RACY_SECS;
            if !racy {
                fresh.insert(rel, record);
            }
        }
        self.dirty |= !self.dirs.is_empty();
        self.dirs = fresh;
        found
    }
}

/// What a walk makes of a directory entry.
enum Entry {
    /// Not walked (airlock's own state).
    Skip,
    /// Masked, and not walked into.
    Sensitive,
    /// Walked into when it is a directory.
    Plain,
}

fn read_dir_record(
    root: &Path,
    rel: &Path,
    key: [i64; 6],
    classify: &dyn Fn(&Path, &OsStr, bool) -> Entry,
) -> DirRecord {
    let mut record = DirRecord {
        key,
        subdirs: Vec::new(),
        sensitive: Vec::new(),
    };
    let Ok(rd) = std::fs::read_dir(root.join(rel)) else {
        return record;
    };
    for entry in rd.flatten() {
        let name = entry.file_name();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        match classify(rel, &name, is_dir) {
            Entry::Skip => {}
            Entry::Sensitive => record.sensitive.push(name),
            Entry::Plain if is_dir => record.subdirs.push(name),
            Entry::Plain => {}
        }
    }
    record
}

/// The workspace-relative paths to mask for a run: the sensitive paths of the workspace
/// (`found`) and of the staged changes (`staged`, every staged path), minus those matching an
/// operator's `expose` glob, without any path below another (a masked directory hides its
/// content already).
pub fn workspace_masks<'a>(
    found: Vec<RelPath>,
    staged: impl Iterator<Item = &'a RelPath>,
    expose: &[GlobMatcher],
) -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = found.iter().map(|r| r.as_path().to_path_buf()).collect();
    // Staged paths none of whose prefixes is sensitive: a path below one (the changeset lists
    // parents first) needs only itself judged, so a deep tree costs one judgement per entry.
    let mut clear: std::collections::HashSet<&Path> = std::collections::HashSet::new();
    for path in staged {
        if path
            .as_path()
            .parent()
            .is_some_and(|parent| clear.contains(parent))
        {
            if airlock_policy::jail::sensitive_rule(path).is_some() {
                all.push(path.as_path().to_path_buf());
            } else {
                clear.insert(path.as_path());
            }
            continue;
        }
        // The shortest sensitive prefix: a staged `.ssh/id_rsa` masks `.ssh`.
        let mut prefix = PathBuf::new();
        let mut sensitive = false;
        for c in path.as_path().components() {
            prefix.push(c);
            if let Ok(r) = RelPath::new(&prefix)
                && airlock_policy::jail::sensitive_rule(&r).is_some()
            {
                all.push(prefix.clone());
                sensitive = true;
                break;
            }
        }
        if !sensitive {
            clear.insert(path.as_path());
        }
    }
    // The root's `.airlock` is masked on its own; an operator's glob never exposes airlock's
    // state.
    all.retain(|p| {
        let Ok(rel) = RelPath::new(p) else {
            return false;
        };
        match airlock_policy::jail::sensitive_rule(&rel) {
            Some(d) if d.rule == "jail_airlock_state" => p != Path::new(".airlock"),
            Some(_) => !expose.iter().any(|g| g.is_match(p)),
            None => false,
        }
    });
    all.sort();
    all.dedup();
    let mut out: Vec<PathBuf> = Vec::with_capacity(all.len());
    for p in all {
        if !out.iter().any(|kept| p.starts_with(kept)) {
            out.push(p);
        }
    }
    out
}

fn put_u64(buf: &mut Vec<u8>, v: u64) {
    buf.extend_from_slice(&v.to_le_bytes());
}

fn put_bytes(buf: &mut Vec<u8>, b: &[u8]) {
    put_u64(buf, b.len() as u64);
    buf.extend_from_slice(b);
}

fn decode(buf: &[u8]) -> Option<WorkspaceIndex> {
    let mut d = buf.strip_prefix(CACHE_MAGIC)?;
    let u64_ = |d: &mut &[u8]| -> Option<u64> {
        let (head, rest) = d.split_first_chunk::<8>()?;
        *d = rest;
        Some(u64::from_le_bytes(*head))
    };
    fn bytes(d: &mut &[u8], n: u64) -> Option<Vec<u8>> {
        let n = usize::try_from(n).ok()?;
        if d.len() < n {
            return None;
        }
        let (head, rest) = d.split_at(n);
        *d = rest;
        Some(head.to_vec())
    }
    let count = u64_(&mut d)?;
    let mut dirs = HashMap::new();
    for _ in 0..count {
        let n = u64_(&mut d)?;
        let path = PathBuf::from(OsString::from_vec(bytes(&mut d, n)?));
        let mut key = [0i64; 6];
        for k in &mut key {
            *k = u64_(&mut d)? as i64;
        }
        let mut lists: [Vec<OsString>; 2] = [Vec::new(), Vec::new()];
        for list in &mut lists {
            let len = u64_(&mut d)?;
            for _ in 0..len {
                let n = u64_(&mut d)?;
                list.push(OsString::from_vec(bytes(&mut d, n)?));
            }
        }
        let [subdirs, sensitive] = lists;
        dirs.insert(
            path,
            DirRecord {
                key,
                subdirs,
                sensitive,
            },
        );
    }
    d.is_empty()
        .then_some(WorkspaceIndex { dirs, dirty: false })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_bundle_is_public_and_a_private_key_is_not() {
        let d = tempfile::tempdir().unwrap();
        let w = |name: &str, body: &str| {
            let p = d.path().join(name);
            std::fs::write(&p, body).unwrap();
            p
        };
        let cert = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        assert!(public_pem(&w(
            "cacert.pem",
            &format!("# a bundle\n{cert}{cert}")
        )));
        assert!(!public_pem(&w(
            "key.pem",
            "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"
        )));
        assert!(!public_pem(&w(
            "both.pem",
            &format!("{cert}-----BEGIN RSA PRIVATE KEY-----\nx\n-----END RSA PRIVATE KEY-----\n")
        )));
        assert!(!public_pem(&w(
            "enc.pem",
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nx\n"
        )));
        assert!(!public_pem(&w("empty.pem", "nothing here")));
        assert!(!public_pem(&w("cert.key", cert)));
    }

    #[test]
    fn home_exposure_binds_the_allow_list_and_masks_credentials() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path();
        for d in [".cargo/bin", ".cargo/registry/index/ix", ".npm/_logs"] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        std::fs::write(home.join(".cargo/credentials.toml"), "t").unwrap();
        std::fs::write(home.join(".cargo/registry/index/api.token"), "t").unwrap();
        std::fs::write(home.join(".cargo/bin/cargo"), "").unwrap();
        let e = home_exposure_of(home, TOOLCHAIN_PATHS, None);
        assert_eq!(
            e.binds,
            vec![home.join(".cargo/bin"), home.join(".cargo/registry/index")]
        );
        assert_eq!(e.masked, vec![home.join(".cargo/registry/index/api.token")]);
        // A wider allow-list still never shows a credential.
        let e = home_exposure_of(home, &[".cargo", ".npm"], None);
        assert!(e.masked.contains(&home.join(".cargo/credentials.toml")));
        assert!(e.masked.contains(&home.join(".npm/_logs")));
        assert!(!e.masked.contains(&home.join(".cargo/bin")));
    }

    #[test]
    fn workspace_index_finds_new_secrets_through_its_cache() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        std::fs::create_dir_all(ws.join("a/b")).unwrap();
        std::fs::write(ws.join(".env"), "x").unwrap();
        std::fs::create_dir_all(ws.join(".airlock")).unwrap();
        std::fs::write(ws.join(".airlock/.env"), "x").unwrap();
        let cache = t.path().join("cache");
        let mut idx = WorkspaceIndex::load(&cache);
        let names = |v: Vec<RelPath>| v.iter().map(|r| r.display()).collect::<Vec<_>>();
        assert_eq!(names(idx.scan(&ws)), vec![".env"]);
        idx.save(&cache).unwrap();
        std::fs::write(ws.join("a/b/id_rsa"), "k").unwrap();
        let mut idx = WorkspaceIndex::load(&cache);
        assert_eq!(names(idx.scan(&ws)), vec![".env", "a/b/id_rsa"]);
        // Entries cached from a directory older than the racy window are reused as they are.
        let mut old = WorkspaceIndex::default();
        old.dirs.insert(
            PathBuf::new(),
            DirRecord {
                key: [0; 6],
                subdirs: vec![],
                sensitive: vec![],
            },
        );
        assert_eq!(names(old.scan(&ws)), vec![".env", "a/b/id_rsa"]);
    }

    #[test]
    fn masks_drop_exposed_and_nested_paths() {
        let r = |s: &str| RelPath::new(s).unwrap();
        let found = vec![r(".env"), r(".env.test"), r(".ssh"), r("k/server.pem")];
        let staged = [r(".ssh/id_rsa"), r("src/a.rs"), r("new/.env.local")];
        let expose = airlock_policy::rules::compile_path_globs(&[".env.test".into()]).unwrap();
        let m = workspace_masks(found, staged.iter(), &expose);
        let want: Vec<PathBuf> = [".env", ".ssh", "k/server.pem", "new/.env.local"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(m, want);
    }
}
