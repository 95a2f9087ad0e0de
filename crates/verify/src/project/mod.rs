//! What the project itself runs: the test command read from the project's own declarations,
//! run the way its developer runs it, with only what airlock needs to read the results added.
//!
//! - **Node** ([`node`]): the `test` script of package.json, run as its package manager runs it
//!   (chosen by `packageManager`, else the lockfile): `sh -c` over the script, with
//!   `node_modules/.bin` first on `PATH`, the `npm_lifecycle_*` variables, and `pretest` /
//!   `posttest` around it when that manager runs them (npm, yarn 1, bun; pnpm only with
//!   `enable-pre-post-scripts=true`; yarn 2+ never). Every step and flag of the script is kept.
//!   When a step of the script runs a recognised runner (vitest, jest, `node --test`, directly
//!   or through `npx`, `pnpm exec`, `yarn`, `cross-env`, `env`), the reporter flags are spliced
//!   into that step's own words (the last such step; flags go where the runner takes them), so
//!   airlock reads structured results. A script beyond a list of simple commands (subshells,
//!   substitutions, redirections) or without a recognised runner runs unchanged, read by the
//!   generic adapter.
//! - **Python** ([`python`]): the project's in-tree environment (`.venv/` — uv, poetry with
//!   in-project environments, pipenv with `PIPENV_VENV_IN_PROJECT` — or `venv/`) runs pytest,
//!   with its `bin/` first on `PATH` and `VIRTUAL_ENV` set, as an activated environment would;
//!   pytest itself reads `[tool.pytest.ini_options]`, `pytest.ini`, `setup.cfg` and `tox.ini`.
//! - **Rust** ([`cargo`]): `--workspace` when the root manifest declares a workspace; cargo
//!   aliases of `.cargo/config.toml` are expanded in explicit commands.
//! - **Go**: `-mod=vendor` when the module vendors its dependencies; `-json` is added to an
//!   explicit `go test`.
//! - **Explicit commands** (`verify -- CMD`): the runner is found in the argv through wrappers
//!   (`env`, `npx`, `pnpm exec`, `yarn`, `bunx`, `uv run`, `poetry run`, `python -m`, …) and keeps
//!   its structured adapter; `npm test`, `npm run NAME`, `pnpm NAME`, `yarn NAME` and
//!   `bun run NAME` run that package.json script as above.

pub(crate) mod cargo;
pub(crate) mod node;
pub(crate) mod python;
pub(crate) mod shell;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::adapter::{self, Plan};
use crate::detect::{FileSource, detect};
use crate::model::RunnerKind;

/// A plan and how the project wants it run.
#[derive(Debug, Clone)]
pub struct ProjectPlan {
    /// The command, its reporter wiring and how to read it.
    pub plan: Plan,
    /// Directories (as the command sees them) put first on `PATH`.
    pub path_prepend: Vec<PathBuf>,
    /// Other steps run before the runner (a script's `tsc && vitest run`, a `pretest`): when
    /// one fails, the runner never writes its report, and what those steps printed is read
    /// generically instead.
    pub steps_before_runner: bool,
}

impl ProjectPlan {
    fn bare(plan: Plan) -> ProjectPlan {
        ProjectPlan {
            plan,
            path_prepend: Vec::new(),
            steps_before_runner: false,
        }
    }
}

/// The runner a verification uses: the operator's choice; else the runner recognised in the
/// explicit command (generic `command` when none is); else the one the project declares.
pub fn kind(
    chosen: Option<RunnerKind>,
    explicit: Option<&[String]>,
    src: &dyn FileSource,
) -> Option<RunnerKind> {
    if let Some(kind) = chosen {
        return Some(kind);
    }
    match explicit {
        Some(cmd) => Some(
            node::script_call(cmd)
                .and_then(|(name, _)| node::script_kind(name, src))
                .or_else(|| find_runner(cmd, src).map(|(k, _)| k))
                .unwrap_or(RunnerKind::Command),
        ),
        None => {
            let detected = detect(src)?;
            if matches!(
                detected,
                RunnerKind::Vitest | RunnerKind::Jest | RunnerKind::Node
            ) && let Some(kind) = node::script_kind("test", src)
            {
                return Some(kind);
            }
            Some(detected)
        }
    }
}

