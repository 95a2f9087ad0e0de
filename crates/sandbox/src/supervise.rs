//! The parent's side of a run: feed stdin, drain stdout/stderr into bounded collectors, watch
//! the deadline and the cancel flag, and reap the sandbox's PID 1. Killing PID 1 makes the
//! kernel kill every other process of the pid namespace; `waitpid` returns only once they are gone.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::capture::Collector;

/// How the sandbox's process ended.
pub(crate) struct Ended {
    /// `waitpid` status of the reaped process.
    pub(crate) status: libc::c_int,
    /// PID 1's report (the command's wait status), when it came before PID 1 was reaped.
    pub(crate) report: Option<[u8; 4]>,
    pub(crate) timed_out: bool,
    pub(crate) cancelled: bool,
    /// The watcher found the run over a ceiling and it was killed.
    pub(crate) ceiling: Option<crate::spec::Ceiling>,
    pub(crate) duration: Duration,
}

/// A process to watch: its pid and the fds connected to it.
pub(crate) struct Watch<'a> {
    pub(crate) pid: libc::pid_t,
    pub(crate) stdout: OwnedFd,
    pub(crate) stderr: OwnedFd,
    pub(crate) stdin: Option<(OwnedFd, &'a [u8])>,
    pub(crate) deadline: Instant,
    pub(crate) cancel: Option<&'a Arc<AtomicBool>>,
    /// Kills the process (tree); called at most once.
    pub(crate) kill: &'a dyn Fn(libc::pid_t),
    /// Not our child (a warm host's run): its pidfd says when it ended; the host reaps it.
    pub(crate) foreign: Option<OwnedFd>,
    /// PID 1's report: the command's wait status, written once every process of the sandbox
    /// is dead. It ends the wait before PID 1's own exit has torn the namespaces down.
    pub(crate) report: Option<&'a OwnedFd>,
    /// Ceilings watched while the run goes on (checked at least every 100 ms).
    pub(crate) watcher: Option<&'a mut dyn FnMut() -> Option<crate::spec::Ceiling>>,
}

fn set_nonblocking(fd: &OwnedFd) {
    // SAFETY: fcntl on an fd we own.
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
}

