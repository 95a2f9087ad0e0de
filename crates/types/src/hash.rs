//! BLAKE3 hashes: [`ContentHash`] names a blob's bytes, [`ChangesetHash`] names a whole staged
//! changeset (the hash a verdict is bound to). Two types, so one is never passed for the other.
//! Both print and serialise as 64 lowercase hex digits and parse hex in either case.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::io;

/// Parse 64 hex digits into 32 bytes.
fn bytes_from_hex(s: &str) -> Option<[u8; 32]> {
    hex::decode(s).ok()?.try_into().ok()
}

/// A BLAKE3 content hash (of a blob's bytes, or of a file on disk).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContentHash(pub [u8; 32]);

impl ContentHash {
    /// Hash of `bytes`.
    pub fn of(bytes: &[u8]) -> ContentHash {
        ContentHash(*blake3::hash(bytes).as_bytes())
    }
    /// Hash of everything `r` yields.
    pub fn of_reader(mut r: impl io::Read) -> io::Result<ContentHash> {
        let mut h = blake3::Hasher::new();
        io::copy(&mut r, &mut h)?;
        Ok(ContentHash(*h.finalize().as_bytes()))
    }
    /// Lowercase hex.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
    /// Parse lowercase or uppercase hex.
    pub fn from_hex(s: &str) -> Option<ContentHash> {
        bytes_from_hex(s).map(ContentHash)
    }
}

impl fmt::Debug for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ContentHash({})", &self.to_hex()[..12])
    }
}
impl fmt::Display for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}
impl Serialize for ContentHash {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}
impl<'de> Deserialize<'de> for ContentHash {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ContentHash::from_hex(&s).ok_or_else(|| serde::de::Error::custom("bad content hash"))
    }
}

/// The hash of a staged changeset: its identity. A verdict names the changeset hash it was
/// computed for, and only a passing verdict for exactly the current hash unlocks apply.
/// Computed by the stage over the sorted entries; this type only carries and parses it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChangesetHash(pub [u8; 32]);

impl ChangesetHash {
    /// Lowercase hex.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
    /// Parse lowercase or uppercase hex.
    pub fn from_hex(s: &str) -> Option<ChangesetHash> {
        bytes_from_hex(s).map(ChangesetHash)
    }
}

impl fmt::Debug for ChangesetHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ChangesetHash({})", &self.to_hex()[..12])
    }
}
impl fmt::Display for ChangesetHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}
impl Serialize for ChangesetHash {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}
impl<'de> Deserialize<'de> for ChangesetHash {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ChangesetHash::from_hex(&s).ok_or_else(|| serde::de::Error::custom("bad changeset hash"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_hash_hex_and_serde_round_trip() {
        let h = ContentHash::of(b"abc");
        assert_eq!(h, ContentHash::of_reader(&b"abc"[..]).unwrap());
        assert_eq!(h.to_hex().len(), 64);
        assert_eq!(ContentHash::from_hex(&h.to_hex()), Some(h));
        assert_eq!(ContentHash::from_hex(&h.to_hex().to_uppercase()), Some(h));
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(json, format!("\"{}\"", h.to_hex()));
        assert_eq!(serde_json::from_str::<ContentHash>(&json).unwrap(), h);
        assert_eq!(h.to_string(), h.to_hex());
    }

    #[test]
    fn bad_hex_is_refused() {
        for s in ["", "zz", &"a".repeat(63), &"a".repeat(66), &"g".repeat(64)] {
            assert_eq!(ContentHash::from_hex(s), None, "{s}");
            assert_eq!(ChangesetHash::from_hex(s), None, "{s}");
        }
        assert!(serde_json::from_str::<ContentHash>("\"abc\"").is_err());
        assert!(serde_json::from_str::<ChangesetHash>("\"abc\"").is_err());
        assert!(serde_json::from_str::<ChangesetHash>("7").is_err());
    }

    #[test]
    fn changeset_hash_hex_and_serde_round_trip() {
        let h = ChangesetHash([7; 32]);
        assert_eq!(h.to_hex(), "07".repeat(32));
        assert_eq!(ChangesetHash::from_hex(&h.to_hex()), Some(h));
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(serde_json::from_str::<ChangesetHash>(&json).unwrap(), h);
        assert_eq!(format!("{h:?}"), "ChangesetHash(070707070707)");
    }
}
