//! The parent's side of a run: feed stdin, drain stdout/stderr into bounded collectors, watch
//! the deadline and the cancel flag, and reap the sandbox's PID 1. Killing PID 1 makes the
//! kernel kill every other process of the pid namespace; `waitpid` returns only once they are gone.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::io::Errno;

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
    use rustix::fs::{OFlags, fcntl_getfl, fcntl_setfl};
    if let Ok(flags) = fcntl_getfl(fd) {
        let _ = fcntl_setfl(fd, flags | OFlags::NONBLOCK);
    }
}

fn pidfd_open(pid: libc::pid_t) -> Option<OwnedFd> {
    crate::launch::pidfd(pid).ok()
}

/// Reads once from `fd` into the collector. Returns false at EOF or on a hard error.
fn drain(fd: &OwnedFd, out: &mut Collector, buf: &mut [u8]) -> bool {
    loop {
        match rustix::io::read(fd, &mut *buf) {
            Ok(0) => return false,
            Ok(n) => {
                out.push(&buf[..n]);
                return true;
            }
            Err(Errno::INTR) => continue,
            Err(e) => return e == Errno::AGAIN,
        }
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
        // Slots: stdout, stderr, stdin, PID 1's pidfd, PID 1's report; closed ones are left out.
        let pid_watch = pidfd.as_ref().filter(|_| status.is_none());
        let report_watch = w.report.filter(|_| report_open && status.is_none());
        let watched: [(Option<BorrowedFd<'_>>, PollFlags); 5] = [
            (stdout.as_ref().map(|f| f.as_fd()), PollFlags::IN),
            (stderr.as_ref().map(|f| f.as_fd()), PollFlags::IN),
            (stdin.as_ref().map(|(f, _)| f.as_fd()), PollFlags::OUT),
            (pid_watch.map(|f| f.as_fd()), PollFlags::IN),
            (report_watch.map(|f| f.as_fd()), PollFlags::IN),
        ];
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
        let ready = poll_slots(&watched, wait.max(Duration::from_millis(1)));

        if ready[0]
            && let Some(fd) = &stdout
            && !drain(fd, out, &mut buf)
        {
            stdout = None;
        }
        if ready[1]
            && let Some(fd) = &stderr
            && !drain(fd, err, &mut buf)
        {
            stderr = None;
        }
        if ready[2] {
            stdin = feed(stdin.take());
        }
        if ready[4]
            && let Some(fd) = w.report
        {
            let mut rec = [0u8; 4];
            // The record is written in one write of 4 bytes, below PIPE_BUF: it arrives whole.
            match rustix::io::read(fd, &mut rec) {
                Ok(4) => {
                    report = Some(rec);
                    // The sandbox is empty: treat it as ended (its exit status is not needed).
                    status = Some(0);
                    reaped_at = Some(Instant::now());
                }
                Ok(0) => report_open = false,
                Err(e) if e != Errno::AGAIN => report_open = false,
                _ => {}
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

/// Polls the present descriptors of `slots` for up to `wait`; which slots are ready.
fn poll_slots(slots: &[(Option<BorrowedFd<'_>>, PollFlags); 5], wait: Duration) -> [bool; 5] {
    let mut index = Vec::with_capacity(slots.len());
    let mut fds = Vec::with_capacity(slots.len());
    for (i, (fd, flags)) in slots.iter().enumerate() {
        if let Some(fd) = fd {
            index.push(i);
            fds.push(PollFd::from_borrowed_fd(*fd, *flags));
        }
    }
    let timeout = Timespec {
        tv_sec: i64::try_from(wait.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(wait.subsec_nanos()),
    };
    let mut ready = [false; 5];
    if rustix::event::poll(&mut fds, Some(&timeout)).is_ok() {
        for (i, fd) in index.into_iter().zip(&fds) {
            ready[i] = !fd.revents().is_empty();
        }
    }
    ready
}

fn feed(stdin: Option<(OwnedFd, &[u8])>) -> Option<(OwnedFd, &[u8])> {
    let (fd, data) = stdin?;
    if data.is_empty() {
        return None;
    }
    let chunk = &data[..data.len().min(64 << 10)];
    match rustix::io::write(&fd, chunk) {
        Ok(n) if n > 0 => {
            let rest = &data[n..];
            if rest.is_empty() {
                None
            } else {
                Some((fd, rest))
            }
        }
        Err(Errno::AGAIN | Errno::INTR) => Some((fd, data)),
        _ => None,
    }
}

/// A foreign process has ended once its pidfd polls readable (status unknown here: 0).
fn ended_by_pidfd(fd: &OwnedFd) -> Option<libc::c_int> {
    let mut p = [PollFd::new(fd, PollFlags::IN)];
    let zero = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let n = rustix::event::poll(&mut p, Some(&zero)).unwrap_or(0);
    (n > 0 && !p[0].revents().is_empty()).then_some(0)
}

fn try_reap(pid: libc::pid_t) -> Option<libc::c_int> {
    let pid = rustix::process::Pid::from_raw(pid)?;
    let all = rustix::process::WaitOptions::from_bits_retain(libc::__WALL.cast_unsigned());
    match rustix::process::waitpid(Some(pid), all | rustix::process::WaitOptions::NOHANG) {
        Ok(Some((_, status))) => Some(status.as_raw()),
        _ => None,
    }
}
