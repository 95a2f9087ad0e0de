//! Commands carried in another command's arguments: ssh's remote command, tar's program
//! options, git's command-valued configuration and its `rebase --exec`/`submodule foreach`,
//! tmux and screen sessions, `at` jobs, container `run`/`exec`, pagers, editors and debuggers
//! with a shell escape, sed's `e`, `make --eval`, `rsync -e`.
//!
//! Each carried command is walked as the program would run it (shell code, an argument vector,
//! a script on standard input), so its denial names the family of what it really does. The
//! extraction is pure ([`carried`]); only [`check`] touches the walk.

use super::super::Family;
use super::super::command::{Parsed, Spec, parse_args};
use super::super::effects::Effects;
use super::super::normalize::{Arg, Input, Taint, decode_ansi_c};
use super::code::{join, run_file, run_stdin};
use super::destruction::git_subcommand;
use super::target::{Target, classify};

/// A command another command runs for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Carried {
    /// A command line, as `sh -c` reads it.
    Code(Arg),
    /// A program and its arguments, run without a shell.
    Argv(Vec<Arg>),
    /// A shell reading its commands from the carrier's standard input.
    StdinScript,
    /// A shell running this script file.
    ScriptFile(Arg),
    /// Lines of a crontab (schedule, then a command line), from the carrier's standard input.
    StdinCrontab,
    /// A command run on another machine or in a container: what it destroys or sends is
    /// judged, but privileges it raises there are not the host's.
    Elsewhere(Box<Carried>),
}

/// Walk what the command `name args` carries. The remote command of ssh reads ssh's standard
/// input; everything else runs detached from it.
pub(super) fn check(w: &mut dyn Effects, name: &str, args: &[Arg], stdin: &Input, shown: &str) {
    let mut carried = carried(name, args);
    if matches!(name, "docker" | "podman" | "nerdctl" | "docker-compose") {
        carried.extend(container(w, name, args, shown));
    }
    let input = if name == "ssh" {
        stdin.clone()
    } else {
        Input::Inherited
    };
    for c in carried {
        walk_carried(w, c, stdin, &input, shown);
    }
}

fn walk_carried(w: &mut dyn Effects, c: Carried, stdin: &Input, input: &Input, shown: &str) {
    {
        match c {
            Carried::Elsewhere(inner) => {
                let before = w.findings().len();
                walk_carried(w, *inner, stdin, input, shown);
                let mut k = before;
                while k < w.findings().len() {
                    if w.findings()[k].family == Family::Privilege {
                        w.findings_mut().remove(k);
                    } else {
                        k += 1;
                    }
                }
            }
            Carried::Code(code) => {
                w.run_code(&code, input, shown);
            }
            Carried::Argv(argv) if !argv.is_empty() => {
                w.run_argv(argv, input);
            }
            Carried::Argv(_) => {}
            Carried::StdinScript => {
                run_stdin(w, stdin, shown, true);
            }
            Carried::ScriptFile(file) => {
                run_file(w, &file, &Input::Inherited, shown, true);
            }
            Carried::StdinCrontab => {
                let text = match stdin {
                    Input::Static(t) => Some(t.clone()),
                    Input::Stream(o) => o.text.clone(),
                    _ => None,
                };
                if matches!(stdin, Input::Stream(o) if o.taint.download) {
                    w.deny(
                        Family::RemoteExec,
                        format!("`{shown}` installs a crontab downloaded from the network."),
                    );
                }
                for line in text.iter().flat_map(|t| cron_commands(t)) {
                    w.run_code(&Arg::literal(line), &Input::Inherited, shown);
                }
            }
        }
    }
}

/// The commands `name args` carries, as the program will run them.
pub(crate) fn carried(name: &str, args: &[Arg]) -> Vec<Carried> {
    match name {
        "ssh" => ssh(args),
        "scp" | "sftp" => {
            let p = parse_args(args, &Spec::gnu("BbcDFiJlloPRSX", &[]));
            let mut out = ssh_option_commands(args, &p.values(Some('o'), &[]).collect::<Vec<_>>());
            out.extend(p.values(Some('S'), &[]).map(|v| code(v, args)));
            out
        }
        "tar" | "gtar" | "bsdtar" => tar(args),
        "git" => git(args),
        "tmux" => tmux(args),
        "screen" => screen(args),
        "at" | "batch" => at(name, args),
        "crontab" => {
            let p = parse_args(args, &Spec::gnu("usT", &[]));
            let edits = p.has_short('l') || p.has_short('e') || p.has_short('r');
            match p.operands.first() {
                _ if edits => Vec::new(),
                Some(file) if file.text != "-" => Vec::new(),
                _ => vec![Carried::StdinCrontab],
            }
        }
        "kubectl" | "oc" => kubectl(args),
        "man" => carried_man(args),
        "zip" => carried_zip(args),
        "gdb" | "gdb-multiarch" | "cgdb" => gdb(args),
        "vim" | "vi" | "nvim" | "view" | "vimdiff" | "ex" | "rvim" | "gvim" | "evim" | "nvi" => {
            vim(args)
        }
        "sed" | "gsed" => sed(args),
        "make" | "gmake" => carried_make(args),
        "rsync" => carried_rsync(args),
        "nodemon" => {
            let p = parse_args(
                args,
                &Spec::gnu("xwei", &["exec", "watch", "ext", "ignore"]),
            );
            p.values(Some('x'), &["exec"])
                .map(|v| code(v, args))
                .collect()
        }
        "concurrently" => {
            let p = parse_args(
                args,
                &Spec::gnu("nckp", &["names", "prefix-colors", "kill-others", "prefix"]),
            );
            p.operands.iter().map(|a| code(&a.text, args)).collect()
        }
        "entr" => carried_entr(args),
        "watchexec" => carried_watchexec(args),
        _ => Vec::new(),
    }
}

