//! Rust projects: the workspace flag and cargo aliases.

use std::path::Path;

use super::ProjectPlan;
use crate::adapter;
use crate::detect::FileSource;
use crate::model::RunnerKind;

/// How deep aliases may refer to aliases (cargo itself refuses recursion).
const MAX_ALIAS_DEPTH: usize = 8;

/// `cargo test` over the whole workspace when the root manifest declares one.
pub(crate) fn plan(root: &Path, src: &dyn FileSource) -> ProjectPlan {
    let mut plan = adapter::plan(RunnerKind::Cargo, None, root, src);
    let workspace = src
        .read("Cargo.toml")
        .and_then(|b| toml::from_str::<toml::Table>(&String::from_utf8_lossy(&b)).ok())
        .is_some_and(|t| t.contains_key("workspace"));
    if workspace && !plan.argv.iter().any(|a| a == "--workspace") {
        plan.argv.push("--workspace".into());
    }
    ProjectPlan::bare(plan)
}

/// The project's cargo aliases (`[alias]` of `.cargo/config.toml` or `.cargo/config`).
fn aliases(src: &dyn FileSource) -> toml::Table {
    [".cargo/config.toml", ".cargo/config"]
        .iter()
        .find_map(|p| src.read(p))
        .and_then(|b| toml::from_str::<toml::Table>(&String::from_utf8_lossy(&b)).ok())
        .and_then(|mut t| t.remove("alias"))
        .and_then(|a| match a {
            toml::Value::Table(t) => Some(t),
            _ => None,
        })
        .unwrap_or_default()
}

/// `args` (after `cargo`) with a leading alias expanded, as cargo expands it.
fn expand(args: &[String], src: &dyn FileSource) -> Vec<String> {
    let table = aliases(src);
    let mut args = args.to_vec();
    for _ in 0..MAX_ALIAS_DEPTH {
        let Some(at) = args
            .iter()
            .position(|a| !a.starts_with('-') && !a.starts_with('+'))
        else {
            break;
        };
        let words: Vec<String> = match table.get(&args[at]) {
            Some(toml::Value::String(s)) => s.split_whitespace().map(str::to_string).collect(),
            Some(toml::Value::Array(a)) => a
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            _ => break,
        };
        if words.is_empty() || words[0] == args[at] {
            break;
        }
        args.splice(at..=at, words);
    }
    args
}

/// True when `args` (after `cargo`) run `cargo test`, directly or through an alias.
pub(crate) fn is_test(args: &[String], src: &dyn FileSource) -> bool {
    let args = expand(args, src);
    args.iter()
        .find(|a| !a.starts_with('-') && !a.starts_with('+'))
        .is_some_and(|a| a == "test" || a == "t")
}

/// An explicit `cargo …` command (argv from `cargo` on): aliases expanded, and JSON diagnostics
/// and `--offline` added after `test` unless the command sets them.
pub(crate) fn explicit(words: &[String], src: &dyn FileSource) -> Vec<String> {
    let (program, rest) = match words.split_first() {
        Some(x) => x,
        None => return words.to_vec(),
    };
    let mut out = vec![program.clone()];
    out.extend(expand(rest, src));
    let Some(test) = out
        .iter()
        .skip(1)
        .position(|a| !a.starts_with('-') && !a.starts_with('+'))
        .map(|p| p + 1)
    else {
        return out;
    };
    let flags_end = out.iter().position(|a| a == "--").unwrap_or(out.len());
    let has = |name: &str| {
        out[..flags_end]
            .iter()
            .any(|a| a == name || a.starts_with(&format!("{name}=")))
    };
    let mut add = Vec::new();
    if !has("--message-format") {
        add.push("--message-format=json-diagnostic-short".to_string());
    }
    if !has("--offline") && !has("--frozen") {
        add.push("--offline".to_string());
    }
    out.splice(test + 1..test + 1, add);
    out
}
