//! Network egress by allow-list: which hosts a sandboxed run may reach through airlock's proxy.
//!
//! Network is off unless the operator grants it. A grant names hosts:
//!
//! - `crates.io` — exactly that host, any port;
//! - `*.crates.io` — any host below `crates.io` (not `crates.io` itself);
//! - `registry.npmjs.org:443` — that host on one port;
//! - `preset:npm`, `preset:pip`, `preset:cargo`, `preset:go` — the hosts the toolchain's own
//!   configuration names (its registry or mirror), resolved at run time by [`resolve_preset`]
//!   from the files the sandboxed toolchain reads.
//!
//! Deny rules (the same syntax, no presets) always win. Ask rules (the same syntax) name hosts
//! the operator approves when a run first asks for them, once or for the session. A rule may be scoped to commands
//! ([`HostRule::commands`]): it then applies only to runs whose command text matches one of its
//! globs (`npm install*`).
//!
//! [`NetPolicy::decide`] is the decision: a pure function of the host, the port and the run's
//! command, returning a [`NetRuling`] with a stable rule id and one sentence. The resolved-address
//! deny set (loopback, private ranges, cloud metadata, the host's own addresses) is the proxy's,
//! in the sandbox crate: it needs the resolver and the host's interfaces.
//!
//! ```
//! use airlock_policy::net::{NetPolicy, NetRuleSet};
//! let set = NetRuleSet::parse(&["*.example.com:443"], &["evil.example.com"]).unwrap();
//! let policy: NetPolicy = set.resolve(|_preset| Vec::new());
//! assert!(policy.decide("api.example.com", 443, "curl x").allowed);
//! let refused = policy.decide("evil.example.com", 443, "curl x");
//! assert_eq!(refused.rule, "net_denied_by_rule");
//! assert_eq!(policy.decide("api.example.com", 80, "curl x").rule, "net_not_granted");
//! ```

use globset::{GlobBuilder, GlobMatcher};
use std::fmt;

/// Rule id: the host matched a deny rule (deny rules always win).
pub const RULE_DENIED: &str = "net_denied_by_rule";
/// Rule id: no grant names the host (and port).
pub const RULE_NOT_GRANTED: &str = "net_not_granted";
/// Rule id: the host is granted.
pub const RULE_GRANTED: &str = "net_granted";
/// Rule id: an `ask` rule names the host; the operator decides.
pub const RULE_ASK: &str = "net_ask";

/// Which hosts a rule names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    /// Exactly this host (lower case, no trailing dot), or this IP literal.
    Exact(String),
    /// Any host strictly below this suffix (`*.example.com`: `a.example.com`, not
    /// `example.com`).
    Below(String),
}

impl HostPattern {
    fn matches(&self, host: &str) -> bool {
        match self {
            HostPattern::Exact(h) => h == host,
            HostPattern::Below(s) => host
                .strip_suffix(s.as_str())
                .is_some_and(|p| p.len() > 1 && p.ends_with('.')),
        }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostPattern::Exact(h) if h.contains(':') => write!(f, "[{h}]"),
            HostPattern::Exact(h) => f.write_str(h),
            HostPattern::Below(s) => write!(f, "*.{s}"),
        }
    }
}

/// One allow or deny rule: hosts, an optional port, optional command scope.
#[derive(Debug, Clone)]
pub struct HostRule {
    /// The hosts.
    pub pattern: HostPattern,
    /// The one port it covers (none: every port).
    pub port: Option<u16>,
    /// Globs over the run's command text (`*` crosses `/`); empty: every command.
    pub commands: Vec<String>,
    matchers: Vec<GlobMatcher>,
}

impl PartialEq for HostRule {
    fn eq(&self, other: &Self) -> bool {
        self.pattern == other.pattern && self.port == other.port && self.commands == other.commands
    }
}

impl fmt::Display for HostRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.pattern)?;
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        if !self.commands.is_empty() {
            write!(f, " (for {})", self.commands.join(", "))?;
        }
        Ok(())
    }
}

/// Why a grant string is not a grant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{input}` is not a network grant: {why}")]
pub struct NetGrantError {
    /// What was given.
    pub input: String,
    /// What is wrong with it.
    pub why: String,
}

