//! Symbolic links and the host-exec list: a link whose name is a host-exec entry, or a
//! directory such entries lie below (`.vscode`, `.claude`, `.kiro/settings`), makes what it
//! points to that entry. `.vscode -> vsc` with `vsc/tasks.json` is `.vscode/tasks.json` to VS
//! Code, so the link is a host-exec change itself and `vsc/tasks.json` is classified as
//! `.vscode/tasks.json`. Links are followed through the state being judged (other staged
//! links, then the disk), at most [`MAX_HOPS`] of them; a link that loops, or leaves the
//! workspace, is followed no further (it stays flagged by its name, and a link leaving the
//! workspace is flagged for that by the harvest).

use airlock_policy::RelPath;
use airlock_policy::host_exec::{HostExec, classify, classify_container, fold_inside};
use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// How many links one resolution follows (Linux's own limit is 40).
pub(crate) const MAX_HOPS: usize = 40;

/// Why a link could not be followed to a path in the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unresolved {
    /// It leads out of the workspace.
    Escape,
    /// More than [`MAX_HOPS`] links (a loop, or a chain too long to judge).
    TooManyHops,
}

/// The names of `target` to walk, with `out` set to where the walk starts: the workspace root
/// for an absolute target inside `root`, else `out` as given (the link's directory).
fn start(root: &Path, target: &Path, out: &mut PathBuf) -> Result<VecDeque<OsString>, Unresolved> {
    let rest = if target.is_absolute() {
        out.clear();
        target.strip_prefix(root).map_err(|_| Unresolved::Escape)?
    } else {
        target
    };
    let mut names = VecDeque::new();
    for c in rest.components() {
        match c {
            Component::Normal(n) => names.push_back(n.to_os_string()),
            Component::ParentDir => names.push_back(OsString::from("..")),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return Err(Unresolved::Escape),
        }
    }
    Ok(names)
}

/// Where the link at `link` (workspace-relative) with `target` leads in the workspace, every
/// link on the way followed (`read_link` says what a workspace-relative path links to in the
/// state judged). The result may not exist.
pub(crate) fn resolve_link(
    root: &Path,
    link: &Path,
    target: &Path,
    mut read_link: impl FnMut(&Path) -> Option<PathBuf>,
) -> Result<PathBuf, Unresolved> {
    let mut out = link.parent().unwrap_or(Path::new("")).to_path_buf();
    let mut queue = start(root, target, &mut out)?;
    let mut hops = 0;
    while let Some(name) = queue.pop_front() {
        if name == ".." {
            if !out.pop() {
                return Err(Unresolved::Escape);
            }
            continue;
        }
        out.push(&name);
        if let Some(t) = read_link(&out) {
            hops += 1;
            if hops > MAX_HOPS {
                return Err(Unresolved::TooManyHops);
            }
            out.pop();
            let mut next = start(root, &t, &mut out)?;
            next.extend(queue.drain(..));
            queue = next;
        }
    }
    Ok(out)
}

/// What the links of a state make host-exec.
#[derive(Debug, Default)]
pub(crate) struct LinkMap {
    /// Links that are host-exec entries by what they are named as (through other links):
    /// the link's path and its classification.
    pub(crate) named: Vec<(PathBuf, HostExec)>,
    /// `(target, name, link)`: a path at or below `target` is what it would be at or below
    /// `name`, through the link at `link`.
    pub(crate) aliases: Vec<(PathBuf, PathBuf, PathBuf)>,
}

