//! The rule families, applied to one resolved command at a time, and what each command
//! leaves behind for the rest of the walk: its output (static text, downloads, file contents),
//! the working directory, variables.
//!
//! The rules see the walk only through [`Effects`]: they record denials, read and update the
//! walk state, and hand carried code back to be walked, without depending on the walker.

pub(crate) mod carried;
mod code;
pub(crate) mod files;
pub(crate) use code::runs_package_from_address;
mod destruction;
mod env_dump;
mod exfiltration;
mod inline;
mod privilege;
pub(crate) mod target;

use super::Family;
use super::command::{Spec, is_assignment, parse_args, program_name};
use super::effects::{Cwd, Effects};
use super::normalize::{Arg, Input, Output, Taint, decode_ansi_c, decode_base64, display_argv};
use super::programs::{Role, denials, has_role};
use target::plain_path;

/// Programs that fetch content from the network onto stdout or into a file.
pub(crate) fn is_downloader(name: &str) -> bool {
    has_role(name, Role::Downloader)
}

/// Programs that print the contents of the files given as operands.
fn is_file_reader(name: &str) -> bool {
    has_role(name, Role::Reader)
}

/// Judge one command after its wrappers were peeled off; return what it writes to stdout.
/// `shown` is the command line as [`display_argv`] shows it.
pub(crate) fn judge(w: &mut dyn Effects, argv: &[Arg], stdin: &Input, shown: &str) -> Output {
    let Some(head) = argv.first() else {
        return Output::text(String::new());
    };
    let name = program_name(&head.text);
    let args = &argv[1..];

    let relative = head.text.contains('/') && !head.text.starts_with(['/', '~', '$']);
    // (No download and no file written yet, the common case: no path to resolve.)
    let downloaded = !w.downloaded().is_empty() && w.is_downloaded(&plain_path(&head.text));
    if downloaded || (w.extracted_download() && relative) {
        w.deny(
            Family::RemoteExec,
            format!("`{shown}` runs a file that was just downloaded."),
        );
    }
    if !w.written().is_empty()
        && let Some(script) = w.written().get(&plain_path(&head.text)).cloned()
    {
        // A script the command line itself just wrote.
        w.run_script(&script, stdin);
    }
    for a in args {
        check_path_word(w, &a.text, shown);
    }
    check_credential_read(w, name, args, shown);
    if prints_stored_credential(name, args) {
        w.deny(
            Family::Exfiltration,
            format!("`{shown}` prints a stored credential."),
        );
    }
    destruction::check(w, name, args, stdin, shown);
    env_dump::check(w, name, args, shown);
    exfiltration::check(w, name, args, stdin, shown);
    carried::check(w, name, args, stdin, shown);
    privilege::check(w, name, args, shown);
    for (family, reason) in denials(name, args) {
        w.deny(family, format!("`{shown}` {reason}."));
    }
    if let Some(out) = code::check(w, name, argv, stdin, shown) {
        return out;
    }
    effects(w, name, args);
    files::after_command(w, name, args, stdin, shown);
    if matches!(name, "read" | "mapfile" | "readarray") {
        read_variables(w, name, args, stdin);
    }
    produce(w, name, args, stdin)
}

/// `read`, `mapfile`: variables read from a file or a stream carry what it brought in; lines
/// known statically are the variables' values.
fn read_variables(w: &mut dyn Effects, name: &str, args: &[Arg], stdin: &Input) {
    // Variables read from a file or a stream carry what it brought in.
    let taint = stdin.taint();
    let p = parse_args(args, &Spec::gnu("adnNptuCcOs", &[]));
    for n in p.operands.iter().map(|a| a.text.clone()).chain(
        p.values(Some('a'), &[])
            .map(str::to_owned)
            .collect::<Vec<_>>(),
    ) {
        if !matches!(stdin, Input::Static(_)) {
            w.taint_var(&n, taint);
        }
    }
    // `read -r c <<< 'rm -rf ~'`: known lines, split over the names as read does; in a
    // loop any line can be the one read, so each is a possible value.
    if name == "read"
        && !p.has_short('a')
        && let Input::Static(text) = stdin
        && text.lines().count() <= 16
    {
        let names: Vec<&Arg> = p.operands.clone();
        let mut values: Vec<Vec<String>> = vec![Vec::new(); names.len()];
        for line in text.lines() {
            let mut words = line.split_whitespace();
            for (k, slot) in values.iter_mut().enumerate() {
                let value = if k + 1 == names.len() {
                    words.by_ref().collect::<Vec<_>>().join(" ")
                } else {
                    words.next().unwrap_or("").to_owned()
                };
                slot.push(value);
            }
        }
        for (n, vals) in names.iter().zip(values) {
            w.overwrite_var(&n.text, vals);
        }
    }
}

