//! The overlay lower layer for the sandbox: a snapshot materialised as a directory that sits
//! between the read-only workspace and the scratch upper layer. Files, directories and symlinks
//! are created as staged; deletes become overlayfs whiteouts (a 0/0 character device), and a
//! deleted directory with entries staged below it becomes an opaque directory. Cost is
//! O(changed files): nothing from the workspace is copied.

use crate::blobs::BlobStore;
use crate::model::{Change, ChangesetSnapshot, Fingerprint};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, XattrFlags};
use std::ffi::{CStr, CString, OsStr};
use std::fs;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The opaque-directory markers: `trusted.` for a mount by a privileged user, `user.` for a
/// mount with `userxattr` (unprivileged overlayfs).
pub const OPAQUE_XATTRS: [&str; 2] = ["trusted.overlay.opaque", "user.overlay.opaque"];

/// Materialise `snapshot` into the empty (or new) directory `dir`, contents from `blobs`.
/// Session-local entries are included: later commands of the session see them.
pub fn materialize_layer(
    snapshot: &ChangesetSnapshot,
    blobs: &BlobStore,
    dir: &Path,
) -> io::Result<()> {
    materialize(snapshot, blobs, dir, None)
}

/// Like [`materialize_layer`], and the directories the layer creates implicitly (parents of
/// staged entries) take the mode and owner of the same directory in `workspace`, so the
/// merged view does not change them (overlayfs shows the topmost layer's directory attributes).
pub fn materialize_layer_over(
    snapshot: &ChangesetSnapshot,
    blobs: &BlobStore,
    dir: &Path,
    workspace: &Path,
) -> io::Result<()> {
    materialize(snapshot, blobs, dir, Some(workspace))
}

/// The layer directory and the workspace, open: every entry is made relative to them (`*at`
/// calls), so a staged path the jail accepted (at most `PATH_MAX` below the workspace) is made
/// whatever the length of the layer's own path.
struct Place {
    layer: OwnedFd,
    base: Option<OwnedFd>,
}

/// `rel` as a system-call path (staged paths hold no NUL byte).
fn c_path(rel: &Path) -> io::Result<CString> {
    CString::new(rel.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))
}

/// Create the missing parents of `rel` in the layer, copying attributes from the workspace.
fn create_parents(at: &Place, rel: &Path) -> io::Result<()> {
    let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) else {
        return Ok(());
    };
    let cp = c_path(parent)?;
    if rustix::fs::statat(&at.layer, &cp, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory)
    {
        return Ok(());
    }
    create_parents(at, parent)?;
    ensure_dir(at.layer.as_fd(), &cp, 0o755)?;
    // Only a real directory of the workspace lends its attributes; a symlink never.
    if let Some(base) = &at.base
        && let Ok(st) = rustix::fs::statat(base, &cp, AtFlags::SYMLINK_NOFOLLOW)
        && FileType::from_raw_mode(st.st_mode) == FileType::Directory
    {
        rustix::fs::chmodat(
            &at.layer,
            &cp,
            Mode::from_raw_mode(st.st_mode & 0o7777),
            AtFlags::empty(),
        )?;
        // Ownership can be copied only with the privilege to chown; without it the directory
        // keeps the caller's ownership, which is what an unprivileged sandbox sees.
        let _ = rustix::fs::chownat(
            &at.layer,
            &cp,
            Some(rustix::fs::Uid::from_raw(st.st_uid)),
            Some(rustix::fs::Gid::from_raw(st.st_gid)),
            AtFlags::SYMLINK_NOFOLLOW,
        );
    }
    Ok(())
}

