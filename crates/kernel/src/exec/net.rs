//! The network grant of one run: the operator's `[net]` rules and `--allow-net` items, presets
//! resolved from the configuration the sandboxed toolchains read, adapted to the sandbox
//! proxy's [`NetGate`].
//!
//! Presets read only files the sandboxed toolchain itself reads: the workspace's `.npmrc` and
//! `.cargo/config.toml` (or `.cargo/config`) on disk, never staged ones (a staged edit cannot
//! widen a grant before it is applied), and nothing under the caller's `$HOME`, which the
//! sandbox does not show. Without such a file a preset names the toolchain's built-in registry.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::Duration;

use airlock_policy::net::{
    GrantItem, NetPolicy, NetRuleSet, Preset, PresetSources, resolve_preset,
};
use airlock_sandbox::net::{NetAccess, NetDecision, NetGate};

/// A question to the operator from a run's proxy: the `host:port`, the sentence of the ask
/// rule, and where the answer goes.
pub(crate) struct Question {
    label: String,
    reason: String,
    answer: mpsc::Sender<Result<(), String>>,
}

/// How long a connection waits for the operator's answer before it is refused.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(300);

/// `host:port` labels approved per (workspace, session).
type Approved = Mutex<HashMap<(PathBuf, String), HashSet<String>>>;

/// Where a granted run's questions to the operator arrive.
pub(crate) type Questions = mpsc::Receiver<Question>;

/// Hosts the operator approved for the rest of a session, per (workspace, session), for as
/// long as this process lives (never persisted).
fn session_approved() -> &'static Approved {
    static APPROVED: OnceLock<Approved> = OnceLock::new();
    APPROVED.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The policy of one run, as the proxy asks it.
#[derive(Debug)]
struct RunGate {
    policy: NetPolicy,
    command: String,
    /// (workspace, session): the key of the session's approvals.
    session: (PathBuf, String),
    /// Hosts approved for this run only.
    approved: Mutex<HashSet<String>>,
    /// Where questions to the operator go (none: no `ask` rule applies).
    asker: Option<mpsc::Sender<Question>>,
}

impl RunGate {
    fn ask(&self, label: &str, reason: &str) -> Result<(), String> {
        let lock = |m: &'static Mutex<_>| m.lock().unwrap_or_else(|p| p.into_inner());
        if self
            .approved
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(label)
            || lock(session_approved())
                .get(&self.session)
                .is_some_and(|s: &HashSet<String>| s.contains(label))
        {
            return Ok(());
        }
        let Some(asker) = &self.asker else {
            return Err(format!("{reason} No operator was reachable to approve it."));
        };
        let (tx, rx) = mpsc::channel();
        let q = Question {
            label: label.to_string(),
            reason: reason.to_string(),
            answer: tx,
        };
        if asker.send(q).is_err() {
            return Err(format!(
                "{reason} The run ended before the operator answered."
            ));
        }
        match rx.recv_timeout(ANSWER_TIMEOUT) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(why)) => Err(format!("{reason} Not approved: {why}.")),
            Err(_) => Err(format!("{reason} No answer came from the operator.")),
        }
    }
}

impl NetGate for RunGate {
    fn decide(&self, host: &str, port: u16) -> NetDecision {
        let r = self.policy.decide(host, port, &self.command);
        if r.rule == airlock_policy::net::RULE_ASK {
            let label = format!("{}:{port}", host.to_ascii_lowercase());
            return match self.ask(&label, &r.reason) {
                Ok(()) => NetDecision {
                    allowed: true,
                    rule: "net_approved".into(),
                    reason: format!("{label} was approved by the operator."),
                },
                Err(reason) => NetDecision {
                    allowed: false,
                    rule: r.rule.to_string(),
                    reason,
                },
            };
        }
        NetDecision {
            allowed: r.allowed,
            rule: r.rule.to_string(),
            reason: r.reason,
        }
    }
}

