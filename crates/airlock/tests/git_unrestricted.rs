//! The unrestricted session is switched on only by a person at the terminal: `--unrestricted`
//! asks on `/dev/tty` (driven here through a real pseudo-terminal, python's `pty`), and nothing
//! else switches it on — not the flag without a terminal, not `airlock mcp`, not a config key,
//! not an environment variable. While on, every result and the journal say so, and sensitive
//! files stay denied.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

struct Fx {
    _t: tempfile::TempDir,
    root: PathBuf,
    ws: PathBuf,
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

impl Fx {
    fn new() -> Fx {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        let ws = root.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(root.join("home/.config")).unwrap();
        std::fs::write(ws.join("a.txt"), "a\n").unwrap();
        std::fs::write(ws.join(".env"), "SECRET=1\n").unwrap();
        let o = Command::new("git")
            .args(["init", "-q", "-b", "main"])
            .current_dir(&ws)
            .output()
            .unwrap();
        assert!(o.status.success());
        Fx { _t: t, root, ws }
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_airlock"));
        c.arg("--workspace")
            .arg(&self.ws)
            .env("HOME", self.root.join("home"))
            .env("XDG_CONFIG_HOME", self.root.join("home/.config"))
            .stdin(Stdio::null());
        c
    }

    /// Run airlock with `args` in a new session whose controlling terminal is a fresh pty,
    /// answering `answer` when it asks; (exit code, everything the terminal showed).
    fn on_a_terminal(&self, args: &[&str], answer: &str) -> (i32, String) {
        let script = self.root.join("drive_tty.py");
        std::fs::write(
            &script,
            r#"
import os, pty, sys, time, json
argv, answer = json.loads(sys.argv[1]), sys.argv[2]
pid, fd = pty.fork()
if pid == 0:
    os.execv(argv[0], argv)
seen = b""
answered = False
deadline = time.time() + 60
while time.time() < deadline:
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        break
    if not chunk:
        break
    seen += chunk
    if not answered and b"Type `unrestricted`" in seen:
        os.write(fd, answer.encode() + b"\n")
        answered = True
_, status = os.waitpid(pid, 0)
sys.stdout.write(seen.decode(errors="replace"))
sys.exit(os.waitstatus_to_exitcode(status))
"#,
        )
        .unwrap();
        let mut argv = vec![
            env!("CARGO_BIN_EXE_airlock").to_string(),
            "--workspace".into(),
            self.ws.display().to_string(),
        ];
        argv.extend(args.iter().map(|s| s.to_string()));
        let o = Command::new("python3")
            .arg(&script)
            .arg(serde_json::to_string(&argv).unwrap())
            .arg(answer)
            .env("HOME", self.root.join("home"))
            .env("XDG_CONFIG_HOME", self.root.join("home/.config"))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        )
    }

    fn journal(&self) -> String {
        let o = self.cmd().args(["--json", "journal"]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
}

fn setsid() -> Option<PathBuf> {
    ["/usr/bin/setsid", "/bin/setsid"]
        .iter()
        .map(PathBuf::from)
        .find(|p| Path::new(p).exists())
}

#[test]
fn the_person_at_the_terminal_switches_it_on_and_every_result_says_so() {
    let fx = Fx::new();
    let (code, shown) = fx.on_a_terminal(
        &[
            "--mode",
            "build",
            "--unrestricted",
            "--json",
            "call",
            "git_status",
            "{}",
        ],
        "unrestricted",
    );
    assert_eq!(code, 0, "{shown}");
    assert!(shown.contains("\"unrestricted\":true"), "{shown}");
    assert!(shown.contains("UNRESTRICTED"), "{shown}");
    assert!(
        fx.journal().contains("\"tool\":\"unrestricted\""),
        "{}",
        fx.journal()
    );
    // Sensitive files stay denied at the tool layer.
    let (code, shown) = fx.on_a_terminal(
        &[
            "--mode",
            "build",
            "--unrestricted",
            "--json",
            "call",
            "read_file",
            r#"{"path":".env"}"#,
        ],
        "unrestricted",
    );
    assert_eq!(code, 3, "{shown}");
    assert!(shown.contains("jail_sensitive_file"), "{shown}");
    assert!(!shown.contains("SECRET=1"), "{shown}");
    // It is not persisted: the next process is restricted again.
    let o = fx
        .cmd()
        .args(["--json", "call", "git_status", "{}"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains("unrestricted"),
        "{}",
        text(&o)
    );
}

#[test]
fn any_other_answer_keeps_it_off() {
    let fx = Fx::new();
    let (code, shown) = fx.on_a_terminal(
        &[
            "--mode",
            "build",
            "--unrestricted",
            "--json",
            "call",
            "git_status",
            "{}",
        ],
        "yes",
    );
    assert_ne!(code, 0, "{shown}");
    assert!(!shown.contains("\"unrestricted\":true"), "{shown}");
    assert!(!fx.journal().contains("\"tool\":\"unrestricted\""));
}

#[test]
fn nothing_but_the_terminal_switches_it_on() {
    let fx = Fx::new();
    // The flag with no terminal (a new session without a controlling terminal, as a sandboxed
    // command or an agent client's child has).
    let setsid = setsid().expect("setsid");
    let o = Command::new(&setsid)
        .arg(env!("CARGO_BIN_EXE_airlock"))
        .arg("--workspace")
        .arg(&fx.ws)
        .args(["--unrestricted", "--json", "call", "git_status", "{}"])
        .env("HOME", fx.root.join("home"))
        .env("XDG_CONFIG_HOME", fx.root.join("home/.config"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no terminal"),
        "{}",
        text(&o)
    );
    // Never over MCP: refused before anything asks.
    let o = fx.cmd().args(["--unrestricted", "mcp"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // Not a config key, not a profile name.
    std::fs::create_dir_all(fx.root.join("home/.config/airlock")).unwrap();
    std::fs::write(
        fx.root.join("home/.config/airlock/config.toml"),
        "unrestricted = true\n",
    )
    .unwrap();
    let o = fx
        .cmd()
        .args(["--json", "call", "git_status", "{}"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains("unrestricted"),
        "{}",
        text(&o)
    );
    let o = fx
        .cmd()
        .env("AIRLOCK_PROFILE", "unrestricted")
        .args(["--json", "call", "git_status", "{}"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(!fx.journal().contains("\"tool\":\"unrestricted\""));
}
