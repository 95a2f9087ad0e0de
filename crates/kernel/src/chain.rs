//! The chain itself: Permission → Jail → Bash Guard → Argument Validation, then the executor.
//!
//! Malformed JSON and unknown tools stop at `validation` before anything else runs (no other
//! stage can reason about them). Every later stage records its decision in the trail that
//! `explain` prints; the first non-allow decision stops the call with no effect.

use crate::api::{Approval, ApprovalRequest, CallContext, CallOutcome};
use crate::tools::ToolDef;
use crate::{Kernel, exec};
use airlock_policy::guard::GuardedScript;
use airlock_policy::jail::Access;
use airlock_policy::permission::{ToolClass, ToolRequest};
use airlock_policy::{Decision, Stage, Verdict};
use serde_json::{Value, json};

/// A call that passed every stage: what the executor needs.
pub struct Prepared<'k> {
    /// The tool.
    pub tool: &'k ToolDef,
    /// Its arguments (schema-valid).
    pub args: Value,
    /// The workspace-relative form of each confined path (argument order: `path`, or
    /// `from`/`to`, or every patch path): symlinks resolved, except a final
    /// symlink that `delete_file`/`move_file` act on itself. `None` for the workspace root.
    pub rels: Vec<Option<airlock_policy::RelPath>>,
    /// The guarded script, for `bash`.
    pub script: Option<GuardedScript>,
    /// The parsed patch, for `apply_patch`.
    pub patch: Option<airlock_stage::patch::ParsedPatch>,
    /// For a `verify` call that names its own command: the operator rule that allows exactly
    /// that command, or the operator's approval of it. `None`: the command is the agent's.
    pub vouched: Option<String>,
}

/// How gated (ask) decisions are resolved while deciding.
pub enum AskMode<'a> {
    /// Ask the operator (a real call).
    Ask(&'a CallContext<'a>),
    /// Record the ask and go on (explain: executes and asks nothing).
    Record,
}

fn denial(d: Decision) -> CallOutcome {
    CallOutcome {
        ok: false,
        output: d.to_json(),
        truncated: false,
        exit_code: if d.decision == Verdict::Allow { 0 } else { 3 },
        denial: Some(d),
    }
}

fn pass(stage: Stage, reason: impl Into<String>) -> Decision {
    Decision::allow(stage, "pass", reason)
}

impl Kernel {
    /// Run one tool through the whole chain.
    pub fn call(&self, tool: &str, args: &str, ctx: &CallContext<'_>) -> CallOutcome {
        let mut trail = Vec::new();
        let prepared = match self.decide(tool, args, AskMode::Ask(ctx), &mut trail) {
            Ok(p) => p,
            Err(d) => return denial(d),
        };
        airlock_sandbox::timing::mark("chain decided");
        if ctx.cancel.is_cancelled() {
            return exec::failure("The call was cancelled before it ran; nothing changed.", 1);
        }
        exec::execute(self, prepared, ctx)
    }

    /// The decision trail through every stage, executing nothing.
    pub fn explain(&self, tool: &str, args: &str) -> Value {
        let mut trail = Vec::new();
        let result = self.decide(tool, args, AskMode::Record, &mut trail);
        let (decision, exit_code) = match &result {
            Ok(_) if trail.iter().any(|d| d.decision == Verdict::Ask) => ("ask", 3),
            Ok(_) => ("allow", 0),
            Err(d) => {
                if trail.last() != Some(d) {
                    trail.push(d.clone());
                }
                (
                    if d.decision == Verdict::Ask {
                        "ask"
                    } else {
                        "deny"
                    },
                    3,
                )
            }
        };
        json!({ "tool": tool, "decision": decision, "trail": trail, "exit_code": exit_code })
    }

