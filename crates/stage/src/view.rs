//! The merged view read tools see: the workspace with the changeset laid over it. Staged
//! entries win; deleted paths are absent, and so is everything below a deleted directory.
//!
//! Disk access goes through a capability handle on the workspace, and symlinks are resolved
//! here, component by component, over the merged view: a link is followed only when its target
//! stays inside the workspace; an absolute target or one that climbs out is refused.

use crate::model::Change;
use crate::store::{Ctx, FileSrc, Node, StageError, Store};
use airlock_types::RelPath;
use cap_std::ambient_authority;
use cap_std::fs::Dir;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// Symlink hops allowed while resolving one path (Linux's limit).
const MAX_SYMLINK_HOPS: usize = 40;
/// Directory names never shown by a walk.
const ALWAYS_SKIPPED: [&str; 2] = [".git", ".airlock"];

/// What kind of node a merged entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// Anything else (socket, fifo, device).
    Other,
}

/// One entry of the merged view.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MergedEntry {
    /// The final component.
    #[serde(serialize_with = "ser_os")]
    pub name: OsString,
    /// Workspace-relative path.
    pub path: RelPath,
    /// Kind of node.
    pub kind: NodeKind,
    /// Size in bytes (files: content length; symlinks: target length; directories: 0).
    pub size: u64,
    /// `A` (added) or `M` (modified) when the changeset holds an entry for this path.
    pub staged: Option<char>,
}

fn ser_os<S: serde::Serializer>(v: &OsString, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&airlock_types::path::escape_bytes(v.as_bytes()))
}

/// A path resolved through the merged view: `None` is the workspace root.
struct Resolved {
    path: Option<RelPath>,
    node: Node,
    /// Whether the disk below this node is hidden by the changeset.
    covered: bool,
}

fn escape(path: &RelPath, target: &[u8]) -> StageError {
    StageError::SymlinkEscape {
        path: path.display(),
        target: airlock_types::path::escape_bytes(target),
    }
}

/// Resolve `rel` over the merged view, following symlinks in intermediate components (and in
/// the final one when `follow_final`), only while they stay inside the workspace.
fn resolve(cx: &Ctx<'_>, rel: &RelPath, follow_final: bool) -> Result<Resolved, StageError> {
    let mut todo: Vec<OsString> = rel.components().map(OsStr::to_os_string).collect();
    todo.reverse();
    let mut cur: Option<RelPath> = None;
    let mut covered = false;
    let mut hops = 0;
    while let Some(name) = todo.pop() {
        let q = match &cur {
            Some(c) => c.join(&name),
            None => RelPath::new(&name),
        }
        .map_err(|e| StageError::NotFound(format!("{}: {e}", rel.display())))?;
        let (node, below) = cx.step(&q, covered)?;
        let last = todo.is_empty();
        if let Node::Symlink(target) = &node
            && (!last || follow_final)
        {
            hops += 1;
            if hops > MAX_SYMLINK_HOPS {
                return Err(StageError::SymlinkLoop(rel.display()));
            }
            // Lexically join the target to the link's directory; climbing above the root or an
            // absolute target leaves the workspace.
            let mut parts: Vec<OsString> = cur
                .as_ref()
                .map(|c| c.components().map(OsStr::to_os_string).collect())
                .unwrap_or_default();
            for c in Path::new(OsStr::from_bytes(target)).components() {
                match c {
                    Component::Normal(s) => parts.push(s.to_os_string()),
                    Component::CurDir => {}
                    Component::ParentDir => {
                        if parts.pop().is_none() {
                            return Err(escape(&q, target));
                        }
                    }
                    Component::RootDir | Component::Prefix(_) => return Err(escape(&q, target)),
                }
            }
            todo.extend(parts.into_iter().rev());
            cur = None;
            covered = false;
            continue;
        }
        if last {
            return Ok(Resolved {
                path: Some(q),
                node,
                covered: below,
            });
        }
        if node != Node::Dir {
            return Ok(Resolved {
                path: Some(q),
                node: Node::Absent,
                covered: true,
            });
        }
        cur = Some(q);
        covered = below;
    }
    // Resolved to the workspace root (e.g. through a link to `.`).
    Ok(Resolved {
        path: cur.clone(),
        node: Node::Dir,
        covered: match &cur {
            Some(c) => cx.step(c, false)?.1,
            None => false,
        },
    })
}

