//! Commands that run other code: shells (`bash -c`, a script on stdin, `<(…)`), `eval`,
//! `source`, traps and aliases, `xargs`, `find -exec`, `parallel`, `watch`, `su -c`; and the
//! interpreters, whose inline programs are `inline_interpreter` (or `env_dump` when they print
//! the whole environment) and whose downloaded programs are `remote_exec`.

use super::super::Family;
use super::super::command::{Spec, parse_args, program_name};
use super::super::effects::Effects;
use super::super::inline::Language;
use super::super::normalize::{Arg, Input, Output, Taint, stream_input};
use super::super::programs::{self, LangSpec, Role, has_role};
use super::destruction::FindParts;
use super::env_dump::code_dumps_env;
use super::exfiltration::{code_runs_download, code_sends_data};
use super::target::plain_path;

fn is_shell(name: &str) -> bool {
    has_role(name, Role::Shell)
}

/// How an interpreter reads its command line: its entry in the program table.
fn lang(name: &str) -> Option<&'static LangSpec> {
    programs::program(name)
        .filter(|p| p.roles.contains(&Role::Interpreter))
        .and_then(|p| p.interpreter.as_ref())
}

enum Program<'a> {
    Inline(Arg),
    Module,
    Script(&'a Arg),
    Stdin,
    Info,
}

fn scan<'a>(l: &LangSpec, args: &'a [Arg]) -> Program<'a> {
    let mut i = 0;
    let mut info = false;
    while i < args.len() {
        let t = args[i].text.as_str();
        if t.starts_with('-') && l.words.iter().any(|w| w.eq_ignore_ascii_case(t)) {
            return Program::Inline(args.get(i + 1).cloned().unwrap_or_default());
        }
        if t == "--" {
            return args.get(i + 1).map_or(Program::Stdin, Program::Script);
        }
        if t == "-" {
            return Program::Stdin;
        }
        if let Some(long) = t.strip_prefix("--") {
            let (name, value) = long
                .split_once('=')
                .map_or((long, None), |(n, v)| (n, Some(v)));
            if l.long_inline.iter().any(|n| n == name) {
                return Program::Inline(match value {
                    Some(v) => Arg::literal(v),
                    None => args.get(i + 1).cloned().unwrap_or_default(),
                });
            }
            if matches!(name, "version" | "help") {
                info = true;
            }
            if value.is_none() && l.long_values.iter().any(|n| n == name) {
                i += 1;
            }
            i += 1;
            continue;
        }
        if let Some(cluster) = t.strip_prefix('-') {
            match short_cluster(l, args, i, cluster) {
                Ok(program) => return program,
                Err((skip, asks_info)) => {
                    info |= asks_info;
                    i += skip;
                }
            }
            continue;
        }
        return Program::Script(&args[i]);
    }
    if info { Program::Info } else { Program::Stdin }
}

/// A cluster of short options (`-Bc`, `-W ignore`, `-0777`): the program it gives, or how
/// many words it took and whether it asks for information (`-V`, `-h`).
fn short_cluster<'a>(
    l: &LangSpec,
    args: &'a [Arg],
    i: usize,
    cluster: &str,
) -> Result<Program<'a>, (usize, bool)> {
    let chars: Vec<char> = cluster.chars().collect();
    let mut info = false;
    let mut j = 0;
    let mut skip_next = false;
    while j < chars.len() {
        let c = chars[j];
        let rest: String = chars[j + 1..].iter().collect();
        if l.inline.contains(c) {
            let only_flags = rest.chars().all(|r| l.inline.contains(r));
            let code = if !rest.is_empty() && !only_flags {
                Arg {
                    text: rest,
                    ..args[i].clone()
                }
            } else {
                args.get(i + 1).cloned().unwrap_or_default()
            };
            return Ok(Program::Inline(code));
        }
        if l.module.contains(c) {
            let module = if rest.is_empty() {
                args.get(i + 1).map(|a| a.text.clone()).unwrap_or_default()
            } else {
                rest
            };
            if l.repl_modules.contains(&module) {
                return Ok(Program::Inline(Arg::literal(format!("-m {module}"))));
            }
            return Ok(Program::Module);
        }
        if l.values.contains(c) {
            skip_next = rest.is_empty();
            break;
        }
        if l.attached.contains(c) {
            if matches!(c, 'l' | '0' | 'C' | 'W' | 'T') {
                // Optional digits, then more flags.
                j += 1;
                while j < chars.len()
                    && chars[j].is_ascii_hexdigit()
                    && !l.inline.contains(chars[j])
                {
                    j += 1;
                }
                continue;
            }
            break;
        }
        if matches!(c, 'V' | 'v' | 'h') {
            info = true;
        }
        j += 1;
    }
    Err((if skip_next { 2 } else { 1 }, info))
}

