//! Git access that runs no repository-controlled code.
//!
//! A repository is untrusted data, and git runs code on the repository's say: hooks, fsmonitor,
//! clean/smudge/process filters, textconv, external diff, pagers, credential helpers, aliases,
//! `core.sshCommand`, and any of these reached through `include`/`includeIf` or through a gitfile
//! pointing at another git directory. Overriding each of those settings one by one (`-c
//! core.fsmonitor=` …) cannot be complete: filter and diff drivers have names the repository
//! chooses, and new command-valued settings appear with new git versions.
//!
//! So git never reads the repository's configuration as configuration. Each call runs the git
//! CLI over a [`shadow`] git directory that airlock writes: its `config` holds only the values
//! airlock chose (the object format, and for a commit or push the identity and the named
//! remote, all as data), and it links the repository's data (objects, refs, packed refs, reflogs,
//! `info/exclude`, `shallow`) into place. The index is the repository's own
//! (`GIT_INDEX_FILE`), the work tree is the workspace. On top of that every run is neutralised
//! ([`Git::command`]): no system or global configuration, hooks path `/dev/null`, no pager, no
//! external diff or textconv, no optional locks, no prompts, no lazy fetch, literal pathspecs, a
//! cleared environment. The repository's configuration is read only as data by [`config`]
//! (git's own parser, `git config --file F --no-includes --list -z`, with includes followed by
//! airlock), to find the filters `git_commit` refuses and the remotes `git_push` may name.

pub(crate) mod config;
pub(crate) mod history;
pub(crate) mod recover;
pub(crate) mod shadow;
pub(crate) mod status;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Why a git call could not run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GitError {
    /// The workspace root holds no `.git` (directory or gitfile).
    #[error(
        "the workspace is not a git repository (no `.git` at its root; repositories above or below the workspace root are not used)"
    )]
    NoRepository,
    /// The `.git` entry is not something airlock reads as a repository.
    #[error("the workspace's `.git` cannot be used: {0}")]
    BadRepository(String),
    /// The repository uses a format airlock does not handle.
    #[error("the repository uses {0}, which the git tools do not support")]
    Unsupported(String),
    /// No git program was found.
    #[error("no `git` program was found on PATH")]
    NoGit,
    /// A file or directory could not be prepared.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// git ran and failed.
    #[error("git {command} failed: {stderr}")]
    Failed {
        /// The git subcommand.
        command: String,
        /// What git said, trimmed.
        stderr: String,
    },
}

impl GitError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> GitError {
        GitError::Io {
            what: what.into(),
            source,
        }
    }
}

/// Where a workspace's repository lives.
#[derive(Debug, Clone)]
pub(crate) struct Repo {
    /// The work tree: the workspace root.
    pub(crate) worktree: PathBuf,
    /// The git directory (`.git`, or the target of a gitfile).
    pub(crate) git_dir: PathBuf,
    /// The common directory (differs from `git_dir` for a linked work tree).
    pub(crate) common_dir: PathBuf,
}

impl Repo {
    /// The repository whose work tree is exactly `root`: `root/.git` as a directory, or a
    /// gitfile (`gitdir: PATH`) to one. Nothing above the root is discovered.
    pub(crate) fn at(root: &Path) -> Result<Repo, GitError> {
        let dot = root.join(".git");
        let md = match std::fs::symlink_metadata(&dot) {
            Ok(md) => md,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(GitError::NoRepository);
            }
            Err(e) => return Err(GitError::io("cannot read `.git`", e)),
        };
        let git_dir = if md.is_dir() {
            dot
        } else if md.is_file() {
            let text = std::fs::read_to_string(&dot)
                .map_err(|e| GitError::io("cannot read the gitfile `.git`", e))?;
            let target = text
                .lines()
                .find_map(|l| l.strip_prefix("gitdir:"))
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .ok_or_else(|| {
                    GitError::BadRepository("the gitfile holds no `gitdir:` line".into())
                })?;
            root.join(target)
        } else {
            return Err(GitError::BadRepository(
                "it is neither a directory nor a gitfile".into(),
            ));
        };
        let git_dir = std::fs::canonicalize(&git_dir).map_err(|e| {
            GitError::BadRepository(format!("its git directory cannot be resolved: {e}"))
        })?;
        let shaped = airlock_policy::host_exec::is_git_dir_shape(|name| node(&git_dir.join(name)));
        if !shaped {
            return Err(GitError::BadRepository(format!(
                "`{}` is not a git directory",
                git_dir.display()
            )));
        }
        let common_dir = match std::fs::read_to_string(git_dir.join("commondir")) {
            Ok(c) => std::fs::canonicalize(git_dir.join(c.trim())).map_err(|e| {
                GitError::BadRepository(format!("its common directory cannot be resolved: {e}"))
            })?,
            Err(_) => git_dir.clone(),
        };
        Ok(Repo {
            worktree: root.to_path_buf(),
            git_dir,
            common_dir,
        })
    }

    /// The repository's index file.
    pub(crate) fn index(&self) -> PathBuf {
        self.git_dir.join("index")
    }
}

fn node(p: &Path) -> airlock_policy::host_exec::Node {
    use airlock_policy::host_exec::Node;
    match std::fs::symlink_metadata(p) {
        Ok(md) if md.is_dir() => Node::Dir,
        Ok(md) if md.file_type().is_symlink() => Node::Link,
        Ok(_) => Node::NonDir,
        Err(_) => Node::Absent,
    }
}

