//! The network grant of one run: the operator's `[net]` rules and `--allow-net` items, presets
//! resolved from the configuration the sandboxed toolchains read, adapted to the sandbox
//! proxy's [`NetGate`].
//!
//! Presets read only files the sandboxed toolchain itself reads: the workspace's `.npmrc` and
//! `.cargo/config.toml` (or `.cargo/config`) on disk, never staged ones (a staged edit cannot
//! widen a grant before it is applied), and nothing under the caller's `$HOME`, which the
//! sandbox does not show. Without such a file a preset names the toolchain's built-in registry.

use std::path::Path;
use std::sync::Arc;

use airlock_policy::net::{NetPolicy, NetRuleSet, PresetSources, resolve_preset};
use airlock_sandbox::net::{NetAccess, NetDecision, NetGate};

/// The policy of one run, as the proxy asks it.
#[derive(Debug)]
struct RunGate {
    policy: NetPolicy,
    command: String,
}

impl NetGate for RunGate {
    fn decide(&self, host: &str, port: u16) -> NetDecision {
        let r = self.policy.decide(host, port, &self.command);
        NetDecision {
            allowed: r.allowed,
            rule: r.rule.to_string(),
            reason: r.reason,
        }
    }
}

/// The configuration files the presets read, from the workspace at `root`.
fn preset_sources(root: &Path) -> PresetSources {
    let read = |rel: &str| std::fs::read_to_string(root.join(rel)).ok();
    PresetSources {
        npmrc: read(".npmrc").into_iter().collect(),
        pip_conf: Vec::new(),
        cargo_config: [".cargo/config.toml", ".cargo/config"]
            .into_iter()
            .filter_map(read)
            .collect(),
        go_env: Vec::new(),
    }
}

/// The grant of a run of `command` (its text): `None` when nothing is granted to it, so the
/// run keeps no network at all. A malformed `--allow-net` item is an error naming it.
pub(crate) fn access_for(
    root: &Path,
    config: Option<&NetRuleSet>,
    allow_net: &[String],
    command: &str,
) -> Result<Option<NetAccess>, String> {
    let mut rules = config.cloned().unwrap_or_default();
    let items: Vec<&str> = allow_net.iter().map(String::as_str).collect();
    rules.extend(NetRuleSet::parse(&items, &[]).map_err(|e| e.to_string())?);
    if rules.is_empty() {
        return Ok(None);
    }
    let sources = preset_sources(root);
    let policy = rules.resolve(|p| resolve_preset(p, &sources));
    if !policy.grants_any(command) {
        return Ok(None);
    }
    Ok(Some(NetAccess::new(Arc::new(RunGate {
        policy,
        command: command.to_string(),
    }))))
}

/// The result fields of a granted run: `hosts_contacted`, `hosts_refused` and, when something
/// was refused, a note saying so and how to grant it.
pub(crate) fn report_into(out: &mut serde_json::Value, report: &airlock_sandbox::net::NetReport) {
    out["hosts_contacted"] = serde_json::json!(report.hosts_contacted);
    out["hosts_refused"] = serde_json::to_value(&report.hosts_refused).unwrap_or_default();
    if let Some(first) = report.hosts_refused.first() {
        let more = report.hosts_refused.len() - 1;
        let tail = if more > 0 {
            format!(" ({more} more in hosts_refused)")
        } else {
            String::new()
        };
        let note = format!("{} [rule {}]{tail}", first.reason, first.rule);
        match out.get("note").and_then(|n| n.as_str()) {
            Some(n) => out["note"] = serde_json::json!(format!("{n} {note}")),
            None => out["note"] = serde_json::json!(note),
        }
    }
}
