//! The Jail: every path a tool touches must resolve inside the workspace root, through no
//! escaping symlink, and must not be a sensitive file or airlock's own state.
//!
//! The jail resolves a path on the real disk under the root's cap-std [`Dir`]: a path with no
//! symlink in it is checked in one `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`; any other
//! is walked one component at a time under directory handles opened `O_PATH | O_NOFOLLOW`,
//! expanding symlinks by hand with the same beneath-the-root semantics: `..` past the root,
//! absolute paths elsewhere, symlinks leading out (for existing paths and, through the deepest
//! existing ancestor, for paths not created yet), procfs and `/dev/fd` links, NUL bytes and
//! over-long paths are denied. The sensitive-name rules ([`sensitive_rule`]) are checked on the
//! path as given *and* on where it resolves, so an in-tree symlink to `.env` is denied too; they
//! hold under every profile, unrestricted included. Writes are also denied to files with more
//! than one hard link (the other name may be outside) and through dangling symlinks.
//!
//! Rule ids (stage `jail`): `jail_absolute_outside`, `jail_parent_escape`,
//! `jail_symlink_escape`, `jail_symlink_loop`, `jail_dangling_symlink` (writes),
//! `jail_magic_link`, `jail_nul`, `jail_control_char` (a control, C1, bidi or invisible
//! formatting character in the path as given or where it resolves, see
//! [`airlock_types::display`]; bytes that are not UTF-8 stay allowed), `jail_empty_path`, `jail_too_long`, `jail_sensitive_file`,
//! `jail_airlock_state`, `jail_hardlink` (writes), `jail_not_a_directory`, `jail_special_file`
//! (fifos, sockets, devices), `jail_root` (writing the root itself), `jail_unresolvable` (the
//! disk refused a lookup, e.g. permission denied: fail closed), `jail_unexpanded` (a path
//! spelled for a shell: `~/x`, `$HOME/x`, `file:///x`), `jail_host_exec` (writes: a path whose
//! content the host runs by itself, such as anything under `.git` or a gitfile, `.envrc` or
//! `.vscode/tasks.json`; see [`crate::host_exec`]. Checked on the path as given and where it
//! resolves; reads stay allowed).
//!
//! Choices where the rules could be read either way (all fail closed or match the kernel):
//!
//! - `..` is physical, as in the kernel; a `..` above the root is an escape unless the names
//!   after it lead straight back down into the root through its canonical ancestors:
//!   `../ws/src` (from a root named `ws`), a symlink to `../ws/src`, and
//!   `/tmp/../tmp/ws/src` all resolve inside. A `..` after any name off that line of ancestors
//!   (`/tmp/other/../ws`) is not followed — `other` could be a symlink — so the path is
//!   outside.
//! - Nothing is expanded: `~/x`, `~user/x`, a lone `$VAR` or `${VAR}` first component and
//!   `scheme://…` are refused (`jail_unexpanded`, or the sensitive rule when one applies)
//!   rather than taken as odd names in the workspace; `./~/x` and `./$HOME` name such files
//!   literally. Backslashes, `%2e%2e` and `C:` are ordinary characters on Linux.
//! - An absolute path outside the root is `jail_absolute_outside` even when it also names a
//!   sensitive file (`/root/.ssh/id_rsa`); a relative one that climbs out is
//!   `jail_parent_escape` unless its folded names are sensitive (`../.env`).
//! - Reads through a dangling in-tree symlink are allowed (they find nothing); writes are not.
//!   Reads of a hard-linked file are allowed; writes are not. Fifos, sockets and devices are
//!   refused for reads too (a read could block or consume a device). The root may be read
//!   (listed) but not written.
//! - Sensitive names are folded before matching (case, look-alikes, invisible characters,
//!   trailing dots and spaces): see [`sensitive_rule`].
//!
//! Only the jail builds a [`ConfinedPath`]. It proves the check happened at that moment; to stay
//! race-free, open it through [`Jail::dir`] (cap-std), never through [`ConfinedPath::abs`]
//! alone. A path that does not exist yet is confined like one that does. The agent's calls see
//! the disk with the changeset staged over it: [`Jail::confine_over`] resolves a path in that
//! merged view, asking an [`Overlay`] (the kernel's staged changeset) before the disk at each
//! component, so a staged symlink is expanded and confined like one on disk.
//!
//! ```
//! use airlock_policy::jail::{Access, Jail};
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::create_dir(dir.path().join("src")).unwrap();
//! let jail = Jail::open(dir.path()).unwrap();
//! let p = jail.confine("./src//lib.rs", Access::Write).unwrap();
//! assert_eq!(p.rel().unwrap().as_path(), std::path::Path::new("src/lib.rs"));
//! assert_eq!(jail.confine("../etc/passwd", Access::Read).unwrap_err().rule, "jail_parent_escape");
//! assert_eq!(jail.confine(".env", Access::Read).unwrap_err().rule, "jail_sensitive_file");
//! ```

