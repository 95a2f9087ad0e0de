//! Real attacks through the namespace backend: each payload runs in the sandbox over a temporary
//! workspace, and the test checks the host side, not just the payload's own report.

mod common;

use std::collections::BTreeMap;
use std::io::Read;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{Fixture, run, stdout};

/// Removes a path when dropped, so a failing test still cleans the real `$HOME`.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Every file under `root` with its content and mode.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u32)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            let rel = entry.path().strip_prefix(root).unwrap().to_path_buf();
            if meta.is_dir() {
                stack.push(entry.path());
                out.insert(rel, (Vec::new(), meta.permissions().mode()));
            } else if meta.file_type().is_symlink() {
                let target = std::fs::read_link(entry.path()).unwrap();
                out.insert(rel, (target.into_os_string().into_encoded_bytes(), 0));
            } else {
                out.insert(
                    rel,
                    (
                        std::fs::read(entry.path()).unwrap(),
                        meta.permissions().mode(),
                    ),
                );
            }
        }
    }
    out
}

/// Host processes whose command line contains `marker`.
fn host_processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmd.contains(marker) && !cmd.contains("cargo") {
                found.push(format!("{}: {cmd}", entry.file_name().to_string_lossy()));
            }
        }
    }
    found
}

#[test]
fn host_secrets_in_home_and_etc_are_absent() {
    let fx = Fixture::new();
    let home = fx.path().join("home");
    for (rel, body) in [
        (".ssh/id_ed25519", "Zq7-SSH-KEY-9x"),
        (".aws/credentials", "Zq7-AWS-KEY-9x"),
        (".gitconfig", "Zq7-GIT-KEY-9x"),
    ] {
        let p = home.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, body).unwrap();
    }
    std::fs::create_dir_all(home.join(".cargo")).unwrap();
    std::os::unix::fs::symlink(home.join(".ssh/id_ed25519"), fx.workspace.join("innocent"))
        .unwrap();
    let mut spec = fx.spec(
        "cat ~/.ssh/id_ed25519 ~/.aws/credentials ~/.gitconfig innocent /etc/shadow /etc/ssh/ssh_host_ed25519_key 2>&1; \
         ls -A ~; find / -xdev -name 'id_ed25519' 2>/dev/null; grep -r Zq7 ~ /tmp /etc 2>/dev/null | head -3",
    );
    spec.home_binds = vec![PathBuf::from(".cargo")];
    let out = run(&spec);
    let text = stdout(&out);
    assert!(!text.contains("Zq7"), "a secret leaked: {text}");
    assert!(text.contains("No such file"), "{text}");
    assert!(text.lines().any(|l| l == ".cargo"), "{text}");

    // The real $HOME: plant a fake key in ~/.ssh for the duration of the test.
    let real_home = PathBuf::from(std::env::var_os("HOME").unwrap());
    let ssh = real_home.join(".ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    let key = ssh.join(format!("airlock-attack-test-{}", std::process::id()));
    std::fs::write(&key, "REAL-HOME-SECRET").unwrap();
    let _cleanup = RemoveOnDrop(key.clone());
    let mut spec = fx.spec(&format!("cat {} 2>&1; ls -A $HOME", key.display()));
    spec.home = None;
    let out = run(&spec);
    let text = stdout(&out);
    assert!(!text.contains("REAL-HOME-SECRET"), "{text}");
    assert!(text.contains("No such file"), "{text}");
}

#[test]
fn writes_outside_the_workspace_do_not_reach_the_host() {
    let fx = Fixture::new();
    let host_root_marker = PathBuf::from(format!("/airlock-attack-{}", std::process::id()));
    let beside = fx.path().join("beside.txt");
    let upper_escape = fx.upper.join("direct.txt");
    let home_file = fx.path().join("home/.bashrc");
    let script = format!(
        "for p in {root} {beside} {upper} {home} /usr/local/airlock-x /etc/airlock-x /var/airlock-x /dev/airlock-x; do \
           echo pwned > $p 2>/dev/null && echo wrote $p; done; \
         ln -s /etc/passwd hl 2>/dev/null; ln /usr/bin/sh hard 2>&1 | head -1; true",
        root = host_root_marker.display(),
        beside = beside.display(),
        upper = upper_escape.display(),
        home = home_file.display(),
    );
    let out = run(&fx.spec(&script));
    assert_eq!(out.exit_code, Some(0), "{}", out.stderr.text_lossy());
    for p in [&host_root_marker, &beside, &upper_escape, &home_file] {
        assert!(!p.exists(), "{} reached the host", p.display());
    }
    for p in [
        "/usr/local/airlock-x",
        "/etc/airlock-x",
        "/var/airlock-x",
        "/dev/airlock-x",
    ] {
        assert!(!Path::new(p).exists(), "{p} reached the host");
    }
    // Writes to the private /tmp and $HOME succeed inside and vanish.
    assert!(
        stdout(&out).contains(&format!("wrote {}", beside.display())),
        "{}",
        stdout(&out)
    );
    assert!(!stdout(&out).contains("wrote /usr"), "{}", stdout(&out));
}

