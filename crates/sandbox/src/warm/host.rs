//! The host process: holds the user namespace and the base of the minimal root, accepts runs
//! on its socket and hands each to a spare ([`super::spare`]) or clones a PID 1 for it.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};

use super::spare::{Spare, child_io};
use super::wire::{
    Check, DEFAULT_IDLE_SECS, DecodeError, HOST_ARG, MAX_REQUEST, Reply, decode, encode, lock_file,
    recv_with_fds, send_with_fds,
};
use crate::launch::{self, RunRequest};

/// When this process was started as a host (`EXE __airlock-sandbox-host SOCKET NET IDLE`), runs
/// the host and returns its exit status; otherwise `None`.
pub fn main_hook() -> Option<i32> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != HOST_ARG {
        return None;
    }
    let socket = PathBuf::from(args.next()?);
    let network = args.next()? == "1";
    let idle = args
        .next()
        .and_then(|s| s.to_str().and_then(|s| s.parse().ok()))
        .unwrap_or(DEFAULT_IDLE_SECS);
    Some(match serve(&socket, network, Duration::from_secs(idle)) {
        Ok(()) => 0,
        Err(_) => 1,
    })
}

fn serve(socket: &Path, network: bool, idle: Duration) -> io::Result<()> {
    let Some(lock) = lock_file(socket)? else {
        return Ok(()); // another host holds this socket
    };
    // Detached from the caller's session (a host started by hand may lead one already).
    let _ = rustix::process::setsid();
    let (uid, gid) = (
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    );
    launch::unshare(libc::CLONE_NEWUSER).map_err(|e| with_context(e, "unshare(user)"))?;
    std::fs::write("/proc/self/setgroups", b"deny")?;
    std::fs::write("/proc/self/uid_map", format!("0 {uid} 1").as_bytes())?;
    std::fs::write("/proc/self/gid_map", format!("0 {gid} 1").as_bytes())?;
    // The host's own mount namespace holds the base; with the network off it keeps no network
    // of its own either. Every run gets fresh namespaces besides ([`launch::run_namespaces`]).
    let mut flags = libc::CLONE_NEWNS | libc::CLONE_NEWIPC;
    if !network {
        flags |= libc::CLONE_NEWNET;
    }
    launch::unshare(flags).map_err(|e| with_context(e, "unshare"))?;
    let newroot = launch::new_root_dir().map_err(io::Error::other)?;
    for step in crate::plan::build_base(newroot.path()).map_err(io::Error::other)? {
        if !crate::child::run_op(&step.op) {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("{}: {e}", step.what)));
        }
    }

    // Bind beside the final name, then rename over it: a client never sees a half-made socket.
    let mut tmp = socket.as_os_str().to_owned();
    tmp.push(format!(".{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let listener = UnixListener::bind(&tmp)?;
    std::fs::rename(&tmp, socket)?;
    let ino = std::fs::metadata(socket)?.ino();
    crate::cgroup::serve_as_host();
    let mut spare = Spare::fork(newroot.path(), network, None, true).ok();
    // The last request: the next spare prepares its mounts for the same shape.
    let mut last: Option<RunRequest> = None;
    let mut ended = Ended(Vec::new());
    let mut busy_until = Instant::now();
    let mut retrying = false;

    loop {
        let idle_left = (busy_until + idle).saturating_duration_since(Instant::now());
        let wait = if retrying {
            idle_left.min(RETRY_EVERY)
        } else {
            idle_left
        };
        let (woke, request) = match ended.wait(Some(&listener), wait) {
            Ok(w) => w,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => break,
        };
        retrying = crate::cgroup::retry_deferred();
        if woke == 0 && idle_left.is_zero() {
            break; // idle
        }
        if !request {
            continue;
        }
        let Ok((conn, _)) = listener.accept() else {
            continue;
        };
        if !peer_is_us(&conn) {
            continue;
        }
        match handle(&conn, network, newroot.path(), &mut spare) {
            Ok(Some((req, groups))) => {
                last = Some(req);
                if let Some(cg) = groups {
                    ended.0.push((conn, cg));
                }
            }
            Ok(None) => {}
            Err(Stop) => break,
        }
        busy_until = Instant::now();
        if spare.is_none() {
            let with_cgroup = last.as_ref().is_none_or(|r| r.limits.cgroup);
            spare = Spare::fork(newroot.path(), network, last.clone(), with_cgroup).ok();
        }
        // Replaced or removed socket: a newer host took over, or the session's scratch is gone.
        if std::fs::metadata(socket).map(|m| m.ino()).ok() != Some(ino) {
            break;
        }
    }
    if std::fs::metadata(socket).map(|m| m.ino()).ok() == Some(ino) {
        let _ = std::fs::remove_file(socket);
    }
    drop(spare);
    // Clients still reading their runs' accounting get a moment to finish; then this host's
    // groups go, whatever the clients do: they must not outlive it under its name.
    let deadline = Instant::now() + Duration::from_secs(1);
    while !ended.0.is_empty() && Instant::now() < deadline {
        if ended.wait(None, RETRY_EVERY).is_err() {
            break;
        }
    }
    drop(ended);
    while crate::cgroup::retry_deferred() && Instant::now() < deadline {
        std::thread::sleep(RETRY_EVERY);
    }
    // The new root is a mount point only in this process's namespace: detach it so the
    // directory can be removed.
    let _ = rustix::mount::unmount(newroot.path(), rustix::mount::UnmountFlags::DETACH);
    drop(newroot);
    drop(lock);
    Ok(())
}

/// Runs that are over for the host, each with its client's connection and the groups made for
/// it: the client reads the groups' accounting, then hangs up, and the groups are removed then
/// (dropping a [`crate::cgroup::RunCgroup`] in a host removes it, or defers what is still busy).
struct Ended(Vec<(UnixStream, crate::cgroup::RunCgroup)>);

impl Ended {
    /// Waits up to `wait` for a request on `listener` or a client hanging up, and removes the
    /// groups of the clients that did. Returns how many descriptors woke and whether a request
    /// is waiting.
    fn wait(
        &mut self,
        listener: Option<&UnixListener>,
        wait: Duration,
    ) -> Result<(usize, bool), rustix::io::Errno> {
        let mut pfd: Vec<PollFd<'_>> = listener
            .map(|l| PollFd::new(l, PollFlags::IN))
            .into_iter()
            .chain(self.0.iter().map(|(c, _)| PollFd::new(c, PollFlags::RDHUP)))
            .collect();
        let woke = rustix::event::poll(&mut pfd, Some(&timespec(wait)))?;
        let skip = usize::from(listener.is_some());
        let request = listener.is_some() && pfd[0].revents().contains(PollFlags::IN);
        let hung_up: Vec<bool> = pfd[skip..]
            .iter()
            .map(|p| !p.revents().is_empty())
            .collect();
        drop(pfd);
        let mut gone = hung_up.into_iter();
        self.0.retain(|_| !gone.next().unwrap_or(false));
        Ok((woke, request))
    }
}

/// How often a host tries again to remove groups that were still busy.
const RETRY_EVERY: Duration = Duration::from_millis(20);

fn timespec(d: Duration) -> rustix::event::Timespec {
    rustix::event::Timespec {
        tv_sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(d.subsec_nanos()),
    }
}

/// The peer runs as this host's uid (mapped to root in the host's user namespace).
fn peer_is_us(conn: &UnixStream) -> bool {
    rustix::net::sockopt::socket_peercred(conn).is_ok_and(|cred| cred.uid.is_root())
}

/// `e` with `what` in front of its message.
fn with_context(e: io::Error, what: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// The host should exit (a client of another build, or the other network).
struct Stop;

fn reply_error(conn: &UnixStream, msg: &str) {
    let reply = Reply::Refused { reason: msg.into() };
    let _ = send_with_fds(conn, &reply.encode(), &[]);
}

/// Serves one connection; returns the request it ran, if any.
fn handle(
    conn: &UnixStream,
    network: bool,
    newroot: &Path,
    spare: &mut Option<Spare>,
) -> Result<Option<(RunRequest, Option<crate::cgroup::RunCgroup>)>, Stop> {
    let Ok((data, fds)) = recv_with_fds(conn, 6, MAX_REQUEST) else {
        return Ok(None);
    };
    let req = match decode(&data, network, Check::Full) {
        Ok(r) => r,
        Err(DecodeError::Stale) => {
            reply_error(conn, "stale host");
            return Err(Stop);
        }
        Err(DecodeError::Bad(e)) => {
            reply_error(conn, &e);
            return Ok(None);
        }
    };
    // Exactly the run's pipes (and its proxy socket): the host makes the run's groups itself.
    let base = 5 + usize::from(req.net_port.is_some());
    if fds.len() != base {
        reply_error(conn, &format!("expected {base} descriptors"));
        return Ok(None);
    }
    // A spare that fits takes the request; otherwise a PID 1 is cloned for it now. A spare
    // already in groups of its own takes it only once they carry the run's ceilings (written
    // here, before the run can start).
    let fitting = spare.take().and_then(|mut s| s.fits(&req).then_some(s));
    let mut fitting = fitting.and_then(|mut s| {
        let ready = match s.cg.as_mut() {
            None => true,
            Some(cg) => req.limits.cgroup && cg.apply(&req.limits),
        };
        ready.then_some(s)
    });
    // The run's groups: the spare's, joined already; else made now for the run's PID 1 to join
    // first thing. None when the run wants none or none can be made here (rlimits then).
    let (groups, joined) = match fitting.as_mut().and_then(|s| s.cg.take()) {
        Some(cg) => (Some(cg), true),
        None => (
            req.limits
                .cgroup
                .then(|| crate::cgroup::RunCgroup::create(&req.limits))
                .filter(|cg| !cg.is_empty()),
            false,
        ),
    };
    let mut req = req;
    req.cgroup_mask = groups.as_ref().map_or(0, crate::cgroup::RunCgroup::mask);
    let join = match (&groups, joined) {
        (Some(cg), false) => cg.join_fds(),
        _ => Vec::new(),
    };
    // What a spare now holds copies of (the run's descriptors, its control socket) is closed only
    // once the client has its reply: the client waits for nothing that closing them does.
    let mut linger = None;
    let (pid, alive_w) = match fitting {
        Some(mut s) => {
            let raw: Vec<_> = fds.iter().chain(join.iter()).map(AsFd::as_fd).collect();
            let taken = s.take_run(&encode(&req), &raw);
            drop(raw);
            linger = Some((fds, join, s));
            match taken {
                Ok(x) => x,
                Err(_) => {
                    reply_error(conn, "the spare sandbox did not take the run");
                    return Ok(None);
                }
            }
        }
        None => {
            let mut fds = fds;
            fds.extend(join);
            let Some(io) = child_io(fds, req.net_port) else {
                return Ok(None);
            };
            match launch::launch(&req, newroot, true, io) {
                Ok(l) => (l.pid, l.alive_w),
                Err(e) => {
                    reply_error(conn, &e.to_string());
                    return Ok(None);
                }
            }
        }
    };
    let handed = groups;
    let pidfd = launch::pidfd(pid);
    // The reply names the groups the run is in: the client reads its accounting there; the host
    // removes them once the client hangs up.
    let reply = Reply::Started {
        cgroup: handed
            .as_ref()
            .and_then(|cg| String::from_utf8(cg.encode()).ok()),
    };
    let sent = pidfd
        .as_ref()
        .is_ok_and(|fd| send_with_fds(conn, &reply.encode(), &[fd.as_fd()]).is_ok());
    drop(linger);
    match pidfd {
        Ok(pidfd) if sent => wait_run(conn, pid, &pidfd),
        _ => launch::kill_and_reap(pid),
    }
    drop(alive_w);
    // The overlay is gone with the run: leave its work directory clean for the next one, while
    // the client is still busy harvesting.
    let _ = launch::reset_workdir(&req.v.work);
    Ok(Some((req, handed)))
}

/// Waits for the run to end; a client that hangs up first (it died, or gave up) ends the run.
fn wait_run(conn: &UnixStream, pid: libc::pid_t, pidfd: &OwnedFd) {
    loop {
        let mut fds = [
            PollFd::new(pidfd, PollFlags::IN),
            PollFd::new(conn, PollFlags::IN | PollFlags::RDHUP),
        ];
        match rustix::event::poll(&mut fds, None) {
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => break,
            Ok(_) => {}
        }
        if !fds[0].revents().is_empty() {
            break;
        }
        if !fds[1].revents().is_empty() {
            launch::kill(pid);
            break;
        }
    }
    launch::reap(pid);
}