mod resolve;
mod sensitive;

pub use crate::names::fold_name;
pub use sensitive::{host_credential_components, sensitive_rule};

use crate::decision::{Decision, Stage};
use crate::modes::OperatorGrant;
use crate::path::{MAX_PATH_BYTES, RelPath};
use airlock_types::display::{Escape, Shown, escape_bytes_for_terminal, is_control_or_bidi};
use cap_std::ambient_authority;
use cap_std::fs::Dir;
pub use resolve::{Overlay, Staged};
use resolve::{Step, WalkError, Walked, Walker, is_magic_abs, show, steps_of};
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{FileType, Mode, OFlags};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What a tool will do with a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// Read (or list).
    Read,
    /// Create, modify, delete or rename.
    Write,
}

/// A path the jail checked. Only the jail ([`Jail::confine`], [`Jail::confine_nofollow`],
/// [`Jail::confine_rel`]) constructs one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfinedPath {
    rel: Option<RelPath>,
    nofollow: Option<RelPath>,
    abs: PathBuf,
    access: Access,
    exists: bool,
    is_dir: bool,
    inside: bool,
}

impl ConfinedPath {
    /// Where the path resolves, relative to the workspace root, with every symlink resolved.
    /// `None` for the workspace root itself (only ever confined for reading) and for a path
    /// outside the workspace (only under an operator's unrestricted grant). For
    /// [`Access::Write`] inside the workspace it is always `Some`.
    pub fn rel(&self) -> Option<&RelPath> {
        self.rel.as_ref()
    }

    /// The path with its parent resolved but its final component as given: differs from
    /// [`ConfinedPath::rel`] only when the final component is a symlink. Use it to delete or
    /// rename a symlink itself rather than its target (the target was still confined; to
    /// confine the link alone, whatever it points to, use [`Jail::confine_nofollow`]).
    pub fn nofollow_rel(&self) -> Option<&RelPath> {
        self.nofollow.as_ref().or(self.rel.as_ref())
    }

    /// The resolved path relative to the root as a `Path` (empty for the root itself).
    pub fn rel_path(&self) -> &Path {
        self.rel
            .as_ref()
            .map(RelPath::as_path)
            .unwrap_or(Path::new(""))
    }

    /// The resolved absolute path (root joined with [`ConfinedPath::rel`]).
    pub fn abs(&self) -> PathBuf {
        self.abs.clone()
    }

    /// The access it was confined for.
    pub fn access(&self) -> Access {
        self.access
    }

    /// True when the resolved path existed at the time of the check.
    pub fn exists(&self) -> bool {
        self.exists
    }

    /// True when the resolved path was an existing directory.
    pub fn is_dir(&self) -> bool {
        self.is_dir
    }

    /// True for the workspace root itself.
    pub fn is_root(&self) -> bool {
        self.inside && self.rel.is_none()
    }

    /// False only for a path outside the workspace, allowed by an unrestricted grant.
    pub fn is_inside(&self) -> bool {
        self.inside
    }
}

/// How one path is to be confined.
#[derive(Debug, Clone, Copy)]
struct How {
    access: Access,
    /// The path as given ended with `/`: it must be a directory if it exists.
    trailing_slash: bool,
    /// Follow a symlink in the final component (everything but `confine_nofollow`).
    follow_last: bool,
    /// The operator granted writing this host-exec path (`apply --allow-host-exec`).
    host_exec_granted: bool,
}

impl How {
    fn new(access: Access, follow_last: bool) -> How {
        How {
            access,
            trailing_slash: false,
            follow_last,
            host_exec_granted: false,
        }
    }
}

/// The workspace jail: the root directory handle and its canonical path.
#[derive(Debug)]
pub struct Jail {
    dir: Dir,
    root: PathBuf,
    given_root: PathBuf,
    fs_root: Option<OwnedFd>,
}

