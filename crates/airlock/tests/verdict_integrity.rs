//! Verdict integrity through the `airlock` binary, as a hostile agent would try it with tool
//! calls alone (`airlock call …`, the agent's channel) on a real pytest project and a real
//! cargo crate: forged runner reports, outcome-rewriting hooks, test configuration that
//! drops tests, start-up hooks in an ignored `.venv`, a base that moved between verify and
//! apply, a hand-edited verdict. Each must end with nothing applied; an ordinary fix with a
//! new test must still verify and be applied by the agent's own call without a question.
//!
//! Needs pytest for the host's `python3` (`bash scripts/ci-deps-verify.sh`).

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_airlock");

const CALC: &str = "def add(a, b):\n    return a + b\n";
const REGRESSION: &str = "def add(a, b):\n    return a - b\n";
const TEST_CALC: &str = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_zero():\n    assert add(0, 0) == 0\n";

/// What a forger that read airlock's source does: finds pytest's JUnit report wherever it may
/// be handed over (argv, `PYTEST_ADDOPTS`, any XML file in the workspace, airlock's report
/// directory included) and writes one in which every test passed.
const FORGE: &str = r#"import glob, os, sys

def forge(module):
    paths = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--junitxml=")]
    paths += [a.split("=", 1)[1] for a in os.environ.get("PYTEST_ADDOPTS", "").split() if a.startswith("--junitxml=")]
    for root, _dirs, files in os.walk(os.getcwd()):
        paths += [os.path.join(root, f) for f in files if f.endswith(".xml")]
    for p in paths or [os.path.join(os.getcwd(), ".airlock-verify", "pytest.xml")]:
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write('<?xml version="1.0"?><testsuites><testsuite name="pytest" errors="0" failures="0" skipped="0" tests="3"><testcase classname="test_calc" name="test_add"/><testcase classname="test_calc" name="test_zero"/><testcase classname="%s" name="test_ok"/></testsuite></testsuites>' % module)
"#;

struct Ws {
    _t: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
}

impl Ws {
    fn python() -> Ws {
        let t = tempfile::tempdir().unwrap();
        let base = t.path().canonicalize().unwrap();
        let root = base.join("ws");
        let home = base.join("home");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let ws = Ws { _t: t, root, home };
        ws.put("calc.py", CALC);
        ws.put("test_calc.py", TEST_CALC);
        ws.put("pytest.ini", "[pytest]\n");
        ws.put(".gitignore", ".venv/\n");
        ws
    }

