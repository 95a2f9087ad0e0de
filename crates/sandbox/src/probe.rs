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
    crate::launch::clone_user_namespace().map_err(|e| e.to_string())?;
    Ok(())
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
