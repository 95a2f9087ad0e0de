//! Per-workspace build and test caches, through the `airlock` binary with real cargo and go:
//! they persist across runs outside the changeset, a second verification does not rebuild what
//! the first built, the agent's commands and verifications keep apart caches, two workspaces
//! never share one, `airlock cache drop` empties them, the agent's file tools cannot reach them,
//! and ignored build outputs stay out of `status` and `diff`.

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::SystemTime;

const BIN: &str = env!("CARGO_BIN_EXE_airlock");

struct Fx {
    _t: tempfile::TempDir,
    root: PathBuf,
    ws: PathBuf,
}

fn real_home() -> Option<PathBuf> {
    std::env::var_os("HOME").map(PathBuf::from)
}

fn have(program: &str) -> bool {
    Command::new(program)
        .arg("version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

impl Fx {
    fn new() -> Fx {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        let ws = root.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        Fx { _t: t, root, ws }
    }

    fn write(&self, rel: &str, body: &str) {
        write_in(&self.ws, rel, body);
    }

    fn cmd_in(&self, ws: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.arg("--workspace")
            .arg(ws)
            .arg("--mode")
            .arg("build")
            .args(args)
            .env("XDG_CONFIG_HOME", self.root.join("config"))
            .stdin(Stdio::null());
        // The real toolchains (cargo through rustup, go's module cache) are exposed from HOME.
        if let Some(h) = real_home() {
            c.env("HOME", &h);
            c.env(
                "PATH",
                format!(
                    "{}:{}",
                    h.join(".cargo/bin").display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            );
        }
        c
    }

    fn run_in(&self, ws: &Path, args: &[&str]) -> Output {
        self.cmd_in(ws, args).output().expect("airlock runs")
    }

    fn ok_in(&self, ws: &Path, args: &[&str]) -> Output {
        let o = self.run_in(ws, args);
        assert_eq!(o.status.code(), Some(0), "airlock {args:?}: {}", all(&o));
        o
    }

    fn ok(&self, args: &[&str]) -> Output {
        self.ok_in(&self.ws, args)
    }

    fn status(&self) -> Value {
        json(&self.ok(&["--json", "status"]))
    }

    fn verify_passes(&self) -> Value {
        let v = json(&self.ok(&["--json", "verify", "--timeout", "120"]));
        assert_eq!(v["verdict"], "passed", "{v}");
        v
    }
}

fn write_in(ws: &Path, rel: &str, body: &str) {
    let p = ws.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, body).unwrap();
}

fn all(o: &Output) -> String {
    format!(
        "stdout {} stderr {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn json(o: &Output) -> Value {
    let text = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {}", all(o)))
}

/// Every regular file below `dir` with its modification time.
fn files_with_mtimes(dir: &Path) -> BTreeMap<PathBuf, SystemTime> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let m = std::fs::symlink_metadata(e.path()).unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else if m.is_file() {
                out.insert(e.path(), m.modified().unwrap());
            }
        }
    }
    out
}

fn has_cargo() -> bool {
    real_home().is_some_and(|h| h.join(".cargo/bin/cargo").exists() && h.join(".rustup").is_dir())
}

/// A crate with a path dependency: a change to the crate must not rebuild the dependency.
fn cargo_project(fx: &Fx) {
    fx.write(
        "Cargo.toml",
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [dependencies]\nhelper = { path = \"helper\" }\n",
    );
    fx.write(
        "helper/Cargo.toml",
        "[package]\nname = \"helper\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    fx.write("helper/src/lib.rs", "pub fn base() -> i32 {\n    40\n}\n");
    fx.write(
        "src/lib.rs",
        "pub fn answer() -> i32 {\n    helper::base() + 2\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn answers() {\n        assert_eq!(super::answer(), 42);\n    }\n}\n",
    );
    fx.write(".gitignore", "target/\n");
}

fn helper_artifacts(cache: &Path) -> BTreeMap<PathBuf, SystemTime> {
    files_with_mtimes(&cache.join("debug/deps"))
        .into_iter()
        .filter(|(p, _)| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("libhelper-"))
        })
        .collect()
}

#[test]
fn exec_cargo_test_leaves_status_free_of_target() {
    if !has_cargo() {
        eprintln!("no rustup toolchain in HOME; nothing to check");
        return;
    }
    let fx = Fx::new();
    cargo_project(&fx);
    fx.ok(&["exec", "--", "cargo", "test", "--offline"]);
    let st = fx.status();
    let text = st["text"].as_str().unwrap();
    assert!(!text.contains("target/"), "{text}");
    for e in st["entries"].as_array().unwrap() {
        assert!(!e["path"].as_str().unwrap().starts_with("target"), "{e}");
    }
    let diff = String::from_utf8_lossy(&fx.ok(&["diff"]).stdout).into_owned();
    assert!(!diff.contains("target/"), "{diff}");
    // The build persisted in the workspace's exec cache: a second run compiles nothing.
    let o = fx.ok(&["exec", "--", "cargo", "test", "--offline"]);
    assert!(!all(&o).contains("Compiling"), "{}", all(&o));
}

