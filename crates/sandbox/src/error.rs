//! The one error type of the crate. Each variant carries its context and reads as a sentence.

use std::io;
use std::path::PathBuf;

/// Why a sandboxed run could not be set up or completed.
///
/// A command that runs and fails (non-zero exit, timeout) is not an error: it is an
/// [`Outcome`](crate::Outcome). These are failures of the sandbox itself.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The kernel lacks a feature the namespace backend needs.
    #[error(
        "kernel isolation is unavailable: {missing} ({detail}); `airlock doctor` shows what this host offers; `--sandbox landlock` runs under Landlock and seccomp without namespaces, `--allow-degraded` without kernel isolation"
    )]
    Unsupported {
        /// The missing feature, e.g. "user namespaces".
        missing: &'static str,
        /// What the probe observed.
        detail: String,
    },
    /// The operator forced a tier weaker than the weakest one allowed.
    #[error(
        "the {tier} sandbox tier is weaker than the weakest allowed ({weakest}); the operator allows it with {}",
        if *tier == crate::Tier::Degraded { "--allow-degraded" } else { "AIRLOCK_SANDBOX_WEAKEST=landlock or --sandbox landlock" }
    )]
    TierNotAllowed {
        /// The tier asked for.
        tier: crate::Tier,
        /// The weakest tier the operator allows.
        weakest: crate::Tier,
    },
    /// The spec is not acceptable (relative paths, cwd outside the workspace, forbidden env).
    #[error("the sandbox spec is invalid: {0}")]
    InvalidSpec(String),
    /// A host-side operation on a path failed.
    #[error("{action} {path} failed: {source}")]
    Io {
        /// What was being done, e.g. "creating the new root".
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A system call failed on the host side of the sandbox.
    #[error("{action} failed: {source}")]
    Sys {
        /// What was being done, e.g. "clone".
        action: &'static str,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Setting the sandbox up inside the new namespaces failed.
    #[error("sandbox set-up failed while {step}: {source}")]
    Setup {
        /// The set-up step, e.g. "mounting the workspace overlay on /work/ws".
        step: String,
        /// The errno the step returned.
        #[source]
        source: io::Error,
    },
    /// The command could not be executed (not found, not executable).
    #[error("cannot execute {program:?} in the sandbox: {source}")]
    Exec {
        /// argv\[0\].
        program: std::ffi::OsString,
        /// The errno of the last execve.
        #[source]
        source: io::Error,
    },
    /// The Landlock ruleset or the seccomp filter could not be built.
    #[error("building the {what} failed: {detail}")]
    Policy {
        /// "Landlock ruleset" or "seccomp filter".
        what: &'static str,
        /// The library's message.
        detail: String,
    },
}

impl SandboxError {
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        SandboxError::Io {
            action,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn sys(action: &'static str) -> Self {
        SandboxError::Sys {
            action,
            source: io::Error::last_os_error(),
        }
    }
}
