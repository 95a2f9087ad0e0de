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
    let net_r = match &spec.net {
        Some(access) => {
            let (ours, theirs) = crate::net::proxy::socket_pair()?;
            child_io.net = Some((theirs, access.port));
            Some(ours)
        }
        None => None,
    };
    let start = Instant::now();
    let launched = launch(req, newroot.path(), false, child_io)?;
    let pid = launched.pid;
    let kill = |p: libc::pid_t| crate::launch::kill(p);
    // PID 1 sends the listener before anything of the command runs; if it fails first, the
    // socket pair reads end of file and `finish` reports the failed step.
    let proxy = match (net_r, &spec.net) {
        (Some(r), Some(access)) => crate::net::proxy::receive_listener(&r)
            .and_then(|l| crate::net::proxy::Proxy::start(l, access.clone()))
            .ok(),
        _ => None,
    };
    let mut result = finish(spec, req, parent, pid, start, &kill, None, cg);
    if let (Some(p), Ok(outcome)) = (proxy, result.as_mut()) {
        outcome.net = Some(p.finish());
    }
    drop(launched.alive_w);
    // PID 1 reported once its sandbox was empty and may still be tearing the namespaces down:
    // reap it without waiting for that.
    if !crate::launch::try_reap(pid) {
        let reaper = std::thread::Builder::new()
            .name("airlock-reaper".into())
            .spawn(move || crate::launch::reap(pid));
        if reaper.is_err() {
            crate::launch::reap(pid);
        }
    }
    result
}