/// The merged content of the file at `rel` (symlinks inside the workspace are followed), or
/// `None` when nothing is there. A directory is an error.
pub fn read_merged(store: &Store, rel: &RelPath) -> Result<Option<Vec<u8>>, StageError> {
    let conn = store.lock();
    let cx = store.ctx(&conn);
    let r = resolve(&cx, rel, true)?;
    let path = r.path.unwrap_or_else(|| rel.clone());
    match r.node {
        Node::Absent => Ok(None),
        Node::Dir => Err(StageError::IsADirectory(rel.display())),
        Node::File {
            src: FileSrc::Blob(h),
            ..
        } => store
            .blobs()
            .get(&h)
            .map(Some)
            .map_err(|e| StageError::io("read the staged content of", rel, e)),
        Node::File {
            src: FileSrc::Disk, ..
        } => cx.read_disk(&path).map(Some),
        // Resolution follows every link; a symlink here cannot happen, and a special file is
        // never read.
        Node::Symlink(_) | Node::Other => Err(StageError::NotAFile(rel.display())),
    }
}

fn entry_of(
    cx: &Ctx<'_>,
    path: RelPath,
    node: &Node,
    name: OsString,
) -> Result<Option<MergedEntry>, StageError> {
    let (kind, size) = match node {
        Node::Absent => return Ok(None),
        Node::File { size, .. } => (NodeKind::File, *size),
        Node::Dir => (NodeKind::Dir, 0),
        Node::Symlink(t) => (NodeKind::Symlink, t.len() as u64),
        Node::Other => (NodeKind::Other, 0),
    };
    let staged = cx.entry(&path)?.map(|e| {
        if e.base == crate::model::Fingerprint::Absent {
            'A'
        } else {
            'M'
        }
    });
    Ok(Some(MergedEntry {
        name,
        path,
        kind,
        size,
        staged,
    }))
}

/// The merged entry at `rel` (a final symlink is reported, not followed), or `None`.
pub fn stat_merged(store: &Store, rel: &RelPath) -> Result<Option<MergedEntry>, StageError> {
    let conn = store.lock();
    let cx = store.ctx(&conn);
    let r = resolve(&cx, rel, false)?;
    let path = r.path.unwrap_or_else(|| rel.clone());
    let name = path.file_name().to_os_string();
    entry_of(&cx, path, &r.node, name)
}

/// The merged entries of the directory `dir` (the workspace root for `None`), sorted by name.
/// `.airlock` is never listed.
pub fn list_merged(store: &Store, dir: Option<&RelPath>) -> Result<Vec<MergedEntry>, StageError> {
    let conn = store.lock();
    let cx = store.ctx(&conn);
    let (base, covered) = match dir {
        None => (None, false),
        Some(d) => {
            let r = resolve(&cx, d, true)?;
            match r.node {
                Node::Dir => (r.path, r.covered),
                Node::Absent => return Err(StageError::NotFound(d.display())),
                _ => return Err(StageError::NotADirectory(d.display())),
            }
        }
    };
    let mut names: BTreeMap<Vec<u8>, OsString> = BTreeMap::new();
    if !covered {
        let listing = match &base {
            None => cx.ws.entries(),
            Some(b) => cx.ws.read_dir(b.as_path()),
        };
        let shown = base
            .as_ref()
            .map_or_else(|| ".".to_string(), RelPath::display);
        let listing = listing.map_err(|e| StageError::Io {
            action: "list",
            path: shown.clone(),
            source: e,
        })?;
        for ent in listing {
            let ent = ent.map_err(|e| StageError::Io {
                action: "list",
                path: shown.clone(),
                source: e,
            })?;
            let name = ent.file_name();
            if base.is_none() && name == ".airlock" {
                continue;
            }
            names.insert(name.as_bytes().to_vec(), name);
        }
    }
    let depth = base.as_ref().map_or(0, |b| b.components().count());
    for e in cx.entries_below(base.as_ref())? {
        if let Some(first) = e.path.components().nth(depth) {
            names.insert(first.as_bytes().to_vec(), first.to_os_string());
        }
    }
    let mut out = Vec::with_capacity(names.len());
    for (_, name) in names {
        let path = match &base {
            Some(b) => b.join(&name),
            None => RelPath::new(&name),
        }
        .map_err(|e| StageError::NotFound(format!("{}: {e}", name.to_string_lossy())))?;
        let (node, _) = cx.step(&path, covered)?;
        if let Some(m) = entry_of(&cx, path, &node, name)? {
            out.push(m);
        }
    }
    Ok(out)
}