fn pidfd_open(pid: libc::pid_t) -> Option<OwnedFd> {
    // SAFETY: pidfd_open on our own unreaped child; the fd is owned below.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0u32) };
    if fd < 0 {
        return None;
    }
    use std::os::fd::FromRawFd;
    // SAFETY: a fresh descriptor returned by the kernel.
    Some(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Reads once from `fd` into the collector. Returns false at EOF or on a hard error.
fn drain(fd: &OwnedFd, out: &mut Collector, buf: &mut [u8]) -> bool {
    loop {
        // SAFETY: reading into a live buffer of the given length.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n > 0 {
            out.push(&buf[..n as usize]);
            return true;
        }
        if n == 0 {
            return false;
        }
        let e = std::io::Error::last_os_error().raw_os_error();
        if e == Some(libc::EINTR) {
            continue;
        }
        return e == Some(libc::EAGAIN);
    }
}

pub(crate) fn supervise(w: Watch<'_>, out: &mut Collector, err: &mut Collector) -> Ended {
    let start = Instant::now();
    set_nonblocking(&w.stdout);
    set_nonblocking(&w.stderr);
    let mut stdout = Some(w.stdout);
    let mut stderr = Some(w.stderr);
    let mut stdin = w.stdin;
    if let Some((fd, _)) = &stdin {
        set_nonblocking(fd);
    }
    let foreign = w.foreign.is_some();
    let pidfd = match w.foreign {
        Some(fd) => Some(fd),
        None => pidfd_open(w.pid),
    };
    let mut status: Option<libc::c_int> = None;
    let (mut timed_out, mut cancelled, mut killed) = (false, false, false);
    let mut buf = vec![0u8; 64 << 10];
    let mut reaped_at: Option<Instant> = None;
    let mut report: Option<[u8; 4]> = None;
    let mut report_open = w.report.is_some();
    let mut watcher = w.watcher;
    let mut ceiling = None;
    if let Some(r) = w.report {
        set_nonblocking(r);
    }

    loop {
        let reaped = if foreign {
            pidfd.as_ref().and_then(ended_by_pidfd)
        } else {
            try_reap(w.pid)
        };
        if status.is_none()
            && let Some(s) = reaped
        {
            status = Some(s);
            reaped_at = Some(Instant::now());
        }
        if status.is_some() && stdout.is_none() && stderr.is_none() {
            break;
        }
        // Every writer is normally dead once the process is reaped; do not wait forever on a
        // pipe some stray descriptor still holds.
        if reaped_at.is_some_and(|t| t.elapsed() > Duration::from_secs(2)) {
            break;
        }
        if !killed && status.is_none() {
            let now = Instant::now();
            if now >= w.deadline {
                timed_out = true;
            } else if w.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                cancelled = true;
            }
            if !timed_out
                && !cancelled
                && let Some(c) = watcher.as_mut().and_then(|wt| wt())
            {
                ceiling = Some(c);
            }
            if timed_out || cancelled || ceiling.is_some() {
                (w.kill)(w.pid);
                killed = true;
                stdin = None;
            }
        }
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(4);
        let mut push = |fd: i32, events: libc::c_short| {
            fds.push(libc::pollfd {
                fd,
                events,
                revents: 0,
            });
        };
        push(stdout.as_ref().map_or(-1, |f| f.as_raw_fd()), libc::POLLIN);
        push(stderr.as_ref().map_or(-1, |f| f.as_raw_fd()), libc::POLLIN);
        push(
            stdin.as_ref().map_or(-1, |(f, _)| f.as_raw_fd()),
            libc::POLLOUT,
        );
        let pid_watch = if status.is_none() {
            pidfd.as_ref().map_or(-1, |f| f.as_raw_fd())
        } else {
            -1
        };
        push(pid_watch, libc::POLLIN);
        push(
            match w.report {
                Some(r) if report_open && status.is_none() => r.as_raw_fd(),
                _ => -1,
            },
            libc::POLLIN,
        );

        let mut wait = if status.is_some() || killed {
            Duration::from_millis(100)
        } else {
            w.deadline.saturating_duration_since(Instant::now())
        };
        if w.cancel.is_some() || pidfd.is_none() {
            wait = wait.min(Duration::from_millis(50));
        }
        if watcher.is_some() {
            wait = wait.min(Duration::from_millis(100));
        }
        let ms = wait.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: polling a live array of pollfd of the given length.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };

        if fds[0].revents != 0
            && let Some(fd) = &stdout
            && !drain(fd, out, &mut buf)
        {
            stdout = None;
        }
        if fds[1].revents != 0
            && let Some(fd) = &stderr
            && !drain(fd, err, &mut buf)
        {
            stderr = None;
        }
        if fds[2].revents != 0 {
            stdin = feed(stdin.take());
        }
        if fds[4].revents != 0
            && let Some(fd) = w.report
        {
            let mut rec = [0u8; 4];
            // SAFETY: reading into a live 4-byte buffer (the record is written in one write of
            // 4 bytes, below PIPE_BUF, so it arrives whole).
            let n = unsafe { libc::read(fd.as_raw_fd(), rec.as_mut_ptr().cast(), 4) };
            if n == 4 {
                report = Some(rec);
                // The sandbox is empty: treat it as ended (its exit status is not needed).
                status = Some(0);
                reaped_at = Some(Instant::now());
            } else if n == 0
                || n == -1 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EAGAIN)
            {
                report_open = false;
            }
        }
    }
    Ended {
        status: status.unwrap_or(0),
        report,
        timed_out,
        cancelled,
        ceiling,
        duration: start.elapsed(),
    }
}

fn feed(stdin: Option<(OwnedFd, &[u8])>) -> Option<(OwnedFd, &[u8])> {
    let (fd, data) = stdin?;
    if data.is_empty() {
        return None;
    }
    let chunk = &data[..data.len().min(64 << 10)];
    // SAFETY: writing from a live buffer to an fd we own.
    let n = unsafe { libc::write(fd.as_raw_fd(), chunk.as_ptr().cast(), chunk.len()) };
    if n > 0 {
        let rest = &data[n as usize..];
        return if rest.is_empty() {
            None
        } else {
            Some((fd, rest))
        };
    }
    let e = std::io::Error::last_os_error().raw_os_error();
    if e == Some(libc::EAGAIN) || e == Some(libc::EINTR) {
        Some((fd, data))
    } else {
        None
    }
}

/// A foreign process has ended once its pidfd polls readable (status unknown here: 0).
fn ended_by_pidfd(fd: &OwnedFd) -> Option<libc::c_int> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: polling one live pollfd without waiting.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    (n > 0 && p.revents != 0).then_some(0)
}

fn try_reap(pid: libc::pid_t) -> Option<libc::c_int> {
    let mut status = 0;
    // SAFETY: waitpid on our own child with WNOHANG.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG | libc::__WALL) };
    if r == pid { Some(status) } else { None }
}
