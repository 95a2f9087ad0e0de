//! Every tool's published JSON Schema is one that each model API's function calling accepts,
//! so no client drops a tool for its schema (Claude Code drops a tool whose schema the
//! Anthropic API would refuse). The rules per API:
//!
//! - **Anthropic** (Messages API `tools[].input_schema`): an object schema, `type: "object"` at
//!   the top, with no `oneOf`, `anyOf` or `allOf` at the top level.
//! - **OpenAI, non-strict** (`tools[].parameters` of Chat Completions and Responses): an
//!   object schema with no `oneOf`, `anyOf`, `allOf`, `not` or `enum` at the top level.
//! - **OpenAI, strict** (`strict: true`, Structured Outputs): additionally every object has
//!   `additionalProperties: false`, combinators are at most `anyOf` (a `oneOf` of constants is
//!   rewritten to `anyOf` by strict clients; `allOf`, `not`, `if`/`then`/`else`,
//!   `patternProperties` and `dependent*` are refused anywhere), `$ref` points into the local
//!   `$defs`, and every optional property admits `null` or has a default, so a strict client
//!   can list every property in `required` without changing what a call means. (Strict
//!   clients drop the validation-only keywords the kernel enforces itself: `minLength`,
//!   `maxLength`, `default`, integer `format`s.)
//! - **Gemini** (`functionDeclarations[].parametersJsonSchema`, how Gemini CLI sends MCP
//!   tools): an object schema with no top-level combinators, keywords from the JSON Schema
//!   subset the API reads, and `type` either one type or one type with `"null"`.
//!
//! Beyond those, every schema may use only the keywords and formats listed below (a keyword
//! outside every API's subset is a schema some client mishandles).

use airlock_kernel::tools::registry;
use serde_json::Value;

/// Keywords every API above reads or ignores without error.
const KEYWORDS: &[&str] = &[
    "$schema",
    "$defs",
    "$ref",
    "type",
    "description",
    "title",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "oneOf",
    "default",
    "format",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
];

/// Formats: the standard string formats of OpenAI's strict subset and Gemini, plus the integer
/// widths schema generators emit (Gemini reads `int32`/`int64`; the others ignore them).
const FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
    "int32",
    "int64",
    "uint",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "int8",
    "int16",
    "float",
    "double",
];

const TOP_LEVEL_FORBIDDEN: &[(&str, &[&str])] = &[
    ("anthropic", &["oneOf", "anyOf", "allOf"]),
    ("openai", &["oneOf", "anyOf", "allOf", "not", "enum"]),
    ("openai-strict", &["oneOf", "anyOf", "allOf", "not", "enum"]),
    ("gemini", &["oneOf", "anyOf", "allOf", "not", "enum"]),
];

const STRICT_FORBIDDEN: &[&str] = &[
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "patternProperties",
    "dependentRequired",
    "dependentSchemas",
    "unevaluatedProperties",
];

/// Every problem of one tool's schema, as `api: pointer: what`.
fn problems(schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for (api, forbidden) in TOP_LEVEL_FORBIDDEN {
        if schema["type"] != "object" {
            out.push(format!("{api}: /: top-level type must be \"object\""));
        }
        for k in *forbidden {
            if schema.get(k).is_some() {
                out.push(format!("{api}: /: top-level `{k}` is not accepted"));
            }
        }
    }
    if !schema["properties"].is_object() {
        out.push("all: /: no `properties` object".into());
    }
    walk(schema, schema, "", &mut out);
    out
}

