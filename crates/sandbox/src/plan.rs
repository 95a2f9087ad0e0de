//! The mount plan: every mount of the sandbox's root, computed on the host side before `clone`
//! (paths as `CString`s), so the child only replays it with raw system calls.
//!
//! Order matters and is fixed here: system directories, `/etc`, `/sys`, `/dev`, `/proc`, then the
//! caller's mounts sorted parent-first (so a workspace under `/tmp` or `$HOME` is mounted after
//! the private `/tmp` or `$HOME` that contains it), and finally the new root made read-only.
//!
//! Every step belongs to a [`Phase`]. [`Phase::Base`] steps depend on nothing of the spec (the
//! host's system directories, `/etc` entries and device nodes): a warm sandbox host
//! ([`crate::host`]) replays them once and keeps the result. [`Phase::Run`] steps are the run's
//! own: fresh `/tmp`, `/dev/shm`, `$HOME` and `/proc`, the workspace overlay, the masks and the
//! final read-only root. A cold run replays both, in order.

use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::error::SandboxError;

/// `mount_setattr` attribute bits (linux/mount.h).
pub(crate) const ATTR_RDONLY: u64 = 0x1;
pub(crate) const ATTR_NOSUID: u64 = 0x2;
pub(crate) const ATTR_NODEV: u64 = 0x4;

/// Host system directories bound read-only (symlinks, as on merged-/usr systems, are recreated).
const SYSTEM_DIRS: &[&str] = &["usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"];

/// Entries of `/etc` the sandbox exposes (read-only); everything else in `/etc` (shadow, ssh
/// host keys, sudoers, TLS private keys, `environment`, `ld.so.preload`) is absent.
pub const ETC_ALLOWLIST: &[&str] = &[
    "passwd",
    "group",
    "hosts",
    "host.conf",
    "hostname",
    "resolv.conf",
    "nsswitch.conf",
    "gai.conf",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "timezone",
    "alternatives",
    "ssl/certs",
    "ssl/openssl.cnf",
    "ca-certificates",
    "ca-certificates.conf",
    "pki/tls/certs",
    "pki/ca-trust",
    "os-release",
    "lsb-release",
    "debian_version",
    "protocols",
    "services",
    "mime.types",
    "magic",
    "bash.bashrc",
    "profile",
    "profile.d",
    "inputrc",
    "shells",
    "gitconfig",
];

/// Subtrees of `/sys` the sandbox exposes, read-only, at their own paths: what runtimes and
/// test suites read to size themselves (online CPUs, NUMA nodes, control-group limits,
/// transparent huge pages). Everything else in `/sys` (firmware tables, DMI serials, device
/// attributes, debugfs, kernel tunables) is absent.
pub const SYS_ALLOWLIST: &[&str] = &[
    "devices/system/cpu",
    "devices/system/node",
    "fs/cgroup",
    "kernel/mm/transparent_hugepage",
];

/// Device nodes bound from the host's `/dev`.
pub(crate) const DEV_NODES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// One step of the plan.
#[derive(Debug)]
pub(crate) enum Op {
    /// `mount(NULL, "/", NULL, MS_REC|MS_PRIVATE)`: nothing propagates to or from the host.
    MakePrivate,
    /// A tmpfs with the given option string.
    Tmpfs { dst: CString, data: CString },
    /// `mkdir`, tolerating an existing directory.
    Mkdir { path: CString },
    /// Creates an empty file as the mount point of a file bind.
    Touch { path: CString },
    /// A symbolic link.
    Symlink { target: CString, path: CString },
    /// A bind mount (recursive for directories).
    Bind {
        src: CString,
        dst: CString,
        recursive: bool,
    },
    /// `mount_setattr` with the given attributes.
    SetAttr {
        path: CString,
        set: u64,
        recursive: bool,
    },
    /// The workspace overlay.
    Overlay { dst: CString, data: CString },
    /// A fresh procfs for the new pid namespace.
    Proc { dst: CString },
    /// Writes a value to a file (a sysctl of the new namespaces); failure is tolerated.
    WriteOptional { path: CString, data: CString },
}

/// Which replay a step belongs to (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Independent of the spec: replayed once by a warm host, or first in a cold run.
    Base,
    /// The run's own mounts, replayed for every command.
    Run,
}

/// A step and what it does, in words, for error messages.
#[derive(Debug)]
pub(crate) struct Step {
    pub(crate) op: Op,
    pub(crate) what: String,
    pub(crate) phase: Phase,
}