/// Handle a command that runs other code. `Some(output)` when the command was fully handled.
pub(super) fn check(
    w: &mut dyn Effects,
    name: &str,
    argv: &[Arg],
    stdin: &Input,
    shown: &str,
) -> Option<Output> {
    let args = &argv[1..];
    if is_shell(name) {
        let mut out = shell(w, args, stdin, shown);
        out.taint.shell = true;
        return Some(out);
    }
    if let Some(l) = lang(name) {
        if name.starts_with("deno") {
            return Some(deno(w, args, stdin, shown));
        }
        return Some(interpreter(w, l, args, stdin, shown));
    }
    match name {
        "eval" => {
            let code = join(args);
            Some(w.run_code(&code, stdin, shown))
        }
        "source" | "." => {
            let p = parse_args(args, &Spec::posix("", &[]));
            match p.operands.first() {
                Some(file) => Some(run_file(w, file, stdin, shown, true)),
                None => Some(Output::unknown()),
            }
        }
        "trap" => {
            // `trap [--] CODE SIGNAL…`; `trap -p`/`-l` only print.
            let args = match args.first() {
                Some(a) if a.text == "--" => &args[1..],
                _ => args,
            };
            if args.len() >= 2 && !args[0].text.starts_with('-') {
                w.run_code(&args[0], &Input::Inherited, shown);
            }
            Some(Output::text(String::new()))
        }
        "alias" => run_alias(w, args, shown),
        "su" | "sg" | "runuser" | "newgrp" | "script" | "flock" => {
            run_su(w, name, args, stdin, shown)
        }
        // `machinectl shell|login [USER@]MACHINE` opens a shell as another user.
        "machinectl" => run_machinectl(w, args, shown),
        // `npx -c 'cmd'` runs a shell command line.
        "npx" | "pnpx" | "bunx" => run_npx(w, args, stdin, shown),
        "watch" => run_watch(w, args, shown),
        "xargs" => Some(xargs(w, args, stdin)),
        "jq" | "gojq" | "jaq" => run_jq(w, args, shown),
        "awk" | "gawk" | "mawk" | "nawk" => run_awk(w, args, shown),
        "find" => {
            find(w, args);
            None
        }
        "parallel" => Some(parallel(w, args, stdin, shown)),
        _ => None,
    }
}

/// What `alias` runs or reveals.
fn run_alias(w: &mut dyn Effects, args: &[Arg], shown: &str) -> Option<Output> {
    for a in args {
        if let Some((name, value)) = a.text.split_once('=') {
            let words = (!a.dynamic).then(|| value.split_whitespace().map(str::to_owned).collect());
            w.alias(name, words);
            let code = Arg {
                text: value.to_owned(),
                ..a.clone()
            };
            w.run_code(&code, &Input::Inherited, shown);
        }
    }
    Some(Output::text(String::new()))
}

/// What `su sg runuser newgrp` runs or reveals.
fn run_su(
    w: &mut dyn Effects,
    name: &str,
    args: &[Arg],
    stdin: &Input,
    shown: &str,
) -> Option<Output> {
    let inspect = args
        .iter()
        .all(|a| matches!(a.text.as_str(), "--help" | "--version" | "-h" | "-V"));
    let switches_user = matches!(name, "su" | "sg" | "runuser" | "newgrp");
    if switches_user && (args.is_empty() || !inspect) {
        w.deny(
            Family::Privilege,
            format!("`{shown}` runs commands as another user or group."),
        );
    }
    let values = if name == "script" {
        "cEIOBT"
    } else {
        "cswgGEOqtu"
    };
    let p = parse_args(
        args,
        &Spec::gnu(
            values,
            &[
                "command",
                "shell",
                "group",
                "supp-group",
                "whitelist-environment",
                "user",
            ],
        ),
    );
    let codes: Vec<String> = p
        .values(Some('c'), &["command"])
        .map(str::to_owned)
        .collect();
    let dynamic = args.iter().any(|a| a.dynamic);
    let taint = taint_of(args);
    for c in codes {
        let code = Arg {
            text: c,
            dynamic,
            taint,
            proc_sub: None,
        };
        w.run_code(&code, stdin, shown);
    }
    // `runuser -u USER cmd …` runs its operands as a command line.
    if name == "runuser" && p.has('u', "user") && !p.operands.is_empty() {
        let argv: Vec<Arg> = p.operands.iter().map(|a| (*a).clone()).collect();
        w.run_argv(argv, stdin);
    }
    if name == "sg" && !p.has('c', "command") && p.operands.len() >= 2 {
        let code = join(
            &p.operands[1..]
                .iter()
                .map(|a| (*a).clone())
                .collect::<Vec<_>>(),
        );
        w.run_code(&code, stdin, shown);
    }
    Some(Output::unknown())
}

/// What `machinectl` runs or reveals.
fn run_machinectl(w: &mut dyn Effects, args: &[Arg], shown: &str) -> Option<Output> {
    let p = parse_args(args, &Spec::gnu("M", &["machine", "uid"]));
    if p.operands
        .first()
        .is_some_and(|a| matches!(a.text.as_str(), "shell" | "login"))
    {
        w.deny(
            Family::Privilege,
            format!("`{shown}` opens a shell as another user."),
        );
    }
    None
}

/// What `npx pnpx bunx` runs or reveals.
fn run_npx(w: &mut dyn Effects, args: &[Arg], stdin: &Input, shown: &str) -> Option<Output> {
    let p = parse_args(args, &Spec::posix("pc", &["package", "call"]));
    let codes: Vec<Arg> = p
        .values(Some('c'), &["call"])
        .map(|c| Arg {
            text: c.to_owned(),
            dynamic: args.iter().any(|a| a.dynamic),
            taint: taint_of(args),
            proc_sub: None,
        })
        .collect();
    for code in &codes {
        w.run_code(code, stdin, shown);
    }
    None
}

/// What `watch` runs or reveals.
fn run_watch(w: &mut dyn Effects, args: &[Arg], shown: &str) -> Option<Output> {
    let p = parse_args(args, &Spec::posix("nq", &["interval"]));
    let rest = &args[p.rest.min(args.len())..];
    if rest.is_empty() {
        return Some(Output::unknown());
    }
    if p.has('x', "exec") {
        Some(w.run_argv(rest.to_vec(), &Input::Inherited))
    } else {
        Some(w.run_code(&join(rest), &Input::Inherited, shown))
    }
}