#[test]
fn ignored_outputs_are_summarised_and_a_written_ignored_file_stays_visible() {
    let fx = Fx::new();
    fx.write(".gitignore", "build/\n__pycache__/\n");
    fx.write("src/main.c", "int main(void) { return 0; }\n");
    let o = fx.ok(&[
        "exec",
        "--",
        "sh",
        "-c",
        "mkdir -p build/obj __pycache__ && for i in 1 2 3 4 5; do echo $i > build/obj/f$i.o; done \
         && echo x > __pycache__/m.pyc && echo new > src/util.c",
    ]);
    // The command's own list of what it staged: the outputs in one line.
    let said = all(&o);
    assert!(said.contains("src/util.c"), "{said}");
    assert!(!said.contains("f1.o"), "{said}");
    // … grouped by output directory, named, never one line per file.
    assert_eq!(
        said.matches("6 file(s) under ignored paths").count(),
        1,
        "{said}"
    );
    assert!(said.contains("build/obj/  (5 file(s))"), "{said}");
    // The agent writes an ignored file on purpose: it stays visible (and is applied).
    fx.ok(&[
        "call",
        "write_file",
        &json!({"path": "build/keep.txt", "content": "kept\n"}).to_string(),
    ]);
    let st = fx.status();
    let text = st["text"].as_str().unwrap();
    let paths: Vec<&str> = st["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert!(paths.contains(&"src/util.c"), "{st}");
    assert!(paths.contains(&"build/keep.txt"), "{st}");
    assert!(
        !paths
            .iter()
            .any(|p| p.contains("obj") || p.contains("pycache")),
        "{st}"
    );
    let lines: Vec<&str> = text.lines().collect();
    assert!(text.contains("build/keep.txt"), "{text}");
    // Session-local outputs are listed by group, not file by file.
    assert!(!text.contains("f1.o"), "{text}");
    assert!(
        text.contains("build/obj/  (5 file(s))") && text.contains("__pycache__/m.pyc"),
        "{text}"
    );
    let summary: Vec<&&str> = lines.iter().filter(|l| l.contains("ignored")).collect();
    assert_eq!(summary.len(), 1, "one heading: {text}");
    assert!(summary[0].contains('6'), "{text}");
    assert_eq!(st["session_local"]["count"], 6, "{st}");
    let diff = String::from_utf8_lossy(&fx.ok(&["diff"]).stdout).into_owned();
    assert!(
        diff.contains("src/util.c") && diff.contains("build/keep.txt"),
        "{diff}"
    );
    assert!(!diff.contains("f1.o"), "{diff}");
    // Named explicitly, an ignored output's diff is shown.
    let named = String::from_utf8_lossy(&fx.ok(&["diff", "build/obj/f1.o"]).stdout).into_owned();
    assert!(named.contains("build/obj/f1.o"), "{named}");
    // A command that rewrites the kept file leaves it visible.
    fx.ok(&["exec", "--", "sh", "-c", "echo changed > build/keep.txt"]);
    let st = fx.status();
    let keep = st["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"] == "build/keep.txt")
        .cloned();
    assert!(
        keep.is_some_and(|e| e.get("session_local").is_none()),
        "{st}"
    );
}

