//! Approvals without elicitation, with two processes: an `airlock mcp` server whose client
//! declared no elicitation holds a gated call in the approval queue; `airlock approvals` in
//! another process lists it and answers it (once, deny), and an unanswered question ends, when
//! the bounded wait is over, as a denial saying the wait for the operator timed out.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Server {
    fn start(ws: &Path, queue_secs: &str) -> Server {
        Server::start_with_path(ws, queue_secs, std::env::var_os("PATH").unwrap_or_default())
    }

    fn start_with_path(ws: &Path, queue_secs: &str, path: std::ffi::OsString) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_airlock"))
            .args(["--mode", "build", "--permission", "ask", "--workspace"])
            .arg(ws)
            .arg("mcp")
            .env("AIRLOCK_APPROVAL_QUEUE_SECS", queue_secs)
            .env("AIRLOCK_LOG", "error")
            .env("PATH", path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut s = Server {
            child,
            stdin,
            stdout,
        };
        // A client without elicitation.
        s.send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "no-elicitation", "version": "0"}}}),
        );
        s.response(1);
        s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s
    }

    fn send(&mut self, v: Value) {
        writeln!(self.stdin, "{v}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn response(&mut self, id: u64) -> Value {
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "server closed"
            );
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }

    fn call_bash(&mut self, id: u64, command: &str) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "bash", "arguments": {"command": command}}}));
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn approvals(ws: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .arg("--workspace")
        .arg(ws)
        .arg("approvals")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Wait until exactly one question is queued; its JSON.
fn one_pending(ws: &Path) -> Value {
    let start = Instant::now();
    loop {
        let out = Command::new(env!("CARGO_BIN_EXE_airlock"))
            .arg("--workspace")
            .arg(ws)
            .args(["--json", "approvals"])
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        if let Some([one]) = v.as_array().map(Vec::as_slice) {
            return one.clone();
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "nothing queued: {v}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn text(v: &Value) -> String {
    v["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[test]
fn a_queued_call_runs_once_approved_from_another_process_and_not_when_denied() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().canonicalize().unwrap();
    let mut server = Server::start(&ws, "60");

    server.call_bash(2, "echo approved-run");
    let q = one_pending(&ws);
    assert_eq!(q["tool"], "bash", "{q}");
    assert!(
        q["summary"].as_str().unwrap().contains("approved-run"),
        "{q}"
    );
    let id = q["id"].as_str().unwrap().to_string();
    let (code, out) = approvals(&ws, &[]);
    assert_eq!(code, 0);
    assert!(
        out.contains(&id) && out.contains("approvals once|session|deny"),
        "{out}"
    );
    // An answer that is not one of the three, and an unknown ID, change nothing.
    assert_eq!(approvals(&ws, &["always", &id]).0, 2);
    assert_eq!(approvals(&ws, &["once", "no-such-id"]).0, 1);
    assert_eq!(approvals(&ws, &["once", "../../x"]).0, 1);
    let (code, out) = approvals(&ws, &["once", &id]);
    assert_eq!(code, 0, "{out}");
    let r = server.response(2);
    assert_ne!(r["result"]["isError"], true, "{r}");
    assert!(text(&r).contains("approved-run"), "{r}");
    // Answered and done: the queue is empty again.
    assert_eq!(approvals(&ws, &["--json"]).1.trim(), "[]");

    server.call_bash(3, "echo refused-run");
    let id = one_pending(&ws)["id"].as_str().unwrap().to_string();
    assert_eq!(approvals(&ws, &["deny", &id]).0, 0);
    let r = server.response(3);
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(text(&r).contains("the operator denied it"), "{r}");
    assert!(!text(&r).contains("refused-run\n"), "{r}");
}

#[test]
fn an_unanswered_question_times_out_as_a_denial_that_says_so() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().canonicalize().unwrap();
    let mut server = Server::start(&ws, "1");
    let start = Instant::now();
    server.call_bash(2, "echo never");
    let r = server.response(2);
    assert!(start.elapsed() >= Duration::from_secs(1));
    assert_eq!(r["result"]["isError"], true, "{r}");
    let t = text(&r);
    assert!(
        t.contains("waiting for the operator timed out after 1 s"),
        "{t}"
    );
    assert!(t.contains("elicitation"), "{t}");
    assert!(t.contains("\"stage\""), "{t}");
    assert_eq!(approvals(&ws, &["--json"]).1.trim(), "[]");
}

#[test]
fn a_queued_question_is_announced_by_a_desktop_notification_where_one_can_be_shown() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("ws");
    let bin = t.path().join("bin");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    let ws = ws.canonicalize().unwrap();
    // A stand-in `notify-send` that records what it was asked to show.
    let shown = t.path().join("shown");
    let script = bin.join("notify-send");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" >> '{}'\n",
            shown.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut path = std::ffi::OsString::from(&bin);
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let mut server = Server::start_with_path(&ws, "60", path);
    server.call_bash(2, "echo notified-run");
    let id = one_pending(&ws)["id"].as_str().unwrap().to_string();
    let start = Instant::now();
    while !std::fs::read_to_string(&shown).is_ok_and(|s| s.contains(&id)) {
        assert!(start.elapsed() < Duration::from_secs(10), "no notification");
        std::thread::sleep(Duration::from_millis(50));
    }
    let text = std::fs::read_to_string(&shown).unwrap();
    assert!(
        text.contains("airlock approvals once|session|deny"),
        "{text}"
    );
    assert!(text.contains("notified-run"), "{text}");
    assert_eq!(approvals(&ws, &["deny", &id]).0, 0);
    assert_eq!(server.response(2)["result"]["isError"], true);
}
