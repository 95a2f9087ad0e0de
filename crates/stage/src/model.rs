//! The changeset model shared by staging, the sandbox harvest, verification and apply.
//!
//! Invariant: a [`VerifiedChangeset`] exists only for a snapshot whose changeset hash equals the
//! hash named by a [`VerdictRecord`] whose typed [`Verdict`] is `Passed` and whose
//! [`VerdictSource`] may unlock apply; `apply` accepts nothing else.

use airlock_types::RelPath;
pub use airlock_types::{ChangesetHash, ContentHash, Verdict, VerdictSource};
use serde::{Deserialize, Serialize};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// What a path looked like on disk: the base a change was staged against, or the state found
/// at apply time. Compared for conflict detection. Symlinks are never followed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Fingerprint {
    /// Nothing at the path.
    Absent,
    /// A regular file: content hash and permission bits (`mode & 0o7777`).
    File {
        /// Content hash.
        hash: ContentHash,
        /// Permission bits.
        mode: u32,
    },
    /// A symbolic link and its target bytes (hex-free: stored as lossless bytes).
    Symlink {
        /// Link target, as raw bytes.
        target: Vec<u8>,
    },
    /// A directory.
    Dir,
    /// Anything else (socket, fifo, device): never written over.
    Other,
}

/// Fingerprint the entry at `abs` without following a final symlink.
pub fn fingerprint_path(abs: &Path) -> io::Result<Fingerprint> {
    let md = match std::fs::symlink_metadata(abs) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Fingerprint::Absent),
        Err(e) if e.raw_os_error() == Some(libc_enotdir()) => return Ok(Fingerprint::Absent),
        Err(e) => return Err(e),
    };
    let ft = md.file_type();
    if ft.is_symlink() {
        let t = std::fs::read_link(abs)?;
        Ok(Fingerprint::Symlink {
            target: t.as_os_str().as_bytes().to_vec(),
        })
    } else if ft.is_dir() {
        Ok(Fingerprint::Dir)
    } else if ft.is_file() {
        let f = std::fs::File::open(abs)?;
        Ok(Fingerprint::File {
            hash: ContentHash::of_reader(f)?,
            mode: md.permissions().mode() & 0o7777,
        })
    } else {
        let _ = md.mode();
        Ok(Fingerprint::Other)
    }
}

fn libc_enotdir() -> i32 {
    20 // ENOTDIR on Linux: a parent component is a file, so the path cannot exist.
}

/// One staged change to a path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Change {
    /// Write a regular file with this content (in the blob store) and permission bits.
    Write {
        /// Content hash (the blob's name).
        content: ContentHash,
        /// Size in bytes.
        size: u64,
        /// Permission bits.
        mode: u32,
    },
    /// Remove the path (file, symlink or — recursively as staged — directory).
    Delete,
    /// Create a symbolic link.
    Symlink {
        /// Link target, as raw bytes.
        target: Vec<u8>,
    },
    /// Create a directory.
    Dir {
        /// Permission bits.
        mode: u32,
    },
}

/// A staged change with the base it was staged against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StagedEntry {
    /// Workspace-relative path.
    pub path: RelPath,
    /// What to do.
    pub change: Change,
    /// The on-disk state when first staged; apply requires the disk to still match it.
    pub base: Fingerprint,
    /// Ignored by the workspace's ignore rules (build outputs, node_modules): visible to later
    /// commands of the session, never applied.
    pub session_local: bool,
    /// Why this entry is flagged (e.g. a symlink pointing outside the workspace); the jail
    /// refuses flagged entries at apply, and only the operator's grant lifts a
    /// [`Flag::HostExec`] one.
    pub flagged: Option<Flag>,
}

