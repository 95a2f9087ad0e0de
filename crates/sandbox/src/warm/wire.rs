//! What a warm host and its clients say to each other: the request (encoded with the build's
//! identity), descriptors passed with `SCM_RIGHTS`, and the socket's lock file.

use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::launch::{RunRequest, Validated};

/// The argument that makes an [`enable`]d executable run as a host (see [`main_hook`]).
pub const HOST_ARG: &str = "__airlock-sandbox-host";

/// Idle seconds before a host exits, unless `AIRLOCK_SANDBOX_HOST_IDLE` says otherwise.
pub(crate) const DEFAULT_IDLE_SECS: u64 = 60;

pub(crate) const MAGIC: &[u8; 4] = b"ALH1";

/// Who built this binary, as far as a host and its clients must agree.
pub(crate) fn identity() -> &'static [u8] {
    static ID: OnceLock<Vec<u8>> = OnceLock::new();
    ID.get_or_init(identity_uncached)
}

pub(crate) fn identity_uncached() -> Vec<u8> {
    let md = std::env::current_exe().and_then(std::fs::metadata);
    let (dev, ino, mtime) = md
        .map(|m| (m.dev(), m.ino(), m.mtime_nsec() + m.mtime() * 1_000_000_000))
        .unwrap_or_default();
    format!("{}:{dev}:{ino}:{mtime}", env!("CARGO_PKG_VERSION")).into_bytes()
}

#[derive(Default)]
pub(crate) struct Enc(Vec<u8>);

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

pub(crate) struct Dec<'a>(&'a [u8]);

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

pub(crate) fn encode(req: &RunRequest) -> Vec<u8> {
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
pub(crate) enum DecodeError {
    Stale,
    Bad(io::Error),
}

impl From<io::Error> for DecodeError {
    fn from(e: io::Error) -> Self {
        DecodeError::Bad(e)
    }
}

pub(crate) fn decode(buf: &[u8], network: bool) -> Result<RunRequest, DecodeError> {
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

pub(crate) fn send_with_fds(sock: &UnixStream, data: &[u8], fds: &[RawFd]) -> io::Result<()> {
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
pub(crate) fn recv_with_fds(
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

/// Takes `SOCKET.lock` exclusively without waiting: `Ok(None)` when another process holds it.
pub(crate) fn lock_file(socket: &Path) -> io::Result<Option<std::fs::File>> {
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