#[test]
fn the_real_workspace_never_changes() {
    let fx = Fixture::new();
    fx.write("src/main.rs", "fn main() {}\n");
    fx.write("README", "readme\n");
    fx.write("deep/a/b/c.txt", "c\n");
    let before = snapshot(&fx.workspace);
    let ws = fx.workspace.canonicalize().unwrap();
    let script = format!(
        "echo evil > src/main.rs; rm -rf deep; chmod 000 README; mv README R2; truncate -s 0 R2; \
         echo abs > {ws}/abs.txt; touch -d 2001-01-01 src; ln -s /etc x; mkdir -p n/e/w; \
         cat /proc/self/mountinfo | grep -c overlay",
        ws = ws.display()
    );
    let out = run(&fx.spec(&script));
    assert_eq!(out.exit_code, Some(0), "{}", out.stderr.text_lossy());
    assert_eq!(snapshot(&fx.workspace), before, "the workspace changed");
    let changes = airlock_sandbox::harvest(&fx.upper).unwrap();
    let paths: Vec<_> = changes
        .iter()
        .map(|c| c.path().to_string_lossy().into_owned())
        .collect();
    for p in [
        "src/main.rs",
        "deep",
        "README",
        "R2",
        "abs.txt",
        "x",
        "n/e/w",
    ] {
        assert!(paths.iter().any(|q| q == p), "{p} missing from {paths:?}");
    }
}

