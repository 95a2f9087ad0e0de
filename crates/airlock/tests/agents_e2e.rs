//! End to end with the real coding agents: `airlock setup CLIENT`, then the real client, run
//! headless on a small node project, makes real MCP calls to a real `airlock mcp` through
//! read → write (staged) → bash (allowed, then denied) → verify (fails) → write the fix →
//! verify (passes) → apply. Only the model is replaced: `tests/agents/model_standin.py` is a
//! scripted stand-in for the model API on loopback (Anthropic Messages for Claude Code, OpenAI
//! Responses for Codex, Gemini streamGenerateContent for Gemini CLI) that replays that fixed
//! list of tool calls and logs each result the client sends back. After the run the test
//! checks every step's result, the disk and `airlock journal`.
//!
//! The clients are installed by `scripts/ci-deps-agents.sh`; a missing client is a failure.

mod agents_common;

use agents_common::*;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const MATH_JS: &str = "export function add(a, b) {\n  return a - b;\n}\n";
const FIXED_JS: &str = "export function add(a, b) {\n  return a + b;\n}\n";
const TEST_JS: &str = "import { test } from 'node:test';
import assert from 'node:assert/strict';
import { add } from '../src/math.js';

test('adds', () => {
  assert.equal(add(2, 3), 5);
});
";

fn script() -> Value {
    json!([
        ["read_file", {"path": "src/math.js"}],
        ["write_file", {"path": "NOTES.md", "content": "# Notes\n"}],
        ["bash", {"command": "cat NOTES.md && ls src"}],
        ["bash", {"command": "rm -rf /"}],
        ["verify", {}],
        ["write_file", {"path": "src/math.js", "content": FIXED_JS}],
        ["verify", {}],
        ["apply", {}]
    ])
}

/// The stand-in model API, killed when dropped.
struct StandIn {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl StandIn {
    fn start(api: &str, dir: &std::path::Path) -> StandIn {
        let script_path = dir.join("script.json");
        std::fs::write(&script_path, script().to_string()).unwrap();
        let port_file = dir.join("port");
        let log = dir.join("log.jsonl");
        let standin =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/agents/model_standin.py");
        let child = Command::new("python3")
            .arg(standin)
            .args(["--api", api, "--script"])
            .arg(&script_path)
            .arg("--port-file")
            .arg(&port_file)
            .arg("--log")
            .arg(&log)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while !port_file.exists() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "stand-in did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let port = std::fs::read_to_string(&port_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        StandIn { child, port, log }
    }

