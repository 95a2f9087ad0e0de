//! The MCP server handler: `tools/list` from the kernel's registry, `tools/call` through
//! [`Kernel::call`] on a blocking thread, approvals through the client (see [`super::approval`]).

use super::approval::{self, McpApprover, Question};
use super::calls::Calls;
use super::outcome;
use airlock_kernel::{Approval, ApprovalRequest, CallContext, CallOutcome, Kernel};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, ElicitRequest, ElicitResult, ErrorCode, Implementation, InputRequest,
    InputRequests, InputRequiredResult, JsonObject, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::Value;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::runtime::Handle;

/// The key of the approval question in a multi-round `InputRequiredResult`.
pub const APPROVAL_KEY: &str = "approval";

/// How long a multi-round approval question stays answerable.
const ROUND_TTL: Duration = Duration::from_secs(30 * 60);
/// At most this many unanswered questions are kept.
const MAX_ROUNDS: usize = 64;
/// At most this many kernel calls run at once; later ones wait their turn.
pub const MAX_CONCURRENT_CALLS: usize = 16;

/// What the server teaches the model at `initialize`.
pub const INSTRUCTIONS: &str = "\
airlock runs every tool call through a zero-trust chain: permission, workspace jail, bash guard, \
argument validation, then the executor and a journal.

Edits (write_file, edit_file, apply_patch, delete_file, move_file) and whatever bash writes are \
STAGED: read_file, grep, glob and bash see them, but the workspace on disk does not change until \
`apply`. Work in this loop:
1. Stage the change.
2. Call `verify`: it runs the project's tests in a sandbox over the workspace plus the staged changes.
3. Read the verdict: its failures and diagnostics say what broke and where.
4. Fix, then `verify` again, until the verdict is `passed`.
5. Call `apply`: it writes exactly the verified changeset to disk, atomically (`undo` reverts it).
`status` and `diff` show what is staged; `discard` drops it.

A denied call comes back as an error whose text is a decision JSON \
{\"decision\", \"stage\", \"rule\", \"reason\"}: read the reason and change approach, because the \
same call is denied again. The work mode, permission mode and access profile are set by the \
operator when airlock starts; no tool or argument changes them. Gated calls may wait for the \
operator's approval. Long outputs are cut, with a marker that says how to read the rest.";

/// One unanswered multi-round approval question.
struct Round {
    tool: String,
    args: String,
    answered: Vec<(Question, Approval)>,
    asked: Question,
    created: Instant,
}

/// The `airlock mcp` handler.
pub struct AirlockServer {
    kernel: Arc<Kernel>,
    /// The kernel's tools as MCP tools (the registry is fixed once the kernel is open).
    tools: Vec<Tool>,
    calls: Arc<Calls>,
    handle: Handle,
    timeout: Duration,
    rounds: Mutex<HashMap<String, Round>>,
    slots: Arc<tokio::sync::Semaphore>,
}

impl AirlockServer {
    /// A handler over `kernel`; `handle` is the runtime the protocol runs on.
    pub fn new(kernel: Arc<Kernel>, calls: Arc<Calls>, handle: Handle) -> AirlockServer {
        let tools = super::offered_tools(&kernel)
            .into_iter()
            .map(to_mcp_tool)
            .collect();
        AirlockServer {
            kernel,
            tools,
            calls,
            handle,
            timeout: approval::approval_timeout(),
            rounds: Mutex::new(HashMap::new()),
            slots: Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_CALLS)),
        }
    }

    /// The kernel's tools as MCP tools (schemas passed through unchanged).
    pub fn tool_list(&self) -> Vec<Tool> {
        self.tools.clone()
    }

    fn rounds(&self) -> std::sync::MutexGuard<'_, HashMap<String, Round>> {
        self.rounds.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Pick the approval channel for one call.
    fn approver(
        &self,
        ctx: &RequestContext<RoleServer>,
        answered: Option<Vec<(Question, Approval)>>,
        cancel: &airlock_kernel::Cancel,
    ) -> McpApprover {
        let caps = ctx.client_capabilities();
        let form = caps
            .as_ref()
            .and_then(|c| c.elicitation.as_ref())
            .is_some_and(|e| e.form.is_some() || e.url.is_none());
        if !form {
            return McpApprover::Queue {
                workspace: self.kernel.workspace().to_path_buf(),
                session: self.kernel.session().to_string(),
                timeout: super::queue::queue_timeout(),
                cancel: cancel.clone(),
                why: "this MCP client does not support elicitation, so it cannot ask the \
                      operator"
                    .into(),
            };
        }
        let modern = ctx
            .protocol_version()
            .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
        if modern {
            McpApprover::Rounds {
                answered: answered.unwrap_or_default(),
                asked: Mutex::new(None),
            }
        } else {
            McpApprover::Elicit {
                peer: ctx.peer.clone(),
                handle: self.handle.clone(),
                timeout: self.timeout,
                cancel: cancel.clone(),
            }
        }
    }

    /// The answers carried by a multi-round retry, checked against the question it answers.
    fn resume(
        &self,
        params: &CallToolRequestParams,
        args: &str,
    ) -> Result<Option<Vec<(Question, Approval)>>, CallToolResult> {
        let Some(state) = params.request_state.as_deref() else {
            return Ok(None);
        };
        let round = {
            let mut rounds = self.rounds();
            rounds.retain(|_, r| r.created.elapsed() < ROUND_TTL);
            rounds.remove(state)
        };
        let Some(round) = round else {
            return Err(text_error(
                "This approval request is unknown or has expired; call the tool again.",
            ));
        };
        if round.tool != params.name || round.args != args {
            return Err(text_error(
                "The retried call does not match the call that asked for approval; call the \
                 tool again.",
            ));
        }
        let answer = params
            .input_responses
            .as_ref()
            .and_then(|r| r.get(APPROVAL_KEY))
            .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok())
            .map(|r| approval::answer(&r))
            .unwrap_or_else(|| Approval::Deny("the client returned no approval answer".into()));
        let mut answered = round.answered;
        answered.push((round.asked, answer));
        Ok(Some(answered))
    }

    /// Record an unanswered question and build the `InputRequiredResult` that asks it.
    fn ask_round(
        &self,
        tool: &str,
        args: &str,
        answered: Vec<(Question, Approval)>,
        req: &ApprovalRequest,
    ) -> InputRequiredResult {
        let state = nonce();
        {
            let mut rounds = self.rounds();
            rounds.retain(|_, r| r.created.elapsed() < ROUND_TTL);
            if rounds.len() >= MAX_ROUNDS
                && let Some(oldest) = rounds
                    .iter()
                    .min_by_key(|(_, r)| r.created)
                    .map(|(k, _)| k.clone())
            {
                rounds.remove(&oldest);
            }
            rounds.insert(
                state.clone(),
                Round {
                    tool: tool.to_string(),
                    args: args.to_string(),
                    answered,
                    asked: Question::of(req),
                    created: Instant::now(),
                },
            );
        }
        let mut requests = InputRequests::new();
        requests.insert(
            APPROVAL_KEY.to_string(),
            InputRequest::Elicitation(ElicitRequest::new(approval::form(req))),
        );
        InputRequiredResult::new(Some(requests), Some(state))
    }
}

