//! The component-by-component walk under a directory fd.
//!
//! Invariant: every name on the stack up to `fds.len()` is a real directory (not a symlink)
//! held open with `O_PATH | O_NOFOLLOW`, so each lookup is one `fstatat(AT_SYMLINK_NOFOLLOW)`
//! relative to a handle, never a string path the disk could re-route. Symlinks are expanded
//! by hand: relative targets continue from their directory, absolute ones restart from the
//! base (confined: only when they name a place under the root), and `..` pops the stack — past
//! the base is an escape, unless the names that follow lead straight back down into the base
//! through its own canonical, symlink-free ancestors (`../ws/src` from a root named `ws`).
//! Names past the first missing one are kept lexically; a `..` that
//! climbs back into existing directories resumes the disk walk, so `new/../link` is still
//! checked.

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path};

/// Linux follows at most 40 symlinks in one lookup; so do we.
pub(crate) const MAX_SYMLINK_HOPS: u32 = 40;

/// What a layer over the disk (the kernel's staged changeset) makes of one path, which the
/// walk takes instead of the disk's: the agent's later calls see the disk *with* its staged
/// changes, and a path is confined where it resolves in that merged view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Staged {
    /// A regular file.
    File,
    /// A directory; `opaque` when nothing of the disk below it shows through (it replaced
    /// something that was not a directory, or a deleted one).
    Dir {
        /// The disk's entries below it are hidden.
        opaque: bool,
    },
    /// A symbolic link with this target, expanded as a link on disk would be.
    Symlink(OsString),
    /// Deleted: nothing there (and nothing of the disk below it).
    Deleted,
}

/// A layer over the disk that the jail's walk consults first, component by component.
pub trait Overlay {
    /// What the layer holds at `rel` (a clean relative path), or `None` where the disk shows
    /// through. An error of the layer itself must be reported as a place the walk cannot
    /// resolve, never as `None` (fail closed).
    fn staged(&self, rel: &Path) -> Result<Option<Staged>, String>;
}

/// One pending component and whether it came out of a symlink target.
#[derive(Debug, Clone)]
pub(crate) enum Step {
    Parent { from_link: bool },
    Name { name: OsString, from_link: bool },
}

/// What the walk found out about the final path.
#[derive(Debug)]
pub(crate) struct Walked {
    /// Resolved names below the base.
    pub names: Vec<OsString>,
    /// The names up to (excluding) the final one resolved, plus the final one as given,
    /// when the final given component was a symlink.
    pub nofollow: Option<Vec<OsString>>,
    /// File type of the final path if it exists.
    pub final_type: Option<FileType>,
    /// Hard-link count of the final path if it exists.
    pub final_nlink: u64,
    /// A symlink target (or part of it) does not exist.
    pub dangling: bool,
}

/// Why the walk stopped.
#[derive(Debug)]
pub(crate) enum WalkError {
    /// `..` climbed above the base; `from_link` when a symlink target did it.
    ParentEscape { from_link: bool },
    /// An absolute symlink target outside the base; the target text.
    AbsoluteLink(OsString),
    /// A symlink into procfs or /dev/fd; the target text.
    MagicLink(OsString),
    /// More than [`MAX_SYMLINK_HOPS`] symlinks.
    Loop,
    /// A component other than the last is not a directory; its resolved names.
    NotADirectory(Vec<OsString>),
    /// A name over 255 bytes.
    NameTooLong,
    /// The disk refused a lookup (permission, race, I/O); the names so far and the error.
    Io(Vec<OsString>, Errno),
    /// The overlay could not say what it holds at these names.
    Overlay(Vec<OsString>, String),
}

/// True for absolute paths into procfs or the fd links of /dev.
pub(crate) fn is_magic_abs(p: &Path) -> bool {
    let mut it = p.components().filter(|c| !matches!(c, Component::CurDir));
    if it.next() != Some(Component::RootDir) {
        return false;
    }
    match it.next() {
        Some(Component::Normal(a)) if a == "proc" => true,
        Some(Component::Normal(a)) if a == "dev" => matches!(
            it.next(),
            Some(Component::Normal(b)) if b == "fd" || b == "stdin" || b == "stdout" || b == "stderr"
        ),
        _ => false,
    }
}

/// Turn a relative path into steps (`.` dropped, `..` kept).
pub(crate) fn steps_of(p: &Path, from_link: bool) -> Vec<Step> {
    p.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(Step::Name {
                name: n.to_os_string(),
                from_link,
            }),
            Component::ParentDir => Some(Step::Parent { from_link }),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect()
}