/// A wrapper given no command: `env` prints the environment, `sudo -s` opens a root shell.
pub(crate) fn wrapper_alone(
    w: &mut dyn Effects,
    name: &str,
    argv: &[Arg],
    _stdin: &Input,
) -> Output {
    let shown = display_argv(argv);
    match name {
        "env" => {
            w.deny(
                Family::EnvDump,
                format!("`{shown}` prints the whole environment, secrets included."),
            );
            Output {
                taint: Taint {
                    secret: true,
                    ..Taint::default()
                },
                ..Output::default()
            }
        }
        // Privilege was already recorded by the walk.
        _ => Output::unknown(),
    }
}

/// The programs of [`prints_stored_credential`] (besides `docker-credential-*`).
const CREDENTIAL_PRINTERS: &[&str] = &[
    "gh", "gcloud", "az", "aws", "npm", "pnpm", "yarn", "kubectl", "oc", "security", "pass",
    "gopass", "op", "vault", "heroku", "git",
];

/// Commands whose job is to print a stored credential: `gh auth token`, `gcloud auth
/// print-access-token`, `aws configure get aws_secret_access_key`, `kubectl get secret x -o
/// yaml`, `security find-generic-password -w`, `vault kv get`, `git credential fill` …
/// Listing or describing without the values (`kubectl get secrets`, `aws configure get
/// region`) stays allowed.
fn prints_stored_credential(name: &str, args: &[Arg]) -> bool {
    // Only these programs print one (the arms below).
    if !name.starts_with("docker-credential-") && !CREDENTIAL_PRINTERS.contains(&name) {
        return false;
    }
    let lower: Vec<String> = args.iter().map(|a| a.text.to_ascii_lowercase()).collect();
    let has = |flag: &str| {
        lower
            .iter()
            .any(|t| t == flag || t.starts_with(&format!("{flag}=")))
    };
    let ops: Vec<&str> = lower
        .iter()
        .map(String::as_str)
        .filter(|t| !t.starts_with('-'))
        .collect();
    let secretish = |k: &str| {
        [
            "secret",
            "token",
            "password",
            "passwd",
            "key",
            "auth",
            "credential",
        ]
        .iter()
        .any(|s| k.contains(s))
    };
    if name.starts_with("docker-credential-") {
        return ops.first() == Some(&"get");
    }
    match (name, &ops[..]) {
        ("gh", ["auth", "token", ..]) => true,
        // `gcloud auth print-access-token`, `gcloud auth application-default print-…`.
        ("gcloud", ["auth", rest @ ..]) => rest.iter().take(2).any(|t| t.starts_with("print-")),
        ("az", ["account", "get-access-token", ..]) => true,
        ("aws", ["configure", "get", k, ..]) => secretish(k),
        ("aws", ["configure", "export-credentials", ..])
        | ("aws", ["secretsmanager", "get-secret-value", ..]) => true,
        ("aws", ["ssm", "get-parameter" | "get-parameters", ..]) => has("--with-decryption"),
        ("npm" | "pnpm" | "yarn", ["config", "get", k, ..]) => secretish(k),
        ("kubectl" | "oc", ["get", res, ..]) if res.starts_with("secret") => {
            // Values appear only in a full output format; `-o name` or a table shows none.
            lower.windows(2).any(|w| {
                (w[0] == "-o" || w[0] == "--output")
                    && !w[1].starts_with("name")
                    && !w[1].starts_with("wide")
            }) || lower.iter().any(|t| {
                [
                    "-oyaml",
                    "-ojson",
                    "-ojsonpath",
                    "-ogo-template",
                    "--output=yaml",
                    "--output=json",
                ]
                .iter()
                .any(|f| t.starts_with(f))
            })
        }
        ("security", [sub, ..]) if sub.starts_with("find-") && sub.ends_with("-password") => {
            // `-w` prints the password alone, `-g` with the item (`-wa x` clusters them).
            lower
                .iter()
                .any(|t| t.starts_with('-') && !t.starts_with("--") && t[1..].contains(['w', 'g']))
        }
        ("pass" | "gopass", ["show", ..])
        | ("op", ["read", ..])
        | ("op", ["item", "get", ..])
        | ("vault", ["read", ..])
        | ("vault", ["kv", "get", ..])
        | ("heroku", ["auth:token", ..])
        | ("git", ["credential", "fill", ..]) => true,
        _ => false,
    }
}

