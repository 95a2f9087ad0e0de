//! The caller's watch over a running sandbox's ceilings that no kernel limit enforces by
//! itself: what the run has written to the overlay's upper directory, and (with a control
//! group) the CPU time of all its processes together.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::cgroup::RunCgroup;
use crate::spec::Ceiling;

/// Free bytes (for unprivileged users) and total bytes of the filesystem holding `path`.
fn fs_space(path: &CString) -> Option<(u64, u64)> {
    fs_stat(path).map(|(free, total, _)| (free, total))
}

/// [`fs_space`] and the filesystem's id (`f_fsid`; zero where the filesystem gives none).
fn fs_stat(path: &CString) -> Option<(u64, u64, u64)> {
    let st = rustix::fs::statvfs(path.as_c_str()).ok()?;
    let unit = st.f_frsize;
    Some((st.f_bavail * unit, st.f_blocks * unit, st.f_fsid))
}

/// Bytes under `dir`: for a regular file its size or its blocks, whichever is larger (a sparse
/// file costs the harvest its full size); for anything else its blocks. `complete` is false
/// when a directory could not be read.
pub(crate) fn usage(dir: &Path) -> (u64, bool) {
    let mut total = 0u64;
    let mut complete = true;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            complete = false;
            continue;
        };
        for e in rd.flatten() {
            let Ok(md) = e.metadata() else { continue };
            let blocks = md.blocks() * 512;
            if md.is_dir() {
                stack.push(e.path());
                total += blocks;
            } else if md.is_file() {
                total += md.len().max(blocks);
            } else {
                total += blocks;
            }
        }
    }
    (total, complete)
}

/// Watches the upper directory against its ceiling, and the host filesystem against running
/// full. Walking the directory costs O(its entries), so walks are spaced to stay under about
/// 5% of the time; between walks, the filesystem's free space (one `statvfs`) says whether
/// anything was written at all, and triggers a walk as soon as the drop could reach the
/// ceiling.
pub(crate) struct DiskWatch {
    upper: PathBuf,
    upper_c: Option<CString>,
    limit: u64,
    used: u64,
    last_walk: Option<Instant>,
    interval: Duration,
    walk_cost: Duration,
    free_at_start: Option<u64>,
    free_at_walk: Option<u64>,
    /// Free space the host keeps whatever the ceiling says.
    reserve: u64,
    /// The filesystems of the run's writable caches ([`crate::CacheBind`]), which the upper
    /// ceiling does not count: each with the free space it must keep and its free space when
    /// the run started, once per filesystem (a workspace's caches usually share one).
    caches: Vec<(CString, u64, u64)>,
}

impl DiskWatch {
    pub(crate) fn new(upper: &Path, limit: u64) -> DiskWatch {
        let upper_c = CString::new(upper.as_os_str().as_bytes()).ok();
        let space = upper_c.as_ref().and_then(fs_space);
        let reserve = space.map_or(64 << 20, |(_, total)| (total / 50).clamp(64 << 20, 1 << 30));
        DiskWatch {
            upper: upper.to_path_buf(),
            upper_c,
            limit,
            used: 0,
            last_walk: None,
            interval: Duration::from_millis(100),
            walk_cost: Duration::ZERO,
            free_at_start: space.map(|s| s.0),
            free_at_walk: space.map(|s| s.0),
            reserve,
            caches: Vec::new(),
        }
    }

