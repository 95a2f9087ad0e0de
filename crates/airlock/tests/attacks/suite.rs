// The attack suite, shared by `attacks_cold.rs` (every command in freshly made namespaces),
// `attacks_warm.rs` (every command through the session's warm sandbox host) and
// `attacks_landlock.rs` (every command in the Landlock tier). The including file defines
// `HOST_MODE`, the value of `AIRLOCK_SANDBOX_HOST` for every airlock command, and `TIER`, the
// value of `AIRLOCK_SANDBOX` (the sandbox tier).
use common::{host_processes_with, snapshot};
use std::io::ErrorKind;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_airlock");

/// What a command reads where a host path is hidden from it: absent in the full tier (the path
/// is not in the sandbox's root), refused in the Landlock tier (Landlock denies it in place).
fn hidden_marker() -> &'static str {
    if TIER == "landlock" {
        "Permission denied"
    } else {
        "No such file"
    }
}

/// The pids of the warm hosts whose command line contains `marker`. A run's PID 1 and a spare
/// are forks of their host, with its command line: the host is the one whose parent is none of
/// them.
fn warm_hosts(marker: &str) -> Vec<String> {
    let pids: Vec<String> = host_processes_with(marker)
        .iter()
        .map(|line| line.split(':').next().unwrap().to_string())
        .collect();
    let parent = |pid: &String| {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))
            .map(|p| p.trim().to_string())
            .unwrap_or_default()
    };
    pids.iter()
        .filter(|pid| !pids.contains(&parent(pid)))
        .cloned()
        .collect()
}

/// A temporary workspace with a private `HOME` and config home beside it.
struct Fx {
    _t: tempfile::TempDir,
    root: PathBuf,
    ws: PathBuf,
    home: PathBuf,
}

impl Fx {
    fn new() -> Fx {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        let ws = root.join("ws");
        let home = root.join("home");
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(ws.join("src/main.rs"), "fn main() {}\n").unwrap();
        std::fs::write(ws.join("README.md"), "# sample\n").unwrap();
        Fx {
            _t: t,
            root,
            ws,
            home,
        }
    }

    /// The airlock command for this workspace, with the private homes set.
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.arg("--workspace")
            .arg(&self.ws)
            .args(args)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("AIRLOCK_SANDBOX_HOST", HOST_MODE)
            .env("AIRLOCK_SANDBOX", TIER)
            .env("AIRLOCK_SANDBOX_HOST_IDLE", "10")
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("airlock runs")
    }

    /// `airlock --mode build exec -- ARGV`.
    fn exec(&self, argv: &[&str]) -> Output {
        let mut args = vec!["--mode", "build", "exec", "--"];
        args.extend_from_slice(argv);
        self.run(&args)
    }

    /// Stage `body` as `rel` through the whole chain (`airlock call write_file`).
    fn stage(&self, rel: &str, body: &str) {
        let args = serde_json::json!({ "path": rel, "content": body }).to_string();
        let o = self.run(&["--mode", "build", "call", "write_file", &args]);
        assert_eq!(o.status.code(), Some(0), "staging {rel}: {}", err(&o));
        assert!(
            !self.ws.join(rel).exists(),
            "{rel} must be staged, not written"
        );
    }

    /// Stage a payload script and run it with `sh`, past the guard.
    fn script(&self, body: &str, timeout: Option<u64>) -> Output {
        self.script_named("payload.sh", body, timeout)
    }

    /// Stage a payload script as `name` and run it with `sh`.
    fn script_named(&self, name: &str, body: &str, timeout: Option<u64>) -> Output {
        self.stage(name, body);
        let mut args = vec!["--mode", "build", "exec"];
        let t;
        if let Some(secs) = timeout {
            t = secs.to_string();
            args.extend_from_slice(&["--timeout", &t]);
        }
        args.extend_from_slice(&["--", "sh", name]);
        self.run(&args)
    }
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A guard denial through `exec`: exit 3 and a decision naming the guard stage.
fn assert_guard_denied(o: &Output, what: &str) {
    assert_eq!(
        o.status.code(),
        Some(3),
        "{what}: expected a guard denial; stdout {} stderr {}",
        out(o),
        err(o)
    );
    assert!(err(o).contains("guard"), "{what}: {}", err(o));
}

/// Either the guard denied the plain command line, or it ran and `check` holds for its output.
fn denied_or(o: &Output, what: &str, check: impl FnOnce(&str)) {
    if o.status.code() == Some(3) && err(o).contains("guard") {
        eprintln!("{what}: refused by the guard: {}", err(o).trim());
        return;
    }
    eprintln!("{what}: passed the guard; checking the sandbox");
    check(&out(o));
}

/// A unique marker per test and run.
fn marker(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("airlock-e2e-{what}-{}-{nanos}", std::process::id())
}

