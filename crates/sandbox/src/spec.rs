//! What to run ([`SandboxSpec`], [`Limits`]) and what happened ([`Outcome`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crate::capture::Captured;

/// One sandboxed command.
#[derive(Debug, Clone)]
pub struct SandboxSpec {
    /// The real workspace; mounted read-only as the lowest layer, at this same path.
    pub workspace: PathBuf,
    /// Staged layer directories stacked above the workspace, lowest first.
    pub layers: Vec<PathBuf>,
    /// Overlay upper directory (host-side, caller-owned): receives everything the command writes.
    pub upper: PathBuf,
    /// Overlay work directory: empty, same filesystem as `upper`.
    pub work: PathBuf,
    /// The command and its arguments; argv\[0\] is looked up in the sandbox's `PATH`.
    pub argv: Vec<OsString>,
    /// Absolute working directory inside the workspace (defaults to the workspace).
    pub cwd: PathBuf,
    /// Variables added to the scrubbed allow-list (never `LD_*`, `DYLD_*` or secret-like names).
    pub env: Vec<(OsString, OsString)>,
    /// Keep the host network namespace. Off: a private namespace with only `lo` (up), where
    /// inet sockets bind and connect within the run and nowhere else.
    pub network: bool,
    /// Kept for callers and the warm wire format; it changes nothing any more. The full tier
    /// always allows `AF_INET`/`AF_INET6` sockets with the network off, because they reach only
    /// the run's private loopback (test suites bind 127.0.0.1); the Landlock tier always refuses
    /// them, because there they would reach the host's network.
    pub allow_loopback: bool,
    /// Network egress through airlock's proxy ([`crate::net`]): the run keeps its private
    /// namespace with only `lo`, gets the proxy on `127.0.0.1:PORT` and the proxy variables, and
    /// may make `AF_INET`/`AF_INET6` sockets. Needs `network` off; cold or warm alike.
    pub net: Option<crate::net::NetAccess>,
    /// Wall-clock limit; on expiry every process of the sandbox is killed.
    pub timeout: Duration,
    /// Bytes of stdout (and separately stderr) kept in memory: half head, half tail.
    pub output_limit: usize,
    /// Where full output is spooled once it exceeds `output_limit` (none: the middle is dropped).
    pub spool_dir: Option<PathBuf>,
    /// `$HOME` inside the sandbox, at this path (defaults to the caller's `$HOME`).
    pub home: Option<PathBuf>,
    /// Directories under `$HOME` exposed read-only (absolute, or relative to `home`).
    pub home_binds: Vec<PathBuf>,
    /// Extra host paths exposed read-only at the same path.
    pub ro_binds: Vec<PathBuf>,
    /// Host directories bound writable into the sandbox beneath [`CACHE_ROOT`] (a workspace's
    /// build and test caches): what the command writes there persists on the host and is never
    /// part of the upper directory. Everywhere else the sandbox stays read-only.
    pub cache_binds: Vec<CacheBind>,
    /// Host directories exposed read-write at the same path (absolute, outside the workspace):
    /// what the command writes there stays on the host, never staged (a granted run's package
    /// cache). A run with any is always cold.
    pub rw_binds: Vec<PathBuf>,
    /// Host directories shown at their own path, writable, without the host's copy ever being
    /// written: an overlay of the host directory (read-only, below) and the caller's layer
    /// (above), which receives every write (a granted run's package cache over the user's own,
    /// e.g. `~/.npm/_cacache`). The full tier only, and always cold; the other tiers show the
    /// directory read-only when [`SandboxSpec::home_binds`] names it.
    pub layered_binds: Vec<LayeredBind>,
    /// Paths hidden from the command behind an empty read-only directory (or `/dev/null` for a
    /// file): inside the workspace (relative, or absolute under it), e.g. airlock's own
    /// `.airlock` state and sensitive files such as `.env`, or absolute paths under `home` inside
    /// an exposed [`SandboxSpec::home_binds`] entry (credential files of a toolchain directory).
    /// Nothing written to a masked path reaches the upper directory. Paths that do not exist
    /// are skipped.
    pub masked: Vec<PathBuf>,
    /// Resource limits.
    pub limits: Limits,
    /// Set to `true` to stop the command early; the outcome then says `cancelled`.
    pub cancel: Option<Arc<AtomicBool>>,
    /// Bytes fed to the command's stdin (none: stdin is empty).
    pub stdin: Option<Vec<u8>>,
    /// The socket of a warm sandbox host to run through ([`crate::host`]); none: always cold.
    /// Used only when the process enabled hosts ([`crate::host::enable`]).
    pub warm_host: Option<PathBuf>,
}

