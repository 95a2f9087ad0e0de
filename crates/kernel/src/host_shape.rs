//! Git directories recognised by their shape rather than their name
//! ([`airlock_policy::host_exec::git_dir_ancestor`]), judged in the state that matters at
//! each point: the merged view for the file tools, the sandbox's upper layer over it for the
//! harvest, and the disk with the whole changeset over it for `apply`. Each directory is
//! judged once per pass (a cache), and `HEAD` is looked up first, so a pass over many files
//! costs about one lookup per distinct directory.

use airlock_policy::RelPath;
use airlock_policy::host_exec::{
    CONFIGURED_HOOKS, HostExec, Node, classify, git_config_host_exec, is_git_dir_shape, name_anchor,
};
use airlock_stage::Change;
use airlock_stage::store::Store;
use airlock_stage::view::{self, NodeKind};
use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

mod links;

/// Classifies the paths of one change, remembering which directories have a git directory's
/// shape in the state before it (`before`) or after it (`after`): either makes a path below
/// them host-exec (planting a repository, or tearing one down).
pub(crate) struct ShapeJudge<F: FnMut(&Path) -> Node, G: FnMut(&Path) -> Node> {
    before: F,
    after: G,
    /// Per directory judged: the nearest directory at or above it with a git directory's
    /// shape, if any.
    shaped: HashMap<PathBuf, Option<PathBuf>>,
    configured: Vec<(PathBuf, HostExec)>,
    links: links::LinkMap,
}

impl<F: FnMut(&Path) -> Node, G: FnMut(&Path) -> Node> ShapeJudge<F, G> {
    /// A judge for the workspace at `root`, whose repository configuration (as on disk now)
    /// may name more host-exec paths (`core.hooksPath`, `include.path`). `links` are the
    /// symbolic links of the state judged that are not on disk yet (`(path, target)`: the
    /// staged ones), and `read_link` what a path links to in that state: a link named as a
    /// host-exec entry, or as a directory such entries lie below, is itself host-exec, and
    /// makes what it points to the entry it is named as (see [`links`]). Such links already
    /// on disk in the directories [`LINK_DIRS`] are followed too.
    pub(crate) fn new(
        root: &Path,
        before: F,
        after: G,
        staged_links: Vec<(PathBuf, PathBuf)>,
        read_link: impl FnMut(&Path) -> Option<PathBuf>,
    ) -> Self {
        let mut all = disk_links(root);
        all.extend(staged_links);
        ShapeJudge {
            before,
            after,
            shaped: HashMap::new(),
            configured: repo_config_paths(root),
            links: links::LinkMap::build(root, &all, read_link),
        }
    }

    /// How `rel` is host-exec through a link, if it is: the name it has through the link and
    /// the link's path (`.vscode/tasks.json` and `.vscode` for `vsc/tasks.json`), for the
    /// sentence that refuses it.
    pub(crate) fn via_link(&self, rel: &RelPath) -> Option<(PathBuf, PathBuf)> {
        if classify(rel).is_some() {
            return None;
        }
        self.links
            .explain(rel.as_path())
            .map(|(_, _, named, link)| (named, link))
    }

    /// The host-exec classification of `rel` with its anchor (the entry it is or lies below):
    /// by name, else named by the repository's configuration, else below a git directory by
    /// its shape.
    pub(crate) fn classify(&mut self, rel: &RelPath) -> Option<(HostExec, PathBuf)> {
        if let Some(h) = classify(rel) {
            return Some((h, name_anchor(rel).unwrap_or_default()));
        }
        if let Some((_, h)) = self.links.named.iter().find(|(l, _)| l == rel.as_path()) {
            return Some((*h, rel.as_path().to_path_buf()));
        }
        if let Some(hit) = self.links.classify_aliased(rel.as_path()) {
            return Some(hit);
        }
        if let Some((anchor, h)) = self
            .configured
            .iter()
            .find(|(anchor, _)| rel.as_path().starts_with(anchor))
        {
            return Some((*h, anchor.clone()));
        }
        // The directories above `rel` not judged yet, up to the nearest one judged: each is
        // judged once, so a deep tree's entries cost one lookup each, not one per level.
        let mut todo = Vec::new();
        let mut found = None;
        let mut dir = rel.as_path().parent();
        while let Some(d) = dir {
            if let Some(known) = self.shaped.get(d) {
                found.clone_from(known);
                break;
            }
            todo.push(d);
            dir = d.parent();
        }
        for d in todo.into_iter().rev() {
            let (before, after) = (&mut self.before, &mut self.after);
            if is_git_dir_shape(|name| after(&d.join(name)))
                || is_git_dir_shape(|name| before(&d.join(name)))
            {
                found = Some(d.to_path_buf());
            }
            self.shaped.insert(d.to_path_buf(), found.clone());
        }
        found.map(|d| (airlock_policy::host_exec::GIT_DIR_SHAPE, d))
    }
}

