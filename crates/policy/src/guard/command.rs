//! Command lines as the programs read them: options (clusters, attached and detached values,
//! `--long=value`, `--`) and operands; and the wrappers (`env`, `sudo`, `timeout`, …) that run
//! another command given after their own options.

use super::normalize::Arg;
use super::programs::{self, Role, WrapperSpec, has_role};

/// How a program reads its options.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spec {
    /// Short options that take a value (attached `-ofile` or the next word).
    pub(crate) short_val: &'static str,
    /// Long options (without `--`) that take the next word as value when not given `=value`.
    pub(crate) long_val: &'static [&'static str],
    /// GNU style: options may follow operands. Otherwise the first operand ends the options.
    pub(crate) permute: bool,
}

impl Spec {
    pub(crate) const fn gnu(short_val: &'static str, long_val: &'static [&'static str]) -> Spec {
        Spec {
            short_val,
            long_val,
            permute: true,
        }
    }
    pub(crate) const fn posix(short_val: &'static str, long_val: &'static [&'static str]) -> Spec {
        Spec {
            short_val,
            long_val,
            permute: false,
        }
    }
}

/// One option as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Opt {
    pub(crate) short: Option<char>,
    pub(crate) long: Option<String>,
    pub(crate) value: Option<String>,
}

/// A command line split into options and operands.
#[derive(Debug, Clone)]
pub(crate) struct Parsed<'a> {
    pub(crate) opts: Vec<Opt>,
    pub(crate) operands: Vec<&'a Arg>,
    /// Index (in the parsed slice) of the first operand; with a non-permuting spec everything
    /// from here on is an operand.
    pub(crate) rest: usize,
}

impl Parsed<'_> {
    pub(crate) fn has_short(&self, c: char) -> bool {
        self.opts.iter().any(|o| o.short == Some(c))
    }
    pub(crate) fn has_long(&self, name: &str) -> bool {
        self.opts
            .iter()
            .any(|o| o.long.as_deref().is_some_and(|l| long_matches(l, name)))
    }
    pub(crate) fn has(&self, c: char, long: &str) -> bool {
        self.has_short(c) || self.has_long(long)
    }
    /// Every value given to the option, short or long.
    pub(crate) fn values<'s>(
        &'s self,
        c: Option<char>,
        longs: &'s [&'s str],
    ) -> impl Iterator<Item = &'s str> + 's {
        self.opts
            .iter()
            .filter(move |o| {
                (c.is_some() && o.short == c)
                    || o.long
                        .as_deref()
                        .is_some_and(|l| longs.iter().any(|name| long_matches(l, name)))
            })
            .filter_map(|o| o.value.as_deref())
    }
}

/// getopt_long (and curl) accept any unambiguous prefix of a long option: `rm --rec --for`,
/// `curl --upload`. A given option of three letters or more matches the names it begins.
fn long_matches(given: &str, name: &str) -> bool {
    given == name || (given.len() >= 3 && name.starts_with(given))
}

/// Whether `--name` takes the next word as its value: named in the spec, or a prefix of
/// exactly one such option (`--upload` for `--upload-file`).
fn takes_value(spec: &Spec, name: &str) -> bool {
    spec.long_val.contains(&name)
        || (name.len() >= 4 && spec.long_val.iter().filter(|l| l.starts_with(name)).count() == 1)
}

