//! Operator approvals over MCP. In `--permission ask`, a gated call is put to the operator, never
//! to the model:
//!
//! - on handshake-era sessions (protocol ≤ 2025-11-25) whose client declared elicitation, through
//!   an `elicitation/create` request sent while the call waits (the kernel's blocking thread
//!   blocks on it through a tokio [`Handle`], bounded by a timeout);
//! - on protocol 2026-07-28 and later, where the server may not send requests, through a
//!   multi-round tool call: the call returns an `InputRequiredResult` carrying the same form, and
//!   the client retries with the operator's answer;
//! - with neither, the question waits in the approval queue ([`super::queue`]) that the operator
//!   answers with `airlock approvals`; unanswered, it is denied when the wait times out.
//!
//! The answer is "once", "session" (kept in memory by the kernel for this session, never
//! persisted) or "deny".

use airlock_kernel::{Approval, ApprovalRequest, Approver, Cancel};
use airlock_types::display::Shown;
use rmcp::model::{
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema, EnumSchema,
};
use rmcp::{Peer, RoleServer};
use serde_json::Value;
use std::sync::Mutex;
use std::time::Duration;
use tokio::runtime::Handle;

/// How long an operator has to answer before the call is denied (override with
/// `AIRLOCK_APPROVAL_TIMEOUT_SECS`).
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(300);

/// The form field that carries the answer.
pub const FIELD: &str = "decision";

/// The approval timeout in force.
pub fn approval_timeout() -> Duration {
    std::env::var("AIRLOCK_APPROVAL_TIMEOUT_SECS")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|s| *s > 0)
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_APPROVAL_TIMEOUT)
}

/// What identifies one question, so an answer is only ever used for the question it answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    tool: String,
    summary: String,
    stage: String,
    rule: String,
}

impl Question {
    /// The question `req` asks.
    pub fn of(req: &ApprovalRequest) -> Question {
        Question {
            tool: req.tool.clone(),
            summary: req.summary.clone(),
            stage: req.decision.stage.as_str().to_string(),
            rule: req.decision.rule.to_string(),
        }
    }
}

/// The form parameters shown to the operator for `req` (what the agent chose escaped, one line
/// each: [`airlock_types::display`]).
pub fn form(req: &ApprovalRequest) -> ElicitRequestParams {
    let message = format!(
        "airlock: `{}` needs your approval.\nWhat: {}\nWhy: {} ({}/{})\n\
         Answer once (this call only), session (this and identical calls until airlock exits; \
         never saved) or deny.",
        Shown::name(&req.tool),
        Shown::name(&req.summary),
        Shown::name(&req.decision.reason),
        req.decision.stage,
        Shown::name(&req.decision.rule)
    );
    let choice = EnumSchema::builder(vec!["once".into(), "session".into(), "deny".into()])
        .title("Decision")
        .description("once: allow this call · session: allow for this session · deny: refuse")
        .build();
    let schema = ElicitationSchema::builder()
        .required_enum_schema(FIELD, choice)
        .build()
        .unwrap_or_else(|_| ElicitationSchema::new(Default::default()));
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    }
}

/// The operator's answer in an elicitation result.
pub fn answer(result: &ElicitResult) -> Approval {
    match result.action {
        ElicitationAction::Accept => {
            match result
                .content
                .as_ref()
                .and_then(|c| c.get(FIELD))
                .and_then(Value::as_str)
            {
                Some("once") => Approval::Once,
                Some("session") => Approval::Session,
                Some("deny") => Approval::Deny("the operator denied it".into()),
                _ => Approval::Deny(
                    "the operator's answer was not one of once, session or deny".into(),
                ),
            }
        }
        ElicitationAction::Decline => Approval::Deny("the operator declined it".into()),
        _ => Approval::Deny("the operator dismissed the approval request".into()),
    }
}

/// The approval channel of one call.
pub enum McpApprover {
    /// Ask with `elicitation/create` while the call waits.
    Elicit {
        /// The client.
        peer: Peer<RoleServer>,
        /// The runtime the protocol runs on (the call itself runs on a blocking thread).
        handle: Handle,
        /// How long to wait for the operator.
        timeout: Duration,
        /// The call's cancellation flag: cancelling abandons the question.
        cancel: Cancel,
    },
    /// Multi-round: answers from earlier rounds; the first unanswered question is recorded and
    /// denied for now, so the front end can ask it and retry.
    Rounds {
        /// Questions answered in earlier rounds.
        answered: Vec<(Question, Approval)>,
        /// The question this round could not answer.
        asked: Mutex<Option<ApprovalRequest>>,
    },
    /// The client cannot ask: the question waits in the approval queue ([`super::queue`]),
    /// answered with `airlock approvals` from another terminal, or times out as a denial.
    Queue {
        /// The workspace (the queue lives in its `.airlock/approvals/<session>/`).
        workspace: std::path::PathBuf,
        /// The session.
        session: String,
        /// How long to wait.
        timeout: Duration,
        /// The call's cancellation flag.
        cancel: Cancel,
        /// Why the client could not ask.
        why: String,
    },
    /// Nobody can be asked; every gated call is denied with this reason.
    Unavailable(String),
}

impl McpApprover {
    /// The question this round recorded, if any (multi-round only).
    pub fn take_asked(&self) -> Option<ApprovalRequest> {
        match self {
            McpApprover::Rounds { asked, .. } => {
                asked.lock().unwrap_or_else(|e| e.into_inner()).take()
            }
            _ => None,
        }
    }
}

