//! Sessions cannot be wedged or swell (issue #26, item 8), through the real binary: a command
//! that builds a tree deeper than `PATH_MAX` leaves the session working (the too-long part is
//! refused at harvest, by rule); a deep upper directory a crash left behind is cleared; the
//! session's staged bytes have a ceiling; `gc` reclaims blobs, spools and idle scratch.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A workspace and its private scratch directory (`AIRLOCK_RUN_DIR`) and config home.
struct Fx {
    _t: tempfile::TempDir,
    ws: PathBuf,
    run: PathBuf,
    /// Environment every command gets.
    env: Vec<(&'static str, &'static str)>,
}

impl Fx {
    fn new() -> Fx {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        let run = t.path().join("run");
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(ws.join("README.md"), "# sample\n").unwrap();
        Fx {
            _t: t,
            ws,
            run,
            env: Vec::new(),
        }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_airlock"));
        c.arg("--workspace")
            .arg(&self.ws)
            .args(args)
            .env("XDG_CONFIG_HOME", self.run.parent().unwrap().join("config"))
            .env("AIRLOCK_RUN_DIR", &self.run)
            .envs(self.env.iter().copied())
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("airlock runs")
    }

    /// `--mode build ARGS…`, which must exit `code`.
    fn build(&self, args: &[&str], code: i32) -> Output {
        let mut all = vec!["--mode", "build"];
        all.extend_from_slice(args);
        let o = self.run(&all);
        assert_eq!(o.status.code(), Some(code), "{args:?}:\n{}", text(&o));
        o
    }

    /// The session's scratch directory (the one directory of 16 hex digits in the run dir).
    fn scratch(&self) -> PathBuf {
        std::fs::read_dir(&self.run)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.file_name().is_some_and(|n| n.len() == 16))
            .expect("a session scratch directory")
    }
}

