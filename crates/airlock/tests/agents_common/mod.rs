//! Helpers of the tests that drive the real coding agents (`agents_*.rs`).

// Each test crate uses a different subset.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Where `scripts/ci-deps-agents.sh` installed the clients (`node_modules/.bin`).
pub fn agents_bin() -> PathBuf {
    let dir = std::env::var_os("AIRLOCK_AGENTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/airlock-agents")
        });
    let bin = dir.join("node_modules/.bin");
    for name in ["node", "claude", "codex", "gemini"] {
        assert!(
            bin.join(name).exists(),
            "{} is missing: the real clients are required (run scripts/ci-deps-agents.sh)",
            bin.join(name).display()
        );
    }
    bin
}

/// The environment variables of the clients' own configuration, removed so that a test's
/// HOME alone decides.
const CLIENT_VARS: &[&str] = &[
    "CODEX_HOME",
    "XDG_CONFIG_HOME",
    "CLAUDE_CONFIG_DIR",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "GOOGLE_CLOUD_PROJECT",
];

/// A fresh HOME and workspace.
pub struct Env {
    _dir: tempfile::TempDir,
    /// The user's home directory.
    pub home: PathBuf,
    /// The workspace (canonical).
    pub ws: PathBuf,
}

impl Env {
    /// Empty HOME and workspace under one temporary directory.
    pub fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        let ws = ws.canonicalize().unwrap();
        let home = home.canonicalize().unwrap();
        Env {
            _dir: dir,
            home,
            ws,
        }
    }

    /// The workspace as a string.
    pub fn ws_str(&self) -> String {
        self.ws.to_string_lossy().into_owned()
    }

    /// `airlock` with this HOME, in the workspace.
    pub fn airlock(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_airlock"));
        c.current_dir(&self.ws).env("HOME", &self.home);
        for v in CLIENT_VARS {
            c.env_remove(v);
        }
        c
    }

    fn run_setup(&self, args: &[&str]) -> Output {
        self.airlock()
            .arg("setup")
            .args(args)
            .arg("--workspace")
            .arg(&self.ws)
            .output()
            .unwrap()
    }

    /// `airlock setup ARGS --workspace WS`, which must succeed; its stdout.
    pub fn setup(&self, args: &[&str]) -> String {
        let out = self.run_setup(args);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "airlock setup {args:?}: {}\n{stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }

    /// `airlock setup ARGS`, which must fail with `code`; its stderr.
    pub fn setup_fails(&self, args: &[&str], code: i32) -> String {
        let out = self.run_setup(args);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(
            out.status.code(),
            Some(code),
            "airlock setup {args:?}: {stderr}"
        );
        stderr
    }

    /// A second identical run reports every file up to date and changes no byte.
    pub fn assert_idempotent(&self, args: &[&str]) {
        let home = snapshot_tree(&self.home);
        let ws = snapshot_tree(&self.ws);
        let out = self.setup(args);
        for line in out
            .lines()
            .filter(|l| l.contains(": ") && !l.starts_with(' '))
        {
            if line.starts_with("Check:") {
                continue;
            }
            assert!(line.ends_with("already up to date"), "{args:?}: {out}");
        }
        assert_eq!(snapshot_tree(&self.home), home, "{args:?}: {out}");
        assert_eq!(snapshot_tree(&self.ws), ws, "{args:?}: {out}");
    }

    /// A client command (`claude`, `codex`, `gemini`) with this HOME in the workspace.
    pub fn client_command(&self, name: &str) -> Command {
        let bin = agents_bin();
        let mut c = Command::new("timeout");
        c.arg("180").arg(bin.join(name));
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut paths = vec![bin];
        paths.extend(std::env::split_paths(&path));
        c.current_dir(&self.ws)
            .env("HOME", &self.home)
            .env("PATH", std::env::join_paths(paths).unwrap())
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("NO_COLOR", "1");
        for v in CLIENT_VARS {
            c.env_remove(v);
        }
        c
    }

    /// Run a client's command; its stdout and stderr together.
    pub fn client(&self, name: &str, args: &[&str]) -> String {
        let out = self.client_command(name).args(args).output().unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }
}

/// Every file under `root`: relative path → content.
pub fn snapshot_tree(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut map = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in rd.flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                map.insert(
                    p.strip_prefix(root).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap_or_default(),
                );
            }
        }
    }
    map
}
