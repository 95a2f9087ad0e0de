//! `airlock doctor`, sandbox tiers and restricted hosts, through the real binary: the report of
//! this host, a forced Landlock tier for `exec` and `verify`, a host without user namespaces
//! (made for real with bubblewrap's `--disable-userns`), and the AppArmor profile install.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_airlock");

struct Fx {
    _t: tempfile::TempDir,
    ws: PathBuf,
    home: PathBuf,
}

impl Fx {
    fn new() -> Fx {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        let ws = root.join("ws");
        let home = root.join("home");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(ws.join("a.txt"), "a\n").unwrap();
        Fx { _t: t, ws, home }
    }

    fn cmd(&self, program: &str, pre: &[&str], args: &[&str]) -> Command {
        let mut c = Command::new(program);
        c.args(pre)
            .arg("--workspace")
            .arg(&self.ws)
            .args(args)
            .env_remove("AIRLOCK_SANDBOX")
            .env_remove("AIRLOCK_SANDBOX_WEAKEST")
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("AIRLOCK_SANDBOX_HOST", "off")
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(BIN, &[], args).output().unwrap()
    }
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}): {} {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

#[test]
fn doctor_reports_this_host_by_trying_and_names_the_tier() {
    let fx = Fx::new();
    let o = fx.run(&["doctor", "--json"]);
    let v = json(&o);
    let names: Vec<&str> = v["host"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for n in [
        "user_namespaces",
        "overlayfs",
        "landlock",
        "seccomp",
        "cgroups",
    ] {
        assert!(names.contains(&n), "{n} missing: {v}");
    }
    for c in v["host"]["checks"].as_array().unwrap() {
        assert_eq!(
            c["ok"] == false,
            c["fix"].is_string(),
            "a missing piece without its fix: {c}"
        );
    }
    assert_eq!(v["airlock"]["version"], env!("CARGO_PKG_VERSION"));
    // The tier follows the trial runs: full where the full tier ran, none otherwise (the
    // operator allows nothing weaker by default), and the exit code says whether commands can
    // run.
    let full = v["host"]["full_tier"]["ok"] == true;
    assert_eq!(v["tier"] == "full", full, "{v}");
    assert_eq!(v["tier"].is_null(), !full, "{v}");
    assert_eq!(o.status.code(), Some(if full { 0 } else { 1 }));
    assert!(v["tier_reason"].as_str().is_some_and(|r| !r.is_empty()));
    // The human report says the same.
    let o = fx.run(&["doctor"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(&format!(
            "tier     {}",
            v["tier"].as_str().unwrap_or("none")
        )),
        "{text}"
    );
    assert!(text.contains("user_namespaces"), "{text}");
}

#[test]
fn a_forced_landlock_tier_runs_exec_and_verify_and_says_so() {
    let fx = Fx::new();
    let v = json(&fx.run(&["--sandbox", "landlock", "doctor", "--json"]));
    assert_eq!(v["host"]["landlock_tier"]["ok"], true, "{v}");
    assert_eq!(v["tier"], "landlock", "{v}");
    let o = fx.run(&[
        "--sandbox",
        "landlock",
        "--mode",
        "build",
        "--json",
        "call",
        "bash",
        r#"{"command":"cat a.txt > b.txt; echo made"}"#,
    ]);
    let v = json(&o);
    assert_eq!(v["output"]["tier"], "landlock", "{v}");
    assert_eq!(v["output"]["staged"], serde_json::json!(["A b.txt"]), "{v}");
    assert!(!fx.ws.join("b.txt").exists());
    // verify sees workspace + staged changes in the Landlock tier too (the test command's exit
    // code follows the staged content).
    for (expected, code) in [("a", 0), ("zzz", 1)] {
        let check = format!("test \"$(cat b.txt)\" = {expected}");
        let o = fx.run(&[
            "--sandbox",
            "landlock",
            "--mode",
            "build",
            "--json",
            "verify",
            "--",
            "sh",
            "-c",
            &check,
        ]);
        let v = json(&o);
        assert_eq!(v["exit_code"], code, "{v}");
        assert_eq!(v["tier"], "landlock", "{v}");
    }
    // The default here is the full tier, and the results say that too.
    let v = json(&fx.run(&[
        "--mode",
        "build",
        "--json",
        "call",
        "bash",
        r#"{"command":"true"}"#,
    ]));
    if fx.run(&["doctor", "--json"]).status.success() {
        assert_eq!(v["output"]["tier"], "full", "{v}");
    }
    // `degraded` stays behind the operator's opt-in.
    let o = fx.run(&[
        "--sandbox",
        "degraded",
        "--mode",
        "build",
        "exec",
        "--",
        "true",
    ]);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--allow-degraded"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `airlock ARGS` inside bubblewrap with user namespaces disabled below it: a host that
/// refuses them, for real. None when bubblewrap cannot run here.
fn without_userns(fx: &Fx, env: &[(&str, &str)], args: &[&str]) -> Option<Output> {
    let probe = Command::new("bwrap")
        .args([
            "--unshare-user",
            "--disable-userns",
            "--ro-bind",
            "/",
            "/",
            "true",
        ])
        .output()
        .ok()?;
    if !probe.status.success() {
        eprintln!("bubblewrap cannot disable user namespaces here: not checked");
        return None;
    }
    let t = fx.ws.parent().unwrap().to_str().unwrap().to_string();
    let pre = [
        "--unshare-user",
        "--disable-userns",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--bind",
        "/tmp",
        "/tmp",
        "--bind",
        &t,
        &t,
        "--",
        BIN,
    ];
    let mut c = fx.cmd("bwrap", &pre, args);
    for (k, v) in env {
        c.env(k, v);
    }
    Some(c.output().unwrap())
}

#[test]
fn a_host_without_user_namespaces_names_the_cause_and_falls_back_only_as_allowed() {
    let fx = Fx::new();
    let Some(o) = without_userns(&fx, &[], &["--mode", "build", "exec", "--", "true"]) else {
        return;
    };
    let e = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0), "{e}");
    assert!(e.contains("user namespace"), "{e}");
    assert!(
        e.contains("allows no further user namespaces"),
        "the cause: {e}"
    );
    assert!(e.contains("fix:"), "{e}");
    assert!(e.contains("--sandbox landlock"), "{e}");
    let o = without_userns(
        &fx,
        &[("AIRLOCK_SANDBOX_WEAKEST", "landlock")],
        &[
            "--mode",
            "build",
            "--json",
            "call",
            "bash",
            r#"{"command":"echo x > c.txt"}"#,
        ],
    )
    .unwrap();
    let v = json(&o);
    assert_eq!(v["output"]["tier"], "landlock", "{v}");
    assert_eq!(v["output"]["staged"], serde_json::json!(["A c.txt"]), "{v}");
    let o = without_userns(
        &fx,
        &[("AIRLOCK_SANDBOX_WEAKEST", "landlock")],
        &["doctor", "--json"],
    )
    .unwrap();
    let v = json(&o);
    assert_eq!(v["tier"], "landlock", "{v}");
    assert_eq!(v["host"]["checks"][0]["ok"], false, "{v}");
}

#[test]
fn install_apparmor_writes_the_profile_for_this_binary() {
    let fx = Fx::new();
    let dir = fx.home.join("apparmor.d");
    std::fs::create_dir_all(&dir).unwrap();
    let o = fx.run(&[
        "doctor",
        "--install-apparmor",
        "--apparmor-dir",
        dir.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(dir.join("airlock")).unwrap();
    let exe = Path::new(BIN).canonicalize().unwrap();
    assert!(
        text.contains(&format!(
            "profile airlock \"{}\" flags=(unconfined)",
            exe.display()
        )),
        "{text}"
    );
    assert!(text.contains("  userns,\n"), "{text}");
    assert!(text.contains("abi <abi/4.0>,"), "{text}");
    assert!(text.contains("include if exists <local/airlock>"), "{text}");
    assert!(!text.contains("/usr/bin/airlock\""), "{text}");
    // Loading needs AppArmor in the kernel and its parser: the message says what happened.
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(said.contains("apparmor_parser"), "{said}");
    // Without write access to the directory, nothing is half-written and the fix is named.
    let o = fx.run(&[
        "doctor",
        "--install-apparmor",
        "--apparmor-dir",
        "/proc/airlock-none",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("sudo airlock doctor --install-apparmor"));
}