/// Split `args` (the words after the command name) per `spec`.
pub(crate) fn parse_args<'a>(args: &'a [Arg], spec: &Spec) -> Parsed<'a> {
    let mut opts = Vec::new();
    let mut operands = Vec::new();
    let mut rest = args.len();
    let mut i = 0;
    while i < args.len() {
        let text = args[i].text.as_str();
        if text == "--" {
            if rest == args.len() {
                rest = i + 1;
            }
            operands.extend(args[i + 1..].iter());
            break;
        }
        if let Some(long) = text.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_owned())),
                None => (long, None),
            };
            let value = if value.is_none() && takes_value(spec, name) {
                i += 1;
                args.get(i).map(|a| a.text.clone())
            } else {
                value
            };
            opts.push(Opt {
                short: None,
                long: Some(name.to_owned()),
                value,
            });
            i += 1;
            continue;
        }
        if text.len() > 1 && text.starts_with('-') {
            let cluster: Vec<char> = text[1..].chars().collect();
            let mut j = 0;
            while j < cluster.len() {
                let c = cluster[j];
                if spec.short_val.contains(c) {
                    let attached: String = cluster[j + 1..].iter().collect();
                    let value = if attached.is_empty() {
                        i += 1;
                        args.get(i).map(|a| a.text.clone())
                    } else {
                        Some(attached)
                    };
                    opts.push(Opt {
                        short: Some(c),
                        long: None,
                        value,
                    });
                    break;
                }
                opts.push(Opt {
                    short: Some(c),
                    long: None,
                    value: None,
                });
                j += 1;
            }
            i += 1;
            continue;
        }
        if !spec.permute {
            rest = i;
            operands.extend(args[i..].iter());
            break;
        }
        if rest == args.len() {
            rest = i;
        }
        operands.push(&args[i]);
        i += 1;
    }
    Parsed {
        opts,
        operands,
        rest,
    }
}

/// What a wrapper does with the words after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Wrap {
    /// Not a wrapper.
    No,
    /// Runs the command starting at this index of its arguments, after `prepend`.
    Run { start: usize, prepend: Vec<Arg> },
    /// Given no command.
    NoCommand,
    /// Names a command without running it (`command -v rm`).
    Inspect,
    /// Runs these shell command lines (`nix-shell --run CMD`, `gdb -ex 'shell CMD'`).
    Code(Vec<Arg>),
}

/// Commands that change the root directory or enter namespaces, where the command they run
/// holds rights the agent does not: what each does, for the denial.
pub(crate) fn changes_root(name: &str) -> Option<&'static str> {
    match name {
        "chroot" => Some("runs a command under another root directory, which needs root"),
        "nsenter" => Some("runs a command inside another process's namespaces"),
        "unshare" => Some("runs a command in new namespaces, as root inside them"),
        _ => None,
    }
}

/// Commands that raise privileges.
pub(crate) fn is_privilege(name: &str) -> bool {
    has_role(name, Role::Privilege)
}

fn run_at(parsed: &Parsed<'_>, args_len: usize) -> Wrap {
    if parsed.rest < args_len {
        Wrap::Run {
            start: parsed.rest,
            prepend: Vec::new(),
        }
    } else {
        Wrap::NoCommand
    }
}

/// Unwrap one wrapper level: `name` with its arguments `args`.
pub(crate) fn strip_wrapper(name: &str, args: &[Arg]) -> Wrap {
    let asks_info = |a: &Arg| matches!(a.text.as_str(), "--help" | "--version" | "-h" | "-V");
    if changes_root(name).is_some() && args.first().is_some_and(asks_info) {
        return Wrap::Inspect;
    }
    match name {
        "env" => unwrap_env(args),
        "sudo" | "sudoedit" => unwrap_sudo(args),
        "chroot" | "nsenter" | "unshare" => unwrap_root_changer(name, args),
        // `npx node -e …`: the package's program runs with the remaining words.
        "npx" | "pnpx" | "bunx" => {
            let parsed = parse_args(args, &Spec::posix("pc", &["package", "call"]));
            if parsed.has('c', "call") {
                Wrap::No
            } else {
                run_at(&parsed, args.len())
            }
        }
        "command" => {
            let parsed = parse_args(args, &Spec::posix("", &[]));
            if parsed.has_short('v') || parsed.has_short('V') {
                Wrap::Inspect
            } else {
                run_at(&parsed, args.len())
            }
        }
        "timeout" | "ionice" | "chrt" | "taskset" => unwrap_scheduler(name, args),
        "flock" => unwrap_flock(args),
        // Project runners: `uv run python -c …`, `poetry run …` run their operands.
        "uv" | "poetry" | "pipenv" | "pdm" | "rye" | "hatch" | "pixi" | "conda" | "mamba"
        | "micromamba" | "bundle" | "pnpm" | "yarn" | "npm" => unwrap_project_runner(name, args),
        "busybox" | "toybox" => {
            if args.is_empty() || args[0].text.starts_with('-') {
                Wrap::Inspect
            } else {
                Wrap::Run {
                    start: 0,
                    prepend: Vec::new(),
                }
            }
        }
        _ => match alias_of(name) {
            Some(prepend) => Wrap::Run {
                start: 0,
                prepend: prepend.iter().map(|w| Arg::literal(*w)).collect(),
            },
            None => match programs::program(name).and_then(|p| p.wrapper.as_ref()) {
                Some(spec) => unwrap_by_spec(spec, args),
                None => Wrap::No,
            },
        },
    }
}

