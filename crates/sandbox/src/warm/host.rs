//! The host process: holds the user namespace and the base of the minimal root, accepts runs
//! on its socket and hands each to a spare ([`super::spare`]) or clones a PID 1 for it.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::spare::{Spare, child_io};
use super::wire::{
    DEFAULT_IDLE_SECS, DecodeError, HOST_ARG, decode, encode, lock_file, recv_with_fds,
    send_with_fds,
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

fn check(ret: libc::c_int, what: &str) -> io::Result<()> {
    if ret != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
    }
    Ok(())
}

fn serve(socket: &Path, network: bool, idle: Duration) -> io::Result<()> {
    let Some(lock) = lock_file(socket)? else {
        return Ok(()); // another host holds this socket
    };
    // SAFETY: geteuid/getegid cannot fail; setsid detaches from the caller's session.
    let (uid, gid) = unsafe {
        libc::setsid();
        (libc::geteuid(), libc::getegid())
    };
    // SAFETY: unshare on this single-threaded process (no other thread has been started).
    check(
        unsafe { libc::unshare(libc::CLONE_NEWUSER) },
        "unshare(user)",
    )?;
    std::fs::write("/proc/self/setgroups", b"deny")?;
    std::fs::write("/proc/self/uid_map", format!("0 {uid} 1").as_bytes())?;
    std::fs::write("/proc/self/gid_map", format!("0 {gid} 1").as_bytes())?;
    // The host's own mount namespace holds the base; with the network off it keeps no network
    // of its own either. Every run gets fresh namespaces besides ([`launch::run_namespaces`]).
    let mut flags = libc::CLONE_NEWNS | libc::CLONE_NEWIPC;
    if !network {
        flags |= libc::CLONE_NEWNET;
    }
    // SAFETY: as above.
    check(unsafe { libc::unshare(flags) }, "unshare")?;
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
    let mut spare = Spare::fork(newroot.path(), network, None, true).ok();
    // The last request: the next spare prepares its mounts for the same shape.
    let mut last: Option<RunRequest> = None;

    loop {
        let mut pfd = libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = idle.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: polling one live pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n == 0 {
            break; // idle
        }
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        let Ok((conn, _)) = listener.accept() else {
            continue;
        };
        if !peer_is_us(&conn) {
            continue;
        }
        match handle(&conn, network, newroot.path(), &mut spare) {
            Ok(Some(req)) => last = Some(req),
            Ok(None) => {}
            Err(Stop) => break,
        }
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
    // The new root is a mount point only in this process's namespace: detach it so the
    // directory can be removed.
    if let Ok(c) = std::ffi::CString::new(newroot.path().as_os_str().as_bytes()) {
        // SAFETY: umount2 on a NUL-terminated path.
        unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
    }
    drop(newroot);
    drop(lock);
    Ok(())
}

/// The peer runs as this host's uid (mapped to root in the host's user namespace).
fn peer_is_us(conn: &UnixStream) -> bool {
    // SAFETY: getsockopt(SO_PEERCRED) into a correctly sized ucred.
    unsafe {
        let mut cred: libc::ucred = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        libc::getsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        ) == 0
            && cred.uid == 0
    }
}

/// The host should exit (a client of another build, or the other network).
struct Stop;

fn reply_error(conn: &UnixStream, msg: &str) {
    let mut data = vec![1u8];
    data.extend_from_slice(msg.as_bytes());
    let _ = send_with_fds(conn, &data, &[]);
}

/// Serves one connection; returns the request it ran, if any.
fn handle(
    conn: &UnixStream,
    network: bool,
    newroot: &Path,
    spare: &mut Option<Spare>,
) -> Result<Option<RunRequest>, Stop> {
    let Ok((data, fds)) = recv_with_fds(conn, 5 + launch::MAX_CGROUPS, 16 << 20) else {
        return Ok(None);
    };
    if fds.len() < 5 || fds.len() > 5 + launch::MAX_CGROUPS {
        reply_error(conn, "expected 5 descriptors and the run's control groups");
        return Ok(None);
    }
    let req = match decode(&data, network) {
        Ok(r) => r,
        Err(DecodeError::Stale) => {
            reply_error(conn, "stale host");
            return Err(Stop);
        }
        Err(DecodeError::Bad(e)) => {
            reply_error(conn, &e.to_string());
            return Ok(None);
        }
    };
    // A spare that fits takes the request as it came; otherwise a PID 1 is cloned for it now.
    // A spare already in groups of its own takes it only once they carry the run's ceilings
    // (written here, before the run can start); it then leaves the client's groups unjoined.
    let fitting = spare.take().and_then(|mut s| s.fits(&req).then_some(s));
    let fitting = fitting.and_then(|mut s| {
        let ready = match s.cg.as_mut() {
            None => true,
            Some(cg) => req.limits.cgroup && cg.apply(&req.limits),
        };
        ready.then_some(s)
    });
    let mut handed: Option<crate::cgroup::RunCgroup> = None;
    let (pid, alive_w) = match fitting {
        Some(mut s) => {
            let cg = s.cg.take();
            let mut raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
            let payload = match &cg {
                Some(cg) => {
                    raw.truncate(5);
                    let mut r = req.clone();
                    r.cgroup_mask = cg.mask();
                    encode(&r)
                }
                None => data.clone(),
            };
            let taken = s.take_run(&payload, &raw);
            drop(fds);
            match taken {
                Ok(x) => {
                    handed = cg;
                    x
                }
                Err(_) => {
                    reply_error(conn, "the spare sandbox did not take the run");
                    return Ok(None);
                }
            }
        }
        None => {
            let Some(io) = child_io(fds) else {
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
    // SAFETY: pidfd_open on our own unreaped child.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0u32) } as RawFd;
    // The reply names the groups the run is in, if the host made them: the client reads its
    // accounting there and removes them.
    let mut reply = vec![0u8];
    if let Some(cg) = handed.as_mut() {
        reply.extend_from_slice(&cg.encode());
    }
    if pidfd < 0 || send_with_fds(conn, &reply, &[pidfd]).is_err() {
        // SAFETY: killing and reaping our own child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), libc::__WALL);
        }
    } else {
        // SAFETY: the fd was just created and sent; close our copy.
        let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
        if let Some(mut cg) = handed.take() {
            cg.disown();
        }
        wait_run(conn, pid, &pidfd);
    }
    drop(alive_w);
    // The overlay is gone with the run: leave its work directory clean for the next one, while
    // the client is still busy harvesting.
    let _ = launch::reset_workdir(&req.v.work);
    Ok(Some(req))
}

/// Waits for the run to end; a client that hangs up first (it died, or gave up) ends the run.
fn wait_run(conn: &UnixStream, pid: libc::pid_t, pidfd: &OwnedFd) {
    loop {
        let mut fds = [
            libc::pollfd {
                fd: pidfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: conn.as_raw_fd(),
                events: libc::POLLIN | libc::POLLRDHUP,
                revents: 0,
            },
        ];
        // SAFETY: polling a live array of two pollfds.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        if fds[0].revents != 0 || n < 0 {
            break;
        }
        if fds[1].revents != 0 {
            // SAFETY: signalling our own unreaped child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            break;
        }
    }
    // SAFETY: reaping our own child.
    unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::__WALL) };
}
