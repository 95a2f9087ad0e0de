//! The tool registry: one [`Tool`] per tool, owning its name, capability class, description,
//! typed arguments (and the JSON Schema derived from them), the subjects the chain must confine
//! and judge, and its executor. The registry is a list of tools; nothing else names a tool.
//!
//! Validation (stage `validation`) is parsing: the arguments become the tool's typed
//! [`args`](crate::args) (serde, unknown fields denied) and pass the type's
//! [`Check`](crate::args::Check) of the bounds its
//! schema states. A rejection is worded by the `jsonschema` validator of the published schema,
//! so the error names the JSON pointer of the offending value.

mod defs;

use crate::api::CallOutcome;
use crate::args::{Check, Invalid};
use crate::exec::{Call, ExecCtx, Link};
use airlock_policy::permission::ToolClass;
use airlock_policy::{Decision, Stage};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::BTreeMap;

/// One path argument of a call, as given, and how the chain confines it.
#[derive(Debug, Clone)]
pub(crate) struct PathArg {
    /// The path as the call gives it.
    pub(crate) raw: String,
    /// Through a final symlink, or the link itself.
    pub(crate) link: Link,
    /// The path may name the workspace root (directory tools, `diff`).
    pub(crate) root_ok: bool,
    /// The path is still there after the call (not deleted or moved away): the git-shape
    /// judgement counts it as written.
    pub(crate) remains: bool,
}

impl PathArg {
    /// A path the call reads or writes through symlinks, which must lie below the root.
    pub(crate) fn file(raw: impl Into<String>) -> PathArg {
        PathArg {
            raw: raw.into(),
            link: Link::Follow,
            root_ok: false,
            remains: true,
        }
    }
}

/// Whether the call runs a command the bash guard must judge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Shell {
    /// Not a shell call.
    No,
    /// A shell call and its script as the shell reads it (`None`: not given in a usable form;
    /// validation reports that).
    Script(Option<String>),
}

/// What the chain judges for one call: the paths it confines, the command it guards, and what
/// user rules glob against.
#[derive(Debug)]
pub(crate) struct Subjects {
    /// Every path argument, in the order the executor receives them confined.
    pub(crate) paths: Vec<PathArg>,
    /// The command, for shell tools.
    pub(crate) shell: Shell,
    /// The parsed patch, for `apply_patch` (its paths are in `paths`).
    pub(crate) patch: Option<airlock_stage::patch::ParsedPatch>,
}

impl Subjects {
    /// A call with no path and no command.
    pub(crate) fn none() -> Subjects {
        Subjects {
            paths: Vec::new(),
            shell: Shell::No,
            patch: None,
        }
    }

    /// A call on these paths.
    pub(crate) fn paths(paths: Vec<PathArg>) -> Subjects {
        Subjects {
            paths,
            ..Subjects::none()
        }
    }

    /// What user rules glob against: the command of a shell call, otherwise the paths.
    pub(crate) fn rule_subjects(&self) -> Vec<String> {
        match &self.shell {
            Shell::Script(cmd) => cmd.iter().cloned().collect(),
            Shell::No => self.paths.iter().map(|p| p.raw.clone()).collect(),
        }
    }
}

/// A tool call parsed into its typed arguments, ready to run once the chain allows it.
pub(crate) trait Runnable: Send {
    /// Run the executor.
    fn run(self: Box<Self>, x: &ExecCtx<'_>, call: Call<'_, ()>) -> CallOutcome;
}

