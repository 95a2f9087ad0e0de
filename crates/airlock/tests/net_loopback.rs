//! Loopback networking in every sandboxed run, through the real `airlock` binary: a real
//! Python `http.server` (and Node's `http`, when node is installed) served and fetched inside
//! `airlock exec`, and a `verify` of a pytest project whose test starts a server on
//! 127.0.0.1:0 and fetches from it, both pass in the full tier; a connect to an address
//! outside the run fails at once, without a packet leaving. The Landlock tier (no network
//! namespace) keeps refusing inet sockets, and its verdict says so.
//!
//! Needs pytest for the host's `python3` (`bash scripts/ci-deps-verify.sh`).

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_airlock");

/// A server on 127.0.0.1:0 in a thread, fetched with urllib; then a connect to an address no
/// run can reach, timed.
const SERVE_AND_FETCH: &str = r#"
import errno, http.server, socket, threading, time, urllib.request
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello from loopback"
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
threading.Thread(target=srv.serve_forever, daemon=True).start()
print("GOT", urllib.request.urlopen("http://127.0.0.1:%d/" % srv.server_address[1], timeout=5).read().decode())
t = time.monotonic()
try:
    socket.create_connection(("10.255.255.1", 80), timeout=10); print("REACHED")
except OSError as e:
    print("OUTSIDE", errno.errorcode.get(e.errno, e.errno), "%.3f" % (time.monotonic() - t))
"#;

/// The pytest test of the verified project: its own server, fetched.
const TEST_SERVER: &str = r#"import http.server, threading, urllib.request


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"pong"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_local_server_answers():
    srv = http.server.HTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = "http://127.0.0.1:%d/" % srv.server_address[1]
        assert urllib.request.urlopen(url, timeout=5).read() == b"pong"
    finally:
        srv.shutdown()
"#;

struct Fx {
    _t: tempfile::TempDir,
    ws: PathBuf,
    config: PathBuf,
}

impl Fx {
    fn new() -> Fx {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        let ws = root.join("ws");
        let config = root.join("config");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&config).unwrap();
        Fx { _t: t, ws, config }
    }

    fn write(&self, rel: &str, text: &str) {
        std::fs::write(self.ws.join(rel), text).unwrap();
    }

    /// `airlock --json ARGS` under the sandbox tier `tier` (none: the strongest there is).
    fn json(&self, tier: Option<&str>, args: &[&str]) -> Value {
        let mut c = Command::new(BIN);
        c.args(["--workspace", self.ws.to_str().unwrap(), "--mode", "build"])
            .arg("--json")
            .args(args)
            .env("XDG_CONFIG_HOME", &self.config)
            .env("XDG_STATE_HOME", self.config.join("state"))
            .stdin(Stdio::null());
        if let Some(t) = tier {
            c.env("AIRLOCK_SANDBOX", t);
        }
        let o: Output = c.output().unwrap();
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {}\n{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        })
    }
}

/// Whether the full tier runs here (an unprivileged user without user namespaces gets the
/// Landlock tier at best; the full-tier tests then have nothing to check).
fn full_tier(fx: &Fx) -> bool {
    let v = fx.json(None, &["exec", "--", "true"]);
    let tier = v["tier"].as_str().unwrap_or("full").to_string();
    if tier != "full" {
        eprintln!("skipped: this host runs the {tier} tier, not the full one: {v}");
    }
    tier == "full"
}

/// Whether the `python3` on `PATH` has pytest (the unprivileged CI user's system Python may
/// not): the verify tests need it.
fn has_pytest() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import pytest"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: the python3 on PATH has no pytest (bash scripts/ci-deps-verify.sh)");
    }
    ok
}

fn stdout(v: &Value) -> &str {
    v["stdout"].as_str().unwrap_or_default()
}