fn node_of_kind(kind: NodeKind) -> Node {
    match kind {
        NodeKind::Dir => Node::Dir,
        NodeKind::Symlink => Node::Link,
        _ => Node::NonDir,
    }
}

fn node_of_meta(m: &std::fs::Metadata) -> Node {
    if m.is_dir() {
        Node::Dir
    } else if m.file_type().is_symlink() {
        Node::Link
    } else {
        Node::NonDir
    }
}

/// What `p` is in the session's merged view (staged changes over the disk).
pub(crate) fn merged_node(store: &Store, p: &Path) -> Node {
    let Ok(rel) = RelPath::new(p) else {
        return Node::Absent;
    };
    match view::stat_merged(store, &rel) {
        Ok(Some(e)) => node_of_kind(e.kind),
        _ => Node::Absent,
    }
}

/// What `p` is in a sandbox's upper layer over the merged view: a whiteout hides it, an
/// entry in the upper layer is what it says, anything else falls through to the merged view.
pub(crate) fn upper_node(upper: &Path, store: &Store, p: &Path) -> Node {
    match std::fs::symlink_metadata(upper.join(p)) {
        Ok(m) if m.file_type().is_char_device() => Node::Absent,
        Ok(m) => node_of_meta(&m),
        Err(_) => merged_node(store, p),
    }
}

/// What `p` will be after a changeset is applied: its entry if it has one (or is below a
/// deleted or replaced entry), else the disk.
pub(crate) fn post_apply_node(root: &Path, changes: &HashMap<PathBuf, &Change>, p: &Path) -> Node {
    if let Some(c) = changes.get(p) {
        return match c {
            Change::Delete => Node::Absent,
            Change::Dir { .. } => Node::Dir,
            Change::Symlink { .. } => Node::Link,
            Change::Write { .. } => Node::NonDir,
        };
    }
    let mut anc = p.parent();
    while let Some(a) = anc {
        if let Some(c) = changes.get(a)
            && !matches!(c, Change::Dir { .. })
        {
            return Node::Absent;
        }
        anc = a.parent();
    }
    match std::fs::symlink_metadata(root.join(p)) {
        Ok(m) => node_of_meta(&m),
        Err(_) => Node::Absent,
    }
}

/// Directories whose symbolic links on disk are followed to what they name: the workspace
/// root, the editor and agent configuration directories, and the repository's hooks.
const LINK_DIRS: &[&str] = &[
    "",
    ".git/hooks",
    ".vscode",
    ".claude",
    ".cursor",
    ".gemini",
    ".codex",
    ".zed",
    ".helix",
    ".config",
    ".husky",
    ".kiro",
    ".amazonq",
    ".cargo",
];

/// The symbolic links on disk in [`LINK_DIRS`] (`(path, target)`): `.envrc ->
/// tools/envrc.sh`, `.git/hooks/pre-commit -> ../../scripts/pre-commit`, `.vscode -> vsc`.
/// One directory read per entry of [`LINK_DIRS`] that exists.
fn disk_links(root: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    for dir in LINK_DIRS {
        let Ok(rd) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for entry in rd.flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_symlink()) {
                continue;
            }
            if let Ok(target) = std::fs::read_link(entry.path()) {
                out.push((Path::new(dir).join(entry.file_name()), target));
            }
        }
    }
    out
}