impl Approver for McpApprover {
    fn approve(&self, req: &ApprovalRequest) -> Approval {
        match self {
            McpApprover::Unavailable(reason) => Approval::Deny(reason.clone()),
            McpApprover::Queue {
                workspace,
                session,
                timeout,
                cancel,
                why,
            } => super::queue::ask(workspace, session, req, *timeout, cancel, why),
            McpApprover::Rounds { answered, asked } => {
                let q = Question::of(req);
                if let Some((_, a)) = answered.iter().find(|(k, _)| *k == q) {
                    return a.clone();
                }
                let mut slot = asked.lock().unwrap_or_else(|e| e.into_inner());
                if slot.is_none() {
                    *slot = Some(req.clone());
                }
                Approval::Deny("waiting for the operator's approval".into())
            }
            McpApprover::Elicit {
                peer,
                handle,
                timeout,
                cancel,
            } => {
                let ask = peer.create_elicitation_with_timeout(form(req), Some(*timeout));
                let cancel = cancel.clone();
                let outcome = handle.block_on(async move {
                    tokio::select! {
                        r = ask => Some(r),
                        _ = cancelled(cancel) => None,
                    }
                });
                match outcome {
                    None => Approval::Deny("the call was cancelled while awaiting approval".into()),
                    Some(Ok(result)) => answer(&result),
                    Some(Err(rmcp::ServiceError::Timeout { .. })) => Approval::Deny(format!(
                        "no answer from the operator within {} s",
                        timeout.as_secs()
                    )),
                    Some(Err(e)) => Approval::Deny(format!(
                        "the operator could not be asked through the client ({e})"
                    )),
                }
            }
        }
    }
}

async fn cancelled(cancel: Cancel) {
    while !cancel.is_cancelled() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use airlock_policy::{Decision, Stage};
    use serde_json::json;

    fn req(tool: &str, rule: &'static str) -> ApprovalRequest {
        ApprovalRequest {
            tool: tool.into(),
            summary: format!("run {tool}"),
            decision: Decision::ask(Stage::Permission, rule, "Gated in ask mode."),
        }
    }

    fn elicit(action: ElicitationAction, content: Option<Value>) -> ElicitResult {
        let mut r = ElicitResult::new(action);
        r.content = content;
        r
    }

    #[test]
    fn answers_map_to_once_session_deny() {
        let ok = |d: &str| {
            answer(&elicit(
                ElicitationAction::Accept,
                Some(json!({ FIELD: d })),
            ))
        };
        assert_eq!(ok("once"), Approval::Once);
        assert_eq!(ok("session"), Approval::Session);
        assert!(matches!(ok("deny"), Approval::Deny(_)));
        assert!(
            matches!(ok("always"), Approval::Deny(_)),
            "unknown answers fail closed"
        );
        assert!(matches!(
            answer(&elicit(ElicitationAction::Accept, None)),
            Approval::Deny(_)
        ));
        assert!(matches!(
            answer(&elicit(ElicitationAction::Decline, None)),
            Approval::Deny(_)
        ));
        assert!(matches!(
            answer(&elicit(ElicitationAction::Cancel, None)),
            Approval::Deny(_)
        ));
    }

    #[test]
    fn the_form_asks_for_one_of_three_answers_and_explains_the_rule() {
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = form(&req("bash", "ask_mode"))
        else {
            panic!("a form elicitation");
        };
        assert!(message.contains("`bash`") && message.contains("permission/ask_mode"));
        let schema = serde_json::to_value(&requested_schema).unwrap();
        assert_eq!(
            schema["properties"][FIELD]["enum"],
            json!(["once", "session", "deny"])
        );
        assert_eq!(schema["required"], json!([FIELD]));
    }

    #[test]
    fn the_form_shows_what_the_agent_chose_escaped_on_one_line() {
        let mut r = req("bash", "ask_mode");
        r.summary = "run `cat x`\r\x1b[2A\x1b[JWhat: run `ls`\nWhy: safe \u{202e}".into();
        let ElicitRequestParams::FormElicitationParams { message, .. } = form(&r) else {
            panic!("a form elicitation");
        };
        assert!(
            message.contains(
                "What: run `cat x`\\r\\x1b[2A\\x1b[JWhat: run `ls`\\nWhy: safe \\u{202e}\n"
            ),
            "{message}"
        );
        assert_eq!(
            message.lines().filter(|l| l.starts_with("What:")).count(),
            1
        );
    }

    #[test]
    fn rounds_use_only_answers_to_the_same_question() {
        let a = McpApprover::Rounds {
            answered: vec![(Question::of(&req("bash", "ask_mode")), Approval::Once)],
            asked: Mutex::new(None),
        };
        assert_eq!(a.approve(&req("bash", "ask_mode")), Approval::Once);
        assert!(a.take_asked().is_none());
        assert!(matches!(
            a.approve(&req("write_file", "ask_mode")),
            Approval::Deny(_)
        ));
        assert_eq!(a.take_asked().map(|r| r.tool), Some("write_file".into()));
    }

    #[test]
    fn unavailable_denies_with_its_reason() {
        let a = McpApprover::Unavailable("no elicitation".into());
        assert_eq!(
            a.approve(&req("bash", "x")),
            Approval::Deny("no elicitation".into())
        );
    }
}
