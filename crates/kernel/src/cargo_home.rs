//! The verify domain's cargo home: what a verification reads of the workspace's cargo package
//! cache, checked on the host.
//!
//! A command granted network writes the workspace's exec cargo home
//! ([`crate::exec`]'s `cargo_cache`): extracted sources, archives, `config.toml`, the index.
//! A verification never reads that directory. Before it runs, [`seal`] copies into the verify
//! domain's `cargo-home` cache only
//! - the `.crate` archives whose SHA-256 is the checksum a lockfile pins for their name and
//!   version (read on the host, streamed into a private file, then renamed), and
//! - `registry/index/` (cargo's offline resolution reads it). A tampered index entry can change
//!   resolution metadata, never an archive's contents: cargo refuses a lockfile whose checksum
//!   disagrees with the index, and the archive it unpacks is the one checked here.
//!
//! Nothing else: no `config.toml`, `credentials*`, `bin/`, `git/` or `registry/src/`. The
//! verification's cargo unpacks the checked archives into the verify home's own `registry/src`.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The verify cache holding the checked cargo home.
pub const NAME: &str = "cargo-home";

/// The record of the archives copied: `<relative path>\t<size>\t<sha256>` per line.
const RECORD: &str = ".airlock-checked";

/// Registry checksums pinned by a `Cargo.lock`: `<name>-<version>.crate` → SHA-256 (hex).
/// Only `[[package]]` entries with a registry `source` and a well-formed `checksum`.
pub fn lock_checksums(lock: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let Ok(table) = lock.parse::<toml::Table>() else {
        return out;
    };
    let Some(packages) = table.get("package").and_then(|p| p.as_array()) else {
        return out;
    };
    for p in packages {
        let get = |k: &str| p.get(k).and_then(|v| v.as_str());
        let (Some(name), Some(version), Some(source), Some(sum)) =
            (get("name"), get("version"), get("source"), get("checksum"))
        else {
            continue;
        };
        let plain = |s: &str| !s.is_empty() && !s.contains(['/', '\0']) && !s.starts_with('.');
        let hex = sum.len() == 64 && sum.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        let registry = source.starts_with("registry+") || source.starts_with("sparse+");
        if registry && hex && plain(name) && plain(version) {
            out.insert(format!("{name}-{version}.crate"), sum.to_string());
        }
    }
    out
}

/// The checksums a verification accepts: those of the workspace's `Cargo.lock` on disk, then
/// those the staged one adds. A staged lockfile cannot change the checksum the workspace's
/// lockfile pins for a name and version (the disk's wins); it can only pin new ones.
/// Also returns how many pins of the staged lockfile were overruled so.
pub fn pins(disk: Option<&str>, staged: Option<&str>) -> (HashMap<String, String>, usize) {
    let mut out = disk.map(lock_checksums).unwrap_or_default();
    let mut overruled = 0;
    for (file, sum) in staged.map(lock_checksums).unwrap_or_default() {
        match out.get(&file) {
            Some(have) if *have != sum => overruled += 1,
            Some(_) => {}
            None => {
                out.insert(file, sum);
            }
        }
    }
    (out, overruled)
}

/// What [`seal`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Sealed {
    /// Archives copied this time (checked).
    pub copied: u64,
    /// Archives already in the verify home with the pinned checksum.
    pub kept: u64,
    /// Archives of the exec cache whose contents did not match the pinned checksum: left out.
    pub mismatched: u64,
    /// Archives of the exec cache that no lockfile pins: left out.
    pub unpinned: u64,
    /// Archives removed from the verify home (unrecorded, or pinned differently now).
    pub removed: u64,
    /// Index files copied this time.
    pub index_files: u64,
}

