//! Code that runs after `clone`, in the sandbox's PID 1 and in the command's process (PID 2).
//!
//! The parent may be multi-threaded, so from the moment of `clone` only async-signal-safe work is
//! allowed: raw system calls over data prepared beforehand. Nothing here allocates, locks, or
//! returns; every path ends in `execve` or `_exit`. Failures are reported to the parent as a
//! fixed-size record on the error pipe: (step kind, index, errno).

use std::ffi::{CStr, CString};
use std::os::fd::RawFd;

use libc::c_char;

use crate::confine::PathRule;
use crate::plan::{Op, Step};

/// Steps outside the mount plan, reported by number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum SetupStep {
    ParentDeath = 1,
    Fds,
    UidMap,
    Hostname,
    Loopback,
    PivotRoot,
    Fork,
    Chdir,
    Rlimit,
    NoNewPrivs,
    LandlockRule,
    LandlockRestrict,
    Seccomp,
    Exec,
    Prepare,
    Cgroup,
    NetListener,
}

impl SetupStep {
    pub(crate) fn from_u32(v: u32) -> Option<SetupStep> {
        use SetupStep::*;
        [
            ParentDeath,
            Fds,
            UidMap,
            Hostname,
            Loopback,
            PivotRoot,
            Fork,
            Chdir,
            Rlimit,
            NoNewPrivs,
            LandlockRule,
            LandlockRestrict,
            Seccomp,
            Exec,
            Prepare,
            Cgroup,
            NetListener,
        ]
        .into_iter()
        .find(|s| *s as u32 == v)
    }

    pub(crate) fn describe(self) -> &'static str {
        match self {
            SetupStep::ParentDeath => "arranging to die with the parent",
            SetupStep::Fds => "setting up file descriptors",
            SetupStep::UidMap => "writing the uid/gid maps",
            SetupStep::Hostname => "setting the hostname",
            SetupStep::Loopback => "bringing up the loopback interface",
            SetupStep::PivotRoot => "pivoting into the new root",
            SetupStep::Fork => "forking the command",
            SetupStep::Chdir => "changing to the working directory",
            SetupStep::Rlimit => "setting resource limits",
            SetupStep::NoNewPrivs => "setting no_new_privs",
            SetupStep::LandlockRule => "adding a Landlock rule",
            SetupStep::LandlockRestrict => "enforcing Landlock",
            SetupStep::Seccomp => "loading the seccomp filter",
            SetupStep::Exec => "executing the command",
            SetupStep::Prepare => "preparing the run in the warm sandbox host",
            SetupStep::Cgroup => "joining the run's control group",
            SetupStep::NetListener => "passing the network proxy's listening socket out",
        }
    }
}

/// The libc type naming an rlimit resource.
pub(crate) type Resource = libc::__rlimit_resource_t;

/// Error record kinds.
pub(crate) const KIND_PLAN: u32 = 1;
pub(crate) const KIND_STAGE: u32 = 2;

/// Everything the child needs, prepared by the parent.
pub(crate) struct ChildCtx<'a> {
    pub(crate) steps: &'a [Step],
    /// Started by a warm host ([`crate::host`]): the user namespace and the base steps exist
    /// already; only the run's steps are replayed.
    pub(crate) warm: bool,
    /// Steps before this index were already replayed (a warm host's spare prepares the run's
    /// mounts up to the workspace overlay ahead of the request).
    pub(crate) first_step: usize,
    /// Already pivoted into the new root (a prepared spare): no `pivot_root` here.
    pub(crate) pivoted: bool,
    /// The hostname and loopback of this run's fresh namespaces are set already (a spare does
    /// it ahead of its request).
    pub(crate) namespaces_ready: bool,
    pub(crate) newroot: &'a CStr,
    pub(crate) uid_map: &'a CStr,
    pub(crate) gid_map: &'a CStr,
    pub(crate) private_net: bool,
    pub(crate) cwd: &'a CStr,
    pub(crate) candidates: &'a [CString],
    /// Null-terminated.
    pub(crate) argv: &'a [*const c_char],
    /// Null-terminated.
    pub(crate) envp: &'a [*const c_char],
    /// (resource, soft, hard).
    pub(crate) rlimits: &'a [(Resource, u64, u64)],
    /// `cgroup.procs` of the run's control groups, opened by the caller: PID 1 writes `0`
    /// (itself) to each before anything else, so every process of the run is inside.
    pub(crate) cgroup_procs: &'a [RawFd],
    pub(crate) landlock_fd: RawFd,
    pub(crate) landlock_rules: &'a [PathRule],
    pub(crate) bpf: &'a [libc::sock_filter],
    pub(crate) stdin: RawFd,
    pub(crate) stdout: RawFd,
    pub(crate) stderr: RawFd,
    pub(crate) err_w: RawFd,
    pub(crate) status_w: RawFd,
    pub(crate) alive_r: RawFd,
    /// A granted run ([`crate::net`]): the socket over which PID 1 passes the proxy's
    /// listening socket, made in the run's network namespace, to the caller; -1 otherwise.
    pub(crate) net_w: RawFd,
    /// The port of that listening socket on 127.0.0.1.
    pub(crate) net_port: u16,
    /// Stack for the command's process until it execs (see `init_main`).
    pub(crate) stack: *mut u8,
    pub(crate) stack_len: usize,
}

