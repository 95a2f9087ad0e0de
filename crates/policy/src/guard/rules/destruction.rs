//! `destruction`: recursive or forced removal of the root, home, workspace, parent or `.git`;
//! `find -delete`/`-exec rm` on such roots; filesystem creation and raw writes to disks;
//! shredding; recursive permission changes on system or home directories; `git clean -fdx`;
//! deleting, truncating or replacing the user's own files in the home directory (`rm
//! ~/.gitconfig`, `> ~/.bash_history`); signalling every process (`kill -9 -1`, `pkill -u
//! root`, `killall5`); `crontab -r`.

use super::super::Family;
use super::super::command::{Spec, parse_args};
use super::super::effects::Effects;
use super::super::normalize::{Arg, Input};
use super::target::{Target, classify, home_file, is_device};

pub(super) fn check(w: &mut dyn Effects, name: &str, args: &[Arg], _stdin: &Input, shown: &str) {
    match name {
        "rm" | "unlink" => remove(w, name, args, shown),
        "git" => git(w, args, shown),
        "ln" => link(w, args, shown),
        "kill" => kill(w, args, shown),
        "killall5" => w.deny(
            Family::Destruction,
            format!("`{shown}` kills every process on the system."),
        ),
        "pkill" | "killall" => pkill(w, name, args, shown),
        "crontab" => crontab(w, args, shown),
        "find" => find(w, args, shown),
        "mkfs" | "mke2fs" | "mkswap" | "newfs" => formats(w, args, shown),
        _ if name.starts_with("mkfs.") => formats(w, args, shown),
        "wipefs" | "blkdiscard" | "fdisk" | "sfdisk" | "cfdisk" | "parted" | "sgdisk" | "gdisk"
        | "hdparm" => {
            let listing = args.iter().any(|a| {
                matches!(
                    a.text.as_str(),
                    "-l" | "--list" | "print" | "-p" | "--print" | "-n" | "--no-act"
                )
            });
            if !listing && args.iter().any(|a| is_device(&a.text)) {
                w.deny(
                    Family::Destruction,
                    format!("`{shown}` rewrites a disk device."),
                );
            }
        }
        "dd" => raw_write(w, args, shown),
        "shred" => shred(w, args, shown),
        "chmod" | "chown" | "chgrp" | "setfacl" => permissions(w, name, args, shown),
        "cp" | "tee" | "truncate" | "install" => overwrite_home(w, name, args, shown),
        // `rsync --delete empty/ ~/` deletes everything in the destination the source lacks.
        "rsync" => rsync(w, args, shown),
        "mv" => moves(w, args, shown),
        _ => {}
    }
}

/// `rm -rf` of the root, home, workspace, parent or `.git`; deleting home files.
fn remove(w: &mut dyn Effects, name: &str, args: &[Arg], shown: &str) {
    let p = parse_args(args, &Spec::gnu("", &[]));
    if deletes_home_file(w, &p.operands, "deletes", shown) {
        return;
    }
    if name == "unlink" {
        return;
    }
    let recursive = p.has('r', "recursive") || p.has_short('R');
    let force = p.has('f', "force");
    if !(recursive || force) {
        return;
    }
    let how = if recursive {
        "recursively removes"
    } else {
        "forcibly removes"
    };
    for op in &p.operands {
        if let Some(t) = classify(&op.text, w.cwd()) {
            w.deny(
                Family::Destruction,
                format!("`{shown}` {how} {}.", t.describe()),
            );
            return;
        }
    }
}

/// `ln -f` over home files.
fn link(w: &mut dyn Effects, args: &[Arg], shown: &str) {
    // `ln -sf /dev/null ~/.bash_history` replaces the file.
    let p = parse_args(args, &Spec::gnu("St", &["suffix", "target-directory"]));
    if p.has('f', "force") && p.operands.len() >= 2 {
        let dest = p.operands.last().copied().into_iter().collect::<Vec<_>>();
        deletes_home_file(w, &dest, "replaces", shown);
    }
}

/// `kill` of every process.
fn kill(w: &mut dyn Effects, args: &[Arg], shown: &str) {
    // The signal comes first (`-9`, `-KILL`, `-s KILL`, `-n 9`); then the pids, where
    // `-1` is every process the user may signal.
    let mut i = 0;
    match args.first().map(|a| a.text.as_str()) {
        Some("-s" | "-n") => i = 2,
        Some("--") => i = 1,
        Some(t) if t.starts_with('-') && t != "-l" && t != "-L" => i = 1,
        _ => {}
    }
    if args.get(i).is_some_and(|a| a.text == "--") {
        i += 1;
    }
    if args
        .get(i..)
        .unwrap_or_default()
        .iter()
        .any(|a| a.text == "-1")
    {
        w.deny(
            Family::Destruction,
            format!("`{shown}` signals every process the user may signal."),
        );
    }
}