fn bad(input: &str, why: impl Into<String>) -> NetGrantError {
    NetGrantError {
        input: input.to_string(),
        why: why.into(),
    }
}

/// A host name as the proxy compares it: lower case, no trailing dot; `None` when it is not a
/// plausible DNS name or IP literal (empty labels, characters outside `[a-z0-9-_]`, …).
pub fn normalize_host(host: &str) -> Option<String> {
    let h = host.trim_end_matches('.').to_ascii_lowercase();
    let h = h
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .unwrap_or(&h)
        .to_string();
    if h.parse::<std::net::IpAddr>().is_ok() {
        return Some(h);
    }
    let ok = !h.is_empty()
        && h.len() <= 253
        && h.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    ok.then_some(h)
}

impl HostRule {
    /// Parses `HOST`, `*.SUFFIX`, `HOST:PORT`, `[IPV6]:PORT`, scoped to `commands`.
    pub fn parse(input: &str, commands: &[String]) -> Result<HostRule, NetGrantError> {
        let s = input.trim();
        if s.is_empty() {
            return Err(bad(input, "it is empty"));
        }
        if s.contains("://") || s.contains('/') {
            return Err(bad(input, "name a host, not a URL (`example.com`)"));
        }
        let (host, port) = split_port(s).ok_or_else(|| bad(input, "the port is not a number"))?;
        let pattern = if let Some(suffix) = host.strip_prefix("*.") {
            let n = normalize_host(suffix).ok_or_else(|| bad(input, "not a host name"))?;
            if n.parse::<std::net::IpAddr>().is_ok() || !n.contains('.') {
                return Err(bad(
                    input,
                    "a `*.` rule needs a domain of at least two labels (`*.example.com`)",
                ));
            }
            HostPattern::Below(n)
        } else if host.contains('*') {
            return Err(bad(input, "`*` is allowed only as a leading `*.`"));
        } else {
            HostPattern::Exact(normalize_host(host).ok_or_else(|| bad(input, "not a host name"))?)
        };
        let matchers = commands
            .iter()
            .map(|c| {
                GlobBuilder::new(c)
                    .literal_separator(false)
                    .build()
                    .map(|g| g.compile_matcher())
                    .map_err(|e| bad(input, format!("the command glob `{c}` is bad: {e}")))
            })
            .collect::<Result<_, _>>()?;
        Ok(HostRule {
            pattern,
            port,
            commands: commands.to_vec(),
            matchers,
        })
    }

    /// Whether the rule covers `host:port` for a run of `command`.
    pub fn matches(&self, host: &str, port: u16, command: &str) -> bool {
        self.pattern.matches(host)
            && self.port.is_none_or(|p| p == port)
            && (self.matchers.is_empty() || self.matchers.iter().any(|m| m.is_match(command)))
    }
}

/// `host[:port]`, `[v6]:port`, a bare IPv6 literal. `None` when a port is not a number.
fn split_port(s: &str) -> Option<(&str, Option<u16>)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (h, tail) = rest.split_once(']')?;
        return match tail.strip_prefix(':') {
            Some(p) => Some((h, Some(p.parse().ok()?))),
            None if tail.is_empty() => Some((h, None)),
            None => None,
        };
    }
    if s.matches(':').count() > 1 {
        return Some((s, None)); // a bare IPv6 literal
    }
    match s.rsplit_once(':') {
        Some((h, p)) => Some((h, Some(p.parse().ok()?))),
        None => Some((s, None)),
    }
}

/// A package ecosystem whose registry hosts a grant can name (`preset:NAME`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Preset {
    /// npm, pnpm, yarn: the configured `registry` (and scoped registries).
    Npm,
    /// pip, uv: `index-url` and `extra-index-url`.
    Pip,
    /// cargo: the crates.io source or its replacement, and named registries.
    Cargo,
    /// go: `GOPROXY` and the checksum database.
    Go,
}

