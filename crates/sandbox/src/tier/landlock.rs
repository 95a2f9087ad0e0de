//! The Landlock tier's backend: the degraded backend's copy of the workspace, confined.
//!
//! - The workspace (and the staged layers) are copied beneath the run's work directory,
//!   reflinked where the filesystem can; the copy's differences become the upper directory as
//!   in the degraded tier, so [`crate::harvest`] works unchanged.
//! - Landlock (ABI 3 or later; newer rights when the kernel has them): reads and execution
//!   only beneath the system directories, the non-secret `/etc` entries
//!   ([`crate::ETC_ALLOWLIST`]), `/dev`, `/proc`, the CPU topology in `/sys`, the spec's
//!   toolchain and read-only paths, the copy and a private temporary directory; writes only
//!   to the copy, that directory (`TMPDIR`) and the harmless device files. The real workspace
//!   (its secrets), `$HOME` beyond the toolchain paths and the rest of the host are out of
//!   reach. Signals and abstract unix sockets are scoped to the run (ABI 6), and with the
//!   network off TCP bind/connect are refused (ABI 4).
//! - No network sockets with the network off: `socket(AF_INET/AF_INET6)` fails with EPERM, so a
//!   test that starts a local server fails here (it passes in the full tier). This tier has no
//!   network namespace: a socket would be the host's, reaching the host's interfaces, its
//!   loopback services and the outside. Landlock's network rules (ABI 4) cannot narrow that to
//!   a loopback of the run's own: they allow or refuse TCP bind/connect by *port* alone, for
//!   every address, and do not govern UDP at all. So the refusal stays, and verify's
//!   environment note says so for this tier.
//! - seccomp: the full tier's filter (namespace, mount, ptrace-class, keyring, BPF calls;
//!   socket families allow-listed), with `AF_INET`/`AF_INET6` refused (network off), plus
//!   `socket(AF_UNIX)` and `setsid`/`setpgid` (see
//!   `confine::seccomp_program_copy_tier`).
//! - rlimits (memory, CPU time, file size, open files, processes) and a process-group kill at
//!   the timeout; no process can leave the group.

use std::path::{Path, PathBuf};

use ::landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, path_beneath_rules,
};

use crate::Backend;
use crate::degraded::{CopyDirs, copy_dir, run_in_copy};
use crate::error::SandboxError;
use crate::spec::{Outcome, SandboxSpec};

/// Runs the command in a copy of the workspace under Landlock and seccomp, without namespaces
/// (the [`crate::Tier::Landlock`] tier).
#[derive(Debug, Default, Clone)]
pub struct LandlockBackend {
    _private: (),
}

impl LandlockBackend {
    /// The backend. Construction checks nothing; [`crate::landlock_probe`] does.
    pub fn new() -> Self {
        LandlockBackend { _private: () }
    }
}

impl Backend for LandlockBackend {
    fn name(&self) -> &'static str {
        "landlock"
    }

    fn run(&self, spec: &SandboxSpec) -> Result<Outcome, SandboxError> {
        crate::landlock_probe()?;
        refuse_net_grant(spec, "landlock")?;
        let confine = |cmd: &mut std::process::Command,
                       dirs: &CopyDirs<'_>,
                       cgroups: Vec<std::os::fd::RawFd>| {
            let ruleset = ruleset(spec, dirs)?;
            let bpf = crate::confine::seccomp_program_copy_tier(!spec.network)?;
            crate::child::confine_before_exec(
                cmd,
                std::os::fd::AsRawFd::as_raw_fd(&ruleset),
                bpf,
                cgroups,
            );
            Ok(Some(ruleset))
        };
        run_in_copy(spec, crate::Tier::Landlock, Some(&confine))
    }

    fn visible_root(&self, _workspace: &Path, work: &Path) -> PathBuf {
        copy_dir(work)
    }
}

/// A network grant needs the run's own network namespace (its proxy listens there): a copy
/// tier has none, so a granted run is refused rather than run without the network it was
/// granted, or with the host's.
pub(crate) fn refuse_net_grant(spec: &SandboxSpec, tier: &str) -> Result<(), SandboxError> {
    if spec.net.is_some() {
        return Err(SandboxError::InvalidSpec(format!(
            "a network grant needs the full sandbox tier (its own network namespace); the {tier} tier has none: run on a host where `airlock doctor` reports the full tier, or drop --allow-net"
        )));
    }
    Ok(())
}