impl Jail {
    /// Open the jail on a workspace root (canonicalised; must be a directory outside procfs).
    pub fn open(root: &Path) -> std::io::Result<Jail> {
        let given_root = std::path::absolute(root)?;
        let canonical = std::fs::canonicalize(root)?;
        if is_magic_abs(&canonical) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "{} is inside procfs or /dev/fd and cannot be a workspace",
                    canonical.display()
                ),
            ));
        }
        let dir = Dir::open_ambient_dir(&canonical, ambient_authority())?;
        Ok(Jail {
            dir,
            root: canonical,
            given_root,
            fs_root: None,
        })
    }

    /// The canonical root path.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The root directory handle. Open confined paths through it (cap-std refuses anything that
    /// resolves outside), never through a string path.
    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    /// True once the operator lifted workspace confinement.
    pub fn is_unrestricted(&self) -> bool {
        self.fs_root.is_some()
    }

    /// Lift workspace confinement for this session (operator only): paths outside the root
    /// become reachable. Sensitive files, airlock state, magic links, NUL bytes and over-long
    /// paths stay denied. If `/` cannot be opened the jail stays confined.
    pub fn set_unrestricted(&mut self, grant: &OperatorGrant) {
        let _: &OperatorGrant = grant;
        self.fs_root = rustix::fs::open(
            "/",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok();
    }

    /// Confine a path as the agent gave it: relative to the root, or absolute (accepted when it
    /// lies under the root, and made relative).
    pub fn confine(&self, path: &str, access: Access) -> Result<ConfinedPath, Decision> {
        self.confine_str(path, How::new(access, true), None)
    }

    /// Like [`Jail::confine`], in the merged view of the disk and a staged layer over it: at
    /// each component the `overlay` is asked first, so a staged symlink is expanded (and
    /// confined) as one on disk would be, a staged file cannot be walked through, and a staged
    /// deletion hides what the disk has there.
    pub fn confine_over(
        &self,
        path: &str,
        access: Access,
        overlay: &dyn Overlay,
    ) -> Result<ConfinedPath, Decision> {
        self.confine_str(path, How::new(access, true), Some(overlay))
    }

    /// [`Jail::confine_nofollow`] in the merged view (see [`Jail::confine_over`]).
    pub fn confine_nofollow_over(
        &self,
        path: &str,
        access: Access,
        overlay: &dyn Overlay,
    ) -> Result<ConfinedPath, Decision> {
        self.confine_str(path, How::new(access, false), Some(overlay))
    }

    /// Like [`Jail::confine`], but a symlink as the final component is not followed: the result
    /// is the link itself (its parent fully resolved and confined), whatever it points to. For
    /// tools that delete or rename the entry rather than use its content. The link's name must
    /// still not be sensitive.
    pub fn confine_nofollow(&self, path: &str, access: Access) -> Result<ConfinedPath, Decision> {
        self.confine_str(path, How::new(access, false), None)
    }

    fn confine_str(
        &self,
        path: &str,
        mut how: How,
        overlay: Option<&dyn Overlay>,
    ) -> Result<ConfinedPath, Decision> {
        let shown = path;
        if path.as_bytes().contains(&0) {
            return Err(deny(
                "jail_nul",
                format!(
                    "`{}` contains a NUL byte, which no real path has.",
                    Shown::name(&truncate(path, 80))
                ),
            ));
        }
        if has_control_char(path.as_bytes()) {
            return Err(control_char_denial(&steps_of(Path::new(path), false), path));
        }
        if path.is_empty() {
            return Err(deny(
                "jail_empty_path",
                "The path is empty; name a file or directory in the workspace (`.` for its root).",
            ));
        }
        if path.len() > MAX_PATH_BYTES {
            return Err(deny(
                "jail_too_long",
                format!(
                    "The path starting `{}…` is {} bytes long; the limit is {MAX_PATH_BYTES}.",
                    truncate(path, 40),
                    path.len()
                ),
            ));
        }
        if let Some(what) = unexpanded(path) {
            // A sensitive name says more (`~/.ssh/id_rsa`).
            if let Some(d) = lexical_sensitive(&steps_of(Path::new(path), false), shown) {
                return Err(d);
            }
            let literal = if what.contains("URL") {
                String::new()
            } else {
                format!(
                    " (`./{}` for a name that really starts so)",
                    truncate(path, 40)
                )
            };
            return Err(deny(
                "jail_unexpanded",
                format!(
                    "`{shown}` starts with {what}, which airlock does not expand; name the path in the workspace{literal}."
                ),
            ));
        }
        // `dir/` and `dir/.` must name directories (Path drops both endings).
        how.trailing_slash = path.len() > 1 && (path.ends_with('/') || path.ends_with("/."));
        let p = Path::new(path);
        if p.is_absolute() && is_magic_abs(p) {
            return Err(magic(shown));
        }
        if self.is_unrestricted() {
            return self.confine_outside(&self.root.join(p), shown, how);
        }
        let steps = if p.is_absolute() {
            match self.strip_root(p) {
                Some(rest) => steps_of(rest, false),
                None if let Some(steps) = self.descend_to_root(p) => steps,
                None => {
                    return Err(deny(
                        "jail_absolute_outside",
                        format!(
                            "`{shown}` is an absolute path outside the workspace {}.",
                            self.root.display()
                        ),
                    ));
                }
            }
        } else {
            steps_of(p, false)
        };
        self.confine_steps(steps, shown, how, overlay)
    }

    /// The jail's verdict for one path as a [`Decision`] (what `airlock jail` prints): an allow
    /// with rule `jail_confined` naming where it resolves, or the denial.
    pub fn decide(&self, path: &str, access: Access) -> Decision {
        match self.confine(path, access) {
            Ok(p) => {
                let target = match p.rel() {
                    Some(r) => format!("`{r}` inside the workspace"),
                    None if p.is_root() => "the workspace root".to_string(),
                    None => format!(
                        "`{}` outside the workspace (unrestricted)",
                        p.abs().display()
                    ),
                };
                Decision::allow(
                    Stage::Jail,
                    "jail_confined",
                    format!("`{path}` resolves to {target}."),
                )
            }
            Err(d) => d,
        }
    }

    /// Confine a clean relative path (harvested or staged paths; non-UTF-8 names are fine).
    pub fn confine_rel(&self, rel: &RelPath, access: Access) -> Result<ConfinedPath, Decision> {
        if self.is_unrestricted() {
            return self.confine_outside(
                &self.root.join(rel.as_path()),
                &rel.display(),
                How::new(access, true),
            );
        }
        self.confine_steps(
            steps_of(rel.as_path(), false),
            &rel.display(),
            How::new(access, true),
            None,
        )
    }

    /// Like [`Jail::confine_rel`], but a host-exec path ([`crate::host_exec`]) that the
    /// operator's `grant` names is not refused (every other rule holds). For `apply` after the
    /// operator's `--allow-host-exec`; nothing the model sends can build a grant.
    pub fn confine_rel_granted(
        &self,
        rel: &RelPath,
        access: Access,
        grant: &crate::host_exec::HostExecGrant,
    ) -> Result<ConfinedPath, Decision> {
        let mut how = How::new(access, true);
        how.host_exec_granted = grant.allows(rel);
        if self.is_unrestricted() {
            return self.confine_outside(&self.root.join(rel.as_path()), &rel.display(), how);
        }
        self.confine_steps(steps_of(rel.as_path(), false), &rel.display(), how, None)
    }

    /// An absolute path that reaches the root through `..` among its (canonical, hence
    /// symlink-free) ancestors, like `/tmp/x/../ws/src`: the steps below the root, or `None`
    /// when it leaves the root's line of ancestors before reaching it.
    fn descend_to_root(&self, p: &Path) -> Option<Vec<Step>> {
        let mut at = PathBuf::from("/");
        let mut comps = p.components();
        for c in comps.by_ref() {
            match c {
                std::path::Component::Normal(n) => at.push(n),
                std::path::Component::ParentDir => {
                    at.pop();
                }
                _ => {}
            }
            if at == self.root {
                return Some(steps_of(comps.as_path(), false));
            }
            if !self.root.starts_with(&at) {
                return None;
            }
        }
        None
    }

    fn strip_root<'p>(&self, p: &'p Path) -> Option<&'p Path> {
        p.strip_prefix(&self.root)
            .or_else(|_| p.strip_prefix(&self.given_root))
            .ok()
    }

    fn confine_steps(
        &self,
        steps: Vec<Step>,
        shown: &str,
        how: How,
        overlay: Option<&dyn Overlay>,
    ) -> Result<ConfinedPath, Decision> {
        if steps_have_control_char(&steps) {
            return Err(control_char_denial(&steps, shown));
        }
        // The path as given, normalised lexically, must not name a sensitive file either (a
        // symlink called `.env` is as off-limits as the file).
        if let Some(d) = lexical_sensitive(&steps, shown) {
            return Err(d);
        }
        if let Some(d) = lexical_host_exec(&steps, shown, how) {
            return Err(d);
        }
        let walker = Walker {
            base: self.dir.as_fd(),
            base_abs: &self.root,
            parent_of_base_is_base: false,
            confine_to: Some(&self.root),
            confine_alias: Some(&self.given_root),
            follow_last: how.follow_last,
            overlay,
        };
        let walked = walker.resolve(steps).map_err(|e| walk_denial(e, shown))?;
        self.finish(walked, shown, how, true, &walker)
    }

    fn confine_outside(&self, abs: &Path, shown: &str, how: How) -> Result<ConfinedPath, Decision> {
        let Some(fs_root) = &self.fs_root else {
            return Err(deny(
                "jail_absolute_outside",
                format!("`{shown}` lies outside the workspace."),
            ));
        };
        let steps = steps_of(abs.strip_prefix("/").unwrap_or(abs), false);
        if steps_have_control_char(&steps) {
            return Err(control_char_denial(&steps, shown));
        }
        if let Some(d) = lexical_sensitive(&steps, shown) {
            return Err(d);
        }
        if let Some(d) = lexical_host_exec(&steps, shown, how) {
            return Err(d);
        }
        let walker = Walker {
            base: fs_root.as_fd(),
            base_abs: Path::new("/"),
            parent_of_base_is_base: true,
            confine_to: None,
            confine_alias: None,
            follow_last: how.follow_last,
            overlay: None,
        };
        let mut walked = walker.resolve(steps).map_err(|e| walk_denial(e, shown))?;
        let resolved = walker.abs_of(&walked.names);
        if let Ok(rest) = resolved.strip_prefix(&self.root) {
            // Back inside: report it relative to the root like any other path.
            let strip = |names: Vec<OsString>| -> Vec<OsString> {
                names
                    .into_iter()
                    .skip(self.root.components().count() - 1)
                    .collect()
            };
            debug_assert_eq!(strip(walked.names.clone()).len(), rest.components().count());
            walked.names = strip(walked.names);
            walked.nofollow = walked.nofollow.take().and_then(|nf| {
                walker
                    .abs_of(&nf)
                    .starts_with(&self.root)
                    .then(|| strip(nf))
            });
            let inner = Walker {
                base: self.dir.as_fd(),
                base_abs: &self.root,
                parent_of_base_is_base: false,
                confine_to: Some(&self.root),
                confine_alias: Some(&self.given_root),
                follow_last: how.follow_last,
                overlay: None,
            };
            return self.finish(walked, shown, how, true, &inner);
        }
        self.finish(walked, shown, how, false, &walker)
    }

    fn finish(
        &self,
        walked: Walked,
        shown: &str,
        how: How,
        inside: bool,
        walker: &Walker<'_>,
    ) -> Result<ConfinedPath, Decision> {
        let How {
            access,
            trailing_slash,
            follow_last,
            host_exec_granted,
        } = how;
        let to_rel = |names: &[OsString]| -> Result<Option<RelPath>, Decision> {
            if names.is_empty() {
                return Ok(None);
            }
            let mut p = PathBuf::new();
            for n in names {
                p.push(n);
            }
            RelPath::new(&p).map(Some).map_err(|_| too_long(shown))
        };
        let rel = to_rel(&walked.names)?;
        let nofollow = match &walked.nofollow {
            Some(nf) => to_rel(nf)?,
            None => None,
        };
        for r in [&rel, &nofollow].into_iter().flatten() {
            if let Some(d) = sensitive_rule(r) {
                return Err(resolved_sensitive(d, shown, r));
            }
            // A symlink may lead to such a name though the path as given has none.
            if has_control_char(r.as_bytes()) {
                return Err(control_char_denial(&[], shown));
            }
        }
        if access == Access::Write && inside && !host_exec_granted {
            for r in [&rel, &nofollow].into_iter().flatten() {
                if let Some(h) = crate::host_exec::classify(r) {
                    let subject = if r.display() == shown {
                        format!("`{shown}`")
                    } else {
                        format!("`{shown}` (resolving to `{r}`)")
                    };
                    return Err(crate::host_exec::denial(&subject, h));
                }
            }
        }
        if rel.is_none() && inside && access == Access::Write {
            return Err(deny(
                "jail_root",
                format!("`{shown}` is the workspace root itself, which a tool may not write."),
            ));
        }
        let exists = walked.final_type.is_some();
        let is_dir = walked.final_type == Some(FileType::Directory);
        let is_link = walked.final_type == Some(FileType::Symlink);
        if let Some(t) = walked.final_type
            && !matches!(t, FileType::Directory | FileType::RegularFile)
            && (t != FileType::Symlink || follow_last)
        {
            return Err(deny(
                "jail_special_file",
                format!(
                    "`{shown}` is a {} rather than a regular file or directory.",
                    describe_type(t)
                ),
            ));
        }
        if trailing_slash && exists && !is_dir {
            return Err(deny(
                "jail_not_a_directory",
                format!("`{shown}` ends with `/`, but it is a file, not a directory."),
            ));
        }
        if access == Access::Write {
            if walked.dangling {
                return Err(deny(
                    "jail_dangling_symlink",
                    format!(
                        "`{shown}` goes through a symlink whose target does not exist; writing through it is refused."
                    ),
                ));
            }
            if !is_dir && !is_link && walked.final_nlink > 1 {
                return Err(deny(
                    "jail_hardlink",
                    format!(
                        "`{shown}` has {} hard links; writing it would change the other names too.",
                        walked.final_nlink
                    ),
                ));
            }
        }
        let abs = walker.abs_of(&walked.names);
        if abs.as_os_str().len() > MAX_PATH_BYTES {
            return Err(too_long(shown));
        }
        if !inside {
            // `rel` held the absolute names (checked above); outside there is no relative path.
            return Ok(ConfinedPath {
                rel: None,
                nofollow: None,
                abs,
                access,
                exists,
                is_dir,
                inside: false,
            });
        }
        Ok(ConfinedPath {
            rel,
            nofollow,
            abs,
            access,
            exists,
            is_dir,
            inside: true,
        })
    }
}