impl Preset {
    /// `npm`, `pip`, `cargo` or `go`.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Npm => "npm",
            Preset::Pip => "pip",
            Preset::Cargo => "cargo",
            Preset::Go => "go",
        }
    }

    fn parse(name: &str) -> Option<Preset> {
        Some(match name {
            "npm" | "pnpm" | "yarn" => Preset::Npm,
            "pip" | "uv" | "pypi" => Preset::Pip,
            "cargo" | "crates" => Preset::Cargo,
            "go" => Preset::Go,
            _ => return None,
        })
    }
}

/// One item of a grant list: a host rule or a preset.
#[derive(Debug, Clone, PartialEq)]
pub enum GrantItem {
    /// A host rule.
    Host(HostRule),
    /// A preset, resolved at run time.
    Preset(Preset, Vec<String>),
}

impl GrantItem {
    /// Parses `preset:NAME` or a host rule, scoped to `commands`.
    pub fn parse(input: &str, commands: &[String]) -> Result<GrantItem, NetGrantError> {
        match input.trim().strip_prefix("preset:") {
            Some(name) => Preset::parse(name)
                .map(|p| GrantItem::Preset(p, commands.to_vec()))
                .ok_or_else(|| bad(input, "known presets are npm, pip, cargo and go")),
            None => HostRule::parse(input, commands).map(GrantItem::Host),
        }
    }
}

/// Allow items and deny rules, as the operator wrote them (presets not yet resolved).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NetRuleSet {
    /// What is granted.
    pub allow: Vec<GrantItem>,
    /// What is refused whatever is granted.
    pub deny: Vec<HostRule>,
    /// What the operator is asked about (when neither granted nor refused).
    pub ask: Vec<HostRule>,
}

impl NetRuleSet {
    /// Parses unscoped allow items and deny rules.
    pub fn parse(allow: &[&str], deny: &[&str]) -> Result<NetRuleSet, NetGrantError> {
        let mut set = NetRuleSet::default();
        for a in allow {
            set.allow.push(GrantItem::parse(a, &[])?);
        }
        for d in deny {
            if d.trim().starts_with("preset:") {
                return Err(bad(d, "a deny rule names hosts, not a preset"));
            }
            set.deny.push(HostRule::parse(d, &[])?);
        }
        Ok(set)
    }

    /// True when nothing is granted or askable (the run keeps no network at all).
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.ask.is_empty()
    }

    /// Adds `other`'s items.
    pub fn extend(&mut self, other: NetRuleSet) {
        self.allow.extend(other.allow);
        self.deny.extend(other.deny);
        self.ask.extend(other.ask);
    }

    /// The policy for one run: presets resolved by `resolve` (their hosts keep the preset's
    /// command scope).
    pub fn resolve(&self, mut resolve: impl FnMut(Preset) -> Vec<String>) -> NetPolicy {
        let mut allow = Vec::new();
        for item in &self.allow {
            match item {
                GrantItem::Host(r) => allow.push(r.clone()),
                GrantItem::Preset(p, commands) => {
                    for h in resolve(*p) {
                        if let Ok(r) = HostRule::parse(&h, commands) {
                            allow.push(r);
                        }
                    }
                }
            }
        }
        let mut policy = NetPolicy::new(allow, self.deny.clone());
        policy.ask = self.ask.clone();
        policy
    }
}

/// The decision on one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetRuling {
    /// The connection may be made.
    pub allowed: bool,
    /// Stable rule id: [`RULE_GRANTED`], [`RULE_DENIED`], [`RULE_ASK`] (not allowed until the
    /// operator approves) or [`RULE_NOT_GRANTED`].
    pub rule: &'static str,
    /// One human sentence (for a refusal: what was refused and how to grant it).
    pub reason: String,
}

/// Resolved allow and deny rules of one run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NetPolicy {
    allow: Vec<HostRule>,
    deny: Vec<HostRule>,
    ask: Vec<HostRule>,
}

impl NetPolicy {
    /// A policy of these rules.
    pub fn new(allow: Vec<HostRule>, deny: Vec<HostRule>) -> NetPolicy {
        NetPolicy {
            allow,
            deny,
            ask: Vec::new(),
        }
    }

