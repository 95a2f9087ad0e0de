//! The degraded backend: no kernel isolation, for hosts without user namespaces, and only when
//! the operator opts in. The command runs in a scratch copy of workspace + layers (reflinked
//! where the filesystem can), with a scrubbed environment, rlimits and a process-group kill;
//! afterwards the copy is compared with its sources and the differences are written to the
//! upper directory in overlay form, so [`crate::harvest`] works unchanged. Every outcome says
//! `degraded: true`. It does not hide `$HOME`, the network or host processes, and a `setsid`
//! child can escape the group kill: callers must say "degraded: no kernel isolation".

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::Backend;
use crate::capture::Collector;
use crate::error::SandboxError;
use crate::launch::validate;
use crate::spec::{Outcome, SandboxSpec};
use crate::supervise::{self, Watch};

/// Runs the command in a copy of the workspace, with a process-group kill and no isolation.
#[derive(Debug, Default, Clone)]
pub struct DegradedBackend {
    _private: (),
}

impl DegradedBackend {
    /// The backend.
    pub fn new() -> Self {
        DegradedBackend { _private: () }
    }
}

impl Backend for DegradedBackend {
    fn name(&self) -> &'static str {
        "degraded"
    }

    fn run(&self, spec: &SandboxSpec) -> Result<Outcome, SandboxError> {
        run_in_copy(spec, crate::Tier::Degraded, None)
    }

    fn visible_root(&self, _workspace: &Path, work: &Path) -> PathBuf {
        copy_dir(work)
    }
}

/// Where a copy tier puts the workspace copy of a run: beneath the spec's work directory
/// (caller-owned, outside the workspace, unused without an overlay), so a caller knows the
/// path the command sees before the run.
pub(crate) fn copy_dir(work: &Path) -> PathBuf {
    work.join("ws")
}

/// The directories of a copy-tier run, for the tier's confinement.
pub(crate) struct CopyDirs<'a> {
    /// The workspace copy the command runs in.
    pub(crate) copy: &'a Path,
    /// The run's private temporary directory (`TMPDIR`).
    pub(crate) tmp: &'a Path,
    /// `$HOME` of the run (the spec's home binds are relative to it).
    pub(crate) home: Option<&'a Path>,
    /// The masked paths, absolute (workspace ones are already left out of the copy).
    pub(crate) masked: &'a [PathBuf],
}

/// What a copy tier adds to the command before it is spawned (its confinement), given the
/// run's directories and the `cgroup.procs` descriptors of its control groups; returns the
/// descriptors the confinement refers to, to keep open until the spawn returns.
pub(crate) type Confine<'a> = &'a dyn Fn(
    &mut Command,
    &CopyDirs<'_>,
    Vec<std::os::fd::RawFd>,
) -> Result<Option<OwnedFd>, SandboxError>;

/// What a path of the merged base was, and where it came from.
#[derive(Debug, Clone)]
enum Base {
    /// `copied`: the copy's change time right after it was made; a copy whose change time
    /// did not move was not written (every write and chmod moves it), so its content is not
    /// read again.
    File {
        src: PathBuf,
        mode: u32,
        copied: (i64, i64),
    },
    Dir {
        mode: u32,
    },
    Symlink {
        target: PathBuf,
    },
}

fn io_err<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> SandboxError + 'a {
    move |e| SandboxError::io(action, path, e)
}

/// Opens `path` for reading; a file its owner made unreadable (a staged `chmod 000`, in the
/// session's own layer) is opened with the owner's read bit set for the moment, then given its
/// mode back.
fn open_readable(path: &Path) -> io::Result<fs::File> {
    match fs::File::open(path) {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            let mode = fs::symlink_metadata(path)?.mode() & 0o7777;
            fs::set_permissions(path, fs::Permissions::from_mode(mode | 0o400))?;
            let opened = fs::File::open(path);
            fs::set_permissions(path, fs::Permissions::from_mode(mode))?;
            opened
        }
        other => other,
    }
}

/// Copies a file, cloning its extents when the filesystem supports it ([`open_readable`]).
fn clone_or_copy(src: &Path, dst: &Path) -> io::Result<()> {
    let from = open_readable(src)?;
    let mut to = fs::File::create(dst)?;
    if rustix::fs::ioctl_ficlone(&to, &from).is_err() {
        let mut from = from;
        io::copy(&mut from, &mut to)?;
    }
    Ok(())
}

fn is_whiteout(meta: &fs::Metadata) -> bool {
    use std::os::unix::fs::FileTypeExt;
    meta.file_type().is_char_device() && meta.rdev() == 0
}

