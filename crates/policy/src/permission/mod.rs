//! The Permission stage: may this tool, with these arguments, run under the session's
//! [`WorkMode`](crate::modes::WorkMode) × [`PermissionMode`](crate::modes::PermissionMode) ×
//! access [`Profile`](crate::modes::Profile) × user [`Rules`](crate::rules::Rules)?
//!
//! The axes intersect: the most restrictive wins, deny beats ask beats allow. Mode and profile
//! ceilings (and `ask_user` in AUTO) are hard denies that no user rule lifts; the jail, the
//! guard and validation come after this stage and are not lifted by it either.
//!
//! ```
//! use airlock_policy::modes::{PermissionMode, WorkMode};
//! use airlock_policy::permission::{Policy, ToolClass, ToolRequest};
//! use airlock_policy::rules::Rules;
//! use airlock_policy::Ruling;
//!
//! let p = Policy::new(WorkMode::Discuss, PermissionMode::Auto, None, Rules::new(), vec![]).unwrap();
//! let paths = ["src/main.rs".to_string()];
//! let write = ToolRequest { tool: "write_file", class: ToolClass::Write, subjects: &paths };
//! let d = p.decide(&write);
//! assert_eq!((d.decision, &*d.rule), (Ruling::Deny, "mode_discuss_readonly"));
//! ```

mod policy;
mod tool;

pub use policy::{Policy, PolicyError};
pub use tool::{ToolClass, ToolRequest};
