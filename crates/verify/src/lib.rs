//! airlock-verify: the verification harness. It runs a project's tests against the workspace
//! plus a staged changeset in a fresh sandbox (no network, writes thrown away, timeout, bounded
//! output) and returns a verdict bound to the changeset's content hash.
//!
//! The pieces, in the order a verification uses them:
//! - [`detect()`]: which runner a project uses (package.json → vitest / jest / node:test,
//!   Cargo.toml → cargo, go.mod → go, pyproject.toml / pytest.ini / setup.cfg / tests → pytest),
//!   read through a [`FileSource`] so the caller can pass the merged view.
//! - [`project`]: what the project itself runs, read from its declarations (package.json's
//!   `test` script with its package manager, the in-tree `.venv`, a Makefile `test` target,
//!   the cargo workspace and aliases, Go's vendoring), and the runner inside an explicit
//!   command, so that command keeps its structured adapter.
//! - [`adapter`]: steers each runner to a structured reporter (JUnit XML for node:test, vitest
//!   and pytest; jest's JSON; `go test -json`; cargo JSON diagnostics + libtest output) and
//!   parses it, streaming; a generic adapter handles any command.
//! - [`sanitize`]: what goes back to the model — test, message, expected/received,
//!   workspace-relative `file:line`, workspace-only frames; ANSI stripped, duplicates folded,
//!   a byte budget that always says what it left out.
//! - [`adapter::impacted`]: the tests related to a change, for `--impacted-first`.
//! - [`verdict`]: the rules for passed / failed / no_tests / timeout / error (documented there,
//!   including compile errors → `failed` and pre-existing failures with a baseline).
//!
//! Inside the sandbox the workspace appears at its own path (an overlay of the workspace, the
//! layers, and a private layer for reporter files under `.airlock-verify/`), `/tmp` is private,
//! `$HOME` is fresh and the network is off. So the caller exposes toolchains read-only through
//! [`VerifyOptions::home_binds`] (the caller's allow-list of toolchain paths: cargo needs
//! `~/.cargo/bin`, its registry caches and `~/.rustup/toolchains`), hides what the tests must
//! not read through [`VerifyOptions::masked`], and a Node project must have its `node_modules`
//! inside the workspace (or reachable through [`VerifyOptions::ro_binds`]). Cargo runs with
//! `--offline` and builds into the thrown-away upper dir.
//!
//! The [`VerdictReport`] serialises to the verdict JSON of CLI.md (`verdict`, `changeset`,
//! `runner`, `tests`, `failures[{test,file,line,message}]`, `diagnostics`, `duration_ms`);
//! optional extras (`column`, `expected`, `received`, `stack`, `kind`, `pre_existing`,
//! `degraded`, `failures_omitted`, `exit_code`, `baseline`, `environment`, `scope`, `impacted`)
//! are omitted when empty.
//!
//! ```no_run
//! use airlock_verify::{run_verification, VerifyInput, VerifyOptions};
//! use std::path::Path;
//!
//! let input = VerifyInput {
//!     workspace: Path::new("/path/to/project"),
//!     layers: vec![],
//!     changeset_hash: "blake3:…".into(),
//!     scratch_dir: Path::new("/path/to/scratch"),
//!     baseline_cache: None,
//! };
//! let report = run_verification(&input, &VerifyOptions::default())?;
//! println!("{}", serde_json::to_string(&report).unwrap());
//! # Ok::<(), airlock_verify::VerifyError>(())
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod adapter;
mod base;
pub mod detect;
mod error;
mod harness;
pub mod integrity;
pub mod model;
pub mod project;
pub mod runner;
pub mod sanitize;
pub mod verdict;

pub use detect::{DirSource, FileSource, detect};
pub use error::VerifyError;
pub use harness::{
    DEFAULT_TIMEOUT, VerifyInput, VerifyOptions, run_verification, run_verification_with,
};
pub use integrity::{Attestation, ConcernReport, Integrity};
pub use model::{
    BaseReport, Counts, Failure, FailureKind, ImpactedMode, ImpactedReport, ImpactedStatus,
    RunnerKind, Scope, Verdict, VerdictReport,
};
pub use runner::{CommandRunner, OutputText, PlainRunner, RunOutput, RunRequest};
