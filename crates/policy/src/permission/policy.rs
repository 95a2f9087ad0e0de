//! [`Policy`]: the session's axes and rules, and the one function that intersects them.
//!
//! Order of [`Policy::decide`] (the first that applies decides, which realises "deny beats
//! ask beats allow, and nothing lifts a hard deny"):
//!
//! 1. Hard denies: the work-mode ceiling (`mode_discuss_readonly`, `mode_plan_no_exec`,
//!    `plan_artifacts_only`), the profile ceiling (`profile_readonly`, `profile_plan_no_exec`,
//!    `plan_artifacts_only`), `ask_user` in AUTO (`ask_user_in_auto`).
//! 2. A user deny rule (`user_rule_deny`).
//! 3. Allowlist profile in AUTO with no allow rule for a non-read tool (`allowlist_no_match`,
//!    deny: nobody is there to ask). A publishing tool (`git_commit`, `git_push`) in AUTO with
//!    no allow rule (`publish_needs_rule`, deny).
//! 4. A user ask rule (`user_rule_ask`).
//! 5. Allowlist profile in ASK with no allow rule (`allowlist_no_match`, ask).
//! 6. ASK mode gates shell commands (`bash`), `apply`/`undo` and the publishing tools unless an
//!    allow rule pre-approves them (`permission_ask_gated`). Writes are *not* gated: they only stage
//!    changes, and nothing reaches the workspace without `apply`, which is gated. `verify` is
//!    not gated: it runs in a throwaway sandbox and is read-only on the workspace.
//! 7. Allow (`user_rule_allow` when an allow rule matched, else `permission_allow`).
//!
//! Mode ceilings: DISCUSS allows read, meta and `ask_user` only, plus `discard` in every mode
//! and profile (wherever `status` shows staged changes, `discard` may drop them; it changes
//! nothing on disk); `verify` counts as a write-class effect there because it executes project
//! code. PLAN additionally allows writes (and `apply`/`undo`) whose every path matches a
//! plan-artifact glob; shell commands and `verify` are denied. BUILD and EXECUTE add no
//! ceiling. The `readonly` and `plan` profiles impose the same ceilings as DISCUSS and PLAN; the
//! `allowlist` profile denies the publishing tools outright (`profile_allowlist_no_publish`).

use crate::decision::{Decision, Stage};
use crate::modes::{OperatorGrant, PermissionMode, Profile, WorkMode};
use crate::permission::{ToolClass, ToolRequest};
use crate::rules::{RuleError, Rules, default_plan_artifacts, parse_path_globs, path_matches_any};
use globset::{Glob, GlobMatcher};

/// Why a policy could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// `Profile::Unrestricted` was passed where only an operator grant may set it.
    #[error(
        "the unrestricted profile can only be switched on by the operator (Policy::grant_unrestricted), not passed as a profile"
    )]
    UnrestrictedNeedsGrant,
    /// A plan-artifact glob does not compile.
    #[error("invalid plan artifact glob: {0}")]
    PlanArtifact(#[from] RuleError),
}

/// The Permission stage's state for one session.
#[derive(Debug, Clone)]
pub struct Policy {
    mode: WorkMode,
    perm: PermissionMode,
    profile: Profile,
    rules: Rules,
    plan_artifacts: Vec<String>,
    plan_globs: Vec<Glob>,
    /// Compiled on first use: most calls never touch a plan artifact.
    plan_matchers: std::sync::OnceLock<Vec<GlobMatcher>>,
}

impl Policy {
    /// A policy. `profile: None` means the widest the mode allows
    /// ([`WorkMode::default_profile`]); `Some(Profile::Unrestricted)` is refused (use
    /// [`Policy::grant_unrestricted`]). An empty `plan_artifacts` means the default
    /// (`plans/**`, `PLAN.md`).
    pub fn new(
        mode: WorkMode,
        perm: PermissionMode,
        profile: Option<Profile>,
        rules: Rules,
        plan_artifacts: Vec<String>,
    ) -> Result<Policy, PolicyError> {
        let profile = match profile {
            Some(Profile::Unrestricted) => return Err(PolicyError::UnrestrictedNeedsGrant),
            Some(p) => p,
            None => mode.default_profile(),
        };
        let plan_artifacts = if plan_artifacts.is_empty() {
            default_plan_artifacts()
        } else {
            plan_artifacts
        };
        let plan_globs = parse_path_globs(&plan_artifacts)?;
        Ok(Policy {
            mode,
            perm,
            profile,
            rules,
            plan_artifacts,
            plan_globs,
            plan_matchers: std::sync::OnceLock::new(),
        })
    }