/// Typed arguments that passed validation, and the sizes of their content fields.
pub(crate) struct Parsed {
    /// The executor bound to its arguments.
    pub(crate) run: Box<dyn Runnable>,
    /// Content fields and their sizes in bytes (bounded by `limits.max_file_bytes`).
    pub(crate) content: Vec<(&'static str, usize)>,
}

/// One tool, as the chain and the front ends see it.
pub(crate) trait Tool: Sync {
    /// Name.
    fn name(&self) -> &'static str;
    /// Capability class for the permission stage (and the jail's access: `Write` writes).
    fn class(&self) -> ToolClass;
    /// Description shown to models (without the loop paragraph every tool shares).
    fn description(&self) -> &'static str;
    /// The JSON Schema of the arguments, derived from the typed arguments.
    fn schema(&self, max_file_bytes: u64) -> Value;
    /// Valid arguments, as documentation and for the schema tests.
    fn examples(&self) -> Vec<Value>;
    /// What the chain confines and judges, read from the raw arguments before validation (the
    /// stages run in order: permission, jail and guard before validation).
    fn subjects(&self, args: &Value) -> Result<Subjects, Decision>;
    /// Parse and check the arguments into the tool's types.
    fn parse(&self, args: &Value, max_file_bytes: u64) -> Result<Parsed, Invalid>;
}

/// A tool defined by its typed arguments and executor; every such tool is a [`Tool`].
pub(crate) trait TypedTool: Sync + 'static {
    /// The arguments.
    type Args: DeserializeOwned + schemars::JsonSchema + Check + Send + 'static;
    /// Name.
    const NAME: &'static str;
    /// Capability class.
    const CLASS: ToolClass;
    /// Description.
    const DESCRIPTION: &'static str;
    /// Valid arguments.
    fn examples() -> Vec<Value>;
    /// The paths and command of a call (default: none).
    fn subjects(_args: &Value) -> Result<Subjects, Decision> {
        Ok(Subjects::none())
    }
    /// Adjust the derived schema to the operator's limits (default: as derived).
    fn adjust_schema(_schema: &mut Value, _max_file_bytes: u64) {}
    /// Content fields bounded by the per-file limit (default: none).
    fn content(_args: &Self::Args) -> Vec<(&'static str, usize)> {
        Vec::new()
    }
    /// The executor.
    fn run(x: &ExecCtx<'_>, call: Call<'_, Self::Args>) -> CallOutcome;
}

struct Bound<T: TypedTool>(T::Args);

impl<T: TypedTool> Runnable for Bound<T> {
    fn run(self: Box<Self>, x: &ExecCtx<'_>, call: Call<'_, ()>) -> CallOutcome {
        let Call {
            args: (),
            paths,
            script,
            patch,
            vouched,
            cx,
        } = call;
        T::run(
            x,
            Call {
                args: self.0,
                paths,
                script,
                patch,
                vouched,
                cx,
            },
        )
    }
}

impl<T: TypedTool> Tool for T {
    fn name(&self) -> &'static str {
        T::NAME
    }
    fn class(&self) -> ToolClass {
        T::CLASS
    }
    fn description(&self) -> &'static str {
        T::DESCRIPTION
    }
    fn schema(&self, max_file_bytes: u64) -> Value {
        let mut v = serde_json::to_value(schemars::schema_for!(T::Args)).unwrap_or(Value::Null);
        if let Some(o) = v.as_object_mut() {
            o.remove("title");
        }
        T::adjust_schema(&mut v, max_file_bytes);
        v
    }
    fn examples(&self) -> Vec<Value> {
        T::examples()
    }
    fn subjects(&self, args: &Value) -> Result<Subjects, Decision> {
        T::subjects(args)
    }
    fn parse(&self, args: &Value, max_file_bytes: u64) -> Result<Parsed, Invalid> {
        let Some(raw) = args.as_object() else {
            return Err(Invalid {
                pointer: "/".into(),
                message: "must be a JSON object".into(),
            });
        };
        let typed = <T::Args as serde::Deserialize>::deserialize(args).map_err(|e| Invalid {
            pointer: "/".into(),
            message: e.to_string(),
        })?;
        typed.check(raw, max_file_bytes)?;
        Ok(Parsed {
            content: T::content(&typed),
            run: Box::new(Bound::<T>(typed)),
        })
    }
}

/// Every tool. Adding a tool is adding it here; nothing else lists tools.
pub(crate) static TOOLS: &[&dyn Tool] = &[
    &defs::ReadFile,
    &defs::ListDir,
    &defs::Glob,
    &defs::Grep,
    &defs::WriteFile,
    &defs::EditFile,
    &defs::ApplyPatch,
    &defs::DeleteFile,
    &defs::MoveFile,
    &defs::Bash,
    &defs::Verify,
    &defs::Status,
    &defs::Diff,
    &defs::Discard,
    &defs::Apply,
    &defs::Undo,
    &defs::Journal,
    &defs::Recover,
    &defs::AskUser,
    &defs::GitStatus,
    &defs::GitDiff,
    &defs::GitLog,
    &defs::GitShow,
    &defs::GitBlame,
    &defs::GitCommit,
    &defs::GitPush,
];

const LOOP: &str = "The airlock loop: stage changes (write_file, edit_file, apply_patch, bash) → verify → \
read the diagnostics → fix → verify again → apply. Nothing reaches the workspace until a passing \
verify and apply.";

/// One registered tool with its schema and validator, generated on first use (a CLI call needs
/// one tool's schema, not every tool's).
pub struct ToolDef {
    /// Name.
    pub name: &'static str,
    /// Capability class for the permission stage.
    pub class: ToolClass,
    tool: &'static dyn Tool,
    /// The per-file limit, which bounds write contents in the schema and in validation.
    max_file_bytes: u64,
    schema: std::sync::OnceLock<Value>,
    validator: std::sync::OnceLock<Result<jsonschema::Validator, String>>,
}