/// A staged link's target bytes as a path.
pub(crate) fn link_target(bytes: &[u8]) -> PathBuf {
    PathBuf::from(std::ffi::OsStr::from_bytes(bytes))
}

/// What `p` links to on disk, if it is a symbolic link.
pub(crate) fn disk_link(root: &Path, p: &Path) -> Option<PathBuf> {
    std::fs::read_link(root.join(p)).ok()
}

/// What `p` links to in the session's merged view (staged changes over the disk).
pub(crate) fn merged_link(store: &Store, p: &Path) -> Option<PathBuf> {
    let rel = RelPath::new(p).ok()?;
    match store.staged_node(&rel) {
        Ok(Some(airlock_stage::model::StagedNode::Symlink(t))) => Some(link_target(&t)),
        Ok(Some(_)) | Err(_) => None,
        Ok(None) => disk_link(store.workspace(), p),
    }
}

/// What `p` links to in a sandbox's upper layer over the merged view.
pub(crate) fn upper_link(upper: &Path, store: &Store, p: &Path) -> Option<PathBuf> {
    match std::fs::symlink_metadata(upper.join(p)) {
        Ok(m) if m.file_type().is_symlink() => std::fs::read_link(upper.join(p)).ok(),
        Ok(_) => None,
        Err(_) => merged_link(store, p),
    }
}

/// What `p` links to once a changeset is applied: its entry if it has one, else the disk.
pub(crate) fn post_apply_link(
    root: &Path,
    changes: &HashMap<PathBuf, &Change>,
    p: &Path,
) -> Option<PathBuf> {
    match changes.get(p) {
        Some(Change::Symlink { target }) => Some(link_target(target)),
        Some(_) => None,
        None => disk_link(root, p),
    }
}

/// The links of a changeset (`(path, target)`), session-local ones left out: they are never
/// applied.
pub(crate) fn changeset_links(entries: &[airlock_stage::StagedEntry]) -> Vec<(PathBuf, PathBuf)> {
    entries
        .iter()
        .filter(|e| !e.session_local)
        .filter_map(|e| match &e.change {
            Change::Symlink { target } => {
                Some((e.path.as_path().to_path_buf(), link_target(target)))
            }
            _ => None,
        })
        .collect()
}

/// The staged links of a session (`(path, target)`), session-local ones left out: they are
/// never applied.
pub(crate) fn staged_links(store: &Store) -> Vec<(PathBuf, PathBuf)> {
    let links = store.staged_symlinks().unwrap_or_default();
    links
        .into_iter()
        .map(|(p, t)| (p.as_path().to_path_buf(), link_target(&t)))
        .collect()
}

/// What the repository's own configuration names inside the workspace.
fn repo_config_paths(root: &Path) -> Vec<(PathBuf, HostExec)> {
    let dot_git = root.join(".git");
    let Ok(md) = std::fs::symlink_metadata(&dot_git) else {
        return Vec::new();
    };
    if md.is_dir() {
        return match std::fs::read_to_string(dot_git.join("config")) {
            Ok(text) => git_config_host_exec(&text, Path::new(".git"), Path::new("")),
            Err(_) => Vec::new(),
        };
    }
    // A gitfile: `gitdir: PATH`, relative to the workspace root or absolute.
    let Some(target) = std::fs::read_to_string(&dot_git).ok().and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("gitdir:").map(|p| root.join(p.trim())))
    }) else {
        return Vec::new();
    };
    let Ok(text) = std::fs::read_to_string(target.join("config")) else {
        return Vec::new();
    };
    // Includes are relative to the configuration's own directory: only known when it lies in
    // the workspace.
    let inside = std::fs::canonicalize(&target)
        .ok()
        .and_then(|t| t.strip_prefix(root).ok().map(Path::to_path_buf));
    match inside {
        Some(dir) => git_config_host_exec(&text, &dir, Path::new("")),
        None => git_config_host_exec(&text, Path::new(".git"), Path::new(""))
            .into_iter()
            .filter(|(_, h)| *h == CONFIGURED_HOOKS)
            .collect(),
    }
}
