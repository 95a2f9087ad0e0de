//! A cold run: a fresh user namespace and the whole mount plan, cloned from the caller
//! ([`crate::launch`]), supervised by the caller ([`crate::outcome`]).

use std::time::Instant;

use crate::error::SandboxError;
use crate::launch::{RunRequest, io_pipes, launch, new_root_dir};
use crate::outcome::finish;
use crate::spec::{Outcome, SandboxSpec};

pub(crate) fn run_cold(
    spec: &SandboxSpec,
    req: &RunRequest,
    cg: &crate::cgroup::RunCgroup,
) -> Result<Outcome, SandboxError> {
    let newroot = new_root_dir()?;
    let (mut child_io, parent) = io_pipes()?;
    child_io.cgroups = cg.join_fds();
    let start = Instant::now();
    let launched = launch(req, newroot.path(), false, child_io)?;
    let pid = launched.pid;
    let kill = |p: libc::pid_t| {
        // SAFETY: signalling our own unreaped child; its pid cannot have been reused.
        unsafe { libc::kill(p, libc::SIGKILL) };
    };
    let result = finish(spec, req, parent, pid, start, &kill, None, cg);
    drop(launched.alive_w);
    // PID 1 reported once its sandbox was empty and may still be tearing the namespaces down:
    // reap it without waiting for that.
    let mut st = 0;
    // SAFETY: waitpid on our own child, without blocking.
    if unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG | libc::__WALL) } == 0 {
        let reaper = std::thread::Builder::new()
            .name("airlock-reaper".into())
            .spawn(move || {
                // SAFETY: blocking waitpid on our own child, which is exiting.
                unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::__WALL) };
            });
        if reaper.is_err() {
            // SAFETY: as above, on this thread.
            unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::__WALL) };
        }
    }
    result
}