fn text(o: &Output) -> String {
    format!(
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A relative path of `levels` components of 200 bytes each.
fn deep_path(levels: usize) -> String {
    vec!["d".repeat(200); levels].join("/")
}

/// Builds `levels` directories of 200-byte names below `dir`, one `mkdirat` at a time (as
/// `mkdir -p` does), with a file at the bottom.
fn plant_deep_tree(dir: &Path, levels: usize) {
    use rustix::fs::{Mode, OFlags};
    let open = |at: &dyn std::os::fd::AsFd, name: &str| {
        rustix::fs::openat(at, name, OFlags::DIRECTORY, Mode::empty()).unwrap()
    };
    let mut fd = open(&rustix::fs::CWD, dir.to_str().unwrap());
    let name = "d".repeat(200);
    for _ in 0..levels {
        rustix::fs::mkdirat(&fd, name.as_str(), Mode::from_raw_mode(0o755)).unwrap();
        fd = open(&fd, &name);
    }
    let f = rustix::fs::openat(
        &fd,
        "bottom.txt",
        OFlags::CREATE | OFlags::WRONLY,
        Mode::from_raw_mode(0o644),
    )
    .unwrap();
    rustix::io::write(&f, b"deep").unwrap();
}

#[test]
fn a_tree_deeper_than_path_max_is_refused_by_rule_and_the_session_keeps_working() {
    let fx = Fx::new();
    // 25 levels of 200 bytes: a 5 KB path, as the report's `mkdir -p a/b/c/…`.
    let deep = deep_path(25);
    let o = fx.build(
        &[
            "exec",
            "--",
            "sh",
            "-c",
            &format!("mkdir -p {deep} && echo made"),
        ],
        0,
    );
    let all = text(&o);
    assert!(all.contains("made"), "{all}");
    assert!(
        all.contains("jail_too_long") && all.contains("PATH_MAX"),
        "the refusal names its rule and the limit: {all}"
    );
    // What fits was staged; the next command, a verify and status all work.
    let o = fx.build(&["exec", "--", "true"], 0);
    assert!(!text(&o).contains("too long"), "{}", text(&o));
    let o = fx.build(&["verify", "--", "echo", "1 passed, 0 failed"], 0);
    assert!(!text(&o).contains("File name too long"), "{}", text(&o));
    let o = fx.build(&["exec", "--", "sh", "-c", "echo again > src/x.txt"], 0);
    assert!(text(&o).contains("src/x.txt"), "{}", text(&o));
    let status = String::from_utf8_lossy(&fx.run(&["status"]).stdout).into_owned();
    assert!(status.contains("src/x.txt"), "{status}");
    assert!(
        status.lines().all(|l| l.len() < 4096),
        "no staged path past PATH_MAX: {status}"
    );
    fx.build(&["discard"], 0);
    fx.build(&["exec", "--", "true"], 0);
}

#[test]
fn a_path_the_jail_accepts_never_wedges_the_staged_layer() {
    let fx = Fx::new();
    // Within the jail's 4096 bytes below the workspace, but past PATH_MAX below the scratch
    // directory, whose own path is longer than the workspace's.
    let room = 4095 - fx.ws.as_os_str().len() - 1;
    let mut rel = deep_path(room / 201);
    rel.push('/');
    rel.push_str(&"f".repeat(room - rel.len() - 1));
    assert!(fx.run.join("0123456789abcdef/layer").as_os_str().len() + 1 + rel.len() > 4096);
    let args = format!(r#"{{"path":"{rel}","content":"deep"}}"#);
    fx.build(&["call", "write_file", &args], 0);
    let o = fx.build(&["exec", "--", "sh", "-c", "echo ok > src/ok.txt"], 0);
    assert!(text(&o).contains("src/ok.txt"), "{}", text(&o));
    let o = fx.build(&["exec", "--", "sh", "-c", &format!("cat {rel}")], 0);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("deep"),
        "{}",
        text(&o)
    );
}

#[test]
fn discard_returns_a_session_whose_crashed_run_left_a_deep_upper_dir_to_work() {
    let fx = Fx::new();
    fx.build(&["exec", "--", "true"], 0);
    // A crash between a run and its clean-up left a 6 KB-deep tree in `upper`, and one in
    // overlayfs's own `work/work` (where it moves a directory being removed).
    let scratch = fx.scratch();
    plant_deep_tree(&scratch.join("upper"), 30);
    std::fs::create_dir_all(scratch.join("work/work")).unwrap();
    plant_deep_tree(&scratch.join("work/work"), 30);
    fx.build(&["discard"], 0);
    let o = fx.build(&["exec", "--", "sh", "-c", "echo ok > src/ok.txt"], 0);
    assert!(text(&o).contains("src/ok.txt"), "{}", text(&o));
    fx.build(&["verify", "--", "echo", "1 passed, 0 failed"], 0);
    assert_eq!(
        std::fs::read_dir(scratch.join("upper")).unwrap().count(),
        0,
        "the upper directory is empty after the runs"
    );
}

/// Bytes of the files below `dir`.
fn bytes_below(dir: &Path) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let md = e.metadata().unwrap();
        total += if md.is_dir() {
            bytes_below(&e.path())
        } else {
            md.len()
        };
    }
    total
}

