//! `airlock mcp`: every kernel tool served over the Model Context Protocol on stdio.
//!
//! The server is a thin front end over [`Kernel`]: `tools/list` is the kernel's registry with
//! its JSON Schemas unchanged, `tools/call` hands the raw arguments to [`Kernel::call`] (the
//! kernel's validator, not serde, judges them) on a blocking thread. Denials come back as tool
//! errors carrying the decision JSON. The operator picks mode, permission and profile on the
//! command line; nothing the model sends changes them. In ask mode, gated calls are put to the
//! operator through MCP elicitation ([`approval`]), or, when the client cannot ask, through the
//! approval queue that `airlock approvals` answers ([`queue`]).
//!
//! Robustness: messages are capped at [`transport::MAX_LINE_BYTES`] per line (longer ones are
//! discarded while streaming and answered with an error), malformed JSON gets a Parse error,
//! unknown methods get Method not found, and when the client disconnects every running call is
//! cancelled (its sandbox killed, nothing half-applied) and the server exits once they end.
//! Logs go to stderr only: stdout carries the protocol.

pub mod approval;
pub mod calls;
pub mod outcome;
pub mod queue;
pub mod server;
pub mod transport;

use airlock_kernel::Kernel;
use calls::Calls;
use server::AirlockServer;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use transport::LineTransport;

/// The tools an agent is offered: the kernel's registry, less `ask_user` where the permission
/// stage refuses it whatever is asked (outside ask mode), so no model is offered a tool that
/// cannot work. `airlock tools` and MCP `tools/list` both list these.
pub fn offered_tools(kernel: &Kernel) -> Vec<airlock_kernel::ToolSpec> {
    let trail = kernel.explain("ask_user", r#"{"question":"?"}"#);
    let ask_user_refused = trail["trail"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|step| step["decision"] == "deny" && step["rule"] == "ask_user_in_auto");
    kernel
        .tools()
        .into_iter()
        .filter(|t| !(ask_user_refused && t.name == "ask_user"))
        .collect()
}

/// How long the server waits, after the client left, for cancelled calls to wind down.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(30);

/// Errors that end the server.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The async runtime could not start.
    #[error("the MCP server's runtime could not start: {0}")]
    Runtime(std::io::Error),
    /// The MCP session could not be set up.
    #[error("the MCP session could not start: {0}")]
    Init(String),
    /// The session's task failed.
    #[error("the MCP session ended abnormally: {0}")]
    Session(String),
    /// Calls were still running long after the client left.
    #[error("{0} call(s) were still running {1} s after the client disconnected")]
    Stuck(usize, u64),
}

/// Serve `kernel` over MCP on stdin/stdout until the client disconnects.
pub fn serve_stdio(kernel: Arc<Kernel>) -> Result<(), Box<dyn std::error::Error>> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("airlock-mcp")
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    let result = rt.block_on(async move {
        let (reader, writer) = rmcp::transport::stdio_pipes();
        serve(kernel, reader, writer).await
    });
    // Calls are over by now (serve waits for them); do not hang on a blocking stdin read.
    rt.shutdown_timeout(Duration::from_secs(2));
    result.map_err(Into::into)
}

/// Serve `kernel` over MCP on any reader/writer pair until the client disconnects; returns
/// once every call has ended.
pub async fn serve<R, W>(kernel: Arc<Kernel>, reader: R, writer: W) -> Result<(), ServeError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let calls = Arc::new(Calls::default());
    let on_gone = calls.clone();
    let transport = LineTransport::new(reader, writer).on_disconnect(move || on_gone.cancel_all());
    let handler = AirlockServer::new(kernel, calls.clone(), tokio::runtime::Handle::current());
    let session = match rmcp::serve_server(handler, transport).await {
        Ok(running) => running
            .waiting()
            .await
            .map(|reason| tracing::debug!(?reason, "MCP session ended"))
            .map_err(|e| ServeError::Session(e.to_string())),
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => {
            tracing::debug!("the client left before initializing");
            Ok(())
        }
        Err(e) => Err(ServeError::Init(e.to_string())),
    };
    // The client is gone (or the session failed): cancel what still runs and wait for it.
    calls.cancel_all();
    let waiter = calls.clone();
    let idle = tokio::task::spawn_blocking(move || waiter.wait_idle(DRAIN_LIMIT))
        .await
        .unwrap_or(false);
    if !idle {
        return Err(ServeError::Stuck(calls.len(), DRAIN_LIMIT.as_secs()));
    }
    session
}