/// Reading a host credential file (`cat ~/.ssh/id_rsa`, `cp ~/.aws/credentials .`,
/// `tar czf k.tgz ~/.ssh`) or exporting secret keys: the first step of carrying them off.
fn check_credential_read(w: &mut dyn Effects, name: &str, args: &[Arg], shown: &str) {
    // `curl file:///home/u/.netrc`: a downloader reading a local file.
    if is_downloader(name) {
        for a in args {
            if let Some(path) = a.text.strip_prefix("file://")
                && let Some(file) = target::host_credential(path, w.cwd())
            {
                w.deny(
                    Family::Exfiltration,
                    format!("`{shown}` reads the host credential `{file}`, outside the workspace."),
                );
                return;
            }
        }
    }
    let copies = matches!(name, "cp" | "scp" | "rsync" | "install" | "ln" | "mv");
    if !is_file_reader(name) && !copies {
        return;
    }
    if name == "gpg" && args.iter().any(|a| a.text.starts_with("--export-secret")) {
        w.deny(
            Family::Exfiltration,
            format!("`{shown}` exports private keys from the keyring."),
        );
        return;
    }
    let operands: Vec<&Arg> = args.iter().filter(|a| !a.text.starts_with('-')).collect();
    // The last operand of a copy is where it writes.
    let read = if copies && operands.len() > 1 {
        &operands[..operands.len() - 1]
    } else {
        &operands[..]
    };
    for op in read {
        let path = op.text.strip_prefix('@').unwrap_or(&op.text);
        if let Some(file) = target::host_credential(path, w.cwd()) {
            w.deny(
                Family::Exfiltration,
                format!("`{shown}` reads the host credential `{file}`, outside the workspace."),
            );
            return;
        }
    }
}

/// Paths in words that matter whatever the command: the environment of a process and
/// bash's network pseudo-files.
fn check_path_word(w: &mut dyn Effects, text: &str, shown: &str) {
    if is_proc_environ(text) {
        w.deny(
            Family::EnvDump,
            format!("`{shown}` reads a process environment (`{text}`)."),
        );
    }
    if is_dev_net(text) {
        w.deny(
            Family::Exfiltration,
            format!("`{shown}` opens a network connection through `{text}`."),
        );
    }
}

/// A redirect target: network pseudo-files, devices, process environments.
pub(crate) fn check_redirect(
    w: &mut dyn Effects,
    path: &str,
    reads: bool,
    writes: bool,
    truncates: bool,
) {
    if truncates && let Some(file) = target::home_file(path, w.cwd()) {
        w.deny(
            Family::Destruction,
            format!("The redirect to `{path}` empties `{file}`, a file in the home directory outside the workspace."),
        );
    }
    if is_dev_net(path) {
        w.deny(
            Family::Exfiltration,
            format!("The redirect to `{path}` opens a network connection."),
        );
    }
    if reads && let Some(file) = target::host_credential(path, w.cwd()) {
        w.deny(
            Family::Exfiltration,
            format!("The redirect from `{path}` reads the host credential `{file}`, outside the workspace."),
        );
    }
    if writes && privilege::grants_root(path) {
        w.deny(
            Family::Privilege,
            format!("The redirect to `{path}` rewrites a file that decides who is root."),
        );
    }
    if writes && files::controls_host(path) {
        w.deny(
            Family::HostAvailability,
            format!("The redirect to `{path}` writes a kernel control file of the host."),
        );
    }
    if writes && target::is_device(path) {
        w.deny(
            Family::Destruction,
            format!("The redirect to `{path}` overwrites a disk device."),
        );
    }
    if reads && is_proc_environ(path) {
        w.deny(
            Family::EnvDump,
            format!("The redirect from `{path}` reads a process environment."),
        );
    }
}

