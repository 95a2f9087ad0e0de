//! The chain itself: Permission → Jail → Bash Guard → Argument Validation, as a free function
//! over narrow inputs ([`Gates`]: policy, jail, the session's store for the jail's staged-state
//! checks, the registry, the session's approvals) that returns a typed [`Prepared`] call or the
//! denying [`Decision`]. It names no tool: each [`Tool`](crate::tools::Tool) declares its
//! subjects (paths, command) and its typed arguments.
//!
//! Malformed JSON and unknown tools stop at `validation` before anything else runs (no other
//! stage can reason about them). Every later stage records its decision in the trail that
//! `explain` prints; the first non-allow decision stops the call with no effect.

use crate::api::{Approval, ApprovalRequest, CallContext, CallOutcome};
use crate::exec::{Call, Confined, ExecCtx, Link};
use crate::output::Status;
use crate::tools::{Runnable, Shell, ToolDef};
use airlock_policy::guard::GuardedScript;
use airlock_policy::jail::{Access, Jail};
use airlock_policy::permission::{Policy, ToolClass, ToolRequest};
use airlock_policy::{Decision, RelPath, Ruling, Stage};
use airlock_stage::store::Store;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Mutex;

/// What the chain decides with: nothing else of the kernel.
pub(crate) struct Gates<'a> {
    /// The permission policy (mode, profile, operator rules).
    pub(crate) policy: &'a Policy,
    /// The workspace's jail.
    pub(crate) jail: &'a Jail,
    /// The workspace root (canonical).
    pub(crate) root: &'a Path,
    /// The session's store: the jail resolves paths over it (the merged view) and refuses
    /// writes into git's shape.
    pub(crate) store: &'a Store,
    /// The registry.
    pub(crate) tools: &'a BTreeMap<&'static str, ToolDef>,
    /// Calls the operator approved for the rest of the session.
    pub(crate) approvals: &'a Mutex<HashSet<String>>,
}

/// A call that passed every stage: the tool's executor bound to its typed arguments, and what
/// the stages produced for it.
pub(crate) struct Prepared {
    /// The executor with its typed arguments.
    run: Box<dyn Runnable>,
    /// Every path argument, confined by the jail (in the tool's declared order).
    paths: Vec<Confined>,
    /// The guarded script, for a shell call.
    script: Option<GuardedScript>,
    /// The parsed patch, for `apply_patch`.
    patch: Option<airlock_stage::patch::ParsedPatch>,
    /// For a `verify` call that names its own command: the operator rule that allows exactly
    /// that command, or the operator's approval of it. `None`: the command is the agent's.
    vouched: Option<String>,
}

impl Prepared {
    /// Run the executor.
    pub(crate) fn execute(self, x: &ExecCtx<'_>, cx: &CallContext<'_>) -> CallOutcome {
        self.run.run(
            x,
            Call {
                args: (),
                paths: self.paths,
                script: self.script,
                patch: self.patch,
                vouched: self.vouched,
                cx,
            },
        )
    }
}

/// How gated (ask) decisions are resolved while deciding.
pub(crate) enum AskMode<'a> {
    /// Ask the operator (a real call).
    Ask(&'a CallContext<'a>),
    /// Record the ask and go on (explain: executes and asks nothing).
    Record,
}

/// The outcome of a denial.
pub(crate) fn denial(d: Decision) -> CallOutcome {
    CallOutcome {
        ok: false,
        output: d.to_json(),
        truncated: false,
        status: if d.decision == Ruling::Allow {
            Status::Ok
        } else {
            Status::Denied
        },
        denial: Some(d),
    }
}

fn pass(stage: Stage, reason: impl Into<String>) -> Decision {
    Decision::allow(stage, "pass", reason)
}