/// How `chroot`, `nsenter` and `unshare` carry a command.
fn unwrap_root_changer(name: &str, args: &[Arg]) -> Wrap {
    match name {
        // `chroot [--userspec=U:G] NEWROOT [cmd …]`
        "chroot" => {
            let parsed = parse_args(args, &Spec::posix("", &["userspec", "groups"]));
            after_first_operand(parsed.rest, args.len())
        }
        "nsenter" => run_at(
            &parse_args(
                args,
                &Spec::posix("tSGe", &["target", "setuid", "setgid", "env"]),
            ),
            args.len(),
        ),
        "unshare" => run_at(
            &parse_args(
                args,
                &Spec::posix(
                    "SGRwl",
                    &[
                        "setuid",
                        "setgid",
                        "root",
                        "wd",
                        "propagation",
                        "setgroups",
                        "map-user",
                        "map-group",
                        "map-users",
                        "map-groups",
                    ],
                ),
            ),
            args.len(),
        ),
        _ => Wrap::No,
    }
}

/// How the schedulers `timeout`, `ionice`, `chrt` and `taskset` carry a command; given a
/// process id instead, they act on that process.
fn unwrap_scheduler(name: &str, args: &[Arg]) -> Wrap {
    match name {
        "timeout" => {
            let parsed = parse_args(args, &Spec::posix("sk", &["signal", "kill-after"]));
            // The first operand is the duration.
            after_first_operand(parsed.rest, args.len())
        }
        "ionice" => {
            let parsed = parse_args(
                args,
                &Spec::posix("cnp", &["class", "classdata", "pid", "pgid", "uid"]),
            );
            if parsed.has('p', "pid") || parsed.has_short('P') || parsed.has_short('u') {
                Wrap::Inspect
            } else {
                run_at(&parsed, args.len())
            }
        }
        "chrt" => {
            let parsed = parse_args(
                args,
                &Spec::posix("T", &["sched-runtime", "sched-period", "sched-deadline"]),
            );
            if parsed.has('p', "pid") {
                return Wrap::Inspect;
            }
            // The first operand is the priority.
            after_first_operand(parsed.rest, args.len())
        }
        "taskset" => {
            let parsed = parse_args(args, &Spec::posix("", &[]));
            if parsed.has('p', "pid") {
                return Wrap::Inspect;
            }
            // `taskset MASK cmd` or `taskset -c LIST cmd`: the first operand is the mask.
            after_first_operand(parsed.rest, args.len())
        }
        _ => Wrap::No,
    }
}

/// How `env` carries a command.
fn unwrap_env(args: &[Arg]) -> Wrap {
    let spec = Spec::posix("uCSP", &["unset", "chdir", "split-string"]);
    let parsed = parse_args(args, &spec);
    // Assignments after the options belong to env, not to the command.
    let mut start = parsed.rest;
    while start < args.len() && is_assignment(&args[start].text) {
        start += 1;
    }
    let prepend: Vec<Arg> = parsed
        .values(Some('S'), &["split-string"])
        .flat_map(|s| s.split_whitespace().map(Arg::literal).collect::<Vec<_>>())
        .collect();
    if parsed.has_long("help") || parsed.has_long("version") {
        Wrap::Inspect
    } else if start < args.len() || !prepend.is_empty() {
        Wrap::Run { start, prepend }
    } else {
        Wrap::NoCommand
    }
}

