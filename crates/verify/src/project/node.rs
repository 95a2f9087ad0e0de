//! package.json scripts, run as the project's package manager runs them.

use std::ffi::OsString;
use std::path::Path;

use super::{ProjectPlan, find_runner, shell};
use crate::adapter::{self, ReportFormat};
use crate::detect::FileSource;
use crate::model::RunnerKind;

/// The script npm writes into a new package.json: no test command declared.
const NPM_INIT_TEST: &str = "echo \"Error: no test specified\" && exit 1";

/// The package managers, as far as running a script differs between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Manager {
    /// npm.
    Npm,
    /// pnpm.
    Pnpm,
    /// yarn 1 (classic).
    YarnClassic,
    /// yarn 2 and later (berry).
    YarnBerry,
    /// bun.
    Bun,
}

impl Manager {
    /// The command that installs a project's locked dependencies with this manager.
    pub(crate) fn install_command(self) -> &'static str {
        match self {
            Manager::Npm => "npm ci",
            Manager::Pnpm => "pnpm install --frozen-lockfile",
            Manager::YarnClassic => "yarn install --frozen-lockfile",
            Manager::YarnBerry => "yarn install --immutable",
            Manager::Bun => "bun install --frozen-lockfile",
        }
    }

    /// Whether it runs `pre<name>` and `post<name>` around a script.
    fn runs_pre_post(self, src: &dyn FileSource) -> bool {
        match self {
            Manager::Npm | Manager::YarnClassic | Manager::Bun => true,
            Manager::YarnBerry => false,
            Manager::Pnpm => src.read(".npmrc").is_some_and(|b| {
                String::from_utf8_lossy(&b).lines().any(|l| {
                    let l: String = l.chars().filter(|c| !c.is_whitespace()).collect();
                    l == "enable-pre-post-scripts=true"
                })
            }),
        }
    }
}

fn package_json(src: &dyn FileSource) -> Option<serde_json::Value> {
    serde_json::from_slice(&src.read("package.json")?).ok()
}

/// The project's package manager: `packageManager` in package.json, else its lockfile, else npm.
pub(crate) fn manager(src: &dyn FileSource) -> Manager {
    let declared = package_json(src).and_then(|j| {
        j.get("packageManager")
            .and_then(|v| v.as_str())
            .map(str::to_string)
    });
    if let Some(decl) = declared {
        let (name, version) = decl.split_once('@').unwrap_or((&decl, ""));
        match name {
            "pnpm" => return Manager::Pnpm,
            "bun" => return Manager::Bun,
            "npm" => return Manager::Npm,
            "yarn" if version.starts_with("1.") => return Manager::YarnClassic,
            "yarn" => return Manager::YarnBerry,
            _ => {}
        }
    }
    if src.exists("pnpm-lock.yaml") {
        Manager::Pnpm
    } else if src.exists("bun.lockb") || src.exists("bun.lock") {
        Manager::Bun
    } else if src.exists("yarn.lock") {
        if src.exists(".yarnrc.yml") {
            Manager::YarnBerry
        } else {
            Manager::YarnClassic
        }
    } else {
        Manager::Npm
    }
}

/// The package.json script `name`, when the project declares one (npm's placeholder `test`
/// script declares nothing).
pub(crate) fn script(name: &str, src: &dyn FileSource) -> Option<String> {
    let json = package_json(src)?;
    let script = json.get("scripts")?.get(name)?.as_str()?.trim().to_string();
    (!script.is_empty() && script != NPM_INIT_TEST).then_some(script)
}

/// The script an explicit command runs through the package manager, and the arguments the
/// manager appends to it: `npm test|t [-- ARGS]`, `npm run|run-script NAME [-- ARGS]`,
/// `pnpm|yarn [run] NAME [ARGS]`, `bun run NAME [ARGS]`.
pub(crate) fn script_call(cmd: &[String]) -> Option<(&str, &[String])> {
    let (program, rest) = cmd.split_first()?;
    let manager = super::basename(program);
    let (name, args) = match (manager, rest.first().map(String::as_str)) {
        ("npm" | "pnpm" | "yarn", Some("test" | "t")) => ("test", &rest[1..]),
        ("npm" | "pnpm" | "yarn" | "bun", Some("run" | "run-script")) => {
            (rest.get(1)?.as_str(), &rest[2..])
        }
        ("pnpm" | "yarn", Some(name)) if !name.starts_with('-') => (name, &rest[1..]),
        _ => return None,
    };
    if name.starts_with('-') {
        return None;
    }
    // npm passes on only what follows `--`; the others pass everything (a leading `--` dropped).
    let args = match (manager, args.first().map(String::as_str)) {
        (_, Some("--")) => &args[1..],
        ("npm", Some(_)) => return None,
        _ => args,
    };
    Some((name, args))
}

