//! The walk over the syntax tree: every command the script can run, in order, with its words
//! normalised (quote removal, `$'…'`, variables assigned earlier, static substitutions, brace
//! expansion, field splitting) and its standard input traced (pipes, heredocs, here-strings,
//! redirects). Each command is resolved through wrappers and handed to the rules, which act
//! on the walk through its [`Effects`] implementation.
//!
//! Bounds: nesting depth, number of commands and number of expansion alternatives are capped;
//! past a cap the script is denied as `unparseable` rather than analysed partially.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use brush_parser::ast::{self, Program};
use brush_parser::word::{
    BraceExpressionMember, BraceExpressionOrText, Parameter, ParameterExpr, ParameterTransformOp,
    SpecialParameter, TildeExpr, WordPiece, WordPieceWithSource,
};

use super::command::{Wrap, changes_root, is_privilege, program_name, strip_wrapper};
use super::effects::{Cwd, Effects};
use super::normalize::{
    Arg, Input, Output, Taint, decode_ansi_c, display_argv, is_secret_name, shorten, stream_input,
};
use super::parse;
use super::rules;
use super::{Family, Finding};

/// Deepest nesting of compound commands and nested scripts the walk follows.
const MAX_DEPTH: usize = 48;
/// Most simple commands one script may contain (after unrolling nested scripts).
const MAX_COMMANDS: usize = 4000;
/// Most alternatives one word or one command line expands to.
const MAX_ALTERNATIVES: usize = 16;
/// Most values remembered for one variable.
const MAX_VALUES: usize = 8;
/// Most wrappers peeled off one command.
const MAX_WRAPPERS: usize = 16;
/// Most bytes of code parsed for one script, nested scripts included (`eval $x` repeated).
const MAX_PARSED_BYTES: usize = 2 * 1024 * 1024;

/// The result of walking one script.
pub(crate) struct WalkResult {
    pub(crate) findings: Vec<Finding>,
    pub(crate) normalized: String,
}

/// Walk a whole script.
pub(crate) fn analyse(script: &str) -> WalkResult {
    let mut walker = Walker::default();
    walker.run_script(script, &Input::Inherited);
    let normalized = if walker.normalized.is_empty() {
        shorten(script.trim())
    } else {
        walker.normalized.join("; ")
    };
    WalkResult {
        findings: walker.findings,
        normalized,
    }
}

#[derive(Debug, Clone, Default)]
struct Var {
    values: Vec<String>,
    /// Array values, element by element.
    arrays: Vec<Vec<String>>,
    /// Some assignment's value is only known at run time.
    unknown: bool,
    /// What the assigned values brought in (`for l in $(cat .env)`).
    taint: Taint,
}

/// One alternative value of a word piece.
#[derive(Debug, Clone, Default)]
struct PieceVal {
    text: String,
    dynamic: bool,
    taint: Taint,
    /// Unquoted expansion: undergoes field splitting.
    split: bool,
    /// `"${a[@]}"`: one field per element even when quoted.
    force_split: bool,
}

/// Fields being built from the pieces of one word.
#[derive(Debug, Clone, Default)]
struct Fields {
    done: Vec<Arg>,
    cur: Arg,
    started: bool,
}

impl Fields {
    fn finish(&mut self) {
        if self.started {
            self.done.push(std::mem::take(&mut self.cur));
            self.started = false;
        }
    }
    /// Append one piece value; `split`: the word undergoes field splitting at all.
    fn push(&mut self, v: &PieceVal, split: bool, separators: &[char]) {
        let splits = v.split && split;
        self.cur.dynamic |= v.dynamic;
        self.cur.taint.merge(v.taint);
        if splits && v.text.contains(separators) {
            let (dynamic, taint) = (v.dynamic, v.taint);
            for (k, part) in v.text.split(separators).enumerate() {
                if k > 0 {
                    self.finish();
                }
                if !part.is_empty() {
                    self.cur.text.push_str(part);
                    self.cur.dynamic |= dynamic;
                    self.cur.taint.merge(taint);
                    self.started = true;
                }
            }
        } else {
            self.cur.text.push_str(&v.text);
            if !v.text.is_empty() || !splits {
                self.started = true;
            }
        }
    }
}

/// A word of a simple command, or a process substitution in its place.
enum Item<'a> {
    Word(&'a str),
    Proc(&'a ast::ProcessSubstitutionKind, &'a ast::SubshellCommand),
}

/// The parts of a simple command, in order: its assignments, its words and its redirections.
type SimpleParts<'a> = (
    Vec<&'a ast::Assignment>,
    Vec<Item<'a>>,
    Vec<&'a ast::IoRedirect>,
);

fn simple_parts(s: &ast::SimpleCommand) -> SimpleParts<'_> {
    let mut assignments = Vec::new();
    let mut words: Vec<Item<'_>> = Vec::new();
    let mut redirects = Vec::new();
    let prefix = s.prefix.iter().flat_map(|p| p.0.iter());
    for item in prefix {
        match item {
            ast::CommandPrefixOrSuffixItem::IoRedirect(r) => redirects.push(r),
            ast::CommandPrefixOrSuffixItem::AssignmentWord(a, _) => assignments.push(a),
            ast::CommandPrefixOrSuffixItem::Word(w) => words.push(Item::Word(&w.value)),
            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(k, sub) => {
                words.push(Item::Proc(k, sub))
            }
        }
    }
    if let Some(w) = &s.word_or_name {
        words.push(Item::Word(&w.value));
    }
    for item in s.suffix.iter().flat_map(|p| p.0.iter()) {
        match item {
            ast::CommandPrefixOrSuffixItem::IoRedirect(r) => redirects.push(r),
            ast::CommandPrefixOrSuffixItem::AssignmentWord(_, w)
            | ast::CommandPrefixOrSuffixItem::Word(w) => words.push(Item::Word(&w.value)),
            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(k, sub) => {
                words.push(Item::Proc(k, sub))
            }
        }
    }
    (assignments, words, redirects)
}

/// Walk state: what the script has established so far.
#[derive(Default)]
pub(crate) struct Walker {
    findings: Vec<Finding>,
    normalized: Vec<String>,
    vars: HashMap<String, Var>,
    /// Files a download was written to.
    downloaded: HashSet<String>,
    /// git remotes the script pointed at an address (`git remote add x https://…`).
    addressed_remotes: HashSet<String>,
    /// Where relative paths point.
    cwd: Cwd,
    depth: usize,
    commands: usize,
    /// Functions being defined, innermost last (fork-bomb detection).
    functions: Vec<String>,
    /// The current command runs in a pipeline or in the background.
    concurrent: bool,
    /// A cap was hit; the walk stops adding work.
    exhausted: bool,
    /// The scripts being walked, innermost last (source positions index into them).
    sources: Vec<String>,
    /// Field separators beyond the default blank, tab and newline (from `IFS=`).
    extra_separators: Vec<char>,
    /// Files the script wrote with statically known contents.
    written: HashMap<String, String>,
    /// Bytes of code parsed so far.
    parsed_bytes: usize,
    /// Functions the script defined: name and body source, re-walked at each call with the
    /// call's arguments as `$1`, `$@` (`wipe() { rm -rf "$1"; }; wipe /`).
    defined: HashMap<String, String>,
    /// The trees of the function bodies called so far, by source.
    bodies: HashMap<String, Rc<Program>>,
    /// Positional parameters of the function calls being walked, innermost last.
    positional: Vec<(Option<Arg>, Vec<Arg>)>,
    /// Functions being called, innermost last (recursion stops the re-walk).
    calling: Vec<String>,
    /// Function bodies being walked at their definition: a command named by `$1` or `"$@"`
    /// there is judged at each call instead.
    defining: usize,
    /// Names bash resolves to another program: aliases, `hash -p`, `BASH_CMDS`, copies and
    /// links of a binary. `None`: a program the guard cannot know.
    aliases: HashMap<String, Option<Vec<String>>>,
    /// An archive from the network was unpacked: what it held is unknown, and running any
    /// workspace program afterwards may run it.
    extracted_download: bool,
    /// A proxy variable was set (`http_proxy=…`): requests to the loopback host may leave.
    proxy_env: bool,
}

impl Walker {
    /// Record a finding.
    fn deny(&mut self, family: Family, reason: impl Into<String>) {
        self.findings.push(Finding {
            family,
            reason: reason.into(),
        });
    }

    fn exhaust(&mut self, reason: &str) {
        if !self.exhausted {
            self.exhausted = true;
            self.deny(Family::Unparseable, reason.to_owned());
        }
    }

    /// Parse and walk a script (the top level, `bash -c`, `eval`, a heredoc fed to a shell, …).
    fn run_script(&mut self, src: &str, input: &Input) -> Output {
        self.run_parsed(src, input, false)
    }

