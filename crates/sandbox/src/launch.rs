//! Everything a run's PID 1 needs, prepared before the clone, and the clone itself: the
//! validated request ([`RunRequest`]), the child's descriptors ([`ChildIo`]), the child context
//! handed to [`crate::child`], and the fork-like clone helper ([`fork_clone`]). Shared by cold
//! runs and warm hosts; depends on neither.

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use crate::cgroup::{CG_CPU_TIME, CG_MEMORY};
use crate::child::{self, ChildCtx, Resource};
use crate::confine;
use crate::env;
use crate::error::SandboxError;
use crate::plan::{self, PlanInput, cstring};
use crate::spec::SandboxSpec;

/// A spec with every path checked and resolved.
#[derive(Debug, Clone)]
pub(crate) struct Validated {
    pub(crate) workspace: PathBuf,
    pub(crate) layers: Vec<PathBuf>,
    pub(crate) upper: PathBuf,
    pub(crate) work: PathBuf,
    pub(crate) cwd: PathBuf,
    pub(crate) home: Option<PathBuf>,
    pub(crate) env: Vec<(OsString, OsString)>,
    pub(crate) masked: Vec<PathBuf>,
    /// Writable cache binds: the canonical host directory, and where it appears (beneath
    /// [`crate::CACHE_ROOT`]).
    pub(crate) cache_binds: Vec<crate::CacheBind>,
}

/// overlayfs refuses (ELOOP) or misbehaves with layers nested in one another: say so up front.
fn check_not_nested(named: &[(&str, &Path)]) -> Result<(), SandboxError> {
    for (i, (a_name, a)) in named.iter().enumerate() {
        for (b_name, b) in &named[i + 1..] {
            if a.starts_with(b) || b.starts_with(a) {
                return Err(SandboxError::InvalidSpec(format!(
                    "the {a_name} {} and the {b_name} {} are nested; overlayfs needs the workspace, \
                     staged layers, upper and work directories apart from one another",
                    a.display(),
                    b.display()
                )));
            }
        }
    }
    Ok(())
}

/// Removes what an earlier overlay mount left in `work` (its `work` and `index` directories, and
/// the `incompat/volatile` mark that makes the kernel refuse the directory), so a work directory
/// can be reused from run to run.
/// A warm host also does this right after each run, so the next one finds it clean; entries
/// that vanish meanwhile (removed by the other side) are not an error.
pub(crate) fn reset_workdir(work: &Path) -> Result<(), SandboxError> {
    for name in ["work", "index", "incompat"] {
        let p = work.join(name);
        crate::remove_tree(&p)
            .map_err(|e| SandboxError::io("clearing the work directory", p, e))?;
    }
    Ok(())
}

fn existing_dir(what: &'static str, p: &Path) -> Result<PathBuf, SandboxError> {
    // A directory named by its own canonical path (the usual case): one `openat2` instead of
    // `realpath`'s `readlink` per component.
    if is_canonical_dir(p) {
        return Ok(p.to_path_buf());
    }
    let canon = p.canonicalize().map_err(|e| SandboxError::io(what, p, e))?;
    if !canon.is_dir() {
        return Err(SandboxError::InvalidSpec(format!(
            "{} is not a directory",
            p.display()
        )));
    }
    Ok(canon)
}