/// The runner the script `name` runs ([`RunnerKind::Command`] when it runs none that airlock
/// reads), or `None` when the project has no such script.
pub(crate) fn script_kind(name: &str, src: &dyn FileSource) -> Option<RunnerKind> {
    let script = script(name, src)?;
    Some(
        runner_step(&script, src)
            .map(|(kind, _, _)| kind)
            .unwrap_or(RunnerKind::Command),
    )
}

/// The last step of `script` that runs a runner airlock reads, with the runner's word index.
fn runner_step(script: &str, src: &dyn FileSource) -> Option<(RunnerKind, usize, shell::Step)> {
    shell::steps(script)?.into_iter().rev().find_map(|step| {
        let words: Vec<String> = step.words.iter().map(|w| w.text.clone()).collect();
        find_runner(&words, src)
            .filter(|(k, _)| matches!(k, RunnerKind::Vitest | RunnerKind::Jest | RunnerKind::Node))
            .map(|(k, at)| (k, at, step))
    })
}

/// The words of the script `name`'s runner step from the runner's program on (`vitest run
/// --globals`), with its runner, when the script runs vitest, jest or `node --test`.
pub(crate) fn runner_words(name: &str, src: &dyn FileSource) -> Option<(RunnerKind, Vec<String>)> {
    let script = script(name, src)?;
    let (kind, at, step) = runner_step(&script, src)?;
    Some((
        kind,
        step.words[at..].iter().map(|w| w.text.clone()).collect(),
    ))
}

/// The script `name` run as the package manager runs it, with reporter flags spliced into its
/// runner step and `extra` appended to it. `None` when the project has no such script, or when the operator chose a
/// runner other than the one the script runs.
pub(crate) fn script_plan(
    name: &str,
    extra: &[String],
    chosen: Option<RunnerKind>,
    root: &Path,
    src: &dyn FileSource,
) -> Option<ProjectPlan> {
    let script = script(name, src)?;
    let found = runner_step(&script, src);
    let kind = found.as_ref().map_or(RunnerKind::Command, |(k, _, _)| *k);
    if chosen.is_some_and(|c| c != kind && c != RunnerKind::Command) {
        return None;
    }
    let mut plan = adapter::plan(RunnerKind::Command, None, root, src);
    let mut body = script.clone();
    let mut steps_before_runner = false;
    if let Some((kind, at, step)) = &found {
        steps_before_runner = step.words[0].start > 0;
        let words: Vec<String> = step.words[*at..].iter().map(|w| w.text.clone()).collect();
        let wired = adapter::plan(*kind, Some(&words), root, src);
        let planned: Vec<String> = wired
            .argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        // The adapter inserts its flags at one place in the runner's words: find it.
        let prefix = planned
            .iter()
            .zip(&words)
            .take_while(|(a, b)| a == b)
            .count();
        let extra = planned.len().saturating_sub(words.len());
        if prefix >= 1 && planned[prefix + extra..] == words[prefix..] {
            let flags: Vec<String> = planned[prefix..prefix + extra]
                .iter()
                .map(|f| shell::quote(f))
                .collect();
            let pos = step.words[*at + prefix - 1].end;
            body = format!("{} {}{}", &script[..pos], flags.join(" "), &script[pos..]);
            plan.kind = *kind;
            plan.report = wired.report;
            plan.witness = wired.witness;
            plan.steps_after_runner = !script[step.words[step.words.len() - 1].end..]
                .trim()
                .is_empty();
            plan.format = wired.format;
            plan.env = wired.env;
            let program = &words[0];
            if !program.contains('/') && *at == 0 && *kind != RunnerKind::Node {
                plan.requires = Some(format!("node_modules/.bin/{program}"));
            }
        }
    }
    for arg in extra {
        body.push(' ');
        body.push_str(&shell::quote(arg));
    }
    let manager = manager(src);
    let mut parts = Vec::new();
    let pre_post = manager.runs_pre_post(src);
    if pre_post && let Some(pre) = self::script(&format!("pre{name}"), src) {
        steps_before_runner = true;
        parts.push(pre);
    }
    parts.push(body);
    if pre_post && let Some(post) = self::script(&format!("post{name}"), src) {
        parts.push(post);
        plan.steps_after_runner = true;
    }
    let composed = if parts.len() == 1 {
        parts.remove(0)
    } else {
        parts
            .iter()
            .map(|p| format!("( {p}\n)"))
            .collect::<Vec<_>>()
            .join(" && ")
    };
    plan.argv = vec![OsString::from("sh"), "-c".into(), composed.into()];
    if plan.format == ReportFormat::Generic {
        plan.kind = RunnerKind::Command;
    }
    let json = package_json(src);
    let field = |f: &str| {
        json.as_ref()
            .and_then(|j| j.get(f))
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string()
    };
    plan.env.extend([
        ("npm_lifecycle_event".to_string(), name.to_string()),
        ("npm_lifecycle_script".to_string(), script),
        ("npm_package_name".to_string(), field("name")),
        ("npm_package_version".to_string(), field("version")),
    ]);
    Some(ProjectPlan {
        plan,
        path_prepend: vec![root.join("node_modules/.bin")],
        steps_before_runner,
    })
}
