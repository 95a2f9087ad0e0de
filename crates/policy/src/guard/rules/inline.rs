//! Inline programs in a language the guard parses (`python -c`, `node -e`, a here-doc fed to
//! `python3 -`), judged by what their code does (`guard::inline`): a command the code runs, a
//! file it reads, writes or deletes, a signal it sends is judged exactly like the equivalent
//! shell command, so the denial carries the same rule id; network access, process control
//! the code hides, code only known at run time, native calls and code that does not parse
//! stay `inline_interpreter`. Code that only reads and prints, and writes inside the
//! workspace, is allowed.

use super::super::Family;
use super::super::effects::{Cwd, Effects};
use super::super::inline::{Act, Language, analyse};
use super::super::normalize::{Arg, Input, Taint, is_secret_name};
use super::target::plain_path;

/// Judge inline `code` in `language`; what its output carries (file contents, secrets).
pub(super) fn judge(w: &mut dyn Effects, language: Language, code: &str, shown: &str) -> Taint {
    let acts = analyse(language, code);
    let lang = language.label();
    let network = acts.contains(&Act::Network);
    let runs_unknown = acts
        .iter()
        .any(|a| matches!(a, Act::DynamicCode | Act::Shell(None) | Act::Exec(None)));
    let carries = acts.iter().any(|a| {
        matches!(
            a,
            Act::Read(_) | Act::EnvAll | Act::EnvGet(_) | Act::Exec(_) | Act::Shell(_)
        )
    });
    if network && runs_unknown {
        w.deny(
            Family::RemoteExec,
            format!("`{shown}` runs inline {lang} that fetches code from the network and runs it."),
        );
    } else if network && carries {
        w.deny(
            Family::Exfiltration,
            format!(
                "`{shown}` runs inline {lang} that sends files, the environment or a shell over the network."
            ),
        );
    }
    let mut taint = Taint::default();
    for act in acts {
        judge_act(w, act, lang, shown, &mut taint);
    }
    taint
}

/// Judge one act of the code: the acts judged like a shell command record what that command
/// gets; the rest come back as the clause of an `inline_interpreter` denial.
fn judge_act(w: &mut dyn Effects, act: Act, lang: &str, shown: &str, taint: &mut Taint) {
    let clause = match act {
        Act::Shell(_) | Act::Exec(_) | Act::Fork { .. } | Act::Signal(_) => process(w, act, shown),
        Act::Read(_) | Act::Write { .. } | Act::Remove { .. } => file(w, act, taint),
        Act::Network => Some("opens a network connection".to_owned()),
        Act::EnvAll => {
            taint.secret = true;
            w.deny(
                Family::EnvDump,
                format!("`{shown}` prints the whole environment, secrets included."),
            );
            None
        }
        Act::EnvGet(name) => {
            let secret = name.as_deref().is_none_or(is_secret_name);
            taint.secret |= secret;
            taint.env_secret |= secret;
            None
        }
        Act::DynamicCode => Some("runs code only known at run time".to_owned()),
        Act::Native => Some("calls native code".to_owned()),
        Act::Unparseable(message) => {
            // The parser's first line, as a clause of this one sentence.
            let first = message.lines().next().unwrap_or_default();
            let clause = first.trim().trim_end_matches('.').replace(". ", "; ");
            Some(format!("does not parse ({clause})"))
        }
    };
    if let Some(what) = clause {
        w.deny(
            Family::InlineInterpreter,
            format!("`{shown}` runs inline {lang} that {what}."),
        );
    }
}