    /// [`Walker::run_script`]; `body`: the script is the body of a function the script
    /// defined, parsed once per walk however often it is called.
    fn run_parsed(&mut self, src: &str, input: &Input, body: bool) -> Output {
        if self.exhausted {
            return Output::unknown();
        }
        if self.depth >= MAX_DEPTH {
            self.exhaust(
                "The script nests shells and substitutions deeper than the guard analyses.",
            );
            return Output::unknown();
        }
        self.parsed_bytes += src.len();
        if self.parsed_bytes > MAX_PARSED_BYTES {
            self.exhaust("The script expands to more code than the guard analyses.");
            return Output::unknown();
        }
        let parsed = if body {
            self.parse_body(src)
        } else {
            parse::parse_script(src).map(Rc::new)
        };
        match parsed {
            Ok(program) => {
                self.depth += 1;
                self.sources.push(src.to_owned());
                let mut out = Output::text(String::new());
                for list in &program.complete_commands {
                    let o = self.walk_list(list, input);
                    out = out.then(&o);
                }
                self.sources.pop();
                self.depth -= 1;
                out
            }
            Err(failure) => {
                let shown = shorten(src.trim());
                self.deny(Family::Unparseable, failure.sentence(&shown));
                Output::unknown()
            }
        }
    }

    /// The tree of a function body, parsed at its first call.
    fn parse_body(&mut self, src: &str) -> Result<Rc<Program>, parse::ParseFailure> {
        if let Some(program) = self.bodies.get(src) {
            return Ok(Rc::clone(program));
        }
        let program = Rc::new(parse::parse_script(src)?);
        if self.bodies.len() < 64 {
            self.bodies.insert(src.to_owned(), Rc::clone(&program));
        }
        Ok(program)
    }

    /// A loop body: walked again when it defined a function, since a later iteration can
    /// call what an earlier one defined.
    fn walk_loop_body(&mut self, list: &ast::CompoundList, input: &Input) -> Output {
        let before = self.defined.clone();
        let out = self.walk_list(list, input);
        if self.defined != before {
            return out.then(&self.walk_list(list, input));
        }
        out
    }

    fn walk_list(&mut self, list: &ast::CompoundList, input: &Input) -> Output {
        let mut out = Output::text(String::new());
        for ast::CompoundListItem(and_or, sep) in &list.0 {
            let background = matches!(sep, ast::SeparatorOperator::Async);
            let o = self.walk_and_or(and_or, input, background);
            out = out.then(&o);
        }
        out
    }

    fn walk_and_or(&mut self, list: &ast::AndOrList, input: &Input, background: bool) -> Output {
        let mut out = self.walk_pipeline(&list.first, input, background);
        for next in &list.additional {
            let p = match next {
                ast::AndOr::And(p) | ast::AndOr::Or(p) => p,
            };
            let o = self.walk_pipeline(p, input, background);
            out = out.then(&o);
        }
        out
    }

    fn walk_pipeline(&mut self, p: &ast::Pipeline, input: &Input, background: bool) -> Output {
        let saved = self.concurrent;
        self.concurrent = saved || background || p.seq.len() > 1;
        let mut stdin = input.clone();
        let mut out = Output::unknown();
        let mut previous = 0..0;
        for cmd in &p.seq {
            let start = self.findings.len();
            out = self.walk_command(cmd, &stdin);
            // `env | grep PROXY`, `env | wc -l`: a filtered view of the environment is not a
            // dump of it.
            if narrows(cmd) {
                let dumped = previous.clone();
                let mut k = 0;
                self.findings.retain(|f| {
                    let keep = !(dumped.contains(&k) && f.family == Family::EnvDump);
                    k += 1;
                    keep
                });
            }
            previous = start..self.findings.len();
            stdin = stream_input(&out);
        }
        self.concurrent = saved;
        out
    }

    fn walk_command(&mut self, cmd: &ast::Command, input: &Input) -> Output {
        match cmd {
            ast::Command::Simple(s) => self.walk_simple(s, input),
            ast::Command::Compound(c, redirects) => {
                let mut stdin = input.clone();
                let mut out_file = None;
                if let Some(list) = redirects {
                    self.apply_redirects(list.0.iter(), &mut stdin, &mut out_file);
                }
                let out = self.walk_compound(c, &stdin);
                self.after_output(out, out_file)
            }
            ast::Command::Function(def) => {
                use brush_parser::ast::SourceLocation;
                let body_src = def
                    .body
                    .location()
                    .and_then(|span| {
                        self.sources
                            .last()
                            .and_then(|src| src.get(span.start.index..span.end.index))
                            .map(str::to_owned)
                    })
                    .unwrap_or_else(|| def.body.to_string());
                self.defined.insert(def.fname.value.clone(), body_src);
                self.functions.push(def.fname.value.clone());
                self.defining += 1;
                let ast::FunctionBody(body, redirects) = &def.body;
                let mut stdin = Input::Inherited;
                let mut out_file = None;
                if let Some(list) = redirects {
                    self.apply_redirects(list.0.iter(), &mut stdin, &mut out_file);
                }
                self.walk_compound(body, &stdin);
                self.defining -= 1;
                self.functions.pop();
                Output::text(String::new())
            }
            ast::Command::ExtendedTest(test, redirects) => {
                let mut stdin = input.clone();
                let mut out_file = None;
                if let Some(list) = redirects {
                    self.apply_redirects(list.0.iter(), &mut stdin, &mut out_file);
                }
                self.walk_test(&test.expr);
                Output::text(String::new())
            }
        }
    }

    fn walk_test(&mut self, expr: &ast::ExtendedTestExpr) {
        match expr {
            ast::ExtendedTestExpr::And(a, b) | ast::ExtendedTestExpr::Or(a, b) => {
                self.walk_test(a);
                self.walk_test(b);
            }
            ast::ExtendedTestExpr::Not(a) | ast::ExtendedTestExpr::Parenthesized(a) => {
                self.walk_test(a)
            }
            ast::ExtendedTestExpr::UnaryTest(_, w) => {
                for alt in self.expand_word(&w.value, false) {
                    for arg in alt {
                        self.run_subscript(&arg.text);
                    }
                }
            }
            ast::ExtendedTestExpr::BinaryTest(_, a, b) => {
                self.expand_word(&a.value, false);
                self.expand_word(&b.value, false);
            }
        }
    }

