//! What the kernel offers: checked once by running a trivial sandboxed process.

use crate::error::SandboxError;

/// The kernel features the namespace backend found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capabilities {
    /// Landlock ABI version (0: none).
    pub landlock_abi: i32,
    /// Unprivileged user namespaces (with mount, pid, net, ipc, uts) can be created.
    pub user_namespaces: bool,
    /// overlayfs can be mounted inside a user namespace.
    pub overlayfs: bool,
}

fn user_namespaces() -> Result<(), String> {
    // User namespaces are what hosts disable (sysctls, container seccomp profiles, LSM
    // policies); the other namespaces come with them, and creating only a user namespace is
    // cheap (no mount table copy, no network stack).
    crate::launch::clone_user_namespace().map_err(|e| userns_detail(&HostFacts::read(), &e))?;
    Ok(())
}

/// The probe's words for a refused user namespace: the errno, then each restriction found and
/// its fix.
fn userns_detail(facts: &HostFacts, e: &std::io::Error) -> String {
    let mut detail = format!("creating a user namespace failed: {e}");
    for b in userns_blockers(facts, e) {
        detail.push_str(&format!("; {}", b.detail));
        if let Some(fix) = &b.fix {
            detail.push_str(&format!(" (fix: {fix})"));
        }
    }
    detail
}

