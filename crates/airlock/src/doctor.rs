//! `airlock doctor`: one report of what this host offers airlock's sandbox, found by trying
//! (a user namespace, a full-tier run, a Landlock-tier run, a control group), the tier commands
//! will get and why, the configuration files read, and the versions of airlock and of the test
//! runners found — with the exact fix for each missing piece. Nothing secret is read or shown.
//!
//! `airlock doctor --install-apparmor` puts the shipped AppArmor profile (`dist/apparmor/airlock`,
//! which grants user namespaces) in place for the running binary and loads it.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use airlock_sandbox::{Availability, Finding, HostReport, SandboxError, Tier};
use clap::Args;
use serde_json::{Value, json};

/// The shipped profile; its `/usr/bin/airlock` is replaced by where airlock is installed.
const APPARMOR_PROFILE: &str = include_str!("../../../dist/apparmor/airlock");

/// `airlock doctor`'s own flags.
#[derive(Args, Debug, Clone, Default)]
pub struct DoctorArgs {
    /// Install the AppArmor profile that grants this binary user namespaces, then load it
    /// (needs root; for hosts with kernel.apparmor_restrict_unprivileged_userns=1).
    #[arg(long)]
    pub install_apparmor: bool,
    /// Where `--install-apparmor` writes the profile (default /etc/apparmor.d).
    #[arg(long, value_name = "DIR", requires = "install_apparmor")]
    pub apparmor_dir: Option<PathBuf>,
}

/// What the report needs from the CLI.
#[derive(Debug)]
pub struct DoctorInput<'a> {
    /// The workspace (for the local config and the runners in `node_modules/.bin`).
    pub workspace: &'a Path,
    /// The user config's path, if one can be named.
    pub user_config: Option<PathBuf>,
    /// Whether `--allow-local-config` was given.
    pub allow_local_config: bool,
    /// Whether `--allow-degraded` was given.
    pub allow_degraded: bool,
    /// `PATH`, where runners are looked up.
    pub path: Option<std::ffi::OsString>,
    /// Machine output.
    pub json: bool,
}

/// Runs `airlock doctor`; returns the exit code (0: commands can run in some allowed tier, 1:
/// none can, or the profile could not be installed).
pub fn command(args: &DoctorArgs, input: &DoctorInput<'_>) -> i32 {
    if args.install_apparmor {
        return install_apparmor(args.apparmor_dir.as_deref(), input.json);
    }
    let report = airlock_sandbox::host_report();
    let settings = airlock_sandbox::settings::effective();
    let (tier, why) = tier_and_reason(&report, &settings, input.allow_degraded);
    let config = config_files(input);
    let runners = runners(input);
    let apparmor = apparmor_state();
    let doc = json!({
        "tier": tier.map(Tier::name),
        "tier_reason": why,
        "airlock": {"version": env!("CARGO_PKG_VERSION"), "binary": std::env::current_exe().ok()},
        "sandbox": {
            "weakest_allowed": if input.allow_degraded { Tier::Degraded } else { settings.weakest },
            "forced": settings.tier,
        },
        "host": report,
        "apparmor": apparmor,
        "config_files": config,
        "runners": runners,
    });
    if input.json {
        let _ = writeln!(
            std::io::stdout(),
            "{}",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        );
    } else {
        let _ = write!(std::io::stdout(), "{}", human(&doc, &report));
    }
    i32::from(tier.is_none())
}

