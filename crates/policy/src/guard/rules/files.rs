//! The file-content model: what a command leaves in a file (known text, a download, or
//! something the guard cannot see), and the files that run later without being named on a
//! command line — shell start-up files, crontabs, service units, autostart entries, Python
//! start-up hooks, git hooks, build files (`Makefile`, `package.json` scripts, `conftest.py`)
//! and the files that grant access to the account (`authorized_keys`).
//!
//! The classification is pure ([`autorun`]); [`on_write`] applies it to the walk.

use super::super::Family;
use super::super::command::{Spec, parse_args, program_name};
use super::super::effects::{Cwd, Effects};
use super::super::normalize::{Arg, Input};
use super::super::programs;
use super::code::judge_code_text;
use super::target::plain_path;

/// How a file that runs later is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Autorun {
    /// Grants access to the account or preloads code into every program.
    Access,
    /// Shell code (start-up files, hooks, `.envrc`, cron scripts).
    Shell,
    /// Crontab lines: a schedule, then a shell command.
    Crontab,
    /// `Exec*=` lines of a service unit or an autostart entry.
    Unit,
    /// A Makefile: recipe lines are shell code.
    Make,
    /// `package.json`: the `scripts` values are shell code.
    Npm,
    /// Python that runs on start-up or under a test runner.
    Python,
}

/// The home-relative part of a path (`~/.bashrc`, `$HOME/.bashrc`, `/root/.bashrc`,
/// `/home/u/.bashrc` → `.bashrc`).
fn in_home(path: &str) -> Option<&str> {
    for prefix in ["~/", "$HOME/", "${HOME}/", "/root/"] {
        if let Some(rest) = path.strip_prefix(prefix) {
            return Some(rest);
        }
    }
    let rest = path.strip_prefix("/home/")?;
    rest.split_once('/').map(|(_, r)| r)
}

/// What a file written at `path` becomes: code something runs later, or an access grant.
pub(crate) fn autorun(path: &str) -> Option<Autorun> {
    let p = plain_path(path);
    let base = p.rsplit('/').next().unwrap_or(&p);
    if let Some(kind) = in_home(&p).and_then(home_autorun) {
        return Some(kind);
    }
    system_autorun(&p).or_else(|| workspace_autorun(base))
}

/// A file under the home directory (`h`, relative to it) that runs or grants access.
fn home_autorun(h: &str) -> Option<Autorun> {
    const RC: &[&str] = &[
        ".bashrc",
        ".bash_profile",
        ".bash_login",
        ".bash_logout",
        ".profile",
        ".zshrc",
        ".zshenv",
        ".zprofile",
        ".zlogin",
        ".zlogout",
        ".kshrc",
        ".mkshrc",
        ".cshrc",
        ".tcshrc",
        ".login",
        ".xprofile",
        ".xinitrc",
        ".xsessionrc",
        ".xsession",
        ".config/fish/config.fish",
    ];
    if RC.contains(&h) || h.starts_with(".config/fish/conf.d/") {
        return Some(Autorun::Shell);
    }
    if h == ".ssh/authorized_keys"
        || h == ".ssh/authorized_keys2"
        || h == ".ssh/config"
        || h == ".ssh/rc"
    {
        return Some(Autorun::Access);
    }
    if h.starts_with(".config/systemd/user/")
        || h.starts_with(".config/autostart/")
        || h.starts_with(".local/share/systemd/user/")
    {
        return Some(Autorun::Unit);
    }
    None
}

/// A system file that runs (start-up files, cron, units) or grants access.
fn system_autorun(p: &str) -> Option<Autorun> {
    let base = p.rsplit('/').next().unwrap_or(p);
    if p == "/etc/ld.so.preload" || p.ends_with("/.ssh/authorized_keys") {
        return Some(Autorun::Access);
    }
    if matches!(
        p,
        "/etc/profile"
            | "/etc/bash.bashrc"
            | "/etc/zshrc"
            | "/etc/zsh/zshrc"
            | "/etc/environment"
            | "/etc/rc.local"
    ) || p.starts_with("/etc/profile.d/")
        || p.starts_with("/etc/cron.hourly/")
        || p.starts_with("/etc/cron.daily/")
        || p.starts_with("/etc/cron.weekly/")
        || p.starts_with("/etc/cron.monthly/")
        || p.contains(".git/hooks/")
        || base == ".envrc"
    {
        return Some(Autorun::Shell);
    }
    if p == "/etc/crontab" || p.starts_with("/etc/cron.d/") || p.starts_with("/var/spool/cron/") {
        return Some(Autorun::Crontab);
    }
    if p.starts_with("/etc/systemd/")
        || p.starts_with("/lib/systemd/")
        || p.starts_with("/usr/lib/systemd/")
        || p.starts_with("/etc/xdg/autostart/")
    {
        return Some(Autorun::Unit);
    }
    None
}

