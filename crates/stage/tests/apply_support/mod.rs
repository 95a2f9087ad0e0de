//! Shared fixtures for the apply, recover, undo and fault tests: a real workspace in a temp dir,
//! a real blob store, and helpers to stage changes against what is on disk.
#![allow(dead_code)]

use airlock_stage::model::{Change, ChangesetSnapshot, Fingerprint, StagedEntry};
use airlock_stage::{
    BlobStore, ContentHash, Verdict, VerdictRecord, VerifiedChangeset, fingerprint_path,
};
use airlock_types::RelPath;
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
        verdict: Verdict::Passed,
        source: airlock_stage::VerdictSource::Detected,
        detail: serde_json::Value::Null,
    };
    VerifiedChangeset::attest(snap, Some(&verdict)).unwrap()
}

/// Counts mutating steps; at step `at` it fails: with a panic (an in-process crash: no
/// rollback, the record stays pending) or with EIO.
pub struct StepFault {
    pub at: usize,
    pub panic: bool,
    pub seen: std::sync::atomic::AtomicUsize,
}

pub const CRASH_MSG: &str = "simulated crash";

impl StepFault {
    pub fn crash(at: usize) -> std::sync::Arc<StepFault> {
        quiet_simulated_crashes();
        std::sync::Arc::new(StepFault {
            at,
            panic: true,
            seen: Default::default(),
        })
    }
    pub fn steps(&self) -> usize {
        self.seen.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl airlock_stage::apply::FaultHook for StepFault {
    fn before(&self, _step: &airlock_stage::apply::Step<'_>) -> std::io::Result<()> {
        let i = self.seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if i == self.at {
            if self.panic {
                std::panic::panic_any(CRASH_MSG);
            }
            return Err(std::io::Error::from_raw_os_error(5));
        }
        Ok(())
    }
}

/// Keep the simulated crashes out of the test output; real panics still print.
pub fn quiet_simulated_crashes() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<&str>() != Some(&CRASH_MSG) {
                default(info);
            }
        }));
    });
}

/// A small workspace and a changeset touching every kind of change.
pub fn mixed(fx: &Fixture) -> airlock_stage::VerifiedChangeset {
    fx.write("keep.txt", b"unchanged", 0o644);
    fx.write("src/main.rs", b"fn main() {}\n", 0o644);
    fx.write("src/old.rs", b"old\n", 0o644);
    fx.write("run.sh", b"#!/bin/sh\necho hi\n", 0o755);
    fx.write("became_dir", b"was a file", 0o600);
    fs::create_dir_all(fx.abs("gone_dir")).unwrap();
    std::os::unix::fs::symlink("src/main.rs", fx.abs("link")).unwrap();
    let entries = vec![
        fx.stage_write("src/main.rs", b"fn main() { println!(\"x\"); }\n", 0o644),
        fx.stage("src/old.rs", Change::Delete),
        fx.stage_write("run.sh", b"#!/bin/sh\necho hi\n", 0o700),
        fx.stage_write("new/deep/er/file.txt", b"nested", 0o640),
        fx.stage("became_dir", Change::Dir { mode: 0o750 }),
        fx.stage_write("became_dir/inner.txt", b"inside", 0o644),
        fx.stage("gone_dir", Change::Delete),
        fx.stage(
            "link",
            Change::Symlink {
                target: b"keep.txt".to_vec(),
            },
        ),
        fx.stage(
            "newlink",
            Change::Symlink {
                target: b"../outside-is-just-bytes".to_vec(),
            },
        ),
    ];
    verified(entries)
}
