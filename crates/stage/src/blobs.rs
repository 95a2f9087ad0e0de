//! Content-addressed blob store under `.airlock/blobs/`: staged file contents live here, named by
//! their BLAKE3 hash, written once (temp file + fsync + rename) and never modified, so a snapshot
//! that names a hash always reads the same bytes.
//!
//! Blobs no staged entry names are reclaimed by [`crate::gc`]. A blob is written before the
//! entry naming it is committed, so whoever writes blobs for an entry (or reads the blobs of a
//! snapshot it took) holds a [`BlobPin`] from the first write until the entry is committed (or
//! the read is done): the collector runs only when it can take the store's lock exclusively,
//! that is when no pin is held, and it computes what is live under that lock.

use crate::model::ContentHash;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The lock file pins share and the collector takes exclusively (inside the store directory,
/// beside the two-hex-digit fan-out directories).
pub(crate) const LOCK_FILE: &str = "gc.lock";

/// A shared hold on the blob store: while any pin lives, the garbage collector does not run.
/// Take one before writing blobs that an entry will name, and drop it once the entry is
/// committed; or before reading the blobs of a snapshot, until they are read.
#[derive(Debug)]
pub struct BlobPin {
    _lock: fs::File,
}

/// The collector's exclusive hold on the blob store (no pin can be taken meanwhile).
#[derive(Debug)]
pub(crate) struct CollectLock {
    _lock: fs::File,
}

/// A directory of immutable blobs named by content hash.
#[derive(Debug, Clone)]
pub struct BlobStore {
    dir: PathBuf,
}

impl BlobStore {
    /// Open (creating if needed) the blob store in `dir`.
    pub fn open(dir: impl Into<PathBuf>) -> io::Result<BlobStore> {
        let dir = dir.into();
        fs::create_dir_all(&dir)?;
        Ok(BlobStore { dir })
    }

    /// The directory of the store.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the blob with `hash` lives (whether or not it exists).
    pub fn path(&self, hash: &ContentHash) -> PathBuf {
        let hex = hash.to_hex();
        self.dir.join(&hex[..2]).join(&hex)
    }

    fn lock_file(&self) -> io::Result<fs::File> {
        fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.dir.join(LOCK_FILE))
    }

    /// Pin the store (see [`BlobPin`]); waits while a collection is running (a collection is
    /// one pass over the store, so the wait is bounded).
    pub fn pin(&self) -> io::Result<BlobPin> {
        let f = self.lock_file()?;
        rustix::fs::flock(&f, rustix::fs::FlockOperation::LockShared)?;
        Ok(BlobPin { _lock: f })
    }

    /// The collector's lock, without waiting: `None` while any pin is held.
    pub(crate) fn try_collect_lock(&self) -> io::Result<Option<CollectLock>> {
        let f = self.lock_file()?;
        match rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Some(CollectLock { _lock: f })),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Store `bytes`, returning their hash. Idempotent; durable when it returns.
    pub fn put(&self, bytes: &[u8]) -> io::Result<ContentHash> {
        let hash = ContentHash::of(bytes);
        let target = self.path(&hash);
        if target.exists() {
            return Ok(hash);
        }
        let parent = target.parent().unwrap_or(&self.dir);
        fs::create_dir_all(parent)?;
        let mut tmp = tempfile::NamedTempFile::new_in(parent)?;
        tmp.write_all(bytes)?;
        tmp.as_file().sync_all()?;
        tmp.persist(&target).map_err(|e| e.error)?;
        Ok(hash)
    }

    /// Store `bytes` without waiting for the disk, returning their hash. The blob is not
    /// durable until [`BlobStore::sync`] returns: call it before anything durable names the
    /// blob. Lets a batch of thousands of files cost one flush instead of one per file.
    pub fn put_deferred(&self, bytes: &[u8]) -> io::Result<ContentHash> {
        let hash = ContentHash::of(bytes);
        let target = self.path(&hash);
        // A blob left truncated by a crash before its flush has the wrong size: rewrite it.
        if let Ok(md) = fs::metadata(&target)
            && md.len() == bytes.len() as u64
        {
            return Ok(hash);
        }
        let parent = target.parent().unwrap_or(&self.dir);
        fs::create_dir_all(parent)?;
        let mut tmp = tempfile::NamedTempFile::new_in(parent)?;
        tmp.write_all(bytes)?;
        tmp.persist(&target).map_err(|e| e.error)?;
        Ok(hash)
    }

    /// Flush every blob written with [`BlobStore::put_deferred`] (one `syncfs` of the store's
    /// filesystem).
    pub fn sync(&self) -> io::Result<()> {
        let dir = fs::File::open(&self.dir)?;
        rustix::fs::syncfs(&dir)?;
        Ok(())
    }

    /// Read a whole blob.
    pub fn get(&self, hash: &ContentHash) -> io::Result<Vec<u8>> {
        fs::read(self.path(hash))
    }

    /// True if the blob exists.
    pub fn contains(&self, hash: &ContentHash) -> bool {
        self.path(hash).exists()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_get_roundtrip_and_idempotent() {
        let d = tempfile::tempdir().unwrap();
        let s = BlobStore::open(d.path().join("blobs")).unwrap();
        let h = s.put(b"\x00\xffbinary").unwrap();
        assert_eq!(s.put(b"\x00\xffbinary").unwrap(), h);
        assert_eq!(s.get(&h).unwrap(), b"\x00\xffbinary");
        assert!(s.contains(&h));
        assert!(!s.contains(&ContentHash::of(b"other")));
    }

    #[test]
    fn deferred_put_repairs_a_truncated_blob_and_syncs() {
        let d = tempfile::tempdir().unwrap();
        let s = BlobStore::open(d.path().join("blobs")).unwrap();
        let h = s.put_deferred(b"deferred content").unwrap();
        // A crash before the flush can leave an empty file under the final name.
        fs::write(s.path(&h), b"").unwrap();
        assert_eq!(s.put_deferred(b"deferred content").unwrap(), h);
        s.sync().unwrap();
        assert_eq!(s.get(&h).unwrap(), b"deferred content");
    }
}