/// Why a staged entry is flagged: a typed kind, stored and hashed as its stable
/// [`Flag::name`] and parsed back with [`Flag::parse`]. A name this build does not know is
/// still a flag ([`Flag::Unknown`]): it blocks apply and nothing lifts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flag {
    /// A path the host acts on by itself (`host_exec:KIND`, `KIND` being the host-exec list's
    /// stable id): lifted only by the operator's `--allow-host-exec`.
    HostExec {
        /// The host-exec entry's stable id (`git`, `vscode`, `git_dir_shape`, …).
        kind: String,
    },
    /// A symbolic link whose target leaves the workspace (`link_outside`).
    LinkOutside,
    /// A sensitive file, by the jail's rule id (`sensitive:RULE`).
    Sensitive {
        /// The jail's rule id.
        rule: String,
    },
    /// A stored name this build does not know, kept as it was.
    Unknown(String),
}

impl Flag {
    /// A host-exec flag of this kind.
    pub fn host_exec(kind: impl Into<String>) -> Flag {
        Flag::HostExec { kind: kind.into() }
    }

    /// The stable name stored in the changeset and fed to its hash.
    pub fn name(&self) -> String {
        match self {
            Flag::HostExec { kind } => format!("host_exec:{kind}"),
            Flag::LinkOutside => "link_outside".into(),
            Flag::Sensitive { rule } => format!("sensitive:{rule}"),
            Flag::Unknown(raw) => raw.clone(),
        }
    }

    /// The flag a stored name stands for; anything else is [`Flag::Unknown`] (never `None`:
    /// an unparseable flag is still a flag).
    pub fn parse(name: &str) -> Flag {
        let id = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        };
        match name.split_once(':') {
            Some(("host_exec", kind)) if id(kind) => Flag::host_exec(kind),
            Some(("sensitive", rule)) if id(rule) => Flag::Sensitive { rule: rule.into() },
            None if name == "link_outside" => Flag::LinkOutside,
            _ => Flag::Unknown(name.to_string()),
        }
    }
}

/// The generic human text of a flag (the kernel says more about a host-exec kind).
impl std::fmt::Display for Flag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Flag::HostExec { kind } => write!(
                f,
                "a host-exec path ({kind}), which the host acts on by itself; apply needs the operator's --allow-host-exec"
            ),
            Flag::LinkOutside => f.write_str("a symbolic link pointing outside the workspace"),
            Flag::Sensitive { rule } => write!(f, "a sensitive file (rule {rule})"),
            Flag::Unknown(raw) => {
                write!(f, "flagged for a reason this build does not know ({raw:?})")
            }
        }
    }
}

impl Serialize for Flag {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Flag, D::Error> {
        String::deserialize(d).map(|s| Flag::parse(&s))
    }
}

/// What a changeset makes of one path, seen as a layer over the disk
/// ([`crate::store::Store::staged_node`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StagedNode {
    /// A regular file.
    File,
    /// A directory; `opaque` when none of the disk's entries below it show through (it
    /// replaced something that was not a directory, or a deleted directory).
    Dir {
        /// The disk below it is hidden.
        opaque: bool,
    },
    /// A symbolic link and its target bytes.
    Symlink(Vec<u8>),
    /// Deleted, with nothing staged below it.
    Deleted,
}

/// An immutable view of a session's changeset at one moment, with its content hash.
#[derive(Debug, Clone, Serialize)]
pub struct ChangesetSnapshot {
    /// Session name.
    pub session: String,
    /// Entries sorted by path bytes.
    pub entries: Vec<StagedEntry>,
    /// Hash over the sorted entries (paths, changes, bases, flags).
    pub hash: ChangesetHash,
}

impl ChangesetSnapshot {
    /// Build a snapshot; sorts the entries and computes the hash.
    pub fn new(session: impl Into<String>, mut entries: Vec<StagedEntry>) -> ChangesetSnapshot {
        entries.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
        let hash = Self::compute_hash(&entries);
        ChangesetSnapshot {
            session: session.into(),
            entries,
            hash,
        }
    }