/// Copies `src` (a layer or the workspace) over `dst`, recording the merged base. Masked paths
/// (workspace-relative) are neither copied nor recorded.
fn overlay_copy(
    src: &Path,
    dst: &Path,
    rel: &Path,
    base: &mut BTreeMap<PathBuf, Base>,
    masked: &[PathBuf],
) -> Result<(), SandboxError> {
    for entry in fs::read_dir(src).map_err(io_err("reading", src))? {
        let entry = entry.map_err(io_err("reading", src))?;
        let s = entry.path();
        let d = dst.join(entry.file_name());
        let r = rel.join(entry.file_name());
        if masked.contains(&r) {
            continue;
        }
        let meta = fs::symlink_metadata(&s).map_err(io_err("inspecting", &s))?;
        let existing = fs::symlink_metadata(&d).ok();
        if is_whiteout(&meta) {
            remove_any(&d).map_err(io_err("removing", &d))?;
            base.retain(|p, _| !p.starts_with(&r));
            continue;
        }
        if meta.is_dir() {
            let opaque = crate::harvest::is_opaque(&s).map_err(io_err("reading xattrs of", &s))?;
            if opaque || existing.as_ref().is_some_and(|m| !m.is_dir()) {
                remove_any(&d).map_err(io_err("removing", &d))?;
                base.retain(|p, _| !p.starts_with(&r));
            }
            if fs::symlink_metadata(&d).is_err() {
                fs::create_dir(&d).map_err(io_err("creating", &d))?;
            }
            let mode = meta.mode() & 0o7777;
            fs::set_permissions(&d, fs::Permissions::from_mode(mode | 0o700))
                .map_err(io_err("chmod", &d))?;
            base.insert(r.clone(), Base::Dir { mode });
            overlay_copy(&s, &d, &r, base, masked)?;
        } else {
            if existing.is_some() {
                remove_any(&d).map_err(io_err("removing", &d))?;
                base.retain(|p, _| !p.starts_with(&r));
            }
            if meta.file_type().is_symlink() {
                let target = fs::read_link(&s).map_err(io_err("reading the link", &s))?;
                std::os::unix::fs::symlink(&target, &d).map_err(io_err("creating the link", &d))?;
                base.insert(r, Base::Symlink { target });
            } else if meta.is_file() {
                clone_or_copy(&s, &d).map_err(io_err("copying", &s))?;
                let mode = meta.mode() & 0o7777;
                fs::set_permissions(&d, fs::Permissions::from_mode(mode))
                    .map_err(io_err("chmod", &d))?;
                let m = fs::symlink_metadata(&d).map_err(io_err("inspecting", &d))?;
                base.insert(
                    r,
                    Base::File {
                        src: s,
                        mode,
                        copied: (m.ctime(), m.ctime_nsec()),
                    },
                );
            }
        }
    }
    Ok(())
}