/// What `jq gojq jaq` runs or reveals.
fn run_jq(w: &mut dyn Effects, args: &[Arg], shown: &str) -> Option<Output> {
    // `jq -n env`, `jq -n '$ENV'`: the whole environment as JSON.
    let p = parse_args(
        args,
        &Spec::gnu(
            "fL",
            &[
                "from-file",
                "arg",
                "argjson",
                "slurpfile",
                "rawfile",
                "indent",
            ],
        ),
    );
    if p.operands.first().is_some_and(|f| jq_dumps_env(&f.text)) {
        w.deny(
            Family::EnvDump,
            format!("`{shown}` prints the whole environment, secrets included."),
        );
    }
    None
}

/// What `awk gawk mawk nawk` runs or reveals.
fn run_awk(w: &mut dyn Effects, args: &[Arg], shown: &str) -> Option<Output> {
    if args.iter().any(|a| a.text.contains("in ENVIRON")) {
        w.deny(
            Family::EnvDump,
            format!("`{shown}` prints the whole environment, secrets included."),
        );
    }
    let runs_shell = args.iter().any(|a| {
        a.text.contains("system(")
            || a.text.contains("| getline")
            || a.text.contains("|&")
            || a.text.contains("| \"")
            || a.text.contains("|\"")
    });
    if runs_shell {
        w.deny(
            Family::InlineInterpreter,
            format!("`{shown}` runs shell commands from an inline awk program."),
        );
    }
    None
}

fn taint_of(args: &[Arg]) -> Taint {
    let mut t = Taint::default();
    for a in args {
        t.merge(a.taint);
    }
    t
}

/// Words joined with spaces, as `eval`, `sh -c "$*"` and a remote shell see them.
pub(super) fn join(args: &[Arg]) -> Arg {
    Arg {
        text: args
            .iter()
            .map(|a| a.text.as_str())
            .collect::<Vec<_>>()
            .join(" "),
        dynamic: args.iter().any(|a| a.dynamic),
        taint: taint_of(args),
        proc_sub: None,
    }
}

fn shell(w: &mut dyn Effects, args: &[Arg], stdin: &Input, shown: &str) -> Output {
    let p = parse_args(args, &Spec::posix("oO", &["rcfile", "init-file"]));
    let has_c = p.has_short('c') || p.has_long("command");
    if has_c {
        // `curl … | bash -c "$(cat)"`: code only known at run time, with a download on stdin.
        if stdin_downloads(stdin) && p.operands.first().is_some_and(|c| c.dynamic) {
            w.deny(
                Family::RemoteExec,
                format!("`{shown}` runs code read from a download on its standard input."),
            );
            return Output::unknown();
        }
        return match p.operands.first() {
            Some(code) if p.operands.len() > 1 => {
                let args: Vec<Arg> = p.operands[2..].iter().map(|a| (*a).clone()).collect();
                w.run_code_with_args(code, stdin, shown, p.operands[1], &args)
            }
            Some(code) => w.run_code(code, stdin, shown),
            None => Output::unknown(),
        };
    }
    match p.operands.first() {
        Some(script) if script.text != "-" && !p.has_short('s') => {
            run_file(w, script, stdin, shown, true)
        }
        _ => run_stdin(w, stdin, shown, true),
    }
}

fn stdin_downloads(stdin: &Input) -> bool {
    matches!(stdin, Input::Stream(o) if o.taint.download)
}

/// A shell or `source` running the file `script`.
pub(super) fn run_file(
    w: &mut dyn Effects,
    script: &Arg,
    stdin: &Input,
    shown: &str,
    is_shell: bool,
) -> Output {
    if let Some(out) = &script.proc_sub {
        let as_input = stream_input(out);
        return run_stdin(w, &as_input, shown, is_shell);
    }
    let relative = !script.text.starts_with(['/', '~', '$']);
    if w.is_downloaded(&plain_path(&script.text)) || (w.extracted_download() && relative) {
        w.deny(
            Family::RemoteExec,
            format!("`{shown}` runs a file that was just downloaded."),
        );
        return Output::unknown();
    }
    if let Some(content) = w.written().get(&plain_path(&script.text)).cloned() {
        // A script the command line itself just wrote.
        if is_shell {
            return w.run_script(&content, stdin);
        }
        if code_dumps_env(&content) {
            w.deny(
                Family::EnvDump,
                format!("`{shown}` prints the whole environment, secrets included."),
            );
        }
        return Output::unknown();
    }
    if matches!(
        script.text.as_str(),
        "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0"
    ) {
        return run_stdin(w, stdin, shown, is_shell);
    }
    if script.dynamic {
        if script.taint.download {
            w.deny(
                Family::RemoteExec,
                format!("`{shown}` runs code downloaded at run time."),
            );
        } else if !is_shell {
            w.deny(
                Family::InlineInterpreter,
                format!("`{shown}` runs a program whose path is only known at run time."),
            );
        }
    }
    Output::unknown()
}

/// A shell (`is_shell`) or interpreter reading its program from standard input.
pub(super) fn run_stdin(w: &mut dyn Effects, stdin: &Input, shown: &str, is_shell: bool) -> Output {
    read_program(w, stdin, shown, is_shell, None)
}

