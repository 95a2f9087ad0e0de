//! airlock-sandbox runs one command in kernel isolation over an overlay of the workspace,
//! then turns what it wrote into a list of changes.
//!
//! The command sees the real workspace (read-only) plus the session's staged layers, merged by
//! overlayfs at the workspace's own path; whatever it writes lands in a caller-owned upper
//! directory, never in the workspace. [`harvest`] reads that upper directory back as
//! [`UpperChange`]s, in O(changed files).
//!
//! ```no_run
//! use airlock_sandbox::{default_backend, harvest, SandboxSpec};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let scratch = tempfile::tempdir()?;
//! let (upper, work) = (scratch.path().join("upper"), scratch.path().join("work"));
//! std::fs::create_dir(&upper)?;
//! std::fs::create_dir(&work)?;
//! let spec = SandboxSpec::new("/src/project", &upper, &work, ["sh", "-c", "echo hi > out.txt"]);
//! let outcome = default_backend(false)?.run(&spec)?;
//! assert_eq!(outcome.exit_code, Some(0));
//! for change in harvest(&upper)? {
//!     println!("{change:?}");
//! }
//! # Ok(()) }
//! ```
//!
//! # What the namespace backend builds
//!
//! One `clone` creates fresh user, mount, pid, ipc, uts and (unless `network`) net namespaces.
//! The net namespace has only `lo`, brought up before the command starts: `AF_INET`/`AF_INET6`
//! sockets work, but bind and connect only within the run (a test's server on 127.0.0.1 or
//! `::1`); a connect to any other address fails at once with ENETUNREACH, no packet sent.
//! The clone child is PID 1 of the new pid namespace: it maps its own uid to root, builds a
//! minimal root on a tmpfs and pivots into it, then forks the command (PID 2) and reaps.
//! When the command exits, or the caller kills PID 1 on timeout or cancellation, the kernel
//! kills everything left in the namespace, daemons included.
//!
//! - `/usr`, `/bin`, `/sbin`, `/lib*` read-only binds; `/etc` holds only a list of
//!   non-secret files tools need ([`ETC_ALLOWLIST`]), so `/etc/shadow`, `/etc/ssh` are absent.
//! - `/sys` shows, read-only, only what runtimes and test suites read to size themselves
//!   ([`SYS_ALLOWLIST`]: CPUs, NUMA nodes, control groups, transparent huge pages).
//! - `/dev` with null, zero, full, random, urandom, tty, `/dev/shm`, and `fd`/`stdin`/... links;
//!   a fresh `/proc`; a private `/tmp` tmpfs.
//! - `$HOME` at its real path as an empty tmpfs exposing read-only only [`SandboxSpec::home_binds`].
//! - The workspace at its real path: overlayfs, `lowerdir` = staged layers (top first) then the
//!   workspace, `upperdir`/`workdir` from the spec, mounted inside the user namespace with
//!   `userxattr`. Staged layers therefore mark opaque directories with `user.overlay.opaque=y`
//!   (whiteouts are 0/0 character devices, which need no xattr).
//! - Landlock: writes only beneath the workspace, `/tmp`, `/dev/shm` and to the few device files.
//!   seccomp (deny-list, EPERM): ptrace, process_vm_*, bpf, keyrings, perf, userfaultfd, module
//!   and kexec calls, every mount-API call, unshare/setns and namespace flags on clone, io_uring,
//!   TIOCSTI and sethostname/setdomainname; sockets of any family but unix, inet, inet6 and netlink (`NETLINK_ROUTE` only) fail
//!   with EAFNOSUPPORT (vsock is not network-namespaced); `clone3` returns ENOSYS so libc falls
//!   back to the inspectable `clone`; x32 system calls are refused.
//! - Ceilings on the whole run ([`Limits`]): a control group of its own when the caller can
//!   make one (memory with swap off, processes, CPU bandwidth, and the group's CPU time watched
//!   by the caller), joined by PID 1 before anything runs; otherwise RLIMIT_DATA and RLIMIT_CPU
//!   per process. A watchdog holds what the run writes to the upper directory to
//!   [`Limits::upper_bytes`]. Every [`Outcome`] says which mechanism enforced what
//!   ([`LimitsReport`]) and which [`Ceiling`] the run hit.
//! - rlimits (core 0, nofile, fsize, nproc) and the pid namespace's `pid_max` (`nproc + 300`).
//!   The sandbox maps its root to the caller's uid; for an unprivileged caller RLIMIT_NPROC is
//!   the exact bound, counted per user namespace. When the caller is the host's root the kernel
//!   exempts uid 0 from RLIMIT_NPROC, and `pid_max` is the bound. Environment scrubbed to an
//!   allow-list ([`mod@env`]).
//!
//! - Landlock also forbids ptrace-class access from the command to PID 1 (a copy of the
//!   caller's memory and environment), and scopes signals and abstract unix sockets to the
//!   sandbox.
//! - [`SandboxSpec::masked`] hides paths inside the workspace (airlock's own `.airlock` state)
//!   behind an empty read-only directory.
//!
//! # Contract for the caller's directories
//!
//! - `upper` and `work`: empty directories on one filesystem, outside the workspace and the
//!   layers (overlayfs refuses nested layers; [`Backend::run`] says so before trying).
//! - Staged layers: regular files, directories and symlinks; deletes as 0/0 character devices;
//!   opaque directories marked `user.overlay.opaque=y` (the overlay is mounted with `userxattr`,
//!   so `trusted.overlay.*` is ignored; setting both is harmless).
//! - After the run the caller owns `upper`: [`harvest`] it, then delete it.
//!
//! # Process model
//!
//! Everything the child needs (paths as `CString`s, the mount plan, the BPF program, the Landlock
//! ruleset fd, argv/envp, the command's stack) is prepared before `clone`; the children only make
//! raw system calls and never allocate, so [`Backend::run`] is safe from any thread of a
//! multi-threaded process (a tokio server, a test harness) and needs no helper binary. A warm
//! host's spare is the exception: it allocates after its clone (it decodes its request and
//! prepares its PID 1 there), which is sound only because the host has one thread, and that is
//! checked before every such clone. `run` blocks its thread until the command ends; async
//! callers use `spawn_blocking`. The command's own process is started vfork-style from PID 1 (shared memory, its own stack, PID 1 suspended
//! until the exec), so no page tables are copied for it.
//!
//! PID 1 reports the command's status only after it has killed and reaped every other process of
//! the namespace, so the caller may harvest while PID 1's exit tears the namespaces down.
//!
//! # Warm hosts
//!
//! With [`SandboxSpec::warm_host`] set (and [`host::enable`]d by the program), a run goes
//! through a per-session host process that keeps the user namespace and the base of the minimal
//! root, and forks the next run's PID 1 (fresh mount, pid, ipc, uts and net namespaces, prepared
//! up to the workspace overlay) before its request arrives; see [`host`]. The runs it starts are
//! confined exactly as cold ones.
//!
//! # Structure
//!
//! The crate is split by lifetime, and calls go one way (no module cycles;
//! `scripts/check-module-cycles.py` checks it):
//!
//! - [`NamespaceBackend`] (`namespace`) validates the spec and makes the run's control groups,
//!   then hands the run to a warm host (`warm::client`) or runs it cold (`cold`).
//! - `launch`: everything a PID 1 needs, prepared before the clone (the validated
//!   `RunRequest`, its `check`, the child's descriptors, the child context), and the clone
//!   helpers. It knows nothing of hosts. `child` is the code a clone child runs.
//! - `outcome`: the caller's side of a launched run, cold or warm (`supervise`, `ceiling`).
//! - `warm::{client, host, spare, wire}`: the client hands a run to a host; the host hands it to
//!   a spare or clones a PID 1 through `launch`; both speak `wire` (length-prefixed JSON with
//!   `SCM_RIGHTS` descriptors), and every decoded request is validated as a fresh one is.
//!
//! # Settings and timings
//!
//! The library reads no environment variable: the program's `main` fills a [`SandboxSettings`]
//! from its environment ([`SandboxSettings::from_vars`]) and [`settings::install`]s it, or gives
//! a backend its own ([`NamespaceBackend::with_settings`]). A command's environment is the
//! allow-listed part ([`mod@env`]) of [`SandboxSettings::inherit`] plus what its spec adds;
//! `$HOME` is the spec's, else the settings'. [`timing::mark`] emits `tracing` events that a program shows with
//! [`timing::stderr_layer`].
//!
//! # `unsafe`
//!
//! 22 sites, in two files; each carries a `// SAFETY:` comment. Every other system call of the
//! crate goes through `rustix` or `std`.
//!
//! - `child.rs` (15): the code clone children run between the clone and `execve`, which may
//!   not allocate and so makes raw `libc` calls: the mount plan, `pivot_root`, `close_range`,
//!   uid/gid maps, hostname, loopback, the proxy's listener of a granted run ([`net`]), signal reset, rlimits, Landlock, seccomp, `_exit`, the
//!   command's vfork-style clone and its entry point, and the degraded backend's `pre_exec`.
//! - `launch.rs` (7): the fork-like `clone` helper (an `unsafe fn` and its body) and its three
//!   callers (a cold or warm PID 1, a spare through `clone_allocating`, which first checks that
//!   the process has one thread, and the probe's user namespace), `unshare` in the host (also
//!   checked single-threaded), and the Landlock ABI query, which the `landlock` crate keeps
//!   private.
//!
//! # Without kernel isolation
//!
//! [`probe`] names what is missing (user namespaces, overlayfs, Landlock ABI 3).
//! [`default_backend`]`(true)` then returns the [`DegradedBackend`]: a copy of the workspace,
//! rlimits and a process-group kill, every outcome marked `degraded`.