/// The commands `man` carries.
fn carried_man(args: &[Arg]) -> Vec<Carried> {
    let p = parse_args(
        args,
        &Spec::gnu(
            "PCLMmSepRE",
            &[
                "pager",
                "config-file",
                "locale",
                "manpath",
                "sections",
                "preprocessor",
                "systems",
                "extension",
                "recode",
                "encoding",
            ],
        ),
    );
    p.values(Some('P'), &["pager"])
        .map(|v| code(v, args))
        .collect()
}

/// The commands `zip` carries.
fn carried_zip(args: &[Arg]) -> Vec<Carried> {
    let mut out = Vec::new();
    for (i, a) in args.iter().enumerate() {
        let value = match a.text.as_str() {
            "-TT" | "--unzip-command" => args.get(i + 1).map(|v| v.text.as_str()),
            t => t
                .strip_prefix("-TT=")
                .or_else(|| t.strip_prefix("--unzip-command=")),
        };
        out.extend(value.map(|v| code(v, args)));
    }
    out
}

/// The commands `make gmake` carries.
fn carried_make(args: &[Arg]) -> Vec<Carried> {
    let p = parse_args(
        args,
        &Spec::gnu(
            "CfIoWE",
            &[
                "eval",
                "directory",
                "file",
                "makefile",
                "include-dir",
                "old-file",
                "new-file",
                "what-if",
            ],
        ),
    );
    p.values(Some('E'), &["eval"])
        .flat_map(makefile_commands)
        .map(|c| code(&c, args))
        .collect()
}

/// The commands `rsync` carries.
fn carried_rsync(args: &[Arg]) -> Vec<Carried> {
    let p = parse_args(
        args,
        &Spec::gnu(
            "eBfMT",
            &["rsh", "rsync-path", "filter", "exclude", "include", "port"],
        ),
    );
    p.values(Some('e'), &["rsh", "rsync-path"])
        .map(|v| code(v, args))
        .collect()
}

/// The commands `entr` carries.
fn carried_entr(args: &[Arg]) -> Vec<Carried> {
    let p = parse_args(args, &Spec::posix("", &[]));
    let rest: Vec<Arg> = args[p.rest.min(args.len())..].to_vec();
    if p.has_short('s') {
        rest.first()
            .map(|c| vec![Carried::Code(c.clone())])
            .unwrap_or_default()
    } else {
        vec![Carried::Argv(rest)]
    }
}

/// The commands `watchexec` carries.
fn carried_watchexec(args: &[Arg]) -> Vec<Carried> {
    let p = parse_args(
        args,
        &Spec::posix(
            "wedfs",
            &["watch", "exts", "debounce", "filter", "signal", "shell"],
        ),
    );
    let rest = &args[p.rest.min(args.len())..];
    if rest.is_empty() {
        Vec::new()
    } else {
        vec![Carried::Code(join(rest))]
    }
}

/// Shell code taken from an option value: dynamic and tainted as the word it came from.
fn code(text: &str, args: &[Arg]) -> Carried {
    Carried::Code(arg_from(text, args))
}

fn arg_from(text: &str, args: &[Arg]) -> Arg {
    let source = args.iter().find(|a| a.text.contains(text));
    Arg {
        text: text.to_owned(),
        dynamic: source.is_some_and(|a| a.dynamic),
        taint: source.map_or(Taint::default(), |a| a.taint),
        proc_sub: None,
    }
}

/// `ssh [opts] host cmd…`: the remote command is the remaining words joined by spaces, which
/// the remote shell parses again.
fn ssh(args: &[Arg]) -> Vec<Carried> {
    const SSH: Spec = Spec::posix("BbcDEeFIiJLlmOoPpQRSWw", &[]);
    let p = parse_args(args, &SSH);
    let mut options: Vec<&str> = p.values(Some('o'), &[]).collect();
    // ssh reads options again after the host (`ssh host -p 22 -- cmd`).
    let after_host = args.get(p.rest + 1..).unwrap_or_default();
    let q = parse_args(after_host, &SSH);
    options.extend(q.values(Some('o'), &[]));
    let mut out = ssh_option_commands(args, &options);
    let remote = &after_host[q.rest.min(after_host.len())..];
    if !remote.is_empty() {
        out.push(Carried::Elsewhere(Box::new(Carried::Code(join(remote)))));
    }
    out
}

/// `-o ProxyCommand=…`, `-o LocalCommand=…`: ssh options whose value runs locally.
fn ssh_option_commands(args: &[Arg], options: &[&str]) -> Vec<Carried> {
    options
        .iter()
        .filter_map(|o| {
            let (key, value) = o.split_once(['=', ' '])?;
            let key = key.trim().to_ascii_lowercase();
            matches!(
                key.as_str(),
                "proxycommand" | "localcommand" | "knownhostscommand"
            )
            .then(|| code(value.trim_start_matches(['=', ' ']), args))
        })
        .collect()
}