/// Copies into `verify` (the verify domain's cargo home) what a verification may read of
/// `exec` (the exec domain's): the archives whose SHA-256 matches `pins`, and the registry
/// index. Files are read through descriptors opened without following links and only when
/// they resolve inside `exec`; copies are new files, never links to the exec side's inodes.
pub fn seal(exec: &Path, verify: &Path, pins: &HashMap<String, String>) -> io::Result<Sealed> {
    std::fs::create_dir_all(verify)?;
    let exec = exec.canonicalize()?;
    let mut record = read_record(verify);
    let mut out = Sealed::default();
    // The verify home's archives: each must be recorded with the checksum pinned now (or be
    // pinned by nothing); anything else goes, with what cargo unpacked from it.
    for (idx, file) in archives(&verify.join("registry/cache")) {
        let rel = format!("registry/cache/{idx}/{file}");
        let ok = match (record.get(&rel), pins.get(&file)) {
            (Some((_, sum)), Some(pin)) => sum == pin,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if !ok {
            forget(verify, &idx, &file, &rel, &mut record)?;
            out.removed += 1;
        }
    }
    for (idx, file) in archives(&exec.join("registry/cache")) {
        let Some(pin) = pins.get(&file) else {
            out.unpinned += 1;
            continue;
        };
        let rel = format!("registry/cache/{idx}/{file}");
        let dest = verify.join(&rel);
        if let Some((size, sum)) = record.get(&rel)
            && sum == pin
            && std::fs::symlink_metadata(&dest).is_ok_and(|m| m.is_file() && m.len() == *size)
        {
            out.kept += 1;
            continue;
        }
        match copy_checked(&exec.join(&rel), &exec, &dest, Some(pin)) {
            Ok(Some((size, sum))) => {
                // What cargo unpacked from an earlier archive of that name is stale.
                remove_tree(&extracted(verify, &idx, &file))?;
                record.insert(rel, (size, sum));
                out.copied += 1;
            }
            Ok(None) | Err(_) => {
                if record.contains_key(&rel) || dest.exists() {
                    forget(verify, &idx, &file, &rel, &mut record)?;
                    out.removed += 1;
                }
                out.mismatched += 1;
            }
        }
    }
    write_record(verify, &record)?;
    out.index_files = copy_index(
        &exec,
        &exec.join("registry/index"),
        &verify.join("registry/index"),
    )?;
    Ok(out)
}

/// `(index directory, file name)` of every regular `*.crate` file under `cache`, skipping
/// links and names starting with a dot.
fn archives(cache: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for idx in real_entries(cache).into_iter().filter(|(_, t)| t.is_dir()) {
        for (file, t) in real_entries(&cache.join(&idx.0)) {
            if t.is_file() && file.ends_with(".crate") && !file.starts_with('.') {
                out.push((idx.0.clone(), file));
            }
        }
    }
    out
}

/// The entries of `dir` with their types (links not followed); names that are not UTF-8, and
/// the temporary files of [`copy_checked`], left out.
fn real_entries(dir: &Path) -> Vec<(String, std::fs::FileType)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let t = e.file_type().ok()?;
            (!name.ends_with(".airlock-tmp")).then_some((name, t))
        })
        .collect()
}

/// Where cargo unpacks the archive `file` of index directory `idx`.
fn extracted(home: &Path, idx: &str, file: &str) -> PathBuf {
    home.join("registry/src")
        .join(idx)
        .join(file.trim_end_matches(".crate"))
}