/// The decision trail through every stage, executing nothing: `{"tool", "decision", "trail"}`.
pub(crate) fn explain(g: &Gates<'_>, tool: &str, args: &str) -> Value {
    let mut trail = Vec::new();
    let result = decide(g, tool, args, AskMode::Record, &mut trail);
    let decision = match &result {
        Ok(_) if trail.iter().any(|d| d.decision == Ruling::Ask) => "ask",
        Ok(_) => "allow",
        Err(d) => {
            if trail.last() != Some(d) {
                trail.push(d.clone());
            }
            if d.decision == Ruling::Ask {
                "ask"
            } else {
                "deny"
            }
        }
    };
    json!({ "tool": tool, "decision": decision, "trail": trail })
}

/// Decide one call through every stage.
pub(crate) fn decide(
    g: &Gates<'_>,
    tool: &str,
    args_text: &str,
    ask: AskMode<'_>,
    trail: &mut Vec<Decision>,
) -> Result<Prepared, Decision> {
    // Input that no stage can reason about stops here, at validation.
    let args: Value = serde_json::from_str(args_text).map_err(|e| {
        Decision::deny(
            Stage::Validation,
            "malformed_json",
            format!(
                "The arguments are not valid JSON (line {}, column {}): {e}.",
                e.line(),
                e.column()
            ),
        )
    })?;
    let Some(def) = g.tools.get(tool) else {
        return Err(Decision::deny(
            Stage::Validation,
            "unknown_tool",
            format!("There is no tool named `{tool}`; `airlock tools` lists them."),
        ));
    };
    if !args.is_object() {
        return Err(Decision::deny(
            Stage::Validation,
            "schema_violation",
            format!("Argument `/` of `{tool}` must be a JSON object."),
        ));
    }

    // Permission.
    let subjects = def.tool().subjects(&args)?;
    let rule_subjects = subjects.rule_subjects();
    let req = ToolRequest {
        tool,
        class: def.class,
        subjects: &rule_subjects,
    };
    let perm = g.policy.decide(&req);
    // A rule that names the command (not a bare tool rule) vouches for it.
    let mut vouched = g
        .policy
        .rules()
        .allowing(&req)
        .filter(|r| r.names_arguments() && !rule_subjects.is_empty())
        .map(|r| format!("the operator rule `{r}`"));
    match perm.decision {
        Ruling::Allow => trail.push(perm),
        Ruling::Deny => {
            trail.push(perm.clone());
            return Err(perm);
        }
        Ruling::Ask => {
            trail.push(perm.clone());
            if let AskMode::Ask(ctx) = ask {
                resolve_ask(g, tool, &args, &rule_subjects, perm, ctx)?;
                trail.push(pass(Stage::Permission, "The operator approved the call."));
                if !rule_subjects.is_empty() {
                    vouched = Some("the operator's approval".into());
                }
            }
        }
    }

    // Jail.
    let access = match def.class {
        ToolClass::Write => Access::Write,
        _ => Access::Read,
    };
    let mut paths = Vec::with_capacity(subjects.paths.len());
    for arg in &subjects.paths {
        let raw = &arg.raw;
        // Resolved where the agent sees the path: the disk with the changeset staged over it.
        let staged = StagedLayer(g.store);
        let proof = match arg.link {
            Link::Itself => g.jail.confine_nofollow_over(raw, access, &staged),
            Link::Follow => g.jail.confine_over(raw, access, &staged),
        }
        .inspect_err(|d| trail.push(d.clone()))?;
        let confined = Confined::from_jail(proof, arg.link);
        match confined.rel() {
            None if !arg.root_ok => {
                let d = Decision::deny(
                    Stage::Jail,
                    "jail_root",
                    format!("`{raw}` names the workspace root itself; name a file inside it."),
                );
                trail.push(d.clone());
                return Err(d);
            }
            _ => {}
        }
        paths.push(confined);
    }
    if access == Access::Write {
        let rels: Vec<(Option<&RelPath>, bool)> = paths
            .iter()
            .zip(&subjects.paths)
            .map(|(c, a)| (c.rel(), a.remains))
            .collect();
        check_git_dir_shape(g, &rels).inspect_err(|d| trail.push(d.clone()))?;
    }
    trail.push(if paths.is_empty() {
        pass(Stage::Jail, "The call names no path.")
    } else {
        pass(
            Stage::Jail,
            format!("{} path(s) resolve inside the workspace.", paths.len()),
        )
    });

    // Bash guard: shell tools (`bash`, and a command the agent gives `verify`).
    let mut script = None;
    match &subjects.shell {
        Shell::Script(Some(cmd)) => match airlock_policy::guard::guard(cmd) {
            Ok(guarded) => {
                trail.push(pass(
                    Stage::Guard,
                    format!("`{}` matches no forbidden family.", guarded.normalized()),
                ));
                script = Some(guarded);
            }
            Err(report) => {
                trail.push(report.decision.clone());
                return Err(report.decision);
            }
        },
        Shell::Script(None) => {}
        Shell::No => trail.push(pass(Stage::Guard, "Not a shell tool.")),
    }

    // Argument validation: the typed arguments, then the per-file limit on contents.
    let parsed = def.prepare(&args).inspect_err(|d| trail.push(d.clone()))?;
    check_sizes(def.max_file_bytes(), &parsed.content).inspect_err(|d| trail.push(d.clone()))?;
    trail.push(pass(
        Stage::Validation,
        "The arguments match the tool's schema.",
    ));

    Ok(Prepared {
        run: parsed.run,
        paths,
        script,
        patch: subjects.patch,
        vouched,
    })
}