/// A shell (`is_shell`) or an interpreter (of `language`, when the guard parses it) reading its
/// program from standard input.
fn read_program(
    w: &mut dyn Effects,
    stdin: &Input,
    shown: &str,
    is_shell: bool,
    language: Option<Language>,
) -> Output {
    match stdin {
        Input::Inherited => Output::unknown(),
        Input::Static(text) => {
            if is_shell {
                w.run_script(text, &Input::Inherited)
            } else {
                let mut out = Output::unknown();
                out.taint = inline_program(w, &Arg::literal(text.clone()), shown, language);
                out
            }
        }
        Input::File(path) => {
            if is_shell && let Some(content) = w.written().get(&plain_path(path)).cloned() {
                return w.run_script(&content, &Input::Inherited);
            }
            if w.is_downloaded(&plain_path(path)) {
                w.deny(
                    Family::RemoteExec,
                    format!("`{shown}` runs a file that was just downloaded."),
                );
            } else if !is_shell {
                w.deny(
                    Family::InlineInterpreter,
                    format!("`{shown}` feeds the interpreter a program on standard input."),
                );
            }
            Output::unknown()
        }
        Input::Stream(o) => {
            if o.taint.download {
                w.deny(
                    Family::RemoteExec,
                    format!("`{shown}` runs code downloaded from the network."),
                );
            } else if let Some(text) = &o.text {
                if is_shell {
                    return w.run_script(text, &Input::Inherited);
                }
                let mut out = Output::unknown();
                out.taint = inline_program(w, &Arg::literal(text.clone()), shown, language);
                return out;
            } else if !is_shell {
                w.deny(
                    Family::InlineInterpreter,
                    format!("`{shown}` feeds the interpreter a program on standard input."),
                );
            } else if !o.files_only {
                w.deny(
                    Family::DynamicCommand,
                    format!("`{shown}` runs commands produced by another command at run time."),
                );
            }
            Output::unknown()
        }
    }
}

/// A jq filter naming the environment (`env`, `$ENV`) other than to read one entry.
fn jq_dumps_env(filter: &str) -> bool {
    ["$ENV", "env"].iter().any(|name| {
        filter.match_indices(name).any(|(i, m)| {
            let before = filter[..i].chars().next_back();
            let after = filter[i + m.len()..].trim_start().chars().next();
            let word_start =
                !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == '.');
            let word_end = !after.is_some_and(|c| c.is_alphanumeric() || "_.[:".contains(c));
            word_start && word_end
        })
    })
}

/// Inline code that deletes a tree (`shutil.rmtree`, `fs.rmSync(…, {recursive})`,
/// `FileUtils.rm_rf`, `rmtree`) rooted at `/` or the home directory.
fn code_removes_tree(code: &str) -> bool {
    const REMOVE: &[&str] = &[
        "rmtree",
        "rm_rf",
        "rm_r(",
        "rmSync",
        "rmdirSync",
        "fs.rm(",
        "rimraf",
        "remove_dir_all",
        "Deno.remove",
        "unlink_r",
    ];
    const ROOTS: &[&str] = &[
        "\"/\"",
        "'/'",
        "\"~\"",
        "'~'",
        "expanduser",
        "Path.home()",
        "homedir()",
        "Dir.home",
        "ENV[\"HOME\"]",
        "ENV['HOME']",
        "$ENV{HOME}",
        "environ[\"HOME\"]",
        "environ['HOME']",
        "process.env.HOME",
    ];
    REMOVE.iter().any(|r| code.contains(r)) && ROOTS.iter().any(|r| code.contains(r))
}

/// Inline code that forks in a loop (`perl -e 'fork while 1'`, `while True: os.fork()`).
fn code_forks_forever(code: &str) -> bool {
    code.contains("fork")
        && ["while", "loop", "for ", "for(", "until", "repeat"]
            .iter()
            .any(|k| code.contains(k))
}

/// Judge an inline program; what its output carries. Code in a language the guard parses is
/// judged by what it does (`rules::inline`); other code by its text, and denied as
/// `inline_interpreter` when nothing worse is found.
fn inline_program(
    w: &mut dyn Effects,
    code: &Arg,
    shown: &str,
    language: Option<Language>,
) -> Taint {
    if let Some(language) = language
        && !code.dynamic
        && !code.taint.download
    {
        return super::inline::judge(w, language, &code.text, shown);
    }
    if !judge_code_text(w, code, shown) {
        w.deny(
            Family::InlineInterpreter,
            format!("`{shown}` runs a program given inline; put it in a file in the workspace and run that."),
        );
    }
    Taint::default()
}

/// Judge program text in any language by what it does (downloads and runs, deletes the home
/// directory, forks forever, sends data, prints the environment); `true` when it denied.
pub(crate) fn judge_code_text(w: &mut dyn Effects, code: &Arg, shown: &str) -> bool {
    if code.taint.download {
        w.deny(
            Family::RemoteExec,
            format!("`{shown}` runs code downloaded from the network."),
        );
    } else if code_runs_download(&code.text) {
        w.deny(
            Family::RemoteExec,
            format!("`{shown}` runs inline code that fetches code from the network and runs it."),
        );
    } else if code_removes_tree(&code.text) {
        w.deny(
            Family::Destruction,
            format!(
                "`{shown}` runs inline code that recursively deletes the root or home directory."
            ),
        );
    } else if code_forks_forever(&code.text) {
        w.deny(
            Family::Destruction,
            format!("`{shown}` is a fork bomb: it spawns processes in an endless loop."),
        );
    } else if code_sends_data(&code.text) {
        w.deny(
            Family::Exfiltration,
            format!(
                "`{shown}` runs inline code that sends files or the environment over the network."
            ),
        );
    } else if code_dumps_env(&code.text) {
        w.deny(
            Family::EnvDump,
            format!("`{shown}` prints the whole environment, secrets included."),
        );
    } else {
        return false;
    }
    true
}

