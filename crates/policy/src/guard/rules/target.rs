//! What a path operand names, resolved lexically against the script's working directory:
//! the filesystem root, a system directory, the home directory, the workspace root, the
//! parent, the repository's `.git` — the targets whose removal is destruction.

use super::super::effects::Cwd;

/// A dangerous target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    FsRoot,
    RootGlob,
    System(String),
    Home,
    HomeGlob,
    HomeSensitive(String),
    Workspace,
    WorkspaceGlob,
    Parent,
    GitDir,
}

impl Target {
    pub(crate) fn describe(&self) -> String {
        match self {
            Target::FsRoot => "the filesystem root".to_owned(),
            Target::RootGlob => "every top-level directory".to_owned(),
            Target::System(p) => format!("the system directory `{p}`"),
            Target::Home => "the home directory".to_owned(),
            Target::HomeGlob => "everything in the home directory".to_owned(),
            Target::HomeSensitive(p) => format!("`{p}` in the home directory"),
            Target::Workspace => "the workspace root".to_owned(),
            Target::WorkspaceGlob => "everything in the workspace".to_owned(),
            Target::Parent => "the directory above the workspace".to_owned(),
            Target::GitDir => "the repository's `.git` history".to_owned(),
        }
    }
    /// System or home level: the targets of recursive chmod/chown and of `mv`.
    pub(crate) fn is_system_or_home(&self) -> bool {
        matches!(
            self,
            Target::FsRoot
                | Target::RootGlob
                | Target::System(_)
                | Target::Home
                | Target::HomeGlob
                | Target::Parent
        )
    }
}

const SYSTEM_DIRS: &[&str] = &[
    "bin",
    "boot",
    "dev",
    "etc",
    "home",
    "lib",
    "lib32",
    "lib64",
    "libx32",
    "media",
    "mnt",
    "opt",
    "proc",
    "root",
    "run",
    "sbin",
    "snap",
    "srv",
    "sys",
    "usr",
    "var",
    "Users",
    "System",
    "Library",
    "Applications",
    "private",
    "Volumes",
];

/// Home entries whose recursive removal is its own finding: the private directories plus the
/// user's configuration and local data.
fn home_sensitive(name: &str) -> bool {
    HOME_PRIVATE_DIRS.contains(&name) || matches!(name, ".config" | ".local")
}

fn is_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// Remove `./` prefixes and trailing slashes, for comparing file names.
pub(crate) fn plain_path(path: &str) -> String {
    let mut p = path;
    while let Some(rest) = p.strip_prefix("./") {
        p = rest;
    }
    let p = p.trim_end_matches('/');
    if p.is_empty() {
        ".".to_owned()
    } else {
        p.to_owned()
    }
}

enum Base {
    Abs,
    Home,
    Rel,
}

/// Split and resolve `.`/`..` lexically; `up` counts `..` that climbed above the start.
fn resolve(start: &[String], rest: &str) -> (Vec<String>, usize) {
    let mut comps: Vec<String> = start.to_vec();
    let mut up = 0;
    for c in rest.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                if comps.pop().is_none() {
                    up += 1;
                }
            }
            other => comps.push(other.to_owned()),
        }
    }
    (comps, up)
}

/// Classify a path operand as the script would see it.
pub(crate) fn classify(text: &str, cwd: &Cwd) -> Option<Target> {
    if text.is_empty() {
        return None;
    }
    let (base, rest): (Base, &str) = if let Some(r) = text.strip_prefix('/') {
        (Base::Abs, r)
    } else if text == "~" || text.starts_with("~/") {
        (Base::Home, &text[1..])
    } else if let Some(r) = text.strip_prefix('~') {
        // `~user`: another user's home directory.
        let (user, rest) = r.split_once('/').unwrap_or((r, ""));
        let (comps, _) = resolve(&["home".to_owned(), user.to_owned()], rest);
        return classify_absolute(&comps);
    } else {
        (Base::Rel, text)
    };
    let git = names_git_history(text);
    let target = match base {
        Base::Abs => {
            let (comps, _) = resolve(&[], rest);
            classify_absolute(&comps)
        }
        Base::Home => {
            let (comps, up) = resolve(&[], rest);
            classify_home(&comps, up)
        }
        Base::Rel => match cwd {
            Cwd::Root => {
                let (comps, up) = resolve(&[], rest);
                classify_workspace(&comps, up, true)
            }
            Cwd::Workspace(start) => {
                let (comps, up) = resolve(start, rest);
                classify_workspace(&comps, up, false)
            }
            Cwd::Home(start) => {
                let (comps, up) = resolve(start, rest);
                classify_home(&comps, up)
            }
            Cwd::Absolute(start) => {
                let (comps, up) = resolve(start, rest);
                if up > 0 {
                    Some(Target::FsRoot)
                } else {
                    classify_absolute(&comps)
                }
            }
            Cwd::Above(levels, start) => {
                let (comps, up) = resolve(start, rest);
                classify_workspace(&comps, up + levels, true)
            }
            Cwd::Unknown => None,
        },
    };
    target.or(if git { Some(Target::GitDir) } else { None })
}