#![deny(missing_docs)]

mod capture;
mod ceiling;
mod cgroup;
mod child;
mod cold;
mod confine;
mod degraded;
pub mod env;
mod error;
mod harvest;
mod launch;
mod namespace;
pub mod net;
mod outcome;
mod plan;
mod probe;
pub mod settings;
mod spec;
mod supervise;
mod tier;
pub mod timing;
pub mod tree;
mod warm;

/// Warm sandbox hosts, as the program enables and runs them (see [`warm`](self#warm-hosts)):
/// [`enable`](host::enable) in the caller, [`main_hook`](host::main_hook) first thing in
/// `main`.
pub mod host {
    pub use crate::warm::{HOST_ARG, enable, main_hook};
}

pub use capture::Captured;
pub use degraded::DegradedBackend;
pub use error::SandboxError;
pub use harvest::{PATH_MAX, UpperChange, harvest, harvest_within};
pub use namespace::NamespaceBackend;
pub use plan::{ETC_ALLOWLIST, SYS_ALLOWLIST};
pub use probe::{
    Capabilities, Finding, HostFacts, HostReport, full_tier_fix, host_report, probe,
    userns_blockers,
};
pub use settings::{HostMode, SandboxSettings};
pub use spec::{
    CACHE_ROOT, CacheBind, Ceiling, CpuReport, DEFAULT_CPU_SECONDS, DEFAULT_MEMORY,
    DEFAULT_UPPER_BYTES, DiskReport, LayeredBind, Limits, LimitsReport, Mechanism, MemoryReport,
    Outcome, ProcessesReport, SandboxSpec,
};
pub use tier::{
    Availability, LandlockBackend, Tier, UnknownTier, backend, choose, landlock_probe, run_best,
    select,
};