    fn walk_compound(&mut self, c: &ast::CompoundCommand, input: &Input) -> Output {
        if self.depth >= MAX_DEPTH {
            self.exhaust("The script nests compound commands deeper than the guard analyses.");
            return Output::unknown();
        }
        self.depth += 1;
        let out = match c {
            ast::CompoundCommand::BraceGroup(b) => self.walk_list(&b.list, input),
            ast::CompoundCommand::Subshell(s) => {
                let saved = self.cwd.clone();
                let out = self.walk_list(&s.list, input);
                self.cwd = saved;
                out
            }
            ast::CompoundCommand::ForClause(f) => self.walk_for(f, input),
            ast::CompoundCommand::ArithmeticForClause(f) => {
                for e in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    self.expand_word(&e.value, false);
                }
                self.walk_loop_body(&f.body.list, input)
            }
            ast::CompoundCommand::CaseClause(c) => self.walk_case(c, input),
            ast::CompoundCommand::IfClause(i) => self.walk_if(i, input),
            ast::CompoundCommand::WhileClause(w) | ast::CompoundCommand::UntilClause(w) => {
                let ast::WhileOrUntilClauseCommand(cond, body, _) = w;
                let out = self.walk_list(cond, input);
                out.then(&self.walk_loop_body(&body.list, input))
            }
            ast::CompoundCommand::Arithmetic(a) => self.walk_arithmetic(a, input),
            ast::CompoundCommand::Coprocess(c) => {
                let saved = self.concurrent;
                self.concurrent = true;
                let out = self.walk_command(&c.body, input);
                self.concurrent = saved;
                out
            }
        };
        self.depth -= 1;
        out
    }

    /// `for v in WORDS; do …; done`: the variable takes every value the words can have.
    fn walk_for(&mut self, f: &ast::ForClauseCommand, input: &Input) -> Output {
        let mut var = Var::default();
        match &f.values {
            Some(words) => {
                for w in words {
                    for alt in self.expand_word(&w.value, true) {
                        for arg in alt {
                            var.unknown |= arg.dynamic;
                            var.taint.merge(arg.taint);
                            push_value(&mut var, arg.text);
                        }
                    }
                }
            }
            None => var.unknown = true,
        }
        self.merge_var(&f.variable_name, var);
        self.walk_loop_body(&f.body.list, input)
    }

    /// `case`: the subject, every pattern and every branch.
    fn walk_case(&mut self, c: &ast::CaseClauseCommand, input: &Input) -> Output {
        self.expand_word(&c.value.value, false);
        let mut out = Output::text(String::new());
        for item in &c.cases {
            for p in &item.patterns {
                self.expand_word(&p.value, false);
            }
            if let Some(list) = &item.cmd {
                let o = self.walk_list(list, input);
                out = out.then(&o);
            }
        }
        out
    }

    /// `if`: every condition and every branch.
    fn walk_if(&mut self, i: &ast::IfClauseCommand, input: &Input) -> Output {
        let mut out = self.walk_list(&i.condition, input);
        out = out.then(&self.walk_list(&i.then, input));
        for e in i.elses.iter().flatten() {
            if let Some(cond) = &e.condition {
                out = out.then(&self.walk_list(cond, input));
            }
            out = out.then(&self.walk_list(&e.body, input));
        }
        out
    }

    /// `((…))` is arithmetic; `( (…) )` with a space, or `((…))` that is not arithmetic, is
    /// nested subshells (brush reads both as arithmetic).
    fn walk_arithmetic(&mut self, a: &ast::ArithmeticCommand, input: &Input) -> Output {
        let written_as_arithmetic = self
            .sources
            .last()
            .and_then(|src| src.get(a.loc.start.index..))
            .is_some_and(|rest| rest.starts_with("(("));
        let value = &a.expr.value;
        let arithmetic =
            value.contains(['$', '`']) || brush_parser::arithmetic::parse(value).is_ok();
        if written_as_arithmetic && arithmetic {
            self.expand_word(&a.expr.value, false);
            Output::text(String::new())
        } else {
            let saved = self.cwd.clone();
            let out = self.run_script(&a.expr.value, input);
            self.cwd = saved;
            out
        }
    }

    fn walk_simple(&mut self, s: &ast::SimpleCommand, input: &Input) -> Output {
        self.commands += 1;
        if self.commands > MAX_COMMANDS {
            self.exhaust("The script runs more commands than the guard analyses.");
            return Output::unknown();
        }
        let (assignments, words, redirects) = simple_parts(s);

        let mut stdin = input.clone();
        let mut out_file = None;
        self.apply_redirects(redirects.into_iter(), &mut stdin, &mut out_file);

        if words.is_empty() {
            for a in assignments {
                self.assign(a, true);
            }
            // `$(< file)` reads the file.
            if let Input::File(_) = stdin {
                return Output {
                    taint: Taint {
                        secret: true,
                        ..Taint::default()
                    },
                    text: None,
                    files_only: true,
                    listed: None,
                };
            }
            return Output::text(String::new());
        }
        for a in assignments {
            self.assign(a, false);
        }

        let lines = self.expand_items(words);
        let mut out: Option<Output> = None;
        for argv in lines {
            if argv.is_empty() {
                continue;
            }
            let o = self.run_argv(argv, &stdin);
            out = Some(match out {
                None => o,
                Some(prev) => merge_alternatives(prev, &o),
            });
        }
        let out = out.unwrap_or_else(|| Output::text(String::new()));
        self.after_output(out, out_file)
    }

    /// Every argument vector the words of a simple command can expand to.
    fn expand_items(&mut self, words: Vec<Item<'_>>) -> Vec<Vec<Arg>> {
        let mut lines: Vec<Vec<Arg>> = vec![Vec::new()];
        for item in words {
            let alternatives = match item {
                Item::Word(w) => self.expand_word(w, true),
                Item::Proc(kind, sub) => {
                    let inner = match kind {
                        ast::ProcessSubstitutionKind::Read => Input::Inherited,
                        ast::ProcessSubstitutionKind::Write => Input::Stream(Output::unknown()),
                    };
                    let out = self.walk_subshell(sub, &inner);
                    vec![vec![Arg {
                        text: "/dev/fd/63".to_owned(),
                        taint: out.taint,
                        proc_sub: Some(Box::new(out)),
                        ..Arg::default()
                    }]]
                }
            };
            lines = product(lines, alternatives);
        }
        lines
    }

    /// The output of a command whose stdout may be redirected to a file.
    fn after_output(&mut self, out: Output, out_file: Option<String>) -> Output {
        match out_file {
            Some(path) => {
                let shown = self.normalized.last().cloned().unwrap_or_default();
                // `cat /dev/zero > f`, `yes > f`: output without end fills the disk.
                let words: Vec<&str> = shown.split_whitespace().collect();
                let endless = match words.first().map(|w| program_name(w)) {
                    Some("yes") => true,
                    Some("cat") => words[1..]
                        .iter()
                        .any(|w| matches!(*w, "/dev/zero" | "/dev/urandom" | "/dev/random")),
                    _ => false,
                };
                if endless && !path.starts_with("/dev/") {
                    self.deny(
                        Family::HostAvailability,
                        format!(
                            "`{shown}` writes without end into `{path}` until the disk is full."
                        ),
                    );
                }
                rules::files::on_write(
                    self,
                    &path,
                    out.text.as_deref(),
                    out.taint.download,
                    &shown,
                );
                let file = rules::target::plain_path(&path);
                if out.taint.download {
                    self.downloaded.insert(file.clone());
                }
                if let Some(text) = &out.text
                    && self.written.len() < 64
                {
                    self.written.insert(file, text.clone());
                }
                Output::text(String::new())
            }
            None => out,
        }
    }

    fn walk_subshell(&mut self, sub: &ast::SubshellCommand, input: &Input) -> Output {
        let saved = self.cwd.clone();
        let out = self.walk_compound_list_nested(&sub.list, input);
        self.cwd = saved;
        out
    }

    fn walk_compound_list_nested(&mut self, list: &ast::CompoundList, input: &Input) -> Output {
        if self.depth >= MAX_DEPTH {
            self.exhaust("The script nests substitutions deeper than the guard analyses.");
            return Output::unknown();
        }
        self.depth += 1;
        let out = self.walk_list(list, input);
        self.depth -= 1;
        out
    }

    fn apply_redirects<'a>(
        &mut self,
        redirects: impl Iterator<Item = &'a ast::IoRedirect>,
        stdin: &mut Input,
        out_file: &mut Option<String>,
    ) {
        for r in redirects {
            match r {
                ast::IoRedirect::File(fd, kind, target) => {
                    let path = match target {
                        ast::IoFileRedirectTarget::Filename(w)
                        | ast::IoFileRedirectTarget::Duplicate(w) => {
                            let arg = self.expand_single(&w.value);
                            arg.text
                        }
                        ast::IoFileRedirectTarget::Fd(_) => continue,
                        ast::IoFileRedirectTarget::ProcessSubstitution(pk, sub) => {
                            let inner = match pk {
                                ast::ProcessSubstitutionKind::Read => Input::Inherited,
                                ast::ProcessSubstitutionKind::Write => {
                                    Input::Stream(Output::unknown())
                                }
                            };
                            let out = self.walk_subshell(sub, &inner);
                            if matches!(kind, ast::IoFileRedirectKind::Read) && fd.unwrap_or(0) == 0
                            {
                                *stdin = stream_input(&out);
                            }
                            continue;
                        }
                    };
                    let reads = matches!(
                        kind,
                        ast::IoFileRedirectKind::Read | ast::IoFileRedirectKind::ReadAndWrite
                    );
                    let writes = !matches!(
                        kind,
                        ast::IoFileRedirectKind::Read | ast::IoFileRedirectKind::DuplicateInput
                    );
                    let truncates = matches!(
                        kind,
                        ast::IoFileRedirectKind::Write | ast::IoFileRedirectKind::Clobber
                    );
                    rules::check_redirect(self, &path, reads, writes, truncates);
                    if reads && fd.unwrap_or(0) == 0 {
                        *stdin = Input::File(path.clone());
                    }
                    if writes
                        && fd.unwrap_or(1) == 1
                        && !matches!(kind, ast::IoFileRedirectKind::DuplicateOutput)
                    {
                        *out_file = Some(path);
                    }
                }
                ast::IoRedirect::OutputAndError(w, append) => {
                    let arg = self.expand_single(&w.value);
                    rules::check_redirect(self, &arg.text, false, true, !append);
                    *out_file = Some(arg.text);
                }
                ast::IoRedirect::HereDocument(fd, doc) => {
                    let body = if doc.requires_expansion {
                        self.expand_heredoc(&doc.doc.value)
                    } else {
                        Arg::literal(doc.doc.value.clone())
                    };
                    if fd.unwrap_or(0) == 0 {
                        *stdin = text_input(body);
                    }
                }
                ast::IoRedirect::HereString(fd, w) => {
                    let mut arg = self.expand_single(&w.value);
                    arg.text.push('\n');
                    if fd.unwrap_or(0) == 0 {
                        *stdin = text_input(arg);
                    }
                }
            }
        }
    }

    fn assign(&mut self, a: &ast::Assignment, permanent: bool) {
        let name = match &a.name {
            ast::AssignmentName::VariableName(n) | ast::AssignmentName::ArrayElementName(n, _) => n,
        };
        if let ast::AssignmentName::ArrayElementName(_, index) = &a.name {
            self.run_subscript(&format!("[{index}]"));
        }
        if name.to_ascii_lowercase().ends_with("_proxy") {
            self.proxy_env = true;
        }
        let var = self.assigned_value(&a.value);
        if permanent && name == "IFS" {
            for v in &var.values {
                self.extra_separators
                    .extend(v.chars().filter(|c| !c.is_alphanumeric()));
            }
            self.extra_separators.sort_unstable();
            self.extra_separators.dedup();
        }
        // `BASH_CMDS[ls]=/bin/rm`: the hash table now maps the name to that program.
        if name == "BASH_CMDS"
            && let ast::AssignmentName::ArrayElementName(_, index) = &a.name
        {
            let target = var
                .values
                .first()
                .filter(|_| !var.unknown)
                .map(|v| vec![program_name(v).to_owned()]);
            self.alias(index, target);
        }
        self.run_variable_code(name, &var);
        if !permanent {
            return;
        }
        if a.append {
            let old = self.vars.get(name).cloned().unwrap_or_default();
            let mut taint = old.taint;
            taint.merge(var.taint);
            let mut joined = Var {
                arrays: old.arrays.clone(),
                values: Vec::new(),
                unknown: old.unknown || var.unknown,
                taint,
            };
            let olds = if old.values.is_empty() {
                vec![String::new()]
            } else {
                old.values
            };
            for o in &olds {
                for v in &var.values {
                    push_value(&mut joined, format!("{o}{v}"));
                }
            }
            self.vars.insert(name.clone(), joined);
        } else {
            self.merge_var(name, var);
        }
    }

    /// The values an assignment gives (every alternative expansion; an array's elements).
    fn assigned_value(&mut self, value: &ast::AssignmentValue) -> Var {
        let mut var = Var::default();
        match value {
            ast::AssignmentValue::Scalar(w) => {
                for alt in self.expand_word(&w.value, false) {
                    let arg = join_fields(alt);
                    var.unknown |= arg.dynamic;
                    var.taint.merge(arg.taint);
                    push_value(&mut var, arg.text);
                }
            }
            ast::AssignmentValue::Array(items) => {
                let mut elements = Vec::new();
                for (_, w) in items {
                    let alts = self.expand_word(&w.value, true);
                    for (k, alt) in alts.into_iter().enumerate() {
                        for arg in alt {
                            var.unknown |= arg.dynamic;
                            var.taint.merge(arg.taint);
                            if k == 0 {
                                elements.push(arg.text.clone());
                            }
                            push_value(&mut var, arg.text);
                        }
                    }
                }
                var.arrays.push(elements);
            }
        }
        var
    }

    /// Variables whose value runs: `PS4='$(…)'`, `BASH_ENV=…` (prompts are expanded and
    /// start-up files sourced), `GIT_SSH_COMMAND='…' git fetch` (a command line programs run).
    fn run_variable_code(&mut self, name: &str, var: &Var) {
        if rules::carried::expands_as_prompt(name) {
            for v in var.values.clone() {
                self.run_script(&format!(": {v}"), &Input::Inherited);
            }
        }
        if rules::carried::runs_as_command(name) && !var.unknown {
            for v in var.values.clone() {
                let shown = shorten(&format!("{name}={v}"));
                let code = v.trim_start_matches('|').to_owned();
                self.run_code(&Arg::literal(code), &Input::Inherited, &shown);
            }
        }
    }

    /// Remember a value for a variable. Values accumulate: a later use may see any value
    /// assigned earlier on some path, so every one of them is judged.
    /// Mark a variable as holding what `taint` describes (`read l < .env`).
    fn taint_var(&mut self, name: &str, taint: Taint) {
        let entry = self.vars.entry(name.to_owned()).or_default();
        entry.unknown = true;
        entry.taint.merge(taint);
    }

    /// Give a variable exactly this value (a `read` from a known line).
    fn overwrite_var(&mut self, name: &str, values: Vec<String>) {
        let mut var = Var::default();
        for value in values {
            push_value(&mut var, value);
        }
        self.vars.insert(name.to_owned(), var);
    }

    fn set_var(&mut self, name: &str, value: Option<String>) {
        let mut var = Var::default();
        match value {
            Some(v) => push_value(&mut var, v),
            None => var.unknown = true,
        }
        self.merge_var(name, var);
    }

    fn merge_var(&mut self, name: &str, var: Var) {
        let entry = self.vars.entry(name.to_owned()).or_default();
        entry.unknown |= var.unknown;
        entry.taint.merge(var.taint);
        if entry.arrays.len() < MAX_VALUES {
            entry.arrays.extend(var.arrays);
        }
        for v in var.values {
            push_value(entry, v);
        }
    }

    /// Bash's own name resolution before `PATH`: aliases, the hash table (`hash -p`,
    /// `BASH_CMDS`) and copies or links of a binary, applied once to the command word.
    fn resolve_name(&self, argv: &mut Vec<Arg>) {
        let Some(head) = argv.first() else {
            return;
        };
        let key = rules::target::plain_path(&head.text);
        match self.aliases.get(&key) {
            Some(Some(words)) => {
                let mut next: Vec<Arg> = words.iter().map(Arg::literal).collect();
                next.extend(argv.drain(1..));
                *argv = next;
            }
            Some(None) => argv[0].dynamic = true,
            None => {}
        }
    }

    /// Whether `path` was downloaded, or lies in a directory that was (a cloned repository).
    fn is_downloaded(&self, path: &str) -> bool {
        self.downloaded.contains(path)
            || self.downloaded.iter().any(|d| {
                path.strip_prefix(d.as_str())
                    .is_some_and(|r| r.starts_with('/'))
            })
    }

    /// Record that the command word `name` now runs `words` (`None`: unknown).
    fn alias(&mut self, name: &str, words: Option<Vec<String>>) {
        if self.aliases.len() < 64 {
            self.aliases.insert(rules::target::plain_path(name), words);
        }
    }

    /// Code in an array subscript runs when bash evaluates it (`a[$(cmd)]=1`, `test -v`,
    /// `printf -v`, `declare`, `let`): walk it.
    fn run_subscript(&mut self, text: &str) {
        if let Some(code) = subscript_code(text) {
            self.run_script(&format!(": {code}"), &Input::Inherited);
        }
    }

    /// Resolve wrappers, record the normalised command and judge it.
    fn run_argv(&mut self, mut argv: Vec<Arg>, stdin: &Input) -> Output {
        self.resolve_name(&mut argv);
        let shown = display_argv(&argv);
        self.normalized.push(shown.clone());
        self.run_exported_functions(&argv);
        let unwrapped = match self.unwrap(&mut argv, stdin) {
            Unwrapped::Handled(out) => return out,
            Unwrapped::Same => false,
            Unwrapped::Changed => true,
        };
        self.set_positional(&argv);
        if let Some(out) = self.call_defined(&argv, stdin) {
            return out;
        }
        let shown = if unwrapped {
            display_argv(&argv)
        } else {
            shown
        };
        rules::judge(self, &argv, stdin, &shown)
    }

    /// Run `bash -c CODE NAME ARGS…`: the code sees NAME as `$0` and ARGS as `$1`….
    fn run_code_with_args(
        &mut self,
        code: &Arg,
        stdin: &Input,
        shown: &str,
        zero: &Arg,
        args: &[Arg],
    ) -> Output {
        self.positional.push((Some(zero.clone()), args.to_vec()));
        let out = self.run_code(code, stdin, shown);
        self.positional.pop();
        out
    }

    /// Run a string as shell code: a `bash -c` argument, an `eval` line, a trap.
    fn run_code(&mut self, code: &Arg, stdin: &Input, shown: &str) -> Output {
        if code.taint.download {
            self.deny(
                Family::RemoteExec,
                format!("`{shown}` runs code downloaded at run time."),
            );
            Output::unknown()
        } else if code.dynamic {
            self.deny(
                Family::DynamicCommand,
                format!("`{shown}` runs code that is only known at run time."),
            );
            Output::unknown()
        } else {
            self.run_script(&code.text, stdin)
        }
    }

    /// Expand a word that is not split into fields (redirect targets, here-strings).
    pub(crate) fn expand_single(&mut self, raw: &str) -> Arg {
        let alts = self.expand_word(raw, false);
        let mut arg = Arg::default();
        for (k, alt) in alts.into_iter().enumerate() {
            let joined = join_fields(alt);
            if k == 0 {
                arg = joined;
            } else {
                arg.dynamic |= joined.dynamic;
                arg.taint.merge(joined.taint);
            }
        }
        arg
    }

    fn expand_heredoc(&mut self, body: &str) -> Arg {
        match parse::parse_heredoc(body) {
            Ok(pieces) => {
                let vals = self.concat_pieces(body, &pieces, true);
                let mut arg = Arg::default();
                for (k, v) in vals.into_iter().enumerate() {
                    if k == 0 {
                        arg.text = v.text;
                    }
                    arg.dynamic |= v.dynamic;
                    arg.taint.merge(v.taint);
                }
                arg
            }
            Err(_) => Arg {
                text: body.to_owned(),
                dynamic: true,
                ..Arg::default()
            },
        }
    }

    /// Expand one word into its alternatives, each a list of fields.
    pub(crate) fn expand_word(&mut self, raw: &str, split: bool) -> Vec<Vec<Arg>> {
        let Some(raws) = brace_expand(raw) else {
            let mut alternatives = self.expand_one(raw, split);
            alternatives.truncate(MAX_ALTERNATIVES);
            return alternatives;
        };
        if split {
            // Brace expansion makes several words of one command line.
            let mut lines: Vec<Vec<Arg>> = vec![Vec::new()];
            for r in &raws {
                let alternatives = self.expand_one(r, split);
                lines = product(lines, alternatives);
            }
            return lines;
        }
        let mut out = Vec::new();
        for r in &raws {
            for alt in self.expand_one(r, split) {
                if out.len() < MAX_ALTERNATIVES {
                    out.push(alt);
                }
            }
        }
        out
    }

    fn expand_one(&mut self, raw: &str, split: bool) -> Vec<Vec<Arg>> {
        if let Some(text) = literal_word(raw) {
            return vec![vec![Arg::literal(text)]];
        }
        self.expand_pieces(raw, split)
    }

    /// [`Walker::expand_one`] through the word parser.
    fn expand_pieces(&mut self, raw: &str, split: bool) -> Vec<Vec<Arg>> {
        let pieces = match parse::parse_word(raw) {
            Ok(p) => p,
            Err(_) => {
                let dynamic = raw.contains('$') || raw.contains('`');
                if dynamic {
                    self.deny(
                        Family::Unparseable,
                        format!("The word `{}` cannot be parsed.", shorten(raw)),
                    );
                }
                return vec![vec![Arg {
                    text: raw.to_owned(),
                    dynamic,
                    ..Arg::default()
                }]];
            }
        };
        let mut separators = vec![' ', '\t', '\n'];
        separators.extend(self.extra_separators.iter().copied());
        let mut states = vec![Fields::default()];
        for p in &pieces {
            let vals = self.piece_values(raw, p, false);
            let mut next = Vec::new();
            'outer: for s in states {
                let Some((last, rest)) = vals.split_last() else {
                    continue;
                };
                for v in rest {
                    if next.len() >= MAX_ALTERNATIVES {
                        break 'outer;
                    }
                    let mut s = s.clone();
                    s.push(v, split, &separators);
                    next.push(s);
                }
                if next.len() >= MAX_ALTERNATIVES {
                    break 'outer;
                }
                let mut s = s;
                s.push(last, split, &separators);
                next.push(s);
            }
            states = next;
        }
        states
            .into_iter()
            .map(|mut s| {
                s.finish();
                s.done
            })
            .collect()
    }

    /// All alternatives of a sequence of pieces concatenated (no field splitting).
    fn concat_pieces(
        &mut self,
        raw: &str,
        pieces: &[WordPieceWithSource],
        quoted: bool,
    ) -> Vec<PieceVal> {
        let mut acc = vec![PieceVal::default()];
        for p in pieces {
            let vals = self.piece_values(raw, p, quoted);
            let mut next = Vec::new();
            'outer: for a in acc {
                let Some((last, rest)) = vals.split_last() else {
                    continue;
                };
                for v in rest {
                    if next.len() >= MAX_ALTERNATIVES {
                        break 'outer;
                    }
                    next.push(concat_val(a.clone(), v));
                }
                if next.len() >= MAX_ALTERNATIVES {
                    break 'outer;
                }
                next.push(concat_val(a, last));
            }
            acc = next;
        }
        acc
    }

    fn piece_values(&mut self, raw: &str, p: &WordPieceWithSource, quoted: bool) -> Vec<PieceVal> {
        let lit = |t: String| {
            vec![PieceVal {
                text: t,
                ..PieceVal::default()
            }]
        };
        match &p.piece {
            WordPiece::Text(t) => lit(t.clone()),
            WordPiece::SingleQuotedText(t) => lit(t.clone()),
            WordPiece::AnsiCQuotedText(t) => lit(decode_ansi_c(t)),
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => {
                let mut vals = self.concat_pieces(raw, inner, true);
                for v in &mut vals {
                    v.split = v.force_split;
                }
                vals
            }
            WordPiece::TildeExpansion(t) => match t {
                TildeExpr::Home => lit("~".to_owned()),
                TildeExpr::UserHome(u) => lit(format!("~{u}")),
                TildeExpr::WorkingDir => lit(".".to_owned()),
                _ => vec![dynamic_val("~-")],
            },
            WordPiece::ParameterExpansion(expr) => {
                let source = raw.get(p.start_index..p.end_index).unwrap_or(raw);
                let mut vals = self.parameter_values(expr, source, quoted);
                for v in &mut vals {
                    v.split = !quoted || v.force_split;
                }
                vals
            }
            WordPiece::CommandSubstitution(body) => vec![self.substitute(body, quoted)],
            WordPiece::BackquotedCommandSubstitution(body) => {
                let body = unescape_backquoted(body);
                vec![self.substitute(&body, quoted)]
            }
            WordPiece::EscapeSequence(s) => {
                let rest = s.strip_prefix('\\').unwrap_or(s);
                if rest == "\n" {
                    lit(String::new())
                } else if quoted && !rest.starts_with(['$', '`', '"', '\\']) {
                    lit(s.clone())
                } else {
                    lit(rest.to_owned())
                }
            }
            WordPiece::ArithmeticExpression(e) => {
                self.expand_word(&e.value, false);
                vec![dynamic_val("$((…))")]
            }
        }
    }

    fn substitute(&mut self, body: &str, quoted: bool) -> PieceVal {
        let saved = self.cwd.clone();
        let out = self.run_script(body, &Input::Inherited);
        self.cwd = saved;
        match out.text {
            Some(text) => PieceVal {
                text: text.trim_end_matches('\n').to_owned(),
                dynamic: false,
                taint: out.taint,
                split: !quoted,
                force_split: false,
            },
            None => PieceVal {
                text: format!("$({})", shorten(body.trim())),
                dynamic: true,
                taint: out.taint,
                split: false,
                force_split: false,
            },
        }
    }

    fn parameter_values(
        &mut self,
        expr: &ParameterExpr,
        source: &str,
        quoted: bool,
    ) -> Vec<PieceVal> {
        match expr {
            ParameterExpr::Parameter {
                parameter,
                indirect: false,
            } => self.lookup(parameter),
            ParameterExpr::UseDefaultValues {
                parameter,
                indirect: false,
                default_value,
                ..
            }
            | ParameterExpr::AssignDefaultValues {
                parameter,
                indirect: false,
                default_value,
                ..
            } => self.value_or_default(parameter, default_value.as_deref(), source, quoted),
            ParameterExpr::IndicateErrorIfNullOrUnset {
                parameter,
                indirect: false,
                ..
            } => self.lookup(parameter),
            ParameterExpr::RemoveSmallestSuffixPattern {
                parameter,
                indirect: false,
                pattern,
            }
            | ParameterExpr::RemoveLargestSuffixPattern {
                parameter,
                indirect: false,
                pattern,
            } if pattern.as_deref().is_none_or(|p| !p.contains(['$', '`'])) => {
                self.without_suffix(parameter, pattern.as_deref().unwrap_or_default())
            }
            // `${p@P}` expands the value as a prompt: command substitutions in it run.
            ParameterExpr::Transform {
                parameter,
                op: ParameterTransformOp::PromptExpand,
                ..
            } => self.prompt_expand(parameter, source),
            // A slice, case change or replacement of a value keeps what it carries
            // (`${AWS_SECRET_ACCESS_KEY:0:8}` is still a secret).
            ParameterExpr::Substring { parameter, .. }
            | ParameterExpr::Transform { parameter, .. }
            | ParameterExpr::UppercaseFirstChar { parameter, .. }
            | ParameterExpr::UppercasePattern { parameter, .. }
            | ParameterExpr::LowercaseFirstChar { parameter, .. }
            | ParameterExpr::LowercasePattern { parameter, .. }
            | ParameterExpr::ReplaceSubstring { parameter, .. }
            | ParameterExpr::RemoveSmallestPrefixPattern { parameter, .. }
            | ParameterExpr::RemoveLargestPrefixPattern { parameter, .. }
                if !source.contains("$(") && !source.contains('`') =>
            {
                let mut val = dynamic_val(source);
                for v in self.lookup(parameter) {
                    val.taint.merge(v.taint);
                }
                vec![val]
            }
            _ => {
                if source.contains("$(") || source.contains('`') {
                    self.deny(
                        Family::DynamicCommand,
                        format!(
                            "`{}` hides a command substitution inside a parameter expansion.",
                            shorten(source)
                        ),
                    );
                }
                vec![dynamic_val(source)]
            }
        }
    }

    /// `${p:-default}`, `${p:=default}`: the value when it is known, else the default word.
    fn value_or_default(
        &mut self,
        parameter: &Parameter,
        default: Option<&str>,
        source: &str,
        quoted: bool,
    ) -> Vec<PieceVal> {
        if self.is_known(parameter) {
            return self.lookup(parameter);
        }
        let default = default.unwrap_or_default().to_owned();
        match parse::parse_word(&default) {
            Ok(pieces) => self.concat_pieces(&default, &pieces, quoted),
            Err(_) => vec![dynamic_val(source)],
        }
    }

    /// `${p%suffix}`: literal suffixes only (`${HOME%/}`); a glob suffix leaves the value as is.
    fn without_suffix(&self, parameter: &Parameter, suffix: &str) -> Vec<PieceVal> {
        let mut vals = self.lookup(parameter);
        for v in &mut vals {
            if !v.dynamic
                && !suffix.contains(['*', '?', '['])
                && let Some(stripped) = v.text.strip_suffix(suffix)
            {
                v.text = stripped.to_owned();
            }
        }
        vals
    }

    /// `${p@P}` expands the value as a prompt: command substitutions in it run.
    fn prompt_expand(&mut self, parameter: &Parameter, source: &str) -> Vec<PieceVal> {
        for v in self.lookup(parameter) {
            if v.dynamic {
                self.deny(
                    Family::DynamicCommand,
                    format!(
                        "`{}` expands a value only known at run time as a prompt, which can run commands.",
                        shorten(source)
                    ),
                );
            } else if v.text.contains("$(") || v.text.contains('`') {
                self.run_script(&format!(": {}", v.text), &Input::Inherited);
            }
        }
        vec![dynamic_val(source)]
    }

    fn is_known(&self, p: &Parameter) -> bool {
        match p {
            Parameter::Named(n)
            | Parameter::NamedWithIndex { name: n, .. }
            | Parameter::NamedWithAllIndices { name: n, .. } => self
                .vars
                .get(n)
                .is_some_and(|v| !v.unknown && !v.values.is_empty()),
            _ => false,
        }
    }

    fn lookup(&self, p: &Parameter) -> Vec<PieceVal> {
        match p {
            Parameter::Named(n)
            | Parameter::NamedWithIndex { name: n, .. }
            | Parameter::NamedWithAllIndices { name: n, .. } => self.lookup_named(p, n),
            Parameter::Special(SpecialParameter::ProcessId) => vec![PieceVal {
                text: "$$".to_owned(),
                ..PieceVal::default()
            }],
            _ => self.lookup_positional(p),
        }
    }

    /// A named variable's values: what the script assigned, else what the environment holds
    /// as far as it is known (`HOME`, `PWD`, `IFS`; a secret's name taints it).
    fn lookup_named(&self, p: &Parameter, n: &str) -> Vec<PieceVal> {
        if let Some(var) = self.vars.get(n) {
            if matches!(p, Parameter::NamedWithAllIndices { .. }) && !var.arrays.is_empty() {
                let mut vals: Vec<PieceVal> = var
                    .arrays
                    .iter()
                    .map(|elements| PieceVal {
                        text: elements.join(" "),
                        force_split: true,
                        taint: var.taint,
                        ..PieceVal::default()
                    })
                    .collect();
                if var.unknown {
                    let mut v = dynamic_val(&format!("${{{n}[@]}}"));
                    v.taint = var.taint;
                    vals.push(v);
                }
                return vals;
            }
            let mut vals: Vec<PieceVal> = var
                .values
                .iter()
                .map(|v| PieceVal {
                    text: v.clone(),
                    taint: var.taint,
                    ..PieceVal::default()
                })
                .collect();
            if var.unknown || vals.is_empty() {
                let mut v = dynamic_val(&format!("${n}"));
                v.taint = var.taint;
                vals.push(v);
            }
            return vals;
        }
        match n {
            "HOME" => vec![PieceVal {
                text: "~".to_owned(),
                ..PieceVal::default()
            }],
            "PWD" => vec![PieceVal {
                text: ".".to_owned(),
                ..PieceVal::default()
            }],
            "IFS" => vec![PieceVal {
                text: " ".to_owned(),
                ..PieceVal::default()
            }],
            _ => {
                let mut v = dynamic_val(&format!("${n}"));
                v.taint.env_secret = is_secret_name(n);
                vec![v]
            }
        }
    }

    /// `$@`, `$*`, `$0`, `$1`…: what the script or function was given, when it is known.
    fn lookup_positional(&self, p: &Parameter) -> Vec<PieceVal> {
        match p {
            Parameter::Special(SpecialParameter::AllPositionalParameters { .. })
                if self
                    .positional
                    .last()
                    .is_some_and(|(_, args)| !args.iter().any(|a| a.dynamic)) =>
            {
                let args = self
                    .positional
                    .last()
                    .map(|(_, args)| args.as_slice())
                    .unwrap_or_default();
                let mut taint = Taint::default();
                for a in args {
                    taint.merge(a.taint);
                }
                let text: Vec<&str> = args.iter().map(|a| a.text.as_str()).collect();
                vec![PieceVal {
                    text: text.join(" "),
                    taint,
                    force_split: true,
                    ..PieceVal::default()
                }]
            }
            Parameter::Positional(0) | Parameter::Special(SpecialParameter::ShellName) => {
                match self.positional.last() {
                    Some((Some(a), _)) if !a.dynamic => vec![PieceVal {
                        text: a.text.clone(),
                        taint: a.taint,
                        ..PieceVal::default()
                    }],
                    _ => vec![dynamic_val("$0")],
                }
            }
            Parameter::Special(s) => vec![dynamic_val(&format!("${s}"))],
            Parameter::Positional(n) => match self.positional.last() {
                Some((_, args)) => match args.get(*n as usize - 1) {
                    Some(a) if !a.dynamic => vec![PieceVal {
                        text: a.text.clone(),
                        taint: a.taint,
                        ..PieceVal::default()
                    }],
                    Some(_) => vec![dynamic_val(&format!("${n}"))],
                    None => vec![PieceVal::default()],
                },
                None => vec![dynamic_val(&format!("${n}"))],
            },
            _ => vec![dynamic_val(&format!("${p}"))],
        }
    }
}

