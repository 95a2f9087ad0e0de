//! Pure decisions for airlock's execution chain: the Permission stage (work modes, permission
//! modes, access profiles and user rules), the Jail (confining paths to the workspace) and the
//! Bash Guard (parsing and judging shell scripts).
//!
//! Nothing here spawns a process or keeps global state: every decision is a function of its
//! inputs, so it can be unit-tested and fuzzed in isolation. Every decision that is not an
//! allow carries its [`Stage`], a stable rule id and one human sentence ([`Decision`]).
//!
//! ```
//! use airlock_policy::{Decision, Stage, Ruling};
//! let d = Decision::deny(Stage::Jail, "jail_escape", "`../x` resolves outside the workspace.");
//! assert_eq!(d.decision, Ruling::Deny);
//! assert_eq!(serde_json::to_value(&d).unwrap()["stage"], "jail");
//! ```

#![forbid(unsafe_code)]

pub mod decision;
pub mod git_config;
pub mod guard;
pub mod host_exec;
pub mod jail;
pub mod modes;
pub mod names;
pub mod net;
pub mod path;
pub mod permission;
pub mod rules;

pub use decision::{Decision, Ruling, Stage};
pub use path::{RelPath, RelPathError};