/// The command for `kind`, from the explicit command or the project's declarations, with the
/// reporter wiring of [`adapter::plan`].
pub fn plan(
    kind: RunnerKind,
    explicit: Option<&[String]>,
    visible_root: &Path,
    src: &dyn FileSource,
) -> ProjectPlan {
    let mut pp = match explicit {
        Some(cmd) => explicit_plan(kind, cmd, visible_root, src),
        None => declared_plan(kind, visible_root, src),
    };
    // An in-tree Python environment is active, as in its developer's shell.
    if let Some(venv) = python::venv(src) {
        let bin = visible_root.join(venv).join("bin");
        if !pp.path_prepend.contains(&bin) {
            pp.path_prepend.push(bin);
        }
        pp.plan.env.push((
            "VIRTUAL_ENV".into(),
            visible_root.join(venv).to_string_lossy().into_owned(),
        ));
    }
    pp
}

fn declared_plan(kind: RunnerKind, root: &Path, src: &dyn FileSource) -> ProjectPlan {
    match kind {
        RunnerKind::Vitest | RunnerKind::Jest | RunnerKind::Node | RunnerKind::Command => {
            if let Some(pp) = node::script_plan("test", &[], Some(kind), root, src) {
                return pp;
            }
            ProjectPlan::bare(adapter::plan(kind, None, root, src))
        }
        RunnerKind::Pytest => python::plan(root, src),
        RunnerKind::Cargo => cargo::plan(root, src),
        RunnerKind::Go => {
            let mut plan = adapter::plan(kind, None, root, src);
            go_vendor(&mut plan, src);
            ProjectPlan::bare(plan)
        }
        RunnerKind::Junit => ProjectPlan::bare(adapter::plan(kind, None, root, src)),
    }
}

fn explicit_plan(
    kind: RunnerKind,
    cmd: &[String],
    root: &Path,
    src: &dyn FileSource,
) -> ProjectPlan {
    if let Some((name, args)) = node::script_call(cmd)
        && let Some(pp) = node::script_plan(name, args, Some(kind), root, src)
    {
        return pp;
    }
    if matches!(kind, RunnerKind::Command | RunnerKind::Junit) {
        return ProjectPlan::bare(adapter::plan(kind, Some(cmd), root, src));
    }
    // The runner's own words get the reporter flags; the wrapper in front stays as it is.
    let at = find_runner(cmd, src)
        .filter(|(k, _)| *k == kind)
        .map_or(0, |(_, at)| at);
    let mut runner_words = cmd[at..].to_vec();
    if kind == RunnerKind::Cargo {
        runner_words = cargo::explicit(&runner_words, src);
    }
    if kind == RunnerKind::Go {
        go_json(&mut runner_words);
    }
    let mut plan = adapter::plan(kind, Some(&runner_words), root, src);
    let mut argv: Vec<OsString> = cmd[..at].iter().map(OsString::from).collect();
    argv.append(&mut plan.argv);
    plan.argv = argv;
    if kind == RunnerKind::Go {
        go_vendor(&mut plan, src);
    }
    let mut pp = ProjectPlan::bare(plan);
    if matches!(
        kind,
        RunnerKind::Vitest | RunnerKind::Jest | RunnerKind::Node
    ) && src.exists("node_modules/.bin")
    {
        pp.path_prepend.push(root.join("node_modules/.bin"));
    }
    pp
}