impl Effects for Walker {
    fn record_denial(&mut self, family: Family, reason: String) {
        Walker::deny(self, family, reason);
    }

    fn findings(&self) -> &[Finding] {
        &self.findings
    }

    fn findings_mut(&mut self) -> &mut Vec<Finding> {
        &mut self.findings
    }

    fn cwd(&self) -> &Cwd {
        &self.cwd
    }

    fn set_cwd(&mut self, cwd: Cwd) {
        self.cwd = cwd;
    }

    fn written(&self) -> &HashMap<String, String> {
        &self.written
    }

    fn written_mut(&mut self) -> &mut HashMap<String, String> {
        &mut self.written
    }

    fn downloaded(&self) -> &HashSet<String> {
        &self.downloaded
    }

    fn downloaded_mut(&mut self) -> &mut HashSet<String> {
        &mut self.downloaded
    }

    fn is_downloaded(&self, path: &str) -> bool {
        Walker::is_downloaded(self, path)
    }

    fn addressed_remotes(&self) -> &HashSet<String> {
        &self.addressed_remotes
    }

    fn addressed_remotes_mut(&mut self) -> &mut HashSet<String> {
        &mut self.addressed_remotes
    }

    fn concurrent(&self) -> bool {
        self.concurrent
    }

    fn proxy_env(&self) -> bool {
        self.proxy_env
    }

