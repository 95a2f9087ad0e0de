//! What the verify tests share about the host: the toolchain directories of its home that a
//! verification's sandbox is given.

use std::path::PathBuf;

/// `$HOME/DIR` for each of `dirs` that exists on this host (toolchains and package caches the
/// runners read).
pub fn home_binds(dirs: &[&str]) -> Vec<PathBuf> {
    let home = PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into()));
    dirs.iter()
        .map(|d| home.join(d))
        .filter(|p| p.exists())
        .collect()
}
