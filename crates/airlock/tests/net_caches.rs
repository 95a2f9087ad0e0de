//! Egress that works for real users, through the real `airlock` binary and the real npm
//! registry (reached only through the run's proxy): a granted preset gets the user's own npm
//! cache writable through a session layer while the host's copy is never written, and a run
//! without a grant fails at once, with a note naming the policy and the grant to ask for.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_airlock");

struct Fx {
    _t: tempfile::TempDir,
    ws: PathBuf,
    home: PathBuf,
    config: PathBuf,
}

impl Fx {
    fn new() -> Fx {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        let (ws, home, config) = (root.join("ws"), root.join("home"), root.join("config"));
        for d in [&ws, &home, &config] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(
            ws.join("package.json"),
            "{\"name\":\"demo\",\"version\":\"1.0.0\"}\n",
        )
        .unwrap();
        Fx {
            _t: t,
            ws,
            home,
            config,
        }
    }

    /// `airlock --json exec [--allow-net g]… -- argv` with `$HOME` at `home` (none: the
    /// caller's): the result and the wall time.
    fn exec(&self, home: Option<&Path>, grants: &[&str], argv: &[&str]) -> (Value, Duration) {
        let mut c = Command::new(BIN);
        c.args(["--workspace", self.ws.to_str().unwrap(), "--mode", "build"])
            .args(["--json", "exec", "--timeout", "90"])
            .env("XDG_CONFIG_HOME", &self.config)
            .env("XDG_STATE_HOME", self.config.join("state"))
            .stdin(Stdio::null());
        if let Some(h) = home {
            c.env("HOME", h);
        }
        for g in grants {
            c.args(["--allow-net", g]);
        }
        c.arg("--").args(argv);
        let started = Instant::now();
        let o = c.output().unwrap();
        let took = started.elapsed();
        let v = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {}\n{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        });
        (v, took)
    }
}

/// Every entry below `dir` with its size and modification time (directories too).
fn tree(dir: &Path) -> BTreeMap<PathBuf, (u64, SystemTime, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let m = std::fs::symlink_metadata(e.path()).unwrap();
            if m.is_dir() {
                stack.push(e.path());
            }
            out.insert(
                e.path(),
                (m.len(), m.modified().unwrap(), m.permissions().mode()),
            );
        }
    }
    out
}

fn stdout(v: &Value) -> &str {
    v["stdout"].as_str().unwrap_or_default()
}

#[test]
fn npm_under_its_preset_uses_the_users_cache_and_never_writes_it() {
    let fx = Fx::new();
    // The user's npm cache, as every npm user has one: left-pad in it, fetched on the host.
    let seeded = Command::new("npm")
        .args(["cache", "add", "left-pad@1.3.0", "--cache"])
        .arg(fx.home.join(".npm"))
        .current_dir(&fx.ws)
        .output()
        .expect("npm runs on the host");
    assert!(
        seeded.status.success(),
        "seeding the cache: {}",
        String::from_utf8_lossy(&seeded.stderr)
    );
    let cache = fx.home.join(".npm/_cacache");
    let before = tree(&cache);
    assert!(!before.is_empty());

    // A registry request under the preset: npm writes its cache as it fetches (EROFS before).
    let (v, _) = fx.exec(
        Some(&fx.home),
        &["preset:npm"],
        &["npm", "view", "left-pad", "version"],
    );
    assert_eq!(v["exit_code"], 0, "{v}");
    assert_eq!(stdout(&v).trim(), "1.3.0", "{v}");
    assert_eq!(v["hosts_contacted"][0], "registry.npmjs.org:443", "{v}");
    // An offline install reads the tarball from the user's cache (a private, empty cache
    // would fail with ENOTCACHED) and writes what it unpacks to the changeset.
    let (v, _) = fx.exec(
        Some(&fx.home),
        &["preset:npm"],
        &[
            "npm",
            "install",
            "--offline",
            "--no-audit",
            "--no-fund",
            "left-pad@1.3.0",
        ],
    );
    assert_eq!(v["exit_code"], 0, "{v}");
    let staged: Vec<&str> = v["staged"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        staged.contains(&"A node_modules/left-pad/index.js"),
        "{staged:?}"
    );
    // What the runs wrote to the cache stayed in their layer: the host's copy is untouched.
    assert_eq!(tree(&cache), before, "the user's npm cache was written");
}