fn resolve_ask(
    g: &Gates<'_>,
    tool: &str,
    args: &Value,
    subjects: &[String],
    decision: Decision,
    ctx: &CallContext<'_>,
) -> Result<(), Decision> {
    let key = format!("{tool}\u{0}{args}");
    if g.approvals
        .lock()
        .map(|s| s.contains(&key))
        .unwrap_or(false)
    {
        return Ok(());
    }
    let summary = if subjects.is_empty() {
        format!("run `{tool}`")
    } else {
        format!("run `{tool}` on {}", subjects.join(", "))
    };
    let req = ApprovalRequest {
        tool: tool.to_string(),
        summary,
        decision,
    };
    match ctx.approver.approve(&req) {
        Approval::Once => Ok(()),
        Approval::Session => {
            if let Ok(mut s) = g.approvals.lock() {
                s.insert(key);
            }
            Ok(())
        }
        Approval::Deny(why) => Err(Decision::deny(
            Stage::Permission,
            "operator_denied",
            format!("`{tool}` needs the operator's approval and was not approved: {why}."),
        )),
    }
}

/// The session's changeset as the jail's layer over the disk.
struct StagedLayer<'a>(&'a Store);

impl airlock_policy::jail::Overlay for StagedLayer<'_> {
    fn staged(
        &self,
        rel: &std::path::Path,
    ) -> Result<Option<airlock_policy::jail::Staged>, String> {
        use airlock_policy::jail::Staged;
        use airlock_stage::StagedNode;
        let rel = RelPath::new(rel).map_err(|e| e.to_string())?;
        Ok(self
            .0
            .staged_node(&rel)
            .map_err(|e| e.to_string())?
            .map(|n| match n {
                StagedNode::File => Staged::File,
                StagedNode::Dir { opaque } => Staged::Dir { opaque },
                StagedNode::Symlink(t) => {
                    Staged::Symlink(std::os::unix::ffi::OsStringExt::from_vec(t))
                }
                StagedNode::Deleted => Staged::Deleted,
            }))
    }
}