/// Removes a file when dropped, so a failing test still cleans the real host.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn host_secrets_under_home_are_unreadable() {
    let fx = Fx::new();
    let secrets = [
        (".ssh/id_ed25519", "Zq7-FAKE-SSH-KEY-e2e"),
        (".aws/credentials", "Zq7-FAKE-AWS-KEY-e2e"),
        (".config/gh/hosts.yml", "Zq7-FAKE-GH-TOKEN-e2e"),
    ];
    for (rel, body) in secrets {
        let p = fx.home.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, body).unwrap();
    }
    // The real home's .ssh too (root's: /root/.ssh), with a planted key for the duration of
    // the test.
    let real_home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
    let real_ssh = real_home.join(".ssh");
    let real_ssh_text = real_ssh.display().to_string();
    let real_home_text = real_home.display().to_string();
    std::fs::create_dir_all(&real_ssh).unwrap();
    let planted = real_ssh.join(format!("airlock-e2e-{}", std::process::id()));
    std::fs::write(&planted, "Zq7-REAL-ROOT-KEY-e2e").unwrap();
    let _cleanup = RemoveOnDrop(planted.clone());
    let home = fx.home.display().to_string();
    let payload = format!(
        "cat ~/.ssh/id_ed25519 ~/.aws/credentials ~/.config/gh/hosts.yml 2>&1\n\
         cat {home}/.ssh/id_ed25519 {planted} 2>&1\n\
         ls -A {real_ssh_text} 2>/dev/null | sed 's/^/listing: /'\n\
         ls -A ~ 2>&1\n\
         grep -rs 'Zq[7]-' ~ {real_home_text} /root /tmp /etc /home 2>/dev/null | head -3\n\
         echo payload-done\n",
        planted = planted.display()
    );
    // Plain command line: the guard may stop it; if it runs, no secret may show.
    let plain = fx.exec(&[
        "sh",
        "-c",
        &format!("cat ~/.ssh/id_ed25519 {home}/.aws/credentials 2>&1; ls -A {real_ssh_text} 2>&1; echo plain-done"),
    ]);
    denied_or(&plain, "plain cat", |text| {
        assert!(!text.contains("Zq7"), "a secret leaked: {text}");
        assert!(text.contains("plain-done"), "{text}");
    });
    let o = fx.script(&payload, Some(60));
    let text = out(&o);
    assert!(
        text.contains("payload-done"),
        "the payload did not run: {text} {}",
        err(&o)
    );
    assert!(!text.contains("Zq7"), "a secret leaked: {text}");
    assert!(!err(&o).contains("Zq7"), "a secret leaked: {}", err(&o));
    assert!(text.contains(hidden_marker()), "{text}");
    assert!(
        !text.lines().any(|l| l.starts_with("listing: ")),
        "/root/.ssh was listable: {text}"
    );
    // The host side: the secrets are where they were, unchanged.
    for (rel, body) in secrets {
        assert_eq!(std::fs::read_to_string(fx.home.join(rel)).unwrap(), body);
    }
    assert_eq!(
        std::fs::read_to_string(&planted).unwrap(),
        "Zq7-REAL-ROOT-KEY-e2e"
    );
}

#[test]
fn writes_outside_the_workspace_never_reach_the_host() {
    let fx = Fx::new();
    let tag = marker("outside");
    let beside = fx.root.join(format!("{tag}.txt"));
    let home_file = fx.home.join(".bashrc");
    let targets = [
        beside.clone(),
        home_file.clone(),
        PathBuf::from(format!("/tmp/{tag}")),
        PathBuf::from(format!("/etc/{tag}")),
        PathBuf::from(format!("/{tag}")),
        PathBuf::from(format!("/usr/local/{tag}")),
        PathBuf::from(format!("/var/tmp/{tag}")),
    ];
    let _cleanup: Vec<RemoveOnDrop> = targets.iter().cloned().map(RemoveOnDrop).collect();
    let list: Vec<String> = targets.iter().map(|p| p.display().to_string()).collect();
    let list = list.join(" ");
    let plain = fx.exec(&[
        "sh",
        "-c",
        &format!("echo pwned > /etc/{tag}; echo plain-done"),
    ]);
    denied_or(&plain, "plain write to /etc", |text| {
        assert!(text.contains("plain-done"), "{text}");
    });
    let payload = format!(
        "for p in {list}; do echo pwned > \"$p\" 2>/dev/null && echo wrote \"$p\"; done\n\
         echo pwned >> ~/.profile 2>/dev/null && echo wrote-profile\n\
         cp /bin/sh /usr/bin/{tag} 2>/dev/null && echo wrote-usr-bin\n\
         echo payload-done\n"
    );
    let o = fx.script(&payload, Some(60));
    let text = out(&o);
    assert!(text.contains("payload-done"), "{text} {}", err(&o));
    for p in &targets {
        assert!(!p.exists(), "{} reached the host: {text}", p.display());
    }
    assert!(!fx.home.join(".profile").exists(), "{text}");
    assert!(!Path::new(&format!("/usr/bin/{tag}")).exists(), "{text}");
    // Nothing outside the workspace became a staged change either.
    let o = fx.run(&["--json", "status"]);
    let v: serde_json::Value = serde_json::from_str(out(&o).trim()).unwrap();
    let paths: Vec<&str> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["payload.sh"], "{v}");
}

