//! A fast accept path for tool arguments: an interpreter for the small subset of JSON Schema
//! that the registry's schemas use (schemars output: `type`, `properties`, `required`,
//! `additionalProperties`, `items`, string lengths, array sizes, integer bounds, `const`/`enum` of
//! non-numbers, `oneOf`, local `$ref`s into `$defs`, and annotations).
//!
//! Compiling a `jsonschema` validator first compiles the JSON Schema meta-schema, about a
//! millisecond per process; a CLI call pays that on every invocation. This module answers
//! `Some(true)` only when it is certain the arguments are valid, `Some(false)` when certain they
//! are not, and `None` for anything outside its subset (an unknown keyword, a float compared
//! with a bound, a non-local `$ref`, …). The caller accepts on `Some(true)` and otherwise asks
//! `jsonschema`, which stays the authority and writes the error message. The differential
//! property test in `tests/validation_fast.rs` holds the two to the same answers.

use serde_json::{Map, Value};

/// Keywords that constrain nothing (annotations) or only hold definitions.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$defs",
    "$comment",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    // An annotation in 2020-12 unless format assertion is switched on, which it is not.
    "format",
];

/// Deepest `$ref`/subschema nesting followed before giving up (`None`).
const MAX_DEPTH: usize = 32;

/// Is `instance` valid against `schema` (the root, for `$ref`s)? `None`: not decidable here.
pub fn check(schema: &Value, instance: &Value) -> Option<bool> {
    eval(schema, schema, instance, 0)
}

fn eval(root: &Value, schema: &Value, instance: &Value, depth: usize) -> Option<bool> {
    if depth > MAX_DEPTH {
        return None;
    }
    let obj = match schema {
        Value::Bool(b) => return Some(*b),
        Value::Object(o) => o,
        _ => return None,
    };
    // Every keyword must be understood before any answer is given: an unknown one could
    // reject what the others accept.
    for key in obj.keys() {
        let known = ANNOTATIONS.contains(&key.as_str())
            || matches!(
                key.as_str(),
                "type"
                    | "properties"
                    | "required"
                    | "additionalProperties"
                    | "items"
                    | "minLength"
                    | "maxLength"
                    | "minItems"
                    | "maxItems"
                    | "minimum"
                    | "maximum"
                    | "const"
                    | "enum"
                    | "oneOf"
                    | "$ref"
            );
        if !known {
            return None;
        }
    }
    let mut valid = true;
    for (key, value) in obj {
        let ok = match key.as_str() {
            "type" => type_ok(value, instance)?,
            "properties" | "additionalProperties" | "required" => {
                object_ok(root, obj, key, value, instance, depth)?
            }
            "items" => match instance {
                Value::Array(items) => {
                    let mut all = true;
                    for item in items {
                        all &= eval(root, value, item, depth + 1)?;
                    }
                    all
                }
                _ => true,
            },
            "minLength" | "maxLength" => match instance {
                Value::String(s) => within(key, s.chars().count() as u64, value.as_u64()?),
                _ => true,
            },
            "minItems" | "maxItems" => match instance {
                Value::Array(items) => within(key, items.len() as u64, value.as_u64()?),
                _ => true,
            },
            "minimum" | "maximum" => match instance {
                Value::Number(n) => {
                    let (x, bound) = (exact_int(n)?, exact_int(value.as_number()?)?);
                    if key == "minimum" {
                        x >= bound
                    } else {
                        x <= bound
                    }
                }
                _ => true,
            },
            "const" => non_numeric_eq(value, instance)?,
            "enum" => {
                let mut any = false;
                for candidate in value.as_array()? {
                    any |= non_numeric_eq(candidate, instance)?;
                }
                any
            }
            "oneOf" => {
                let mut matched = 0;
                for sub in value.as_array()? {
                    if eval(root, sub, instance, depth + 1)? {
                        matched += 1;
                    }
                }
                matched == 1
            }
            "$ref" => {
                let target = resolve(root, value.as_str()?)?;
                eval(root, target, instance, depth + 1)?
            }
            _ => true, // annotations
        };
        valid &= ok;
    }
    Some(valid)
}