    /// This policy, also asking the operator about hosts that `ask` names.
    pub fn with_ask(mut self, ask: Vec<HostRule>) -> NetPolicy {
        self.ask = ask;
        self
    }

    /// The allow rules.
    pub fn allow(&self) -> &[HostRule] {
        &self.allow
    }

    /// Whether `command` may reach anything at all (some allow rule applies to it).
    pub fn grants_any(&self, command: &str) -> bool {
        self.allow
            .iter()
            .chain(&self.ask)
            .any(|r| r.matchers.is_empty() || r.matchers.iter().any(|m| m.is_match(command)))
    }

    /// May a run of `command` connect to `host:port`? Deny rules win; then an allow rule must
    /// match. A host that is not a plausible name is refused as not granted.
    pub fn decide(&self, host: &str, port: u16, command: &str) -> NetRuling {
        let Some(h) = normalize_host(host) else {
            return NetRuling {
                allowed: false,
                rule: RULE_NOT_GRANTED,
                reason: format!("`{host}` is not a host name airlock grants."),
            };
        };
        if let Some(d) = self.deny.iter().find(|r| r.matches(&h, port, command)) {
            return NetRuling {
                allowed: false,
                rule: RULE_DENIED,
                reason: format!(
                    "The connection to {h}:{port} was refused by policy: the deny rule `{d}` matches it, and deny rules always win."
                ),
            };
        }
        if let Some(a) = self.allow.iter().find(|r| r.matches(&h, port, command)) {
            return NetRuling {
                allowed: true,
                rule: RULE_GRANTED,
                reason: format!("{h}:{port} is granted by `{a}`."),
            };
        }
        if let Some(a) = self.ask.iter().find(|r| r.matches(&h, port, command)) {
            return NetRuling {
                allowed: false,
                rule: RULE_ASK,
                reason: format!(
                    "The connection to {h}:{port} needs the operator's approval (the ask rule `{a}`)."
                ),
            };
        }
        NetRuling {
            allowed: false,
            rule: RULE_NOT_GRANTED,
            reason: format!(
                "The connection to {h}:{port} was refused by policy: no network grant names it; the operator can grant it with `--allow-net {h}`."
            ),
        }
    }
}

/// What the sandboxed toolchains read to find their registries: the texts of their
/// configuration files, highest precedence first. The caller reads the files; this module only
/// parses.
#[derive(Debug, Clone, Default)]
pub struct PresetSources {
    /// `.npmrc` files (project, then global).
    pub npmrc: Vec<String>,
    /// `pip.conf` files (site, then global).
    pub pip_conf: Vec<String>,
    /// Cargo `config.toml` files (the workspace's, then its ancestors').
    pub cargo_config: Vec<String>,
    /// `go env -w` files (`GOPROXY=…` lines).
    pub go_env: Vec<String>,
}