/// Every merged regular file under `under` (the whole workspace for `None`), sorted by path.
/// Disk files come from the `ignore` walker (gitignore and `.ignore` rules when
/// `respect_ignore`, hidden files shown, `.git` and `.airlock` always skipped, symlinks not
/// followed); staged files are added, and deleted or replaced ones removed.
pub fn walk_merged(
    store: &Store,
    under: Option<&RelPath>,
    respect_ignore: bool,
) -> Result<Vec<MergedEntry>, StageError> {
    let conn = store.lock();
    let cx = store.ctx(&conn);
    let (base, covered) = match under {
        None => (None, false),
        Some(u) => {
            let r = resolve(&cx, u, true)?;
            match r.node {
                Node::Dir => (r.path, r.covered),
                Node::Absent => return Ok(Vec::new()),
                Node::File { .. } => {
                    let path = r.path.unwrap_or_else(|| u.clone());
                    let name = path.file_name().to_os_string();
                    return Ok(entry_of(&cx, path, &r.node, name)?.into_iter().collect());
                }
                _ => return Ok(Vec::new()),
            }
        }
    };
    let staged = cx.entries_below(base.as_ref())?;
    // Staged paths that hide the disk below them: deletes, files, symlinks, and directories
    // that replaced something else.
    let hiding: HashMap<&[u8], &Change> = staged
        .iter()
        .filter(|e| {
            !matches!(e.change, Change::Dir { .. }) || e.base != crate::model::Fingerprint::Dir
        })
        .map(|e| (e.path.as_bytes(), &e.change))
        .collect();
    let staged_at: HashMap<&[u8], ()> = staged.iter().map(|e| (e.path.as_bytes(), ())).collect();
    let mut out: BTreeMap<Vec<u8>, MergedEntry> = BTreeMap::new();

    if !covered {
        for rel in walk_disk(store.workspace(), base.as_ref(), respect_ignore)? {
            let bytes = rel.0.as_bytes();
            if staged_at.contains_key(bytes) {
                continue;
            }
            let hidden = bytes
                .iter()
                .enumerate()
                .any(|(i, b)| *b == b'/' && hiding.contains_key(&bytes[..i]));
            if hidden {
                continue;
            }
            out.insert(
                bytes.to_vec(),
                MergedEntry {
                    name: rel.0.file_name().to_os_string(),
                    path: rel.0.clone(),
                    kind: NodeKind::File,
                    size: rel.1,
                    staged: None,
                },
            );
        }
    }
    let mut rules = respect_ignore.then(|| IgnoreRules::new(store.workspace()));
    for e in &staged {
        let Change::Write { size, .. } = e.change else {
            continue;
        };
        if let Some(rules) = rules.as_mut()
            && rules.is_ignored(&e.path, false)
        {
            continue;
        }
        let skipped = e
            .path
            .components()
            .any(|c| ALWAYS_SKIPPED.iter().any(|s| c == *s));
        if skipped {
            continue;
        }
        out.insert(
            e.path.as_bytes().to_vec(),
            MergedEntry {
                name: e.path.file_name().to_os_string(),
                path: e.path.clone(),
                kind: NodeKind::File,
                size,
                staged: Some(if e.base == crate::model::Fingerprint::Absent {
                    'A'
                } else {
                    'M'
                }),
            },
        );
    }
    Ok(out.into_values().collect())
}

/// Regular files on disk under `base`, with sizes. The walk starts at the workspace root (so
/// every ignore file from the root down applies, and none above it) and prunes directories
/// off the way to `base`.
fn walk_disk(
    workspace: &Path,
    base: Option<&RelPath>,
    respect_ignore: bool,
) -> Result<Vec<(RelPath, u64)>, StageError> {
    let root = workspace.to_path_buf();
    let target: Option<PathBuf> = base.map(|b| root.join(b.as_path()));
    let mut builder = ignore::WalkBuilder::new(&root);
    builder
        .hidden(false)
        .parents(false)
        .ignore(respect_ignore)
        .git_ignore(respect_ignore)
        .git_exclude(respect_ignore)
        .git_global(false)
        .require_git(false)
        .follow_links(false);
    {
        let target = target.clone();
        builder.filter_entry(move |ent| {
            if ent.depth() == 0 {
                return true;
            }
            let name = ent.file_name();
            if ALWAYS_SKIPPED.iter().any(|s| name == *s) {
                return false;
            }
            match &target {
                None => true,
                Some(t) => t.starts_with(ent.path()) || ent.path().starts_with(t),
            }
        });
    }
    let mut out = Vec::new();
    for ent in builder.build() {
        // Unreadable entries (permissions, races) are skipped, as ripgrep does.
        let Ok(ent) = ent else { continue };
        if !ent.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        if let Some(t) = &target
            && !ent.path().starts_with(t)
        {
            continue;
        }
        let Ok(rel) = ent.path().strip_prefix(&root) else {
            continue;
        };
        let Ok(rel) = RelPath::new(rel) else { continue };
        let size = ent.metadata().map(|m| m.len()).unwrap_or(0);
        out.push((rel, size));
    }
    Ok(out)
}

