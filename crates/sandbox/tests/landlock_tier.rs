//! The Landlock tier: a copy of the workspace under Landlock and seccomp, without namespaces.
//! Each test runs real commands and checks the host side.

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use airlock_sandbox::{Backend, LandlockBackend, Outcome, SandboxSpec, Tier, UpperChange, harvest};
use common::{Fixture, stdout};

fn run(spec: &SandboxSpec) -> Outcome {
    let out = LandlockBackend::new()
        .run(spec)
        .unwrap_or_else(|e| panic!("the Landlock tier failed: {e}"));
    assert_eq!(out.tier, Tier::Landlock);
    assert!(!out.degraded);
    out
}

#[test]
fn a_landlock_run_is_harvested_like_a_full_run() {
    let fx = Fixture::new();
    fx.write("keep.txt", "original\n");
    fx.write("gone.txt", "bye\n");
    fx.write("d/x.txt", "x\n");
    let layer = fx.path().join("layer");
    std::fs::create_dir(&layer).unwrap();
    std::fs::write(layer.join("staged.txt"), "staged\n").unwrap();
    let spec = fx.spec(
        "ls; echo changed > keep.txt; rm gone.txt; rm -r d; echo n > new.txt; chmod 600 staged.txt",
    );
    let mut spec = spec;
    spec.layers = vec![layer];
    let out = run(&spec);
    assert_eq!(out.exit_code, Some(0), "{}", out.stderr.text_lossy());
    assert_eq!(stdout(&out), "d\ngone.txt\nkeep.txt\nstaged.txt\n");
    assert_eq!(
        std::fs::read_to_string(fx.workspace.join("keep.txt")).unwrap(),
        "original\n"
    );
    let file = |p: &str, mode| UpperChange::File {
        path: p.into(),
        mode,
    };
    assert_eq!(
        harvest(&fx.upper).unwrap(),
        vec![
            UpperChange::Delete { path: "d".into() },
            UpperChange::Delete {
                path: "gone.txt".into()
            },
            file("keep.txt", 0o644),
            file("new.txt", 0o644),
            file("staged.txt", 0o600),
        ]
    );
    // The copy and the private temporary directory are gone after the run.
    assert_eq!(std::fs::read_dir(&fx.work).unwrap().count(), 0);
}

#[test]
fn the_real_workspace_home_and_host_files_are_out_of_reach() {
    let fx = Fixture::new();
    fx.write("a.txt", "visible\n");
    fx.write(".env", "Zq7-WORKSPACE-SECRET\n");
    let home = fx.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(home.join(".cargo/bin")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "Zq7-SSH-KEY").unwrap();
    std::fs::write(home.join(".cargo/bin/tool"), "toolchain\n").unwrap();
    let outside = fx.path().join("outside.txt");
    std::fs::write(&outside, "Zq7-OUTSIDE\n").unwrap();
    let ws = fx.workspace.display().to_string();
    let mut spec = fx.spec(&format!(
        "exec 2>&1; cat a.txt; cat .env {ws}/.env {ws}/a.txt ~/.ssh/id_ed25519 {o} /etc/shadow 2>&1; \
         cat ~/.cargo/bin/tool; ls ~ 2>&1; \
         echo x > {ws}/planted 2>&1; echo x > /tmp/airlock-landlock-escape-$$ 2>&1; \
         echo x > ~/.cargo/bin/tool 2>&1; echo t > \"$TMPDIR/t\" && echo tmp-ok",
        o = outside.display()
    ));
    spec.home_binds = vec![PathBuf::from(".cargo/bin")];
    spec.masked = vec![PathBuf::from(".env")];
    let out = run(&spec);
    let text = stdout(&out);
    assert!(text.starts_with("visible\n"), "{text}");
    assert!(!text.contains("Zq7"), "a secret leaked: {text}");
    assert!(
        text.contains("toolchain"),
        "the toolchain path is readable: {text}"
    );
    assert!(text.contains("tmp-ok"), "{text}");
    // The real workspace (twice), the key, the outside file, /etc/shadow, `ls ~`, and the
    // three writes.
    assert_eq!(text.matches("Permission denied").count(), 9, "{text}");
    assert!(!fx.workspace.join("planted").exists());
    assert_eq!(
        std::fs::read_to_string(home.join(".cargo/bin/tool")).unwrap(),
        "toolchain\n"
    );
    assert!(
        harvest(&fx.upper).unwrap().is_empty(),
        "nothing but the TMPDIR write happened"
    );
}