fn forget(
    verify: &Path,
    idx: &str,
    file: &str,
    rel: &str,
    record: &mut HashMap<String, (u64, String)>,
) -> io::Result<()> {
    record.remove(rel);
    match std::fs::remove_file(verify.join(rel)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    remove_tree(&extracted(verify, idx, file))
}

/// Removes `p` whatever its depth or modes (a sandboxed command writes the caches; a missing
/// `p` is gone already): [`airlock_sandbox::tree`].
fn remove_tree(p: &Path) -> io::Result<()> {
    airlock_sandbox::tree::remove_tree_counted(p).map(drop)
}

/// Copies the regular file `src` (inside `root`) to `dest` through a temporary file, hashing
/// what it copies: `Some((size, sha256))` once renamed into place, `None` (nothing written)
/// when `want` is given and differs. The source is opened without following a link, and its
/// descriptor must resolve inside `root` (no swapped directory leads elsewhere).
fn copy_checked(
    src: &Path,
    root: &Path,
    dest: &Path,
    want: Option<&str>,
) -> io::Result<Option<(u64, String)>> {
    use std::os::fd::AsRawFd;
    let mut from = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(src)?;
    let meta = from.metadata()?;
    let real = std::fs::read_link(format!("/proc/self/fd/{}", from.as_raw_fd()))?;
    if !meta.is_file() || !real.starts_with(root) {
        return Ok(None);
    }
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let tmp = dest.with_file_name(format!(
        ".{}.airlock-tmp",
        dest.file_name().unwrap_or_default().to_string_lossy()
    ));
    let mut to = std::fs::File::create(&tmp)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut size = 0u64;
    let copied = (|| -> io::Result<()> {
        loop {
            let n = from.read(&mut buf)?;
            if n == 0 {
                return Ok(());
            }
            hasher.update(&buf[..n]);
            to.write_all(&buf[..n])?;
            size += n as u64;
        }
    })();
    let sum: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if let Err(e) = copied {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if want.is_some_and(|w| w != sum) {
        drop(to);
        std::fs::remove_file(&tmp)?;
        return Ok(None);
    }
    // Keep the source's modification time: the index copy compares it.
    to.set_modified(meta.modified()?)?;
    drop(to);
    std::fs::rename(&tmp, dest)?;
    Ok(Some((size, sum)))
}

/// Copies the regular files under `src` (links skipped) to `dst` where missing or differing
/// in size or modification time; returns how many were copied.
fn copy_index(root: &Path, src: &Path, dst: &Path) -> io::Result<u64> {
    let mut copied = 0;
    for (name, t) in real_entries(src) {
        let (from, to) = (src.join(&name), dst.join(&name));
        if t.is_dir() {
            copied += copy_index(root, &from, &to)?;
        } else if t.is_file() {
            let (Ok(a), b) = (std::fs::symlink_metadata(&from), std::fs::metadata(&to)) else {
                continue;
            };
            if b.is_ok_and(|b| {
                b.len() == a.len()
                    && b.modified().ok().is_some()
                    && b.modified().ok() == a.modified().ok()
            }) {
                continue;
            }
            // A file that cannot be read (gone, or a link swapped in) is skipped: cargo fails
            // offline if it needs it.
            if let Ok(Some(_)) = copy_checked(&from, root, &to, None) {
                copied += 1;
            }
        }
    }
    Ok(copied)
}

fn read_record(verify: &Path) -> HashMap<String, (u64, String)> {
    let text = std::fs::read_to_string(verify.join(RECORD)).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut f = l.split('\t');
            let (rel, size, sum) = (f.next()?, f.next()?.parse().ok()?, f.next()?);
            Some((rel.to_string(), (size, sum.to_string())))
        })
        .collect()
}