#[test]
fn host_loopback_listener_is_unreachable() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let fx = Fixture::new();
    let probe = format!(
        "/usr/bin/python3 -c 'import socket,sys\ntry:\n s=socket.create_connection((\"127.0.0.1\",{port}),timeout=2); s.sendall(b\"leak\"); print(\"connected\")\nexcept Exception as e: print(type(e).__name__, e)'"
    );
    // Network off: sockets work, but only the sandbox's own loopback exists.
    let out = run(&fx.spec(&probe));
    assert!(
        stdout(&out).contains("ConnectionRefusedError"),
        "{}",
        stdout(&out)
    );
    assert!(
        listener.accept().is_err(),
        "a sandboxed process reached the host listener"
    );
    // The same probe with the network on does connect, so the checks above can fail.
    let mut spec = fx.spec(&probe);
    spec.network = true;
    let out = run(&spec);
    assert!(stdout(&out).contains("connected"), "{}", stdout(&out));
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        if let Ok((mut s, _)) = listener.accept() {
            let mut buf = Vec::new();
            s.set_nonblocking(false).unwrap();
            s.read_to_end(&mut buf).unwrap();
            assert_eq!(buf, b"leak");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the network-on probe never arrived"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The run's private loopback works for a real server (a test suite's local server): Python's
/// `http.server` on 127.0.0.1 and a raw socket on ::1, served and fetched inside the run; a
/// connect to any other address fails at once (only `lo` exists: ENETUNREACH, no packet sent).
#[test]
fn loopback_servers_work_and_nothing_else_is_reachable() {
    let fx = Fixture::new();
    let script = r#"
import errno, http.server, socket, threading, time, urllib.request
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"served-in-sandbox"
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
srv = http.server.HTTPServer(("127.0.0.1", 0), H)
threading.Thread(target=srv.serve_forever, daemon=True).start()
url = "http://127.0.0.1:%d/" % srv.server_address[1]
print("HTTP", urllib.request.urlopen(url, timeout=5).read().decode())
s6 = socket.socket(socket.AF_INET6); s6.bind(("::1", 0)); s6.listen(1)
c6 = socket.create_connection(("::1", s6.getsockname()[1]), timeout=5)
a, _ = s6.accept(); c6.sendall(b"v6"); print("V6", a.recv(2).decode())
for target in [("10.255.255.1", 80), ("2001:db8::1", 80)]:
    t = time.monotonic()
    try:
        socket.create_connection(target, timeout=10); print("REACHED", target)
    except OSError as e:
        print("UNREACHABLE", target[0], errno.errorcode.get(e.errno, e.errno), round(time.monotonic() - t, 3))
"#;
    fx.write("srv.py", script);
    let out = run(&fx.spec("/usr/bin/python3 srv.py"));
    let text = stdout(&out);
    assert!(text.contains("HTTP served-in-sandbox"), "{text}\n{out:?}");
    assert!(text.contains("V6 v6"), "{text}");
    assert!(!text.contains("REACHED"), "{text}");
    for line in text.lines().filter(|l| l.starts_with("UNREACHABLE")) {
        let secs: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(line.contains("ENETUNREACH"), "{line}");
        assert!(secs < 1.0, "a refused connect waited: {line}");
    }
    assert_eq!(text.matches("UNREACHABLE").count(), 2, "{text}");
}

#[test]
fn host_environment_secrets_are_not_inherited() {
    // The program's environment as its `main` hands it over, with a secret and a loader
    // variable in it.
    let mut settings = common::settings();
    settings.inherit.extend([
        ("AIRLOCK_FAKE_API_TOKEN".into(), "tok-123-secret".into()),
        ("LD_PRELOAD_AIRLOCK_TEST".into(), "x".into()),
        ("LANG".into(), "C.UTF-8".into()),
    ]);
    let fx = Fixture::new();
    let spec = fx.spec("env; cat /proc/1/environ 2>&1; echo; cat /proc/1/cmdline >/dev/null && echo cmdline-readable");
    let out = airlock_sandbox::Backend::run(
        &airlock_sandbox::NamespaceBackend::with_settings(settings),
        &spec,
    )
    .unwrap();
    let text = stdout(&out);
    assert!(!text.contains("tok-123-secret"), "{text}");
    assert!(!text.contains("LD_PRELOAD"), "{text}");
    // PID 1 is a copy of the host process: its environment must be unreadable (Landlock
    // forbids ptrace-class access to processes outside the sandbox's domain).
    assert!(
        text.contains("/proc/1/environ: Permission denied"),
        "{text}"
    );
    assert!(text.contains("PATH="), "{text}");
    // The allow-listed part does reach the command.
    assert!(text.contains("LANG=C.UTF-8"), "{text}");
}

#[test]
fn host_processes_cannot_be_signalled_or_traced() {
    let mut victim = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = victim.id();
    let fx = Fixture::new();
    let script = format!(
        "kill -9 {pid} 2>&1; kill -9 -1 2>&1; sleep 0.2 & \
         /usr/bin/python3 -c 'import ctypes,os\nlibc=ctypes.CDLL(None,use_errno=True)\nr=libc.ptrace(16,{pid},0,0); print(\"host\",r,os.strerror(ctypes.get_errno()))\nr=libc.ptrace(16,1,0,0); print(\"init\",r,os.strerror(ctypes.get_errno()))'; \
         ls /proc | grep -c '^[0-9]'"
    );
    let out = run(&fx.spec(&script));
    let text = stdout(&out);
    assert!(
        victim.try_wait().unwrap().is_none(),
        "the host process died: {text}"
    );
    assert!(text.contains("host -1 Operation not permitted"), "{text}");
    assert!(text.contains("init -1 Operation not permitted"), "{text}");
    victim.kill().unwrap();
    victim.wait().unwrap();
}

#[test]
fn mounting_and_new_namespaces_are_refused() {
    let fx = Fixture::new();
    let script = "mount -t tmpfs none /tmp 2>&1 | head -1; unshare -r true 2>&1; unshare -m true 2>&1; \
        /usr/bin/python3 -c 'import ctypes,os\nlibc=ctypes.CDLL(None,use_errno=True)\n\
for name,args in [(\"mount\",(b\"none\",b\"/tmp\",b\"tmpfs\",0,None)),(\"umount2\",(b\"/proc\",2)),(\"unshare\",(0x10000000,)),(\"chroot\",(b\"/tmp\",))]:\n r=getattr(libc,name)(*args); print(name,r,os.strerror(ctypes.get_errno()))\n\
print(\"clone3\", libc.syscall(435,0,0), os.strerror(ctypes.get_errno()))\n\
print(\"io_uring\", libc.syscall(425,8,0), os.strerror(ctypes.get_errno()))\n\
print(\"bpf\", libc.syscall(321,0,0,0), os.strerror(ctypes.get_errno()))\n\
print(\"x32\", libc.syscall(0x40000000|39), os.strerror(ctypes.get_errno()))'";
    let out = run(&fx.spec(script));
    let text = stdout(&out);
    for expected in [
        "mount -1 Operation not permitted",
        "umount2 -1 Operation not permitted",
        "unshare -1 Operation not permitted",
        "chroot -1 Operation not permitted",
        "clone3 -1 Function not implemented",
        "io_uring -1 Operation not permitted",
        "bpf -1 Operation not permitted",
        "x32 -1 Operation not permitted",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in {text}");
    }
    assert!(!text.contains("unshare -1 Success"), "{text}");
}

#[test]
fn fork_bomb_is_bounded_and_cleaned_up() {
    let marker = format!("airlock-bomb-{}", std::process::id());
    let fx = Fixture::new();
    let bomb = r#"
import os, time
forked = failed = 0
for i in range(400):
    try:
        pid = os.fork()
    except OSError:
        failed += 1
        continue
    if pid == 0:
        try:
            os.execv('/bin/sleep', ['MARKER', '60'])
        finally:
            os._exit(1)
    forked += 1
time.sleep(0.3)
print('procs', len([d for d in os.listdir('/proc') if d.isdigit()]), 'forked', forked, 'failed', failed)
"#
    .replace("MARKER", &marker);
    let mut spec = fx.spec("");
    spec.argv = vec!["/usr/bin/python3".into(), "-c".into(), bomb.into()];
    spec.limits.nproc = 64;
    spec.timeout = Duration::from_secs(20);
    let out = run(&spec);
    let text = stdout(&out);
    let procs: usize = text
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count: {text} {}", out.stderr.text_lossy()));
    // RLIMIT_NPROC binds exactly when the sandbox's uid is not the host's root; the kernel
    // exempts root, and then the pid namespace's pid_max (nproc + 300) is the bound.
    // SAFETY: geteuid cannot fail.
    let bound = if unsafe { libc::geteuid() } == 0 {
        64 + 300
    } else {
        64 + 1
    };
    assert!(
        procs <= bound,
        "{procs} processes ran, bound {bound}: {text}"
    );
    assert!(procs >= 40, "the bomb never forked: {text}");
    assert!(
        !text.contains("failed 0"),
        "forks were never refused: {text}"
    );
    assert!(
        host_processes_with(&marker).is_empty(),
        "{:?}",
        host_processes_with(&marker)
    );

    // The classic shell bomb ends with the timeout, and promptly.
    let mut spec = fx.spec("b() { b | b & }; b; sleep 30");
    spec.limits.nproc = 64;
    spec.timeout = Duration::from_secs(2);
    let t = Instant::now();
    let out = run(&spec);
    assert!(out.timed_out || out.exit_code.is_some());
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t.elapsed()
    );
}