/// Entry point of the command's process, on its own stack.
extern "C" fn command_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the ChildCtx PID 1 passed to clone; it outlives this process's use of
    // it (PID 1 is suspended until the exec, and the data itself lives until PID 1 exits).
    let ctx = unsafe { &*(arg as *const ChildCtx<'_>) };
    command_main(ctx)
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Reports a failure and exits. Async-signal-safe.
fn fail(ctx: &ChildCtx<'_>, kind: u32, index: u32, err: i32) -> ! {
    report_and_exit(ctx.err_w, kind, index, err)
}

/// Makes `cmd`'s process apply `limits` (resource, soft, hard) between its fork and its exec,
/// each hard limit held to the one it inherits (the degraded backend's only confinement of
/// memory and CPU time).
pub(crate) fn rlimits_before_exec(
    cmd: &mut std::process::Command,
    limits: Vec<(Resource, u64, u64)>,
) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs between fork and exec and only calls getrlimit and setrlimit,
    // which are async-signal-safe; it touches no allocation or lock.
    unsafe {
        cmd.pre_exec(move || {
            for &(res, soft, hard) in &limits {
                let mut cur = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                libc::getrlimit(res, &raw mut cur);
                let hard = hard.min(cur.rlim_max);
                libc::setrlimit(
                    res,
                    &libc::rlimit {
                        rlim_cur: soft.min(hard),
                        rlim_max: hard,
                    },
                );
            }
            Ok(())
        });
    }
}

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Confines a plain child process just before `execve` (the Landlock tier): the run's control
/// groups (`cgroups`: their `cgroup.procs`), no new privileges, no capabilities, the Landlock domain of `ruleset` (its rules were added by the parent), then the
/// seccomp `bpf` program. A step that fails fails the spawn with its errno, so the command
/// never runs unconfined.
pub(crate) fn confine_before_exec(
    cmd: &mut std::process::Command,
    ruleset: RawFd,
    bpf: Vec<libc::sock_filter>,
    cgroups: Vec<RawFd>,
) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs between fork and exec and only makes the setsid, prctl,
    // landlock_restrict_self and seccomp system calls over data prepared before the fork
    // (`ruleset` and the `cgroups` descriptors stay open in the parent until the spawn
    // returns; `bpf` is owned by the closure); it allocates nothing and takes no lock.
    unsafe {
        cmd.pre_exec(move || {
            let Ok(len) = libc::c_ushort::try_from(bpf.len()) else {
                return Err(std::io::Error::from_raw_os_error(libc::E2BIG));
            };
            // A session of its own, so the command has no controlling terminal: it can neither
            // make itself the terminal's foreground group and read the operator's keystrokes
            // nor write to it. Its process group (the session's, id = its pid) is still what
            // the run is killed by.
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Join the run's control groups first ("0": this process), before anything runs.
            for &fd in &cgroups {
                if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            // No capabilities (the host's root keeps none: CAP_SYS_PTRACE would read other
            // processes' memory and environment through /proc): the bounding set (which fails
            // without CAP_SETPCAP, when there is nothing to drop), the ambient set, then the
            // process's own sets.
            for cap in 0..64 {
                libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
            }
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL,
                0,
                0,
                0,
            );
            let header = CapHeader {
                version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
                pid: 0,
            };
            let data = [CapData::default(); 2];
            if libc::syscall(libc::SYS_capset, &raw const header, data.as_ptr()) != 0
                || libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            let prog = libc::sock_fprog {
                len,
                filter: bpf.as_ptr().cast_mut(),
            };
            if libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0u32,
                &raw const prog,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Ends this process at once, without unwinding or running exit handlers (a clone child must
/// not flush or free what it shares with its parent's copy). Async-signal-safe.
pub(crate) fn exit(code: i32) -> ! {
    // SAFETY: _exit never returns and touches no user-space state.
    unsafe { libc::_exit(code) }
}

/// Writes the failure record (kind, index, errno) to `err_w` and exits. Async-signal-safe.
pub(crate) fn report_and_exit(err_w: RawFd, kind: u32, index: u32, err: i32) -> ! {
    let mut rec = [0u8; 12];
    rec[..4].copy_from_slice(&kind.to_ne_bytes());
    rec[4..8].copy_from_slice(&index.to_ne_bytes());
    rec[8..].copy_from_slice(&err.to_ne_bytes());
    // SAFETY: writing a stack buffer to an fd we own, then exiting without unwinding.
    unsafe {
        libc::write(err_w, rec.as_ptr().cast(), rec.len());
        libc::_exit(126)
    }
}

fn fail_stage(ctx: &ChildCtx<'_>, stage: SetupStep) -> ! {
    fail(ctx, KIND_STAGE, stage as u32, errno())
}

/// Writes `data` to the file at `path`. Returns false on failure (errno set).
fn write_file(path: &CStr, data: &[u8]) -> bool {
    // SAFETY: open/write/close on a NUL-terminated path and a live buffer.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        libc::close(fd);
        usize::try_from(n).is_ok_and(|n| n == data.len())
    }
}

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// Runs one plan step. Returns false on failure (errno set).
pub(crate) fn run_op(op: &Op) -> bool {
    let null = std::ptr::null::<c_char>();
    // SAFETY: every pointer is a NUL-terminated CString owned by the plan, alive for the call.
    unsafe {
        match op {
            Op::MakePrivate => {
                libc::mount(
                    null,
                    c"/".as_ptr(),
                    null,
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ) == 0
            }
            Op::Tmpfs { dst, data } => {
                libc::mount(
                    c"tmpfs".as_ptr(),
                    dst.as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    data.as_ptr().cast(),
                ) == 0
            }
            Op::Mkdir { path } => libc::mkdir(path.as_ptr(), 0o755) == 0 || errno() == libc::EEXIST,
            Op::Touch { path } => {
                let fd = libc::open(
                    path.as_ptr(),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC,
                    0o644,
                );
                fd >= 0 && libc::close(fd) == 0
            }
            Op::Symlink { target, path } => {
                libc::symlink(target.as_ptr(), path.as_ptr()) == 0 || errno() == libc::EEXIST
            }
            Op::Bind {
                src,
                dst,
                recursive,
            } => {
                let flags = libc::MS_BIND | if *recursive { libc::MS_REC } else { 0 };
                libc::mount(src.as_ptr(), dst.as_ptr(), null, flags, std::ptr::null()) == 0
            }
            Op::SetAttr {
                path,
                set,
                recursive,
            } => {
                let attr = MountAttr {
                    attr_set: *set,
                    attr_clr: 0,
                    propagation: 0,
                    userns_fd: 0,
                };
                let flags = if *recursive { libc::AT_RECURSIVE } else { 0 };
                libc::syscall(
                    libc::SYS_mount_setattr,
                    libc::AT_FDCWD,
                    path.as_ptr(),
                    flags.cast_unsigned(),
                    &raw const attr,
                    std::mem::size_of::<MountAttr>(),
                ) == 0
            }
            Op::Overlay { dst, data } => {
                libc::mount(
                    c"overlay".as_ptr(),
                    dst.as_ptr(),
                    c"overlay".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    data.as_ptr().cast(),
                ) == 0
            }
            Op::Proc { dst } => {
                libc::mount(
                    c"proc".as_ptr(),
                    dst.as_ptr(),
                    c"proc".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    std::ptr::null(),
                ) == 0
            }
            Op::WriteOptional { path, data } => {
                write_file(path, data.as_bytes());
                true
            }
        }
    }
}

/// Closes every descriptor except those in `keep` (sorted, ascending, no duplicates).
fn close_all_except(keep: &[RawFd]) {
    let mut next: u32 = 0;
    for &fd in keep {
        let Ok(fd) = u32::try_from(fd) else {
            continue; // no descriptor is negative
        };
        if fd > next {
            // SAFETY: close_range on descriptors this process does not use.
            unsafe { libc::syscall(libc::SYS_close_range, next, fd - 1, 0u32) };
        }
        next = fd + 1;
    }
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_close_range, next, u32::MAX, 0u32) };
}

fn sort_small(fds: &mut [RawFd]) {
    for i in 1..fds.len() {
        let mut j = i;
        while j > 0 && fds[j - 1] > fds[j] {
            fds.swap(j - 1, j);
            j -= 1;
        }
    }
}

/// The sandbox's PID 1: finish the namespaces, build the root, fork the command, reap.
pub(crate) fn init_main(ctx: &ChildCtx<'_>) -> ! {
    // SAFETY: raw system calls on prepared data only; see the module comment.
    unsafe {
        for &fd in ctx.cgroup_procs {
            let n = libc::write(fd, b"0".as_ptr().cast(), 1);
            if n != 1 {
                fail_stage(ctx, SetupStep::Cgroup);
            }
            libc::close(fd);
        }
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
            fail_stage(ctx, SetupStep::ParentDeath);
        }
        reset_signals();
        if libc::dup2(ctx.stdin, 0) < 0
            || libc::dup2(ctx.stdout, 1) < 0
            || libc::dup2(ctx.stderr, 2) < 0
        {
            fail_stage(ctx, SetupStep::Fds);
        }
        let mut keep = [
            0,
            1,
            2,
            ctx.err_w,
            ctx.status_w,
            ctx.alive_r,
            ctx.landlock_fd,
            ctx.net_w,
        ];
        sort_small(&mut keep);
        close_all_except(&keep);
        // The parent may have died before PDEATHSIG was armed: the write end of the alive pipe
        // is then closed everywhere (our own inherited copy was just closed above).
        let mut pfd = libc::pollfd {
            fd: ctx.alive_r,
            events: libc::POLLIN,
            revents: 0,
        };
        if libc::poll(&raw mut pfd, 1, 0) != 0 {
            libc::_exit(125);
        }

        if !ctx.warm
            && (!write_file(c"/proc/self/setgroups", b"deny")
                || !write_file(c"/proc/self/uid_map", ctx.uid_map.to_bytes())
                || !write_file(c"/proc/self/gid_map", ctx.gid_map.to_bytes()))
        {
            fail_stage(ctx, SetupStep::UidMap);
        }
        for (i, step) in ctx.steps.iter().enumerate().skip(ctx.first_step) {
            if !run_op(&step.op) {
                fail(
                    ctx,
                    crate::child::KIND_PLAN,
                    u32::try_from(i).unwrap_or(u32::MAX),
                    errno(),
                );
            }
        }
        if !ctx.namespaces_ready {
            finish_namespaces(ctx);
        }
        if ctx.net_w >= 0 {
            if !pass_listener(ctx.net_w, ctx.net_port) {
                fail_stage(ctx, SetupStep::NetListener);
            }
            libc::close(ctx.net_w);
        }
        if !ctx.pivoted && !pivot_into(ctx.newroot) {
            fail_stage(ctx, SetupStep::PivotRoot);
        }

        // The command starts vfork-style: it shares this process's memory on its own stack,
        // and PID 1 sleeps until it execs, so no page tables are copied for it.
        let stack_top = ctx.stack.add(ctx.stack_len) as usize & !15;
        let pid = libc::clone(
            command_entry,
            stack_top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            ctx as *const ChildCtx<'_> as *mut libc::c_void,
        );
        if pid < 0 {
            fail_stage(ctx, SetupStep::Fork);
        }
        let pid = pid as libc::pid_t;
        libc::close(0);
        libc::close(1);
        libc::close(2);
        libc::close(ctx.err_w);
        loop {
            let mut status: libc::c_int = 0;
            let r = libc::wait4(-1, &raw mut status, libc::__WALL, std::ptr::null_mut());
            if r == pid {
                // Empty the namespace before reporting: every other process is killed and
                // reaped, so once the caller reads the status nothing can write to the upper
                // layer any more, and it may harvest while this process's exit tears the
                // namespaces down.
                libc::kill(-1, libc::SIGKILL);
                loop {
                    let r =
                        libc::wait4(-1, std::ptr::null_mut(), libc::__WALL, std::ptr::null_mut());
                    if r < 0 && errno() != libc::EINTR {
                        break;
                    }
                }
                let bytes = status.to_ne_bytes();
                libc::write(ctx.status_w, bytes.as_ptr().cast(), bytes.len());
                libc::_exit(0);
            }
            if r < 0 && errno() != libc::EINTR {
                libc::_exit(1);
            }
        }
    }
}

/// `pivot_root` into `newroot` and detach the old root. Returns false on failure (errno set).
pub(crate) fn pivot_into(newroot: &std::ffi::CStr) -> bool {
    // SAFETY: chdir/pivot_root/umount2 on NUL-terminated paths.
    unsafe {
        libc::chdir(newroot.as_ptr()) == 0
            && libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr()) == 0
            && libc::umount2(c".".as_ptr(), libc::MNT_DETACH) == 0
            && libc::chdir(c"/".as_ptr()) == 0
    }
}

