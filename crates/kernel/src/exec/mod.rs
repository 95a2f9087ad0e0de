//! The executor: runs a call that passed every stage. Reads run in parallel; writes hold their
//! paths' locks (one writer per path, bounded total); output over its budget is cut with a marker
//! that says how much was cut and how to get the rest.
//!
//! Executors see an [`ExecCtx`] (the workspace root, the session's store, the jail, the limits
//! and locks), never the kernel, and a [`Call`] whose paths are [`Confined`]: a value only the
//! jail's verdict can produce.

pub(crate) mod exposure;
pub(crate) mod files;
pub(crate) mod git;
pub(crate) mod local_hooks;
pub(crate) mod local_list;
pub(crate) mod net;
pub(crate) mod shell;
pub(crate) mod workflow;

#[cfg(test)]
mod files_tests;

use crate::api::{CallContext, CallOutcome};
use crate::output::Status;
use crate::session::SessionError;
use airlock_policy::RelPath;
use airlock_policy::guard::GuardedScript;
use airlock_policy::jail::{Access, ConfinedPath, Jail};
use airlock_stage::store::Store;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};

/// The human text of a staged entry's flag: a host-exec kind as the host-exec list describes
/// it, any other flag as the stage words it.
pub(crate) fn flag_text(f: &airlock_stage::Flag) -> String {
    match f {
        airlock_stage::Flag::HostExec { kind } => airlock_policy::host_exec::flag_text(kind),
        other => other.to_string(),
    }
}

/// A successful outcome.
pub(crate) fn success(output: Value, truncated: bool) -> CallOutcome {
    CallOutcome {
        ok: true,
        output,
        truncated,
        denial: None,
        status: Status::Ok,
    }
}

/// A failed outcome with a message (no denial: the chain allowed it, the tool failed).
pub(crate) fn failure(message: impl Into<String>, status: Status) -> CallOutcome {
    CallOutcome {
        ok: false,
        output: json!(message.into()),
        truncated: false,
        denial: None,
        status,
    }
}

/// What an executor may use: the workspace, the session's store, the jail, the limits and the
/// session's locks. Built by the kernel for each call; a test builds one over a temporary
/// directory and a real store with [`ExecCtx::new`].
pub(crate) struct ExecCtx<'k> {
    /// The workspace root (canonical).
    pub(crate) root: &'k PathBuf,
    /// The session's staging store.
    pub(crate) store: &'k Store,
    /// The workspace's jail (apply re-confines every target through it).
    pub(crate) jail: &'k Jail,
    /// Per-path write locks.
    pub(crate) writes: &'k WriteGate,
    /// The session name.
    session: &'k str,
    /// Commands of one session run one at a time (the sandbox harvest mutates the changeset).
    exec_lock: &'k Mutex<()>,
    /// The most bytes one file may hold.
    pub(crate) max_file_bytes: u64,
    /// The operator allows the degraded (no kernel isolation) sandbox backend.
    pub(crate) allow_degraded: bool,
    /// The operator's `[sandbox] expose_sensitive` globs.
    pub(crate) expose_sensitive: &'k [globset::GlobMatcher],
    /// The operator's configured test command for this workspace, if any.
    pub(crate) verify_command: &'k Option<Vec<String>>,
    /// The operator's default diagnostics budget of `verify`, if any.
    pub(crate) verify_budget: Option<usize>,
    /// Outcomes of the recovery run at start-up, reported again by `recover`.
    pub(crate) startup_outcomes: &'k Vec<Value>,
    /// What the front end read from its environment (run and runtime directories, HOME, PATH,
    /// the forced sandbox backend, the turn).
    pub(crate) settings: &'k crate::api::Settings,
    /// The operator's `[net]` grants (none: nothing granted by configuration).
    pub(crate) net: Option<&'k airlock_policy::net::NetRuleSet>,
}