fn is_proc_environ(text: &str) -> bool {
    text.contains("/proc/") && text.trim_end_matches('/').ends_with("/environ")
}

fn is_dev_net(text: &str) -> bool {
    text.contains("/dev/tcp/") || text.contains("/dev/udp/")
}

/// What a command changes for the rest of the script: directory and variables.
fn effects(w: &mut dyn Effects, name: &str, args: &[Arg]) {
    match name {
        "cd" | "pushd" => effect_cd(w, args),
        "popd" => w.set_cwd(Cwd::Unknown),
        "export" | "declare" | "typeset" | "local" | "readonly" => effect_export(w, args),
        "read" | "mapfile" | "readarray" | "getopts" => effect_read(w, args),
        "test" | "[" | "let" | "unset" => {
            for a in args {
                w.run_subscript(&a.text);
            }
        }
        // `hash -p /bin/rm ls`: `ls` now runs `/bin/rm`.
        "hash" => {
            let p = parse_args(args, &Spec::posix("pt", &[]));
            if let Some(path) = p.values(Some('p'), &[]).next() {
                let target = vec![program_name(path).to_owned()];
                for n in &p.operands {
                    w.alias(&n.text, (!n.dynamic).then(|| target.clone()));
                }
            }
        }
        "printf" => effect_printf(w, args),
        _ => {}
    }
}

/// `cd`, `pushd`: the working directory the rest of the script sees.
fn effect_cd(w: &mut dyn Effects, args: &[Arg]) {
    let operands: Vec<&Arg> = args
        .iter()
        .filter(|a| !a.text.starts_with('-') || a.text == "-")
        .collect();
    let cwd = match operands.first() {
        None => Cwd::Home(Vec::new()),
        Some(a) if a.dynamic || a.text == "-" => Cwd::Unknown,
        Some(a) => change_dir(w.cwd(), &a.text),
    };
    w.set_cwd(cwd);
}

/// `export`, `declare`, …: the variables set, array assignments, namerefs and subscripts.
fn effect_export(w: &mut dyn Effects, args: &[Arg]) {
    let nameref = args
        .iter()
        .any(|a| a.text.starts_with('-') && a.text.contains('n') && !a.text.starts_with("--"));
    for a in args {
        w.run_subscript(&a.text);
        // `declare -n r=x`: `$r` is whatever `x` holds when used, which the walk does
        // not follow; a reference to the hash table rebinds command names.
        if nameref && let Some((n, target)) = a.text.split_once('=') {
            if target.starts_with("BASH_CMDS") || target.starts_with("BASH_ALIASES") {
                w.deny(
                    Family::DynamicCommand,
                    format!(
                        "`{}` rebinds command names through a reference to bash's hash table.",
                        display_argv(args)
                    ),
                );
            }
            w.set_var(n, None);
            continue;
        }
        if let Some((n, v)) = a.text.split_once('=')
            && is_assignment(&a.text)
        {
            // `declare -a a=(rm -rf /)`: an array assignment, as bash reads it.
            if !a.dynamic && v.starts_with('(') && v.ends_with(')') {
                w.run_script(&a.text, &Input::Inherited);
                continue;
            }
            let value = if a.dynamic { None } else { Some(v.to_owned()) };
            if carried::runs_as_command(n) && !a.dynamic {
                w.run_code(&Arg::literal(v), &Input::Inherited, &display_argv(args));
            }
            w.set_var(n.trim_end_matches('+'), value);
        }
    }
}

/// `read`, `mapfile`, …: variables now unknown.
fn effect_read(w: &mut dyn Effects, args: &[Arg]) {
    let p = parse_args(args, &Spec::gnu("adnNptu", &[]));
    let names: Vec<String> = p
        .operands
        .iter()
        .map(|a| a.text.clone())
        .chain(p.values(Some('a'), &[]).map(str::to_owned))
        .collect();
    for n in names {
        w.set_var(&n, None);
    }
}

