//! The degraded backend: no kernel isolation. Placeholder until it lands.

use crate::Backend;
use crate::error::SandboxError;
use crate::spec::{Outcome, SandboxSpec};

/// Runs the command in a copy of the workspace, with a process-group kill and no isolation.
#[derive(Debug, Default, Clone)]
pub struct DegradedBackend {
    _private: (),
}

impl DegradedBackend {
    /// The backend.
    pub fn new() -> Self {
        DegradedBackend { _private: () }
    }
}

impl Backend for DegradedBackend {
    fn name(&self) -> &'static str {
        "degraded"
    }

    fn run(&self, _spec: &SandboxSpec) -> Result<Outcome, SandboxError> {
        Err(SandboxError::Unsupported {
            missing: "degraded backend",
            detail: "not built yet".into(),
        })
    }
}