/// What a path's beginning means to a shell or a browser but not to the jail: `~` or `~user`
/// (a home directory), a lone `$VAR` or `${…}` first component (a variable), or `scheme://`
/// (a URL). Taken literally they would name odd files inside the workspace while the agent
/// meant somewhere else, so they are refused; `./~`, `./$HOME` name the literal files.
fn unexpanded(path: &str) -> Option<&'static str> {
    let first = path.split('/').next().unwrap_or("");
    if first.starts_with('~') {
        return Some("`~`, a home directory");
    }
    let ident = |s: &str| {
        let mut cs = s.chars();
        cs.next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if let Some(var) = first.strip_prefix('$')
        && (ident(var) || (var.starts_with('{') && var.ends_with('}')))
    {
        return Some("a variable");
    }
    if let Some((scheme, _)) = path.split_once("://")
        && ident(&scheme.replace(['+', '-', '.'], "_"))
        && !scheme.contains('/')
    {
        return Some("a URL scheme");
    }
    None
}

/// True when `bytes` (a path, or one name of it) holds a character a terminal acts on or that
/// reorders or hides text ([`is_control_or_bidi`]): what `jail_control_char` refuses, for
/// callers (the harvest of a command's writes) that must refuse the same names. Bytes that
/// are not UTF-8 are not characters and stay allowed (they are shown as `\xNN`).
pub fn has_control_char(bytes: &[u8]) -> bool {
    bytes
        .utf8_chunks()
        .any(|c| c.valid().chars().any(is_control_or_bidi))
}