/// Whether the command line enters the interpreter's prompt (`python -i -c …`, `-ic`).
fn interactive(l: &LangSpec, args: &[Arg]) -> bool {
    args.iter().any(|a| {
        l.interactive.iter().any(|opt| match opt.strip_prefix('-') {
            Some(short) if !short.starts_with('-') && !a.text.starts_with("--") => {
                a.text.strip_prefix('-').is_some_and(|cluster| {
                    cluster
                        .chars()
                        .take_while(|c| !l.inline.contains(*c))
                        .any(|c| short.contains(c))
                })
            }
            _ => a.text == *opt,
        })
    })
}

fn interpreter(
    w: &mut dyn Effects,
    l: &LangSpec,
    args: &[Arg],
    stdin: &Input,
    shown: &str,
) -> Output {
    let program = scan(l, args);
    let language = l
        .language
        .as_deref()
        .and_then(Language::from_name)
        .filter(|_| !interactive(l, args));
    let mut taint = Taint::default();
    // Code that prints the environment hands the secrets to whatever reads its output.
    let dumps_env = matches!(&program, Program::Inline(c) if code_dumps_env(&c.text));
    match program {
        // `curl … | python3 -c 'exec(sys.stdin.read())'`: a download piped into an interpreter.
        Program::Inline(_) if stdin_downloads(stdin) => w.deny(
            Family::RemoteExec,
            format!("`{shown}` feeds a download to an interpreter."),
        ),
        Program::Inline(code) => taint = inline_program(w, &code, shown, language),
        Program::Module | Program::Info => {}
        Program::Script(script) => {
            if script.proc_sub.is_some() {
                let out = script.proc_sub.as_deref().cloned().unwrap_or_default();
                if out.taint.download {
                    w.deny(
                        Family::RemoteExec,
                        format!("`{shown}` runs code downloaded from the network."),
                    );
                } else {
                    let code = Arg {
                        text: out.text.unwrap_or_default(),
                        ..Arg::default()
                    };
                    taint = inline_program(w, &code, shown, language);
                }
            } else {
                run_file(w, script, stdin, shown, false);
            }
        }
        Program::Stdin => {
            taint = read_program(w, stdin, shown, false, language).taint;
        }
    }
    let mut out = Output::unknown();
    out.taint = taint;
    out.taint.secret |= dumps_env;
    out
}

/// A package spec that is an address (`https://…/x.tgz`, `git+https://…`, `github:u/r`)
/// rather than a name in a registry.
fn is_address_spec(spec: &str) -> bool {
    spec.contains("://")
        || spec.starts_with("git+")
        || spec.starts_with("github:")
        || spec.starts_with("gitlab:")
        || spec.starts_with("bitbucket:")
}

/// Package runners that fetch and run in one step (`npx`, `npm exec`, `pnpm dlx`, `yarn dlx`,
/// `bunx`, `bun x`, `pipx run`, `uvx`, `uv tool run`) given a package by address: code from
/// wherever that address points runs at once. Registry names stay allowed (`npx prettier`).
pub(crate) fn runs_package_from_address(name: &str, args: &[Arg]) -> bool {
    let verb = match name {
        "npx" | "bunx" | "uvx" => Some(0),
        "npm" | "pnpm" | "yarn" | "bun" | "pipx" | "uv" => None,
        _ => return false,
    };
    let p = parse_args(args, &Spec::gnu("p", &["package", "spec", "from", "with"]));
    let ops: Vec<&str> = p.operands.iter().map(|a| a.text.as_str()).collect();
    // Where the package operand sits: right after the runner's verb.
    let at = verb.or(match (name, &ops[..]) {
        ("npm", ["exec" | "x", ..])
        | ("pnpm" | "yarn", ["dlx", ..])
        | ("bun", ["x", ..])
        | ("pipx", ["run", ..]) => Some(1),
        ("uv", ["tool", "run", ..]) => Some(2),
        _ => None,
    });
    let Some(at) = at else {
        return false;
    };
    p.values(Some('p'), &["package", "spec", "from", "with"])
        .chain(ops.get(at).copied())
        .any(is_address_spec)
}

fn deno(w: &mut dyn Effects, args: &[Arg], stdin: &Input, shown: &str) -> Output {
    let p = parse_args(args, &Spec::posix("", &[]));
    if p.has('e', "eval") || p.has_short('p') {
        inline_program(w, &Arg::default(), shown, None);
        return Output::unknown();
    }
    match p.operands.first().map(|a| a.text.as_str()) {
        Some("eval") => {
            let code = p.operands.get(1).map(|a| (*a).clone()).unwrap_or_default();
            inline_program(w, &code, shown, None);
        }
        Some("run") if p.operands.get(1).is_some_and(|a| a.text == "-") => {
            run_stdin(w, stdin, shown, false);
        }
        // `deno run https://…/x.ts` fetches a program and runs it.
        Some("run" | "x")
            if p.operands[1..]
                .iter()
                .find(|a| !a.text.starts_with('-'))
                .is_some_and(|a| {
                    a.text.starts_with("http://") || a.text.starts_with("https://")
                }) =>
        {
            w.deny(
                Family::RemoteExec,
                format!("`{shown}` runs a program fetched from the network."),
            );
        }
        _ => {}
    }
    Output::unknown()
}

/// A file name that suggests secrets (`.env`, `credentials`, `id_rsa`, `*.pem`).
fn looks_secret(path: &str) -> bool {
    let base = program_name(path).to_ascii_lowercase();
    base.starts_with(".env")
        || [
            "secret",
            "credential",
            "token",
            "passw",
            "id_rsa",
            "id_ed25519",
            "netrc",
            "key",
        ]
        .iter()
        .any(|s| base.contains(s))
        || base.ends_with(".pem")
}

