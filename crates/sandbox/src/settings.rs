//! The operator's switches for the sandbox, filled once by the program's `main` (from its
//! environment: [`SandboxSettings::from_vars`] over the process's variables)
//! and installed with [`install`]; the library itself reads no environment variable.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

/// Whether runs go through warm sandbox hosts (see [`crate::host`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HostMode {
    /// Through the session's host when one listens; otherwise cold, then start one for next
    /// time.
    #[default]
    Auto,
    /// Every run cold; no host is started.
    Off,
    /// With no host listening, start one and wait for it rather than run cold (every run then
    /// goes through a host).
    Always,
}

/// The operator's sandbox switches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSettings {
    /// Control groups for runs that ask for them ([`crate::Limits::cgroup`]); false forces the
    /// rlimit path (`AIRLOCK_SANDBOX_CGROUP=off`).
    pub cgroups: bool,
    /// Warm hosts (`AIRLOCK_SANDBOX_HOST=off|always`).
    pub host: HostMode,
    /// How long a warm host waits for a run before it exits (`AIRLOCK_SANDBOX_HOST_IDLE`,
    /// seconds).
    pub host_idle: Duration,
    /// `$HOME` of a run whose spec names none ([`crate::SandboxSpec::home`]).
    pub home: Option<PathBuf>,
    /// The weakest sandbox tier runs may fall back to when the host lacks a stronger one
    /// (`AIRLOCK_SANDBOX_WEAKEST=full|landlock|degraded`; default `full`). `degraded` still
    /// needs the operator's `--allow-degraded` where the caller asks for it.
    pub weakest: crate::Tier,
    /// The tier every run of this process must get (`AIRLOCK_SANDBOX=full|landlock|degraded`,
    /// or the CLI's `--sandbox`); `None`: the strongest the host offers.
    pub tier: Option<crate::Tier>,
    /// The program's environment, of which a run's command gets the allow-listed part
    /// ([`mod@crate::env`]); empty by default (the command then gets a standard `PATH` and
    /// what its spec adds).
    pub inherit: Vec<(OsString, OsString)>,
}

impl Default for SandboxSettings {
    /// Control groups on, warm hosts automatic, 60 s of idleness, no `$HOME` of its own.
    fn default() -> Self {
        SandboxSettings {
            cgroups: true,
            host: HostMode::Auto,
            host_idle: Duration::from_secs(crate::warm::DEFAULT_IDLE_SECS),
            home: None,
            weakest: crate::Tier::Full,
            tier: None,
            inherit: Vec::new(),
        }
    }
}

impl SandboxSettings {
    /// The settings a program's environment asks for: `AIRLOCK_SANDBOX_CGROUP` (`off` or `0`:
    /// no control groups), `AIRLOCK_SANDBOX_HOST` (`off` or `0`: every run cold; `always`),
    /// `AIRLOCK_SANDBOX_HOST_IDLE` (seconds), `AIRLOCK_SANDBOX_WEAKEST` and `AIRLOCK_SANDBOX`
    /// (tier names; anything else is ignored) and `HOME`, read through `var`; `all` is the whole
    /// environment, of which runs inherit the allow-listed part. A program's `main` calls it as
    /// `from_vars(|n| var_os(n), vars_os())` with the standard library's readers.
    pub fn from_vars(
        var: impl Fn(&str) -> Option<OsString>,
        all: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Self {
        let off =
            |v: &Option<std::ffi::OsString>| v.as_ref().is_some_and(|v| v == "off" || v == "0");
        let host = var("AIRLOCK_SANDBOX_HOST");
        let defaults = SandboxSettings::default();
        let tier_var = |name: &str| {
            var(name).and_then(|v| v.to_str().and_then(|v| v.parse::<crate::Tier>().ok()))
        };
        SandboxSettings {
            cgroups: !off(&var("AIRLOCK_SANDBOX_CGROUP")),
            host: if off(&host) {
                HostMode::Off
            } else if host.as_ref().is_some_and(|v| v == "always") {
                HostMode::Always
            } else {
                HostMode::Auto
            },
            host_idle: var("AIRLOCK_SANDBOX_HOST_IDLE")
                .and_then(|s| s.to_str().and_then(|s| s.parse::<u64>().ok()))
                .map_or(defaults.host_idle, Duration::from_secs),
            home: var("HOME").map(PathBuf::from),
            weakest: tier_var("AIRLOCK_SANDBOX_WEAKEST").unwrap_or(defaults.weakest),
            tier: tier_var("AIRLOCK_SANDBOX"),
            inherit: all.into_iter().collect(),
        }
    }
}

static INSTALLED: OnceLock<SandboxSettings> = OnceLock::new();
static FORCED_TIER: OnceLock<crate::Tier> = OnceLock::new();

/// Forces every later run of this process onto `tier` (the CLI's `--sandbox`, parsed after
/// [`install`]); the first call wins.
pub fn force_tier(tier: crate::Tier) {
    let _ = FORCED_TIER.set(tier);
}

/// Makes `settings` the ones every run of this process uses (the first call wins). Without
/// it, runs use [`SandboxSettings::default`].
pub fn install(settings: SandboxSettings) {
    let _ = INSTALLED.set(settings);
}

/// The installed settings, or the defaults.
pub(crate) fn current() -> &'static SandboxSettings {
    static DEFAULT: OnceLock<SandboxSettings> = OnceLock::new();
    INSTALLED
        .get()
        .unwrap_or_else(|| DEFAULT.get_or_init(SandboxSettings::default))
}

/// The settings runs of this process get: the installed ones with the tier [`force_tier`]
/// set, if any.
pub fn effective() -> SandboxSettings {
    let mut s = current().clone();
    if let Some(t) = FORCED_TIER.get() {
        s.tier = Some(*t);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_switches_read_as_before() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        };
        assert_eq!(
            SandboxSettings::from_vars(vars(&[]), []),
            SandboxSettings::default()
        );
        let s = SandboxSettings::from_vars(
            vars(&[
                ("AIRLOCK_SANDBOX_CGROUP", "off"),
                ("AIRLOCK_SANDBOX_HOST", "always"),
                ("AIRLOCK_SANDBOX_HOST_IDLE", "10"),
                ("HOME", "/home/me"),
            ]),
            [],
        );
        assert!(!s.cgroups);
        assert_eq!(s.host, HostMode::Always);
        assert_eq!(s.host_idle, Duration::from_secs(10));
        assert_eq!(s.home, Some(PathBuf::from("/home/me")));
        let s = SandboxSettings::from_vars(
            vars(&[
                ("AIRLOCK_SANDBOX_CGROUP", "0"),
                ("AIRLOCK_SANDBOX_HOST", "0"),
                ("AIRLOCK_SANDBOX_HOST_IDLE", "soon"),
            ]),
            [],
        );
        assert!(!s.cgroups);
        assert_eq!(s.host, HostMode::Off);
        assert_eq!(s.host_idle, Duration::from_secs(60));
        let s = SandboxSettings::from_vars(vars(&[("AIRLOCK_SANDBOX_HOST", "off")]), []);
        assert_eq!(s.host, HostMode::Off);
    }
}
