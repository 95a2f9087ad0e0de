//! The overlay lower layer for the sandbox: a snapshot materialised as a directory that sits
//! between the read-only workspace and the scratch upper layer. Files, directories and symlinks
//! are created as staged; deletes become overlayfs whiteouts (a 0/0 character device), and a
//! deleted directory with entries staged below it becomes an opaque directory. Cost is
//! O(changed files): nothing from the workspace is copied.

use crate::blobs::BlobStore;
use crate::model::{Change, ChangesetSnapshot, Fingerprint};
use rustix::fs::{FileType, Mode, XattrFlags};
use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
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

/// Create the missing parents of `target` (below `root`), copying attributes from `base`.
fn create_parents(root: &Path, target: &Path, base: Option<&Path>) -> io::Result<()> {
    let Some(parent) = target.parent() else {
        return Ok(());
    };
    if parent == root || parent.is_dir() {
        return Ok(());
    }
    create_parents(root, parent, base)?;
    ensure_dir(parent, 0o755)?;
    if let (Some(base), Ok(rel)) = (base, parent.strip_prefix(root)) {
        let twin = base.join(rel);
        // Only a real directory of the workspace lends its attributes; a symlink never.
        if let Ok(md) = fs::symlink_metadata(&twin)
            && md.is_dir()
        {
            use std::os::unix::fs::MetadataExt;
            fs::set_permissions(parent, fs::Permissions::from_mode(md.mode() & 0o7777))?;
            // Ownership can be copied only with the privilege to chown; without it the
            // directory keeps the caller's ownership, which is what an unprivileged sandbox sees.
            let _ = std::os::unix::fs::lchown(parent, Some(md.uid()), Some(md.gid()));
        }
    }
    Ok(())
}

fn materialize(
    snapshot: &ChangesetSnapshot,
    blobs: &BlobStore,
    dir: &Path,
    base: Option<&Path>,
) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    let mut with_children: HashSet<&[u8]> = HashSet::new();
    for e in &snapshot.entries {
        let bytes = e.path.as_bytes();
        for (i, b) in bytes.iter().enumerate() {
            if *b == b'/' {
                with_children.insert(&bytes[..i]);
            }
        }
    }
    // Entries are sorted by path bytes, so a directory comes before the entries below it.
    for e in &snapshot.entries {
        let target = dir.join(e.path.as_path());
        create_parents(dir, &target, base)?;
        match &e.change {
            Change::Write { content, mode, .. } => {
                fs::copy(blobs.path(content), &target).map_err(|err| {
                    io::Error::new(
                        err.kind(),
                        format!("copying the content of `{}`: {err}", e.path.display()),
                    )
                })?;
                fs::set_permissions(&target, fs::Permissions::from_mode(*mode))?;
            }
            Change::Symlink { target: t } => {
                std::os::unix::fs::symlink(OsStr::from_bytes(t), &target)?;
            }
            Change::Dir { mode } => {
                ensure_dir(&target, *mode)?;
                if e.base != Fingerprint::Dir && e.base != Fingerprint::Absent {
                    // It replaces a file or symlink of the workspace: nothing below shows.
                    mark_opaque(&target)?;
                }
            }
            Change::Delete => {
                if with_children.contains(e.path.as_bytes()) {
                    // The base fingerprint of a directory carries no mode.
                    ensure_dir(&target, 0o755)?;
                    mark_opaque(&target)?;
                } else {
                    whiteout(&target)?;
                }
            }
        }
    }
    Ok(())
}

fn ensure_dir(path: &Path, mode: u32) -> io::Result<()> {
    match fs::DirBuilder::new().mode(mode).create(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}

/// An overlayfs whiteout: a character device with device number 0/0 (allowed to unprivileged
/// users since Linux 5.8).
fn whiteout(path: &Path) -> io::Result<()> {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        FileType::CharacterDevice,
        Mode::from_raw_mode(0o000),
        rustix::fs::makedev(0, 0),
    )
    .map_err(io::Error::from)
}

/// Mark `dir` opaque for both privileged and `userxattr` mounts; fails only if neither marker
/// can be set.
fn mark_opaque(dir: &Path) -> io::Result<()> {
    let mut last = None;
    let mut any = false;
    for name in OPAQUE_XATTRS {
        match rustix::fs::lsetxattr(dir, name, b"y", XattrFlags::empty()) {
            Ok(()) => any = true,
            Err(e) => last = Some(io::Error::from(e)),
        }
    }
    match (any, last) {
        (true, _) | (false, None) => Ok(()),
        (false, Some(e)) => Err(io::Error::new(
            e.kind(),
            format!("marking `{}` as an opaque directory: {e}", dir.display()),
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
