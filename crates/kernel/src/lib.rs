//! The execution chain: every tool call passes Permission → Jail → Bash Guard → Argument
//! Validation → Executor → Journal/Recovery, in that order; a stage that says no stops the call
//! with no effect and returns its [`Decision`](airlock_policy::Decision).
//!
//! The [`Kernel`] owns the tool registry (each tool with its JSON Schema), the session's staging
//! store and the executor. Front ends (the CLI, the MCP server, Rust programs) call
//! [`Kernel::call`] with a tool name and JSON arguments and get a [`CallOutcome`].
//!
//! ```no_run
//! use airlock_kernel::{CallContext, Cancel, DenyAll, Kernel, KernelConfig, Settings};
//! use airlock_policy::modes::{PermissionMode, WorkMode};
//! let kernel = Kernel::open(KernelConfig {
//!     workspace: ".".into(), session: "default".into(), mode: WorkMode::Build,
//!     permission: PermissionMode::Auto, profile: None, allow_local_config: false,
//!     allow_degraded: false, settings: Settings::default(),
//! }).unwrap();
//! let approver = DenyAll::default();
//! let ctx = CallContext::new(Cancel::new(), &approver);
//! let out = kernel.call("write_file", r#"{"path":"src/a.rs","content":"x"}"#, &ctx);
//! assert!(out.ok); // staged, not written
//! ```

#![forbid(unsafe_code)]

pub mod api;
pub mod args;
pub mod cache;
mod cargo_home;
mod chain;
mod exec;
mod git;
mod host_shape;
mod kernel;
pub mod output;
mod session;
pub mod tools;

pub use api::{
    Approval, ApprovalRequest, Approver, CallContext, CallOutcome, Cancel, DenyAll, GuardCheck,
    KernelConfig, Notice, OperatorInputs, Settings, ToolSpec, guard_check,
};
pub use kernel::{GcSummary, Kernel, OpenError};
pub use output::Status;
pub use session::Reclaimed;