    fn extracted_download(&self) -> bool {
        self.extracted_download
    }

    fn set_extracted_download(&mut self, extracted: bool) {
        self.extracted_download = extracted;
    }

    fn alias(&mut self, name: &str, words: Option<Vec<String>>) {
        Walker::alias(self, name, words);
    }

    fn set_var(&mut self, name: &str, value: Option<String>) {
        Walker::set_var(self, name, value);
    }

    fn taint_var(&mut self, name: &str, taint: Taint) {
        Walker::taint_var(self, name, taint);
    }

    fn overwrite_var(&mut self, name: &str, values: Vec<String>) {
        Walker::overwrite_var(self, name, values);
    }

    fn run_script(&mut self, src: &str, input: &Input) -> Output {
        Walker::run_script(self, src, input)
    }

    fn run_code(&mut self, code: &Arg, stdin: &Input, shown: &str) -> Output {
        Walker::run_code(self, code, stdin, shown)
    }

    fn run_code_with_args(
        &mut self,
        code: &Arg,
        stdin: &Input,
        shown: &str,
        zero: &Arg,
        args: &[Arg],
    ) -> Output {
        Walker::run_code_with_args(self, code, stdin, shown, zero, args)
    }

    fn run_argv(&mut self, argv: Vec<Arg>, stdin: &Input) -> Output {
        Walker::run_argv(self, argv, stdin)
    }