/// `pkill`/`killall` of every process or another user's.
fn pkill(w: &mut dyn Effects, name: &str, args: &[Arg], shown: &str) {
    let p = parse_args(
        args,
        &Spec::gnu(
            "sugUGPtFnoeOcy",
            &[
                "signal",
                "euid",
                "uid",
                "group",
                "parent",
                "terminal",
                "pidfile",
                "session",
                "older-than",
                "younger-than",
                "user",
                "context",
                "ns",
                "nslist",
            ],
        ),
    );
    let root_user = p
        .values(Some('u'), &["euid", "user", "uid"])
        .chain(p.values(Some('U'), &[]))
        .any(|u| u.split(',').any(|u| u == "root" || u == "0"));
    let regex = name == "pkill" || p.has('r', "regexp");
    let everything =
        p.operands.is_empty() || (regex && p.operands.iter().any(|a| matches_everything(&a.text)));
    let narrowed = p.has_short('P')
        || p.has_short('t')
        || p.has_short('F')
        || p.has_short('s')
        || p.has_short('g')
        || p.has_short('n')
        || p.has_short('o')
        || p.has_long("parent")
        || p.has_long("pidfile");
    if root_user
        || (everything
            && !narrowed
            && (!p.operands.is_empty() || p.has('u', "user") || p.has_short('U')))
    {
        w.deny(
            Family::Destruction,
            format!("`{shown}` kills every process of a user or of the system."),
        );
    }
}

/// `crontab -r`.
fn crontab(w: &mut dyn Effects, args: &[Arg], shown: &str) {
    let p = parse_args(args, &Spec::gnu("u", &[]));
    if p.has_short('r') {
        w.deny(
            Family::Destruction,
            format!("`{shown}` removes the user's crontab without a backup."),
        );
    }
}

/// `find -delete` or `-exec rm` on a protected root.
fn find(w: &mut dyn Effects, args: &[Arg], shown: &str) {
    let parts = FindParts::parse(args);
    let deletes = parts.delete
        || parts.execs.iter().any(|e| {
            e.first().is_some_and(|c| {
                matches!(
                    super::program_name(&c.text),
                    "rm" | "shred" | "unlink" | "rmdir" | "truncate" | "srm" | "wipe"
                )
            })
        });
    if !deletes {
        return;
    }
    for root in &parts.roots {
        if let Some(t) = classify(&root.text, w.cwd()) {
            // Named files under the workspace or the shared temporary directories.
            let scratch = matches!(&t, Target::System(p) if p == "/tmp" || p == "/var/tmp");
            let targeted_in_workspace = parts.has_filter
                && (scratch || matches!(t, Target::Workspace | Target::WorkspaceGlob));
            if !targeted_in_workspace {
                w.deny(
                    Family::Destruction,
                    format!("`{shown}` deletes files throughout {}.", t.describe()),
                );
                return;
            }
        }
    }
}

/// `dd` onto a disk device.
fn raw_write(w: &mut dyn Effects, args: &[Arg], shown: &str) {
    for a in args {
        if let Some(dest) = a.text.strip_prefix("of=")
            && is_device(dest)
        {
            w.deny(
                Family::Destruction,
                format!("`{shown}` overwrites the disk device `{dest}`."),
            );
            return;
        }
    }
}

/// `shred` of a protected file.
fn shred(w: &mut dyn Effects, args: &[Arg], shown: &str) {
    let p = parse_args(
        args,
        &Spec::gnu("nsx", &["iterations", "size", "random-source"]),
    );
    for op in &p.operands {
        let t = op.text.as_str();
        if is_device(t)
            || classify(t, w.cwd()).is_some()
            || t.starts_with('/')
            || t.starts_with('~')
        {
            w.deny(
                Family::Destruction,
                format!("`{shown}` irrecoverably overwrites `{t}`."),
            );
            return;
        }
    }
}

/// Recursive permission or owner changes on system or home directories.
fn permissions(w: &mut dyn Effects, name: &str, args: &[Arg], shown: &str) {
    let p = parse_args(args, &Spec::gnu("", &["reference", "from"]));
    if !(p.has('R', "recursive") || (name == "setfacl" && p.has_short('R'))) {
        return;
    }
    for op in &p.operands {
        if let Some(t) = classify(&op.text, w.cwd())
            && t.is_system_or_home()
        {
            w.deny(
                Family::Destruction,
                format!(
                    "`{shown}` recursively changes permissions or ownership of {}.",
                    t.describe()
                ),
            );
            return;
        }
    }
}

