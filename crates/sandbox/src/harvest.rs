//! Reading an overlay upper directory back as changes. Walks only the upper directory, so the
//! cost is O(changed files); never follows symlinks; keeps non-UTF-8 names.

use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// One entry of an overlay upper directory, relative to the workspace root.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum UpperChange {
    /// A regular file that is new, modified, or had its mode changed (overlay copies a file up
    /// whole on any change). Its content is `upper.join(path)`.
    File {
        /// Workspace-relative path.
        path: PathBuf,
        /// Permission bits (`st_mode & 0o7777`).
        mode: u32,
    },
    /// A whiteout: the path was deleted.
    Delete {
        /// Workspace-relative path.
        path: PathBuf,
    },
    /// A symbolic link, with its raw target (the caller decides whether it escapes).
    Symlink {
        /// Workspace-relative path.
        path: PathBuf,
        /// The target exactly as stored.
        target: PathBuf,
    },
    /// A directory present in the upper layer: new, copied up because something beneath it
    /// changed, or with a changed mode. Opaque directories replace the lower one entirely.
    Dir {
        /// Workspace-relative path.
        path: PathBuf,
        /// Permission bits.
        mode: u32,
        /// True when the directory hides everything beneath it in the lower layers.
        opaque: bool,
    },
    /// An entry whose workspace-relative path is longer than the harvest's limit
    /// ([`harvest_within`]): it and everything below it are left unread, never staged.
    TooLong {
        /// Workspace-relative path.
        path: PathBuf,
        /// The limit, in bytes, that the path exceeds.
        limit: usize,
    },
    /// A file type airlock does not stage (fifo, socket, device): reported, never applied.
    Unsupported {
        /// Workspace-relative path.
        path: PathBuf,
        /// "fifo", "socket", "char device" or "block device".
        kind: &'static str,
    },
}

impl UpperChange {
    /// The workspace-relative path of the change.
    pub fn path(&self) -> &Path {
        match self {
            UpperChange::File { path, .. }
            | UpperChange::Delete { path }
            | UpperChange::Symlink { path, .. }
            | UpperChange::Dir { path, .. }
            | UpperChange::TooLong { path, .. }
            | UpperChange::Unsupported { path, .. } => path,
        }
    }
}

const XATTR_PREFIXES: [&str; 2] = ["user.overlay.", "trusted.overlay."];

/// The longest path a system call takes, terminating NUL included (Linux's `PATH_MAX`).
pub const PATH_MAX: usize = 4096;

/// Lists the changes recorded in an overlay upper directory, sorted by path (parents before
/// children).
///
/// Whiteouts (0/0 character devices, or files carrying an `overlay.whiteout` xattr) become
/// [`UpperChange::Delete`]. Redirected or metacopy entries (features airlock never enables)
/// are an error rather than a guess. Entries whose absolute path in `upper` would not fit in
/// [`PATH_MAX`] are [`UpperChange::TooLong`] (see [`harvest_within`]).
pub fn harvest(upper: &Path) -> io::Result<Vec<UpperChange>> {
    harvest_within(
        upper,
        (PATH_MAX - 2).saturating_sub(upper.as_os_str().len()),
    )
}

/// [`harvest`], where an entry whose workspace-relative path is longer than `max_rel` bytes is
/// reported as [`UpperChange::TooLong`] and neither read nor descended into. `max_rel` is
/// lowered to what fits below `upper` within [`PATH_MAX`], so every other entry can be read by
/// its absolute path. The walk keeps one directory open at a time and no recursion, whatever
/// the depth a command built.
pub fn harvest_within(upper: &Path, max_rel: usize) -> io::Result<Vec<UpperChange>> {
    let limit = max_rel.min((PATH_MAX - 2).saturating_sub(upper.as_os_str().len()));
    let mut out = Vec::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        let abs = upper.join(&rel);
        let names: Vec<_> = fs::read_dir(&abs)?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<io::Result<_>>()?;
        for name in names {
            let rel_child = rel.join(name);
            if rel_child.as_os_str().len() > limit {
                out.push(UpperChange::TooLong {
                    path: rel_child,
                    limit,
                });
                continue;
            }
            if let Some(dir) = entry(&upper.join(&rel_child), rel_child, &mut out)? {
                pending.push(dir);
            }
        }
    }
    out.sort_by(|a, b| a.path().cmp(b.path()));
    Ok(out)
}