    /// Also watches the filesystems holding `dirs` (the run's caches): the run is over once
    /// one of them, having lost space since the start, is below its reserve (a fiftieth of it,
    /// 64 MiB to 1 GiB).
    pub(crate) fn with_caches<'a>(mut self, dirs: impl IntoIterator<Item = &'a Path>) -> Self {
        let mut seen = Vec::new();
        for d in dirs {
            if let Ok(c) = CString::new(d.as_os_str().as_bytes())
                && let Some((free, total, fsid)) = fs_stat(&c)
                // A zero id (an older tmpfs) names no filesystem: watched on its own.
                && (fsid == 0 || !seen.contains(&fsid))
            {
                seen.push(fsid);
                let reserve = (total / 50).clamp(64 << 20, 1 << 30);
                self.caches.push((c, reserve, free));
            }
        }
        self
    }

    /// What the run's writes took at the last walk.
    pub(crate) fn used(&self) -> u64 {
        self.used
    }

    fn walk(&mut self, now: Instant, free: Option<u64>) {
        let t = Instant::now();
        let (bytes, complete) = usage(&self.upper);
        // A directory the walk could not read hides what is below it: count everything the
        // filesystem lost since the start instead (never less than the truth).
        self.used = if complete {
            bytes
        } else {
            let dropped = match (self.free_at_start, free) {
                (Some(a), Some(b)) => a.saturating_sub(b),
                _ => u64::MAX,
            };
            bytes.max(dropped)
        };
        self.walk_cost = t.elapsed();
        self.interval =
            (self.walk_cost * 20).clamp(Duration::from_millis(100), Duration::from_secs(2));
        self.last_walk = Some(now);
        self.free_at_walk = free;
    }

    /// True once the run is over its ceiling (or is writing while the host runs out of space).
    pub(crate) fn over(&mut self) -> bool {
        let now = Instant::now();
        let free = self.upper_c.as_ref().and_then(fs_space).map(|s| s.0);
        let dropped = match (self.free_at_walk, free) {
            (Some(a), Some(b)) => a.saturating_sub(b),
            _ => 0,
        };
        if let Some(f) = free
            && f < self.reserve
            && dropped > 0
        {
            return true;
        }
        if self
            .caches
            .iter()
            .any(|(c, reserve, start)| fs_space(c).is_some_and(|(f, _)| f < *reserve && f < *start))
        {
            return true;
        }
        let due = self.last_walk.is_none_or(|t| now >= t + self.interval);
        let may_be_over = self.used.saturating_add(dropped) > self.limit
            && self
                .last_walk
                .is_none_or(|t| now >= t + (self.walk_cost * 5).max(Duration::from_millis(20)));
        if due || may_be_over {
            self.walk(now, free);
        }
        self.used > self.limit
    }

    /// A last measurement after the run.
    pub(crate) fn settle(&mut self) -> bool {
        let free = self.upper_c.as_ref().and_then(fs_space).map(|s| s.0);
        self.walk(Instant::now(), free);
        self.used > self.limit
    }
}

/// Everything the supervisor checks while the run goes on.
pub(crate) struct Watcher<'a> {
    pub(crate) cgroup: &'a RunCgroup,
    /// CPU-time ceiling watched on the control group.
    pub(crate) cpu_limit: Option<Duration>,
    pub(crate) disk: DiskWatch,
}

impl Watcher<'_> {
    /// The ceiling the run is over, if any.
    pub(crate) fn check(&mut self) -> Option<Ceiling> {
        if let Some(limit) = self.cpu_limit
            && self.cgroup.cpu_used().is_some_and(|u| u >= limit)
        {
            return Some(Ceiling::Cpu);
        }
        if self.disk.over() {
            return Some(Ceiling::Disk);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_counts_sparse_files_at_their_size() {
        let d = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(d.path().join("sparse")).unwrap();
        f.set_len(10 << 20).unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/a"), vec![1u8; 5000]).unwrap();
        let (n, complete) = usage(d.path());
        assert!(complete);
        assert!(n >= (10 << 20) + 5000, "{n}");
        let mut w = DiskWatch::new(d.path(), 1 << 20);
        assert!(w.over());
        let mut w = DiskWatch::new(d.path(), 100 << 20);
        assert!(!w.over());
        assert!(w.used() >= 10 << 20);
    }

    /// The caches of one filesystem are watched once (a run checks them at every poll).
    #[test]
    fn caches_on_one_filesystem_are_watched_once() {
        let upper = tempfile::tempdir().unwrap();
        let caches = tempfile::tempdir().unwrap();
        let (a, b) = (caches.path().join("a"), caches.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        let w = DiskWatch::new(upper.path(), 1 << 20).with_caches([a.as_path(), b.as_path()]);
        let fsid = fs_stat(&CString::new(a.as_os_str().as_bytes()).unwrap())
            .unwrap()
            .2;
        assert_eq!(w.caches.len(), if fsid == 0 { 2 } else { 1 });
    }

    /// A cache's writes are not the upper's: the run is stopped when the cache's filesystem
    /// runs short, not by the upper ceiling.
    #[test]
    fn a_cache_filesystem_below_its_reserve_is_over() {
        let upper = tempfile::tempdir().unwrap();
        let cache = tempfile::tempdir().unwrap();
        let mut w = DiskWatch::new(upper.path(), 1 << 20).with_caches([cache.path()]);
        std::fs::write(cache.path().join("big"), vec![1u8; 2 << 20]).unwrap();
        assert!(
            !w.over(),
            "the cache is not counted against the upper ceiling"
        );
        w.caches[0].1 = u64::MAX;
        // As if the run had taken the filesystem's space since it started.
        w.caches[0].2 = u64::MAX;
        assert!(
            w.over(),
            "a cache filesystem below its reserve stops the run"
        );
    }
}