#[test]
fn writes_into_the_workspace_are_staged_and_the_disk_stays_byte_for_byte() {
    let fx = Fx::new();
    std::fs::create_dir_all(fx.ws.join("deep/a/b")).unwrap();
    std::fs::write(fx.ws.join("deep/a/b/c.txt"), "c\n").unwrap();
    std::fs::write(fx.ws.join("run.sh"), "#!/bin/sh\necho ok\n").unwrap();
    std::fs::set_permissions(fx.ws.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let before = snapshot(&fx.ws);
    let ws = fx.ws.display().to_string();
    let payload = format!(
        "echo evil > src/main.rs\n\
         echo abs > {ws}/abs.txt\n\
         rm -rf deep\n\
         chmod 000 run.sh\n\
         mv README.md R2.md\n\
         truncate -s 0 R2.md\n\
         touch -d 2001-01-01 src\n\
         mkdir -p n/e/w && echo new > n/e/w/file\n\
         ls -A .airlock 2>&1; echo evil > .airlock/evil 2>&1; rm -rf .airlock 2>&1\n\
         echo payload-done\n"
    );
    let o = fx.script(&payload, Some(60));
    assert_eq!(o.status.code(), Some(0), "{} {}", out(&o), err(&o));
    assert!(out(&o).contains("payload-done"));
    assert_eq!(snapshot(&fx.ws), before, "the real workspace changed");
    assert!(
        !fx.ws.join(".airlock/evil").exists(),
        "the payload reached airlock's own state"
    );
    let o = fx.run(&["status"]);
    let status = out(&o);
    // The Landlock tier shows the workspace as a copy at another path: a write to the real
    // workspace's absolute path is refused there (the snapshot above shows it did not land).
    let abs = if TIER == "landlock" { None } else { Some("A abs.txt") };
    for line in [
        "M src/main.rs",
        abs.unwrap_or("M src/main.rs"),
        "D deep",
        "M run.sh",
        "D README.md",
        "A R2.md",
        "A n/e/w/file",
        "A payload.sh",
    ] {
        assert!(
            status.lines().any(|l| l.trim() == line),
            "`{line}` missing from status:\n{status}"
        );
    }
    assert!(!status.contains(".airlock"), "{status}");
    assert!(!status.contains("evil"), "{status}");
    // Later commands see the staged state, the disk still does not.
    let o = fx.exec(&["cat", "src/main.rs"]);
    assert_eq!(out(&o), "evil\n", "{}", err(&o));
    assert_eq!(snapshot(&fx.ws), before);
}

#[test]
fn airlock_state_in_the_workspace_is_hidden_from_commands() {
    let fx = Fx::new();
    // Another session's staged content lives in `.airlock/` (blobs, session databases).
    let args =
        serde_json::json!({"path": "plan.txt", "content": "Zq7-OTHER-SESSION-e2e"}).to_string();
    let o = fx.run(&[
        "--session",
        "other",
        "--mode",
        "build",
        "call",
        "write_file",
        &args,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let state = fx.ws.join(".airlock");
    assert!(state.is_dir());
    let before = snapshot(&state);
    let ws = fx.ws.display().to_string();
    let o = fx.script(
        &format!(
            "ls -A .airlock {ws}/.airlock 2>&1 | sed 's/^/listing: /'\n\
             grep -rs 'Zq[7]-' . {ws} 2>/dev/null\n\
             echo evil > .airlock/evil 2>/dev/null && echo wrote-state\n\
             rm -rf .airlock/* 2>/dev/null; mv .airlock gone 2>/dev/null && echo moved-state\n\
             echo payload-done\n"
        ),
        Some(60),
    );
    let text = out(&o);
    assert!(text.contains("payload-done"), "{text} {}", err(&o));
    assert!(
        !text.contains("Zq7"),
        "another session's staged content leaked: {text}"
    );
    let listed: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("listing: "))
        // An error of `ls` (the Landlock tier refuses the real workspace) lists nothing.
        .filter(|l| !l.is_empty() && !l.ends_with(':') && !l.starts_with("ls: cannot "))
        .collect();
    assert!(
        listed.is_empty(),
        "`.airlock` is visible to the command: {text}"
    );
    assert!(!text.contains("wrote-state"), "{text}");
    assert!(!text.contains("moved-state"), "{text}");
    // On the host, the state is intact, and nothing of it was staged.
    let after = snapshot(&state);
    for (path, entry) in &before {
        if path.starts_with("blobs") {
            assert_eq!(after.get(path), Some(entry), "{} changed", path.display());
        }
    }
    assert!(!state.join("evil").exists());
    let st = out(&fx.run(&["status"]));
    assert_eq!(st.trim(), "A payload.sh", "{st}");
}

#[test]
fn the_host_loopback_listener_receives_nothing() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let fx = Fx::new();
    let plain = fx.exec(&[
        "bash",
        "-c",
        &format!("echo leak > /dev/tcp/127.0.0.1/{port} && echo connected; echo plain-done"),
    ]);
    denied_or(&plain, "plain /dev/tcp", |text| {
        assert!(!text.contains("connected"), "{text}");
    });
    fx.stage(
        "probe.py",
        &format!(
            "import socket\n\
             try:\n    s = socket.create_connection(('127.0.0.1', {port}), timeout=2)\n    s.sendall(b'leak')\n    print('py-connected')\n\
             except Exception as e:\n    print('py-refused', type(e).__name__, e)\n"
        ),
    );
    let payload = format!(
        "bash -c 'echo leak > /dev/tcp/127.0.0.1/{port}' 2>&1 && echo bash-connected\n\
         /usr/bin/python3 probe.py\n\
         curl -s -m 2 http://127.0.0.1:{port}/ 2>&1 && echo curl-connected\n\
         echo payload-done\n"
    );
    let o = fx.script(&payload, Some(60));
    let text = out(&o);
    assert!(text.contains("payload-done"), "{text} {}", err(&o));
    assert!(text.contains("py-refused"), "the probe did not run: {text}");
    assert!(!text.contains("connected\n"), "{text}");
    assert!(!text.contains("py-connected"), "{text}");
    match listener.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        Ok((_, peer)) => {
            panic!("a sandboxed process reached the host listener from {peer}: {text}")
        }
        Err(e) => panic!("accept: {e}"),
    }
}

