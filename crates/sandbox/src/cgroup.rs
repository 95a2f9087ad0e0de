//! A control group per run: memory, process-count and CPU-bandwidth ceilings on everything the
//! run starts, and the kernel's own account of what it used.
//!
//! A cold run's caller makes the groups before the run; a warm host makes them for its runs,
//! ahead of the request for its spare (the next run's PID 1, which joins while it waits; see
//! [`crate::warm`]), and removes them once the run's client hangs up: on the unified hierarchy
//! (cgroup v2) when our parent group has the controller and lets us write, else on a v1
//! hierarchy of that controller, else not at all (then [`crate::spec::Limits`] falls back to
//! rlimits for that resource; see [`Mechanism`]). It opens each group's `cgroup.procs`; the
//! run's PID 1 writes `0` to those descriptors before anything else, so it and every process it
//! starts are inside from the start. The kernel checks that write against the credentials of
//! whoever opened the file, so it works from inside the sandbox's user namespace, and it moves
//! only the run, never the host. Moving a process between groups waits for an RCU grace period
//! (~10 ms on a busy machine): a spare pays it before its request, a cold run on its way.
//!
//! [`crate::SandboxSettings::cgroups`] false (`AIRLOCK_SANDBOX_CGROUP=off` for airlock) or
//! [`crate::Limits::cgroup`] false forces the rlimit path.

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::spec::{Limits, Mechanism};

/// [`crate::launch::RunRequest::cgroup_mask`]: the memory ceiling is the control group's.
pub(crate) const CG_MEMORY: u64 = 1;
/// [`crate::launch::RunRequest::cgroup_mask`]: the CPU time is watched on the control group.
pub(crate) const CG_CPU_TIME: u64 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavour {
    V1,
    V2,
}

/// The run's groups and where each ceiling lives.
#[derive(Debug, Default)]
pub(crate) struct RunCgroup {
    /// Every directory made for this run (one per hierarchy), removed on drop.
    dirs: Vec<PathBuf>,
    memory: Option<(PathBuf, Flavour)>,
    pids: Option<(PathBuf, Flavour)>,
    /// CPU bandwidth (`cpu.max` / `cpu.cfs_quota_us`).
    cpu: Option<(PathBuf, Flavour)>,
    /// CPU usage accounting (`cpu.stat` on v2, `cpuacct.usage` on v1).
    cpuacct: Option<(PathBuf, Flavour)>,
    /// The bandwidth in force, in CPUs (none with the cpu controller: every CPU, at
    /// [`RUN_WEIGHT`]).
    pub(crate) quota_cpus: Option<f64>,
    /// The scheduling weight written, when the run may use every CPU.
    pub(crate) weight: Option<u64>,
    /// A warm host's groups, as its client sees them ([`RunCgroup::decode`]): the client reads
    /// them but never removes them; the host does, once the client hangs up.
    host_owned: bool,
}

/// The cgroup v2 `cpu.weight` of a run that may use every CPU: half the default (100) of the
/// groups beside it, so that the host's processes win the CPU when they compete for it.
pub(crate) const RUN_WEIGHT: u64 = 50;

/// The scheduling period of the CPU bandwidth ceiling.
const CPU_PERIOD_US: u64 = 100_000;

/// One cgroup mount and the caller's group in it.
#[derive(Debug, Clone)]
struct Hierarchy {
    flavour: Flavour,
    /// Controllers bound to it (v1), or the empty list (v2: read `cgroup.controllers`).
    controllers: Vec<String>,
    /// The caller's group, as a directory.
    own: PathBuf,
    /// True when the caller's group is the hierarchy's root.
    at_root: bool,
}

fn hierarchies() -> &'static [Hierarchy] {
    static H: OnceLock<Vec<Hierarchy>> = OnceLock::new();
    H.get_or_init(|| discover().unwrap_or_default())
}