/// Inputs of the plan, all host paths already validated.
pub(crate) struct PlanInput<'a> {
    pub(crate) newroot: &'a Path,
    pub(crate) workspace: &'a Path,
    pub(crate) layers: &'a [PathBuf],
    pub(crate) upper: &'a Path,
    pub(crate) work: &'a Path,
    pub(crate) home: Option<&'a Path>,
    pub(crate) home_binds: &'a [PathBuf],
    pub(crate) ro_binds: &'a [PathBuf],
    /// Host directories bound writable beneath [`crate::CACHE_ROOT`].
    pub(crate) cache_binds: &'a [crate::CacheBind],
    /// Host directories bound read-write at the same path (a granted run's package cache).
    pub(crate) rw_binds: &'a [PathBuf],
    /// Host directories shown writable at the same path through an overlay of the caller's.
    pub(crate) layered_binds: &'a [crate::LayeredBind],
    /// Absolute sandbox paths to hide: inside the workspace, or under an exposed home path.
    pub(crate) masked: &'a [PathBuf],
    pub(crate) tmp_size: u64,
    pub(crate) pid_max: u64,
    /// Where the overlay's directories are reachable when not at their own paths (a warm
    /// host's spare, which has already pivoted, reaches them through bind mounts).
    pub(crate) sources: Option<&'a Sources>,
}

impl PlanInput<'_> {
    /// The overlay's workspace, layers, upper and work directories, as the plan's replayer
    /// reaches them.
    fn overlay_dirs(&self) -> (&Path, &[PathBuf], &Path, &Path) {
        match self.sources {
            Some(s) => (&s.workspace, &s.layers, &s.upper, &s.work),
            None => (self.workspace, self.layers, self.upper, self.work),
        }
    }
}

/// The overlay's host directories, as a process that pivoted reaches them.
#[derive(Debug, Clone)]
pub(crate) struct Sources {
    pub(crate) workspace: PathBuf,
    pub(crate) layers: Vec<PathBuf>,
    pub(crate) upper: PathBuf,
    pub(crate) work: PathBuf,
}

pub(crate) fn cstring(bytes: &[u8]) -> Result<CString, SandboxError> {
    CString::new(bytes).map_err(|_| SandboxError::InvalidSpec("a path contains a NUL byte".into()))
}

fn cpath(p: &Path) -> Result<CString, SandboxError> {
    cstring(p.as_os_str().as_bytes())
}

struct Builder<'a> {
    newroot: &'a Path,
    steps: Vec<Step>,
    /// The phase of the steps pushed now.
    phase: Phase,
    /// Keep [`Phase::Base`] steps (false: a warm run's plan).
    with_base: bool,
}