#[test]
fn host_environment_secrets_are_invisible() {
    let fx = Fx::new();
    let secrets = [
        ("AWS_SECRET_ACCESS_KEY", "Zq7-aws-secret-e2e"),
        ("GITHUB_TOKEN", "Zq7-ghp-token-e2e"),
        ("OPENAI_API_KEY", "Zq7-openai-e2e"),
        ("LD_PRELOAD", "/nonexistent/libZq7-e2e.so"),
    ];
    let run = |args: &[&str]| {
        let mut c = fx.cmd(args);
        for (k, v) in secrets {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let plain = run(&["--mode", "build", "exec", "--", "printenv"]);
    denied_or(&plain, "printenv", |text| {
        assert!(!text.contains("Zq7"), "{text}");
    });
    let plain = run(&[
        "--mode",
        "build",
        "exec",
        "--",
        "sh",
        "-c",
        "echo \"aws=${AWS_SECRET_ACCESS_KEY:-absent} gh=${GITHUB_TOKEN:-absent} pre=${LD_PRELOAD:-absent}\"",
    ]);
    denied_or(&plain, "expansion", |text| {
        assert!(text.contains("aws=absent gh=absent pre=absent"), "{text}");
    });
    fx.stage(
        "payload.sh",
        "env\n\
         echo \"aws=${AWS_SECRET_ACCESS_KEY:-absent} gh=${GITHUB_TOKEN:-absent} pre=${LD_PRELOAD:-absent}\"\n\
         for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f 2>/dev/null; done\n\
         cat /etc/ld.so.preload 2>/dev/null\n\
         echo payload-done\n",
    );
    let o = run(&["--mode", "build", "exec", "--", "sh", "payload.sh"]);
    let text = out(&o);
    assert!(text.contains("payload-done"), "{text} {}", err(&o));
    assert!(text.contains("PATH="), "env did not run: {text}");
    assert!(text.contains("aws=absent gh=absent pre=absent"), "{text}");
    assert!(
        !text.contains("Zq7"),
        "a host secret reached the command: {text}"
    );
    assert!(!text.contains("LD_PRELOAD"), "{text}");
    // The command's stderr carries no loader complaint about the host's LD_PRELOAD either.
    let stderr = err(&o);
    // (The loader complains once, for airlock itself; a leak would repeat it per program.)
    assert!(
        stderr.matches("libZq7").count() <= 1,
        "LD_PRELOAD reached the sandbox: {stderr}"
    );
}

#[test]
fn host_processes_cannot_be_signalled_or_traced() {
    let fx = Fx::new();
    let mut victim = Command::new("sleep").arg("120").spawn().unwrap();
    let pid = victim.id();
    let plain = fx.exec(&["kill", "-9", &pid.to_string()]);
    assert!(
        victim.try_wait().unwrap().is_none(),
        "the host process died: {} {}",
        out(&plain),
        err(&plain)
    );
    fx.stage(
        "trace.py",
        &format!(
            "import ctypes, os\n\
             libc = ctypes.CDLL(None, use_errno=True)\n\
             for target in ({pid}, 1, os.getppid()):\n\
             \x20   r = libc.ptrace(16, target, 0, 0)\n\
             \x20   print('ptrace', target, r, os.strerror(ctypes.get_errno()))\n\
             try:\n    os.kill({pid}, 9)\n    print('py-killed')\n\
             except OSError as e:\n    print('py-kill-refused', e)\n\
             try:\n    open('/proc/{pid}/mem', 'rb').read(1)\n    print('mem-read')\n\
             except OSError as e:\n    print('mem-refused', e)\n"
        ),
    );
    let payload = format!(
        "kill -9 {pid} 2>&1; echo kill=$?\n\
         kill -9 -1 2>&1; echo killall=$?\n\
         /usr/bin/python3 trace.py\n\
         timeout 3 strace -p {pid} 2>&1 | head -2\n\
         timeout 5 gdb -batch -p {pid} 2>&1 | grep -ci attached\n\
         echo payload-done\n"
    );
    let o = fx.script(&payload, Some(60));
    let text = out(&o);
    assert!(text.contains("payload-done"), "{text} {}", err(&o));
    assert!(
        victim.try_wait().unwrap().is_none(),
        "the host process died: {text}"
    );
    assert!(!text.contains("kill=0"), "{text}");
    assert!(text.contains(&format!("ptrace {pid} -1")), "{text}");
    assert!(text.contains("ptrace 1 -1"), "{text}");
    assert!(text.contains("py-kill-refused"), "{text}");
    assert!(text.contains("mem-refused"), "{text}");
    assert!(!text.contains(&format!("Process {pid} attached")), "{text}");
    // The victim is not being traced by anything.
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(status.lines().any(|l| l == "TracerPid:\t0"), "{status}");
    victim.kill().unwrap();
    victim.wait().unwrap();
}

#[test]
fn mounting_is_refused() {
    let fx = Fx::new();
    let host_mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let plain = fx.exec(&["mount", "-t", "tmpfs", "none", "/mnt"]);
    denied_or(&plain, "plain mount", |_| {
        assert_ne!(plain.status.code(), Some(0), "{}", err(&plain));
    });
    let o = fx.script(
        "mount -t tmpfs none /mnt 2>&1; echo mount=$?\n\
         mount --bind / /mnt 2>&1; echo bind=$?\n\
         unshare -rm sh -c 'mount -t tmpfs none /mnt && echo inner-mounted' 2>&1; echo unshare=$?\n\
         echo payload-done\n",
        Some(60),
    );
    let text = out(&o);
    assert!(text.contains("payload-done"), "{text} {}", err(&o));
    for key in ["mount=", "bind=", "unshare="] {
        let line = text
            .lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("no {key}: {text}"));
        assert_ne!(line, format!("{key}0"), "{text}");
    }
    assert!(!text.contains("inner-mounted"), "{text}");
    assert_eq!(
        std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .filter(|l| l.contains(" /mnt "))
            .count(),
        host_mounts.lines().filter(|l| l.contains(" /mnt ")).count()
    );
}

#[test]
fn a_fork_bomb_is_bounded_and_leaves_no_survivor() {
    let fx = Fx::new();
    let tag = marker("bomb");
    // A counted bomb: every child sleeps on, carrying the marker in its command line (the
    // script's name); the parent reports and exits, leaving them all behind.
    let script = format!("{tag}.py");
    fx.stage(
        &script,
        "import os, time\n\
         forked = failed = 0\n\
         for i in range(3000):\n\
         \x20   try:\n\
         \x20       pid = os.fork()\n\
         \x20   except OSError:\n\
         \x20       failed += 1\n\
         \x20       if failed > 50: break\n\
         \x20       continue\n\
         \x20   if pid == 0:\n\
         \x20       try:\n\
         \x20           time.sleep(300)\n\
         \x20       finally:\n\
         \x20           os._exit(1)\n\
         \x20   forked += 1\n\
         print('forked', forked, 'failed', failed, flush=True)\n",
    );
    let t = Instant::now();
    let o = fx.run(&[
        "--mode",
        "build",
        "exec",
        "--timeout",
        "60",
        "--",
        "/usr/bin/python3",
        &script,
    ]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(0), "{text} {}", err(&o));
    let forked: usize = text
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count: {text} {}", err(&o)));
    assert!(forked < 3000, "the bomb was never bounded: {text}");
    assert!(forked >= 100, "the bomb never forked: {text}");
    assert!(
        !text.contains("failed 0"),
        "forks were never refused: {text}"
    );
    assert!(t.elapsed() < Duration::from_secs(40), "{:?}", t.elapsed());
    assert!(
        host_processes_with(&tag).is_empty(),
        "survivors: {:?}",
        host_processes_with(&tag)
    );

    // The classic shell bomb: the guard refuses the command line; as a script it runs until
    // the timeout, and nothing survives. The script then `exec`s its sleep: once the bomb has
    // used up the process limit a forked `sleep` could fail, and dash would end the script
    // (status 2) before the timeout this checks. The bomb runs in a subshell: dash forks a
    // background pipeline's members from the shell itself, and under the run's CPU bandwidth
    // the script's own second fork can come after the bomb has taken every process slot.
    let plain = fx.run(&[
        "--mode",
        "build",
        "exec",
        "--timeout",
        "3",
        "--",
        "bash",
        "-c",
        "b() { b | b & }; b",
    ]);
    assert_guard_denied(&plain, "shell fork bomb");
    let t = Instant::now();
    let o = fx.script_named(
        &format!("{tag}.sh"),
        "(b() { b | b & }; b); exec sleep 300\n",
        Some(3),
    );
    assert_eq!(o.status.code(), Some(124), "{} {}", out(&o), err(&o));
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    assert!(
        host_processes_with(&tag).is_empty(),
        "survivors: {:?}",
        host_processes_with(&tag)
    );
}

/// Peak RSS in KiB of a command run under `/usr/bin/time -v`.
fn max_rss_kib(stderr: &str) -> u64 {
    stderr
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Maximum resident set size (kbytes): ")
        })
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no max RSS in: {stderr}"))
}