/// The parts of an [`ExecCtx`] that come from the operator's configuration.
pub(crate) struct ExecLimits<'k> {
    /// The most bytes one file may hold.
    pub(crate) max_file_bytes: u64,
    /// The operator allows the degraded sandbox backend.
    pub(crate) allow_degraded: bool,
    /// The operator's `[sandbox] expose_sensitive` globs.
    pub(crate) expose_sensitive: &'k [globset::GlobMatcher],
    /// The operator's configured test command.
    pub(crate) verify_command: &'k Option<Vec<String>>,
    /// The operator's default diagnostics budget of `verify`.
    pub(crate) verify_budget: Option<usize>,
    /// What the front end read from its environment.
    pub(crate) settings: &'k crate::api::Settings,
    /// The operator's `[net]` grants.
    pub(crate) net: Option<&'k airlock_policy::net::NetRuleSet>,
}

/// The state one session's executors share: its write gate and run lock.
pub(crate) struct SessionLocks {
    pub(crate) writes: WriteGate,
    exec_lock: Mutex<()>,
}

impl SessionLocks {
    /// Fresh locks: at most four writes at once.
    pub(crate) fn new() -> SessionLocks {
        SessionLocks {
            writes: WriteGate::new(4),
            exec_lock: Mutex::new(()),
        }
    }
}

impl<'k> ExecCtx<'k> {
    /// A context over a workspace, its session's store and jail.
    pub(crate) fn new(
        root: &'k PathBuf,
        session: &'k str,
        store: &'k Store,
        jail: &'k Jail,
        locks: &'k SessionLocks,
        limits: ExecLimits<'k>,
        startup_outcomes: &'k Vec<Value>,
    ) -> ExecCtx<'k> {
        ExecCtx {
            root,
            store,
            jail,
            writes: &locks.writes,
            session,
            exec_lock: &locks.exec_lock,
            max_file_bytes: limits.max_file_bytes,
            allow_degraded: limits.allow_degraded,
            expose_sensitive: limits.expose_sensitive,
            verify_command: limits.verify_command,
            verify_budget: limits.verify_budget,
            startup_outcomes,
            settings: limits.settings,
            net: limits.net,
        }
    }

    /// The session name.
    pub(crate) fn session(&self) -> &str {
        self.session
    }

    /// Where this session's sandboxed runs take place.
    pub(crate) fn run_place(&self) -> crate::session::RunPlace<'_> {
        crate::session::RunPlace {
            root: self.root,
            session: self.session,
            store: self.store,
            settings: self.settings,
        }
    }

    /// Take the session's run lock, waiting for a running command of the same session.
    pub(crate) fn session_run(&self) -> Result<SessionRun<'_>, SessionError> {
        let guard = self.exec_lock.lock().unwrap_or_else(|e| e.into_inner());
        let dir = self.root.join(".airlock").join("locks");
        std::fs::create_dir_all(&dir).map_err(|source| SessionError::LockDir {
            dir: dir.clone(),
            source,
        })?;
        let path = dir.join(format!("{}.lock", self.session()));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| SessionError::LockOpen {
                path: path.clone(),
                source,
            })?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive).map_err(|source| {
            SessionError::Lock {
                session: self.session().to_string(),
                source,
            }
        })?;
        Ok(SessionRun {
            _guard: guard,
            _file: file,
        })
    }
}

/// Holds a session's run lock: in-process mutex plus an exclusive `flock` on
/// `.airlock/locks/<session>.lock`, so commands of one session are serialised across processes
/// (two CLI invocations, or the CLI beside an MCP server) while sessions stay independent.
pub(crate) struct SessionRun<'k> {
    _guard: std::sync::MutexGuard<'k, ()>,
    _file: std::fs::File,
}

/// How a path argument is confined: through a final symlink to its target, or the link itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Link {
    /// Resolve every symlink (reads, writes).
    Follow,
    /// Act on a final symlink itself (`delete_file`, `move_file`'s source).
    Itself,
}