/// Records the upper entry at `abs` (workspace path `rel_child`); returns its path when it is a
/// directory to walk.
fn entry(
    abs_child: &Path,
    rel_child: PathBuf,
    out: &mut Vec<UpperChange>,
) -> io::Result<Option<PathBuf>> {
    let meta = fs::symlink_metadata(abs_child)?;
    let ft = meta.file_type();
    let mode = meta.mode() & 0o7777;
    for name in ["redirect", "metacopy"] {
        if has_overlay_xattr(abs_child, name)? {
            return Err(io::Error::other(format!(
                "{} carries an overlay {name} xattr, which harvest does not interpret",
                abs_child.display()
            )));
        }
    }
    if ft.is_char_device() && meta.rdev() == 0 {
        out.push(UpperChange::Delete { path: rel_child });
    } else if ft.is_dir() {
        let opaque = overlay_xattr_is(abs_child, "opaque", b"y")?;
        out.push(UpperChange::Dir {
            path: rel_child.clone(),
            mode,
            opaque,
        });
        return Ok(Some(rel_child));
    } else if ft.is_symlink() {
        let target = fs::read_link(abs_child)?;
        out.push(UpperChange::Symlink {
            path: rel_child,
            target,
        });
    } else if ft.is_file() {
        if meta.len() == 0 && has_overlay_xattr(abs_child, "whiteout")? {
            out.push(UpperChange::Delete { path: rel_child });
        } else {
            out.push(UpperChange::File {
                path: rel_child,
                mode,
            });
        }
    } else {
        let kind = if ft.is_fifo() {
            "fifo"
        } else if ft.is_socket() {
            "socket"
        } else if ft.is_char_device() {
            "char device"
        } else {
            "block device"
        };
        out.push(UpperChange::Unsupported {
            path: rel_child,
            kind,
        });
    }
    Ok(None)
}

/// True when `dir` carries an overlay opaque marker (either namespace).
pub(crate) fn is_opaque(dir: &Path) -> io::Result<bool> {
    overlay_xattr_is(dir, "opaque", b"y")
}

/// Marks `dir` opaque for both privileged and `userxattr` overlay mounts; fails only if
/// neither marker can be set.
pub(crate) fn mark_opaque(dir: &Path) -> io::Result<()> {
    let mut last = None;
    let mut ok = false;
    for prefix in XATTR_PREFIXES {
        match rustix::fs::lsetxattr(
            dir,
            format!("{prefix}opaque"),
            b"y",
            rustix::fs::XattrFlags::empty(),
        ) {
            Ok(()) => ok = true,
            Err(e) => last = Some(e),
        }
    }
    match (ok, last) {
        (true, _) | (false, None) => Ok(()),
        (false, Some(e)) => Err(e.into()),
    }
}

fn get_xattr(path: &Path, name: &str) -> io::Result<Option<Vec<u8>>> {
    let mut buf = [0u8; 256];
    match rustix::fs::lgetxattr(path, name, &mut buf[..]) {
        Ok(n) => Ok(Some(buf[..n].to_vec())),
        Err(e) if e == rustix::io::Errno::NODATA || e == rustix::io::Errno::NOTSUP => Ok(None),
        // A trusted.* read without privilege is refused, which means "not set" for us.
        Err(e) if e == rustix::io::Errno::PERM || e == rustix::io::Errno::ACCESS => Ok(None),
        // A value longer than our buffer still exists.
        Err(e) if e == rustix::io::Errno::RANGE => Ok(Some(Vec::new())),
        Err(e) => Err(e.into()),
    }
}

