//! Host-exec paths: files whose content the host acts on by itself — a version-control tool,
//! an editor, a shell hook, an agent harness — without the user running the project's code.
//! A staged change to one of them would run outside any sandbox the next time the user runs
//! `git status`, opens the folder or `cd`s into it, so the jail denies them to the file tools
//! (rule `jail_host_exec`), the sandbox harvest flags them, and `apply` refuses them unless the
//! operator names them (`airlock apply --allow-host-exec PATH`).
//!
//! This module is the one definition. Matching is per path component, on names folded the way
//! the sensitive-file rules fold them (case, look-alike and invisible characters, trailing dots
//! and spaces, an NTFS `:stream` suffix): Linux compares names byte for byte, but a workspace
//! may sit on a case-insensitive filesystem (vfat, exFAT, NTFS, CIFS, ext4 `casefold`), where
//! `.GIT` *is* `.git` — and git itself refuses `.GIT` in a tree for that reason — so the
//! look-alikes fail closed. The NTFS short name `git~1` counts as `.git` too.
//!
//! The list itself is data: `crates/policy/data/host_exec.toml`, one entry per tool with its
//! path patterns, what it is, why the host runs it (citing the tool's documentation), and
//! examples that a unit test (`table::tests::every_entry_matches_its_own_examples`) checks
//! against that entry. To add a tool, add an entry there with examples; nothing else changes.
//! An entry's `kind` is the stable id a staged flag records.
//!
//! Deliberately not included (they run only when the user runs or builds the project, which is
//! what `verify` is for, or they name no command): `.gitignore`, `.gitattributes` (a filter
//! needs a driver in `.git/config`), `.gitmodules` (git refuses `update = !cmd` from it),
//! `.github/` (runs in CI, not here), `.vscode/launch.json`, `.run/` and `.zed/tasks.json` (run
//! only when the user starts a debug or run configuration or spawns a task),
//! `.vscode/extensions.json` (recommendations only), `.tool-versions`, `.nvmrc`,
//! `.python-version` (version names only), `CLAUDE.md`, `AGENTS.md`, `GEMINI.md`, `.goosehints`
//! (instructions to a model, not configuration a host runs), `Makefile`, `package.json` (run by
//! the user's own build and test commands).

use crate::decision::{Decision, Stage};
use crate::names::fold;
use crate::path::RelPath;
use std::ffi::OsStr;

/// The jail's rule id for a host-exec path (file tools: exit 3; `apply`: exit 4).
pub const RULE: &str = "jail_host_exec";

mod table;

/// Why a path is a host-exec path: the entry that makes it one and one reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostExec {
    /// The entry's stable id (`git`, `vscode`, `git_dir_shape`, …): what a staged flag records.
    pub kind: &'static str,
    /// The family, as a short noun phrase (`a git control entry`).
    pub what: &'static str,
    /// What runs it, in one clause.
    pub why: &'static str,
}

fn of_entry(e: &'static table::Entry) -> HostExec {
    HostExec {
        kind: &e.kind,
        what: &e.what,
        why: &e.why,
    }
}

/// The classifications that come from the repository's state rather than the list: a git
/// directory by its shape, the configured hooks directory, a configured include.
const DYNAMIC: [HostExec; 3] = [GIT_DIR_SHAPE, CONFIGURED_HOOKS, CONFIGURED_INCLUDE];

/// The classification a stable kind names (an entry of the list, or one of the
/// repository-state kinds), or `None` for a kind this build does not know.
pub fn by_kind(kind: &str) -> Option<HostExec> {
    DYNAMIC
        .iter()
        .find(|h| h.kind == kind)
        .copied()
        .or_else(|| table::table().by_kind(kind).map(of_entry))
}