/// `printf -v`: the variable set to the formatted text.
fn effect_printf(w: &mut dyn Effects, args: &[Arg]) {
    for a in args {
        w.run_subscript(&a.text);
    }
    let p = parse_args(args, &Spec::posix("v", &[]));
    let names: Vec<String> = p.values(Some('v'), &[]).map(str::to_owned).collect();
    // `printf -v c 'rm -rf %s' /` stores the formatted text.
    let rest = &args[p.rest.min(args.len())..];
    let value = match rest.split_first() {
        Some((format, values)) if !rest.iter().any(|a| a.dynamic) => printf(&format.text, values),
        _ => None,
    };
    for n in names {
        w.set_var(&n, value.clone());
    }
}

fn change_dir(cwd: &Cwd, dir: &str) -> Cwd {
    let split = |s: &str, start: Vec<String>| -> Option<Vec<String>> {
        let mut comps = start;
        for c in s.split('/') {
            match c {
                "" | "." => {}
                ".." => {
                    comps.pop()?;
                }
                other => comps.push(other.to_owned()),
            }
        }
        Some(comps)
    };
    if let Some(rest) = dir.strip_prefix('/') {
        return split(rest, Vec::new()).map_or(Cwd::Absolute(Vec::new()), Cwd::Absolute);
    }
    if dir == "~" || dir.starts_with("~/") {
        return split(&dir[1..], Vec::new()).map_or(Cwd::Absolute(vec!["home".into()]), Cwd::Home);
    }
    if dir.starts_with('~') {
        return Cwd::Unknown;
    }
    match cwd {
        Cwd::Root => match split(dir, Vec::new()) {
            Some(c) if c.is_empty() => Cwd::Root,
            Some(c) => Cwd::Workspace(c),
            None => above(&[], dir),
        },
        Cwd::Workspace(start) => match split(dir, start.clone()) {
            Some(c) if c.is_empty() => Cwd::Root,
            Some(c) => Cwd::Workspace(c),
            None => above(start, dir),
        },
        Cwd::Above(levels, start) => match split(dir, start.clone()) {
            Some(c) => Cwd::Above(*levels, c),
            None => Cwd::Unknown,
        },
        Cwd::Home(start) => {
            split(dir, start.clone()).map_or(Cwd::Absolute(vec!["home".into()]), Cwd::Home)
        }
        Cwd::Absolute(start) => {
            split(dir, start.clone()).map_or(Cwd::Absolute(Vec::new()), Cwd::Absolute)
        }
        Cwd::Unknown => Cwd::Unknown,
    }
}

/// The directory `dir` relative to `start` (under the workspace root) when it climbs above
/// the root.
fn above(start: &[String], dir: &str) -> Cwd {
    let mut comps = start.to_vec();
    let mut levels = 0;
    for c in dir.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                if comps.pop().is_none() {
                    levels += 1;
                }
            }
            other => comps.push(other.to_owned()),
        }
    }
    Cwd::Above(levels, comps)
}

/// What a command writes to stdout, as far as the rules care.
/// What the arguments of a command carry, merged.
fn args_taint(args: &[Arg]) -> Taint {
    let mut taint = Taint::default();
    for a in args {
        taint.merge(a.taint);
    }
    taint
}

/// The output of a command that passes on what its input and arguments carry.
fn passthrough(stdin: &Input, args: &[Arg]) -> Output {
    let mut taint = stdin.taint();
    taint.merge(args_taint(args));
    Output {
        taint,
        text: None,
        files_only: matches!(stdin, Input::File(_)),
        listed: None,
    }
}