/// The hostname and the loopback interface of fresh uts and net namespaces; the failing stage.
pub(crate) fn ready_namespaces(private_net: bool) -> Result<(), SetupStep> {
    if !set_hostname() {
        return Err(SetupStep::Hostname);
    }
    if private_net && !loopback_up() {
        return Err(SetupStep::Loopback);
    }
    Ok(())
}

/// [`ready_namespaces`] in PID 1, reporting a failure.
fn finish_namespaces(ctx: &ChildCtx<'_>) {
    if let Err(stage) = ready_namespaces(ctx.private_net) {
        fail_stage(ctx, stage);
    }
}

fn set_hostname() -> bool {
    let host = b"airlock";
    // SAFETY: sethostname with a live buffer and its length.
    unsafe { libc::sethostname(host.as_ptr().cast(), host.len()) == 0 }
}

/// Undoes what the parent's runtime may have set: handlers (a copied handler would run in the
/// sandbox), ignored signals (an ignored SIGCHLD would make the command's status unreapable;
/// an ignored SIGPIPE would leak into the command) and the blocked-signal mask.
fn reset_signals() {
    // SAFETY: sigaction/rt_sigprocmask with stack values; SIGKILL and SIGSTOP are skipped.
    unsafe {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        for sig in 1..65 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::sigaction(sig, &raw const dfl, std::ptr::null_mut());
            }
        }
        let empty: libc::sigset_t = std::mem::zeroed();
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &raw const empty,
            std::ptr::null_mut::<libc::sigset_t>(),
            8usize,
        );
    }
}