/// The host-exec classification of a workspace-relative path, or `None` for an ordinary
/// path. Pure: it never looks at the disk.
///
/// ```
/// use airlock_policy::{RelPath, host_exec};
/// let hit = |p: &str| host_exec::classify(&RelPath::new(p).unwrap()).is_some();
/// assert!(hit("sub/.git") && hit(".git/objects/ab/cd") && hit(".vscode/tasks.json"));
/// assert!(!hit(".gitignore") && !hit(".github/workflows/ci.yml") && !hit("src/git/mod.rs"));
/// ```
pub fn classify(rel: &RelPath) -> Option<HostExec> {
    classify_components(rel.components())
}

/// [`classify`] over any sequence of path names (already free of `.` and `..`).
pub fn classify_components<'a>(names: impl Iterator<Item = &'a OsStr>) -> Option<HostExec> {
    let names: Vec<String> = names.map(fold).collect();
    table::table().classify(&names).map(of_entry)
}

/// For a directory (or a link standing for one) at `rel`: the entry whose paths lie below a
/// directory of that name (`.vscode` for `.vscode/tasks.json`, `.kiro/settings` for
/// `.kiro/settings/mcp.json`), or `None`. A link so named makes what it points to that
/// directory, so the link is a host-exec change itself.
pub fn classify_container(rel: &RelPath) -> Option<HostExec> {
    let names: Vec<String> = rel.components().map(fold).collect();
    table::table().container(&names).map(of_entry)
}

/// What a name is, for [`is_git_dir_shape`]: nothing, a directory, or anything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Node {
    /// Nothing there.
    Absent,
    /// A directory.
    Dir,
    /// A file or anything else that is not a directory or a link.
    NonDir,
    /// A symbolic link: git follows it, so it counts as a directory or a file, whichever
    /// makes the shape (failing closed without resolving it).
    Link,
}

/// A directory git takes for a repository by its shape alone, whatever its name.
pub const GIT_DIR_SHAPE: HostExec = HostExec {
    kind: "git_dir_shape",
    what: "in a directory that git takes for a repository",
    why: "a directory holding `HEAD` with `objects/` and `refs/` (or `commondir`) is a git directory by its shape: git run in it reads its `config` and runs its `hooks`",
};

/// True when a directory whose entries `lookup` describes is a git directory to git's
/// discovery (`is_git_directory`): `HEAD` and either `objects/` and `refs/`, or a
/// `commondir` file. Any `HEAD` counts (git also checks its content; this fails closed).
pub fn is_git_dir_shape(mut lookup: impl FnMut(&str) -> Node) -> bool {
    let file = |n: Node| matches!(n, Node::NonDir | Node::Link);
    let dir = |n: Node| matches!(n, Node::Dir | Node::Link);
    if !file(lookup("HEAD")) {
        return false;
    }
    (dir(lookup("objects")) && dir(lookup("refs"))) || file(lookup("commondir"))
}

/// The nearest strict ancestor of `rel` (the workspace root included, as the empty path) that
/// is a git directory by its shape, with `lookup` telling what a workspace-relative path is
/// (in the state being judged: the disk with the staged changes over it). A change below such
/// a directory is a host-exec change even though no component is named `.git`: running git
/// inside the directory runs its configuration.
pub fn git_dir_ancestor(
    rel: &RelPath,
    mut lookup: impl FnMut(&std::path::Path) -> Node,
) -> Option<std::path::PathBuf> {
    let mut dir = rel.as_path().parent();
    while let Some(d) = dir {
        if is_git_dir_shape(|name| lookup(&d.join(name))) {
            return Some(d.to_path_buf());
        }
        dir = d.parent();
    }
    None
}

/// [`classify`], then [`git_dir_ancestor`]: the classification of `rel` in a given state.
pub fn classify_in(
    rel: &RelPath,
    lookup: impl FnMut(&std::path::Path) -> Node,
) -> Option<HostExec> {
    classify(rel).or_else(|| git_dir_ancestor(rel, lookup).map(|_| GIT_DIR_SHAPE))
}