/// A handle on a directory for the `*at` calls below it only (`O_PATH`: it needs no permission
/// on the directory itself, as a path through it needs none).
fn open_path(at: impl AsFd, path: impl rustix::path::Arg) -> io::Result<OwnedFd> {
    Ok(rustix::fs::openat(
        at,
        path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

fn open_dir(at: impl AsFd, path: impl rustix::path::Arg) -> io::Result<OwnedFd> {
    Ok(rustix::fs::openat(
        at,
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

fn materialize(
    snapshot: &ChangesetSnapshot,
    blobs: &BlobStore,
    dir: &Path,
    base: Option<&Path>,
) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    let at = Place {
        layer: open_dir(rustix::fs::CWD, dir)?,
        base: base.and_then(|b| open_dir(rustix::fs::CWD, b).ok()),
    };
    // Entries are sorted by path bytes: those below `p` start at the first one from `p/` on.
    let entries = &snapshot.entries;
    let has_children = |p: &[u8]| {
        let mut below = p.to_vec();
        below.push(b'/');
        let i = entries.partition_point(|e| e.path.as_bytes() < below.as_slice());
        entries
            .get(i)
            .is_some_and(|e| e.path.as_bytes().starts_with(&below))
    };
    // Entries are sorted by path bytes, so a directory comes before the entries below it; the
    // directory of the last entry stays open, so a deep tree costs one step per entry.
    let mut parent = Parent {
        path: std::path::PathBuf::new(),
        fd: rustix::io::fcntl_dupfd_cloexec(&at.layer, 0)?,
    };
    for e in &snapshot.entries {
        let rel = e.path.as_path();
        let dir = parent.open(&at, rel)?;
        let name = c_path(Path::new(e.path.file_name()))?;
        match &e.change {
            Change::Write { content, mode, .. } => {
                copy_blob(dir, &name, blobs, content, *mode).map_err(|err| {
                    io::Error::new(
                        err.kind(),
                        format!("copying the content of `{}`: {err}", e.path.display()),
                    )
                })?;
            }
            Change::Symlink { target: t } => {
                rustix::fs::symlinkat(OsStr::from_bytes(t), dir, &name)?;
            }
            Change::Dir { mode } => {
                ensure_dir(dir, &name, *mode)?;
                if e.base != Fingerprint::Dir && e.base != Fingerprint::Absent {
                    // It replaces a file or symlink of the workspace: nothing below shows.
                    mark_opaque(dir, &name, rel)?;
                }
            }
            Change::Delete => {
                if has_children(e.path.as_bytes()) {
                    // The base fingerprint of a directory carries no mode.
                    ensure_dir(dir, &name, 0o755)?;
                    mark_opaque(dir, &name, rel)?;
                } else {
                    whiteout(dir, &name)?;
                }
            }
        }
    }
    Ok(())
}

/// The layer's directory that holds the last entry made, open.
struct Parent {
    /// Its path, relative to the layer (empty: the layer itself).
    path: std::path::PathBuf,
    fd: OwnedFd,
}

impl Parent {
    /// The open directory that holds `rel`, made (with its missing parents) if need be: the one
    /// open already, or a directory right below it, in one step; anything else from the layer.
    fn open(&mut self, at: &Place, rel: &Path) -> io::Result<BorrowedFd<'_>> {
        let want = rel.parent().unwrap_or(Path::new(""));
        if want != self.path {
            let next = match (want.parent(), want.file_name()) {
                (Some(up), Some(name)) if up == self.path => {
                    open_path(&self.fd, Path::new(name)).ok()
                }
                _ => None,
            };
            let fd = match next {
                Some(fd) => fd,
                None => {
                    create_parents(at, rel)?;
                    if want.as_os_str().is_empty() {
                        rustix::io::fcntl_dupfd_cloexec(&at.layer, 0)?
                    } else {
                        open_path(&at.layer, c_path(want)?.as_c_str())?
                    }
                }
            };
            *self = Parent {
                path: want.to_path_buf(),
                fd,
            };
        }
        Ok(self.fd.as_fd())
    }
}

/// Writes the blob `content` as `name` in `dir` with permission bits `mode`.
fn copy_blob(
    dir: BorrowedFd<'_>,
    name: &CStr,
    blobs: &BlobStore,
    content: &crate::model::ContentHash,
    mode: u32,
) -> io::Result<()> {
    let mut src = fs::File::open(blobs.path(content))?;
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let mut dst = fs::File::from(fd);
    io::copy(&mut src, &mut dst)?;
    dst.set_permissions(fs::Permissions::from_mode(mode))
}

fn ensure_dir(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> io::Result<()> {
    match rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(mode)) {
        Ok(()) => {}
        Err(e) if e == rustix::io::Errno::EXIST => {}
        Err(e) => return Err(e.into()),
    }
    Ok(rustix::fs::chmodat(
        dir,
        name,
        Mode::from_raw_mode(mode),
        AtFlags::empty(),
    )?)
}

/// An overlayfs whiteout: a character device with device number 0/0 (allowed to unprivileged
/// users since Linux 5.8).
fn whiteout(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    rustix::fs::mknodat(
        dir,
        name,
        FileType::CharacterDevice,
        Mode::from_raw_mode(0o000),
        rustix::fs::makedev(0, 0),
    )
    .map_err(io::Error::from)
}

/// Mark the directory `name` of `dir` (`shown` in messages) opaque for both privileged and
/// `userxattr` mounts; fails only if neither marker can be set.
fn mark_opaque(dir: BorrowedFd<'_>, name: &CStr, shown: &Path) -> io::Result<()> {
    let dir = open_dir(dir, name)?;
    let mut last = None;
    let mut any = false;
    for name in OPAQUE_XATTRS {
        match rustix::fs::fsetxattr(&dir, name, b"y", XattrFlags::empty()) {
            Ok(()) => any = true,
            Err(e) => last = Some(io::Error::from(e)),
        }
    }
    match (any, last) {
        (true, _) | (false, None) => Ok(()),
        (false, Some(e)) => Err(io::Error::new(
            e.kind(),
            format!("marking `{}` as an opaque directory: {e}", shown.display()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;
    use airlock_types::RelPath;
    use std::os::unix::fs::FileTypeExt;

    fn rp(s: &str) -> RelPath {
        RelPath::new(s).unwrap()
    }

    #[test]
    fn deletes_become_whiteouts_and_opaque_dirs() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("gone"), b"x").unwrap();
        std::fs::create_dir(ws.path().join("d")).unwrap();
        std::fs::write(ws.path().join("d/old"), b"x").unwrap();
        let s = Store::open(ws.path(), "t").unwrap();
        s.stage_delete(&rp("gone")).unwrap();
        s.stage_delete(&rp("d")).unwrap();
        s.stage_write(&rp("d/new"), b"n", Some(0o600)).unwrap();
        s.stage_write(&rp("a/b/c"), b"deep", None).unwrap();
        let layer = tempfile::tempdir().unwrap();
        materialize_layer(&s.snapshot().unwrap(), s.blobs(), layer.path()).unwrap();
        let md = std::fs::symlink_metadata(layer.path().join("gone")).unwrap();
        assert!(md.file_type().is_char_device());
        use std::os::unix::fs::MetadataExt;
        assert_eq!(md.rdev(), 0);
        let opaque: Vec<u8> = {
            let mut buf = vec![0u8; 8];
            let n = rustix::fs::lgetxattr(layer.path().join("d"), "user.overlay.opaque", &mut buf)
                .unwrap();
            buf.truncate(n);
            buf
        };
        assert_eq!(opaque, b"y");
        assert_eq!(std::fs::read(layer.path().join("d/new")).unwrap(), b"n");
        assert_eq!(
            std::fs::metadata(layer.path().join("d/new"))
                .unwrap()
                .permissions()
                .mode()
                & 0o7777,
            0o600
        );
        assert_eq!(std::fs::read(layer.path().join("a/b/c")).unwrap(), b"deep");
    }

    #[test]
    fn a_layer_deeper_in_the_file_system_than_the_workspace_still_holds_every_path() {
        let ws = tempfile::tempdir().unwrap();
        let s = Store::open(ws.path(), "t").unwrap();
        // 19 names of 200 bytes and one of 100: a 3900-byte path, which the layer holds
        // below a 400-byte directory (4300 bytes in all, past PATH_MAX).
        let mut long = vec!["n".repeat(200); 19].join("/");
        long.push('/');
        long.push_str(&"f".repeat(100));
        let dir_of = |p: &str| p.rsplit_once('/').unwrap().0.to_string();
        s.stage_write(&rp(&long), b"deep", Some(0o600)).unwrap();
        s.stage_symlink(&rp(&format!("{}/link", dir_of(&long))), b"x", None)
            .unwrap();
        let t = tempfile::tempdir().unwrap();
        let mut layer = t.path().to_path_buf();
        for _ in 0..4 {
            layer.push("l".repeat(99));
        }
        materialize_layer_over(&s.snapshot().unwrap(), s.blobs(), &layer, ws.path()).unwrap();
        let at = open_dir(rustix::fs::CWD, &layer).unwrap();
        let st = rustix::fs::statat(&at, long.as_str(), AtFlags::SYMLINK_NOFOLLOW).unwrap();
        assert_eq!((st.st_size, st.st_mode & 0o7777), (4, 0o600));
        let link = format!("{}/link", dir_of(&long));
        let target = rustix::fs::readlinkat(&at, link.as_str(), Vec::new()).unwrap();
        assert_eq!(target.as_bytes(), b"x");
    }

    #[test]
    fn entries_below_a_directory_its_owner_may_not_list_are_made() {
        let ws = tempfile::tempdir().unwrap();
        let s = Store::open(ws.path(), "t").unwrap();
        s.stage_dir(&rp("x"), 0o300).unwrap();
        s.stage_dir(&rp("x/y"), 0o700).unwrap();
        s.stage_write(&rp("x/y/f"), b"f", None).unwrap();
        s.stage_write(&rp("x/g"), b"g", None).unwrap();
        let layer = tempfile::tempdir().unwrap();
        materialize_layer(&s.snapshot().unwrap(), s.blobs(), layer.path()).unwrap();
        assert_eq!(std::fs::read(layer.path().join("x/y/f")).unwrap(), b"f");
        assert_eq!(std::fs::read(layer.path().join("x/g")).unwrap(), b"g");
        let mode = std::fs::metadata(layer.path().join("x"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o300);
        std::fs::set_permissions(layer.path().join("x"), fs::Permissions::from_mode(0o700))
            .unwrap();
    }

    #[test]
    fn implicit_parents_copy_the_workspace_directory_mode() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir(ws.path().join("private")).unwrap();
        std::fs::set_permissions(
            ws.path().join("private"),
            std::fs::Permissions::from_mode(0o700),
        )
        .unwrap();
        let s = Store::open(ws.path(), "t").unwrap();
        s.stage_write(&rp("private/x"), b"x", None).unwrap();
        s.stage_write(&rp("fresh/y"), b"y", None).unwrap();
        let snap = s.snapshot().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        let over = tempfile::tempdir().unwrap();
        materialize_layer_over(&snap, s.blobs(), over.path(), ws.path()).unwrap();
        assert_eq!(mode(&over.path().join("private")), 0o700);
        assert_eq!(mode(&over.path().join("fresh")), 0o755);
        let plain = tempfile::tempdir().unwrap();
        materialize_layer(&snap, s.blobs(), plain.path()).unwrap();
        assert_eq!(mode(&plain.path().join("private")), 0o755);
    }
}
