//! The overlay layer, proven by mounting it for real: lower = layer : workspace.

use airlock_stage::layer::materialize_layer;
use airlock_stage::store::Store;
use airlock_types::RelPath;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

fn rp(s: &str) -> RelPath {
    RelPath::new(s).unwrap()
}

/// Unmounts on drop, so a failed assertion never leaves a mount behind.
struct Mounted<'a>(&'a Path);

impl Drop for Mounted<'_> {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0).status();
    }
}

fn mount_overlay(lower: &str, target: &Path, extra: &str) -> std::io::Result<bool> {
    let opts = if extra.is_empty() {
        format!("lowerdir={lower}")
    } else {
        format!("lowerdir={lower},{extra}")
    };
    let st = Command::new("mount")
        .args(["-t", "overlay", "overlay", "-o", &opts])
        .arg(target)
        .status()?;
    Ok(st.success())
}

#[test]
fn the_layer_mounts_over_the_workspace_as_the_merged_view() {
    if !rustix::process::geteuid().is_root() {
        eprintln!(
            "skipped: mounting overlayfs needs root (run the suite as root to prove the layer)"
        );
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    let w = |p: &str, c: &str| {
        let path = ws.path().join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, c).unwrap();
    };
    w("keep.txt", "keep\n");
    w("gone.txt", "gone\n");
    w("edit.txt", "old\n");
    w("dir/old1", "1");
    w("dir/old2", "2");
    w("other/x", "x");
    let s = Store::open(ws.path(), "s").unwrap();
    s.stage_delete(&rp("gone.txt")).unwrap();
    s.stage_write(&rp("edit.txt"), b"new\n", Some(0o755))
        .unwrap();
    s.stage_delete(&rp("dir")).unwrap();
    s.stage_write(&rp("dir/fresh"), b"fresh", None).unwrap();
    s.stage_delete(&rp("other")).unwrap();
    s.stage_write(&rp("added/deep/file.bin"), b"\x00\xff", None)
        .unwrap();
    s.stage_symlink(&rp("link"), b"keep.txt", None).unwrap();
    let snap = s.snapshot().unwrap();

    let layer = tempfile::tempdir().unwrap();
    materialize_layer(&snap, s.blobs(), layer.path()).unwrap();

    let mnt = tempfile::tempdir().unwrap();
    let lower = format!("{}:{}", layer.path().display(), ws.path().display());
    assert!(
        mount_overlay(&lower, mnt.path(), "").unwrap(),
        "mount failed"
    );
    let _guard = Mounted(mnt.path());
    let m = mnt.path();
    assert_eq!(
        std::fs::read_to_string(m.join("keep.txt")).unwrap(),
        "keep\n"
    );
    assert!(
        !m.join("gone.txt").exists(),
        "a whiteout must hide the file"
    );
    assert_eq!(
        std::fs::read_to_string(m.join("edit.txt")).unwrap(),
        "new\n"
    );
    assert_eq!(
        std::fs::metadata(m.join("edit.txt"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o755
    );
    let mut dir: Vec<String> = std::fs::read_dir(m.join("dir"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    dir.sort();
    assert_eq!(dir, ["fresh"], "an opaque dir must hide the old contents");
    assert!(!m.join("other").exists());
    assert_eq!(
        std::fs::read(m.join("added/deep/file.bin")).unwrap(),
        b"\x00\xff"
    );
    assert_eq!(
        std::fs::read_link(m.join("link")).unwrap(),
        Path::new("keep.txt")
    );
    assert_eq!(std::fs::read_to_string(m.join("link")).unwrap(), "keep\n");
    // The workspace itself is untouched.
    assert_eq!(
        std::fs::read_to_string(ws.path().join("gone.txt")).unwrap(),
        "gone\n"
    );
}

#[test]
fn the_layer_also_works_for_userxattr_mounts() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: mounting overlayfs needs root");
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("d")).unwrap();
    std::fs::write(ws.path().join("d/old"), "o").unwrap();
    std::fs::write(ws.path().join("f"), "f").unwrap();
    let s = Store::open(ws.path(), "s").unwrap();
    s.stage_delete(&rp("d")).unwrap();
    s.stage_write(&rp("d/new"), b"n", None).unwrap();
    s.stage_delete(&rp("f")).unwrap();
    let layer = tempfile::tempdir().unwrap();
    materialize_layer(&s.snapshot().unwrap(), s.blobs(), layer.path()).unwrap();
    let mnt = tempfile::tempdir().unwrap();
    let lower = format!("{}:{}", layer.path().display(), ws.path().display());
    assert!(
        mount_overlay(&lower, mnt.path(), "userxattr").unwrap(),
        "mount failed"
    );
    let _guard = Mounted(mnt.path());
    assert!(!mnt.path().join("f").exists());
    assert!(mnt.path().join("d/new").exists());
    assert!(
        !mnt.path().join("d/old").exists(),
        "user.overlay.opaque must be honoured"
    );
}