#[test]
fn an_output_flood_is_cut_with_a_marker_and_memory_stays_bounded() {
    let fx = Fx::new();
    let total: u64 = 200_000_000;
    fx.stage(
        "flood.sh",
        &format!("head -c {total} /dev/zero | tr '\\0' x; echo; echo THE-END\n"),
    );
    let mut c = Command::new("/usr/bin/time");
    c.arg("-v")
        .arg(BIN)
        .arg("--workspace")
        .arg(&fx.ws)
        .args([
            "--mode",
            "build",
            "exec",
            "--timeout",
            "60",
            "--",
            "sh",
            "flood.sh",
        ])
        .env("HOME", &fx.home)
        .env("XDG_CONFIG_HOME", fx.home.join(".config"))
        .stdin(Stdio::null());
    let t = Instant::now();
    let o = c.output().unwrap();
    let text = out(&o);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(t.elapsed() < Duration::from_secs(60));
    // The output is cut: head and tail kept, the middle named by its size.
    assert!(text.len() < 1 << 20, "{} bytes printed", text.len());
    assert!(text.starts_with("xxxx"), "{}", &text[..text.len().min(200)]);
    assert!(
        text.ends_with("\nTHE-END\n"),
        "{}",
        &text[text.len().saturating_sub(200)..]
    );
    let (head, rest) = text.split_once("\n[… ").expect("an omission marker");
    let (marker, tail) = rest.split_once("]\n").unwrap();
    let omitted: u64 = marker
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no byte count in the marker: {marker}"));
    assert!(marker.contains("bytes omitted"), "{marker}");
    assert!(
        head.bytes().all(|b| b == b'x'),
        "the head is not the output's start"
    );
    let kept = (head.len() + tail.len()) as u64;
    assert!(kept <= 64 << 10, "{kept} bytes kept in memory");
    assert_eq!(kept + omitted, total + 9, "kept {kept} + omitted {omitted}");
    let rss = max_rss_kib(&err(&o));
    eprintln!(
        "airlock peak RSS {rss} KiB for {total} bytes in {:?}",
        t.elapsed()
    );
    assert!(
        rss < 64 << 10,
        "airlock's peak RSS was {rss} KiB for {total} bytes of output"
    );
}