#[test]
fn runs_each_under_the_disk_ceiling_cannot_stage_past_the_sessions_ceiling() {
    let fx = Fx::new();
    let mib = 1u64 << 20;
    let write = |name: &str| {
        format!(
            "head -c {} /dev/zero | tr '\\0' '{name}' > {name}.bin",
            3 * mib / 2
        )
    };
    // Each run writes 1.5 MiB under a 2 MiB disk ceiling; the session may stage 4 MiB.
    for name in ["a", "b"] {
        let o = fx.build(
            &[
                "--max-staged",
                "4M",
                "exec",
                "--disk",
                "2M",
                "--",
                "sh",
                "-c",
                &write(name),
            ],
            0,
        );
        assert!(text(&o).contains(&format!("{name}.bin")), "{}", text(&o));
    }
    let blobs = fx.ws.join(".airlock/blobs");
    let stored = bytes_below(&blobs);
    let o = fx.build(
        &[
            "--max-staged",
            "4M",
            "exec",
            "--disk",
            "2M",
            "--",
            "sh",
            "-c",
            &write("c"),
        ],
        1,
    );
    let all = text(&o);
    assert!(
        all.contains(&format!("ceiling of {} bytes", 4 * mib))
            && all.contains(&format!("{} bytes are staged now", 3 * mib))
            && all.contains("discard")
            && all.contains("--max-staged"),
        "the refusal names the ceiling, the total and the ways out: {all}"
    );
    assert_eq!(
        bytes_below(&blobs),
        stored,
        "nothing of the refused run was stored"
    );
    let status = String::from_utf8_lossy(&fx.run(&["status"]).stdout).into_owned();
    assert!(
        status.contains("a.bin") && status.contains("b.bin") && !status.contains("c.bin"),
        "{status}"
    );
    // The user config's ceiling holds for the agent's own writes too.
    let config = fx.run.parent().unwrap().join("config/airlock");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!("[limits]\nmax_staged_bytes = {}\n", 3 * mib + 10),
    )
    .unwrap();
    let args = format!(r#"{{"path":"d.txt","content":"{}"}}"#, "d".repeat(20));
    let o = fx.build(&["call", "write_file", &args], 1);
    assert!(text(&o).contains("over its ceiling"), "{}", text(&o));
    // Discarding brings the session back under it.
    fx.build(&["discard"], 0);
    fx.build(&["call", "write_file", &args], 0);
    fx.build(&["exec", "--", "sh", "-c", &write("e")], 0);
}

#[test]
fn gc_reclaims_unreferenced_blobs_dead_spools_and_idle_deep_scratch() {
    let mut fx = Fx::new();
    // No warm host: it would hold the session's scratch as in use.
    fx.env.push(("AIRLOCK_SANDBOX_HOST", "off"));
    fx.build(&["exec", "--", "sh", "-c", "echo one > a.txt"], 0);
    // The second write leaves the first content's blob named by nothing.
    fx.build(&["exec", "--", "sh", "-c", "echo two > a.txt"], 0);
    // A run that died left its spool, with a deep tree in it; a session that is gone, its own.
    let spool = fx.ws.join(".airlock/spool");
    let dead = spool.join("default/run-0000000000000001-dead");
    std::fs::create_dir_all(&dead).unwrap();
    std::fs::write(dead.join("stdout"), vec![b'x'; 1000]).unwrap();
    plant_deep_tree(&dead, 30);
    std::fs::create_dir_all(spool.join("gone/run-0000000000000002-x")).unwrap();
    std::fs::write(
        spool.join("gone/run-0000000000000002-x/stderr"),
        [b'y'; 500],
    )
    .unwrap();
    // The session's scratch, idle for two hours, with a deep tree a crash left in `upper`.
    let scratch = fx.scratch();
    plant_deep_tree(&scratch.join("upper"), 30);
    let two_hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    std::fs::File::open(&scratch)
        .unwrap()
        .set_modified(two_hours_ago)
        .unwrap();

    let o = fx.run(&["--json", "gc"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let line = String::from_utf8_lossy(&o.stdout).into_owned();
    let r: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(r["removed"], 1, "the first content's blob: {r}");
    assert_eq!(r["removed_bytes"], 4, "{r}");
    assert_eq!(r["spool"]["removed"], 2, "{r}");
    assert_eq!(r["spool"]["bytes"], 1000 + 4 + 500, "{r}");
    assert_eq!(r["scratch"]["removed"], 1, "{r}");
    assert!(r["scratch"]["bytes"].as_u64().unwrap() >= 4, "{r}");
    assert_eq!(
        r["freed_bytes"].as_u64().unwrap(),
        4 + 1504 + r["scratch"]["bytes"].as_u64().unwrap(),
        "{r}"
    );
    assert!(!scratch.exists() && !dead.exists() && !spool.join("gone").exists());
    // The text form says it too; what is staged stays, and the session works on.
    let o = fx.run(&["gc"]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("bytes freed in all"),
        "{}",
        text(&o)
    );
    let o = fx.build(&["exec", "--", "cat", "a.txt"], 0);
    assert!(text(&o).contains("two"), "{}", text(&o));
}
