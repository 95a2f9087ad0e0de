//! What a warm host and its clients say to each other over the host's socket.
//!
//! A message is an 8-byte little-endian length, sent with its descriptors (`SCM_RIGHTS`), then
//! that many bytes of JSON: a [`Request`] from the client (the build's identity, the network
//! setting and the run), a [`Reply`] from the host. A decoded request goes through
//! [`RunRequest::check`], the validation every fresh request passes, before anything uses it.

use std::ffi::OsString;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use serde::{Deserialize, Serialize};

use crate::launch::{RunRequest, Validated};

/// The argument that makes an [`enable`](super::enable)d executable run as a host (see
/// [`main_hook`](super::main_hook)).
pub const HOST_ARG: &str = "__airlock-sandbox-host";

/// Idle seconds before a host exits, unless the settings say otherwise.
pub(crate) const DEFAULT_IDLE_SECS: u64 = 60;

/// Names this protocol; a message without it comes from another version of airlock.
const PROTOCOL: &str = "airlock-host/2";

/// Largest request a host or spare reads.
pub(crate) const MAX_REQUEST: usize = 16 << 20;

/// Who built this binary, as far as a host and its clients must agree.
pub(crate) fn identity() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(identity_uncached)
}

fn identity_uncached() -> String {
    let md = std::env::current_exe().and_then(std::fs::metadata);
    let (dev, ino, mtime) = md
        .map(|m| (m.dev(), m.ino(), m.mtime_nsec() + m.mtime() * 1_000_000_000))
        .unwrap_or_default();
    format!("{}:{dev}:{ino}:{mtime}", env!("CARGO_PKG_VERSION"))
}

/// Bytes of an `OsStr` on the wire: a JSON string when they are UTF-8, else an array of bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Bytes(Vec<u8>);

impl Serialize for Bytes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(&self.0) {
            Ok(text) => s.serialize_str(text),
            Err(_) => s.collect_seq(&self.0),
        }
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Bytes;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string or an array of bytes")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Bytes, E> {
                Ok(Bytes(v.as_bytes().to_vec()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Bytes, A::Error> {
                let mut out = Vec::new();
                while let Some(b) = a.next_element::<u8>()? {
                    out.push(b);
                }
                Ok(Bytes(out))
            }
        }
        d.deserialize_any(Visit)
    }
}

fn os(b: Bytes) -> OsString {
    OsString::from_vec(b.0)
}

fn path(b: Bytes) -> PathBuf {
    PathBuf::from(os(b))
}

fn paths(bs: Vec<Bytes>) -> Vec<PathBuf> {
    bs.into_iter().map(path).collect()
}

fn bytes(p: &(impl AsRef<std::ffi::OsStr> + ?Sized)) -> Bytes {
    Bytes(p.as_ref().as_bytes().to_vec())
}

fn all_bytes<P: AsRef<std::ffi::OsStr>>(ps: &[P]) -> Vec<Bytes> {
    ps.iter().map(bytes).collect()
}

/// Who is asking: a host serves only clients of its own build and network setting.
#[derive(Serialize, Deserialize)]
struct Header {
    protocol: String,
    identity: String,
    network: bool,
}

/// A run as it travels from a client (or the host) to a host (or a spare). The first three
/// fields are [`Header`]'s, written out here rather than flattened: serde reads a flattened
/// struct through a buffered copy of the whole message, which a host and a spare pay on every
/// run's path.
#[derive(Serialize, Deserialize)]
struct Request {
    protocol: String,
    identity: String,
    network: bool,
    workspace: Bytes,
    layers: Vec<Bytes>,
    upper: Bytes,
    work: Bytes,
    cwd: Bytes,
    home: Option<Bytes>,
    env: Vec<(Bytes, Bytes)>,
    masked: Vec<Bytes>,
    argv: Vec<Bytes>,
    home_binds: Vec<Bytes>,
    ro_binds: Vec<Bytes>,
    cache_binds: Vec<(Bytes, Bytes)>,
    allow_loopback: bool,
    #[serde(default)]
    net_port: Option<u16>,
    limits: crate::Limits,
    cgroup_mask: u64,
}

