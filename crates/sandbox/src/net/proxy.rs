//! The proxy of one granted run: accepts on the listener made inside the run's namespace,
//! decides, resolves, checks the address and connects from the host's namespace.

use std::collections::BTreeSet;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{NetAccess, NetReport, Refused, addr};

/// Largest request head (request line and headers) the proxy reads.
const MAX_HEAD: usize = 64 << 10;
/// How long a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long an outgoing connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Most connections of one run the proxy serves at once (each holds host threads, outside the
/// run's own process ceiling); beyond it a new connection is closed at once.
pub(crate) const MAX_CONNECTIONS: usize = 256;

#[derive(Default)]
struct Log {
    contacted: BTreeSet<String>,
    refused: Vec<Refused>,
}

struct Shared {
    access: NetAccess,
    log: Mutex<Log>,
    active: AtomicUsize,
}

impl Shared {
    fn refuse(&self, host: &str, rule: &str, reason: &str) {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        if !log.refused.iter().any(|r| r.host == host && r.rule == rule) {
            log.refused.push(Refused {
                host: host.to_string(),
                rule: rule.to_string(),
                reason: reason.to_string(),
            });
        }
    }

    fn contacted(&self, host: &str) {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        log.contacted.insert(host.to_string());
    }
}

/// A connected pair of unix stream sockets (close-on-exec): the caller's end, PID 1's end.
pub(crate) fn socket_pair() -> Result<(OwnedFd, OwnedFd), crate::SandboxError> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType, socketpair};
    socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| crate::SandboxError::Sys {
        action: "making the proxy's socket pair",
        source: e.into(),
    })
}