#[test]
fn output_flood_costs_bounded_memory() {
    fn max_rss_kib() -> i64 {
        // SAFETY: getrusage fills a zeroed struct.
        unsafe {
            let mut u: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_SELF, &raw mut u);
            u.ru_maxrss
        }
    }
    let fx = Fixture::new();
    let spool = fx.path().join("spool");
    std::fs::create_dir(&spool).unwrap();
    let mut spec = fx.spec("head -c 200000000 /dev/zero | tr '\\0' x; echo; echo THE-END");
    spec.output_limit = 64 << 10;
    spec.spool_dir = Some(spool.clone());
    spec.limits.spool_bytes = 32 << 20;
    let before = max_rss_kib();
    let out = run(&spec);
    let grew = max_rss_kib() - before;
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(out.stdout.total_bytes, 200_000_000 + 9);
    assert_eq!(out.stdout.head.len() + out.stdout.tail.len(), 64 << 10);
    assert!(out.stdout.head.iter().all(|&b| b == b'x'));
    assert!(out.stdout.tail.ends_with(b"\nTHE-END\n"));
    let spool_file = out.stdout.spool.clone().expect("spooled");
    assert_eq!(std::fs::metadata(&spool_file).unwrap().len(), 32 << 20);
    assert!(
        out.stdout
            .text_lossy()
            .contains("bytes omitted; full output in")
    );
    assert!(
        grew < 40 << 10,
        "capturing 200 MB grew the RSS by {grew} KiB"
    );
}