fn produce(w: &mut dyn Effects, name: &str, args: &[Arg], stdin: &Input) -> Output {
    match name {
        "echo" => output_echo(args),
        "printf" => output_printf(args),
        "true" | ":" => Output::text(String::new()),
        "ls" if args.iter().all(|a| a.text.starts_with('-')) => Output {
            listed: Some(vec!["*".to_owned()]),
            ..Output::default()
        },
        "find" => output_find(args),
        "pwd" => Output::text(".\n".to_owned()),
        // Path helpers, resolved lexically on a known operand: `$(dirname "$PWD")` is `..`,
        // `$(realpath ~)` is the home directory.
        "dirname" | "realpath" | "readlink" if !args.iter().any(|a| a.dynamic) => {
            output_dirname(name, args, stdin)
        }
        // `$(git rev-parse --show-toplevel)` is the workspace root.
        "git" if args.iter().any(|a| a.text == "--show-toplevel") => match w.cwd() {
            Cwd::Root => Output::text(".\n".to_owned()),
            Cwd::Workspace(down) => Output::text(format!("{}\n", vec![".."; down.len()].join("/"))),
            _ => passthrough(stdin, args),
        },
        // `git archive`, `git bundle create -`, `docker save`: the repository or an image on
        // stdout, as file contents.
        "git" | "docker" | "podman"
            if args
                .iter()
                .any(|a| matches!(a.text.as_str(), "archive" | "bundle" | "save" | "export"))
                && !args.iter().any(|a| {
                    a.text == "-o" || a.text.starts_with("--output") || a.text.ends_with(".bundle")
                }) =>
        {
            let mut out = passthrough(stdin, args);
            out.taint.secret = true;
            out.files_only = true;
            out
        }
        "whoami" | "id" | "hostname" | "uname" | "groups" | "logname" => Output {
            taint: Taint {
                secret: true,
                ..Taint::default()
            },
            ..Output::default()
        },
        "cat" | "base64" | "rev" | "xxd" if args.iter().all(|a| a.text.starts_with('-')) => {
            output_cat(name, args, stdin)
        }
        "env" | "printenv" => Output {
            taint: Taint {
                secret: true,
                ..Taint::default()
            },
            ..Output::default()
        },
        // `curl … | tee i.sh`: the files tee writes hold the download.
        "tee" if matches!(stdin, Input::Stream(o) if o.taint.download) => {
            for a in args.iter().filter(|a| !a.text.starts_with('-')) {
                w.downloaded_mut().insert(plain_path(&a.text));
            }
            passthrough(stdin, args)
        }
        _ if is_downloader(name) => {
            code::note_download_files(w, name, args);
            let mut out = passthrough(stdin, args);
            out.taint.download = true;
            out.files_only = false;
            out
        }
        _ if is_file_reader(name) => output_reader(name, args, stdin),
        _ => passthrough(stdin, args),
    }
}

/// What `dirname`, `realpath` and `readlink` print, resolved lexically.
fn output_dirname(name: &str, args: &[Arg], stdin: &Input) -> Output {
    let ops: Vec<&str> = args
        .iter()
        .map(|a| a.text.as_str())
        .filter(|t| !t.starts_with('-'))
        .collect();
    if name == "readlink"
        && !args.iter().any(|a| {
            a.text.starts_with("-f")
                || a.text.starts_with("-e")
                || a.text.starts_with("-m")
                || a.text == "--canonicalize"
        })
    {
        return passthrough(stdin, args);
    }
    let text: String = ops
        .iter()
        .map(|p| {
            let p = if name == "dirname" {
                lexical_dirname(p)
            } else {
                (*p).to_owned()
            };
            format!("{p}\n")
        })
        .collect();
    if ops.is_empty() {
        passthrough(stdin, args)
    } else {
        Output::text(text)
    }
}

/// What `cat`, `base64 -d`, `rev` and `xxd -r` print for an input the walk knows.
fn output_cat(name: &str, args: &[Arg], stdin: &Input) -> Output {
    let decode = args
        .iter()
        .any(|a| matches!(a.text.as_str(), "-d" | "--decode" | "-D" | "-di" | "-id"));
    let reverse_hex = name == "xxd" && args.iter().any(|a| a.text.starts_with("-r"));
    let text = match stdin {
        Input::Static(t) => match name {
            "cat" => Some(t.clone()),
            "base64" if decode => decode_base64(t),
            "rev" => Some(
                t.lines()
                    .map(|l| l.chars().rev().collect::<String>() + "\n")
                    .collect(),
            ),
            "xxd" if reverse_hex => decode_hex(t),
            _ => None,
        },
        Input::Stream(o) if name == "cat" => return o.clone(),
        _ => None,
    };
    match text {
        Some(t) => Output::text(t),
        None => passthrough(stdin, args),
    }
}

