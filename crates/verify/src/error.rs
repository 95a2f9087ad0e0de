//! Errors of the harness itself (not of the tests: those become verdicts).

use std::path::{Path, PathBuf};

/// Why a verification could not be carried out at all.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// No test runner was recognised and no command was given.
    #[error(
        "no test runner was recognised in the workspace (looked for package.json, Cargo.toml, go.mod, pyproject.toml, pytest.ini, setup.cfg); pass the test command after `--`"
    )]
    NoRunner,
    /// An explicit command was empty.
    #[error("the test command is empty")]
    EmptyCommand,
    /// The sandbox could not be set up or failed outside the command.
    #[error("the sandbox could not run the tests: {0}")]
    Sandbox(String),
    /// The test command's program does not exist or cannot be executed.
    #[error("the test runner could not be started: {0}")]
    RunnerNotFound(String),
    /// The command could not be started.
    #[error("the test command could not be started: {0}")]
    Spawn(String),
    /// The tests `--only` names cannot be selected with this runner.
    #[error("the tests to run could not be selected: {0}")]
    Selection(String),
    /// A file operation of the harness failed.
    #[error("{} failed for {}: {source}", .op, .path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// On which path.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl VerifyError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> VerifyError {
        VerifyError::Io {
            op: "file access",
            path: path.to_path_buf(),
            source,
        }
    }
}