/// Reads `/proc/self/cgroup` and `/proc/self/mountinfo`.
fn discover() -> io::Result<Vec<Hierarchy>> {
    let groups = std::fs::read_to_string("/proc/self/cgroup")?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo")?;
    // (fstype, root, mount point, super options)
    let mut cg_mounts: Vec<(String, String, String, String)> = Vec::new();
    for line in mounts.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let l: Vec<&str> = left.split(' ').collect();
        let r: Vec<&str> = right.split(' ').collect();
        if l.len() < 5 || r.len() < 3 || !r[0].starts_with("cgroup") {
            continue;
        }
        cg_mounts.push((
            r[0].to_string(),
            l[3].to_string(),
            l[4].to_string(),
            r[2].to_string(),
        ));
    }
    let mut out = Vec::new();
    for line in groups.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_id), Some(ctrl), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let (flavour, controllers): (Flavour, Vec<String>) = if ctrl.is_empty() {
            (Flavour::V2, Vec::new())
        } else {
            (
                Flavour::V1,
                ctrl.split(',')
                    .filter(|c| !c.starts_with("name="))
                    .map(str::to_string)
                    .collect(),
            )
        };
        if flavour == Flavour::V1 && controllers.is_empty() {
            continue;
        }
        let mount = cg_mounts.iter().find(|(fs, _, _, opts)| match flavour {
            Flavour::V2 => fs == "cgroup2",
            Flavour::V1 => {
                fs == "cgroup" && {
                    let o: Vec<&str> = opts.split(',').collect();
                    controllers.iter().all(|c| o.contains(&c.as_str()))
                }
            }
        });
        let Some((_, root, point, _)) = mount else {
            continue;
        };
        // The mount shows the hierarchy from `root` down; our path is from the hierarchy's root.
        let Some(rel) = Path::new(path).strip_prefix(root).ok() else {
            continue;
        };
        let own = Path::new(point).join(rel);
        out.push(Hierarchy {
            flavour,
            controllers,
            at_root: rel.as_os_str().is_empty(),
            own,
        });
    }
    Ok(out)
}

/// Writes an interface file of a group (never creates one: a group has every file its
/// controllers give it).
fn write(dir: &Path, file: &str, value: &str) -> io::Result<()> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join(file))?
        .write_all(value.as_bytes())
}

fn read(dir: &Path, file: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(file)).ok()
}

