//! How a test command gets run: the [`CommandRunner`] trait, with the sandbox implementation
//! used by [`crate::run_verification`] and a plain-process one for development and for hosts
//! where the caller explicitly accepts no isolation.
//!
//! A runner owns the whole process tree: on timeout or cancellation nothing may survive. Output
//! is spooled to files (or kept as a bounded head/tail), never held whole in memory.

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufReader, Cursor, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::VerifyError;
use crate::sanitize::{MAX_LINE_BYTES, for_each_line_max};

/// One command to run over a workspace and its layers.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// The real workspace (the lowest, read-only layer).
    pub workspace: PathBuf,
    /// Staged layers on top of it, lowest first.
    pub layers: Vec<PathBuf>,
    /// A scratch directory owned by this run (upper/work dirs, spools).
    pub scratch: PathBuf,
    /// The command and its arguments.
    pub argv: Vec<OsString>,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Wall-clock limit.
    pub timeout: Duration,
    /// The caller's `$HOME`, under which [`RunRequest::home_binds`] are found (none: the
    /// sandbox settings' own).
    pub home: Option<PathBuf>,
    /// Toolchain paths under `$HOME` to expose read-only.
    pub home_binds: Vec<PathBuf>,
    /// Paths hidden from the command besides `.airlock` (see `SandboxSpec::masked`).
    pub masked: Vec<PathBuf>,
    /// Other host paths to expose read-only at the same path.
    pub ro_binds: Vec<PathBuf>,
    /// Host directories bound writable (the workspace's caches; see `SandboxSpec::cache_binds`).
    pub cache_binds: Vec<airlock_sandbox::CacheBind>,
    /// Set to true to stop the run early.
    pub cancel: Option<Arc<AtomicBool>>,
    /// Memory ceiling in bytes (none: the sandbox's default).
    pub memory: Option<u64>,
    /// CPU-time ceiling in seconds (none: the sandbox's default).
    pub cpu_secs: Option<u64>,
    /// Most the run may write to its overlay, in bytes (none: the sandbox's default).
    pub disk: Option<u64>,
}

/// Where a stream's output can be read back.
#[derive(Debug, Clone)]
pub enum OutputText {
    /// The whole output, spooled to a file.
    Spool(PathBuf),
    /// A bounded head and tail kept in memory, with the number of bytes omitted between them.
    Memory {
        /// First bytes.
        head: Vec<u8>,
        /// Bytes left out between head and tail.
        omitted: u64,
        /// Last bytes.
        tail: Vec<u8>,
    },
}

impl OutputText {
    /// Calls `f` for every line (bounded length, ANSI stripped), streaming from the spool.
    pub fn for_each_line(&self, f: impl FnMut(&str)) -> std::io::Result<()> {
        self.for_each_line_max(MAX_LINE_BYTES, f)
    }

