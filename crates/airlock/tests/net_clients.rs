//! Network egress by allow-list with real package managers and real registries, through the
//! real `airlock` binary: npm, pip and cargo fetch a real package through the proxy under their
//! preset, and are refused without it (fast, with the policy's rule and how to grant it). The
//! registry hosts are read from each toolchain's own configuration, never written here.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_airlock");

/// A workspace and an empty user config directory beside it.
struct Fx {
    _t: tempfile::TempDir,
    ws: PathBuf,
    config: PathBuf,
}

impl Fx {
    fn new() -> Fx {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        let ws = root.join("ws");
        let config = root.join("config");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(config.join("airlock")).unwrap();
        Fx { _t: t, ws, config }
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.ws.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn airlock(&self, args: &[&str]) -> Output {
        self.airlock_with(args, &[])
    }

    fn airlock_with(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        Command::new(BIN)
            .args(["--workspace", self.ws.to_str().unwrap(), "--mode", "build"])
            .args(args)
            .env("XDG_CONFIG_HOME", &self.config)
            .envs(env.iter().copied())
            .output()
            .unwrap()
    }

    /// `airlock --json exec [grants] -- argv`: the bash JSON and the wall time.
    fn exec(&self, grants: &[&str], argv: &[&str]) -> (Value, Duration) {
        let mut args = vec!["--json", "exec", "--timeout", "60"];
        for g in grants {
            args.extend(["--allow-net", g]);
        }
        args.push("--");
        args.extend(argv);
        let started = Instant::now();
        let out = self.airlock(&args);
        let took = started.elapsed();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (v, took)
    }
}

fn host_output(dir: &Path, program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// `scheme://host[:port]/…` → `host:port`.
fn host_port(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let auth = rest.split('/').next().unwrap();
    if auth.contains(':') {
        auth.to_string()
    } else {
        format!("{auth}:{}", if scheme == "http" { 80 } else { 443 })
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// A refused run: failed, the refusal listed with its rule, the note naming `--allow-net`, and
/// well before the run's 60 s timeout (the client's own retries included).
fn assert_refused(v: &Value, took: Duration, host: &str) {
    assert_ne!(v["exit_code"], 0, "{v}");
    assert!(strings(&v["hosts_contacted"]).is_empty(), "{v}");
    let refused = v["hosts_refused"].as_array().unwrap();
    assert!(
        refused
            .iter()
            .any(|r| r["host"] == host && r["rule"] == "net_not_granted"),
        "{host} not refused in {v}"
    );
    let note = v["note"].as_str().unwrap_or_default();
    assert!(
        note.contains("refused by policy") && note.contains("--allow-net"),
        "{note}"
    );
    assert!(took < Duration::from_secs(30), "a refusal took {took:?}");
}

#[test]
fn npm_installs_through_its_preset_and_is_refused_without_it() {
    let fx = Fx::new();
    fx.write(
        "package.json",
        "{\"name\":\"demo\",\"version\":\"1.0.0\"}\n",
    );
    // The registry npm is configured with on this machine, made the project's own (as a
    // mirror or private registry would be): the preset must follow the project's `.npmrc`.
    let registry = host_output(&fx.ws, "npm", &["config", "get", "registry"]);
    fx.write(".npmrc", &format!("registry={registry}\n"));
    let install = [
        "npm",
        "install",
        "--no-audit",
        "--no-fund",
        "--cache",
        "/tmp/npm-cache",
        "left-pad@1.3.0",
    ];
    let (v, took) = fx.exec(&["preset:pip"], &install);
    assert_refused(&v, took, &host_port(&registry));
    let (v, _) = fx.exec(&["preset:npm"], &install);
    assert_eq!(v["exit_code"], 0, "{v}");
    assert_eq!(
        strings(&v["hosts_contacted"]),
        [host_port(&registry)],
        "{v}"
    );
    let staged = strings(&v["staged"]);
    assert!(
        staged.contains(&"A node_modules/left-pad/index.js".to_string()),
        "{staged:?}"
    );
    // Fetched into the changeset, nothing on disk yet.
    assert!(!fx.ws.join("node_modules").exists());
}

#[test]
fn pip_downloads_through_its_preset_and_is_refused_without_it() {
    let fx = Fx::new();
    // pip's own index (no pip.conf inside the sandbox names another).
    let index = host_output(
        &fx.ws,
        "python3",
        &[
            "-c",
            "from pip._internal.models.index import PyPI; print(PyPI.simple_url)",
        ],
    );
    let download = [
        "python3",
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-cache-dir",
        "--disable-pip-version-check",
        "-d",
        "/tmp/dl",
        "six==1.16.0",
    ];
    let (v, took) = fx.exec(&["preset:npm"], &download);
    assert_refused(&v, took, &host_port(&index));
    let (v, _) = fx.exec(&["preset:pip"], &download);
    assert_eq!(v["exit_code"], 0, "{v}");
    let contacted = strings(&v["hosts_contacted"]);
    assert!(contacted.contains(&host_port(&index)), "{v}");
    assert!(
        v["stdout"]
            .as_str()
            .unwrap()
            .contains("Saved /tmp/dl/six-1.16.0"),
        "{v}"
    );
}

/// Removes the workspace package caches a test made under the real `$HOME` (a granted run of
/// a cargo workspace makes one), whatever the test's outcome.
struct NewCaches(PathBuf, Vec<PathBuf>);

impl NewCaches {
    fn watch() -> NewCaches {
        let dir =
            PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/airlock/cargo-home");
        let before = std::fs::read_dir(&dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        NewCaches(dir, before)
    }
}

impl Drop for NewCaches {
    fn drop(&mut self) {
        for e in std::fs::read_dir(&self.0).into_iter().flatten().flatten() {
            if !self.1.contains(&e.path()) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

#[test]
fn cargo_fetches_through_its_preset_and_is_refused_without_it() {
    let _caches = NewCaches::watch();
    let fx = Fx::new();
    fx.write(
        "Cargo.toml",
        "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nitoa = \"=1.0.11\"\n",
    );
    fx.write(
        "src/main.rs",
        "fn main() { println!(\"{}\", itoa::Buffer::new().format(7)); }\n",
    );
    // The hosts cargo uses are the index's and whatever download host the index's own
    // `config.json` names (a mirror may serve both): fetched with a private CARGO_HOME.
    let fetch = ["env", "CARGO_HOME=/tmp/cargo-home", "cargo", "fetch"];
    let (v, took) = fx.exec(&["preset:npm"], &fetch);
    assert_ne!(v["exit_code"], 0, "{v}");
    assert!(v["hosts_refused"][0]["rule"] == "net_not_granted", "{v}");
    assert!(took < Duration::from_secs(30), "{took:?}");
    let (v, _) = fx.exec(&["preset:cargo"], &fetch);
    assert_eq!(v["exit_code"], 0, "{v}");
    let contacted = strings(&v["hosts_contacted"]);
    assert!(
        !contacted.is_empty() && v["hosts_refused"].as_array().unwrap().is_empty(),
        "{v}"
    );
    // Every host cargo reached is one the registry's own index names: its index host, and
    // the `dl` host of its config.json.
    let index_host = contacted[0].clone();
    let config = host_output(
        &fx.ws,
        "curl",
        &[
            "-sS",
            &format!(
                "https://{}/config.json",
                index_host.trim_end_matches(":443")
            ),
        ],
    );
    let dl: Value = serde_json::from_str(&config).unwrap();
    let allowed = [index_host.clone(), host_port(dl["dl"].as_str().unwrap())];
    assert!(
        contacted.iter().all(|h| allowed.contains(h)),
        "{contacted:?} vs {allowed:?}"
    );
    assert!(
        strings(&v["staged"]).contains(&"A Cargo.lock".to_string()),
        "{v}"
    );
}

#[test]
fn config_grants_and_denies_and_the_flag_is_checked() {
    let fx = Fx::new();
    let probe = [
        "curl",
        "-sS",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "https://pypi.org/simple/six/",
    ];
    // Granted by the user config alone.
    std::fs::write(
        fx.config.join("airlock/config.toml"),
        "[net]\nallow = [\"pypi.org\"]\n",
    )
    .unwrap();
    let (v, _) = fx.exec(&[], &probe);
    assert_eq!(v["exit_code"], 0, "{v}");
    assert_eq!(strings(&v["hosts_contacted"]), ["pypi.org:443"]);
    // A deny rule of the config wins over the command line's grant.
    std::fs::write(
        fx.config.join("airlock/config.toml"),
        "[net]\ndeny = [\"pypi.org\"]\n",
    )
    .unwrap();
    let (v, _) = fx.exec(&["pypi.org"], &probe);
    assert_ne!(v["exit_code"], 0, "{v}");
    assert_eq!(v["hosts_refused"][0]["rule"], "net_denied_by_rule", "{v}");
    // A malformed grant is a usage error.
    let out = fx.airlock(&["exec", "--allow-net", "https://pypi.org/", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a URL"));
    // No grant: no proxy, no proxy variables, no network fields.
    std::fs::write(fx.config.join("airlock/config.toml"), "").unwrap();
    let (v, _) = fx.exec(
        &[],
        &["sh", "-c", "echo \"[$HTTPS_PROXY$https_proxy$ALL_PROXY]\""],
    );
    assert_eq!(v["stdout"].as_str().unwrap().trim(), "[]", "{v}");
    assert!(v.get("hosts_contacted").is_none(), "{v}");
}

#[test]
fn granted_runs_go_through_the_warm_host_too() {
    let fx = Fx::new();
    let probe = [
        "--json",
        "exec",
        "--allow-net",
        "pypi.org",
        "--",
        "curl",
        "-sS",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "https://pypi.org/simple/six/",
    ];
    let mut warm = 0;
    for _ in 0..4 {
        let out = fx.airlock_with(&probe, &[("AIRLOCK_SANDBOX_HOST", "always")]);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["exit_code"], 0, "{v}");
        assert_eq!(strings(&v["hosts_contacted"]), ["pypi.org:443"], "{v}");
        warm += usize::from(v["warm_host"] == true);
    }
    assert!(
        warm >= 2,
        "granted runs should start in the warm host ({warm} of 4 did)"
    );
    // And an ungranted run of the same warm host has no proxy.
    let out = fx.airlock_with(
        &[
            "--json",
            "exec",
            "--",
            "sh",
            "-c",
            "echo \"[$HTTPS_PROXY]\"",
        ],
        &[("AIRLOCK_SANDBOX_HOST", "always")],
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["stdout"].as_str().unwrap().trim(), "[]", "{v}");
}