/// The parts of `.git` that hold the history: the directory itself, everything in it (a glob),
/// the object store, refs, `HEAD`, packed refs and reflogs. Hooks, lock files and messages
/// (`rm -f .git/index.lock`) are routine maintenance.
fn names_git_history(text: &str) -> bool {
    let comps: Vec<&str> = text
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    let Some(at) = comps.iter().position(|c| *c == ".git") else {
        return false;
    };
    match comps.get(at + 1) {
        None => true,
        Some(next) => {
            is_glob(next)
                || matches!(
                    *next,
                    "objects" | "refs" | "HEAD" | "packed-refs" | "logs" | "modules" | "worktrees"
                )
        }
    }
}

fn classify_absolute(comps: &[String]) -> Option<Target> {
    match comps {
        [] => Some(Target::FsRoot),
        [first, ..] if is_glob(first) => Some(Target::RootGlob),
        [only] => Some(Target::System(format!("/{only}"))),
        [first, second, ..] if first == "tmp" || (first == "var" && second == "tmp") => {
            if comps.len() == 2 && first == "var" {
                Some(Target::System("/var/tmp".to_owned()))
            } else {
                None
            }
        }
        [first, second] if SYSTEM_DIRS.contains(&first.as_str()) => {
            Some(Target::System(format!("/{first}/{second}")))
        }
        [first, _, third] if matches!(first.as_str(), "home" | "Users") => {
            if is_glob(third) || home_sensitive(third) || !regenerated_in_home(third) {
                Some(Target::HomeSensitive(comps.join("/")))
            } else {
                None
            }
        }
        [first, third]
            if first == "root" && (home_sensitive(third) || !regenerated_in_home(third)) =>
        {
            Some(Target::HomeSensitive(comps.join("/")))
        }
        _ => None,
    }
}

fn classify_home(comps: &[String], up: usize) -> Option<Target> {
    if up > 0 {
        return Some(Target::System("/home".to_owned()));
    }
    match comps {
        [] => Some(Target::Home),
        [only] if is_glob(only) => Some(Target::HomeGlob),
        [only] if home_sensitive(only) => Some(Target::HomeSensitive(format!("~/{only}"))),
        // Any other top-level entry is the user's own (`~/projects`, `~/notes.txt`), unless
        // tools recreate it.
        [only] if !regenerated_in_home(only) => Some(Target::HomeSensitive(format!("~/{only}"))),
        _ => None,
    }
}

fn classify_workspace(comps: &[String], up: usize, at_root: bool) -> Option<Target> {
    if up > 0 {
        return match comps {
            [] => Some(Target::Parent),
            [only] if is_glob(only) => Some(Target::Parent),
            _ => None,
        };
    }
    match comps {
        [] => Some(Target::Workspace),
        [only]
            if at_root
                && is_glob(only)
                && only.chars().all(|c| "*.?".contains(c))
                && only != "*.*" =>
        {
            Some(Target::WorkspaceGlob)
        }
        _ => None,
    }
}

/// Home directories that hold the user's credentials and documents: any file under them is
/// the user's, not the workspace's.
const HOME_PRIVATE_DIRS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".kube",
    ".docker",
    ".azure",
    ".gcloud",
    ".password-store",
    "Documents",
    "Desktop",
];

/// A home entry that tools recreate on demand: caches and toolchain directories (`~/.npm`,
/// `~/.cargo`, `~/.cache`, …). Removing them costs a download, not the user's work.
fn regenerated_in_home(first: &str) -> bool {
    first.contains("cache")
        || matches!(
            first,
            ".npm"
                | ".yarn"
                | ".pnpm-store"
                | ".m2"
                | ".gradle"
                | ".cargo"
                | ".rustup"
                | ".nvm"
                | ".bun"
                | ".deno"
                | ".pyenv"
                | ".node-gyp"
                | ".pub-cache"
                | ".nuget"
                | ".ivy2"
                | ".sbt"
                | ".conda"
                | ".local"
                | ".config"
                | ".vscode-server"
                | ".ipython"
                | ".jupyter"
                | ".Trash"
        )
}