impl Builder<'_> {
    /// The path of `abs` (a sandbox path) inside the new root.
    fn inside(&self, abs: &Path) -> PathBuf {
        let rel = abs.strip_prefix("/").unwrap_or(abs);
        self.newroot.join(rel)
    }

    fn push(&mut self, op: Op, what: String) {
        if self.phase == Phase::Base && !self.with_base {
            return;
        }
        self.steps.push(Step {
            op,
            what,
            phase: self.phase,
        });
    }

    fn mkdirs(&mut self, abs: &Path) -> Result<(), SandboxError> {
        let mut cur = PathBuf::from("/");
        for comp in abs.components() {
            if let Component::Normal(c) = comp {
                cur.push(c);
                let path = self.inside(&cur);
                self.push(
                    Op::Mkdir {
                        path: cpath(&path)?,
                    },
                    format!("creating {}", cur.display()),
                );
            }
        }
        Ok(())
    }

    /// Binds host `src` at sandbox path `dst`, read-only; directories recursively.
    fn bind_ro(&mut self, src: &Path, dst: &Path, set: u64) -> Result<(), SandboxError> {
        let Ok(meta) = std::fs::metadata(src) else {
            return Ok(());
        };
        let target = self.inside(dst);
        if meta.is_dir() {
            self.mkdirs(dst)?;
        } else {
            if let Some(parent) = dst.parent() {
                self.mkdirs(parent)?;
            }
            self.push(
                Op::Touch {
                    path: cpath(&target)?,
                },
                format!("creating {}", dst.display()),
            );
        }
        let recursive = meta.is_dir();
        self.push(
            Op::Bind {
                src: cpath(src)?,
                dst: cpath(&target)?,
                recursive,
            },
            format!("binding {} read-only", dst.display()),
        );
        self.push(
            Op::SetAttr {
                path: cpath(&target)?,
                set,
                recursive,
            },
            format!("making {} read-only", dst.display()),
        );
        Ok(())
    }

    /// Binds the host directory `src` writable at sandbox path `dst` (no setuid, no devices).
    fn bind_cache(&mut self, src: &Path, dst: &Path) -> Result<(), SandboxError> {
        self.mkdirs(dst)?;
        let target = self.inside(dst);
        self.push(
            Op::Bind {
                src: cpath(src)?,
                dst: cpath(&target)?,
                recursive: false,
            },
            format!("binding the cache {} writable", dst.display()),
        );
        self.push(
            Op::SetAttr {
                path: cpath(&target)?,
                set: ATTR_NOSUID | ATTR_NODEV,
                recursive: false,
            },
            format!("making the cache {} nosuid", dst.display()),
        );
        Ok(())
    }

    /// [`crate::LayeredBind`]: an overlay at the host directory's own path, the host directory
    /// its only (read-only) lower layer; `nosuid`, `nodev`.
    fn layered(&mut self, l: &crate::LayeredBind) -> Result<(), SandboxError> {
        self.mkdirs(&l.path)?;
        let dst = self.inside(&l.path);
        let data = overlay_options(&l.path, &[], &l.upper, &l.work)?;
        // Not `volatile` (that option is for the workspace's scratch upper): this layer is kept
        // across the session's runs.
        let data = data
            .strip_suffix(b",volatile")
            .map_or(data.clone(), <[u8]>::to_vec);
        self.push(
            Op::Overlay {
                dst: cpath(&dst)?,
                data: cstring(&data)?,
            },
            format!("layering a writable copy over {}", l.path.display()),
        );
        self.push(
            Op::SetAttr {
                path: cpath(&dst)?,
                set: ATTR_NOSUID | ATTR_NODEV,
                recursive: false,
            },
            format!("making the layer over {} nosuid", l.path.display()),
        );
        Ok(())
    }

    fn tmpfs(&mut self, abs: &Path, data: String) -> Result<(), SandboxError> {
        self.mkdirs(abs)?;
        let dst = self.inside(abs);
        self.push(
            Op::Tmpfs {
                dst: cpath(&dst)?,
                data: cstring(data.as_bytes())?,
            },
            format!("mounting a tmpfs on {}", abs.display()),
        );
        Ok(())
    }
}

impl Builder<'_> {
    /// Hides `abs` if the sandbox shows it: inside the workspace when any layer or the
    /// workspace has it, under `$HOME` when one of the exposed toolchain paths holds it. A
    /// directory goes behind an empty read-only tmpfs, anything else behind `/dev/null`.
    fn mask(
        &mut self,
        abs: &Path,
        input: &PlanInput<'_>,
        home: Option<&Path>,
    ) -> Result<(), SandboxError> {
        let meta = if let Ok(rel) = abs.strip_prefix(input.workspace) {
            let (ws, layers, _, _) = input.overlay_dirs();
            merged_metadata(ws, layers, rel)
        } else {
            // Home binds sit at their own paths, on the host and (after a spare's pivot) inside.
            let shown = home.is_some_and(|home| {
                input.home_binds.iter().any(|b| {
                    let b = if b.is_absolute() {
                        b.clone()
                    } else {
                        home.join(b)
                    };
                    abs.starts_with(&b)
                })
            });
            shown.then(|| std::fs::symlink_metadata(abs).ok()).flatten()
        };
        let Some(meta) = meta else {
            return Ok(());
        };
        let dst = self.inside(abs);
        if meta.is_dir() {
            self.push(
                Op::Tmpfs {
                    dst: cpath(&dst)?,
                    data: cstring(b"mode=0555,size=4k")?,
                },
                format!("masking {}", abs.display()),
            );
            self.push(
                Op::SetAttr {
                    path: cpath(&dst)?,
                    set: ATTR_RDONLY | ATTR_NOSUID | ATTR_NODEV,
                    recursive: false,
                },
                format!("making the mask on {} read-only", abs.display()),
            );
        } else if !meta.file_type().is_symlink() {
            self.push(
                Op::Bind {
                    src: cstring(b"/dev/null")?,
                    dst: cpath(&dst)?,
                    recursive: false,
                },
                format!("masking {}", abs.display()),
            );
        }
        Ok(())
    }
}