    fn run_subscript(&mut self, text: &str) {
        Walker::run_subscript(self, text);
    }
}

/// What stripping the wrappers off a command line left to do.
enum Unwrapped {
    /// The command was fully handled on the way.
    Handled(Output),
    /// No wrapper: the command line is as it was.
    Same,
    /// Wrappers were stripped: the command line is what they run.
    Changed,
}

/// A word that is exactly a positional parameter: `$1`, `$@`, `${2}`, `$*`.
/// A pipeline stage that shows only part of its input: `grep PATTERN` (not `-v`, not a pattern
/// matching every line) or a count.
fn narrows(cmd: &ast::Command) -> bool {
    let ast::Command::Simple(s) = cmd else {
        return false;
    };
    let Some(name) = s.word_or_name.as_ref().map(|w| w.value.as_str()) else {
        return false;
    };
    let words: Vec<String> = s
        .suffix
        .iter()
        .flat_map(|p| p.0.iter())
        .filter_map(|i| match i {
            ast::CommandPrefixOrSuffixItem::Word(w) => {
                Some(w.value.trim_matches(['\'', '"']).to_owned())
            }
            _ => None,
        })
        .collect();
    match name {
        "wc" => true,
        "grep" | "egrep" | "fgrep" | "rg" => {
            // `-v` shows the rest, `-c` is read as a probe for the names it counts.
            let inverted = words.iter().any(|w| {
                w.starts_with('-') && !w.starts_with("--") && (w.contains('v') || w.contains('c'))
                    || w == "--invert-match"
                    || w == "--count"
            });
            let pattern = words.iter().find(|w| !w.starts_with('-'));
            !inverted
                && pattern.is_some_and(|p| {
                    let lower = p.to_ascii_lowercase();
                    // A pattern naming secrets selects exactly the secrets.
                    let secretish = [
                        "key",
                        "token",
                        "secret",
                        "pass",
                        "auth",
                        "cred",
                        "aws",
                        "api",
                        "priv",
                        "session",
                        "cookie",
                        "gh",
                        "git",
                        "npm",
                        "pat",
                        "azure",
                        "gcp",
                        "google",
                        "openai",
                        "anthropic",
                        "slack",
                        "stripe",
                        "db",
                        "database",
                        "url",
                        "dsn",
                    ]
                    .iter()
                    .any(|s| lower.contains(s));
                    !secretish && p.chars().filter(|c| c.is_ascii_alphanumeric()).count() >= 3
                })
        }
        _ => false,
    }
}