    /// Switch this session to the unrestricted profile. Takes the operator's grant, which only
    /// operator code can make ([`OperatorGrant::from_cli_flag`]). Mode ceilings still apply.
    pub fn grant_unrestricted(&mut self, grant: OperatorGrant) {
        let OperatorGrant { .. } = grant;
        self.profile = Profile::Unrestricted;
    }

    /// True once the operator granted unrestricted.
    pub fn is_unrestricted(&self) -> bool {
        self.profile == Profile::Unrestricted
    }

    /// The work mode.
    pub fn mode(&self) -> WorkMode {
        self.mode
    }

    /// The permission mode.
    pub fn permission(&self) -> PermissionMode {
        self.perm
    }

    /// The effective access profile.
    pub fn profile(&self) -> Profile {
        self.profile
    }

    /// The user rules.
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// The plan-artifact globs.
    pub fn plan_artifacts(&self) -> &[String] {
        &self.plan_artifacts
    }

    fn plan_matchers(&self) -> &[GlobMatcher] {
        self.plan_matchers
            .get_or_init(|| self.plan_globs.iter().map(Glob::compile_matcher).collect())
    }

    /// True when every subject is a plan artifact (and there is at least one).
    pub fn is_plan_artifact_write(&self, req: &ToolRequest<'_>) -> bool {
        !req.subjects.is_empty()
            && req
                .subjects
                .iter()
                .all(|s| path_matches_any(self.plan_matchers(), s))
    }

    /// [`Policy::decide`] for a tool known only by name: a name [`ToolClass::of`] does not know
    /// is denied (`unknown_tool`).
    pub fn decide_named(&self, tool: &str, subjects: &[String]) -> Decision {
        match ToolClass::of(tool) {
            Some(class) => self.decide(&ToolRequest {
                tool,
                class,
                subjects,
            }),
            None => Decision::deny(
                Stage::Permission,
                "unknown_tool",
                format!("`{tool}` is not a tool airlock knows, so it is refused."),
            ),
        }
    }

    /// The Permission stage's decision for one call.
    pub fn decide(&self, req: &ToolRequest<'_>) -> Decision {
        if let Some(d) = self.mode_ceiling(req) {
            return d;
        }
        if let Some(d) = self.profile_ceiling(req) {
            return d;
        }
        if req.class == ToolClass::AskUser && self.perm == PermissionMode::Auto {
            return Decision::deny(
                Stage::Permission,
                "ask_user_in_auto",
                "`ask_user` is not available in AUTO permission mode; decide from the workspace, or run with --permission ask.",
            );
        }
        if let Some(rule) = self.rules.denying(req) {
            return Decision::deny(
                Stage::Permission,
                "user_rule_deny",
                format!("`{}` is denied by the user rule `{rule}`.", req.tool),
            );
        }
        let allow_rule = self.rules.allowing(req);
        let allowlisted = req.class.is_read_only() || allow_rule.is_some();
        if self.profile == Profile::Allowlist && !allowlisted && self.perm == PermissionMode::Auto {
            return Decision::deny(
                Stage::Permission,
                "allowlist_no_match",
                format!(
                    "`{}` is not on the user's allow list, and the allowlist profile denies it in AUTO mode.",
                    req.tool
                ),
            );
        }
        if req.class == ToolClass::Publish
            && self.perm == PermissionMode::Auto
            && allow_rule.is_none()
        {
            return Decision::deny(
                Stage::Permission,
                "publish_needs_rule",
                format!(
                    "`{}` records or publishes history outside airlock, which AUTO mode allows only under an operator rule (`allow = [\"{}\"]`); or run with --permission ask.",
                    req.tool, req.tool
                ),
            );
        }
        if let Some(rule) = self.rules.asking(req) {
            return Decision::ask(
                Stage::Permission,
                "user_rule_ask",
                format!(
                    "`{}` needs the operator's approval under the user rule `{rule}`.",
                    req.tool
                ),
            );
        }
        if self.profile == Profile::Allowlist && !allowlisted {
            return Decision::ask(
                Stage::Permission,
                "allowlist_no_match",
                format!(
                    "`{}` is not on the user's allow list, so the operator must approve it.",
                    req.tool
                ),
            );
        }
        if self.perm == PermissionMode::Ask
            && matches!(
                req.class,
                ToolClass::Exec | ToolClass::Apply | ToolClass::Publish
            )
            && allow_rule.is_none()
        {
            return Decision::ask(
                Stage::Permission,
                "permission_ask_gated",
                format!(
                    "`{}` has effects beyond staging, so ASK mode needs the operator's approval.",
                    req.tool
                ),
            );
        }
        match allow_rule {
            Some(rule) => Decision::allow(
                Stage::Permission,
                "user_rule_allow",
                format!("`{}` is allowed by the user rule `{rule}`.", req.tool),
            ),
            None => Decision::allow(
                Stage::Permission,
                "permission_allow",
                format!(
                    "`{}` is allowed in {} mode with the {} profile.",
                    req.tool,
                    self.mode.as_str().to_uppercase(),
                    self.profile
                ),
            ),
        }
    }