/// The walk's fixed inputs.
pub(crate) struct Walker<'a> {
    /// Directory fd the names are relative to (the root, or `/` when unrestricted).
    pub base: BorrowedFd<'a>,
    /// Its canonical absolute path.
    pub base_abs: &'a Path,
    /// `..` at the base stays at the base (as at `/`) instead of being an escape.
    pub parent_of_base_is_base: bool,
    /// Absolute symlink targets must lie under this path (confined) to be followed.
    pub confine_to: Option<&'a Path>,
    /// Another spelling of `confine_to` (the root as the operator gave it, through symlinks).
    pub confine_alias: Option<&'a Path>,
    /// Follow a symlink in the final given component (false: stop at the link itself).
    pub follow_last: bool,
    /// The staged layer over the disk, consulted before it (see [`Overlay`]).
    pub overlay: Option<&'a dyn Overlay>,
}

impl Walker<'_> {
    /// Resolve `steps`: the one-syscall fast path when it applies, else the full walk.
    pub(crate) fn resolve(&self, steps: Vec<Step>) -> Result<Walked, WalkError> {
        match self.fast(&steps) {
            Some(w) if self.overlay_silent_on(&w.names)? => Ok(w),
            _ => self.walk(steps),
        }
    }

    /// True when the overlay holds nothing at any prefix of `names` (the disk's answer then
    /// stands).
    fn overlay_silent_on(&self, names: &[OsString]) -> Result<bool, WalkError> {
        let Some(ov) = self.overlay else {
            return Ok(true);
        };
        let mut p = std::path::PathBuf::new();
        for (i, n) in names.iter().enumerate() {
            p.push(n);
            if ov
                .staged(&p)
                .map_err(|e| WalkError::Overlay(names[..=i].to_vec(), e))?
                .is_some()
            {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// What the overlay holds at `names/name`.
    fn staged_at(&self, names: &[OsString], name: &OsStr) -> Result<Option<Staged>, WalkError> {
        let Some(ov) = self.overlay else {
            return Ok(None);
        };
        let mut p: std::path::PathBuf = names.iter().collect();
        p.push(name);
        ov.staged(&p).map_err(|e| {
            let mut at = names.to_vec();
            at.push(name.to_os_string());
            WalkError::Overlay(at, e)
        })
    }

    /// The common case in one `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`: with no symlink
    /// anywhere and nothing climbing above the root, the lexical path *is* the resolved path.
    /// For a path that does not exist yet, the deepest existing ancestor is found the same way,
    /// one syscall per missing name, and the missing name itself is confirmed absent. Anything
    /// else — a symlink, an escape, `..` below a missing name, an old kernel — returns `None` and
    /// the full walk decides (and explains).
    fn fast(&self, steps: &[Step]) -> Option<Walked> {
        self.confine_to?;
        let mut names: Vec<OsString> = Vec::with_capacity(steps.len());
        let mut path: Vec<u8> = Vec::new();
        // ends[i]: length of `path` once step i is appended.
        let mut ends: Vec<usize> = Vec::with_capacity(steps.len());
        for s in steps {
            if !path.is_empty() {
                path.push(b'/');
            }
            match s {
                Step::Parent { .. } => {
                    names.pop()?;
                    path.extend_from_slice(b"..");
                }
                Step::Name { name, .. } => {
                    if name.len() > crate::path::MAX_NAME_BYTES {
                        return None;
                    }
                    names.push(name.clone());
                    path.extend_from_slice(name.as_bytes());
                }
            }
            ends.push(path.len());
        }
        if names.is_empty() {
            return None;
        }
        let how = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        match rustix::fs::openat2(
            self.base,
            OsStr::from_bytes(&path),
            flags,
            Mode::empty(),
            how,
        ) {
            Ok(fd) => {
                let st = rustix::fs::fstat(&fd).ok()?;
                let t = FileType::from_raw_mode(st.st_mode);
                return (t != FileType::Symlink).then(|| Walked {
                    names,
                    nofollow: None,
                    final_type: Some(t),
                    final_nlink: nlink_of(&st),
                    dangling: false,
                });
            }
            Err(Errno::NOENT) => {}
            Err(_) => return None,
        }
        // Find the deepest existing directory: steps[..k] exists, steps[k] does not.
        for k in (0..steps.len()).rev() {
            let Step::Name { name: missing, .. } = &steps[k] else {
                return None;
            };
            let absent = |r: rustix::io::Result<rustix::fs::Stat>| matches!(r, Err(Errno::NOENT));
            let stat_missing = if k == 0 {
                rustix::fs::statat(self.base, missing.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
            } else {
                let parent = OsStr::from_bytes(&path[..ends[k - 1]]);
                match rustix::fs::openat2(
                    self.base,
                    parent,
                    flags | OFlags::DIRECTORY,
                    Mode::empty(),
                    how,
                ) {
                    Ok(dir) => {
                        rustix::fs::statat(&dir, missing.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
                    }
                    Err(Errno::NOENT) => continue,
                    Err(_) => return None,
                }
            };
            return absent(stat_missing).then_some(Walked {
                names,
                nofollow: None,
                final_type: None,
                final_nlink: 0,
                dangling: false,
            });
        }
        None
    }

    /// The component-by-component walk.
    pub(crate) fn walk(&self, steps: Vec<Step>) -> Result<Walked, WalkError> {
        let mut pending: VecDeque<Step> = steps.into();
        let mut names: Vec<OsString> = Vec::new();
        let mut fds: Vec<OwnedFd> = Vec::new();
        let mut hops = 0u32;
        let mut dangling = false;
        let mut nofollow = None;
        let mut final_file: Option<(FileType, u64)> = None;

        while let Some(step) = pending.pop_front() {
            let (name, from_link) = match step {
                Step::Parent { from_link } => {
                    if names.is_empty() {
                        if self.parent_of_base_is_base {
                            continue;
                        }
                        self.climb_back(&mut pending, from_link)?;
                        continue;
                    }
                    names.pop();
                    fds.truncate(names.len());
                    continue;
                }
                Step::Name { name, from_link } => (name, from_link),
            };
            if name.len() > crate::path::MAX_NAME_BYTES {
                return Err(WalkError::NameTooLong);
            }
            // The staged layer first: what it holds there is what the path is.
            match self.staged_at(&names, &name)? {
                None => {}
                Some(Staged::Deleted) => {
                    // Gone: the names after it are new, with nothing on disk to consult.
                    dangling |= from_link;
                    names.push(name);
                    continue;
                }
                Some(Staged::File) => {
                    names.push(name);
                    if !pending.is_empty() {
                        return Err(WalkError::NotADirectory(names));
                    }
                    final_file = Some((FileType::RegularFile, 1));
                    continue;
                }
                Some(Staged::Dir { opaque }) => {
                    let at = fds.len() == names.len();
                    if !opaque && at && self.open_disk_dir(&mut fds, &names, &name)? {
                        names.push(name);
                    } else {
                        // Only in the changeset: the names below are new or staged too.
                        names.push(name);
                        if pending.is_empty() {
                            final_file = Some((FileType::Directory, 2));
                        }
                    }
                    continue;
                }
                Some(Staged::Symlink(target)) => {
                    if !self.follow_last && !from_link && pending.is_empty() {
                        names.push(name);
                        final_file = Some((FileType::Symlink, 1));
                        continue;
                    }
                    hops += 1;
                    if hops > MAX_SYMLINK_HOPS {
                        return Err(WalkError::Loop);
                    }
                    if pending.is_empty() && nofollow.is_none() {
                        let mut nf = names.clone();
                        nf.push(name);
                        nofollow = Some(nf);
                    }
                    self.expand_link(target, &mut names, &mut fds, &mut pending)?;
                    continue;
                }
            }
            if fds.len() < names.len() {
                // Below a missing directory: nothing on disk to consult.
                names.push(name);
                continue;
            }
            let dir = fds.last().map(|f| f.as_fd()).unwrap_or(self.base);
            let st = match rustix::fs::statat(dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(Errno::NOENT) => {
                    dangling |= from_link;
                    names.push(name);
                    continue;
                }
                Err(e) => {
                    names.push(name);
                    return Err(WalkError::Io(names, e));
                }
            };
            let ftype = FileType::from_raw_mode(st.st_mode);
            match ftype {
                FileType::Symlink if !self.follow_last && !from_link && pending.is_empty() => {
                    names.push(name);
                    final_file = Some((ftype, nlink_of(&st)));
                }
                FileType::Symlink => {
                    hops += 1;
                    if hops > MAX_SYMLINK_HOPS {
                        return Err(WalkError::Loop);
                    }
                    let target = rustix::fs::readlinkat(dir, name.as_os_str(), Vec::new())
                        .map_err(|e| WalkError::Io(names.clone(), e))?;
                    let target = OsString::from_vec(target.into_bytes());
                    if pending.is_empty() && nofollow.is_none() {
                        let mut nf = names.clone();
                        nf.push(name);
                        nofollow = Some(nf);
                    }
                    self.expand_link(target, &mut names, &mut fds, &mut pending)?;
                }
                FileType::Directory => {
                    let fd = rustix::fs::openat(
                        dir,
                        name.as_os_str(),
                        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    );
                    names.push(name);
                    match fd {
                        Ok(fd) => fds.push(fd),
                        Err(e) => return Err(WalkError::Io(names, e)),
                    }
                    if self.is_magic_place(&names) {
                        return Err(WalkError::MagicLink(self.abs_of(&names).into_os_string()));
                    }
                }
                _ => {
                    names.push(name);
                    if !pending.is_empty() {
                        return Err(WalkError::NotADirectory(names));
                    }
                    final_file = Some((ftype, nlink_of(&st)));
                }
            }
        }
        if nofollow.as_ref().is_some_and(|nf| *nf == names) {
            nofollow = None;
        }
        let (final_type, final_nlink) = match final_file {
            Some((t, n)) => (Some(t), n),
            None if fds.len() == names.len() => (Some(FileType::Directory), 2),
            None => (None, 0),
        };
        Ok(Walked {
            names,
            nofollow,
            final_type,
            final_nlink,
            dangling,
        })
    }

    /// Puts a symlink's target in front of the pending steps: a relative one continues from
    /// the link's directory, an absolute one restarts from the base (confined: only when it
    /// names a place under the root).
    fn expand_link(
        &self,
        target: OsString,
        names: &mut Vec<OsString>,
        fds: &mut Vec<OwnedFd>,
        pending: &mut VecDeque<Step>,
    ) -> Result<(), WalkError> {
        let tpath = Path::new(&target);
        let expanded = if tpath.is_absolute() {
            if is_magic_abs(tpath) {
                return Err(WalkError::MagicLink(target));
            }
            let rest = match self.confine_to {
                Some(root) => match tpath
                    .strip_prefix(root)
                    .or_else(|e| self.confine_alias.map_or(Err(e), |a| tpath.strip_prefix(a)))
                {
                    Ok(rest) => rest,
                    Err(_) => return Err(WalkError::AbsoluteLink(target)),
                },
                None => tpath.strip_prefix("/").unwrap_or(tpath),
            };
            names.clear();
            fds.clear();
            steps_of(rest, true)
        } else {
            steps_of(tpath, true)
        };
        for s in expanded.into_iter().rev() {
            pending.push_front(s);
        }
        Ok(())
    }

    /// Opens `names/name` as a directory handle when the disk has a real directory there
    /// (pushing it on `fds`); false when it has anything else or nothing.
    fn open_disk_dir(
        &self,
        fds: &mut Vec<OwnedFd>,
        names: &[OsString],
        name: &OsStr,
    ) -> Result<bool, WalkError> {
        let dir = fds.last().map(|f| f.as_fd()).unwrap_or(self.base);
        match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {}
            Ok(_) | Err(Errno::NOENT) => return Ok(false),
            Err(e) => return Err(WalkError::Io(names.to_vec(), e)),
        }
        let fd = rustix::fs::openat(
            dir,
            name,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| WalkError::Io(names.to_vec(), e))?;
        fds.push(fd);
        Ok(true)
    }

    /// A `..` above the base: follow the names that come next through the base's own
    /// ancestors, which are real directories since the base path is canonical. Names that lead
    /// straight back down to the base (`../ws/src` from a root called `ws`) resume the walk
    /// at the base; any step elsewhere, or ending above it, is an escape.
    fn climb_back(&self, pending: &mut VecDeque<Step>, from_link: bool) -> Result<(), WalkError> {
        let escape = WalkError::ParentEscape { from_link };
        let Some(mut above) = self.base_abs.parent().map(Path::to_path_buf) else {
            return Err(escape);
        };
        while let Some(step) = pending.pop_front() {
            match step {
                Step::Parent { .. } => {
                    if let Some(up) = above.parent() {
                        above = up.to_path_buf();
                    }
                }
                Step::Name { name, .. } => {
                    above.push(name);
                    if above == self.base_abs {
                        return Ok(());
                    }
                    if !self.base_abs.starts_with(&above) {
                        if is_magic_abs(&above) {
                            return Err(WalkError::MagicLink(above.into_os_string()));
                        }
                        return Err(escape);
                    }
                }
            }
        }
        Err(escape)
    }

    /// Procfs (reached through the real tree, e.g. when the base is `/`).
    fn is_magic_place(&self, names: &[OsString]) -> bool {
        names.len() <= 2 && self.base_abs == Path::new("/") && is_magic_abs(&self.abs_of(names))
    }

    pub(crate) fn abs_of(&self, names: &[OsString]) -> std::path::PathBuf {
        let mut p = self.base_abs.to_path_buf();
        for n in names {
            p.push(n);
        }
        p
    }
}

/// `st_nlink` is `u64` on x86_64 and `u32` elsewhere.
#[allow(clippy::useless_conversion)]
fn nlink_of(st: &rustix::fs::Stat) -> u64 {
    u64::from(st.st_nlink)
}

/// Names as a display string (`a/b`), for messages.
pub(crate) fn show(names: &[OsString]) -> String {
    let mut bytes = Vec::new();
    for (i, n) in names.iter().enumerate() {
        if i > 0 {
            bytes.push(b'/');
        }
        bytes.extend_from_slice(OsStr::as_bytes(n));
    }
    airlock_types::display::escape_bytes_for_terminal(&bytes, airlock_types::display::Escape::Name)
}