/// A workspace file a tool runs: makefiles, `package.json`, Python start-up and test files.
fn workspace_autorun(base: &str) -> Option<Autorun> {
    if matches!(base, "Makefile" | "makefile" | "GNUmakefile") || base.ends_with(".mk") {
        return Some(Autorun::Make);
    }
    if base == "package.json" {
        return Some(Autorun::Npm);
    }
    if base.ends_with(".pth")
        || matches!(
            base,
            "sitecustomize.py" | "usercustomize.py" | "conftest.py" | "setup.py" | "noxfile.py"
        )
    {
        return Some(Autorun::Python);
    }
    None
}

/// The shell lines a file of this kind runs.
fn shell_lines(kind: Autorun, content: &str) -> Vec<String> {
    match kind {
        Autorun::Shell => vec![content.to_owned()],
        Autorun::Crontab => content
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .filter_map(|l| {
                if l.starts_with('@') {
                    l.split_once(char::is_whitespace).map(|(_, c)| c.to_owned())
                } else if l.split('=').next().is_some_and(|k| !k.contains(' ')) && l.contains('=') {
                    None
                } else {
                    let fields: Vec<&str> = l.splitn(6, char::is_whitespace).collect();
                    fields.get(5).map(|c| (*c).to_owned())
                }
            })
            .collect(),
        Autorun::Unit => content
            .lines()
            .filter_map(|l| {
                let (k, v) = l.trim().split_once('=')?;
                k.trim()
                    .starts_with("Exec")
                    .then(|| v.trim_start_matches(['-', '@', '+', '!', ':']).to_owned())
            })
            .collect(),
        Autorun::Make => make_recipes(content),
        Autorun::Npm => npm_scripts(content),
        Autorun::Access | Autorun::Python => Vec::new(),
    }
}

/// The command lines program text hands to a shell: the first string literal after
/// `system(`, `popen(`, `check_output(`, `run(`, `call(`, `Popen(`, `exec(`, `spawn(`.
pub(crate) fn shell_outs(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for call in [
        "system(",
        "popen(",
        "check_output(",
        "run(",
        "call(",
        "Popen(",
        "execSync(",
        "spawn(",
    ] {
        for (at, _) in code.match_indices(call) {
            let rest = &code[at + call.len()..];
            let rest = rest.trim_start().trim_start_matches('[');
            let Some(q) = rest
                .chars()
                .next()
                .filter(|c| matches!(c, '"' | '\'' | '`'))
            else {
                continue;
            };
            if let Some(end) = rest[1..].find(q) {
                out.push(rest[1..1 + end].to_owned());
            }
        }
    }
    out
}

/// The recipe lines of a Makefile (tab-led lines, and what follows `;` on a rule line).
pub(crate) fn make_recipes(content: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in content.lines() {
        let recipe = if let Some(r) = line.strip_prefix('\t') {
            Some(r)
        } else if line.contains(':') && !line.contains(":=") {
            line.split_once(';').map(|(_, r)| r)
        } else {
            None
        };
        if let Some(r) = recipe {
            let r = r.trim_start_matches(['@', '-', '+', ' ']);
            if !r.trim().is_empty() {
                out.push(r.replace("$$", "$"));
            }
        }
    }
    out
}

