//! Warm sandbox hosts: the part of a sandbox that does not depend on the command, made once
//! and kept, so that a run costs only its own mounts.
//!
//! Creating a user namespace and building the base of the minimal root (system directories,
//! the `/etc` allow-list, `/dev`) is most of a cold start. A host is a small detached process
//! that does this once, then listens on a unix socket (in a 0700 directory of the caller's
//! choosing, [`SandboxSpec::warm_host`]). For each run it receives the validated request and
//! the run's pipes (`SCM_RIGHTS`), clones a PID 1 into fresh mount (a copy of its own), pid,
//! ipc, uts and net namespaces, and sends back that PID 1's pidfd. The next PID 1 is cloned
//! ahead of its request (a spare), so creating those namespaces is off the caller's path. The PID 1 then does exactly
//! what a cold one does after the base steps: the run's own `/tmp`, `/dev/shm`, `$HOME` and
//! `/proc`, the workspace overlay, the masks, the read-only root, `pivot_root`, and the command
//! under Landlock and seccomp ([`crate::child`]). The caller supervises it through the pidfd
//! and reads its report from the same pipes as in a cold run, so both paths share one
//! implementation of everything the command can observe.
//!
//! Lifecycle: a run with `warm_host` set and no host listening runs cold, then starts a host
//! for next time (the executable is the one [`enable`]d, re-run with [`HOST_ARG`]). One host
//! per socket: it holds an exclusive `flock` on `SOCKET.lock`. It exits after an idle period
//! (60 s by default), when a client of another build connects (the binary changed), or when
//! its socket is gone. `AIRLOCK_SANDBOX_HOST=off` disables hosts (every run cold);
//! `AIRLOCK_SANDBOX_HOST=always` starts a missing host and waits for it instead of running cold.
//!
//! Trust: only the host's own uid can reach the socket (directory mode 0700, checked with
//! `SO_PEERCRED`), the socket is outside every sandbox's root, and the runs it starts cannot
//! signal or trace it (Landlock scoping and seccomp, as in a cold run).

use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::error::SandboxError;
use crate::namespace::{self, ChildIo, RunRequest, Validated};
use crate::spec::{Outcome, SandboxSpec};

/// The argument that makes an [`enable`]d executable run as a host (see [`main_hook`]).
pub const HOST_ARG: &str = "__airlock-sandbox-host";

/// Idle seconds before a host exits, unless `AIRLOCK_SANDBOX_HOST_IDLE` says otherwise.
const DEFAULT_IDLE_SECS: u64 = 60;

const MAGIC: &[u8; 4] = b"ALH1";

static EXE: OnceLock<PathBuf> = OnceLock::new();

/// Lets runs of this process use warm hosts, started by re-running `exe` with [`HOST_ARG`]
/// (the program must call [`main_hook`] first thing in `main`).
pub fn enable(exe: PathBuf) {
    let _ = EXE.set(exe);
}

fn executable() -> Option<&'static PathBuf> {
    if std::env::var_os("AIRLOCK_SANDBOX_HOST").is_some_and(|v| v == "off" || v == "0") {
        return None;
    }
    EXE.get()
}

/// `AIRLOCK_SANDBOX_HOST=always`: with no host listening, start one and wait for it rather than
/// run cold (every run then goes through a host; the test suites use it).
fn always() -> bool {
    std::env::var_os("AIRLOCK_SANDBOX_HOST").is_some_and(|v| v == "always")
}

/// Connects to the host on `socket`; under [`always`], starts one first if none listens.
fn connect(spec: &SandboxSpec, socket: &Path) -> Option<UnixStream> {
    if let Ok(c) = UnixStream::connect(socket) {
        return Some(c);
    }
    if !always() {
        return None;
    }
    start_for(spec);
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
        if let Ok(c) = UnixStream::connect(socket) {
            return Some(c);
        }
    }
    None
}

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