/// True when the workspace's ignore rules (`.gitignore`, `.ignore`, `.git/info/exclude`) ignore
/// `rel` or one of its parent directories. Used to keep build outputs session-local.
pub fn is_ignored(workspace: &Path, rel: &RelPath, is_dir: bool) -> bool {
    IgnoreRules::new(workspace).is_ignored(rel, is_dir)
}

/// The workspace's ignore rules, read lazily per directory and cached: for classifying many
/// paths (a sandbox harvest) without re-reading the same ignore files. Each directory's state
/// (the matchers that apply below it, and whether it is itself ignored) is computed once from
/// its parent's, so a path costs one lookup of its parent however deep it lies.
#[derive(Debug)]
pub struct IgnoreRules {
    root: PathBuf,
    dir: Option<Dir>,
    /// Per directory (raw path bytes, empty for the root): its state.
    states: HashMap<Vec<u8>, DirRules>,
}

/// What the ignore rules say at one directory.
#[derive(Debug, Clone, Default)]
struct DirRules {
    /// The matchers of this directory and of every ancestor that has some, nearest first, each
    /// directory's in precedence order: the first that matches a path below decides.
    chain: Vec<Arc<Vec<Gitignore>>>,
    /// The directory itself, or one of its ancestors, is ignored.
    ignored: bool,
}

impl IgnoreRules {
    /// Rules of the workspace at `workspace`.
    pub fn new(workspace: &Path) -> IgnoreRules {
        IgnoreRules {
            root: workspace.to_path_buf(),
            dir: Dir::open_ambient_dir(workspace, ambient_authority()).ok(),
            states: HashMap::new(),
        }
    }

    /// True when `rel` or one of its parent directories is ignored.
    pub fn is_ignored(&mut self, rel: &RelPath, is_dir: bool) -> bool {
        let parent = self.state(rel.parent().as_ref());
        parent.ignored || self.decide(&parent.chain, rel, is_dir)
    }

    /// The first matcher of `chain` that matches `path` decides whether it is ignored.
    fn decide(&self, chain: &[Arc<Vec<Gitignore>>], path: &RelPath, is_dir: bool) -> bool {
        let abs = self.root.join(path.as_path());
        for m in chain.iter().flat_map(|l| l.iter()) {
            let hit = m.matched(&abs, is_dir);
            if hit.is_ignore() {
                return true;
            }
            if hit.is_whitelist() {
                return false;
            }
        }
        false
    }

    /// The state of directory `d` (`None`: the root), computed from the nearest known ancestor
    /// down.
    fn state(&mut self, d: Option<&RelPath>) -> DirRules {
        let key = |d: Option<&RelPath>| d.map(|d| d.as_bytes().to_vec()).unwrap_or_default();
        if let Some(s) = self.states.get(&key(d)) {
            return s.clone();
        }
        // The directories from `d` up to the nearest one already known (or the root).
        let mut todo: Vec<Option<RelPath>> = vec![d.cloned()];
        let mut cur = d.and_then(RelPath::parent);
        let mut base = loop {
            match cur {
                Some(p) => match self.states.get(p.as_bytes()) {
                    Some(s) => break s.clone(),
                    None => {
                        cur = p.parent();
                        todo.push(Some(p));
                    }
                },
                None => match self.states.get(&Vec::new()) {
                    Some(s) => break s.clone(),
                    None => {
                        todo.push(None);
                        break DirRules::default();
                    }
                },
            }
        };
        if d.is_none() {
            todo.truncate(1);
        }
        for dir in todo.into_iter().rev() {
            let ignored = base.ignored
                || dir
                    .as_ref()
                    .is_some_and(|p| self.decide(&base.chain, p, true));
            let own = self.own_matchers(dir.as_ref());
            let mut chain = base.chain;
            if !own.is_empty() {
                chain.insert(0, Arc::new(own));
            }
            base = DirRules { chain, ignored };
            self.states.insert(key(dir.as_ref()), base.clone());
        }
        base
    }

