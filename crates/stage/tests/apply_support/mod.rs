//! Shared fixtures for the apply, recover, undo and fault tests: a real workspace in a temp dir,
//! a real blob store, and helpers to stage changes against what is on disk.
#![allow(dead_code)]

use airlock_policy::RelPath;
use airlock_stage::model::{Change, ChangesetSnapshot, Fingerprint, StagedEntry};
use airlock_stage::{BlobStore, ContentHash, VerdictRecord, VerifiedChangeset, fingerprint_path};
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

pub struct Fixture {
    _dir: Option<tempfile::TempDir>,
    pub ws: PathBuf,
    pub blobs: BlobStore,
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        Fixture::at(dir.path().join("ws"), Some(dir))
    }

    /// A fixture in `ws` (created), blobs in `ws/.airlock/blobs`.
    pub fn at(ws: PathBuf, keep: Option<tempfile::TempDir>) -> Fixture {
        fs::create_dir_all(&ws).unwrap();
        let blobs = BlobStore::open(ws.join(".airlock/blobs")).unwrap();
        Fixture {
            _dir: keep,
            ws,
            blobs,
        }
    }

    pub fn abs(&self, rel: &str) -> PathBuf {
        self.ws.join(rel)
    }

    pub fn write(&self, rel: &str, bytes: &[u8], mode: u32) {
        let p = self.abs(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, bytes).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
    }

    pub fn base(&self, rel: &str) -> Fingerprint {
        fingerprint_path(&self.abs(rel)).unwrap()
    }

    pub fn stage_write(&self, rel: &str, bytes: &[u8], mode: u32) -> StagedEntry {
        let content = self.blobs.put(bytes).unwrap();
        StagedEntry {
            path: RelPath::new(rel).unwrap(),
            change: Change::Write {
                content,
                size: bytes.len() as u64,
                mode,
            },
            base: self.base(rel),
            session_local: false,
            flagged: None,
        }
    }

    pub fn stage(&self, rel: &str, change: Change) -> StagedEntry {
        StagedEntry {
            path: RelPath::new(rel).unwrap(),
            change,
            base: self.base(rel),
            session_local: false,
            flagged: None,
        }
    }

    /// Every entry below the workspace except `.airlock/`, with content hash and mode.
    pub fn tree(&self) -> BTreeMap<PathBuf, Fingerprint> {
        tree(&self.ws)
    }
}

pub fn tree(ws: &Path) -> BTreeMap<PathBuf, Fingerprint> {
    let mut out = BTreeMap::new();
    walk(ws, ws, &mut out);
    out
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Fingerprint>) {
    for e in fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        let rel = p.strip_prefix(root).unwrap().to_path_buf();
        if rel == Path::new(".airlock") {
            continue;
        }
        let fp = fingerprint_path(&p).unwrap();
        let is_dir = fp == Fingerprint::Dir;
        let fp = if is_dir {
            // Directory modes matter too.
            Fingerprint::File {
                hash: ContentHash::of(b"dir"),
                mode: fs::symlink_metadata(&p).unwrap().permissions().mode() & 0o7777,
            }
        } else {
            fp
        };
        out.insert(rel, fp);
        if is_dir {
            walk(root, &p, out);
        }
    }
}

pub fn verified(entries: Vec<StagedEntry>) -> VerifiedChangeset {
    let snap = ChangesetSnapshot::new("s", entries);
    let verdict = VerdictRecord {
        changeset: snap.hash,
        verdict: "passed".into(),
        detail: serde_json::Value::Null,
    };
    VerifiedChangeset::attest(snap, Some(&verdict)).unwrap()
}
