//! `airlock mcp` under hostile or broken input, spoken to as raw JSON-RPC lines: malformed
//! JSON, unknown methods, oversized messages, and a client that disconnects mid-call. The happy
//! path is driven by the official Python SDK instead (`mcp_python.rs`).

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_airlock");
const WAIT: Duration = Duration::from_secs(20);

/// A running `airlock mcp` with its stdout read on a thread.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Server {
    fn start(workspace: &Path, extra: &[&str]) -> Server {
        let mut child = Command::new(BIN)
            .arg("--workspace")
            .arg(workspace)
            .args(extra)
            .arg("mcp")
            .env("AIRLOCK_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn airlock mcp");
        let stdout = child.stdout.take().expect("stdout");
        let stdin = child.stdin.take();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Server {
            child,
            stdin,
            lines,
        }
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write to the server");
        stdin.flush().expect("flush");
    }

    fn send(&mut self, v: Value) {
        let mut line = v.to_string().into_bytes();
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// The next message, as JSON.
    fn next(&self) -> Value {
        match self.lines.recv_timeout(WAIT) {
            Ok(line) => serde_json::from_str(&line).expect("server output is JSON"),
            Err(e) => panic!("no message from the server within {WAIT:?}: {e}"),
        }
    }

    /// The response with this id (skipping notifications and other replies).
    fn response(&self, id: i64) -> Value {
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            let m = self.next();
            if m["id"] == json!(id) {
                return m;
            }
        }
        panic!("no response with id {id}");
    }

    fn initialize(&mut self) {
        self.send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "robustness-test", "version": "0"}}}),
        );
        let r = self.response(0);
        assert_eq!(r["result"]["serverInfo"]["name"], "airlock", "{r}");
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    fn ping(&mut self, id: i64) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "ping"}));
        let r = self.response(id);
        assert_eq!(r["result"], json!({}), "ping answered: {r}");
    }

    /// Close stdin and wait for the process; its exit status and how long it took.
    fn hang_up(mut self) -> (std::process::ExitStatus, Duration) {
        drop(self.stdin.take());
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return (status, start.elapsed());
            }
            if start.elapsed() > Duration::from_secs(60) {
                let _ = self.child.kill();
                panic!("the server did not exit within 60 s of the client hanging up");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn high_water_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("read /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("README.md"), "hello\n").expect("seed file");
    dir
}

#[test]
fn malformed_json_gets_a_parse_error_and_the_session_goes_on() {
    let ws = workspace();
    let mut s = Server::start(ws.path(), &[]);
    s.initialize();
    s.send_raw(b"{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\": \n");
    let e = s.next();
    assert_eq!(e["error"]["code"], -32700, "{e}");
    assert_eq!(e["id"], Value::Null);
    s.send_raw(b"\xff\xfe not utf-8\n");
    assert_eq!(s.next()["error"]["code"], -32700);
    // Well-formed JSON that is no JSON-RPC message: Invalid Request, with the id when known.
    s.send(json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": "nope"}));
    let e = s.response(6);
    assert!(
        e["error"]["code"] == -32600 || e["error"]["code"] == -32602,
        "{e}"
    );
    s.send(json!([1, 2, 3]));
    assert_eq!(s.next()["error"]["code"], -32600);
    s.ping(7);
    let (status, _) = s.hang_up();
    assert!(status.success(), "clean exit, got {status}");
}

#[test]
fn unknown_methods_and_tools_are_errors_not_crashes() {
    let ws = workspace();
    let mut s = Server::start(ws.path(), &[]);
    s.initialize();
    s.send(json!({"jsonrpc": "2.0", "id": 1, "method": "airlock/set_mode", "params": {"mode": "build"}}));
    let e = s.response(1);
    assert_eq!(e["error"]["code"], -32601, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("airlock/set_mode")
    );
    // Unknown notifications get no answer at all.
    s.send(json!({"jsonrpc": "2.0", "method": "notifications/whatever"}));
    s.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                  "params": {"name": "no_such_tool", "arguments": {}}}));
    let e = s.response(2);
    assert_eq!(e["error"]["code"], -32602, "{e}");
    s.ping(3);
    let (status, _) = s.hang_up();
    assert!(status.success());
}