fn steps_have_control_char(steps: &[Step]) -> bool {
    steps.iter().any(|s| match s {
        Step::Name { name, .. } => has_control_char(name.as_bytes()),
        Step::Parent { .. } => false,
    })
}

/// The denial of a path with a control, bidi or invisible character in it (`jail_control_char`):
/// such a name could disguise itself and the lines around it wherever it is shown, so no tool
/// may use it. A sensitive name says more and is reported as such (`.e\u{200b}nv`); either
/// way the path is quoted escaped.
fn control_char_denial(steps: &[Step], shown: &str) -> Decision {
    let escaped = Shown::name(&truncate(shown, 120)).to_string();
    if let Some(d) = lexical_sensitive(steps, &escaped) {
        return d;
    }
    deny(
        "jail_control_char",
        format!(
            "`{escaped}` contains a control, bidirectional or invisible formatting character (shown escaped), which could disguise the name on the operator's screen; name the file with printable characters only."
        ),
    )
}

fn deny(rule: &'static str, reason: impl Into<String>) -> Decision {
    Decision::deny(Stage::Jail, rule, reason)
}

fn magic(shown: &str) -> Decision {
    deny(
        "jail_magic_link",
        format!("`{shown}` leads into procfs or /dev/fd, whose magic links can reach anything."),
    )
}

