//! Removing a directory tree whatever its depth. A sandboxed command can build a tree far deeper
//! than `PATH_MAX` (4096 bytes): `mkdir -p` creates it one `mkdirat` at a time. A removal that
//! names entries by their absolute path then fails with `ENAMETOOLONG`, and one that holds a
//! descriptor per level runs out of descriptors. This walk names every entry relative to an
//! open directory (`openat`/`unlinkat`), never follows a symlink, holds at most
//! [`MAX_OPEN_LEVELS`] descriptors, and moves anything deeper up to the top of the tree
//! (`renameat`) to remove it from there.

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

/// Directory levels held open at once; a subtree below is moved to the top first.
const MAX_OPEN_LEVELS: usize = 48;

/// Prefix of a subtree moved up to the top of the tree being removed.
const HOISTED: &str = ".airlock-rm-";

/// Removes `path` and everything below it, whatever its depth and whatever modes a command (or
/// overlayfs, which makes `work/work` mode 000) left on its directories; returns the bytes the
/// removed files held (their sizes). Entries that vanish meanwhile, `path` included, are not an
/// error: a warm host and its client may clear the same directory. A symlink is removed, never
/// followed.
pub fn remove_tree_counted(path: &Path) -> io::Result<u64> {
    let (parent, name) = match (path.parent(), path.file_name()) {
        (Some(p), Some(n)) => (
            if p.as_os_str().is_empty() {
                Path::new(".")
            } else {
                p
            },
            n,
        ),
        _ => {
            return Err(io::Error::other(format!(
                "cannot remove `{}`",
                path.display()
            )));
        }
    };
    let parent = match open_dir(rustix::fs::CWD, parent) {
        Ok(fd) => fd,
        Err(e) if e == rustix::io::Errno::NOENT => return Ok(0),
        Err(e) => return Err(e.into()),
    };
    let name = CString::new(std::os::unix::ffi::OsStrExt::as_bytes(name))
        .map_err(|_| io::Error::other("a path with a NUL byte"))?;
    remove_entry(&parent, &name)
}

/// Removes everything inside the directory `dir` (the directory stays); returns the bytes the
/// removed files held. Same rules as [`remove_tree_counted`].
pub fn empty_dir_counted(dir: &Path) -> io::Result<u64> {
    let fd = open_dir(rustix::fs::CWD, dir).map_err(io::Error::from)?;
    empty_open_dir(&fd)
}

/// Removes the entry `name` of the directory `parent`.
fn remove_entry(parent: &OwnedFd, name: &CStr) -> io::Result<u64> {
    let st = match rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(e) if e == rustix::io::Errno::NOENT => return Ok(0),
        Err(e) => return Err(e.into()),
    };
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
        return gone(rustix::fs::unlinkat(parent, name, AtFlags::empty()))
            .map(|()| u64::try_from(st.st_size).unwrap_or(0));
    }
    let dir = match open_child(parent, name, st.st_mode) {
        Ok(fd) => fd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let freed = empty_open_dir(&dir)?;
    drop(dir);
    gone(rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR)).map(|()| freed)
}

/// A frame of the walk: an open directory and the subdirectories of it still to remove.
struct Level {
    fd: OwnedFd,
    subdirs: Vec<CString>,
}

/// Empties the open directory `top`: a depth-first walk by descriptors, at most
/// [`MAX_OPEN_LEVELS`] deep; a directory found below that depth is moved up into `top` under a
/// fresh name, and `top` is walked again until nothing is left in it.
fn empty_open_dir(top: &OwnedFd) -> io::Result<u64> {
    static HOISTED_COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut freed = 0u64;
    loop {
        let (bytes, subdirs) = clear_files(top)?;
        freed += bytes;
        if subdirs.is_empty() {
            return Ok(freed);
        }
        let mut stack = vec![Level {
            fd: rustix::io::fcntl_dupfd_cloexec(top, 0)?,
            subdirs,
        }];
        loop {
            let depth = stack.len();
            let Some(level) = stack.last_mut() else {
                break;
            };
            let Some(name) = level.subdirs.pop() else {
                stack.pop();
                continue;
            };
            let parent = level.fd.try_clone()?;
            if depth >= MAX_OPEN_LEVELS {
                let n = HOISTED_COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let fresh = CString::new(format!(
                    "{HOISTED}{}-{n}",
                    rustix::process::getpid().as_raw_nonzero()
                ))
                .map_err(|_| io::Error::other("hoisted name"))?;
                match rustix::fs::renameat(&parent, &name, top, &fresh) {
                    // Removed from the top on the next pass.
                    Ok(()) => continue,
                    Err(e) if e == rustix::io::Errno::NOENT => continue,
                    // Another file system below (EXDEV): go on down, holding more descriptors.
                    Err(_) => {}
                }
            }
            let st = match rustix::fs::statat(&parent, &name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(e) if e == rustix::io::Errno::NOENT => continue,
                Err(e) => return Err(e.into()),
            };
            if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
                freed += remove_entry(&parent, &name)?;
                continue;
            }
            let fd = match open_child(&parent, &name, st.st_mode) {
                Ok(fd) => fd,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            let (bytes, subdirs) = clear_files(&fd)?;
            freed += bytes;
            if subdirs.is_empty() {
                drop(fd);
                gone(rustix::fs::unlinkat(&parent, &name, AtFlags::REMOVEDIR))?;
                continue;
            }
            // Come back to remove `name` itself once its subdirectories are gone.
            level.subdirs.push(name);
            stack.push(Level { fd, subdirs });
        }
    }
}

