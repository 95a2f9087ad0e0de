//! The proof a verdict carries to apply. An [`Attestation`] is made only by the harness, at
//! the end of a real run, and only it can [seal](Attestation::seal) a verdict: the changeset,
//! the verdict, where its command came from, the base tree the run read, the exact argv and
//! environment, and the concerns, under a keyed BLAKE3 tag with the operator's key. Anything
//! can [check](authentic) a seal; nothing but this path can make one that checks.

use std::io;
use std::path::Path;

use airlock_types::{BaseFingerprint, Concern, Verdict, VerdictKey, VerdictSeal, VerdictSource};

/// What one verification established, as only the harness can state it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attestation {
    changeset: String,
    verdict: Verdict,
    source: VerdictSource,
    base: BaseFingerprint,
    run: String,
    concerns: Vec<Concern>,
}

impl Default for Attestation {
    /// The attestation of nothing: an error verdict with no provenance (a report read back
    /// from JSON carries this one).
    fn default() -> Attestation {
        Attestation {
            changeset: String::new(),
            verdict: Verdict::Error,
            source: VerdictSource::Unrecorded,
            base: BaseFingerprint::default(),
            run: String::new(),
            concerns: Vec::new(),
        }
    }
}

impl Attestation {
    pub(crate) fn new(
        changeset: &str,
        verdict: Verdict,
        source: VerdictSource,
        base: BaseFingerprint,
        run: String,
        mut concerns: Vec<Concern>,
    ) -> Attestation {
        concerns.sort();
        concerns.dedup();
        Attestation {
            changeset: changeset.to_string(),
            verdict,
            source,
            base,
            run,
            concerns,
        }
    }

    /// The verdict it attests.
    pub fn verdict(&self) -> Verdict {
        self.verdict
    }

    /// Where the command came from (downgraded to `partial` for a run of selected tests).
    pub fn source(&self) -> VerdictSource {
        self.source
    }

    /// The concerns, sorted.
    pub fn concerns(&self) -> &[Concern] {
        &self.concerns
    }

    /// The changeset it is for, as the caller named it.
    pub fn changeset(&self) -> &str {
        &self.changeset
    }

    /// The seal of this attestation under `key`.
    pub fn seal(&self, key: &VerdictKey) -> VerdictSeal {
        let mut seal = VerdictSeal {
            base: self.base.clone(),
            run: self.run.clone(),
            concerns: self.concerns.clone(),
            mac: String::new(),
        };
        seal.mac = tag(key, &seal, &self.changeset, self.verdict, self.source);
        seal
    }
}

fn tag(
    key: &VerdictKey,
    seal: &VerdictSeal,
    changeset: &str,
    verdict: Verdict,
    source: VerdictSource,
) -> String {
    let mut h = blake3::Hasher::new_keyed(key.bytes());
    let mut field = |b: &[u8]| {
        h.update(&(b.len() as u64).to_le_bytes());
        h.update(b);
    };
    field(b"airlock-verdict-seal-v1");
    field(changeset.as_bytes());
    field(verdict.name().as_bytes());
    field(source.as_str().as_bytes());
    field(seal.run.as_bytes());
    field(b"base");
    for (k, v) in &seal.base.0 {
        field(k.as_bytes());
        field(v.as_bytes());
    }
    field(b"concerns");
    for c in &seal.concerns {
        field(c.name().as_bytes());
    }
    h.finalize().to_hex().to_string()
}