impl SandboxSpec {
    /// A spec with the defaults: no network, 300 s timeout, 1 MiB output limit, cwd = workspace.
    pub fn new<I, S>(
        workspace: impl AsRef<Path>,
        upper: impl AsRef<Path>,
        work: impl AsRef<Path>,
        argv: I,
    ) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let workspace = workspace.as_ref().to_path_buf();
        SandboxSpec {
            cwd: workspace.clone(),
            workspace,
            layers: Vec::new(),
            upper: upper.as_ref().to_path_buf(),
            work: work.as_ref().to_path_buf(),
            argv: argv.into_iter().map(Into::into).collect(),
            env: Vec::new(),
            network: false,
            allow_loopback: false,
            net: None,
            timeout: Duration::from_secs(300),
            output_limit: 1 << 20,
            spool_dir: None,
            home: None,
            home_binds: Vec::new(),
            ro_binds: Vec::new(),
            cache_binds: Vec::new(),
            rw_binds: Vec::new(),
            layered_binds: Vec::new(),
            masked: Vec::new(),
            limits: Limits::default(),
            cancel: None,
            stdin: None,
            warm_host: None,
        }
    }
}

/// A host directory under a writable layer of the caller's ([`SandboxSpec::layered_binds`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayeredBind {
    /// The host directory, shown at this same path; never written.
    pub path: PathBuf,
    /// The overlay's upper directory: an existing host directory that receives the writes
    /// (outside the workspace; the caller owns it and its lifetime).
    pub upper: PathBuf,
    /// The overlay's work directory: an existing empty directory on `upper`'s filesystem.
    pub work: PathBuf,
}

/// Where [`SandboxSpec::cache_binds`] appear inside the sandbox: every cache sits beneath it.
pub const CACHE_ROOT: &str = "/var/cache/airlock";

/// A host directory bound writable at a path beneath [`CACHE_ROOT`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CacheBind {
    /// The existing host directory (the caller creates it and owns its lifetime).
    pub host: PathBuf,
    /// Where the command sees it: an absolute path strictly beneath [`CACHE_ROOT`].
    pub inside: PathBuf,
}

impl CacheBind {
    /// The bind of `host` at [`CACHE_ROOT`]`/name`.
    pub fn named(host: impl Into<PathBuf>, name: &str) -> CacheBind {
        CacheBind {
            host: host.into(),
            inside: Path::new(CACHE_ROOT).join(name),
        }
    }
}

/// Resource limits applied to the command (rlimits are per process; `nproc` is per sandbox).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Limits {
    /// RLIMIT_NOFILE.
    pub nofile: u64,
    /// RLIMIT_FSIZE in bytes (largest file the command may write).
    pub fsize: u64,
    /// Processes and threads of the sandbox's uid (RLIMIT_NPROC). The kernel exempts a uid that
    /// maps to the host's root from RLIMIT_NPROC, so the pid namespace's `pid_max` is also set,
    /// to `nproc + 300` (pids below 300 are allocated only once): the hard bound when airlock
    /// itself runs as root.
    pub nproc: u64,
    /// RLIMIT_AS in bytes, if any.
    pub address_space: Option<u64>,
    /// Memory ceiling of the whole run, in bytes (none: no ceiling): the run's control group's
    /// `memory.max` (swap off), else RLIMIT_DATA per process.
    pub memory: Option<u64>,
    /// CPU-time ceiling of the whole run, in seconds (none: none beyond the bandwidth and the
    /// timeout): watched on the run's control group, else RLIMIT_CPU per process.
    pub cpu_seconds: Option<u64>,
    /// CPU bandwidth of the run in thousandths of a CPU (none: one CPU less than the host has,
    /// at least one, or every CPU with [`Limits::every_cpu`]). Needs a control group with the
    /// cpu controller.
    pub cpu_millis: Option<u64>,
    /// Without `cpu_millis`, let the run use every CPU, at half the scheduling weight of the
    /// groups beside it (`cpu.weight` 50; v1 `cpu.shares` 512) so that the host's processes win
    /// the CPU when they compete: what a test suite needs to run as fast as it runs directly.
    /// False: a bandwidth ceiling of one CPU less than the host has.
    pub every_cpu: bool,
    /// Most bytes the run may write to the overlay's upper directory (what it changes in the
    /// workspace): a watchdog kills the run past it; RLIMIT_FSIZE is held to it too.
    pub upper_bytes: u64,
    /// Use a control group per run when one can be made (false: rlimits only).
    pub cgroup: bool,
    /// Size of the private `/tmp` and `/dev/shm` tmpfs, in bytes.
    pub tmp_size: u64,
    /// Largest spool file per stream, in bytes; output beyond it is counted but not kept.
    pub spool_bytes: u64,
}