fn too_long(shown: &str) -> Decision {
    deny(
        "jail_too_long",
        format!(
            "`{}` is too long (limit {MAX_PATH_BYTES} bytes in all, 255 per name, after resolving symlinks).",
            truncate(shown, 80)
        ),
    )
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

fn describe_type(t: FileType) -> &'static str {
    match t {
        FileType::Fifo => "named pipe",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        _ => "special file",
    }
}

fn resolved_sensitive(d: Decision, shown: &str, resolved: &RelPath) -> Decision {
    if resolved.display() == shown {
        return d;
    }
    let what = if d.rule == "jail_airlock_state" {
        "airlock's own state (.airlock)"
    } else {
        "a sensitive file"
    };
    Decision::deny(
        Stage::Jail,
        d.rule,
        format!("`{shown}` resolves to `{resolved}`, {what}, which no tool may read or write."),
    )
}

/// The sensitive rules on the path as given, after lexical `.`/`..` folding.
fn lexical_sensitive(steps: &[Step], shown: &str) -> Option<Decision> {
    let mut names: Vec<&std::ffi::OsStr> = Vec::new();
    for s in steps {
        match s {
            Step::Parent { .. } => {
                names.pop();
            }
            Step::Name { name, .. } => names.push(name),
        }
    }
    sensitive::sensitive_components(names.into_iter(), shown)
}