/// Makes a TCP socket listening on `127.0.0.1:port` in this process's network namespace and
/// sends it over `net_w` (`SCM_RIGHTS`, one byte of data), then closes this process's copy.
/// Returns false on failure (errno set). Async-signal-safe.
fn pass_listener(net_w: RawFd, port: u16) -> bool {
    // SAFETY: socket/setsockopt/bind/listen/sendmsg/close on values built on this stack; the
    // control buffer is 8-byte aligned and large enough for one descriptor's cmsg.
    unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if s < 0 {
            return false;
        }
        let one: libc::c_int = 1;
        libc::setsockopt(
            s,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&raw const one).cast(),
            4,
        );
        let mut sin: libc::sockaddr_in = std::mem::zeroed();
        sin.sin_family = libc::sa_family_t::try_from(libc::AF_INET).unwrap_or(2);
        sin.sin_port = port.to_be();
        sin.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        let len = libc::socklen_t::try_from(std::mem::size_of::<libc::sockaddr_in>()).unwrap_or(16);
        let mut ok = libc::bind(s, (&raw const sin).cast(), len) == 0 && libc::listen(s, 128) == 0;
        if ok {
            let mut byte = [1u8];
            let mut iov = libc::iovec {
                iov_base: byte.as_mut_ptr().cast(),
                iov_len: 1,
            };
            let mut control = [0u64; 4];
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &raw mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = libc::CMSG_SPACE(4) as usize;
            let cmsg = libc::CMSG_FIRSTHDR(&raw const msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(4) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>(), s);
            ok = libc::sendmsg(net_w, &raw const msg, libc::MSG_NOSIGNAL) == 1;
        }
        libc::close(s);
        ok
    }
}