/// tar's options that run programs: `--to-command`, `--checkpoint-action=exec=`,
/// `-I`/`--use-compress-program`, `--rsh-command`, `-F`/`--info-script`/`--new-volume-script`.
fn tar(args: &[Arg]) -> Vec<Carried> {
    // Old-style `tar xzf f`: the first word is an option cluster without its dash.
    let mut words = args.to_vec();
    if let Some(first) = words.first_mut()
        && !first.text.starts_with('-')
        && !first.text.is_empty()
        && first.text.chars().all(|c| c.is_ascii_alphabetic())
    {
        first.text = format!("-{}", first.text);
    }
    let p = parse_args(
        &words,
        &Spec::gnu(
            "bCfFgHIKLNTVX",
            &[
                "to-command",
                "checkpoint-action",
                "use-compress-program",
                "rsh-command",
                "info-script",
                "new-volume-script",
                "file",
                "directory",
                "exclude",
                "exclude-from",
                "files-from",
                "format",
                "transform",
                "xform",
                "owner",
                "group",
                "mode",
                "mtime",
                "newer",
                "label",
                "blocking-factor",
                "index-file",
            ],
        ),
    );
    let mut out: Vec<Carried> = p
        .values(
            Some('I'),
            &[
                "to-command",
                "use-compress-program",
                "rsh-command",
                "info-script",
                "new-volume-script",
            ],
        )
        .chain(p.values(Some('F'), &[]))
        .map(|v| code(v, args))
        .collect();
    out.extend(
        p.values(None, &["checkpoint-action"])
            .filter_map(|v| v.strip_prefix("exec="))
            .map(|v| code(v, args)),
    );
    out
}

/// git: `-c KEY=VALUE` and `git config KEY VALUE` with a command-valued key, `rebase --exec`,
/// `submodule foreach`, `bisect run`, `filter-branch --*-filter`, `difftool --extcmd`.
fn git(args: &[Arg]) -> Vec<Carried> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let t = args[i].text.as_str();
        let setting = if t == "-c" {
            i += 1;
            args.get(i).map(|a| a.text.as_str())
        } else if matches!(t, "-C" | "--git-dir" | "--work-tree" | "--namespace") {
            i += 1;
            None
        } else if !t.starts_with('-') {
            break;
        } else {
            None
        };
        if let Some((key, value)) = setting.and_then(|s| s.split_once('=')) {
            out.extend(git_config_command(key, value).map(|c| code(&c, args)));
        }
        i += 1;
    }
    let Some((at, sub)) = git_subcommand(args) else {
        return out;
    };
    let rest = &args[at + 1..];
    match sub {
        "config" => out.extend(git_config_set(rest)),
        "rebase" => {
            let p = parse_args(
                rest,
                &Spec::gnu("xsXS", &["exec", "strategy", "strategy-option", "onto"]),
            );
            out.extend(p.values(Some('x'), &["exec"]).map(|v| code(v, rest)));
        }
        "submodule" => {
            let p = parse_args(rest, &Spec::posix("", &[]));
            if p.operands.first().is_some_and(|a| a.text == "foreach") {
                let after = &rest[p.rest + 1..];
                let skip = after.iter().take_while(|a| a.text.starts_with('-')).count();
                if skip < after.len() {
                    out.push(Carried::Code(join(&after[skip..])));
                }
            }
        }
        "bisect" if rest.first().is_some_and(|a| a.text == "run") && rest.len() > 1 => {
            out.push(Carried::Argv(rest[1..].to_vec()));
        }
        "filter-branch" => {
            for (k, a) in rest.iter().enumerate() {
                if a.text.starts_with("--") && a.text.ends_with("-filter") {
                    out.extend(rest.get(k + 1).map(|v| Carried::Code(v.clone())));
                }
            }
        }
        "difftool" | "mergetool" => {
            let p = parse_args(rest, &Spec::gnu("xtT", &["extcmd", "tool"]));
            out.extend(p.values(Some('x'), &["extcmd"]).map(|v| code(v, rest)));
        }
        _ => {}
    }
    out
}

/// `git config KEY VALUE` (or `config set KEY VALUE`) with a command-valued key: the command
/// the setting makes git run. Reading, listing and unsetting set nothing.
fn git_config_set(rest: &[Arg]) -> Option<Carried> {
    let p = parse_args(
        rest,
        &Spec::gnu("f", &["file", "blob", "type", "default", "comment"]),
    );
    let reads = p.opts.iter().any(|o| {
        o.short == Some('l')
            || o.short == Some('e')
            || o.long.as_deref().is_some_and(|l| {
                l.starts_with("get")
                    || l.starts_with("unset")
                    || matches!(l, "list" | "edit" | "remove-section" | "rename-section")
            })
    });
    let ops: Vec<&str> = p.operands.iter().map(|a| a.text.as_str()).collect();
    let pair = match ops.as_slice() {
        ["set", key, value, ..] => Some((*key, *value)),
        [verb, ..] if matches!(*verb, "get" | "unset" | "list" | "edit") => None,
        [key, value, ..] => Some((*key, *value)),
        _ => None,
    };
    let (key, value) = pair.filter(|_| !reads)?;
    git_config_command(key, value).map(|c| code(&c, rest))
}