    /// The canonical hash of a sorted entry list. Paths are hashed as raw bytes with length
    /// prefixes so no two different changesets share an encoding.
    pub fn compute_hash(entries: &[StagedEntry]) -> ChangesetHash {
        let mut h = SnapshotHasher::new();
        let mut rest = Vec::new();
        for e in entries {
            rest.clear();
            let _ = serde_json::to_writer(
                &mut rest,
                &(&e.change, &e.base, e.session_local, &e.flagged),
            );
            h.entry(e.path.as_bytes(), &rest);
        }
        h.finish()
    }

    /// A snapshot whose entries are already sorted by path bytes and whose `hash` was computed
    /// over them with [`SnapshotHasher`].
    pub(crate) fn from_sorted(
        session: impl Into<String>,
        entries: Vec<StagedEntry>,
        hash: ChangesetHash,
    ) -> ChangesetSnapshot {
        debug_assert!(
            entries
                .windows(2)
                .all(|w| w[0].path.as_bytes() < w[1].path.as_bytes())
        );
        ChangesetSnapshot {
            session: session.into(),
            entries,
            hash,
        }
    }

    /// True when nothing is staged.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The changeset hash, fed one entry at a time in path order: each entry is its path bytes and
/// the compact JSON array `[change, base, session_local, flagged]`, both length-prefixed.
pub(crate) struct SnapshotHasher(blake3::Hasher);

impl SnapshotHasher {
    pub(crate) fn new() -> SnapshotHasher {
        let mut h = blake3::Hasher::new();
        h.update(b"airlock-changeset-v1\0");
        SnapshotHasher(h)
    }

    /// Add one entry: `rest` is the compact JSON of `(change, base, session_local, flagged)`.
    pub(crate) fn entry(&mut self, path: &[u8], rest: &[u8]) {
        self.0.update(&(path.len() as u64).to_le_bytes());
        self.0.update(path);
        self.0.update(&(rest.len() as u64).to_le_bytes());
        self.0.update(rest);
    }

    pub(crate) fn finish(&self) -> ChangesetHash {
        ChangesetHash(*self.0.finalize().as_bytes())
    }
}

/// A stored verification verdict, bound to the changeset hash it was computed for. The gate
/// reads only the typed fields; `detail` is shown, never consulted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerdictRecord {
    /// The changeset hash the verdict is for.
    pub changeset: ChangesetHash,
    /// The verdict; only [`Verdict::Passed`] can unlock apply.
    pub verdict: Verdict,
    /// Where the test command came from; only the operator's (or the project's detected
    /// runner) can unlock apply.
    pub source: VerdictSource,
    /// The full verdict JSON (CLI.md), for display only.
    pub detail: serde_json::Value,
}

/// Why a snapshot could not be attested as verified.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotVerified {
    /// No verdict has been recorded for the session.
    #[error("the changeset has not been verified: run `airlock verify` first")]
    NoVerdict,
    /// The verdict is not `passed`.
    #[error("the last verification did not pass (verdict: {0}); fix the failures and verify again")]
    NotPassed(Verdict),
    /// The changeset changed after it was verified.
    #[error(
        "the changeset changed since it was verified (verified {verified}, now {current}); verify again"
    )]
    Stale {
        /// Hash the verdict was for.
        verified: String,
        /// Current hash.
        current: String,
    },
    /// Nothing is staged.
    #[error("nothing is staged")]
    Empty,
    /// The snapshot's entries do not hash to the hash it carries (and the verdict names).
    #[error(
        "the staged entries do not match the changeset that was verified; nothing was applied — verify again"
    )]
    Altered,
    /// The verdict passed, but its command was the agent's choice: advice, not a gate.
    #[error(
        "the last verification passed with a test command the agent chose, so its verdict is advisory and cannot unlock apply; run `airlock verify` (the project's detected runner or the command in your config, or `airlock verify -- CMD`), or allow that exact command with an operator rule `verify(CMD)`"
    )]
    Advisory,
    /// The verdict passed, but only for the tests `--only` selected.
    #[error(
        "the last verification ran only selected tests (`--only`), so its verdict is advisory and cannot unlock apply; run `airlock verify` for the whole suite"
    )]
    Partial,
    /// The verdict carries no provenance.
    #[error(
        "the last verdict was recorded without saying where its command came from; run `airlock verify` again"
    )]
    Unrecorded,
}