/// Truncating or replacing files in the home directory.
fn overwrite_home(w: &mut dyn Effects, name: &str, args: &[Arg], shown: &str) {
    if name == "truncate" {
        let p = parse_args(args, &Spec::gnu("sr", &["size", "reference"]));
        if deletes_home_file(w, &p.operands, "truncates", shown) {
            return;
        }
    }
    if name == "tee" && !args.iter().any(|a| a.text == "-a" || a.text == "--append") {
        let p = parse_args(args, &Spec::gnu("", &[]));
        if deletes_home_file(w, &p.operands, "overwrites", shown) {
            return;
        }
    }
    if name == "cp" {
        let p = parse_args(args, &Spec::gnu("St", &["suffix", "target-directory"]));
        let empties = p.operands.len() == 2
            && matches!(p.operands[0].text.as_str(), "/dev/null" | "/dev/zero");
        if empties && deletes_home_file(w, &p.operands[1..], "empties", shown) {
            return;
        }
    }
    let p = parse_args(
        args,
        &Spec::gnu(
            "sStor",
            &["size", "target-directory", "suffix", "reference"],
        ),
    );
    let dest = match name {
        "cp" | "install" => p.operands.last().map(|a| a.text.as_str()),
        _ => p
            .operands
            .iter()
            .map(|a| a.text.as_str())
            .find(|t| is_device(t)),
    };
    if let Some(d) = dest.filter(|d| is_device(d)) {
        w.deny(
            Family::Destruction,
            format!("`{shown}` overwrites the disk device `{d}`."),
        );
    }
}

/// `rsync --delete` into the root, home or workspace.
fn rsync(w: &mut dyn Effects, args: &[Arg], shown: &str) {
    let deletes = args
        .iter()
        .any(|a| a.text.starts_with("--delete") || a.text == "--del" || a.text == "--remove");
    let p = parse_args(
        args,
        &Spec::gnu(
            "eBfMT",
            &["rsh", "filter", "exclude", "include", "files-from", "port"],
        ),
    );
    if deletes
        && p.operands.len() >= 2
        && let Some(dest) = p.operands.last()
        && let Some(t) = classify(&dest.text, w.cwd())
    {
        w.deny(
            Family::Destruction,
            format!(
                "`{shown}` deletes whatever the source lacks from {}.",
                t.describe()
            ),
        );
    }
}

/// `mv` of protected directories.
fn moves(w: &mut dyn Effects, args: &[Arg], shown: &str) {
    let p = parse_args(args, &Spec::gnu("St", &["suffix", "target-directory"]));
    let n = p.operands.len();
    let sources = if p.has('t', "target-directory") {
        n
    } else {
        n.saturating_sub(1)
    };
    for op in p.operands.iter().take(sources) {
        if let Some(t) = classify(&op.text, w.cwd())
            && (t.is_system_or_home() || matches!(t, Target::GitDir | Target::HomeSensitive(_)))
        {
            w.deny(
                Family::Destruction,
                format!("`{shown}` moves away {}.", t.describe()),
            );
            return;
        }
    }
}

/// Deny when an operand is a file the user keeps in the home directory; `how` is the verb.
fn deletes_home_file(w: &mut dyn Effects, operands: &[&Arg], how: &str, shown: &str) -> bool {
    for op in operands {
        if let Some(path) = home_file(&op.text, w.cwd()) {
            w.deny(
                Family::Destruction,
                format!(
                    "`{shown}` {how} `{path}`, a file in the home directory outside the workspace."
                ),
            );
            return true;
        }
    }
    false
}

/// A process-name regex that matches every name: `.`, `.*`, `^`, `''`.
fn matches_everything(pattern: &str) -> bool {
    let core = pattern.trim_start_matches('^').trim_end_matches('$');
    core.chars().all(|c| matches!(c, '.' | '*' | '+' | '?'))
        && (core.is_empty() || core.contains('.'))
}

/// git's global options before the subcommand.
pub(super) fn git_subcommand(args: &[Arg]) -> Option<(usize, &str)> {
    let mut i = 0;
    while i < args.len() {
        let t = args[i].text.as_str();
        match t {
            "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace" | "--exec-path"
            | "--config-env" => i += 2,
            _ if t.starts_with('-') => i += 1,
            _ => return Some((i, t)),
        }
    }
    None
}

/// `mkfs`: a filesystem on a device erases it; on a regular file in the workspace
/// (`mkfs.ext4 -F disk.img`) it builds an image.
fn formats(w: &mut dyn Effects, args: &[Arg], shown: &str) {
    let target = args
        .iter()
        .rev()
        .find(|a| !a.text.starts_with('-') && !a.text.chars().all(|c| c.is_ascii_digit()));
    let image = target.is_some_and(|t| {
        !t.dynamic
            && !t.text.starts_with(['/', '~', '$'])
            && !t.text.contains("..")
            && t.text.contains('.')
    });
    if !image {
        w.deny(
            Family::Destruction,
            format!("`{shown}` creates a filesystem, erasing the device."),
        );
    }
}