pub(crate) fn validate(
    spec: &SandboxSpec,
    settings: &crate::settings::SandboxSettings,
) -> Result<Validated, SandboxError> {
    if spec.argv.is_empty() {
        return Err(SandboxError::InvalidSpec("argv is empty".into()));
    }
    let workspace = existing_dir("resolving the workspace", &spec.workspace)?;
    let layers = spec
        .layers
        .iter()
        .map(|l| existing_dir("resolving a staged layer", l))
        .collect::<Result<Vec<_>, _>>()?;
    let upper = existing_dir("resolving the upper directory", &spec.upper)?;
    let work = existing_dir("resolving the work directory", &spec.work)?;
    reset_workdir(&work)?;
    let cwd = plan::normalize(&spec.cwd).ok_or_else(|| {
        SandboxError::InvalidSpec(format!("cwd {} is not absolute", spec.cwd.display()))
    })?;
    let given_ws = plan::normalize(&spec.workspace).unwrap_or_else(|| spec.workspace.clone());
    let rel = cwd
        .strip_prefix(&given_ws)
        .or_else(|_| cwd.strip_prefix(&workspace))
        .map_err(|_| {
            SandboxError::InvalidSpec(format!(
                "cwd {} is outside the workspace {}",
                cwd.display(),
                workspace.display()
            ))
        })?;
    let cwd = workspace.join(rel);
    // The program's environment (its settings), of which the command gets the allow-listed part.
    let inherited = &settings.inherit;
    // $HOME: the spec's, else the settings', else the one the command would inherit.
    let home = spec
        .home
        .clone()
        .or_else(|| settings.home.clone())
        .or_else(|| {
            inherited
                .iter()
                .find(|(k, _)| k == "HOME")
                .map(|(_, v)| PathBuf::from(v))
        });
    let home = match home {
        Some(h) => Some(plan::normalize(&h).ok_or_else(|| {
            SandboxError::InvalidSpec(format!("home {} is not absolute", h.display()))
        })?),
        None => None,
    };
    let mut named: Vec<(&str, &Path)> = vec![
        ("workspace", &workspace),
        ("upper directory", &upper),
        ("work directory", &work),
    ];
    named.extend(layers.iter().map(|l| ("staged layer", l.as_path())));
    check_not_nested(&named)?;
    let masked = spec
        .masked
        .iter()
        .map(|m| {
            let abs = if m.is_absolute() {
                plan::normalize(m)
            } else {
                plan::normalize(&workspace.join(m))
            };
            let abs = abs.map(|a| match a.strip_prefix(&given_ws) {
                Ok(rel) => workspace.join(rel),
                Err(_) => a,
            });
            let in_home = |a: &Path| home.as_deref().is_some_and(|h| a.starts_with(h) && a != h);
            match abs {
                Some(a) if a.starts_with(&workspace) && a != workspace => Ok(a),
                Some(a) if m.is_absolute() && in_home(&a) => Ok(a),
                _ => Err(SandboxError::InvalidSpec(format!(
                    "masked path {} is neither inside the workspace nor under $HOME",
                    m.display()
                ))),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    let env = env::scrubbed(
        inherited.iter().cloned(),
        &spec.env,
        home.as_deref().map(Path::as_os_str),
    )
    .map_err(SandboxError::InvalidSpec)?;
    let cache_binds = spec
        .cache_binds
        .iter()
        .map(|b| {
            Ok(crate::CacheBind {
                host: existing_dir("resolving a cache directory", &b.host)?,
                inside: plan::normalize(&b.inside).unwrap_or_else(|| b.inside.clone()),
            })
        })
        .collect::<Result<Vec<_>, SandboxError>>()?;
    let v = Validated {
        workspace,
        layers,
        upper,
        work,
        cwd,
        home,
        env,
        masked,
        cache_binds,
    };
    check_cache_binds(&v)?;
    Ok(v)
}

/// Cache binds appear strictly beneath [`crate::CACHE_ROOT`], apart from one another and from
/// the workspace (a bind over the workspace would bypass its overlay), and their host
/// directories lie apart from the overlay's directories.
fn check_cache_binds(v: &Validated) -> Result<(), SandboxError> {
    let bad = |what: String| Err(SandboxError::InvalidSpec(what));
    let root = Path::new(crate::CACHE_ROOT);
    let normal = |p: &Path| p.is_absolute() && plan::normalize(p).as_deref() == Some(p);
    for (i, b) in v.cache_binds.iter().enumerate() {
        if !normal(&b.inside) || !b.inside.starts_with(root) || b.inside == root {
            return bad(format!(
                "the cache {} is not a plain path beneath {}",
                b.inside.display(),
                root.display()
            ));
        }
        if !normal(&b.host) {
            return bad(format!(
                "the cache directory {} is not a plain absolute path",
                b.host.display()
            ));
        }
        if b.inside.starts_with(&v.workspace) || v.workspace.starts_with(&b.inside) {
            return bad(format!(
                "the cache {} and the workspace {} are nested",
                b.inside.display(),
                v.workspace.display()
            ));
        }
        for other in [&v.upper, &v.work].into_iter().chain(&v.layers) {
            if b.host.starts_with(other) || other.starts_with(&b.host) {
                return bad(format!(
                    "the cache directory {} and the overlay directory {} are nested",
                    b.host.display(),
                    other.display()
                ));
            }
        }
        for c in &v.cache_binds[i + 1..] {
            if c.inside.starts_with(&b.inside) || b.inside.starts_with(&c.inside) {
                return bad(format!(
                    "the caches {} and {} are nested",
                    b.inside.display(),
                    c.inside.display()
                ));
            }
        }
    }
    Ok(())
}

pub(crate) fn pipe() -> Result<(OwnedFd, OwnedFd), SandboxError> {
    let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(|e| {
        SandboxError::Sys {
            action: "pipe2",
            source: e.into(),
        }
    })?;
    Ok((above_stdio(r)?, above_stdio(w)?))
}

/// The child moves its stdio into 0..=2, so no descriptor it needs may sit there.
fn above_stdio(fd: OwnedFd) -> Result<OwnedFd, SandboxError> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    rustix::io::fcntl_dupfd_cloexec(&fd, 3).map_err(|e| SandboxError::Sys {
        action: "fcntl(F_DUPFD_CLOEXEC)",
        source: e.into(),
    })
}

/// The caller's own hard limit of `resource` (unlimited when unknown).
fn hard_limit(resource: Resource) -> u64 {
    use rustix::process::Resource as R;
    let r = match resource {
        libc::RLIMIT_CORE => R::Core,
        libc::RLIMIT_NOFILE => R::Nofile,
        libc::RLIMIT_FSIZE => R::Fsize,
        libc::RLIMIT_NPROC => R::Nproc,
        libc::RLIMIT_AS => R::As,
        libc::RLIMIT_DATA => R::Data,
        libc::RLIMIT_CPU => R::Cpu,
        _ => return u64::MAX,
    };
    rustix::process::getrlimit(r).maximum.unwrap_or(u64::MAX)
}

/// Fails unless this process has exactly one thread. Code that allocates (or takes any lock)
/// after a fork-like clone is sound only then: another thread may hold the allocator's lock at
/// the moment of the clone, and the child would wait for it forever.
pub(crate) fn ensure_single_threaded() -> io::Result<()> {
    let threads = std::fs::read_dir("/proc/self/task")?.count();
    if threads != 1 {
        return Err(io::Error::other(format!(
            "this process has {threads} threads; a warm sandbox host must have one, because its \
             spares allocate after they are cloned"
        )));
    }
    Ok(())
}

/// Clones a child (with `flags`: namespaces and the exit signal) that runs `child` on `data`
/// and may allocate: only from a process of one thread (checked here, else an error), where no
/// other thread can hold the allocator's or any other lock at the moment of the clone. The
/// parent gets the child's pid and `data` back; the child never returns.
pub(crate) fn clone_allocating<T>(
    flags: libc::c_int,
    data: T,
    child: fn(T) -> !,
) -> io::Result<(libc::pid_t, T)> {
    ensure_single_threaded()?;
    // SAFETY: a fork-like clone of a process with one thread (checked above): the child's copy
    // of memory holds no lock another thread took, so it may allocate; it runs `child`, which
    // never returns into the parent's code.
    let pid = unsafe { fork_clone(flags) };
    if pid == 0 {
        child(data);
    }
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((libc::pid_t::try_from(pid).map_err(io::Error::other)?, data))
}

/// Clones a child into a new user namespace that exits at once, and reaps it: whether this
/// process may create user namespaces.
pub(crate) fn clone_user_namespace() -> io::Result<()> {
    // SAFETY: a fork-like clone whose child immediately _exits (touching nothing it shares
    // with this process); the parent reaps it.
    let pid = unsafe { fork_clone(libc::CLONE_NEWUSER | libc::SIGCHLD) };
    if pid == 0 {
        child::exit(0);
    }
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    reap(libc::pid_t::try_from(pid).map_err(io::Error::other)?);
    Ok(())
}

/// The kernel's Landlock ABI version (0 when Landlock is unavailable). The `landlock` crate
/// keeps the number to itself.
pub(crate) fn landlock_abi() -> i32 {
    // SAFETY: LANDLOCK_CREATE_RULESET_VERSION with a null attribute and size 0 only queries.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    i32::try_from(v.max(0)).unwrap_or(0)
}

/// `unshare(flags)` of this process, checked to be single-threaded first (a user namespace
/// needs it, and the namespaces must be the whole process's).
pub(crate) fn unshare(flags: libc::c_int) -> io::Result<()> {
    ensure_single_threaded()?;
    let flags = rustix::thread::UnshareFlags::from_bits_retain(flags.cast_unsigned());
    // SAFETY: the process has one thread (checked above), so no other thread can observe the
    // change; the flags never include CLONE_FILES.
    unsafe { rustix::thread::unshare_unsafe(flags) }.map_err(io::Error::from)
}

fn rustix_pid(pid: libc::pid_t) -> Option<rustix::process::Pid> {
    rustix::process::Pid::from_raw(pid)
}

/// Options of every wait on a child we cloned: whatever its exit signal (`__WALL`).
fn wait_all() -> rustix::process::WaitOptions {
    rustix::process::WaitOptions::from_bits_retain(libc::__WALL.cast_unsigned())
}

/// A pidfd of our own unreaped child `pid`.
pub(crate) fn pidfd(pid: libc::pid_t) -> io::Result<OwnedFd> {
    let pid = rustix_pid(pid).ok_or(io::ErrorKind::InvalidInput)?;
    Ok(rustix::process::pidfd_open(
        pid,
        rustix::process::PidfdFlags::empty(),
    )?)
}

/// SIGKILL to our own unreaped child `pid` (its pid cannot have been reused).
pub(crate) fn kill(pid: libc::pid_t) {
    if let Some(p) = rustix_pid(pid) {
        let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
    }
}

/// Waits for our own child `pid` to end and reaps it.
pub(crate) fn reap(pid: libc::pid_t) {
    if let Some(p) = rustix_pid(pid) {
        let _ = rustix::process::waitpid(Some(p), wait_all());
    }
}

/// Reaps our own child `pid` if it has ended; true when it is gone (reaped now, or not ours).
pub(crate) fn try_reap(pid: libc::pid_t) -> bool {
    let Some(p) = rustix_pid(pid) else {
        return true;
    };
    !matches!(
        rustix::process::waitpid(Some(p), wait_all() | rustix::process::WaitOptions::NOHANG),
        Ok(None)
    )
}

/// Kills and reaps our own child `pid`.
pub(crate) fn kill_and_reap(pid: libc::pid_t) {
    kill(pid);
    reap(pid);
}

/// An empty host directory to mount the new root on (only inside the sandbox's mount
/// namespace; on the host it stays empty and is removed afterwards). `/dev/shm` is preferred:
/// a tmpfs, so creating and removing it costs no disk work.
pub(crate) fn new_root_dir() -> Result<tempfile::TempDir, SandboxError> {
    let shm = Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(dir) = tempfile::Builder::new()
            .prefix("airlock-root-")
            .tempdir_in(shm)
    {
        return Ok(dir);
    }
    tempfile::Builder::new()
        .prefix("airlock-root-")
        .tempdir()
        .map_err(|e| {
            SandboxError::io(
                "creating the new root in the temporary directory",
                Path::new("airlock-root-*"),
                e,
            )
        })
}

/// One run, independent of where it is launched: the validated spec and the spec's own
/// settings. A cold run builds it in-process; a warm host receives it over its socket.
#[derive(Clone)]
pub(crate) struct RunRequest {
    pub(crate) v: Validated,
    pub(crate) argv: Vec<OsString>,
    pub(crate) home_binds: Vec<PathBuf>,
    pub(crate) ro_binds: Vec<PathBuf>,
    /// Never on the wire: a run with read-write binds is always cold.
    pub(crate) rw_binds: Vec<PathBuf>,
    /// Never on the wire either: a run with layered binds is always cold.
    pub(crate) layered_binds: Vec<crate::LayeredBind>,
    /// A granted run ([`crate::net`]): the port of the proxy's listener PID 1 makes and passes
    /// out (the socket travels with the run's descriptors, after the five pipes).
    pub(crate) net_port: Option<u16>,
    pub(crate) network: bool,
    pub(crate) allow_loopback: bool,
    pub(crate) limits: crate::Limits,
    /// Which ceilings the run's control group enforces ([`CG_MEMORY`], [`CG_CPU_TIME`]); the
    /// others fall back to rlimits.
    pub(crate) cgroup_mask: u64,
}

/// Most control groups a run joins (one per hierarchy).
pub(crate) const MAX_CGROUPS: usize = 4;

impl RunRequest {
    /// Checks what [`validate`] guarantees, on the request itself: a fresh request passes it
    /// before it runs, and a warm host or spare passes every request it decodes, so a request
    /// that no spec could have produced (forged, or corrupted on the way) is refused.
    ///
    /// The workspace, layers, upper and work directories exist, are canonical and apart from
    /// one another; `cwd` is normalized and inside the workspace; `home` and every bind are
    /// normalized absolute paths; masks lie inside the workspace or `home`; the environment
    /// has no loader or secret-looking variable and no malformed name; nothing holds a NUL.
    pub(crate) fn check(&self) -> Result<(), SandboxError> {
        let v = &self.v;
        let canonical_dir = |what: &str, p: &Path| -> Result<(), SandboxError> {
            if !is_canonical_dir(p) {
                return Err(SandboxError::InvalidSpec(format!(
                    "the {what} {} is not a canonical directory",
                    p.display()
                )));
            }
            Ok(())
        };
        canonical_dir("workspace", &v.workspace)?;
        canonical_dir("upper directory", &v.upper)?;
        canonical_dir("work directory", &v.work)?;
        for l in &v.layers {
            canonical_dir("staged layer", l)?;
        }
        for b in &v.cache_binds {
            canonical_dir("cache directory", &b.host)?;
        }
        self.check_shape()
    }

    /// The part of [`RunRequest::check`] that reads no file system: what a spare re-checks
    /// once it has pivoted into its new root, where the caller's paths do not resolve.
    pub(crate) fn check_shape(&self) -> Result<(), SandboxError> {
        let bad = |what: String| Err(SandboxError::InvalidSpec(what));
        let v = &self.v;
        if self.argv.is_empty() {
            return bad("argv is empty".into());
        }
        let normal = |p: &Path| p.is_absolute() && plan::normalize(p).as_deref() == Some(p);
        for p in [&v.workspace, &v.upper, &v.work]
            .into_iter()
            .chain(&v.layers)
        {
            if !normal(p) {
                return bad(format!("{} is not a plain absolute path", p.display()));
            }
        }
        let mut named: Vec<(&str, &Path)> = vec![
            ("workspace", &v.workspace),
            ("upper directory", &v.upper),
            ("work directory", &v.work),
        ];
        named.extend(v.layers.iter().map(|l| ("staged layer", l.as_path())));
        check_not_nested(&named)?;
        if !normal(&v.cwd) || !v.cwd.starts_with(&v.workspace) {
            return bad(format!(
                "cwd {} is outside the workspace {}",
                v.cwd.display(),
                v.workspace.display()
            ));
        }
        if let Some(h) = &v.home
            && !normal(h)
        {
            return bad(format!("home {} is not absolute", h.display()));
        }
        for m in &v.masked {
            let in_ws = m.starts_with(&v.workspace) && *m != v.workspace;
            let in_home = v.home.as_ref().is_some_and(|h| m.starts_with(h) && m != h);
            if !normal(m) || !(in_ws || in_home) {
                return bad(format!(
                    "masked path {} is neither inside the workspace nor under $HOME",
                    m.display()
                ));
            }
        }
        for b in &self.rw_binds {
            if !normal(b) || b.starts_with(&v.workspace) {
                return bad(format!(
                    "read-write bind {} is not a plain absolute path outside the workspace",
                    b.display()
                ));
            }
        }
        for l in &self.layered_binds {
            let outside = |p: &Path| normal(p) && !p.starts_with(&v.workspace);
            if !(outside(&l.path) && outside(&l.upper) && outside(&l.work))
                || l.upper.starts_with(&l.path)
                || l.work.starts_with(&l.path)
            {
                return bad(format!(
                    "layered bind {} (upper {}, work {}): every path must be plain, absolute, outside the workspace, and the layers outside the bound directory",
                    l.path.display(),
                    l.upper.display(),
                    l.work.display()
                ));
            }
        }
        for b in self.home_binds.iter().chain(&self.ro_binds) {
            let abs = match &v.home {
                Some(h) if b.is_relative() => h.join(b),
                _ => b.clone(),
            };
            if !normal(&abs) {
                return bad(format!("bind {} is not a plain absolute path", b.display()));
            }
        }
        check_cache_binds(v)?;
        for (k, _) in &v.env {
            if k.is_empty() || k.as_bytes().contains(&b'=') || env::is_forbidden(k) {
                return bad(format!(
                    "the variable {} may not be passed into the sandbox",
                    k.to_string_lossy()
                ));
            }
        }
        let strings = v
            .env
            .iter()
            .flat_map(|(k, x)| [k.as_os_str(), x.as_os_str()]);
        let paths = [&v.workspace, &v.upper, &v.work, &v.cwd]
            .into_iter()
            .chain(&v.layers)
            .chain(&v.home)
            .chain(&v.masked)
            .chain(&self.home_binds)
            .chain(&self.ro_binds)
            .chain(v.cache_binds.iter().flat_map(|b| [&b.host, &b.inside]))
            .chain(&self.rw_binds)
            .chain(
                self.layered_binds
                    .iter()
                    .flat_map(|l| [&l.path, &l.upper, &l.work]),
            )
            .map(|p| p.as_os_str());
        if strings
            .chain(paths)
            .chain(self.argv.iter().map(|a| a.as_os_str()))
            .any(|s| s.as_bytes().contains(&0))
        {
            return bad("a path, argument or variable holds a NUL byte".into());
        }
        Ok(())
    }

    /// Same mounts up to the workspace overlay (what a spare prepares ahead of a request).
    pub(crate) fn same_shape(&self, other: &RunRequest) -> bool {
        let (a, b) = (&self.v, &other.v);
        a.workspace == b.workspace
            && a.layers == b.layers
            && a.upper == b.upper
            && a.work == b.work
            && a.home == b.home
            && self.home_binds == other.home_binds
            && self.ro_binds == other.ro_binds
            && a.cache_binds == b.cache_binds
            && self.network == other.network
            && self.limits.tmp_size == other.limits.tmp_size
            && self.limits.nproc == other.limits.nproc
    }

    pub(crate) fn new(spec: &SandboxSpec, v: Validated) -> RunRequest {
        RunRequest {
            v,
            argv: spec.argv.clone(),
            home_binds: spec.home_binds.clone(),
            ro_binds: spec.ro_binds.clone(),
            rw_binds: spec.rw_binds.clone(),
            layered_binds: spec.layered_binds.clone(),
            net_port: spec.net.as_ref().map(|a| a.port),
            network: spec.network,
            allow_loopback: spec.allow_loopback,
            limits: spec.limits.clone(),
            cgroup_mask: 0,
        }
    }

    /// The mount plan of this run under `newroot`: whole, or (`warm`) only the run's steps.
    pub(crate) fn plan(&self, newroot: &Path, warm: bool) -> Result<Vec<plan::Step>, SandboxError> {
        self.plan_with(newroot, warm, None)
    }

    /// [`RunRequest::plan`] with the overlay's directories reached through `sources`.
    pub(crate) fn plan_with(
        &self,
        newroot: &Path,
        warm: bool,
        sources: Option<&plan::Sources>,
    ) -> Result<Vec<plan::Step>, SandboxError> {
        // RLIMIT_NPROC never binds a sandbox whose uid maps to the host's root; the pid
        // namespace's pid_max does. Pids below 300 are used only once (allocation wraps to
        // 300), so add them.
        let pid_max = self.limits.nproc.max(1) + 300;
        let input = PlanInput {
            newroot,
            workspace: &self.v.workspace,
            layers: &self.v.layers,
            upper: &self.v.upper,
            work: &self.v.work,
            home: self.v.home.as_deref(),
            home_binds: &self.home_binds,
            ro_binds: &self.ro_binds,
            cache_binds: &self.v.cache_binds,
            rw_binds: &self.rw_binds,
            layered_binds: &self.layered_binds,
            masked: &self.v.masked,
            tmp_size: self.limits.tmp_size,
            pid_max,
            sources,
        };
        if warm {
            plan::build_run(&input)
        } else {
            plan::build(&input)
        }
    }
}

/// The command's ends of its descriptors.
pub(crate) struct ChildIo {
    pub(crate) stdin: OwnedFd,
    pub(crate) stdout: OwnedFd,
    pub(crate) stderr: OwnedFd,
    pub(crate) err_w: OwnedFd,
    pub(crate) status_w: OwnedFd,
    /// `cgroup.procs` of the run's control groups: PID 1 joins them first thing.
    pub(crate) cgroups: Vec<OwnedFd>,
    /// A granted run: PID 1's end of the socket pair that carries the proxy's listener out
    /// (cold runs only), with the listener's port.
    pub(crate) net: Option<(OwnedFd, u16)>,
}

impl ChildIo {
    /// The descriptors in the order they travel to a warm host: stdin, stdout, stderr, the
    /// failure and status pipes, the proxy's socket pair end of a granted run, then the control
    /// groups' `cgroup.procs`.
    pub(crate) fn fds(&self) -> Vec<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        [
            &self.stdin,
            &self.stdout,
            &self.stderr,
            &self.err_w,
            &self.status_w,
        ]
        .into_iter()
        .chain(self.net.as_ref().map(|(f, _)| f))
        .chain(&self.cgroups)
        .map(|f| f.as_fd())
        .collect()
    }
}

/// The caller's ends.
pub(crate) struct ParentIo {
    pub(crate) stdin: OwnedFd,
    pub(crate) stdout: OwnedFd,
    pub(crate) stderr: OwnedFd,
    pub(crate) err_r: OwnedFd,
    pub(crate) status_r: OwnedFd,
}

pub(crate) fn io_pipes() -> Result<(ChildIo, ParentIo), SandboxError> {
    let (stdin_r, stdin_w) = pipe()?;
    let (stdout_r, stdout_w) = pipe()?;
    let (stderr_r, stderr_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let (status_r, status_w) = pipe()?;
    Ok((
        ChildIo {
            stdin: stdin_r,
            stdout: stdout_w,
            stderr: stderr_w,
            err_w,
            status_w,
            cgroups: Vec::new(),
            net: None,
        },
        ParentIo {
            stdin: stdin_w,
            stdout: stdout_r,
            stderr: stderr_r,
            err_r,
            status_r,
        },
    ))
}

/// What a warm host's spare replayed ahead of its request: the run's steps up to the workspace
/// overlay (their descriptions, to check the request has the same shape), then `pivot_root`.
/// The overlay's directories stay reachable as `sources`, bind mounts under `hide`, which the
/// run covers once the overlay is mounted.
pub(crate) struct Prepared {
    pub(crate) replayed: Vec<String>,
    pub(crate) sources: plan::Sources,
    pub(crate) hide: PathBuf,
}

/// A launched sandbox: its PID 1, and the write end of the pipe whose closing tells a PID 1
/// that started after its parent died to give up. Keep it until PID 1 is reaped.
pub(crate) struct Launched {
    pub(crate) pid: libc::pid_t,
    pub(crate) alive_w: OwnedFd,
}

/// `clone(2)` like `fork`, with `flags` (namespaces and the exit signal) and no new stack: the
/// child runs on a copy of the caller's memory. Returns 0 in the child, the child's pid in the
/// parent, or -1 (errno set).
///
/// # Safety
///
/// As for `fork` in a process that may hold locks: the child must make only
/// async-signal-safe calls until it execs or `_exit`s, and must never return into code that
/// assumes it is the parent.
pub(crate) unsafe fn fork_clone(flags: libc::c_int) -> libc::c_long {
    // SAFETY: the caller upholds fork's contract for the child (see above).
    unsafe {
        libc::syscall(
            libc::SYS_clone,
            libc::c_ulong::from(flags.cast_unsigned()),
            0usize,
            0usize,
            0usize,
            0usize,
        )
    }
}

/// The namespaces every run gets fresh, cold or warm: mount, pid, ipc, uts and (network off)
/// net. A warm host shares only its user namespace and its mount tree's base between runs.
pub(crate) fn run_namespaces(network: bool) -> libc::c_int {
    let mut flags =
        libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
    if !network {
        flags |= libc::CLONE_NEWNET;
    }
    flags
}

/// Prepares everything the child needs and clones it. Cold (`warm == false`): a fresh user
/// namespace, the [`run_namespaces`] and the whole plan. Warm: from inside a host that holds
/// the user namespace and has replayed the base steps under `newroot`; the clone takes the
/// fresh [`run_namespaces`] (its mount namespace a copy of the host's) and replays the run's
/// steps only.
pub(crate) fn launch(
    req: &RunRequest,
    newroot: &Path,
    warm: bool,
    io: ChildIo,
) -> Result<Launched, SandboxError> {
    let (alive_r, alive_w) = pipe()?;
    let pid = with_child_ctx(
        req,
        newroot,
        warm,
        false,
        &io,
        alive_r.as_raw_fd(),
        None,
        |ctx| {
            let mut flags = run_namespaces(req.network) | libc::SIGCHLD;
            if !warm {
                flags |= libc::CLONE_NEWUSER;
            }
            // SAFETY: a fork-like clone (no new stack: the child runs on a copy of ours). The child
            // only executes child::init_main, which never returns and makes only
            // async-signal-safe calls on data prepared by with_child_ctx.
            let pid = unsafe { fork_clone(flags) };
            if pid == 0 {
                child::init_main(ctx);
            }
            if pid < 0 {
                return Err(SandboxError::sys("clone into new namespaces"));
            }
            libc::pid_t::try_from(pid).map_err(|e| SandboxError::Sys {
                action: "clone into new namespaces",
                source: io::Error::other(e),
            })
        },
    )?;
    drop(io);
    drop(alive_r);
    crate::timing::mark("sandbox: cloned");
    Ok(Launched { pid, alive_w })
}

/// Prepares everything PID 1 needs for `req` (the plan, the Landlock ruleset, the seccomp
/// program, argv/envp, rlimits, the command's stack) and hands it to `f`, which either clones a
/// PID 1 (a cold run, or a warm host without a spare) or already is one (a warm host's spare).
#[allow(clippy::too_many_arguments)]
pub(crate) fn with_child_ctx<T>(
    req: &RunRequest,
    newroot: &Path,
    warm: bool,
    namespaces_ready: bool,
    io: &ChildIo,
    alive_r: RawFd,
    prepared: Option<&Prepared>,
    f: impl FnOnce(&ChildCtx<'_>) -> Result<T, SandboxError>,
) -> Result<T, SandboxError> {
    let v = &req.v;
    let (steps, first_step) = match prepared {
        None => (req.plan(newroot, warm)?, 0),
        Some(p) => {
            let mut steps = req.plan_with(Path::new("/"), true, Some(&p.sources))?;
            let hide = cstring(p.hide.as_os_str().as_bytes())?;
            steps.push(plan::Step {
                op: plan::Op::Tmpfs {
                    dst: hide.clone(),
                    data: cstring(b"mode=0555,size=4k")?,
                },
                what: "covering the overlay's sources".into(),
                phase: plan::Phase::Run,
            });
            steps.push(plan::Step {
                op: plan::Op::SetAttr {
                    path: hide,
                    set: plan::ATTR_RDONLY | plan::ATTR_NOSUID | plan::ATTR_NODEV,
                    recursive: false,
                },
                what: "making the cover read-only".into(),
                phase: plan::Phase::Run,
            });
            // Everything before the overlay was replayed ahead of the request, for the same
            // shape; anything else means the spare is not this run's.
            let first = steps
                .iter()
                .position(|s| matches!(s.op, plan::Op::Overlay { .. }))
                .filter(|&i| {
                    i == p.replayed.len()
                        && steps[..i]
                            .iter()
                            .zip(&p.replayed)
                            .all(|(a, b)| a.what == *b)
                })
                .ok_or_else(|| {
                    SandboxError::InvalidSpec("the prepared sandbox does not fit this run".into())
                })?;
            (steps, first)
        }
    };
    crate::timing::mark("sandbox: mount plan");

    // Inet sockets are never refused here: with the network off the run has a network
    // namespace of its own whose only interface is `lo`, so a socket binds and connects only
    // within the run (a test's local server); a connect elsewhere fails at once (ENETUNREACH)
    // without a packet leaving. (The Landlock tier, which has no namespace, refuses them:
    // `tier::landlock`.)
    let block_inet = false;
    let mut writable: Vec<&Path> = vec![&v.workspace, Path::new("/tmp"), Path::new("/dev/shm")];
    if let Some(h) = &v.home {
        writable.push(h);
    }
    writable.extend(v.cache_binds.iter().map(|b| b.inside.as_path()));
    writable.extend(req.rw_binds.iter().map(PathBuf::as_path));
    writable.extend(req.layered_binds.iter().map(|l| l.path.as_path()));
    let landlock = confine::landlock_plan(landlock_abi(), &writable, block_inet)?;
    let bpf = confine::seccomp_program(block_inet)?;
    crate::timing::mark("sandbox: landlock + seccomp prepared");

    let argv_c: Vec<CString> = req
        .argv
        .iter()
        .map(|a| cstring(a.as_bytes()))
        .collect::<Result<_, _>>()?;
    let mut argv_p: Vec<*const libc::c_char> = argv_c.iter().map(|c| c.as_ptr()).collect();
    argv_p.push(std::ptr::null());
    let env_c: Vec<CString> = v
        .env
        .iter()
        .map(|(k, val)| {
            let mut kv = k.clone().into_vec();
            kv.push(b'=');
            kv.extend_from_slice(val.as_bytes());
            cstring(&kv)
        })
        .collect::<Result<_, _>>()?;
    let mut env_p: Vec<*const libc::c_char> = env_c.iter().map(|c| c.as_ptr()).collect();
    env_p.push(std::ptr::null());
    let path_var = v
        .env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, p)| p.as_os_str());
    let candidates = plan::exec_candidates(&req.argv[0], path_var)?;
    if candidates.is_empty() {
        return Err(SandboxError::Exec {
            program: req.argv[0].clone(),
            source: io::Error::from_raw_os_error(libc::ENOENT),
        });
    }

    let rlimits = rlimits_for(req);
    let cgroup_procs: Vec<RawFd> = io.cgroups.iter().map(|f| f.as_raw_fd()).collect();

    let (uid, gid) = (
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    );
    let uid_map = cstring(format!("0 {uid} 1").as_bytes())?;
    let gid_map = cstring(format!("0 {gid} 1").as_bytes())?;
    let newroot_c = cstring(newroot.as_os_str().as_bytes())?;
    let cwd_c = cstring(v.cwd.as_os_str().as_bytes())?;
    // The command's process runs on this stack between its clone and its exec.
    let mut command_stack = vec![0u8; 256 << 10];
    let ctx = ChildCtx {
        steps: &steps,
        warm,
        first_step,
        pivoted: prepared.is_some(),
        namespaces_ready,
        newroot: &newroot_c,
        uid_map: &uid_map,
        gid_map: &gid_map,
        private_net: !req.network,
        cwd: &cwd_c,
        candidates: &candidates,
        argv: &argv_p,
        envp: &env_p,
        rlimits: &rlimits,
        cgroup_procs: &cgroup_procs,
        landlock_fd: landlock.ruleset.as_raw_fd(),
        landlock_rules: &landlock.rules,
        bpf: &bpf,
        stdin: io.stdin.as_raw_fd(),
        stdout: io.stdout.as_raw_fd(),
        stderr: io.stderr.as_raw_fd(),
        err_w: io.err_w.as_raw_fd(),
        status_w: io.status_w.as_raw_fd(),
        alive_r,
        net_w: io.net.as_ref().map_or(-1, |(f, _)| f.as_raw_fd()),
        net_port: io.net.as_ref().map_or(0, |(_, p)| *p),
        stack: command_stack.as_mut_ptr(),
        stack_len: command_stack.len(),
    };

    f(&ctx)
}

/// The rlimits of the command: (resource, soft, hard), held to the caller's own hard limits.
/// Memory and CPU time are rlimits only when the run's control group does not enforce them.
fn rlimits_for(req: &RunRequest) -> Vec<(Resource, u64, u64)> {
    let l = &req.limits;
    // One file can never be larger than everything the run may write.
    let fsize = l.fsize.min(l.upper_bytes);
    let mut rlimits: Vec<(Resource, u64, u64)> = vec![
        (libc::RLIMIT_CORE, 0, 0),
        (libc::RLIMIT_NOFILE, l.nofile, l.nofile),
        (libc::RLIMIT_FSIZE, fsize, fsize),
        (libc::RLIMIT_NPROC, l.nproc, l.nproc),
    ];
    if let Some(a) = l.address_space {
        rlimits.push((libc::RLIMIT_AS, a, a));
    }
    if let Some(m) = l.memory
        && req.cgroup_mask & CG_MEMORY == 0
    {
        // RLIMIT_DATA counts heap and private writable mappings, not address-space
        // reservations (which RLIMIT_AS would, breaking runtimes that reserve much).
        rlimits.push((libc::RLIMIT_DATA, m, m));
    }
    if let Some(c) = l.cpu_seconds
        && req.cgroup_mask & CG_CPU_TIME == 0
    {
        // SIGXCPU at the ceiling (reported as the CPU ceiling), SIGKILL a second later.
        rlimits.push((libc::RLIMIT_CPU, c, c.saturating_add(1)));
    }
    for (res, soft, hard) in &mut rlimits {
        *hard = (*hard).min(hard_limit(*res));
        *soft = (*soft).min(*hard);
    }
    rlimits
}

/// True when `p` is a directory and its own canonical path: absolute, without `.`, `..` or a
/// repeated separator, and reached through no symlink. One `openat2(RESOLVE_NO_SYMLINKS)` where
/// the kernel has it (a warm host checks a dozen paths per run); `realpath` otherwise.
fn is_canonical_dir(p: &Path) -> bool {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    if !p.is_absolute() || plan::normalize(p).as_deref() != Some(p) {
        return false;
    }
    match rustix::fs::openat2(
        rustix::fs::CWD,
        p,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    ) {
        Ok(_) => true,
        Err(rustix::io::Errno::NOSYS) => p.canonicalize().ok().as_deref() == Some(p) && p.is_dir(),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::is_canonical_dir;

    /// The warm host's check of the paths a request names: a real directory by its own path.
    #[test]
    fn a_canonical_directory_is_one_reached_by_its_own_path() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("d")).unwrap();
        std::fs::write(root.join("f"), "x").unwrap();
        std::os::unix::fs::symlink(root.join("d"), root.join("l")).unwrap();
        assert!(is_canonical_dir(&root.join("d")));
        assert!(!is_canonical_dir(&root.join("l")), "a symlink");
        std::fs::create_dir(root.join("d/sub")).unwrap();
        assert!(is_canonical_dir(&root.join("d/sub")));
        assert!(!is_canonical_dir(&root.join("l/sub")), "below a symlink");
        assert!(!is_canonical_dir(&root.join("l/..").join("d")), "with `..`");
        assert!(!is_canonical_dir(&root.join("f")), "a file");
        assert!(!is_canonical_dir(&root.join("missing")));
        assert!(!is_canonical_dir(std::path::Path::new("d")), "relative");
    }
}