/// `key N` from a flat-keyed file (`memory.events`, `pids.events`, `cpu.stat`, …).
fn keyed(dir: &Path, file: &str, key: &str) -> Option<u64> {
    read(dir, file)?.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

fn number(dir: &Path, file: &str) -> Option<u64> {
    read(dir, file)?.trim().parse().ok()
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// Removes groups an earlier process of ours left behind (it died before it could), named
/// `airlock-PID-N` with PID no longer alive. Best effort.
///
/// A warm host removes the groups it made itself (see [`RunCgroup::drop`]): a run's once its
/// client hangs up, retrying what is still busy ([`retry_deferred`]). Only what a host left
/// when it died is swept here. (Renaming a leftover after some other process is not an option:
/// cgroup v2 refuses to rename groups.)
fn sweep(parent: &Path) {
    let Ok(rd) = std::fs::read_dir(parent) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("airlock-"))
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

/// `airlock-PID-N` for this process, a new N each time.
fn own_name() -> String {
    format!(
        "airlock-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// Makes `parent/airlock-PID-N`, after sweeping what earlier processes left in `parent`.
fn make_child(parent: &Path) -> Option<PathBuf> {
    sweep(parent);
    let dir = parent.join(own_name());
    std::fs::create_dir(&dir).ok()?;
    Some(dir)
}

/// Whether runs should use control groups at all.
pub(crate) fn wanted(limits: &Limits) -> bool {
    limits.cgroup
}

/// The CPU bandwidth quota, in microseconds per period, of `quota` CPUs (at least 1 ms).
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "a float-to-integer cast saturates (NaN to 0), and the quota is then at least 1 ms"
)]
fn quota_us(quota: f64) -> u64 {
    ((quota * CPU_PERIOD_US as f64) as u64).max(1000)
}

/// The CPU bandwidth of a run: the limit's, else one CPU less than the caller may use (at
/// least one), so a run can never take the whole machine.
pub(crate) fn default_cpus() -> f64 {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    n.saturating_sub(1).max(1) as f64
}

/// The bandwidth ceiling of a run in CPUs: the operator's, else one CPU less than the host has;
/// none for a run that may use every CPU ([`crate::Limits::every_cpu`]).
fn bandwidth(limits: &Limits) -> Option<f64> {
    match limits.cpu_millis {
        Some(m) => Some(m as f64 / 1000.0),
        None if limits.every_cpu => None,
        None => Some(default_cpus()),
    }
}

/// Write the run's CPU share into its group `d`: a bandwidth ceiling, or none and a lower weight.
/// Returns `(quota in CPUs, weight)`, or `None` when a file could not be written.
fn write_cpu(d: &Path, f: Flavour, limits: &Limits) -> Option<(Option<f64>, Option<u64>)> {
    let ok = |r: io::Result<()>| r.ok();
    match (bandwidth(limits), f) {
        (Some(cpus), Flavour::V2) => {
            let q = quota_us(cpus);
            ok(write(d, "cpu.max", &format!("{q} {CPU_PERIOD_US}")))?;
            Some((Some(q as f64 / CPU_PERIOD_US as f64), None))
        }
        (Some(cpus), Flavour::V1) => {
            let q = quota_us(cpus);
            ok(write(d, "cpu.cfs_period_us", &CPU_PERIOD_US.to_string()))?;
            ok(write(d, "cpu.cfs_quota_us", &q.to_string()))?;
            Some((Some(q as f64 / CPU_PERIOD_US as f64), None))
        }
        (None, Flavour::V2) => {
            ok(write(d, "cpu.max", &format!("max {CPU_PERIOD_US}")))?;
            ok(write(d, "cpu.weight", &RUN_WEIGHT.to_string()))?;
            Some((None, Some(RUN_WEIGHT)))
        }
        (None, Flavour::V1) => {
            // cpu.shares: 1024 is the default, as cpu.weight's 100 is on v2.
            ok(write(d, "cpu.cfs_quota_us", "-1"))?;
            ok(write(
                d,
                "cpu.shares",
                &(RUN_WEIGHT * 1024 / 100).to_string(),
            ))?;
            Some((None, Some(RUN_WEIGHT)))
        }
    }
}

impl RunCgroup {
    /// The run's groups with `limits` written, as far as the host allows; never fails (what it
    /// cannot make is left to rlimits).
    pub(crate) fn create(limits: &Limits) -> RunCgroup {
        let mut cg = RunCgroup::default();
        if !wanted(limits) {
            return cg;
        }
        // v2 first: one group for every controller it has.
        if let Some(h) = hierarchies().iter().find(|h| h.flavour == Flavour::V2) {
            cg.try_v2(h, limits);
        }
        for h in hierarchies().iter().filter(|h| h.flavour == Flavour::V1) {
            let has = |c: &str| h.controllers.iter().any(|x| x == c);
            let needed = (has("memory") && cg.memory.is_none() && limits.memory.is_some())
                || (has("pids") && cg.pids.is_none())
                || (has("cpu") && cg.cpu.is_none())
                || (has("cpuacct") && cg.cpuacct.is_none());
            if !needed {
                continue;
            }
            let Some(dir) = make_child(&h.own) else {
                continue;
            };
            cg.dirs.push(dir.clone());
            if has("memory")
                && cg.memory.is_none()
                && let Some(bytes) = limits.memory
                && write(&dir, "memory.limit_in_bytes", &bytes.to_string()).is_ok()
            {
                // Only with swap accounting; there is no swap to use otherwise.
                let _ = write(&dir, "memory.memsw.limit_in_bytes", &bytes.to_string());
                cg.memory = Some((dir.clone(), Flavour::V1));
            }
            if has("pids")
                && cg.pids.is_none()
                && write(&dir, "pids.max", &limits.nproc.to_string()).is_ok()
            {
                cg.pids = Some((dir.clone(), Flavour::V1));
            }
            if has("cpu")
                && cg.cpu.is_none()
                && let Some((quota, weight)) = write_cpu(&dir, Flavour::V1, limits)
            {
                cg.cpu = Some((dir.clone(), Flavour::V1));
                (cg.quota_cpus, cg.weight) = (quota, weight);
            }
            if has("cpuacct") && cg.cpuacct.is_none() && dir.join("cpuacct.usage").exists() {
                cg.cpuacct = Some((dir.clone(), Flavour::V1));
            }
        }
        cg
    }

    fn try_v2(&mut self, h: &Hierarchy, limits: &Limits) {
        // A group with processes cannot hand controllers to children (except the root), so the
        // run's group is a sibling of ours, under our parent.
        let parent = if h.at_root {
            h.own.clone()
        } else {
            match h.own.parent() {
                Some(p) => p.to_path_buf(),
                None => return,
            }
        };
        let enabled = |p: &Path| read(p, "cgroup.subtree_control").unwrap_or_default();
        for c in ["memory", "pids", "cpu"] {
            if !enabled(&parent).split_whitespace().any(|x| x == c) {
                let _ = write(&parent, "cgroup.subtree_control", &format!("+{c}"));
            }
        }
        let on = enabled(&parent);
        let has = |c: &str| on.split_whitespace().any(|x| x == c);
        let Some(dir) = make_child(&parent) else {
            return;
        };
        self.dirs.push(dir.clone());
        // cpu.stat's usage_usec is there whether or not the cpu controller is.
        self.cpuacct = Some((dir.clone(), Flavour::V2));
        if has("memory")
            && let Some(bytes) = limits.memory
            && write(&dir, "memory.max", &bytes.to_string()).is_ok()
        {
            let _ = write(&dir, "memory.swap.max", "0");
            self.memory = Some((dir.clone(), Flavour::V2));
        }
        if has("pids") && write(&dir, "pids.max", &limits.nproc.to_string()).is_ok() {
            self.pids = Some((dir.clone(), Flavour::V2));
        }
        if has("cpu")
            && let Some((quota, weight)) = write_cpu(&dir, Flavour::V2, limits)
        {
            self.cpu = Some((dir.clone(), Flavour::V2));
            (self.quota_cpus, self.weight) = (quota, weight);
        }
    }

    /// Rewrites the ceilings of groups made earlier (a warm host's spare joins its groups
    /// before its run's limits are known). False when one could not be written.
    pub(crate) fn apply(&mut self, limits: &Limits) -> bool {
        let mut ok = true;
        if let Some((d, f)) = &self.memory {
            let v = match (limits.memory, f) {
                (Some(b), _) => b.to_string(),
                (None, Flavour::V2) => "max".into(),
                (None, Flavour::V1) => "-1".into(),
            };
            let file = match f {
                Flavour::V2 => "memory.max",
                Flavour::V1 => "memory.limit_in_bytes",
            };
            ok &= write(d, file, &v).is_ok();
            if *f == Flavour::V1 {
                let _ = write(d, "memory.memsw.limit_in_bytes", &v);
            }
        }
        if let Some((d, _)) = &self.pids {
            ok &= write(d, "pids.max", &limits.nproc.to_string()).is_ok();
        }
        if let Some((d, f)) = &self.cpu {
            match write_cpu(d, *f, limits) {
                Some((quota, weight)) => (self.quota_cpus, self.weight) = (quota, weight),
                None => ok = false,
            }
        }
        ok
    }

    /// Which ceilings the groups enforce, as [`crate::namespace`]'s request mask.
    pub(crate) fn mask(&self) -> u64 {
        let mut m = 0;
        if self.memory.is_some() {
            m |= CG_MEMORY;
        }
        if self.cpuacct.is_some() {
            m |= CG_CPU_TIME;
        }
        m
    }

    /// True when no group was made.
    pub(crate) fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }

    /// The groups as text (one `ROLE FLAVOUR PATH` line each), for the client of a warm host.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = String::new();
        let fl = |f: &Flavour| if *f == Flavour::V2 { "2" } else { "1" };
        for d in &self.dirs {
            out.push_str(&format!("dir 0 {}\n", d.display()));
        }
        for (role, slot) in [
            ("memory", &self.memory),
            ("pids", &self.pids),
            ("cpu", &self.cpu),
            ("cpuacct", &self.cpuacct),
        ] {
            if let Some((d, f)) = slot {
                out.push_str(&format!("{role} {} {}\n", fl(f), d.display()));
            }
        }
        if let Some(q) = self.quota_cpus {
            out.push_str(&format!("quota {q} -\n"));
        }
        if let Some(w) = self.weight {
            out.push_str(&format!("weight {w} -\n"));
        }
        out.into_bytes()
    }

    /// [`RunCgroup::encode`] read back; only directories named like ours are accepted.
    pub(crate) fn decode(bytes: &[u8]) -> Option<RunCgroup> {
        let text = std::str::from_utf8(bytes).ok()?;
        let mut cg = RunCgroup::default();
        cg.host_owned = true;
        for line in text.lines() {
            let mut it = line.splitn(3, ' ');
            let (role, fl, path) = (it.next()?, it.next()?, it.next()?);
            if role == "quota" {
                cg.quota_cpus = fl.parse().ok();
                continue;
            }
            if role == "weight" {
                cg.weight = fl.parse().ok();
                continue;
            }
            let path = PathBuf::from(path);
            let ours = path.is_absolute()
                && path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("airlock-"));
            if !ours {
                return None;
            }
            let f = if fl == "2" { Flavour::V2 } else { Flavour::V1 };
            match role {
                "dir" => cg.dirs.push(path),
                "memory" => cg.memory = Some((path, f)),
                "pids" => cg.pids = Some((path, f)),
                "cpu" => cg.cpu = Some((path, f)),
                "cpuacct" => cg.cpuacct = Some((path, f)),
                _ => return None,
            }
        }
        Some(cg)
    }

    /// `cgroup.procs` of every group, opened for the run's PID 1 to join (fresh descriptors
    /// for each launch).
    pub(crate) fn join_fds(&self) -> Vec<OwnedFd> {
        self.dirs
            .iter()
            .filter_map(|d| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(d.join("cgroup.procs"))
                    .ok()
                    .map(OwnedFd::from)
            })
            .collect()
    }

    /// Where the memory ceiling is enforced.
    pub(crate) fn memory_by(&self) -> Mechanism {
        if self.memory.is_some() {
            Mechanism::Cgroup
        } else {
            Mechanism::Rlimit
        }
    }

    /// Where the process count is bounded.
    pub(crate) fn pids_by(&self) -> Mechanism {
        if self.pids.is_some() {
            Mechanism::Cgroup
        } else if rustix::process::geteuid().is_root() {
            Mechanism::PidMax
        } else {
            Mechanism::Rlimit
        }
    }

    /// Where the CPU-time ceiling is enforced (the caller's watchdog over the group's usage, or
    /// RLIMIT_CPU per process).
    pub(crate) fn cpu_time_by(&self) -> Mechanism {
        if self.cpuacct.is_some() {
            Mechanism::Cgroup
        } else {
            Mechanism::Rlimit
        }
    }

    /// True when the run's CPU share is in force: a bandwidth ceiling ([`Self::quota_cpus`]),
    /// or every CPU at a lower weight.
    pub(crate) fn has_cpu_bandwidth(&self) -> bool {
        self.cpu.is_some()
    }

    /// The kernel killed a process of the run for want of memory.
    pub(crate) fn memory_hit(&self) -> bool {
        match &self.memory {
            Some((d, Flavour::V2)) => {
                keyed(d, "memory.events", "oom_kill").unwrap_or(0) > 0
                    || keyed(d, "memory.events", "oom_group_kill").unwrap_or(0) > 0
            }
            Some((d, Flavour::V1)) => keyed(d, "memory.oom_control", "oom_kill").unwrap_or(0) > 0,
            None => false,
        }
    }

    /// The most memory the run held at once.
    pub(crate) fn memory_peak(&self) -> Option<u64> {
        match &self.memory {
            Some((d, Flavour::V2)) => number(d, "memory.peak"),
            Some((d, Flavour::V1)) => number(d, "memory.max_usage_in_bytes"),
            None => None,
        }
    }

    /// A fork or clone of the run was refused at the process ceiling.
    pub(crate) fn pids_hit(&self) -> bool {
        match &self.pids {
            Some((d, _)) => keyed(d, "pids.events", "max").unwrap_or(0) > 0,
            None => false,
        }
    }

    /// CPU time used by every process of the run so far.
    pub(crate) fn cpu_used(&self) -> Option<Duration> {
        match &self.cpuacct {
            Some((d, Flavour::V2)) => keyed(d, "cpu.stat", "usage_usec").map(Duration::from_micros),
            Some((d, Flavour::V1)) => number(d, "cpuacct.usage").map(Duration::from_nanos),
            None => None,
        }
    }

    /// Kills every process left in the groups.
    pub(crate) fn kill(&self) {
        kill_dirs(&self.dirs);
    }

    fn try_remove(dirs: &mut Vec<PathBuf>) {
        dirs.retain(|d| match std::fs::remove_dir(d) {
            Ok(()) => false,
            Err(e) => e.kind() != io::ErrorKind::NotFound,
        });
    }
}

