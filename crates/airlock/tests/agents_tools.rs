//! What an agent is offered: `ask_user` only where it can work (ask permission mode), in
//! `airlock tools` and in MCP `tools/list` alike.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

fn cli_tools(ws: &std::path::Path, flags: &[&str]) -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .arg("--workspace")
        .arg(ws)
        .args(flags)
        .args(["--json", "tools"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

fn mcp_tools(ws: &std::path::Path, flags: &[&str]) -> Vec<String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .arg("--workspace")
        .arg(ws)
        .args(flags)
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    for msg in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ] {
        writeln!(stdin, "{msg}").unwrap();
    }
    stdin.flush().unwrap();
    let names = loop {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0);
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["id"] == 2 {
            break v["result"]["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_string())
                .collect();
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    names
}

#[test]
fn ask_user_is_offered_only_in_ask_mode() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path();
    for flags in [
        &["--mode", "build"][..],
        &["--mode", "build", "--permission", "auto"],
    ] {
        let cli = cli_tools(ws, flags);
        assert!(cli.contains(&"bash".to_string()), "{cli:?}");
        assert!(!cli.contains(&"ask_user".to_string()), "{flags:?}: {cli:?}");
        assert_eq!(mcp_tools(ws, flags), cli, "{flags:?}");
    }
    let ask = ["--mode", "build", "--permission", "ask"];
    let cli = cli_tools(ws, &ask);
    assert!(cli.contains(&"ask_user".to_string()), "{cli:?}");
    assert_eq!(mcp_tools(ws, &ask), cli);
}

/// `discard` works wherever `status` does: in every mode and profile, since it only drops what
/// the session staged (nothing on disk changes).
#[test]
fn discard_is_allowed_wherever_status_is() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path();
    std::fs::write(ws.join("a.txt"), "disk\n").unwrap();
    let airlock = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_airlock"))
            .arg("--workspace")
            .arg(ws)
            .args(args)
            .output()
            .unwrap()
    };
    let staged = airlock(&[
        "--mode",
        "build",
        "call",
        "write_file",
        r#"{"path":"a.txt","content":"staged\n"}"#,
    ]);
    assert!(
        staged.status.success(),
        "{}",
        String::from_utf8_lossy(&staged.stderr)
    );
    for flags in [
        &[][..],
        &["--mode", "discuss"],
        &["--mode", "plan"],
        &["--mode", "build", "--profile", "readonly"],
        &["--mode", "plan", "--profile", "plan"],
    ] {
        let status = airlock(&[flags, &["status"]].concat());
        assert!(status.status.success(), "status {flags:?}");
        let out = airlock(&[flags, &["discard"]].concat());
        assert!(
            out.status.success(),
            "discard {flags:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let status = airlock(&["--json", "status"]);
    let v: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(v["entries"], json!([]), "{v}");
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "disk\n");
}