/// A file the user keeps in the home directory, outside the workspace: a top-level dotfile
/// (`~/.bashrc`, `~/.gitconfig`, `~/.bash_history`) that is not a cache or a toolchain
/// directory, or anything under a credentials directory (`~/.ssh/id_rsa`). Returns the path
/// as shown in the denial.
pub(crate) fn home_file(text: &str, cwd: &Cwd) -> Option<String> {
    let comps = home_components(text, cwd)?;
    let first = comps.first()?;
    let regenerated = regenerated_in_home(first);
    let private = HOME_PRIVATE_DIRS.contains(&first.as_str()) && comps.len() > 1;
    let dotfile = comps.len() == 1 && first.starts_with('.') && first.len() > 1 && !regenerated;
    (private || dotfile).then(|| format!("~/{}", comps.join("/")))
}

/// The components below the home directory that `text` names (`~/x`, `/home/u/x`,
/// `/root/x`, or relative after `cd ~`).
fn home_components(text: &str, cwd: &Cwd) -> Option<Vec<String>> {
    let comps: Vec<String> = if text == "~" || text.starts_with("~/") {
        let (comps, up) = resolve(&[], &text[1..]);
        if up > 0 {
            return None;
        }
        comps
    } else if let Some(r) = text.strip_prefix('/') {
        let (comps, _) = resolve(&[], r);
        match comps.as_slice() {
            [h, _user, rest @ ..] if h == "home" || h == "Users" => rest.to_vec(),
            [r, rest @ ..] if r == "root" => rest.to_vec(),
            _ => return None,
        }
    } else if let Cwd::Home(start) = cwd {
        if text.starts_with('~') {
            return None;
        }
        let (comps, up) = resolve(start, text);
        if up > 0 {
            return None;
        }
        comps
    } else {
        return None;
    };
    Some(comps)
}

/// A host credential file outside the workspace, named as the jail names sensitive files
/// (`~/.ssh/id_rsa`, `~/.aws/credentials`, `~/.netrc`) or as a host credential store
/// (`~/.cargo/credentials.toml`, `~/.npm/_logs/…`, `~/.config/gh/hosts.yml`; see
/// [`crate::jail::host_credential_components`]), or the system's password hashes and host keys. Public keys (`*.pub`) are meant to be shared and do not count.
pub(crate) fn host_credential(text: &str, cwd: &Cwd) -> Option<String> {
    if text.ends_with(".pub") {
        return None;
    }
    if let Some(comps) = home_components(text, cwd) {
        // ssh's client configuration and host lists are not secrets; its keys are.
        let ssh_public = comps.len() == 2
            && comps[0] == ".ssh"
            && matches!(
                comps[1].as_str(),
                "config" | "known_hosts" | "known_hosts.old" | "authorized_keys"
            );
        if ssh_public {
            return None;
        }
        let shown = format!("~/{}", comps.join("/"));
        if comps.iter().any(|c| is_glob(c)) {
            return glob_may_name_credential(&comps).then_some(shown);
        }
        let names = comps.iter().map(|c| std::ffi::OsStr::new(c.as_str()));
        if crate::jail::host_credential_components(names, false, &shown).is_some()
            || on_credential_store_path(&comps)
        {
            return Some(shown);
        }
        return None;
    }
    let (comps, _) = resolve(&[], text.strip_prefix('/')?);
    let joined = format!("/{}", comps.join("/"));
    let system = matches!(
        joined.as_str(),
        "/etc/shadow" | "/etc/gshadow" | "/etc/sudoers" | "/etc/shadow-" | "/etc/security/opasswd"
    ) || (joined.starts_with("/etc/ssh/ssh_host_") && joined.ends_with("_key"))
        || joined.starts_with("/var/run/secrets/")
        || joined.starts_with("/run/secrets/");
    system.then_some(joined)
}