    fn mode_ceiling(&self, req: &ToolRequest<'_>) -> Option<Decision> {
        if req.class.is_read_only() || drops_staged_only(req) {
            return None;
        }
        match self.mode {
            WorkMode::Build | WorkMode::Execute => None,
            WorkMode::Discuss => Some(Decision::deny(
                Stage::Permission,
                "mode_discuss_readonly",
                format!(
                    "DISCUSS mode allows read-only tools only, and `{}` is {} {} tool; switch to --mode build to change files.",
                    req.tool,
                    req.class.article(),
                    req.class
                ),
            )),
            WorkMode::Plan => self.plan_ceiling(req, "mode_plan_no_exec", "PLAN mode"),
        }
    }

    fn profile_ceiling(&self, req: &ToolRequest<'_>) -> Option<Decision> {
        if req.class.is_read_only() || drops_staged_only(req) {
            return None;
        }
        match self.profile {
            Profile::Allowlist if req.class == ToolClass::Publish => Some(Decision::deny(
                Stage::Permission,
                "profile_allowlist_no_publish",
                format!(
                    "The allowlist profile does not record or publish history, and `{}` would.",
                    req.tool
                ),
            )),
            Profile::Allowlist | Profile::AllowAll | Profile::Unrestricted => None,
            Profile::Readonly => Some(Decision::deny(
                Stage::Permission,
                "profile_readonly",
                format!(
                    "The readonly profile allows read-only tools only, and `{}` is {} {} tool.",
                    req.tool,
                    req.class.article(),
                    req.class
                ),
            )),
            Profile::Plan => self.plan_ceiling(req, "profile_plan_no_exec", "The plan profile"),
        }
    }

    /// Read + plan artifacts only: the shared ceiling of PLAN mode and the plan profile.
    fn plan_ceiling(
        &self,
        req: &ToolRequest<'_>,
        exec_rule: &'static str,
        who: &str,
    ) -> Option<Decision> {
        match req.class {
            ToolClass::Write if req.tool == "discard" => None,
            ToolClass::Write | ToolClass::Apply => {
                if self.is_plan_artifact_write(req) {
                    None
                } else {
                    Some(Decision::deny(
                        Stage::Permission,
                        "plan_artifacts_only",
                        format!(
                            "{who} may write plan artifacts only ({}), and `{}` touches {}.",
                            self.plan_artifacts.join(", "),
                            req.tool,
                            describe_subjects(req.subjects)
                        ),
                    ))
                }
            }
            _ => Some(Decision::deny(
                Stage::Permission,
                exec_rule,
                format!(
                    "{who} does not run commands or tests, and `{}` would; switch to --mode build.",
                    req.tool
                ),
            )),
        }
    }
}

