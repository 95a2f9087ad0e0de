//! The all-or-nothing protocol shared by apply and undo, and the rollback shared by a failed
//! apply and `recover`.
//!
//! Forward: temps written beside their targets (and made durable) → originals hard-linked into the
//! record's backup directory → removals (deepest first) → directory creations (parents first) →
//! renames into place → directories made durable. Every intermediate state is one `recover`
//! understands: each path is at its pre-image, its post-image, or (for a kind change) briefly
//! absent with its backup in place.

use super::confined::{
    Confined, Parent, fingerprint_at, link_or_copy, mkdir_mode, open_file_at, unlink_existing,
    unlink_if_present, write_new_file,
};
use super::{FaultHook, Phase, Step};
use crate::journal::{FileEffect, RecordId};
use crate::model::Fingerprint;
use airlock_types::RelPath;
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::AtFlags;
use rustix::io::Errno;
use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Above this many effects, one `syncfs` per phase replaces per-file `fsync`: the same
/// durability at a fraction of the cost for large changesets.
const PER_FILE_SYNC_LIMIT: usize = 16;

/// Where the post-image of an effect comes from.
pub(crate) enum Source {
    /// Nothing to create (a delete).
    Nothing,
    /// A blob (apply): absolute path in the blob store.
    Blob(PathBuf),
    /// A backup of an earlier record (undo): workspace-relative path.
    Backup(String),
    /// A symlink with this target.
    Symlink(Vec<u8>),
    /// A directory with this mode.
    Dir(u32),
}

/// An I/O failure at one path.
#[derive(Debug)]
pub(crate) struct StepError {
    pub path: String,
    pub source: io::Error,
}

fn err_at(path: &RelPath) -> impl FnOnce(io::Error) -> StepError + '_ {
    move |source| StepError {
        path: path.display(),
        source,
    }
}

/// Name of the temp file for effect `seq` of record `id` (beside its target).
pub(crate) fn temp_name(id: RecordId, seq: usize) -> OsString {
    OsString::from(format!(".airlock-tmp-{id}-{seq}"))
}

/// Name of the temp file used while restoring a pre-image.
pub(crate) fn restore_name(id: RecordId, seq: usize) -> OsString {
    OsString::from(format!(".airlock-rst-{id}-{seq}"))
}

fn kind_is_dir(f: &Fingerprint) -> bool {
    matches!(f, Fingerprint::Dir)
}

fn kind_is_leaf(f: &Fingerprint) -> bool {
    matches!(f, Fingerprint::File { .. } | Fingerprint::Symlink { .. })
}

/// True when the original must be removed before the post-image can exist (a delete, or a
/// change between directory and non-directory).
fn needs_removal(f: &FileEffect) -> bool {
    match (&f.pre, &f.post) {
        (Fingerprint::Absent, _) => false,
        (_, Fingerprint::Absent) => true,
        (pre, post) => kind_is_dir(pre) != kind_is_dir(post),
    }
}

fn parent_path(p: &RelPath) -> PathBuf {
    p.as_path()
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// A one-entry cache of the last parent directory opened (entries come sorted, so siblings
/// are consecutive); reopened with the confined resolver on every change of directory.
struct ParentCache {
    key: Option<PathBuf>,
    fd: Option<OwnedFd>,
}

impl ParentCache {
    fn new() -> ParentCache {
        ParentCache {
            key: None,
            fd: None,
        }
    }

    fn get(&mut self, conf: &Confined, p: &RelPath) -> io::Result<Option<&OwnedFd>> {
        let key = parent_path(p);
        if self.key.as_ref() != Some(&key) {
            self.fd = match conf.dir(Some(&key))? {
                Parent::Dir(fd) => Some(fd),
                Parent::Missing => None,
            };
            self.key = Some(key);
        }
        Ok(self.fd.as_ref())
    }

    fn require(&mut self, conf: &Confined, p: &RelPath) -> io::Result<&OwnedFd> {
        self.get(conf, p)?.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "its parent directory does not exist",
            )
        })
    }
}

struct Ctx<'a> {
    conf: &'a Confined,
    id: RecordId,
    hook: Option<&'a dyn FaultHook>,
    per_file_sync: bool,
}