/// What the overlay shows at `rel`: the topmost layer holding it decides, a whiteout (a 0/0
/// character device) at it or above it, or an opaque directory above it, hides what lower
/// layers and the workspace hold.
fn merged_metadata(ws: &Path, layers: &[PathBuf], rel: &Path) -> Option<std::fs::Metadata> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let whiteout = |m: &std::fs::Metadata| m.file_type().is_char_device() && m.rdev() == 0;
    for layer in layers.iter().rev() {
        let mut cur = layer.clone();
        let mut comps = rel.components().peekable();
        let mut opaque_above = false;
        while let Some(c) = comps.next() {
            cur.push(c);
            let Ok(m) = std::fs::symlink_metadata(&cur) else {
                if opaque_above {
                    return None; // an opaque directory hides the layers below
                }
                break; // not in this layer: look below
            };
            if whiteout(&m) {
                return None;
            }
            if comps.peek().is_none() {
                return Some(m);
            }
            if !m.is_dir() {
                return None; // a file here replaces the directory below
            }
            opaque_above = crate::harvest::is_opaque(&cur).unwrap_or(false);
        }
    }
    std::fs::symlink_metadata(ws.join(rel)).ok()
}

/// Characters the legacy overlay option string cannot carry safely.
fn overlay_safe(p: &Path) -> Result<&[u8], SandboxError> {
    let b = p.as_os_str().as_bytes();
    if b.iter()
        .any(|c| matches!(c, b',' | b':' | b'\\' | b'\n' | 0))
    {
        return Err(SandboxError::InvalidSpec(format!(
            "overlay paths may not contain ',', ':', '\\' or newlines: {}",
            p.display()
        )));
    }
    Ok(b)
}

/// The overlayfs option string: layers top-first, then the workspace.
pub(crate) fn overlay_options(
    workspace: &Path,
    layers: &[PathBuf],
    upper: &Path,
    work: &Path,
) -> Result<Vec<u8>, SandboxError> {
    let mut data = b"lowerdir=".to_vec();
    for layer in layers.iter().rev() {
        data.extend_from_slice(overlay_safe(layer)?);
        data.push(b':');
    }
    data.extend_from_slice(overlay_safe(workspace)?);
    data.extend_from_slice(b",upperdir=");
    data.extend_from_slice(overlay_safe(upper)?);
    data.extend_from_slice(b",workdir=");
    data.extend_from_slice(overlay_safe(work)?);
    // `volatile`: the upper layer is scratch that the caller harvests right after the run, so
    // unmounting need not sync the whole upper filesystem (which, on a busy disk, costs more
    // than the rest of the run). The kernel then marks `work/incompat/volatile`, which
    // [`crate::namespace`] clears before the next mount on the same work directory.
    data.extend_from_slice(b",userxattr,volatile");
    if data.len() >= 4096 {
        return Err(SandboxError::InvalidSpec(format!(
            "the overlay options are {} bytes, over the kernel's 4095 (too many or too long layer paths)",
            data.len()
        )));
    }
    Ok(data)
}

enum Mount {
    Tmp,
    Home,
    ReadOnly,
    /// A writable cache bind from this host directory.
    Cache(PathBuf),
    ReadWrite,
    /// An overlay of the host directory at the same path under this writable layer.
    Layered(crate::LayeredBind),
    Workspace,
}

/// Builds the plan.
pub(crate) fn build(input: &PlanInput<'_>) -> Result<Vec<Step>, SandboxError> {
    build_phases(input, true)
}

/// Builds only the [`Phase::Run`] steps, for a run in a warm host (which has the base already);
/// skips the base's look-ups of host files.
pub(crate) fn build_run(input: &PlanInput<'_>) -> Result<Vec<Step>, SandboxError> {
    build_phases(input, false)
}

