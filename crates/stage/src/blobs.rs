//! Content-addressed blob store under `.airlock/blobs/`: staged file contents live here, named by
//! their BLAKE3 hash, written once (temp file + fsync + rename) and never modified, so a snapshot
//! that names a hash always reads the same bytes.

use crate::model::ContentHash;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

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
}