impl Ctx<'_> {
    fn step(&self, phase: Phase, path: &RelPath) -> io::Result<()> {
        match self.hook {
            Some(h) => h.before(&Step { phase, path }),
            None => Ok(()),
        }
    }

    /// Make everything written so far durable: per-directory fsync for small changesets, one
    /// `syncfs` for large ones.
    fn sync_dirs(&self, dirs: &BTreeSet<PathBuf>, at: &RelPath) -> Result<(), StepError> {
        self.step(Phase::Sync, at).map_err(err_at(at))?;
        if !self.per_file_sync {
            return rustix::fs::syncfs(self.conf.root())
                .map_err(io::Error::from)
                .map_err(err_at(at));
        }
        for d in dirs {
            if let Parent::Dir(fd) = self.conf.dir(Some(d)).map_err(err_at(at))? {
                rustix::fs::fsync(&fd)
                    .map_err(io::Error::from)
                    .map_err(|source| StepError {
                        path: d.display().to_string(),
                        source,
                    })?;
            }
        }
        Ok(())
    }

    fn write_temp(
        &self,
        dir: &OwnedFd,
        seq: usize,
        f: &FileEffect,
        src: &Source,
    ) -> io::Result<()> {
        let name = temp_name(self.id, seq);
        match (src, &f.post) {
            (Source::Blob(path), Fingerprint::File { hash, mode }) => {
                let file = File::open(path).map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("cannot read staged content {}: {e}", path.display()),
                    )
                })?;
                let got = write_new_file(dir.as_fd(), &name, file, *mode, self.per_file_sync)?;
                check_hash(got, *hash)
            }
            (Source::Backup(rel), Fingerprint::File { hash, mode }) => {
                let rel = Path::new(rel);
                let bdir = self
                    .conf
                    .existing_dir(rel.parent().unwrap_or(Path::new("")))?;
                let src = open_file_at(bdir.as_fd(), rel.file_name().unwrap_or_default())?;
                let got = write_new_file(dir.as_fd(), &name, src, *mode, self.per_file_sync)?;
                check_hash(got, *hash)
            }
            (Source::Symlink(target), Fingerprint::Symlink { .. }) => {
                rustix::fs::symlinkat(OsStr::from_bytes(target), dir, &name)?;
                Ok(())
            }
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "internal: the post-image and its source disagree",
            )),
        }
    }
}

fn check_hash(got: crate::model::ContentHash, want: crate::model::ContentHash) -> io::Result<()> {
    if got == want {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the stored content hashes to {got}, not the expected {want}"),
        ))
    }
}