/// Receives the listening socket PID 1 made in the run's namespace.
pub(crate) fn receive_listener(sock: &OwnedFd) -> io::Result<TcpListener> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, recvmsg};
    use std::mem::MaybeUninit;
    let mut byte = [0u8; 1];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let msg = recvmsg(
        sock,
        &mut [io::IoSliceMut::new(&mut byte)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let fd = control.drain().find_map(|m| match m {
        RecvAncillaryMessage::ScmRights(mut r) => r.next(),
        _ => None,
    });
    match (msg.bytes, fd) {
        (1, Some(fd)) => Ok(TcpListener::from(fd)),
        _ => Err(io::ErrorKind::UnexpectedEof.into()),
    }
}

/// A running proxy; [`Proxy::finish`] stops it and reports.
pub(crate) struct Proxy {
    stop: Arc<AtomicBool>,
    /// Dropped to wake the accept loop at once when the run is over.
    wake: Option<std::os::unix::net::UnixStream>,
    accept: Option<JoinHandle<()>>,
    shared: Arc<Shared>,
}

impl Proxy {
    /// Serves `listener` (a socket of any namespace) for `access` until [`Proxy::finish`].
    pub(crate) fn start(listener: TcpListener, access: NetAccess) -> io::Result<Proxy> {
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared {
            access,
            log: Mutex::new(Log::default()),
            active: AtomicUsize::new(0),
        });
        let (wake, woken) = std::os::unix::net::UnixStream::pair()?;
        let (s, sh) = (stop.clone(), shared.clone());
        let accept = std::thread::Builder::new()
            .name("airlock-proxy".into())
            .spawn(move || accept_loop(&listener, &woken, &s, &sh))?;
        Ok(Proxy {
            stop,
            wake: Some(wake),
            accept: Some(accept),
            shared,
        })
    }

    /// Stops accepting, gives connections in flight a moment to end, and reports.
    pub(crate) fn finish(mut self) -> NetReport {
        self.stop.store(true, Ordering::SeqCst);
        drop(self.wake.take());
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        while self.shared.active.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let log = self.shared.log.lock().unwrap_or_else(|p| p.into_inner());
        NetReport {
            hosts_contacted: log.contacted.iter().cloned().collect(),
            hosts_refused: log.refused.clone(),
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        drop(self.wake.take());
    }
}

fn accept_loop(
    listener: &TcpListener,
    woken: &std::os::unix::net::UnixStream,
    stop: &AtomicBool,
    shared: &Arc<Shared>,
) {
    use rustix::event::{PollFd, PollFlags, poll};
    while !stop.load(Ordering::SeqCst) {
        let mut fds = [
            PollFd::new(listener, PollFlags::IN),
            PollFd::new(woken, PollFlags::IN),
        ];
        let timeout = rustix::event::Timespec {
            tv_sec: 1,
            tv_nsec: 0,
        };
        if poll(&mut fds, Some(&timeout)).is_err() {
            continue;
        }
        while let Ok((client, _)) = listener.accept() {
            if shared.active.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
                drop(client);
                continue;
            }
            shared.active.fetch_add(1, Ordering::SeqCst);
            let sh = shared.clone();
            let spawned = std::thread::Builder::new()
                .name("airlock-proxy-conn".into())
                .spawn(move || {
                    let _ = handle(client, &sh);
                    sh.active.fetch_sub(1, Ordering::SeqCst);
                });
            if spawned.is_err() {
                shared.active.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
}

/// What a client asked for.
struct Target {
    host: String,
    port: u16,
}

impl Target {
    fn label(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Why a request was not carried out: (rule, sentence, HTTP status, SOCKS5 reply).
struct Refusal {
    rule: String,
    reason: String,
    status: u16,
    socks: u8,
}

fn handle(client: TcpStream, shared: &Shared) -> io::Result<()> {
    client.set_nonblocking(false)?;
    client.set_read_timeout(Some(HEAD_TIMEOUT))?;
    let mut first = [0u8; 1];
    if client.peek(&mut first)? == 0 {
        return Ok(());
    }
    if first[0] == 5 {
        return socks5(client, shared);
    }
    http(client, shared)
}

/// Decides, resolves and connects: the upstream, or why not.
fn open(t: &Target, shared: &Shared) -> Result<TcpStream, Refusal> {
    let decision = shared.access.gate.decide(&t.host, t.port);
    if !decision.allowed {
        return Err(Refusal {
            rule: decision.rule,
            reason: decision.reason,
            status: 403,
            socks: 2,
        });
    }
    let addrs: Vec<SocketAddr> = match t.host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, t.port)],
        Err(_) => match (t.host.as_str(), t.port).to_socket_addrs() {
            Ok(a) => a.collect(),
            Err(e) => {
                return Err(Refusal {
                    rule: "net_unresolved".into(),
                    reason: format!("{} does not resolve: {e}.", t.host),
                    status: 502,
                    socks: 4,
                });
            }
        },
    };
    // Every address must be allowed: a name that also resolves into the deny set is refused
    // whole, so which address a retry picks cannot matter.
    for a in &addrs {
        if let Some(what) = addr::denied(a.ip(), shared.access.loopback_upstream) {
            return Err(Refusal {
                rule: addr::RULE_ADDRESS.into(),
                reason: format!(
                    "The connection to {} was refused by policy: it resolves to {}, {what}; airlock never connects to loopback, link-local, private, cloud-metadata or this host's own addresses.",
                    t.label(),
                    a.ip()
                ),
                status: 403,
                socks: 2,
            });
        }
    }
    let mut last = None;
    for a in &addrs {
        match TcpStream::connect_timeout(a, CONNECT_TIMEOUT) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(Refusal {
        rule: "net_unreachable".into(),
        reason: format!(
            "{} could not be reached: {}.",
            t.label(),
            last.map_or_else(|| "no address".to_string(), |e| e.to_string())
        ),
        status: 502,
        socks: 5,
    })
}

fn http(mut client: TcpStream, shared: &Shared) -> io::Result<()> {
    let mut buf = Vec::with_capacity(4096);
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() >= MAX_HEAD {
            return reply(&mut client, 431, "The request head is too large.", None);
        }
        let mut chunk = [0u8; 4096];
        let n = client.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let rest = buf[head_end..].to_vec();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (method, target, version) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or("HTTP/1.1"),
    );
    let connect = method.eq_ignore_ascii_case("CONNECT");
    let parsed = if connect {
        authority(target, None).map(|t| (t, String::new()))
    } else {
        absolute_http(target)
    };
    let Some((t, path)) = parsed else {
        return reply(
            &mut client,
            400,
            "airlock's proxy takes CONNECT host:port, or a plain-HTTP request with an absolute http:// URI.",
            None,
        );
    };
    let mut upstream = match open(&t, shared) {
        Ok(u) => u,
        Err(r) => {
            shared.refuse(&t.label(), &r.rule, &r.reason);
            let body = format!("{}\nrule: {}\n", r.reason, r.rule);
            return reply(&mut client, r.status, &body, Some(&r.rule));
        }
    };
    shared.contacted(&t.label());
    client.set_read_timeout(None)?;
    if connect {
        client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")?;
    } else {
        let mut out = format!("{method} {path} {version}\r\n");
        for h in lines.filter(|l| !l.is_empty()) {
            let name = h.split(':').next().unwrap_or_default().trim();
            if name.eq_ignore_ascii_case("proxy-connection")
                || name.eq_ignore_ascii_case("proxy-authorization")
                || name.eq_ignore_ascii_case("connection")
                || name.eq_ignore_ascii_case("keep-alive")
                || name.eq_ignore_ascii_case("host")
            {
                continue;
            }
            out.push_str(h);
            out.push_str("\r\n");
        }
        // The host that was granted and connected to is the one the request names: a `Host`
        // header naming another virtual host of the same server is replaced.
        let default_port = if t.port == 80 {
            String::new()
        } else {
            format!(":{}", t.port)
        };
        let host = if t.host.contains(':') {
            format!("[{}]", t.host)
        } else {
            t.host.clone()
        };
        out.push_str(&format!("Host: {host}{default_port}\r\n"));
        // One request per upstream connection: a next request on the client's connection
        // can never reach another host through this one.
        out.push_str("Connection: close\r\n\r\n");
        upstream.write_all(out.as_bytes())?;
    }
    upstream.write_all(&rest)?;
    relay(client, upstream)
}

fn socks5(mut client: TcpStream, shared: &Shared) -> io::Result<()> {
    let mut hello = [0u8; 2];
    client.read_exact(&mut hello)?;
    let mut methods = vec![0u8; usize::from(hello[1])];
    client.read_exact(&mut methods)?;
    if !methods.contains(&0) {
        return client.write_all(&[5, 0xff]);
    }
    client.write_all(&[5, 0])?;
    let mut req = [0u8; 4];
    client.read_exact(&mut req)?;
    let host = match req[3] {
        1 => {
            let mut a = [0u8; 4];
            client.read_exact(&mut a)?;
            std::net::Ipv4Addr::from(a).to_string()
        }
        3 => {
            let mut len = [0u8; 1];
            client.read_exact(&mut len)?;
            let mut name = vec![0u8; usize::from(len[0])];
            client.read_exact(&mut name)?;
            String::from_utf8_lossy(&name).into_owned()
        }
        4 => {
            let mut a = [0u8; 16];
            client.read_exact(&mut a)?;
            std::net::Ipv6Addr::from(a).to_string()
        }
        _ => return client.write_all(&[5, 8, 0, 1, 0, 0, 0, 0, 0, 0]),
    };
    let mut port = [0u8; 2];
    client.read_exact(&mut port)?;
    if req[1] != 1 {
        return client.write_all(&[5, 7, 0, 1, 0, 0, 0, 0, 0, 0]);
    }
    let t = Target {
        host,
        port: u16::from_be_bytes(port),
    };
    match open(&t, shared) {
        Ok(upstream) => {
            shared.contacted(&t.label());
            client.set_read_timeout(None)?;
            client.write_all(&[5, 0, 0, 1, 0, 0, 0, 0, 0, 0])?;
            relay(client, upstream)
        }
        Err(r) => {
            shared.refuse(&t.label(), &r.rule, &r.reason);
            client.write_all(&[5, r.socks, 0, 1, 0, 0, 0, 0, 0, 0])
        }
    }
}

/// Copies `from` to `to` in large chunks until end of file or an error.
fn pump(from: &mut TcpStream, to: &mut TcpStream) {
    let mut buf = vec![0u8; 256 << 10];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
}

/// Copies both ways until both sides are done. Small writes go out at once (no Nagle delay on
/// either leg: a TLS handshake through the proxy is a series of small writes).
fn relay(client: TcpStream, upstream: TcpStream) -> io::Result<()> {
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (mut c_r, mut u_w) = (client.try_clone()?, upstream.try_clone()?);
    let up = std::thread::Builder::new()
        .name("airlock-proxy-up".into())
        .spawn(move || {
            pump(&mut c_r, &mut u_w);
            let _ = u_w.shutdown(Shutdown::Write);
        })?;
    let (mut u_r, mut c_w) = (upstream, client);
    pump(&mut u_r, &mut c_w);
    let _ = c_w.shutdown(Shutdown::Write);
    // The client is gone or done: make the other direction end too.
    let _ = u_r.shutdown(Shutdown::Both);
    let _ = up.join();
    Ok(())
}

fn reply(client: &mut TcpStream, status: u16, body: &str, rule: Option<&str>) -> io::Result<()> {
    let text = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        431 => "Request Header Fields Too Large",
        _ => "Bad Gateway",
    };
    let mut head = format!(
        "HTTP/1.1 {status} {text}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len() + 8
    );
    if let Some(r) = rule {
        head.push_str(&format!("X-Airlock-Rule: {r}\r\n"));
    }
    head.push_str("\r\n");
    client.write_all(head.as_bytes())?;
    client.write_all(b"airlock ")?;
    client.write_all(body.as_bytes())?;
    client.flush()
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// `host:port` (or `[v6]:port`), the port defaulting to `default`.
fn authority(s: &str, default: Option<u16>) -> Option<Target> {
    let s = s.rsplit('@').next()?;
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, tail) = rest.split_once(']')?;
        (h, tail.strip_prefix(':'))
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    let port = match port {
        Some(p) => p.parse().ok()?,
        None => default?,
    };
    (!host.is_empty()).then(|| Target {
        host: host.to_string(),
        port,
    })
}

/// `http://authority/path` → the target and the origin-form path.
fn absolute_http(uri: &str) -> Option<(Target, String)> {
    let (scheme, rest) = uri.split_once("://")?;
    if !scheme.eq_ignore_ascii_case("http") {
        return None;
    }
    let (auth, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_string()
    };
    Some((authority(auth, Some(80))?, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        let t = authority("example.com:443", None).unwrap();
        assert_eq!((t.host.as_str(), t.port), ("example.com", 443));
        assert!(authority("example.com", None).is_none());
        let t = authority("[::1]:8080", None).unwrap();
        assert_eq!(t.label(), "[::1]:8080");
        let (t, p) = absolute_http("http://x.example/a/b?c").unwrap();
        assert_eq!((t.label().as_str(), p.as_str()), ("x.example:80", "/a/b?c"));
        let (_, p) = absolute_http("http://x.example").unwrap();
        assert_eq!(p, "/");
        assert!(absolute_http("https://x.example/").is_none());
        assert!(absolute_http("/relative").is_none());
    }
}