/// Who built this binary, as far as a host and its clients must agree.
fn identity() -> &'static [u8] {
    static ID: OnceLock<Vec<u8>> = OnceLock::new();
    ID.get_or_init(identity_uncached)
}

fn identity_uncached() -> Vec<u8> {
    let md = std::env::current_exe().and_then(std::fs::metadata);
    let (dev, ino, mtime) = md
        .map(|m| (m.dev(), m.ino(), m.mtime_nsec() + m.mtime() * 1_000_000_000))
        .unwrap_or_default();
    format!("{}:{dev}:{ino}:{mtime}", env!("CARGO_PKG_VERSION")).into_bytes()
}

// ---------------------------------------------------------------------------------------------
// Wire format: length-prefixed byte strings, little endian.

#[derive(Default)]
struct Enc(Vec<u8>);

impl Enc {
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn path(&mut self, p: &Path) {
        self.bytes(p.as_os_str().as_bytes());
    }
    fn paths(&mut self, ps: &[PathBuf]) {
        self.u64(ps.len() as u64);
        ps.iter().for_each(|p| self.path(p));
    }
    fn opt(&mut self, v: Option<u64>) {
        match v {
            Some(v) => {
                self.u64(1);
                self.u64(v);
            }
            None => self.u64(0),
        }
    }
}

struct Dec<'a>(&'a [u8]);

impl Dec<'_> {
    fn u64(&mut self) -> io::Result<u64> {
        if self.0.len() < 8 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "short request"));
        }
        let (head, rest) = self.0.split_at(8);
        self.0 = rest;
        Ok(u64::from_le_bytes(head.try_into().unwrap_or([0; 8])))
    }
    fn bytes(&mut self) -> io::Result<Vec<u8>> {
        let n = self.u64()? as usize;
        if self.0.len() < n {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "short request"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head.to_vec())
    }
    fn os(&mut self) -> io::Result<OsString> {
        Ok(OsString::from_vec(self.bytes()?))
    }
    fn path(&mut self) -> io::Result<PathBuf> {
        Ok(PathBuf::from(self.os()?))
    }
    fn count(&mut self) -> io::Result<usize> {
        let n = self.u64()? as usize;
        if n > self.0.len() {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "bad count"));
        }
        Ok(n)
    }
    fn paths(&mut self) -> io::Result<Vec<PathBuf>> {
        (0..self.count()?).map(|_| self.path()).collect()
    }
    fn opt(&mut self) -> io::Result<Option<u64>> {
        Ok(match self.u64()? {
            0 => None,
            _ => Some(self.u64()?),
        })
    }
}

fn encode(req: &RunRequest) -> Vec<u8> {
    let mut e = Enc::default();
    e.0.extend_from_slice(MAGIC);
    e.bytes(identity());
    e.u64(req.network as u64);
    let v = &req.v;
    e.path(&v.workspace);
    e.paths(&v.layers);
    e.path(&v.upper);
    e.path(&v.work);
    e.path(&v.cwd);
    e.opt(v.home.as_ref().map(|_| 1));
    if let Some(h) = &v.home {
        e.path(h);
    }
    e.u64(v.env.len() as u64);
    for (k, val) in &v.env {
        e.bytes(k.as_bytes());
        e.bytes(val.as_bytes());
    }
    e.paths(&v.masked);
    e.u64(req.argv.len() as u64);
    req.argv.iter().for_each(|a| e.bytes(a.as_bytes()));
    e.paths(&req.home_binds);
    e.paths(&req.ro_binds);
    e.u64(req.allow_loopback as u64);
    let l = &req.limits;
    for x in [l.nofile, l.fsize, l.nproc, l.tmp_size, l.spool_bytes] {
        e.u64(x);
    }
    e.opt(l.address_space);
    e.opt(l.cpu_seconds);
    e.opt(l.memory);
    e.opt(l.cpu_millis);
    e.u64(l.upper_bytes);
    e.u64(l.cgroup as u64);
    e.u64(req.cgroup_mask);
    e.0
}