/// A write below a directory that git takes for a repository by its shape (`HEAD`,
/// `objects/`, `refs/`), judged with this call's own writes in place (so the write that
/// completes the shape is refused too), is a host-exec write.
fn check_git_dir_shape(g: &Gates<'_>, rels: &[(Option<&RelPath>, bool)]) -> Result<(), Decision> {
    use airlock_policy::host_exec::Node;
    if rels.iter().all(|(r, _)| r.is_none()) {
        return Ok(());
    }
    // What the call leaves behind: everything but a deleted or moved-away path.
    let written: Vec<&std::path::Path> = rels
        .iter()
        .filter(|(_, remains)| *remains)
        .filter_map(|(r, _)| r.map(|r| r.as_path()))
        .collect();
    let mut judge = crate::host_shape::ShapeJudge::new(
        g.root,
        |p: &std::path::Path| crate::host_shape::merged_node(g.store, p),
        |p: &std::path::Path| {
            if written.contains(&p) {
                Node::NonDir
            } else if written.iter().any(|w| w.starts_with(p)) {
                Node::Dir
            } else {
                crate::host_shape::merged_node(g.store, p)
            }
        },
        crate::host_shape::staged_links(g.store),
        |p: &std::path::Path| crate::host_shape::merged_link(g.store, p),
    );
    for rel in rels.iter().filter_map(|(r, _)| *r) {
        if let Some((h, _)) = judge.classify(rel) {
            let subject = match judge.via_link(rel) {
                Some((named, link)) => format!(
                    "`{rel}` (`{}` through the link `{}`)",
                    named.display(),
                    link.display()
                ),
                None => format!("`{rel}`"),
            };
            return Err(airlock_policy::host_exec::denial_for(&subject, h));
        }
    }
    Ok(())
}