impl ServerHandler for AirlockServer {
    fn get_info(&self) -> ServerConfig {
        let mut implementation = Implementation::new("airlock", env!("CARGO_PKG_VERSION"));
        implementation.title = Some("airlock: a zero-trust execution kernel".into());
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(implementation)
            .with_instructions(INSTRUCTIONS)
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        let method: String = request.method.chars().take(200).collect();
        Err(McpError::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("Method not found: airlock does not serve `{method}`."),
            None,
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tool_list()))
    }

    async fn call_tool(
        &self,
        params: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = params.name.to_string();
        if !self.tools.iter().any(|t| t.name == name) {
            return Err(McpError::invalid_params(
                format!("Unknown tool `{name}`: tools/list names the tools airlock serves."),
                None,
            ));
        }
        let args = Value::Object(params.arguments.clone().unwrap_or_default()).to_string();
        let answered = match self.resume(&params, &args) {
            Ok(a) => a,
            Err(result) => return Ok(result.into()),
        };
        let slot = tokio::select! {
            permit = self.slots.clone().acquire_owned() => permit.map_err(|_| {
                McpError::internal_error("The server is shutting down.", None)
            })?,
            _ = context.ct.cancelled() => {
                return Ok(text_error("The call was cancelled before it started.").into());
            }
        };
        let guard = self.calls.start();
        let cancel = guard.cancel();
        let approver = self.approver(&context, answered.clone(), &cancel);
        let watch = {
            let ct = context.ct.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move {
                ct.cancelled().await;
                cancel.cancel();
            })
        };
        let kernel = self.kernel.clone();
        let (tool, text) = (name.clone(), args.clone());
        let joined = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            let _guard = guard;
            let ctx = CallContext::new(cancel, &approver);
            let outcome = kernel.call(&tool, &text, &ctx);
            (outcome, approver.take_asked())
        })
        .await;
        watch.abort();
        let (outcome, asked): (CallOutcome, Option<ApprovalRequest>) = joined.map_err(|e| {
            McpError::internal_error(format!("The `{name}` call failed to run: {e}"), None)
        })?;
        if let Some(req) = asked {
            let round = self.ask_round(&name, &args, answered.unwrap_or_default(), &req);
            return Ok(round.into());
        }
        Ok(outcome::to_result(&outcome).into())
    }
}

/// A kernel tool as an MCP tool. The schema is the kernel's, unchanged; a schema that is not a
/// JSON object (never produced by the kernel) is replaced by one that accepts no arguments.
pub fn to_mcp_tool(spec: airlock_kernel::ToolSpec) -> Tool {
    let schema: JsonObject = match spec.input_schema {
        Value::Object(map) => map,
        other => {
            tracing::error!(tool = %spec.name, schema = %other, "tool schema is not an object");
            let mut m = JsonObject::new();
            m.insert("type".into(), "object".into());
            m.insert("additionalProperties".into(), false.into());
            m
        }
    };
    let annotations = ToolAnnotations::new().read_only(spec.read_only);
    Tool::new(spec.name, spec.description, Arc::new(schema)).with_annotations(annotations)
}

