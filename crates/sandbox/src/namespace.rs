//! The kernel-isolation backend: validates a spec, makes the run's control groups, then runs it
//! through a warm host ([`crate::warm::client`]) when one serves the session, else cold
//! ([`crate::cold`]).

use crate::Backend;
use crate::error::SandboxError;
use crate::launch::{RunRequest, validate};
use crate::settings::SandboxSettings;
use crate::spec::{Outcome, SandboxSpec};
use crate::{child, cold, warm};

/// Runs commands in user, mount, pid, ipc, uts and net namespaces over a workspace overlay,
/// under Landlock and seccomp. See the crate documentation for the exact environment.
#[derive(Debug, Default, Clone)]
pub struct NamespaceBackend {
    /// `None`: the process's installed settings ([`crate::settings::install`]).
    settings: Option<SandboxSettings>,
}

impl NamespaceBackend {
    /// The backend. Construction checks nothing; [`crate::probe`] does.
    pub fn new() -> Self {
        NamespaceBackend { settings: None }
    }

    /// The backend with its own settings rather than the process's installed ones.
    pub fn with_settings(settings: SandboxSettings) -> Self {
        NamespaceBackend {
            settings: Some(settings),
        }
    }
}

impl Backend for NamespaceBackend {
    fn name(&self) -> &'static str {
        "namespaces"
    }

    fn run(&self, spec: &SandboxSpec) -> Result<Outcome, SandboxError> {
        run(
            spec,
            self.settings
                .as_ref()
                .unwrap_or_else(|| crate::settings::current()),
        )
    }
}

/// Set once joining a control group failed in this process: later runs use rlimits only.
static CGROUP_JOIN_FAILED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

fn run(spec: &SandboxSpec, settings: &SandboxSettings) -> Result<Outcome, SandboxError> {
    use std::sync::atomic::Ordering;
    let granted;
    let spec = match &spec.net {
        Some(_) if spec.network => {
            return Err(SandboxError::InvalidSpec(
                "a run with the host's network cannot also have a proxied grant".into(),
            ));
        }
        // A granted run: the proxy variables (its inet sockets reach only the private
        // loopback, where the proxy listens, as every run's do).
        Some(access) => {
            let mut s = spec.clone();
            for (k, v) in access.proxy_env() {
                s.env.retain(|(n, _)| n.as_os_str() != k.as_str());
                s.env.push((k.into(), v.into()));
            }
            granted = s;
            &granted
        }
        None => spec,
    };
    let with_cgroup =
        spec.limits.cgroup && settings.cgroups && !CGROUP_JOIN_FAILED.load(Ordering::Relaxed);
    let result = run_with(spec, settings, with_cgroup);
    // A group we could make but not join (a delegation that stops short of moving processes):
    // the run failed before anything of the command ran, so run it again on rlimits.
    match result {
        Err(SandboxError::Setup { ref step, .. })
            if with_cgroup && step == child::SetupStep::Cgroup.describe() =>
        {
            CGROUP_JOIN_FAILED.store(true, Ordering::Relaxed);
            run_with(spec, settings, false)
        }
        other => other,
    }
}

fn run_with(
    spec: &SandboxSpec,
    settings: &SandboxSettings,
    with_cgroup: bool,
) -> Result<Outcome, SandboxError> {
    let v = validate(spec, settings)?;
    crate::timing::mark("sandbox: validated");
    let mut req = RunRequest::new(spec, v);
    req.check()?;
    // A warm host uses groups only when this run wants them (the operator's switch is read
    // here, not in the host), and makes them itself.
    req.limits.cgroup = with_cgroup;
    let cold_only = !spec.rw_binds.is_empty() || !spec.layered_binds.is_empty();
    if !cold_only && let Some(outcome) = warm::client::try_run(spec, settings, &req)? {
        return Ok(outcome);
    }
    let cg = if with_cgroup {
        crate::cgroup::RunCgroup::create(&spec.limits)
    } else {
        crate::cgroup::RunCgroup::default()
    };
    crate::timing::mark("sandbox: control group");
    req.cgroup_mask |= cg.mask();
    let outcome = cold::run_cold(spec, &req, &cg);
    if outcome.is_ok() && !cold_only {
        warm::client::start_for(spec, settings);
    }
    outcome
}