fn has_overlay_xattr(path: &Path, name: &str) -> io::Result<bool> {
    for prefix in XATTR_PREFIXES {
        if get_xattr(path, &format!("{prefix}{name}"))?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

fn overlay_xattr_is(path: &Path, name: &str, value: &[u8]) -> io::Result<bool> {
    for prefix in XATTR_PREFIXES {
        if get_xattr(path, &format!("{prefix}{name}"))?.as_deref() == Some(value) {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::{PermissionsExt, symlink};

    fn mknod_whiteout(path: &Path) {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path,
            rustix::fs::FileType::CharacterDevice,
            rustix::fs::Mode::empty(),
            0,
        )
        .unwrap();
    }

    #[test]
    fn reads_files_deletes_symlinks_and_dirs_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let up = dir.path();
        fs::create_dir_all(up.join("src/sub")).unwrap();
        fs::write(up.join("src/sub/new.rs"), "fn x() {}").unwrap();
        fs::write(up.join("run.sh"), "#!/bin/sh").unwrap();
        fs::set_permissions(up.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        mknod_whiteout(&up.join("src/gone.rs"));
        symlink("../../etc/passwd", up.join("link")).unwrap();
        let odd = OsStr::from_bytes(b"bad\xffname");
        fs::write(up.join(odd), "x").unwrap();
        rustix::fs::setxattr(
            up.join("src/sub"),
            "user.overlay.opaque",
            b"y",
            rustix::fs::XattrFlags::empty(),
        )
        .unwrap();

        let changes = harvest(up).unwrap();
        let expected = vec![
            UpperChange::File {
                path: PathBuf::from(odd),
                mode: 0o644,
            },
            UpperChange::Symlink {
                path: "link".into(),
                target: "../../etc/passwd".into(),
            },
            UpperChange::File {
                path: "run.sh".into(),
                mode: 0o755,
            },
            UpperChange::Dir {
                path: "src".into(),
                mode: 0o755,
                opaque: false,
            },
            UpperChange::Delete {
                path: "src/gone.rs".into(),
            },
            UpperChange::Dir {
                path: "src/sub".into(),
                mode: 0o755,
                opaque: true,
            },
            UpperChange::File {
                path: "src/sub/new.rs".into(),
                mode: 0o644,
            },
        ];
        assert_eq!(changes, expected);
    }

    #[test]
    fn xattr_whiteouts_are_deletes_and_fifos_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let up = dir.path();
        fs::write(up.join("wh"), "").unwrap();
        rustix::fs::setxattr(
            up.join("wh"),
            "user.overlay.whiteout",
            b"",
            rustix::fs::XattrFlags::empty(),
        )
        .unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            up.join("pipe"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        let changes = harvest(up).unwrap();
        assert_eq!(
            changes,
            vec![
                UpperChange::Unsupported {
                    path: "pipe".into(),
                    kind: "fifo"
                },
                UpperChange::Delete { path: "wh".into() },
            ]
        );
    }

    #[test]
    fn paths_past_the_limit_are_reported_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let up = dir.path();
        // 1000 levels of `abcdefghi/`: a 10 KB path, as `mkdir -p` builds it (one level at a
        // time), which no absolute-path call reaches.
        let mut fd = rustix::fs::openat(
            rustix::fs::CWD,
            up,
            rustix::fs::OFlags::DIRECTORY,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
        for _ in 0..1000 {
            rustix::fs::mkdirat(&fd, "abcdefghi", rustix::fs::Mode::from_raw_mode(0o755)).unwrap();
            fd = rustix::fs::openat(
                &fd,
                "abcdefghi",
                rustix::fs::OFlags::DIRECTORY,
                rustix::fs::Mode::empty(),
            )
            .unwrap();
        }
        fs::write(up.join("ok.txt"), "x").unwrap();
        let changes = harvest_within(up, 100).unwrap();
        // Ten directories fit in 100 bytes (99 with their slashes); the eleventh does not.
        assert_eq!(changes.len(), 12, "{changes:?}");
        let Some(UpperChange::TooLong { path, limit: 100 }) = changes.get(10) else {
            panic!("{changes:?}");
        };
        assert_eq!(path.as_os_str().len(), 109);
        assert!(
            matches!(&changes[11], UpperChange::File { path, .. } if path == Path::new("ok.txt"))
        );
        let full = harvest(up).unwrap();
        assert!(
            matches!(full.iter().find(|c| matches!(c, UpperChange::TooLong { .. })),
            Some(UpperChange::TooLong { path, limit }) if path.as_os_str().len() > *limit
                && up.join(path.parent().unwrap()).as_os_str().len() < PATH_MAX)
        );
    }

    #[test]
    fn redirects_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("d")).unwrap();
        rustix::fs::setxattr(
            dir.path().join("d"),
            "user.overlay.redirect",
            b"/x",
            rustix::fs::XattrFlags::empty(),
        )
        .unwrap();
        assert!(harvest(dir.path()).is_err());
    }
}