/// The inside of an array subscript that holds a command substitution.
pub(crate) fn subscript_code(text: &str) -> Option<&str> {
    let open = text.find('[')?;
    let close = text.rfind(']')?;
    let inner = text.get(open + 1..close)?;
    (inner.contains("$(") || inner.contains('`')).then_some(inner)
}

fn names_positional(text: &str) -> bool {
    let inner = text
        .strip_prefix("${")
        .and_then(|t| t.strip_suffix('}'))
        .or_else(|| text.strip_prefix('$'));
    inner.is_some_and(|t| {
        t == "@" || t == "*" || (!t.is_empty() && t.chars().all(|c| c.is_ascii_digit()))
    })
}

/// The text of a word bash reads as one literal field, quotes removed: plain text, `'…'` and
/// `"…"` runs with no expansion, escape or unquoted tilde (`cargo`, `'*.rs'`, `--name="a b"`;
/// brace expansion is applied before). The word parser gives such a word as literal pieces
/// only, which make exactly this one field; a quoted word it would refuse as too deep is left
/// to it.
fn literal_word(raw: &str) -> Option<Cow<'_, str>> {
    if raw.is_empty() || raw.contains(['$', '`', '\\']) {
        return None;
    }
    if !raw.contains(['\'', '"', '~']) {
        // Plain text: one text piece, and the word itself even past the parser's bounds.
        return Some(Cow::Borrowed(raw));
    }
    if parse::check_bounds(raw).is_err() {
        return None;
    }
    let mut text = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(c) = rest.chars().next() {
        match c {
            '\'' | '"' => {
                let inner = &rest[1..];
                let end = inner.find(c)?;
                text.push_str(&inner[..end]);
                rest = &inner[end + 1..];
            }
            '~' => return None,
            _ => {
                let end = rest.find(['\'', '"', '~']).unwrap_or(rest.len());
                text.push_str(&rest[..end]);
                rest = &rest[end..];
            }
        }
    }
    Some(Cow::Owned(text))
}

/// `a` followed by the piece value `v`.
fn concat_val(mut a: PieceVal, v: &PieceVal) -> PieceVal {
    a.text.push_str(&v.text);
    a.dynamic |= v.dynamic;
    a.taint.merge(v.taint);
    a.split |= v.split;
    a.force_split |= v.force_split;
    a
}

fn dynamic_val(text: &str) -> PieceVal {
    PieceVal {
        text: text.to_owned(),
        dynamic: true,
        ..PieceVal::default()
    }
}

fn push_value(var: &mut Var, value: String) {
    if var.values.contains(&value) {
        return;
    }
    if var.values.len() >= MAX_VALUES {
        var.unknown = true;
    } else {
        var.values.push(value);
    }
}

fn join_fields(fields: Vec<Arg>) -> Arg {
    let mut arg = Arg::default();
    for (k, f) in fields.into_iter().enumerate() {
        if k > 0 {
            arg.text.push(' ');
        }
        arg.text.push_str(&f.text);
        arg.dynamic |= f.dynamic;
        arg.taint.merge(f.taint);
        if f.proc_sub.is_some() {
            arg.proc_sub = f.proc_sub;
        }
    }
    arg
}

fn text_input(arg: Arg) -> Input {
    if arg.dynamic || arg.taint != Taint::default() {
        Input::Stream(Output {
            taint: arg.taint,
            text: None,
            files_only: false,
            listed: None,
        })
    } else {
        Input::Static(arg.text)
    }
}

fn merge_alternatives(a: Output, b: &Output) -> Output {
    let mut out = a;
    out.taint.merge(b.taint);
    if out.text != b.text {
        out.text = None;
    }
    out.files_only &= b.files_only;
    out
}

/// Every line followed by every alternative, in order, capped. The last use of a line or of
/// an alternative moves it instead of copying it; one alternative extends the lines in place.
fn product(mut lines: Vec<Vec<Arg>>, mut alternatives: Vec<Vec<Arg>>) -> Vec<Vec<Arg>> {
    if let [alt] = alternatives.as_mut_slice()
        && lines.len() <= MAX_ALTERNATIVES
    {
        let count = lines.len();
        for (i, line) in lines.iter_mut().enumerate() {
            if i + 1 < count {
                line.extend(alt.iter().cloned());
            } else if line.is_empty() {
                *line = std::mem::take(alt);
            } else {
                line.append(alt);
            }
        }
        return lines;
    }
    let mut out = Vec::new();
    let count = lines.len();
    let n = alternatives.len();
    for (i, line) in lines.into_iter().enumerate() {
        let mut line = Some(line);
        for (k, alt) in alternatives.iter_mut().enumerate() {
            if out.len() >= MAX_ALTERNATIVES {
                return out;
            }
            let mut l = if k + 1 == n {
                line.take().unwrap_or_default()
            } else {
                line.clone().unwrap_or_default()
            };
            let alt = if i + 1 == count {
                std::mem::take(alt)
            } else {
                alt.clone()
            };
            if l.is_empty() {
                l = alt;
            } else {
                l.extend(alt);
            }
            out.push(l);
        }
    }
    out
}

fn unescape_backquoted(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\'
            && let Some(&n) = chars.peek()
            && matches!(n, '$' | '`' | '\\')
        {
            out.push(n);
            chars.next();
            continue;
        }
        out.push(c);
    }
    out
}

/// Bash brace expansion (`{a,b}`, `{1..3}`) of an unquoted word, capped; `None` when the
/// word stays as it is.
fn brace_expand(raw: &str) -> Option<Vec<String>> {
    if !raw.contains('{') || !(raw.contains(',') || raw.contains("..")) || raw.contains("${") {
        return None;
    }
    match brush_parser::word::parse_brace_expansions(raw, &parse::options()) {
        Ok(Some(parts)) => {
            let mut out = expand_brace_parts(&parts);
            out.truncate(MAX_ALTERNATIVES);
            (!out.is_empty()).then_some(out)
        }
        _ => None,
    }
}

