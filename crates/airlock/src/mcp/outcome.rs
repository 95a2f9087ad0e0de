//! A kernel [`CallOutcome`] as an MCP tool result.
//!
//! - A denial is a tool error (`isError: true`) whose text is the decision JSON
//!   (`{"decision", "stage", "rule", "reason"}`), also given as structured content, so the model
//!   reads why and which rule.
//! - Otherwise the output is the text content (strings as they are, JSON pretty-printed); an
//!   object output is also given as structured content. A failed call is a tool error.
//! - The text content is escaped for a terminal (clients show it to the operator): a string
//!   output by [`Escape::Text`] (`\t` and `\n` kept, `\r`, ESC, C1 and bidi characters written
//!   visibly), JSON by [`Escape::Json`] (exact once parsed). Structured content is exact.
//! - A cut output keeps the kernel's paging marker in its text and sets `_meta."airlock/truncated"`.

use airlock_kernel::CallOutcome;
use airlock_types::display::{Escape, escape_for_terminal};
use rmcp::model::{CallToolResult, ContentBlock, MetaObject};
use serde_json::Value;

/// The `_meta` key that marks a cut output.
pub const TRUNCATED_META: &str = "airlock/truncated";

/// Convert one outcome.
pub fn to_result(outcome: &CallOutcome) -> CallToolResult {
    if let Some(denial) = &outcome.denial {
        let decision = denial.to_json();
        let text = escape_for_terminal(&decision.to_string(), Escape::Json).into_owned();
        let mut r = CallToolResult::error(vec![ContentBlock::text(text)]);
        r.structured_content = Some(decision);
        return r;
    }
    let text = match &outcome.output {
        Value::String(s) => escape_for_terminal(s, Escape::Text).into_owned(),
        Value::Null => String::new(),
        other => {
            let json = serde_json::to_string_pretty(other).unwrap_or_else(|_| other.to_string());
            escape_for_terminal(&json, Escape::Json).into_owned()
        }
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

    #[test]
    fn text_content_is_escaped_for_the_terminal_and_structured_content_is_exact() {
        let forged = "zz\r\x1b[2A\x1b[J\rM docs/notes.md \u{202e}";
        let w = wire(&to_result(&outcome(true, json!(forged), false, None)));
        assert_eq!(
            w["content"][0]["text"],
            "zz\\r\\x1b[2A\\x1b[J\\rM docs/notes.md \\u{202e}"
        );
        let out = json!({ "staged": [forged] });
        let w = wire(&to_result(&outcome(true, out.clone(), false, None)));
        let text = w["content"][0]["text"].as_str().unwrap();
        assert!(
            !text.contains('\u{202e}') && !text.contains('\x1b'),
            "{text:?}"
        );
        assert_eq!(serde_json::from_str::<Value>(text).unwrap(), out);
        assert_eq!(w["structuredContent"], out);
    }
}
