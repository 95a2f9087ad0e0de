//! The caller's side of a launched run, cold or warm: supervise it, read PID 1's report, and
//! turn both into an [`Outcome`] or a [`SandboxError`] naming the failed step.

use std::ffi::OsStr;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::Instant;

use crate::capture::Collector;
use crate::cgroup::CG_CPU_TIME;
use crate::child::{KIND_PLAN, KIND_STAGE, SetupStep};
use crate::error::SandboxError;
use crate::launch::{ParentIo, RunRequest};
use crate::plan;
use crate::spec::{Outcome, SandboxSpec};
use crate::supervise::{self, Watch};

fn read_record(fd: &OwnedFd, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    let mut got = 0;
    while got < len {
        match rustix::io::read(fd, &mut buf[got..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    buf.truncate(got);
    buf
}

/// The ceiling an rlimit-enforced run hit, as its status shows it: SIGXCPU (the CPU-time
/// rlimit) or SIGXFSZ (a file past the write ceiling), or a shell's report of a child killed
/// by one of them (128 + the signal).
pub(crate) fn rlimit_ceiling(
    exit_code: Option<i32>,
    signal: Option<i32>,
    limits: &crate::Limits,
) -> Option<crate::Ceiling> {
    let by = |sig: i32| signal == Some(sig) || exit_code == Some(128 + sig);
    if limits.cpu_seconds.is_some() && by(libc::SIGXCPU) {
        return Some(crate::Ceiling::Cpu);
    }
    if limits.upper_bytes <= limits.fsize && by(libc::SIGXFSZ) {
        return Some(crate::Ceiling::Disk);
    }
    None
}

/// The limits report of a run: from its control group when it has one, else the rlimits.
pub(crate) fn rlimit_report(
    limits: &crate::Limits,
    cg: Option<&crate::cgroup::RunCgroup>,
) -> crate::LimitsReport {
    use crate::Mechanism;
    let mut r = crate::LimitsReport::default();
    if let Some(m) = limits.memory {
        r.memory.bytes = m;
        r.memory.by = Some(cg.map_or(Mechanism::Rlimit, |c| c.memory_by()));
        r.memory.peak_bytes = cg.and_then(|c| c.memory_peak());
    }
    r.cpu.seconds = limits.cpu_seconds;
    r.cpu.by = Some(cg.map_or(Mechanism::Rlimit, |c| c.cpu_time_by()));
    if let Some(c) = cg {
        if c.has_cpu_bandwidth() {
            r.cpu.quota_cpus = c.quota_cpus;
            r.cpu.weight = c.weight;
        }
        r.cpu.used_ms = c
            .cpu_used()
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    }
    r.processes.max = limits.nproc;
    r.processes.by = Some(match cg {
        Some(c) => c.pids_by(),
        None => Mechanism::Rlimit,
    });
    r.processes.hit = cg.is_some_and(|c| c.pids_hit());
    r.disk.bytes = limits.upper_bytes;
    r.disk.by = cg.map(|_| Mechanism::Watchdog);
    r
}

/// The caller's side of a launched run, cold or warm: feed and drain it, enforce the deadline
/// and the cancel flag, then read PID 1's report (the command's wait status, or a set-up
/// failure).
#[allow(clippy::too_many_arguments)]
pub(crate) fn finish(
    spec: &SandboxSpec,
    req: &RunRequest,
    parent: ParentIo,
    pid: libc::pid_t,
    start: Instant,
    kill: &dyn Fn(libc::pid_t),
    foreign: Option<OwnedFd>,
    cg: &crate::cgroup::RunCgroup,
) -> Result<Outcome, SandboxError> {
    let warm = foreign.is_some();
    let mut watcher = crate::ceiling::Watcher {
        cgroup: cg,
        cpu_limit: req
            .limits
            .cpu_seconds
            .filter(|_| req.cgroup_mask & CG_CPU_TIME != 0)
            .map(std::time::Duration::from_secs),
        disk: crate::ceiling::DiskWatch::new(&req.v.upper, req.limits.upper_bytes)
            .with_caches(req.v.cache_binds.iter().map(|b| b.host.as_path())),
    };
    let mut check = || watcher.check();
    // Without input the command reads EOF at once: the write end must not stay open here.
    let stdin = match spec.stdin.as_deref() {
        Some(data) => Some((parent.stdin, data)),
        None => {
            drop(parent.stdin);
            None
        }
    };
    let (mut out, mut err) = Collector::pair_for(spec);
    let ended = supervise::supervise(
        Watch {
            pid,
            stdout: parent.stdout,
            stderr: parent.stderr,
            stdin,
            deadline: start + spec.timeout,
            cancel: spec.cancel.as_ref(),
            kill,
            foreign,
            report: Some(&parent.status_r),
            watcher: Some(&mut check),
        },
        &mut out,
        &mut err,
    );
    crate::timing::mark("sandbox: command ended");

    let status = match ended.report {
        Some(rec) => rec.to_vec(),
        None => read_record(&parent.status_r, 4),
    };
    let failure = read_record(&parent.err_r, 12);
    let (stdout, stderr) = (out.finish(), err.finish());
    let interrupted = ended.timed_out || ended.cancelled || ended.ceiling.is_some();
    let mut outcome = Outcome {
        exit_code: None,
        signal: None,
        timed_out: ended.timed_out,
        cancelled: ended.cancelled,
        stdout,
        stderr,
        duration: ended.duration,
        degraded: false,
        tier: crate::Tier::Full,
        warm,
        ceiling: ended.ceiling,
        limits: crate::LimitsReport::default(),
        net: None,
    };
    if failure.len() == 12 && !interrupted {
        // The plan is rebuilt only to name the failed step (its words do not depend on where
        // the new root lives).
        let steps = req.plan(Path::new("/"), warm).unwrap_or_default();
        return Err(decode_failure(&failure, &steps, &req.argv[0]));
    }
    if status.len() == 4 {
        let st = i32::from_ne_bytes([status[0], status[1], status[2], status[3]]);
        if libc::WIFEXITED(st) {
            outcome.exit_code = Some(libc::WEXITSTATUS(st));
        } else if libc::WIFSIGNALED(st) {
            outcome.signal = Some(libc::WTERMSIG(st));
        }
    }
    if status.len() == 4 || interrupted {
        // Whatever PID 1 left (nothing, normally) goes before the accounting is read.
        cg.kill();
        let (disk_over, disk_used) = {
            let d = &mut watcher.disk;
            (d.settle(), d.used())
        };
        outcome.limits = rlimit_report(&req.limits, Some(cg));
        outcome.limits.disk.used_bytes = disk_used;
        if outcome.ceiling.is_none() && !ended.timed_out && !ended.cancelled {
            outcome.ceiling = if cg.memory_hit() {
                Some(crate::Ceiling::Memory)
            } else if disk_over {
                Some(crate::Ceiling::Disk)
            } else {
                let cpu_by_rlimit = crate::Limits {
                    cpu_seconds: req
                        .limits
                        .cpu_seconds
                        .filter(|_| req.cgroup_mask & CG_CPU_TIME == 0),
                    ..req.limits.clone()
                };
                rlimit_ceiling(outcome.exit_code, outcome.signal, &cpu_by_rlimit)
            };
        }
        return Ok(outcome);
    }
    Err(SandboxError::Setup {
        step: format!(
            "supervising the sandbox (its init ended with wait status {:#x})",
            ended.status
        ),
        source: io::Error::other("the sandbox's init process died without reporting"),
    })
}

fn decode_failure(rec: &[u8], steps: &[plan::Step], argv0: &OsStr) -> SandboxError {
    let word = |i: usize| u32::from_ne_bytes([rec[i], rec[i + 1], rec[i + 2], rec[i + 3]]);
    let (kind, index, errno) = (word(0), word(4), word(8).cast_signed());
    let source = io::Error::from_raw_os_error(errno);
    match (kind, SetupStep::from_u32(index)) {
        (KIND_STAGE, Some(SetupStep::Exec)) => SandboxError::Exec {
            program: argv0.to_owned(),
            source,
        },
        (KIND_STAGE, Some(stage)) => SandboxError::Setup {
            step: stage.describe().into(),
            source,
        },
        (KIND_PLAN, _) => SandboxError::Setup {
            step: steps
                .get(index as usize)
                .map_or_else(|| format!("step {index}"), |s| s.what.clone()),
            source,
        },
        _ => SandboxError::Setup {
            step: format!("unknown step {kind}/{index}"),
            source,
        },
    }
}