/// How `sudo sudoedit` carries a command.
fn unwrap_sudo(args: &[Arg]) -> Wrap {
    let spec = Spec::posix(
        "ugpCDhrtTURc",
        &[
            "user",
            "group",
            "prompt",
            "close-from",
            "chdir",
            "host",
            "role",
            "type",
            "command-timeout",
            "other-user",
            "chroot",
        ],
    );
    let parsed = parse_args(args, &spec);
    if parsed.has('V', "version") || parsed.has('h', "help") && parsed.rest >= args.len() {
        return Wrap::Inspect;
    }
    let mut start = parsed.rest;
    while start < args.len() && is_assignment(&args[start].text) {
        start += 1;
    }
    if start < args.len() {
        Wrap::Run {
            start,
            prepend: Vec::new(),
        }
    } else {
        Wrap::NoCommand
    }
}

/// How `flock` carries a command.
fn unwrap_flock(args: &[Arg]) -> Wrap {
    let parsed = parse_args(
        args,
        &Spec::posix("wEc", &["timeout", "conflict-exit-code", "command"]),
    );
    if parsed.has('c', "command") {
        return Wrap::No;
    }
    // `flock LOCKFILE -c CMD`: options may follow the lock file.
    if let Some(next) = args.get(parsed.rest + 1)
        && matches!(next.text.as_str(), "-c" | "--command")
    {
        return Wrap::Code(args.get(parsed.rest + 2).cloned().into_iter().collect());
    }
    // `flock LOCKFILE cmd …`
    after_first_operand(parsed.rest, args.len())
}

/// How the project runners (`uv run`, `poetry run`, `npm exec`, …) carry a command.
fn unwrap_project_runner(name: &str, args: &[Arg]) -> Wrap {
    let top = parse_args(args, &Spec::posix("", &[]));
    let Some(sub) = args.get(top.rest) else {
        return Wrap::No;
    };
    let runs = match name {
        "pnpm" | "yarn" => sub.text == "exec" || sub.text == "dlx",
        "bundle" | "npm" => sub.text == "exec",
        _ => sub.text == "run",
    };
    if !runs {
        return Wrap::No;
    }
    let rest = &args[top.rest + 1..];
    let parsed = parse_args(
        rest,
        &Spec::posix(
            "pnw",
            &[
                "with",
                "with-requirements",
                "python",
                "env-file",
                "directory",
                "project",
                "package",
                "extra",
                "group",
                "index",
                "name",
                "prefix",
                "environment",
            ],
        ),
    );
    if parsed.rest < rest.len() {
        Wrap::Run {
            start: top.rest + 1 + parsed.rest,
            prepend: Vec::new(),
        }
    } else {
        Wrap::NoCommand
    }
}

/// A shell line carried in `arg`, keeping what the guard knows of the word it came from.
fn code_from(arg: &Arg, text: &str) -> Arg {
    Arg {
        text: text.to_owned(),
        ..arg.clone()
    }
}

/// The value of an option: the rest of the word, else the next word.
fn option_value(args: &[Arg], i: usize, rest: &str) -> (Option<Arg>, usize) {
    if rest.is_empty() {
        (args.get(i + 1).cloned(), 2)
    } else {
        (Some(code_from(&args[i], rest)), 1)
    }
}

/// An escape value (`shell rm -rf ~`, `!rm -rf ~`) as the shell line it runs.
fn escape(spec: &WrapperSpec, value: &Arg) -> Option<Arg> {
    let text = value.text.trim_start_matches(':').trim_start();
    spec.escape_prefixes
        .iter()
        .find_map(|p| text.strip_prefix(p.as_str()))
        .map(|code| code_from(value, code))
}

