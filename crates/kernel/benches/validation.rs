//! The cost of argument validation per call: the typed parse (what the chain runs on every call),
//! against the `jsonschema` validator of the published schema, compiled once (what a rejection
//! additionally pays to word its error) and compiled per call (what a CLI process would pay on
//! its one call without the typed path).

use airlock_kernel::tools::registry;
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use std::hint::black_box;

fn validation(c: &mut Criterion) {
    let reg = registry(8 << 20);
    let cases = [
        (
            "bash",
            json!({"command": "cargo test --workspace", "timeout_secs": 120}),
        ),
        (
            "read_file",
            json!({"path": "src/lib.rs", "offset": 10, "limit": 200}),
        ),
        (
            "write_file",
            json!({"path": "src/a.rs", "content": "pub fn a() {}\n".repeat(64)}),
        ),
    ];
    for (tool, args) in &cases {
        let def = &reg[tool];
        c.bench_function(&format!("typed parse {tool}"), |b| {
            b.iter(|| def.parse_typed(black_box(args)).unwrap())
        });
        def.validate_full(args).unwrap();
        c.bench_function(&format!("jsonschema compiled {tool}"), |b| {
            b.iter(|| def.validate_full(black_box(args)).unwrap())
        });
        c.bench_function(&format!("jsonschema compile+validate {tool}"), |b| {
            b.iter(|| {
                let v = jsonschema::validator_for(def.schema()).unwrap();
                assert!(v.is_valid(black_box(args)));
            })
        });
    }
}

criterion_group!(benches, validation);
criterion_main!(benches);