/// Where tools keep credentials under the home directory, by convention. Reading one of these,
/// anything below it, or a directory above it (`tar czf x.tgz ~/.cargo`, `grep -r token
/// ~/.config`) reads the store.
const HOME_CREDENTIAL_STORES: &[&str] = &[
    ".cargo/credentials.toml",
    ".cargo/credentials",
    ".cargo/config.toml",
    ".cargo/config",
    ".npm/_logs",
    ".npmrc",
    ".yarnrc.yml",
    ".pypirc",
    ".netrc",
    ".git-credentials",
    ".config/gh",
    ".config/hub",
    ".config/gcloud",
    ".config/git/credentials",
    ".docker/config.json",
    ".ssh",
    ".aws",
    ".azure",
    ".kube",
    ".gnupg",
    ".password-store",
    ".local/share/keyrings",
    ".gem/credentials",
    ".composer/auth.json",
    ".terraform.d/credentials.tfrc.json",
    ".m2/settings-security.xml",
    ".vault-token",
    ".pgpass",
    ".my.cnf",
    ".s3cfg",
    ".config/rclone",
    ".config/doctl",
    ".config/op",
    ".config/sops",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".mozilla",
    ".thunderbird",
    ".bash_history",
    ".zsh_history",
    ".sh_history",
    ".python_history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
    ".node_repl_history",
    ".rediscli_history",
    ".local/share/fish/fish_history",
];

/// `comps` (below the home directory) is a credential store of [`HOME_CREDENTIAL_STORES`], is
/// inside one, or is a directory holding one.
fn on_credential_store_path(comps: &[String]) -> bool {
    let folded: Vec<String> = comps.iter().map(|c| crate::jail::fold_name(c)).collect();
    // Component by component, as far as the shorter of the two goes.
    HOME_CREDENTIAL_STORES
        .iter()
        .any(|store| store.split('/').zip(&folded).all(|(s, c)| c == s))
}

/// Names a glob in a home path might expand to that are credentials: every convention of
/// [`HOME_CREDENTIAL_STORES`], and one representative of each family of the credential-name
/// rules (`x.token`, `x.pem`, `.env`, `id_rsa`, …).
const CREDENTIAL_NAME_SAMPLES: &[&str] = &[
    "credentials",
    "credentials.toml",
    "credentials.json",
    "config.toml",
    "config.json",
    "hosts.yml",
    "auth.json",
    "_logs",
    "x.token",
    "x.pem",
    "x.key",
    ".env",
    "id_rsa",
    "id_ed25519",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".vault-token",
];

/// A home path with glob characters (`~/.cargo/cred*`, `~/.c*/credentials.toml`) that could
/// expand to a credential: some component-wise match of a store of
/// [`HOME_CREDENTIAL_STORES`], or a credential name in place of a globbed last component.
fn glob_may_name_credential(comps: &[String]) -> bool {
    let matchers: Vec<Option<globset::GlobMatcher>> = comps
        .iter()
        .map(|c| {
            if !is_glob(c) {
                return None;
            }
            // A glob that does not parse cannot be reasoned about: assume the worst.
            Some(
                globset::Glob::new(c)
                    .map(|g| g.compile_matcher())
                    .unwrap_or_else(|_| globset::Glob::new("*").expect("glob").compile_matcher()),
            )
        })
        .collect();
    let fits = |i: usize, name: &str| match &matchers[i] {
        Some(m) => m.is_match(name) || m.is_match(crate::jail::fold_name(name)),
        None => crate::jail::fold_name(&comps[i]) == crate::jail::fold_name(name),
    };
    let store_match = HOME_CREDENTIAL_STORES.iter().any(|store| {
        let store: Vec<&str> = store.split('/').collect();
        let n = store.len().min(comps.len());
        (0..n).all(|i| fits(i, store[i]))
    });
    if store_match {
        return true;
    }
    // A bare wildcard (`~/.cargo/bin/*`) reaches a credential only where a store lies (checked
    // above); a glob with letters of its own (`cred*`, `*.token`) is checked against the names.
    let last = comps.len() - 1;
    if comps[last].chars().all(|c| matches!(c, '*' | '?')) {
        return false;
    }
    if !comps[..last].iter().any(|c| is_glob(c)) && matchers[last].is_some() {
        return CREDENTIAL_NAME_SAMPLES.iter().any(|sample| {
            fits(last, sample) && {
                let names = comps[..last]
                    .iter()
                    .map(String::as_str)
                    .chain(std::iter::once(*sample))
                    .map(std::ffi::OsStr::new);
                crate::jail::host_credential_components(names, false, sample).is_some()
            }
        });
    }
    // Globs in directories as well: any credential name at the end may be reached.
    CREDENTIAL_NAME_SAMPLES.iter().any(|s| fits(last, s))
}