#[test]
fn a_second_cargo_verify_does_not_rebuild_and_the_target_is_seeded() {
    if !has_cargo() {
        eprintln!("no rustup toolchain in HOME; nothing to check");
        return;
    }
    let fx = Fx::new();
    cargo_project(&fx);
    // The developer's own build: the verify cache starts from a copy of it.
    let o = Command::new(real_home().unwrap().join(".cargo/bin/cargo"))
        .args(["test", "--offline", "--no-run"])
        .current_dir(&fx.ws)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", all(&o));
    let cache = fx.ws.join(".airlock/cache/verify/cargo-target");
    fx.verify_passes();
    let seeded = helper_artifacts(&cache);
    assert!(
        !seeded.is_empty(),
        "the verify cache holds the helper crate"
    );
    let own = helper_artifacts(&fx.ws.join("target"));
    let by_name = |m: &BTreeMap<PathBuf, SystemTime>| -> Vec<(std::ffi::OsString, SystemTime)> {
        m.iter()
            .map(|(p, t)| (p.file_name().unwrap().to_owned(), *t))
            .collect()
    };
    assert_eq!(
        by_name(&seeded),
        by_name(&own),
        "seeded from the workspace's target/ (same files, same times), and not rebuilt"
    );
    // A one-line change to the crate: the dependency is not rebuilt.
    fx.ok(&[
        "call",
        "write_file",
        &json!({"path": "src/lib.rs", "content": "pub fn answer() -> i32 {\n    helper::base() + 1 + 1\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn answers() {\n        assert_eq!(super::answer(), 42);\n    }\n}\n"}).to_string(),
    ]);
    fx.verify_passes();
    assert_eq!(
        helper_artifacts(&cache),
        seeded,
        "the helper crate was rebuilt"
    );
    // Nothing of the build reached the changeset, and the workspace's own target/ is untouched.
    let st = fx.status();
    assert_eq!(st["entries"].as_array().unwrap().len(), 1, "{st}");
    assert_eq!(helper_artifacts(&fx.ws.join("target")), own);
}

fn go_project(fx: &Fx) {
    fx.write("go.mod", "module example.com/demo\n\ngo 1.19\n");
    fx.write(
        "calc/calc.go",
        "package calc\n\nimport \"strings\"\n\nfunc Shout(s string) string { return strings.ToUpper(s) + \"!\" }\n",
    );
    fx.write(
        "calc/calc_test.go",
        "package calc\n\nimport \"testing\"\n\nfunc TestShout(t *testing.T) {\n\tif Shout(\"a\") != \"A!\" {\n\t\tt.Fatal(Shout(\"a\"))\n\t}\n}\n",
    );
    fx.write(
        "greet/greet.go",
        "package greet\n\nfunc Hello() string { return \"hello\" }\n",
    );
    fx.write(
        "greet/greet_test.go",
        "package greet\n\nimport \"testing\"\n\nfunc TestHello(t *testing.T) {\n\tif Hello() != \"hello\" {\n\t\tt.Fatal(Hello())\n\t}\n}\n",
    );
}

#[test]
fn a_second_go_verify_reuses_the_build_cache() {
    if !have("go") {
        eprintln!("no go toolchain; nothing to check");
        return;
    }
    let fx = Fx::new();
    go_project(&fx);
    let cache = fx.ws.join(".airlock/cache/verify/go-build");
    fx.verify_passes();
    let contents = |dir: &Path| -> BTreeMap<PathBuf, Vec<u8>> {
        files_with_mtimes(dir)
            .into_keys()
            .map(|p| {
                let mut bytes = std::fs::read(&p).unwrap();
                // An action entry (`v1 ACTION OUTPUT SIZE TIME`) names its output; go restamps
                // the time when it uses the entry.
                if p.to_string_lossy().ends_with("-a") {
                    let text = String::from_utf8_lossy(&bytes).into_owned();
                    let fields: Vec<&str> = text.split_whitespace().take(4).collect();
                    bytes = fields.join(" ").into_bytes();
                }
                (p, bytes)
            })
            .collect()
    };
    let first = contents(&cache);
    assert!(first.len() > 4, "go wrote its build cache: {}", first.len());
    fx.ok(&[
        "call",
        "write_file",
        &json!({"path": "greet/greet.go", "content": "package greet\n\nfunc Hello() string { return \"hello\" }\n\nfunc Extra() int { return 1 }\n"}).to_string(),
    ]);
    fx.verify_passes();
    let second = contents(&cache);
    // Every action of the first run maps to the same output: nothing was rebuilt.
    for (p, bytes) in &first {
        assert_eq!(second.get(p), Some(bytes), "{} changed", p.display());
    }
    let added = second.len() - first.len();
    assert!(added > 0, "the changed package was built again");
    assert!(
        added < first.len(),
        "the second verify added {added} entries, the first {}",
        first.len()
    );
}