/// A way to run a [`SandboxSpec`]. Kernel namespaces today; a container engine can be added.
pub trait Backend: Send + Sync {
    /// A short stable name ("namespaces", "degraded").
    fn name(&self) -> &'static str;
    /// Runs the command to completion (or timeout/cancellation) and reports what happened.
    fn run(&self, spec: &SandboxSpec) -> Result<Outcome, SandboxError>;
    /// The absolute path at which a command run with this `work` directory sees the workspace
    /// (the workspace itself under the overlay; a copy beneath `work` in the copy tiers).
    fn visible_root(
        &self,
        workspace: &std::path::Path,
        work: &std::path::Path,
    ) -> std::path::PathBuf {
        let _ = work;
        workspace.to_path_buf()
    }
}

/// Removes `path` and everything below it, whatever its depth and whatever modes a command (or
/// overlayfs, which makes `work/work` mode 000) left on its directories. Entries that vanish
/// meanwhile, `path` included, are not an error: a warm host and its client may clear the same
/// directory. See [`tree`].
pub fn remove_tree(path: &std::path::Path) -> std::io::Result<()> {
    tree::remove_tree_counted(path).map(drop)
}

/// The backend of the strongest tier the host offers, down to the weakest the operator allows
/// ([`select`]: the installed settings, `allow_degraded` allowing every tier), else the
/// probe's error naming what is missing and how to fix it.
pub fn default_backend(allow_degraded: bool) -> Result<Box<dyn Backend>, SandboxError> {
    select(allow_degraded)
}
