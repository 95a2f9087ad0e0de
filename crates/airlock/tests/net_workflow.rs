//! The dependency workflow through airlock alone, with real cargo and the real registry: a
//! staged manifest gains a dependency; `verify` fails offline; `exec --allow-net preset:cargo
//! -- cargo fetch` fills the workspace's persistent package cache (not the changeset); `verify`
//! then passes offline against that cache; `apply` writes the manifest and the lockfile.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_airlock");

fn airlock(ws: &Path, config: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(["--workspace", ws.to_str().unwrap(), "--mode", "build"])
        .args(args)
        .env("XDG_CONFIG_HOME", config)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Removes the workspace's cache (under the real `$HOME`, keyed by the temporary workspace)
/// when the test ends, passed or not.
struct CacheGuard(Option<PathBuf>);

impl Drop for CacheGuard {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = std::fs::remove_dir_all(p);
        }
    }
}

/// True when the file name of `p` starts with `prefix` (the workspace's cache is named after
/// the workspace directory: tests running side by side tell theirs apart by it).
fn named(p: &Path, prefix: &str) -> bool {
    p.file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
}

#[test]
fn a_crate_gains_a_dependency_through_airlock_alone() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().canonicalize().unwrap();
    let ws = root.join("demo-ws");
    let config = root.join("config");
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::create_dir_all(&config).unwrap();
    let manifest =
        "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n";
    std::fs::write(ws.join("Cargo.toml"), manifest).unwrap();
    std::fs::write(
        ws.join("src/lib.rs"),
        "pub fn seven() -> String { \"7\".into() }\n#[cfg(test)]\nmod tests { #[test] fn t() { assert_eq!(super::seven(), \"7\"); } }\n",
    )
    .unwrap();
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap();
    let caches = home.join(".cache/airlock/cargo-home");
    let before: Vec<_> = std::fs::read_dir(&caches)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    let mut guard = CacheGuard(None);

    // Stage the dependency and code that uses it.
    let new_manifest = format!("{manifest}itoa = \"=1.0.11\"\n");
    let args = serde_json::json!({"path": "Cargo.toml", "content": new_manifest}).to_string();
    let o = airlock(&ws, &config, &["call", "write_file", &args]);
    assert!(o.status.success(), "{}", text(&o));
    let lib = "pub fn seven() -> String { itoa::Buffer::new().format(7).to_string() }\n#[cfg(test)]\nmod tests { #[test] fn t() { assert_eq!(super::seven(), \"7\"); } }\n";
    let args = serde_json::json!({"path": "src/lib.rs", "content": lib}).to_string();
    assert!(
        airlock(&ws, &config, &["call", "write_file", &args])
            .status
            .success()
    );

    // Offline, the dependency cannot be had: verify fails and apply refuses.
    let o = airlock(&ws, &config, &["verify", "--timeout", "120"]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    assert_eq!(airlock(&ws, &config, &["apply"]).status.code(), Some(4));

    // The operator grants cargo's registry for one fetch.
    let o = airlock(
        &ws,
        &config,
        &[
            "--json",
            "exec",
            "--timeout",
            "120",
            "--allow-net",
            "preset:cargo",
            "--",
            "cargo",
            "fetch",
        ],
    );
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{}", text(&o)));
    assert_eq!(v["exit_code"], 0, "{v}");
    assert!(!v["hosts_contacted"].as_array().unwrap().is_empty(), "{v}");
    // Only the lockfile is staged: the downloads went to the cache, not the changeset.
    assert_eq!(v["staged"], serde_json::json!(["A Cargo.lock"]), "{v}");
    let after: Vec<PathBuf> = std::fs::read_dir(&caches)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| !before.contains(p) && named(p, "demo-ws-"))
        .collect();
    assert_eq!(after.len(), 1, "one new workspace cache: {after:?}");
    guard.0 = Some(after[0].clone());
    let cached = Command::new("find")
        .arg(&after[0])
        .args(["-name", "itoa-1.0.11.crate"])
        .output()
        .unwrap();
    assert!(
        !cached.stdout.is_empty(),
        "the crate is in the workspace cache"
    );
    assert!(
        !ws.join("Cargo.lock").exists(),
        "nothing written to the workspace yet"
    );

    // Offline again, against the cache: verify passes, apply writes manifest and lockfile.
    let o = airlock(&ws, &config, &["verify", "--timeout", "300"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = airlock(&ws, &config, &["apply"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        std::fs::read_to_string(ws.join("Cargo.toml"))
            .unwrap()
            .contains("itoa = \"=1.0.11\"")
    );
    let lock = std::fs::read_to_string(ws.join("Cargo.lock")).unwrap();
    assert!(
        lock.contains("name = \"itoa\"") && lock.contains("1.0.11"),
        "{lock}"
    );
}

/// Stages `src/lib.rs` with a test whose body is `check`, then verifies: the exit code.
fn verify_with_test(ws: &Path, config: &Path, check: &str) -> (Option<i32>, String) {
    let lib = format!(
        "pub fn seven() -> String {{ itoa::Buffer::new().format(7).to_string() }}\n\
         #[cfg(test)]\nmod tests {{ #[test] fn t() {{ {check} }} }}\n"
    );
    let args = serde_json::json!({"path": "src/lib.rs", "content": lib}).to_string();
    let o = airlock(ws, config, &["call", "write_file", &args]);
    assert!(o.status.success(), "{}", text(&o));
    let o = airlock(ws, config, &["verify", "--timeout", "300"]);
    (o.status.code(), text(&o))
}

/// A command granted network writes the workspace's cargo cache; `verify` must not read what
/// it wrote there: neither an edited extracted source (cargo trusts an extracted directory
/// with `.cargo-ok`) nor a `config.toml` (a `rustc-wrapper` that changes what is compiled).
#[test]
fn verify_reads_nothing_a_granted_command_wrote_to_the_cargo_cache() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().canonicalize().unwrap();
    let ws = root.join("seal-ws");
    let config = root.join("config");
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        ws.join("Cargo.toml"),
        "[package]\nname = \"seal\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [dependencies]\nitoa = \"=1.0.11\"\n",
    )
    .unwrap();
    std::fs::write(
        ws.join("src/lib.rs"),
        "pub fn seven() -> String { itoa::Buffer::new().format(7).to_string() }\n",
    )
    .unwrap();
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap();
    let caches = home.join(".cache/airlock/cargo-home");
    let before: Vec<_> = std::fs::read_dir(&caches)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    let mut guard = CacheGuard(None);
    let o = airlock(
        &ws,
        &config,
        &[
            "--json",
            "exec",
            "--timeout",
            "120",
            "--allow-net",
            "preset:cargo",
            "--",
            "cargo",
            "fetch",
        ],
    );
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{}", text(&o)));
    assert_eq!(v["exit_code"], 0, "{v}");
    let cache: Vec<PathBuf> = std::fs::read_dir(&caches)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| !before.contains(p) && named(p, "seal-ws-"))
        .collect();
    assert_eq!(cache.len(), 1, "one new workspace cache: {cache:?}");
    let cache = cache[0].clone();
    guard.0 = Some(cache.clone());

    // (a) What a granted command could do: plant a function in the extracted source.
    let found = Command::new("find")
        .arg(cache.join("registry/src"))
        .args(["-path", "*/itoa-1.0.11/src/lib.rs"])
        .output()
        .unwrap();
    let src = PathBuf::from(String::from_utf8_lossy(&found.stdout).trim().to_string());
    assert!(src.is_file(), "extracted source: {}", src.display());
    let mut planted = std::fs::read_to_string(&src).unwrap();
    planted.push_str("\npub fn planted() -> bool { true }\n");
    std::fs::write(&src, planted).unwrap();
    // Before any verification: a verification's target cache does not rebuild a registry
    // dependency whose version it has built (fingerprinted by version, not by contents).
    let mut wrong = Vec::new();
    let (code, out) = verify_with_test(&ws, &config, "assert!(itoa::planted());");
    if code != Some(4) {
        wrong.push(format!(
            "(a) verify built the edited extracted source: exit {code:?}\n{out}"
        ));
    }
    // A genuine change passes offline.
    let (code, out) = verify_with_test(&ws, &config, "assert_eq!(super::seven(), \"7\");");
    assert_eq!(code, Some(0), "{out}");

    // (c) A `config.toml` in the cache whose `rustc-wrapper` changes what is compiled.
    let wrapper = cache.join("wrap.sh");
    std::fs::write(
        &wrapper,
        "#!/bin/sh\ncase \" $* \" in *\" --test \"*) exec \"$@\" --cfg planted;; esac\nexec \"$@\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        cache.join("config.toml"),
        format!("[build]\nrustc-wrapper = \"{}\"\n", wrapper.display()),
    )
    .unwrap();
    let (code, out) = verify_with_test(&ws, &config, "assert!(cfg!(planted));");
    if code != Some(4) {
        wrong.push(format!(
            "(c) verify read the cache's config.toml: exit {code:?}\n{out}"
        ));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    // The genuine change still passes with the planted files in place.
    let (code, out) = verify_with_test(&ws, &config, "assert_eq!(super::seven(), \"7\");");
    assert_eq!(code, Some(0), "{out}");

    // A repeat verification reads only its record of the archive it checked.
    let verify_json = || {
        let o = airlock(&ws, &config, &["--json", "verify", "--timeout", "300"]);
        let v: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{}", text(&o)));
        (o.status.code(), v)
    };
    let (code, v) = verify_json();
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["cargo_cache"]["kept"], 1, "{v}");
    assert_eq!(v["cargo_cache"]["copied"], 0, "{v}");
    eprintln!(
        "host-side check of the cargo cache: {} ms",
        v["cargo_cache"]["millis"]
    );

    // A new verify home unpacks the archive again: the dependency is not rebuilt.
    let verify_cache = ws.join(".airlock/cache/verify");
    let rlib = || {
        let deps = std::fs::read_dir(verify_cache.join("cargo-target/debug/deps")).unwrap();
        let p = deps
            .flatten()
            .map(|e| e.path())
            .find(|p| named(p, "libitoa-") && p.extension().is_some_and(|x| x == "rlib"))
            .unwrap();
        std::fs::metadata(p).unwrap().modified().unwrap()
    };
    let built = rlib();
    std::fs::remove_dir_all(verify_cache.join("cargo-home")).unwrap();
    let (code, v) = verify_json();
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["cargo_cache"]["copied"], 1, "{v}");
    assert_eq!(rlib(), built, "itoa was rebuilt");

    // (b) A swapped archive is left out: cargo fails offline, the verification fails.
    let found = Command::new("find")
        .arg(cache.join("registry/cache"))
        .args(["-name", "itoa-1.0.11.crate"])
        .output()
        .unwrap();
    let archive = PathBuf::from(String::from_utf8_lossy(&found.stdout).trim().to_string());
    std::fs::write(&archive, b"not the archive Cargo.lock pins").unwrap();
    std::fs::remove_dir_all(verify_cache.join("cargo-home")).unwrap();
    let (code, v) = verify_json();
    assert_eq!(code, Some(4), "{v}");
    assert_eq!(v["cargo_cache"]["mismatched"], 1, "{v}");
    let diagnostics = v["diagnostics"].as_str().unwrap_or_default();
    assert!(diagnostics.contains("did not match Cargo.lock"), "{v}");

    // `airlock cache status` lists the workspace's cargo cache; `cache drop` removes it.
    let o = airlock(&ws, &config, &["--json", "cache", "status"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let listed = v["caches"].as_array().unwrap().iter().any(|c| {
        c["domain"] == "exec" && c["name"] == "cargo-home" && c["bytes"].as_u64() > Some(0)
    });
    assert!(listed, "{v}");
    let o = airlock(&ws, &config, &["cache", "drop"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!cache.exists() && !verify_cache.exists());
}