/// Puts the questions of a run's proxy to `approver`, one at a time, until `done`; an answer
/// for the session is remembered for `(root, session)`.
pub(crate) fn serve_questions(
    questions: Questions,
    approver: &dyn crate::api::Approver,
    root: &Path,
    session: &str,
    command: &str,
    done: &std::sync::atomic::AtomicBool,
) {
    use crate::api::{Approval, ApprovalRequest};
    while !done.load(std::sync::atomic::Ordering::SeqCst) {
        let Ok(q) = questions.recv_timeout(Duration::from_millis(50)) else {
            continue;
        };
        let req = ApprovalRequest {
            tool: "bash".into(),
            summary: format!("let `{command}` connect to {}", q.label),
            decision: airlock_policy::Decision::ask(
                airlock_policy::Stage::Permission,
                airlock_policy::net::RULE_ASK,
                q.reason.clone(),
            ),
        };
        let answer = match approver.approve(&req) {
            Approval::Once => Ok(()),
            Approval::Session => {
                session_approved()
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .entry((root.to_path_buf(), session.to_string()))
                    .or_default()
                    .insert(q.label.clone());
                Ok(())
            }
            Approval::Deny(why) => Err(why),
        };
        let _ = q.answer.send(answer);
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
    session: &str,
    config: Option<&NetRuleSet>,
    allow_net: &[String],
    command: &str,
) -> Result<Option<(NetAccess, Option<Questions>)>, String> {
    let mut rules = config.cloned().unwrap_or_default();
    let items: Vec<&str> = allow_net.iter().map(String::as_str).collect();
    rules.extend(NetRuleSet::parse(&items, &[]).map_err(|e| e.to_string())?);
    if rules.is_empty() {
        return Ok(None);
    }
    let policy = resolve(root, &rules);
    if !policy.grants_any(command) {
        return Ok(None);
    }
    let (asker, questions) = if rules.ask.is_empty() {
        (None, None)
    } else {
        let (tx, rx) = mpsc::channel();
        (Some(tx), Some(rx))
    };
    let gate = RunGate {
        policy,
        command: command.to_string(),
        session: (root.to_path_buf(), session.to_string()),
        approved: Mutex::new(HashSet::new()),
        asker,
    };
    Ok(Some((NetAccess::new(Arc::new(gate)), questions)))
}

/// `rules` resolved for the workspace `root`: each preset's hosts read from the toolchains'
/// configuration there.
pub(crate) fn resolve(root: &Path, rules: &NetRuleSet) -> airlock_policy::net::NetPolicy {
    let sources = preset_sources(root);
    rules.resolve(|p| resolve_preset(p, &sources))
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
/// with a `Cargo.toml` at its root, and only when `$HOME` is known. (Outside the workspace:
/// every run masks `.airlock/`, and a bind at the same path keeps `verify` unchanged.)
///
/// It is the exec domain's: a run granted network sees it read-write as `CARGO_HOME`, so
/// `cargo fetch` fills it; the workspace's later commands see it read-only as `CARGO_HOME`, once
/// it exists, so they build offline against what was fetched. `verify` never binds it: it reads
/// the verify domain's cargo home, which the host fills with the archives of this one that match
/// the lockfile's checksums ([`crate::cargo_home::seal`]).
pub(crate) fn cargo_cache(home: Option<&Path>, root: &Path) -> Option<PathBuf> {
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

/// The presets the operator's `[net]` rules and `--allow-net` items grant, whatever commands
/// they are scoped to (a malformed item grants nothing here; [`access_for`] reports it).
pub(crate) fn granted_presets(config: Option<&NetRuleSet>, allow_net: &[String]) -> Vec<Preset> {
    let items: Vec<&str> = allow_net.iter().map(String::as_str).collect();
    let flags = NetRuleSet::parse(&items, &[]).unwrap_or_default();
    let mut out: Vec<Preset> = config
        .into_iter()
        .flat_map(|c| &c.allow)
        .chain(&flags.allow)
        .filter_map(|g| match g {
            GrantItem::Preset(p, _) => Some(*p),
            GrantItem::Host(_) => None,
        })
        .collect();
    out.dedup();
    out
}

/// The caches under `$HOME` that a preset's tool writes as it fetches, when the host has them
/// (the sandbox shows them read-only otherwise: `exposure::TOOLCHAIN_PATHS`). pip writes its
/// cache under `XDG_CACHE_HOME`, which every run has writable already (the workspace's `xdg`
/// cache); a cargo workspace's granted run has its own `CARGO_HOME` ([`expose_cargo_cache`]).
const PRESET_CACHES: &[(Preset, &[&str])] = &[
    (Preset::Npm, &[".npm/_cacache"]),
    (Preset::Go, &["go/pkg/mod"]),
    (
        Preset::Cargo,
        &[
            ".cargo/registry/index",
            ".cargo/registry/cache",
            ".cargo/registry/src",
            ".cargo/git/db",
            ".cargo/git/checkouts",
        ],
    ),
];

/// Gives a granted run of `presets` the user's own package caches, writable, without the host's
/// copy ever being written: each exposed cache of [`PRESET_CACHES`] (and a `GOMODCACHE` the run
/// reads from outside `$HOME`) becomes a layered bind, the host's directory below and a layer in
/// the session's scratch directory `scratch` above, kept for the session's later runs. Returns
/// the paths layered.
pub(crate) fn layer_preset_caches(
    spec: &mut airlock_sandbox::SandboxSpec,
    home: Option<&Path>,
    presets: &[Preset],
    scratch: &Path,
) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = Vec::new();
    for (preset, rels) in PRESET_CACHES {
        if !presets.contains(preset) {
            continue;
        }
        let exposed = |p: &PathBuf| spec.home_binds.contains(p) || spec.ro_binds.contains(p);
        paths.extend(
            home.into_iter()
                .flat_map(|h| rels.iter().map(move |r| h.join(r)))
                .filter(|p| exposed(p) && p.is_dir()),
        );
        if *preset == Preset::Go
            && let Some((_, m)) = spec.env.iter().find(|(k, _)| k == "GOMODCACHE")
            && exposed(&PathBuf::from(m))
        {
            paths.push(PathBuf::from(m));
        }
    }
    // GOMODCACHE may name `~/go/pkg/mod` itself: one layer per directory.
    paths.sort();
    paths.dedup();
    paths.retain(|p| {
        let name = p.to_string_lossy().trim_matches('/').replace('/', "_");
        let layer = scratch.join("home-caches").join(name);
        let (upper, work) = (layer.join("upper"), layer.join("work"));
        match std::fs::create_dir_all(&upper).and_then(|()| std::fs::create_dir_all(&work)) {
            Ok(()) => {
                spec.layered_binds.push(airlock_sandbox::LayeredBind {
                    path: p.clone(),
                    upper,
                    work,
                });
                true
            }
            Err(e) => {
                tracing::warn!("cannot make the cache layer {}: {e}", layer.display());
                false
            }
        }
    });
    paths
}

/// Variables of a run without a grant: package managers give up at once on the network that is
/// not there instead of retrying it (npm retries a failed name lookup for 70 s, pip five times).
pub(crate) const UNGRANTED_ENV: &[(&str, &str)] = &[
    ("CARGO_NET_OFFLINE", "true"),
    ("npm_config_fetch_retries", "0"),
    ("PIP_RETRIES", "0"),
];

/// What a failed name lookup or connection prints, in the tools a run is likely to use (node,
/// glibc, curl, Python, Go, Rust).
const NET_FAILURES: &[&str] = &[
    "EAI_AGAIN",
    "ENOTFOUND",
    "ENETUNREACH",
    "Network is unreachable",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Could not resolve host",
    "Failed to resolve",
    "failed to lookup address",
    "dial tcp: lookup",
    "NameResolutionError",
];

/// The note of a run without a grant that failed on the network: that the policy refused it,
/// and the grant to ask for (the host the output names, and the preset of the command's
/// package manager). `None` when the output shows no failed lookup or connection.
pub(crate) fn refused_note(command: &str, output: &str) -> Option<String> {
    NET_FAILURES.iter().find(|m| output.contains(*m))?;
    let host = failed_host(output);
    let preset = command
        .split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')'))
        .map(|w| w.rsplit('/').next().unwrap_or(w))
        .find_map(|w| match w {
            "npm" | "npx" | "pnpm" | "yarn" => Some("preset:npm"),
            "pip" | "pip3" | "uv" => Some("preset:pip"),
            "cargo" => Some("preset:cargo"),
            "go" => Some("preset:go"),
            _ => None,
        });
    let grant = match (&host, preset) {
        (Some(h), Some(p)) => format!("--allow-net {h} or --allow-net {p}"),
        (Some(h), None) => format!("--allow-net {h}"),
        (None, Some(p)) => format!("--allow-net HOST or --allow-net {p}"),
        (None, None) => {
            "--allow-net HOST or a preset (--allow-net preset:npm, pip, cargo, go)".to_string()
        }
    };
    let what = host.map_or(String::new(), |h| format!(" (it tried {h})"));
    Some(format!(
        "network refused by policy: this run had no network grant, so every name lookup and connection outside the sandbox fails at once{what}; the operator can grant it with {grant}."
    ))
}