/// The request's bytes, stamped with this build's identity.
pub(crate) fn encode(req: &RunRequest) -> Vec<u8> {
    let v = &req.v;
    let wire = Request {
        protocol: PROTOCOL.into(),
        identity: identity().into(),
        network: req.network,
        workspace: bytes(&v.workspace),
        layers: all_bytes(&v.layers),
        upper: bytes(&v.upper),
        work: bytes(&v.work),
        cwd: bytes(&v.cwd),
        home: v.home.as_ref().map(bytes),
        env: v.env.iter().map(|(k, x)| (bytes(k), bytes(x))).collect(),
        masked: all_bytes(&v.masked),
        argv: all_bytes(&req.argv),
        home_binds: all_bytes(&req.home_binds),
        ro_binds: all_bytes(&req.ro_binds),
        cache_binds: v
            .cache_binds
            .iter()
            .map(|b| (bytes(&b.host), bytes(&b.inside)))
            .collect(),
        allow_loopback: req.allow_loopback,
        net_port: req.net_port,
        limits: req.limits.clone(),
        cgroup_mask: req.cgroup_mask,
    };
    // Serialising plain data to memory cannot fail.
    serde_json::to_vec(&wire).unwrap_or_default()
}

/// Why a request was not decoded.
#[derive(Debug)]
pub(crate) enum DecodeError {
    /// Another build of airlock, or the other network setting: this host cannot serve it.
    Stale,
    /// Malformed, or a run no fresh spec could have produced.
    Bad(String),
}

/// How much of [`RunRequest::check`] a decoded request goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    /// All of it, as a fresh request (the host, which sees the caller's file system).
    Full,
    /// [`RunRequest::check_shape`] only: a spare that has pivoted into its new root, where the
    /// caller's paths do not resolve, re-checks what its host already checked in full.
    Shape,
}

/// Decodes a request and validates it as a fresh one is validated ([`RunRequest::check`]).
pub(crate) fn decode(buf: &[u8], network: bool, check: Check) -> Result<RunRequest, DecodeError> {
    let current = |protocol: &str, id: &str, net: bool| {
        protocol == PROTOCOL && id == identity() && net == network
    };
    let w: Request = match serde_json::from_slice(buf) {
        Ok(w) => w,
        // Not a request of this build: whatever its header says decides how it is refused.
        Err(e) => {
            return Err(match serde_json::from_slice::<Header>(buf) {
                Ok(h) if current(&h.protocol, &h.identity, h.network) => {
                    DecodeError::Bad(e.to_string())
                }
                _ => DecodeError::Stale,
            });
        }
    };
    if !current(&w.protocol, &w.identity, w.network) {
        return Err(DecodeError::Stale);
    }
    let req = RunRequest {
        v: Validated {
            workspace: path(w.workspace),
            layers: paths(w.layers),
            upper: path(w.upper),
            work: path(w.work),
            cwd: path(w.cwd),
            home: w.home.map(path),
            env: w.env.into_iter().map(|(k, x)| (os(k), os(x))).collect(),
            masked: paths(w.masked),
            cache_binds: w
                .cache_binds
                .into_iter()
                .map(|(h, i)| crate::CacheBind {
                    host: path(h),
                    inside: path(i),
                })
                .collect(),
        },
        argv: w.argv.into_iter().map(os).collect(),
        home_binds: paths(w.home_binds),
        ro_binds: paths(w.ro_binds),
        rw_binds: Vec::new(),
        layered_binds: Vec::new(),
        network,
        allow_loopback: w.allow_loopback,
        net_port: w.net_port,
        limits: w.limits,
        cgroup_mask: w.cgroup_mask,
    };
    match check {
        Check::Full => req.check(),
        Check::Shape => req.check_shape(),
    }
    .map_err(|e| DecodeError::Bad(e.to_string()))?;
    Ok(req)
}

/// The host's answer to a request.
#[derive(Serialize, Deserialize)]
pub(crate) enum Reply {
    /// The run started; its PID 1's pidfd travels with this message. `cgroup`: the groups the
    /// host made for it ahead of time ([`crate::cgroup::RunCgroup::encode`]), if any.
    Started { cgroup: Option<String> },
    /// The host could not take the run (the client runs it cold).
    Refused { reason: String },
}

impl Reply {
    /// The reply's bytes.
    pub(crate) fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// A reply read back; `None` when malformed.
    pub(crate) fn decode(buf: &[u8]) -> Option<Reply> {
        serde_json::from_slice(buf).ok()
    }
}

/// Sends one message: its length with `fds` attached, then `data`, in one call as far as the
/// socket takes it.
pub(crate) fn send_with_fds(
    sock: &UnixStream,
    data: &[u8],
    fds: &[BorrowedFd<'_>],
) -> io::Result<()> {
    let header = (data.len() as u64).to_le_bytes();
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(fds.len()))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::other("too many descriptors"));
    }
    // One call for the whole message: the peer wakes once, with all of it there to read.
    let n = rustix::net::sendmsg(
        sock,
        &[IoSlice::new(&header), IoSlice::new(data)],
        &mut control,
        SendFlags::NOSIGNAL,
    )?;
    // What that call did not take (the socket's buffer was full) follows it.
    let mut w = sock;
    w.write_all(header.get(n..).unwrap_or_default())?;
    w.write_all(
        data.get(n.saturating_sub(header.len())..)
            .unwrap_or_default(),
    )
}