/// Run the forward protocol for record `id` (already journaled `pending` with `files`).
pub(crate) fn execute(
    conf: &Confined,
    id: RecordId,
    backup_dir: Option<&str>,
    files: &[FileEffect],
    sources: &[Source],
    hook: Option<&dyn FaultHook>,
) -> Result<(), StepError> {
    let ctx = Ctx {
        conf,
        id,
        hook,
        per_file_sync: files.len() <= PER_FILE_SYNC_LIMIT,
    };
    let Some(first) = files.first() else {
        return Ok(());
    };
    let mut touched: BTreeSet<PathBuf> = BTreeSet::new();

    // 1. Temps beside existing parents (others wait until their directories exist).
    let removed: BTreeSet<&Path> = files
        .iter()
        .filter(|f| needs_removal(f))
        .map(|f| f.path.as_path())
        .collect();
    let mut deferred = Vec::new();
    let mut cache = ParentCache::new();
    for (seq, (f, src)) in files.iter().zip(sources).enumerate() {
        if !kind_is_leaf(&f.post) {
            continue;
        }
        // A parent that is itself being replaced (e.g. a symlink becoming a directory) is not
        // usable yet: wait for the creation phase.
        let replaced_parent = f
            .path
            .as_path()
            .ancestors()
            .skip(1)
            .any(|a| removed.contains(a));
        let parent = if replaced_parent {
            None
        } else {
            cache.get(conf, &f.path).map_err(err_at(&f.path))?
        };
        match parent {
            Some(dir) => {
                ctx.step(Phase::Temp, &f.path).map_err(err_at(&f.path))?;
                ctx.write_temp(dir, seq, f, src).map_err(err_at(&f.path))?;
                touched.insert(parent_path(&f.path));
            }
            None => deferred.push(seq),
        }
    }

    // 2. Back up originals into the record's backup directory.
    let mut bdir_fd = None;
    let mut cache = ParentCache::new();
    for f in files.iter().filter(|f| f.backup.is_some()) {
        let backup = f.backup.as_deref().unwrap_or_default();
        if bdir_fd.is_none() {
            let dir = backup_dir.unwrap_or(".airlock/backups");
            bdir_fd = Some(
                conf.create_dir_all(Path::new(dir))
                    .map_err(err_at(&f.path))?,
            );
        }
        let Some(bdir) = bdir_fd.as_ref() else {
            continue;
        };
        ctx.step(Phase::Backup, &f.path).map_err(err_at(&f.path))?;
        let dir = cache.require(conf, &f.path).map_err(err_at(&f.path))?;
        let bname = Path::new(backup).file_name().unwrap_or_default();
        link_or_copy(
            dir.as_fd(),
            f.path.file_name(),
            bdir.as_fd(),
            bname,
            ctx.per_file_sync,
        )
        .map_err(err_at(&f.path))?;
    }
    if let Some(bdir) = bdir_fd.as_ref().filter(|_| ctx.per_file_sync) {
        // The backup directory and its own entry in `.airlock/backups` must both survive.
        let parent = Path::new(backup_dir.unwrap_or(".airlock/backups"))
            .parent()
            .unwrap_or(Path::new(".airlock"));
        let parent_fd = conf.existing_dir(parent).map_err(err_at(&first.path))?;
        for fd in [bdir, &parent_fd] {
            rustix::fs::fsync(fd)
                .map_err(io::Error::from)
                .map_err(err_at(&first.path))?;
        }
    }
    // Temps and backups durable before anything visible changes.
    if !ctx.per_file_sync {
        ctx.sync_dirs(&touched, &first.path)?;
    }

    // 3. Removals, deepest first.
    let mut cache = ParentCache::new();
    for f in files.iter().rev().filter(|f| needs_removal(f)) {
        ctx.step(Phase::Remove, &f.path).map_err(err_at(&f.path))?;
        let dir = cache.require(conf, &f.path).map_err(err_at(&f.path))?;
        let flags = if kind_is_dir(&f.pre) {
            AtFlags::REMOVEDIR
        } else {
            AtFlags::empty()
        };
        rustix::fs::unlinkat(dir, f.path.file_name(), flags)
            .map_err(|e| match e {
                Errno::NOTEMPTY | Errno::EXIST => io::Error::new(
                    io::ErrorKind::DirectoryNotEmpty,
                    "the directory holds files the changeset does not delete",
                ),
                e => e.into(),
            })
            .map_err(err_at(&f.path))?;
        touched.insert(parent_path(&f.path));
    }

    // 4. Directory creations, parents first (byte order puts a parent before its children).
    let mut cache = ParentCache::new();
    for (f, src) in files.iter().zip(sources) {
        if !kind_is_dir(&f.post) || kind_is_dir(&f.pre) {
            continue;
        }
        let mode = match src {
            Source::Dir(m) => *m,
            _ => 0o755,
        };
        ctx.step(Phase::Mkdir, &f.path).map_err(err_at(&f.path))?;
        // A directory created just above invalidates the cached "missing" answer.
        cache.key = None;
        let dir = cache.require(conf, &f.path).map_err(err_at(&f.path))?;
        mkdir_mode(dir.as_fd(), f.path.file_name(), mode).map_err(err_at(&f.path))?;
        touched.insert(parent_path(&f.path));
        touched.insert(f.path.as_path().to_path_buf());
    }

    // 5. Temps whose directories exist only now.
    let mut cache = ParentCache::new();
    for &seq in &deferred {
        let f = &files[seq];
        ctx.step(Phase::Temp, &f.path).map_err(err_at(&f.path))?;
        let dir = cache.require(conf, &f.path).map_err(err_at(&f.path))?;
        ctx.write_temp(dir, seq, f, &sources[seq])
            .map_err(err_at(&f.path))?;
    }
    if !deferred.is_empty() && !ctx.per_file_sync {
        ctx.sync_dirs(&touched, &first.path)?;
    }

    // 6. Renames into place.
    let mut cache = ParentCache::new();
    for (seq, f) in files.iter().enumerate() {
        if !kind_is_leaf(&f.post) {
            continue;
        }
        ctx.step(Phase::Rename, &f.path).map_err(err_at(&f.path))?;
        let dir = cache.require(conf, &f.path).map_err(err_at(&f.path))?;
        rustix::fs::renameat(dir, temp_name(id, seq), dir, f.path.file_name())
            .map_err(io::Error::from)
            .map_err(err_at(&f.path))?;
        touched.insert(parent_path(&f.path));
    }

    // 7. Directories durable.
    ctx.sync_dirs(&touched, &first.path)
}