/// What a file reader prints: file contents, marked as such.
fn output_reader(name: &str, args: &[Arg], stdin: &Input) -> Output {
    let mut operands: Vec<&Arg> = args.iter().filter(|a| !a.text.starts_with('-')).collect();
    // The first operand of a filter language is its program, not a file
    // (`jq -r .url`, `grep KEY`), unless the program came from an option.
    let program_first = has_role(name, Role::Filter)
        && !args.iter().any(|a| {
            matches!(
                a.text.as_str(),
                "-e" | "-f" | "--expression" | "--file" | "--from-file"
            )
        });
    if program_first && !operands.is_empty() {
        operands.remove(0);
    }
    let mut out = passthrough(stdin, args);
    let exports_keys = name == "gpg" && args.iter().any(|a| a.text.starts_with("--export"));
    if !operands.is_empty() || matches!(stdin, Input::File(_)) || exports_keys {
        out.taint.secret = true;
    }
    out.files_only = name == "cat"
        && (operands.iter().all(|a| !a.dynamic)
            && (!operands.is_empty() || matches!(stdin, Input::File(_))));
    if name == "cat"
        && operands.is_empty()
        && let Input::Stream(o) = stdin
    {
        out.files_only = o.files_only;
    }
    out
}

/// What `echo` prints.
fn output_echo(args: &[Arg]) -> Output {
    let mut newline = true;
    let mut escapes = false;
    let mut i = 0;
    while i < args.len() {
        let t = &args[i].text;
        if t.len() > 1 && t.starts_with('-') && t[1..].chars().all(|c| "neE".contains(c)) {
            newline &= !t.contains('n');
            escapes |= t.contains('e');
            i += 1;
        } else {
            break;
        }
    }
    let mut text = args[i..]
        .iter()
        .map(|a| a.text.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    if escapes {
        text = decode_ansi_c(&text);
    }
    if newline {
        text.push('\n');
    }
    Output {
        taint: args_taint(args),
        text: (!args.iter().any(|a| a.dynamic)).then_some(text),
        files_only: false,
        listed: None,
    }
}

/// What `printf` prints.
fn output_printf(args: &[Arg]) -> Output {
    let text = if args.iter().any(|a| a.dynamic) || args.is_empty() || args[0].text.starts_with('-')
    {
        None
    } else {
        printf(&args[0].text, &args[1..])
    };
    Output {
        taint: args_taint(args),
        text,
        files_only: false,
        listed: None,
    }
}

/// The paths `find` lists.
fn output_find(args: &[Arg]) -> Output {
    let parts = destruction::FindParts::parse(args);
    let listed = parts
        .roots
        .iter()
        .map(|r| {
            if parts.has_filter {
                format!("{}/{{}}", r.text.trim_end_matches('/'))
            } else {
                r.text.clone()
            }
        })
        .collect();
    Output {
        listed: Some(listed),
        ..Output::default()
    }
}

/// `dirname` as it acts on the path the walk knows: `.` (the working directory) has `..` as
/// its parent.
fn lexical_dirname(path: &str) -> String {
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return "/".to_owned();
    }
    if trimmed == "." {
        return "..".to_owned();
    }
    if trimmed == "~" {
        return "/home".to_owned();
    }
    match trimmed.rsplit_once('/') {
        Some(("", _)) => "/".to_owned(),
        Some((dir, _)) => dir.to_owned(),
        None => ".".to_owned(),
    }
}

fn decode_hex(text: &str) -> Option<String> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = digits
        .chunks(2)
        .map(|p| {
            let s = std::str::from_utf8(p).ok()?;
            u8::from_str_radix(s, 16).ok()
        })
        .collect();
    String::from_utf8(bytes?).ok()
}

/// `printf` with `%s`/`%b`/`%d`/`%%` only; `None` for anything else.
fn printf(format: &str, args: &[Arg]) -> Option<String> {
    let format = decode_ansi_c(format);
    let mut out = String::new();
    let mut next = 0;
    let mut rounds = 0;
    loop {
        let mut chars = format.chars();
        let mut used = false;
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some('%') => out.push('%'),
                Some('s') | Some('d') => {
                    used = true;
                    if let Some(a) = args.get(next) {
                        out.push_str(&a.text);
                    }
                    next += 1;
                }
                Some('b') => {
                    used = true;
                    if let Some(a) = args.get(next) {
                        out.push_str(&decode_ansi_c(&a.text));
                    }
                    next += 1;
                }
                _ => return None,
            }
        }
        rounds += 1;
        if !used || next >= args.len() || rounds > 64 {
            return Some(out);
        }
    }
}