/// Decodes a request; `Err(Stale)` when the client is another build or wants the other network.
enum DecodeError {
    Stale,
    Bad(io::Error),
}

impl From<io::Error> for DecodeError {
    fn from(e: io::Error) -> Self {
        DecodeError::Bad(e)
    }
}

fn decode(buf: &[u8], network: bool) -> Result<RunRequest, DecodeError> {
    let Some(rest) = buf.strip_prefix(MAGIC) else {
        return Err(DecodeError::Stale);
    };
    let mut d = Dec(rest);
    if d.bytes()? != identity() || (d.u64()? == 1) != network {
        return Err(DecodeError::Stale);
    }
    let workspace = d.path()?;
    let layers = d.paths()?;
    let upper = d.path()?;
    let work = d.path()?;
    let cwd = d.path()?;
    let home = match d.opt()? {
        Some(_) => Some(d.path()?),
        None => None,
    };
    let mut env = Vec::new();
    for _ in 0..d.count()? {
        env.push((d.os()?, d.os()?));
    }
    let masked = d.paths()?;
    let argv = (0..d.count()?)
        .map(|_| d.os())
        .collect::<io::Result<Vec<_>>>()?;
    if argv.is_empty() {
        return Err(DecodeError::Bad(io::Error::new(
            io::ErrorKind::InvalidData,
            "empty argv",
        )));
    }
    let home_binds = d.paths()?;
    let ro_binds = d.paths()?;
    let allow_loopback = d.u64()? == 1;
    let (nofile, fsize, nproc, tmp_size, spool_bytes) =
        (d.u64()?, d.u64()?, d.u64()?, d.u64()?, d.u64()?);
    let address_space = d.opt()?;
    let cpu_seconds = d.opt()?;
    let memory = d.opt()?;
    let cpu_millis = d.opt()?;
    let upper_bytes = d.u64()?;
    let cgroup = d.u64()? == 1;
    let cgroup_mask = d.u64()?;
    Ok(RunRequest {
        v: Validated {
            workspace,
            layers,
            upper,
            work,
            cwd,
            home,
            env,
            masked,
        },
        argv,
        home_binds,
        ro_binds,
        network,
        allow_loopback,
        limits: crate::Limits {
            nofile,
            fsize,
            nproc,
            address_space,
            memory,
            cpu_seconds,
            cpu_millis,
            upper_bytes,
            cgroup,
            tmp_size,
            spool_bytes,
        },
        cgroup_mask,
    })
}

// ---------------------------------------------------------------------------------------------
// Descriptor passing.

fn send_with_fds(sock: &UnixStream, data: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let header = (data.len() as u64).to_le_bytes();
    let mut iov = libc::iovec {
        iov_base: header.as_ptr() as *mut libc::c_void,
        iov_len: header.len(),
    };
    let fd_bytes = std::mem::size_of_val(fds);
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(fd_bytes as u32) } as usize;
    let mut cbuf = vec![0u8; space];
    // SAFETY: msghdr is plain data; zeroed is a valid starting value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = space;
        // SAFETY: msg_control points at a buffer of CMSG_SPACE(fd_bytes) bytes, so the first
        // header and its data fit; the fds are copied into CMSG_DATA.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(fd_bytes as u32) as usize;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr().cast::<u8>(),
                libc::CMSG_DATA(cmsg),
                fd_bytes,
            );
        }
    }
    // SAFETY: sendmsg with a fully initialised msghdr over buffers alive for the call.
    let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut w = sock;
    w.write_all(&header[n as usize..])?;
    w.write_all(data)
}

