//! Sandbox tiers: how strongly a run is isolated, which the host allows, and which one a run
//! gets.
//!
//! - [`Tier::Full`]: the namespace backend ([`crate::NamespaceBackend`]): user, mount, pid,
//!   net, ipc and uts namespaces over an overlay, Landlock, seccomp, control groups.
//! - [`Tier::Landlock`]: for hosts without usable user namespaces (an AppArmor restriction, a
//!   container's seccomp profile, a sysctl): a fast copy of the workspace, Landlock confining
//!   writes to that copy and private temporary directories and reads to the system and
//!   toolchain directories, the same seccomp filter plus no inet sockets (no namespace keeps
//!   them off the host's network; the full tier allows them in the run's own), rlimits and a
//!   process-group kill ([`LandlockBackend`]).
//! - [`Tier::Degraded`]: no kernel isolation at all ([`crate::DegradedBackend`]), only when the
//!   operator opts in.
//!
//! The operator sets the weakest tier allowed ([`crate::SandboxSettings::weakest`]) and may
//! force one per invocation ([`crate::SandboxSettings::tier`]); [`select`] applies both.

mod landlock;

pub use self::landlock::LandlockBackend;

use crate::error::SandboxError;
use crate::settings::SandboxSettings;

/// How strongly a run is isolated, strongest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// Namespaces, overlayfs, Landlock, seccomp, control groups.
    Full,
    /// A copy of the workspace under Landlock and seccomp, without namespaces.
    Landlock,
    /// A copy of the workspace with no kernel isolation (operator opt-in only).
    Degraded,
}

impl Tier {
    /// Every tier, strongest first.
    pub const ALL: [Tier; 3] = [Tier::Full, Tier::Landlock, Tier::Degraded];