    /// [`OutputText::for_each_line`] with another line-length bound (JSON event streams).
    pub fn for_each_line_max(&self, max: usize, f: impl FnMut(&str)) -> std::io::Result<()> {
        match self {
            OutputText::Spool(path) => {
                let file = File::open(path)?;
                for_each_line_max(BufReader::with_capacity(64 * 1024, file), max, f)
            }
            OutputText::Memory {
                head,
                omitted,
                tail,
            } => {
                let marker = if *omitted > 0 {
                    format!("\n[{omitted} bytes of output omitted]\n")
                } else {
                    String::new()
                };
                let reader = Cursor::new(head.as_slice())
                    .chain(Cursor::new(marker.into_bytes()))
                    .chain(Cursor::new(tail.as_slice()));
                for_each_line_max(BufReader::new(reader), max, f)
            }
        }
    }
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunOutput {
    /// Exit code, if the process exited.
    pub exit_code: Option<i32>,
    /// Terminating signal, if it was killed.
    pub signal: Option<i32>,
    /// Killed because the timeout expired.
    pub timed_out: bool,
    /// Stopped because the cancel flag was set.
    pub cancelled: bool,
    /// Standard output.
    pub stdout: OutputText,
    /// Standard error.
    pub stderr: OutputText,
    /// Where files the command wrote under the workspace can be read after the run
    /// (the overlay's upper dir), mirroring the workspace layout.
    pub written_root: PathBuf,
    /// The absolute path at which the command saw the workspace.
    pub visible_root: PathBuf,
    /// Wall time.
    pub duration: Duration,
    /// No kernel isolation was in force.
    pub degraded: bool,
    /// The sandbox tier the command ran in (none: not a sandbox).
    pub tier: Option<airlock_sandbox::Tier>,
    /// The resource ceiling the run hit, if any.
    pub ceiling: Option<airlock_sandbox::Ceiling>,
    /// The ceilings in force and what the run used (sandbox runs only).
    pub limits: Option<Box<airlock_sandbox::LimitsReport>>,
}

/// Runs a command over a workspace and its layers, throwing its writes away afterwards.
pub trait CommandRunner {
    /// Runs `req` to completion, timeout or cancellation.
    fn run(&self, req: &RunRequest) -> Result<RunOutput, VerifyError>;

    /// The absolute path at which a command run with this scratch dir will see the workspace
    /// (reporter output paths are built from it before the run).
    fn visible_root(&self, workspace: &Path, scratch: &Path) -> PathBuf;
}

/// The runner [`crate::run_verification`] uses: the sandbox.
pub fn default_runner(allow_degraded: bool) -> Result<Box<dyn CommandRunner>, VerifyError> {
    Ok(Box::new(SandboxRunner::new(allow_degraded)?))
}

/// The sandbox runner: a fresh `airlock_sandbox` sandbox per run (overlay over workspace +
/// layers, private /tmp, fresh $HOME, no network).
pub struct SandboxRunner {
    backend: Box<dyn airlock_sandbox::Backend>,
}

impl SandboxRunner {
    /// The default sandbox backend; `allow_degraded` admits the copy backend (no isolation)
    /// when user namespaces are unavailable.
    pub fn new(allow_degraded: bool) -> Result<SandboxRunner, VerifyError> {
        let backend = airlock_sandbox::default_backend(allow_degraded)
            .map_err(|e| VerifyError::Sandbox(e.to_string()))?;
        Ok(SandboxRunner { backend })
    }
}

impl CommandRunner for SandboxRunner {
    fn visible_root(&self, workspace: &Path, scratch: &Path) -> PathBuf {
        self.backend.visible_root(workspace, &scratch.join("work"))
    }

