//! Newline-delimited JSON-RPC over a byte stream, bounded and fail-closed.
//!
//! Every line is one message. A line longer than the cap is discarded as it streams in (never
//! buffered whole) and answered with an Invalid Request error; a line that is not JSON is
//! answered with a Parse error; well-formed JSON that is not a message the server understands is
//! answered with an Invalid Request error carrying its `id` when it has one. Notifications that
//! cannot be parsed get no answer (JSON-RPC forbids answering a notification). End of input or a
//! read error ends the session and fires the disconnect hook at once, so running calls are
//! cancelled without waiting for the protocol layer to wind down.

use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

/// The largest accepted message: 16 MiB, the same bound rmcp's own transports use.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// JSON-RPC: invalid JSON was received.
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: the JSON sent is not a valid request object.
const INVALID_REQUEST: i64 = -32600;

type Writer<W> = Arc<Mutex<Option<W>>>;

/// A server-side MCP transport over any reader/writer pair (stdin/stdout in production).
pub struct LineTransport<R, W> {
    reader: BufReader<R>,
    line: Vec<u8>,
    discarding: bool,
    max_line: usize,
    writer: Writer<W>,
    on_disconnect: Option<Box<dyn FnOnce() + Send + Sync>>,
    /// Until the client's first request, stray notifications and responses are dropped
    /// (rmcp would otherwise abort the handshake on them).
    seen_request: bool,
}

/// What one bounded read produced.
enum Read {
    Line,
    Oversized,
    Eof,
}

impl<R, W> LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// A transport reading `reader` and writing `writer`, with the default line cap.
    pub fn new(reader: R, writer: W) -> Self {
        LineTransport {
            reader: BufReader::with_capacity(64 * 1024, reader),
            line: Vec::new(),
            discarding: false,
            max_line: MAX_LINE_BYTES,
            writer: Arc::new(Mutex::new(Some(writer))),
            on_disconnect: None,
            seen_request: false,
        }
    }

    /// Override the line cap (tests use a small one).
    pub fn with_max_line(mut self, max_line: usize) -> Self {
        self.max_line = max_line.max(1);
        self
    }

    /// Run `hook` once when the client goes away (end of input or a read error).
    pub fn on_disconnect(mut self, hook: impl FnOnce() + Send + Sync + 'static) -> Self {
        self.on_disconnect = Some(Box::new(hook));
        self
    }

    fn disconnected(&mut self) {
        if let Some(hook) = self.on_disconnect.take() {
            hook();
        }
    }

    /// Read one `\n`-terminated line into `self.line`, never holding more than the cap.
    /// Cancel-safe: partial progress stays in `self.line` / `self.discarding`.
    async fn read_line(&mut self) -> std::io::Result<Read> {
        loop {
            let (used, done) = {
                let buf = self.reader.fill_buf().await?;
                if buf.is_empty() {
                    return Ok(Read::Eof);
                }
                let newline = buf.iter().position(|b| *b == b'\n');
                let take = newline.map_or(buf.len(), |i| i + 1);
                if self.discarding {
                    if newline.is_some() {
                        self.discarding = false;
                    }
                    (take, None)
                } else if self.line.len().saturating_add(take) > self.max_line {
                    self.line.clear();
                    self.line.shrink_to(64 * 1024);
                    self.discarding = newline.is_none();
                    (take, Some(Read::Oversized))
                } else {
                    self.line.extend_from_slice(&buf[..take]);
                    (take, newline.map(|_| Read::Line))
                }
            };
            self.reader.consume(used);
            if let Some(done) = done {
                return Ok(done);
            }
        }
    }

    /// Classify one complete line: a message for the protocol layer, or an error reply.
    fn classify(&mut self, line: &[u8]) -> Classified {
        let line = line
            .strip_prefix(b"\xEF\xBB\xBF".as_slice())
            .unwrap_or(line);
        let value: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => {
                return Classified::Reply(error_reply(
                    Value::Null,
                    PARSE_ERROR,
                    &format!("Parse error: the message is not valid JSON ({e})."),
                ));
            }
        };
        let id = match value.get("id") {
            Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
            _ => Value::Null,
        };
        let is_request = value.get("method").is_some() && value.get("id").is_some();
        let is_notification = value.get("method").is_some() && value.get("id").is_none();
        if !self.seen_request && !is_request && value.is_object() {
            tracing::debug!("dropping a non-request message received before the first request");
            return Classified::Skip;
        }
        match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value) {
            Ok(msg) => {
                self.seen_request |= is_request;
                Classified::Message(Box::new(msg))
            }
            Err(_) if is_notification => {
                tracing::debug!("ignoring a notification the server does not understand");
                Classified::Skip
            }
            Err(e) => Classified::Reply(error_reply(
                id,
                INVALID_REQUEST,
                &format!("Invalid Request: not a JSON-RPC 2.0 message this server accepts ({e})."),
            )),
        }
    }
}