/// A block device or raw memory: writing to it destroys a disk or the running system.
pub(crate) fn is_device(path: &str) -> bool {
    let Some(dev) = path.strip_prefix("/dev/") else {
        return false;
    };
    const DEVICES: &[&str] = &[
        "sd", "hd", "vd", "xvd", "nvme", "mmcblk", "disk/", "mapper/", "md", "loop", "dm-", "sr",
        "mem", "kmem", "port", "root", "nbd", "rbd", "bcache", "zram", "disk", "rdisk",
    ];
    DEVICES.iter().any(|d| dev.starts_with(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(t: &str) -> Option<Target> {
        classify(t, &Cwd::Root)
    }

    #[test]
    fn root_home_and_workspace_are_recognised() {
        for root in ["/", "//", "/.", "/./", "/usr/..", "/*"] {
            assert!(c(root).is_some(), "{root}");
        }
        assert_eq!(c("/usr"), Some(Target::System("/usr".into())));
        assert_eq!(c("~"), Some(Target::Home));
        assert_eq!(c("~/"), Some(Target::Home));
        assert_eq!(c("~/*"), Some(Target::HomeGlob));
        assert_eq!(c("."), Some(Target::Workspace));
        assert_eq!(c("./"), Some(Target::Workspace));
        assert_eq!(c("*"), Some(Target::WorkspaceGlob));
        assert_eq!(c(".."), Some(Target::Parent));
        assert_eq!(c("../"), Some(Target::Parent));
        assert_eq!(c("./.git"), Some(Target::GitDir));
        assert_eq!(c("build/../.."), Some(Target::Parent));
    }

    #[test]
    fn targeted_paths_are_not() {
        for ok in [
            "build/",
            "build",
            "target/debug",
            "/tmp/x",
            "*.o",
            "coverage",
            "~/.cache/pip",
            "../sibling/x",
            "/var/lib/apt/lists/x",
        ] {
            assert_eq!(c(ok), None, "{ok}");
        }
    }

    #[test]
    fn working_directory_changes_what_relative_paths_mean() {
        let build = Cwd::Workspace(vec!["build".into()]);
        assert_eq!(classify("*", &build), None);
        assert_eq!(classify("..", &build), Some(Target::Workspace));
        assert_eq!(
            classify("*", &Cwd::Absolute(vec![])),
            Some(Target::RootGlob)
        );
        assert_eq!(classify(".", &Cwd::Home(vec![])), Some(Target::Home));
    }

    #[test]
    fn git_history_versus_maintenance_files() {
        for history in [
            ".git",
            "./.git/",
            ".git/*",
            ".git/objects",
            "sub/.git/refs/heads",
        ] {
            assert!(names_git_history(history), "{history}");
        }
        for routine in [
            ".git/index.lock",
            ".git/hooks/pre-commit",
            ".github",
            ".gitignore",
        ] {
            assert!(!names_git_history(routine), "{routine}");
        }
    }

    #[test]
    fn top_level_home_entries_are_the_users_unless_regenerated() {
        for user in ["~/projects", "~/notes.txt", "/home/u/src", "~/Library"] {
            assert!(
                matches!(classify(user, &Cwd::Root), Some(Target::HomeSensitive(_))),
                "{user}"
            );
        }
        for other in ["~/.cache", "~/.npm", "~/.cargo", "~/projects/app/build"] {
            assert_eq!(classify(other, &Cwd::Root), None, "{other}");
        }
    }

    #[test]
    fn home_files_versus_caches() {
        for user in [
            "~/.bashrc",
            "~/.ssh/id_rsa",
            "/home/u/.gitconfig",
            "/root/.profile",
        ] {
            assert!(home_file(user, &Cwd::Root).is_some(), "{user}");
        }
        assert!(home_file(".bashrc", &Cwd::Home(vec![])).is_some());
        for other in [
            "~/.cache/pip",
            "~/.npm",
            "~/.local/bin/x",
            ".bashrc",
            "~/notes.txt",
            "/tmp/.x",
        ] {
            assert_eq!(home_file(other, &Cwd::Root), None, "{other}");
        }
    }

    #[test]
    fn devices() {
        assert!(is_device("/dev/sda"));
        assert!(is_device("/dev/nvme0n1"));
        assert!(!is_device("/dev/null"));
        assert!(!is_device("/dev/stdout"));
    }
}
