//! `airlock demo`: the built-in end-to-end example. It writes a small Node.js project with a
//! bug into a temporary directory and walks an agent's loop through the real chain: a read, a
//! dangerous command and a secret read denied, a failing verify with its diagnostics, a staged
//! fix (the disk untouched), a shell command whose writes are staged, a passing verify, an
//! atomic apply, and an undo. Exits 0 only when every step behaved as described.

use airlock_kernel::{CallContext, CallOutcome, Cancel, DenyAll, Kernel, KernelConfig, Settings};
use airlock_policy::modes::{PermissionMode, WorkMode};
use serde_json::{Value, json};
use std::path::Path;

const PACKAGE_JSON: &str = r#"{
  "name": "airlock-demo",
  "version": "1.0.0",
  "private": true,
  "scripts": { "test": "node --test" }
}
"#;
const MATH_JS: &str = "// Tiny math helpers.\nfunction add(a, b) {\n  return a - b;\n}\n\nmodule.exports = { add };\n";
const MATH_TEST_JS: &str = "const test = require('node:test');\nconst assert = require('node:assert');\nconst { add } = require('../src/math.js');\n\ntest('add adds', () => {\n  assert.strictEqual(add(2, 3), 5);\n});\n";

/// Write the sample project into `dir`.
pub fn write_sample(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir.join("src"))?;
    std::fs::create_dir_all(dir.join("test"))?;
    std::fs::write(dir.join("package.json"), PACKAGE_JSON)?;
    std::fs::write(dir.join("src/math.js"), MATH_JS)?;
    std::fs::write(dir.join("test/math.test.js"), MATH_TEST_JS)?;
    std::fs::write(dir.join(".env"), "API_TOKEN=demo-secret-not-for-agents\n")?;
    Ok(())
}

struct Demo<'a> {
    kernel: &'a Kernel,
    json: bool,
    failures: Vec<String>,
    steps: Vec<Value>,
}

impl Demo<'_> {
    fn call(
        &mut self,
        title: &str,
        tool: &str,
        args: Value,
        expect: impl Fn(&CallOutcome) -> bool,
    ) -> CallOutcome {
        let approver = DenyAll::default();
        let ctx = CallContext::new(Cancel::new(), &approver);
        let out = self.kernel.call(tool, &args.to_string(), &ctx);
        let good = expect(&out);
        if !good {
            self.failures.push(title.to_string());
        }
        if self.json {
            self.steps.push(json!({ "step": title, "tool": tool, "args": args, "ok": out.ok, "as_expected": good,
                "output": out.output, "denial": out.denial }));
        } else {
            println!("\n── {title}");
            println!("   $ airlock call {tool} '{args}'");
            let body = match (&out.denial, &out.output) {
                (Some(d), _) => format!("denied by {} ({}): {}", d.stage, d.rule, d.reason),
                (None, Value::String(s)) => s.clone(),
                (None, v) => serde_json::to_string_pretty(v).unwrap_or_default(),
            };
            for line in body.lines().take(24) {
                println!("   │ {line}");
            }
            println!(
                "   {}",
                if good {
                    "✓ as expected"
                } else {
                    "✗ NOT as expected"
                }
            );
        }
        out
    }

    fn note(&mut self, title: &str, ok: bool, detail: &str) {
        if !ok {
            self.failures.push(title.to_string());
        }
        if self.json {
            self.steps
                .push(json!({ "step": title, "as_expected": ok, "detail": detail }));
        } else {
            println!(
                "\n── {title}\n   │ {detail}\n   {}",
                if ok {
                    "✓ as expected"
                } else {
                    "✗ NOT as expected"
                }
            );
        }
    }
}