/// The shell command a git configuration value runs, for the keys git runs as commands.
pub(crate) fn git_config_command(key: &str, value: &str) -> Option<String> {
    let key = key.to_ascii_lowercase();
    let parts: Vec<&str> = key.split('.').collect();
    let (section, name) = (parts[0], parts[parts.len() - 1]);
    if section == "alias" && parts.len() >= 2 {
        // `!…` is a shell command; anything else is a git command line.
        return Some(match value.strip_prefix('!') {
            Some(shell) => shell.to_owned(),
            None => format!("git {value}"),
        });
    }
    let is_bool = matches!(
        value.to_ascii_lowercase().as_str(),
        "" | "true" | "false" | "yes" | "no" | "on" | "off" | "0" | "1"
    );
    let runs = match (section, parts.len(), name) {
        ("core", 2, "pager" | "editor" | "sshcommand" | "fsmonitor" | "askpass") => true,
        ("sequence", 2, "editor") | ("diff", 2, "external") => true,
        ("pager", 2, _) | ("gpg", _, "program") => true,
        ("sendemail", 2, "sendmailcmd") | ("uploadpack", 2, "packobjectshook") => true,
        ("diff", 3, "textconv" | "command") => true,
        ("filter", 3, "clean" | "smudge" | "process") => true,
        ("merge", 3, "driver") | ("difftool" | "mergetool", 3, "cmd") => true,
        ("remote", 3, "receivepack" | "uploadpack") => true,
        ("credential", _, "helper") => {
            // A helper name is `git credential-NAME`; `!…` and paths are commands.
            return value
                .strip_prefix('!')
                .map(str::to_owned)
                .or_else(|| value.starts_with('/').then(|| value.to_owned()));
        }
        _ => false,
    };
    (runs && !is_bool).then(|| value.to_owned())
}

/// Environment variables whose value programs run as a command line (`GIT_SSH_COMMAND`,
/// `GIT_PAGER`, `EDITOR`, …): assigning one is as good as running it.
pub(crate) fn runs_as_command(name: &str) -> bool {
    matches!(
        name,
        "GIT_SSH_COMMAND"
            | "GIT_SSH"
            | "GIT_PAGER"
            | "GIT_EDITOR"
            | "GIT_SEQUENCE_EDITOR"
            | "GIT_EXTERNAL_DIFF"
            | "GIT_ASKPASS"
            | "SSH_ASKPASS"
            | "EDITOR"
            | "VISUAL"
            | "PAGER"
            | "MANPAGER"
            | "SYSTEMD_PAGER"
            | "RSYNC_RSH"
            | "PROMPT_COMMAND"
            | "LESSOPEN"
            | "LESSCLOSE"
            | "BROWSER"
            | "DIFFPROG"
            | "FCEDIT"
            | "SUDO_EDITOR"
            | "PERLDB_OPTS"
    )
}

/// Variables whose value bash expands as a prompt or sources as a file before running
/// anything: command substitutions in them run (`PS4='$(…)' bash -x`, `BASH_ENV=<(…)`).
pub(crate) fn expands_as_prompt(name: &str) -> bool {
    matches!(
        name,
        "PS0" | "PS1" | "PS2" | "PS3" | "PS4" | "BASH_ENV" | "ENV"
    )
}

/// tmux: `-c CMD`, and the shell command of `new-session`, `new-window`, `split-window`,
/// `respawn-*`, `run-shell`, `display-popup`; keys sent with `send-keys … Enter`. Commands are
/// separated by `;` words.
fn tmux(args: &[Arg]) -> Vec<Carried> {
    let top = parse_args(args, &Spec::posix("cfLST", &[]));
    let mut out: Vec<Carried> = top.values(Some('c'), &[]).map(|v| code(v, args)).collect();
    let rest = &args[top.rest.min(args.len())..];
    for cmd in rest.split(|a| a.text == ";" || a.text == "\\;") {
        let Some((sub, sub_args)) = cmd.split_first() else {
            continue;
        };
        let spec = match sub.text.as_str() {
            "new-session" | "new" | "new-window" | "neww" | "split-window" | "splitw"
            | "respawn-pane" | "respawnp" | "respawn-window" | "respawnw" => "cefFnstxylp",
            "run-shell" | "run" => "dt",
            "display-popup" | "popup" => "bcdehsStTwxy",
            "send-keys" | "send" => {
                let p = parse_args(sub_args, &Spec::posix("NtT", &[]));
                let enter = |t: &str| matches!(t, "Enter" | "C-m" | "KPEnter" | "C-j");
                let keys: Vec<Arg> = p
                    .operands
                    .iter()
                    .filter(|a| !enter(&a.text))
                    .map(|a| Arg {
                        text: decode_ansi_c(&a.text),
                        ..(*a).clone()
                    })
                    .collect();
                let entered = p.operands.iter().any(|a| enter(&a.text))
                    || keys.iter().any(|a| a.text.contains('\n'));
                if entered && !keys.is_empty() {
                    out.push(Carried::Code(join(&keys)));
                }
                continue;
            }
            _ => continue,
        };
        let p = parse_args(sub_args, &Spec::posix(spec, &[]));
        if !p.operands.is_empty() {
            let words: Vec<Arg> = p.operands.iter().map(|a| (*a).clone()).collect();
            out.push(Carried::Code(join(&words)));
        }
    }
    out
}

/// `screen [opts] cmd args…` runs the program; `screen -X stuff 'cmd\n'` types into a session.
fn screen(args: &[Arg]) -> Vec<Carried> {
    let p = parse_args(args, &Spec::posix("ScehpTXst", &[]));
    let rest = &args[p.rest.min(args.len())..];
    match p.values(Some('X'), &[]).last() {
        Some("stuff") if !rest.is_empty() => {
            let typed = Arg {
                text: decode_ansi_c(&join(rest).text),
                ..join(rest)
            };
            vec![Carried::Code(typed)]
        }
        Some("exec" | "screen") if !rest.is_empty() => vec![Carried::Argv(rest.to_vec())],
        Some(_) => Vec::new(),
        None if rest.is_empty() => Vec::new(),
        None => vec![Carried::Argv(rest.to_vec())],
    }
}

