//! A repository's git configuration read as data, never as configuration: git's own parser
//! (`git config --file F --no-includes --list -z`, which runs nothing), with `include.path` and
//! `includeIf.*.path` followed by airlock, every condition taken as true (so nothing a
//! conditional include could set is missed). What the git tools need from it: the object
//! format, the filters a commit must refuse, the configured remotes, the identity.

use super::GitError;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One configuration entry and the file it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The key as git prints it: section and key lowercased, subsection as written.
    pub(crate) key: String,
    /// The value (`None` for a bare boolean key).
    pub(crate) value: Option<String>,
    /// The file it was read from.
    pub(crate) file: PathBuf,
}

/// How deep includes are followed (git's own limit is 10).
const MAX_DEPTH: usize = 10;

/// The entries of `file` alone (no includes); an absent file has none.
pub(crate) fn read_file(git: &Path, file: &Path, empty: &Path) -> Result<Vec<Entry>, GitError> {
    if !file.exists() {
        return Ok(Vec::new());
    }
    let parent = empty.parent().unwrap_or(empty);
    let o = Command::new(git)
        .env_clear()
        .env("HOME", empty)
        .env("XDG_CONFIG_HOME", empty)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CEILING_DIRECTORIES", parent)
        .env("LC_ALL", "C")
        .args(["config", "--no-includes", "--list", "-z", "--file"])
        .arg(file)
        .current_dir(empty)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| GitError::io("cannot run git config", e))?;
    if !o.status.success() {
        return Err(GitError::BadRepository(format!(
            "its configuration `{}` cannot be read: {}",
            file.display(),
            String::from_utf8_lossy(&o.stderr).trim()
        )));
    }
    Ok(o.stdout
        .split(|&b| b == 0)
        .filter(|r| !r.is_empty())
        .map(|r| {
            let r = String::from_utf8_lossy(r);
            let (key, value) = match r.split_once('\n') {
                Some((k, v)) => (k.to_string(), Some(v.to_string())),
                None => (r.to_string(), None),
            };
            Entry {
                key,
                value,
                file: file.to_path_buf(),
            }
        })
        .collect())
}

/// The entries of one configuration file read by airlock's own reader
/// ([`airlock_policy::git_config`], the one the host-exec rules use too), no includes: enough
/// for the object format and the file-system booleans a read needs, without starting a
/// process. A misread here can only make git report an error or a different status: nothing
/// read this way is a command.
pub(crate) fn read_plain(file: &Path) -> Vec<Entry> {
    let Ok(text) = std::fs::read_to_string(file) else {
        return Vec::new();
    };
    airlock_policy::git_config::parse(&text)
        .into_iter()
        .map(|e| Entry {
            key: e.key,
            value: e.value,
            file: file.to_path_buf(),
        })
        .collect()
}

/// The entries of `files` with every include followed (depth-first, in git's order), each
/// conditional include taken as if its condition held. `home` resolves `~/`.
pub(crate) fn with_includes(
    git: &Path,
    files: &[PathBuf],
    home: Option<&Path>,
    empty: &Path,
) -> Result<Vec<Entry>, GitError> {
    let mut out = Vec::new();
    for f in files {
        follow(git, f, home, empty, 0, &mut out)?;
    }
    Ok(out)
}

fn follow(
    git: &Path,
    file: &Path,
    home: Option<&Path>,
    empty: &Path,
    depth: usize,
    out: &mut Vec<Entry>,
) -> Result<(), GitError> {
    if depth > MAX_DEPTH {
        return Err(GitError::BadRepository(format!(
            "its configuration includes nest deeper than {MAX_DEPTH} levels at `{}`",
            file.display()
        )));
    }
    for e in read_file(git, file, empty)? {
        let include = is_include(&e.key);
        let value = e.value.clone();
        out.push(e);
        if let (true, Some(v)) = (include, value)
            && let Some(p) = resolve(&v, file, home)
        {
            follow(git, &p, home, empty, depth + 1, out)?;
        }
    }
    Ok(())
}

fn is_include(key: &str) -> bool {
    key == "include.path" || (key.starts_with("includeif.") && key.ends_with(".path"))
}

/// An include path as git resolves it: `~/` from the home directory, relative to the including
/// file's directory, or absolute.
fn resolve(value: &str, from: &Path, home: Option<&Path>) -> Option<PathBuf> {
    if let Some(rest) = value.strip_prefix("~/") {
        return home.map(|h| h.join(rest));
    }
    let p = Path::new(value);
    if p.is_absolute() {
        Some(p.to_path_buf())
    } else {
        from.parent().map(|d| d.join(p))
    }
}

/// The configured clean, smudge or process filters: `(key, file)` of each non-empty one.
pub(crate) fn filters(entries: &[Entry]) -> Vec<(String, PathBuf)> {
    entries
        .iter()
        .filter(|e| {
            e.key.starts_with("filter.")
                && [".clean", ".smudge", ".process"]
                    .iter()
                    .any(|s| e.key.ends_with(s))
                && e.value.as_deref().is_some_and(|v| !v.trim().is_empty())
        })
        .map(|e| (e.key.clone(), e.file.clone()))
        .collect()
}

/// The last value of `key` (git's rule for single-valued keys).
pub(crate) fn last<'a>(entries: &'a [Entry], key: &str) -> Option<&'a str> {
    entries
        .iter()
        .rev()
        .find(|e| e.key == key)
        .and_then(|e| e.value.as_deref())
}

/// The configured remotes: name → (url, push url), each the last value given.
pub(crate) fn remotes(entries: &[Entry]) -> Vec<(String, String, Option<String>)> {
    let mut names: Vec<String> = Vec::new();
    for e in entries {
        if let Some(name) = e
            .key
            .strip_prefix("remote.")
            .and_then(|r| r.strip_suffix(".url"))
            && !names.iter().any(|n| n == name)
        {
            names.push(name.to_string());
        }
    }
    names
        .into_iter()
        .filter_map(|n| {
            let url = last(entries, &format!("remote.{n}.url"))?.to_string();
            let push = last(entries, &format!("remote.{n}.pushurl")).map(str::to_string);
            Some((n, url, push))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn include_paths_resolve_like_git() {
        let from = Path::new("/r/.git/config");
        assert_eq!(
            resolve("x.inc", from, None),
            Some(PathBuf::from("/r/.git/x.inc"))
        );
        assert_eq!(
            resolve("~/a", from, Some(Path::new("/h"))),
            Some(PathBuf::from("/h/a"))
        );
        assert_eq!(resolve("~/a", from, None), None);
        assert!(is_include("includeif.gitdir:/x/.path"));
        assert!(!is_include("include.other"));
    }

    #[test]
    fn the_plain_reader_reads_what_reads_need() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("config");
        std::fs::write(
            &f,
            "[core]\n\trepositoryformatversion = 1 ; c\n\tfileMode = false\n\tbare\n[extensions]\n\tobjectFormat = \"sha256\"\n[remote \"o\"]\n\turl = /x\n",
        )
        .unwrap();
        let e = read_plain(&f);
        assert_eq!(last(&e, "core.repositoryformatversion"), Some("1"));
        assert_eq!(last(&e, "core.filemode"), Some("false"));
        assert_eq!(last(&e, "extensions.objectformat"), Some("sha256"));
        assert_eq!(last(&e, "remote.o.url"), Some("/x"));
        assert!(e.iter().any(|x| x.key == "core.bare" && x.value.is_none()));
    }
}