/// `curl -O`/`--remote-name`, `wget` without a body: the operands are addresses fetched into
/// files.
fn fetches_to_files(program: &str, args: &[Arg]) -> bool {
    let sends = |t: &str| {
        t.starts_with("--data")
            || t.starts_with("--post")
            || t.starts_with("--body")
            || t.starts_with("--upload")
            || t == "-d"
            || t == "-T"
            || t == "-F"
            || t.starts_with("--form")
            || t.starts_with("--json")
    };
    if args.iter().any(|a| sends(&a.text)) {
        return false;
    }
    match program_name(program) {
        "curl" => args.iter().any(|a| {
            a.text.starts_with("--remote-name")
                || (a.text.starts_with('-') && !a.text.starts_with("--") && a.text.contains('O'))
        }),
        "wget" | "wget2" | "aria2c" => true,
        _ => false,
    }
}

/// The options of an `xargs` command line that decide what it runs.
#[derive(Default)]
struct XargsOptions {
    /// The replacement string (`-I {}`, `-i`, `--replace`).
    replace: Option<String>,
    /// The file the items come from (`-a FILE`).
    arg_file: Option<String>,
    /// The input splits on NUL or another single delimiter (`-0`, `-d ,`): one item.
    null: bool,
    /// The input splits into lines (`-d '\n'`).
    lines: bool,
}

impl XargsOptions {
    /// A delimiter option's value (`-d`, `--delimiter`).
    fn delimiter(&mut self, d: Option<&str>) {
        self.lines |= matches!(d, Some("\n" | "\\n"));
        self.null |= !matches!(d, Some("\n" | "\\n" | " "));
    }

    /// A long option with its value (attached or `next`); how many words it took.
    fn long(&mut self, name: &str, value: Option<&str>, next: Option<&Arg>) -> usize {
        let value_or_next = || {
            value
                .map(str::to_owned)
                .or_else(|| next.map(|a| a.text.clone()))
        };
        if name == "replace" {
            self.replace = Some(value.unwrap_or("{}").to_owned());
        }
        self.null |= name == "null";
        if name == "delimiter" {
            self.delimiter(value_or_next().as_deref());
        }
        if name == "arg-file" {
            self.arg_file = value_or_next();
        }
        let takes = matches!(
            name,
            "arg-file" | "delimiter" | "max-args" | "max-procs" | "max-chars" | "process-slot-var"
        );
        if takes && value.is_none() { 2 } else { 1 }
    }

    /// A cluster of short options (`-0r`, `-I{}`, `-n 1`); how many words it took.
    fn short(&mut self, cluster: &str, next: Option<&Arg>) -> usize {
        let chars: Vec<char> = cluster.chars().collect();
        for (j, c) in chars.iter().enumerate() {
            let rest: String = chars[j + 1..].iter().collect();
            let value = || {
                if rest.is_empty() {
                    next.map(|a| a.text.clone())
                } else {
                    Some(rest.clone())
                }
            };
            self.null |= *c == '0';
            if *c == 'd' {
                self.delimiter(value().as_deref());
            }
            if "aEdILnPs".contains(*c) {
                if *c == 'a' {
                    self.arg_file = value();
                }
                if *c == 'I' {
                    self.replace = Some(value().unwrap_or_default());
                }
                return if rest.is_empty() { 2 } else { 1 };
            }
            if "eil".contains(*c) {
                if *c == 'i' {
                    self.replace = Some(if rest.is_empty() {
                        "{}".to_owned()
                    } else {
                        rest
                    });
                }
                break;
            }
        }
        1
    }

    /// Parse xargs' options; where its command starts.
    fn parse(args: &[Arg]) -> (Self, usize) {
        let mut o = XargsOptions::default();
        let mut i = 0;
        while i < args.len() {
            let t = args[i].text.as_str();
            if t == "--" {
                i += 1;
                break;
            }
            if let Some(long) = t.strip_prefix("--") {
                let (name, value) = long
                    .split_once('=')
                    .map_or((long, None), |(n, v)| (n, Some(v)));
                i += o.long(name, value, args.get(i + 1));
            } else if t.len() > 1 && t.starts_with('-') {
                i += o.short(&t[1..], args.get(i + 1));
            } else {
                break;
            }
        }
        (o, i)
    }

    /// How items split: lines with a replacement string or `-d '\n'`.
    fn by_lines(&self) -> bool {
        self.lines || self.replace.is_some()
    }
}

/// The items xargs reads when they are known: static input, a listing (`find / | xargs rm
/// -rf`: judged on what the listing can contain), a file the script itself wrote (`echo / > t;
/// xargs rm -rf < t`).
fn xargs_items(w: &dyn Effects, o: &XargsOptions, stdin: &Input) -> Vec<String> {
    let items: Vec<String> = match stdin {
        Input::Static(t) => split_items(t, o.null, o.by_lines()),
        Input::Stream(Output {
            listed: Some(paths),
            ..
        }) => paths.clone(),
        _ => Vec::new(),
    };
    let source = o.arg_file.clone().or_else(|| match stdin {
        Input::File(p) => Some(p.clone()),
        _ => None,
    });
    match source.and_then(|f| w.written().get(&plain_path(&f)).cloned()) {
        Some(text) if !text.trim().is_empty() => split_items(&text, o.null, o.by_lines()),
        _ => items,
    }
}