fn build_phases(input: &PlanInput<'_>, with_base: bool) -> Result<Vec<Step>, SandboxError> {
    let mut b = Builder {
        newroot: input.newroot,
        steps: Vec::new(),
        phase: Phase::Base,
        with_base,
    };
    b.push(Op::MakePrivate, "making the mount tree private".into());
    b.push(
        Op::Tmpfs {
            dst: cpath(input.newroot)?,
            data: cstring(b"mode=0755,size=16m")?,
        },
        "mounting the new root".into(),
    );
    let sys_ro = ATTR_RDONLY | ATTR_NOSUID | ATTR_NODEV;

    for dir in SYSTEM_DIRS.iter().filter(|_| with_base) {
        let host = Path::new("/").join(dir);
        let Ok(meta) = std::fs::symlink_metadata(&host) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&host)
                .map_err(|e| SandboxError::io("reading the link", &host, e))?;
            b.push(
                Op::Symlink {
                    target: cpath(&target)?,
                    path: cpath(&b.inside(&host))?,
                },
                format!("linking {}", host.display()),
            );
        } else if meta.is_dir() {
            b.bind_ro(&host, &host, sys_ro)?;
        }
    }

    b.mkdirs(Path::new("/etc"))?;
    for entry in ETC_ALLOWLIST.iter().filter(|_| with_base) {
        let host = Path::new("/etc").join(entry);
        b.bind_ro(&host, &host, sys_ro)?;
    }
    for entry in SYS_ALLOWLIST.iter().filter(|_| with_base) {
        let host = Path::new("/sys").join(entry);
        b.bind_ro(&host, &host, sys_ro)?;
    }
    b.push(
        Op::Symlink {
            target: cstring(b"../proc/self/mounts")?,
            path: cpath(&b.inside(Path::new("/etc/mtab")))?,
        },
        "linking /etc/mtab".into(),
    );

    b.tmpfs(Path::new("/dev"), "mode=0755,size=64k".into())?;
    for node in DEV_NODES.iter().filter(|_| with_base) {
        let host = Path::new("/dev").join(node);
        if std::fs::metadata(&host).is_ok() {
            let inside = b.inside(&host);
            b.push(
                Op::Touch {
                    path: cpath(&inside)?,
                },
                format!("creating {}", host.display()),
            );
            b.push(
                Op::Bind {
                    src: cpath(&host)?,
                    dst: cpath(&inside)?,
                    recursive: false,
                },
                format!("binding {}", host.display()),
            );
        }
    }
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        let path = b.inside(&Path::new("/dev").join(name));
        b.push(
            Op::Symlink {
                target: cstring(target.as_bytes())?,
                path: cpath(&path)?,
            },
            format!("linking /dev/{name}"),
        );
    }
    b.mkdirs(Path::new("/dev/shm"))?;
    b.phase = Phase::Run;
    b.tmpfs(
        Path::new("/dev/shm"),
        format!("mode=1777,size={}", input.tmp_size),
    )?;
    b.phase = Phase::Base;
    let dev = b.inside(Path::new("/dev"));
    b.push(
        Op::SetAttr {
            path: cpath(&dev)?,
            set: ATTR_RDONLY | ATTR_NOSUID,
            recursive: false,
        },
        "making /dev read-only".into(),
    );

    b.mkdirs(Path::new("/proc"))?;
    let proc_dir = b.inside(Path::new("/proc"));
    // A procfs belongs to the pid namespace of whoever mounts it: the run's.
    b.phase = Phase::Run;
    b.push(
        Op::Proc {
            dst: cpath(&proc_dir)?,
        },
        "mounting /proc".into(),
    );
    b.push(
        Op::WriteOptional {
            path: cpath(&proc_dir.join("sys/kernel/pid_max"))?,
            data: cstring(input.pid_max.to_string().as_bytes())?,
        },
        "limiting the pid namespace".into(),
    );

    b.phase = Phase::Base;
    b.mkdirs(Path::new("/var"))?;
    b.push(
        Op::Symlink {
            target: cstring(b"/tmp")?,
            path: cpath(&b.inside(Path::new("/var/tmp")))?,
        },
        "linking /var/tmp".into(),
    );

    // The caller's mounts, parents first: all of them the run's own.
    b.phase = Phase::Run;
    let mut mounts: Vec<(PathBuf, Mount)> = vec![(PathBuf::from("/tmp"), Mount::Tmp)];
    // A home at "/" or inside a system directory is not given a private tmpfs (it would hide
    // the system); `/tmp` is private already.
    let home = input.home.filter(|h| {
        let reserved = [
            "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "dev", "proc",
        ];
        *h != Path::new("/tmp")
            && h.components()
                .nth(1)
                .is_some_and(|c| !reserved.iter().any(|r| c.as_os_str() == *r))
    });
    if let Some(home) = home {
        mounts.push((home.to_path_buf(), Mount::Home));
        for bind in input.home_binds {
            let abs = if bind.is_absolute() {
                bind.clone()
            } else {
                home.join(bind)
            };
            // A layered bind shows the same directory, writable: no read-only bind beneath.
            if !input.layered_binds.iter().any(|l| l.path == abs) {
                mounts.push((abs, Mount::ReadOnly));
            }
        }
    }
    for bind in input.ro_binds {
        mounts.push((bind.clone(), Mount::ReadOnly));
    }
    for cache in input.cache_binds {
        mounts.push((cache.inside.clone(), Mount::Cache(cache.host.clone())));
    }
    for bind in input.rw_binds {
        mounts.push((bind.clone(), Mount::ReadWrite));
    }
    for l in input.layered_binds {
        mounts.push((l.path.clone(), Mount::Layered(l.clone())));
    }
    mounts.push((input.workspace.to_path_buf(), Mount::Workspace));
    // Parents first; the workspace overlay (and anything inside it) after every other mount,
    // however deep: a warm host's spare replays everything before the overlay ahead of the
    // request, from the host's paths, and the steps after it run after its pivot.
    mounts.sort_by_key(|(p, _)| (p.starts_with(input.workspace), p.components().count()));
    for (abs, kind) in &mounts {
        match kind {
            Mount::Tmp => b.tmpfs(abs, format!("mode=1777,size={}", input.tmp_size))?,
            Mount::Home => b.tmpfs(abs, "mode=0700,size=64m".into())?,
            Mount::ReadOnly => b.bind_ro(abs, abs, ATTR_RDONLY | ATTR_NOSUID | ATTR_NODEV)?,
            Mount::Cache(host) => b.bind_cache(host, abs)?,
            Mount::ReadWrite => b.bind_ro(abs, abs, ATTR_NOSUID | ATTR_NODEV)?,
            Mount::Layered(l) => b.layered(l)?,
            Mount::Workspace => {
                b.mkdirs(abs)?;
                let (ws, layers, upper, work) = input.overlay_dirs();
                let data = overlay_options(ws, layers, upper, work)?;
                let dst = b.inside(abs);
                b.push(
                    Op::Overlay {
                        dst: cpath(&dst)?,
                        data: cstring(&data)?,
                    },
                    format!("mounting the workspace overlay on {}", abs.display()),
                );
            }
        }
    }
    // Masks last: over the workspace overlay and over the exposed toolchain paths alike.
    for masked in input.masked {
        b.mask(masked, input, home)?;
    }
    b.push(
        Op::SetAttr {
            path: cpath(input.newroot)?,
            set: ATTR_RDONLY | ATTR_NOSUID | ATTR_NODEV,
            recursive: false,
        },
        "making the new root read-only".into(),
    );
    Ok(b.steps)
}