/// Run the demo with the environment's `settings`; returns the exit code.
pub fn run(json_out: bool, settings: Settings) -> Result<i32, Box<dyn std::error::Error>> {
    let dir = tempfile::Builder::new().prefix("airlock-demo-").tempdir()?;
    let ws = dir.path();
    write_sample(ws)?;
    if !json_out {
        println!(
            "airlock demo: a Node.js project with a bug in {}",
            ws.display()
        );
        println!("(src/math.js's add() subtracts; test/math.test.js catches it)");
    }
    let kernel = Kernel::open(KernelConfig {
        workspace: ws.to_path_buf(),
        session: "demo".into(),
        mode: WorkMode::Build,
        permission: PermissionMode::Auto,
        profile: None,
        allow_local_config: false,
        allow_degraded: false,
        settings,
    })?;
    let mut d = Demo {
        kernel: &kernel,
        json: json_out,
        failures: Vec::new(),
        steps: Vec::new(),
    };
    let denied = |stage: &'static str| {
        move |o: &CallOutcome| o.denial.as_ref().map(|x| x.stage.as_str()) == Some(stage)
    };

    d.call(
        "1. The agent reads the code",
        "read_file",
        json!({"path": "src/math.js"}),
        |o| o.ok,
    );
    d.call(
        "2. A destructive command is refused by the bash guard",
        "bash",
        json!({"command": "cd / && rm -rf ~"}),
        denied("guard"),
    );
    d.call(
        "3. A secret is refused by the jail",
        "read_file",
        json!({"path": ".env"}),
        denied("jail"),
    );
    d.call(
        "4. Verify before the fix: the failure comes back short, with file:line",
        "verify",
        json!({}),
        |o| o.output["verdict"] == "failed",
    );
    d.call(
        "5. The agent stages a fix",
        "edit_file",
        json!({"path": "src/math.js", "old_string": "a - b", "new_string": "a + b"}),
        |o| o.ok,
    );
    let on_disk = std::fs::read_to_string(ws.join("src/math.js")).unwrap_or_default();
    d.note(
        "6. The workspace on disk is untouched",
        on_disk.contains("a - b"),
        "src/math.js still says `a - b` on disk",
    );
    d.call("7. A shell command runs in the sandbox; what it writes is staged", "bash",
        json!({"command": "echo 'add() now adds' > NOTES.md && node --test 2>&1 | grep -c '^# pass 1'"}),
        |o| o.ok);
    d.note(
        "8. …and NOTES.md is not on disk",
        !ws.join("NOTES.md").exists(),
        "NOTES.md exists only in the changeset",
    );
    d.call("9. The staged changes", "status", json!({}), |o| {
        o.ok && o.output["entries"]
            .as_array()
            .map(|a| a.len() == 2)
            .unwrap_or(false)
    });
    d.call("10. Verify after the fix", "verify", json!({}), |o| {
        o.output["verdict"] == "passed"
    });
    d.call(
        "11. Apply: all files or none, journaled",
        "apply",
        json!({}),
        |o| o.ok,
    );
    let fixed = std::fs::read_to_string(ws.join("src/math.js")).unwrap_or_default();
    d.note(
        "12. Now the workspace has the fix",
        fixed.contains("a + b") && ws.join("NOTES.md").exists(),
        "src/math.js says `a + b`; NOTES.md exists",
    );
    d.call("13. Undo reverts the apply", "undo", json!({}), |o| o.ok);
    let reverted = std::fs::read_to_string(ws.join("src/math.js")).unwrap_or_default();
    d.note(
        "14. The workspace is back to its original state",
        reverted == MATH_JS && !ws.join("NOTES.md").exists(),
        "src/math.js is the original; NOTES.md is gone",
    );

    let ok = d.failures.is_empty();
    if json_out {
        println!(
            "{}",
            json!({ "ok": ok, "workspace": ws.display().to_string(), "steps": d.steps, "unexpected": d.failures })
        );
    } else if ok {
        println!("\nairlock demo: every step behaved as expected.");
    } else {
        println!(
            "\nairlock demo: {} step(s) did not behave as expected: {}",
            d.failures.len(),
            d.failures.join("; ")
        );
    }
    Ok(if ok { 0 } else { 1 })
}