fn git(w: &mut dyn Effects, args: &[Arg], shown: &str) {
    let Some((i, sub)) = git_subcommand(args) else {
        return;
    };
    let rest = &args[i + 1..];
    match sub {
        "clean" => {
            let p = parse_args(rest, &Spec::gnu("e", &["exclude"]));
            let force = p.has('f', "force");
            let dry = p.has('n', "dry-run");
            let wide = p.has_short('x') || p.has_short('d') || p.has_short('X');
            // Pathspecs inside the workspace scope the clean to them.
            let scoped = !p.operands.is_empty()
                && p.operands.iter().all(|o| {
                    !o.dynamic
                        && !matches!(o.text.as_str(), "." | "./" | "*" | ":/" | ":/*")
                        && classify(&o.text, w.cwd()).is_none()
                        && !o.text.starts_with(['/', '~'])
                        && !o.text.contains("..")
                });
            if force && wide && !dry && !scoped {
                w.deny(
                    Family::Destruction,
                    format!("`{shown}` deletes untracked and ignored files, which no history can restore."),
                );
            }
        }
        "rm" => {
            let p = parse_args(rest, &Spec::gnu("", &["pathspec-from-file"]));
            if !p.has('r', "recursive") || p.has('n', "dry-run") || p.has_long("cached") {
                return;
            }
            for op in &p.operands {
                if let Some(t) = classify(&op.text, w.cwd()) {
                    w.deny(
                        Family::Destruction,
                        format!("`{shown}` deletes {}.", t.describe()),
                    );
                    return;
                }
            }
        }
        _ => {}
    }
}

/// A `find` command line: start points, whether tests narrow the match, and its actions.
pub(crate) struct FindParts {
    pub(crate) roots: Vec<Arg>,
    pub(crate) has_filter: bool,
    pub(crate) delete: bool,
    /// Exact file names the tests ask for (`-name .git`): what `{}` names besides the roots.
    pub(crate) names: Vec<String>,
    /// The command lines of `-exec`, `-execdir`, `-ok`, `-okdir` (without the terminator).
    pub(crate) execs: Vec<Vec<Arg>>,
}

impl FindParts {
    pub(crate) fn parse(args: &[Arg]) -> FindParts {
        let mut i = 0;
        // Leading options -H -L -P -D x -Ox.
        while i < args.len() {
            let t = args[i].text.as_str();
            if t == "-D" {
                i += 2;
            } else if matches!(t, "-H" | "-L" | "-P") || t.starts_with("-O") {
                i += 1;
            } else {
                break;
            }
        }
        let mut roots = Vec::new();
        while i < args.len() {
            let t = args[i].text.as_str();
            if t.starts_with('-') || t == "(" || t == "!" || t == "\\(" {
                break;
            }
            roots.push(args[i].clone());
            i += 1;
        }
        if roots.is_empty() {
            roots.push(Arg::literal("."));
        }
        let mut parts = FindParts {
            roots,
            has_filter: false,
            delete: false,
            names: Vec::new(),
            execs: Vec::new(),
        };
        while i < args.len() {
            let t = args[i].text.as_str();
            match t {
                "-delete" => parts.delete = true,
                "-exec" | "-execdir" | "-ok" | "-okdir" => {
                    let mut cmd = Vec::new();
                    i += 1;
                    while i < args.len() && args[i].text != ";" && args[i].text != "+" {
                        cmd.push(args[i].clone());
                        i += 1;
                    }
                    parts.execs.push(cmd);
                }
                "-name" | "-iname"
                    if args
                        .get(i + 1)
                        .is_some_and(|n| !n.text.contains(['*', '?', '[', '/'])) =>
                {
                    parts.has_filter = true;
                    i += 1;
                    parts.names.push(args[i].text.clone());
                }
                "-name" | "-iname" | "-path" | "-ipath" | "-wholename" | "-iwholename"
                | "-regex" | "-iregex" | "-newer" | "-mtime" | "-mmin" | "-atime" | "-amin"
                | "-ctime" | "-cmin" | "-size" | "-user" | "-group" | "-perm" | "-empty"
                | "-links" | "-inum" | "-samefile" | "-uid" | "-gid" | "-lname" | "-ilname"
                | "-nouser" | "-nogroup" | "-newermt" | "-used" | "-fstype" => {
                    parts.has_filter = true
                }
                _ => {}
            }
            i += 1;
        }
        parts
    }
}
