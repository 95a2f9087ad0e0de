//! The `airlock` front ends: the command-line interface (`cli`) and the MCP server (`mcp`),
//! both thin layers over [`airlock_kernel::Kernel`]. Logs go to stderr; stdout belongs to
//! machine output (`--json`) and, under `airlock mcp`, to the protocol.

#![forbid(unsafe_code)]

pub mod approve;
pub mod cli;
pub mod demo;
pub mod doctor;
pub mod mcp;
pub mod setup;
pub mod unrestricted;
