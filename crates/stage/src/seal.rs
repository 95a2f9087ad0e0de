//! The operator's verdict key on disk: 32 random bytes in `verdict.key` of the operator's
//! state directory (0600, in a 0700 directory), made on first use. What a seal holds and who
//! may make one is `airlock_types::VerdictSeal` and `airlock_verify`'s `Attestation`; the store
//! keeps the seal beside its verdict ([`crate::store::Store::record_sealed_verdict`]).

use std::io::{self, Read, Write};
use std::path::Path;

use airlock_types::VerdictKey;

/// The key file's name in the operator's state directory.
pub const KEY_FILE: &str = "verdict.key";

/// Loads the key from `dir/verdict.key`, creating the directory (0700) and a fresh key (0600)
/// when there is none. A key file of the wrong size is an error, never replaced silently.
pub fn load_or_create_key(dir: &Path) -> io::Result<VerdictKey> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let path = dir.join(KEY_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => {
            let key: [u8; 32] = bytes.as_slice().try_into().map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{} is not a verdict key (expected 32 bytes, found {}); remove it to make a new one",
                        path.display(),
                        bytes.len()
                    ),
                )
            })?;
            Ok(VerdictKey::from_bytes(key))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
            let mut key = [0u8; 32];
            std::fs::File::open("/dev/urandom")?.read_exact(&mut key)?;
            let tmp = dir.join(format!(".{KEY_FILE}.{}", std::process::id()));
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(&key)?;
            f.sync_all()?;
            // Another process may have made one meanwhile: theirs wins (the link fails).
            let linked = std::fs::hard_link(&tmp, &path);
            let _ = std::fs::remove_file(&tmp);
            match linked {
                Ok(()) => Ok(VerdictKey::from_bytes(key)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => load_or_create_key(dir),
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_made_once_and_kept() {
        let d = tempfile::tempdir().unwrap();
        let a = load_or_create_key(&d.path().join("state")).unwrap();
        let b = load_or_create_key(&d.path().join("state")).unwrap();
        assert_eq!(a.bytes(), b.bytes());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(d.path().join("state").join(KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::write(d.path().join("state").join(KEY_FILE), b"short").unwrap();
        assert!(load_or_create_key(&d.path().join("state")).is_err());
    }
}