/// Removes every entry of `dir` that is not a directory; returns their bytes and the names of
/// the subdirectories.
fn clear_files(dir: &OwnedFd) -> io::Result<(u64, Vec<CString>)> {
    let mut freed = 0u64;
    let mut subdirs = Vec::new();
    let mut names = Vec::new();
    let mut rd = rustix::fs::Dir::read_from(dir)?;
    while let Some(entry) = rd.read() {
        let entry = entry?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        names.push((name.to_owned(), entry.file_type()));
    }
    drop(rd);
    for (name, kind) in names {
        if kind == FileType::Directory {
            subdirs.push(name);
            continue;
        }
        let st = match rustix::fs::statat(dir, &name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(e) if e == rustix::io::Errno::NOENT => continue,
            Err(e) => return Err(e.into()),
        };
        if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
            subdirs.push(name);
            continue;
        }
        gone(rustix::fs::unlinkat(dir, &name, AtFlags::empty()))?;
        freed += u64::try_from(st.st_size).unwrap_or(0);
    }
    Ok((freed, subdirs))
}

/// Opens the subdirectory `name` of `parent` (mode `mode`), giving its owner full access first
/// when a command took it away (`chmod 000`).
fn open_child(parent: &OwnedFd, name: &CStr, mode: u32) -> io::Result<OwnedFd> {
    if mode & 0o700 != 0o700 {
        gone(chmod_dir_nofollow(parent, name, Mode::from_raw_mode(0o700)))?;
    }
    open_dir(parent, name).map_err(io::Error::from)
}

/// Changes the mode of the directory `name` of `parent`, never through a symlink put in its
/// place meanwhile: the directory is opened `O_PATH | O_NOFOLLOW` (no permission needed) and
/// changed through its `/proc/self/fd` link; without `/proc`, by name.
fn chmod_dir_nofollow(parent: &OwnedFd, name: &CStr, mode: Mode) -> rustix::io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = rustix::fs::openat(
        parent,
        name,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    match rustix::fs::chmod(format!("/proc/self/fd/{}", fd.as_raw_fd()).as_str(), mode) {
        Err(e) if e == rustix::io::Errno::NOENT => {
            rustix::fs::chmodat(parent, name, mode, AtFlags::empty())
        }
        other => other,
    }
}

fn open_dir<P: rustix::path::Arg>(at: impl AsFd, path: P) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(
        at,
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// A removal of something already gone is a success.
fn gone(r: rustix::io::Result<()>) -> io::Result<()> {
    match r {
        Err(e) if e == rustix::io::Errno::NOENT => Ok(()),
        other => other.map_err(io::Error::from),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A chain of `levels` directories named `name` below `dir`, made one `mkdirat` at a time
    /// (as `mkdir -p` does), far past `PATH_MAX`; a file and a mode-000 directory at the bottom.
    fn deep_chain(dir: &Path, name: &str, levels: usize) {
        let mut fd = open_dir(rustix::fs::CWD, dir).unwrap();
        for _ in 0..levels {
            rustix::fs::mkdirat(&fd, name, Mode::from_raw_mode(0o755)).unwrap();
            fd = open_dir(&fd, name).unwrap();
        }
        let f = rustix::fs::openat(
            &fd,
            "bottom.txt",
            OFlags::CREATE | OFlags::WRONLY,
            Mode::from_raw_mode(0o644),
        )
        .unwrap();
        rustix::io::write(&f, b"12345").unwrap();
        rustix::fs::mkdirat(&fd, "locked", Mode::from_raw_mode(0o000)).unwrap();
    }

    #[test]
    fn removes_a_tree_deeper_than_path_max() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("upper");
        std::fs::create_dir(&root).unwrap();
        // 3000 levels of 10 bytes: a 33 KB path, 62 times the descriptors a walk may hold.
        deep_chain(&root, "abcdefghij", 3000);
        std::fs::write(root.join("top.txt"), b"x").unwrap();
        std::os::unix::fs::symlink("/etc", root.join("link")).unwrap();
        // The file at the bottom, `top.txt`, and the link (its size is its target's length).
        assert_eq!(empty_dir_counted(&root).unwrap(), 5 + 1 + 4);
        assert_eq!(std::fs::read_dir(&root).unwrap().count(), 0);
        deep_chain(&root, "z", 500);
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o000)).unwrap();
        assert_eq!(remove_tree_counted(&root).unwrap(), 5);
        assert!(!root.exists());
        assert_eq!(
            remove_tree_counted(&root).unwrap(),
            0,
            "a missing tree is gone"
        );
        assert!(Path::new("/etc/passwd").exists());
    }

    #[test]
    fn a_mode_is_never_changed_through_a_symlink() {
        let t = tempfile::tempdir().unwrap();
        let outside = t.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o750)).unwrap();
        let root = t.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("l")).unwrap();
        let fd = open_dir(rustix::fs::CWD, &root).unwrap();
        assert!(chmod_dir_nofollow(&fd, c"l", Mode::from_raw_mode(0o700)).is_err());
        let mode = std::fs::metadata(&outside).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o750);
        remove_tree_counted(&root).unwrap();
        assert!(outside.is_dir(), "the link goes, never its target");
    }
}