/// Unwrap a wrapper described by its table entry: options, code options and escapes, a
/// subcommand, its own operands, then the command.
fn unwrap_by_spec(spec: &WrapperSpec, args: &[Arg]) -> Wrap {
    let mut i = 0;
    if let Some(sub) = &spec.subcommand {
        while i < args.len() && args[i].text.starts_with('-') {
            i += 1;
        }
        match args.get(i) {
            Some(a) if sub.split('|').any(|s| s == a.text) => i += 1,
            _ => return Wrap::No,
        }
    }
    let (mut codes, rest) = wrapper_options(spec, args, i);
    i = rest;
    if let Some(after) = &spec.after
        && let Some(k) = args
            .iter()
            .position(|a| after.split('|').any(|w| w == a.text))
        && k + 1 < args.len()
    {
        return Wrap::Run {
            start: k + 1,
            prepend: Vec::new(),
        };
    }
    if !codes.is_empty() && !spec.joined {
        return Wrap::Code(codes);
    }
    if !spec.runs_operands || spec.after.is_some() {
        return if codes.is_empty() {
            Wrap::No
        } else {
            Wrap::Code(codes)
        };
    }
    // `mise exec node@20 -- cmd`: after a subcommand, its own operands end at `--`.
    if spec.subcommand.is_some()
        && let Some(k) = args[i.min(args.len())..]
            .iter()
            .position(|a| a.text == "--")
    {
        i += k;
    } else {
        i += spec.operands;
    }
    if i < args.len() && args[i].text == "--" {
        i += 1;
    }
    if i >= args.len() {
        return if codes.is_empty() {
            Wrap::NoCommand
        } else {
            Wrap::Code(codes)
        };
    }
    if spec.joined {
        let text = args[i..]
            .iter()
            .map(|a| a.text.as_str())
            .collect::<Vec<_>>()
            .join(" ");
        codes.push(code_from(&args[i], &text));
        return Wrap::Code(codes);
    }
    Wrap::Run {
        start: i,
        prepend: Vec::new(),
    }
}

/// Walk a wrapper's options from `i`: the shell lines its code options carry, and where its
/// operands start.
fn wrapper_options(spec: &WrapperSpec, args: &[Arg], mut i: usize) -> (Vec<Arg>, usize) {
    let mut codes = Vec::new();
    while i < args.len() {
        let t = args[i].text.as_str();
        if t == "--" {
            return (codes, i + 1);
        }
        if spec.words.iter().any(|w| w == t) {
            if let Some(v) = args.get(i + 1) {
                let name = t.trim_start_matches('-');
                if spec.escape_options.iter().any(|o| o == name) {
                    codes.extend(escape(spec, v));
                }
            }
            i += 2;
            continue;
        }
        if let Some(long) = t.strip_prefix("--") {
            let (name, value) = long
                .split_once('=')
                .map_or((long, None), |(n, v)| (n, Some(v)));
            let takes = spec
                .long
                .iter()
                .chain(&spec.long_code)
                .chain(&spec.escape_options)
                .any(|l| l == name);
            let v = match value {
                Some(v) => Some(code_from(&args[i], v)),
                None if takes => args.get(i + 1).cloned(),
                None => None,
            };
            if let Some(v) = &v {
                if spec.long_code.iter().any(|l| l == name) {
                    codes.push(v.clone());
                } else if spec.escape_options.iter().any(|l| l == name) {
                    codes.extend(escape(spec, v));
                }
            }
            i += if value.is_none() && takes { 2 } else { 1 };
            continue;
        }
        let Some(cluster) = t.strip_prefix('-').filter(|c| !c.is_empty()) else {
            break;
        };
        let mut step = 1;
        for (k, c) in cluster.char_indices() {
            let rest = &cluster[k + c.len_utf8()..];
            let is_escape = spec
                .escape_options
                .iter()
                .any(|o| o.len() == 1 && o.starts_with(c));
            if spec.code.contains(c) || spec.values.contains(c) || is_escape {
                let (v, used) = option_value(args, i, rest);
                step = used;
                if let Some(v) = v {
                    if spec.code.contains(c) {
                        codes.push(v);
                    } else if is_escape {
                        codes.extend(escape(spec, &v));
                    }
                }
                break;
            }
        }
        i += step;
    }
    (codes, i)
}

