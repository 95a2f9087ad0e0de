//! Attacks for real, through the `airlock` binary: payload scripts in a temporary workspace run
//! through `airlock exec`, and each test checks the host side, not just the payload's own report.
//!
//! Every attack runs twice where the bash guard could stop it: once as a plain command line (the
//! guard may deny it; that is a valid first line of defence), and once as a script file staged
//! with `airlock call write_file` and run as `airlock exec -- sh payload.sh`, which the guard lets
//! through, so the sandbox itself is what is tested.
//!
//! Here every command runs in freshly made namespaces (no warm sandbox host).

mod common;

const HOST_MODE: &str = "off";

const TIER: &str = "full";

include!("attacks/suite.rs");
