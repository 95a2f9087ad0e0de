//! Secrets stay out of the sandbox, through the real `airlock` binary: toolchain directories of
//! `$HOME` are exposed by allow-list with credential files masked, the workspace's sensitive
//! files (`.env`, keys, …) read as empty inside `exec` and `verify`, nothing written over a
//! masked file is staged or applied, and the `grep`/`glob` tools skip sensitive files.
//!
//! Every sandbox test runs twice: cold (fresh namespaces) and through the session's warm host.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_airlock");

/// A temporary workspace with a fake `HOME` beside it.
struct Fx {
    _t: tempfile::TempDir,
    ws: PathBuf,
    home: PathBuf,
    host_mode: &'static str,
    marker: String,
}

impl Fx {
    fn new(host_mode: &'static str) -> Fx {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        let ws = root.join("ws");
        let home = root.join("home");
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(ws.join("src/main.rs"), "fn main() {}\n").unwrap();
        std::fs::write(ws.join("README.md"), "# sample\n").unwrap();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let marker = format!("SECRET-MARKER-{}-{nanos}", std::process::id());
        Fx {
            _t: t,
            ws,
            home,
            host_mode,
            marker,
        }
    }

    /// The fake HOME's toolchain: credentials beside a runnable `~/.cargo/bin/hello`.
    fn with_toolchain_home(&self) {
        let h = &self.home;
        for d in [
            ".cargo/bin",
            ".cargo/registry/index",
            ".cargo/registry/cache",
            ".npm/_logs",
            ".npm/_cacache",
            ".config/gh",
        ] {
            std::fs::create_dir_all(h.join(d)).unwrap();
        }
        let m = &self.marker;
        std::fs::write(
            h.join(".cargo/credentials.toml"),
            format!("[registry]\ntoken = \"{m}\"\n"),
        )
        .unwrap();
        std::fs::write(h.join(".cargo/credentials"), format!("token = \"{m}\"\n")).unwrap();
        std::fs::write(
            h.join(".cargo/config.toml"),
            format!("[registry]\ntoken = \"{m}\"\n"),
        )
        .unwrap();
        std::fs::write(h.join(".npm/_logs/x.log"), format!("auth {m}\n")).unwrap();
        std::fs::write(h.join(".npm/_cacache/index"), "cache-ok\n").unwrap();
        std::fs::write(h.join(".npmrc"), format!("//r/:_authToken={m}\n")).unwrap();
        std::fs::write(
            h.join(".config/gh/hosts.yml"),
            format!("oauth_token: {m}\n"),
        )
        .unwrap();
        // A credential a wider allow-list would reach: inside an exposed directory.
        std::fs::write(h.join(".cargo/registry/credentials.toml"), m).unwrap();
        std::fs::write(h.join(".cargo/registry/index/api.token"), m).unwrap();
        let hello = h.join(".cargo/bin/hello");
        std::fs::write(&hello, "#!/bin/sh\necho hello-from-toolchain\n").unwrap();
        std::fs::set_permissions(&hello, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        let path = format!(
            "{}:{}",
            self.home.join(".cargo/bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        c.arg("--workspace")
            .arg(&self.ws)
            .args(args)
            .env("HOME", &self.home)
            .env("PATH", path)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("AIRLOCK_SANDBOX_HOST", self.host_mode)
            .env("AIRLOCK_SANDBOX_HOST_IDLE", "10")
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("airlock runs")
    }

    fn exec(&self, argv: &[&str]) -> Output {
        let mut args = vec!["--mode", "build", "exec", "--"];
        args.extend_from_slice(argv);
        self.run(&args)
    }

    /// Stages `body` as `name` with `write_file` and runs it with `sh`: past the guard, so the
    /// sandbox itself is what is tested.
    fn script(&self, name: &str, body: &str) -> Output {
        let args = serde_json::json!({ "path": name, "content": body }).to_string();
        let o = self.run(&["--mode", "build", "call", "write_file", &args]);
        assert_eq!(o.status.code(), Some(0), "staging {name}: {}", err(&o));
        self.exec(&["sh", name])
    }
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn all(o: &Output) -> String {
    format!("{}{}", out(o), err(o))
}

fn toolchain_credentials_stay_hidden(host_mode: &'static str) {
    let fx = Fx::new(host_mode);
    fx.with_toolchain_home();
    let o = fx.script(
        "probe.sh",
        "cat ~/.cargo/credentials.toml ~/.cargo/credentials ~/.cargo/config.toml\n\
         cat ~/.npm/_logs/x.log ~/.npmrc ~/.config/gh/hosts.yml\n\
         cat ~/.cargo/registry/credentials.toml ~/.cargo/registry/index/api.token\n\
         ls -la ~ ~/.cargo ~/.npm ~/.cargo/registry\n\
         grep -r SECRET ~ 2>&1\n\
         cat ~/.npm/_cacache/index\n\
         hello\n",
    );
    let text = all(&o);
    assert!(
        !text.contains(&fx.marker),
        "a toolchain credential was readable in the sandbox:\n{text}"
    );
    assert!(
        out(&o).contains("hello-from-toolchain"),
        "the allow-listed toolchain binary must still run: {text}"
    );
    assert!(
        out(&o).contains("cache-ok"),
        "npm's content cache is exposed: {text}"
    );
    // The program form finds the toolchain binary too.
    let o = fx.exec(&["hello"]);
    assert_eq!(o.status.code(), Some(0), "{}", all(&o));
    assert!(out(&o).contains("hello-from-toolchain"), "{}", all(&o));
}

#[test]
fn toolchain_credentials_stay_hidden_cold() {
    toolchain_credentials_stay_hidden("off");
}

#[test]
fn toolchain_credentials_stay_hidden_warm() {
    toolchain_credentials_stay_hidden("always");
}

/// The real toolchain of the machine's `HOME` still builds through the allow-list.
#[test]
fn real_cargo_runs_through_the_allow_list() {
    let Some(real_home) = std::env::var_os("HOME").map(PathBuf::from) else {
        return;
    };
    if !real_home.join(".cargo/bin/cargo").exists() || !real_home.join(".rustup").is_dir() {
        eprintln!("no rustup toolchain in HOME; nothing to check");
        return;
    }
    let fx = Fx::new("off");
    let mut c = fx.cmd(&["--mode", "build", "exec", "--", "cargo", "--version"]);
    c.env("HOME", &real_home).env(
        "PATH",
        format!(
            "{}:{}",
            real_home.join(".cargo/bin").display(),
            std::env::var("PATH").unwrap_or_default()
        ),
    );
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", all(&o));
    assert!(out(&o).starts_with("cargo "), "{}", all(&o));
}

fn workspace_secrets_are_masked(host_mode: &'static str) {
    let fx = Fx::new(host_mode);
    let m = &fx.marker;
    std::fs::write(fx.ws.join(".env"), format!("API_KEY={m}\n")).unwrap();
    std::fs::create_dir_all(fx.ws.join("config/deep")).unwrap();
    std::fs::write(fx.ws.join("config/deep/.env.local"), format!("K={m}\n")).unwrap();
    std::fs::write(fx.ws.join("config/server.pem"), m).unwrap();
    std::fs::create_dir_all(fx.ws.join(".ssh")).unwrap();
    std::fs::write(fx.ws.join(".ssh/id_ed25519"), m).unwrap();

    // Plain command lines: the guard may let them through; the sandbox must not show the secret.
    for argv in [
        &["cat", ".env"][..],
        &["cat", "config/deep/.env.local"],
        &[
            "sh",
            "-c",
            "cat .env config/server.pem .ssh/id_ed25519; grep -r API .",
        ],
    ] {
        let o = fx.exec(argv);
        assert!(
            !all(&o).contains(m.as_str()),
            "{argv:?} read a workspace secret: {}",
            all(&o)
        );
    }
    let o = fx.exec(&["cp", ".env", "notes.txt"]);
    assert!(!all(&o).contains(m.as_str()), "{}", all(&o));
    let o = fx.script(
        "tamper.sh",
        "cp config/deep/.env.local copy.txt\n\
         cat .env > env-copy.txt\n\
         echo replaced > .env\n\
         rm -f .env config/deep/.env.local\n\
         mv config/server.pem moved.pem\n\
         tar cf all.tar . 2>/dev/null\n\
         exit 0\n",
    );
    assert!(!all(&o).contains(m.as_str()), "{}", all(&o));

    // Nothing staged carries the secret, and no change of a real secret is staged.
    let o = fx.run(&["--json", "status"]);
    let status: serde_json::Value =
        serde_json::from_str(out(&o).lines().last().unwrap_or("{}")).unwrap();
    for e in status["entries"].as_array().expect("entries") {
        let path = e["path"].as_str().unwrap();
        assert!(
            !matches!(
                path,
                ".env" | "config/deep/.env.local" | "config/server.pem" | ".ssh/id_ed25519"
            ),
            "a masked secret was staged as changed: {e}"
        );
    }
    let o = fx.run(&["diff"]);
    assert!(
        !out(&o).contains(m.as_str()),
        "the staged changes carry the secret: {}",
        out(&o)
    );
    // Apply whatever was staged; the disk keeps its secrets and gains no copy of them.
    let o = fx.run(&[
        "--mode",
        "build",
        "verify",
        "--",
        "echo",
        "1 passed, 0 failed",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", all(&o));
    let o = fx.run(&["--mode", "build", "apply"]);
    assert!(
        matches!(o.status.code(), Some(0) | Some(3) | Some(4)),
        "{}",
        all(&o)
    );
    assert_eq!(
        std::fs::read_to_string(fx.ws.join(".env")).unwrap(),
        format!("API_KEY={m}\n")
    );
    assert!(fx.ws.join("config/deep/.env.local").exists());
    assert!(fx.ws.join("config/server.pem").exists());
    for name in [
        "notes.txt",
        "copy.txt",
        "env-copy.txt",
        "all.tar",
        "moved.pem",
    ] {
        if let Ok(bytes) = std::fs::read(fx.ws.join(name)) {
            assert!(
                !String::from_utf8_lossy(&bytes).contains(m.as_str()),
                "apply wrote the secret into {name}"
            );
        }
    }
}

#[test]
fn workspace_secrets_are_masked_cold() {
    workspace_secrets_are_masked("off");
}

#[test]
fn workspace_secrets_are_masked_warm() {
    workspace_secrets_are_masked("always");
}

/// A secret the agent's own command wrote is staged (flagged) and masked from later commands.
#[test]
fn staged_secrets_are_masked_too() {
    let fx = Fx::new("always");
    let m = &fx.marker;
    let o = fx.exec(&["sh", "-c", &format!("echo {m} > .env.production")]);
    assert_eq!(o.status.code(), Some(0), "{}", all(&o));
    let o = fx.exec(&["cat", ".env.production"]);
    assert!(!all(&o).contains(m.as_str()), "{}", all(&o));
}

#[test]
fn verify_runs_with_secrets_masked() {
    let fx = Fx::new("off");
    let m = &fx.marker;
    std::fs::write(fx.ws.join(".env"), format!("API_KEY={m}\n")).unwrap();
    let o = fx.run(&[
        "--mode",
        "build",
        "--json",
        "verify",
        "--",
        "sh",
        "-c",
        "cat .env; exit 1",
    ]);
    assert!(
        !all(&o).contains(m.as_str()),
        "verify's diagnostics carry the secret: {}",
        all(&o)
    );
}

#[test]
fn degraded_backend_neither_copies_nor_deletes_secrets() {
    let fx = Fx::new("off");
    let m = &fx.marker;
    std::fs::write(fx.ws.join(".env"), format!("API_KEY={m}\n")).unwrap();
    let mut c = fx.cmd(&[
        "--mode",
        "build",
        "--allow-degraded",
        "exec",
        "--",
        "sh",
        "-c",
        "cat .env; cp .env notes.txt; rm -f .env; exit 0",
    ]);
    c.env("AIRLOCK_SANDBOX", "degraded");
    let o = c.output().unwrap();
    assert!(!all(&o).contains(m.as_str()), "{}", all(&o));
    let o = fx.run(&["--json", "status"]);
    let text = out(&o);
    assert!(
        !text.contains("\".env\""),
        "the degraded run staged a change of .env: {text}"
    );
    let o = fx.run(&["diff"]);
    assert!(!out(&o).contains(m.as_str()), "{}", out(&o));
}

#[test]
fn operator_can_expose_a_sensitive_file_for_tests() {
    let fx = Fx::new("off");
    let m = &fx.marker;
    std::fs::write(fx.ws.join(".env"), format!("API_KEY={m}\n")).unwrap();
    std::fs::write(fx.ws.join(".env.test"), "TEST_ONLY=visible\n").unwrap();
    let cfg = fx.home.join(".config/airlock");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("config.toml"),
        "[sandbox]\nexpose_sensitive = [\".env.test\"]\n",
    )
    .unwrap();
    let o = fx.exec(&["sh", "-c", "cat .env.test .env"]);
    assert!(out(&o).contains("TEST_ONLY=visible"), "{}", all(&o));
    assert!(!all(&o).contains(m.as_str()), "{}", all(&o));
    // The same file in the workspace's own config is not the operator's word.
    std::fs::remove_file(cfg.join("config.toml")).unwrap();
    std::fs::create_dir_all(fx.ws.join(".airlock")).unwrap();
    std::fs::write(
        fx.ws.join(".airlock/config.toml"),
        "[sandbox]\nexpose_sensitive = [\"**\"]\n",
    )
    .unwrap();
    let o = fx.exec(&["sh", "-c", "cat .env.test .env"]);
    assert!(!all(&o).contains(m.as_str()), "{}", all(&o));
    assert!(!out(&o).contains("TEST_ONLY=visible"), "{}", all(&o));
}

#[test]
fn grep_and_glob_skip_sensitive_files() {
    let fx = Fx::new("off");
    let m = &fx.marker;
    std::fs::write(fx.ws.join(".env"), format!("API_KEY={m}\n")).unwrap();
    std::fs::create_dir_all(fx.ws.join("deploy")).unwrap();
    std::fs::write(fx.ws.join("deploy/tls.key"), format!("KEY {m}\n")).unwrap();
    std::fs::write(fx.ws.join("src/lib.rs"), "// API_KEY is read at start-up\n").unwrap();
    for args in [
        r#"{"pattern":"API_KEY"}"#,
        r#"{"pattern":"API_KEY","path":"."}"#,
        r#"{"pattern":"KEY","path":"deploy"}"#,
        r#"{"pattern":"SECRET-MARKER"}"#,
    ] {
        let o = fx.run(&["--json", "call", "grep", args]);
        let text = out(&o);
        assert!(
            !text.contains(m.as_str()),
            "grep {args} returned a secret: {text}"
        );
        if args.contains("SECRET") || args.contains("deploy") {
            assert!(
                text.contains("skipped"),
                "grep {args} should say sensitive files were skipped: {text}"
            );
        }
    }
    let o = fx.run(&["--json", "call", "grep", r#"{"pattern":"API_KEY"}"#]);
    assert!(out(&o).contains("src/lib.rs"), "{}", out(&o));
    let o = fx.run(&["--json", "call", "glob", r#"{"pattern":"**/*"}"#]);
    let text = out(&o);
    assert!(
        !text.contains("\\n.env") && !text.contains("tls.key"),
        "glob listed sensitive files: {text}"
    );
    assert!(text.contains("src/lib.rs"), "{text}");
    assert!(text.contains("skipped"), "{text}");
}

#[test]
fn guard_denies_reading_toolchain_credentials() {
    for cmd in [
        "cat ~/.cargo/credentials.toml",
        "cat ~/.cargo/credentials",
        "cat $HOME/.cargo/credentials.toml",
        "cp ~/.cargo/credentials.toml notes.txt",
        "cat ~/.npm/_logs/2026-debug-0.log",
        "cat ~/.config/gh/hosts.yml",
        "base64 < ~/.cargo/credentials.toml",
        "cat ~/.cargo/config.toml",
        "cat ~/.cargo/cred*",
        "cat ~/.c*/credentials.toml",
        "cat ~/.np*/_l*/*",
        "tar czf x.tgz ~/.cargo",
        "grep -r token ~/.config",
        "cat ~/.local/share/keyrings/login.keyring",
    ] {
        let o = Command::new(BIN)
            .args(["guard", "--json", cmd])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(3), "{cmd}: {}", all(&o));
        let v: serde_json::Value = serde_json::from_str(out(&o).trim()).unwrap();
        assert_eq!(v["stage"], "guard", "{cmd}: {v}");
        assert_eq!(v["decision"], "deny", "{cmd}: {v}");
    }
    // Toolchain binaries and caches are not credentials.
    for cmd in [
        "ls ~/.cargo/bin",
        "ls ~/.cargo",
        "cat ~/.cargo/registry/index/x/config.json",
        "cat ~/.cargo/bin/*",
        "tar cf deps.tar ~/.cargo/registry",
        "cat ~/.rustup/settings.toml",
    ] {
        let o = Command::new(BIN)
            .args(["guard", cmd])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{cmd}: {}", all(&o));
    }
}

/// The per-session cache of the workspace walk notices a secret added after it was built,
/// once the directories are old enough to be cached.
#[test]
fn a_secret_added_after_the_cache_was_built_is_masked() {
    let fx = Fx::new("always");
    let m = &fx.marker;
    std::fs::create_dir_all(fx.ws.join("app/config")).unwrap();
    std::fs::write(fx.ws.join("app/config/settings.txt"), "plain\n").unwrap();
    // Let every directory age past the racy window, so the first run caches them all.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let o = fx.exec(&["cat", "app/config/settings.txt"]);
    assert_eq!(o.status.code(), Some(0), "{}", all(&o));
    let o = fx.exec(&["cat", "app/config/settings.txt"]);
    assert_eq!(o.status.code(), Some(0), "{}", all(&o));
    std::fs::write(fx.ws.join("app/config/.env.local"), format!("K={m}\n")).unwrap();
    std::fs::create_dir_all(fx.ws.join("app/keys")).unwrap();
    std::fs::write(fx.ws.join("app/keys/deploy.pem"), m).unwrap();
    let o = fx.exec(&["sh", "-c", "cat app/config/.env.local app/keys/deploy.pem"]);
    assert!(!all(&o).contains(m.as_str()), "{}", all(&o));
}

/// Masked by what a file is: a PEM file holding only certificates (a CA bundle inside a
/// virtualenv, as certifi ships one) is public and readable by the tests; one holding a
/// private key stays masked.
#[test]
fn a_ca_bundle_stays_readable_and_a_private_key_pem_does_not() {
    let fx = Fx::new("cold");
    let m = &fx.marker;
    let dir = fx.ws.join(".venv/lib/python3.11/site-packages/certifi");
    std::fs::create_dir_all(&dir).unwrap();
    let bundle =
        format!("# {m}\n-----BEGIN CERTIFICATE-----\nMIIBcert\n-----END CERTIFICATE-----\n");
    std::fs::write(dir.join("cacert.pem"), &bundle).unwrap();
    std::fs::write(
        fx.ws.join("server.pem"),
        format!("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n-----BEGIN PRIVATE KEY-----\n{m}\n-----END PRIVATE KEY-----\n"),
    )
    .unwrap();
    let o = fx.exec(&[
        "cat",
        ".venv/lib/python3.11/site-packages/certifi/cacert.pem",
    ]);
    assert!(
        all(&o).contains("MIIBcert"),
        "the CA bundle was masked: {}",
        all(&o)
    );
    let o = fx.exec(&["cat", "server.pem"]);
    assert!(
        !all(&o).contains(m.as_str()),
        "a private key was shown: {}",
        all(&o)
    );
}