/// Build the registry. `max_content_bytes` bounds file contents in write tools.
pub fn registry(max_content_bytes: u64) -> BTreeMap<&'static str, ToolDef> {
    TOOLS
        .iter()
        .map(|&tool| {
            (
                tool.name(),
                ToolDef {
                    name: tool.name(),
                    class: tool.class(),
                    tool,
                    max_file_bytes: max_content_bytes,
                    schema: std::sync::OnceLock::new(),
                    validator: std::sync::OnceLock::new(),
                },
            )
        })
        .collect()
}

impl ToolDef {
    /// Description shown to models (made when asked: a call that lists no tools writes none
    /// of them).
    pub fn description(&self) -> String {
        format!("{}\n\n{LOOP}", self.tool.description())
    }

    /// The JSON Schema of the tool's arguments.
    pub fn schema(&self) -> &Value {
        self.schema
            .get_or_init(|| self.tool.schema(self.max_file_bytes))
    }

    /// Valid arguments of the tool (each one passes [`ToolDef::validate`]).
    pub fn examples(&self) -> Vec<Value> {
        self.tool.examples()
    }

    /// The per-file limit the tool's contents are held to.
    pub(crate) fn max_file_bytes(&self) -> u64 {
        self.max_file_bytes
    }

    pub(crate) fn tool(&self) -> &'static dyn Tool {
        self.tool
    }

    /// Parse `args` into the tool's typed arguments, with no wording of a rejection (what
    /// [`ToolDef::validate`] accepts, cheaply).
    pub fn parse_typed(&self, args: &Value) -> Result<(), String> {
        self.tool
            .parse(args, self.max_file_bytes)
            .map(drop)
            .map_err(|e| format!("{}: {}", e.pointer, e.message))
    }

    /// Validate `args`: the first error with its JSON pointer, as a denial.
    pub fn validate(&self, args: &Value) -> Result<(), Decision> {
        self.prepare(args).map(drop)
    }

    /// Parse `args` for the executor; a rejection is worded by the schema's validator.
    pub(crate) fn prepare(&self, args: &Value) -> Result<Parsed, Decision> {
        match self.tool.parse(args, self.max_file_bytes) {
            Ok(p) => Ok(p),
            Err(invalid) => {
                self.validate_full(args)?;
                // The schema accepts what the types refuse: refuse it all the same (fail
                // closed), in the types' words.
                Err(Decision::deny(
                    Stage::Validation,
                    "schema_violation",
                    format!(
                        "Argument `{}` of `{}` is invalid: {}.",
                        invalid.pointer, self.name, invalid.message
                    ),
                ))
            }
        }
    }

    /// Validate with the compiled `jsonschema` validator of the published schema and the one
    /// rule outside it ([`crate::args::exactly_one_of`]).
    pub fn validate_full(&self, args: &Value) -> Result<(), Decision> {
        let validator = self
            .validator
            .get_or_init(|| jsonschema::validator_for(self.schema()).map_err(|e| e.to_string()));
        let validator = match validator {
            Ok(v) => v,
            Err(e) => {
                // Fail closed: a schema that does not compile validates nothing.
                return Err(Decision::deny(
                    Stage::Validation,
                    "schema_invalid",
                    format!(
                        "The schema of `{}` cannot be compiled ({e}); the call is refused.",
                        self.name
                    ),
                ));
            }
        };
        let mut errors = validator.iter_errors(args);
        if let Some(err) = errors.next() {
            let pointer = err.instance_path().as_str().to_string();
            let pointer = if pointer.is_empty() {
                "/".to_string()
            } else {
                pointer
            };
            let more = errors.count();
            let extra = if more > 0 {
                format!(" ({more} more problem(s))")
            } else {
                String::new()
            };
            return Err(Decision::deny(
                Stage::Validation,
                "schema_violation",
                format!(
                    "Argument `{pointer}` of `{}` is invalid: {}{extra}.",
                    self.name,
                    err.masked()
                ),
            ));
        }
        crate::args::exactly_one_of(self.name, args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_schema_compiles() {
        for (name, def) in registry(8 << 20) {
            if let Err(d) = def.validate_full(&serde_json::json!({})) {
                assert_ne!(d.rule, "schema_invalid", "{name}: {}", d.reason);
            }
        }
    }

    #[test]
    fn tool_names_are_unique() {
        assert_eq!(registry(1).len(), TOOLS.len());
    }
}
