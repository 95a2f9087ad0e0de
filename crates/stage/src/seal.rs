//! The seal of a verdict: what a passing verification is bound to beyond the changeset hash —
//! the base tree it ran on ([`BaseFingerprint`]), the command and environment it ran with, and
//! the concerns it raised — authenticated with a key kept in the operator's state directory
//! ([`VerdictKey`]), so a verdict row written or edited by anything but airlock's verify path is
//! refused at apply.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::path::Path;

use airlock_types::{Concern, Verdict, VerdictSource};
use serde::{Deserialize, Serialize};

/// A key that authenticates verdicts: 32 random bytes in a file only the operator can read.
pub struct VerdictKey([u8; 32]);

impl std::fmt::Debug for VerdictKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("VerdictKey(..)")
    }
}

/// The key file's name in the operator's state directory.
pub const KEY_FILE: &str = "verdict.key";

impl VerdictKey {
    /// Loads the key from `dir/verdict.key`, creating the directory (0700) and a fresh key
    /// (0600) when there is none. A key file of the wrong size is an error, never replaced
    /// silently.
    pub fn load_or_create(dir: &Path) -> io::Result<VerdictKey> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let path = dir.join(KEY_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let key: [u8; 32] = bytes.as_slice().try_into().map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "{} is not a verdict key (expected 32 bytes, found {}); remove it to make a new one",
                            path.display(),
                            bytes.len()
                        ),
                    )
                })?;
                Ok(VerdictKey(key))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)?;
                let mut key = [0u8; 32];
                std::fs::File::open("/dev/urandom")?.read_exact(&mut key)?;
                let tmp = dir.join(format!(".{KEY_FILE}.{}", std::process::id()));
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&tmp)?;
                f.write_all(&key)?;
                f.sync_all()?;
                // Another process may have made one meanwhile: theirs wins (hard link fails).
                match std::fs::hard_link(&tmp, &path) {
                    Ok(()) => {
                        let _ = std::fs::remove_file(&tmp);
                        Ok(VerdictKey(key))
                    }
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        let _ = std::fs::remove_file(&tmp);
                        VerdictKey::load_or_create(dir)
                    }
                    Err(e) => {
                        let _ = std::fs::remove_file(&tmp);
                        Err(e)
                    }
                }
            }
            Err(e) => Err(e),
        }
    }

    /// A key from bytes (tests).
    pub fn from_bytes(bytes: [u8; 32]) -> VerdictKey {
        VerdictKey(bytes)
    }
}

/// A fingerprint of the workspace tree a verification ran on: per top-level name, a hash of
/// every entry's path, type, size, modification time and inode below it (`.git` and `.airlock`
/// left out). Apply compares it with the tree now and names the top-level entries that moved.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseFingerprint(pub BTreeMap<String, String>);

/// Entries read at most for one fingerprint; a larger tree is fingerprinted by its first
/// entries and a marker, so it still changes when they do (and refuses when it cannot tell).
const MAX_ENTRIES: usize = 2_000_000;

impl BaseFingerprint {
    /// The fingerprint of the tree at `root` now.
    pub fn of(root: &Path) -> io::Result<BaseFingerprint> {
        use std::os::unix::fs::MetadataExt;
        let mut out = BTreeMap::new();
        let mut budget = MAX_ENTRIES;
        let mut names: Vec<_> = std::fs::read_dir(root)?.flatten().collect();
        names.sort_by_key(|e| e.file_name());
        for e in names {
            let name = e.file_name().to_string_lossy().into_owned();
            if name == ".git" || name == crate::STATE_DIR {
                continue;
            }
            let mut h = blake3::Hasher::new();
            let m = e.path().symlink_metadata()?;
            h.update(&[m.file_type().is_dir() as u8]);
            h.update(&m.size().to_le_bytes());
            h.update(&m.mtime().to_le_bytes());
            h.update(&m.mtime_nsec().to_le_bytes());
            h.update(&m.ino().to_le_bytes());
            h.update(&m.mode().to_le_bytes());
            if m.is_dir() {
                hash_dir(&e.path(), &mut h, &mut budget)?;
            }
            out.insert(name, h.finalize().to_hex()[..32].to_string());
        }
        Ok(BaseFingerprint(out))
    }

    /// The top-level names whose entries differ between `self` (the verified base) and
    /// `now`, with how (`changed`, `added`, `removed`).
    pub fn moved(&self, now: &BaseFingerprint) -> Vec<String> {
        let mut out = Vec::new();
        for (k, v) in &self.0 {
            match now.0.get(k) {
                None => out.push(format!("`{k}` removed")),
                Some(w) if w != v => out.push(format!("`{k}` changed")),
                _ => {}
            }
        }
        for k in now.0.keys() {
            if !self.0.contains_key(k) {
                out.push(format!("`{k}` added"));
            }
        }
        out
    }
}

