//! The executor: runs a call that passed every stage. Reads run in parallel; writes hold their
//! paths' locks (one writer per path, bounded total); output over its budget is cut with a marker
//! that says how much was cut and how to get the rest.

pub(crate) mod exposure;
mod files;
pub(crate) mod shell;
pub(crate) mod workflow;

use crate::api::{CallContext, CallOutcome};
use crate::chain::Prepared;
use crate::kernel::Kernel;
use serde_json::{Value, json};

/// A successful outcome.
pub(crate) fn success(output: Value, truncated: bool) -> CallOutcome {
    CallOutcome {
        ok: true,
        output,
        truncated,
        denial: None,
        exit_code: 0,
    }
}

/// A failed outcome with a message (no denial: the chain allowed it, the tool failed).
pub(crate) fn failure(message: impl Into<String>, exit_code: i32) -> CallOutcome {
    CallOutcome {
        ok: false,
        output: json!(message.into()),
        truncated: false,
        denial: None,
        exit_code,
    }
}

/// Run a prepared call.
pub(crate) fn execute(kernel: &Kernel, p: Prepared<'_>, ctx: &CallContext<'_>) -> CallOutcome {
    match p.tool.name {
        "read_file" => files::read_file(kernel, &p),
        "list_dir" => files::list_dir(kernel, &p),
        "glob" => files::glob(kernel, &p),
        "grep" => files::grep(kernel, &p),
        "write_file" => files::write_file(kernel, &p),
        "edit_file" => files::edit_file(kernel, &p),
        "apply_patch" => files::apply_patch(kernel, &p),
        "delete_file" => files::delete_file(kernel, &p),
        "move_file" => files::move_file(kernel, &p),
        "bash" => shell::bash(kernel, &p, ctx),
        "verify" => workflow::verify(kernel, &p, ctx),
        "status" => workflow::status(kernel),
        "diff" => workflow::diff(kernel, &p),
        "discard" => workflow::discard(kernel),
        "apply" => workflow::apply(kernel, ctx),
        "undo" => workflow::undo(kernel),
        "journal" => workflow::journal(kernel),
        "recover" => workflow::recover(kernel),
        "ask_user" => workflow::ask_user(&p, ctx),
        other => failure(format!("The tool `{other}` has no executor."), 1),
    }
}