#[test]
fn network_unix_sockets_and_new_namespaces_are_refused() {
    let fx = Fixture::new();
    let out = run(&fx.spec(
        "/usr/bin/python3 -c '
import socket
for fam in (socket.AF_INET, socket.AF_INET6, socket.AF_UNIX):
    try:
        socket.socket(fam); print(fam.name, \"open\")
    except OSError as e: print(fam.name, e.errno)
a, b = socket.socketpair(); a.sendall(b\"p\"); print(\"pair\", b.recv(1))
'; unshare -U true 2>&1; echo unshare=$?; setsid true 2>&1; echo setsid=$?",
    ));
    let text = stdout(&out);
    let eperm = libc::EPERM;
    for fam in ["AF_INET", "AF_INET6", "AF_UNIX"] {
        assert!(text.contains(&format!("{fam} {eperm}")), "{fam}: {text}");
    }
    assert!(text.contains("pair b'p'"), "{text}");
    assert!(!text.contains("unshare=0"), "{text}");
    assert!(!text.contains("setsid=0"), "{text}");
}

#[test]
fn host_processes_cannot_be_signalled() {
    let mut victim = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let fx = Fixture::new();
    let out = run(&fx.spec(&format!(
        "kill -9 {pid} 2>&1; echo kill=$?; cat /proc/{pid}/environ 2>&1 | head -c 80; echo",
        pid = victim.id()
    )));
    let text = stdout(&out);
    assert!(text.contains("kill=1"), "{text}");
    assert!(
        victim.try_wait().unwrap().is_none(),
        "the host process died"
    );
    assert!(text.contains("Permission denied"), "{text}");
    let _ = victim.kill();
    let _ = victim.wait();
}

#[test]
fn the_timeout_kills_every_process_of_the_run() {
    let fx = Fixture::new();
    let marker = format!("airlock-landlock-survivor-{}", std::process::id());
    // Orphans (double fork), an attempt to leave the group (setsid, refused), and a
    // nohup'd process, each named by the marker.
    let mut spec = fx.spec(&format!(
        "for i in 1 2; do (bash -c 'exec -a {marker} sleep 30' &); done; \
         setsid bash -c 'exec -a {marker} sleep 30' 2>/dev/null & \
         nohup bash -c 'exec -a {marker} sleep 30' >/dev/null 2>&1 & sleep 30"
    ));
    spec.timeout = Duration::from_millis(500);
    let t = Instant::now();
    let out = run(&spec);
    assert!(out.timed_out);
    assert!(t.elapsed() < Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(200));
    let survivors: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&marker))
        .collect();
    assert!(survivors.is_empty(), "survivors: {survivors:?}");
}

/// The command leads a session of its own: no controlling terminal, so it can neither make
/// itself the terminal's foreground group and read the operator's keystrokes nor write to it.
/// Its process group is still its own (the run is killed by it).
#[test]
fn a_landlock_run_has_a_session_of_its_own() {
    let fx = Fixture::new();
    let spec = fx.spec("read -r pid _ _ _ pgrp sid _ < /proc/self/stat; echo \"$pid $pgrp $sid\"");
    let out = run(&spec);
    assert_eq!(out.exit_code, Some(0), "{}", out.stderr.text_lossy());
    let ids: Vec<u32> = stdout(&out)
        .split_whitespace()
        .map(|w| w.parse().unwrap())
        .collect();
    assert_eq!(ids.len(), 3, "{}", stdout(&out));
    assert_eq!(
        ids[1], ids[0],
        "the command leads its process group: {ids:?}"
    );
    assert_eq!(ids[2], ids[0], "the command leads its own session: {ids:?}");
    let ours = std::fs::read_to_string("/proc/self/stat").unwrap();
    let our_sid: u32 = ours
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .nth(3)
        .unwrap()
        .parse()
        .unwrap();
    assert_ne!(ids[2], our_sid);
}

#[derive(Debug)]
struct GrantAll;

impl airlock_sandbox::net::NetGate for GrantAll {
    fn decide(&self, _host: &str, _port: u16) -> airlock_sandbox::net::NetDecision {
        airlock_sandbox::net::NetDecision {
            allowed: true,
            rule: "test".into(),
            reason: "granted".into(),
        }
    }
}

/// A network grant needs the run's own network namespace (the proxy listens there): the tier
/// refuses the run instead of running it with no network, or with the host's.
#[test]
fn a_network_grant_is_refused_in_the_landlock_tier() {
    let fx = Fixture::new();
    let mut spec = fx.spec("echo ran > ran.txt");
    spec.net = Some(airlock_sandbox::net::NetAccess::new(std::sync::Arc::new(
        GrantAll,
    )));
    let err = LandlockBackend::new()
        .run(&spec)
        .expect_err("a granted run must not run in the Landlock tier");
    assert!(err.to_string().contains("network grant"), "{err}");
    assert!(harvest(&fx.upper).unwrap().is_empty());
}