#[test]
fn daemons_do_not_outlive_the_sandbox() {
    let marker = format!("airlock-daemon-{}", std::process::id());
    let fx = Fixture::new();
    // A setsid'd, double-forked daemon that writes into the workspace (host-visible through the
    // upper directory) after the sandbox should be gone.
    let daemon = format!(
        "( setsid bash -c 'exec -a {marker} bash -c \"sleep 1.5; echo escaped > escaped.txt\"' & ) ; echo started"
    );
    // 1: the command times out while the daemon sleeps.
    let mut spec = fx.spec(&format!("{daemon}; sleep 30"));
    spec.timeout = Duration::from_millis(500);
    let out = run(&spec);
    assert!(out.timed_out);
    assert_eq!(stdout(&out), "started\n");
    // 2: the command exits at once, leaving the daemon behind.
    let out = run(&fx.spec(&daemon));
    assert_eq!(out.exit_code, Some(0));
    assert!(
        host_processes_with(&marker).is_empty(),
        "{:?}",
        host_processes_with(&marker)
    );
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        !fx.upper.join("escaped.txt").exists(),
        "a daemon survived the sandbox"
    );
    assert!(host_processes_with(&marker).is_empty());
}

#[test]
fn landlock_blocks_writes_the_mounts_would_allow() {
    let fx = Fixture::new();
    // /proc/sys/kernel/hostname belongs to the sandbox's own uts namespace, so only Landlock
    // stands between the command and the write; the workspace and /tmp stay writable.
    let out = run(&fx.spec(
        "echo evil > /proc/sys/kernel/hostname 2>&1 || echo denied; \
         hostname evil 2>/dev/null || echo refused; hostname; \
         echo ok > /tmp/t && echo ok > in-ws && echo ok > /dev/shm/s && echo writable",
    ));
    let text = stdout(&out);
    assert!(text.contains("denied"), "{text}");
    // sethostname(2) itself is refused by seccomp.
    assert!(text.contains("refused"), "{text}");
    assert!(text.contains("airlock\n"), "{text}");
    assert!(
        text.contains("writable"),
        "{text} {}",
        out.stderr.text_lossy()
    );
}

/// Run by `killing_the_caller_kills_the_sandbox` in a child process: a sandbox that sleeps.
#[test]
#[ignore = "helper process for killing_the_caller_kills_the_sandbox"]
fn helper_sandbox_that_sleeps() {
    let Some(marker) = std::env::var_os("AIRLOCK_HELPER_MARKER") else {
        return;
    };
    let fx = Fixture::new();
    let mut spec = fx.spec("");
    let script = format!("exec -a {} sleep 60", marker.to_string_lossy());
    spec.argv = vec!["bash".into(), "-c".into(), script.into()];
    let _ = run(&spec);
}