    fn run(&self, req: &RunRequest) -> Result<RunOutput, VerifyError> {
        let upper = req.scratch.join("upper");
        let work = req.scratch.join("work");
        let spool = req.scratch.join("spool");
        for dir in [&upper, &work, &spool] {
            std::fs::create_dir_all(dir).map_err(|e| VerifyError::io(dir, e))?;
        }
        let mut spec = airlock_sandbox::SandboxSpec::new(
            req.workspace.clone(),
            upper.clone(),
            work,
            req.argv.clone(),
        );
        spec.layers = req.layers.clone();
        spec.cwd = req.workspace.clone();
        spec.env = req
            .env
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect();
        spec.network = false;
        spec.timeout = req.timeout;
        spec.output_limit = 256 * 1024;
        spec.spool_dir = Some(spool);
        spec.home = req.home.clone();
        spec.home_binds = req.home_binds.clone();
        spec.ro_binds = req.ro_binds.clone();
        spec.cache_binds = req.cache_binds.clone();
        spec.cancel = req.cancel.clone();
        // airlock's own state (journal, blobs, spool) is never visible to the project's tests.
        spec.masked = vec![std::path::PathBuf::from(".airlock")];
        spec.masked.extend(req.masked.iter().cloned());
        // The suite gets the cores it gets when run directly (builds and test runners are
        // parallel), at a lower weight than the host's processes; its CPU time is still capped.
        spec.limits.every_cpu = true;
        if let Some(m) = req.memory {
            spec.limits.memory = Some(m);
        }
        if let Some(c) = req.cpu_secs {
            spec.limits.cpu_seconds = Some(c);
        }
        if let Some(d) = req.disk {
            spec.limits.upper_bytes = d;
        }
        let outcome = self.backend.run(&spec).map_err(|e| match e {
            airlock_sandbox::SandboxError::Exec { .. } => {
                VerifyError::RunnerNotFound(e.to_string())
            }
            other => VerifyError::Sandbox(other.to_string()),
        })?;
        Ok(RunOutput {
            exit_code: outcome.exit_code,
            signal: outcome.signal,
            timed_out: outcome.timed_out,
            cancelled: outcome.cancelled,
            stdout: captured(outcome.stdout),
            stderr: captured(outcome.stderr),
            written_root: upper,
            visible_root: self.visible_root(&req.workspace, &req.scratch),
            duration: outcome.duration,
            degraded: outcome.degraded,
            tier: Some(outcome.tier),
            ceiling: outcome.ceiling,
            limits: Some(Box::new(outcome.limits)),
        })
    }
}

fn captured(c: airlock_sandbox::Captured) -> OutputText {
    match c.spool {
        Some(path) => OutputText::Spool(path),
        None => OutputText::Memory {
            head: c.head,
            omitted: c.omitted_bytes,
            tail: c.tail,
        },
    }
}

/// Runs the command as a plain child process over a private copy of workspace + layers.
/// **No isolation**: for development, tests of the adapters, and hosts where the operator opted
/// into a degraded run. Kills the whole process group on timeout or cancellation.
#[derive(Debug, Default, Clone, Copy)]
pub struct PlainRunner;

impl CommandRunner for PlainRunner {
    fn visible_root(&self, _workspace: &Path, scratch: &Path) -> PathBuf {
        scratch.join("plain-ws")
    }