/// One thing `airlock doctor` checked: what it found, and the fix when it is missing.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    /// A stable name (`user_namespaces`, `apparmor_userns_restriction`, …).
    pub name: &'static str,
    /// Whether this piece is present (or, for a restriction, absent).
    pub ok: bool,
    /// What was observed, in one sentence.
    pub detail: String,
    /// The exact fix, when something is missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Finding {
    fn ok(name: &'static str, detail: impl Into<String>) -> Finding {
        Finding {
            name,
            ok: true,
            detail: detail.into(),
            fix: None,
        }
    }

    fn missing(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Finding {
        Finding {
            name,
            ok: false,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

/// The host settings that decide whether user namespaces may be created, as read from
/// `/proc` and marker files (no secrets). Built by [`HostFacts::read`]; a test builds its own
/// to force a probe result.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostFacts {
    /// The caller's effective uid.
    pub uid: u32,
    /// `kernel.unprivileged_userns_clone` (Debian and older Ubuntu kernels), when present.
    pub unprivileged_userns_clone: Option<i64>,
    /// `user.max_user_namespaces`.
    pub max_user_namespaces: Option<i64>,
    /// `kernel.apparmor_restrict_unprivileged_userns` (Ubuntu 23.10+), when present.
    pub apparmor_restrict_userns: Option<i64>,
    /// The `Seccomp:` mode of this process (`/proc/self/status`; 2: a filter is already in
    /// force, as a container engine's default profile installs).
    pub seccomp_mode: Option<i64>,
    /// The container engine this process seems to run under (`docker`, `podman`,
    /// `kubernetes`, `lxc`, `container`), and why it seems so.
    pub container: Option<(String, String)>,
    /// Whether this process runs in a user namespace whose uid map is not the whole range
    /// (rootless containers).
    pub nested_userns: bool,
}

fn read_num(path: &str) -> Option<i64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn status_field(field: &str) -> Option<i64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
}

/// The container engine this process seems to run under, and the evidence.
fn container() -> Option<(String, String)> {
    if std::path::Path::new("/run/.containerenv").exists() {
        return Some(("podman".into(), "/run/.containerenv exists".into()));
    }
    if std::path::Path::new("/.dockerenv").exists() {
        return Some(("docker".into(), "/.dockerenv exists".into()));
    }
    if std::path::Path::new("/var/run/secrets/kubernetes.io").exists() {
        return Some((
            "kubernetes".into(),
            "/var/run/secrets/kubernetes.io exists".into(),
        ));
    }
    let env1 = std::fs::read("/proc/1/environ").unwrap_or_default();
    for var in env1.split(|b| *b == 0) {
        if let Some(v) = var.strip_prefix(b"container=") {
            let v = String::from_utf8_lossy(v).into_owned();
            return Some((v.clone(), format!("PID 1 has container={v}")));
        }
    }
    None
}

impl HostFacts {
    /// Reads this host's facts.
    pub fn read() -> HostFacts {
        let uid_map = std::fs::read_to_string("/proc/self/uid_map").unwrap_or_default();
        let full_map =
            uid_map.split_whitespace().collect::<Vec<_>>().as_slice() == ["0", "0", "4294967295"];
        HostFacts {
            uid: rustix::process::geteuid().as_raw(),
            unprivileged_userns_clone: read_num("/proc/sys/kernel/unprivileged_userns_clone"),
            max_user_namespaces: read_num("/proc/sys/user/max_user_namespaces"),
            apparmor_restrict_userns: read_num(
                "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
            ),
            seccomp_mode: status_field("Seccomp"),
            container: container(),
            nested_userns: !uid_map.is_empty() && !full_map,
        }
    }
}

/// What stops this host from creating user namespaces, each with its fix, given the facts and
/// the error `clone(CLONE_NEWUSER)` returned. Pure: tests force the facts.
pub fn userns_blockers(facts: &HostFacts, err: &std::io::Error) -> Vec<Finding> {
    let mut out = Vec::new();
    let root = facts.uid == 0;
    if facts.max_user_namespaces == Some(0) {
        out.push(Finding::missing(
            "max_user_namespaces",
            "the sysctl user.max_user_namespaces is 0, so no user namespace can be created",
            "sudo sysctl -w user.max_user_namespaces=15000 (and put it in /etc/sysctl.d/ to keep it)",
        ));
    }
    if facts.unprivileged_userns_clone == Some(0) && !root {
        out.push(Finding::missing(
            "unprivileged_userns_clone",
            "the sysctl kernel.unprivileged_userns_clone is 0, so only root may create user namespaces",
            "sudo sysctl -w kernel.unprivileged_userns_clone=1 (and put it in /etc/sysctl.d/ to keep it)",
        ));
    }
    if facts.apparmor_restrict_userns == Some(1) && !root {
        out.push(Finding::missing(
            "apparmor_userns_restriction",
            "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1) to programs whose profile grants `userns`",
            "sudo airlock doctor --install-apparmor (installs /etc/apparmor.d/airlock for this binary), or sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0",
        ));
    }
    if out.is_empty() {
        if err.raw_os_error() == Some(libc::ENOSPC) {
            out.push(Finding::missing(
                "max_user_namespaces",
                if facts.nested_userns {
                    "this process runs in a user namespace (a container or another sandbox) that allows no further user namespaces (ENOSPC)".to_string()
                } else {
                    format!(
                        "the limit of user namespaces (user.max_user_namespaces = {}) is used up (ENOSPC)",
                        facts.max_user_namespaces.map_or("?".to_string(), |v| v.to_string())
                    )
                },
                if facts.nested_userns {
                    "let the enclosing sandbox or container allow nested user namespaces (bubblewrap without --disable-userns; a container with --security-opt seccomp=unconfined), or use the Landlock tier: --sandbox landlock"
                } else {
                    "sudo sysctl -w user.max_user_namespaces=15000"
                },
            ));
        } else if let Some((engine, why)) = &facts.container {
            let fix = match engine.as_str() {
                "kubernetes" => "run the pod with securityContext.seccompProfile.type: Unconfined and securityContext.appArmorProfile.type: Unconfined (or use the Landlock tier: --sandbox landlock)".to_string(),
                other => format!(
                    "start the container with --security-opt seccomp=unconfined --security-opt apparmor=unconfined ({other} run …), or use the Landlock tier: --sandbox landlock"
                ),
            };
            let filtered = if facts.seccomp_mode == Some(2) {
                " under a seccomp filter"
            } else {
                ""
            };
            out.push(Finding::missing(
                "container_seccomp",
                format!(
                    "this process runs in a {engine} container{filtered} ({why}), whose default seccomp profile refuses user namespaces"
                ),
                fix,
            ));
        } else if facts.seccomp_mode == Some(2) {
            out.push(Finding::missing(
                "seccomp_filter",
                "this process runs under a seccomp filter that refuses user namespaces",
                "run airlock outside the filter (a container: --security-opt seccomp=unconfined), or use the Landlock tier: --sandbox landlock",
            ));
        } else {
            out.push(Finding::missing(
                "user_namespaces",
                format!("the kernel refused a user namespace ({err}); a security module or a kernel built without CONFIG_USER_NS may be the cause"),
                "enable CONFIG_USER_NS, or use the Landlock tier: --sandbox landlock",
            ));
        }
    }
    out
}

fn overlayfs() -> bool {
    std::fs::read_to_string("/proc/filesystems")
        .is_ok_and(|s| s.lines().any(|l| l.ends_with("\toverlay")))
        || std::path::Path::new("/sys/module/overlay").exists()
}

/// Checks that the namespace backend can run here; the error names what is missing.
///
/// The answer is computed once per process and cached.
pub fn probe() -> Result<Capabilities, SandboxError> {
    static PROBED: std::sync::OnceLock<Result<Capabilities, (&'static str, String)>> =
        std::sync::OnceLock::new();
    PROBED
        .get_or_init(|| {
            probe_uncached().map_err(|e| match e {
                SandboxError::Unsupported { missing, detail } => (missing, detail),
                other => ("kernel isolation", other.to_string()),
            })
        })
        .clone()
        .map_err(|(missing, detail)| SandboxError::Unsupported { missing, detail })
}

fn probe_uncached() -> Result<Capabilities, SandboxError> {
    if let Err(detail) = user_namespaces() {
        return Err(SandboxError::Unsupported {
            missing: "user namespaces",
            detail,
        });
    }
    if !overlayfs() {
        return Err(SandboxError::Unsupported {
            missing: "overlayfs",
            detail: "the kernel lists no overlay filesystem in /proc/filesystems".into(),
        });
    }
    let landlock_abi = crate::launch::landlock_abi();
    if landlock_abi < 3 {
        return Err(SandboxError::Unsupported {
            missing: "Landlock ABI 3",
            detail: format!("the kernel reports Landlock ABI {landlock_abi}"),
        });
    }
    Ok(Capabilities {
        landlock_abi,
        user_namespaces: true,
        overlayfs: true,
    })
}

/// What `airlock doctor` reports about the host's isolation, every piece found by trying.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HostReport {
    /// `uname -r` and the machine.
    pub kernel: String,
    /// `PRETTY_NAME` of `/etc/os-release`.
    pub distribution: Option<String>,
    /// The caller's effective uid.
    pub uid: u32,
    /// The container engine this process seems to run under, and why it seems so.
    pub container: Option<String>,
    /// The Landlock ABI version (0: none).
    pub landlock_abi: i32,
    /// The pieces, in order: user namespaces (and what blocks them), overlayfs in a user
    /// namespace, Landlock, seccomp, control groups.
    pub checks: Vec<Finding>,
    /// A trial run of `true` in the full tier.
    pub full_tier: Finding,
    /// A trial run of `true` in the Landlock tier.
    pub landlock_tier: Finding,
}

/// Runs `true` through `backend` over an empty temporary workspace.
fn trial(backend: &dyn crate::Backend) -> Result<(), String> {
    let dir = tempfile::Builder::new()
        .prefix("airlock-doctor-")
        .tempdir()
        .map_err(|e| format!("creating a temporary directory: {e}"))?;
    let (ws, upper, work) = (
        dir.path().join("ws"),
        dir.path().join("upper"),
        dir.path().join("work"),
    );
    for d in [&ws, &upper, &work] {
        std::fs::create_dir(d).map_err(|e| format!("creating {}: {e}", d.display()))?;
    }
    let mut spec = crate::SandboxSpec::new(&ws, &upper, &work, ["sh", "-c", "exit 0"]);
    spec.home = Some(dir.path().join("home"));
    spec.timeout = std::time::Duration::from_secs(20);
    let out = backend.run(&spec).map_err(|e| e.to_string());
    let _ = crate::remove_tree(dir.path());
    match out? {
        o if o.exit_code == Some(0) => Ok(()),
        o => Err(format!(
            "the trial command ended with {:?}: {}",
            o.exit_code,
            o.stderr.text_lossy().trim()
        )),
    }
}

#[allow(
    clippy::useless_conversion,
    reason = "statfs's f_type is an i64 here, a narrower integer on other targets"
)]
fn cgroup_finding(facts: &HostFacts) -> Finding {
    const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
    let magic = rustix::fs::statfs("/sys/fs/cgroup")
        .map(|s| i64::from(s.f_type))
        .unwrap_or(0);
    let unified = rustix::fs::statfs("/sys/fs/cgroup/unified")
        .is_ok_and(|s| i64::from(s.f_type) == CGROUP2_SUPER_MAGIC);
    let layout = if magic == CGROUP2_SUPER_MAGIC {
        "cgroup v2"
    } else if unified {
        "cgroup v1 (hybrid: v2 mounted at /sys/fs/cgroup/unified without controllers)"
    } else {
        "cgroup v1"
    };
    let cg = crate::cgroup::RunCgroup::create(&crate::Limits::default());
    let by = |m: crate::Mechanism| format!("{m:?}").to_lowercase();
    let detail = format!(
        "{layout}; a run's memory ceiling is enforced by {}, processes by {}, CPU time by {}{}",
        by(cg.memory_by()),
        by(cg.pids_by()),
        by(cg.cpu_time_by()),
        if cg.has_cpu_bandwidth() {
            ", with a CPU bandwidth ceiling"
        } else {
            ", without a CPU bandwidth ceiling"
        }
    );
    if cg.memory_by() == crate::Mechanism::Cgroup {
        Finding::ok("cgroups", detail)
    } else if magic == CGROUP2_SUPER_MAGIC {
        Finding::missing(
            "cgroups",
            format!(
                "{detail}: the caller's cgroup v2 group does not delegate the memory, pids and cpu controllers"
            ),
            "run airlock in a delegated scope: systemd-run --user --scope -p Delegate=yes airlock …",
        )
    } else if facts.uid == 0 {
        Finding::missing(
            "cgroups",
            format!(
                "{detail}: the cgroup v1 hierarchies are not writable here, even by root (a container's read-only /sys/fs/cgroup?)"
            ),
            "run airlock where it may make control groups (on the host, or in a container with a writable, delegated cgroup v2: systemd.unified_cgroup_hierarchy=1 on the host); rlimits stand in meanwhile",
        )
    } else {
        Finding::missing(
            "cgroups",
            format!("{detail}: the cgroup v1 hierarchies are not writable by this user"),
            "boot with systemd.unified_cgroup_hierarchy=1 and run airlock in a delegated scope (systemd-run --user --scope -p Delegate=yes airlock …), or run as root; rlimits stand in meanwhile",
        )
    }
}