/// Default memory ceiling of a run: 4 GiB.
pub const DEFAULT_MEMORY: u64 = 4 << 30;
/// Default CPU-time ceiling of a run: one hour (the bandwidth and the timeout bind first).
pub const DEFAULT_CPU_SECONDS: u64 = 3600;
/// Default ceiling on what a run may write to the overlay's upper directory: 4 GiB.
pub const DEFAULT_UPPER_BYTES: u64 = 4 << 30;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            nofile: 8192,
            fsize: 4 << 30,
            nproc: 1024,
            address_space: None,
            memory: Some(DEFAULT_MEMORY),
            cpu_seconds: Some(DEFAULT_CPU_SECONDS),
            cpu_millis: None,
            every_cpu: false,
            upper_bytes: DEFAULT_UPPER_BYTES,
            cgroup: true,
            tmp_size: 1 << 30,
            spool_bytes: 256 << 20,
        }
    }
}

/// What happened to a sandboxed command.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Outcome {
    /// The exit code, when the command exited by itself.
    pub exit_code: Option<i32>,
    /// The signal that ended the command, when one did (not set for timeouts/cancellation).
    pub signal: Option<i32>,
    /// The timeout expired and the sandbox was killed (the CLI exits 124).
    pub timed_out: bool,
    /// The caller's cancel flag was set and the sandbox was killed.
    pub cancelled: bool,
    /// Captured stdout.
    pub stdout: Captured,
    /// Captured stderr.
    pub stderr: Captured,
    /// Wall-clock time from spawn to the last process's death.
    pub duration: std::time::Duration,
    /// Ran without kernel isolation (the degraded backend): say "degraded: no kernel isolation".
    pub degraded: bool,
    /// The sandbox tier the run got ([`crate::Tier`]).
    pub tier: crate::Tier,
    /// Ran in a warm sandbox host's prepared namespaces rather than freshly created ones.
    pub warm: bool,
    /// The ceiling the run hit, if any (memory: a process was killed for want of memory;
    /// cpu, disk: the run was killed).
    pub ceiling: Option<Ceiling>,
    /// The ceilings in force, how each was enforced, and what the run used.
    pub limits: LimitsReport,
    /// A granted run ([`SandboxSpec::net`]): the hosts it reached and was refused.
    pub net: Option<crate::net::NetReport>,
}

/// A resource ceiling a run can hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ceiling {
    /// [`Limits::memory`].
    Memory,
    /// [`Limits::cpu_seconds`].
    Cpu,
    /// [`Limits::upper_bytes`].
    Disk,
}

impl Ceiling {
    /// The stable name: `memory`, `cpu`, `disk`.
    pub fn name(self) -> &'static str {
        match self {
            Ceiling::Memory => "memory",
            Ceiling::Cpu => "cpu",
            Ceiling::Disk => "disk",
        }
    }
}

/// The memory ceiling of a run.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct MemoryReport {
    /// The ceiling in bytes.
    pub bytes: u64,
    /// How it was enforced.
    pub by: Option<Mechanism>,
    /// The most the run held at once (control group only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_bytes: Option<u64>,
}

/// The CPU ceilings of a run.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct CpuReport {
    /// The CPU-time ceiling in seconds, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds: Option<u64>,
    /// How the CPU time was watched.
    pub by: Option<Mechanism>,
    /// The bandwidth in CPUs, when a control group enforced one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota_cpus: Option<f64>,
    /// The run's scheduling weight (`cpu.weight`), when it had every CPU at a lower weight.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<u64>,
    /// CPU time every process of the run used together (control group only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used_ms: Option<u64>,
}

/// The process-count ceiling of a run.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ProcessesReport {
    /// Most processes and threads at once.
    pub max: u64,
    /// How it was enforced.
    pub by: Option<Mechanism>,
    /// A fork was refused at the ceiling (control group only).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub hit: bool,
}

/// The ceiling on what a run may write.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct DiskReport {
    /// The ceiling in bytes.
    pub bytes: u64,
    /// How it was enforced.
    pub by: Option<Mechanism>,
    /// What the run's writes took at the last measurement.
    pub used_bytes: u64,
}

/// Every ceiling of a run, as the `limits` object of the bash and verify JSON.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct LimitsReport {
    /// Memory.
    pub memory: MemoryReport,
    /// CPU time and bandwidth.
    pub cpu: CpuReport,
    /// Processes.
    pub processes: ProcessesReport,
    /// Writes to the workspace overlay.
    pub disk: DiskReport,
}

impl Outcome {
    /// True when the command exited with status 0 within its time.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out && !self.cancelled
    }
}

/// How one ceiling is enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mechanism {
    /// A control group of the run (all its processes together).
    Cgroup,
    /// Per-process rlimits (no writable control group with the controller).
    Rlimit,
    /// The pid namespace's `pid_max` (the process count when the caller is the host's root,
    /// whom the kernel exempts from RLIMIT_NPROC, and no cgroup is available).
    PidMax,
    /// The caller's watchdog over the overlay's upper directory.
    Watchdog,
}
