//! `verify --impacted-first` and `--impacted` through the `airlock` binary on a real Go module
//! of two packages: a failing change returns the changed package's failure at once (scope
//! `impacted`, advisory) and cannot be applied; a passing change runs the whole suite, whose
//! verdict unlocks apply; a verdict of the related tests alone never unlocks apply.

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_airlock");

const CALC: &str = "package calc\n\nfunc Add(a, b int) int {\n\treturn a + b\n}\n";
const CALC_TEST: &str = "package calc\n\nimport \"testing\"\n\n\
func TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatalf(\"Add(2, 3) = %d\", Add(2, 3))\n\t}\n}\n";
const OTHER: &str = "package other\n\nfunc Twice(a int) int {\n\treturn 2 * a\n}\n";
const OTHER_TEST: &str = "package other\n\nimport \"testing\"\n\n\
func TestTwice(t *testing.T) {\n\tif Twice(4) != 8 {\n\t\tt.Fatal(\"Twice\")\n\t}\n}\n\n\
func TestTwiceZero(t *testing.T) {\n\tif Twice(0) != 0 {\n\t\tt.Fatal(\"Twice\")\n\t}\n}\n";

struct Fx {
    _t: tempfile::TempDir,
    home: PathBuf,
    ws: PathBuf,
}

impl Fx {
    fn go_module() -> Fx {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        let ws = root.join("ws");
        let home = root.join("home");
        std::fs::create_dir_all(&home).unwrap();
        for (rel, body) in [
            ("go.mod", "module example.com/m\n\ngo 1.19\n"),
            ("calc/calc.go", CALC),
            ("calc/calc_test.go", CALC_TEST),
            ("other/other.go", OTHER),
            ("other/other_test.go", OTHER_TEST),
        ] {
            let p = ws.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        }
        Fx { _t: t, home, ws }
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .arg("--workspace")
            .arg(&self.ws)
            .arg("--mode")
            .arg("build")
            .args(args)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .stdin(Stdio::null())
            .output()
            .expect("airlock runs")
    }

    fn expect(&self, args: &[&str], code: i32) -> Output {
        let o = self.run(args);
        assert_eq!(
            o.status.code(),
            Some(code),
            "airlock {args:?}: stdout {} stderr {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        o
    }

    fn verify(&self, flag: &str, code: i32) -> Value {
        let o = self.expect(&["--json", "verify", "--timeout", "120", flag], code);
        serde_json::from_slice(&o.stdout).unwrap()
    }

    fn edit(&self, path: &str, from: &str, to: &str) {
        let args = serde_json::json!({"path": path, "old_string": from, "new_string": to});
        self.expect(&["call", "edit_file", &args.to_string()], 0);
    }

    fn on_disk(&self, rel: &str) -> String {
        std::fs::read_to_string(self.ws.join(rel)).unwrap()
    }
}

fn ran(v: &Value) -> u64 {
    v["tests"]["passed"].as_u64().unwrap() + v["tests"]["failed"].as_u64().unwrap()
}

fn go_available() -> bool {
    Command::new("go").arg("version").output().is_ok()
}

#[test]
fn impacted_first_fails_fast_and_only_the_full_suite_unlocks_apply() {
    assert!(
        go_available(),
        "go is missing: run `bash scripts/ci-deps-verify.sh`"
    );
    let fx = Fx::go_module();

    // A failing change to calc: only calc's tests run, their failure comes back at once.
    fx.edit("calc/calc.go", "a + b", "a - b");
    let v = fx.verify("--impacted-first", 4);
    assert_eq!(v["verdict"], "failed", "{v}");
    assert_eq!(v["scope"], "impacted", "{v}");
    assert_eq!(v["impacted"]["status"], "ran", "{v}");
    assert_eq!(
        v["impacted"]["selected"],
        serde_json::json!(["./calc"]),
        "{v}"
    );
    assert_eq!(ran(&v), 1, "only calc's test ran: {v}");
    assert_eq!(v["command"]["source"], "partial", "{v}");
    assert_eq!(v["advisory"], true, "{v}");
    let argv: Vec<&str> = v["command"]["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        argv.contains(&"./calc") && !argv.contains(&"./..."),
        "{argv:?}"
    );
    assert!(
        v["diagnostics"]
            .as_str()
            .unwrap()
            .contains("the full suite did not run"),
        "{v}"
    );
    fx.expect(&["apply"], 4);
    assert_eq!(fx.on_disk("calc/calc.go"), CALC);

    // The fix: calc passes first, then the whole suite runs and its verdict unlocks apply.
    fx.edit("calc/calc.go", "a - b", "b + a");
    let v = fx.verify("--impacted-first", 0);
    assert_eq!(v["verdict"], "passed", "{v}");
    assert_eq!(v["scope"], "full", "{v}");
    assert_eq!(v["impacted"]["verdict"], "passed", "{v}");
    assert_eq!(v["impacted"]["tests"]["passed"], 1, "{v}");
    assert_eq!(ran(&v), 3, "the whole suite ran: {v}");
    assert_eq!(v["command"]["source"], "detected", "{v}");
    assert!(v.get("advisory").is_none(), "{v}");
    fx.expect(&["apply"], 0);
    assert!(fx.on_disk("calc/calc.go").contains("b + a"));
}

#[test]
fn a_verdict_of_the_impacted_tests_alone_never_unlocks_apply() {
    assert!(
        go_available(),
        "go is missing: run `bash scripts/ci-deps-verify.sh`"
    );
    let fx = Fx::go_module();
    fx.edit("other/other.go", "2 * a", "a * 2");

    let v = fx.verify("--impacted", 0);
    assert_eq!(v["verdict"], "passed", "{v}");
    assert_eq!(v["scope"], "impacted", "{v}");
    assert_eq!(ran(&v), 2, "only other's tests ran: {v}");
    assert_eq!(v["command"]["source"], "partial", "{v}");
    let o = fx.expect(&["apply"], 4);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("advisory"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(fx.on_disk("other/other.go"), OTHER);

    // The agent's channel: the same argument, the same rule.
    let o = fx.expect(
        &[
            "--json",
            "call",
            "verify",
            r#"{"impacted": "only", "timeout_secs": 120}"#,
        ],
        0,
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["output"]["scope"], "impacted", "{v}");
    assert_eq!(v["output"]["command"]["source"], "partial", "{v}");
    fx.expect(&["apply"], 4);
    let o = fx.run(&["call", "verify", r#"{"impacted": "sometimes"}"#]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "a bad value is refused by validation"
    );

    // The whole suite unlocks it.
    fx.verify("--impacted-first", 0);
    fx.expect(&["apply"], 0);
    assert!(fx.on_disk("other/other.go").contains("a * 2"));
}
