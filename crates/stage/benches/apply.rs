//! The cost of atomicity: `apply_verified` (journal, conflict check, backups, temps, renames,
//! directory sync) against a naive sequential temp-and-rename of the same files, both durable.
//!
//! Two baselines: `naive_fsync` (per file: write temp, fsync, rename; then fsync the directories)
//! and `naive_syncfs` (all temps, one `syncfs`, all renames, one `syncfs` — the batching apply
//! itself uses above 16 files). 1 and 100 files run under criterion; 10,000 files are timed
//! by hand (`AIRLOCK_BENCH_10K_SAMPLES`, default 2) because a single naive run takes ~30 s.

use airlock_stage::apply::{ApplyContext, apply_verified};
use airlock_stage::journal::Journal;
use airlock_stage::model::{Change, ChangesetSnapshot, StagedEntry};
use airlock_stage::{BlobStore, Verdict, VerdictRecord, VerifiedChangeset, fingerprint_path};
use airlock_types::RelPath;
use criterion::{BatchSize, Criterion};
use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

struct Case {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    blobs: BlobStore,
    verified: VerifiedChangeset,
    /// Opened in the setup: a running airlock keeps its journal open.
    journal: Journal,
}

fn rel(i: usize) -> String {
    format!("src/m{}/f{i:05}.txt", i % 100)
}

/// A workspace of `n` ~1 KiB files and a verified changeset rewriting all of them.
fn setup(n: usize, blobs_dir: &Path) -> Case {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    for i in 0..n {
        let p = ws.join(rel(i));
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, format!("base {i}\n{}", "b".repeat(1000))).unwrap();
    }
    // Blobs are shared across iterations (content-addressed, written once).
    let blobs = BlobStore::open(blobs_dir).unwrap();
    let entries = (0..n)
        .map(|i| {
            let bytes = format!("new {i}\n{}", "n".repeat(1000)).into_bytes();
            let content = blobs.put(&bytes).unwrap();
            StagedEntry {
                path: RelPath::new(rel(i)).unwrap(),
                change: Change::Write {
                    content,
                    size: bytes.len() as u64,
                    mode: 0o644,
                },
                base: fingerprint_path(&ws.join(rel(i))).unwrap(),
                session_local: false,
                flagged: None,
            }
        })
        .collect();
    let snap = ChangesetSnapshot::new("bench", entries);
    let verdict = VerdictRecord {
        changeset: snap.hash,
        verdict: Verdict::Passed,
        source: airlock_stage::VerdictSource::Detected,
        detail: serde_json::Value::Null,
    };
    let verified = VerifiedChangeset::attest(snap, Some(&verdict)).unwrap();
    // Start every measurement from a clean page cache state: nothing dirty left by the setup.
    let (journal, _) = Journal::open(&ws).unwrap();
    let root = fs::File::open(&ws).unwrap();
    rustix::fs::syncfs(&root).unwrap();
    Case {
        _dir: dir,
        ws,
        blobs,
        verified,
        journal,
    }
}

fn atomic(case: &Case) {
    apply_verified(
        &case.ws,
        &case.verified,
        &case.blobs,
        &case.journal,
        &ApplyContext::new("bench", 1),
    )
    .unwrap();
}

fn contents(case: &Case) -> impl Iterator<Item = (PathBuf, PathBuf)> + '_ {
    case.verified.snapshot().entries.iter().map(|e| {
        let Change::Write { content, .. } = &e.change else {
            unreachable!()
        };
        (case.ws.join(e.path.as_path()), case.blobs.path(content))
    })
}

fn naive_fsync(case: &Case) {
    let mut dirs = BTreeSet::new();
    for (target, blob) in contents(case) {
        let tmp = target.with_extension("tmp");
        let mut f = fs::File::create(&tmp).unwrap();
        f.write_all(&fs::read(blob).unwrap()).unwrap();
        f.sync_all().unwrap();
        fs::rename(&tmp, &target).unwrap();
        dirs.insert(target.parent().unwrap().to_path_buf());
    }
    for d in dirs {
        fs::File::open(d).unwrap().sync_all().unwrap();
    }
}

fn naive_syncfs(case: &Case) {
    let all: Vec<_> = contents(case).collect();
    for (target, blob) in &all {
        fs::write(target.with_extension("tmp"), fs::read(blob).unwrap()).unwrap();
    }
    let root = fs::File::open(&case.ws).unwrap();
    rustix::fs::syncfs(&root).unwrap();
    for (target, _) in &all {
        fs::rename(target.with_extension("tmp"), target).unwrap();
    }
    rustix::fs::syncfs(&root).unwrap();
}

type Variant = (&'static str, fn(&Case));
const VARIANTS: [Variant; 3] = [
    ("atomic_apply", atomic),
    ("naive_fsync", naive_fsync),
    ("naive_syncfs", naive_syncfs),
];

fn main() {
    let blobs = tempfile::tempdir().unwrap();
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(8))
        .configure_from_args();
    for n in [1usize, 100] {
        let mut g = c.benchmark_group(format!("apply_{n}_files"));
        for (name, f) in VARIANTS {
            g.bench_function(name, |b| {
                b.iter_batched(
                    || setup(n, blobs.path()),
                    |case| f(&case),
                    BatchSize::PerIteration,
                )
            });
        }
        g.finish();
    }
    c.final_summary();

    let samples: usize = std::env::var("AIRLOCK_BENCH_10K_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    if samples == 0 {
        return;
    }
    println!("\napply_10000_files (hand-timed, {samples} samples each, mean)");
    for (name, f) in VARIANTS {
        let mut total = Duration::ZERO;
        for _ in 0..samples {
            let case = setup(10_000, blobs.path());
            let t = Instant::now();
            f(&case);
            total += t.elapsed();
        }
        println!(
            "  {name:<14} {:>10.3} s",
            total.as_secs_f64() / samples as f64
        );
    }
}