/// `go test` reports events only with `-json`: added right after `test` when missing.
fn go_json(words: &mut Vec<String>) {
    let Some(test) = words.iter().position(|w| w == "test") else {
        return;
    };
    let flags_end = words
        .iter()
        .position(|w| w == "-args" || w == "--args")
        .unwrap_or(words.len());
    if !words[test..flags_end]
        .iter()
        .any(|w| w == "-json" || w == "--json" || w == "-json=true")
    {
        words.insert(test + 1, "-json".into());
    }
}

/// A module that vendors its dependencies builds from `vendor/` (as `go` itself chooses).
fn go_vendor(plan: &mut Plan, src: &dyn FileSource) {
    if !src.exists("vendor/modules.txt") {
        return;
    }
    for (k, v) in &mut plan.env {
        if k == "GOFLAGS" {
            *v = "-mod=vendor".into();
        }
    }
}

fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && !name.as_bytes()[0].is_ascii_digit()
    })
}

fn is_python(name: &str) -> bool {
    name.strip_prefix("python")
        .is_some_and(|v| v.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
}

/// The test runner `words` run, and the index of the runner's own program among them, looking
/// through environment assignments and the wrappers that start a program (`env`, `cross-env`,
/// `npx`, `bunx`, `pnpm exec`, `yarn`, `uv run`, `poetry run`, `python -m`, …).
pub(crate) fn find_runner(words: &[String], src: &dyn FileSource) -> Option<(RunnerKind, usize)> {
    let mut i = 0;
    // Skips option words (and the value of the given options that take one).
    let skip_options = |mut i: usize, with_value: &[&str]| {
        while let Some(w) = words.get(i) {
            if !w.starts_with('-') {
                break;
            }
            i += if with_value.contains(&w.as_str()) {
                2
            } else {
                1
            };
        }
        i
    };
    loop {
        let word = words.get(i)?;
        if is_assignment(word) {
            i += 1;
            continue;
        }
        let next = words.get(i + 1).map(String::as_str);
        match basename(word) {
            "env" | "cross-env" | "cross-env-shell" => {
                i = skip_options(i + 1, &["-u", "--unset", "-C", "--chdir"]);
            }
            "npx" | "bunx" | "pnpx" => {
                i = skip_options(i + 1, &["-p", "--package", "-c", "--call"]);
            }
            "npm" | "pnpm" | "yarn" | "bun" if matches!(next, Some("exec" | "x" | "dlx")) => {
                i = skip_options(i + 2, &["-p", "--package", "-c", "--call"]);
            }
            // `yarn vitest`, `pnpm jest`: a package binary, when it is no script of the project.
            "yarn" | "pnpm"
                if next.is_some_and(|n| !n.starts_with('-') && node::script(n, src).is_none()) =>
            {
                i += 1;
            }
            "uv" | "poetry" | "pipenv" | "hatch" | "pdm" | "rye" if next == Some("run") => {
                i = skip_options(i + 2, &["--with", "--python", "-p", "--env", "-e"]);
            }
            "pytest" | "py.test" => return Some((RunnerKind::Pytest, i)),
            "vitest" => return Some((RunnerKind::Vitest, i)),
            "jest" => return Some((RunnerKind::Jest, i)),
            "node" | "nodejs"
                if words[i + 1..]
                    .iter()
                    .take_while(|w| w.starts_with('-'))
                    .any(|w| w == "--test") =>
            {
                return Some((RunnerKind::Node, i));
            }
            "go" if next == Some("test") => return Some((RunnerKind::Go, i)),
            "cargo" if cargo::is_test(&words[i + 1..], src) => {
                return Some((RunnerKind::Cargo, i));
            }
            name if is_python(name) => {
                let mut j = i + 1;
                while let Some(w) = words.get(j) {
                    match w.as_str() {
                        "-m" => {
                            let module = words.get(j + 1).map(String::as_str);
                            return matches!(module, Some("pytest" | "py.test"))
                                .then_some((RunnerKind::Pytest, i));
                        }
                        "-W" | "-X" => j += 2,
                        w if w.starts_with('-') => j += 1,
                        _ => return None,
                    }
                }
                return None;
            }
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests;