/// A changeset snapshot proven to carry a passing verdict for exactly its changeset hash.
/// The only way to build one is [`VerifiedChangeset::attest`]; `apply` takes nothing else.
///
/// Its fields are private, so it cannot be written out by hand:
///
/// ```compile_fail,E0451
/// use airlock_stage::{ChangesetSnapshot, VerdictRecord, VerifiedChangeset};
/// fn forge(snapshot: ChangesetSnapshot, verdict: VerdictRecord) -> VerifiedChangeset {
///     VerifiedChangeset { snapshot, verdict }
/// }
/// ```
///
/// and [`VerifiedChangeset::attest`] is the way in:
///
/// ```
/// use airlock_stage::{ChangesetSnapshot, NotVerified, Verdict, VerdictRecord, VerdictSource};
/// use airlock_stage::{Change, ContentHash, Fingerprint, StagedEntry, VerifiedChangeset};
/// use airlock_types::RelPath;
/// let entry = StagedEntry {
///     path: RelPath::new("a.txt").unwrap(),
///     change: Change::Write { content: ContentHash::of(b"x"), size: 1, mode: 0o644 },
///     base: Fingerprint::Absent,
///     session_local: false,
///     flagged: None,
/// };
/// let snapshot = ChangesetSnapshot::new("s", vec![entry]);
/// let mut record = VerdictRecord {
///     changeset: snapshot.hash,
///     verdict: Verdict::Failed,
///     source: VerdictSource::Detected,
///     detail: serde_json::Value::Null,
/// };
/// let refused = VerifiedChangeset::attest(snapshot.clone(), Some(&record)).unwrap_err();
/// assert_eq!(refused, NotVerified::NotPassed(Verdict::Failed));
/// record.verdict = Verdict::Passed;
/// assert!(VerifiedChangeset::attest(snapshot, Some(&record)).is_ok());
/// ```
#[derive(Debug, Clone)]
pub struct VerifiedChangeset {
    snapshot: ChangesetSnapshot,
    verdict: VerdictRecord,
}

impl VerifiedChangeset {
    /// Attest `snapshot` with `verdict`: succeeds only if the typed verdict is
    /// [`Verdict::Passed`], its source [may unlock apply](VerdictSource::unlocks_apply), it
    /// names exactly the snapshot's changeset hash, and the snapshot's entries hash to exactly
    /// that (recomputed here, linear in the entries). The only constructor.
    pub fn attest(
        snapshot: ChangesetSnapshot,
        verdict: Option<&VerdictRecord>,
    ) -> Result<VerifiedChangeset, NotVerified> {
        if snapshot.is_empty() {
            return Err(NotVerified::Empty);
        }
        let verdict = verdict.ok_or(NotVerified::NoVerdict)?;
        if !verdict.verdict.is_pass() {
            return Err(NotVerified::NotPassed(verdict.verdict));
        }
        if !verdict.source.unlocks_apply() {
            return Err(match verdict.source {
                VerdictSource::Agent => NotVerified::Advisory,
                VerdictSource::Partial => NotVerified::Partial,
                _ => NotVerified::Unrecorded,
            });
        }
        if verdict.changeset != snapshot.hash {
            return Err(NotVerified::Stale {
                verified: verdict.changeset.to_hex(),
                current: snapshot.hash.to_hex(),
            });
        }
        // The hash is a public field: bind the proof to the entries it will apply, not to the
        // hash they claim.
        if ChangesetSnapshot::compute_hash(&snapshot.entries) != snapshot.hash {
            return Err(NotVerified::Altered);
        }
        Ok(VerifiedChangeset {
            snapshot,
            verdict: verdict.clone(),
        })
    }