/// The tier commands will get, and one sentence saying why (or why none).
fn tier_and_reason(
    report: &HostReport,
    settings: &airlock_sandbox::SandboxSettings,
    allow_degraded: bool,
) -> (Option<Tier>, String) {
    let as_result = |f: &Finding, missing: &'static str| {
        if f.ok {
            Ok(())
        } else {
            Err(SandboxError::Unsupported {
                missing,
                detail: f.detail.clone(),
            })
        }
    };
    let host = Availability {
        full: as_result(&report.full_tier, "the full tier"),
        landlock: as_result(&report.landlock_tier, "the Landlock tier"),
    };
    match airlock_sandbox::choose(settings, allow_degraded, &host) {
        Ok(t) => {
            let why = match (t, settings.tier) {
                (t, Some(_)) => format!("the operator forced the {t} tier for this invocation"),
                (Tier::Full, None) => "the full tier's trial run succeeded".to_string(),
                (_, None) => format!(
                    "the full tier is unavailable ({}) and the operator allows down to {}",
                    report.full_tier.detail,
                    if allow_degraded {
                        Tier::Degraded
                    } else {
                        settings.weakest
                    }
                ),
            };
            (Some(t), why)
        }
        Err(e) => (None, e.to_string()),
    }
}

fn config_files(input: &DoctorInput<'_>) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(p) = &input.user_config {
        out.push(json!({"path": p, "exists": p.is_file(), "read": p.is_file()}));
    }
    let local = airlock_policy::rules::local_config_path(input.workspace);
    out.push(json!({
        "path": local,
        "exists": local.is_file(),
        "read": local.is_file() && input.allow_local_config,
        "note": if input.allow_local_config { "read (--allow-local-config)" } else { "ignored unless --allow-local-config" },
    }));
    out
}

/// Finds `name` on `PATH`.
fn which(path: Option<&std::ffi::OsStr>, name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path?)
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The first line `program --version` (`go version`) prints, within a few seconds, without
/// terminal escape sequences.
fn version_of(program: &Path) -> Option<String> {
    let arg = if program.file_name().is_some_and(|n| n == "go") {
        "version"
    } else {
        "--version"
    };
    let mut child = Command::new(program)
        .arg(arg)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() < Duration::from_secs(5) => {
                std::thread::sleep(Duration::from_millis(20));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let out = child.wait_with_output().ok()?;
    let text = if out.stdout.is_empty() {
        out.stderr
    } else {
        out.stdout
    };
    let line = String::from_utf8_lossy(&text)
        .lines()
        .find(|l| !l.trim().is_empty())?
        .trim()
        .to_string();
    Some(strip_escapes(&line))
}

/// `line` without ANSI escape sequences (`ESC [ … letter`).
fn strip_escapes(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The test runners and toolchains verify can drive, where they are and their versions.
fn runners(input: &DoctorInput<'_>) -> Vec<Value> {
    let mut out = Vec::new();
    let path = input.path.as_deref();
    for name in [
        "node", "npm", "python3", "pytest", "cargo", "go", "mvn", "gradle",
    ] {
        if let Some(p) = which(path, name) {
            out.push(json!({"name": name, "path": p, "version": version_of(&p)}));
        }
    }
    for name in ["vitest", "jest"] {
        let p = input.workspace.join("node_modules/.bin").join(name);
        if p.exists() {
            out.push(json!({"name": name, "path": p, "version": version_of(&p)}));
        }
    }
    out
}

fn apparmor_state() -> Value {
    let enabled = std::fs::read_to_string("/sys/module/apparmor/parameters/enabled")
        .is_ok_and(|s| s.trim() == "Y");
    let installed = Path::new("/etc/apparmor.d/airlock").is_file();
    json!({"enabled": enabled, "profile_installed": installed})
}

/// The shipped profile for the binary at `exe`.
pub fn apparmor_profile(exe: &Path) -> String {
    let quoted = format!(
        "\"{}\"",
        exe.to_string_lossy()
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
    );
    APPARMOR_PROFILE.replace("\"/usr/bin/airlock\"", &quoted)
}

fn install_apparmor(dir: Option<&Path>, json_out: bool) -> i32 {
    let exe = match std::env::current_exe().and_then(|e| e.canonicalize()) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("airlock: cannot name this binary's path: {e}");
            return 1;
        }
    };
    let dir = dir.unwrap_or(Path::new("/etc/apparmor.d"));
    let file = dir.join("airlock");
    let text = apparmor_profile(&exe);
    let tmp = dir.join(".airlock.tmp");
    if let Err(e) = std::fs::write(&tmp, &text).and_then(|()| std::fs::rename(&tmp, &file)) {
        let _ = std::fs::remove_file(&tmp);
        eprintln!(
            "airlock: writing {} failed: {e} (run it as root: sudo airlock doctor --install-apparmor)",
            file.display()
        );
        return 1;
    }
    let loaded = Command::new("apparmor_parser")
        .arg("-r")
        .arg(&file)
        .stdin(Stdio::null())
        .output();
    let (code, load) = match loaded {
        Ok(o) if o.status.success() => (0, "loaded with apparmor_parser -r".to_string()),
        Ok(o) => (
            1,
            format!(
                "apparmor_parser -r failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ),
        ),
        Err(e) => (
            1,
            format!(
                "apparmor_parser could not run ({e}); install AppArmor's tools (apt install apparmor) and run `sudo apparmor_parser -r {}`",
                file.display()
            ),
        ),
    };
    if json_out {
        println!(
            "{}",
            json!({"profile": file, "binary": exe, "loaded": code == 0, "note": load})
        );
    } else {
        println!("Wrote {} for {}; {load}.", file.display(), exe.display());
    }
    code
}

fn mark(ok: bool) -> &'static str {
    if ok { "ok     " } else { "MISSING" }
}

