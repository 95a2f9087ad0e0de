//! Jail throughput: confining existing, new and deep paths, a path through an in-tree symlink,
//! a denial, the pure sensitive-name and host-exec checks; `std::fs::canonicalize` as the baseline.

use airlock_policy::RelPath;
use airlock_policy::jail::{Access, Jail, sensitive_rule};
use criterion::{Criterion, criterion_group, criterion_main};
use std::fs;
use std::hint::black_box;
use std::os::unix::fs::symlink;

fn bench_jail(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let ws = fs::canonicalize(tmp.path()).unwrap();
    fs::create_dir_all(ws.join("src")).unwrap();
    fs::write(ws.join("src/lib.rs"), "x").unwrap();
    let deep_dir: String = (0..20).map(|i| format!("d{i}/")).collect();
    fs::create_dir_all(ws.join(&deep_dir)).unwrap();
    let deep_file = format!("{deep_dir}file.rs");
    fs::write(ws.join(&deep_file), "x").unwrap();
    symlink("src", ws.join("src_link")).unwrap();
    let jail = Jail::open(&ws).unwrap();

    let mut g = c.benchmark_group("jail");
    g.bench_function("confine_existing", |b| {
        b.iter(|| jail.confine(black_box("src/lib.rs"), Access::Write))
    });
    g.bench_function("confine_new", |b| {
        b.iter(|| jail.confine(black_box("src/new/module.rs"), Access::Write))
    });
    g.bench_function("confine_deep_existing_20", |b| {
        b.iter(|| jail.confine(black_box(&deep_file), Access::Read))
    });
    let deep_new = format!("{deep_dir}new/a/b/c.rs");
    g.bench_function("confine_deep_new_24", |b| {
        b.iter(|| jail.confine(black_box(&deep_new), Access::Write))
    });
    g.bench_function("confine_through_symlink", |b| {
        b.iter(|| jail.confine(black_box("src_link/lib.rs"), Access::Read))
    });
    g.bench_function("confine_denied_escape", |b| {
        b.iter(|| jail.confine(black_box("src/../../etc/passwd"), Access::Read))
    });
    let abs = ws.join("src/lib.rs");
    g.bench_function("baseline_std_canonicalize_existing", |b| {
        b.iter(|| fs::canonicalize(black_box(&abs)))
    });
    let abs_deep = ws.join(&deep_file);
    g.bench_function("baseline_std_canonicalize_deep_20", |b| {
        b.iter(|| fs::canonicalize(black_box(&abs_deep)))
    });
    let rel = RelPath::new("src/components/widgets/button/index.tsx").unwrap();
    g.bench_function("sensitive_rule_clean", |b| {
        b.iter(|| sensitive_rule(black_box(&rel)))
    });
    let secret = RelPath::new("config/deploy/.ENV.production").unwrap();
    g.bench_function("sensitive_rule_hit", |b| {
        b.iter(|| sensitive_rule(black_box(&secret)))
    });
    g.bench_function("host_exec_classify_clean", |b| {
        b.iter(|| airlock_policy::host_exec::classify(black_box(&rel)))
    });
    let hook = RelPath::new("vendor/lib/.git/hooks/pre-commit").unwrap();
    g.bench_function("host_exec_classify_hit", |b| {
        b.iter(|| airlock_policy::host_exec::classify(black_box(&hook)))
    });
    g.finish();
}

criterion_group!(benches, bench_jail);
criterion_main!(benches);