/// The host-exec rule on the path as given (writes only), after lexical `.`/`..` folding.
fn lexical_host_exec(steps: &[Step], shown: &str, how: How) -> Option<Decision> {
    if how.access != Access::Write || how.host_exec_granted {
        return None;
    }
    let mut names: Vec<&std::ffi::OsStr> = Vec::new();
    for s in steps {
        match s {
            Step::Parent { .. } => {
                names.pop();
            }
            Step::Name { name, .. } => names.push(name),
        }
    }
    crate::host_exec::classify_components(names.into_iter())
        .map(|h| crate::host_exec::denial(&format!("`{shown}`"), h))
}

fn walk_denial(e: WalkError, shown: &str) -> Decision {
    match e {
        WalkError::ParentEscape { from_link: false } => deny(
            "jail_parent_escape",
            format!("`{shown}` climbs with `..` above the workspace root."),
        ),
        WalkError::ParentEscape { from_link: true } => deny(
            "jail_symlink_escape",
            format!(
                "`{shown}` goes through a symlink whose target climbs above the workspace root."
            ),
        ),
        WalkError::AbsoluteLink(t) => deny(
            "jail_symlink_escape",
            format!(
                "`{shown}` goes through a symlink to `{}`, outside the workspace.",
                escape_bytes_for_terminal(t.as_bytes(), Escape::Name)
            ),
        ),
        WalkError::MagicLink(t) => deny(
            "jail_magic_link",
            format!(
                "`{shown}` leads to `{}` in procfs or /dev/fd, whose magic links can reach anything.",
                escape_bytes_for_terminal(t.as_bytes(), Escape::Name)
            ),
        ),
        WalkError::Loop => deny(
            "jail_symlink_loop",
            format!(
                "`{shown}` goes through more than {} symlinks (a loop?).",
                resolve::MAX_SYMLINK_HOPS
            ),
        ),
        WalkError::NotADirectory(names) => deny(
            "jail_not_a_directory",
            format!(
                "`{shown}` continues past `{}`, which is a file, not a directory.",
                show(&names)
            ),
        ),
        WalkError::NameTooLong => too_long(shown),
        WalkError::Overlay(names, why) => deny(
            "jail_unresolvable",
            format!(
                "`{shown}` could not be checked at `{}` in the changeset ({why}), so it is refused.",
                show(&names)
            ),
        ),
        WalkError::Io(names, errno) => deny(
            "jail_unresolvable",
            format!(
                "`{shown}` could not be checked at `{}` ({}), so it is refused.",
                show(&names),
                std::io::Error::from(errno)
            ),
        ),
    }
}