    fn run(&self, req: &RunRequest) -> Result<RunOutput, VerifyError> {
        use std::os::unix::process::{CommandExt, ExitStatusExt};

        let root = self.visible_root(&req.workspace, &req.scratch);
        std::fs::create_dir_all(&root).map_err(|e| VerifyError::io(&root, e))?;
        copy_tree(&req.workspace, &root)?;
        for layer in &req.layers {
            copy_tree(layer, &root)?;
        }
        let out_path = req.scratch.join("stdout");
        let err_path = req.scratch.join("stderr");
        let out = File::create(&out_path).map_err(|e| VerifyError::io(&out_path, e))?;
        let err = File::create(&err_path).map_err(|e| VerifyError::io(&err_path, e))?;
        let Some((program, args)) = req.argv.split_first() else {
            return Err(VerifyError::EmptyCommand);
        };
        let mut cmd = std::process::Command::new(program);
        cmd.args(args)
            .current_dir(&root)
            .envs(req.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(std::process::Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        let start = Instant::now();
        let mut child = match cmd.spawn() {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(VerifyError::RunnerNotFound(format!(
                    "{}: {e}",
                    program.to_string_lossy()
                )));
            }
            Err(e) => return Err(VerifyError::Spawn(e.to_string())),
        };
        let pgid = child.id();
        let mut timed_out = false;
        let mut cancelled = false;
        let status = loop {
            if let Some(status) = child
                .try_wait()
                .map_err(|e| VerifyError::Spawn(e.to_string()))?
            {
                break status;
            }
            if start.elapsed() >= req.timeout {
                timed_out = true;
            } else if req
                .cancel
                .as_ref()
                .is_some_and(|c| c.load(Ordering::SeqCst))
            {
                cancelled = true;
            }
            if timed_out || cancelled {
                kill_group(pgid);
                break child
                    .wait()
                    .map_err(|e| VerifyError::Spawn(e.to_string()))?;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        // Stragglers that escaped the leader's exit (background children) die with the group.
        kill_group(pgid);
        Ok(RunOutput {
            exit_code: status.code(),
            signal: status.signal(),
            timed_out,
            cancelled,
            stdout: OutputText::Spool(out_path),
            stderr: OutputText::Spool(err_path),
            written_root: root.clone(),
            visible_root: root,
            duration: start.elapsed(),
            degraded: true,
            tier: None,
            ceiling: None,
            limits: None,
        })
    }
}

fn kill_group(pgid: u32) {
    let _ = std::process::Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

/// `cp -a SRC/. DST` (hard links are not used so the copy can be written freely).
fn copy_tree(src: &Path, dst: &Path) -> Result<(), VerifyError> {
    let mut from = src.as_os_str().to_owned();
    from.push("/.");
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(&from)
        .arg(dst)
        .status()
        .map_err(|e| VerifyError::io(src, e))?;
    if !status.success() {
        return Err(VerifyError::io(
            src,
            std::io::Error::other(format!("copying into {} failed", dst.display())),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(scratch: &Path, ws: &Path, script: &str, timeout: Duration) -> RunRequest {
        RunRequest {
            workspace: ws.to_path_buf(),
            layers: Vec::new(),
            scratch: scratch.to_path_buf(),
            argv: vec!["sh".into(), "-c".into(), script.into()],
            env: Vec::new(),
            timeout,
            home: None,
            home_binds: Vec::new(),
            masked: Vec::new(),
            ro_binds: Vec::new(),
            cache_binds: Vec::new(),
            cancel: None,
            memory: None,
            cpu_secs: None,
            disk: None,
        }
    }

    #[test]
    fn plain_runner_captures_and_works_on_a_copy() {
        let ws = tempfile::tempdir().unwrap();
        let scratch = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("input"), "hello\n").unwrap();
        let req = request(
            scratch.path(),
            ws.path(),
            "cat input; echo oops >&2; echo changed > input; exit 3",
            Duration::from_secs(30),
        );
        let out = PlainRunner.run(&req).unwrap();
        assert_eq!(out.exit_code, Some(3));
        assert!(out.degraded);
        let mut lines = Vec::new();
        out.stdout
            .for_each_line(|l| lines.push(l.to_string()))
            .unwrap();
        assert_eq!(lines, ["hello"]);
        assert_eq!(
            std::fs::read_to_string(ws.path().join("input")).unwrap(),
            "hello\n"
        );
        assert_eq!(
            std::fs::read_to_string(out.written_root.join("input")).unwrap(),
            "changed\n"
        );
    }

    #[test]
    fn plain_runner_kills_the_group_on_timeout() {
        let ws = tempfile::tempdir().unwrap();
        let scratch = tempfile::tempdir().unwrap();
        // A sleep duration unique to this test process marks its children.
        let marker = format!("1000.{}", std::process::id());
        let script = format!("sleep {marker} & sleep {marker}");
        let req = request(
            scratch.path(),
            ws.path(),
            &script,
            Duration::from_millis(300),
        );
        let out = PlainRunner.run(&req).unwrap();
        assert!(out.timed_out);
        std::thread::sleep(Duration::from_millis(100));
        let survivors = std::process::Command::new("pgrep")
            .args(["-f", &marker])
            .output()
            .unwrap();
        assert!(survivors.stdout.is_empty(), "survivors: {:?}", survivors);
    }

    #[test]
    fn memory_output_reads_head_marker_and_tail() {
        let text = OutputText::Memory {
            head: b"first\nsecond".to_vec(),
            omitted: 42,
            tail: b"last\n".to_vec(),
        };
        let mut lines = Vec::new();
        text.for_each_line(|l| lines.push(l.to_string())).unwrap();
        assert_eq!(
            lines,
            ["first", "second", "[42 bytes of output omitted]", "last"]
        );
    }
}