#[test]
fn a_daemon_does_not_outlive_exec() {
    let fx = Fx::new();
    let tag = marker("daemon");
    // setsid + double fork: the grandchild is re-parented, in its own session, then writes a
    // marker into the workspace after exec should be over.
    let daemon = format!(
        "( setsid bash -c 'exec -a {tag} bash -c \"sleep 4; echo escaped > escaped.txt; echo escaped > $HOME/escaped.txt\"' & ) &\n\
         echo started\n"
    );
    let plain = fx.run(&[
        "--mode",
        "build",
        "exec",
        "--timeout",
        "2",
        "--",
        "sh",
        "-c",
        &format!("{daemon} sleep 60"),
    ]);
    denied_or(&plain, "plain daemon", |text| {
        assert_eq!(plain.status.code(), Some(124), "{text}");
        assert!(
            host_processes_with(&tag).is_empty(),
            "a daemon survived the timeout: {:?}",
            host_processes_with(&tag)
        );
    });
    // 1: the command times out while the daemon sleeps.
    let t = Instant::now();
    let o = fx.script(&format!("{daemon}sleep 60\n"), Some(2));
    assert_eq!(o.status.code(), Some(124), "{} {}", out(&o), err(&o));
    assert_eq!(out(&o), "started\n", "{}", err(&o));
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    assert!(
        host_processes_with(&tag).is_empty(),
        "a daemon survived the timeout: {:?}",
        host_processes_with(&tag)
    );
    // 2: the command exits at once, leaving the daemon behind.
    let o = fx.script(&daemon, Some(60));
    assert_eq!(o.status.code(), Some(0), "{} {}", out(&o), err(&o));
    assert!(
        host_processes_with(&tag).is_empty(),
        "a daemon survived exec: {:?}",
        host_processes_with(&tag)
    );
    std::thread::sleep(Duration::from_secs(5));
    assert!(host_processes_with(&tag).is_empty());
    assert!(
        !fx.ws.join("escaped.txt").exists(),
        "a daemon wrote to the workspace"
    );
    assert!(
        !fx.home.join("escaped.txt").exists(),
        "a daemon wrote to $HOME"
    );
    let o = fx.run(&["status"]);
    assert!(!out(&o).contains("escaped.txt"), "{}", out(&o));
}

// ---------------------------------------------------------------------------------------------
// Resource ceilings: memory, CPU time, processes, what a run may write, socket families.

