//! Spares: the next run's PID 1, cloned by the host ahead of its request into fresh namespaces
//! and, given the previous request, prepared up to the workspace overlay.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use super::wire::{Check, MAX_REQUEST, decode, recv_with_fds, send_with_fds};
use crate::error::SandboxError;
use crate::launch::{self, ChildIo, RunRequest};

/// The next run's PID 1, forked ahead of its request: already in its fresh mount (a copy of the
/// host's), pid, ipc, uts and (network off) net namespaces ([`launch::run_namespaces`]; it
/// readies the uts and net ones itself, hostname and loopback, before it waits), waiting on
/// `ctl` for the request and its descriptors. Making those namespaces is most of a warm run's
/// cost; a spare makes them while nobody waits. It shares only the host's user namespace.
///
/// Given the previous request, a spare also replays that request's steps up to the workspace
/// overlay (fresh `/tmp`, `/dev/shm`, `$HOME` with its toolchain binds, `/proc`), opens the
/// overlay's directories, and pivots into the new root; a request of the same shape then costs
/// only the overlay, the masks and the command.
pub(crate) struct Spare {
    /// 0 once handed over to a run (then it is no longer ours to kill).
    pub(crate) pid: libc::pid_t,
    pub(crate) ctl: UnixStream,
    pub(crate) alive_w: Option<OwnedFd>,
    /// The request shape it prepared for, if any.
    pub(crate) predicted: Option<RunRequest>,
    /// (path, device, inode) of the overlay directories it holds open: a request whose paths
    /// now name other directories (a workspace deleted and made again) does not fit.
    pub(crate) identities: Vec<(PathBuf, u64, u64)>,
    /// Control groups the spare joined while it waited (moving a process between groups waits
    /// for an RCU grace period, ~10 ms: done here, it is off the run's path). The host writes
    /// the run's ceilings into them before the run starts and hands them to the client.
    pub(crate) cg: Option<crate::cgroup::RunCgroup>,
}

/// The overlay directories of `p` (workspace, layers, upper, work) with their device and inode.
pub(crate) fn source_identities(p: &RunRequest) -> Option<Vec<(PathBuf, u64, u64)>> {
    let v = &p.v;
    std::iter::once(&v.workspace)
        .chain(v.layers.iter())
        .chain([&v.upper, &v.work])
        .map(|path| {
            let m = std::fs::metadata(path).ok()?;
            Some((path.clone(), m.dev(), m.ino()))
        })
        .collect()
}

impl Spare {
    pub(crate) fn fork(
        newroot: &Path,
        network: bool,
        predicted: Option<RunRequest>,
        with_cgroup: bool,
    ) -> io::Result<Spare> {
        // A prediction whose directories are gone is no prediction.
        let predicted = predicted.filter(|p| shared_parent(p).is_some());
        let (predicted, identities) = match predicted.map(|p| (source_identities(&p), p)) {
            Some((Some(ids), p)) => (Some(p), ids),
            _ => (None, Vec::new()),
        };
        let (ctl, theirs) = UnixStream::pair()?;
        let (alive_r, alive_w) = launch::pipe().map_err(io::Error::other)?;
        let cg = if with_cgroup {
            Some(crate::cgroup::RunCgroup::create(&crate::Limits::default()))
                .filter(|c| !c.is_empty())
        } else {
            None
        };
        let cg_fds = cg.as_ref().map(|c| c.join_fds()).unwrap_or_default();
        let flags = launch::run_namespaces(network) | libc::SIGCHLD;
        let data = (ctl, theirs, alive_r, cg_fds, predicted, newroot, network);
        let (pid, (ctl, theirs, alive_r, cg_fds, predicted, ..)) = launch::clone_allocating(
            flags,
            data,
            |(ctl, theirs, alive_r, cg_fds, p, root, net)| {
                drop(ctl);
                spare_main(&theirs, alive_r, root, net, p.as_ref(), cg_fds)
            },
        )?;
        // The spare's ends, ours no longer.
        drop((theirs, alive_r, cg_fds));
        Ok(Spare {
            pid,
            ctl,
            alive_w: Some(alive_w),
            predicted,
            identities,
            cg,
        })
    }

