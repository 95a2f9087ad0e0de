//! Opening a kernel: the operator's choices (mode, permission, profile, config) become a
//! policy, the workspace gets its jail, the session its staging store, and interrupted applies
//! from an earlier crash are recovered before anything else runs.

use crate::api::{CallContext, CallOutcome};
use crate::api::{KernelConfig, Notice, ToolSpec};
use crate::chain::{self, AskMode, Gates};
use crate::exec::{ExecCtx, ExecLimits, SessionLocks};
use crate::output::Status;
use crate::tools::{self, ToolDef};
use airlock_policy::Decision;
use airlock_policy::jail::Jail;
use airlock_policy::permission::{Policy, PolicyError};
use airlock_policy::rules::{ConfigError, RuleError};
use airlock_stage::journal::{Journal, JournalNotice};
use airlock_stage::store::{StageError, Store};
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What `gc` reclaimed: the blob store's report (its fields at the top level of the JSON),
/// the spool and scratch directories removed, and the bytes freed in all.
#[derive(Debug, Clone, serde::Serialize)]
pub struct GcSummary {
    /// The blob store's collection.
    #[serde(flatten)]
    pub blobs: airlock_stage::gc::GcReport,
    /// Spool directories of runs (`.airlock/spool/<session>/run-…`) and of sessions.
    pub spool: crate::session::Reclaimed,
    /// Idle sessions' sandbox scratch directories.
    pub scratch: crate::session::Reclaimed,
    /// Bytes freed in all.
    pub freed_bytes: u64,
}

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
    /// The operator's default diagnostics budget of `verify` (`[verify] budget`).
    pub(crate) verify_budget: Option<usize>,
    /// The operator's `[sandbox] expose_sensitive` globs: sensitive workspace files that
    /// sandboxed commands may read.
    pub(crate) expose_sensitive: Vec<globset::GlobMatcher>,
    /// The operator's `[net]` grants of sandboxed runs (user config).
    pub(crate) net: airlock_policy::net::NetRuleSet,
    pub(crate) notices: Vec<Notice>,
    /// Outcomes of the recovery run at start-up, reported again by the `recover` tool.
    pub(crate) startup_outcomes: Vec<serde_json::Value>,
    pub(crate) session_approvals: Mutex<HashSet<String>>,
    /// The session's write gate and run lock (a mutex within this process, a file lock across
    /// processes: commands of one session run one at a time).
    pub(crate) locks: SessionLocks,
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
        // The sandbox's switches and the environment its runs inherit (the allow-listed part)
        // come from the program's settings; a program that installed its own keeps them (the
        // first install wins).
        let env = &config.settings.env;
        airlock_sandbox::settings::install(airlock_sandbox::SandboxSettings::from_vars(
            |name| {
                env.iter()
                    .rev()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
            },
            env.iter().cloned(),
        ));
        let store = Store::open(&root, &config.session)?;
        if let Some(limit) = cfg.max_staged_bytes {
            store.set_max_staged_bytes(limit);
        }
        airlock_sandbox::timing::mark("store open");
        let startup = recover_at_startup(&root, &config.settings);
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
            verify_budget: cfg.verify_budget,
            expose_sensitive,
            net: cfg.net.clone(),
            notices,
            startup_outcomes: startup.outcomes,
            session_approvals: Mutex::new(HashSet::new()),
            locks: SessionLocks::new(),
        })
    }

    /// Switch this session to unrestricted with the operator's grant, which only the CLI makes,
    /// after a person confirmed it on the terminal: the permission profile and the jail both
    /// (sensitive files and `.airlock/` stay denied). The journal records it (tool
    /// `unrestricted`); nothing persists it: it ends with this kernel.
    pub fn grant_unrestricted(
        &mut self,
        grant: airlock_policy::modes::OperatorGrant,
    ) -> Result<(), airlock_stage::journal::JournalError> {
        let (journal, _) = Journal::open(&self.root)?;
        let id = journal.begin(airlock_stage::journal::NewRecord {
            session: self.config.session.clone(),
            turn: self
                .config
                .settings
                .turn
                .unwrap_or_else(|| airlock_stage::journal::now_ms().max(0).unsigned_abs()),
            tool: "unrestricted".into(),
            args_hash: airlock_stage::journal::args_hash(&serde_json::json!({})),
            ..Default::default()
        })?;
        self.jail.set_unrestricted(&grant);
        self.policy.grant_unrestricted(grant);
        journal.commit(id)
    }

    /// Sets the ceiling on the bytes this session may stage (the operator's `--max-staged`,
    /// over the user config's `[limits] max_staged_bytes` and the default of 2 GiB): a
    /// `write_file`, `edit_file` or command harvest that would take the changeset past it fails
    /// whole, naming the ceiling.
    pub fn set_max_staged_bytes(&self, limit: u64) {
        self.store.set_max_staged_bytes(limit);
    }

    /// `airlock gc`: removes the blobs nothing names ([`airlock_stage::gc::collect`]), the
    /// spools of runs that died and of sessions that are gone (and prunes the rest to their
    /// bounds), and the sandbox scratch of idle sessions, whatever its depth. An operator's
    /// maintenance command, never a tool.
    pub fn gc(&self) -> Result<GcSummary, airlock_stage::gc::GcError> {
        let blobs = airlock_stage::gc::collect(&self.root)?;
        let spool = crate::session::collect_spools(&self.root);
        let scratch = crate::session::collect_scratch(&self.config.settings);
        Ok(GcSummary {
            freed_bytes: blobs.removed_bytes + spool.bytes + scratch.bytes,
            blobs,
            spool,
            scratch,
        })
    }

    /// True once the operator granted this session unrestricted.
    pub fn is_unrestricted(&self) -> bool {
        self.policy.is_unrestricted()
    }

    /// The workspace root (canonical).
    pub fn workspace(&self) -> &Path {
        &self.root
    }

    /// Every cache of the workspace with its size (`airlock cache status`), the exec cargo
    /// home included.
    pub fn cache_status(&self) -> std::io::Result<Vec<crate::cache::CacheUsage>> {
        crate::cache::status(&self.root, self.exec_cargo_home().as_deref())
    }

    /// Removes every cache of the workspace, the exec cargo home included (`airlock cache
    /// drop`); returns the bytes freed.
    pub fn cache_drop(&self) -> std::io::Result<u64> {
        crate::cache::drop_all(&self.root, self.exec_cargo_home().as_deref())
    }

    fn exec_cargo_home(&self) -> Option<std::path::PathBuf> {
        crate::exec::net::cargo_cache(self.config.settings.home.as_deref(), &self.root)
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
                description: t.description(),
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
fn recover_at_startup(root: &Path, settings: &crate::api::Settings) -> StartupRecovery {
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
    // Interrupted git commits first (judged by the branch, never redone); the stage resolves
    // the rest.
    let commits = crate::git::recover::recover_commits(
        root,
        &journal,
        &settings.temp_dir.join("airlock-git"),
        settings.path.as_ref(),
    );
    match airlock_stage::recover::recover(root, &journal) {
        Ok(outcomes) => {
            let outcomes = commits.into_iter().chain(outcomes);
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

impl Kernel {
    /// Run one tool through the whole chain, then its executor.
    pub fn call(&self, tool: &str, args: &str, ctx: &CallContext<'_>) -> CallOutcome {
        let mut trail = Vec::new();
        let prepared = match chain::decide(&self.gates(), tool, args, AskMode::Ask(ctx), &mut trail)
        {
            Ok(p) => p,
            Err(d) => return chain::denial(d),
        };
        airlock_sandbox::timing::mark("chain decided");
        if ctx.cancel.is_cancelled() {
            return crate::exec::failure(
                "The call was cancelled before it ran; nothing changed.",
                Status::Failed,
            );
        }
        prepared.execute(&self.exec_ctx(), ctx)
    }

    /// The decision trail through every stage, executing nothing:
    /// `{"tool", "decision": "allow|ask|deny", "trail": [decision, …]}`.
    pub fn explain(&self, tool: &str, args: &str) -> Value {
        chain::explain(&self.gates(), tool, args)
    }

    /// What the chain decides with.
    fn gates(&self) -> Gates<'_> {
        Gates {
            policy: &self.policy,
            jail: &self.jail,
            root: &self.root,
            store: &self.store,
            tools: &self.tools,
            approvals: &self.session_approvals,
        }
    }

    /// What executors run with.
    fn exec_ctx(&self) -> ExecCtx<'_> {
        ExecCtx::new(
            &self.root,
            &self.config.session,
            &self.store,
            &self.jail,
            &self.locks,
            ExecLimits {
                max_file_bytes: self.max_file_bytes,
                allow_degraded: self.config.allow_degraded,
                expose_sensitive: &self.expose_sensitive,
                verify_command: &self.verify_command,
                verify_budget: self.verify_budget,
                settings: &self.config.settings,
                net: Some(&self.net),
            },
            &self.startup_outcomes,
        )
    }
}