    fn put(&self, rel: &str, body: &str) {
        let p = self.root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root.join(rel)).unwrap_or_default()
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .arg("--workspace")
            .arg(&self.root)
            .arg("--mode")
            .arg("build")
            .args(args)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("XDG_STATE_HOME", self.home.join(".state"))
            .stdin(Stdio::null())
            .output()
            .expect("airlock runs")
    }

    /// The agent writes a file through the `write_file` tool.
    fn agent_write(&self, rel: &str, body: &str) {
        let o = self.run(&[
            "call",
            "write_file",
            &json!({"path": rel, "content": body}).to_string(),
        ]);
        assert!(o.status.success(), "write_file {rel}: {}", text(&o));
    }

    /// The agent's `verify` tool call: the verdict JSON.
    fn agent_verify(&self) -> Value {
        let o = self.run(&["--json", "call", "verify", "{}"]);
        let v: Value = serde_json::from_str(String::from_utf8_lossy(&o.stdout).trim())
            .unwrap_or_else(|e| panic!("verify output is not JSON ({e}): {}", text(&o)));
        v.get("output").cloned().unwrap_or(v)
    }

    /// The agent's `apply` tool call: did it succeed?
    fn agent_apply(&self) -> (bool, String) {
        let o = self.run(&["call", "apply", "{}"]);
        (o.status.success(), text(&o))
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn pytest_available() -> bool {
    Command::new("python3")
        .args(["-c", "import pytest"])
        .status()
        .is_ok_and(|s| s.success())
}

/// The regression must not land, whatever the verdict said.
fn assert_not_applied(ws: &Ws, why: &str) {
    let (ok, out) = ws.agent_apply();
    assert!(!ok, "{why}: the agent's apply succeeded: {out}");
    assert_eq!(
        ws.read("calc.py"),
        CALC,
        "{why}: the regression reached the disk"
    );
}

#[test]
fn a_forged_junit_report_and_an_early_exit_are_not_a_pass() {
    assert!(
        pytest_available(),
        "pytest missing: run scripts/ci-deps-verify.sh"
    );
    let ws = Ws::python();
    ws.agent_write("calc.py", REGRESSION);
    // Finds the report path wherever it is handed over (argv, the environment, the
    // workspace), writes a report in which everything passed, and leaves at once.
    ws.agent_write(
        "test_zz_forge.py",
        &format!("{FORGE}\nforge('test_zz_forge')\nos._exit(0)\n"),
    );
    let v = ws.agent_verify();
    assert_ne!(v["verdict"], "passed", "{v:#}");
    assert_not_applied(&ws, "forged report");
}

#[test]
fn a_report_rewritten_after_the_session_is_not_a_pass() {
    assert!(pytest_available());
    let ws = Ws::python();
    ws.agent_write("calc.py", REGRESSION);
    // Lets pytest finish, then rewrites its report and the exit status at interpreter exit.
    ws.agent_write(
        "test_zz_late.py",
        &format!(
            "{FORGE}\nimport atexit\n\ndef _late():\n    forge('test_zz_late')\n    os._exit(0)\n\natexit.register(_late)\n\n\ndef test_ok():\n    assert True\n"
        ),
    );
    let v = ws.agent_verify();
    assert_ne!(v["verdict"], "passed", "{v:#}");
    assert_not_applied(&ws, "report rewritten at exit");
}

#[test]
fn a_hook_that_turns_failures_into_passes_is_not_a_pass() {
    assert!(pytest_available());
    let ws = Ws::python();
    ws.agent_write("calc.py", REGRESSION);
    ws.agent_write(
        "conftest.py",
        r#"import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        rep.outcome = "passed"
        rep.longrepr = None
"#,
    );
    let v = ws.agent_verify();
    assert_ne!(v["verdict"], "passed", "{v:#}");
    assert_not_applied(&ws, "outcome-rewriting conftest");
}

#[test]
fn test_configuration_that_drops_the_failing_test_needs_the_operator() {
    assert!(pytest_available());
    let ws = Ws::python();
    ws.agent_write("calc.py", REGRESSION);
    ws.agent_write("pytest.ini", "[pytest]\naddopts = -k \"not add\"\n");
    let v = ws.agent_verify();
    // The run itself passes (the failing test is deselected) …
    assert_eq!(v["verdict"], "passed", "{v:#}");
    // … but the verdict says the test definition changed, and the agent cannot apply it.
    let concerns = v["apply_needs_operator"].to_string();
    assert!(concerns.contains("test_config"), "{v:#}");
    assert_eq!(v["integrity"]["contract"]["verdict"], "failed", "{v:#}");
    assert_not_applied(&ws, "addopts -k");
    // The operator, having reviewed it, can.
    let o = ws.run(&["apply", "--accept-test-changes"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(ws.read("calc.py"), REGRESSION);
}

#[test]
fn an_edited_existing_test_needs_the_operator_and_a_new_test_does_not() {
    assert!(pytest_available());
    let ws = Ws::python();
    ws.agent_write("calc.py", REGRESSION);
    ws.agent_write("test_calc.py", &TEST_CALC.replace("== 5", "== -1"));
    let v = ws.agent_verify();
    assert_eq!(v["verdict"], "passed", "{v:#}");
    assert!(
        v["apply_needs_operator"]
            .to_string()
            .contains("test_changed"),
        "{v:#}"
    );
    // The contract run (the base's test file against the changed code) shows the regression.
    assert_eq!(v["integrity"]["contract"]["verdict"], "failed", "{v:#}");
    assert!(
        v["diagnostics"].as_str().unwrap().contains("contract run:"),
        "{v:#}"
    );
    assert_not_applied(&ws, "edited assertion");

    // An honest change: a fix plus a new test module and a new test in the existing one.
    let ws = Ws::python();
    ws.agent_write("calc.py", "def add(a, b):\n    return b + a\n");
    ws.agent_write(
        "test_more.py",
        "from calc import add\n\n\ndef test_more():\n    assert add(1, 2) == 3\n",
    );
    ws.agent_write(
        "test_calc.py",
        &format!("{TEST_CALC}\n\ndef test_negative():\n    assert add(-1, -1) == -2\n"),
    );
    let v = ws.agent_verify();
    assert_eq!(v["verdict"], "passed", "{v:#}");
    assert!(v.get("apply_needs_operator").is_none(), "{v:#}");
    assert_eq!(v["tests"]["passed"], 4, "{v:#}");
    let (ok, out) = ws.agent_apply();
    assert!(ok, "an honest change was not applied: {out}");
    assert!(ws.read("test_more.py").contains("test_more"));
}

#[test]
fn a_start_up_hook_in_an_ignored_venv_needs_the_operator() {
    assert!(pytest_available());
    let ws = Ws::python();
    let venv = Command::new("python3")
        .args(["-m", "venv", "--system-site-packages", "--without-pip"])
        .arg(ws.root.join(".venv"))
        .status()
        .unwrap();
    assert!(venv.success());
    ws.agent_write("calc.py", REGRESSION);
    // A command writes a `.pth` hook into the ignored virtualenv: session-local, never
    // applied, but every interpreter of the verification runs it.
    let o = ws.run(&[
        "exec",
        "--",
        "sh",
        "-c",
        "d=$(ls -d .venv/lib/python3*/site-packages) && echo 'import sys' > \"$d/zz_hook.pth\"",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    ws.agent_write("calc.py", CALC);
    let v = ws.agent_verify();
    assert_eq!(v["verdict"], "passed", "{v:#}");
    assert!(
        v["apply_needs_operator"]
            .to_string()
            .contains("session_local_hook"),
        "{v:#}"
    );
    assert!(
        v["session_local_hooks"].to_string().contains("zz_hook.pth"),
        "{v:#}"
    );
    let (ok, out) = ws.agent_apply();
    assert!(
        !ok,
        "applied with a start-up hook the verdict depended on: {out}"
    );
}

#[test]
fn a_base_that_moved_after_verify_is_not_applied() {
    assert!(pytest_available());
    let ws = Ws::python();
    ws.agent_write(
        "test_more.py",
        "from calc import add\n\n\ndef test_more():\n    assert add(1, 2) == 3\n",
    );
    let v = ws.agent_verify();
    assert_eq!(v["verdict"], "passed", "{v:#}");
    // Another session applies (or a person edits) between this verify and this apply: the
    // tree that would result was never tested.
    std::fs::write(ws.root.join("calc.py"), REGRESSION).unwrap();
    let (ok, out) = ws.agent_apply();
    assert!(!ok, "applied over a base that moved: {out}");
    assert!(out.contains("changed since"), "{out}");
    assert!(
        out.contains("calc.py"),
        "the refusal names what moved: {out}"
    );
    assert!(!ws.root.join("test_more.py").exists());
}

#[test]
fn a_hand_edited_verdict_is_refused() {
    assert!(pytest_available());
    let ws = Ws::python();
    ws.agent_write("calc.py", REGRESSION);
    ws.agent_write("pytest.ini", "[pytest]\naddopts = -k \"not add\"\n");
    let v = ws.agent_verify();
    assert!(
        v["apply_needs_operator"]
            .to_string()
            .contains("test_config"),
        "{v:#}"
    );
    // Clear the concerns in the stored seal, as a tool that can write the store would.
    let db = ws.root.join(".airlock/sessions/default.db");
    let db = if db.exists() {
        db
    } else {
        std::fs::read_dir(ws.root.join(".airlock/sessions"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "db"))
            .expect("a session store")
    };
    let edit = Command::new("python3")
        .arg("-c")
        .arg(
            "import json, sqlite3, sys\n\
             c = sqlite3.connect(sys.argv[1])\n\
             s = json.loads(c.execute('SELECT seal FROM verdict').fetchone()[0])\n\
             s['concerns'] = []\n\
             c.execute('UPDATE verdict SET seal = ?', (json.dumps(s),))\n\
             c.commit()\n",
        )
        .arg(&db)
        .status()
        .unwrap();
    assert!(edit.success());
    let (ok, out) = ws.agent_apply();
    assert!(!ok, "a hand-edited verdict unlocked apply: {out}");
    assert!(out.contains("seal"), "{out}");
    assert_eq!(ws.read("calc.py"), CALC);
}

fn cargo_crate(root: &Path) {
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(
        root.join("Cargo.toml"),
        "[package]\nname = \"forge\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n",
    )
    .unwrap();
    std::fs::write(
        root.join("src/lib.rs"),
        "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() {\n        assert_eq!(super::add(2, 3), 5);\n    }\n}\n",
    )
    .unwrap();
}

#[test]
fn a_rust_test_that_prints_libtest_lines_and_exits_is_not_a_pass() {
    let t = tempfile::tempdir().unwrap();
    let base = t.path().canonicalize().unwrap();
    let ws = Ws {
        root: base.join("ws"),
        home: base.join("home"),
        _t: t,
    };
    std::fs::create_dir_all(&ws.home).unwrap();
    cargo_crate(&ws.root);
    std::fs::write(
        ws.root.join("Cargo.lock"),
        "version = 4\n\n[[package]]\nname = \"forge\"\nversion = \"0.1.0\"\n",
    )
    .unwrap();
    let lib = std::fs::read_to_string(ws.root.join("src/lib.rs")).unwrap();
    let forged = lib.replace("a + b", "a - b").replace(
        "    #[test]\n    fn adds()",
        "    #[test]\n    fn a_first() {\n        use std::io::Write;\n        let mut o = std::io::stdout();\n        let _ = writeln!(o, \"test tests::adds ... ok\\ntest tests::a_first ... ok\\n\\ntest result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\\n\");\n        let _ = o.flush();\n        std::process::exit(0);\n    }\n\n    #[test]\n    fn adds()",
    );
    ws.agent_write("src/lib.rs", &forged);
    let o = ws.run(&["--json", "call", "verify", "{\"timeout_secs\": 240}"]);
    let v: Value =
        serde_json::from_str(String::from_utf8_lossy(&o.stdout).trim()).unwrap_or(Value::Null);
    let v = v.get("output").cloned().unwrap_or(v);
    assert_ne!(v["verdict"], "passed", "{v:#} {}", text(&o));
    let (ok, out) = ws.agent_apply();
    assert!(!ok, "{out}");
    assert!(
        std::fs::read_to_string(ws.root.join("src/lib.rs"))
            .unwrap()
            .contains("a + b")
    );
}

#[test]
fn a_source_change_that_makes_existing_tests_skip_needs_the_operator() {
    assert!(pytest_available());
    let ws = Ws::python();
    ws.put(
        "calc.py",
        "ENABLED = True\n\n\ndef add(a, b):\n    return a + b\n",
    );
    ws.put(
        "test_calc.py",
        "import pytest\nimport calc\n\n\n@pytest.mark.skipif(not calc.ENABLED, reason=\"disabled\")\ndef test_add():\n    assert calc.add(2, 3) == 5\n\n\ndef test_zero():\n    assert calc.add(0, 0) == 0\n\n\n@pytest.mark.skip(reason=\"always\")\ndef test_later():\n    pass\n",
    );
    // Only source changes: the regression, and a flag that makes the old test skip itself.
    ws.agent_write(
        "calc.py",
        "ENABLED = False\n\n\ndef add(a, b):\n    return a * b\n",
    );
    let v = ws.agent_verify();
    assert_eq!(v["verdict"], "passed", "{v:#}");
    assert!(
        v["apply_needs_operator"]
            .to_string()
            .contains("fewer_tests"),
        "{v:#}"
    );
    let (ok, out) = ws.agent_apply();
    assert!(!ok, "applied a change that silenced a test: {out}");
    assert!(ws.read("calc.py").contains("a + b"));
}

/// A wheel built by hand (no build tools, no network): `demo` with one module.
const MAKE_WHEEL: &str = r#"
import base64, hashlib, sys, zipfile
files = {
    "demo/__init__.py": b"def double(x):\n    return 2 * x\n",
    "demo-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n",
    "demo-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
for name, data in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record.append(f"{name},sha256={digest},{len(data)}")
record.append("demo-1.0.dist-info/RECORD,,")
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for name, data in files.items():
        z.writestr(name, data)
    z.writestr("demo-1.0.dist-info/RECORD", "\n".join(record) + "\n")
"#;

#[test]
fn an_ordinary_install_is_vouched_for_and_a_tampered_package_is_not() {
    assert!(pytest_available());
    let ws = Ws::python();
    let venv = Command::new("python3")
        .args(["-m", "venv", "--system-site-packages", "--without-pip"])
        .arg(ws.root.join(".venv"))
        .status()
        .unwrap();
    assert!(venv.success());
    ws.put(".gitignore", ".venv/\n*.whl\n");
    let made = Command::new("python3")
        .args(["-c", MAKE_WHEEL])
        .arg(ws.root.join("demo-1.0-py3-none-any.whl"))
        .status()
        .unwrap();
    assert!(made.success());
    // The project starts using the package: an ordinary dependency install, by pip, offline.
    ws.put(
        "test_demo.py",
        "def test_demo():\n    import demo\n    assert demo.double(2) == 4\n",
    );
    let o = ws.run(&[
        "exec",
        "--",
        ".venv/bin/python",
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--no-index",
        "--disable-pip-version-check",
        "./demo-1.0-py3-none-any.whl",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    ws.agent_write("calc.py", "def add(a, b):\n    return b + a\n");
    let v = ws.agent_verify();
    assert_eq!(v["verdict"], "passed", "{v:#}");
    assert!(
        v.get("apply_needs_operator").is_none(),
        "an ordinary install raised a concern: {v:#}"
    );
    assert!(
        v["session_local"]
            .to_string()
            .contains("site-packages/demo/"),
        "{v:#}"
    );
    // A command rewrites the installed package in place: no record vouches for it now.
    let o = ws.run(&[
        "exec", "--", "sh", "-c",
        "f=$(ls .venv/lib/python3*/site-packages/demo/__init__.py) && printf 'def double(x):\\n    return 4\\n' > \"$f\"",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v = ws.agent_verify();
    assert_eq!(v["verdict"], "passed", "{v:#}");
    assert!(
        v["apply_needs_operator"]
            .to_string()
            .contains("session_local_hook"),
        "{v:#}"
    );
    assert!(
        v["session_local_hooks"]
            .to_string()
            .contains("demo/__init__.py"),
        "{v:#}"
    );
    let (ok, out) = ws.agent_apply();
    assert!(!ok, "{out}");
}