    /// Can take `req`: still waiting (not dead after a failed preparation), and prepared for
    /// its shape or not prepared at all.
    pub(crate) fn fits(&mut self, req: &RunRequest) -> bool {
        if launch::try_reap(self.pid) {
            self.pid = 0; // gone (reaped now, or not ours)
            return false;
        }
        let same_dirs = self.identities.iter().all(|(path, dev, ino)| {
            std::fs::metadata(path).is_ok_and(|m| m.dev() == *dev && m.ino() == *ino)
        });
        same_dirs && self.predicted.as_ref().is_none_or(|p| p.same_shape(req))
    }

    /// Gives the spare a run: forwards the request and its descriptors. Returns the PID 1 and
    /// the alive pipe's write end, to keep until that PID 1 is reaped.
    pub(crate) fn take_run(
        &mut self,
        data: &[u8],
        fds: &[BorrowedFd<'_>],
    ) -> io::Result<(libc::pid_t, OwnedFd)> {
        send_with_fds(&self.ctl, data, fds)?;
        let pid = std::mem::replace(&mut self.pid, 0);
        let alive_w = self
            .alive_w
            .take()
            .ok_or_else(|| io::Error::other("spare used"))?;
        Ok((pid, alive_w))
    }
}

impl Drop for Spare {
    fn drop(&mut self) {
        if self.pid > 0 {
            // Our own child, never handed a run.
            launch::kill_and_reap(self.pid);
        }
    }
}

/// The common parent of `p`'s upper and work directories, and their names in it.
pub(crate) fn shared_parent(p: &RunRequest) -> Option<(&Path, &std::ffi::OsStr, &std::ffi::OsStr)> {
    let (u, w) = (&p.v.upper, &p.v.work);
    let parent = u.parent()?;
    (w.parent()? == parent).then_some((parent, u.file_name()?, w.file_name()?))
}

/// Where a prepared spare keeps the overlay's directories reachable after it pivots (bind
/// mounts: overlayfs takes its layers only from mounts of the caller's namespace). The run
/// covers it with an empty read-only tmpfs right after mounting the overlay.
pub(crate) const SOURCES_DIR: &str = ".airlock-sources";

/// Replays `p`'s steps up to the workspace overlay, binds the overlay's directories under
/// [`SOURCES_DIR`] of the new root, and pivots.
pub(crate) fn prepare_ahead(p: &RunRequest, newroot: &Path) -> Option<launch::Prepared> {
    let steps = p.plan(newroot, true).ok()?;
    let k = steps
        .iter()
        .position(|s| matches!(s.op, crate::plan::Op::Overlay { .. }))?;
    for step in &steps[..k] {
        if !crate::child::run_op(&step.op) {
            return None;
        }
    }
    let holder = newroot.join(SOURCES_DIR);
    let _ = std::fs::create_dir(&holder);
    let mut count = 0;
    let mut bind = |src: &Path, read_only: bool| -> Option<PathBuf> {
        let name = count.to_string();
        count += 1;
        let dst = holder.join(&name);
        let _ = std::fs::create_dir(&dst);
        if rustix::mount::mount_bind(src, &dst).is_err() {
            return None;
        }
        let d = std::ffi::CString::new(dst.as_os_str().as_bytes()).ok()?;
        // The real workspace and the staged layers are lower layers: read-only here too.
        if read_only {
            let ro = crate::plan::Op::SetAttr {
                path: d,
                set: crate::plan::ATTR_RDONLY | crate::plan::ATTR_NOSUID | crate::plan::ATTR_NODEV,
                recursive: false,
            };
            if !crate::child::run_op(&ro) {
                return None;
            }
        }
        Some(Path::new("/").join(SOURCES_DIR).join(name))
    };
    // overlayfs wants upper and work under one mount: bind their common parent.
    let (parent, upper, work) = shared_parent(p)?;
    let workspace = bind(&p.v.workspace, true)?;
    let layers =
        p.v.layers
            .iter()
            .map(|l| bind(l, true))
            .collect::<Option<_>>()?;
    let scratch = bind(parent, false)?;
    let sources = crate::plan::Sources {
        workspace,
        layers,
        upper: scratch.join(upper),
        work: scratch.join(work),
    };
    let root = std::ffi::CString::new(newroot.as_os_str().as_bytes()).ok()?;
    if !crate::child::pivot_into(&root) {
        return None;
    }
    Some(launch::Prepared {
        replayed: steps[..k].iter().map(|s| s.what.clone()).collect(),
        sources,
        hide: Path::new("/").join(SOURCES_DIR),
    })
}

/// A spare's life: prepare for the predicted shape, wait for a request, then become its PID 1
/// (never returns).
pub(crate) fn spare_main(
    ctl: &UnixStream,
    alive_r: OwnedFd,
    newroot: &Path,
    network: bool,
    predicted: Option<&RunRequest>,
    cg_fds: Vec<OwnedFd>,
) -> ! {
    // A spare dies with its host. (A host that died before this point closed its end of
    // `ctl`: the wait below ends.)
    if rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
        .is_err()
    {
        crate::child::exit(0);
    }
    // Into the next run's groups now, while nobody waits. A spare that cannot join is no
    // spare: the host notices the exit and launches the run itself.
    for fd in &cg_fds {
        if rustix::io::write(fd, b"0").ok() != Some(1) {
            crate::child::exit(0);
        }
    }
    drop(cg_fds);
    // This PID 1's own uts and net namespaces, made ready before anyone waits for them.
    if crate::child::ready_namespaces(!network).is_err() {
        crate::child::exit(0); // the host launches the run itself
    }
    let prepared = match predicted {
        Some(p) => match prepare_ahead(p, newroot) {
            Some(prep) => Some(prep),
            // Half-prepared mounts cannot be trusted: the host notices the exit and launches
            // the run itself.
            None => crate::child::exit(0),
        },
        None => None,
    };
    let Ok((data, fds)) = recv_with_fds(ctl, 6 + launch::MAX_CGROUPS, MAX_REQUEST) else {
        crate::child::exit(0);
    };
    // Checked again here, as far as a spare can (its host checked the paths in full).
    let Ok(req) = decode(&data, network, Check::Shape) else {
        crate::child::exit(0);
    };
    let Some(io) = child_io(fds, req.net_port) else {
        crate::child::exit(0);
    };
    let err_w = io.err_w.as_raw_fd();
    let result: Result<(), SandboxError> = launch::with_child_ctx(
        &req,
        newroot,
        true,
        true,
        &io,
        alive_r.as_raw_fd(),
        prepared.as_ref(),
        |ctx| crate::child::init_main(ctx),
    );
    let errno = match result {
        Err(SandboxError::Exec { source, .. }) => {
            let e = source.raw_os_error().unwrap_or(libc::ENOENT);
            crate::child::report_and_exit(
                err_w,
                crate::child::KIND_STAGE,
                crate::child::SetupStep::Exec as u32,
                e,
            )
        }
        Err(SandboxError::Io { source, .. }) => source.raw_os_error().unwrap_or(libc::EINVAL),
        _ => libc::EINVAL,
    };
    crate::child::report_and_exit(
        err_w,
        crate::child::KIND_STAGE,
        crate::child::SetupStep::Prepare as u32,
        errno,
    )
}

/// The five descriptors of a run, in the order the client sends them, the proxy's socket of
/// a granted run (`net_port`), then its control groups' `cgroup.procs`.
pub(crate) fn child_io(mut fds: Vec<OwnedFd>, net_port: Option<u16>) -> Option<ChildIo> {
    let base = 5 + usize::from(net_port.is_some());
    if fds.len() < base || fds.len() > base + launch::MAX_CGROUPS {
        return None;
    }
    let cgroups = fds.split_off(base);
    let net = match net_port {
        Some(port) => Some((fds.pop()?, port)),
        None => None,
    };
    let status_w = fds.pop()?;
    let err_w = fds.pop()?;
    let stderr = fds.pop()?;
    let stdout = fds.pop()?;
    let stdin = fds.pop()?;
    Some(ChildIo {
        stdin,
        stdout,
        stderr,
        err_w,
        status_w,
        cgroups,
        net,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A spare allocates after its clone: a process with a second thread (which could hold the
    /// allocator's lock at that moment) never clones one, and says why.
    #[test]
    fn a_spare_is_never_cloned_from_a_process_with_threads() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || {
            let _ = rx.recv();
        });
        let root = tempfile::tempdir().unwrap();
        let err = match Spare::fork(root.path(), false, None, false) {
            Ok(_) => panic!("a spare was cloned from a process with threads"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains("threads"), "{err}");
        assert!(launch::ensure_single_threaded().is_err());
        drop(tx);
        other.join().unwrap();
    }
}