fn remove_any(p: &Path) -> io::Result<()> {
    match fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(p),
        Ok(_) => fs::remove_file(p),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

fn same_content(a: &Path, b: &Path) -> io::Result<bool> {
    use std::io::Read;
    let (ma, mb) = (fs::metadata(a)?, fs::metadata(b)?);
    if ma.len() != mb.len() {
        return Ok(false);
    }
    let (mut fa, mut fb) = (open_readable(a)?, open_readable(b)?);
    let (mut ba, mut bb) = (vec![0u8; 64 << 10], vec![0u8; 64 << 10]);
    loop {
        let n = fa.read(&mut ba)?;
        if n == 0 {
            return Ok(true);
        }
        fb.read_exact(&mut bb[..n])?;
        if ba[..n] != bb[..n] {
            return Ok(false);
        }
    }
}

/// Creates the upper's parent directories of `rel` with the copy's modes.
fn upper_parents(upper: &Path, copy: &Path, rel: &Path) -> io::Result<()> {
    let mut cur = PathBuf::new();
    if let Some(parent) = rel.parent() {
        for comp in parent.components() {
            cur.push(comp);
            let u = upper.join(&cur);
            if fs::symlink_metadata(&u).is_err() {
                fs::create_dir(&u)?;
                let mode = fs::metadata(copy.join(&cur))
                    .map(|m| m.mode() & 0o7777)
                    .unwrap_or(0o755);
                fs::set_permissions(&u, fs::Permissions::from_mode(mode))?;
            }
        }
    }
    Ok(())
}

/// Writes the differences between the copy and its base into `upper`, overlay-style. What the
/// command put at a masked path is dropped, as the namespace backend's mask drops it.
fn diff_into_upper(
    copy: &Path,
    rel: &Path,
    base: &BTreeMap<PathBuf, Base>,
    upper: &Path,
    masked: &[PathBuf],
    settled: (i64, i64),
) -> io::Result<()> {
    for entry in fs::read_dir(copy.join(rel))? {
        let entry = entry?;
        let r = rel.join(entry.file_name());
        if masked.contains(&r) {
            continue;
        }
        let abs = entry.path();
        let meta = fs::symlink_metadata(&abs)?;
        let mode = meta.mode() & 0o7777;
        let was = base.get(&r);
        // The copy is ours: what the command made unreadable (`chmod 000`) is made readable
        // again to be recorded (with the mode the command gave it), as root reads it anyway.
        let readable = if meta.is_dir() { 0o500 } else { 0o400 };
        if !meta.file_type().is_symlink() && mode & readable != readable {
            fs::set_permissions(&abs, fs::Permissions::from_mode(mode | readable))?;
        }
        if meta.is_dir() {
            let changed = !matches!(was, Some(Base::Dir { mode: m }) if *m == mode);
            if changed {
                upper_parents(upper, copy, &r)?;
                let u = upper.join(&r);
                if was.is_some() {
                    remove_any(&u)?;
                }
                fs::create_dir_all(&u)?;
                fs::set_permissions(&u, fs::Permissions::from_mode(mode))?;
                if was.is_some_and(|b| !matches!(b, Base::Dir { .. })) {
                    crate::harvest::mark_opaque(&u)?;
                }
            }
            diff_into_upper(copy, &r, base, upper, masked, settled)?;
        } else if meta.file_type().is_symlink() {
            let target = fs::read_link(&abs)?;
            if !matches!(was, Some(Base::Symlink { target: t }) if *t == target) {
                upper_parents(upper, copy, &r)?;
                remove_any(&upper.join(&r))?;
                std::os::unix::fs::symlink(&target, upper.join(&r))?;
            }
        } else if meta.is_file() {
            let same = match was {
                Some(Base::File {
                    src,
                    mode: m,
                    copied,
                }) => {
                    // A change time taken well before the command started (`settled`) cannot
                    // hide a write in the same clock tick.
                    *m == mode
                        && ((*copied == (meta.ctime(), meta.ctime_nsec()) && *copied < settled)
                            || same_content(src, &abs)?)
                }
                _ => false,
            };
            if !same {
                upper_parents(upper, copy, &r)?;
                let u = upper.join(&r);
                remove_any(&u)?;
                fs::copy(&abs, &u)?;
                fs::set_permissions(&u, fs::Permissions::from_mode(mode))?;
            }
        }
    }
    Ok(())
}

fn whiteouts(copy: &Path, base: &BTreeMap<PathBuf, Base>, upper: &Path) -> io::Result<()> {
    let mut deleted_dirs: Vec<&PathBuf> = Vec::new();
    for rel in base.keys() {
        if deleted_dirs.iter().any(|d| rel.starts_with(d)) {
            continue;
        }
        if fs::symlink_metadata(copy.join(rel)).is_err() {
            upper_parents(upper, copy, rel)?;
            let u = upper.join(rel);
            remove_any(&u)?;
            rustix::fs::mknodat(
                rustix::fs::CWD,
                &u,
                rustix::fs::FileType::CharacterDevice,
                rustix::fs::Mode::empty(),
                0,
            )?;
            deleted_dirs.push(rel);
        }
    }
    Ok(())
}

/// Without mounts a cache is used at its host directory: every mention of a cache's sandbox
/// path in a variable's value names the host directory instead.
fn cache_env_value(val: &std::ffi::OsStr, caches: &[crate::CacheBind]) -> std::ffi::OsString {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let mut out = val.as_bytes().to_vec();
    for c in caches {
        let from = c.inside.as_os_str().as_bytes();
        let to = c.host.as_os_str().as_bytes();
        let mut next = Vec::with_capacity(out.len());
        let mut i = 0;
        while i < out.len() {
            if out[i..].starts_with(from) {
                next.extend_from_slice(to);
                i += from.len();
            } else {
                next.push(out[i]);
                i += 1;
            }
        }
        out = next;
    }
    std::ffi::OsString::from_vec(out)
}

/// The limits report of a copy-tier run: the control group's ceilings where it has them, the
/// write watchdog's measure (`disk_used`: what the run's directories grew by; none: the
/// degraded tier, where only RLIMIT_FSIZE per file holds).
fn copy_tier_report(
    limits: &crate::Limits,
    cg: &crate::cgroup::RunCgroup,
    disk_used: Option<u64>,
) -> crate::LimitsReport {
    let mut r = crate::outcome::rlimit_report(limits, (!cg.is_empty()).then_some(cg));
    match disk_used {
        Some(used) => {
            r.disk.by = Some(crate::Mechanism::Watchdog);
            r.disk.used_bytes = used;
        }
        None => r.disk.by = None,
    }
    r
}

/// Runs `spec` in a copy of workspace + layers beneath its work directory, confined by
/// `confine` (nothing: the degraded tier), and records the copy's differences in the upper
/// directory. The outcome says `tier`.
pub(crate) fn run_in_copy(
    spec: &SandboxSpec,
    tier: crate::Tier,
    confine: Option<Confine<'_>>,
) -> Result<Outcome, SandboxError> {
    let v = validate(spec, crate::settings::current())?;
    let copy = copy_dir(&v.work);
    let tmp = v.work.join("tmp");
    for dir in [&copy, &tmp] {
        crate::remove_tree(dir).map_err(io_err("clearing", dir))?;
        fs::create_dir(dir).map_err(io_err("creating", dir))?;
    }
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o700)).map_err(io_err("chmod", &tmp))?;
    let outcome = run_copied(spec, &v, &copy, &tmp, tier, confine);
    // Directories the command made unreadable would block the cleanup.
    let _ = crate::remove_tree(&copy);
    let _ = crate::remove_tree(&tmp);
    outcome
}