fn expand_brace_parts(parts: &[BraceExpressionOrText]) -> Vec<String> {
    let mut acc = vec![String::new()];
    for part in parts {
        let options: Vec<String> = match part {
            BraceExpressionOrText::Text(t) => vec![t.clone()],
            BraceExpressionOrText::Expr(members) => {
                let mut opts = Vec::new();
                for m in members {
                    match m {
                        BraceExpressionMember::Child(c) => opts.extend(expand_brace_parts(c)),
                        BraceExpressionMember::NumberSequence {
                            start,
                            end,
                            increment,
                        } => {
                            let step = increment.unsigned_abs().max(1) as usize;
                            let (lo, hi) = (*start.min(end), *start.max(end));
                            for n in (lo..=hi).step_by(step).take(MAX_ALTERNATIVES) {
                                opts.push(n.to_string());
                            }
                        }
                        BraceExpressionMember::CharSequence {
                            start,
                            end,
                            increment,
                        } => {
                            let step = increment.unsigned_abs().max(1) as usize;
                            let (lo, hi) = (*start.min(end), *start.max(end));
                            for c in (lo..=hi).step_by(step).take(MAX_ALTERNATIVES) {
                                opts.push(c.to_string());
                            }
                        }
                    }
                }
                opts
            }
        };
        let mut next = Vec::new();
        for a in &acc {
            for o in &options {
                if next.len() < MAX_ALTERNATIVES {
                    next.push(format!("{a}{o}"));
                }
            }
        }
        acc = next;
    }
    acc
}

/// The steps of `run_argv`: exported functions, wrappers, positional parameters and the
/// script's own functions.
impl Walker {
    /// `env 'BASH_FUNC_ls%%=() { …; }' bash`: an exported function the next bash defines.
    fn run_exported_functions(&mut self, argv: &[Arg]) {
        for a in argv {
            if let Some((name, body)) = a.text.split_once('=')
                && name.starts_with("BASH_FUNC_")
            {
                let body = body.trim_start().trim_start_matches("()").to_owned();
                self.run_code(
                    &Arg {
                        text: body,
                        ..a.clone()
                    },
                    &Input::Inherited,
                    &a.text,
                );
            }
        }
    }

    /// Strip wrappers (`sudo`, `env`, `timeout`, …) off `argv`, judging each.
    fn unwrap(&mut self, argv: &mut Vec<Arg>, stdin: &Input) -> Unwrapped {
        for round in 0..=MAX_WRAPPERS {
            if round == MAX_WRAPPERS {
                let shown = display_argv(argv);
                self.deny(
                    Family::Unparseable,
                    format!("`{shown}` nests more wrappers than the guard analyses."),
                );
                return Unwrapped::Handled(Output::unknown());
            }
            if argv.is_empty() {
                return Unwrapped::Handled(Output::text(String::new()));
            }
            if let Some(out) = self.unknown_head(argv, stdin) {
                return Unwrapped::Handled(out);
            }
            let name = program_name(&argv[0].text).to_owned();
            if self.functions.last() == Some(&name) && self.concurrent {
                let shown = display_argv(argv);
                self.deny(
                    Family::Destruction,
                    format!("`{shown}` is a fork bomb: the function `{name}` spawns copies of itself without end."),
                );
            }
            let wrap = strip_wrapper(&name, &argv[1..]);
            self.judge_launcher(&name, argv, &wrap);
            match wrap {
                Wrap::No if round == 0 => return Unwrapped::Same,
                Wrap::No => return Unwrapped::Changed,
                Wrap::Inspect => return Unwrapped::Handled(Output::unknown()),
                Wrap::NoCommand => {
                    return Unwrapped::Handled(rules::wrapper_alone(self, &name, argv, stdin));
                }
                Wrap::Code(codes) => {
                    let shown = display_argv(argv);
                    for code in &codes {
                        self.run_code(code, stdin, &shown);
                    }
                    return Unwrapped::Handled(Output::unknown());
                }
                Wrap::Run { start, prepend } => {
                    let mut next = prepend;
                    next.extend(argv.drain(1 + start..));
                    *argv = next;
                }
            }
        }
        Unwrapped::Changed
    }

    /// A command word only known at run time (`$cmd`, a glob): denied, `Some` when so.
    fn unknown_head(&mut self, argv: &[Arg], stdin: &Input) -> Option<Output> {
        let head = &argv[0];
        if head.dynamic && self.defining > 0 && names_positional(&head.text) {
            return Some(Output::unknown());
        }
        if head.dynamic {
            let shown = display_argv(argv);
            // `curl … | $SHELL`: an unknown program handed a download is taken for a shell.
            let fed_download = matches!(stdin, Input::Stream(o) if o.taint.download);
            if head.taint.download || fed_download {
                self.deny(
                    Family::RemoteExec,
                    format!("`{shown}` runs a command downloaded at run time."),
                );
            } else {
                self.deny(
                    Family::DynamicCommand,
                    format!("`{shown}` runs a command whose name is only known at run time."),
                );
            }
            return Some(Output::unknown());
        }
        let name = program_name(&head.text);
        if name.contains(['*', '?']) || (name.contains('[') && name != "[" && name != "[[") {
            let shown = display_argv(argv);
            self.deny(
                Family::DynamicCommand,
                format!("`{shown}` names its command with a glob, resolved only at run time."),
            );
            return Some(Output::unknown());
        }
        None
    }

    /// What a launcher itself does: raise privileges, change the root, fetch a package from
    /// an address (checked before unwrapping: `npx URL …` also wraps what the package runs).
    fn judge_launcher(&mut self, name: &str, argv: &[Arg], wrap: &Wrap) {
        let inspect = *wrap == Wrap::Inspect;
        if is_privilege(name) && name != "su" && name != "sg" && !inspect {
            let shown = display_argv(argv);
            self.deny(
                Family::Privilege,
                format!("`{shown}` runs a command with raised privileges."),
            );
        }
        if let Some(what) = changes_root(name)
            && !inspect
        {
            let shown = display_argv(argv);
            self.deny(Family::Privilege, format!("`{shown}` {what}."));
        }
        if !inspect && rules::runs_package_from_address(name, &argv[1..]) {
            let shown = display_argv(argv);
            self.deny(
                Family::RemoteExec,
                format!("`{shown}` runs a package fetched from an address rather than a registry."),
            );
        }
    }

    /// `set -- a b c` (or `set a b`) replaces the positional parameters.
    fn set_positional(&mut self, argv: &[Arg]) {
        if argv[0].text != "set" || argv.len() < 2 {
            return;
        }
        let rest = &argv[1..];
        let start = rest
            .iter()
            .position(|a| a.text == "--")
            .map(|i| i + 1)
            .or_else(|| (!rest[0].text.starts_with(['-', '+'])).then_some(0));
        if let Some(start) = start {
            let params = rest[start..].to_vec();
            match self.positional.last_mut() {
                Some(top) => top.1 = params,
                None => self.positional.push((None, params)),
            }
        }
    }

    /// A call of a function the script defined: its body runs with these arguments.
    fn call_defined(&mut self, argv: &[Arg], stdin: &Input) -> Option<Output> {
        let body = self.defined.get(program_name(&argv[0].text)).cloned()?;
        let name = argv[0].text.clone();
        if self.calling.contains(&name) {
            return None;
        }
        self.calling.push(name);
        self.positional.push((None, argv[1..].to_vec()));
        let out = self.run_parsed(&body, stdin, true);
        self.positional.pop();
        self.calling.pop();
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where a word is read as literal text, the word parser gives the same one field.
    fn literal_agrees(raw: &str) -> bool {
        let Some(text) = literal_word(raw) else {
            return false;
        };
        for split in [false, true] {
            let parsed = Walker::default().expand_pieces(raw, split);
            assert_eq!(parsed, vec![vec![Arg::literal(text.as_ref())]], "{raw:?}");
        }
        true
    }

    #[test]
    fn literal_words_expand_as_the_parser_has_them() {
        for raw in [
            "cargo",
            "'*.rs'",
            "--name=\"a b\"",
            "''",
            "\"\"",
            "a'b'c\"d\"e",
            "'~'",
            "\"~/x\"",
            "'a\"b'",
            "\"a'b\"",
            "x:'y z'",
            "{a,b}",
            "'((((((((((((((((((((((((((('",
        ] {
            assert!(literal_agrees(raw), "{raw:?}");
        }
        for raw in [
            "",
            "~",
            "~/x",
            "a~'b'",
            "'$x'",
            "\"$x\"",
            "'a",
            "\"a",
            "`x`",
            "a\\ b",
            "\"((((((((((((((((((((((((((\"",
        ] {
            assert!(literal_word(raw).is_none(), "{raw:?}");
        }
    }

    proptest::proptest! {
        /// Any run of plain, quoted and special pieces: where it is read as literal text, the
        /// word parser agrees.
        #[test]
        fn literal_words_agree_with_the_parser(
            pieces in proptest::collection::vec(
                proptest::sample::select(vec![
                    "abc", "'x y'", "\"a b\"", "''", "\"\"", "~", "'~'", "\"~\"", "*.rs", "{a,b}",
                    "=", ":", "'$x'", "\"$x\"", "\\n", "'", "\"", "(", "[", "é", "#", "\n", "'\n'",
                    "((((((((((((", "\"\\\"\"", "-", "%",
                ]),
                1..6,
            ),
        ) {
            literal_agrees(&pieces.concat());
        }
    }
}
