//! `airlock mcp`: every kernel tool served over the Model Context Protocol on stdio.
//! Placeholder until the server lands.

use airlock_kernel::Kernel;
use std::sync::Arc;

/// Serve `kernel` over MCP on stdin/stdout until the client disconnects.
pub fn serve_stdio(kernel: Arc<Kernel>) -> Result<(), Box<dyn std::error::Error>> {
    let _ = kernel;
    Err("the MCP server is not implemented yet".into())
}