    /// The stable name (`full`, `landlock`, `degraded`), as flags and JSON spell it.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Full => "full",
            Tier::Landlock => "landlock",
            Tier::Degraded => "degraded",
        }
    }
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A word that names no [`Tier`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` names no sandbox tier (full, landlock, degraded)")]
pub struct UnknownTier(pub String);

impl std::str::FromStr for Tier {
    type Err = UnknownTier;
    fn from_str(s: &str) -> Result<Tier, UnknownTier> {
        Tier::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| UnknownTier(s.to_string()))
    }
}

/// What a host offers, tier by tier: `Ok(())` when the tier can run here, else why not (the
/// probe's error, naming the restriction and its fix).
#[derive(Debug)]
pub struct Availability {
    /// The full tier.
    pub full: Result<(), SandboxError>,
    /// The Landlock tier.
    pub landlock: Result<(), SandboxError>,
}

impl Availability {
    /// Probes this host (cached per process: [`crate::probe`] and [`landlock_probe`]).
    pub fn probe() -> Availability {
        Availability {
            full: crate::probe().map(|_| ()),
            landlock: landlock_probe(),
        }
    }
}

/// Whether the Landlock tier can run here: Landlock ABI 3 or later (writes, refer, truncate)
/// and a seccomp filter this kernel accepts. Cached per process.
pub fn landlock_probe() -> Result<(), SandboxError> {
    static PROBED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    PROBED
        .get_or_init(|| {
            let abi = crate::launch::landlock_abi();
            if abi < 3 {
                return Err(format!("the kernel reports Landlock ABI {abi}, and the Landlock tier needs 3 or later (Linux 6.2+; add `lsm=landlock,…` to the kernel command line if it is built but off)"));
            }
            crate::confine::seccomp_program(true)
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(|detail| SandboxError::Unsupported {
            missing: "Landlock ABI 3",
            detail,
        })
}

/// The tier a run gets under `settings`, given what the host offers, or why none may run.
///
/// - A forced tier ([`SandboxSettings::tier`]) runs if the host offers it and it is not weaker
///   than the weakest allowed; forcing `landlock` is itself the operator's consent to it.
/// - Otherwise the strongest tier the host offers, down to the weakest allowed.
/// - `allow_degraded` (the operator's `--allow-degraded`) allows every tier.
///
/// The error names the missing feature of the strongest tier, and the way to allow a weaker
/// one.
pub fn choose(
    settings: &SandboxSettings,
    allow_degraded: bool,
    host: &Availability,
) -> Result<Tier, SandboxError> {
    let mut weakest = if allow_degraded {
        Tier::Degraded
    } else {
        settings.weakest
    };
    if let Some(forced) = settings.tier {
        if forced == Tier::Landlock {
            weakest = weakest.max(Tier::Landlock);
        }
        if forced > weakest {
            return Err(SandboxError::TierNotAllowed {
                tier: forced,
                weakest,
            });
        }
        return match forced {
            Tier::Full => host.full.as_ref().map(|_| Tier::Full).map_err(clone_err),
            Tier::Landlock => host
                .landlock
                .as_ref()
                .map(|_| Tier::Landlock)
                .map_err(clone_err),
            Tier::Degraded => Ok(Tier::Degraded),
        };
    }
    if host.full.is_ok() {
        return Ok(Tier::Full);
    }
    if weakest >= Tier::Landlock && host.landlock.is_ok() {
        return Ok(Tier::Landlock);
    }
    if weakest >= Tier::Degraded {
        return Ok(Tier::Degraded);
    }
    Err(host
        .full
        .as_ref()
        .err()
        .map_or_else(|| SandboxError::sys("probing the sandbox"), clone_err))
}

fn clone_err(e: &SandboxError) -> SandboxError {
    match e {
        SandboxError::Unsupported { missing, detail } => SandboxError::Unsupported {
            missing,
            detail: detail.clone(),
        },
        other => SandboxError::Unsupported {
            missing: "kernel isolation",
            detail: other.to_string(),
        },
    }
}

/// The backend of `tier`.
pub fn backend(tier: Tier) -> Box<dyn crate::Backend> {
    match tier {
        Tier::Full => Box::new(crate::NamespaceBackend::new()),
        Tier::Landlock => Box::new(LandlockBackend::new()),
        Tier::Degraded => Box::new(crate::DegradedBackend::new()),
    }
}

/// The backend a run gets under the installed settings ([`crate::settings::install`]), probing
/// the host; see [`choose`].
pub fn select(allow_degraded: bool) -> Result<Box<dyn crate::Backend>, SandboxError> {
    let tier = choose(
        &crate::settings::effective(),
        allow_degraded,
        &Availability::probe(),
    )?;
    Ok(backend(tier))
}

/// Runs `spec` in the strongest tier the installed settings allow: straight into the full
/// tier when no tier is forced (the host is probed only when that fails, so the common path
/// costs nothing extra), else the tier [`choose`] picks. The outcome's `tier` says which ran.
pub fn run_best(
    spec: &crate::SandboxSpec,
    allow_degraded: bool,
) -> Result<crate::Outcome, SandboxError> {
    use crate::Backend;
    let settings = crate::settings::effective();
    if settings.tier.is_none() {
        match crate::NamespaceBackend::new().run(spec) {
            Ok(o) => return Ok(o),
            Err(e) if crate::probe().is_ok() => return Err(e),
            Err(_) => {}
        }
    }
    let tier = choose(&settings, allow_degraded, &Availability::probe())?;
    if tier != Tier::Full && settings.tier.is_none() {
        tracing::warn!("sandbox tier {tier}: the host offers no stronger one that is allowed");
    }
    backend(tier).run(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(full: bool, landlock: bool) -> Availability {
        let no = |m| {
            Err(SandboxError::Unsupported {
                missing: m,
                detail: "forced by the test".into(),
            })
        };
        Availability {
            full: if full { Ok(()) } else { no("user namespaces") },
            landlock: if landlock {
                Ok(())
            } else {
                no("Landlock ABI 3")
            },
        }
    }

    fn settings(weakest: Tier, tier: Option<Tier>) -> SandboxSettings {
        SandboxSettings {
            weakest,
            tier,
            ..SandboxSettings::default()
        }
    }

    #[test]
    fn the_strongest_tier_the_host_offers_down_to_the_weakest_allowed() {
        let full_only = settings(Tier::Full, None);
        assert_eq!(
            choose(&full_only, false, &host(true, true)).unwrap(),
            Tier::Full
        );
        let e = choose(&full_only, false, &host(false, true)).unwrap_err();
        assert!(e.to_string().contains("user namespaces"), "{e}");
        let to_landlock = settings(Tier::Landlock, None);
        assert_eq!(
            choose(&to_landlock, false, &host(false, true)).unwrap(),
            Tier::Landlock
        );
        assert!(choose(&to_landlock, false, &host(false, false)).is_err());
        assert_eq!(
            choose(&to_landlock, true, &host(false, false)).unwrap(),
            Tier::Degraded
        );
        assert_eq!(
            choose(&full_only, true, &host(false, true)).unwrap(),
            Tier::Landlock
        );
    }

    #[test]
    fn a_forced_tier_runs_only_where_it_can_and_is_allowed() {
        let forced = |t| settings(Tier::Full, Some(t));
        assert_eq!(
            choose(&forced(Tier::Landlock), false, &host(true, true)).unwrap(),
            Tier::Landlock
        );
        assert!(choose(&forced(Tier::Landlock), false, &host(true, false)).is_err());
        let e = choose(&forced(Tier::Degraded), false, &host(true, true)).unwrap_err();
        assert!(matches!(e, SandboxError::TierNotAllowed { .. }), "{e}");
        assert_eq!(
            choose(&forced(Tier::Degraded), true, &host(true, true)).unwrap(),
            Tier::Degraded
        );
        assert!(choose(&forced(Tier::Full), true, &host(false, true)).is_err());
    }

    #[test]
    fn tier_names_round_trip() {
        for t in Tier::ALL {
            assert_eq!(t.name().parse::<Tier>().unwrap(), t);
        }
        assert!("none".parse::<Tier>().is_err());
    }
}