fn loopback_up() -> bool {
    // SAFETY: a socket and two ioctls on a zeroed, correctly typed ifreq.
    unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if s < 0 {
            return false;
        }
        let mut ifr: libc::ifreq = std::mem::zeroed();
        for (dst, src) in ifr.ifr_name.iter_mut().zip(b"lo\0") {
            *dst = c_char::from_ne_bytes([*src]);
        }
        let ok = libc::ioctl(s, libc::SIOCGIFFLAGS, &mut ifr) == 0 && {
            ifr.ifr_ifru.ifru_flags |= libc::c_short::try_from(libc::IFF_UP).unwrap_or(1);
            libc::ioctl(s, libc::SIOCSIFFLAGS, &ifr) == 0
        };
        libc::close(s);
        ok
    }
}

/// PID 2: confine and exec the command.
fn command_main(ctx: &ChildCtx<'_>) -> ! {
    // SAFETY: raw system calls on prepared data only; see the module comment.
    unsafe {
        libc::close(ctx.status_w);
        libc::close(ctx.alive_r);
        libc::setsid();

        if libc::chdir(ctx.cwd.as_ptr()) != 0 {
            fail_stage(ctx, SetupStep::Chdir);
        }
        for &(resource, soft, hard) in ctx.rlimits {
            let lim = libc::rlimit {
                rlim_cur: soft,
                rlim_max: hard,
            };
            if libc::setrlimit(resource, &raw const lim) != 0 {
                fail_stage(ctx, SetupStep::Rlimit);
            }
        }
        // Descriptors leaked by other threads of the parent must not reach the command.
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            fail_stage(ctx, SetupStep::NoNewPrivs);
        }
        for rule in ctx.landlock_rules {
            let fd = libc::open(rule.path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
            if fd < 0 {
                if errno() == libc::ENOENT {
                    continue;
                }
                fail_stage(ctx, SetupStep::LandlockRule);
            }
            let attr = PathBeneathAttr {
                allowed_access: rule.access,
                parent_fd: fd,
            };
            let r = libc::syscall(
                libc::SYS_landlock_add_rule,
                ctx.landlock_fd,
                1u32,
                &raw const attr,
                0u32,
            );
            libc::close(fd);
            if r != 0 {
                fail_stage(ctx, SetupStep::LandlockRule);
            }
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, ctx.landlock_fd, 0u32) != 0 {
            fail_stage(ctx, SetupStep::LandlockRestrict);
        }
        libc::close(ctx.landlock_fd);
        // A program too long for the length field is never cut short: the run fails.
        let Ok(len) = libc::c_ushort::try_from(ctx.bpf.len()) else {
            fail_stage(ctx, SetupStep::Seccomp);
        };
        let prog = libc::sock_fprog {
            len,
            filter: ctx.bpf.as_ptr() as *mut _,
        };
        if libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0u32,
            &raw const prog,
        ) != 0
        {
            fail_stage(ctx, SetupStep::Seccomp);
        }
        let mut last = libc::ENOENT;
        for cand in ctx.candidates {
            libc::execve(cand.as_ptr(), ctx.argv.as_ptr(), ctx.envp.as_ptr());
            let e = errno();
            if e != libc::ENOENT && e != libc::ENOTDIR {
                last = e;
            }
        }
        fail(ctx, KIND_STAGE, SetupStep::Exec as u32, last)
    }
}