/// The host a failed lookup names in `output`, when one of the usual phrasings gives it.
fn failed_host(output: &str) -> Option<String> {
    const BEFORE: &[&str] = &[
        "EAI_AGAIN ",
        "ENOTFOUND ",
        "Could not resolve host: ",
        "Failed to resolve '",
        "dial tcp: lookup ",
        "failed to resolve address for ",
    ];
    BEFORE.iter().find_map(|b| {
        let at = output.find(b)? + b.len();
        let host: String = output[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'))
            .collect();
        (host.contains('.') && !host.starts_with('.')).then_some(host)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_network_failure_gets_the_policy_note_with_the_grant_to_ask_for() {
        let npm = "npm error request to https://registry.npmjs.org/left-pad failed, reason: getaddrinfo EAI_AGAIN registry.npmjs.org\n";
        let note = refused_note("npm view left-pad version", npm).unwrap();
        assert!(note.starts_with("network refused by policy"), "{note}");
        assert!(
            note.contains("--allow-net registry.npmjs.org or --allow-net preset:npm"),
            "{note}"
        );
        let curl = "curl: (6) Could not resolve host: example.com";
        let note = refused_note("cd x && curl -sS https://example.com/", curl).unwrap();
        assert!(note.ends_with("with --allow-net example.com."), "{note}");
        let pip =
            "Failed to establish a new connection: [Errno -3] Temporary failure in name resolution";
        let note = refused_note("/usr/bin/pip3 install six", pip).unwrap();
        assert!(
            note.contains("--allow-net HOST or --allow-net preset:pip"),
            "{note}"
        );
        let go =
            "dial tcp: lookup proxy.golang.org on 10.0.0.1:53: dial udp: network is unreachable";
        assert!(
            refused_note("go mod download", go)
                .unwrap()
                .contains("proxy.golang.org or --allow-net preset:go")
        );
        assert_eq!(refused_note("make", "error: no rule to make target"), None);
    }
}