#[test]
fn oversized_messages_are_refused_without_unbounded_buffering() {
    let ws = workspace();
    let mut s = Server::start(ws.path(), &[]);
    s.initialize();
    let base_kib = s.high_water_kib();
    // 80 MiB on one line: five times the 16 MiB cap, streamed in 1 MiB pieces.
    let chunk = vec![b'x'; 1 << 20];
    s.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\",\"params\":{\"pad\":\"");
    for _ in 0..80 {
        s.send_raw(&chunk);
    }
    s.send_raw(b"\"}}\n");
    let e = s.next();
    assert_eq!(e["error"]["code"], -32600, "{e}");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("limit"),
        "{e}"
    );
    s.ping(10);
    let grown_mib = s.high_water_kib().saturating_sub(base_kib) / 1024;
    assert!(
        grown_mib < 48,
        "peak memory grew by {grown_mib} MiB while an 80 MiB line streamed in"
    );
    let (status, _) = s.hang_up();
    assert!(status.success());
}

#[test]
fn hanging_up_before_initialize_exits_cleanly() {
    let ws = workspace();
    let mut s = Server::start(ws.path(), &[]);
    s.send_raw(b"garbage\n");
    assert_eq!(s.next()["error"]["code"], -32700);
    let (status, took) = s.hang_up();
    assert!(status.success(), "{status}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

/// Processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        if let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(marker) {
                found.push(pid);
            }
        }
    }
    found
}

/// Wait until a process with `marker` in its command line runs; panics if the call ends first.
fn wait_for_process(s: &Server, marker: &str) {
    let deadline = Instant::now() + WAIT;
    while processes_with(marker).is_empty() {
        if let Ok(line) = s.lines.try_recv() {
            panic!("the call ended instead of running: {line}");
        }
        assert!(
            Instant::now() < deadline,
            "the bash call never started its sleep"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Wait until no process with `marker` in its command line is left.
fn wait_gone(marker: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_with(marker).is_empty() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_cancelled_call_kills_its_sandbox_and_the_session_goes_on() {
    let ws = workspace();
    let marker = "27.1828";
    let mut s = Server::start(ws.path(), &["--mode", "build"]);
    s.initialize();
    s.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "bash",
        "arguments": {"command": format!("sleep {marker} && echo done > done.txt")}}}),
    );
    wait_for_process(&s, marker);
    s.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": 1, "reason": "the user pressed Esc"}}),
    );
    wait_gone(marker, "the sandboxed sleep outlived the cancelled call");
    s.ping(2);
    s.send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "read_file", "arguments": {"path": "done.txt"}}}),
    );
    let r = s.response(3);
    assert_eq!(
        r["result"]["isError"], true,
        "done.txt was never staged: {r}"
    );
    assert!(!ws.path().join("done.txt").exists());
    let (status, _) = s.hang_up();
    assert!(status.success());
}

#[test]
fn a_client_hanging_up_mid_call_cancels_the_call_and_the_server_exits() {
    let ws = workspace();
    let marker = "31.4159";
    let mut s = Server::start(ws.path(), &["--mode", "build"]);
    s.initialize();
    s.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "bash",
        "arguments": {"command": format!("sleep {marker} && echo done > done.txt")}}}),
    );
    // The call is running once its sleep shows up.
    wait_for_process(&s, marker);
    let (status, took) = s.hang_up();
    assert!(
        status.success(),
        "clean exit after the hang-up, got {status}"
    );
    assert!(took < Duration::from_secs(15), "exit took {took:?}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_with(marker).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the sandboxed sleep outlived the cancelled call"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !ws.path().join("done.txt").exists(),
        "nothing reaches the disk"
    );
    // Nothing half-staged either: the session has no done.txt.
    let out = Command::new(BIN)
        .arg("--workspace")
        .arg(ws.path())
        .args(["--json", "status"])
        .output()
        .expect("airlock status");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains("done.txt"),
        "status after the cancelled call: {text}"
    );
}