/// The hosts of a preset, read from `src`, with each toolchain's built-in default when its
/// configuration names none. Returned as grant strings `host:port`: a preset grants each
/// registry on its URL's port only.
pub fn resolve_preset(preset: Preset, src: &PresetSources) -> Vec<String> {
    let mut hosts: Vec<String> = Vec::new();
    let mut add = |url: &str| {
        if let Some(h) = url_host_port(url)
            && !hosts.contains(&h)
        {
            hosts.push(h);
        }
    };
    match preset {
        Preset::Npm => {
            let mut registry = None;
            for text in &src.npmrc {
                for (k, v) in ini_pairs(text) {
                    if k == "registry" && registry.is_none() {
                        registry = Some(v.clone());
                    }
                    if k.starts_with('@') && k.ends_with(":registry") {
                        add(&v);
                    }
                }
            }
            add(registry.as_deref().unwrap_or("https://registry.npmjs.org/"));
        }
        Preset::Pip => {
            let mut index = None;
            for text in &src.pip_conf {
                for (k, v) in ini_pairs(text) {
                    match k.as_str() {
                        "index-url" | "index_url" if index.is_none() => index = Some(v),
                        "extra-index-url" | "extra_index_url" => {
                            for u in v.split_whitespace() {
                                add(u);
                            }
                        }
                        "find-links" | "find_links" => {
                            for u in v.split_whitespace() {
                                add(u);
                            }
                        }
                        _ => {}
                    }
                }
            }
            match index {
                Some(i) => add(&i),
                None => {
                    // pip's default index serves its files from a second host.
                    add("https://pypi.org/simple");
                    add("https://files.pythonhosted.org/");
                }
            }
        }
        Preset::Cargo => {
            let mut replaced = false;
            for text in &src.cargo_config {
                let Ok(v) = text.parse::<toml::Table>() else {
                    continue;
                };
                let source = v.get("source").and_then(|s| s.as_table());
                if let Some(src_table) = source {
                    let mut name = "crates-io".to_string();
                    let mut seen = 0;
                    while let Some(next) = src_table
                        .get(&name)
                        .and_then(|t| t.get("replace-with"))
                        .and_then(|r| r.as_str())
                        && seen < 8
                    {
                        name = next.to_string();
                        seen += 1;
                    }
                    if seen > 0 {
                        let t = src_table.get(&name);
                        let reg = t
                            .and_then(|t| t.get("registry"))
                            .and_then(|r| r.as_str())
                            .or_else(|| {
                                v.get("registries")
                                    .and_then(|r| r.get(&name))
                                    .and_then(|r| r.get("index"))
                                    .and_then(|r| r.as_str())
                            });
                        if let Some(r) = reg {
                            add(r.trim_start_matches("sparse+"));
                            replaced = true;
                        }
                    }
                }
                if let Some(regs) = v.get("registries").and_then(|r| r.as_table()) {
                    for r in regs.values() {
                        if let Some(i) = r.get("index").and_then(|i| i.as_str()) {
                            add(i.trim_start_matches("sparse+"));
                        }
                    }
                }
            }
            if !replaced {
                // crates.io's sparse index and its download host.
                add("https://index.crates.io/");
                add("https://static.crates.io/");
            }
        }
        Preset::Go => {
            let mut proxy = None;
            let mut sumdb = None;
            for text in &src.go_env {
                for line in text.lines() {
                    if let Some(v) = line.trim().strip_prefix("GOPROXY=") {
                        proxy.get_or_insert(v.to_string());
                    }
                    if let Some(v) = line.trim().strip_prefix("GOSUMDB=") {
                        sumdb.get_or_insert(v.to_string());
                    }
                }
            }
            let proxy = proxy.unwrap_or_else(|| "https://proxy.golang.org,direct".into());
            for p in proxy.split([',', '|']) {
                if p.contains("://") {
                    add(p);
                }
            }
            match sumdb.as_deref() {
                Some("off") => {}
                Some(s) => {
                    // `name`, `name+key` or `name+key url`.
                    let url = s
                        .split_whitespace()
                        .nth(1)
                        .map(str::to_string)
                        .unwrap_or_else(|| format!("https://{}", s.split('+').next().unwrap_or(s)));
                    add(&url);
                }
                None => add("https://sum.golang.org"),
            }
        }
    }
    hosts
}