/// The jail's denial for `subject` (quoted by the caller) classified `h`.
pub fn denial_for(subject: &str, h: HostExec) -> Decision {
    denial(subject, h)
}

/// A directory the repository's own configuration names as its hooks (`core.hooksPath`).
pub const CONFIGURED_HOOKS: HostExec = HostExec {
    kind: "git_hooks_path",
    what: "in the hooks directory the repository's `core.hooksPath` names",
    why: "git runs the hooks there on commit, checkout, merge and push",
};

/// A file the repository's own configuration includes (`include.path`, `includeIf.*.path`).
pub const CONFIGURED_INCLUDE: HostExec = HostExec {
    kind: "git_config_include",
    what: "a file the repository's git configuration includes",
    why: "git reads it as part of its own configuration on every command",
};

/// The workspace paths a git configuration text makes host-exec: its `core.hooksPath`
/// (relative to `worktree`, the directory hooks run in) and its `include.path` and
/// `includeIf.*.path` files (relative to `config_dir`, the directory holding the
/// configuration). Both directories are workspace-relative (empty for the root); a value that
/// is absolute, starts with `~`, or climbs out of the workspace names nothing here. Read with
/// airlock's one git-configuration reader ([`crate::git_config`]); last value wins for
/// `core.hooksPath`.
pub fn git_config_host_exec(
    config: &str,
    config_dir: &std::path::Path,
    worktree: &std::path::Path,
) -> Vec<(std::path::PathBuf, HostExec)> {
    let entries = crate::git_config::parse(config);
    let mut out: Vec<(std::path::PathBuf, HostExec)> = entries
        .iter()
        .filter(|e| {
            e.key == "include.path" || (e.key.starts_with("includeif.") && e.key.ends_with(".path"))
        })
        .filter_map(|e| inside(config_dir, e.value.as_deref()?))
        .map(|p| (p, CONFIGURED_INCLUDE))
        .collect();
    if let Some(h) =
        crate::git_config::last(&entries, "core.hookspath").and_then(|v| inside(worktree, v))
    {
        out.push((h, CONFIGURED_HOOKS));
    }
    out
}

/// `value` taken relative to `base` (workspace-relative), folded lexically; `None` when it is
/// empty, absolute, home-relative or climbs out of the workspace.
fn inside(base: &std::path::Path, value: &str) -> Option<std::path::PathBuf> {
    if value.is_empty() || value.starts_with('~') || value.starts_with('/') {
        return None;
    }
    fold_inside(&base.join(value))
}

/// A workspace-relative `p` with `.` and `..` folded lexically; `None` when it climbs out, is
/// absolute or is empty.
pub fn fold_inside(p: &std::path::Path) -> Option<std::path::PathBuf> {
    use std::path::Component;
    let mut out = std::path::PathBuf::new();
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            _ => return None,
        }
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

/// The jail's denial for a file tool that would write, delete or rename a host-exec path.
pub fn host_exec_rule(rel: &RelPath) -> Option<Decision> {
    classify(rel).map(|h| denial(&format!("`{rel}`"), h))
}

/// The denial sentence for `subject` (the path as the caller gave it, quoted).
pub(crate) fn denial(subject: &str, h: HostExec) -> Decision {
    Decision::deny(
        Stage::Jail,
        RULE,
        format!(
            "{subject} is {} ({}), so no tool may write, delete or rename it; only the operator can let such a change through (`airlock apply --allow-host-exec PATH`).",
            h.what, h.why
        ),
    )
}

/// The human text of a staged host-exec flag of this kind (the flag itself records only the
/// kind, [`HostExec::kind`]); a kind this build does not know says so.
pub fn flag_text(kind: &str) -> String {
    match by_kind(kind) {
        Some(h) => format!(
            "{}, which the host acts on by itself; apply needs the operator's --allow-host-exec",
            h.what
        ),
        None => format!("a host-exec kind this build does not know (`{kind}`)"),
    }
}

