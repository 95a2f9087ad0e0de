//! Filesystem access confined to the workspace: every directory is opened from the workspace
//! root with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`, and every
//! change is made relative to such a directory by a single file name, so no symlink — staged
//! earlier or swapped in since — is ever followed out of (or within) the workspace.

use crate::model::{ContentHash, Fingerprint};
use airlock_types::RelPath;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The workspace root, opened once.
pub(crate) struct Confined {
    root: OwnedFd,
    root_path: PathBuf,
}

/// A parent directory as found on disk.
pub(crate) enum Parent {
    /// The directory exists; here is a handle.
    Dir(OwnedFd),
    /// Some component is missing (or is a file): nothing can exist below it.
    Missing,
}

fn resolve_flags() -> ResolveFlags {
    ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS
}

fn dir_flags() -> OFlags {
    // No O_NOFOLLOW: RESOLVE_NO_SYMLINKS already refuses a final symlink, with ELOOP.
    OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC
}

/// True for the errors `openat2` gives when resolution would cross a symlink or leave the root.
pub(crate) fn is_link_refusal(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(code) if code == Errno::LOOP.raw_os_error() || code == Errno::XDEV.raw_os_error()
    )
}

impl Confined {
    /// Open the workspace root (the root itself may be reached through a symlink the user chose).
    pub(crate) fn open(workspace: &Path) -> io::Result<Confined> {
        let root = rustix::fs::open(
            workspace,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Confined {
            root,
            root_path: workspace.to_path_buf(),
        })
    }

    /// The workspace path.
    pub(crate) fn root_path(&self) -> &Path {
        &self.root_path
    }

    /// The root directory handle.
    pub(crate) fn root(&self) -> BorrowedFd<'_> {
        self.root.as_fd()
    }

    /// Open directory `rel` (or the root for `None`). Errors with `ELOOP`/`EXDEV` when a
    /// component is a symlink; `Ok(Missing)` when a component does not exist or is not a dir.
    pub(crate) fn dir(&self, rel: Option<&Path>) -> io::Result<Parent> {
        let rel = match rel {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        match rustix::fs::openat2(&self.root, rel, dir_flags(), Mode::empty(), resolve_flags()) {
            Ok(fd) => Ok(Parent::Dir(fd)),
            Err(Errno::NOENT) | Err(Errno::NOTDIR) => Ok(Parent::Missing),
            Err(e) => Err(e.into()),
        }
    }

    /// The parent directory of `p`.
    pub(crate) fn parent_of(&self, p: &RelPath) -> io::Result<Parent> {
        self.dir(p.as_path().parent())
    }

    /// Open a directory that must exist (backup directories, parents after creation).
    pub(crate) fn existing_dir(&self, rel: &Path) -> io::Result<OwnedFd> {
        match self.dir(Some(rel))? {
            Parent::Dir(fd) => Ok(fd),
            Parent::Missing => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("directory {} does not exist", rel.display()),
            )),
        }
    }

    /// Fingerprint `p` without following any symlink.
    pub(crate) fn fingerprint(&self, p: &RelPath) -> io::Result<Fingerprint> {
        match self.parent_of(p)? {
            Parent::Dir(fd) => fingerprint_at(fd.as_fd(), p.file_name()).map(|(f, _)| f),
            Parent::Missing => Ok(Fingerprint::Absent),
        }
    }

    /// Fingerprint `p` and, for a directory, its permission bits.
    pub(crate) fn fingerprint_with_mode(
        &self,
        p: &RelPath,
    ) -> io::Result<(Fingerprint, Option<u32>)> {
        match self.parent_of(p)? {
            Parent::Dir(fd) => fingerprint_at(fd.as_fd(), p.file_name()),
            Parent::Missing => Ok((Fingerprint::Absent, None)),
        }
    }

    /// Create `rel` (and missing parents) as directories below the root; used for
    /// `.airlock/backups/<id>`.
    pub(crate) fn create_dir_all(&self, rel: &Path) -> io::Result<OwnedFd> {
        let mut cur = PathBuf::new();
        for comp in rel.iter() {
            let parent = self.existing_dir(&cur)?;
            match rustix::fs::mkdirat(&parent, comp, Mode::from_raw_mode(0o700)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
            cur.push(comp);
        }
        self.existing_dir(&cur)
    }
}

