//! Merging airlock's keys into a client's existing configuration file (JSON, TOML or YAML)
//! without losing anything else in it: key order and (for TOML) comments survive, a key that
//! already has the wanted value is left as it is, and a file that does not parse is an error
//! before anything is written.

use serde_json::Value;
use std::fmt;

/// The format of a client configuration file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// JSON (`settings.json`, `.claude.json`, `mcp.json`).
    Json,
    /// TOML (Codex's `config.toml`), edited with `toml_edit` so comments survive.
    Toml,
    /// YAML (Goose's `config.yaml`); comments are not kept (the `.bak` copy has them).
    Yaml,
}

impl Format {
    /// The name shown in `airlock setup` output.
    pub fn name(self) -> &'static str {
        match self {
            Format::Json => "JSON",
            Format::Toml => "TOML",
            Format::Yaml => "YAML",
        }
    }
}

/// One change to a configuration file.
#[derive(Debug, Clone)]
pub enum Op {
    /// Set the key at `path`; an object value is merged key by key into what is there.
    Set(Vec<String>, Value),
    /// Make the array at `path` contain `items` (created if missing; others kept).
    Union(Vec<String>, Vec<Value>),
    /// Remove `items` from the array at `path` if present; `why` is shown to the operator.
    Without(Vec<String>, Vec<Value>, &'static str),
}

impl Op {
    /// The key path the change touches.
    pub fn path(&self) -> &[String] {
        match self {
            Op::Set(p, _) | Op::Union(p, _) | Op::Without(p, _, _) => p,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = key_path(self.path());
        let list = |items: &[Value]| {
            items
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            Op::Set(_, v) if v.is_object() => write!(f, "set {key}"),
            Op::Set(_, v) => write!(f, "set {key} = {v}"),
            Op::Union(_, items) => write!(f, "add {} to {key}", list(items)),
            Op::Without(_, items, why) => write!(f, "remove {} from {key} ({why})", list(items)),
        }
    }
}

/// `a.b."/x/y".c`: a key path as the operator reads it.
pub fn key_path(path: &[String]) -> String {
    path.iter()
        .map(|k| {
            if !k.is_empty()
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                k.clone()
            } else {
                Value::String(k.clone()).to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// Why an existing file cannot be merged into.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    /// The file does not parse in its format.
    #[error("is not valid {format}: {detail}")]
    Malformed {
        /// The file's format.
        format: &'static str,
        /// The parser's message.
        detail: String,
    },
    /// A key airlock must write into holds a value of another kind.
    #[error("`{key}` is not {expected}; fix or remove it and run setup again")]
    Shape {
        /// The key path.
        key: String,
        /// What was expected there.
        expected: &'static str,
    },
}

/// The result of merging: the new text and the changes that actually changed something.
pub struct Merged {
    /// The whole new file.
    pub text: String,
    /// The operations that changed the file (empty: already up to date).
    pub changed: Vec<Op>,
}

/// Merge `ops` into `existing` (`None`: the file does not exist yet).
pub fn merge(format: Format, existing: Option<&str>, ops: &[Op]) -> Result<Merged, EditError> {
    match format {
        Format::Json | Format::Yaml => merge_tree(format, existing, ops),
        Format::Toml => merge_toml(existing, ops),
    }
}

/// The text airlock's keys alone make in `format` (what `--print` shows).
pub fn fragment(format: Format, ops: &[Op]) -> String {
    let ops: Vec<Op> = ops
        .iter()
        .filter(|o| !matches!(o, Op::Without(..)))
        .cloned()
        .collect();
    merge(format, None, &ops)
        .map(|m| m.text)
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// JSON and YAML: an order-preserving tree (serde_yaml_ng's mapping keeps insertion order).

type Tree = serde_yaml_ng::Value;

fn merge_tree(format: Format, existing: Option<&str>, ops: &[Op]) -> Result<Merged, EditError> {
    let malformed = |detail: String| EditError::Malformed {
        format: format.name(),
        detail,
    };
    let mut root: Tree = match existing {
        Some(text) if !text.trim().is_empty() => match format {
            Format::Json => serde_json::from_str(text).map_err(|e| malformed(e.to_string()))?,
            _ => serde_yaml_ng::from_str(text).map_err(|e| malformed(e.to_string()))?,
        },
        _ => Tree::Mapping(Default::default()),
    };
    if !root.is_mapping() {
        return Err(EditError::Shape {
            key: "(top level)".into(),
            expected: "an object",
        });
    }
    let mut changed = Vec::new();
    for op in ops {
        if apply_tree(&mut root, op)? {
            changed.push(op.clone());
        }
    }
    let text = match format {
        Format::Json => {
            let mut s =
                serde_json::to_string_pretty(&root).map_err(|e| malformed(e.to_string()))?;
            s.push('\n');
            s
        }
        _ => serde_yaml_ng::to_string(&root).map_err(|e| malformed(e.to_string()))?,
    };
    let text = match existing {
        // Unchanged content keeps the user's own layout.
        Some(old) if changed.is_empty() => old.to_string(),
        _ => text,
    };
    Ok(Merged { text, changed })
}

fn to_tree(v: &Value) -> Tree {
    serde_yaml_ng::to_value(v).unwrap_or(Tree::Null)
}

/// Walk to the parent mapping of `path`'s last key, creating mappings on the way.
fn tree_parent<'a>(
    root: &'a mut Tree,
    path: &[String],
) -> Result<&'a mut serde_yaml_ng::Mapping, EditError> {
    let mut cur = root;
    for (i, k) in path[..path.len() - 1].iter().enumerate() {
        let map = cur.as_mapping_mut().ok_or_else(|| EditError::Shape {
            key: key_path(&path[..i]),
            expected: "an object",
        })?;
        let key = Tree::String(k.clone());
        if !map.contains_key(&key) {
            map.insert(key.clone(), Tree::Mapping(Default::default()));
        }
        cur = map.get_mut(&key).expect("just inserted");
    }
    cur.as_mapping_mut().ok_or_else(|| EditError::Shape {
        key: key_path(&path[..path.len() - 1]),
        expected: "an object",
    })
}

fn deep_set(slot: &mut Tree, value: &Value, path: &[String]) -> Result<bool, EditError> {
    if let Value::Object(obj) = value
        && !obj.is_empty()
    {
        if slot.is_null() {
            *slot = Tree::Mapping(Default::default());
        }
        let map = slot.as_mapping_mut().ok_or_else(|| EditError::Shape {
            key: key_path(path),
            expected: "an object",
        })?;
        let mut changed = false;
        for (k, v) in obj {
            let key = Tree::String(k.clone());
            if !map.contains_key(&key) {
                map.insert(key.clone(), Tree::Null);
                changed = true;
            }
            let mut sub = path.to_vec();
            sub.push(k.clone());
            changed |= deep_set(map.get_mut(&key).expect("present"), v, &sub)?;
        }
        return Ok(changed);
    }
    let new = to_tree(value);
    if *slot == new {
        return Ok(false);
    }
    *slot = new;
    Ok(true)
}

fn apply_tree(root: &mut Tree, op: &Op) -> Result<bool, EditError> {
    let path = op.path();
    let parent = tree_parent(root, path)?;
    let key = Tree::String(path[path.len() - 1].clone());
    match op {
        Op::Set(_, value) => {
            let mut changed = false;
            if !parent.contains_key(&key) {
                parent.insert(key.clone(), Tree::Null);
                changed = true;
            }
            Ok(deep_set(parent.get_mut(&key).expect("present"), value, path)? || changed)
        }
        Op::Union(_, items) => {
            if !parent.contains_key(&key) {
                parent.insert(key.clone(), Tree::Sequence(Vec::new()));
            }
            let seq = parent
                .get_mut(&key)
                .and_then(Tree::as_sequence_mut)
                .ok_or_else(|| EditError::Shape {
                    key: key_path(path),
                    expected: "a list",
                })?;
            let mut changed = false;
            for item in items {
                let t = to_tree(item);
                if !seq.contains(&t) {
                    seq.push(t);
                    changed = true;
                }
            }
            Ok(changed)
        }
        Op::Without(_, items, _) => {
            let Some(slot) = parent.get_mut(&key) else {
                return Ok(false);
            };
            let seq = slot.as_sequence_mut().ok_or_else(|| EditError::Shape {
                key: key_path(path),
                expected: "a list",
            })?;
            let before = seq.len();
            let gone: Vec<Tree> = items.iter().map(to_tree).collect();
            seq.retain(|t| !gone.contains(t));
            Ok(seq.len() != before)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// TOML: toml_edit keeps comments, layout and key order.

fn merge_toml(existing: Option<&str>, ops: &[Op]) -> Result<Merged, EditError> {
    let mut doc: toml_edit::DocumentMut =
        existing
            .unwrap_or("")
            .parse()
            .map_err(|e: toml_edit::TomlError| EditError::Malformed {
                format: "TOML",
                detail: e.to_string().trim().to_string(),
            })?;
    let mut changed = Vec::new();
    for op in ops {
        if apply_toml(doc.as_table_mut(), op)? {
            changed.push(op.clone());
        }
    }
    let text = match existing {
        Some(old) if changed.is_empty() => old.to_string(),
        _ => doc.to_string(),
    };
    Ok(Merged { text, changed })
}

fn toml_value(v: &Value) -> toml_edit::Value {
    match v {
        Value::Bool(b) => (*b).into(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.into(),
            None => n.as_f64().unwrap_or(0.0).into(),
        },
        Value::String(s) => s.as_str().into(),
        Value::Array(items) => {
            let arr: toml_edit::Array = items.iter().map(toml_value).collect();
            toml_edit::Value::Array(arr)
        }
        Value::Object(obj) => {
            let mut t = toml_edit::InlineTable::new();
            for (k, v) in obj {
                t.insert(k, toml_value(v));
            }
            toml_edit::Value::InlineTable(t)
        }
        Value::Null => "".into(),
    }
}

fn toml_json(v: &toml_edit::Value) -> Option<Value> {
    Some(match v {
        toml_edit::Value::String(s) => Value::String(s.value().clone()),
        toml_edit::Value::Integer(i) => Value::from(*i.value()),
        toml_edit::Value::Float(f) => Value::from(*f.value()),
        toml_edit::Value::Boolean(b) => Value::Bool(*b.value()),
        toml_edit::Value::Array(a) => Value::Array(a.iter().map(toml_json).collect::<Option<_>>()?),
        _ => return None,
    })
}

fn toml_exists(root: &toml_edit::Table, path: &[String]) -> bool {
    let mut cur: &dyn toml_edit::TableLike = root;
    for (i, k) in path.iter().enumerate() {
        match cur.get(k) {
            None => return false,
            Some(_) if i + 1 == path.len() => return true,
            Some(item) => match item.as_table_like() {
                Some(t) => cur = t,
                None => return true,
            },
        }
    }
    true
}

/// The table at `path` (created as needed; intermediate tables stay implicit).
fn toml_table<'a>(
    root: &'a mut toml_edit::Table,
    path: &[String],
) -> Result<&'a mut dyn toml_edit::TableLike, EditError> {
    let mut cur: &mut dyn toml_edit::TableLike = root;
    for (i, k) in path.iter().enumerate() {
        if cur.get(k).is_none() {
            let mut t = toml_edit::Table::new();
            t.set_implicit(i + 1 < path.len());
            cur.insert(k, toml_edit::Item::Table(t));
        }
        cur = cur
            .get_mut(k)
            .and_then(toml_edit::Item::as_table_like_mut)
            .ok_or_else(|| EditError::Shape {
                key: key_path(&path[..=i]),
                expected: "a table",
            })?;
    }
    Ok(cur)
}

fn toml_set(
    table: &mut dyn toml_edit::TableLike,
    key: &str,
    value: &Value,
    path: &[String],
) -> Result<bool, EditError> {
    let existing = table.get(key).and_then(toml_edit::Item::as_value);
    if existing.and_then(toml_json).as_ref() == Some(value) {
        return Ok(false);
    }
    if table.get(key).is_some() && existing.is_none() {
        return Err(EditError::Shape {
            key: key_path(path),
            expected: "a value",
        });
    }
    table.insert(key, toml_edit::Item::Value(toml_value(value)));
    Ok(true)
}

fn apply_toml(root: &mut toml_edit::Table, op: &Op) -> Result<bool, EditError> {
    let path = op.path();
    let (last, parent_path) = path.split_last().expect("non-empty key path");
    match op {
        Op::Set(_, Value::Object(obj)) => {
            let existed = toml_exists(root, path);
            let parent = toml_table(root, path)?;
            let mut changed = !existed;
            for (k, v) in obj {
                let mut sub = path.to_vec();
                sub.push(k.clone());
                changed |= toml_set(parent, k, v, &sub)?;
            }
            Ok(changed)
        }
        Op::Set(_, value) => toml_set(toml_table(root, parent_path)?, last, value, path),
        Op::Union(_, items) | Op::Without(_, items, _) => {
            let add = matches!(op, Op::Union(..));
            let parent = toml_table(root, parent_path)?;
            if parent.get(last).is_none() {
                if !add {
                    return Ok(false);
                }
                parent.insert(
                    last,
                    toml_edit::Item::Value(toml_edit::Value::Array(Default::default())),
                );
            }
            let arr = parent
                .get_mut(last)
                .and_then(toml_edit::Item::as_array_mut)
                .ok_or_else(|| EditError::Shape {
                    key: key_path(path),
                    expected: "an array",
                })?;
            let mut changed = false;
            for item in items {
                let pos = arr.iter().position(|v| toml_json(v).as_ref() == Some(item));
                match (add, pos) {
                    (true, None) => {
                        arr.push(toml_value(item));
                        changed = true;
                    }
                    (false, Some(i)) => {
                        arr.remove(i);
                        changed = true;
                    }
                    _ => {}
                }
            }
            Ok(changed)
        }
    }
}