fn environment(v: &Value) -> String {
    v["environment"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[test]
fn exec_serves_and_fetches_on_loopback_and_reaches_nothing_else() {
    let fx = Fx::new();
    if !full_tier(&fx) {
        return;
    }
    fx.write("serve.py", SERVE_AND_FETCH);
    let v = fx.json(
        None,
        &["exec", "--timeout", "60", "--", "python3", "serve.py"],
    );
    assert_eq!(v["exit_code"], 0, "{v}");
    let out = stdout(&v);
    assert!(out.contains("GOT hello from loopback"), "{v}");
    assert!(!out.contains("REACHED"), "{v}");
    let outside = out
        .lines()
        .find(|l| l.starts_with("OUTSIDE"))
        .unwrap_or_else(|| panic!("{v}"));
    assert!(outside.contains("ENETUNREACH"), "{outside}");
    let secs: f64 = outside.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(secs < 1.0, "the refused connect waited {secs} s");
}

#[test]
fn exec_node_http_server_on_loopback() {
    if Command::new("node").arg("--version").output().is_err() {
        eprintln!("skipped: no node on PATH");
        return;
    }
    let fx = Fx::new();
    if !full_tier(&fx) {
        return;
    }
    fx.write(
        "serve.js",
        "const http = require('http');\n\
         const srv = http.createServer((req, res) => res.end('node says hi'));\n\
         srv.listen(0, '127.0.0.1', () => {\n\
         \x20 http.get(`http://127.0.0.1:${srv.address().port}/`, (res) => {\n\
         \x20   let body = '';\n\
         \x20   res.on('data', (d) => (body += d));\n\
         \x20   res.on('end', () => { console.log('GOT ' + body); srv.close(); });\n\
         \x20 });\n\
         });\n",
    );
    let v = fx.json(None, &["exec", "--timeout", "60", "--", "node", "serve.js"]);
    assert_eq!(v["exit_code"], 0, "{v}");
    assert!(stdout(&v).contains("GOT node says hi"), "{v}");
}

#[test]
fn verify_passes_a_pytest_suite_that_starts_a_local_server() {
    let fx = Fx::new();
    if !full_tier(&fx) || !has_pytest() {
        return;
    }
    fx.write("pytest.ini", "[pytest]\n");
    fx.write("test_server.py", TEST_SERVER);
    let started = Instant::now();
    let v = fx.json(None, &["verify", "--timeout", "120"]);
    assert_eq!(v["verdict"], "passed", "{v}");
    assert_eq!(v["tier"], "full", "{v}");
    let env = environment(&v);
    assert!(
        env.contains("no network beyond the run's own loopback"),
        "{env}"
    );
    assert!(started.elapsed() < Duration::from_secs(120));
}

/// The Landlock tier has no network namespace: an inet socket would be the host's, so it stays
/// refused, and the verdict's environment says so instead of promising a loopback.
#[test]
fn landlock_tier_refuses_inet_and_the_verdict_says_so() {
    let fx = Fx::new();
    let probe = fx.json(Some("landlock"), &["exec", "--", "true"]);
    if probe["tier"] != "landlock" {
        eprintln!("skipped: no Landlock tier here: {probe}");
        return;
    }
    fx.write("serve.py", SERVE_AND_FETCH);
    let v = fx.json(
        Some("landlock"),
        &["exec", "--timeout", "60", "--", "python3", "serve.py"],
    );
    assert_ne!(v["exit_code"], 0, "{v}");
    assert!(!stdout(&v).contains("GOT"), "{v}");
    assert!(
        v["stderr"]
            .as_str()
            .unwrap_or_default()
            .contains("PermissionError"),
        "{v}"
    );
    if !has_pytest() {
        return;
    }
    fx.write("pytest.ini", "[pytest]\n");
    fx.write("test_server.py", TEST_SERVER);
    std::fs::remove_file(fx.ws.join("serve.py")).unwrap();
    let v = fx.json(Some("landlock"), &["verify", "--timeout", "120"]);
    assert_eq!(v["tier"], "landlock", "{v}");
    assert_ne!(v["verdict"], "passed", "{v}");
    let env = environment(&v);
    assert!(
        env.contains("no network and no loopback") && env.contains("refuses inet sockets"),
        "{env}"
    );
}