/// What recovery found at one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    Pre,
    Post,
    /// Absent although neither image is absent: mid-way through a kind change, or removed since.
    Missing,
    /// Something else entirely.
    Other(Fingerprint),
}

/// Compare `f`'s path on disk with its pre- and post-image.
pub(crate) fn classify(conf: &Confined, f: &FileEffect) -> io::Result<Found> {
    let now = conf.fingerprint(&f.path)?;
    Ok(if now == f.pre {
        Found::Pre
    } else if now == f.post {
        Found::Post
    } else if now == Fingerprint::Absent {
        Found::Missing
    } else {
        Found::Other(now)
    })
}

/// Remove leftover temps of record `id` (harmless when there are none); returns the paths
/// removed, relative to the workspace.
pub(crate) fn remove_temps(
    conf: &Confined,
    id: RecordId,
    files: &[FileEffect],
) -> io::Result<Vec<PathBuf>> {
    let mut cache = ParentCache::new();
    let mut removed = Vec::new();
    for (seq, f) in files.iter().enumerate() {
        if let Some(dir) = cache.get(conf, &f.path)? {
            for name in [temp_name(id, seq), restore_name(id, seq)] {
                if unlink_existing(dir.as_fd(), &name)? {
                    removed.push(parent_path(&f.path).join(name));
                }
            }
        }
    }
    Ok(removed)
}

/// The record id in the name of an apply's temp file (`.airlock-tmp-<id>-<seq>` or
/// `.airlock-rst-<id>-<seq>`, both decimal numbers), or `None` for any other name.
pub(crate) fn temp_record(name: &OsStr) -> Option<RecordId> {
    let name = name.to_str()?;
    let rest = name
        .strip_prefix(".airlock-tmp-")
        .or_else(|| name.strip_prefix(".airlock-rst-"))?;
    let (id, seq) = rest.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.len() <= 19 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(id) || !digits(seq) {
        return None;
    }
    // The names are made by `format!` from integers: no leading zeros.
    if (id.len() > 1 && id.starts_with('0')) || (seq.len() > 1 && seq.starts_with('0')) {
        return None;
    }
    id.parse().ok()
}