/// Receives one message sent by [`send_with_fds`]: its bytes and up to `max_fds` descriptors.
fn recv_with_fds(
    sock: &UnixStream,
    max_fds: usize,
    max_len: usize,
) -> io::Result<(Vec<u8>, Vec<OwnedFd>)> {
    let mut header = [0u8; 8];
    let mut iov = libc::iovec {
        iov_base: header.as_mut_ptr().cast(),
        iov_len: header.len(),
    };
    let fd_bytes = max_fds * std::mem::size_of::<RawFd>();
    // SAFETY: pure size computation.
    let space = unsafe { libc::CMSG_SPACE(fd_bytes as u32) } as usize;
    let mut cbuf = vec![0u8; space];
    // SAFETY: plain data.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = space;
    // SAFETY: recvmsg into buffers alive for the call; MSG_CMSG_CLOEXEC marks received fds.
    let n = unsafe {
        libc::recvmsg(
            sock.as_raw_fd(),
            &mut msg,
            libc::MSG_WAITALL | libc::MSG_CMSG_CLOEXEC,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut fds = Vec::new();
    // SAFETY: walking the control messages the kernel wrote into `cbuf`; each SCM_RIGHTS
    // payload is an array of fresh descriptors that we take ownership of.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data_len = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let count = data_len / std::mem::size_of::<RawFd>();
                let p = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                for i in 0..count {
                    fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(p.add(i))));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    if msg.msg_flags & libc::MSG_CTRUNC != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "too many descriptors",
        ));
    }
    let got = n as usize;
    let mut r = sock;
    if got == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    r.read_exact(&mut header[got..])?;
    let len = u64::from_le_bytes(header) as usize;
    if len > max_len {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "message too long",
        ));
    }
    let mut data = vec![0u8; len];
    r.read_exact(&mut data)?;
    Ok((data, fds))
}

// ---------------------------------------------------------------------------------------------
// Client side.

/// Runs `req` through the warm host named by `spec.warm_host`, if hosts are enabled and one is
/// listening. `Ok(None)`: no usable host (the caller runs cold).
pub(crate) fn try_run(
    spec: &SandboxSpec,
    req: &RunRequest,
    cg: &crate::cgroup::RunCgroup,
) -> Result<Option<Outcome>, SandboxError> {
    let (Some(socket), Some(_)) = (spec.warm_host.as_deref(), executable()) else {
        return Ok(None);
    };
    let Some(conn) = connect(spec, socket) else {
        return Ok(None);
    };
    let (mut child_io, parent) = namespace::io_pipes()?;
    child_io.cgroups = cg.join_fds();
    let start = Instant::now();
    // The run's control groups travel with its pipes: the host's PID 1 joins them, the host
    // itself never does.
    let mut fds = vec![
        child_io.stdin.as_raw_fd(),
        child_io.stdout.as_raw_fd(),
        child_io.stderr.as_raw_fd(),
        child_io.err_w.as_raw_fd(),
        child_io.status_w.as_raw_fd(),
    ];
    fds.extend(child_io.cgroups.iter().map(|f| f.as_raw_fd()));
    if send_with_fds(&conn, &encode(req), &fds).is_err() {
        return Ok(None);
    }
    drop(child_io);
    let Ok((reply, mut got)) = recv_with_fds(&conn, 1, 1 << 16) else {
        return Ok(None);
    };
    if reply.first() != Some(&0) || got.len() != 1 {
        // The host refused (another build, or it could not launch): run cold.
        return Ok(None);
    }
    // The run is in groups the host made for it ahead of time (ours stay unjoined, and go).
    let adopted = match reply.get(1..) {
        Some(rest) if !rest.is_empty() => crate::cgroup::RunCgroup::decode(rest),
        _ => None,
    };
    let adopted_req;
    let (req, cg) = match &adopted {
        Some(a) => {
            let mut r = req.clone();
            r.cgroup_mask = a.mask();
            adopted_req = r;
            (&adopted_req, a)
        }
        None => (req, cg),
    };
    let pidfd = got.remove(0);
    let raw = pidfd.as_raw_fd();
    let kill = move |_pid: libc::pid_t| {
        // SAFETY: pidfd_send_signal on a pidfd we hold; it names exactly the run's PID 1.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                raw,
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0u32,
            )
        };
    };
    crate::timing::mark("sandbox: launched by the warm host");
    let outcome = namespace::finish(spec, req, parent, 0, start, &kill, Some(pidfd), cg);
    // Closing the connection tells the host this run is over for us (or that we gave up).
    drop(conn);
    outcome.map(Some)
}

