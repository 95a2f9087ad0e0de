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

/// The workspace's persistent cargo package cache, outside the workspace and outside the
/// changeset: `<home>/.cache/airlock/cargo-home/<workspace name>-<hash>`. Only for a workspace
/// with a `Cargo.toml` at its root, and only when `$HOME` is known.
///
/// A run granted network sees it read-write as `CARGO_HOME`, so `cargo fetch` fills it; every
/// later run of the workspace (commands and `verify`) sees it read-only as `CARGO_HOME`, once it
/// exists, so they build offline against what was fetched.
pub(crate) fn cargo_cache(home: Option<&Path>, root: &Path) -> Option<std::path::PathBuf> {
    if !root.join("Cargo.toml").is_file() {
        return None;
    }
    let home = home.filter(|h| h.is_absolute())?;
    // FNV-1a of the workspace path: stable across builds, enough to tell workspaces apart.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in root.as_os_str().as_encoded_bytes() {
        hash = (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    let name: String = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(40)
        .collect();
    Some(
        home.join(".cache/airlock/cargo-home")
            .join(format!("{name}-{hash:016x}")),
    )
}

/// Exposes the workspace's cargo cache to `spec`: read-write when `granted` (made if missing),
/// else read-only when it exists. Returns whether it was exposed.
pub(crate) fn expose_cargo_cache(
    spec: &mut airlock_sandbox::SandboxSpec,
    home: Option<&Path>,
    root: &Path,
    granted: bool,
) -> bool {
    let Some(cache) = cargo_cache(home, root) else {
        return false;
    };
    if granted {
        if let Err(e) = std::fs::create_dir_all(&cache) {
            tracing::warn!("cannot make the cargo cache {}: {e}", cache.display());
            return false;
        }
        spec.rw_binds.push(cache.clone());
    } else if cache.is_dir() {
        spec.ro_binds.push(cache.clone());
    } else {
        return false;
    }
    spec.env.push(("CARGO_HOME".into(), cache.into_os_string()));
    true
}