/// True when `kind` (a staged host-exec flag's) is one this build knows: the only flags an
/// operator's grant may lift. Kinds are compared, never texts; an unknown kind is lifted by
/// nothing.
pub fn is_host_exec_flag(kind: &str) -> bool {
    by_kind(kind).is_some()
}

/// The shortest leading part of `rel` that is itself a host-exec path by name (`.git` for
/// `.git/objects/ab/cd`, `sub/.git` for `sub/.git`), or `None`.
pub fn name_anchor(rel: &RelPath) -> Option<std::path::PathBuf> {
    let mut prefix = std::path::PathBuf::new();
    for c in rel.components() {
        prefix.push(c);
        if classify_components(prefix.iter()).is_some() {
            return Some(prefix);
        }
    }
    None
}

/// What `apply` says when it refuses `paths` (the host-exec paths of a changeset that the
/// operator did not name), classified by name: see [`apply_refusal_of`].
pub fn apply_refusal(paths: &[RelPath]) -> Option<String> {
    let hits: Vec<(RelPath, HostExec, std::path::PathBuf)> = paths
        .iter()
        .filter_map(|p| {
            let h = classify(p)?;
            Some((p.clone(), h, name_anchor(p).unwrap_or_default()))
        })
        .collect();
    apply_refusal_of(&hits)
}

/// What `apply` says when it refuses these classified paths, each with its anchor (the
/// host-exec entry it is, or lies below; empty for the workspace root): one sentence per
/// anchor naming its path, or counting the changed paths at or below it (at most [`LISTED`]
/// sentences; the rest are counted), one sentence per family saying what runs it, and the way
/// out. `None` when there is nothing to refuse.
pub fn apply_refusal_of(hits: &[(RelPath, HostExec, std::path::PathBuf)]) -> Option<String> {
    if hits.is_empty() {
        return None;
    }
    let mut groups: Vec<(&std::path::Path, HostExec, Vec<&RelPath>)> = Vec::new();
    for (p, h, anchor) in hits {
        match groups.iter_mut().find(|(a, _, _)| *a == anchor.as_path()) {
            Some((_, _, paths)) => paths.push(p),
            None => groups.push((anchor.as_path(), *h, vec![p])),
        }
    }
    let mut out = String::from("Nothing was applied.");
    for (anchor, h, paths) in groups.iter().take(LISTED) {
        let shown = if anchor.as_os_str().is_empty() {
            "the workspace root".to_string()
        } else {
            format!(
                "`{}`",
                airlock_types::display::escape_bytes_for_terminal(
                    std::os::unix::ffi::OsStrExt::as_bytes(anchor.as_os_str()),
                    airlock_types::display::Escape::Name,
                )
            )
        };
        if let [only] = paths.as_slice() {
            out.push_str(&format!(" `{only}` is {}.", h.what));
        } else {
            let mut examples: Vec<String> =
                paths.iter().take(3).map(|p| format!("`{p}`")).collect();
            if paths.len() > 3 {
                examples.push("…".into());
            }
            out.push_str(&format!(
                " {} changed paths at or below {shown} ({}) are {}.",
                paths.len(),
                examples.join(", "),
                h.what
            ));
        }
    }
    if groups.len() > LISTED {
        out.push_str(&format!(
            " {} more host-exec entries are in the changeset.",
            groups.len() - LISTED
        ));
    }
    let mut seen: Vec<&str> = Vec::new();
    for (_, h, _) in &groups {
        if !seen.contains(&h.what) {
            seen.push(h.what);
            let mut why = h.why.to_string();
            if let Some(first) = why.get(..1) {
                why.replace_range(..1, &first.to_uppercase());
            }
            out.push_str(&format!(" {why}."));
        }
    }
    out.push_str(
        " Discard the changes, or if the operator means them, apply with `--allow-host-exec PATH` (a directory covers everything below it).",
    );
    Some(out)
}