fn policy_error(e: impl std::fmt::Display) -> SandboxError {
    SandboxError::Policy {
        what: "Landlock ruleset",
        detail: e.to_string(),
    }
}

/// `path`, or, when masked paths lie beneath it, the entries of it (recursively) that are
/// neither masked nor above a masked path: Landlock grants whole trees, so a tree holding a
/// credential file is granted around it. Symbolic links are not followed (as the full tier does
/// not bind through them).
fn grant_around(path: &Path, masked: &[PathBuf], out: &mut Vec<PathBuf>) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if meta.file_type().is_symlink() || masked.iter().any(|m| m == path) {
        return;
    }
    if !masked.iter().any(|m| m.starts_with(path)) || !meta.is_dir() {
        out.push(path.to_path_buf());
        return;
    }
    for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
        grant_around(&entry.path(), masked, out);
    }
}

/// The paths a run of `spec` may read (and execute) beneath.
fn readable(spec: &SandboxSpec, dirs: &CopyDirs<'_>) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = [
        "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    v.extend(
        crate::ETC_ALLOWLIST
            .iter()
            .map(|e| Path::new("/etc").join(e)),
    );
    v.extend(
        ["/dev", "/proc", "/sys/devices/system/cpu"]
            .iter()
            .map(PathBuf::from),
    );
    for bind in &spec.home_binds {
        let abs = match dirs.home {
            _ if bind.is_absolute() => bind.clone(),
            Some(home) => home.join(bind),
            None => continue,
        };
        grant_around(&abs, dirs.masked, &mut v);
    }
    for bind in &spec.ro_binds {
        grant_around(bind, dirs.masked, &mut v);
    }
    v
}

/// The paths a run of `spec` may write beneath: the copy, its `/tmp`, the workspace's caches
/// (used at their host directories: no mount puts them beneath the cache root here) and the
/// read-write binds.
fn writable(spec: &SandboxSpec, dirs: &CopyDirs<'_>) -> Vec<PathBuf> {
    let mut v = vec![dirs.copy.to_path_buf(), dirs.tmp.to_path_buf()];
    v.extend(spec.cache_binds.iter().map(|b| b.host.clone()));
    v.extend(spec.rw_binds.iter().cloned());
    v.retain(|p| std::fs::metadata(p).is_ok());
    v
}

/// Builds the run's Landlock ruleset with its rules (in the caller, before the fork: only
/// `landlock_restrict_self` is left for the child).
fn ruleset(spec: &SandboxSpec, dirs: &CopyDirs<'_>) -> Result<std::os::fd::OwnedFd, SandboxError> {
    let abi = ABI::V5;
    let mut attr = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V3))
        .map_err(policy_error)?
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(policy_error)?
        .scope(Scope::from_all(ABI::V6))
        .map_err(policy_error)?;
    if !spec.network {
        attr = attr
            .handle_access(AccessNet::from_all(ABI::V4))
            .map_err(policy_error)?;
    }
    let exists = |p: &PathBuf| std::fs::metadata(p).is_ok();
    let read: Vec<PathBuf> = readable(spec, dirs).into_iter().filter(exists).collect();
    let devices: Vec<PathBuf> = crate::plan::DEV_NODES
        .iter()
        .map(|n| Path::new("/dev").join(n))
        .filter(exists)
        .collect();
    let created = attr
        .create()
        .map_err(policy_error)?
        .add_rules(path_beneath_rules(&read, AccessFs::from_read(abi)))
        .map_err(policy_error)?
        .add_rules(path_beneath_rules(
            writable(spec, dirs),
            AccessFs::from_all(abi),
        ))
        .map_err(policy_error)?
        .add_rules(path_beneath_rules(
            &devices,
            AccessFs::from_read(abi) | AccessFs::WriteFile,
        ))
        .map_err(policy_error)?;
    let fd: Option<std::os::fd::OwnedFd> = created.into();
    fd.ok_or_else(|| policy_error("the kernel did not create a ruleset"))
}