/// `airlock --json --mode build exec FLAGS -- sh NAME` over a staged script: the bash tool's
/// JSON result and the exit code.
fn exec_json(fx: &Fx, name: &str, body: &str, flags: &[&str]) -> (serde_json::Value, Option<i32>) {
    fx.stage(name, body);
    let mut args = vec!["--json", "--mode", "build", "exec"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", "sh", name]);
    let o = fx.run(&args);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("no JSON ({e}): {} {}", out(&o), err(&o)));
    (v, o.status.code())
}

#[test]
fn socket_families_the_sandbox_does_not_need_are_refused() {
    let fx = Fx::new();
    // Every address family the kernel knows (0..46) except unix, inet, inet6 and netlink: each
    // must fail with EAFNOSUPPORT (not kill the process). vsock is not network-namespaced.
    // The Landlock tier refuses `socket(AF_UNIX)` too (no network namespace hides the host's
    // daemons' sockets there); `socketpair` works in every tier.
    let landlock = if TIER == "landlock" { "True" } else { "False" };
    fx.stage(
        "fam.py",
        &(format!("LANDLOCK = {landlock}\n")
            + "import socket, errno\n\
         out = []\n\
         for fam in range(0, 46):\n\
         \x20   if fam in (1, 2, 10, 16):\n\
         \x20       continue\n\
         \x20   for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_RAW, socket.SOCK_SEQPACKET):\n\
         \x20       try:\n\
         \x20           s = socket.socket(fam, kind, 0); s.close(); out.append(f'OPEN {fam}/{kind}')\n\
         \x20       except OSError as e:\n\
         \x20           if e.errno != errno.EAFNOSUPPORT: out.append(f'ERR {fam}/{kind} {errno.errorcode.get(e.errno)}')\n\
         for proto in (4, 9, 15):\n\
         \x20   try:\n\
         \x20       s = socket.socket(16, socket.SOCK_RAW, proto); s.close(); out.append(f'OPEN netlink/{proto}')\n\
         \x20   except OSError as e:\n\
         \x20       pass\n\
         try:\n\
         \x20   u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); u.close()\n\
         except PermissionError:\n\
         \x20   if not LANDLOCK: raise\n\
         else:\n\
         \x20   if LANDLOCK: out.append('OPEN unix')\n\
         a, b = socket.socketpair(); a.close(); b.close()\n\
         r = socket.socket(16, socket.SOCK_RAW, 0); r.close()\n\
         print('\\n'.join(out) or 'all refused')\n"),
    );
    let o = fx.exec(&["/usr/bin/python3", "fam.py"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(0), "{text} {}", err(&o));
    assert_eq!(text.trim(), "all refused", "{text}");
}

#[test]
fn a_memory_bomb_hits_the_memory_ceiling_and_says_so() {
    let fx = Fx::new();
    let (v, code) = exec_json(
        &fx,
        "mem.sh",
        "exec /usr/bin/python3 -c 's = b\"x\" * (3 << 30); print(\"allocated\", len(s))'\n",
        &["--memory", "512M", "--timeout", "60"],
    );
    let text = v.to_string();
    assert_ne!(code, Some(0), "{text}");
    assert!(!text.contains("allocated"), "3 GiB was allocated: {text}");
    assert_eq!(v["limits"]["memory"]["bytes"], 512 << 20, "{text}");
    match v["limits"]["memory"]["by"].as_str() {
        Some("cgroup") => {
            assert_eq!(v["ceiling"]["name"], "memory", "{text}");
            assert!(v["note"].as_str().unwrap_or("").contains("--memory"), "{text}");
            let peak = v["limits"]["memory"]["peak_bytes"].as_u64().unwrap_or(0);
            assert!(peak <= (512 << 20) + (16 << 20), "peak {peak}: {text}");
        }
        Some("rlimit") => assert!(v["stderr"].as_str().unwrap_or("").contains("MemoryError"), "{text}"),
        other => panic!("memory ceiling by {other:?}: {text}"),
    }
}

#[test]
fn a_cpu_busy_loop_ends_at_its_cpu_time_ceiling() {
    let fx = Fx::new();
    let t = Instant::now();
    let (v, code) = exec_json(
        &fx,
        "spin.sh",
        "while :; do :; done\n",
        &["--cpu-secs", "1", "--timeout", "15"],
    );
    let text = v.to_string();
    assert!(t.elapsed() < Duration::from_secs(12), "{:?}: {text}", t.elapsed());
    assert_ne!(code, Some(0), "{text}");
    assert_ne!(code, Some(124), "ran into the wall-clock timeout: {text}");
    assert_eq!(v["ceiling"]["name"], "cpu", "{text}");
    assert!(v["note"].as_str().unwrap_or("").contains("--cpu-secs"), "{text}");
    assert_eq!(v["limits"]["cpu"]["seconds"], 1, "{text}");
}

#[test]
fn writing_past_the_upper_ceiling_fails_and_the_disk_is_spared() {
    let fx = Fx::new();
    // Many files, none of them large: a per-file limit alone would not stop this.
    let (v, code) = exec_json(
        &fx,
        "fill.sh",
        "i=0; while [ $i -lt 400 ]; do head -c 1048576 /dev/zero > f$i || exit 9; i=$((i+1)); done; echo wrote-all\n",
        &["--disk", "64M", "--timeout", "60"],
    );
    let text = v.to_string();
    assert_ne!(code, Some(0), "{text}");
    assert!(!v["stdout"].as_str().unwrap_or("").contains("wrote-all"), "{text}");
    assert_eq!(v["ceiling"]["name"], "disk", "{text}");
    assert!(v["note"].as_str().unwrap_or("").contains("--disk"), "{text}");
    // Nothing of a run past the ceiling is staged (staging would copy it again).
    assert_eq!(v["staged"], serde_json::json!([]), "{text}");
    assert_eq!(v["exit_code"], 137, "{text}");
    let st = fx.run(&["status"]);
    assert_eq!(out(&st).trim(), "A fill.sh", "staged after all: {}", out(&st));
}

#[test]
fn a_fork_bomb_of_busy_loops_is_held_to_its_cpu_share() {
    let fx = Fx::new();
    let tag = marker("spinbomb");
    let (v, code) = exec_json(
        &fx,
        &format!("{tag}.sh"),
        "i=0; while [ $i -lt 64 ]; do ( while :; do :; done ) & i=$((i+1)); done; wait\n",
        &["--timeout", "4"],
    );
    let text = v.to_string();
    assert_eq!(code, Some(124), "{text}");
    let cpu = &v["limits"]["cpu"];
    if cpu["by"] == "cgroup" {
        // The kernel's own account of the run's CPU time: at most its bandwidth over the wall
        // time (plus one scheduling period of slack).
        let cpus = cpu["quota_cpus"].as_f64().expect("quota_cpus");
        let used = cpu["used_ms"].as_f64().expect("used_ms");
        let wall = v["duration_ms"].as_f64().expect("duration_ms");
        assert!(cpus > 0.0 && cpus < 64.0, "{text}");
        assert!(used <= cpus * wall * 1.15 + 300.0, "used {used} ms over {wall} ms at {cpus} CPUs: {text}");
    } else {
        let expected = rustix::process::geteuid().is_root()
            && rustix::fs::access("/sys/fs/cgroup", rustix::fs::Access::WRITE_OK).is_ok();
        assert!(!expected, "root with writable control groups, yet no CPU bandwidth: {text}");
        assert!(cpu["quota_cpus"].is_null(), "{text}");
        eprintln!("no writable control groups here: no CPU bandwidth ceiling to check");
    }
    assert!(host_processes_with(&tag).is_empty(), "{:?}", host_processes_with(&tag));
    // The run was in its group, the warm host never: a host in a run's group would share
    // (and outlive) its ceilings.
    assert_eq!(v["warm_host"] == true, HOST_MODE == "always", "{text}");
    // Hosts only: a run's PID 1 (and a spare) is a fork of its host, with the same command
    // line, and belongs in the run's group; the host is the one whose parent is no host.
    let hosts = warm_hosts("__airlock-sandbox-host");
    assert!(
        HOST_MODE != "always" || !hosts.is_empty(),
        "no warm host to check"
    );
    for pid in &hosts {
        let groups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        assert!(!groups.contains("airlock-"), "a warm host is in a run's group: {groups}");
    }
}

#[test]
fn without_a_control_group_rlimits_hold_memory_and_cpu_time_and_say_so() {
    let fx = Fx::new();
    fx.stage("mem.py", "s = b'x' * (3 << 30)\nprint('allocated', len(s))\n");
    fx.stage("spin.sh", "while :; do :; done\n");
    let run = |flags: &[&str], argv: &[&str]| {
        let mut args = vec!["--json", "--mode", "build", "exec"];
        args.extend_from_slice(flags);
        args.push("--");
        args.extend_from_slice(argv);
        let o = fx
            .cmd(&args)
            .env("AIRLOCK_SANDBOX_CGROUP", "off")
            .output()
            .expect("airlock runs");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("no JSON ({e}): {} {}", out(&o), err(&o)));
        (v, o.status.code())
    };
    let (v, code) = run(&["--memory", "512M"], &["/usr/bin/python3", "mem.py"]);
    let text = v.to_string();
    assert_ne!(code, Some(0), "{text}");
    assert!(v["stderr"].as_str().unwrap_or("").contains("MemoryError"), "{text}");
    assert_eq!(v["limits"]["memory"]["by"], "rlimit", "{text}");
    assert!(v["limits"]["memory"]["peak_bytes"].is_null(), "{text}");
    assert!(v["limits"]["cpu"]["quota_cpus"].is_null(), "{text}");
    let t = Instant::now();
    let (v, code) = run(&["--cpu-secs", "1", "--timeout", "15"], &["sh", "spin.sh"]);
    let text = v.to_string();
    assert!(t.elapsed() < Duration::from_secs(12), "{text}");
    assert_ne!(code, Some(124), "{text}");
    assert_eq!(v["ceiling"]["name"], "cpu", "{text}");
    assert_eq!(v["limits"]["cpu"]["by"], "rlimit", "{text}");
}