    /// The verified snapshot.
    pub fn snapshot(&self) -> &ChangesetSnapshot {
        &self.snapshot
    }

    /// The passing verdict.
    pub fn verdict(&self) -> &VerdictRecord {
        &self.verdict
    }
}

/// A path for an entry below `root`.
pub fn abs_path(root: &Path, rel: &RelPath) -> PathBuf {
    root.join(rel.as_path())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(p: &str, bytes: &[u8]) -> StagedEntry {
        StagedEntry {
            path: RelPath::new(p).unwrap(),
            change: Change::Write {
                content: ContentHash::of(bytes),
                size: bytes.len() as u64,
                mode: 0o644,
            },
            base: Fingerprint::Absent,
            session_local: false,
            flagged: None,
        }
    }

    #[test]
    fn hash_is_order_independent_and_content_sensitive() {
        let a = ChangesetSnapshot::new("s", vec![entry("a", b"1"), entry("b", b"2")]);
        let b = ChangesetSnapshot::new("s", vec![entry("b", b"2"), entry("a", b"1")]);
        let c = ChangesetSnapshot::new("s", vec![entry("a", b"1"), entry("b", b"3")]);
        assert_eq!(a.hash, b.hash);
        assert_ne!(a.hash, c.hash);
    }

    #[test]
    fn attest_requires_passing_verdict_for_current_hash() {
        let snap = ChangesetSnapshot::new("s", vec![entry("a", b"1")]);
        let pass = VerdictRecord {
            changeset: snap.hash,
            verdict: Verdict::Passed,
            source: VerdictSource::Detected,
            detail: serde_json::Value::Null,
        };
        assert!(VerifiedChangeset::attest(snap.clone(), Some(&pass)).is_ok());
        for source in [
            VerdictSource::Agent,
            VerdictSource::Unrecorded,
            VerdictSource::Partial,
        ] {
            let advisory = VerdictRecord {
                source,
                ..pass.clone()
            };
            assert!(
                VerifiedChangeset::attest(snap.clone(), Some(&advisory)).is_err(),
                "{source:?} unlocked apply"
            );
        }
        assert_eq!(
            VerifiedChangeset::attest(snap.clone(), None).unwrap_err(),
            NotVerified::NoVerdict
        );
        let fail = VerdictRecord {
            verdict: Verdict::Failed,
            ..pass.clone()
        };
        assert!(matches!(
            VerifiedChangeset::attest(snap.clone(), Some(&fail)),
            Err(NotVerified::NotPassed(_))
        ));
        let other = ChangesetSnapshot::new("s", vec![entry("a", b"2")]);
        assert!(matches!(
            VerifiedChangeset::attest(other, Some(&pass)),
            Err(NotVerified::Stale { .. })
        ));
    }

    /// Every combination of verdict, source and hash: exactly the passing verdict of a source
    /// that may unlock apply, for exactly this snapshot's hash, yields a `VerifiedChangeset`.
    #[test]
    fn only_a_passing_authoritative_verdict_for_this_hash_attests() {
        let snap = ChangesetSnapshot::new("s", vec![entry("a", b"1")]);
        let other = ChangesetSnapshot::new("s", vec![entry("a", b"2")]).hash;
        let mut attested = 0;
        for verdict in Verdict::ALL {
            for source in VerdictSource::ALL {
                for changeset in [snap.hash, other] {
                    let record = VerdictRecord {
                        changeset,
                        verdict,
                        source,
                        detail: serde_json::json!({"verdict": "passed"}),
                    };
                    let got = VerifiedChangeset::attest(snap.clone(), Some(&record));
                    let expect = verdict == Verdict::Passed
                        && source.unlocks_apply()
                        && changeset == snap.hash;
                    assert_eq!(got.is_ok(), expect, "{verdict} {source} {changeset:?}");
                    match got {
                        Ok(v) => {
                            attested += 1;
                            assert_eq!(v.snapshot().hash, snap.hash);
                            assert_eq!(v.verdict(), &record);
                        }
                        Err(NotVerified::NotPassed(v)) => assert_eq!(v, verdict),
                        Err(NotVerified::Advisory) => assert_eq!(source, VerdictSource::Agent),
                        Err(NotVerified::Partial) => assert_eq!(source, VerdictSource::Partial),
                        Err(NotVerified::Unrecorded) => {
                            assert_eq!(source, VerdictSource::Unrecorded)
                        }
                        Err(NotVerified::Stale { verified, current }) => {
                            assert_eq!((verified, current), (other.to_hex(), snap.hash.to_hex()))
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
            }
        }
        assert_eq!(attested, 4, "four sources unlock apply");
        // The display-only detail is never consulted: it may say anything.
        let record = VerdictRecord {
            changeset: snap.hash,
            verdict: Verdict::NoTests,
            source: VerdictSource::OperatorCli,
            detail: serde_json::json!({"verdict": "passed", "source": "operator_cli"}),
        };
        assert_eq!(
            VerifiedChangeset::attest(snap.clone(), Some(&record)).unwrap_err(),
            NotVerified::NotPassed(Verdict::NoTests)
        );
        // An empty snapshot never attests, whatever the verdict.
        let empty = ChangesetSnapshot::new("s", vec![]);
        let record = VerdictRecord {
            changeset: empty.hash,
            verdict: Verdict::Passed,
            ..record
        };
        assert_eq!(
            VerifiedChangeset::attest(empty, Some(&record)).unwrap_err(),
            NotVerified::Empty
        );
    }

    /// A snapshot's fields are public, so its hash could be copied onto other entries: the
    /// proof is built only when the entries themselves hash to the verdict's changeset hash.
    #[test]
    fn entries_that_do_not_hash_to_the_verdicts_hash_never_attest() {
        let snap = ChangesetSnapshot::new("s", vec![entry("a", b"1")]);
        let pass = VerdictRecord {
            changeset: snap.hash,
            verdict: Verdict::Passed,
            source: VerdictSource::OperatorCli,
            detail: serde_json::Value::Null,
        };
        let mut swapped = snap.clone();
        swapped.entries = vec![entry("a", b"evil")];
        let mut grown = snap.clone();
        grown.entries.push(entry("b", b"2"));
        let forged = ChangesetSnapshot {
            session: "s".into(),
            entries: vec![entry(".github/workflows/x.yml", b"run: evil")],
            hash: snap.hash,
        };
        for bad in [swapped, grown, forged] {
            assert!(
                matches!(
                    VerifiedChangeset::attest(bad.clone(), Some(&pass)),
                    Err(NotVerified::Altered)
                ),
                "{:?}",
                bad.entries
            );
        }
        assert!(VerifiedChangeset::attest(snap, Some(&pass)).is_ok());
    }

    #[test]
    fn fingerprint_does_not_follow_symlinks() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("f"), b"x").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("l")).unwrap();
        assert!(matches!(
            fingerprint_path(&d.path().join("f")).unwrap(),
            Fingerprint::File { .. }
        ));
        assert_eq!(
            fingerprint_path(&d.path().join("l")).unwrap(),
            Fingerprint::Symlink {
                target: b"/etc/passwd".to_vec()
            }
        );
        assert_eq!(
            fingerprint_path(&d.path().join("none")).unwrap(),
            Fingerprint::Absent
        );
        assert_eq!(
            fingerprint_path(&d.path().join("f/under-a-file")).unwrap(),
            Fingerprint::Absent
        );
    }
}