/// `at TIME` and `batch` read a shell script from standard input, or from `-f FILE`.
fn at(name: &str, args: &[Arg]) -> Vec<Carried> {
    let p = parse_args(args, &Spec::gnu("qft", &[]));
    let lists = ['l', 'd', 'r', 'c'].iter().any(|c| p.has_short(*c))
        || p.has_long("help")
        || p.has_short('V');
    if lists {
        return Vec::new();
    }
    if let Some(file) = p.values(Some('f'), &[]).last() {
        return vec![Carried::ScriptFile(arg_from(file, args))];
    }
    if name == "batch" || !p.operands.is_empty() {
        vec![Carried::StdinScript]
    } else {
        Vec::new()
    }
}

/// The commands of crontab lines: five schedule fields (or one `@word`), then a command line.
fn cron_commands(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter(|l| {
            // `SHELL=/bin/bash`, `MAILTO=x`: environment lines.
            let first = l.split_whitespace().next().unwrap_or("");
            !super::super::command::is_assignment(first)
        })
        .filter_map(|l| {
            let fields = if l.starts_with('@') { 1 } else { 5 };
            let mut rest = l;
            for _ in 0..fields {
                rest = rest.trim_start();
                let end = rest.find(char::is_whitespace)?;
                rest = &rest[end..];
            }
            let cmd = rest.trim();
            (!cmd.is_empty()).then(|| cmd.to_owned())
        })
        .take(16)
        .collect()
}

/// `kubectl exec|run|debug … -- CMD…` runs CMD in a pod.
fn kubectl(args: &[Arg]) -> Vec<Carried> {
    let runs = args
        .iter()
        .take_while(|a| a.text != "--")
        .any(|a| matches!(a.text.as_str(), "exec" | "run" | "debug"));
    match args.iter().position(|a| a.text == "--") {
        Some(k) if runs && k + 1 < args.len() => vec![Carried::Elsewhere(Box::new(Carried::Argv(
            args[k + 1..].to_vec(),
        )))],
        _ => Vec::new(),
    }
}

const DOCKER_RUN: Spec = Spec::posix(
    "acehlmpuvw",
    &[
        "add-host",
        "annotation",
        "attach",
        "blkio-weight",
        "cap-add",
        "cap-drop",
        "cgroup-parent",
        "cgroupns",
        "cidfile",
        "cpu-period",
        "cpu-quota",
        "cpu-shares",
        "cpus",
        "cpuset-cpus",
        "cpuset-mems",
        "detach-keys",
        "device",
        "dns",
        "dns-option",
        "dns-search",
        "domainname",
        "entrypoint",
        "env",
        "env-file",
        "expose",
        "gpus",
        "group-add",
        "health-cmd",
        "health-interval",
        "health-retries",
        "health-start-period",
        "health-timeout",
        "hostname",
        "ip",
        "ip6",
        "ipc",
        "isolation",
        "label",
        "label-file",
        "link",
        "log-driver",
        "log-opt",
        "mac-address",
        "memory",
        "memory-reservation",
        "memory-swap",
        "mount",
        "name",
        "network",
        "network-alias",
        "pid",
        "platform",
        "publish",
        "pull",
        "restart",
        "runtime",
        "security-opt",
        "shm-size",
        "stop-signal",
        "stop-timeout",
        "storage-opt",
        "sysctl",
        "tmpfs",
        "ulimit",
        "user",
        "userns",
        "uts",
        "volume",
        "volumes-from",
        "workdir",
    ],
);

/// `docker run|exec|create IMAGE CMD…` (also `container run`, `compose run|exec SERVICE CMD`):
/// the command runs with the host paths mounted into the container, so a path under a mount
/// is judged as the host path it is. Mounting the host's root, a top-level system directory
/// or the home directory, or `--privileged`, hands the container root over the host.
fn container(w: &mut dyn Effects, name: &str, args: &[Arg], shown: &str) -> Vec<Carried> {
    let Some(at) = container_verb(name, args) else {
        return Vec::new();
    };
    let rest = &args[at + 1..];
    let p = parse_args(rest, &DOCKER_RUN);
    if p.has_long("privileged") {
        w.deny(
            Family::Privilege,
            format!("`{shown}` runs a privileged container, which holds root over the host."),
        );
    }
    let mut mounts = host_mounts(&p);
    judge_mounts(w, &mounts, shown);
    mounts.sort_by_key(|(_, dst)| std::cmp::Reverse(dst.len()));
    let operands = &rest[p.rest.min(rest.len())..];
    let mut argv: Vec<Arg> = p
        .values(None, &["entrypoint"])
        .map(|e| arg_from(e, rest))
        .collect();
    // The image, container or service comes first.
    argv.extend(operands.iter().skip(1).cloned());
    if argv.is_empty() {
        return Vec::new();
    }
    let argv = argv
        .into_iter()
        .map(|a| Arg {
            text: host_path(&a.text, &mounts),
            ..a
        })
        .collect();
    vec![Carried::Elsewhere(Box::new(Carried::Argv(argv)))]
}

/// Where `run`, `exec` or `create` stands in a container command line (after the global
/// options, `container`, `compose` and its options); `None` for other verbs.
fn container_verb(name: &str, args: &[Arg]) -> Option<usize> {
    let top = parse_args(
        args,
        &Spec::posix(
            "Hcl",
            &[
                "host",
                "context",
                "config",
                "log-level",
                "file",
                "project-name",
            ],
        ),
    );
    let mut at = top.rest;
    let word = |k: usize| args.get(k).map(|a| a.text.as_str());
    if word(at) == Some("container") {
        at += 1;
    }
    let compose = name == "docker-compose" || word(at) == Some("compose");
    if compose && name != "docker-compose" {
        // `docker compose [-f file] [-p name] run|exec …`
        let p = parse_args(
            &args[at + 1..],
            &Spec::posix("fp", &["file", "project-name", "profile", "env-file"]),
        );
        at += 1 + p.rest;
    }
    matches!(word(at)?, "run" | "exec" | "create").then_some(at)
}