    fn results(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let mut v: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        v.sort_by_key(|r| r["step"].as_u64());
        v
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn project(env: &Env) {
    for (p, c) in [
        (
            "package.json",
            r#"{ "name": "calc", "version": "1.0.0", "type": "module", "scripts": { "test": "node --test" } }"#,
        ),
        ("src/math.js", MATH_JS),
        ("test/math.test.js", TEST_JS),
    ] {
        let path = env.ws.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, c).unwrap();
    }
}

/// Every step's result, the disk and the journal after the run.
/// `errors_flagged`: the client marks a tool error as such to the model (Codex passes the text
/// only).
fn check_run(env: &Env, standin: &StandIn, client_output: &str, errors_flagged: bool) {
    let r = standin.results();
    let show = || format!("client output:\n{client_output}\nresults:\n{r:#?}");
    assert_eq!(r.len(), 8, "{}", show());
    // Gemini CLI quotes a tool error's result inside its own JSON string.
    let text = |i: usize| r[i]["text"].as_str().unwrap_or("").replace("\\\"", "\"");
    let err = |i: usize| r[i]["is_error"].as_bool().unwrap_or(false);
    for (i, step) in r.iter().enumerate() {
        assert_eq!(step["step"], i, "{}", show());
    }
    // read_file: the workspace's content.
    assert!(text(0).contains("return a - b"), "{}", show());
    // write_file: staged, not written.
    assert!(text(1).contains("Staged"), "{}", show());
    // bash (allowed) sees the staged file.
    assert!(!err(2) && text(2).contains("# Notes"), "{}", show());
    // bash (denied by the guard): the decision reaches the model.
    assert!(err(3) || !errors_flagged, "{}", show());
    assert!(text(3).contains("\"rule\":\"destruction\""), "{}", show());
    assert!(text(3).contains("\"stage\":\"guard\""), "{}", show());
    // verify fails on the bug.
    assert!(
        text(4).contains("\"verdict\":\"failed\"") || text(4).contains("\"verdict\": \"failed\""),
        "{}",
        show()
    );
    assert!(text(5).contains("Staged"), "{}", show());
    assert!(
        text(6).contains("\"verdict\":\"passed\"") || text(6).contains("\"verdict\": \"passed\""),
        "{}",
        show()
    );
    assert!(
        !err(7) && text(7).contains("NOTES.md") && text(7).contains("src/math.js"),
        "{}",
        show()
    );

    // The disk: both changes applied, nothing else.
    assert_eq!(
        std::fs::read_to_string(env.ws.join("NOTES.md")).unwrap(),
        "# Notes\n"
    );
    assert_eq!(
        std::fs::read_to_string(env.ws.join("src/math.js")).unwrap(),
        FIXED_JS
    );
    // The journal: one committed apply of exactly those files.
    let out = env.airlock().args(["--json", "journal"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let journal: Value = serde_json::from_slice(&out.stdout).unwrap();
    let records = journal.as_array().expect("journal is a list");
    assert_eq!(records.len(), 1, "{journal:#}");
    assert_eq!(records[0]["tool"], "apply");
    assert_eq!(records[0]["state"], "committed");
    let mut files: Vec<&str> = records[0]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    files.sort();
    assert_eq!(files, ["NOTES.md", "src/math.js"]);
    // Nothing left staged.
    let status = env.airlock().args(["--json", "status"]).output().unwrap();
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["entries"], json!([]), "{status}");
}

fn run(mut cmd: Command) -> String {
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    format!(
        "{}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn claude_code_drives_the_whole_loop_through_airlock() {
    let env = Env::new();
    project(&env);
    env.setup(&["claude", "--trust"]);
    let dir = tempfile::tempdir().unwrap();
    let standin = StandIn::start("anthropic", dir.path());
    let mut cmd = env.client_command("claude");
    cmd.args(["-p", "Fix the failing test."])
        .env(
            "ANTHROPIC_BASE_URL",
            format!("http://127.0.0.1:{}", standin.port),
        )
        .env("ANTHROPIC_API_KEY", "sk-stand-in");
    let output = run(cmd);
    check_run(&env, &standin, &output, true);
}

#[test]
fn codex_drives_the_whole_loop_through_airlock() {
    let env = Env::new();
    project(&env);
    env.setup(&["codex"]);
    let dir = tempfile::tempdir().unwrap();
    let standin = StandIn::start("openai", dir.path());
    // The stand-in as Codex's model provider (Responses API over HTTP).
    let cfg = env.home.join(".codex/config.toml");
    let written = std::fs::read_to_string(&cfg).unwrap();
    let provider = format!(
        "model = \"gpt-5\"\nmodel_provider = \"standin\"\n{written}\n\
         [model_providers.standin]\nname = \"stand-in\"\n\
         base_url = \"http://127.0.0.1:{}/v1\"\nwire_api = \"responses\"\n\
         env_key = \"STANDIN_API_KEY\"\nsupports_websockets = false\n\
         request_max_retries = 0\nstream_max_retries = 0\n",
        standin.port
    );
    std::fs::write(&cfg, provider).unwrap();
    let mut cmd = env.client_command("codex");
    cmd.args(["exec", "--skip-git-repo-check", "Fix the failing test."])
        .env("STANDIN_API_KEY", "stand-in");
    let output = run(cmd);
    check_run(&env, &standin, &output, false);
}

#[test]
fn gemini_cli_drives_the_whole_loop_through_airlock() {
    let env = Env::new();
    project(&env);
    env.setup(&["gemini", "--trust"]);
    let dir = tempfile::tempdir().unwrap();
    let standin = StandIn::start("gemini", dir.path());
    // The stand-in as Gemini CLI's API (an API key, the base URL from the environment).
    std::fs::write(
        env.home.join(".gemini/settings.json"),
        r#"{"security": {"auth": {"selectedType": "gemini-api-key"}}}"#,
    )
    .unwrap();
    let mut cmd = env.client_command("gemini");
    cmd.args(["-p", "Fix the failing test."])
        .env("GEMINI_API_KEY", "stand-in")
        .env(
            "GOOGLE_GEMINI_BASE_URL",
            format!("http://127.0.0.1:{}", standin.port),
        );
    let output = run(cmd);
    check_run(&env, &standin, &output, true);
    // Gemini CLI offered airlock's write_file and none of its own write, edit or shell tools.
    let offered = &standin.results()[0]["offered"];
    let offered: Vec<&str> = offered
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(offered.contains(&"mcp_airlock_write_file"), "{offered:?}");
    for builtin in ["write_file", "replace", "run_shell_command"] {
        assert!(
            !offered.contains(&builtin),
            "{builtin} offered: {offered:?}"
        );
    }
}
