//! The proxy of a granted run, against a loopback upstream on the host: granted hosts reached
//! (HTTP, CONNECT, SOCKS5), others refused at once with the rule, a granted name that resolves
//! to a loopback address refused, no route around the proxy, no name resolution inside.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use airlock_sandbox::net::{NetAccess, NetDecision, NetGate, PROXY_PORT};
use common::{Fixture, run, stdout};

/// Grants exactly the listed hosts, any port.
#[derive(Debug)]
struct Hosts(Vec<&'static str>);

impl NetGate for Hosts {
    fn decide(&self, host: &str, port: u16) -> NetDecision {
        let allowed = self.0.contains(&host);
        NetDecision {
            allowed,
            rule: if allowed {
                "test_granted"
            } else {
                "test_not_granted"
            }
            .into(),
            reason: format!(
                "{host}:{port} is not in the test's grant; grant it with `--allow-net {host}`."
            ),
        }
    }
}

/// A host-side HTTP upstream on 127.0.0.1 answering every request with `hello from upstream`
/// and the request line it got.
fn upstream() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf);
                let line = head.lines().next().unwrap_or_default().to_string();
                let hosts: Vec<&str> = head
                    .lines()
                    .filter(|l| l.to_ascii_lowercase().starts_with("host:"))
                    .collect();
                let body = format!("hello from upstream: {line} {hosts:?}");
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    port
}

fn granted(
    fx: &Fixture,
    script: &str,
    hosts: Vec<&'static str>,
    loopback: bool,
) -> airlock_sandbox::Outcome {
    let mut spec = fx.spec(script);
    spec.timeout = Duration::from_secs(60);
    let mut access = NetAccess::new(Arc::new(Hosts(hosts)));
    access.loopback_upstream = loopback;
    spec.net = Some(access);
    run(&spec)
}

/// A python probe that sends `request` to the proxy and prints what comes back.
fn raw(request: &str) -> String {
    format!(
        r#"python3 -c '
import socket
s = socket.create_connection(("127.0.0.1", {PROXY_PORT}), timeout=20)
s.sendall({request:?}.encode())
out = b""
while True:
    d = s.recv(65536)
    if not d: break
    out += d
print(out.decode(errors="replace"))
'"#
    )
}

#[test]
fn granted_host_is_reached_over_plain_http() {
    let fx = Fixture::new();
    let port = upstream();
    let out = granted(
        &fx,
        &raw(&format!(
            "GET http://127.0.0.1:{port}/hi HTTP/1.1\r\nHost: other.example\r\n\r\n"
        )),
        vec!["127.0.0.1"],
        true,
    );
    let text = stdout(&out);
    assert!(
        text.contains("hello from upstream: GET /hi HTTP/1.1"),
        "{text}\n{}",
        out.stderr.text_lossy()
    );
    // The Host header names the granted host the request was sent to, never another.
    assert!(
        text.contains(&format!("[\"Host: 127.0.0.1:{port}\"]")),
        "{text}"
    );
    let net = out.net.expect("a granted run reports its network");
    assert_eq!(net.hosts_contacted, [format!("127.0.0.1:{port}")]);
    assert!(net.hosts_refused.is_empty());
}

#[test]
fn granted_host_is_reached_through_connect_and_socks5() {
    let fx = Fixture::new();
    let port = upstream();
    let script = format!(
        r#"python3 -c '
import socket, struct
def readall(s):
    out = b""
    while True:
        d = s.recv(65536)
        if not d: return out.decode()
        out += d
s = socket.create_connection(("127.0.0.1", {PROXY_PORT}), timeout=20)
s.sendall(b"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n")
head = b""
while b"\r\n\r\n" not in head: head += s.recv(1)
print(head.split(b"\r\n")[0].decode())
s.sendall(b"GET /tunnel HTTP/1.1\r\nHost: x\r\n\r\n")
print(readall(s))
t = socket.create_connection(("127.0.0.1", {PROXY_PORT}), timeout=20)
t.sendall(b"\x05\x01\x00")
assert t.recv(2) == b"\x05\x00"
t.sendall(b"\x05\x01\x00\x01" + socket.inet_aton("127.0.0.1") + struct.pack(">H", {port}))
print("socks reply", t.recv(10)[1])
t.sendall(b"GET /socks HTTP/1.1\r\nHost: x\r\n\r\n")
print(readall(t))
'"#
    );
    let out = granted(&fx, &script, vec!["127.0.0.1"], true);
    let text = stdout(&out);
    assert!(
        text.contains("200 Connection established"),
        "{text}\n{}",
        out.stderr.text_lossy()
    );
    assert!(text.contains("GET /tunnel"), "{text}");
    assert!(text.contains("socks reply 0"), "{text}");
    assert!(text.contains("GET /socks"), "{text}");
}