/// The git program: the first `git` in `path`'s absolute directories outside the workspace
/// (a relative or workspace entry could hold a planted `git`).
pub(crate) fn find_git(path: Option<&OsString>, root: &Path) -> Result<PathBuf, GitError> {
    let dirs: Vec<PathBuf> = match path {
        Some(p) => std::env::split_paths(p).collect(),
        None => vec![PathBuf::from("/usr/bin"), PathBuf::from("/bin")],
    };
    for d in dirs {
        if !d.is_absolute() || d.starts_with(root) {
            continue;
        }
        let g = d.join("git");
        if let Ok(md) = std::fs::metadata(&g) {
            use std::os::unix::fs::PermissionsExt;
            if md.is_file() && md.permissions().mode() & 0o111 != 0 {
                return Ok(g);
            }
        }
    }
    Err(GitError::NoGit)
}

/// The neutralising options every git run gets, before its subcommand.
const NEUTRAL: &[&str] = &[
    "--no-pager",
    "--no-replace-objects",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=",
    "-c",
    "core.pager=cat",
    "-c",
    "core.editor=false",
    "-c",
    "core.sshCommand=",
    "-c",
    "core.askPass=",
    "-c",
    "credential.helper=",
    "-c",
    "diff.external=",
    "-c",
    "gc.auto=0",
    "-c",
    "maintenance.auto=false",
    "-c",
    "protocol.allow=never",
    "-c",
    "protocol.file.allow=always",
    "-c",
    "protocol.git.allow=always",
    "-c",
    "protocol.ssh.allow=always",
    "-c",
    "protocol.https.allow=always",
    "-c",
    "submodule.recurse=false",
    "-c",
    "diff.ignoreSubmodules=all",
    "-c",
    "status.submoduleSummary=false",
    "-c",
    "color.ui=false",
];

/// One git invocation context: the repository, its shadow git directory and the program.
pub(crate) struct Git {
    repo: Repo,
    shadow: shadow::Shadow,
    program: PathBuf,
    extra_env: Vec<(OsString, OsString)>,
}

impl Git {
    /// Prepare git for the repository at `root`, with a fresh shadow git directory under
    /// `scratch` whose configuration holds `extra` as well; `home` resolves `~/` in the
    /// repository's includes; `thorough` reads its configuration with git's parser and every
    /// include (commit, push), otherwise only the main file with airlock's reader (reads).
    pub(crate) fn open(
        root: &Path,
        scratch: &Path,
        path_var: Option<&OsString>,
        home: Option<&Path>,
        extra: &[shadow::Setting],
        thorough: bool,
    ) -> Result<Git, GitError> {
        let repo = Repo::at(root)?;
        let program = find_git(path_var, root)?;
        let shadow = shadow::Shadow::create(&repo, scratch, &program, home, extra, thorough)?;
        Ok(Git {
            repo,
            shadow,
            program,
            extra_env: Vec::new(),
        })
    }

    /// The repository.
    pub(crate) fn repo(&self) -> &Repo {
        &self.repo
    }

    /// The git program.
    pub(crate) fn program(&self) -> &Path {
        &self.program
    }

    /// The shadow git directory.
    pub(crate) fn shadow(&self) -> &shadow::Shadow {
        &self.shadow
    }

    /// Pass these variables to every later run (credentials under an unrestricted session, the
    /// push's ssh command).
    pub(crate) fn pass_env(&mut self, vars: Vec<(OsString, OsString)>) {
        self.extra_env = vars;
    }

    /// A git command with every neutraliser, over the shadow git directory.
    pub(crate) fn command<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Command {
        let mut c = Command::new(&self.program);
        let home = self.shadow.home();
        c.env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("GIT_DIR", self.shadow.dir())
            .env("GIT_WORK_TREE", &self.repo.worktree)
            .env("GIT_INDEX_FILE", self.repo.index())
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", &home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_SYSTEM", "/dev/null")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_ATTR_NOSYSTEM", "1")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_ASKPASS", "")
            .env("SSH_ASKPASS", "")
            .env("GIT_PAGER", "cat")
            .env("PAGER", "cat")
            .env("GIT_NO_LAZY_FETCH", "1")
            .env("GIT_LITERAL_PATHSPECS", "1")
            .env("GIT_PROTOCOL_FROM_USER", "0")
            .env("GIT_ALLOW_PROTOCOL", "file:git:ssh:https")
            .env("GIT_ADVICE", "0")
            .env("LC_ALL", "C")
            .env("TZ", "UTC");
        for (k, v) in &self.extra_env {
            c.env(k, v);
        }
        c.args(NEUTRAL)
            .args(args)
            .current_dir(&self.repo.worktree)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// Run git with `args`; its output, whatever the exit status.
    pub(crate) fn output<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Result<Output, GitError> {
        let name = args
            .first()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .unwrap_or_default();
        self.command(args)
            .output()
            .map_err(|e| GitError::io(format!("cannot run git {name}"), e))
    }

    /// Run git with `args`; its stdout, or its failure in words.
    pub(crate) fn run<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Result<Vec<u8>, GitError> {
        let o = self.output(args)?;
        if o.status.success() {
            Ok(o.stdout)
        } else {
            Err(GitError::Failed {
                command: args
                    .first()
                    .map(|a| a.as_ref().to_string_lossy().into_owned())
                    .unwrap_or_default(),
                stderr: String::from_utf8_lossy(&o.stderr).trim().to_string(),
            })
        }
    }
}