/// True when `seal` was made by an [`Attestation`] of exactly this changeset, verdict and
/// source under `key` (compared in constant time).
pub fn authentic(
    seal: &VerdictSeal,
    key: &VerdictKey,
    changeset: &str,
    verdict: Verdict,
    source: VerdictSource,
) -> bool {
    let want = tag(key, seal, changeset, verdict, source);
    let (a, b) = (want.as_bytes(), seal.mac.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Entries read at most for one fingerprint; past that the fingerprint says it is truncated.
const MAX_ENTRIES: usize = 2_000_000;

/// The fingerprint of the tree at `root` now: per top-level name, a hash of every entry's
/// name, size, modification time (to the nanosecond) and mode below it (`.git` and `.airlock`
/// left out). Inodes are not part of it, so a workspace copied with its times (`cp -a`) or
/// moved keeps its fingerprint.
pub fn base_fingerprint(root: &Path) -> io::Result<BaseFingerprint> {
    let mut out = std::collections::BTreeMap::new();
    let mut budget = MAX_ENTRIES;
    let mut names: Vec<_> = std::fs::read_dir(root)?.flatten().collect();
    names.sort_by_key(|e| e.file_name());
    for e in names {
        let name = e.file_name().to_string_lossy().into_owned();
        if name == ".git" || name == ".airlock" {
            continue;
        }
        let mut h = blake3::Hasher::new();
        let m = e.path().symlink_metadata()?;
        meta(&mut h, &m);
        if m.is_dir() {
            hash_dir(&e.path(), &mut h, &mut budget)?;
        }
        out.insert(name, h.finalize().to_hex()[..32].to_string());
    }
    Ok(BaseFingerprint(out))
}

fn meta(h: &mut blake3::Hasher, m: &std::fs::Metadata) {
    use std::os::unix::fs::MetadataExt;
    h.update(&m.size().to_le_bytes());
    h.update(&m.mtime().to_le_bytes());
    h.update(&m.mtime_nsec().to_le_bytes());
    h.update(&m.mode().to_le_bytes());
}

fn hash_dir(dir: &Path, h: &mut blake3::Hasher, budget: &mut usize) -> io::Result<()> {
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
        h.update(e.file_name().as_encoded_bytes());
        let Ok(m) = e.metadata() else {
            h.update(b"\0gone");
            continue;
        };
        meta(h, &m);
        if m.is_dir() {
            hash_dir(&e.path(), h, budget)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seal_checks_only_for_its_record_and_key() {
        let key = VerdictKey::from_bytes([7; 32]);
        let att = Attestation::new(
            "abc",
            Verdict::Passed,
            VerdictSource::Detected,
            BaseFingerprint::default(),
            "r".into(),
            vec![Concern::TestConfig],
        );
        let seal = att.seal(&key);
        assert!(authentic(
            &seal,
            &key,
            "abc",
            Verdict::Passed,
            VerdictSource::Detected
        ));
        assert!(!authentic(
            &seal,
            &key,
            "abd",
            Verdict::Passed,
            VerdictSource::Detected
        ));
        assert!(!authentic(
            &seal,
            &key,
            "abc",
            Verdict::Failed,
            VerdictSource::Detected
        ));
        assert!(!authentic(
            &seal,
            &key,
            "abc",
            Verdict::Passed,
            VerdictSource::OperatorCli
        ));
        let other = VerdictKey::from_bytes([8; 32]);
        assert!(!authentic(
            &seal,
            &other,
            "abc",
            Verdict::Passed,
            VerdictSource::Detected
        ));
        let mut cleared = seal.clone();
        cleared.concerns.clear();
        assert!(!authentic(
            &cleared,
            &key,
            "abc",
            Verdict::Passed,
            VerdictSource::Detected
        ));
        let mut moved = seal;
        moved.base.0.insert("src".into(), "x".into());
        assert!(!authentic(
            &moved,
            &key,
            "abc",
            Verdict::Passed,
            VerdictSource::Detected
        ));
    }

    #[test]
    fn the_base_fingerprint_names_what_moved() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("src")).unwrap();
        std::fs::write(d.path().join("src/a.rs"), "a").unwrap();
        std::fs::write(d.path().join("README"), "r").unwrap();
        std::fs::create_dir_all(d.path().join(".airlock")).unwrap();
        let before = base_fingerprint(d.path()).unwrap();
        assert!(
            before
                .moved(&base_fingerprint(d.path()).unwrap())
                .is_empty()
        );
        std::fs::write(d.path().join(".airlock/x"), "state").unwrap();
        assert!(
            before
                .moved(&base_fingerprint(d.path()).unwrap())
                .is_empty()
        );
        std::fs::write(d.path().join("src/a.rs"), "changed").unwrap();
        std::fs::write(d.path().join("new"), "n").unwrap();
        let moved = before.moved(&base_fingerprint(d.path()).unwrap());
        assert_eq!(moved, ["`src` changed", "`new` added"]);
    }
}