/// The host paths a container run mounts (`-v SRC:DST`, `--mount source=…,target=…`), as
/// (host path, container path); named volumes are not host paths.
fn host_mounts(p: &Parsed<'_>) -> Vec<(String, String)> {
    let mut mounts: Vec<(String, String)> = Vec::new();
    for v in p.values(Some('v'), &["volume"]) {
        let mut parts = v.split(':');
        if let (Some(src), Some(dst)) = (parts.next(), parts.next()) {
            mounts.push((src.to_owned(), dst.to_owned()));
        }
    }
    for m in p.values(None, &["mount"]) {
        let field = |names: &[&str]| {
            m.split(',').find_map(|kv| {
                let (k, v) = kv.split_once('=')?;
                names.contains(&k).then(|| v.to_owned())
            })
        };
        if let (Some(src), Some(dst)) = (
            field(&["source", "src"]),
            field(&["target", "dst", "destination"]),
        ) {
            mounts.push((src, dst));
        }
    }
    mounts.retain(|(src, _)| src.starts_with(['/', '.', '~']));
    mounts
}

/// Mounting the host's root, a top-level system directory or the home directory hands the
/// container's root over it.
fn judge_mounts(w: &mut dyn Effects, mounts: &[(String, String)], shown: &str) {
    for (src, _) in mounts {
        if let Some(t) = classify(src, w.cwd()) {
            let top_level = match &t {
                Target::System(p) => p.matches('/').count() == 1,
                other => matches!(
                    other,
                    Target::FsRoot | Target::RootGlob | Target::Home | Target::HomeGlob
                ),
            };
            if top_level {
                w.deny(
                    Family::Privilege,
                    format!(
                        "`{shown}` mounts {} into a container, where its root can rewrite it.",
                        t.describe()
                    ),
                );
            }
        }
    }
}

/// A container path as the host path it is mounted from.
fn host_path(path: &str, mounts: &[(String, String)]) -> String {
    for (src, dst) in mounts {
        let dst = dst.trim_end_matches('/');
        if dst.is_empty() {
            continue;
        }
        if path == dst {
            return src.clone();
        }
        if let Some(rest) = path.strip_prefix(dst)
            && rest.starts_with('/')
        {
            return format!("{}{rest}", src.trim_end_matches('/'));
        }
    }
    path.to_owned()
}

/// gdb's `-ex CMD`: `shell CMD`, `!CMD`, `pipe … | CMD`, `python CODE`.
fn gdb(args: &[Arg]) -> Vec<Carried> {
    let mut out = Vec::new();
    for (i, a) in args.iter().enumerate() {
        let t = a.text.trim_start_matches('-');
        let value = match t {
            "ex" | "eval-command" | "iex" | "init-eval-command" => {
                args.get(i + 1).map(|v| v.text.clone())
            }
            _ => ["ex=", "eval-command=", "iex=", "init-eval-command="]
                .iter()
                .find_map(|p| t.strip_prefix(p))
                .filter(|_| a.text.starts_with('-'))
                .map(str::to_owned),
        };
        let Some(cmd) = value else { continue };
        let cmd = cmd.trim();
        let (word, rest) = cmd
            .split_once(char::is_whitespace)
            .map_or((cmd, ""), |(w, r)| (w, r.trim()));
        if let Some(shell) = cmd.strip_prefix('!') {
            out.push(code(shell, args));
        } else if matches!(word, "shell" | "she" | "sh") {
            out.push(code(rest, args));
        } else if word == "pipe" || word == "|" {
            if let Some((_, shell)) = rest.split_once('|') {
                out.push(code(shell, args));
            }
        } else if matches!(word, "python" | "py" | "python3" | "pi") && !rest.is_empty() {
            out.push(interpreter("python3", "-c", rest));
        }
    }
    out
}

/// An equivalent interpreter command line for code an editor or debugger runs inline.
fn interpreter(program: &str, flag: &str, program_text: &str) -> Carried {
    Carried::Argv(vec![
        Arg::literal(program),
        Arg::literal(flag),
        Arg::literal(program_text),
    ])
}

/// vim's `-c CMD`, `--cmd CMD` and `+CMD`: Ex commands, whose `!`, `:r !`, `:w !`,
/// `:terminal`, `system()` and `:python`/`:lua`/`:perl`/`:ruby` run other programs.
fn vim(args: &[Arg]) -> Vec<Carried> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let t = args[i].text.as_str();
        let cmd = match t {
            "-c" | "--cmd" => {
                i += 1;
                args.get(i).map(|a| a.text.as_str())
            }
            "--" => break,
            _ => t.strip_prefix('+'),
        };
        if let Some(c) = cmd {
            out.extend(ex_commands(c).into_iter().map(|c| match c {
                Carried::Code(a) => code(&a.text, args),
                other => other,
            }));
        }
        i += 1;
    }
    out
}

