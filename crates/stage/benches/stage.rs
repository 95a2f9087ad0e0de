//! Staging throughput: 1,000 files in one batch (a sandbox harvest), the same one call at a
//! time, a snapshot with its hash, the merged walk, and materialising the overlay layer.

use airlock_stage::layer::materialize_layer;
use airlock_stage::store::{StageOp, Store};
use airlock_stage::view::walk_merged;
use airlock_types::RelPath;
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use std::hint::black_box;

const FILES: usize = 1_000;

fn ops(round: usize) -> Vec<StageOp> {
    (0..FILES)
        .map(|i| StageOp::Write {
            path: RelPath::new(format!("src/m{}/f{i:04}.rs", i % 10)).unwrap(),
            // ~1 KiB of distinct content per file and round.
            content: format!("// round {round} file {i}\n{}", "x".repeat(1000)).into_bytes(),
            mode: None,
        })
        .collect()
}

fn workspace() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for i in 0..FILES {
        let p = d.path().join(format!("src/m{}/f{i:04}.rs", i % 10));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("// base {i}\n")).unwrap();
    }
    d
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("stage");
    g.sample_size(10);

    let ws = workspace();
    let mut round = 0;
    g.bench_function("batch_1000_files", |b| {
        b.iter_batched(
            || {
                round += 1;
                let s = Store::open(ws.path(), &format!("b{round}")).unwrap();
                (s, ops(round))
            },
            |(s, ops)| black_box(s.stage_batch(ops).unwrap()),
            BatchSize::PerIteration,
        )
    });
    g.bench_function("one_call_each_1000_files", |b| {
        b.iter_batched(
            || {
                round += 1;
                let s = Store::open(ws.path(), &format!("o{round}")).unwrap();
                (s, ops(round))
            },
            |(s, ops)| {
                for op in ops {
                    s.stage_batch([op]).unwrap();
                }
            },
            BatchSize::PerIteration,
        )
    });

    let s = Store::open(ws.path(), "snap").unwrap();
    s.stage_batch(ops(0)).unwrap();
    g.bench_function("snapshot_and_hash_1000", |b| {
        b.iter(|| black_box(s.snapshot().unwrap().hash))
    });
    g.bench_function("walk_merged_1000_staged_over_1000", |b| {
        b.iter(|| black_box(walk_merged(&s, None, true).unwrap().len()))
    });
    let snap = s.snapshot().unwrap();
    g.bench_function("materialize_layer_1000", |b| {
        b.iter_batched(
            || tempfile::tempdir().unwrap(),
            |dir| {
                materialize_layer(&snap, s.blobs(), dir.path()).unwrap();
                dir
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
