//! Display safety end to end: what an agent names or writes reaches the operator's terminal
//! escaped. Each test drives the real `airlock` binary, feeds what it printed to a terminal
//! emulator (`vt100`) and checks the screen a person would see: the real change is there, the
//! forging name or content is shown escaped, and the fake line it tried to draw is not.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// A name that, printed raw after `A ` on a status line, climbs two lines, clears the screen
/// below and draws a benign change in place of the real ones.
const FORGED: &str = "zz\r\x1b[2A\x1b[J\rM docs/notes.md";
/// The same name as the operator must see it.
const FORGED_SHOWN: &str = r"zz\r\x1b[2A\x1b[J\rM docs/notes.md";

fn airlock(ws: &Path, args: &[&str]) -> Output {
    let home = ws.parent().unwrap().join("home");
    std::fs::create_dir_all(&home).unwrap();
    Command::new(env!("CARGO_BIN_EXE_airlock"))
        .arg("--workspace")
        .arg(ws)
        .args(args)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .stdin(Stdio::null())
        .output()
        .expect("airlock runs")
}

fn workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("ws");
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::create_dir_all(ws.join("docs")).unwrap();
    std::fs::write(ws.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(ws.join("docs/notes.md"), "# Notes\n").unwrap();
    (t, ws)
}

fn write_file(ws: &Path, path: &str, content: &str) -> Output {
    let args = serde_json::json!({ "path": path, "content": content }).to_string();
    airlock(ws, &["--mode", "build", "call", "write_file", &args])
}

/// What a terminal shows after `outputs` are written to it in order (stdout, then stderr, of
/// each), with the tty's newline translation (`\n` → `\r\n`).
fn screen(outputs: &[&Output]) -> String {
    let size = |n| std::num::NonZeroU16::new(n).unwrap();
    let mut term = vt100::Parser::new(size(80), size(240), 0);
    for o in outputs {
        for bytes in [&o.stdout, &o.stderr] {
            let mut crlf = Vec::with_capacity(bytes.len());
            for &b in bytes.iter() {
                if b == b'\n' {
                    crlf.push(b'\r');
                }
                crlf.push(b);
            }
            term.process(&crlf);
        }
    }
    term.screen().contents()
}

#[track_caller]
fn assert_not_forged(screen: &str) {
    assert!(
        !screen.lines().any(|l| l.trim() == "M docs/notes.md"),
        "the fake status line is on the screen:\n{screen}"
    );
}

/// `write_file` with a forging name is refused at the jail, the refusal shows the name
/// escaped, and `status` still shows the real change with no fake line.
#[test]
fn a_forging_name_cannot_redraw_the_status_screen() {
    let (_t, ws) = workspace();
    let evil = write_file(&ws, "src/evil.rs", "evil();\n");
    assert_eq!(evil.status.code(), Some(0));
    let forged = write_file(&ws, FORGED, "benign\n");
    let status = airlock(&ws, &["status"]);
    let shown = screen(&[&evil, &forged, &status]);
    assert!(
        shown.lines().any(|l| l.trim() == "A src/evil.rs"),
        "the real change is hidden:\n{shown}"
    );
    assert_not_forged(&shown);
    assert!(shown.contains(FORGED_SHOWN), "{shown}");
    assert!(shown.contains("jail_control_char"), "{shown}");
    assert_eq!(forged.status.code(), Some(3), "a denial");
    let json = airlock(&ws, &["--json", "status"]);
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    let paths: Vec<&str> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        ["src/evil.rs"],
        "nothing of the forging name is staged"
    );
}