/// The fix for a full-tier trial run that failed at `error` (the words of its set-up step),
/// as container engines cause them.
pub fn full_tier_fix(error: &str) -> String {
    if error.contains("mounting /proc") {
        "the container engine masks parts of /proc, and the kernel refuses a fresh /proc then: start the container with --security-opt unmask=/proc/* (podman) or --security-opt systempaths=unconfined (docker)".into()
    } else if error.contains("workspace overlay") && error.contains("Invalid argument") {
        "the workspace or airlock's scratch lies on overlayfs (a container's own root), where an overlay's upper directory cannot be: put both on a volume or a tmpfs (--tmpfs /tmp, -v DIR:DIR)".into()
    } else if error.contains("hostname") || error.contains("clone into new namespaces") {
        "a seccomp filter refuses what the sandbox sets up (a container engine's default profile): start the container with --security-opt seccomp=unconfined".into()
    } else {
        "fix what the checks above name".into()
    }
}

/// Probes the host by trying: a user namespace, a full-tier run (overlayfs in a user
/// namespace, Landlock, seccomp), a Landlock-tier run, a control group. Nothing secret is
/// read.
pub fn host_report() -> HostReport {
    let facts = HostFacts::read();
    let mut checks = Vec::new();
    let userns = crate::launch::clone_user_namespace();
    match &userns {
        Ok(()) => checks.push(Finding::ok(
            "user_namespaces",
            "a user namespace was created (clone(CLONE_NEWUSER))",
        )),
        Err(e) => {
            checks.push(Finding::missing(
                "user_namespaces",
                format!("creating a user namespace failed: {e}"),
                "see the restrictions below",
            ));
            checks.extend(userns_blockers(&facts, e));
        }
    }
    if let Some(v) = facts.apparmor_restrict_userns
        && !checks
            .iter()
            .any(|c| c.name == "apparmor_userns_restriction")
    {
        checks.push(Finding::ok(
            "apparmor_userns_restriction",
            format!(
                "kernel.apparmor_restrict_unprivileged_userns = {v}{}",
                if v == 1 && facts.uid == 0 {
                    " (root is exempt)"
                } else {
                    ""
                }
            ),
        ));
    }
    let no_host = crate::SandboxSettings {
        host: crate::HostMode::Off,
        ..crate::settings::current().clone()
    };
    let full = trial(&crate::NamespaceBackend::with_settings(no_host));
    let overlay = match (&userns, &full) {
        (_, Ok(())) => Finding::ok(
            "overlayfs",
            "the workspace overlay was mounted in a user namespace (trial run)",
        ),
        (Err(_), _) => Finding::missing(
            "overlayfs",
            "not tried: it needs a user namespace",
            "fix user namespaces first",
        ),
        (Ok(()), Err(e)) if e.contains("overlay") => Finding::missing(
            "overlayfs",
            format!("mounting overlayfs in a user namespace failed: {e}"),
            "use Linux 5.11+ with overlayfs built in or loaded (modprobe overlay)",
        ),
        (Ok(()), Err(_)) => Finding::ok(
            "overlayfs",
            if overlayfs() {
                "listed in /proc/filesystems (the trial run failed before mounting it)"
            } else {
                "not listed in /proc/filesystems"
            },
        ),
    };
    checks.push(overlay);
    let abi = crate::launch::landlock_abi();
    checks.push(if abi >= 3 {
        Finding::ok("landlock", format!("Landlock ABI {abi}{}", if abi < 6 { " (signals and abstract unix sockets are not scoped before ABI 6)" } else { "" }))
    } else {
        Finding::missing(
            "landlock",
            format!("Landlock ABI {abi} (3 or later needed)"),
            "use Linux 6.2+ with Landlock enabled (CONFIG_SECURITY_LANDLOCK=y and `landlock` in the lsm= boot parameter)",
        )
    });
    let landlock = if abi >= 3 {
        trial(&crate::LandlockBackend::new())
    } else {
        Err("Landlock ABI 3 is missing".to_string())
    };
    let seccomp_mode = match facts.seccomp_mode {
        Some(0) => "this process runs under no seccomp filter",
        Some(2) => "this process already runs under a seccomp filter (a container engine's?)",
        Some(1) => "this process runs in seccomp strict mode",
        _ => "the seccomp mode of this process is unknown",
    };
    checks.push(match (&full, &landlock) {
        (Ok(()), _) | (_, Ok(())) => Finding::ok(
            "seccomp",
            format!("the sandbox's filter loaded in a trial run; {seccomp_mode}"),
        ),
        (Err(e), Err(_)) => Finding::missing(
            "seccomp",
            format!("no trial run loaded the sandbox's filter ({e}); {seccomp_mode}"),
            "use a kernel with CONFIG_SECCOMP_FILTER",
        ),
    });
    checks.push(cgroup_finding(&facts));
    let tier_finding = |name, r: Result<(), String>, fix: &str| match r {
        Ok(()) => Finding::ok(name, "a trial run of `sh -c 'exit 0'` succeeded"),
        Err(e) => Finding::missing(name, e, fix),
    };
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    HostReport {
        kernel: format!("Linux {} {}", release.trim(), std::env::consts::ARCH),
        distribution: std::fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|s| {
                s.lines().find_map(|l| {
                    l.strip_prefix("PRETTY_NAME=")
                        .map(|v| v.trim_matches('"').to_string())
                })
            }),
        uid: facts.uid,
        container: facts
            .container
            .as_ref()
            .map(|(e, why)| format!("{e} ({why})")),
        landlock_abi: abi,
        checks,
        full_tier: {
            let fix = full
                .as_ref()
                .err()
                .map(|e| full_tier_fix(e))
                .unwrap_or_default();
            tier_finding("full_tier", full, &fix)
        },
        landlock_tier: tier_finding("landlock_tier", landlock, "fix what the checks above name"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eperm() -> std::io::Error {
        std::io::Error::from_raw_os_error(libc::EPERM)
    }

    #[test]
    fn the_apparmor_restriction_is_named_with_its_fix() {
        let facts = HostFacts {
            uid: 1000,
            apparmor_restrict_userns: Some(1),
            max_user_namespaces: Some(15000),
            ..HostFacts::default()
        };
        let b = userns_blockers(&facts, &eperm());
        assert_eq!(b.len(), 1, "{b:?}");
        assert_eq!(b[0].name, "apparmor_userns_restriction");
        assert!(
            b[0].detail
                .contains("kernel.apparmor_restrict_unprivileged_userns=1")
        );
        assert!(
            b[0].fix
                .as_deref()
                .unwrap()
                .contains("airlock doctor --install-apparmor")
        );
        // Root is exempt from it.
        let root = HostFacts { uid: 0, ..facts };
        assert_ne!(
            userns_blockers(&root, &eperm())[0].name,
            "apparmor_userns_restriction"
        );
    }

    #[test]
    fn a_refused_user_namespace_error_names_the_restriction_and_the_fix() {
        let facts = HostFacts {
            uid: 1000,
            apparmor_restrict_userns: Some(1),
            ..HostFacts::default()
        };
        let e = SandboxError::Unsupported {
            missing: "user namespaces",
            detail: userns_detail(&facts, &eperm()),
        }
        .to_string();
        assert!(e.contains("Operation not permitted"), "{e}");
        assert!(e.contains("apparmor_restrict_unprivileged_userns=1"), "{e}");
        assert!(
            e.contains("fix: sudo airlock doctor --install-apparmor"),
            "{e}"
        );
        assert!(e.contains("--sandbox landlock"), "{e}");
    }

    #[test]
    fn container_set_up_failures_get_the_engine_setting_that_fixes_them() {
        // The words of real failures in a default rootful podman container.
        assert!(
            full_tier_fix(
                "sandbox set-up failed while mounting /proc: Operation not permitted (os error 1)"
            )
            .contains("unmask=/proc/*")
        );
        assert!(full_tier_fix("sandbox set-up failed while mounting the workspace overlay on /tmp/x/ws: Invalid argument (os error 22)").contains("--tmpfs /tmp"));
        assert!(full_tier_fix("sandbox set-up failed while setting the hostname: Operation not permitted (os error 1)").contains("seccomp=unconfined"));
        assert_eq!(
            full_tier_fix("anything else"),
            "fix what the checks above name"
        );
    }

    #[test]
    fn sysctls_containers_and_filters_are_told_apart() {
        let sysctl = HostFacts {
            uid: 1000,
            unprivileged_userns_clone: Some(0),
            ..HostFacts::default()
        };
        let b = userns_blockers(&sysctl, &eperm());
        assert_eq!(b[0].name, "unprivileged_userns_clone");
        assert!(
            b[0].fix
                .as_deref()
                .unwrap()
                .contains("kernel.unprivileged_userns_clone=1")
        );
        let zero = HostFacts {
            max_user_namespaces: Some(0),
            ..HostFacts::default()
        };
        assert_eq!(
            userns_blockers(&zero, &eperm())[0].name,
            "max_user_namespaces"
        );
        let docker = HostFacts {
            seccomp_mode: Some(2),
            container: Some(("docker".into(), "/.dockerenv exists".into())),
            ..HostFacts::default()
        };
        let b = userns_blockers(&docker, &eperm());
        assert_eq!(b[0].name, "container_seccomp");
        assert!(b[0].detail.contains("under a seccomp filter"));
        assert!(b[0].fix.as_deref().unwrap().contains("seccomp=unconfined"));
        let k8s = HostFacts {
            container: Some(("kubernetes".into(), "x".into())),
            ..HostFacts::default()
        };
        assert!(
            userns_blockers(&k8s, &eperm())[0]
                .fix
                .as_deref()
                .unwrap()
                .contains("seccompProfile")
        );
        let nested = HostFacts {
            nested_userns: true,
            container: Some(("docker".into(), "x".into())),
            ..HostFacts::default()
        };
        let b = userns_blockers(&nested, &std::io::Error::from_raw_os_error(libc::ENOSPC));
        assert_eq!(b[0].name, "max_user_namespaces");
        assert!(b[0].detail.contains("allows no further user namespaces"));
        let bare = HostFacts::default();
        assert_eq!(userns_blockers(&bare, &eperm())[0].name, "user_namespaces");
    }
}