/// The `scripts` of a `package.json`.
fn npm_scripts(content: &str) -> Vec<String> {
    let Ok(json) = serde_json::from_str::<serde_json::Value>(content) else {
        return vec![content.to_owned()];
    };
    json.get("scripts")
        .and_then(|s| s.as_object())
        .map(|m| {
            m.values()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A command wrote `content` (`None`: unknown) or a download to `path`: judge what that file
/// will run.
pub(crate) fn on_write(
    w: &mut dyn Effects,
    path: &str,
    content: Option<&str>,
    download: bool,
    shown: &str,
) {
    let Some(kind) = autorun(path) else {
        return;
    };
    let file = plain_path(path);
    if kind == Autorun::Access {
        w.deny(
            Family::Persistence,
            format!("`{shown}` writes `{file}`, which grants access to this account or loads code into every program."),
        );
        return;
    }
    let home_or_system = in_home(&file).is_some() || file.starts_with('/');
    if download {
        w.deny(
            Family::RemoteExec,
            format!("`{shown}` puts a download into `{file}`, which runs later as code."),
        );
        return;
    }
    let Some(text) = content else {
        if home_or_system {
            w.deny(
                Family::Persistence,
                format!("`{shown}` writes commands the guard cannot see into `{file}`, which runs again later."),
            );
        }
        return;
    };
    if kind == Autorun::Python {
        if !judge_code_text(w, &Arg::literal(text), shown) {
            for line in shell_outs(text) {
                w.run_script(&line, &Input::Inherited);
            }
        }
        return;
    }
    if kind == Autorun::Shell
        && home_or_system
        && (text.contains("LD_PRELOAD") || text.contains("LD_AUDIT"))
    {
        w.deny(
            Family::Persistence,
            format!("`{shown}` makes every later shell preload a library through `{file}`."),
        );
    }
    for line in shell_lines(kind, text) {
        w.run_script(&line, &Input::Inherited);
    }
}

/// Kernel control files whose writing takes the host down or changes it for everyone
/// (`/proc/sysrq-trigger`, `/proc/sys/…`, `/sys/power/state`).
pub(crate) fn controls_host(path: &str) -> bool {
    path == "/proc/sysrq-trigger"
        || path.starts_with("/proc/sys/")
        || path.starts_with("/sys/power/")
        || path.starts_with("/sys/class/")
        || path.starts_with("/sys/kernel/")
}

/// What a command's input holds: known text, and whether it is a download.
fn content_of(w: &dyn Effects, input: &Input) -> (Option<String>, bool) {
    match input {
        Input::Static(t) => (Some(t.clone()), false),
        Input::Stream(o) => (o.text.clone(), o.taint.download),
        Input::File(p) => {
            let f = plain_path(p);
            (w.written().get(&f).cloned(), w.is_downloaded(&f))
        }
        Input::Inherited => (None, false),
    }
}

/// What the file or stream an operand names holds.
fn content_of_arg(w: &dyn Effects, a: &Arg, stdin: &Input) -> (Option<String>, bool) {
    if let Some(out) = &a.proc_sub {
        return (out.text.clone(), out.taint.download);
    }
    match a.text.as_str() {
        "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0" | "-" => content_of(w, stdin),
        t => {
            let f = plain_path(t);
            (w.written().get(&f).cloned(), w.is_downloaded(&f))
        }
    }
}

/// Record that `path` now holds `content` (or a download), and judge what it will run.
fn record(w: &mut dyn Effects, path: &str, content: Option<String>, download: bool, shown: &str) {
    if controls_host(path) {
        w.deny(
            Family::HostAvailability,
            format!("`{shown}` writes `{path}`, a kernel control file of the host."),
        );
    }
    let file = plain_path(path);
    if download {
        w.downloaded_mut().insert(file.clone());
    }
    if let Some(text) = &content
        && w.written().len() < 64
    {
        w.written_mut().insert(file, text.clone());
    }
    on_write(w, path, content.as_deref(), download, shown);
}

/// A program in a system binary directory (`/bin/rm`, `/usr/bin/bash`).
fn is_system_binary(path: &str) -> bool {
    [
        "/bin/",
        "/sbin/",
        "/usr/bin/",
        "/usr/sbin/",
        "/usr/local/bin/",
        "/usr/local/sbin/",
    ]
    .iter()
    .any(|d| path.starts_with(d))
}

/// Writers other than a redirect (`tee`, `dd of=`, `cp`, `install`, `ln`, `mv`), archives
/// unpacked from the network, repositories cloned from an address, and the programs that run
/// files a download put in place.
pub(crate) fn after_command(
    w: &mut dyn Effects,
    name: &str,
    args: &[Arg],
    stdin: &Input,
    shown: &str,
) {
    match name {
        "tee" => {
            let append = args.iter().any(|a| a.text == "-a" || a.text == "--append");
            let (content, download) = content_of(w, stdin);
            for op in args.iter().filter(|a| !a.text.starts_with('-')) {
                let before = append
                    .then(|| w.written().get(&plain_path(&op.text)).cloned())
                    .flatten();
                let text = content.clone().map(|c| before.unwrap_or_default() + &c);
                record(w, &op.text, text, download, shown);
            }
        }
        "dd" => dd(w, args, stdin, shown),
        "cp" | "install" | "ln" | "mv" => copy(w, args, stdin, shown),
        "tar" | "bsdtar" | "unzip" | "7z" | "7za" | "unrar" | "cpio" => {
            let from_stdin = matches!(stdin, Input::Stream(o) if o.taint.download);
            let from_file = args.iter().any(|a| w.is_downloaded(&plain_path(&a.text)));
            if from_stdin || from_file {
                w.set_extracted_download(true);
            }
        }
        "git" => clone(w, args),
        // Editors and pagers that run `!cmd` lines: `ed f <<< '!cmd'`, `less '+!cmd'`.
        "ed" | "red" | "ex" => {
            if let (Some(text), _) = content_of(w, stdin) {
                for line in text.lines() {
                    if let Some(code) = line.trim_start().strip_prefix('!') {
                        w.run_script(code, &Input::Inherited);
                    }
                }
            }
        }
        "less" | "more" | "most" => {
            for a in args {
                if let Some(code) = a.text.strip_prefix("+!") {
                    w.run_script(code, &Input::Inherited);
                }
            }
        }
        _ => {}
    }
    consumers(w, name, args, stdin, shown);
}

/// `dd if=… of=…`: the output file gets the input's content; an endless input fills the disk.
fn dd(w: &mut dyn Effects, args: &[Arg], stdin: &Input, shown: &str) {
    let value = |key: &str| {
        args.iter()
            .find_map(|a| a.text.strip_prefix(key).map(|v| (a, v)))
    };
    let endless = value("if=")
        .is_some_and(|(_, v)| matches!(v, "/dev/zero" | "/dev/urandom" | "/dev/random"))
        && value("count=").is_none();
    if let Some((_, of)) = value("of=")
        && endless
        && !of.starts_with("/dev/")
    {
        w.deny(
            Family::HostAvailability,
            format!("`{shown}` writes without end until the disk is full."),
        );
    }
    if let Some((_, of)) = value("of=") {
        let (content, download) = match value("if=") {
            Some((a, v)) => content_of_arg(
                w,
                &Arg {
                    text: v.to_owned(),
                    ..a.clone()
                },
                stdin,
            ),
            None => content_of(w, stdin),
        };
        record(w, of, content, download, shown);
    }
}

fn copy(w: &mut dyn Effects, args: &[Arg], stdin: &Input, shown: &str) {
    let p = parse_args(
        args,
        &Spec::gnu(
            "mogtS",
            &["mode", "owner", "group", "target-directory", "suffix"],
        ),
    );
    let Some((dst, srcs)) = p.operands.split_last() else {
        return;
    };
    for src in srcs {
        // `install -m 000 /dev/null ~/.bashrc`: an empty file over one in the home directory.
        if src.text == "/dev/null"
            && let Some(file) = super::target::home_file(&dst.text, w.cwd())
        {
            w.deny(
                Family::Destruction,
                format!("`{shown}` empties `{file}`, a file in the home directory outside the workspace."),
            );
        }
        if src.dynamic {
            w.alias(&dst.text, None);
        } else if is_system_binary(&src.text) {
            w.alias(&dst.text, Some(vec![program_name(&src.text).to_owned()]));
        }
        let (content, download) = content_of_arg(w, src, stdin);
        if content.is_some() || download || src.text.starts_with("/tmp/") || src.dynamic {
            record(w, &dst.text, content, download, shown);
        }
    }
}

/// `git clone ADDRESS [DIR]`: the directory holds code from that address.
fn clone(w: &mut dyn Effects, args: &[Arg]) {
    let p = parse_args(
        args,
        &Spec::gnu(
            "bocju",
            &[
                "branch",
                "origin",
                "config",
                "depth",
                "jobs",
                "template",
                "reference",
                "separate-git-dir",
                "upload-pack",
                "filter",
            ],
        ),
    );
    let ops: Vec<&str> = p.operands.iter().map(|a| a.text.as_str()).collect();
    let Some(k) = ops.iter().position(|o| *o == "clone") else {
        return;
    };
    let Some(url) = ops.get(k + 1).filter(|u| programs::is_address(u)) else {
        return;
    };
    let dir = match ops.get(k + 2) {
        Some(d) => (*d).to_owned(),
        None => program_name(url).trim_end_matches(".git").to_owned(),
    };
    w.downloaded_mut().insert(plain_path(&dir));
}

/// The workspace directory the script is in, relative to the root.
fn cwd_prefix(cwd: &Cwd) -> Option<String> {
    match cwd {
        Cwd::Root => Some(String::new()),
        Cwd::Workspace(c) => Some(format!("{}/", c.join("/"))),
        _ => None,
    }
}

/// A program that runs files of the workspace (`make` runs `Makefile`) after a download put
/// one there, an archive from the network was unpacked, or inside a cloned repository.
fn consumers(w: &mut dyn Effects, name: &str, args: &[Arg], stdin: &Input, shown: &str) {
    if !w.downloaded().is_empty()
        && w.downloaded()
            .iter()
            .any(|d| d.ends_with(&format!("bin/{name}")))
    {
        w.deny(
            Family::RemoteExec,
            format!("`{shown}` runs `{name}`, which a download just replaced."),
        );
    }
    let Some(program) = programs::program(name).filter(|p| p.runs_files_now(args)) else {
        return;
    };
    // `dpkg -i x.deb`, `kubectl apply -f -`: the program runs the files, or the stream, it is
    // given.
    if program.runs_files.iter().any(|f| f == "@operands")
        && let Some(file) = args.iter().find(|a| w.is_downloaded(&plain_path(&a.text)))
    {
        w.deny(
            Family::RemoteExec,
            format!(
                "`{shown}` installs or runs `{}`, a file just downloaded.",
                file.text
            ),
        );
    }
    if program.runs_files.iter().any(|f| f == "@stdin")
        && args.iter().any(|a| a.text == "-" || a.text == "/dev/stdin")
        && matches!(stdin, Input::Stream(o) if o.taint.download)
    {
        w.deny(
            Family::RemoteExec,
            format!("`{shown}` applies what was just downloaded."),
        );
    }
    if name.starts_with("make") || name == "gmake" {
        make(w, args, shown);
    }
    if program.runs_files.iter().all(|f| f.starts_with('@')) {
        return;
    }
    runs_downloaded_files(w, &program.runs_files, shown);
}

/// `make`: command variables run as the recipes' programs (`make CC='rm -rf ~;' x`), and the
/// makefiles given with `-f` run their recipes.
fn make(w: &mut dyn Effects, args: &[Arg], shown: &str) {
    let p = parse_args(
        args,
        &Spec::gnu("fCIjlo", &["file", "makefile", "directory"]),
    );
    for op in &p.operands {
        if let Some((var, value)) = op.text.split_once('=')
            && var.chars().all(|c| c.is_ascii_uppercase() || c == '_')
            && !var.is_empty()
        {
            w.run_script(value, &Input::Inherited);
        }
    }
    for f in p
        .values(Some('f'), &["file", "makefile"])
        .map(str::to_owned)
        .collect::<Vec<_>>()
    {
        if let Some(content) = w.written().get(&plain_path(&f)).cloned() {
            for line in make_recipes(&content) {
                w.run_script(&line, &Input::Inherited);
            }
        }
        if w.is_downloaded(&plain_path(&f)) {
            w.deny(
                Family::RemoteExec,
                format!("`{shown}` runs `{f}`, a file just downloaded."),
            );
        }
    }
}

/// The workspace files a program runs (`runs_files`), when a download put one there, an
/// archive from the network was unpacked, or the program runs inside a cloned repository.
fn runs_downloaded_files(w: &mut dyn Effects, runs_files: &[String], shown: &str) {
    let dir = cwd_prefix(w.cwd());
    let inside_download = dir
        .as_deref()
        .is_some_and(|d| !d.is_empty() && w.is_downloaded(d.trim_end_matches('/')));
    let hit = w.downloaded().iter().find(|d| {
        runs_files.iter().any(|f| {
            let rel = dir.as_deref().and_then(|p| d.strip_prefix(p)).unwrap_or(d);
            if let Some(under) = f.strip_suffix('/') {
                rel.starts_with(&format!("{under}/"))
            } else {
                rel == f.as_str()
            }
        })
    });
    if let Some(file) = hit.cloned() {
        w.deny(
            Family::RemoteExec,
            format!("`{shown}` runs `{file}`, a file just downloaded."),
        );
    } else if inside_download || w.extracted_download() {
        w.deny(
            Family::RemoteExec,
            format!("`{shown}` runs build or hook files that came from the network."),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_that_run_later() {
        assert_eq!(autorun("~/.bashrc"), Some(Autorun::Shell));
        assert_eq!(
            autorun("/home/u/.ssh/authorized_keys"),
            Some(Autorun::Access)
        );
        assert_eq!(autorun("/etc/cron.d/x"), Some(Autorun::Crontab));
        assert_eq!(autorun("./Makefile"), Some(Autorun::Make));
        assert_eq!(autorun("src/main.rs"), None);
        assert_eq!(autorun("notes/bashrc.txt"), None);
    }

    #[test]
    fn recipes_and_scripts() {
        assert_eq!(
            make_recipes("all:\n\t@rm -rf x\nb: ; echo $$HOME\n"),
            vec!["rm -rf x", "echo $HOME"]
        );
        assert_eq!(npm_scripts(r#"{"scripts":{"t":"jest"}}"#), vec!["jest"]);
        assert_eq!(
            shell_lines(Autorun::Crontab, "@reboot sh x\n* * * * * rm -rf ~\nA=b\n"),
            vec!["sh x", "rm -rf ~"]
        );
    }
}