fn run_copied(
    spec: &SandboxSpec,
    v: &crate::launch::Validated,
    copy: &Path,
    tmp: &Path,
    tier: crate::Tier,
    confine: Option<Confine<'_>>,
) -> Result<Outcome, SandboxError> {
    let mut base = BTreeMap::new();
    // Masked workspace paths are left out of the copy: absent rather than empty (no mount can
    // hide them here), and, absent from the base, never reported as deleted.
    let masked: Vec<PathBuf> = v
        .masked
        .iter()
        .filter_map(|m| m.strip_prefix(&v.workspace).ok().map(Path::to_path_buf))
        .collect();
    overlay_copy(&v.workspace, copy, Path::new(""), &mut base, &masked)?;
    for layer in &v.layers {
        overlay_copy(layer, copy, Path::new(""), &mut base, &masked)?;
    }
    let rel_cwd = v.cwd.strip_prefix(&v.workspace).unwrap_or(Path::new(""));

    let mut cmd = Command::new(&spec.argv[0]);
    cmd.args(&spec.argv[1..])
        .current_dir(copy.join(rel_cwd))
        .env_clear()
        .envs(
            v.env
                .iter()
                .map(|(k, val)| (k, cache_env_value(val, &v.cache_binds))),
        )
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if confine.is_some() {
        // The confinement starts a session (and so a process group) of its own.
        cmd.env("TMPDIR", tmp);
    } else {
        cmd.process_group(0);
    }
    let l = &spec.limits;
    // A confined tier's run gets control groups where the caller can make them, as the full
    // tier's does (memory, processes, CPU bandwidth and time); rlimits stand in otherwise.
    let cg = if confine.is_some() && l.cgroup && crate::settings::current().cgroups {
        crate::cgroup::RunCgroup::create(l)
    } else {
        crate::cgroup::RunCgroup::default()
    };
    let mut limits = vec![
        (libc::RLIMIT_CORE, 0, 0),
        (libc::RLIMIT_NOFILE, l.nofile, l.nofile),
        (
            libc::RLIMIT_FSIZE,
            l.fsize.min(l.upper_bytes),
            l.fsize.min(l.upper_bytes),
        ),
    ];
    if let Some(m) = l
        .memory
        .filter(|_| cg.memory_by() != crate::Mechanism::Cgroup)
    {
        limits.push((libc::RLIMIT_DATA, m, m));
    }
    if let Some(c) = l.cpu_seconds {
        limits.push((libc::RLIMIT_CPU, c, c + 1));
    }
    if confine.is_some() {
        limits.push((libc::RLIMIT_NPROC, l.nproc, l.nproc));
    }
    crate::child::rlimits_before_exec(&mut cmd, limits);
    let join = cg.join_fds();
    // Held open until the spawn returns: the child's confinement refers to them.
    let _ruleset = match confine {
        Some(c) => c(
            &mut cmd,
            &CopyDirs {
                copy,
                tmp,
                home: v.home.as_deref(),
                masked: &v.masked,
            },
            join.iter().map(std::os::fd::AsRawFd::as_raw_fd).collect(),
        )?,
        None => None,
    };
    // Copies whose change time is older than this are compared by change time alone.
    let settled = std::time::SystemTime::now()
        .checked_sub(std::time::Duration::from_millis(50))
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or((0, 0), |d| {
            (
                i64::try_from(d.as_secs()).unwrap_or(0),
                i64::from(d.subsec_nanos()),
            )
        });
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|source| SandboxError::Exec {
        program: spec.argv[0].clone(),
        source,
    })?;
    drop(_ruleset);
    drop(join);
    let pid = libc::pid_t::try_from(child.id()).map_err(|e| SandboxError::Sys {
        action: "spawning the command",
        source: std::io::Error::other(e),
    })?;
    let stdout: OwnedFd = child
        .stdout
        .take()
        .map(Into::into)
        .ok_or_else(|| SandboxError::sys("capturing stdout"))?;
    let stderr: OwnedFd = child
        .stderr
        .take()
        .map(Into::into)
        .ok_or_else(|| SandboxError::sys("capturing stderr"))?;
    let stdin = match (child.stdin.take(), spec.stdin.as_deref()) {
        (Some(s), Some(data)) => Some((OwnedFd::from(s), data)),
        _ => None,
    };
    let kill = |p: libc::pid_t| {
        // The process group we created for the child, and its control groups.
        if let Some(group) = rustix::process::Pid::from_raw(p) {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
        cg.kill();
    };
    // A confined tier watches its ceilings as the full tier does: CPU time on the control
    // group, and what the run writes (the copy and its temporary directory, beyond what the
    // copy took at the start) against the write ceiling.
    let at_start = if confine.is_some() {
        crate::ceiling::usage(&v.work).0
    } else {
        0
    };
    let mut watcher = confine.is_some().then(|| crate::ceiling::Watcher {
        cgroup: &cg,
        cpu_limit: l
            .cpu_seconds
            .filter(|_| cg.cpu_time_by() == crate::Mechanism::Cgroup)
            .map(std::time::Duration::from_secs),
        disk: crate::ceiling::DiskWatch::new(&v.work, at_start.saturating_add(l.upper_bytes)),
    });
    let mut check = || watcher.as_mut().and_then(crate::ceiling::Watcher::check);
    let (mut out, mut err) = Collector::pair_for(spec);
    let ended = supervise::supervise(
        Watch {
            pid,
            stdout,
            stderr,
            stdin,
            deadline: start + spec.timeout,
            cancel: spec.cancel.as_ref(),
            kill: &kill,
            foreign: None,
            report: None,
            watcher: Some(&mut check),
        },
        &mut out,
        &mut err,
    );
    // Whatever is left of the group goes too (a setsid'd child escapes: no kernel isolation).
    kill(pid);
    drop(child);
    // The outcome is returned once the killed group has left the process table (bounded: an
    // unreaped zombie of another parent must not hold the run).
    if let Some(group) = rustix::process::Pid::from_raw(pid) {
        let until = Instant::now() + std::time::Duration::from_secs(2);
        while rustix::process::test_kill_process_group(group).is_ok() && Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    let interrupted = ended.timed_out || ended.cancelled;
    let (exit_code, signal) = if interrupted {
        (None, None)
    } else if ended.ceiling.is_some() {
        // Killed at a ceiling, as the full tier reports it.
        (Some(137), None)
    } else if libc::WIFEXITED(ended.status) {
        (Some(libc::WEXITSTATUS(ended.status)), None)
    } else if libc::WIFSIGNALED(ended.status) {
        (None, Some(libc::WTERMSIG(ended.status)))
    } else {
        (None, None)
    };
    // Past the write ceiling nothing the run wrote is staged (as in the full tier).
    if ended.ceiling != Some(crate::Ceiling::Disk) {
        diff_into_upper(copy, Path::new(""), &base, &v.upper, &masked, settled)
            .and_then(|()| whiteouts(copy, &base, &v.upper))
            .map_err(io_err("recording the changes in", &v.upper))?;
    }
    Ok(Outcome {
        exit_code,
        signal,
        timed_out: ended.timed_out,
        cancelled: ended.cancelled,
        stdout: out.finish(),
        stderr: err.finish(),
        duration: ended.duration,
        degraded: tier == crate::Tier::Degraded,
        tier,
        warm: false,
        ceiling: if ended.ceiling.is_some() {
            ended.ceiling
        } else if cg.memory_hit() {
            Some(crate::Ceiling::Memory)
        } else {
            crate::outcome::rlimit_ceiling(exit_code, signal, &spec.limits)
        },
        limits: copy_tier_report(
            &spec.limits,
            &cg,
            watcher
                .as_ref()
                .map(|w| w.disk.used().saturating_sub(at_start)),
        ),
        net: None,
    })
}