fn hash_dir(dir: &Path, h: &mut blake3::Hasher, budget: &mut usize) -> io::Result<()> {
    use std::os::unix::fs::{DirEntryExt, MetadataExt};
    let mut entries: Vec<_> = match std::fs::read_dir(dir) {
        Ok(r) => r.flatten().collect(),
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            h.update(b"\0unreadable");
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        if *budget == 0 {
            h.update(b"\0truncated");
            return Ok(());
        }
        *budget -= 1;
        let name = e.file_name();
        h.update(name.as_encoded_bytes());
        h.update(&e.ino().to_le_bytes());
        let Ok(m) = e.metadata() else {
            h.update(b"\0gone");
            continue;
        };
        h.update(&m.size().to_le_bytes());
        h.update(&m.mtime().to_le_bytes());
        h.update(&m.mtime_nsec().to_le_bytes());
        h.update(&m.mode().to_le_bytes());
        if m.is_dir() {
            hash_dir(&e.path(), h, budget)?;
        }
    }
    Ok(())
}

/// What a verdict is bound to besides its changeset, stored beside it and authenticated.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerdictSeal {
    /// The base tree the run read.
    pub base: BaseFingerprint,
    /// A hash of the argv and the environment the tests ran with.
    pub run: String,
    /// What the verification found that makes apply the operator's decision.
    pub concerns: Vec<Concern>,
    /// The authentication tag (hex), over the record and everything above.
    #[serde(default)]
    pub mac: String,
}

impl VerdictSeal {
    fn tag(
        &self,
        key: &VerdictKey,
        changeset: &str,
        verdict: Verdict,
        source: VerdictSource,
    ) -> String {
        let mut h = blake3::Hasher::new_keyed(&key.0);
        let mut field = |b: &[u8]| {
            h.update(&(b.len() as u64).to_le_bytes());
            h.update(b);
        };
        field(b"airlock-verdict-seal-v1");
        field(changeset.as_bytes());
        field(verdict.name().as_bytes());
        field(source.as_str().as_bytes());
        field(self.run.as_bytes());
        for (k, v) in &self.base.0 {
            field(k.as_bytes());
            field(v.as_bytes());
        }
        field(b"concerns");
        for c in &self.concerns {
            field(c.name().as_bytes());
        }
        h.finalize().to_hex().to_string()
    }

    /// Sets the tag for a record of `changeset`, `verdict` and `source`.
    pub fn sign(
        &mut self,
        key: &VerdictKey,
        changeset: &str,
        verdict: Verdict,
        source: VerdictSource,
    ) {
        self.mac = self.tag(key, changeset, verdict, source);
    }

    /// True when the tag matches (compared in constant time).
    pub fn authentic(
        &self,
        key: &VerdictKey,
        changeset: &str,
        verdict: Verdict,
        source: VerdictSource,
    ) -> bool {
        let want = self.tag(key, changeset, verdict, source);
        let (a, b) = (want.as_bytes(), self.mac.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seal_is_bound_to_its_record_and_key() {
        let key = VerdictKey::from_bytes([7; 32]);
        let mut seal = VerdictSeal {
            run: "r".into(),
            concerns: vec![Concern::TestConfig],
            ..VerdictSeal::default()
        };
        seal.sign(&key, "abc", Verdict::Passed, VerdictSource::Detected);
        assert!(seal.authentic(&key, "abc", Verdict::Passed, VerdictSource::Detected));
        assert!(!seal.authentic(&key, "abd", Verdict::Passed, VerdictSource::Detected));
        assert!(!seal.authentic(&key, "abc", Verdict::Failed, VerdictSource::Detected));
        assert!(!seal.authentic(
            &VerdictKey::from_bytes([8; 32]),
            "abc",
            Verdict::Passed,
            VerdictSource::Detected
        ));
        let mut cleared = seal.clone();
        cleared.concerns.clear();
        assert!(!cleared.authentic(&key, "abc", Verdict::Passed, VerdictSource::Detected));
    }

    #[test]
    fn a_key_is_made_once_and_kept() {
        let d = tempfile::tempdir().unwrap();
        let a = VerdictKey::load_or_create(&d.path().join("state")).unwrap();
        let b = VerdictKey::load_or_create(&d.path().join("state")).unwrap();
        assert_eq!(a.0, b.0);
        std::fs::write(d.path().join("state").join(KEY_FILE), b"short").unwrap();
        assert!(VerdictKey::load_or_create(&d.path().join("state")).is_err());
    }

    #[test]
    fn the_base_fingerprint_names_what_moved() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("src")).unwrap();
        std::fs::write(d.path().join("src/a.rs"), "a").unwrap();
        std::fs::write(d.path().join("README"), "r").unwrap();
        let before = BaseFingerprint::of(d.path()).unwrap();
        assert!(
            before
                .moved(&BaseFingerprint::of(d.path()).unwrap())
                .is_empty()
        );
        std::fs::write(d.path().join("src/a.rs"), "changed").unwrap();
        std::fs::write(d.path().join("new"), "n").unwrap();
        let moved = before.moved(&BaseFingerprint::of(d.path()).unwrap());
        assert_eq!(moved, ["`src` changed", "`new` added"]);
    }
}
