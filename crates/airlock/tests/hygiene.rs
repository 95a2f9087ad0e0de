//! Stage hygiene, end to end through the `airlock` binary: nothing airlock keeps in
//! `.airlock/` grows without bound, `status` stays fast on a large changeset, and `recover`
//! leaves no temp file of an interrupted apply behind.

use airlock_policy::RelPath;
use airlock_stage::Change;
use airlock_stage::store::{StageOp, Store};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `airlock --workspace WS ARGS…` with a private config home and scratch directory.
fn airlock_cmd(ws: &Path, args: &[&str]) -> Command {
    let home = ws.parent().unwrap().join("home");
    let run = ws.parent().unwrap().join("run");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&run).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_airlock"));
    cmd.arg("--workspace")
        .arg(ws)
        .args(args)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("AIRLOCK_RUN_DIR", &run)
        .env("AIRLOCK_SANDBOX_HOST", "off")
        .stdin(Stdio::null());
    cmd
}

fn airlock(ws: &Path, args: &[&str]) -> Output {
    airlock_cmd(ws, args).output().expect("airlock runs")
}

fn ok(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn workspace() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("ws");
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(ws.join("README.md"), "# sample\n").unwrap();
    (t, ws)
}

/// Runs `cmd` for at most `limit`; `None` when it had to be killed.
fn output_within(mut cmd: Command, limit: Duration) -> Option<(Output, Duration)> {
    let start = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Drain stdout on a thread so a large output cannot block the child.
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut out, &mut buf).unwrap();
        buf
    });
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let elapsed = start.elapsed();
            let stdout = reader.join().unwrap();
            let mut stderr = Vec::new();
            std::io::Read::read_to_end(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
            return Some((
                Output {
                    status,
                    stdout,
                    stderr,
                },
                elapsed,
            ));
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Total size of the regular files below `dir`.
fn bytes_below(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let md = std::fs::symlink_metadata(e.path()).unwrap();
            if md.is_dir() {
                stack.push(e.path());
            } else {
                total += md.len();
            }
        }
    }
    total
}

/// Files below `dir` (recursively).
fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path());
            }
        }
    }
    out
}

/// 50,000 staged new files (in 100 directories) make `status` answer in well under the cap,
/// with every entry listed. The debug build is allowed 10 s here (a generous bound that
/// cannot flake); docs/BENCHMARKS.md has the measured times.
#[test]
fn status_over_50000_staged_files_is_fast() {
    const N: usize = 50_000;
    let (_t, ws) = workspace();
    {
        let store = Store::open(&ws, "default").unwrap();
        let content = store.blobs().put(b"generated\n").unwrap();
        let ops = (0..N).map(|i| StageOp::Entry {
            path: RelPath::new(format!("gen/d{}/f{i}.txt", i % 100)).unwrap(),
            change: Change::Write {
                content,
                size: 10,
                mode: 0o644,
            },
            session_local: false,
            flagged: None,
        });
        assert_eq!(store.stage_batch(ops).unwrap(), N);
    }
    let limit = Duration::from_secs(10);
    let (o, took) =
        output_within(airlock_cmd(&ws, &["status", "--json"]), limit).unwrap_or_else(|| {
            panic!("`airlock status` over {N} staged files took more than {limit:?}")
        });
    let v: Value = serde_json::from_str(ok(&o).trim()).unwrap();
    let entries = v["entries"].as_array().unwrap();
    assert_eq!(entries.len(), N);
    assert!(entries.iter().all(|e| e["status"] == "A"));
    assert_eq!(v["text"].as_str().unwrap().lines().count(), N);
    eprintln!("airlock status over {N} staged files: {took:?}");
    // The plain form too.
    let (o, took) = output_within(airlock_cmd(&ws, &["status"]), limit).unwrap_or_else(|| {
        panic!("`airlock status` over {N} staged files took more than {limit:?}")
    });
    assert_eq!(ok(&o).lines().count(), N);
    eprintln!("airlock status (text) over {N} staged files: {took:?}");
}

