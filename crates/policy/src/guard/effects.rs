//! What a rule may do to the walk: the interface between the rules and the walker.
//!
//! The rules (`rules::*`) judge one resolved command at a time. To do so they record denials,
//! read and update what the script has established so far (working directory, files written
//! or downloaded, git remotes, variables, aliases) and hand the code a command carries (a
//! `bash -c` string, a script file, an argument vector) back to the walker to be judged like
//! the rest of the script. [`Effects`] names exactly those operations; the walker implements
//! it, and the rules see nothing else of it. This module depends on no other guard module but
//! the shared value types, so the walker can call the rules and the rules can call back
//! through [`Effects`] without the two modules depending on each other.

use std::collections::{HashMap, HashSet};

use super::normalize::{Arg, Input, Output, Taint};
use super::{Family, Finding};

/// The working directory the script is in, as far as `cd` tells.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum Cwd {
    /// The workspace root or a directory under it (components below the root).
    Workspace(Vec<String>),
    /// The home directory or under it.
    Home(Vec<String>),
    /// An absolute directory.
    Absolute(Vec<String>),
    /// Above the workspace root (`cd ..`): levels up, then components down.
    Above(usize, Vec<String>),
    /// Unknown (`cd "$dir"`, `cd -`).
    Unknown,
    /// The workspace root (the starting point).
    #[default]
    Root,
}

/// The walk as the rules see it: its findings, its state and its traversal.
pub(crate) trait Effects {
    /// Record a finding of `family` with its human sentence.
    fn record_denial(&mut self, family: Family, reason: String);
    /// The findings recorded so far, in order.
    fn findings(&self) -> &[Finding];
    /// The findings recorded so far, to retract some (a command that runs elsewhere).
    fn findings_mut(&mut self) -> &mut Vec<Finding>;

    /// Where relative paths point.
    fn cwd(&self) -> &Cwd;
    /// Change where relative paths point (`cd`, `popd`).
    fn set_cwd(&mut self, cwd: Cwd);
    /// Files the script wrote with statically known contents.
    fn written(&self) -> &HashMap<String, String>;
    /// Files the script wrote with statically known contents, to record another.
    fn written_mut(&mut self) -> &mut HashMap<String, String>;
    /// Files a download was written to.
    fn downloaded(&self) -> &HashSet<String>;
    /// Files a download was written to, to record another.
    fn downloaded_mut(&mut self) -> &mut HashSet<String>;
    /// Whether `path` was downloaded, or lies in a directory that was (a cloned repository).
    fn is_downloaded(&self, path: &str) -> bool;
    /// git remotes the script pointed at an address (`git remote add x https://…`).
    fn addressed_remotes(&self) -> &HashSet<String>;
    /// git remotes the script pointed at an address, to record another.
    fn addressed_remotes_mut(&mut self) -> &mut HashSet<String>;
    /// The current command runs in a pipeline or in the background.
    fn concurrent(&self) -> bool;
    /// A proxy variable was set (`http_proxy=…`): requests to the loopback host may leave.
    fn proxy_env(&self) -> bool;
    /// An archive from the network was unpacked: what it held is unknown.
    fn extracted_download(&self) -> bool;
    /// Record whether an archive from the network was unpacked.
    fn set_extracted_download(&mut self, extracted: bool);

    /// Record that the command word `name` now runs `words` (`None`: unknown).
    fn alias(&mut self, name: &str, words: Option<Vec<String>>);
    /// Remember a value for a variable (`None`: unknown). Values accumulate.
    fn set_var(&mut self, name: &str, value: Option<String>);
    /// Mark a variable as holding what `taint` describes (`read l < .env`).
    fn taint_var(&mut self, name: &str, taint: Taint);
    /// Give a variable exactly these values (a `read` from a known line).
    fn overwrite_var(&mut self, name: &str, values: Vec<String>);

    /// Parse and walk a script (`bash -c`, `eval`, a heredoc fed to a shell, a written file).
    fn run_script(&mut self, src: &str, input: &Input) -> Output;
    /// Run a string as shell code; code downloaded or only known at run time is denied.
    fn run_code(&mut self, code: &Arg, stdin: &Input, shown: &str) -> Output;
    /// Run `bash -c CODE NAME ARGS…`: the code sees NAME as `$0` and ARGS as `$1`….
    fn run_code_with_args(
        &mut self,
        code: &Arg,
        stdin: &Input,
        shown: &str,
        zero: &Arg,
        args: &[Arg],
    ) -> Output;
    /// Resolve wrappers of an argument vector, record it and judge it.
    fn run_argv(&mut self, argv: Vec<Arg>, stdin: &Input) -> Output;
    /// Walk the code in an array subscript (`a[$(cmd)]=1`), which bash evaluates.
    fn run_subscript(&mut self, text: &str);
}

impl dyn Effects + '_ {
    /// Record a finding of `family` with its human sentence.
    pub(crate) fn deny(&mut self, family: Family, reason: impl Into<String>) {
        self.record_denial(family, reason.into());
    }
}
