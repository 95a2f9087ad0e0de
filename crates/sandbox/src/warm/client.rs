//! The client side of a warm host: hand a run to the session's host and supervise it as a cold
//! run is supervised, or start a host for next time.

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::wire::{HOST_ARG, Reply, encode, lock_file, recv_with_fds, send_with_fds};
use crate::error::SandboxError;
use crate::launch::{self, RunRequest};
use crate::settings::{HostMode, SandboxSettings};
use crate::spec::{Outcome, SandboxSpec};

static EXE: OnceLock<PathBuf> = OnceLock::new();

/// Lets runs of this process use warm hosts, started by re-running `exe` with [`HOST_ARG`]
/// (the program must call [`main_hook`](super::main_hook) first thing in `main`).
pub fn enable(exe: PathBuf) {
    let _ = EXE.set(exe);
}

/// The executable that runs hosts, unless the settings turn hosts off.
fn executable(settings: &SandboxSettings) -> Option<&'static PathBuf> {
    if settings.host == HostMode::Off {
        return None;
    }
    EXE.get()
}

/// Connects to the host on `socket`; under [`HostMode::Always`], starts one first if none
/// listens.
fn connect(spec: &SandboxSpec, settings: &SandboxSettings, socket: &Path) -> Option<UnixStream> {
    if let Ok(c) = UnixStream::connect(socket) {
        return Some(c);
    }
    if settings.host != HostMode::Always {
        return None;
    }
    start_for(spec, settings);
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
        if let Ok(c) = UnixStream::connect(socket) {
            return Some(c);
        }
    }
    None
}

/// Runs `req` through the warm host named by `spec.warm_host`, if hosts are enabled and one is
/// listening. `Ok(None)`: no usable host (the caller runs cold).
pub(crate) fn try_run(
    spec: &SandboxSpec,
    settings: &SandboxSettings,
    req: &RunRequest,
) -> Result<Option<Outcome>, SandboxError> {
    let (Some(socket), Some(_)) = (spec.warm_host.as_deref(), executable(settings)) else {
        return Ok(None);
    };
    let Some(conn) = connect(spec, settings, socket) else {
        return Ok(None);
    };
    // The run's control groups are the host's to make (its spare is in them already).
    let (mut child_io, parent) = launch::io_pipes()?;
    let net_r = match &spec.net {
        Some(access) => {
            let (ours, theirs) = crate::net::proxy::socket_pair()?;
            child_io.net = Some((theirs, access.port));
            Some(ours)
        }
        None => None,
    };
    let start = Instant::now();
    if send_with_fds(&conn, &encode(req), &child_io.fds()).is_err() {
        return Ok(None);
    }
    drop(child_io);
    let Ok((reply, mut got)) = recv_with_fds(&conn, 1, 1 << 16) else {
        return Ok(None);
    };
    let (Some(Reply::Started { cgroup }), 1) = (Reply::decode(&reply), got.len()) else {
        // The host refused (another build, or it could not launch): run cold.
        return Ok(None);
    };
    // The groups the host put the run in (none: it could make none, and rlimits hold).
    let cg = cgroup
        .and_then(|text| crate::cgroup::RunCgroup::decode(text.as_bytes()))
        .unwrap_or_default();
    let mut req = req.clone();
    req.cgroup_mask = cg.mask();
    let (req, cg) = (&req, &cg);
    let pidfd = got.remove(0);
    // A second descriptor of the same pidfd, for the kill switch: it names exactly the run's
    // PID 1, whatever happens to its pid.
    let Ok(signal_fd) = pidfd.try_clone() else {
        return Ok(None);
    };
    let kill = move |_pid: libc::pid_t| {
        let _ = rustix::process::pidfd_send_signal(&signal_fd, rustix::process::Signal::KILL);
    };
    crate::timing::mark("sandbox: launched by the warm host");
    // The run's PID 1 passes the proxy's listener before anything of the command runs.
    let proxy = match (net_r, &spec.net) {
        (Some(r), Some(access)) => crate::net::proxy::receive_listener(&r)
            .and_then(|l| crate::net::proxy::Proxy::start(l, access.clone()))
            .ok(),
        _ => None,
    };
    let mut outcome = crate::outcome::finish(spec, req, parent, 0, start, &kill, Some(pidfd), cg);
    if let (Some(p), Ok(o)) = (proxy, outcome.as_mut()) {
        o.net = Some(p.finish());
    }
    // Closing the connection tells the host this run is over for us (or that we gave up): it
    // then removes the groups it made for the run.
    drop(conn);
    outcome.map(Some)
}

/// After a cold run with `warm_host` set: starts a host on that socket unless one holds it.
pub(crate) fn start_for(spec: &SandboxSpec, settings: &SandboxSettings) {
    let (Some(socket), Some(exe)) = (spec.warm_host.as_deref(), executable(settings)) else {
        return;
    };
    // A live (or starting) host holds the lock.
    match lock_file(socket) {
        Ok(Some(_lock)) => {}
        _ => return,
    }
    let idle = settings.host_idle.as_secs();
    use std::os::unix::process::CommandExt;
    let child = std::process::Command::new(exe)
        .arg(HOST_ARG)
        .arg(socket)
        .arg(if spec.network { "1" } else { "0" })
        .arg(idle.to_string())
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .current_dir("/")
        .process_group(0)
        .spawn();
    if let Ok(mut child) = child {
        // Reaped by a thread when it exits; a short-lived caller simply leaves it running.
        let _ = std::thread::Builder::new()
            .name("airlock-host-reaper".into())
            .spawn(move || {
                let _ = child.wait();
            });
    }
}