/// How many refused paths [`apply_refusal`] names one by one.
pub const LISTED: usize = 20;

/// The operator's `--allow-host-exec` paths, normalised: each names a path and everything
/// below it (`.git/objects` allows `.git/objects/ab/cd`). Names are compared exactly,
/// component by component (`./x/` is `x`); a path that is not clean and relative (absolute,
/// with `..`) allows nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostExecGrant {
    paths: Vec<RelPath>,
}

impl HostExecGrant {
    /// The grant for these operator-given paths (unclean ones are dropped).
    pub fn new<S: AsRef<str>>(paths: &[S]) -> HostExecGrant {
        HostExecGrant {
            paths: paths
                .iter()
                .filter_map(|p| RelPath::new(p.as_ref()).ok())
                .collect(),
        }
    }

    /// The grant for paths already clean.
    pub fn from_paths(paths: Vec<RelPath>) -> HostExecGrant {
        HostExecGrant { paths }
    }

    /// True when the operator named `rel` or one of its ancestors.
    pub fn allows(&self, rel: &RelPath) -> bool {
        self.paths.iter().any(|p| rel.starts_with(p))
    }

    /// True when the grant names nothing.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(p: &str) -> bool {
        classify(&RelPath::new(p).unwrap()).is_some()
    }

    #[test]
    fn matches_control_entries_at_any_depth_and_spelling() {
        for p in [
            ".git",
            "sub/.git",
            "a/b/.git",
            "./.git/x",
            ".git/objects/ab/cdef",
            ".git/refs/heads/main",
            ".git/logs/HEAD",
            ".git/HEAD",
            ".git/info/exclude",
            ".GIT/config",
            ".Git",
            ".git.",
            ".git ",
            ".g\u{200b}it",
            "\u{ff0e}git",
            ".git:stream",
            "GIT~1/config",
            "vendor/x/.hg/hgrc",
            ".sl/config",
            "_darcs/prefs/defaults",
            ".jj/repo/config.toml",
            ".svn/wc.db",
            ".bzr/branch/branch.conf",
            ".envrc",
            "svc/.envrc",
            ".env",
            ".autoenv.zsh",
            "mise.toml",
            ".mise.toml",
            "mise.local.toml",
            ".mise.dev.toml",
            ".mise/config.toml",
            ".config/mise/config.toml",
            ".config/mise.toml",
            ".vscode/tasks.json",
            ".vscode/settings.json",
            ".vscode/mcp.json",
            "app/.vscode/settings.json",
            "proj.code-workspace",
            ".idea/workspace.xml",
            ".idea/watcherTasks.xml",
            ".exrc",
            ".nvimrc",
            ".nvim.lua",
            ".vimrc",
            ".dir-locals.el",
            "lisp/.dir-locals-2.el",
            ".helix/languages.toml",
            ".zed/settings.json",
            ".husky/pre-commit",
            ".pre-commit-config.yaml",
            "lefthook.yml",
            ".lefthook.yaml",
            "lefthook-local.json",
            ".claude/settings.json",
            ".claude/settings.local.json",
            ".mcp.json",
            ".cursor/mcp.json",
            ".gemini/settings.json",
            ".codex/config.toml",
            ".cargo/config.toml",
            ".claude/commands/x.md",
        ] {
            assert!(hit(p), "{p} must match");
        }
    }

    #[test]
    fn leaves_look_alike_ordinary_files_alone() {
        for p in [
            ".gitignore",
            ".gitattributes",
            ".gitmodules",
            ".gitkeep",
            ".github/workflows/x.yml",
            ".github/CODEOWNERS",
            "src/git/mod.rs",
            "git/config",
            "docs/.git-blame-ignore-revs",
            "my.git",
            ".git2",
            "x.hg",
            "hg/hgrc",
            ".vscode/launch.json",
            ".vscode/extensions.json",
            "vscode/settings.json",
            "settings.json",
            "tasks.json",
            ".envrc.example",
            "envrc",
            ".tool-versions",
            ".nvmrc",
            ".python-version",
            "mise.md",
            "premise.toml",
            "src/vimrc.rs",
            "dir-locals.el",
            "idea/notes.md",
            ".ideas",
            "lefthook.md",
            "lefthooks.yml",
            "cargo/config.toml",
            "Makefile",
            "package.json",
            ".claude/notes.md",
            "claude/settings.json",
        ] {
            assert!(!hit(p), "{p} must not match");
        }
    }

    #[test]
    fn flags_round_trip_and_other_flags_do_not_pass_for_them() {
        let rel = RelPath::new("sub/.git").unwrap();
        let h = classify(&rel).unwrap();
        assert_eq!(h.kind, "git");
        assert_eq!(by_kind(h.kind), Some(h));
        assert!(is_host_exec_flag(h.kind));
        assert!(flag_text(h.kind).starts_with("a git control entry"));
        for dynamic in DYNAMIC {
            assert!(is_host_exec_flag(dynamic.kind));
        }
        assert!(!is_host_exec_flag("no_such_kind"));
        assert!(!is_host_exec_flag(&flag_text(h.kind)));
        assert!(flag_text("no_such_kind").contains("does not know"));
        let d = host_exec_rule(&rel).unwrap();
        assert_eq!(d.rule, RULE);
        assert_eq!(d.stage, Stage::Jail);
    }

    #[test]
    fn apply_refusal_names_every_path_up_to_a_cap_and_each_reason_once() {
        let r = |p: &str| RelPath::new(p).unwrap();
        assert_eq!(apply_refusal(&[r("src/a.rs")]), None);
        let text = apply_refusal(&[
            r(".git/HEAD"),
            r(".git/objects/ab/cd"),
            r(".envrc"),
            r("sub/.git"),
        ])
        .unwrap();
        assert!(
            text.contains(
                "2 changed paths at or below `.git` (`.git/HEAD`, `.git/objects/ab/cd`) are a git control entry."
            ),
            "{text}"
        );
        assert!(
            text.contains("`sub/.git` is a git control entry."),
            "{text}"
        );
        assert!(
            text.contains("`.envrc` is a directory-entry shell hook."),
            "{text}"
        );
        assert_eq!(
            text.matches("Git reads its configuration").count(),
            1,
            "{text}"
        );
        assert!(text.contains("--allow-host-exec"), "{text}");
        let many: Vec<RelPath> = (0..LISTED + 5)
            .map(|i| r(&format!("m{i:02}/.git")))
            .collect();
        let text = apply_refusal(&many).unwrap();
        assert_eq!(text.matches(" is a git control entry.").count(), LISTED);
        assert!(text.contains("5 more host-exec entries"), "{text}");
        assert_eq!(
            name_anchor(&r("a/.git/objects/x")).as_deref(),
            Some(std::path::Path::new("a/.git"))
        );
        assert_eq!(name_anchor(&r("src/x")), None);
    }

    #[test]
    fn a_directory_shaped_like_a_git_dir_is_one_whatever_its_name() {
        use std::collections::HashMap;
        use std::path::Path;
        let tree = |entries: &[(&str, Node)]| -> HashMap<String, Node> {
            entries.iter().map(|(p, n)| (p.to_string(), *n)).collect()
        };
        let look = |t: &HashMap<String, Node>| {
            let t = t.clone();
            move |p: &Path| *t.get(p.to_str().unwrap()).unwrap_or(&Node::Absent)
        };
        let bare = tree(&[
            ("src/HEAD", Node::NonDir),
            ("src/objects", Node::Dir),
            ("src/refs", Node::Dir),
        ]);
        let r = |p: &str| RelPath::new(p).unwrap();
        assert_eq!(
            git_dir_ancestor(&r("src/config"), look(&bare)).as_deref(),
            Some(Path::new("src"))
        );
        assert_eq!(
            classify_in(&r("src/hooks/post-checkout"), look(&bare)),
            Some(GIT_DIR_SHAPE)
        );
        assert_eq!(classify_in(&r("lib/config"), look(&bare)), None);
        assert_eq!(classify_in(&r("src"), look(&bare)), None);
        // At the workspace root too, and through `commondir` (a linked worktree's git dir).
        let root = tree(&[("HEAD", Node::NonDir), ("commondir", Node::NonDir)]);
        assert!(classify_in(&r("config"), look(&root)).is_some());
        // Links count as whatever git would find through them.
        let linked = tree(&[
            ("src/HEAD", Node::Link),
            ("src/objects", Node::Link),
            ("src/refs", Node::Dir),
        ]);
        assert!(classify_in(&r("src/config"), look(&linked)).is_some());
        // Missing a piece, or a piece of the wrong kind: not a git directory.
        for partial in [
            tree(&[("src/HEAD", Node::NonDir), ("src/objects", Node::Dir)]),
            tree(&[
                ("src/HEAD", Node::Dir),
                ("src/objects", Node::Dir),
                ("src/refs", Node::Dir),
            ]),
            tree(&[
                ("src/HEAD", Node::NonDir),
                ("src/objects", Node::NonDir),
                ("src/refs", Node::Dir),
            ]),
        ] {
            assert_eq!(classify_in(&r("src/config"), look(&partial)), None);
        }
        assert!(is_host_exec_flag(GIT_DIR_SHAPE.kind));
    }

    #[test]
    fn reads_hooks_path_and_includes_from_git_config() {
        use std::path::{Path, PathBuf};
        let cfg = "[core]\n\trepositoryformatversion = 0\n\tHooksPath = \".githooks\" # husky\n\
                   [include]\n\tpath = ../tools/git.inc\n\
                   [includeIf \"gitdir:~/w/\"]\n\tpath = ~/x.inc\n\
                   [includeIf \"onbranch:main\"]\n\tpath = ../../escape.inc\n\
                   [alias]\n\tpath = not-an-include\n";
        let got = git_config_host_exec(cfg, Path::new(".git"), Path::new(""));
        let paths: Vec<(PathBuf, &str)> = got.iter().map(|(p, h)| (p.clone(), h.what)).collect();
        assert_eq!(
            paths,
            vec![
                (PathBuf::from("tools/git.inc"), CONFIGURED_INCLUDE.what),
                (PathBuf::from(".githooks"), CONFIGURED_HOOKS.what),
            ]
        );
        // Absolute or home hooks paths name nothing in the workspace.
        let abs = "[core]\nhooksPath = /usr/share/hooks\n";
        assert!(git_config_host_exec(abs, Path::new(".git"), Path::new("")).is_empty());
        // A submodule's configuration is read relative to its own directories.
        let sub = "[core]\n\thooksPath = hooks2\n";
        assert_eq!(
            git_config_host_exec(sub, Path::new("vendor/m/.git"), Path::new("vendor/m"))[0].0,
            PathBuf::from("vendor/m/hooks2")
        );
    }

    #[test]
    fn grants_cover_the_named_path_and_below_only() {
        let g = HostExecGrant::new(&["./.git/objects/", "../x", "/abs", ".vscode/tasks.json"]);
        let r = |p: &str| RelPath::new(p).unwrap();
        assert!(g.allows(&r(".git/objects")));
        assert!(g.allows(&r(".git/objects/ab/cd")));
        assert!(!g.allows(&r(".git/objectsx")));
        assert!(!g.allows(&r(".git/refs/heads/main")));
        assert!(!g.allows(&r(".git")));
        assert!(g.allows(&r(".vscode/tasks.json")));
        assert!(!g.allows(&r(".vscode/settings.json")));
        assert!(HostExecGrant::new::<&str>(&[]).is_empty());
        assert!(HostExecGrant::new(&["/abs", "../x"]).is_empty());
    }
}