/// A path argument that passed the jail. Only [`Confined::from_jail`] makes one, and only from
/// the jail's own [`ConfinedPath`]: an executor cannot be handed a path the jail did not judge.
#[derive(Debug, Clone)]
pub(crate) struct Confined {
    proof: ConfinedPath,
    link: Link,
}

impl Confined {
    /// The jail's verdict on one path argument, kept as the executors' input.
    pub(crate) fn from_jail(proof: ConfinedPath, link: Link) -> Confined {
        Confined { proof, link }
    }

    /// The workspace-relative path the call acts on (symlinks resolved, except a final one
    /// the call acts on itself). `None` for the workspace root.
    pub(crate) fn rel(&self) -> Option<&RelPath> {
        match self.link {
            Link::Follow => self.proof.rel(),
            Link::Itself => self.proof.nofollow_rel(),
        }
    }

    /// The access the jail granted.
    pub(crate) fn access(&self) -> Access {
        self.proof.access()
    }
}

/// One call as its executor receives it: typed arguments, the confined paths (in the order the
/// tool declared them), the guarded script and parsed patch when the tool has them.
pub(crate) struct Call<'c, A> {
    /// The tool's typed arguments.
    pub(crate) args: A,
    /// Every path argument, confined.
    pub(crate) paths: Vec<Confined>,
    /// The guarded command (`bash`).
    pub(crate) script: Option<GuardedScript>,
    /// The parsed patch (`apply_patch`).
    pub(crate) patch: Option<airlock_stage::patch::ParsedPatch>,
    /// For a `verify` call naming its own command: who vouched for exactly that command.
    pub(crate) vouched: Option<String>,
    /// The front end's context (cancellation, approver, operator inputs).
    pub(crate) cx: &'c CallContext<'c>,
}

impl<A> Call<'_, A> {
    /// The first confined path, or `None` for the workspace root / no path.
    pub(crate) fn rel_or_root(&self) -> Option<&RelPath> {
        self.paths.first().and_then(Confined::rel)
    }

    /// The i-th confined path, for a write: the chain guarantees a path below the root,
    /// confined for writing.
    pub(crate) fn write_rel(&self, i: usize) -> Result<&RelPath, CallOutcome> {
        self.paths
            .get(i)
            .filter(|c| c.access() == Access::Write)
            .and_then(Confined::rel)
            .ok_or_else(|| failure("The call names no confined file path.", Status::Failed))
    }
}

/// Per-path write locks, keyed by path bytes.
type PathLocks = HashMap<Vec<u8>, Arc<Mutex<()>>>;

/// Writes are serialised per path, with a bound on how many run at once.
pub(crate) struct WriteGate {
    limit: usize,
    state: Mutex<(usize, PathLocks)>,
    freed: Condvar,
}

impl WriteGate {
    fn new(limit: usize) -> WriteGate {
        WriteGate {
            limit,
            state: Mutex::new((0, HashMap::new())),
            freed: Condvar::new(),
        }
    }

    /// Run `f` holding a slot and the locks of `paths` (taken in sorted order: no deadlock).
    pub(crate) fn with<T>(&self, paths: &[&[u8]], f: impl FnOnce() -> T) -> T {
        let locks: Vec<Arc<Mutex<()>>> = {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            while st.0 >= self.limit {
                st = self.freed.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            st.0 += 1;
            let mut sorted: Vec<&[u8]> = paths.to_vec();
            sorted.sort();
            sorted.dedup();
            sorted
                .iter()
                .map(|p| st.1.entry(p.to_vec()).or_default().clone())
                .collect()
        };
        let result = {
            let _guards: Vec<_> = locks
                .iter()
                .map(|l| l.lock().unwrap_or_else(|e| e.into_inner()))
                .collect();
            f()
        };
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.0 -= 1;
        st.1.retain(|_, l| Arc::strong_count(l) > 1);
        drop(st);
        self.freed.notify_one();
        result
    }
}