fn write_record(verify: &Path, record: &HashMap<String, (u64, String)>) -> io::Result<()> {
    let mut lines: Vec<String> = record
        .iter()
        .map(|(rel, (size, sum))| format!("{rel}\t{size}\t{sum}\n"))
        .collect();
    lines.sort();
    let tmp = verify.join(format!("{RECORD}.tmp"));
    std::fs::write(&tmp, lines.concat())?;
    std::fs::rename(tmp, verify.join(RECORD))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(bytes: &[u8]) -> String {
        Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    fn lock(entries: &[(&str, &str, &str)]) -> String {
        let mut s = String::from("version = 4\n");
        for (name, version, sum) in entries {
            s.push_str(&format!(
                "\n[[package]]\nname = \"{name}\"\nversion = \"{version}\"\n\
                 source = \"registry+https://github.com/rust-lang/crates.io-index\"\n\
                 checksum = \"{sum}\"\n"
            ));
        }
        s.push_str("\n[[package]]\nname = \"local\"\nversion = \"0.1.0\"\n");
        s
    }

    #[test]
    fn only_archives_matching_the_lockfile_reach_the_verify_home() {
        let t = tempfile::tempdir().unwrap();
        let (exec, verify) = (t.path().join("exec"), t.path().join("verify"));
        let idx = "index.crates.io-1949cf8c6b5b557f";
        let cache = exec.join("registry/cache").join(idx);
        std::fs::create_dir_all(&cache).unwrap();
        std::fs::create_dir_all(exec.join("registry/index").join(idx).join(".cache/it/oa"))
            .unwrap();
        std::fs::write(
            exec.join("registry/index").join(idx).join("config.json"),
            "{}",
        )
        .unwrap();
        let entry = Path::new("registry/index")
            .join(idx)
            .join(".cache/it/oa/itoa");
        std::fs::write(exec.join(&entry), "index entry").unwrap();
        std::fs::create_dir_all(exec.join("registry/src").join(idx).join("good-1.0.0")).unwrap();
        std::fs::write(exec.join("config.toml"), "[build]\nrustc-wrapper = \"x\"\n").unwrap();
        std::fs::write(cache.join("good-1.0.0.crate"), b"genuine").unwrap();
        std::fs::write(cache.join("bad-1.0.0.crate"), b"tampered").unwrap();
        std::fs::write(cache.join("extra-1.0.0.crate"), b"extra").unwrap();
        std::os::unix::fs::symlink(
            cache.join("good-1.0.0.crate"),
            cache.join("link-1.0.0.crate"),
        )
        .unwrap();
        let disk = lock(&[
            ("good", "1.0.0", &sha(b"genuine")),
            ("bad", "1.0.0", &sha(b"genuine bad")),
            ("link", "1.0.0", &sha(b"genuine")),
        ]);
        // A staged lockfile may add pins, not change the disk's.
        let staged = lock(&[
            ("bad", "1.0.0", &sha(b"tampered")),
            ("new", "2.0.0", &sha(b"new")),
        ]);
        let (pins, overruled) = pins(Some(&disk), Some(&staged));
        assert_eq!(overruled, 1);
        assert_eq!(pins.len(), 4, "{pins:?}");
        let r = seal(&exec, &verify, &pins).unwrap();
        assert_eq!((r.copied, r.mismatched, r.unpinned), (1, 1, 1), "{r:?}");
        let vcache = verify.join("registry/cache").join(idx);
        assert_eq!(
            std::fs::read(vcache.join("good-1.0.0.crate")).unwrap(),
            b"genuine"
        );
        assert!(!vcache.join("bad-1.0.0.crate").exists());
        assert!(!vcache.join("extra-1.0.0.crate").exists());
        assert!(!vcache.join("link-1.0.0.crate").exists());
        assert!(!verify.join("config.toml").exists() && !verify.join("registry/src").exists());
        assert!(
            verify
                .join("registry/index")
                .join(idx)
                .join("config.json")
                .is_file()
        );
        assert_eq!(std::fs::read(verify.join(&entry)).unwrap(), b"index entry");
        // A copy, not a link to the exec side's inode.
        use std::os::unix::fs::MetadataExt;
        let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
        assert_ne!(
            ino(&cache.join("good-1.0.0.crate")),
            ino(&vcache.join("good-1.0.0.crate"))
        );
        // Again: nothing to copy. The exec side then swaps the archive: the checked copy stays.
        let r = seal(&exec, &verify, &pins).unwrap();
        assert_eq!((r.copied, r.kept, r.index_files), (0, 1, 0), "{r:?}");
        std::fs::write(cache.join("good-1.0.0.crate"), b"swapped").unwrap();
        seal(&exec, &verify, &pins).unwrap();
        assert_eq!(
            std::fs::read(vcache.join("good-1.0.0.crate")).unwrap(),
            b"genuine"
        );
        // An archive the verify side holds but never recorded goes, with what was unpacked.
        std::fs::write(vcache.join("planted-1.0.0.crate"), b"x").unwrap();
        let unpacked = verify.join("registry/src").join(idx).join("planted-1.0.0");
        std::fs::create_dir_all(&unpacked).unwrap();
        let r = seal(&exec, &verify, &pins).unwrap();
        assert_eq!(r.removed, 1, "{r:?}");
        assert!(!vcache.join("planted-1.0.0.crate").exists() && !unpacked.exists());
    }

    #[test]
    fn lockfile_checksums_are_read_for_registry_packages_only() {
        let sum = "a".repeat(64);
        let text = format!(
            "version = 4\n[[package]]\nname = \"g\"\nversion = \"1.0.0\"\n\
             source = \"git+https://example.com/g\"\nchecksum = \"{sum}\"\n\
             [[package]]\nname = \"s\"\nversion = \"1.0.0\"\n\
             source = \"sparse+https://example.com/index/\"\nchecksum = \"{sum}\"\n\
             [[package]]\nname = \"../x\"\nversion = \"1.0.0\"\n\
             source = \"registry+https://x\"\nchecksum = \"{sum}\"\n\
             [[package]]\nname = \"short\"\nversion = \"1.0.0\"\n\
             source = \"registry+https://x\"\nchecksum = \"abc\"\n"
        );
        let got = lock_checksums(&text);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got["s-1.0.0.crate"], sum);
        assert!(lock_checksums("not toml [[").is_empty());
    }
}