#[test]
fn killing_the_caller_kills_the_sandbox() {
    let marker = format!("airlock-orphan-{}", std::process::id());
    let mut caller = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "helper_sandbox_that_sleeps",
            "--ignored",
            "--nocapture",
        ])
        .env("AIRLOCK_HELPER_MARKER", &marker)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while host_processes_with(&marker).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the sandboxed sleep never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    caller.kill().unwrap();
    caller.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !host_processes_with(&marker).is_empty() {
        assert!(
            Instant::now() < deadline,
            "orphans survived: {:?}",
            host_processes_with(&marker)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether this host should give runs a control group: the caller is root and the cgroup
/// filesystem is writable (elsewhere the rlimit path is expected, and checked to say so).
fn cgroups_expected() -> bool {
    // SAFETY: geteuid cannot fail; access(2) on a NUL-terminated path.
    unsafe { libc::geteuid() == 0 && libc::access(c"/sys/fs/cgroup".as_ptr(), libc::W_OK) == 0 }
}

/// The memory-bomb payload: 3 GiB, every page written.
const MEMORY_BOMB: &str =
    "exec /usr/bin/python3 -c 's = b\"x\" * (3 << 30); print(\"allocated\", len(s))'";

#[test]
fn vsock_and_packet_sockets_are_refused_with_eafnosupport() {
    let fx = Fixture::new();
    let py = [
        "import socket",
        "for fam, kind in ((40, 1), (40, 5), (17, 3), (44, 3), (38, 5)):",
        "  try:",
        "    socket.socket(fam, kind, 0); print('OPEN', fam)",
        "  except OSError as e: print(fam, e.strerror)",
        "socket.socket(1, 1).close(); socket.socket(16, 3, 0).close(); print('unix+route ok')",
    ]
    .join("\n");
    let mut spec = fx.spec("");
    spec.argv = vec!["/usr/bin/python3".into(), "-c".into(), py.into()];
    let out = run(&spec);
    let text = stdout(&out);
    assert!(!text.contains("OPEN"), "{text}");
    assert_eq!(
        text.matches("Address family not supported by protocol")
            .count(),
        5,
        "{text} {}",
        out.stderr.text_lossy()
    );
    assert!(text.contains("unix+route ok"), "{text}");
}

#[test]
fn a_memory_bomb_hits_the_cgroup_memory_ceiling() {
    let fx = Fixture::new();
    let mut spec = fx.spec(MEMORY_BOMB);
    spec.limits.memory = Some(512 << 20);
    spec.timeout = Duration::from_secs(60);
    let out = run(&spec);
    let text = stdout(&out);
    assert!(!text.contains("allocated"), "{text}");
    assert_ne!(out.exit_code, Some(0));
    assert_eq!(out.limits.memory.bytes, 512 << 20);
    if !cgroups_expected() {
        assert_eq!(
            out.limits.memory.by,
            Some(airlock_sandbox::Mechanism::Rlimit)
        );
        eprintln!("no writable control groups here: the rlimit path was checked instead");
        return;
    }
    assert_eq!(
        out.limits.memory.by,
        Some(airlock_sandbox::Mechanism::Cgroup),
        "this host lets root make control groups: {:?}",
        out.limits
    );
    assert_eq!(
        out.ceiling,
        Some(airlock_sandbox::Ceiling::Memory),
        "{out:?}"
    );
    let peak = out.limits.memory.peak_bytes.expect("peak");
    assert!(peak <= (512 << 20) + (8 << 20), "peak {peak}");
}

#[test]
fn the_rlimit_fallback_bounds_memory_and_cpu_time_without_a_cgroup() {
    let fx = Fixture::new();
    // Memory: RLIMIT_DATA refuses the allocation itself.
    let mut spec = fx.spec(MEMORY_BOMB);
    spec.limits.memory = Some(512 << 20);
    spec.limits.cgroup = false;
    let out = run(&spec);
    assert!(!stdout(&out).contains("allocated"), "{}", stdout(&out));
    assert!(
        out.stderr.text_lossy().contains("MemoryError"),
        "{}",
        out.stderr.text_lossy()
    );
    assert_eq!(
        out.limits.memory.by,
        Some(airlock_sandbox::Mechanism::Rlimit)
    );
    assert_eq!(out.limits.memory.peak_bytes, None);
    // CPU time: RLIMIT_CPU stops a busy loop (SIGXCPU), reported as the CPU ceiling, well
    // before the wall-clock timeout.
    let mut spec = fx.spec("while :; do :; done");
    spec.limits.cpu_seconds = Some(1);
    spec.limits.cgroup = false;
    spec.timeout = Duration::from_secs(20);
    let t = Instant::now();
    let out = run(&spec);
    assert!(!out.timed_out, "{out:?}");
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
    assert_eq!(out.ceiling, Some(airlock_sandbox::Ceiling::Cpu), "{out:?}");
    assert_eq!(out.limits.cpu.by, Some(airlock_sandbox::Mechanism::Rlimit));
    assert_eq!(out.limits.cpu.quota_cpus, None);
    // Processes: no control group, so RLIMIT_NPROC (or, for the host's root, pid_max).
    assert_ne!(
        out.limits.processes.by,
        Some(airlock_sandbox::Mechanism::Cgroup)
    );
}

#[test]
fn a_cpu_busy_loop_is_killed_at_its_cgroup_cpu_time() {
    let fx = Fixture::new();
    // Four busy processes: the CPU time of the whole run counts, not of one process.
    let mut spec = fx.spec("for i in 1 2 3 4; do (while :; do :; done) & done; wait");
    spec.limits.cpu_seconds = Some(1);
    spec.timeout = Duration::from_secs(20);
    let t = Instant::now();
    let out = run(&spec);
    assert!(!out.timed_out, "{out:?}");
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
    if !cgroups_expected() {
        // Without a control group each process dies of SIGXCPU at its own second (the run
        // ended long before its timeout, above); the shell that waited for them exits 0, so
        // no ceiling can be read from the run's status.
        assert_eq!(out.limits.cpu.by, Some(airlock_sandbox::Mechanism::Rlimit));
        return;
    }
    assert_eq!(out.ceiling, Some(airlock_sandbox::Ceiling::Cpu), "{out:?}");
    assert_eq!(out.limits.cpu.by, Some(airlock_sandbox::Mechanism::Cgroup));
    let used = out.limits.cpu.used_ms.expect("used");
    assert!((1000..2500).contains(&used), "used {used} ms");
}

#[test]
fn writes_past_the_upper_ceiling_kill_the_run() {
    let fx = Fixture::new();
    // 1 MiB files, never one large one: the watchdog, not RLIMIT_FSIZE, must stop this.
    let mut spec = fx.spec(
        "i=0; while [ $i -lt 300 ]; do head -c 1048576 /dev/zero > f$i || exit 9; i=$((i+1)); done; echo wrote-all",
    );
    spec.limits.upper_bytes = 32 << 20;
    spec.timeout = Duration::from_secs(60);
    let out = run(&spec);
    assert!(!stdout(&out).contains("wrote-all"), "{}", stdout(&out));
    assert_eq!(out.ceiling, Some(airlock_sandbox::Ceiling::Disk), "{out:?}");
    assert!(out.limits.disk.used_bytes > 32 << 20);
    // The kill comes within a few walks: the upper holds far less than the 300 MiB asked.
    let written: u64 = std::fs::read_dir(&fx.upper)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(written < 200 << 20, "{written} bytes reached the upper");
    // One file past the ceiling fails by itself (RLIMIT_FSIZE is held to it).
    let mut spec = fx.spec("head -c 40000000 /dev/zero > big");
    spec.limits.upper_bytes = 32 << 20;
    let out = run(&spec);
    assert_eq!(out.ceiling, Some(airlock_sandbox::Ceiling::Disk), "{out:?}");
}

#[test]
fn a_fork_bomb_of_busy_loops_gets_only_its_cpu_bandwidth() {
    let fx = Fixture::new();
    let mut spec = fx.spec("for i in $(seq 32); do (while :; do :; done) & done; wait");
    spec.limits.cpu_millis = Some(250);
    spec.timeout = Duration::from_secs(3);
    let out = run(&spec);
    assert!(out.timed_out);
    if !cgroups_expected() {
        assert_eq!(out.limits.cpu.quota_cpus, None, "{:?}", out.limits);
        eprintln!("no writable control groups here: no CPU bandwidth ceiling to check");
        return;
    }
    assert_eq!(out.limits.cpu.quota_cpus, Some(0.25), "{:?}", out.limits);
    let used = out.limits.cpu.used_ms.expect("used") as f64;
    let wall = out.duration.as_millis() as f64;
    // Unbounded, 32 busy processes take every CPU they can get (≥ 1 CPU even on a loaded
    // 2-core machine); held to a quarter CPU they get at most that, plus a period of slack.
    assert!(
        used <= 0.25 * wall * 1.15 + 150.0,
        "used {used} ms in {wall} ms"
    );
}

#[test]
fn a_run_with_every_cpu_has_no_bandwidth_ceiling_but_a_lower_weight() {
    let fx = Fixture::new();
    let mut spec = fx
        .spec("for i in 1 2; do (i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done) & done; wait");
    spec.limits.every_cpu = true;
    spec.timeout = Duration::from_secs(60);
    let out = run(&spec);
    assert!(!out.timed_out, "{out:?}");
    if !cgroups_expected() {
        assert_eq!(out.limits.cpu.weight, None, "{:?}", out.limits);
        eprintln!("no writable control groups here: no CPU weight to check");
        return;
    }
    assert_eq!(out.limits.cpu.quota_cpus, None, "{:?}", out.limits);
    assert_eq!(out.limits.cpu.weight, Some(50), "{:?}", out.limits);
    // The operator's own bandwidth still wins over every_cpu.
    spec.limits.cpu_millis = Some(500);
    let out = run(&spec);
    assert_eq!(out.limits.cpu.quota_cpus, Some(0.5), "{:?}", out.limits);
    assert_eq!(out.limits.cpu.weight, None, "{:?}", out.limits);
    // Without it, a run is held to one CPU less than the host has.
    spec.limits.cpu_millis = None;
    spec.limits.every_cpu = false;
    let out = run(&spec);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let expected = cpus.saturating_sub(1).max(1) as f64;
    assert_eq!(
        out.limits.cpu.quota_cpus,
        Some(expected),
        "{:?}",
        out.limits
    );
}

/// The library reads no environment of its own: with default settings (nothing handed over by
/// a program's `main`), a command sees none of this process's variables, only a standard
/// `PATH` and what its spec sets.
#[test]
fn a_run_inherits_only_what_the_settings_hand_over() {
    let fx = Fixture::new();
    let out = airlock_sandbox::Backend::run(
        &airlock_sandbox::NamespaceBackend::with_settings(Default::default()),
        &fx.spec("env"),
    )
    .unwrap();
    let text = stdout(&out);
    let names: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k)
        .collect();
    assert!(
        text.lines()
            .any(|l| l == "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"),
        "{text}"
    );
    let shell_own = ["PATH", "HOME", "PWD", "OLDPWD", "SHLVL", "_"];
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if !shell_own.contains(&k.as_ref()) {
            assert!(
                !names.contains(&k.as_ref()),
                "{k} leaked from the process: {text}"
            );
        }
    }
}

