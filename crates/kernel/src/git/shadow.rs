//! The shadow git directory: a git directory airlock writes for one call, whose `config` holds
//! only what airlock chose, and which links the repository's data into place. git run over it
//! reads the repository's objects, refs and index, and none of its configuration, hooks or
//! attributes files beyond `info/exclude`.

use super::{GitError, Repo, config};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One configuration value airlock puts into the shadow `config`.
#[derive(Debug, Clone)]
pub(crate) struct Setting {
    /// Section (`user`, `remote`).
    pub(crate) section: String,
    /// Subsection (`origin` in `remote "origin"`).
    pub(crate) sub: Option<String>,
    /// Key.
    pub(crate) key: String,
    /// Value (data only: never a command).
    pub(crate) value: String,
}

impl Setting {
    /// `section.key = value`.
    pub(crate) fn new(section: &str, key: &str, value: &str) -> Setting {
        Setting {
            section: section.into(),
            sub: None,
            key: key.into(),
            value: value.into(),
        }
    }
}

/// Extensions whose meaning a shadow directory keeps (the rest are refused, or dropped when
/// they only name a behaviour airlock does not want, like lazy fetching).
const DROPPED_EXTENSIONS: &[&str] = &[
    "extensions.worktreeconfig",
    "extensions.partialclone",
    "extensions.noop",
    "extensions.preciousobjects",
];

/// Plain booleans about the file system, copied so status sees the files as git would.
const FS_BOOLEANS: &[&str] = &[
    "core.filemode",
    "core.symlinks",
    "core.ignorecase",
    "core.precomposeunicode",
];

/// Files of the git directory (not the common one) linked when present.
const PER_WORKTREE: &[&str] = &[
    "ORIG_HEAD",
    "FETCH_HEAD",
    "MERGE_HEAD",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
];

/// A shadow git directory, removed when dropped.
pub(crate) struct Shadow {
    tmp: tempfile::TempDir,
    /// The repository's configuration entries, as data, includes followed.
    entries: Vec<config::Entry>,
}

impl Shadow {
    /// Write a shadow git directory for `repo` under `scratch`; `thorough` reads the
    /// repository's configuration with git's parser and its includes (see [`Shadow::entries`]).
    pub(crate) fn create(
        repo: &Repo,
        scratch: &Path,
        git: &Path,
        home_dir: Option<&Path>,
        extra: &[Setting],
        thorough: bool,
    ) -> Result<Shadow, GitError> {
        std::fs::create_dir_all(scratch)
            .map_err(|e| GitError::io(format!("cannot create {}", scratch.display()), e))?;
        let tmp = tempfile::Builder::new()
            .prefix("git-shadow-")
            .tempdir_in(scratch)
            .map_err(|e| GitError::io("cannot create the shadow git directory", e))?;
        let dir = tmp.path().join("gitdir");
        let home = tmp.path().join("home");
        for d in [&dir, &home, &dir.join("info")] {
            std::fs::create_dir_all(d)
                .map_err(|e| GitError::io("cannot create the shadow git directory", e))?;
        }
        let mut files = vec![repo.common_dir.join("config")];
        if repo.git_dir != repo.common_dir {
            files.push(repo.git_dir.join("config.worktree"));
        }
        // A commit or push reads the configuration with git's own parser and every include (it
        // looks for filters and remotes); a read needs only the format, from the main file.
        let entries = if thorough {
            config::with_includes(git, &files, home_dir, &home)?
        } else {
            config::read_plain(&files[0])
        };
        let mut text = String::from("[core]\n\tbare = false\n\tlogallrefupdates = true\n");
        let version = config::last(&entries, "core.repositoryformatversion").unwrap_or("0");
        if !matches!(version.trim(), "0" | "1") {
            return Err(GitError::Unsupported(format!(
                "repository format version {version}"
            )));
        }
        let _ = writeln!(text, "\trepositoryformatversion = {}", version.trim());
        for key in FS_BOOLEANS {
            if let Some(v) = config::last(&entries, key).filter(|v| is_bool(v)) {
                let _ = writeln!(text, "\t{} = {v}", &key["core.".len()..]);
            }
        }
        for e in entries.iter().filter(|e| e.key.starts_with("extensions.")) {
            if DROPPED_EXTENSIONS.contains(&e.key.as_str()) {
                continue;
            }
            let v = e.value.as_deref().unwrap_or("").trim().to_ascii_lowercase();
            if e.key == "extensions.objectformat" && matches!(v.as_str(), "sha1" | "sha256") {
                let _ = writeln!(text, "[extensions]\n\tobjectformat = {v}");
                continue;
            }
            return Err(GitError::Unsupported(format!("the extension `{}`", e.key)));
        }
        for s in extra {
            text.push_str(&setting_text(s)?);
        }
        std::fs::write(dir.join("config"), text)
            .map_err(|e| GitError::io("cannot write the shadow configuration", e))?;
        // HEAD is copied (a symlinked HEAD is a symref to git); the rest is linked.
        let head = std::fs::read(repo.git_dir.join("HEAD"))
            .map_err(|e| GitError::io("cannot read the repository's HEAD", e))?;
        std::fs::write(dir.join("HEAD"), head)
            .map_err(|e| GitError::io("cannot write the shadow HEAD", e))?;
        let mut links: Vec<(PathBuf, PathBuf)> = vec![
            (repo.common_dir.join("objects"), dir.join("objects")),
            (repo.common_dir.join("refs"), dir.join("refs")),
            (repo.common_dir.join("packed-refs"), dir.join("packed-refs")),
            (repo.common_dir.join("shallow"), dir.join("shallow")),
            (
                repo.common_dir.join("info").join("exclude"),
                dir.join("info").join("exclude"),
            ),
        ];
        if repo.git_dir == repo.common_dir {
            links.push((repo.git_dir.join("logs"), dir.join("logs")));
        }
        for name in PER_WORKTREE {
            links.push((repo.git_dir.join(name), dir.join(name)));
        }
        for (from, to) in links {
            if std::fs::symlink_metadata(&from).is_ok() {
                std::os::unix::fs::symlink(&from, &to)
                    .map_err(|e| GitError::io("cannot link the repository's data", e))?;
            }
        }
        Ok(Shadow { tmp, entries })
    }

