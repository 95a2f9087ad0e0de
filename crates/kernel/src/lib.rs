//! The execution chain: every tool call passes Permission → Jail → Bash Guard → Argument
//! Validation → Executor → Journal/Recovery, in that order; a stage that says no stops the call
//! with no effect and returns its [`Decision`](airlock_policy::Decision).
//!
//! The [`Kernel`] owns the tool registry (each tool with its JSON Schema), the session's staging
//! store and the executor. Front ends (the CLI, the MCP server, Rust programs) call
//! [`Kernel::call`] with a tool name and JSON arguments and get a [`CallOutcome`].

pub mod api;

pub use api::{
    Approval, ApprovalRequest, Approver, CallContext, CallOutcome, Cancel, DenyAll, GuardCheck,
    Kernel, KernelConfig, ToolSpec, guard_check,
};