#[test]
fn an_ungranted_request_fails_at_once_and_names_the_grant() {
    let fx = Fx::new();
    // The lookup itself, timed inside the run: the run's namespace has no way out.
    let probe = "import socket, time\nt = time.monotonic()\ntry:\n    socket.getaddrinfo('registry.npmjs.org', 443); print('RESOLVED')\nexcept OSError as e:\n    print('FAILED %.3f' % (time.monotonic() - t), e)\n";
    std::fs::write(fx.ws.join("probe.py"), probe).unwrap();
    let (v, _) = fx.exec(None, &[], &["python3", "probe.py"]);
    let out = stdout(&v);
    let secs: f64 = out
        .strip_prefix("FAILED ")
        .and_then(|r| r.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{v}"));
    assert!(secs < 1.0, "an ungranted lookup took {secs} s: {v}");

    // npm without a grant: it gives up at once (it retried for 71 s before), and the result
    // says the policy refused the network and which grant to ask for.
    let (v, took) = fx.exec(None, &[], &["npm", "view", "left-pad", "version"]);
    assert_ne!(v["exit_code"], 0, "{v}");
    let ms = v["duration_ms"].as_u64().unwrap();
    assert!(ms < 10_000, "npm took {ms} ms to fail (wall {took:?}): {v}");
    let note = v["note"].as_str().unwrap_or_default();
    assert!(note.starts_with("network refused by policy"), "{v}");
    assert!(
        note.contains("--allow-net registry.npmjs.org") && note.contains("--allow-net preset:npm"),
        "{note}"
    );
    assert_eq!(v["network"], "refused by policy", "{v}");
    eprintln!("ungranted lookup {secs:.3} s; npm view failed after {ms} ms");

    // A run that failed for another reason gets no such note.
    let (v, _) = fx.exec(None, &[], &["sh", "-c", "echo nope >&2; exit 3"]);
    assert_eq!(v["exit_code"], 3, "{v}");
    assert!(v.get("network").is_none() && v.get("note").is_none(), "{v}");
}

/// The names, sizes and times of the entries directly in each registry directory of
/// `~/.cargo/registry/{index,cache}`: what a fetch into the user's cache would change.
fn cargo_registry(home: &Path) -> BTreeMap<PathBuf, (u64, SystemTime, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = BTreeMap::new();
    for part in ["index", "cache"] {
        let top = home.join(".cargo/registry").join(part);
        for reg in std::fs::read_dir(&top).into_iter().flatten().flatten() {
            for e in std::iter::once(reg.path()).chain(
                std::fs::read_dir(reg.path())
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path()),
            ) {
                let m = std::fs::symlink_metadata(&e).unwrap();
                out.insert(e, (m.len(), m.modified().unwrap(), m.permissions().mode()));
            }
        }
    }
    out
}

/// cargo under its preset, in a crate below the workspace root (so no workspace `CARGO_HOME`
/// of its own): it reads the user's `~/.cargo/registry` and writes what it fetches to the
/// session's layer over it, never to the host's copy.
#[test]
fn cargo_under_its_preset_fetches_into_a_layer_over_the_users_registry() {
    let home = PathBuf::from(std::env::var_os("HOME").unwrap());
    if !home.join(".cargo/registry/cache").is_dir() {
        eprintln!("skipped: no ~/.cargo/registry/cache on this host");
        return;
    }
    let fx = Fx::new();
    std::fs::create_dir_all(fx.ws.join("tool/src")).unwrap();
    std::fs::write(
        fx.ws.join("tool/Cargo.toml"),
        "[package]\nname = \"tool\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nitoa = \"=1.0.11\"\n",
    )
    .unwrap();
    std::fs::write(fx.ws.join("tool/src/main.rs"), "fn main() {}\n").unwrap();
    let before = cargo_registry(&home);
    let (v, _) = fx.exec(
        None,
        &["preset:cargo"],
        &["sh", "-c", "cd tool && cargo fetch && ls ~/.cargo/registry/cache/*/ | grep -c '^itoa-1.0.11.crate$'"],
    );
    assert_eq!(v["exit_code"], 0, "{v}");
    assert_eq!(stdout(&v).trim(), "1", "{v}");
    assert!(
        v["staged"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s == "A tool/Cargo.lock"),
        "{v}"
    );
    assert_eq!(
        cargo_registry(&home),
        before,
        "the user's cargo registry was written"
    );
}
