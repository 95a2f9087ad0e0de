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
    // SAFETY: a fork-like clone whose child immediately _exits; the parent reaps it.
    unsafe {
        let flags = libc::CLONE_NEWUSER
            | libc::CLONE_NEWNS
            | libc::CLONE_NEWPID
            | libc::CLONE_NEWNET
            | libc::SIGCHLD;
        let pid = libc::syscall(
            libc::SYS_clone,
            flags as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        );
        if pid == 0 {
            libc::_exit(0);
        }
        if pid < 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
        let mut st = 0;
        libc::waitpid(pid as libc::pid_t, &mut st, libc::__WALL);
    }
    Ok(())
}

fn overlayfs() -> bool {
    std::fs::read_to_string("/proc/filesystems")
        .is_ok_and(|s| s.lines().any(|l| l.ends_with("\toverlay")))
        || std::path::Path::new("/sys/module/overlay").exists()
}

/// Checks that the namespace backend can run here; the error names what is missing.
pub fn probe() -> Result<Capabilities, SandboxError> {
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
    let landlock_abi = crate::confine::landlock_abi();
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