/// Items only known at run time carry what their source brought in — a file's contents
/// (`xargs -a .env curl …`), a download (`curl … | xargs bash -c`) — into the command's
/// arguments, unless each item is a whole address to download from (`xargs -n1 curl -O <
/// urls.txt`) and the items come from no secret file or variable.
fn carry_item_taint(
    cmd: Vec<Arg>,
    o: &XargsOptions,
    arg_file: Option<&str>,
    stdin: &Input,
) -> Vec<Arg> {
    let item_taint = if arg_file.is_some() {
        Taint {
            secret: true,
            ..Taint::default()
        }
    } else {
        stdin.taint()
    };
    let secret_source = arg_file
        .or(match stdin {
            Input::File(p) => Some(p.as_str()),
            _ => None,
        })
        .is_some_and(looks_secret);
    let downloads_items = o.replace.is_none()
        && !secret_source
        && !stdin.taint().env_secret
        && cmd
            .first()
            .is_some_and(|c| fetches_to_files(&c.text, &cmd[1..]));
    if downloads_items || !(item_taint.secret || item_taint.download) {
        return cmd;
    }
    let mut cmd: Vec<Arg> = cmd
        .into_iter()
        .map(|mut a| {
            if o.replace
                .as_ref()
                .is_some_and(|r| a.text.contains(r.as_str()))
            {
                a.taint.merge(item_taint);
            }
            a
        })
        .collect();
    if o.replace.is_none() {
        cmd.push(Arg {
            text: "{xargs-items}".to_owned(),
            taint: item_taint,
            ..Arg::default()
        });
    }
    cmd
}

fn xargs(w: &mut dyn Effects, args: &[Arg], stdin: &Input) -> Output {
    let (o, at) = XargsOptions::parse(args);
    let mut cmd: Vec<Arg> = args.get(at..).map(<[Arg]>::to_vec).unwrap_or_default();
    if cmd.is_empty() {
        cmd.push(Arg::literal("echo"));
    }
    let items = xargs_items(w, &o, stdin);
    let arg_file = o.arg_file.clone().filter(|f| f != "/dev/null");
    let runtime_items = arg_file.is_some() || matches!(stdin, Input::Stream(_) | Input::File(_));
    if items.is_empty() && runtime_items {
        cmd = carry_item_taint(cmd, &o, arg_file.as_deref(), stdin);
    }
    let out = match &o.replace {
        Some(r) if !items.is_empty() => {
            let mut out = Output::unknown();
            for item in items {
                let line: Vec<Arg> = cmd
                    .iter()
                    .map(|a| Arg {
                        text: a.text.replace(r.as_str(), &item),
                        ..a.clone()
                    })
                    .collect();
                out = w.run_argv(line, &Input::Inherited);
            }
            out
        }
        _ => {
            cmd.extend(items.into_iter().map(Arg::literal));
            w.run_argv(cmd, &Input::Inherited)
        }
    };
    if runtime_items {
        let mut taint = stdin.taint();
        taint.merge(out.taint);
        Output {
            taint,
            text: None,
            files_only: false,
            listed: None,
        }
    } else {
        out
    }
}

/// xargs items of a known input: the whole input with `-0`, lines with `-I`, else words.
fn split_items(text: &str, null: bool, lines: bool) -> Vec<String> {
    let items: Vec<String> = if null {
        text.split('\0')
            .map(|s| s.trim_end_matches('\n').to_owned())
            .collect()
    } else if lines {
        text.lines().map(|l| l.trim().to_owned()).collect()
    } else {
        text.split_whitespace().map(str::to_owned).collect()
    };
    items
        .into_iter()
        .filter(|s| !s.is_empty())
        .take(16)
        .collect()
}

fn find(w: &mut dyn Effects, args: &[Arg]) {
    let parts = FindParts::parse(args);
    for exec in &parts.execs {
        if exec.is_empty() {
            continue;
        }
        for root in parts.roots.iter().take(4) {
            let base = root.text.trim_end_matches('/');
            // `{}` is the root itself without tests; with `-name X` it is `root/…/X`, judged
            // as `root/X` (`find . -name .git -exec rm -rf {} +` removes `./.git`).
            let found: Vec<String> = if !parts.has_filter {
                vec![root.text.clone()]
            } else if parts.names.is_empty() {
                vec![format!("{base}/{{}}")]
            } else {
                parts
                    .names
                    .iter()
                    .take(4)
                    .map(|n| format!("{base}/{n}"))
                    .collect()
            };
            for f in &found {
                let line: Vec<Arg> = exec
                    .iter()
                    .map(|a| Arg {
                        text: a.text.replace("{}", f),
                        ..a.clone()
                    })
                    .collect();
                w.run_argv(line, &Input::Inherited);
            }
        }
    }
}

fn parallel(w: &mut dyn Effects, args: &[Arg], stdin: &Input, shown: &str) -> Output {
    let p = parse_args(
        args,
        &Spec::posix(
            "jNnSaPIdEL",
            &[
                "jobs",
                "arg-file",
                "delimiter",
                "sshlogin",
                "joblog",
                "results",
                "tmpdir",
                "workdir",
                "timeout",
                "halt",
                "retries",
                "memfree",
                "load",
                "colsep",
            ],
        ),
    );
    let rest = &args[p.rest.min(args.len())..];
    let sep = rest.iter().position(|a| a.text.starts_with(":::"));
    let (cmd, values): (&[Arg], Vec<Arg>) = match sep {
        Some(k) => (
            &rest[..k],
            rest[k + 1..]
                .iter()
                .filter(|a| !a.text.starts_with(":::"))
                .cloned()
                .collect(),
        ),
        None => (
            rest,
            match stdin {
                Input::Static(t) => t.lines().map(Arg::literal).take(16).collect(),
                _ => Vec::new(),
            },
        ),
    };
    if cmd.is_empty() {
        for v in values.iter().take(16) {
            w.run_code(v, &Input::Inherited, shown);
        }
        if values.is_empty() && !matches!(stdin, Input::Inherited | Input::Static(_)) {
            w.deny(
                Family::DynamicCommand,
                format!("`{shown}` runs commands read at run time."),
            );
        }
        return Output::unknown();
    }
    let joined_cmd = join(cmd);
    if values.is_empty() {
        return w.run_code(&joined_cmd, &Input::Inherited, shown);
    }
    for v in values.iter().take(16) {
        let has_placeholder = cmd.iter().any(|a| a.text.contains("{}"));
        let code = if has_placeholder {
            Arg {
                text: joined_cmd.text.replace("{}", &v.text),
                ..joined_cmd.clone()
            }
        } else {
            Arg {
                text: format!("{} {}", joined_cmd.text, v.text),
                ..joined_cmd.clone()
            }
        };
        w.run_code(&code, &Input::Inherited, shown);
    }
    Output::unknown()
}