/// Put every path of record `id` back to its pre-image, from whatever intermediate state the
/// forward protocol (or an earlier, interrupted rollback) left. Idempotent.
pub(crate) fn rollback(
    conf: &Confined,
    id: RecordId,
    files: &[FileEffect],
    hook: Option<&dyn FaultHook>,
) -> Result<(), StepError> {
    let ctx = Ctx {
        conf,
        id,
        hook,
        per_file_sync: files.len() <= PER_FILE_SYNC_LIMIT,
    };
    let Some(first) = files.first() else {
        return Ok(());
    };
    remove_temps(conf, id, files).map_err(err_at(&first.path))?;
    let mut touched = BTreeSet::new();

    // Pass 1, deepest first: undo post-images (replace leaf by leaf atomically; remove what
    // did not exist before).
    for (seq, f) in files.iter().enumerate().rev() {
        let found = classify(conf, f).map_err(err_at(&f.path))?;
        if found != Found::Post || f.post == Fingerprint::Absent {
            continue;
        }
        ctx.step(Phase::Rollback, &f.path)
            .map_err(err_at(&f.path))?;
        let Parent::Dir(dir) = conf.parent_of(&f.path).map_err(err_at(&f.path))? else {
            continue;
        };
        if kind_is_leaf(&f.pre) && kind_is_leaf(&f.post) {
            restore(&ctx, &dir, seq, f).map_err(err_at(&f.path))?;
        } else if kind_is_dir(&f.post) {
            rustix::fs::unlinkat(&dir, f.path.file_name(), AtFlags::REMOVEDIR)
                .map_err(|e| match e {
                    Errno::NOTEMPTY | Errno::EXIST => io::Error::new(
                        io::ErrorKind::DirectoryNotEmpty,
                        "the directory created by the apply now holds other files",
                    ),
                    e => e.into(),
                })
                .map_err(err_at(&f.path))?;
        } else {
            unlink_if_present(dir.as_fd(), f.path.file_name()).map_err(err_at(&f.path))?;
        }
        touched.insert(parent_path(&f.path));
    }

    // Pass 2, parents first: recreate what is missing.
    for (seq, f) in files.iter().enumerate() {
        if f.pre == Fingerprint::Absent {
            continue;
        }
        let found = classify(conf, f).map_err(err_at(&f.path))?;
        if found == Found::Pre {
            continue;
        }
        if conf.fingerprint(&f.path).map_err(err_at(&f.path))? != Fingerprint::Absent {
            return Err(StepError {
                path: f.path.display(),
                source: io::Error::other("it is neither the pre-image nor absent"),
            });
        }
        ctx.step(Phase::Rollback, &f.path)
            .map_err(err_at(&f.path))?;
        let Parent::Dir(dir) = conf.parent_of(&f.path).map_err(err_at(&f.path))? else {
            return Err(StepError {
                path: f.path.display(),
                source: io::Error::new(io::ErrorKind::NotFound, "its parent directory is missing"),
            });
        };
        if kind_is_dir(&f.pre) {
            mkdir_mode(dir.as_fd(), f.path.file_name(), f.dir_mode.unwrap_or(0o755))
                .map_err(err_at(&f.path))?;
        } else {
            restore(&ctx, &dir, seq, f).map_err(err_at(&f.path))?;
        }
        touched.insert(parent_path(&f.path));
    }

    ctx.sync_dirs(&touched, &first.path)?;
    for f in files {
        if classify(conf, f).map_err(err_at(&f.path))? != Found::Pre {
            return Err(StepError {
                path: f.path.display(),
                source: io::Error::other("it did not return to its pre-image"),
            });
        }
    }
    Ok(())
}

/// Atomically replace `f`'s path with its pre-image: a symlink recreated from the recorded
/// target, a file hard-linked (or copied) from its backup and checked against the recorded hash.
fn restore(ctx: &Ctx<'_>, dir: &OwnedFd, seq: usize, f: &FileEffect) -> io::Result<()> {
    let tmp = restore_name(ctx.id, seq);
    unlink_if_present(dir.as_fd(), &tmp)?;
    match &f.pre {
        Fingerprint::Symlink { target } => {
            rustix::fs::symlinkat(OsStr::from_bytes(target), dir, &tmp)?;
        }
        Fingerprint::File { .. } => {
            let backup = f
                .backup
                .as_deref()
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no backup was recorded"))?;
            let rel = Path::new(backup);
            let bdir = ctx
                .conf
                .existing_dir(rel.parent().unwrap_or(Path::new("")))?;
            link_or_copy(
                bdir.as_fd(),
                rel.file_name().unwrap_or_default(),
                dir.as_fd(),
                &tmp,
                ctx.per_file_sync,
            )
            .map_err(|e| io::Error::new(e.kind(), format!("backup {backup}: {e}")))?;
            let (got, _) = fingerprint_at(dir.as_fd(), &tmp)?;
            if got != f.pre {
                unlink_if_present(dir.as_fd(), &tmp)?;
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("backup {backup} no longer matches the recorded original"),
                ));
            }
        }
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "internal: only files and symlinks are restored from backups",
            ));
        }
    }
    rustix::fs::renameat(dir, &tmp, dir, f.path.file_name())?;
    Ok(())
}