fn kill_dirs(dirs: &[PathBuf]) {
    for d in dirs {
        if write(d, "cgroup.kill", "1").is_ok() {
            continue;
        }
        for pid in read(d, "cgroup.procs")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse::<i32>().ok())
            .filter_map(rustix::process::Pid::from_raw)
        {
            // A pid listed in the run's own group.
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}

/// Set in a warm host ([`serve_as_host`]): its groups that cannot be removed yet wait in
/// [`DEFERRED`] for the host's next turn, instead of a thread's retries (a host clones its
/// spares only while it has one thread) or a wait on its serving loop.
static IN_HOST: AtomicBool = AtomicBool::new(false);

/// A warm host's groups that could not be removed yet, with when that was first tried.
static DEFERRED: Mutex<Vec<(PathBuf, Instant)>> = Mutex::new(Vec::new());

/// How long a host retries a group that stays busy. Then it leaves it to the sweep that follows
/// its own exit (the processes of a run die with its PID 1, so this is never expected).
const DEFER_FOR: Duration = Duration::from_secs(10);

/// Makes this process a warm host as far as its groups go: see [`IN_HOST`].
pub(crate) fn serve_as_host() {
    IN_HOST.store(true, Ordering::Relaxed);
}

/// Tries again to remove the groups this host could not remove before. True while some are
/// still waiting (the host should come back soon).
pub(crate) fn retry_deferred() -> bool {
    let Ok(mut deferred) = DEFERRED.lock() else {
        return false;
    };
    if deferred.is_empty() {
        return false;
    }
    let dirs: Vec<PathBuf> = deferred.iter().map(|(d, _)| d.clone()).collect();
    kill_dirs(&dirs);
    deferred.retain(|(d, since)| {
        let gone = match std::fs::remove_dir(d) {
            Ok(()) => true,
            Err(e) => e.kind() == io::ErrorKind::NotFound,
        };
        !gone && since.elapsed() < DEFER_FOR
    });
    !deferred.is_empty()
}

/// Removes what it can of `dirs` now and leaves the rest to [`retry_deferred`].
fn defer(mut dirs: Vec<PathBuf>) {
    RunCgroup::try_remove(&mut dirs);
    if let Ok(mut deferred) = DEFERRED.lock() {
        let now = Instant::now();
        deferred.extend(dirs.into_iter().map(|d| (d, now)));
    }
}

impl Drop for RunCgroup {
    /// Removes the groups. A PID 1 that reported may still be exiting: what cannot be removed
    /// yet is killed and removed later: by a short-lived thread (or by the next process's
    /// sweep) in a caller, on the host's next turn in a warm host ([`retry_deferred`]). A warm
    /// host's client leaves its groups to the host.
    fn drop(&mut self) {
        if self.host_owned {
            return;
        }
        let mut dirs = std::mem::take(&mut self.dirs);
        if dirs.is_empty() {
            return;
        }
        kill_dirs(&dirs);
        if IN_HOST.load(Ordering::Relaxed) {
            defer(dirs);
            return;
        }
        // PID 1 is usually gone within a few milliseconds of its report; nobody waits longer
        // than 2 ms for it here (a short-lived caller leaves the rest to the next sweep: the
        // groups are named after it).
        for _ in 0..4 {
            Self::try_remove(&mut dirs);
            if dirs.is_empty() {
                return;
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        let _ = std::thread::Builder::new()
            .name("airlock-cgroup-rm".into())
            .spawn(move || {
                let mut dirs = dirs;
                for _ in 0..200 {
                    Self::try_remove(&mut dirs);
                    if dirs.is_empty() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_travel_to_the_client_and_nothing_else_is_accepted() {
        // Plain directories stand in for a hierarchy.
        let t = tempfile::tempdir().unwrap();
        let (a, m) = (t.path().join("airlock-1-0"), t.path().join("airlock-1-1"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&m).unwrap();
        let cg = RunCgroup {
            dirs: vec![a.clone(), m.clone()],
            memory: Some((m.clone(), Flavour::V1)),
            pids: None,
            cpu: Some((a.clone(), Flavour::V2)),
            cpuacct: Some((a.clone(), Flavour::V2)),
            quota_cpus: Some(1.5),
            weight: Some(RUN_WEIGHT),
            host_owned: false,
        };
        let back = RunCgroup::decode(&cg.encode()).unwrap();
        assert_eq!(back.dirs, cg.dirs);
        assert_eq!(back.memory, cg.memory);
        assert_eq!(back.cpu, cg.cpu);
        assert_eq!(back.quota_cpus, Some(1.5));
        assert_eq!(back.weight, Some(RUN_WEIGHT));
        assert_eq!(back.mask(), cg.mask());
        // The client leaves the host's groups to the host.
        drop(back);
        assert!(a.is_dir() && m.is_dir());
        drop(cg);
        assert!(!a.exists() && !m.exists());
        assert!(RunCgroup::decode(b"dir 0 /etc\n").is_none());
        assert!(RunCgroup::decode(b"memory 1 relative/airlock-1\n").is_none());
    }

    #[test]
    fn a_hosts_group_that_is_still_busy_is_retried_until_it_can_be_removed() {
        // Plain directories stand in for a hierarchy: a group that cannot be removed yet is
        // one that is not empty.
        let t = tempfile::tempdir().unwrap();
        let (busy, idle) = (t.path().join("airlock-1-7"), t.path().join("airlock-1-8"));
        std::fs::create_dir_all(busy.join("task")).unwrap();
        std::fs::create_dir(&idle).unwrap();
        defer(vec![busy.clone(), idle.clone()]);
        assert!(!idle.exists(), "removed at once");
        assert!(busy.exists());
        assert!(retry_deferred(), "still waiting");
        assert!(busy.exists());
        std::fs::remove_dir(busy.join("task")).unwrap();
        assert!(!retry_deferred(), "nothing left to wait for");
        assert!(!busy.exists());
    }

    #[test]
    fn the_groups_of_a_process_that_is_gone_are_swept_beside_a_new_one() {
        let t = tempfile::tempdir().unwrap();
        let dead = t.path().join(format!("airlock-{}-0", u32::MAX - 1));
        let live = t.path().join("airlock-1-0"); // PID 1 is alive
        std::fs::create_dir(&dead).unwrap();
        std::fs::create_dir(&live).unwrap();
        let made = make_child(t.path()).unwrap();
        assert!(!dead.exists());
        assert!(made.exists() && live.exists());
    }

    #[test]
    fn discovery_reads_this_process_groups() {
        // Every process is in some group of every mounted hierarchy; the paths exist.
        for h in hierarchies() {
            assert!(h.own.is_dir(), "{h:?}");
        }
    }
}