/// Content fields over the per-file limit (in characters ≤ bytes, so base64 fits too).
fn check_sizes(max_file_bytes: u64, content: &[(&'static str, usize)]) -> Result<(), Decision> {
    for (field, len) in content {
        if *len as u64 > crate::args::content_max_chars(max_file_bytes) {
            return Err(Decision::deny(
                Stage::Validation,
                "content_too_large",
                format!(
                    "Argument `/{field}` is {len} bytes; the limit is {max_file_bytes} bytes per file (configurable as limits.max_file_bytes)."
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The chain on its own: a policy, a jail, a store and the registry, no kernel.

    use super::*;
    use crate::api::{Cancel, DenyAll};
    use crate::exec::{ExecLimits, SessionLocks};
    use airlock_policy::modes::{PermissionMode, WorkMode};
    use airlock_policy::rules::Rules;
    use std::path::PathBuf;

    struct Parts {
        _dir: tempfile::TempDir,
        root: PathBuf,
        policy: Policy,
        jail: Jail,
        store: Store,
        tools: BTreeMap<&'static str, ToolDef>,
        approvals: Mutex<HashSet<String>>,
        locks: SessionLocks,
        verify_command: Option<Vec<String>>,
        outcomes: Vec<Value>,
    }

    impl Parts {
        fn new(mode: &str) -> Parts {
            let dir = tempfile::tempdir().unwrap();
            let root = std::fs::canonicalize(dir.path()).unwrap();
            std::fs::write(root.join("a.txt"), "a\n").unwrap();
            let mode: WorkMode = mode.parse().unwrap();
            let perm: PermissionMode = "auto".parse().unwrap();
            Parts {
                policy: Policy::new(mode, perm, None, Rules::default(), Vec::new()).unwrap(),
                jail: Jail::open(&root).unwrap(),
                store: Store::open(&root, "t").unwrap(),
                tools: crate::tools::registry(1 << 20),
                approvals: Mutex::new(HashSet::new()),
                locks: SessionLocks::new(),
                verify_command: None,
                outcomes: Vec::new(),
                root,
                _dir: dir,
            }
        }

        fn gates(&self) -> Gates<'_> {
            Gates {
                policy: &self.policy,
                jail: &self.jail,
                root: &self.root,
                store: &self.store,
                tools: &self.tools,
                approvals: &self.approvals,
            }
        }

        fn decide(&self, tool: &str, args: Value) -> (Result<Prepared, Decision>, Vec<Decision>) {
            let mut trail = Vec::new();
            let r = decide(
                &self.gates(),
                tool,
                &args.to_string(),
                AskMode::Record,
                &mut trail,
            );
            (r, trail)
        }

        fn ctx(&self) -> ExecCtx<'_> {
            ExecCtx::new(
                &self.root,
                "t",
                &self.store,
                &self.jail,
                &self.locks,
                ExecLimits {
                    max_file_bytes: 1 << 20,
                    allow_degraded: false,
                    expose_sensitive: &[],
                    verify_command: &self.verify_command,
                    verify_budget: None,
                    settings: &TEST_SETTINGS,
                    net: None,
                },
                &self.outcomes,
            )
        }
    }

    fn stages(trail: &[Decision]) -> Vec<(Stage, Ruling)> {
        trail.iter().map(|d| (d.stage, d.decision)).collect()
    }

    #[test]
    fn an_allowed_call_runs_its_executor_on_the_confined_path() {
        let p = Parts::new("build");
        let (r, trail) = p.decide(
            "write_file",
            json!({"path": "b/../new.txt", "content": "x"}),
        );
        let prepared = r.expect("allowed");
        assert_eq!(
            stages(&trail),
            [
                (Stage::Permission, Ruling::Allow),
                (Stage::Jail, Ruling::Allow),
                (Stage::Guard, Ruling::Allow),
                (Stage::Validation, Ruling::Allow),
            ]
        );
        let approver = DenyAll::default();
        let cx = CallContext::new(Cancel::new(), &approver);
        let out = prepared.execute(&p.ctx(), &cx);
        assert_eq!(out.status, Status::Ok, "{}", out.output);
        let staged = airlock_stage::view::read_merged(&p.store, &RelPath::new("new.txt").unwrap());
        assert_eq!(staged.unwrap().as_deref(), Some(&b"x"[..]));
        assert!(!p.root.join("new.txt").exists());
    }

    #[test]
    fn each_stage_denies_with_its_rule_and_nothing_runs() {
        let p = Parts::new("build");
        let (r, _) = p.decide("write_file", json!({"path": "../out.txt", "content": "x"}));
        assert_eq!(r.err().unwrap().stage, Stage::Jail);
        let (r, _) = p.decide("delete_file", json!({"path": "."}));
        assert_eq!(r.err().unwrap().rule, "jail_root");
        let (r, _) = p.decide("bash", json!({"command": "rm -rf /"}));
        assert_eq!(r.err().unwrap().stage, Stage::Guard);
        let (r, trail) = p.decide("write_file", json!({"path": "a.txt", "content": 5}));
        let d = r.err().unwrap();
        assert_eq!(d.stage, Stage::Validation);
        assert_eq!(d.rule, "schema_violation");
        assert!(
            d.reason.starts_with("Argument `/content` of `write_file`"),
            "{}",
            d.reason
        );
        // Validation comes last: the earlier stages passed first.
        assert_eq!(trail.len(), 4, "{trail:?}");
        let (r, _) = p.decide("nope", json!({}));
        assert_eq!(r.err().unwrap().rule, "unknown_tool");
        let (r, _) = p.decide("apply_patch", json!({"patch": "garbage"}));
        assert_eq!(r.err().unwrap().rule, "patch_malformed");
        assert_eq!(p.store.snapshot().unwrap().entries.len(), 0);
    }

    #[test]
    fn the_mode_decides_at_permission() {
        let p = Parts::new("discuss");
        let (r, trail) = p.decide("write_file", json!({"path": "a.txt", "content": "x"}));
        assert_eq!(r.err().unwrap().stage, Stage::Permission);
        assert_eq!(trail.len(), 1);
        let (r, _) = p.decide("read_file", json!({"path": "a.txt"}));
        assert!(r.is_ok());
    }

    static TEST_SETTINGS: std::sync::LazyLock<crate::api::Settings> =
        std::sync::LazyLock::new(crate::api::Settings::default);
}