/// The base steps alone: they depend on no spec, only on the host's system directories, `/etc`
/// entries and device nodes. A warm host replays them once.
pub(crate) fn build_base(newroot: &Path) -> Result<Vec<Step>, SandboxError> {
    let none = Path::new("/nonexistent/airlock-base");
    let steps = build(&PlanInput {
        newroot,
        workspace: none,
        layers: &[],
        upper: none,
        work: none,
        home: None,
        home_binds: &[],
        ro_binds: &[],
        cache_binds: &[],
        rw_binds: &[],
        layered_binds: &[],
        masked: &[],
        tmp_size: 1 << 20,
        pid_max: 1024,
        sources: None,
    })?;
    Ok(steps
        .into_iter()
        .filter(|s| s.phase == Phase::Base)
        .collect())
}

/// Resolves `.` and `..` lexically; `None` if the path climbs above `/` or is relative.
pub(crate) fn normalize(p: &Path) -> Option<PathBuf> {
    if !p.is_absolute() {
        return None;
    }
    let mut out = PathBuf::from("/");
    for comp in p.components() {
        match comp {
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(c) => out.push(c),
            Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// The candidates `execve` tries for `argv0`, in `PATH` order.
pub(crate) fn exec_candidates(
    argv0: &OsStr,
    path_var: Option<&OsStr>,
) -> Result<Vec<CString>, SandboxError> {
    let bytes = argv0.as_bytes();
    if bytes.contains(&b'/') {
        return Ok(vec![cstring(bytes)?]);
    }
    let mut out = Vec::new();
    if let Some(path) = path_var {
        for dir in path.as_bytes().split(|&c| c == b':') {
            if dir.first() == Some(&b'/') {
                let mut full = dir.to_vec();
                if full.last() != Some(&b'/') {
                    full.push(b'/');
                }
                full.extend_from_slice(bytes);
                out.push(cstring(&full)?);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlay_layers_are_top_first_and_unsafe_paths_refused() {
        let data = overlay_options(
            Path::new("/ws"),
            &[PathBuf::from("/l/1"), PathBuf::from("/l/2")],
            Path::new("/u"),
            Path::new("/w"),
        )
        .unwrap();
        assert_eq!(
            data,
            b"lowerdir=/l/2:/l/1:/ws,upperdir=/u,workdir=/w,userxattr,volatile"
        );
        assert!(overlay_options(Path::new("/a,b"), &[], Path::new("/u"), Path::new("/w")).is_err());
        assert!(overlay_options(Path::new("/a:b"), &[], Path::new("/u"), Path::new("/w")).is_err());
    }

    #[test]
    fn workspace_under_tmp_is_mounted_after_tmp_and_etc_secrets_are_absent() {
        let root = tempfile::tempdir().unwrap();
        let input = PlanInput {
            newroot: root.path(),
            workspace: Path::new("/tmp/x/ws"),
            layers: &[],
            upper: Path::new("/u"),
            work: Path::new("/w"),
            home: Some(Path::new("/tmp/x/home")),
            home_binds: &[PathBuf::from(".cargo")],
            ro_binds: &[],
            cache_binds: &[],
            rw_binds: &[],
            layered_binds: &[],
            masked: &[],
            tmp_size: 1 << 20,
            pid_max: 500,
            sources: None,
        };
        let steps = build(&input).unwrap();
        let pos = |needle: &str| {
            steps
                .iter()
                .position(|s| s.what == needle)
                .unwrap_or_else(|| panic!("{needle}"))
        };
        assert!(pos("mounting a tmpfs on /tmp") < pos("mounting a tmpfs on /tmp/x/home"));
        assert!(
            pos("mounting a tmpfs on /tmp/x/home")
                < pos("mounting the workspace overlay on /tmp/x/ws")
        );
        assert!(
            steps
                .iter()
                .all(|s| !s.what.contains("/etc/shadow") && !s.what.contains("/etc/ssh"))
        );
        assert_eq!(steps.last().unwrap().what, "making the new root read-only");
    }

    /// A warm host replays the base once for every spec: the base must not depend on the spec,
    /// and everything of the spec (workspace, home, /tmp, /proc) must be in the run's phase.
    #[test]
    fn base_steps_do_not_depend_on_the_spec() {
        let root = tempfile::tempdir().unwrap();
        let plan_for = |ws: &'static str, home: &'static str| {
            build(&PlanInput {
                newroot: root.path(),
                workspace: Path::new(ws),
                layers: &[],
                upper: Path::new("/u"),
                work: Path::new("/w"),
                home: Some(Path::new(home)),
                home_binds: &[PathBuf::from(".cargo")],
                ro_binds: &[],
                cache_binds: &[],
                rw_binds: &[],
                layered_binds: &[],
                masked: &[PathBuf::from("/x/ws/.airlock")],
                tmp_size: 1 << 20,
                pid_max: 500,
                sources: None,
            })
            .unwrap()
        };
        let base = |steps: &[Step]| -> Vec<String> {
            steps
                .iter()
                .filter(|s| s.phase == Phase::Base)
                .map(|s| s.what.clone())
                .collect()
        };
        let a = plan_for("/x/ws", "/home/a");
        let b = plan_for("/tmp/y/other", "/root");
        assert_eq!(base(&a), base(&b));
        assert_eq!(
            base(&a),
            base(&build_base(root.path()).unwrap()),
            "build_base is the base of any plan"
        );
        for what in base(&a) {
            assert!(
                !what.contains("/x/ws")
                    && !what.contains("/home/a")
                    && !what.contains("tmpfs on /tmp"),
                "{what}"
            );
        }
        let run: Vec<&str> = a
            .iter()
            .filter(|s| s.phase == Phase::Run)
            .map(|s| s.what.as_str())
            .collect();
        for needed in [
            "mounting a tmpfs on /tmp",
            "mounting a tmpfs on /home/a",
            "mounting /proc",
            "mounting the workspace overlay on /x/ws",
            "making the new root read-only",
        ] {
            assert!(
                run.contains(&needed),
                "{needed} not in the run phase: {run:?}"
            );
        }
        // A warm run's plan is exactly the run phase.
        let warm = build_run(&PlanInput {
            newroot: root.path(),
            workspace: Path::new("/x/ws"),
            layers: &[],
            upper: Path::new("/u"),
            work: Path::new("/w"),
            home: Some(Path::new("/home/a")),
            home_binds: &[PathBuf::from(".cargo")],
            ro_binds: &[],
            cache_binds: &[],
            rw_binds: &[],
            layered_binds: &[],
            masked: &[PathBuf::from("/x/ws/.airlock")],
            tmp_size: 1 << 20,
            pid_max: 500,
            sources: None,
        })
        .unwrap();
        let warm: Vec<&str> = warm.iter().map(|s| s.what.as_str()).collect();
        assert_eq!(warm, run);
    }

    /// A warm spare replays every step before the overlay ahead of the request, from host
    /// paths: a home bind deeper than the workspace must still come before it.
    #[test]
    fn deep_home_binds_and_masks_come_around_the_overlay() {
        let root = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let bin = home.path().join("a/b/c/.cargo/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("tool.token"), "t").unwrap();
        let steps = build(&PlanInput {
            newroot: root.path(),
            workspace: Path::new("/ws"),
            layers: &[],
            upper: Path::new("/u"),
            work: Path::new("/w"),
            home: Some(home.path()),
            home_binds: std::slice::from_ref(&bin),
            ro_binds: &[],
            cache_binds: &[],
            rw_binds: &[],
            layered_binds: &[],
            masked: &[bin.join("tool.token")],
            tmp_size: 1 << 20,
            pid_max: 500,
            sources: None,
        })
        .unwrap();
        let pos = |needle: &str| {
            steps
                .iter()
                .position(|s| s.what == needle)
                .unwrap_or_else(|| panic!("{needle}"))
        };
        let overlay = pos("mounting the workspace overlay on /ws");
        assert!(pos(&format!("binding {} read-only", bin.display())) < overlay);
        assert!(pos(&format!("masking {}", bin.join("tool.token").display())) > overlay);
    }

    /// A cache is bound writable (nosuid, nodev) in the run's phase, before the overlay (a
    /// warm spare replays it from the host's path ahead of the request).
    #[test]
    fn cache_binds_are_writable_run_mounts_before_the_overlay() {
        let root = tempfile::tempdir().unwrap();
        let host = tempfile::tempdir().unwrap();
        let caches = [crate::CacheBind::named(host.path(), "go-build")];
        let steps = build(&PlanInput {
            newroot: root.path(),
            workspace: Path::new("/ws"),
            layers: &[],
            upper: Path::new("/u"),
            work: Path::new("/w"),
            home: None,
            home_binds: &[],
            ro_binds: &[],
            cache_binds: &caches,
            rw_binds: &[],
            layered_binds: &[],
            masked: &[],
            tmp_size: 1 << 20,
            pid_max: 500,
            sources: None,
        })
        .unwrap();
        let pos = |needle: &str| {
            steps
                .iter()
                .position(|s| s.what == needle)
                .unwrap_or_else(|| panic!("{needle}"))
        };
        let bind = pos("binding the cache /var/cache/airlock/go-build writable");
        let attr = pos("making the cache /var/cache/airlock/go-build nosuid");
        assert!(bind < attr && attr < pos("mounting the workspace overlay on /ws"));
        assert_eq!(steps[bind].phase, Phase::Run);
        match &steps[attr].op {
            Op::SetAttr { set, .. } => assert_eq!(*set & ATTR_RDONLY, 0),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn normalize_and_candidates() {
        assert_eq!(
            normalize(Path::new("/a/./b/../c")),
            Some(PathBuf::from("/a/c"))
        );
        assert_eq!(normalize(Path::new("a/b")), None);
        let c = exec_candidates(OsStr::new("ls"), Some(OsStr::new("/usr/bin:rel:/bin/"))).unwrap();
        assert_eq!(
            c,
            vec![
                CString::new("/usr/bin/ls").unwrap(),
                CString::new("/bin/ls").unwrap()
            ]
        );
        let c = exec_candidates(OsStr::new("./x"), None).unwrap();
        assert_eq!(c, vec![CString::new("./x").unwrap()]);
    }
}