#[test]
fn ungranted_host_is_refused_at_once_with_the_rule() {
    let fx = Fixture::new();
    let port = upstream();
    let started = Instant::now();
    let out = granted(
        &fx,
        &format!(
            "{}; {}",
            raw(&format!(
                "GET http://127.0.0.1:{port}/ HTTP/1.1\r\nHost: x\r\n\r\n"
            )),
            raw("CONNECT not-granted.example:443 HTTP/1.1\r\n\r\n")
        ),
        vec!["granted.example"],
        true,
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "a refusal must not wait for the timeout"
    );
    let text = stdout(&out);
    assert!(text.contains("403 Forbidden"), "{text}");
    assert!(text.contains("X-Airlock-Rule: test_not_granted"), "{text}");
    assert!(text.contains("--allow-net not-granted.example"), "{text}");
    let net = out.net.unwrap();
    assert!(net.hosts_contacted.is_empty(), "{net:?}");
    let refused: Vec<&str> = net.hosts_refused.iter().map(|r| r.host.as_str()).collect();
    assert_eq!(
        refused,
        [
            format!("127.0.0.1:{port}").as_str(),
            "not-granted.example:443"
        ]
    );
    assert!(
        net.hosts_refused
            .iter()
            .all(|r| r.rule == "test_not_granted")
    );
}

#[test]
fn granted_name_resolving_to_loopback_is_refused() {
    let fx = Fixture::new();
    let port = upstream();
    // `localhost` is granted, but it resolves to the host's loopback: without the test-only
    // escape the address deny set refuses it.
    let out = granted(
        &fx,
        &raw(&format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n")),
        vec!["localhost"],
        false,
    );
    let text = stdout(&out);
    assert!(text.contains("403 Forbidden"), "{text}");
    assert!(text.contains("net_address_denied"), "{text}");
    assert!(text.contains("loopback"), "{text}");
    let net = out.net.unwrap();
    assert_eq!(net.hosts_refused[0].rule, "net_address_denied");
    assert!(net.hosts_contacted.is_empty());
    // The metadata address as a literal is refused the same way.
    let out = granted(
        &fx,
        &raw("GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\nHost: x\r\n\r\n"),
        vec!["169.254.169.254"],
        true,
    );
    assert!(
        stdout(&out).contains("the cloud metadata address"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn no_route_around_the_proxy_and_no_names_inside() {
    let fx = Fixture::new();
    let port = upstream();
    let script = format!(
        r#"python3 -c '
import socket, errno
for target in [("1.1.1.1", 443), ("8.8.8.8", 53)]:
    try:
        socket.create_connection(target, timeout=5)
        print("CONNECTED", target)
    except OSError as e:
        print("refused", target, errno.errorcode.get(e.errno, e))
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=5)
    print("CONNECTED host loopback")
except OSError as e:
    print("refused host loopback", errno.errorcode.get(e.errno, e))
try:
    print("RESOLVED", socket.getaddrinfo("example.com", 443))
except OSError as e:
    print("no name", e)
'"#
    );
    let started = Instant::now();
    let out = granted(&fx, &script, vec!["example.com", "127.0.0.1"], true);
    assert!(started.elapsed() < Duration::from_secs(10));
    let text = stdout(&out);
    assert!(!text.contains("CONNECTED"), "{text}");
    assert!(!text.contains("RESOLVED"), "{text}");
    assert!(text.contains("ENETUNREACH"), "{text}");
    assert!(text.contains("refused host loopback"), "{text}");
    assert!(text.contains("no name"), "{text}");
}

#[test]
fn proxy_variables_only_in_granted_runs() {
    let fx = Fixture::new();
    let out = granted(&fx, "env | sort", vec!["example.com"], false);
    let text = stdout(&out);
    for v in [
        format!("HTTPS_PROXY=http://127.0.0.1:{PROXY_PORT}"),
        format!("https_proxy=http://127.0.0.1:{PROXY_PORT}"),
        format!("ALL_PROXY=socks5h://127.0.0.1:{PROXY_PORT}"),
        format!("CARGO_HTTP_PROXY=http://127.0.0.1:{PROXY_PORT}"),
        format!("npm_config_https_proxy=http://127.0.0.1:{PROXY_PORT}"),
        "GIT_CONFIG_KEY_0=http.proxy".to_string(),
    ] {
        assert!(text.contains(&v), "{v} missing in\n{text}");
    }
    let out = run(&fx.spec("env"));
    assert!(
        !stdout(&out).to_ascii_lowercase().contains("proxy"),
        "{}",
        stdout(&out)
    );
    assert!(out.net.is_none());
}

#[test]
fn connections_of_a_run_are_capped() {
    let fx = Fixture::new();
    // 300 idle connections: the proxy serves 256 at once and closes the 44 others at once.
    let script = format!(
        r#"python3 -c '
import socket, select
socks = [socket.create_connection(("127.0.0.1", {PROXY_PORT}), timeout=10) for _ in range(300)]
def closed(s, wait):
    r, _, _ = select.select([s], [], [], wait)
    return bool(r) and s.recv(1) == b""
late = sum(closed(s, 0.3) for s in socks[256:])
early = sum(closed(s, 0.01) for s in socks[:256])
print("closed", late, early)
'"#
    );
    let out = granted(&fx, &script, vec!["example.com"], false);
    let text = stdout(&out);
    assert_eq!(text.trim(), "closed 44 0", "{}", out.stderr.text_lossy());
}