    /// The shadow git directory.
    pub(crate) fn dir(&self) -> PathBuf {
        self.tmp.path().join("gitdir")
    }

    /// An empty home directory for git.
    pub(crate) fn home(&self) -> PathBuf {
        self.tmp.path().join("home")
    }

    /// The repository's configuration entries (data), includes followed.
    pub(crate) fn entries(&self) -> &[config::Entry] {
        &self.entries
    }

    /// The branch the shadow HEAD names (`refs/heads/X`), or `None` when detached.
    pub(crate) fn head_ref(&self) -> Option<String> {
        let head = std::fs::read_to_string(self.dir().join("HEAD")).ok()?;
        head.trim()
            .strip_prefix("ref:")
            .map(|r| r.trim().to_string())
    }
}

fn is_bool(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "true" | "false" | "yes" | "no" | "on" | "off" | "1" | "0"
    )
}

/// One setting as git configuration text, quoted; values with a line break are refused.
fn setting_text(s: &Setting) -> Result<String, GitError> {
    let clean = |t: &str| !t.contains(['\n', '\r', '\0']);
    let ok_name =
        |t: &str| !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if !clean(&s.value) || !ok_name(&s.section) || !ok_name(&s.key) {
        return Err(GitError::BadRepository(format!(
            "the value of `{}.{}` cannot be used",
            s.section, s.key
        )));
    }
    let head = match &s.sub {
        Some(sub) if clean(sub) => format!("[{} \"{}\"]", s.section, quote(sub)),
        Some(_) => {
            return Err(GitError::BadRepository(format!(
                "a `{}` name holds a line break",
                s.section
            )));
        }
        None => format!("[{}]", s.section),
    };
    Ok(format!("{head}\n\t{} = \"{}\"\n", s.key, quote(&s.value)))
}

fn quote(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_quoted_and_line_breaks_refused() {
        let s = Setting {
            section: "remote".into(),
            sub: Some("o\"x".into()),
            key: "url".into(),
            value: "a\\b\"c".into(),
        };
        assert_eq!(
            setting_text(&s).unwrap(),
            "[remote \"o\\\"x\"]\n\turl = \"a\\\\b\\\"c\"\n"
        );
        let bad = Setting::new("user", "name", "x\n[core]\n\tfsmonitor = evil");
        assert!(setting_text(&bad).is_err());
    }
}