fn walk(root: &Value, node: &Value, ptr: &str, out: &mut Vec<String>) {
    let Some(obj) = node.as_object() else {
        out.push(format!("all: {ptr}: a schema must be an object"));
        return;
    };
    for (k, v) in obj {
        if !KEYWORDS.contains(&k.as_str()) {
            out.push(format!(
                "all: {ptr}/{k}: keyword `{k}` is outside the APIs' subsets"
            ));
        }
        if STRICT_FORBIDDEN.contains(&k.as_str()) {
            out.push(format!("openai-strict: {ptr}/{k}: `{k}` is refused"));
        }
        if k == "format" && !v.as_str().is_some_and(|f| FORMATS.contains(&f)) {
            out.push(format!("all: {ptr}/format: format {v} is not supported"));
        }
    }
    match &obj.get("type") {
        None | Some(Value::String(_)) => {}
        Some(Value::Array(types)) => {
            let non_null: Vec<_> = types.iter().filter(|t| *t != "null").collect();
            if non_null.len() != 1 || types.len() > 2 {
                out.push(format!(
                    "gemini: {ptr}/type: a type list must be one type and \"null\""
                ));
            }
        }
        Some(other) => out.push(format!("all: {ptr}/type: {other} is not a type")),
    }
    if let Some(r) = obj.get("$ref") {
        let target = r
            .as_str()
            .and_then(|r| r.strip_prefix('#'))
            .filter(|p| p.starts_with("/$defs/"))
            .and_then(|p| root.pointer(p));
        if target.is_none() {
            out.push(format!(
                "openai-strict: {ptr}/$ref: {r} does not resolve into the local $defs"
            ));
        }
    }
    let is_object =
        obj.get("type") == Some(&Value::from("object")) || obj.contains_key("properties");
    if is_object {
        if obj.get("additionalProperties") != Some(&Value::Bool(false)) {
            out.push(format!(
                "openai-strict: {ptr}: objects need `additionalProperties: false`"
            ));
        }
        let props = obj.get("properties").and_then(Value::as_object);
        let required: Vec<&str> = obj
            .get("required")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for name in &required {
            if !props.is_some_and(|p| p.contains_key(*name)) {
                out.push(format!(
                    "all: {ptr}/required: `{name}` is required but not a property"
                ));
            }
        }
        for (name, sub) in props.into_iter().flatten() {
            let sub_ptr = format!("{ptr}/properties/{name}");
            if !required.contains(&name.as_str()) && !admits_null_or_default(root, sub) {
                out.push(format!(
                    "openai-strict: {sub_ptr}: an optional property must admit null or have a default"
                ));
            }
            walk(root, sub, &sub_ptr, out);
        }
    }
    if let Some(items) = obj.get("items") {
        walk(root, items, &format!("{ptr}/items"), out);
    }
    for key in ["anyOf", "oneOf"] {
        for (i, sub) in obj
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            walk(root, sub, &format!("{ptr}/{key}/{i}"), out);
        }
    }
    if let Some(defs) = obj.get("$defs").and_then(Value::as_object) {
        for (name, sub) in defs {
            walk(root, sub, &format!("{ptr}/$defs/{name}"), out);
        }
    }
}

fn admits_null_or_default(root: &Value, s: &Value) -> bool {
    if s.get("default").is_some() {
        return true;
    }
    match s.get("type") {
        Some(Value::Array(t)) if t.iter().any(|t| t == "null") => return true,
        Some(t) if t == "null" => return true,
        _ => {}
    }
    if let Some(r) = s.get("$ref").and_then(Value::as_str)
        && let Some(target) = r.strip_prefix('#').and_then(|p| root.pointer(p))
    {
        return admits_null_or_default(root, target);
    }
    ["anyOf", "oneOf"].iter().any(|k| {
        s.get(*k)
            .and_then(Value::as_array)
            .is_some_and(|alts| alts.iter().any(|a| admits_null_or_default(root, a)))
    })
}

#[test]
fn every_tool_schema_fits_every_model_api_subset() {
    let reg = registry(8 << 20);
    assert!(reg.len() >= 18, "the registry lists every tool");
    let mut all = Vec::new();
    for (name, def) in &reg {
        for p in problems(def.schema()) {
            all.push(format!("{name}: {p}"));
        }
    }
    assert!(
        all.is_empty(),
        "schemas outside the APIs' subsets:\n{}",
        all.join("\n")
    );
}

/// The checker itself: each rule catches what it names.
#[test]
fn the_checker_catches_each_rule() {
    use serde_json::json;
    let ok = json!({"type": "object", "additionalProperties": false,
        "properties": {"a": {"type": "string"}, "b": {"type": ["integer", "null"], "format": "uint64"}},
        "required": ["a"]});
    assert_eq!(problems(&ok), Vec::<String>::new());
    let cases = [
        (
            json!({"type": "object", "additionalProperties": false, "properties": {},
            "oneOf": [{"required": ["a"]}]}),
            "anthropic: /: top-level `oneOf`",
        ),
        (
            json!({"type": "array", "items": {"type": "string"}}),
            "top-level type must be",
        ),
        (
            json!({"type": "object", "properties": {}}),
            "additionalProperties: false",
        ),
        (
            json!({"type": "object", "additionalProperties": false,
            "properties": {"a": {"type": "string"}}}),
            "must admit null",
        ),
        (
            json!({"type": "object", "additionalProperties": false,
            "properties": {"a": {"type": "string", "format": "regex"}}, "required": ["a"]}),
            "format \"regex\"",
        ),
        (
            json!({"type": "object", "additionalProperties": false,
            "properties": {"a": {"allOf": [{"type": "string"}]}}, "required": ["a"]}),
            "`allOf` is refused",
        ),
        (
            json!({"type": "object", "additionalProperties": false,
            "properties": {"a": {"$ref": "#/$defs/X"}}, "required": ["a"]}),
            "does not resolve",
        ),
        (
            json!({"type": "object", "additionalProperties": false,
            "properties": {"a": {"type": ["string", "integer"]}}, "required": ["a"]}),
            "one type and \"null\"",
        ),
        (
            json!({"type": "object", "additionalProperties": false,
            "properties": {"a": {"type": "string", "contentEncoding": "base64"}}, "required": ["a"]}),
            "outside the APIs' subsets",
        ),
    ];
    for (schema, want) in cases {
        let p = problems(&schema);
        assert!(
            p.iter().any(|l| l.contains(want)),
            "{schema}: want {want:?}, got {p:?}"
        );
    }
}
