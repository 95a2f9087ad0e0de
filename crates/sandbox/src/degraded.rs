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
        run(spec)
    }
}

/// What a path of the merged base was, and where it came from.
#[derive(Debug, Clone)]
enum Base {
    File { src: PathBuf, mode: u32 },
    Dir { mode: u32 },
    Symlink { target: PathBuf },
}

fn io_err<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> SandboxError + 'a {
    move |e| SandboxError::io(action, path, e)
}

/// Copies a file, cloning its extents when the filesystem supports it.
fn clone_or_copy(src: &Path, dst: &Path) -> io::Result<()> {
    let from = fs::File::open(src)?;
    let to = fs::File::create(dst)?;
    if rustix::fs::ioctl_ficlone(&to, &from).is_err() {
        drop(to);
        fs::copy(src, dst)?;
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
                base.insert(r, Base::File { src: s, mode });
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
    let (mut fa, mut fb) = (fs::File::open(a)?, fs::File::open(b)?);
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
            diff_into_upper(copy, &r, base, upper, masked)?;
        } else if meta.file_type().is_symlink() {
            let target = fs::read_link(&abs)?;
            if !matches!(was, Some(Base::Symlink { target: t }) if *t == target) {
                upper_parents(upper, copy, &r)?;
                remove_any(&upper.join(&r))?;
                std::os::unix::fs::symlink(&target, upper.join(&r))?;
            }
        } else if meta.is_file() {
            let same = match was {
                Some(Base::File { src, mode: m }) => *m == mode && same_content(src, &abs)?,
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

fn run(spec: &SandboxSpec) -> Result<Outcome, SandboxError> {
    let v = validate(spec, crate::settings::current())?;
    let scratch = tempfile::Builder::new()
        .prefix("airlock-degraded-")
        .tempdir()
        .map_err(|e| SandboxError::io("creating the scratch copy", std::env::temp_dir(), e))?;
    let copy = scratch.path().join("ws");
    fs::create_dir(&copy).map_err(io_err("creating", &copy))?;
    let mut base = BTreeMap::new();
    // Masked workspace paths are left out of the copy: absent rather than empty (no mount can
    // hide them here), and, absent from the base, never reported as deleted.
    let masked: Vec<PathBuf> = v
        .masked
        .iter()
        .filter_map(|m| m.strip_prefix(&v.workspace).ok().map(Path::to_path_buf))
        .collect();
    overlay_copy(&v.workspace, &copy, Path::new(""), &mut base, &masked)?;
    for layer in &v.layers {
        overlay_copy(layer, &copy, Path::new(""), &mut base, &masked)?;
    }
    let rel_cwd = v.cwd.strip_prefix(&v.workspace).unwrap_or(Path::new(""));

    let mut cmd = Command::new(&spec.argv[0]);
    cmd.args(&spec.argv[1..])
        .current_dir(copy.join(rel_cwd))
        .env_clear()
        .envs(v.env.iter().map(|(k, val)| (k, val)))
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let l = &spec.limits;
    let mut limits = vec![
        (libc::RLIMIT_CORE, 0, 0),
        (libc::RLIMIT_NOFILE, l.nofile, l.nofile),
        (
            libc::RLIMIT_FSIZE,
            l.fsize.min(l.upper_bytes),
            l.fsize.min(l.upper_bytes),
        ),
    ];
    if let Some(m) = l.memory {
        limits.push((libc::RLIMIT_DATA, m, m));
    }
    if let Some(c) = l.cpu_seconds {
        limits.push((libc::RLIMIT_CPU, c, c + 1));
    }
    crate::child::rlimits_before_exec(&mut cmd, limits);
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|source| SandboxError::Exec {
        program: spec.argv[0].clone(),
        source,
    })?;
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
        // The process group we created for the child.
        if let Some(group) = rustix::process::Pid::from_raw(p) {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
    };
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
            watcher: None,
        },
        &mut out,
        &mut err,
    );
    // Whatever is left of the group goes too (a setsid'd child escapes: no kernel isolation).
    kill(pid);
    drop(child);

    let interrupted = ended.timed_out || ended.cancelled;
    let (exit_code, signal) = if interrupted {
        (None, None)
    } else if libc::WIFEXITED(ended.status) {
        (Some(libc::WEXITSTATUS(ended.status)), None)
    } else if libc::WIFSIGNALED(ended.status) {
        (None, Some(libc::WTERMSIG(ended.status)))
    } else {
        (None, None)
    };
    diff_into_upper(&copy, Path::new(""), &base, &v.upper, &masked)
        .and_then(|()| whiteouts(&copy, &base, &v.upper))
        .map_err(io_err("recording the changes in", &v.upper))?;
    // Directories the command made unreadable would block the cleanup.
    let _ = fs::set_permissions(&copy, fs::Permissions::from_mode(0o700));
    Ok(Outcome {
        exit_code,
        signal,
        timed_out: ended.timed_out,
        cancelled: ended.cancelled,
        stdout: out.finish(),
        stderr: err.finish(),
        duration: ended.duration,
        degraded: true,
        warm: false,
        ceiling: crate::outcome::rlimit_ceiling(exit_code, signal, &spec.limits),
        limits: crate::outcome::rlimit_report(&spec.limits, None),
        net: None,
    })
}
