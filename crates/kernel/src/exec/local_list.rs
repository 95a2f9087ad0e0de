//! Session-local writes by name: writes under ignored paths (a virtualenv, `node_modules`,
//! build outputs) are never applied but later commands and verify see them, so `status`,
//! `diff`, the `exec` result and the verdict list them, grouped by the installed package or
//! output directory they belong to, with those that change how code runs named one by one.

use super::local_hooks::LocalHook;
use airlock_stage::{Change, StagedEntry};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Groups shown in text at the most (JSON lists every one).
const TEXT_GROUPS: usize = 40;
/// Groups listed in JSON at the most.
const JSON_GROUPS: usize = 10_000;

/// The group a session-local path belongs to: the installed package below `site-packages` or
/// `node_modules` (scoped names included), else its first two components.
pub(crate) fn group_of(path: &str) -> String {
    let comps: Vec<&str> = path.split('/').collect();
    let end = if let Some(i) = comps
        .iter()
        .position(|c| *c == "site-packages" || *c == "dist-packages")
    {
        i + 2
    } else if let Some(i) = comps.iter().position(|c| *c == "node_modules") {
        if comps.get(i + 1).is_some_and(|c| c.starts_with('@')) {
            i + 3
        } else {
            i + 2
        }
    } else {
        2
    };
    let end = end.min(comps.len());
    let mut g = comps[..end].join("/");
    if end < comps.len() {
        g.push('/');
    }
    g
}

/// The session-local entries of a snapshot, grouped: (group, files) in path order.
pub(crate) fn groups<'a>(entries: impl Iterator<Item = &'a StagedEntry>) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for e in entries {
        if !e.session_local || matches!(e.change, Change::Dir { .. }) {
            continue;
        }
        *out.entry(group_of(&e.path.display())).or_insert(0) += 1;
    }
    out
}

/// The text block for `status`, `diff` and `exec` (none when there is nothing).
pub(crate) fn text(groups: &BTreeMap<String, u64>, hooks: &[LocalHook]) -> Option<String> {
    if groups.is_empty() {
        return None;
    }
    let total: u64 = groups.values().sum();
    let mut out = format!(
        "session-local ({total} file(s) under ignored paths: seen by later commands and by verify, never applied):\n"
    );
    for (g, n) in groups.iter().take(TEXT_GROUPS) {
        let name = airlock_types::display::Shown::name(g);
        if g.ends_with('/') {
            out.push_str(&format!("  {name}  ({n} file(s))\n"));
        } else {
            out.push_str(&format!("  {name}\n"));
        }
    }
    if groups.len() > TEXT_GROUPS {
        out.push_str(&format!(
            "  … and {} more group(s) (`status --json` lists them all)\n",
            groups.len() - TEXT_GROUPS
        ));
    }
    for h in hooks {
        out.push_str(&format!(
            "  ! {}: {} — a verdict that depends on it needs the operator\n",
            airlock_types::display::Shown::name(&h.path),
            h.why
        ));
    }
    Some(out)
}

/// The JSON of the same (`session_local`).
pub(crate) fn json(groups: &BTreeMap<String, u64>, hooks: &[LocalHook]) -> Option<Value> {
    if groups.is_empty() {
        return None;
    }
    let listed: Vec<Value> = groups
        .iter()
        .take(JSON_GROUPS)
        .map(|(g, n)| json!({ "path": g, "files": n }))
        .collect();
    Some(json!({
        "count": groups.values().sum::<u64>(),
        "groups": listed,
        "groups_omitted": groups.len().saturating_sub(JSON_GROUPS),
        "hooks": hooks,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_group_by_installed_package_or_output_directory() {
        assert_eq!(
            group_of(".venv/lib/python3.11/site-packages/requests/api.py"),
            ".venv/lib/python3.11/site-packages/requests/"
        );
        assert_eq!(
            group_of(".venv/lib/python3.11/site-packages/zz.pth"),
            ".venv/lib/python3.11/site-packages/zz.pth"
        );
        assert_eq!(
            group_of("node_modules/@scope/pkg/index.js"),
            "node_modules/@scope/pkg/"
        );
        assert_eq!(group_of("node_modules/.bin/vitest"), "node_modules/.bin/");
        assert_eq!(
            group_of("web/node_modules/left-pad/index.js"),
            "web/node_modules/left-pad/"
        );
        assert_eq!(group_of("target/debug/deps/x.rlib"), "target/debug/");
        assert_eq!(group_of("build.log"), "build.log");
    }
}