/// `host` or `host:port` of an http(s) URL (the port only when it is not the scheme's default).
pub fn url_host(url: &str) -> Option<String> {
    let url = url.trim().trim_matches('"');
    let (scheme, rest) = url.split_once("://")?;
    let default = match scheme.to_ascii_lowercase().as_str() {
        "https" => 443,
        "http" => 80,
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    let (host, port) = split_port(authority)?;
    let host = normalize_host(host)?;
    Some(match port {
        Some(p) if p != default && host.contains(':') => format!("[{host}]:{p}"),
        Some(p) if p != default => format!("{host}:{p}"),
        _ => host,
    })
}

/// `host:port` of an http(s) URL, the port always written (`[v6]:port` for IPv6).
fn url_host_port(url: &str) -> Option<String> {
    let h = url_host(url)?;
    // `url_host` writes a port only when it is not the scheme's default: `[v6]:p` or `h:p`.
    let has_port =
        h.starts_with('[') || (h.contains(':') && h.parse::<std::net::Ipv6Addr>().is_err());
    if has_port {
        return Some(h);
    }
    let https = url
        .trim()
        .trim_matches('"')
        .to_ascii_lowercase()
        .starts_with("https://");
    let port = if https { 443 } else { 80 };
    Some(if h.contains(':') {
        format!("[{h}]:{port}")
    } else {
        format!("{h}:{port}")
    })
}

/// `key = value` pairs of an ini-style file (`.npmrc`, `pip.conf`), any section; comments and
/// blank lines skipped, keys lower case.
fn ini_pairs(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with(['#', ';', '[']))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str], deny: &[&str]) -> NetPolicy {
        NetRuleSet::parse(allow, deny)
            .unwrap()
            .resolve(|_| Vec::new())
    }

    #[test]
    fn exact_suffix_and_port() {
        let p = policy(&["example.com", "*.crates.io", "api.x.org:443"], &[]);
        assert!(p.decide("example.com", 80, "c").allowed);
        assert!(p.decide("EXAMPLE.com.", 443, "c").allowed);
        assert!(!p.decide("www.example.com", 443, "c").allowed);
        assert!(p.decide("static.crates.io", 443, "c").allowed);
        assert!(!p.decide("crates.io", 443, "c").allowed);
        assert!(!p.decide("evilcrates.io", 443, "c").allowed);
        assert!(p.decide("api.x.org", 443, "c").allowed);
        let r = p.decide("api.x.org", 8443, "c");
        assert_eq!(r.rule, RULE_NOT_GRANTED);
        assert!(r.reason.contains("--allow-net api.x.org"), "{}", r.reason);
    }

    #[test]
    fn deny_wins() {
        let p = policy(&["*.example.com"], &["secret.example.com"]);
        let r = p.decide("secret.example.com", 443, "c");
        assert!(!r.allowed);
        assert_eq!(r.rule, RULE_DENIED);
        assert!(p.decide("ok.example.com", 443, "c").allowed);
    }

    #[test]
    fn ask_rules_come_after_deny_and_allow() {
        let mut set = NetRuleSet::parse(&["a.example.com"], &["bad.example.com"]).unwrap();
        set.ask.push(HostRule::parse("*.example.com", &[]).unwrap());
        let p = set.resolve(|_| Vec::new());
        assert!(p.decide("a.example.com", 443, "c").allowed);
        assert_eq!(p.decide("bad.example.com", 443, "c").rule, RULE_DENIED);
        let r = p.decide("b.example.com", 443, "c");
        assert!(!r.allowed);
        assert_eq!(r.rule, RULE_ASK);
        assert_eq!(p.decide("other.org", 443, "c").rule, RULE_NOT_GRANTED);
        assert!(
            NetRuleSet {
                ask: set.ask.clone(),
                ..Default::default()
            }
            .resolve(|_| vec![])
            .grants_any("c")
        );
    }

    #[test]
    fn nothing_granted_refuses_everything() {
        let p = policy(&[], &[]);
        assert_eq!(p.decide("example.com", 443, "c").rule, RULE_NOT_GRANTED);
        assert!(!p.grants_any("c"));
    }

    #[test]
    fn command_scope() {
        let r = HostRule::parse("registry.npmjs.org", &["npm install*".into()]).unwrap();
        let p = NetPolicy::new(vec![r], vec![]);
        assert!(
            p.decide("registry.npmjs.org", 443, "npm install left-pad")
                .allowed
        );
        assert!(!p.decide("registry.npmjs.org", 443, "node x.js").allowed);
        assert!(p.grants_any("npm install"));
        assert!(!p.grants_any("curl"));
    }

    #[test]
    fn bad_grants_are_errors() {
        for g in [
            "",
            "https://example.com",
            "ex*ample.com",
            "*.com",
            "a..b",
            "x.com:http",
            "preset:maven",
        ] {
            assert!(GrantItem::parse(g, &[]).is_err(), "{g}");
        }
        assert!(NetRuleSet::parse(&[], &["preset:npm"]).is_err());
        assert!(GrantItem::parse("[::1]:8080", &[]).is_ok());
        assert!(GrantItem::parse("127.0.0.1:8080", &[]).is_ok());
    }

    #[test]
    fn undecodable_host_is_refused() {
        let p = policy(&["example.com"], &[]);
        assert!(!p.decide("exa mple.com", 443, "c").allowed);
        assert!(!p.decide("", 443, "c").allowed);
    }

    #[test]
    fn npm_preset_reads_npmrc() {
        let src = PresetSources {
            npmrc: vec![
                "; comment\nregistry=https://npm.mirror.example:8443/repo/\n@corp:registry=https://npm.corp.example/\n".into(),
                "registry=https://ignored.example/".into(),
            ],
            ..Default::default()
        };
        let h = resolve_preset(Preset::Npm, &src);
        assert_eq!(h, ["npm.corp.example:443", "npm.mirror.example:8443"]);
        assert_eq!(
            resolve_preset(Preset::Npm, &PresetSources::default()),
            ["registry.npmjs.org:443"]
        );
    }

    #[test]
    fn pip_preset_reads_pip_conf() {
        let src = PresetSources {
            pip_conf: vec![
                "[global]\nindex-url = https://pypi.mirror.example/simple\nextra-index-url = https://a.example/s https://b.example/s\n".into(),
            ],
            ..Default::default()
        };
        assert_eq!(
            resolve_preset(Preset::Pip, &src),
            ["a.example:443", "b.example:443", "pypi.mirror.example:443"]
        );
        assert_eq!(
            resolve_preset(Preset::Pip, &PresetSources::default()),
            ["pypi.org:443", "files.pythonhosted.org:443"]
        );
    }

    #[test]
    fn cargo_preset_follows_source_replacement() {
        let src = PresetSources {
            cargo_config: vec![
                "[source.crates-io]\nreplace-with = \"mirror\"\n[source.mirror]\nregistry = \"sparse+https://cargo.mirror.example/index/\"\n[registries.corp]\nindex = \"sparse+https://cargo.corp.example/\"\n".into(),
            ],
            ..Default::default()
        };
        assert_eq!(
            resolve_preset(Preset::Cargo, &src),
            ["cargo.mirror.example:443", "cargo.corp.example:443"]
        );
        assert_eq!(
            resolve_preset(Preset::Cargo, &PresetSources::default()),
            ["index.crates.io:443", "static.crates.io:443"]
        );
    }

    #[test]
    fn go_preset_reads_goproxy() {
        let src = PresetSources {
            go_env: vec!["GOPROXY=https://goproxy.example,direct\nGOSUMDB=off\n".into()],
            ..Default::default()
        };
        assert_eq!(resolve_preset(Preset::Go, &src), ["goproxy.example:443"]);
        assert_eq!(
            resolve_preset(Preset::Go, &PresetSources::default()),
            ["proxy.golang.org:443", "sum.golang.org:443"]
        );
    }

    #[test]
    fn presets_resolve_with_their_scope() {
        let mut set = NetRuleSet::default();
        set.allow
            .push(GrantItem::parse("preset:npm", &["npm *".into()]).unwrap());
        let p = set.resolve(|pr| resolve_preset(pr, &PresetSources::default()));
        assert!(p.decide("registry.npmjs.org", 443, "npm ci").allowed);
        assert!(!p.decide("registry.npmjs.org", 443, "curl").allowed);
        // A preset grants the registry's own port only.
        assert!(!p.decide("registry.npmjs.org", 22, "npm ci").allowed);
    }

    #[test]
    fn preset_hosts_carry_their_port() {
        assert_eq!(
            url_host_port("https://[::1]/x").as_deref(),
            Some("[::1]:443")
        );
        assert_eq!(
            url_host_port("http://[::1]:81/").as_deref(),
            Some("[::1]:81")
        );
        assert_eq!(
            url_host_port("http://x.example/").as_deref(),
            Some("x.example:80")
        );
    }

    #[test]
    fn url_hosts() {
        assert_eq!(
            url_host("https://x.example/a").as_deref(),
            Some("x.example")
        );
        assert_eq!(
            url_host("http://u:p@x.example:80/").as_deref(),
            Some("x.example")
        );
        assert_eq!(url_host("http://[::1]:81/").as_deref(), Some("[::1]:81"));
        assert_eq!(url_host("file:///x"), None);
    }
}