/// `properties`, `additionalProperties` and `required` of one object schema (each keyword is
/// visited separately; each looks at its siblings where the spec says so).
fn object_ok(
    root: &Value,
    schema: &Map<String, Value>,
    key: &str,
    value: &Value,
    instance: &Value,
    depth: usize,
) -> Option<bool> {
    let Value::Object(fields) = instance else {
        return Some(true);
    };
    match key {
        "required" => {
            let mut all = true;
            for name in value.as_array()? {
                all &= fields.contains_key(name.as_str()?);
            }
            Some(all)
        }
        "properties" => {
            let props = value.as_object()?;
            let mut all = true;
            for (name, sub) in props {
                if let Some(v) = fields.get(name) {
                    all &= eval(root, sub, v, depth + 1)?;
                }
            }
            Some(all)
        }
        _ => {
            // additionalProperties: applies to the fields `properties` does not name.
            let named = match schema.get("properties") {
                Some(p) => Some(p.as_object()?),
                None => None,
            };
            let mut all = true;
            for (name, v) in fields {
                if named.is_some_and(|n| n.contains_key(name)) {
                    continue;
                }
                all &= eval(root, value, v, depth + 1)?;
            }
            Some(all)
        }
    }
}

/// `len` against a `min…` or `max…` keyword's bound.
fn within(key: &str, len: u64, bound: u64) -> bool {
    if key.starts_with("min") {
        len >= bound
    } else {
        len <= bound
    }
}

fn type_ok(ty: &Value, instance: &Value) -> Option<bool> {
    match ty {
        Value::String(t) => one_type(t, instance),
        Value::Array(ts) => {
            let mut any = false;
            for t in ts {
                any |= one_type(t.as_str()?, instance)?;
            }
            Some(any)
        }
        _ => None,
    }
}

fn one_type(t: &str, instance: &Value) -> Option<bool> {
    Some(match t {
        "object" => instance.is_object(),
        "array" => instance.is_array(),
        "string" => instance.is_string(),
        "boolean" => instance.is_boolean(),
        "null" => instance.is_null(),
        "number" => instance.is_number(),
        "integer" => match instance {
            // A float with no fractional part counts as an integer in JSON Schema: leave such
            // edge cases to the full validator.
            Value::Number(n) => {
                if n.is_f64() {
                    return None;
                }
                true
            }
            _ => false,
        },
        _ => return None,
    })
}

fn exact_int(n: &serde_json::Number) -> Option<i128> {
    if let Some(u) = n.as_u64() {
        return Some(u as i128);
    }
    n.as_i64().map(i128::from)
}

/// Equality where no number is involved (JSON Schema's numeric equality, 1 == 1.0, is left to
/// the full validator).
fn non_numeric_eq(a: &Value, b: &Value) -> Option<bool> {
    fn has_number(v: &Value) -> bool {
        match v {
            Value::Number(_) => true,
            Value::Array(a) => a.iter().any(has_number),
            Value::Object(o) => o.values().any(has_number),
            _ => false,
        }
    }
    if has_number(a) || has_number(b) {
        return None;
    }
    Some(a == b)
}

/// `#/$defs/Name` (JSON-pointer escapes included) inside the root; anything else is `None`.
fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    if pointer.contains('%') {
        return None; // URI-escaped pointers: not used by schemars; let the full validator resolve.
    }
    root.pointer(pointer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn subset_answers_and_declines() {
        let s = json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["a"],
            "properties": {
                "a": {"type": "string", "minLength": 1, "maxLength": 3},
                "n": {"type": ["integer", "null"], "minimum": 1, "maximum": 10},
                "k": {"$ref": "#/$defs/K"}
            },
            "$defs": {"K": {"oneOf": [{"const": "x"}, {"type": "boolean"}]}}
        });
        assert_eq!(check(&s, &json!({"a": "hé"})), Some(true));
        assert_eq!(check(&s, &json!({"a": ""})), Some(false));
        assert_eq!(check(&s, &json!({"a": "abcd"})), Some(false));
        assert_eq!(check(&s, &json!({})), Some(false));
        assert_eq!(check(&s, &json!({"a": "x", "z": 1})), Some(false));
        assert_eq!(check(&s, &json!({"a": "x", "n": null})), Some(true));
        assert_eq!(check(&s, &json!({"a": "x", "n": 11})), Some(false));
        assert_eq!(check(&s, &json!({"a": "x", "n": 2.0})), None);
        assert_eq!(check(&s, &json!({"a": "x", "k": "x"})), Some(true));
        assert_eq!(check(&s, &json!({"a": "x", "k": "y"})), Some(false));
        // oneOf means exactly one.
        let overlap = json!({"oneOf": [{"type": "string"}, {"minLength": 1}]});
        assert_eq!(check(&overlap, &json!("ab")), Some(false));
        assert_eq!(check(&overlap, &json!("")), Some(true));
        assert_eq!(check(&json!({"pattern": "^a"}), &json!("a")), None);
        assert_eq!(check(&json!({"$ref": "other.json"}), &json!(1)), None);
    }
}
