//! `verify`'s diagnostics settings through the `airlock` binary on a real node:test project:
//! the budget from the command line, the MCP argument and the operator's config, and
//! `--only` (also the tool's `only`), whose verdict is advisory: apply needs the whole suite.

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_airlock");

const MATH_TEST_JS: &str = "import { test } from 'node:test';
import assert from 'node:assert/strict';
import { add } from '../src/math.js';

test('adds zero', () => {
  assert.equal(add(2, 0), 2);
});

test('adds small numbers', () => {
  assert.equal(add(2, 3), 5);
});

test('adds large numbers', () => {
  assert.equal(add(200, 300), 500);
});
";

struct Fx {
    _t: tempfile::TempDir,
    home: PathBuf,
    ws: PathBuf,
}

impl Fx {
    fn new() -> Fx {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        let fx = Fx {
            home: root.join("home"),
            ws: root.join("ws"),
            _t: t,
        };
        std::fs::create_dir_all(&fx.home).unwrap();
        fx.write(
            "package.json",
            "{\"name\":\"d\",\"private\":true,\"type\":\"module\",\"scripts\":{\"test\":\"node --test\"}}\n",
        );
        fx.write(
            "src/math.js",
            "export function add(a, b) {\n  return a - b;\n}\n",
        );
        fx.write("test/math.test.js", MATH_TEST_JS);
        fx
    }

    fn write(&self, rel: &str, body: &str) {
        let p = self.ws.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .arg("--workspace")
            .arg(&self.ws)
            .args(["--mode", "build"])
            .args(args)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .stdin(Stdio::null())
            .output()
            .expect("airlock runs")
    }

    fn json(&self, args: &[&str], code: i32) -> Value {
        let o = self.run(args);
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(
            o.status.code(),
            Some(code),
            "airlock {args:?}: {out} {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
        if v.get("output").is_some() {
            v["output"].clone()
        } else {
            v
        }
    }
}

#[test]
fn the_budget_is_set_per_call_over_mcp_and_in_config() {
    let fx = Fx::new();
    // Default: both failures shown.
    let v = fx.json(&["--json", "verify", "--timeout", "60"], 4);
    let text = v["diagnostics"].as_str().unwrap();
    assert!(text.contains("adds large numbers"), "{text}");
    assert!(!text.contains("omitted"), "{text}");
    // A small budget from the command line: bounded, and the text names the way to raise it.
    let v = fx.json(
        &["--json", "verify", "--timeout", "60", "--budget", "300"],
        4,
    );
    let text = v["diagnostics"].as_str().unwrap();
    assert!(text.len() <= 300, "{}", text.len());
    assert!(
        text.contains("more failures omitted") && text.contains("--budget BYTES"),
        "{text}"
    );
    // The JSON list does not depend on the text budget.
    assert_eq!(v["failures"].as_array().unwrap().len(), 2, "{v}");
    // The same over the tool's own argument.
    let v = fx.json(
        &[
            "--json",
            "call",
            "verify",
            r#"{"budget": 300, "timeout_secs": 60}"#,
        ],
        4,
    );
    assert!(v["diagnostics"].as_str().unwrap().len() <= 300, "{v}");
    // Out of range: a usage error naming the argument, nothing run.
    let o = fx.run(&["--json", "verify", "--budget", "100"]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("budget"));
    // The operator's default.
    let cfg = fx.home.join(".config/airlock/config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    std::fs::write(&cfg, "[verify]\nbudget = 300\n").unwrap();
    let v = fx.json(&["--json", "verify", "--timeout", "60"], 4);
    let text = v["diagnostics"].as_str().unwrap();
    assert!(
        text.len() <= 300 && text.contains("more failures omitted"),
        "{text}"
    );
}

#[test]
fn a_run_of_selected_tests_is_advisory_and_cannot_unlock_apply() {
    let fx = Fx::new();
    let v = fx.json(&["--json", "verify", "--timeout", "60"], 4);
    let id = v["failures"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(id, "adds small numbers", "{v}");
    // The fix, staged.
    fx.json(
        &[
            "--json",
            "call",
            "write_file",
            r#"{"path": "src/math.js", "content": "export function add(a, b) {\n  return a + b;\n}\n"}"#,
        ],
        0,
    );
    // Only the failing test, from the command line: it passes, but says nothing of the rest.
    let v = fx.json(&["--json", "verify", "--timeout", "60", "--only", &id], 0);
    assert_eq!(v["verdict"], "passed", "{v}");
    assert_eq!(v["tests"]["passed"], 1, "{v}");
    assert_eq!(v["command"]["source"], "partial", "{v}");
    assert_eq!(v["advisory"], true, "{v}");
    let o = fx.run(&["apply"]);
    assert_eq!(o.status.code(), Some(4));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("--only") && stderr.contains("airlock verify"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(fx.ws.join("src/math.js")).unwrap(),
        "export function add(a, b) {\n  return a - b;\n}\n"
    );
    // Over MCP too.
    let v = fx.json(
        &[
            "--json",
            "call",
            "verify",
            &serde_json::json!({"only": [id], "timeout_secs": 60}).to_string(),
        ],
        0,
    );
    assert_eq!(v["command"]["source"], "partial", "{v}");
    assert_eq!(fx.run(&["apply"]).status.code(), Some(4));
    // The whole suite unlocks apply.
    let v = fx.json(&["--json", "verify", "--timeout", "60"], 0);
    assert_eq!(v["command"]["source"], "detected", "{v}");
    assert_eq!(fx.run(&["apply"]).status.code(), Some(0));
}