/// Programs that are another command under a package name: `rimraf X` is `rm -rf X`.
fn alias_of(name: &str) -> Option<&'static [&'static str]> {
    match program_name(name) {
        "rimraf" | "del-cli" | "trash-cli" => Some(&["rm", "-rf"]),
        "shx" => Some(&[]),
        _ => None,
    }
}

/// `NAME=value` as bash reads an assignment word.
pub(crate) fn is_assignment(text: &str) -> bool {
    match text.split_once('=') {
        Some((name, _)) => {
            let name = name.strip_suffix('+').unwrap_or(name);
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit())
        }
        None => false,
    }
}

/// The program a command word names: `/bin/rm` and `./rm` are `rm`.
pub(crate) fn program_name(word: &str) -> &str {
    let trimmed = word.trim_end_matches('/');
    trimmed.rsplit('/').next().unwrap_or(trimmed)
}

/// For wrappers whose first operand is their own (a priority, a CPU mask, a lock file): the
/// wrapped command starts right after it, at `rest + 1`.
fn after_first_operand(rest: usize, len: usize) -> Wrap {
    if rest + 1 < len {
        Wrap::Run {
            start: rest + 1,
            prepend: Vec::new(),
        }
    } else {
        Wrap::NoCommand
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Arg> {
        words.iter().map(|w| Arg::literal(*w)).collect()
    }

    #[test]
    fn clusters_and_long_options_parse_alike() {
        let spec = Spec::gnu("", &[]);
        for words in [
            &["-rf", "/"][..],
            &["-fr", "/"],
            &["-r", "-f", "/"],
            &["--recursive", "--force", "/"],
            &["/", "-r", "-f"],
        ] {
            let a = args(words);
            let p = parse_args(&a, &spec);
            assert!(p.has('r', "recursive") && p.has('f', "force"), "{words:?}");
            assert_eq!(p.operands.len(), 1);
            assert_eq!(p.operands[0].text, "/");
        }
    }

    #[test]
    fn long_option_prefixes() {
        let spec = Spec::gnu("", &["upload-file", "header"]);
        let words = args(&["--rec", "--upload", "f", "--head", "url"]);
        let p = parse_args(&words, &spec);
        assert!(p.has('r', "recursive"));
        assert_eq!(p.values(None, &["upload-file"]).collect::<Vec<_>>(), ["f"]);
        assert!(!p.has_long("re"));
        // Too short to be taken as an abbreviation of a value option.
        let short = args(&["--up", "x"]);
        let p = parse_args(&short, &spec);
        assert_eq!(p.operands.len(), 1);
    }

    #[test]
    fn values_attach_or_follow() {
        let a = args(&["-uroot", "-g", "wheel", "--user=x", "ls"]);
        let p = parse_args(&a, &Spec::posix("ug", &["user"]));
        assert_eq!(
            p.values(Some('u'), &["user"]).collect::<Vec<_>>(),
            ["root", "x"]
        );
        assert_eq!(p.rest, 4);
    }

    #[test]
    fn wrappers_find_their_command() {
        assert_eq!(
            strip_wrapper("timeout", &args(&["-s", "KILL", "30", "rm", "-rf", "/"])),
            Wrap::Run {
                start: 3,
                prepend: vec![]
            }
        );
        assert_eq!(
            strip_wrapper("env", &args(&["-u", "DEBUG", "A=1", "cargo", "test"])),
            Wrap::Run {
                start: 3,
                prepend: vec![]
            }
        );
        assert_eq!(strip_wrapper("env", &args(&["-0"])), Wrap::NoCommand);
        assert_eq!(
            strip_wrapper("command", &args(&["-v", "rm"])),
            Wrap::Inspect
        );
        assert_eq!(strip_wrapper("ls", &args(&[])), Wrap::No);
    }

    #[test]
    fn program_names_drop_directories() {
        assert_eq!(program_name("/bin/rm"), "rm");
        assert_eq!(program_name("rm"), "rm");
        assert_eq!(program_name("./x/python3"), "python3");
    }
}