fn ex_commands(line: &str) -> Vec<Carried> {
    let mut out = Vec::new();
    let mut rest = line;
    while !rest.is_empty() {
        let cmd = rest.trim_start_matches([':', ' ', '\t']);
        // A range (`%`, `1,$`, `.`), then `silent!`.
        let cmd = cmd.trim_start_matches(|c: char| c.is_ascii_digit() || "%.$,;'<>".contains(c));
        let cmd = match cmd.split_once(char::is_whitespace) {
            Some(("sil" | "sil!" | "silent" | "silent!", r)) => r.trim_start(),
            _ => cmd,
        };
        if let Some(shell) = cmd.strip_prefix('!') {
            // `!` takes the rest of the line, bars included.
            out.push(Carried::Code(Arg::literal(shell)));
            break;
        }
        let (word, args) = cmd
            .split_once(char::is_whitespace)
            .map_or((cmd, ""), |(w, r)| (w, r.trim_start()));
        let word = word.trim_end_matches('!');
        let takes_rest = |names: &[&str]| names.contains(&word);
        if takes_rest(&["r", "re", "rea", "read", "w", "wr", "wri", "writ", "write"])
            && let Some(shell) = args.strip_prefix('!')
        {
            out.push(Carried::Code(Arg::literal(shell)));
            break;
        }
        if takes_rest(&["ter", "term", "termi", "termin", "termina", "terminal"]) {
            let shell: Vec<&str> = args
                .split_whitespace()
                .skip_while(|w| w.starts_with("++"))
                .collect();
            if !shell.is_empty() {
                out.push(Carried::Code(Arg::literal(shell.join(" "))));
            }
            break;
        }
        let lang = match word {
            "py" | "pyt" | "pyth" | "pytho" | "python" | "py3" | "python3" | "pyx" | "pythonx" => {
                Some(("python3", "-c"))
            }
            "lua" => Some(("lua", "-e")),
            "perl" | "pe" => Some(("perl", "-e")),
            "ruby" | "rub" => Some(("ruby", "-e")),
            _ => None,
        };
        if let Some((program, flag)) = lang
            && !args.is_empty()
        {
            out.push(interpreter(program, flag, args));
            break;
        }
        for call in ["system(", "systemlist(", "termopen(", "jobstart("] {
            if let Some(pos) = cmd.find(call) {
                let after = &cmd[pos + call.len()..];
                if let Some(q) = after.chars().next().filter(|c| *c == '\'' || *c == '"')
                    && let Some(end) = after[1..].find(q)
                {
                    out.push(Carried::Code(Arg::literal(&after[1..1 + end])));
                }
            }
        }
        match cmd.find('|') {
            Some(bar) => rest = &cmd[bar + 1..],
            None => break,
        }
    }
    out
}

/// GNU sed's `e COMMAND`, `e` and the `s///e` flag execute commands.
fn sed(args: &[Arg]) -> Vec<Carried> {
    let p = parse_args(
        args,
        &Spec::gnu("eflS", &["expression", "file", "line-length"]),
    );
    let mut scripts: Vec<&str> = p.values(Some('e'), &["expression"]).collect();
    if scripts.is_empty() && !p.has('f', "file") {
        scripts.extend(p.operands.first().map(|a| a.text.as_str()));
    }
    let mut out = Vec::new();
    for s in scripts {
        for c in sed_executes(s) {
            out.push(match c {
                Some(cmd) => code(&cmd, args),
                // The pattern space (input text) runs as a command.
                None => Carried::Code(Arg {
                    text: "$(sed pattern space)".to_owned(),
                    dynamic: true,
                    ..Arg::default()
                }),
            });
        }
    }
    out
}

/// A position in a sed script, read one command at a time.
struct SedCursor {
    chars: Vec<char>,
    i: usize,
}

impl SedCursor {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.i).copied()
    }

    /// The rest of the line.
    fn until_eol(&mut self) -> String {
        let start = self.i;
        while self.peek().is_some_and(|c| c != '\n') {
            self.i += 1;
        }
        self.chars[start..self.i].iter().collect()
    }

    /// Skip to the end of a command (`;`, a newline or `}`).
    fn until_command_end(&mut self) {
        while self.peek().is_some_and(|c| !matches!(c, ';' | '\n' | '}')) {
            self.i += 1;
        }
    }

    /// Read a delimited part (`/re/`), honouring backslash escapes.
    fn delimited(&mut self, delim: char) -> String {
        let mut s = String::new();
        while self.i < self.chars.len() && self.chars[self.i] != delim {
            if self.chars[self.i] == '\\' && self.i + 1 < self.chars.len() {
                s.push(self.chars[self.i]);
                self.i += 1;
            }
            s.push(self.chars[self.i]);
            self.i += 1;
        }
        self.i += 1;
        s
    }

    /// Skip an address (numbers, `$`, `first~step`, `/re/`, `\cREc`) or a separator; whether
    /// there was one.
    fn skip_address(&mut self) -> bool {
        let Some(c) = self.peek() else {
            return false;
        };
        // Separators, and the addresses numbers, `$`, `first~step`.
        let single =
            c.is_whitespace() || matches!(c, ';' | '{' | '}' | '!' | ',' | '$' | '~' | '+');
        if single || c.is_ascii_digit() {
            self.i += 1;
        } else if c == '/' {
            self.i += 1;
            self.delimited('/');
            while self.peek().is_some_and(|c| matches!(c, 'I' | 'M')) {
                self.i += 1;
            }
        } else if c == '\\' && self.i + 1 < self.chars.len() {
            let d = self.chars[self.i + 1];
            self.i += 2;
            self.delimited(d);
        } else {
            return false;
        }
        true
    }

    /// After `s` or `y`: the replacement of an `s` whose flags include `e`.
    fn substitution(&mut self, c: char) -> Option<String> {
        let d = self.peek()?;
        self.i += 1;
        self.delimited(d);
        let replacement = self.delimited(d);
        if c == 'y' {
            return None;
        }
        let mut executes = false;
        while let Some(flag) = self.peek().filter(|f| !matches!(f, ';' | '\n' | '}')) {
            match flag {
                'e' => executes = true,
                'w' => {
                    self.until_eol();
                    break;
                }
                _ => {}
            }
            self.i += 1;
        }
        executes.then(|| replacement.replace("\\\n", "\n"))
    }
}