/// A command the code runs, a fork, a signal: judged like the shell command; a command that
/// passes is still run from inline code (the clause returned).
fn process(w: &mut dyn Effects, act: Act, shown: &str) -> Option<String> {
    match act {
        Act::Shell(Some(line)) => {
            let denied = denies(w, |w| {
                w.run_code(&Arg::literal(line.clone()), &Input::Inherited, shown);
            });
            (!denied).then(|| format!("starts `{line}`; run the command directly"))
        }
        Act::Exec(Some(argv)) => {
            let line = argv.join(" ");
            let denied = equivalent(w, argv, Input::Inherited);
            (!denied).then(|| format!("starts `{line}`; run the command directly"))
        }
        Act::Fork { in_loop: true } => {
            w.deny(
                Family::Destruction,
                format!("`{shown}` is a fork bomb: it spawns processes in an endless loop."),
            );
            None
        }
        Act::Fork { in_loop: false } => Some("forks the interpreter".to_owned()),
        Act::Signal(pid) => {
            let judged = pid.is_some_and(|pid| {
                equivalent(w, vec!["kill".into(), "-9".into(), pid], Input::Inherited)
            });
            (!judged).then(|| "signals another process".to_owned())
        }
        _ => Some("starts a process whose command is only known at run time".to_owned()),
    }
}

/// A file the code reads, writes or deletes: judged like `cat`, `tee -a` or `rm`; a write or
/// deletion outside the workspace that passes, or any path only known at run time, is the
/// clause returned.
fn file(w: &mut dyn Effects, act: Act, taint: &mut Taint) -> Option<String> {
    match act {
        Act::Read(Some(path)) => {
            taint.secret = true;
            equivalent(w, vec!["cat".into(), path], Input::Inherited);
            None
        }
        Act::Read(None) => Some("reads a file whose path is only known at run time".to_owned()),
        Act::Write {
            path: Some(path),
            content,
        } => write(w, path, content),
        Act::Write { path: None, .. } => {
            Some("writes a file whose path is only known at run time".to_owned())
        }
        Act::Remove {
            path: Some(path),
            recursive,
        } => {
            let flags = if recursive { "-rf" } else { "-f" };
            let argv = vec!["rm".into(), flags.into(), path.clone()];
            let denied = equivalent(w, argv, Input::Inherited);
            (!denied && !inside_workspace(&path, w.cwd()))
                .then(|| format!("deletes `{path}` outside the workspace"))
        }
        _ => Some("deletes a path only known at run time".to_owned()),
    }
}

/// A write: inside the workspace it is allowed and its known content recorded (a script the
/// code writes and a later command runs is judged by that content); elsewhere it is judged like
/// `tee -a PATH` fed the content, and the clause returned when that finds nothing worse.
fn write(w: &mut dyn Effects, path: String, content: Option<String>) -> Option<String> {
    if inside_workspace(&path, w.cwd()) {
        match content {
            Some(text) => {
                w.written_mut().insert(plain_path(&path), text);
            }
            None => {
                w.written_mut().remove(&plain_path(&path));
            }
        }
        return None;
    }
    let input = content.map_or(Input::Inherited, Input::Static);
    let denied = equivalent(w, vec!["tee".into(), "-a".into(), path.clone()], input);
    (!denied).then(|| format!("writes `{path}` outside the workspace"))
}

/// Judge the equivalent shell command; whether it was denied.
fn equivalent(w: &mut dyn Effects, argv: Vec<String>, input: Input) -> bool {
    denies(w, |w| {
        w.run_argv(argv.into_iter().map(Arg::literal).collect(), &input);
    })
}

/// Whether `judge` recorded a denial.
fn denies(w: &mut dyn Effects, judge: impl FnOnce(&mut dyn Effects)) -> bool {
    let before = w.findings().len();
    judge(w);
    w.findings().len() > before
}

/// A relative path that stays inside the workspace, from where the script is.
fn inside_workspace(path: &str, cwd: &Cwd) -> bool {
    let mut depth = match cwd {
        Cwd::Root => 0,
        Cwd::Workspace(below) => below.len(),
        _ => return false,
    };
    if path.is_empty() || path.starts_with(['/', '~', '$']) {
        return false;
    }
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." if depth == 0 => return false,
            ".." => depth -= 1,
            _ => depth += 1,
        }
    }
    true
}
