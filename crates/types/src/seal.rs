//! The seal of a verdict, as data: what a verification is bound to beyond its changeset hash
//! (the base tree it read, the exact command and environment, its concerns) and the tag that
//! authenticates it under the operator's [`VerdictKey`]. Only airlock's verify path makes a
//! seal (`airlock_verify`'s `Attestation::seal`); anything may check one.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::Concern;

/// A 32-byte key that authenticates verdicts; kept in the operator's state directory.
#[derive(Clone)]
pub struct VerdictKey([u8; 32]);

impl VerdictKey {
    /// A key from its bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> VerdictKey {
        VerdictKey(bytes)
    }

    /// Its bytes (for the keyed hash).
    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl std::fmt::Debug for VerdictKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("VerdictKey(..)")
    }
}

/// A fingerprint of the workspace tree a verification ran on, per top-level name (see
/// `airlock_verify::integrity::seal::base_fingerprint`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseFingerprint(pub BTreeMap<String, String>);

impl BaseFingerprint {
    /// The top-level names whose entries differ between `self` (the verified base) and
    /// `now`, each with how (`changed`, `added`, `removed`).
    ///
    /// ```
    /// use airlock_types::BaseFingerprint;
    /// let a = BaseFingerprint([("src".to_string(), "1".to_string())].into());
    /// let b = BaseFingerprint([("src".to_string(), "2".to_string()), ("new".into(), "3".into())].into());
    /// assert_eq!(a.moved(&b), ["`src` changed", "`new` added"]);
    /// ```
    pub fn moved(&self, now: &BaseFingerprint) -> Vec<String> {
        let mut out = Vec::new();
        for (k, v) in &self.0 {
            match now.0.get(k) {
                None => out.push(format!("`{k}` removed")),
                Some(w) if w != v => out.push(format!("`{k}` changed")),
                _ => {}
            }
        }
        for k in now.0.keys() {
            if !self.0.contains_key(k) {
                out.push(format!("`{k}` added"));
            }
        }
        out
    }
}

/// What a verdict is bound to besides its changeset, and the tag over all of it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerdictSeal {
    /// The base tree the run read.
    pub base: BaseFingerprint,
    /// A hash of the exact argv and environment the tests ran with.
    pub run: String,
    /// What the verification found that makes apply the operator's decision.
    pub concerns: Vec<Concern>,
    /// The authentication tag (hex).
    pub mac: String,
}