impl LinkMap {
    /// `p` as named through each alias whose target holds it (several may: `.vscode -> .`
    /// and `.claude -> cfg` both hold `cfg/settings.json`), with that target.
    pub(crate) fn aliases_of<'a>(
        &'a self,
        p: &'a Path,
    ) -> impl Iterator<Item = (PathBuf, &'a Path, &'a Path)> + 'a {
        self.aliases.iter().filter_map(move |(target, name, link)| {
            let rest = p.strip_prefix(target).ok()?;
            Some((name.join(rest), target.as_path(), link.as_path()))
        })
    }

    /// The first classification `p` has through an alias, with the alias's target.
    pub(crate) fn classify_aliased(&self, p: &Path) -> Option<(HostExec, PathBuf)> {
        self.explain(p).map(|(h, target, _, _)| (h, target))
    }

    /// The first classification `p` has through an alias: with the alias's target, the name
    /// `p` has through it and the link that gives it that name.
    pub(crate) fn explain(&self, p: &Path) -> Option<(HostExec, PathBuf, PathBuf, PathBuf)> {
        self.aliases_of(p).find_map(|(named, target, link)| {
            let h = RelPath::new(&named).ok().and_then(|n| classify(&n))?;
            Some((h, target.to_path_buf(), named, link.to_path_buf()))
        })
    }

    /// The first name `link` has (itself on the first pass, else through an alias) under which
    /// it is a host-exec entry or holds one.
    fn host_exec_name(&self, link: &Path, first: bool) -> Option<(PathBuf, HostExec)> {
        let own = first.then(|| link.to_path_buf());
        own.into_iter()
            .chain(self.aliases_of(link).map(|(n, _, _)| n))
            .find_map(|name| {
                let r = RelPath::new(&name).ok()?;
                let h = classify(&r).or_else(|| classify_container(&r))?;
                Some((name, h))
            })
    }

    /// The map for `links` (`(path, target)`), followed with `read_link`: a link is taken in
    /// as soon as its name (its own, or through the links already taken) is a host-exec entry
    /// or holds one, until a pass takes in no more.
    pub(crate) fn build(
        root: &Path,
        links: &[(PathBuf, PathBuf)],
        mut read_link: impl FnMut(&Path) -> Option<PathBuf>,
    ) -> LinkMap {
        let mut map = LinkMap::default();
        let mut done = vec![false; links.len()];
        let mut first = true;
        loop {
            let mut grew = false;
            for (i, (link, target)) in links.iter().enumerate() {
                if done[i] {
                    continue;
                }
                let Some((name, h)) = map.host_exec_name(link, first) else {
                    continue;
                };
                done[i] = true;
                grew = true;
                map.named.push((link.clone(), h));
                let lexical = fold_inside(&link.parent().unwrap_or(Path::new("")).join(target));
                let resolved = resolve_link(root, link, target, &mut read_link).ok();
                for t in [lexical, resolved].into_iter().flatten() {
                    if !map.aliases.iter().any(|(a, _, _)| *a == t) {
                        map.aliases.push((t, name.clone(), link.clone()));
                    }
                }
            }
            first = false;
            if !grew {
                return map;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn links(pairs: &[(&str, &str)]) -> HashMap<PathBuf, PathBuf> {
        pairs
            .iter()
            .map(|(l, t)| (PathBuf::from(l), PathBuf::from(t)))
            .collect()
    }

    #[test]
    fn links_resolve_through_other_links_and_fail_closed() {
        let root = Path::new("/ws");
        let state = links(&[
            ("a", "b/c"),
            ("b", "d"),
            ("loop1", "loop2"),
            ("loop2", "loop1"),
        ]);
        let rl = |p: &Path| state.get(p).cloned();
        let r = |l: &str, t: &str| resolve_link(root, Path::new(l), Path::new(t), rl);
        assert_eq!(r(".vscode", "vsc"), Ok(PathBuf::from("vsc")));
        assert_eq!(r(".vscode", "a/x"), Ok(PathBuf::from("d/c/x")));
        assert_eq!(r("p/.vscode", "../a"), Ok(PathBuf::from("d/c")));
        assert_eq!(r(".vscode", "/ws/a"), Ok(PathBuf::from("d/c")));
        assert_eq!(r(".vscode", "../x"), Err(Unresolved::Escape));
        assert_eq!(r(".vscode", "/etc"), Err(Unresolved::Escape));
        assert_eq!(r(".vscode", "loop1"), Err(Unresolved::TooManyHops));
        let state = links(&[("c/.vscode", "../../x")]);
        let rl = |p: &Path| state.get(p).cloned();
        assert_eq!(
            resolve_link(root, Path::new("q"), Path::new("c/.vscode"), rl),
            Err(Unresolved::Escape)
        );
    }

    #[test]
    fn a_link_named_as_a_host_exec_directory_aliases_its_target() {
        let root = Path::new("/ws");
        let all = [
            (".vscode", "vsc"),
            ("x", "y"),
            (".config", "cfg"),
            ("cfg/mise", "../m"),
            (".claude", "a"),
            ("a", "b"),
        ];
        let pairs: Vec<(PathBuf, PathBuf)> = all
            .iter()
            .map(|(l, t)| (PathBuf::from(l), PathBuf::from(t)))
            .collect();
        let state = links(&all);
        let map = LinkMap::build(root, &pairs, |p| state.get(p).cloned());
        let named: Vec<&Path> = map.named.iter().map(|(p, _)| p.as_path()).collect();
        assert!(named.contains(&Path::new(".vscode")), "{named:?}");
        assert!(named.contains(&Path::new("cfg/mise")), "{named:?}");
        assert!(!named.contains(&Path::new("x")), "{named:?}");
        let kind = |p: &str| map.classify_aliased(Path::new(p)).map(|(h, _)| h.kind);
        assert_eq!(kind("vsc/tasks.json"), Some("vscode"));
        assert_eq!(kind("m/config.toml"), Some("mise"));
        assert_eq!(kind("b/settings.json"), Some("claude_code"));
        assert_eq!(kind("y/tasks.json"), None);
        assert_eq!(kind("vsc/notes.md"), None);
        // A link to the workspace root aliases every path; another alias still counts.
        let pairs = vec![
            (PathBuf::from(".vscode"), PathBuf::from(".")),
            (PathBuf::from(".claude"), PathBuf::from("cfg")),
        ];
        let map = LinkMap::build(root, &pairs, |_| None);
        let kind = |p: &str| map.classify_aliased(Path::new(p)).map(|(h, _)| h.kind);
        assert_eq!(kind("tasks.json"), Some("vscode"));
        assert_eq!(kind("cfg/settings.json"), Some("claude_code"));
        assert_eq!(kind("src/main.rs"), None);
    }
}
