//! Opening a kernel: the operator's choices (mode, permission, profile, config) become a
//! policy, the workspace gets its jail, the session its staging store, and interrupted applies
//! from an earlier crash are recovered before anything else runs.

use crate::api::{KernelConfig, Notice, ToolSpec};
use crate::tools::{self, ToolDef};
use airlock_policy::Decision;
use airlock_policy::jail::Jail;
use airlock_policy::permission::{Policy, PolicyError};
use airlock_policy::rules::{ConfigError, RuleError};
use airlock_stage::journal::{Journal, JournalNotice};
use airlock_stage::store::{StageError, Store};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

/// The execution kernel: one workspace, one session.
pub struct Kernel {
    pub(crate) config: KernelConfig,
    pub(crate) root: PathBuf,
    pub(crate) policy: Policy,
    pub(crate) jail: Jail,
    pub(crate) store: Store,
    pub(crate) tools: BTreeMap<&'static str, ToolDef>,
    pub(crate) max_file_bytes: u64,
    /// The operator's configured test command for this workspace, if any.
    pub(crate) verify_command: Option<Vec<String>>,
    /// The operator's `[sandbox] expose_sensitive` globs: sensitive workspace files that
    /// sandboxed commands may read.
    pub(crate) expose_sensitive: Vec<globset::GlobMatcher>,
    pub(crate) notices: Vec<Notice>,
    /// Outcomes of the recovery run at start-up, reported again by the `recover` tool.
    pub(crate) startup_outcomes: Vec<serde_json::Value>,
    pub(crate) session_approvals: Mutex<HashSet<String>>,
    pub(crate) writes: WriteGate,
    /// Commands of one session run one at a time (the sandbox harvest mutates the changeset):
    /// a mutex within this process, a file lock across processes.
    pub(crate) exec_lock: Mutex<()>,
}

/// Errors opening a kernel.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The workspace directory is unusable.
    #[error("the workspace `{path}` cannot be opened: {source}")]
    Workspace {
        /// Path.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// The operator's choices do not go together (an unrestricted profile without the
    /// operator's grant, a broken plan-artifact glob).
    #[error("{0}")]
    Usage(#[from] PolicyError),
    /// The configuration is broken.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// A `[sandbox] expose_sensitive` glob of the configuration is broken.
    #[error("{0}")]
    ExposeGlob(#[from] RuleError),
    /// The staging store cannot be opened.
    #[error("{0}")]
    Stage(#[from] StageError),
}

impl Kernel {
    /// Open a kernel on a workspace with the operator's choices.
    pub fn open(config: KernelConfig) -> Result<Kernel, OpenError> {
        let root =
            std::fs::canonicalize(&config.workspace).map_err(|source| OpenError::Workspace {
                path: config.workspace.clone(),
                source,
            })?;
        let user_config = airlock_policy::rules::user_config_path_from(
            config
                .settings
                .xdg_config_home
                .as_deref()
                .map(Path::as_os_str),
            config.settings.home.as_deref().map(Path::as_os_str),
        );
        let cfg = airlock_policy::rules::load_config(
            user_config.as_deref(),
            &root,
            config.allow_local_config,
        )?;
        let mut notices: Vec<Notice> = cfg.notices.iter().cloned().map(Notice::Config).collect();
        let expose_sensitive = airlock_policy::rules::compile_path_globs(&cfg.expose_sensitive)?;
        let policy = Policy::new(
            config.mode,
            config.permission,
            config.profile,
            cfg.rules.clone(),
            cfg.plan_artifacts.clone(),
        )?;
        let jail = Jail::open(&root).map_err(|source| OpenError::Workspace {
            path: root.clone(),
            source,
        })?;
        airlock_sandbox::timing::mark("config, policy, jail");
        let store = Store::open(&root, &config.session)?;
        airlock_sandbox::timing::mark("store open");
        let startup = recover_at_startup(&root);
        airlock_sandbox::timing::mark("journal recovery");
        notices.extend(startup.notices);
        Ok(Kernel {
            config,
            root,
            policy,
            jail,
            store,
            tools: tools::registry(cfg.max_file_bytes),
            max_file_bytes: cfg.max_file_bytes,
            verify_command: cfg.verify_command.clone(),
            expose_sensitive,
            notices,
            startup_outcomes: startup.outcomes,
            session_approvals: Mutex::new(HashSet::new()),
            writes: WriteGate::new(4),
            exec_lock: Mutex::new(()),
        })
    }

    /// The workspace root (canonical).
    pub fn workspace(&self) -> &Path {
        &self.root
    }

    /// The session name.
    pub fn session(&self) -> &str {
        &self.config.session
    }

    /// Notices to show the operator (ignored local config, recovered journal records, …).
    pub fn notices(&self) -> &[Notice] {
        &self.notices
    }

    /// Every tool with its schema, sorted by name.
    pub fn tools(&self) -> Vec<ToolSpec> {
        self.tools
            .values()
            .map(|t| ToolSpec {
                name: t.name.to_string(),
                description: t.description.clone(),
                input_schema: t.schema().clone(),
                read_only: matches!(t.class, airlock_policy::permission::ToolClass::Read),
            })
            .collect()
    }

    /// The jail's verdict for one path (`airlock jail`).
    pub fn jail_check(&self, path: &str, write: bool) -> Decision {
        let access = if write {
            airlock_policy::jail::Access::Write
        } else {
            airlock_policy::jail::Access::Read
        };
        self.jail.decide(path, access)
    }
}

/// What start-up recovery did: notices for the operator, and the per-record outcomes that the
/// `recover` tool reports (so a crash resolved at start-up is still reported by `recover`).
struct StartupRecovery {
    notices: Vec<Notice>,
    outcomes: Vec<Value>,
}

/// At start-up: resolve interrupted applies before anything else runs.
fn recover_at_startup(root: &Path) -> StartupRecovery {
    let mut out = StartupRecovery {
        notices: Vec::new(),
        outcomes: Vec::new(),
    };
    if !root.join(".airlock").join("journal.db").exists() {
        return out;
    }
    let (journal, notices) = match Journal::open(root) {
        Ok(x) => x,
        Err(e) => {
            out.notices.push(Notice::JournalUnavailable(e.to_string()));
            return out;
        }
    };
    match airlock_stage::recover::recover(root, &journal) {
        Ok(outcomes) => {
            // A record the journal marked `unknown` was just resolved: its advice to run
            // `airlock recover` is moot (the outcome below reports it).
            out.notices.extend(
                notices
                    .into_iter()
                    .filter(|n| !matches!(n, JournalNotice::MarkedUnknown { .. }))
                    .map(Notice::Journal),
            );
            for o in outcomes {
                let v = serde_json::to_value(&o).unwrap_or(Value::Null);
                out.notices
                    .push(Notice::RecoveredAtStartup { outcome: v.clone() });
                out.outcomes.push(v);
            }
        }
        Err(e) => {
            out.notices.extend(notices.into_iter().map(Notice::Journal));
            out.notices.push(Notice::RecoveryFailed(e.to_string()));
        }
    }
    out
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