enum Classified {
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    Reply(Value),
    Skip,
}

/// Write one JSON value as a line (errors the protocol layer never sees); false if it failed.
async fn reply<W: AsyncWrite + Unpin>(writer: Writer<W>, value: Value) -> bool {
    let mut bytes = match serde_json::to_vec(&value) {
        Ok(b) => b,
        Err(_) => return false,
    };
    bytes.push(b'\n');
    write_line(&writer, bytes).await.is_ok()
}

fn error_reply(id: Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

async fn write_line<W: AsyncWrite + Unpin>(
    writer: &Writer<W>,
    bytes: Vec<u8>,
) -> std::io::Result<()> {
    let mut guard = writer.lock().await;
    let Some(w) = guard.as_mut() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotConnected,
            "the transport is closed",
        ));
    };
    w.write_all(&bytes).await?;
    w.flush().await
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = self.writer.clone();
        let bytes = serde_json::to_vec(&item).map(|mut b| {
            b.push(b'\n');
            b
        });
        async move {
            let bytes = bytes.map_err(std::io::Error::other)?;
            write_line(&writer, bytes).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let read = match self.read_line().await {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!("reading the client's messages failed: {e}");
                    self.disconnected();
                    return None;
                }
            };
            match read {
                Read::Eof => {
                    self.disconnected();
                    return None;
                }
                Read::Oversized => {
                    tracing::warn!(max = self.max_line, "discarding an oversized message");
                    let msg = format!(
                        "Invalid Request: the message exceeds the {} byte limit and was discarded.",
                        self.max_line
                    );
                    if !reply(
                        self.writer.clone(),
                        error_reply(Value::Null, INVALID_REQUEST, &msg),
                    )
                    .await
                    {
                        self.disconnected();
                        return None;
                    }
                }
                Read::Line => {
                    let line = std::mem::take(&mut self.line);
                    let trimmed = trim_line(&line);
                    let classified = if trimmed.iter().all(u8::is_ascii_whitespace) {
                        Classified::Skip
                    } else {
                        self.classify(trimmed)
                    };
                    // Keep the buffer's capacity for the next line, within reason.
                    self.line = line;
                    self.line.clear();
                    self.line.shrink_to(64 * 1024);
                    match classified {
                        Classified::Message(msg) => return Some(*msg),
                        Classified::Skip => {}
                        Classified::Reply(v) => {
                            if !reply(self.writer.clone(), v).await {
                                self.disconnected();
                                return None;
                            }
                        }
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let mut guard = self.writer.lock().await;
        if let Some(mut w) = guard.take() {
            let _ = w.flush().await;
        }
        Ok(())
    }
}

fn trim_line(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

    /// A transport over in-memory pipes: (client writes, client reads, transport).
    fn pair(
        max: usize,
    ) -> (
        tokio::io::DuplexStream,
        BufReader<tokio::io::DuplexStream>,
        LineTransport<tokio::io::DuplexStream, tokio::io::DuplexStream>,
    ) {
        let (client_out, server_in) = tokio::io::duplex(1 << 16);
        let (server_out, client_in) = tokio::io::duplex(1 << 16);
        let t = LineTransport::new(server_in, server_out).with_max_line(max);
        (client_out, BufReader::new(client_in), t)
    }

    async fn next_reply(r: &mut BufReader<tokio::io::DuplexStream>) -> Value {
        let mut s = String::new();
        r.read_line(&mut s).await.expect("reply line");
        serde_json::from_str(&s).expect("reply is JSON")
    }

    const PING: &str = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;

    #[tokio::test]
    async fn garbage_gets_a_parse_error_and_the_stream_goes_on() {
        let (mut w, mut r, mut t) = pair(1024);
        w.write_all(format!("{{not json\n{PING}\n").as_bytes())
            .await
            .unwrap();
        let recv =
            tokio::spawn(
                async move { t.receive().await.map(|m| serde_json::to_value(m).unwrap()) },
            );
        let err = next_reply(&mut r).await;
        assert_eq!(err["error"]["code"], PARSE_ERROR);
        assert_eq!(err["id"], Value::Null);
        let msg = recv
            .await
            .unwrap()
            .expect("the ping after the garbage is delivered");
        assert_eq!(msg["id"], 7);
    }

    #[tokio::test]
    async fn oversized_line_is_refused_without_buffering_and_the_stream_recovers() {
        let (mut w, mut r, mut t) = pair(256);
        let writer = tokio::spawn(async move {
            // 64 KiB of one line: far over the cap, sent in pieces.
            for _ in 0..64 {
                w.write_all(&[b'x'; 1024]).await.unwrap();
            }
            w.write_all(format!("\n{PING}\n").as_bytes()).await.unwrap();
            w
        });
        let recv = tokio::spawn(async move {
            let m = t.receive().await.map(|m| serde_json::to_value(m).unwrap());
            (m, t.line.capacity())
        });
        let err = next_reply(&mut r).await;
        assert_eq!(err["error"]["code"], INVALID_REQUEST);
        assert!(
            err["error"]["message"]
                .as_str()
                .unwrap()
                .contains("256 byte limit")
        );
        let (msg, cap) = recv.await.unwrap();
        assert_eq!(msg.expect("ping delivered")["id"], 7);
        assert!(cap <= 64 * 1024, "line buffer kept {cap} bytes");
        drop(writer.await.unwrap());
    }

    #[tokio::test]
    async fn wrong_shape_with_an_id_is_answered_with_that_id() {
        let (mut w, mut r, mut t) = pair(1024);
        w.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":17}\n")
            .await
            .unwrap();
        w.write_all(b"[1,2]\n").await.unwrap();
        drop(w);
        let recv = tokio::spawn(async move { t.receive().await.is_none() });
        let a = next_reply(&mut r).await;
        assert_eq!(a["error"]["code"], INVALID_REQUEST);
        assert_eq!(a["id"], 3);
        let b = next_reply(&mut r).await;
        assert_eq!(b["error"]["code"], INVALID_REQUEST);
        assert_eq!(b["id"], Value::Null);
        assert!(recv.await.unwrap(), "end of input ends the stream");
    }

    #[tokio::test]
    async fn end_of_input_fires_the_disconnect_hook_once() {
        let (w, _r, t) = pair(1024);
        let fired = Arc::new(AtomicBool::new(false));
        let f = fired.clone();
        let mut t = t.on_disconnect(move || f.store(true, Ordering::SeqCst));
        drop(w);
        assert!(t.receive().await.is_none());
        assert!(fired.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn notifications_before_the_first_request_are_dropped() {
        let (mut w, _r, mut t) = pair(1024);
        w.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .await
            .unwrap();
        w.write_all(format!("{PING}\n").as_bytes()).await.unwrap();
        let msg = serde_json::to_value(t.receive().await.unwrap()).unwrap();
        assert_eq!(msg["method"], "ping");
    }
}