/// Spool files hold outputs that overflow the in-memory cap; a result names them for the
/// operator. Only the newest few runs' spools are kept per session, a cancelled or failed run
/// keeps none, and leftovers of a crashed run are swept by the next run.
#[test]
fn spool_files_do_not_accumulate_across_runs() {
    let (_t, ws) = workspace();
    let spool = ws.join(".airlock/spool/default");
    // A leftover of a run whose airlock died: an unmarked run directory.
    std::fs::create_dir_all(spool.join("run-0000000000000001-dead")).unwrap();
    std::fs::write(
        spool.join("run-0000000000000001-dead/stdout-x.log"),
        vec![b'x'; 1 << 20],
    )
    .unwrap();
    let mut named = Vec::new();
    for i in 0..8 {
        // ~590 KB of output: far over the 32 KiB kept in memory.
        let script = format!("seq 1 100000; echo run{i}");
        let o = airlock(
            &ws,
            &[
                "--mode",
                "build",
                "--json",
                "call",
                "bash",
                &serde_json::json!({ "command": script }).to_string(),
            ],
        );
        let v: Value = serde_json::from_str(ok(&o).trim()).unwrap();
        let text = v["output"]["stdout"].as_str().unwrap();
        assert!(text.ends_with(&format!("run{i}\n")), "{text}");
        let path = text
            .split("full output in ")
            .nth(1)
            .and_then(|r| r.split(']').next())
            .unwrap_or_else(|| panic!("no spool named in: {}", &text[..text.len().min(300)]));
        // The file the result names exists and holds the whole output.
        let full = std::fs::read_to_string(path).unwrap();
        assert!(full.starts_with("1\n2\n3\n") && full.ends_with(&format!("run{i}\n")));
        named.push(PathBuf::from(path));
    }
    let logs: Vec<PathBuf> = files_below(&spool)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    // At most the newest 4 runs' spools (stdout and stderr each) are kept.
    assert!(
        logs.len() <= 2 * 4,
        "spool files accumulate: {} files: {logs:?}",
        logs.len()
    );
    assert!(
        named.last().unwrap().exists(),
        "the newest run's spool is kept"
    );
    assert!(!named[0].exists(), "the oldest run's spool is removed");
    assert!(
        !spool.join("run-0000000000000001-dead").exists(),
        "a crashed run's leftover is swept"
    );
    // A run that prints little leaves nothing behind.
    let before = files_below(&spool).len();
    let o = airlock(&ws, &["--mode", "build", "exec", "--", "echo", "short"]);
    assert_eq!(ok(&o), "short\n");
    assert_eq!(files_below(&spool).len(), before);
}

/// `discard` returns the blob store to its size before the big files were staged, and undo of
/// an apply made earlier still works (undo reads its backups, never blobs).
#[test]
fn discard_frees_the_blob_store_and_undo_still_works() {
    let (_t, ws) = workspace();
    std::fs::write(
        ws.join("package.json"),
        r#"{"name":"gc","private":true,"type":"module","scripts":{"test":"node --test"}}"#,
    )
    .unwrap();
    std::fs::create_dir_all(ws.join("test")).unwrap();
    std::fs::write(
        ws.join("test/ok.test.js"),
        "import { test } from 'node:test';\ntest('ok', () => {});\n",
    )
    .unwrap();
    std::fs::write(ws.join("src/a.txt"), "v1\n").unwrap();
    let build = |args: &[&str]| {
        let mut all = vec!["--mode", "build"];
        all.extend_from_slice(args);
        ok(&airlock(&ws, &all))
    };
    build(&[
        "call",
        "write_file",
        r#"{"path":"src/a.txt","content":"v2\n"}"#,
    ]);
    build(&["verify", "--timeout", "60"]);
    build(&["apply"]);
    assert_eq!(
        std::fs::read_to_string(ws.join("src/a.txt")).unwrap(),
        "v2\n"
    );
    let blobs = ws.join(".airlock/blobs");
    let baseline = bytes_below(&blobs);
    assert_eq!(baseline, 0, "apply reclaims the blobs of what it applied");

    // 16 MB of incompressible content, staged by a sandboxed command.
    build(&[
        "exec",
        "--",
        "sh",
        "-c",
        "for i in 1 2 3 4; do head -c 4000000 /dev/urandom > big$i.bin; done",
    ]);
    let staged = bytes_below(&blobs);
    assert!(staged >= baseline + 16_000_000, "{staged} vs {baseline}");
    // An explicit collection keeps everything still staged.
    let gc: Value = serde_json::from_str(build(&["--json", "gc"]).trim()).unwrap();
    assert_eq!(gc["removed"], 0, "{gc}");
    assert!(gc["kept"].as_u64().unwrap() >= 4, "{gc}");
    assert_eq!(bytes_below(&blobs), staged);
    let said = build(&["discard"]);
    assert!(said.contains("Discarded 4"), "{said}");
    let after = bytes_below(&blobs);
    assert!(
        after <= baseline + 4096,
        "discard freed nothing: {after} bytes of blobs, {baseline} before staging"
    );
    // The earlier apply can still be undone.
    build(&["undo"]);
    assert_eq!(
        std::fs::read_to_string(ws.join("src/a.txt")).unwrap(),
        "v1\n"
    );
}

