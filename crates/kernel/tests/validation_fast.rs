//! Validation by the typed arguments (serde plus each type's bounds) against the `jsonschema`
//! validator of the published schema: on every tool of the registry and arbitrary arguments,
//! the typed parse accepts exactly what the schema accepts, and a rejection carries the
//! schema validator's JSON pointer and message. Arguments are drawn both at random and from
//! each schema's own property names and value shapes, so valid calls are common.

use airlock_kernel::args::exactly_one_of;
use airlock_kernel::tools::registry;
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
    fn typed_arguments_agree_with_jsonschema(
        tool in 0usize..64,
        args in prop_oneof![arguments(property_names()), value()],
    ) {
        let reg = registry(8 << 20);
        let def = reg.values().nth(tool % reg.len()).unwrap();
        let full = def.validate_full(&args);
        let typed = def.parse_typed(&args);
        prop_assert_eq!(typed.is_ok(), full.is_ok(), "{} on {}: {:?}", def.name, args, typed);
        // What callers see: `validate` and the authority agree on every input, error included.
        prop_assert_eq!(def.validate(&args), full);
    }
}

/// Ordinary calls parse; malformed ones are refused by both.
#[test]
fn typed_arguments_decide_typical_calls() {
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
        assert_eq!(def.parse_typed(&args), Ok(()), "{tool} {args}");
    }
    let bad = json!({"command": "", "extra": 1});
    assert!(reg["bash"].parse_typed(&bad).is_err());
    let bad = json!({"argv": []});
    assert!(reg["bash"].parse_typed(&bad).is_err(), "{bad}");
    assert!(reg["bash"].validate_full(&bad).is_err(), "{bad}");
    // Exactly one of `command` and `argv`: a kernel rule (model APIs refuse a top-level
    // `oneOf`), denied at stage validation by both entry points, naming the argument.
    for (bad, pointer) in [
        (json!({}), "`/`"),
        (json!({"command": "x", "argv": ["x"]}), "`/argv`"),
    ] {
        assert!(exactly_one_of("bash", &bad).is_err(), "{bad}");
        assert!(reg["bash"].parse_typed(&bad).is_err(), "{bad}");
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

/// A rejection names the JSON pointer of the offending value and what is wrong with it.
#[test]
fn rejections_name_the_pointer() {
    let reg = registry(8 << 20);
    let d = reg["read_file"]
        .validate(&json!({"path": "a", "limit": 0}))
        .unwrap_err();
    assert_eq!(d.rule, "schema_violation");
    assert!(
        d.reason
            .starts_with("Argument `/limit` of `read_file` is invalid:"),
        "{}",
        d.reason
    );
    let d = reg["write_file"]
        .validate(&json!({"path": "a", "content": "x", "mode": 7}))
        .unwrap_err();
    assert!(
        d.reason
            .starts_with("Argument `/` of `write_file` is invalid:"),
        "{}",
        d.reason
    );
    assert!(d.reason.contains("mode"), "{}", d.reason);
    // An integral float is an integer, as JSON Schema counts them.
    assert_eq!(
        reg["read_file"].parse_typed(&json!({"path": "a", "offset": 2.0})),
        Ok(())
    );
}

/// Every tool's schema is a valid JSON Schema and accepts the tool's own examples, which the
/// typed arguments accept too.
#[test]
fn every_schema_is_valid_and_accepts_its_examples() {
    for (name, def) in registry(8 << 20) {
        assert!(
            jsonschema::meta::is_valid(def.schema()),
            "{name}: the schema is not a valid JSON Schema"
        );
        let examples = def.examples();
        assert!(!examples.is_empty(), "{name} has no example");
        for ex in examples {
            assert_eq!(def.validate_full(&ex), Ok(()), "{name}: {ex}");
            assert_eq!(def.parse_typed(&ex), Ok(()), "{name}: {ex}");
        }
    }
}
