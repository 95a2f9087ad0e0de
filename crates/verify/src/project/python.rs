//! Python projects: pytest from the project's own environment.

use std::path::Path;

use super::ProjectPlan;
use crate::adapter;
use crate::detect::FileSource;
use crate::model::RunnerKind;

/// In-tree environments, in the order their tools create them: `.venv` (uv, poetry with
/// `virtualenvs.in-project`, pipenv with `PIPENV_VENV_IN_PROJECT`, `python -m venv .venv`),
/// then `venv`.
const VENVS: &[&str] = &[".venv", "venv"];

/// The project's in-tree environment: a directory with `pyvenv.cfg` and `bin/python`.
pub(crate) fn venv(src: &dyn FileSource) -> Option<&'static str> {
    VENVS
        .iter()
        .copied()
        .find(|d| src.exists(&format!("{d}/pyvenv.cfg")) && src.exists(&format!("{d}/bin/python")))
}

/// pytest run by the project's interpreter: the environment's `python`, else `python3`.
pub(crate) fn plan(root: &Path, src: &dyn FileSource) -> ProjectPlan {
    let python = venv(src).map_or_else(
        || "python3".to_string(),
        |d| {
            root.join(d)
                .join("bin/python")
                .to_string_lossy()
                .into_owned()
        },
    );
    let argv = [python, "-m".into(), "pytest".into(), "-q".into()];
    ProjectPlan::bare(adapter::plan(RunnerKind::Pytest, Some(&argv), root, src))
}