/// Fingerprint `name` in `dir` (no symlink following); also the permission bits of a directory.
pub(crate) fn fingerprint_at(
    dir: BorrowedFd<'_>,
    name: &OsStr,
) -> io::Result<(Fingerprint, Option<u32>)> {
    let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(Errno::NOENT) | Err(Errno::NOTDIR) => return Ok((Fingerprint::Absent, None)),
        Err(e) => return Err(e.into()),
    };
    let perm = st.st_mode & 0o7777;
    Ok(match FileType::from_raw_mode(st.st_mode) {
        FileType::Symlink => {
            let t = rustix::fs::readlinkat(dir, name, Vec::new())?;
            (
                Fingerprint::Symlink {
                    target: t.into_bytes(),
                },
                None,
            )
        }
        FileType::Directory => (Fingerprint::Dir, Some(perm)),
        FileType::RegularFile => {
            let fd = rustix::fs::openat(
                dir,
                name,
                OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NOCTTY,
                Mode::empty(),
            )?;
            let hash = ContentHash::of_reader(File::from(fd))?;
            (Fingerprint::File { hash, mode: perm }, None)
        }
        _ => (Fingerprint::Other, None),
    })
}

/// Copy `src` into a new file `name` in `dir` (must not exist), set `mode`, optionally fsync;
/// returns the hash of what was written.
pub(crate) fn write_new_file(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    mut src: impl Read,
    mode: u32,
    sync: bool,
) -> io::Result<ContentHash> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let mut file = File::from(fd);
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match src.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        file.write_all(&buf[..n])?;
    }
    rustix::fs::fchmod(&file, Mode::from_raw_mode(mode & 0o7777))?;
    if sync {
        file.sync_all()?;
    }
    Ok(ContentHash(*hasher.finalize().as_bytes()))
}

/// Open a regular file `name` in `dir` for reading, refusing symlinks.
pub(crate) fn open_file_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<File> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NOCTTY,
        Mode::empty(),
    )?;
    Ok(File::from(fd))
}

/// Make `to` in `to_dir` a copy of the entry `from` in `from_dir` (a regular file or a symlink):
/// a hard link when possible, a copy (mode kept) across filesystems.
pub(crate) fn link_or_copy(
    from_dir: BorrowedFd<'_>,
    from: &OsStr,
    to_dir: BorrowedFd<'_>,
    to: &OsStr,
    sync: bool,
) -> io::Result<()> {
    match rustix::fs::linkat(from_dir, from, to_dir, to, AtFlags::empty()) {
        Ok(()) => Ok(()),
        Err(Errno::XDEV) | Err(Errno::PERM) | Err(Errno::MLINK) => {
            match fingerprint_at(from_dir, from)?.0 {
                Fingerprint::Symlink { target } => {
                    rustix::fs::symlinkat(OsStr::from_bytes(&target), to_dir, to)?;
                    Ok(())
                }
                Fingerprint::File { mode, .. } => {
                    let src = open_file_at(from_dir, from)?;
                    write_new_file(to_dir, to, src, mode, sync).map(|_| ())
                }
                _ => Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "only files and symlinks can be backed up",
                )),
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// `unlinkat` that treats an already-missing entry as done.
pub(crate) fn unlink_if_present(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    unlink_existing(dir, name).map(drop)
}

/// Unlink `name` in `dir`; `false` when there was nothing to unlink.
pub(crate) fn unlink_existing(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<bool> {
    match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
        Ok(()) => Ok(true),
        Err(Errno::NOENT) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Create directory `name` in `dir` with exactly `mode` (umask undone by a chmod).
pub(crate) fn mkdir_mode(dir: BorrowedFd<'_>, name: &OsStr, mode: u32) -> io::Result<()> {
    rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(mode & 0o7777))?;
    let fd = rustix::fs::openat(dir, name, dir_flags() | OFlags::NOFOLLOW, Mode::empty())?;
    rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode & 0o7777))?;
    Ok(())
}