    /// The matchers of the ignore files in directory `d` (`None`: the root).
    fn own_matchers(&self, d: Option<&RelPath>) -> Vec<Gitignore> {
        let mut files = vec![".ignore", ".gitignore"];
        if d.is_none() {
            files.push(".git/info/exclude");
        }
        let dir_abs = match d {
            Some(d) => self.root.join(d.as_path()),
            None => self.root.clone(),
        };
        let mut list = Vec::new();
        for f in files {
            let rel = match d {
                Some(d) => d.as_path().join(f),
                None => PathBuf::from(f),
            };
            let Some(text) = self.read_regular(&rel) else {
                continue;
            };
            let mut b = GitignoreBuilder::new(&dir_abs);
            for line in String::from_utf8_lossy(&text).lines() {
                // A bad line is skipped, as git does.
                let _ = b.add_line(Some(dir_abs.join(f)), line);
            }
            if let Ok(g) = b.build() {
                list.push(g);
            }
        }
        list
    }

    /// The bytes of a regular file inside the workspace; never through a symlink.
    fn read_regular(&self, rel: &Path) -> Option<Vec<u8>> {
        let dir = self.dir.as_ref()?;
        let md = dir.symlink_metadata(rel).ok()?;
        if !md.is_file() {
            return None;
        }
        dir.read(rel).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rp(s: &str) -> RelPath {
        RelPath::new(s).unwrap()
    }

    #[test]
    fn ignore_rules_nearest_decides_and_deep_paths_cost_one_lookup() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(".gitignore"), "target/\n*.log\n").unwrap();
        std::fs::create_dir_all(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/.gitignore"), "!keep.log\nlocal/\n").unwrap();
        let mut r = IgnoreRules::new(d.path());
        for (p, dir, want) in [
            ("target", true, true),
            ("target/x.rs", false, true),
            ("a.log", false, true),
            ("src/main.rs", false, false),
            ("sub/keep.log", false, false),
            ("sub/other.log", false, true),
            ("sub/local/deep/file", false, true),
            ("sub/src/x.rs", false, false),
        ] {
            assert_eq!(r.is_ignored(&rp(p), dir), want, "{p}");
        }
        // 2000 levels (4 KB): every level is judged once, from its parent's state.
        let deep = vec!["a"; 2000].join("/");
        let t = std::time::Instant::now();
        for i in (1..=2000).map(|n| 2 * n - 1) {
            assert!(!r.is_ignored(&rp(&deep[..i]), true));
        }
        assert!(r.is_ignored(&rp(&format!("{deep}/x.log")), false));
        assert!(
            t.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn symlink_out_of_workspace_is_refused() {
        let d = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("abs")).unwrap();
        std::os::unix::fs::symlink("../../etc/passwd", d.path().join("rel")).unwrap();
        std::fs::write(d.path().join("inside"), b"ok").unwrap();
        std::os::unix::fs::symlink("inside", d.path().join("good")).unwrap();
        let s = Store::open(d.path(), "t").unwrap();
        for l in ["abs", "rel"] {
            let err = read_merged(&s, &rp(l)).unwrap_err();
            assert!(matches!(err, StageError::SymlinkEscape { .. }), "{err}");
        }
        assert_eq!(read_merged(&s, &rp("good")).unwrap().unwrap(), b"ok");
        // A staged link is resolved through the merged view too.
        s.stage_write(&rp("staged.txt"), b"staged", None).unwrap();
        s.stage_symlink(&rp("sl"), b"./staged.txt", None).unwrap();
        assert_eq!(read_merged(&s, &rp("sl")).unwrap().unwrap(), b"staged");
        let st = stat_merged(&s, &rp("sl")).unwrap().unwrap();
        assert_eq!(st.kind, NodeKind::Symlink);
        assert_eq!(st.staged, Some('A'));
    }

    #[test]
    fn symlink_loops_are_reported() {
        let d = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("b", d.path().join("a")).unwrap();
        std::os::unix::fs::symlink("a", d.path().join("b")).unwrap();
        let s = Store::open(d.path(), "t").unwrap();
        assert!(matches!(
            read_merged(&s, &rp("a")),
            Err(StageError::SymlinkLoop(_))
        ));
    }

    #[test]
    fn ignore_rules_nest_and_negate() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(".gitignore"), "target/\n*.log\n").unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/.gitignore"), "!keep.log\n").unwrap();
        let ws = d.path();
        assert!(is_ignored(ws, &rp("target/debug/x"), false));
        assert!(is_ignored(ws, &rp("target"), true));
        assert!(!is_ignored(ws, &rp("target"), false));
        assert!(is_ignored(ws, &rp("a.log"), false));
        assert!(!is_ignored(ws, &rp("sub/keep.log"), false));
        assert!(is_ignored(ws, &rp("sub/other.log"), false));
        assert!(!is_ignored(ws, &rp("src/main.rs"), false));
    }
}
