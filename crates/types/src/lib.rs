//! The vocabulary airlock's crates share, with no behaviour of their own beyond parsing and
//! formatting: the workspace-relative [`RelPath`], the BLAKE3 [`ContentHash`] of a blob and the
//! [`ChangesetHash`] of a staged changeset, a verification's [`Verdict`] and where its command
//! came from ([`VerdictSource`]).
//!
//! [`display`] holds the one escaper every operator-facing rendering goes through, so a name or
//! content an agent chose cannot drive the operator's terminal.
//!
//! Every type here parses what it prints: a hash from its hex, a verdict from its JSON name, a
//! source from its snake_case name, so what the stage stores on disk reads back as the same
//! typed value.
//!
//! ```
//! use airlock_types::{ChangesetHash, ContentHash, RelPath, Verdict, VerdictSource};
//! let p = RelPath::new("./src//main.rs").unwrap();
//! assert_eq!(p.display(), "src/main.rs");
//! let h = ContentHash::of(b"fn main() {}");
//! assert_eq!(ContentHash::from_hex(&h.to_hex()), Some(h));
//! assert_eq!(Verdict::parse("no_tests"), Some(Verdict::NoTests));
//! assert!(VerdictSource::Detected.unlocks_apply() && !VerdictSource::Agent.unlocks_apply());
//! # let _ = ChangesetHash::from_hex(&h.to_hex());
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod display;
pub mod hash;
pub mod path;
pub mod seal;
pub mod verdict;

pub use hash::{ChangesetHash, ContentHash};
pub use path::{RelPath, RelPathError};
pub use seal::{BaseFingerprint, VerdictKey, VerdictSeal};
pub use verdict::{Concern, Verdict, VerdictSource};
