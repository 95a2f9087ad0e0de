//! A kernel [`CallOutcome`] as an MCP tool result.
//!
//! - A denial is a tool error (`isError: true`) whose text is the decision JSON
//!   (`{"decision", "stage", "rule", "reason"}`), also given as structured content, so the model
//!   reads why and which rule.
//! - Otherwise the output is the text content (strings as they are, JSON pretty-printed); an
//!   object output is also given as structured content. A failed call is a tool error.
//! - A cut output keeps the kernel's paging marker in its text and sets `_meta."airlock/truncated"`.

use airlock_kernel::CallOutcome;
use rmcp::model::{CallToolResult, ContentBlock, MetaObject};
use serde_json::Value;

/// The `_meta` key that marks a cut output.
pub const TRUNCATED_META: &str = "airlock/truncated";

/// Convert one outcome.
pub fn to_result(outcome: &CallOutcome) -> CallToolResult {
    if let Some(denial) = &outcome.denial {
        let decision = denial.to_json();
        let mut r = CallToolResult::error(vec![ContentBlock::text(decision.to_string())]);
        r.structured_content = Some(decision);
        return r;
    }
    let text = match &outcome.output {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => serde_json::to_string_pretty(other).unwrap_or_else(|_| other.to_string()),
    };
    let content = vec![ContentBlock::text(text)];
    let mut r = if outcome.ok {
        CallToolResult::success(content)
    } else {
        CallToolResult::error(content)
    };
    if outcome.output.is_object() {
        r.structured_content = Some(outcome.output.clone());
    }
    if outcome.truncated {
        let mut meta = MetaObject::default();
        meta.0.insert(TRUNCATED_META.into(), Value::Bool(true));
        r.meta = Some(meta);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use airlock_policy::{Decision, Stage};
    use serde_json::json;

    fn outcome(ok: bool, output: Value, truncated: bool, denial: Option<Decision>) -> CallOutcome {
        CallOutcome {
            ok,
            output,
            truncated,
            denial,
            status: if ok {
                airlock_kernel::Status::Ok
            } else {
                airlock_kernel::Status::Denied
            },
        }
    }

    fn wire(r: &CallToolResult) -> Value {
        serde_json::to_value(r).unwrap()
    }

    #[test]
    fn a_denial_is_a_tool_error_carrying_the_decision_json() {
        let d = Decision::deny(Stage::Guard, "destruction", "Removes the workspace.");
        let w = wire(&to_result(&outcome(false, d.to_json(), false, Some(d))));
        assert_eq!(w["isError"], true);
        let text: Value = serde_json::from_str(w["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(
            text,
            json!({"decision": "deny", "stage": "guard", "rule": "destruction",
                                "reason": "Removes the workspace."})
        );
        assert_eq!(w["structuredContent"]["rule"], "destruction");
    }

    #[test]
    fn text_output_passes_through_and_truncation_is_marked() {
        let w = wire(&to_result(&outcome(
            true,
            json!("line 1\n[... cut]"),
            true,
            None,
        )));
        assert_eq!(w["isError"], false);
        assert_eq!(w["content"][0]["text"], "line 1\n[... cut]");
        assert_eq!(w["_meta"][TRUNCATED_META], true);
        let w = wire(&to_result(&outcome(true, json!("x"), false, None)));
        assert!(w.get("_meta").is_none());
    }

    #[test]
    fn object_output_is_text_and_structured_and_failure_is_an_error() {
        let out = json!({"verdict": "failed", "tests": {"passed": 1, "failed": 1}});
        let w = wire(&to_result(&outcome(false, out.clone(), false, None)));
        assert_eq!(w["isError"], true);
        assert_eq!(w["structuredContent"], out);
        let text: Value = serde_json::from_str(w["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text, out);
    }
}