/// Receives one message sent by [`send_with_fds`]: its bytes and up to `max_fds` descriptors.
pub(crate) fn recv_with_fds(
    sock: &UnixStream,
    max_fds: usize,
    max_len: usize,
) -> io::Result<(Vec<u8>, Vec<OwnedFd>)> {
    let mut header = [0u8; 8];
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(max_fds))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let msg = rustix::net::recvmsg(
        sock,
        &mut [IoSliceMut::new(&mut header)],
        &mut control,
        RecvFlags::WAITALL | RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for m in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = m {
            fds.extend(rights);
        }
    }
    if msg.flags.contains(ReturnFlags::CTRUNC) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "too many descriptors",
        ));
    }
    if msg.bytes == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    let mut r = sock;
    r.read_exact(header.get_mut(msg.bytes..).unwrap_or_default())?;
    let len = usize::try_from(u64::from_le_bytes(header)).unwrap_or(usize::MAX);
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
        // Real directories: a decoded request is validated, and these must exist.
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let d = |name: &str| {
            let p = root.join(name);
            std::fs::create_dir_all(&p).unwrap();
            p
        };
        let (ws, layer, upper, work) = (d("w/s"), d("l/1"), d("u"), d("k"));
        let cache = d("w/s/.airlock/cache/go");
        let req = RunRequest {
            v: Validated {
                workspace: ws.clone(),
                layers: vec![layer],
                upper,
                work,
                cwd: ws.join("sub"),
                home: Some("/home/me".into()),
                env: vec![("PATH".into(), "/usr/bin".into())],
                masked: vec![ws.join(".airlock")],
                cache_binds: vec![crate::CacheBind::named(&cache, "go")],
            },
            argv: vec![
                "/bin/bash".into(),
                "-c".into(),
                OsString::from_vec(vec![0xff, b'x']),
            ],
            home_binds: vec!["/home/me/.cargo".into()],
            ro_binds: vec![],
            rw_binds: vec![],
            layered_binds: vec![],
            net_port: None,
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
        let Ok(back) = decode(&encode(&req), false, Check::Full) else {
            panic!("decode failed");
        };
        assert_eq!(back.v.workspace, req.v.workspace);
        assert_eq!(back.v.layers, req.v.layers);
        assert_eq!(back.v.cwd, req.v.cwd);
        assert_eq!(back.v.home, req.v.home);
        assert_eq!(back.v.env, req.v.env);
        assert_eq!(back.v.masked, req.v.masked);
        assert_eq!(back.v.cache_binds, req.v.cache_binds);
        assert_eq!(back.argv, req.argv);
        assert_eq!(back.home_binds, req.home_binds);
        assert!(back.allow_loopback);
        assert_eq!(back.limits, req.limits);
        assert_eq!(back.cgroup_mask, 3);
        // Another network, or any truncation, is refused.
        assert!(matches!(
            decode(&encode(&req), true, Check::Full),
            Err(DecodeError::Stale)
        ));
        let bytes = encode(&req);
        for cut in [3, 10, bytes.len() - 1] {
            assert!(decode(&bytes[..cut], false, Check::Full).is_err());
        }
        // Another protocol is stale; this build's header over a malformed body is bad.
        let mut value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        value["protocol"] = "airlock-host/1".into();
        assert!(matches!(
            decode(&serde_json::to_vec(&value).unwrap(), false, Check::Full),
            Err(DecodeError::Stale)
        ));
        value["protocol"] = PROTOCOL.into();
        value["workspace"] = 7.into();
        assert!(matches!(
            decode(&serde_json::to_vec(&value).unwrap(), false, Check::Full),
            Err(DecodeError::Bad(_))
        ));
    }
    /// A request that a fresh spec could never have produced is refused, whoever sent it.
    #[test]
    fn forged_requests_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let (ws, upper, work) = (root.join("ws"), root.join("upper"), root.join("work"));
        let cache = root.join("cache");
        for d in [&ws, &upper, &work, &cache] {
            std::fs::create_dir(d).unwrap();
        }
        let good = RunRequest {
            v: Validated {
                workspace: ws.clone(),
                layers: vec![],
                upper: upper.clone(),
                work: work.clone(),
                cwd: ws.clone(),
                home: Some("/home/me".into()),
                env: vec![("PATH".into(), "/usr/bin".into())],
                masked: vec![ws.join(".airlock")],
                cache_binds: vec![crate::CacheBind::named(&cache, "go")],
            },
            argv: vec!["true".into()],
            home_binds: vec![],
            ro_binds: vec![],
            rw_binds: vec![],
            layered_binds: vec![],
            net_port: None,
            network: false,
            allow_loopback: false,
            limits: crate::Limits::default(),
            cgroup_mask: 0,
        };
        assert!(decode(&encode(&good), false, Check::Full).is_ok());
        type Forge = Box<dyn Fn(&mut RunRequest)>;
        let forgeries: Vec<(&str, Forge)> = vec![
            ("empty argv", Box::new(|r| r.argv.clear())),
            (
                "relative workspace",
                Box::new(|r| r.v.workspace = "ws".into()),
            ),
            (
                "missing workspace",
                Box::new(|r| r.v.workspace = "/nonexistent/ws".into()),
            ),
            (
                "upper inside the workspace",
                Box::new(|r| r.v.upper = r.v.workspace.join("u")),
            ),
            (
                "work equal to upper",
                Box::new(|r| r.v.work = r.v.upper.clone()),
            ),
            (
                "cwd outside the workspace",
                Box::new(|r| r.v.cwd = "/etc".into()),
            ),
            (
                "cwd with ..",
                Box::new(|r| r.v.cwd = r.v.workspace.join("../upper")),
            ),
            ("relative home", Box::new(|r| r.v.home = Some("me".into()))),
            (
                "mask outside",
                Box::new(|r| r.v.masked = vec!["/etc".into()]),
            ),
            (
                "cache outside the cache root",
                Box::new(|r| r.v.cache_binds[0].inside = "/usr/lib".into()),
            ),
            (
                "cache at the cache root",
                Box::new(|r| r.v.cache_binds[0].inside = crate::CACHE_ROOT.into()),
            ),
            (
                "cache with ..",
                Box::new(|r| {
                    r.v.cache_binds[0].inside =
                        std::path::Path::new(crate::CACHE_ROOT).join("../../etc")
                }),
            ),
            (
                "cache over the workspace",
                Box::new(|r| {
                    let inside = std::path::Path::new(crate::CACHE_ROOT).join("ws");
                    r.v.workspace = inside.join("p");
                    r.v.cwd = r.v.workspace.clone();
                    r.v.cache_binds[0].inside = inside;
                }),
            ),
            (
                "cache inside the upper directory",
                Box::new(|r| r.v.cache_binds[0].host = r.v.upper.join("c")),
            ),
            (
                "nested caches",
                Box::new(|r| {
                    let mut inner = r.v.cache_binds[0].clone();
                    inner.inside.push("x");
                    r.v.cache_binds.push(inner);
                }),
            ),
            (
                "loader variable",
                Box::new(|r| r.v.env.push(("LD_PRELOAD".into(), "/x.so".into()))),
            ),
            (
                "secret variable",
                Box::new(|r| r.v.env.push(("API_TOKEN".into(), "t".into()))),
            ),
            (
                "malformed variable",
                Box::new(|r| r.v.env.push(("A=B".into(), "c".into()))),
            ),
        ];
        for (what, forge) in forgeries {
            let mut req = good.clone();
            forge(&mut req);
            assert!(
                decode(&encode(&req), false, Check::Full).is_err(),
                "accepted: {what}"
            );
            // A spare, which cannot resolve the caller's paths, still refuses what it can see.
            if what != "missing workspace" {
                assert!(
                    decode(&encode(&req), false, Check::Shape).is_err(),
                    "a spare accepted: {what}"
                );
            }
        }
    }

    /// A message sent in one call arrives whole with its descriptors, also when it is larger
    /// than the socket takes at once, and two messages in a row stay apart.
    #[test]
    fn messages_arrive_whole_with_their_descriptors() {
        use std::os::fd::AsFd;
        let (a, b) = UnixStream::pair().unwrap();
        let big: Vec<u8> = (0..3 << 20).map(|i: u32| (i % 251) as u8).collect();
        let (r, w) = crate::launch::pipe().unwrap();
        let sent = big.clone();
        let sender = std::thread::spawn(move || {
            send_with_fds(&a, &sent, &[r.as_fd(), w.as_fd()]).unwrap();
            send_with_fds(&a, b"second", &[]).unwrap();
        });
        let (data, fds) = recv_with_fds(&b, 4, 4 << 20).unwrap();
        assert_eq!(data.len(), big.len());
        assert!(data == big, "the bytes changed on the way");
        assert_eq!(fds.len(), 2);
        let (data, fds) = recv_with_fds(&b, 4, 4 << 20).unwrap();
        assert_eq!((data.as_slice(), fds.len()), (&b"second"[..], 0));
        sender.join().unwrap();
    }
}
