//! Helpers shared by the end-to-end tests.

// Each test crate uses a different subset.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Every entry under `root` (without airlock's own `.airlock/`): content (or link target) and
/// mode.
pub fn snapshot(root: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u32)> {
    let mut map = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let rel = entry.path().strip_prefix(root).unwrap().to_path_buf();
            if rel == Path::new(".airlock") {
                continue;
            }
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            let mode = meta.permissions().mode();
            if meta.is_dir() {
                stack.push(entry.path());
                map.insert(rel, (Vec::new(), mode));
            } else if meta.file_type().is_symlink() {
                let target = std::fs::read_link(entry.path()).unwrap();
                map.insert(rel, (target.into_os_string().into_encoded_bytes(), 0));
            } else {
                map.insert(rel, (std::fs::read(entry.path()).unwrap(), mode));
            }
        }
    }
    map
}

/// Host processes whose command line contains `marker` (this test binary excluded).
pub fn host_processes_with(marker: &str) -> Vec<String> {
    let me = std::process::id().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == me || !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmd.contains(marker) {
                found.push(format!("{name}: {cmd}"));
            }
        }
    }
    found
}
