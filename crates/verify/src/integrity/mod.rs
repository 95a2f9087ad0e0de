//! Verdict integrity: a pass means the project's own tests passed, by signals the tested code
//! cannot forge without reaching for airlock's own machinery, under the base's test
//! definition.
//!
//! - [`witness`]: pytest's decisions streamed live by airlock's plugin on a keyed channel,
//!   compared with pytest's report, its count and how the process ended.
//! - [`libtest`]: each libtest binary's own per-test log compared with its summary, its
//!   announced count and the binaries cargo started.
//! - [`classify`]: what the changeset did to the test definition (tests changed or deleted,
//!   test configuration, runner plugins) and whether its added code reaches for the run's
//!   machinery; each is a [`Concern`](airlock_types::Concern) that makes apply the operator's
//!   decision.
//!
//! Disagreeing signals turn a would-be `passed` into `error`; concerns leave the verdict as it
//! is and travel with it to apply.

pub(crate) mod classify;
pub(crate) mod items;
pub(crate) mod libtest;
pub(crate) mod reach;
pub mod seal;
pub(crate) mod witness;

pub use classify::ConcernReport;
pub use seal::{Attestation, authentic, base_fingerprint};

use serde::{Deserialize, Serialize};

/// What the integrity checks found, in the verdict (`integrity`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Integrity {
    /// Signals of the run that disagree (a would-be pass is then `error`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disagreements: Vec<String>,
    /// What the changeset changed of the test definition, and what its code reaches for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub concerns: Vec<ConcernReport>,
    /// The independent signals the verdict was checked against (`witness`, `libtest_log`,
    /// `exit`), for the record.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signals: Vec<String>,
}

impl Integrity {
    /// True when nothing disagrees and nothing is a concern.
    pub fn is_clear(&self) -> bool {
        self.disagreements.is_empty() && self.concerns.is_empty()
    }
}
