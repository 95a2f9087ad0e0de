//! The staging layer: nothing an agent does touches the real workspace until it is verified and
//! applied.
//!
//! A session owns a changeset (path → write | delete | symlink | dir, each with the fingerprint
//! of the base it was staged against), persisted under `.airlock/` so a crash loses no agent
//! work. Read tools see workspace + changeset merged. `apply` takes only a
//! [`VerifiedChangeset`] — a snapshot whose changeset hash carries a passing verdict — and writes
//! it all-or-nothing under a durable journal; `recover` resolves interrupted applies and `undo`
//! reverts the last one.
//!
//! The stage decides nothing about commands or paths beyond its own: paths, hashes and verdicts
//! are the shared types of `airlock-types`, and which host-exec paths apply refuses is asked of
//! the caller's [`apply::HostExecGate`] (the kernel passes the policy's).

#![forbid(unsafe_code)]

/// airlock's state directory in the workspace.
pub const STATE_DIR: &str = ".airlock";

pub mod blobs;
pub mod gc;
pub mod model;

// Changeset store, merged view, diff, patch and overlay layer.
pub mod diff;
pub mod layer;
pub mod patch;
pub mod store;
pub mod view;

// Journal, atomic apply, recovery and undo.
pub mod apply;
pub mod journal;
pub mod recover;
pub mod seal;
pub mod undo;

pub use airlock_types::Concern;
pub use airlock_types::{BaseFingerprint, VerdictKey, VerdictSeal};
pub use blobs::{BlobPin, BlobStore};
pub use model::{
    Change, ChangesetHash, ChangesetSnapshot, ContentHash, Fingerprint, Flag, NotVerified,
    StagedEntry, StagedNode, Verdict, VerdictRecord, VerdictSource, VerifiedChangeset,
    fingerprint_path,
};
pub use seal::load_or_create_key;
