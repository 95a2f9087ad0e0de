//! The fast accept path (`tools::fast`) against the `jsonschema` crate, the authority: on every
//! tool schema of the registry and arbitrary arguments, whenever the fast path answers, its
//! answer is `jsonschema`'s. Arguments are drawn both at random and from each schema's own
//! property names and value shapes, so valid calls (the fast path's whole purpose) are common.

use airlock_kernel::tools::args::exactly_one_of;
use airlock_kernel::tools::{fast, registry};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (0u64..5000).prop_map(Value::from),
        prop_oneof![Just(0u64), Just(1), Just(3600), Just(3601), Just(u64::MAX)]
            .prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        prop_oneof![Just(1.0f64), Just(2.0), Just(0.5)].prop_map(Value::from),
        "[a-z./]{0,12}".prop_map(Value::from),
        "\\PC{0,6}".prop_map(Value::from),
        prop_oneof![
            Just(""),
            Just("auto"),
            Just("once"),
            Just("session"),
            Just("node")
        ]
        .prop_map(Value::from),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Property names of every tool schema (top level and `$defs`), so generated objects hit them.
fn property_names() -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(o) => {
                if let Some(Value::Object(props)) = o.get("properties") {
                    out.extend(props.keys().cloned());
                }
                o.values().for_each(|x| walk(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for def in registry(8 << 20).values() {
        walk(def.schema(), &mut out);
    }
    out.sort();
    out.dedup();
    out
}

fn arguments(names: Vec<String>) -> impl Strategy<Value = Value> {
    let names = prop::sample::select(names);
    prop::collection::vec((names, value()), 0..5)
        .prop_map(|fields| Value::Object(fields.into_iter().collect::<Map<String, Value>>()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn fast_path_agrees_with_jsonschema(
        tool in 0usize..64,
        args in prop_oneof![arguments(property_names()), value()],
    ) {
        let reg = registry(8 << 20);
        let def = reg.values().nth(tool % reg.len()).unwrap();
        let full = def.validate_full(&args).is_ok();
        if let Some(fast) = fast::check(def.schema(), &args) {
            // The fast path reads the schema; the one rule outside it is checked after.
            let rule = exactly_one_of(def.name, &args).is_ok();
            prop_assert_eq!(fast && rule, full, "{} on {}", def.name, args);
        }
        // What callers see: `validate` and the authority agree on every input.
        prop_assert_eq!(def.validate(&args).is_ok(), full);
    }
}

/// The fast path must answer for ordinary valid calls, or it saves nothing.
#[test]
fn fast_path_decides_typical_calls() {
    let reg = registry(8 << 20);
    let cases = [
        ("bash", json!({"command": "cargo test", "timeout_secs": 60})),
        ("bash", json!({"argv": ["cargo", "test"]})),
        ("read_file", json!({"path": "src/lib.rs"})),
        ("write_file", json!({"path": "a.txt", "content": "x"})),
        ("status", json!({})),
    ];
    for (tool, args) in cases {
        let def = &reg[tool];
        assert_eq!(
            fast::check(def.schema(), &args),
            Some(true),
            "{tool} {args}"
        );
    }
    let bad = json!({"command": "", "extra": 1});
    assert_eq!(fast::check(reg["bash"].schema(), &bad), Some(false));
    let bad = json!({"argv": []});
    assert_eq!(fast::check(reg["bash"].schema(), &bad), Some(false));
    assert!(reg["bash"].validate_full(&bad).is_err(), "{bad}");
    // Exactly one of `command` and `argv`: a kernel rule (model APIs refuse a top-level
    // `oneOf`), denied at stage validation by both entry points, naming the argument.
    for (bad, pointer) in [
        (json!({}), "`/`"),
        (json!({"command": "x", "argv": ["x"]}), "`/argv`"),
    ] {
        for d in [
            reg["bash"].validate(&bad).unwrap_err(),
            reg["bash"].validate_full(&bad).unwrap_err(),
        ] {
            assert_eq!(d.stage, airlock_policy::Stage::Validation, "{bad}");
            assert_eq!(d.rule, "command_or_argv", "{bad}");
            assert!(d.reason.contains(pointer), "{bad}: {}", d.reason);
        }
    }
}