fn human(doc: &Value, report: &HostReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "airlock {} ({})",
        doc["airlock"]["version"].as_str().unwrap_or("?"),
        doc["airlock"]["binary"].as_str().unwrap_or("?")
    );
    let _ = writeln!(
        s,
        "host     {}; {}; uid {}{}",
        report.kernel,
        report
            .distribution
            .as_deref()
            .unwrap_or("unknown distribution"),
        report.uid,
        report
            .container
            .as_deref()
            .map(|c| format!("; seems to run in a container: {c}"))
            .unwrap_or_default()
    );
    let _ = writeln!(s);
    for f in report
        .checks
        .iter()
        .chain([&report.full_tier, &report.landlock_tier])
    {
        let _ = writeln!(s, "{} {:<28} {}", mark(f.ok), f.name, f.detail);
        if let Some(fix) = &f.fix {
            let _ = writeln!(s, "        {:<28} fix: {fix}", "");
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "tier     {} — {}",
        doc["tier"].as_str().unwrap_or("none"),
        doc["tier_reason"].as_str().unwrap_or("")
    );
    let _ = writeln!(
        s,
        "allowed  down to {} (AIRLOCK_SANDBOX_WEAKEST; --allow-degraded allows every tier){}",
        doc["sandbox"]["weakest_allowed"].as_str().unwrap_or("full"),
        doc["sandbox"]["forced"]
            .as_str()
            .map(|t| format!("; forced: {t}"))
            .unwrap_or_default()
    );
    let _ = writeln!(
        s,
        "apparmor {}; airlock profile {}",
        if doc["apparmor"]["enabled"].as_bool() == Some(true) {
            "enabled"
        } else {
            "not enabled"
        },
        if doc["apparmor"]["profile_installed"].as_bool() == Some(true) {
            "installed"
        } else {
            "not installed"
        }
    );
    for c in doc["config_files"].as_array().into_iter().flatten() {
        let _ = writeln!(
            s,
            "config   {} ({})",
            c["path"].as_str().unwrap_or("?"),
            if c["read"].as_bool() == Some(true) {
                "read"
            } else if c["exists"].as_bool() == Some(true) {
                "present, not read"
            } else {
                "absent"
            }
        );
    }
    for r in doc["runners"].as_array().into_iter().flatten() {
        let _ = writeln!(
            s,
            "runner   {:<8} {} ({})",
            r["name"].as_str().unwrap_or("?"),
            r["version"].as_str().unwrap_or("version unknown"),
            r["path"].as_str().unwrap_or("?")
        );
    }
    s
}