/// After a cold run with `warm_host` set: starts a host on that socket unless one holds it.
pub(crate) fn start_for(spec: &SandboxSpec) {
    let (Some(socket), Some(exe)) = (spec.warm_host.as_deref(), executable()) else {
        return;
    };
    // A live (or starting) host holds the lock.
    match lock_file(socket) {
        Ok(Some(_lock)) => {}
        _ => return,
    }
    let idle = std::env::var("AIRLOCK_SANDBOX_HOST_IDLE")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(DEFAULT_IDLE_SECS);
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

/// Takes `SOCKET.lock` exclusively without waiting: `Ok(None)` when another process holds it.
fn lock_file(socket: &Path) -> io::Result<Option<std::fs::File>> {
    let mut name = socket.as_os_str().to_owned();
    name.push(".lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(PathBuf::from(name))?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(file)),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

// ---------------------------------------------------------------------------------------------
// Host side.

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
    // of its own either. Every run gets fresh namespaces besides ([`namespace::run_namespaces`]).
    let mut flags = libc::CLONE_NEWNS | libc::CLONE_NEWIPC;
    if !network {
        flags |= libc::CLONE_NEWNET;
    }
    // SAFETY: as above.
    check(unsafe { libc::unshare(flags) }, "unshare")?;
    let newroot = namespace::new_root_dir().map_err(io::Error::other)?;
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

/// The next run's PID 1, forked ahead of its request: already in its fresh mount (a copy of the
/// host's), pid and ipc namespaces, waiting on `ctl` for the request and its descriptors. Making
/// those namespaces is most of a warm run's cost; a spare makes it while nobody waits.
///
/// Given the previous request, a spare also replays that request's steps up to the workspace
/// overlay (fresh `/tmp`, `/dev/shm`, `$HOME` with its toolchain binds, `/proc`), opens the
/// overlay's directories, and pivots into the new root; a request of the same shape then costs
/// only the overlay, the masks and the command.
struct Spare {
    /// 0 once handed over to a run (then it is no longer ours to kill).
    pid: libc::pid_t,
    ctl: UnixStream,
    alive_w: Option<OwnedFd>,
    /// The request shape it prepared for, if any.
    predicted: Option<RunRequest>,
    /// (path, device, inode) of the overlay directories it holds open: a request whose paths
    /// now name other directories (a workspace deleted and made again) does not fit.
    identities: Vec<(PathBuf, u64, u64)>,
    /// Control groups the spare joined while it waited (moving a process between groups waits
    /// for an RCU grace period, ~10 ms: done here, it is off the run's path). The host writes
    /// the run's ceilings into them before the run starts and hands them to the client.
    cg: Option<crate::cgroup::RunCgroup>,
}

/// The overlay directories of `p` (workspace, layers, upper, work) with their device and inode.
fn source_identities(p: &RunRequest) -> Option<Vec<(PathBuf, u64, u64)>> {
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
    fn fork(
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
        let (alive_r, alive_w) = namespace::pipe().map_err(io::Error::other)?;
        let cg = if with_cgroup {
            Some(crate::cgroup::RunCgroup::create(&crate::Limits::default()))
                .filter(|c| !c.is_empty())
        } else {
            None
        };
        let cg_fds = cg.as_ref().map(|c| c.join_fds()).unwrap_or_default();
        let flags = namespace::run_namespaces(network) | libc::SIGCHLD;
        // SAFETY: a fork-like clone of this single-threaded host; the child runs spare_main,
        // which never returns.
        let pid = unsafe { namespace::fork_clone(flags) };
        if pid == 0 {
            drop(ctl);
            spare_main(
                &theirs,
                alive_r,
                newroot,
                network,
                predicted.as_ref(),
                cg_fds,
            );
        }
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Spare {
            pid: pid as libc::pid_t,
            ctl,
            alive_w: Some(alive_w),
            predicted,
            identities,
            cg,
        })
    }

    /// Can take `req`: still waiting (not dead after a failed preparation), and prepared for
    /// its shape or not prepared at all.
    fn fits(&mut self, req: &RunRequest) -> bool {
        let mut st = 0;
        // SAFETY: waitpid on our own child, without blocking.
        if unsafe { libc::waitpid(self.pid, &mut st, libc::WNOHANG | libc::__WALL) } != 0 {
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
    fn take_run(mut self, data: &[u8], fds: &[RawFd]) -> io::Result<(libc::pid_t, OwnedFd)> {
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
            // SAFETY: killing and reaping our own child (a spare never handed a run).
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
                libc::waitpid(self.pid, std::ptr::null_mut(), libc::__WALL);
            }
        }
    }
}

/// The common parent of `p`'s upper and work directories, and their names in it.
fn shared_parent(p: &RunRequest) -> Option<(&Path, &std::ffi::OsStr, &std::ffi::OsStr)> {
    let (u, w) = (&p.v.upper, &p.v.work);
    let parent = u.parent()?;
    (w.parent()? == parent).then_some((parent, u.file_name()?, w.file_name()?))
}

/// Where a prepared spare keeps the overlay's directories reachable after it pivots (bind
/// mounts: overlayfs takes its layers only from mounts of the caller's namespace). The run
/// covers it with an empty read-only tmpfs right after mounting the overlay.
const SOURCES_DIR: &str = ".airlock-sources";

/// Replays `p`'s steps up to the workspace overlay, binds the overlay's directories under
/// [`SOURCES_DIR`] of the new root, and pivots.
fn prepare_ahead(p: &RunRequest, newroot: &Path) -> Option<namespace::Prepared> {
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
        let (s, d) = (
            std::ffi::CString::new(src.as_os_str().as_bytes()).ok()?,
            std::ffi::CString::new(dst.as_os_str().as_bytes()).ok()?,
        );
        // SAFETY: a bind mount between NUL-terminated paths, in this spare's own namespace.
        let r = unsafe {
            libc::mount(
                s.as_ptr(),
                d.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            )
        };
        if r != 0 {
            return None;
        }
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
    Some(namespace::Prepared {
        replayed: steps[..k].iter().map(|s| s.what.clone()).collect(),
        sources,
        hide: Path::new("/").join(SOURCES_DIR),
    })
}

/// A spare's life: prepare for the predicted shape, wait for a request, then become its PID 1
/// (never returns).
fn spare_main(
    ctl: &UnixStream,
    alive_r: OwnedFd,
    newroot: &Path,
    network: bool,
    predicted: Option<&RunRequest>,
    cg_fds: Vec<OwnedFd>,
) -> ! {
    // SAFETY: prctl, write and _exit; a spare dies with its host.
    unsafe {
        // (A host that died before this point closed its end of `ctl`: the wait below ends.)
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
            libc::_exit(0);
        }
        // Into the next run's groups now, while nobody waits. A spare that cannot join is no
        // spare: the host notices the exit and launches the run itself.
        for fd in &cg_fds {
            if libc::write(fd.as_raw_fd(), b"0".as_ptr().cast(), 1) != 1 {
                libc::_exit(0);
            }
        }
    }
    drop(cg_fds);
    // This PID 1's own uts and net namespaces, made ready before anyone waits for them.
    if crate::child::ready_namespaces(!network).is_err() {
        // SAFETY: exiting a process that has nothing to clean up (the host launches the run).
        unsafe { libc::_exit(0) }
    }
    let prepared = match predicted {
        Some(p) => match prepare_ahead(p, newroot) {
            Some(prep) => Some(prep),
            // Half-prepared mounts cannot be trusted: the host notices the exit and launches
            // the run itself.
            // SAFETY: exiting a process that has nothing to clean up.
            None => unsafe { libc::_exit(0) },
        },
        None => None,
    };
    let Ok((data, fds)) = recv_with_fds(ctl, 5 + namespace::MAX_CGROUPS, 16 << 20) else {
        // SAFETY: exiting a process that has nothing to clean up.
        unsafe { libc::_exit(0) }
    };
    let (Ok(req), Some(io)) = (decode(&data, network).map_err(|_| ()), child_io(fds)) else {
        // SAFETY: as above (the host decoded the same bytes before forwarding them).
        unsafe { libc::_exit(0) }
    };
    let err_w = io.err_w.as_raw_fd();
    let result: Result<(), SandboxError> = namespace::with_child_ctx(
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
                crate::child::Stage::Exec as u32,
                e,
            )
        }
        Err(SandboxError::Io { source, .. }) => source.raw_os_error().unwrap_or(libc::EINVAL),
        _ => libc::EINVAL,
    };
    crate::child::report_and_exit(
        err_w,
        crate::child::KIND_STAGE,
        crate::child::Stage::Prepare as u32,
        errno,
    )
}