/// The commands a sed script executes: `Some(cmd)` for `e cmd` and for `s/…/cmd/e` (the
/// replacement is what runs when it replaces the line), `None` for a bare `e`.
fn sed_executes(script: &str) -> Vec<Option<String>> {
    let mut cur = SedCursor {
        chars: script.chars().collect(),
        i: 0,
    };
    let mut out = Vec::new();
    while let Some(c) = cur.peek() {
        if cur.skip_address() {
            continue;
        }
        cur.i += 1;
        match c {
            's' | 'y' if cur.peek().is_some() => out.extend(cur.substitution(c).map(Some)),
            'e' => {
                let cmd = cur.until_eol();
                let cmd = cmd.trim();
                out.push((!cmd.is_empty()).then(|| cmd.to_owned()));
            }
            // Text, file names and labels run to the end of the line (labels also to `;`).
            'b' | 't' | 'T' => cur.until_command_end(),
            'a' | 'i' | 'c' | 'r' | 'R' | 'w' | 'W' | ':' | '#' => {
                cur.until_eol();
            }
            'q' | 'Q' | 'l' | 'L' => {
                while cur.peek().is_some_and(|c| c.is_ascii_digit() || c == ' ') {
                    cur.i += 1;
                }
            }
            _ => {}
        }
    }
    out
}

/// The shell commands in makefile text given to `make --eval`: recipe lines (after a tab or
/// `target: ;`) and `$(shell …)`.
fn makefile_commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(recipe) = line.strip_prefix('\t') {
            out.push(recipe.trim_start_matches(['@', '-', '+']).to_owned());
        } else if let Some((rule, recipe)) = line.split_once(';')
            && rule.contains(':')
            && !rule.contains('=')
        {
            out.push(recipe.trim_start_matches(['@', '-', '+', ' ']).to_owned());
        }
    }
    let mut rest = text;
    while let Some(pos) = rest.find("$(shell ") {
        let body = &rest[pos + "$(shell ".len()..];
        let mut depth = 1;
        let mut end = body.len();
        for (k, ch) in body.char_indices() {
            match ch {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = k;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.push(body[..end].to_owned());
        rest = &body[end..];
    }
    out.retain(|c| !c.trim().is_empty());
    out.truncate(16);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sed_scripts_that_execute() {
        assert_eq!(sed_executes("s/a/b/"), Vec::<Option<String>>::new());
        assert_eq!(sed_executes("s/.*/id/e"), vec![Some("id".to_owned())]);
        assert_eq!(
            sed_executes("1e rm -rf ~"),
            vec![Some("rm -rf ~".to_owned())]
        );
        assert_eq!(sed_executes("/x/e"), vec![None]);
        assert_eq!(
            sed_executes("s|/etc|/opt|g;p"),
            Vec::<Option<String>>::new()
        );
        assert_eq!(sed_executes("/^e/d"), Vec::<Option<String>>::new());
        assert_eq!(sed_executes("a echo hi"), Vec::<Option<String>>::new());
        assert_eq!(
            sed_executes("s/x/y/w out.txt"),
            Vec::<Option<String>>::new()
        );
    }

    #[test]
    fn git_keys_that_run_commands() {
        assert_eq!(
            git_config_command("alias.x", "!rm -rf ~").as_deref(),
            Some("rm -rf ~")
        );
        assert_eq!(
            git_config_command("alias.co", "checkout").as_deref(),
            Some("git checkout")
        );
        assert_eq!(
            git_config_command("core.sshCommand", "ssh -i k").as_deref(),
            Some("ssh -i k")
        );
        assert_eq!(
            git_config_command("diff.pdf.textconv", "pdftotext").as_deref(),
            Some("pdftotext")
        );
        assert_eq!(git_config_command("core.fsmonitor", "true"), None);
        assert_eq!(git_config_command("user.name", "rm -rf ~"), None);
        assert_eq!(git_config_command("credential.helper", "store"), None);
        assert_eq!(
            git_config_command("credential.helper", "!f() { cat; }; f").as_deref(),
            Some("f() { cat; }; f")
        );
    }

    #[test]
    fn makefile_text_commands() {
        assert_eq!(makefile_commands("x:\n\t@rm -rf ~"), vec!["rm -rf ~"]);
        assert_eq!(makefile_commands("x: ; id"), vec!["id"]);
        assert_eq!(makefile_commands("A := $(shell id -u)"), vec!["id -u"]);
        assert!(makefile_commands("CFLAGS += -O2").is_empty());
    }

    #[test]
    fn crontab_lines_lose_their_schedule() {
        let tab =
            "# m h dom mon dow command\nSHELL=/bin/sh\n*/5 * * * * curl x | sh\n@reboot rm -rf ~\n";
        assert_eq!(cron_commands(tab), vec!["curl x | sh", "rm -rf ~"]);
    }

    #[test]
    fn container_paths_map_to_host_paths() {
        let mounts = vec![("/".to_owned(), "/host".to_owned())];
        assert_eq!(host_path("/host/etc", &mounts), "/etc");
        assert_eq!(host_path("/host", &mounts), "/");
        assert_eq!(host_path("/hostname", &mounts), "/hostname");
    }
}