/// `airlock recover` removes temp files an interrupted apply left anywhere in the workspace
/// (here: one whose journal record no longer exists) and reports each; look-alike names stay.
#[test]
fn recover_removes_leftover_apply_temps_and_reports_them() {
    let (_t, ws) = workspace();
    std::fs::create_dir_all(ws.join("src/deep")).unwrap();
    std::fs::write(ws.join("src/deep/.airlock-tmp-42-7"), "half-applied").unwrap();
    std::fs::write(ws.join(".airlock-rst-42-1"), "restore temp").unwrap();
    std::fs::write(ws.join("src/.airlock-tmp-notes"), "a user's file").unwrap();
    let o = airlock(&ws, &["--mode", "build", "--json", "recover"]);
    let v: Value = serde_json::from_str(ok(&o).trim()).unwrap();
    let cleaned: Vec<&Value> = v
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["outcome"] == "cleaned")
        .collect();
    assert_eq!(cleaned.len(), 1, "{v}");
    assert_eq!(cleaned[0]["record"], 42);
    let mut removed: Vec<&str> = cleaned[0]["removed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    removed.sort();
    assert_eq!(removed, [".airlock-rst-42-1", "src/deep/.airlock-tmp-42-7"]);
    assert!(!ws.join("src/deep/.airlock-tmp-42-7").exists());
    assert!(ws.join("src/.airlock-tmp-notes").exists());
    // Nothing left: a second run reports nothing.
    let o = airlock(&ws, &["--mode", "build", "--json", "recover"]);
    assert_eq!(ok(&o).trim(), "[]");
}

/// A workspace that ships `.airlock/spool/default` as a symlink cannot make a run prune (or
/// write) through it: what the link points to is left alone.
#[test]
fn a_planted_spool_symlink_is_never_followed() {
    let (t, ws) = workspace();
    let victim = t.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("precious.txt"), "keep me").unwrap();
    std::fs::create_dir_all(ws.join(".airlock/spool")).unwrap();
    std::os::unix::fs::symlink(&victim, ws.join(".airlock/spool/default")).unwrap();
    let script = "seq 1 100000";
    let o = airlock(
        &ws,
        &[
            "--mode",
            "build",
            "--json",
            "call",
            "bash",
            &serde_json::json!({ "command": script }).to_string(),
        ],
    );
    let v: Value = serde_json::from_str(ok(&o).trim()).unwrap();
    assert!(
        v["output"]["stdout"]
            .as_str()
            .unwrap()
            .ends_with("100000\n")
    );
    assert_eq!(
        std::fs::read_to_string(victim.join("precious.txt")).unwrap(),
        "keep me"
    );
    assert_eq!(
        std::fs::read_dir(&victim).unwrap().count(),
        1,
        "nothing written there"
    );
}