/// A layered bind shows a host directory writable at its own path while the host's copy is
/// never written: reads see the host's files, writes, deletes and modes land in the caller's
/// layer (a granted run's package cache over the user's own).
#[test]
fn layered_binds_never_write_the_host_directory() {
    let fx = Fixture::new();
    let host = fx.path().join("home/.npm/_cacache");
    std::fs::create_dir_all(host.join("content")).unwrap();
    std::fs::write(host.join("content/blob"), "host-blob").unwrap();
    std::fs::write(host.join("index"), "host-index").unwrap();
    let before = snapshot(&host);
    let (upper, work) = (fx.path().join("layer/upper"), fx.path().join("layer/work"));
    std::fs::create_dir_all(&upper).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let d = host.display();
    let mut spec = fx.spec(&format!(
        "cat {d}/content/blob; echo; echo new > {d}/tmp-new && cat {d}/tmp-new; \
         echo more >> {d}/index; rm {d}/content/blob; chmod 777 {d}; ls {d}/content | wc -l; \
         cat {d}/index"
    ));
    spec.home_binds = vec![PathBuf::from(".npm/_cacache")];
    spec.layered_binds = vec![airlock_sandbox::LayeredBind {
        path: host.clone(),
        upper: upper.clone(),
        work,
    }];
    let out = run(&spec);
    let text = stdout(&out);
    assert_eq!(out.exit_code, Some(0), "{text} {}", out.stderr.text_lossy());
    assert_eq!(text, "host-blob\nnew\n0\nhost-indexmore\n", "{text}");
    assert_eq!(snapshot(&host), before, "the host directory was written");
    assert_eq!(
        std::fs::read_to_string(upper.join("tmp-new")).unwrap(),
        "new\n"
    );
    // The same layer is there for the next run of the caller's.
    let again = run(&fx.spec(&format!("cat {d}/tmp-new 2>&1")));
    assert!(
        stdout(&again).contains("No such file"),
        "{}",
        stdout(&again)
    );
    spec.argv = vec!["sh".into(), "-c".into(), format!("cat {d}/tmp-new").into()];
    assert_eq!(stdout(&run(&spec)), "new\n");
}
