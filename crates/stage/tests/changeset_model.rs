//! Random staging sequences checked against a shadow directory where the same operations are
//! done for real: the merged view, and the overlay layer mounted over the workspace, must both
//! show exactly the shadow's files.

use airlock_stage::layer::materialize_layer_over;
use airlock_stage::store::Store;
use airlock_stage::view::{read_merged, walk_merged};
use airlock_types::RelPath;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

const PATHS: [&str; 7] = ["a", "b", "d", "d/x", "d/y", "d/e", "d/e/z"];
const CONTENTS: [&[u8]; 4] = [b"base a\n", b"one\n", b"\x00\xffbin", b""];

#[derive(Debug, Clone)]
enum Op {
    Write(usize, usize, bool),
    Delete(usize),
    Mkdir(usize),
    Move(usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..PATHS.len(), 0..CONTENTS.len(), any::<bool>()).prop_map(|(p, c, x)| Op::Write(p, c, x)),
        2 => (0..PATHS.len()).prop_map(Op::Delete),
        1 => (0..PATHS.len()).prop_map(Op::Mkdir),
        2 => (0..PATHS.len(), 0..PATHS.len()).prop_map(|(a, b)| Op::Move(a, b)),
    ]
}

fn seed(root: &Path) {
    fs::create_dir_all(root.join("d/e")).unwrap();
    fs::write(root.join("a"), b"base a\n").unwrap();
    fs::write(root.join("d/x"), b"x\n").unwrap();
    fs::write(root.join("d/e/z"), b"z\n").unwrap();
}

/// Regular files under `root` (outside `.airlock`) with content and permission bits.
fn files(root: &Path) -> BTreeMap<String, (Vec<u8>, u32)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if rel == ".airlock" {
                continue;
            }
            let md = fs::symlink_metadata(&p).unwrap();
            if md.is_dir() {
                stack.push(p);
            } else if md.is_file() {
                out.insert(
                    rel,
                    (fs::read(&p).unwrap(), md.permissions().mode() & 0o7777),
                );
            }
        }
    }
    out
}

/// Do `op` on the shadow directory the way a real filesystem would.
fn shadow_apply(root: &Path, op: &Op) {
    let p = |i: usize| root.join(PATHS[i]);
    match op {
        Op::Write(i, c, x) => {
            let t = p(*i);
            fs::create_dir_all(t.parent().unwrap()).unwrap();
            fs::write(&t, CONTENTS[*c]).unwrap();
            let mode = if *x { 0o755 } else { 0o644 };
            fs::set_permissions(&t, fs::Permissions::from_mode(mode)).unwrap();
        }
        Op::Delete(i) => {
            let t = p(*i);
            // An empty directory the shadow already forgot (see `prune_empty_dirs`).
            let Ok(md) = fs::symlink_metadata(&t) else {
                return;
            };
            if md.is_dir() {
                fs::remove_dir_all(&t).unwrap();
            } else {
                fs::remove_file(&t).unwrap();
            }
        }
        Op::Mkdir(i) => fs::create_dir_all(p(*i)).unwrap(),
        Op::Move(a, b) if a == b => {}
        Op::Move(a, b) => {
            let to = p(*b);
            fs::create_dir_all(to.parent().unwrap()).unwrap();
            fs::rename(p(*a), &to).unwrap();
        }
    }
}

/// Like git, the changeset does not keep a directory that only existed through entries staged
/// below it once they are gone; the shadow forgets empty directories the same way (only files
/// are compared).
fn prune_empty_dirs(root: &Path, dir: &Path) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if fs::symlink_metadata(&p).unwrap().is_dir() {
            prune_empty_dirs(root, &p);
        }
    }
    if dir != root && fs::read_dir(dir).unwrap().next().is_none() {
        fs::remove_dir(dir).unwrap();
    }
}

fn rp(i: usize) -> RelPath {
    RelPath::new(PATHS[i]).unwrap()
}

fn mount_and_list(layer: &Path, ws: &Path) -> Option<BTreeMap<String, (Vec<u8>, u32)>> {
    if !rustix::process::geteuid().is_root() {
        return None;
    }
    let mnt = tempfile::tempdir().unwrap();
    let ok = Command::new("mount")
        .args(["-t", "overlay", "overlay", "-o"])
        .arg(format!("lowerdir={}:{}", layer.display(), ws.display()))
        .arg(mnt.path())
        .status()
        .unwrap()
        .success();
    assert!(ok, "mount failed");
    let listing = files(mnt.path());
    assert!(
        Command::new("umount")
            .arg(mnt.path())
            .status()
            .unwrap()
            .success()
    );
    Some(listing)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn merged_view_and_layer_match_a_real_filesystem(ops in prop::collection::vec(op(), 1..10)) {
        let ws = tempfile::tempdir().unwrap();
        let shadow = tempfile::tempdir().unwrap();
        seed(ws.path());
        seed(shadow.path());
        let s = Store::open(ws.path(), "model").unwrap();
        for op in &ops {
            let staged = match op {
                Op::Write(i, c, x) => s.stage_write(&rp(*i), CONTENTS[*c], Some(if *x { 0o755 } else { 0o644 })),
                Op::Delete(i) => s.stage_delete(&rp(*i)),
                Op::Mkdir(i) => s.stage_dir(&rp(*i), 0o755),
                Op::Move(a, b) => s.stage_move(&rp(*a), &rp(*b)),
            };
            // An operation the store refuses must leave everything as it was; one it accepts
            // must be possible on a real filesystem.
            if staged.is_ok() {
                shadow_apply(shadow.path(), op);
                prune_empty_dirs(shadow.path(), shadow.path());
            }
        }
        let want = files(shadow.path());
        let mut got = BTreeMap::new();
        for e in walk_merged(&s, None, false).unwrap() {
            let bytes = read_merged(&s, &e.path).unwrap().unwrap();
            got.insert(e.path.display(), bytes);
        }
        let want_content: BTreeMap<String, Vec<u8>> =
            want.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect();
        prop_assert_eq!(&got, &want_content, "merged view after {:?}", ops);

        let layer = tempfile::tempdir().unwrap();
        materialize_layer_over(&s.snapshot().unwrap(), s.blobs(), layer.path(), ws.path()).unwrap();
        if let Some(mounted) = mount_and_list(layer.path(), ws.path()) {
            prop_assert_eq!(&mounted, &want, "mounted layer after {:?}", ops);
        }
    }
}