fn describe_subjects(subjects: &[String]) -> String {
    if subjects.is_empty() {
        return "no named path".to_string();
    }
    let shown: Vec<String> = subjects.iter().take(3).map(|s| format!("`{s}`")).collect();
    let more = subjects.len().saturating_sub(3);
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

/// `discard`: it drops the session's staged changes and touches nothing on disk, so no mode or
/// profile ceiling refuses it.
fn drops_staged_only(req: &ToolRequest<'_>) -> bool {
    req.tool == "discard"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Ruling;

    #[test]
    fn default_is_widest_the_mode_allows() {
        let p = |m| {
            Policy::new(m, PermissionMode::Auto, None, Rules::new(), vec![])
                .unwrap()
                .profile()
        };
        assert_eq!(p(WorkMode::Discuss), Profile::Readonly);
        assert_eq!(p(WorkMode::Plan), Profile::Plan);
        assert_eq!(p(WorkMode::Build), Profile::AllowAll);
    }

    #[test]
    fn unrestricted_needs_a_grant() {
        let e = Policy::new(
            WorkMode::Build,
            PermissionMode::Auto,
            Some(Profile::Unrestricted),
            Rules::new(),
            vec![],
        )
        .unwrap_err();
        assert_eq!(e, PolicyError::UnrestrictedNeedsGrant);
        let mut p = Policy::new(
            WorkMode::Build,
            PermissionMode::Auto,
            None,
            Rules::new(),
            vec![],
        )
        .unwrap();
        assert!(!p.is_unrestricted());
        p.grant_unrestricted(OperatorGrant::from_cli_flag());
        assert!(p.is_unrestricted());
        let subjects = ["x".to_string()];
        let d = p.decide(&ToolRequest {
            tool: "bash",
            class: ToolClass::Exec,
            subjects: &subjects,
        });
        assert_eq!(d.decision, Ruling::Allow);
    }

    #[test]
    fn unknown_tools_are_denied_by_name() {
        let p = Policy::new(
            WorkMode::Build,
            PermissionMode::Auto,
            None,
            Rules::new(),
            vec![],
        )
        .unwrap();
        assert_eq!(p.decide_named("rm_rf", &[]).rule, "unknown_tool");
        assert_eq!(p.decide_named("rm_rf", &[]).decision, Ruling::Deny);
        assert!(p.decide_named("grep", &["x".to_string()]).is_allow());
    }

    #[test]
    fn publishing_tools_need_the_operator() {
        let p = |mode, perm, profile, allow: &[&str]| {
            Policy::new(
                mode,
                perm,
                profile,
                Rules::parse(allow, &[], &[]).unwrap(),
                vec![],
            )
            .unwrap()
        };
        let d = |p: &Policy, tool: &str| {
            let d = p.decide_named(tool, &[]);
            (d.decision, d.rule.to_string())
        };
        let build = WorkMode::Build;
        for tool in ["git_commit", "git_push"] {
            let auto = p(build, PermissionMode::Auto, None, &[]);
            assert_eq!(d(&auto, tool), (Ruling::Deny, "publish_needs_rule".into()));
            let ruled = p(build, PermissionMode::Auto, None, &[tool]);
            assert_eq!(d(&ruled, tool), (Ruling::Allow, "user_rule_allow".into()));
            let ask = p(build, PermissionMode::Ask, None, &[]);
            assert_eq!(d(&ask, tool), (Ruling::Ask, "permission_ask_gated".into()));
            for (profile, rule) in [
                (Profile::Readonly, "profile_readonly"),
                (Profile::Plan, "profile_plan_no_exec"),
                (Profile::Allowlist, "profile_allowlist_no_publish"),
            ] {
                let denied = p(build, PermissionMode::Ask, Some(profile), &[tool]);
                assert_eq!(d(&denied, tool), (Ruling::Deny, rule.into()), "{profile}");
            }
            let discuss = p(WorkMode::Discuss, PermissionMode::Ask, None, &[tool]);
            assert_eq!(d(&discuss, tool).0, Ruling::Deny);
            // The read tools stay reads.
            assert!(auto.decide_named("git_log", &[]).is_allow());
        }
    }
}