    fn decide<'k>(
        &'k self,
        tool: &str,
        args_text: &str,
        ask: AskMode<'_>,
        trail: &mut Vec<Decision>,
    ) -> Result<Prepared<'k>, Decision> {
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
        let Some(def) = self.tools.get(tool) else {
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
        let patch = if tool == "apply_patch" {
            match args.get("patch").and_then(Value::as_str) {
                Some(text) => Some(airlock_stage::patch::parse_patch(text).map_err(|e| {
                    Decision::deny(
                        Stage::Validation,
                        "patch_malformed",
                        format!("The patch cannot be read: {e}."),
                    )
                })?),
                None => None,
            }
        } else {
            None
        };
        let subjects = subjects_of(tool, &args, patch.as_ref());
        let req = ToolRequest {
            tool,
            class: def.class,
            subjects: &subjects,
        };
        let perm = self.policy.decide(&req);
        // A rule that names the command (not a bare tool rule) vouches for it.
        let mut vouched = self
            .policy
            .rules()
            .allowing(&req)
            .filter(|r| r.names_arguments() && !subjects.is_empty())
            .map(|r| format!("the operator rule `{r}`"));
        match perm.decision {
            Verdict::Allow => trail.push(perm),
            Verdict::Deny => {
                trail.push(perm.clone());
                return Err(perm);
            }
            Verdict::Ask => {
                trail.push(perm.clone());
                if let AskMode::Ask(ctx) = ask {
                    self.resolve_ask(tool, &args, &subjects, perm, ctx)?;
                    trail.push(pass(Stage::Permission, "The operator approved the call."));
                    if !subjects.is_empty() {
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
        let mut rels = Vec::new();
        for (i, raw) in path_args(tool, &args, patch.as_ref())
            .into_iter()
            .enumerate()
        {
            // delete_file and move_file's source act on a final symlink itself, not its target.
            let acts_on_link = tool == "delete_file" || (tool == "move_file" && i == 0);
            let confined = if acts_on_link {
                self.jail.confine_nofollow(&raw, access)
            } else {
                self.jail.confine(&raw, access)
            }
            .inspect_err(|d| trail.push(d.clone()))?;
            let rel = if acts_on_link {
                confined.nofollow_rel()
            } else {
                confined.rel()
            }
            .cloned();
            if rel.is_none() && !matches!(tool, "list_dir" | "glob" | "grep" | "diff") {
                let d = Decision::deny(
                    Stage::Jail,
                    "jail_root",
                    format!("`{raw}` names the workspace root itself; name a file inside it."),
                );
                trail.push(d.clone());
                return Err(d);
            }
            if let (Access::Write, Some(rel)) = (access, &rel) {
                self.check_staged_ancestors(rel)
                    .inspect_err(|d| trail.push(d.clone()))?;
            }
            rels.push(rel);
        }
        if access == Access::Write {
            self.check_git_dir_shape(tool, &rels)
                .inspect_err(|d| trail.push(d.clone()))?;
        }
        trail.push(if rels.is_empty() {
            pass(Stage::Jail, "The call names no path.")
        } else {
            pass(
                Stage::Jail,
                format!("{} path(s) resolve inside the workspace.", rels.len()),
            )
        });

        // Bash guard: `bash`, and a command the agent gives `verify` (it runs just the same).
        let mut script = None;
        if tool == "bash" || (tool == "verify" && args.get("command").is_some()) {
            let cmd = if tool == "bash" {
                crate::api::bash_script(&args)
            } else {
                verify_script(&args)
            };
            if let Some(cmd) = cmd {
                match airlock_policy::guard::guard(&cmd) {
                    Ok(g) => {
                        trail.push(pass(
                            Stage::Guard,
                            format!("`{}` matches no forbidden family.", g.normalized()),
                        ));
                        script = Some(g);
                    }
                    Err(report) => {
                        trail.push(report.decision.clone());
                        return Err(report.decision);
                    }
                }
            }
        } else {
            trail.push(pass(Stage::Guard, "Not a shell tool."));
        }

        // Argument validation.
        def.validate(&args).inspect_err(|d| trail.push(d.clone()))?;
        self.check_sizes(tool, &args)
            .inspect_err(|d| trail.push(d.clone()))?;
        trail.push(pass(
            Stage::Validation,
            "The arguments match the tool's schema.",
        ));

        Ok(Prepared {
            tool: def,
            args,
            rels,
            script,
            patch,
            vouched,
        })
    }

    fn resolve_ask(
        &self,
        tool: &str,
        args: &Value,
        subjects: &[String],
        decision: Decision,
        ctx: &CallContext<'_>,
    ) -> Result<(), Decision> {
        let key = format!("{tool}\u{0}{args}");
        if self
            .session_approvals
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
                if let Ok(mut s) = self.session_approvals.lock() {
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

    /// A write below a staged symlink would land wherever the link points: refuse it.
    fn check_staged_ancestors(&self, rel: &airlock_policy::RelPath) -> Result<(), Decision> {
        let mut cur = rel.parent();
        while let Some(dir) = cur {
            if let Ok(Some(entry)) = self.store.get(&dir)
                && matches!(entry.change, airlock_stage::Change::Symlink { .. })
            {
                return Err(Decision::deny(
                    Stage::Jail,
                    "jail_staged_symlink",
                    format!(
                        "`{rel}` lies below `{dir}`, which is a staged symbolic link; write to the link's target path instead."
                    ),
                ));
            }
            cur = dir.parent();
        }
        Ok(())
    }

    /// A write below a directory that git takes for a repository by its shape (`HEAD`,
    /// `objects/`, `refs/`), judged with this call's own writes in place (so the write that
    /// completes the shape is refused too), is a host-exec write.
    fn check_git_dir_shape(
        &self,
        tool: &str,
        rels: &[Option<airlock_policy::RelPath>],
    ) -> Result<(), Decision> {
        use airlock_policy::host_exec::Node;
        if rels.iter().all(Option::is_none) {
            return Ok(());
        }
        // What the call leaves behind: everything but a deleted or moved-away path.
        let written: Vec<&std::path::Path> = rels
            .iter()
            .enumerate()
            .filter(|(i, _)| !(tool == "delete_file" || (tool == "move_file" && *i == 0)))
            .filter_map(|(_, r)| r.as_ref().map(|r| r.as_path()))
            .collect();
        let mut judge = crate::host_shape::ShapeJudge::new(
            &self.root,
            |p: &std::path::Path| crate::host_shape::merged_node(&self.store, p),
            |p: &std::path::Path| {
                if written.contains(&p) {
                    Node::NonDir
                } else if written.iter().any(|w| w.starts_with(p)) {
                    Node::Dir
                } else {
                    crate::host_shape::merged_node(&self.store, p)
                }
            },
        );
        for rel in rels.iter().flatten() {
            if let Some((h, _)) = judge.classify(rel) {
                return Err(airlock_policy::host_exec::denial_for(
                    &format!("`{rel}`"),
                    h,
                ));
            }
        }
        Ok(())
    }

    fn check_sizes(&self, tool: &str, args: &Value) -> Result<(), Decision> {
        if tool == "write_file" || tool == "edit_file" || tool == "apply_patch" {
            for field in ["content", "new_string", "patch"] {
                if let Some(s) = args.get(field).and_then(Value::as_str)
                    && s.len() as u64 > self.max_file_bytes * 4 / 3 + 4
                {
                    return Err(Decision::deny(
                        Stage::Validation,
                        "content_too_large",
                        format!(
                            "Argument `/{field}` is {} bytes; the limit is {} bytes per file (configurable as limits.max_file_bytes).",
                            s.len(),
                            self.max_file_bytes
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// What user rules glob against: the paths, or the bash command.
fn subjects_of(
    tool: &str,
    args: &Value,
    patch: Option<&airlock_stage::patch::ParsedPatch>,
) -> Vec<String> {
    if tool == "bash" {
        return crate::api::bash_script(args).into_iter().collect();
    }
    if tool == "verify" {
        return verify_script(args).into_iter().collect();
    }
    path_args(tool, args, patch)
}

/// The command a `verify` call names, as the shell would read it (`None`: no command, or not a
/// list of strings — validation reports that).
fn verify_script(args: &Value) -> Option<String> {
    crate::api::string_list(args, "command").map(|argv| crate::api::shell_join(&argv))
}

/// Every path argument of a call, as given.
fn path_args(
    tool: &str,
    args: &Value,
    patch: Option<&airlock_stage::patch::ParsedPatch>,
) -> Vec<String> {
    let s = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_string);
    match tool {
        "move_file" => [s("from"), s("to")].into_iter().flatten().collect(),
        "apply_patch" => patch.map(|p| p.paths()).unwrap_or_default(),
        "diff" => args
            .get("paths")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
        "read_file" | "write_file" | "edit_file" | "delete_file" => s("path").into_iter().collect(),
        // Directory tools default to the root; `.` and `` name the root too.
        "list_dir" | "glob" | "grep" => s("path")
            .filter(|p| !matches!(p.trim_end_matches('/'), "" | "."))
            .into_iter()
            .collect(),
        _ => Vec::new(),
    }
}