/// The five descriptors of a run, in the order the client sends them, then its control
/// groups' `cgroup.procs`.
fn child_io(mut fds: Vec<OwnedFd>) -> Option<ChildIo> {
    if fds.len() < 5 || fds.len() > 5 + namespace::MAX_CGROUPS {
        return None;
    }
    let cgroups = fds.split_off(5);
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
    })
}

/// Serves one connection; returns the request it ran, if any.
fn handle(
    conn: &UnixStream,
    network: bool,
    newroot: &Path,
    spare: &mut Option<Spare>,
) -> Result<Option<RunRequest>, Stop> {
    let Ok((data, fds)) = recv_with_fds(conn, 5 + namespace::MAX_CGROUPS, 16 << 20) else {
        return Ok(None);
    };
    if fds.len() < 5 || fds.len() > 5 + namespace::MAX_CGROUPS {
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
            match namespace::launch(&req, newroot, true, io) {
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
    let _ = namespace::reset_workdir(&req.v.work);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip() {
        let req = RunRequest {
            v: Validated {
                workspace: "/w/s".into(),
                layers: vec!["/l/1".into()],
                upper: "/u".into(),
                work: "/k".into(),
                cwd: "/w/s/sub".into(),
                home: Some("/home/me".into()),
                env: vec![("PATH".into(), "/usr/bin".into())],
                masked: vec!["/w/s/.airlock".into()],
            },
            argv: vec![
                "/bin/bash".into(),
                "-c".into(),
                OsString::from_vec(vec![0xff, b'x']),
            ],
            home_binds: vec!["/home/me/.cargo".into()],
            ro_binds: vec![],
            network: false,
            allow_loopback: true,
            limits: crate::Limits {
                address_space: Some(7),
                memory: Some(512 << 20),
                cpu_millis: Some(250),
                upper_bytes: 9,
                cgroup: false,
                ..Default::default()
            },
            cgroup_mask: 3,
        };
        let Ok(back) = decode(&encode(&req), false) else {
            panic!("decode failed");
        };
        assert_eq!(back.v.workspace, req.v.workspace);
        assert_eq!(back.v.layers, req.v.layers);
        assert_eq!(back.v.cwd, req.v.cwd);
        assert_eq!(back.v.home, req.v.home);
        assert_eq!(back.v.env, req.v.env);
        assert_eq!(back.v.masked, req.v.masked);
        assert_eq!(back.argv, req.argv);
        assert_eq!(back.home_binds, req.home_binds);
        assert!(back.allow_loopback);
        assert_eq!(back.limits, req.limits);
        assert_eq!(back.cgroup_mask, 3);
        // Another network, or any truncation, is refused.
        assert!(matches!(
            decode(&encode(&req), true),
            Err(DecodeError::Stale)
        ));
        let bytes = encode(&req);
        for cut in [3, 10, bytes.len() - 1] {
            assert!(decode(&bytes[..cut], false).is_err());
        }
    }
}
