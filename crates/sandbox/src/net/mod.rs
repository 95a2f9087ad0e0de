//! Network egress of a granted run: the run keeps its own network namespace with only
//! loopback, and reaches the outside only through a proxy that airlock runs on the host side.
//!
//! How the proxy is reachable without any bridge program: after the run's PID 1 has made its
//! network namespace and brought `lo` up, it makes a listening TCP socket on
//! `127.0.0.1:`[`NetAccess::port`] inside that namespace and passes the descriptor to the
//! caller over a socket pair (`SCM_RIGHTS`) before anything of the command runs. The caller
//! accepts connections on it ([`proxy`]) and makes its outgoing connections with sockets of its
//! own (host) namespace. No capability is needed for that, and the namespace keeps no route
//! out: a direct connection fails with `ENETUNREACH`, and no name resolves inside. A warm host's
//! run does the same: the socket pair's end travels with the run's descriptors, and the run's
//! PID 1 (a prepared spare, already in its fresh namespace) makes the listener when it arrives.
//!
//! The proxy speaks HTTP `CONNECT`, plain HTTP with absolute URIs, and SOCKS5. For each
//! request it asks the run's [`NetGate`] about the host and port, then resolves the name itself
//! and refuses any address in the deny set ([`addr::denied`]: loopback, link-local, private
//! and shared ranges, cloud metadata, the host's own addresses), so a granted name that
//! resolves to such an address reaches nothing. A refusal is answered at once (HTTP 403 with
//! the rule and how to grant the host; SOCKS5 reply 2), never left to time out. Every run has
//! its own proxy, so each connection is attributed to the run that made it ([`NetReport`]).

pub mod addr;
pub(crate) mod proxy;

use std::sync::Arc;

/// The port the proxy listens on inside a granted run's namespace.
pub const PROXY_PORT: u16 = 3128;

/// The decision on one requested host and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetDecision {
    /// The proxy may connect.
    pub allowed: bool,
    /// Stable rule id.
    pub rule: String,
    /// One human sentence (for a refusal: what was refused and how to grant it).
    pub reason: String,
}

/// The run's grant, as the proxy asks it (the kernel adapts the policy's `NetPolicy`).
pub trait NetGate: Send + Sync + std::fmt::Debug {
    /// May the run connect to `host:port`? `host` is as the client wrote it.
    fn decide(&self, host: &str, port: u16) -> NetDecision;
}

/// Network access of one run through the proxy.
#[derive(Debug, Clone)]
pub struct NetAccess {
    /// What the run may reach.
    pub gate: Arc<dyn NetGate>,
    /// The port of the proxy inside the run's namespace.
    pub port: u16,
    /// Let the proxy connect to loopback addresses of the host. Only for tests of the proxy
    /// against a local upstream: nothing that reads configuration sets it, only the library
    /// API, and every other address of the deny set stays refused.
    pub loopback_upstream: bool,
}

impl NetAccess {
    /// Access through `gate` on [`PROXY_PORT`], loopback upstreams refused.
    pub fn new(gate: Arc<dyn NetGate>) -> NetAccess {
        NetAccess {
            gate,
            port: PROXY_PORT,
            loopback_upstream: false,
        }
    }

    /// The variables a granted run gets, so that common toolchains use the proxy: the
    /// `*_PROXY` family in both cases, npm's, cargo's and pip's own, and git's `http.proxy`
    /// through `GIT_CONFIG_*`.
    pub fn proxy_env(&self) -> Vec<(String, String)> {
        let url = format!("http://127.0.0.1:{}", self.port);
        let socks = format!("socks5h://127.0.0.1:{}", self.port);
        let mut env = Vec::new();
        for name in ["HTTP_PROXY", "HTTPS_PROXY"] {
            env.push((name.to_string(), url.clone()));
            env.push((name.to_ascii_lowercase(), url.clone()));
        }
        env.push(("ALL_PROXY".into(), socks.clone()));
        env.push(("all_proxy".into(), socks));
        env.push(("NO_PROXY".into(), "localhost,127.0.0.1,::1".into()));
        env.push(("no_proxy".into(), "localhost,127.0.0.1,::1".into()));
        env.push(("npm_config_proxy".into(), url.clone()));
        env.push(("npm_config_https_proxy".into(), url.clone()));
        env.push(("CARGO_HTTP_PROXY".into(), url.clone()));
        env.push(("PIP_PROXY".into(), url.clone()));
        env.push(("GIT_CONFIG_COUNT".into(), "1".into()));
        env.push(("GIT_CONFIG_KEY_0".into(), "http.proxy".into()));
        env.push(("GIT_CONFIG_VALUE_0".into(), url));
        env
    }
}

/// One refused connection of a run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Refused {
    /// `host:port` as requested.
    pub host: String,
    /// Stable rule id.
    pub rule: String,
    /// One human sentence.
    pub reason: String,
}

/// What a granted run reached and what it was refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct NetReport {
    /// `host:port` the proxy connected to for the run, sorted, each once.
    pub hosts_contacted: Vec<String>,
    /// Refused requests, each `host:port` and rule once, in the order they came.
    pub hosts_refused: Vec<Refused>,
}