/// Remember the files a download writes, so running them later is `remote_exec`.
pub(super) fn note_download_files(w: &mut dyn Effects, name: &str, args: &[Arg]) {
    for file in download_files(name, args) {
        w.downloaded_mut().insert(file);
    }
}

/// How `wget` and `curl`-like downloaders take their options.
fn downloader_spec(name: &str) -> Spec {
    if name == "wget" {
        Spec::gnu(
            "oOPdaeiTtwUYB",
            &[
                "output-document",
                "directory-prefix",
                "output-file",
                "header",
                "user-agent",
            ],
        )
    } else {
        Spec::gnu(
            "AbcCdDeEFHKmoPQrtTuUwxXYyz",
            &[
                "output",
                "data",
                "header",
                "request",
                "user",
                "user-agent",
                "url",
                "config",
                "cookie",
            ],
        )
    }
}

/// The files a download command writes (`curl -o f`, `curl -O URL`, `wget URL`, `wget -P d`).
fn download_files(name: &str, args: &[Arg]) -> Vec<String> {
    let p = parse_args(args, &downloader_spec(name));
    let urls: Vec<&str> = p
        .operands
        .iter()
        .map(|a| a.text.as_str())
        .filter(|t| t.contains('/') || t.contains('.'))
        .collect();
    let basename = |u: &str| program_name(u.split(['?', '#']).next().unwrap_or(u)).to_owned();
    let mut files = Vec::new();
    match name {
        "curl" => {
            files.extend(p.values(Some('o'), &["output"]).map(plain_path));
            if p.has('O', "remote-name") || p.has_long("remote-name-all") {
                files.extend(urls.iter().map(|u| basename(u)));
            }
        }
        "wget" => {
            let outs: Vec<String> = p
                .opts
                .iter()
                .filter(|o| o.short == Some('O') || o.long.as_deref() == Some("output-document"))
                .filter_map(|o| o.value.clone())
                .collect();
            if outs.is_empty() {
                // `-P DIR` puts the file under DIR.
                let dir: Option<String> = p
                    .values(Some('P'), &["directory-prefix"])
                    .last()
                    .map(|d| d.trim_end_matches('/').to_owned());
                for u in &urls {
                    let file = basename(u);
                    files.push(match &dir {
                        Some(d) => plain_path(&format!("{d}/{file}")),
                        None => file,
                    });
                }
            }
            files.extend(outs.iter().filter(|o| *o != "-").map(|o| plain_path(o)));
        }
        _ => files.extend(p.values(Some('o'), &["output"]).map(plain_path)),
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(ws: &[&str]) -> Vec<Arg> {
        ws.iter().map(|w| Arg::literal(*w)).collect()
    }

    #[test]
    fn jq_filters_that_print_the_environment() {
        for dump in ["env", "$ENV", "env | keys", "[env]"] {
            assert!(jq_dumps_env(dump), "{dump}");
        }
        for one in [
            ".env",
            "env.HOME",
            "$ENV.PATH",
            "{env: .e}",
            ".[$env]",
            "environment",
        ] {
            assert!(!jq_dumps_env(one), "{one}");
        }
    }

    #[test]
    fn interpreter_command_lines() {
        let py = lang("python3").unwrap_or_else(|| panic!("python3 is an interpreter"));
        assert!(matches!(
            scan(py, &words(&["-c", "print(1)"])),
            Program::Inline(_)
        ));
        assert!(matches!(
            scan(py, &words(&["-Bc", "print(1)"])),
            Program::Inline(_)
        ));
        assert!(matches!(
            scan(py, &words(&["-m", "pip", "install"])),
            Program::Module
        ));
        assert!(matches!(
            scan(py, &words(&["tools/gen.py", "-c"])),
            Program::Script(_)
        ));
        assert!(matches!(scan(py, &words(&["--version"])), Program::Info));
        let perl = lang("perl").unwrap_or_else(|| panic!("perl is an interpreter"));
        assert!(matches!(
            scan(perl, &words(&["-ne", "print", "f"])),
            Program::Inline(_)
        ));
        assert!(matches!(
            scan(perl, &words(&["-lne", "print"])),
            Program::Inline(_)
        ));
        let ruby = lang("ruby").unwrap_or_else(|| panic!("ruby is an interpreter"));
        assert!(matches!(
            scan(ruby, &words(&["-rjson", "-e", "p 1"])),
            Program::Inline(_)
        ));
        assert!(matches!(
            scan(ruby, &words(&["-rjson", "x.rb"])),
            Program::Script(_)
        ));
        let node = lang("node").unwrap_or_else(|| panic!("node is an interpreter"));
        assert!(matches!(
            scan(node, &words(&["-pe", "1"])),
            Program::Inline(_)
        ));
        assert!(matches!(
            scan(node, &words(&["--test", "test/"])),
            Program::Script(_)
        ));
    }
}
