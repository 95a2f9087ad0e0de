//! `RelPath`: a lexically clean, workspace-relative path. It lives in [`airlock_types::path`]
//! (shared with the stage, which needs nothing else of the policy); re-exported here unchanged.

pub use airlock_types::path::{
    MAX_NAME_BYTES, MAX_PATH_BYTES, RelPath, RelPathError, escape_bytes,
};
