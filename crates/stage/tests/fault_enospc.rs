//! A real full filesystem mid-apply: a 1 MiB tmpfs (mounted in a private mount namespace via
//! `unshare -rm`, so nothing leaks to the host) fills up while the temps are written. The apply
//! must roll back to the exact pre-state, record `failed`, and say which path and why.

mod apply_support;

use airlock_stage::BlobStore;
use airlock_stage::apply::{ApplyContext, ApplyError, apply_verified};
use airlock_stage::journal::{Journal, RecordState};
use apply_support::{Fixture, verified};
use std::path::{Path, PathBuf};
use std::process::Command;

const CHILD_DIR: &str = "AIRLOCK_ENOSPC_DIR";
const MARKER: &str = "ENOSPC-SCENARIO-PASSED";

/// Runs inside the private mount namespace.
#[test]
#[ignore = "runs only as the child of enospc_mid_apply_rolls_back_to_the_pre_state"]
fn enospc_child() {
    let dir = PathBuf::from(std::env::var_os(CHILD_DIR).expect("child mode needs a directory"));
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(st.success(), "mount tmpfs failed");

    let mut fx = Fixture::at(mnt.join("ws"), None);
    // Blobs live elsewhere: only the workspace (and its journal) share the tiny filesystem.
    fx.blobs = BlobStore::open(dir.join("blobs")).unwrap();
    for i in 0..16 {
        fx.write(
            &format!("src/f{i}.dat"),
            &vec![b'a' + i as u8; 16 * 1024],
            0o644,
        );
    }
    let pre = fx.tree();
    let mut entries: Vec<_> = (0..16)
        .map(|i| {
            fx.stage_write(
                &format!("src/f{i}.dat"),
                &vec![b'A' + i as u8; 96 * 1024],
                0o600,
            )
        })
        .collect();
    entries.push(fx.stage_write("new/nested/x.txt", b"small", 0o644));
    let v = verified(entries);
    let (j, _) = Journal::open(&fx.ws).unwrap();

    let err = apply_verified(&fx.ws, &v, &fx.blobs, &j, &ApplyContext::new("s", 1)).unwrap_err();
    let msg = err.to_string();
    println!("apply error: {msg}");
    match &err {
        ApplyError::Io {
            source,
            rolled_back,
            path,
        } => {
            assert_eq!(
                source.raw_os_error(),
                Some(28),
                "expected ENOSPC, got {source}"
            );
            assert!(rolled_back);
            assert!(
                msg.contains(path.as_str()) && path.starts_with("src/f"),
                "{msg}"
            );
        }
        other => panic!("expected an I/O error, got {other}"),
    }
    assert!(msg.contains("No space left on device"), "{msg}");
    assert!(
        msg.contains("restored to its state before the apply"),
        "{msg}"
    );
    assert!(fx.tree() == pre, "the pre-state must be intact");
    let rec = &j.records().unwrap()[0];
    assert_eq!(rec.state, RecordState::Failed);
    assert!(
        rec.error
            .as_deref()
            .unwrap()
            .contains("No space left on device")
    );
    assert!(!fx.ws.join(format!(".airlock/backups/{}", rec.id)).exists());

    // The space came back: a changeset that fits applies.
    let v = verified(vec![fx.stage_write("src/f0.dat", b"fits", 0o644)]);
    apply_verified(&fx.ws, &v, &fx.blobs, &j, &ApplyContext::new("s", 2)).unwrap();
    assert_eq!(std::fs::read(fx.abs("src/f0.dat")).unwrap(), b"fits");
    println!("{MARKER}");
}

fn unshare_works() -> bool {
    Command::new("unshare")
        .args(["-rm", "true"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

#[test]
fn enospc_mid_apply_rolls_back_to_the_pre_state() {
    if !unshare_works() {
        eprintln!("SKIPPED: `unshare -rm` (user and mount namespaces) is not available here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("unshare")
        .arg("-rm")
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "enospc_child", "--ignored", "--nocapture"])
        .env(CHILD_DIR, dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(MARKER),
        "ENOSPC scenario failed: {}\n{stdout}\n{stderr}",
        out.status
    );
    // The tmpfs lived only in the child's mount namespace.
    assert!(!is_mountpoint(&dir.path().join("mnt")));
}

fn is_mountpoint(p: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|m| m.contains(&format!(" {} ", p.display())))
        .unwrap_or(false)
}