fn text_error(msg: &str) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(msg)])
}

/// An unguessable token for a multi-round approval (128 bits from the process's random hash
/// keys, a counter and the clock).
fn nonce() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let half = |salt: u64| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(salt);
        h.write_u64(n);
        h.write_u128(t);
        h.finish()
    };
    format!("airlock-approval-{:016x}{:016x}", half(1), half(2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tools_keep_the_kernel_schema_verbatim() {
        let schema = json!({"type": "object", "properties": {"path": {"type": "string"}},
                            "required": ["path"], "additionalProperties": false});
        let t = to_mcp_tool(airlock_kernel::ToolSpec {
            name: "read_file".into(),
            description: "Read a file.".into(),
            input_schema: schema.clone(),
            read_only: true,
        });
        assert_eq!(Value::Object((*t.input_schema).clone()), schema);
        assert_eq!(t.annotations.and_then(|a| a.read_only_hint), Some(true));
    }

    #[test]
    fn a_non_object_schema_fails_closed() {
        let t = to_mcp_tool(airlock_kernel::ToolSpec {
            name: "x".into(),
            description: String::new(),
            input_schema: json!(true),
            read_only: false,
        });
        assert_eq!(
            t.input_schema.get("additionalProperties"),
            Some(&json!(false))
        );
    }

    fn server(dir: &std::path::Path, rt: &tokio::runtime::Runtime) -> AirlockServer {
        let kernel = Kernel::open(airlock_kernel::KernelConfig {
            workspace: dir.to_path_buf(),
            session: "mcp-unit".into(),
            mode: airlock_policy::modes::WorkMode::Build,
            permission: airlock_policy::modes::PermissionMode::Ask,
            profile: None,
            allow_local_config: false,
            allow_degraded: false,
            settings: crate::cli::settings_from_env(),
        })
        .expect("open a kernel on a temp workspace");
        AirlockServer::new(
            Arc::new(kernel),
            Arc::new(Calls::default()),
            rt.handle().clone(),
        )
    }

    fn ask(tool: &str) -> ApprovalRequest {
        ApprovalRequest {
            tool: tool.into(),
            summary: format!("run {tool}"),
            decision: airlock_policy::Decision::ask(
                airlock_policy::Stage::Permission,
                "permission_ask_gated",
                "Gated in ask mode.",
            ),
        }
    }

    fn retry(tool: &str, args: &str, state: &str, answer: Value) -> CallToolRequestParams {
        let mut p = CallToolRequestParams::new(tool.to_string());
        p.arguments = serde_json::from_str(args).ok();
        p.request_state = Some(state.to_string());
        let mut responses = rmcp::model::InputResponses::new();
        responses.insert(APPROVAL_KEY.to_string(), answer);
        p.input_responses = Some(responses);
        p
    }

    #[test]
    fn an_input_round_is_answered_once_and_only_for_its_own_call() {
        let dir = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Runtime::new().unwrap();
        let s = server(dir.path(), &rt);
        let args = r#"{"command":"echo hi"}"#;
        let round = s.ask_round("bash", args, Vec::new(), &ask("bash"));
        let wire = serde_json::to_value(&round).unwrap();
        assert_eq!(wire["resultType"], "input_required");
        assert_eq!(
            wire["inputRequests"][APPROVAL_KEY]["method"],
            "elicitation/create"
        );
        let state = round.request_state.clone().unwrap();

        let accept = json!({"action": "accept", "content": {"decision": "session"}});
        // A different call cannot use the answer (and consumes nothing).
        let other = retry("bash", r#"{"command":"rm -rf x"}"#, &state, accept.clone());
        assert!(s.resume(&other, r#"{"command":"rm -rf x"}"#).is_err());
        let round = s.ask_round("bash", args, Vec::new(), &ask("bash"));
        let state = round.request_state.unwrap();
        let ok = retry("bash", args, &state, accept.clone());
        let answered = s
            .resume(&ok, args)
            .expect("matching retry")
            .expect("answers");
        assert_eq!(
            answered,
            vec![(Question::of(&ask("bash")), Approval::Session)]
        );
        // Single use: the same state again is unknown.
        assert!(s.resume(&ok, args).is_err());
        // No state at all: not a retry.
        let plain = CallToolRequestParams::new("bash");
        assert_eq!(s.resume(&plain, args).ok(), Some(None));
    }

    #[test]
    fn a_retry_without_an_answer_is_a_denial() {
        let dir = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Runtime::new().unwrap();
        let s = server(dir.path(), &rt);
        let round = s.ask_round("apply", "{}", Vec::new(), &ask("apply"));
        let mut p = CallToolRequestParams::new("apply");
        p.request_state = round.request_state;
        let answered = s.resume(&p, "{}").unwrap().unwrap();
        assert!(matches!(answered[0].1, Approval::Deny(_)));
    }

    #[test]
    fn nonces_differ() {
        let a = nonce();
        let b = nonce();
        assert_ne!(a, b);
        assert!(a.len() > 40);
    }
}