#[test]
fn caches_persist_per_domain_and_per_workspace_and_drop_empties_them() {
    let fx = Fx::new();
    fx.write("a.txt", "a\n");
    let other = fx.root.join("other");
    write_in(&other, "b.txt", "b\n");
    // An exec writes its cache; the next exec sees it; nothing is staged.
    fx.ok(&[
        "exec",
        "--",
        "sh",
        "-c",
        "echo kept > \"$XDG_CACHE_HOME/marker\" && echo \"$GOCACHE $CARGO_TARGET_DIR\"",
    ]);
    let o = fx.ok(&["exec", "--", "cat", "/var/cache/airlock/xdg/marker"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "kept\n");
    let st = fx.status();
    assert!(st["entries"].as_array().unwrap().is_empty(), "{st}");
    let host = fx.ws.join(".airlock/cache/exec/xdg/marker");
    assert!(host.is_file());
    assert!(!fx.ws.join(".airlock/cache/verify/xdg/marker").exists());
    // Another workspace has caches of its own.
    let o = fx.run_in(
        &other,
        &["exec", "--", "cat", "/var/cache/airlock/xdg/marker"],
    );
    assert_ne!(o.status.code(), Some(0), "{}", all(&o));
    fx.ok_in(
        &other,
        &[
            "exec",
            "--",
            "sh",
            "-c",
            "echo other > \"$XDG_CACHE_HOME/o\"",
        ],
    );
    assert!(!fx.ws.join(".airlock/cache/exec/xdg/o").exists());
    assert!(other.join(".airlock/cache/exec/xdg/o").is_file());
    // The workspace's state is not reachable through the workspace inside the sandbox.
    let o = fx.run_in(
        &fx.ws,
        &["exec", "--", "cat", ".airlock/cache/exec/xdg/marker"],
    );
    assert!(!all(&o).contains("kept"), "{}", all(&o));
    // status lists it with its size; drop empties every cache.
    let st = json(&fx.ok(&["--json", "cache", "status"]));
    let xdg = st["caches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["domain"] == "exec" && c["name"] == "xdg")
        .cloned()
        .unwrap_or_else(|| panic!("{st}"));
    assert_eq!(xdg["bytes"], 5, "{st}");
    assert_eq!(xdg["files"], 1, "{st}");
    let d = json(&fx.ok(&["--json", "cache", "drop"]));
    assert_eq!(d["dropped_bytes"], 5, "{d}");
    assert!(!host.exists());
    let st = json(&fx.ok(&["--json", "cache", "status"]));
    assert_eq!(st["total_bytes"], 0, "{st}");
    let o = fx.run_in(
        &fx.ws,
        &["exec", "--", "cat", "/var/cache/airlock/xdg/marker"],
    );
    assert_ne!(o.status.code(), Some(0), "{}", all(&o));
    assert!(
        other.join(".airlock/cache/exec/xdg/o").is_file(),
        "only this workspace's"
    );
}

#[test]
fn the_agents_file_tools_cannot_reach_the_caches() {
    let fx = Fx::new();
    fx.write("a.txt", "a\n");
    fx.ok(&[
        "exec",
        "--",
        "sh",
        "-c",
        "echo secret > \"$XDG_CACHE_HOME/m\"",
    ]);
    let path = ".airlock/cache/exec/xdg/m";
    for (tool, args) in [
        ("read_file", json!({ "path": path })),
        ("write_file", json!({ "path": path, "content": "poison" })),
        (
            "write_file",
            json!({ "path": ".airlock/cache/verify/go-build/x", "content": "poison" }),
        ),
        ("list_dir", json!({ "path": ".airlock/cache" })),
    ] {
        let o = fx.run_in(&fx.ws, &["--json", "call", tool, &args.to_string()]);
        assert_ne!(o.status.code(), Some(0), "{tool} {args}: {}", all(&o));
        let v = json(&o);
        assert_eq!(v["stage"], "jail", "{tool}: {v}");
        assert!(!all(&o).contains("secret"), "{}", all(&o));
    }
    for (tool, args) in [
        ("grep", json!({ "pattern": "secret" })),
        ("glob", json!({ "pattern": "**/m" })),
    ] {
        let o = fx.run_in(&fx.ws, &["--json", "call", tool, &args.to_string()]);
        assert!(!all(&o).contains(".airlock"), "{tool}: {}", all(&o));
    }
    assert_eq!(
        std::fs::read_to_string(fx.ws.join(path)).unwrap(),
        "secret\n"
    );
    assert!(!fx.ws.join(".airlock/cache/verify/go-build/x").exists());
}

#[test]
fn without_kernel_isolation_a_run_uses_the_caches_at_their_host_paths() {
    let fx = Fx::new();
    fx.write("a.txt", "a\n");
    let mut c = fx.cmd_in(
        &fx.ws,
        &[
            "--allow-degraded",
            "exec",
            "--",
            "sh",
            "-c",
            "echo degraded > \"$XDG_CACHE_HOME/d\" && echo \"$XDG_CACHE_HOME\"",
        ],
    );
    c.env("AIRLOCK_SANDBOX", "degraded");
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", all(&o));
    let host = fx.ws.join(".airlock/cache/exec/xdg");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        host.display().to_string()
    );
    assert_eq!(
        std::fs::read_to_string(host.join("d")).unwrap(),
        "degraded\n"
    );
}