/// Content that clears the screen and draws a fake diff is shown escaped in `diff`: the real
/// change before it stays on the screen.
#[test]
fn forging_content_cannot_clear_the_diff_screen() {
    let (_t, ws) = workspace();
    let fake = "\x1b[2J\x1b[3J\x1b[Hdiff --git a/docs/notes.md b/docs/notes.md\n\
                --- a/docs/notes.md\n+++ b/docs/notes.md\n@@ -1 +1 @@\n-# Notes\n+# Notes, typo fixed\n";
    assert_eq!(
        write_file(&ws, "src/evil.rs", "evil();\n").status.code(),
        Some(0)
    );
    assert_eq!(write_file(&ws, "zz/notes.txt", fake).status.code(), Some(0));
    let diff = airlock(&ws, &["diff"]);
    assert_eq!(diff.status.code(), Some(0));
    let shown = screen(&[&diff]);
    for real in ["+++ b/src/evil.rs", "+evil();", "+++ b/zz/notes.txt"] {
        assert!(
            shown.lines().any(|l| l.trim_end() == real),
            "`{real}` is not on the screen:\n{shown}"
        );
    }
    assert!(
        shown.contains(r"+\x1b[2J\x1b[3J\x1b[Hdiff --git a/docs/notes.md"),
        "the escape sequences are shown, not run:\n{shown}"
    );
    // The machine-readable content is exact.
    let read = airlock(
        &ws,
        &["--json", "call", "read_file", r#"{"path":"zz/notes.txt"}"#],
    );
    let v: Value = serde_json::from_slice(&read.stdout).unwrap();
    let exact = "\x1b[2J\x1b[3J\x1b[Hdiff --git a/docs/notes.md b/docs/notes.md\n";
    assert!(v["output"].as_str().unwrap().contains(exact), "{v}");
}

/// A command that creates a file with a forging name: the harvest does not stage it, the
/// `staged` lines show it escaped, and neither they nor `status` can be redrawn by it or by
/// the command's own output.
#[test]
fn a_command_cannot_stage_or_forge_with_a_control_character_name() {
    let (_t, ws) = workspace();
    let script = r#"printf 'evil();\n' > src/evil.rs
n=$(printf 'zz\r\033[2A\033[J\rM docs'); mkdir -p "$n"; printf x > "$n/notes.md"
printf '\033[2J\033[H\033[?1049h\n'"#;
    let exec = airlock(&ws, &["--mode", "build", "exec", "--", "sh", "-c", script]);
    assert_eq!(
        exec.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&exec.stderr)
    );
    let status = airlock(&ws, &["status"]);
    let shown = screen(&[&exec, &status]);
    assert_not_forged(&shown);
    assert!(
        shown
            .lines()
            .any(|l| l.trim() == "airlock: staged A src/evil.rs"),
        "{shown}"
    );
    assert!(
        shown.lines().any(|l| l.trim() == "A src/evil.rs"),
        "{shown}"
    );
    assert!(
        shown.contains(r"airlock: staged ! zz\r\x1b[2A\x1b[J\rM docs"),
        "{shown}"
    );
    assert!(shown.contains(r"\x1b[2J\x1b[H\x1b[?1049h"), "{shown}");
    let json = airlock(&ws, &["--json", "status"]);
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    let paths: Vec<&str> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["src/evil.rs"], "the forging name is never staged");
}

/// `airlock jail`, `explain` and `guard` quote what they were given escaped; with `--json`
/// the value is exact once parsed, but no bidi character reaches the terminal raw.
#[test]
fn jail_explain_and_guard_output_are_escaped() {
    let (_t, ws) = workspace();
    let jail = airlock(&ws, &["jail", "--write", FORGED]);
    let args = serde_json::json!({ "path": FORGED, "content": "x" }).to_string();
    let explain = airlock(&ws, &["--mode", "build", "explain", "write_file", &args]);
    let guard = airlock(&ws, &["guard", "echo '\x1b[2J\x1b[H'"]);
    let shown = screen(&[&jail, &explain, &guard]);
    assert_not_forged(&shown);
    assert!(
        shown.contains(&format!("{FORGED_SHOWN}: denied by jail")),
        "{shown}"
    );
    assert!(shown.contains("jail_control_char"), "{shown}");
    assert!(shown.contains(r"echo '\x1b[2J\x1b[H'"), "{shown}");
    let bidi = "notes\u{202e}dm.exe";
    let o = airlock(&ws, &["--json", "jail", bidi]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        !text.contains('\u{202e}'),
        "raw bidi in JSON output: {text}"
    );
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["path"], bidi, "JSON keeps the exact text");
    assert_eq!(v["rule"], "jail_control_char");
}
