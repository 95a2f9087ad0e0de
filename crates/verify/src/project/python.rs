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

/// The recipe lines of the Makefile's `test` target, when it has one.
fn make_test_recipe(src: &dyn FileSource) -> Option<Vec<String>> {
    let text = String::from_utf8(src.read("Makefile")?).ok()?;
    let mut lines = text.lines();
    lines.find(|l| {
        l.split_once(':').is_some_and(|(targets, rest)| {
            !rest.starts_with('=') && targets.split_whitespace().any(|t| t == "test")
        }) && !l.starts_with('\t')
            && !l.starts_with('.')
    })?;
    Some(
        lines
            .take_while(|l| l.starts_with('\t') || l.trim().is_empty())
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect(),
    )
}

/// pytest run the way the project declares it: `make test` when the Makefile's `test` target
/// runs pytest (airlock's reporter then reaches pytest through `PYTEST_ADDOPTS`, which pytest
/// reads wherever it is started from); else the environment's `python -m pytest`, else
/// `python3`'s.
pub(crate) fn plan(root: &Path, src: &dyn FileSource) -> ProjectPlan {
    if make_test_recipe(src).is_some_and(|r| r.iter().any(|l| l.contains("pytest"))) {
        let mut plan = adapter::plan(RunnerKind::Pytest, Some(&["pytest".to_string()]), root, src);
        let added: Vec<String> = plan
            .argv
            .iter()
            .skip(1)
            .map(|a| super::shell::quote(&a.to_string_lossy()))
            .collect();
        plan.env
            .push(("PYTEST_ADDOPTS".to_string(), added.join(" ")));
        plan.argv = vec!["make".into(), "test".into()];
        return ProjectPlan::bare(plan);
    }
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
