//! The guard's command knowledge as data: one table of programs (`programs.toml`, embedded and
//! parsed once) saying, for each program, which roles it plays and how it reads its command
//! line.
//!
//! # Format
//!
//! Each `[[program]]` entry has `names` (a path's last component; `python3.12` falls back to
//! `python3`, then `python`) and any of:
//!
//! - `roles`: `shell` (runs shell code: `-c`, a script, standard input), `interpreter` (runs a
//!   program in another language; see [`LangSpec`]), `wrapper` (runs a command given in its
//!   arguments; see [`WrapperSpec`]), `reader` (prints the files it is given), `filter` (a
//!   reader whose first operand is its program: `grep`, `jq`), `downloader` (fetches from the
//!   network), `privilege` (raises privileges).
//! - `wrapper = { … }` and `interpreter = { … }`: how the program carries a command or a program.
//! - `deny = [{ when, family, reason }]`: rules over the command line. `when` is a [`Pattern`];
//!   `family` a rule id (CLI.md); `reason` completes the sentence "`<command>` …".
//! - `runs_files` / `runs_when`: workspace files the program runs (`make`: `Makefile`; a name
//!   ending in `/` is a directory, `.git/hooks/`) and the command lines that run them.
//! - `match` / `not_match`: command lines the guard must deny / allow. A unit test loads the
//!   table and runs every example through the whole guard, so an entry cannot drift from what
//!   the guard does.
//!
//! A name may appear in several entries: its roles, specs and rules are the union.
//!
//! # Families of knowledge
//!
//! Shells, privilege raisers, wrappers (launchers, tracers, environment loaders, version
//! managers, job runners), interpreters and REPLs, readers and filters, downloaders, remote and
//! infrastructure tools (clusters, infrastructure-as-code, cloud CLIs, storage, databases,
//! forges), host availability (power, services, network, firewall, mounts), persistence
//! (crontabs, services, package-manager registries), upload channels and tunnels, and
//! credential stores.

use std::borrow::Cow;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Deserialize;

use super::Family;
use super::normalize::Arg;

/// The table source, embedded at build time.
#[cfg(test)]
const SOURCE: &str = include_str!("programs.toml");
/// The table as the build script indexes it: each entry's JSON, the sorted name index and its
/// hash slots.
mod index {
    include!(concat!(env!("OUT_DIR"), "/programs_index.rs"));
}

mod name_hash;

/// What a program does, as far as the rules care.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Role {
    /// Runs shell code.
    Shell,
    /// Runs programs in another language.
    Interpreter,
    /// Runs a command given in its arguments.
    Wrapper,
    /// Prints the files it is given.
    Reader,
    /// A reader whose first operand is its program (`grep PATTERN FILE`).
    Filter,
    /// Fetches content from the network.
    Downloader,
    /// Raises privileges.
    Privilege,
}

/// How a wrapper carries a command.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WrapperSpec {
    /// Short options that take a value.
    #[serde(default)]
    pub(crate) values: String,
    /// Long options (without `--`) that take a value.
    #[serde(default)]
    pub(crate) long: Vec<String>,
    /// Single-dash words that take the next word as value (`-np 4`, `-ex CMD`).
    #[serde(default)]
    pub(crate) words: Vec<String>,
    /// Short options whose value is a shell command line.
    #[serde(default)]
    pub(crate) code: String,
    /// Long options whose value is a shell command line (`nix-shell --run`).
    #[serde(default)]
    pub(crate) long_code: Vec<String>,
    /// Options (a letter or a long name) whose value is a shell command when it starts with one
    /// of `escape_prefixes` (`gdb -ex 'shell …'`).
    #[serde(default)]
    pub(crate) escape_options: Vec<String>,
    /// See `escape_options`.
    #[serde(default)]
    pub(crate) escape_prefixes: Vec<String>,
    /// The wrapper runs a command only after this subcommand (`direnv exec`); `a|b` lists
    /// alternatives.
    #[serde(default)]
    pub(crate) subcommand: Option<String>,
    /// Operands of its own before the command (`faketime TIME cmd`).
    #[serde(default)]
    pub(crate) operands: usize,
    /// The command follows this word wherever it stands (`gdb --args`).
    #[serde(default)]
    pub(crate) after: Option<String>,
    /// The command words are joined into one shell line (`pdsh -w h cmd …`).
    #[serde(default)]
    pub(crate) joined: bool,
    /// Whether operands after the options are a command (false: only code options carry one).
    #[serde(default = "yes")]
    pub(crate) runs_operands: bool,
}

fn yes() -> bool {
    true
}

/// How an interpreter takes its program.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LangSpec {
    /// Short options whose value is a program.
    #[serde(default)]
    pub(crate) inline: String,
    /// Long options whose value is a program.
    #[serde(default)]
    pub(crate) long_inline: Vec<String>,
    /// Single-dash words (any case) whose next word is a program (`erl -eval`, `pwsh -enc`).
    #[serde(default)]
    pub(crate) words: Vec<String>,
    /// Short options taking a value (attached or next word).
    #[serde(default)]
    pub(crate) values: String,
    /// Short options taking only an attached value (the rest of the cluster).
    #[serde(default)]
    pub(crate) attached: String,
    /// Long options taking the next word as value.
    #[serde(default)]
    pub(crate) long_values: Vec<String>,
    /// Options that run a module or a named file instead of a script operand (`python -m`).
    #[serde(default)]
    pub(crate) module: String,
    /// Modules that execute the code they are given (`python -m code`, `-m pdb`).
    #[serde(default)]
    pub(crate) repl_modules: Vec<String>,
    /// The language of its inline programs when the guard parses it (`python`, `javascript`,
    /// `typescript`): such a program is judged by what its code does (`guard::inline`) rather
    /// than denied as `inline_interpreter`.
    #[serde(default)]
    pub(crate) language: Option<String>,
    /// Options that enter the interpreter's prompt after the inline program (`python -i`,
    /// `node --interactive`): what is typed there cannot be judged, so such a program is denied
    /// as `inline_interpreter` whatever its code.
    #[serde(default)]
    pub(crate) interactive: Vec<String>,
}

/// One rule of an entry, as written in the table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    when: String,
    family: String,
    reason: String,
}

/// One table entry, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Entry {
    /// The program names (indexed by the build script; read here by the example check).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) names: Vec<String>,
    /// What the programs do.
    #[serde(default)]
    pub(crate) roles: Vec<Role>,
    /// How they carry a command.
    #[serde(default)]
    pub(crate) wrapper: Option<WrapperSpec>,
    /// How they take a program.
    #[serde(default)]
    pub(crate) interpreter: Option<LangSpec>,
    #[serde(default)]
    deny: Vec<RawRule>,
    /// Workspace files the program runs (`make`: `Makefile`); a name ending in `/` is a
    /// directory whose files it runs (`.git/hooks/`).
    #[serde(default)]
    pub(crate) runs_files: Vec<String>,
    /// When the program runs those files: a [`Pattern`] over its command line (`git`: only
    /// `commit`, `merge`, … run hooks); always when absent.
    #[serde(default)]
    runs_when: Option<String>,
    /// Command lines the guard must deny.
    #[cfg_attr(not(test), allow(dead_code))]
    #[serde(default, rename = "match")]
    pub(crate) matches: Vec<String>,
    /// Command lines the guard must allow.
    #[cfg_attr(not(test), allow(dead_code))]
    #[serde(default)]
    pub(crate) not_match: Vec<String>,
}

#[cfg(test)]
#[derive(Deserialize)]
struct Source {
    program: Vec<Entry>,
}

/// One token of a [`Pattern`].
#[derive(Debug, Clone)]
enum Token {
    /// The next operand (in order, not necessarily adjacent) is one of these words; a word may
    /// start or end with `*` (suffix or prefix match). `*` alone is any operand.
    Word(Vec<String>),
    /// Some argument is one of these options (`-f` also inside a cluster `-af`; `--x` also as
    /// `--x=v`) or, for a word without a dash, equals it.
    Flag(Vec<String>),
    /// No argument is one of these.
    NoFlag(Vec<String>),
    /// Some argument contains one of these texts (any case).
    Text(Vec<String>),
    /// Some argument is an address (`https://…`, `git+…`, `github:…`).
    Address,
    /// Some argument names the home or root directory itself (`~`, `/`, `$HOME`, `/home`).
    Home,
    /// Some argument names a path in the home directory or in `/home`, `/root`.
    HostPath,
    /// Some argument is a size of 100 GiB or more (`1T`, `500G`).
    Huge,
}

/// A rule's condition: alternatives separated by ` || `, each a sequence of tokens. Words
/// (`delete`, `a|b`, `delete-*`) match operands in order; `+f|g` needs one of the options;
/// `!f|g` forbids them; `~text|text` needs an argument containing a text (the rest of the
/// pattern, spaces included); `@address` and `@home` need such an argument. An empty pattern
/// matches any use except `--help`/`--version`.
#[derive(Debug, Clone)]
pub(crate) struct Pattern {
    alternatives: Vec<Vec<Token>>,
}

impl Pattern {
    fn parse(src: &str) -> Pattern {
        let alternatives = src
            .split(" || ")
            .map(|alt| {
                let mut tokens = Vec::new();
                let mut rest = alt.trim();
                while !rest.is_empty() {
                    if let Some(text) = rest.strip_prefix('~') {
                        tokens.push(Token::Text(alts(text)));
                        break;
                    }
                    let (word, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                    rest = tail.trim_start();
                    tokens.push(match word {
                        "@address" => Token::Address,
                        "@home" => Token::Home,
                        "@hostpath" => Token::HostPath,
                        "@huge" => Token::Huge,
                        _ => match word.as_bytes()[0] {
                            b'+' => Token::Flag(alts(&word[1..])),
                            b'!' => Token::NoFlag(alts(&word[1..])),
                            _ => Token::Word(alts(word)),
                        },
                    });
                }
                tokens
            })
            .collect();
        Pattern { alternatives }
    }

    /// Whether the command line `args` (after the program name) matches.
    pub(crate) fn matches(&self, args: &[Arg]) -> bool {
        self.matches_line(&Line::new(args))
    }

    /// Whether the command line, as [`Line`] reads it, matches.
    fn matches_line(&self, line: &Line<'_>) -> bool {
        self.alternatives.iter().any(|alt| matches_all(alt, line))
    }
}

/// A command line as the patterns read it: every argument in lower case, and the operands
/// among them (the arguments that do not start with `-`). Built once for all the rules of a
/// program.
struct Line<'a> {
    lower: Vec<Cow<'a, str>>,
    operands: Vec<usize>,
}

impl<'a> Line<'a> {
    fn new(args: &'a [Arg]) -> Self {
        let lower: Vec<Cow<'a, str>> = args
            .iter()
            .map(|a| {
                if a.text.bytes().any(|b| b.is_ascii_uppercase()) {
                    Cow::Owned(a.text.to_ascii_lowercase())
                } else {
                    Cow::Borrowed(a.text.as_str())
                }
            })
            .collect();
        let operands = (0..lower.len())
            .filter(|&i| !lower[i].starts_with('-'))
            .collect();
        Line { lower, operands }
    }
}

fn alts(text: &str) -> Vec<String> {
    text.split('|').map(|s| s.to_ascii_lowercase()).collect()
}

fn matches_all(tokens: &[Token], line: &Line<'_>) -> bool {
    let lower = &line.lower;
    if tokens.is_empty() {
        return !lower
            .iter()
            .any(|t| matches!(t.as_ref(), "--help" | "--version"));
    }
    let operands = &line.operands;
    let mut next = 0;
    for token in tokens {
        let ok = match token {
            Token::Word(words) => match operands[next.min(operands.len())..]
                .iter()
                .position(|&o| words.iter().any(|w| word_matches(w, &lower[o])))
            {
                Some(k) => {
                    next += k + 1;
                    true
                }
                None => false,
            },
            Token::Flag(flags) => lower
                .iter()
                .any(|a| flags.iter().any(|f| flag_matches(f, a))),
            Token::NoFlag(flags) => !lower
                .iter()
                .any(|a| flags.iter().any(|f| flag_matches(f, a))),
            Token::Text(texts) => lower
                .iter()
                .any(|a| texts.iter().any(|t| a.contains(t.as_str()))),
            Token::Address => lower.iter().any(|a| is_address(a)),
            Token::Home => lower.iter().any(|a| names_home(a)),
            Token::HostPath => lower.iter().any(|a| names_host_path(a)),
            Token::Huge => lower
                .iter()
                .any(|a| size_bytes(a).is_some_and(|n| n >= 100 << 30)),
        };
        if !ok {
            return false;
        }
    }
    true
}

fn word_matches(pattern: &str, word: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    if let Some((prefix, suffix)) = pattern.split_once('*')
        && !prefix.is_empty()
        && !suffix.is_empty()
    {
        return word.len() >= prefix.len() + suffix.len()
            && word.starts_with(prefix)
            && word.ends_with(suffix);
    }
    if let Some(prefix) = pattern.strip_suffix('*') {
        return word.starts_with(prefix);
    }
    if let Some(suffix) = pattern.strip_prefix('*') {
        return word.ends_with(suffix);
    }
    pattern == word
}

fn flag_matches(flag: &str, arg: &str) -> bool {
    if let Some(long) = flag.strip_prefix("--") {
        return arg.strip_prefix("--").is_some_and(|a| {
            a == long || a.strip_prefix(long).is_some_and(|r| r.starts_with('='))
        });
    }
    if let Some(short) = flag.strip_prefix('-') {
        if short.chars().count() == 1 {
            return arg.starts_with('-')
                && !arg.starts_with("--")
                && arg[1..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphabetic())
                    .any(|c| short.starts_with(c));
        }
        return arg == flag || arg.strip_prefix(flag).is_some_and(|r| r.starts_with('='));
    }
    arg == flag
}

/// The public registries package managers use by default: naming one is not an address of
/// the command line's choosing.
const OFFICIAL_REGISTRIES: &[&str] = &[
    "pypi.org",
    "pypi.python.org",
    "files.pythonhosted.org",
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "rubygems.org",
    "crates.io",
    "index.crates.io",
    "static.crates.io",
    "proxy.golang.org",
    "repo.maven.apache.org",
    "repo1.maven.org",
    "api.nuget.org",
    "packagist.org",
    "hackage.haskell.org",
];

/// A package or file named by address rather than by a registry name or a local path.
pub(crate) fn is_address(text: &str) -> bool {
    let t = text.split_once('=').map_or(text, |(_, v)| v);
    let host = t
        .split_once("://")
        .map_or("", |(_, r)| r.split(['/', ':', '?']).next().unwrap_or(""));
    if OFFICIAL_REGISTRIES.contains(&host) {
        return false;
    }
    t.contains("://")
        || t.starts_with("git+")
        || t.starts_with("github:")
        || t.starts_with("gitlab:")
        || t.starts_with("bitbucket:")
        || t.starts_with("git@")
}

/// A word naming the home or root directory itself, also as the host side of a mount (`/:/host`,
/// `~:/w`) or an option value (`--directory=~`).
pub(crate) fn names_home(text: &str) -> bool {
    let t = text.split_once('=').map_or(text, |(_, v)| v);
    let host = t
        .split(':')
        .next()
        .unwrap_or(t)
        .trim_end_matches(['/', '*']);
    (host.is_empty() && t.starts_with('/'))
        || matches!(
            host,
            "~" | "$home" | "${home}" | "/home" | "/root" | "/users" | "~root"
        )
}

/// A word naming the home directory or a path under it (`~/.ssh`, `/home/u/x`, `/root/x`).
pub(crate) fn names_host_path(text: &str) -> bool {
    let t = text.split_once('=').map_or(text, |(_, v)| v);
    names_home(t)
        || ["~/", "$home/", "${home}/", "/home/", "/root/", "/users/"]
            .iter()
            .any(|p| t.starts_with(p))
}

/// A size as `fallocate`/`truncate`/`dd` read it (`10M`, `1T`, `5GiB`), in bytes.
pub(crate) fn size_bytes(text: &str) -> Option<u64> {
    let digits: String = text.chars().take_while(char::is_ascii_digit).collect();
    let n: u64 = digits.parse().ok()?;
    let unit = text[digits.len()..]
        .trim_end_matches("ib")
        .trim_end_matches('b');
    let shift = match unit {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        "p" => 50,
        "e" => 60,
        _ => return None,
    };
    n.checked_mul(1u64.checked_shl(shift)?)
}

/// A compiled deny rule.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    pub(crate) when: Pattern,
    pub(crate) family: Family,
    pub(crate) reason: String,
}

/// Everything the table says about one program name.
#[derive(Debug, Default)]
pub(crate) struct Program {
    pub(crate) roles: Vec<Role>,
    pub(crate) wrapper: Option<WrapperSpec>,
    pub(crate) interpreter: Option<LangSpec>,
    pub(crate) rules: Vec<Rule>,
    pub(crate) runs_files: Vec<String>,
    /// When it runs them (see [`Entry`]).
    pub(crate) runs_when: Option<Pattern>,
}

impl Program {
    /// Whether the command line `args` runs the program's workspace files.
    pub(crate) fn runs_files_now(&self, args: &[Arg]) -> bool {
        !self.runs_files.is_empty() && self.runs_when.as_ref().is_none_or(|p| p.matches(args))
    }
}

/// The position in [`index::NAME_INDEX`] of the name `name`: its hash's slot, then the next
/// ones until the name or an empty slot (the build script laid the names out this way).
fn position(name: &str) -> Option<usize> {
    let slots = &index::NAME_SLOTS;
    // The slot count is a power of two: the remainder is the hash's low bits.
    let mut i = (name_hash::name_hash(name) % slots.len() as u64) as usize;
    loop {
        if slots[i] == u16::MAX {
            return None;
        }
        let k = usize::from(slots[i]);
        if index::NAME_INDEX[k].0 == name {
            return Some(k);
        }
        i = (i + 1) % slots.len();
    }
}

/// The loaded table.
#[derive(Debug)]
pub(crate) struct Table {
    /// Each entry, parsed on first use (`None`: it failed to parse). Boxed: the slots of the
    /// entries and programs never used stay small (a slot is written when the table is made,
    /// and a process pays a page fault for each page of them).
    entries: Box<[OnceLock<Option<Box<Entry>>>]>,
    /// Each name of [`index::NAME_INDEX`], compiled on its first lookup (`None`: one of its
    /// entries failed to parse). A call judges a handful of programs; parsing and compiling
    /// the whole table for every process would cost more than the judgement.
    programs: Box<[OnceLock<Option<Box<Program>>>]>,
    /// An entry failed to parse: every command is denied from then on (fail closed).
    broken: AtomicBool,
}

fn family(id: &str) -> Family {
    match id {
        "destruction" => Family::Destruction,
        "remote_exec" => Family::RemoteExec,
        "exfiltration" => Family::Exfiltration,
        "persistence" => Family::Persistence,
        "env_dump" => Family::EnvDump,
        "inline_interpreter" => Family::InlineInterpreter,
        "dynamic_command" => Family::DynamicCommand,
        "privilege" => Family::Privilege,
        "host_availability" => Family::HostAvailability,
        // A typo in the table must not silently weaken a rule: it fails the load test and,
        // in use, denies as the strongest family.
        _ => Family::Destruction,
    }
}

/// The program a name's entries describe, merged in table order.
fn compile(entries: &[&Entry]) -> Program {
    let mut p = Program::default();
    for e in entries {
        p.roles.extend(e.roles.iter().copied());
        if e.wrapper.is_some() {
            p.wrapper.clone_from(&e.wrapper);
        }
        if e.interpreter.is_some() {
            p.interpreter.clone_from(&e.interpreter);
        }
        p.runs_files.extend(e.runs_files.iter().cloned());
        if let Some(when) = &e.runs_when {
            p.runs_when = Some(Pattern::parse(when));
        }
        p.rules.extend(e.deny.iter().map(|r| Rule {
            when: Pattern::parse(&r.when),
            family: family(&r.family),
            reason: r.reason.clone(),
        }));
    }
    p
}

impl Table {
    fn new() -> Table {
        Table {
            entries: index::ENTRY_JSON.iter().map(|_| OnceLock::new()).collect(),
            programs: index::NAME_INDEX.iter().map(|_| OnceLock::new()).collect(),
            broken: AtomicBool::new(false),
        }
    }

    /// Entry `i`, parsed on first use.
    fn entry(&self, i: usize) -> Option<&Entry> {
        self.entries[i]
            .get_or_init(|| {
                let e = serde_json::from_str(index::ENTRY_JSON[i])
                    .ok()
                    .map(Box::new);
                if e.is_none() {
                    self.broken.store(true, Ordering::Relaxed);
                }
                e
            })
            .as_deref()
    }

    /// Every entry, in table order (the example check's).
    #[cfg(test)]
    pub(crate) fn all_entries(&self) -> Vec<&Entry> {
        (0..self.entries.len())
            .map(|i| self.entry(i).expect("every entry parses"))
            .collect()
    }

    /// The compiled program named exactly `name`.
    fn get(&self, name: &str) -> Option<&Program> {
        let k = position(name)?;
        self.programs[k]
            .get_or_init(|| {
                let of: Option<Vec<&Entry>> = index::NAME_INDEX[k]
                    .1
                    .iter()
                    .map(|&i| self.entry(i))
                    .collect();
                of.map(|of| Box::new(compile(&of)))
            })
            .as_deref()
    }

    fn is_broken(&self) -> bool {
        self.broken.load(Ordering::Relaxed)
    }
}

/// The table, indexed on first use.
pub(crate) fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(Table::new)
}

/// What the table knows of `name`: exact, else without a version suffix (`python3.12` →
/// `python3` → `python`).
pub(crate) fn program(name: &str) -> Option<&'static Program> {
    let t = table();
    if let Some(p) = t.get(name) {
        return Some(p);
    }
    let trimmed = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '-');
    if trimmed != name
        && !trimmed.is_empty()
        && let Some(p) = t.get(trimmed)
    {
        return Some(p);
    }
    None
}

/// Whether `name` plays `role`.
pub(crate) fn has_role(name: &str, role: Role) -> bool {
    program(name).is_some_and(|p| p.roles.contains(&role))
}

/// The table's rules over `name args`: each match with its family and sentence. Pure.
pub(crate) fn denials(name: &str, args: &[Arg]) -> Vec<(Family, &'static str)> {
    let found = program(name);
    if table().is_broken() {
        return vec![(
            Family::Unparseable,
            "cannot be judged: the guard's program table failed to load",
        )];
    }
    if args
        .iter()
        .any(|a| matches!(a.text.as_str(), "--help" | "-help" | "--version"))
    {
        return Vec::new();
    }
    match found {
        Some(p) if !p.rules.is_empty() => {
            let line = Line::new(args);
            p.rules
                .iter()
                .filter(|r| r.when.matches_line(&line))
                .map(|r| (r.family, r.reason.as_str()))
                .collect()
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::evaluate;
    use super::*;

    #[test]
    fn the_table_parses_and_every_rule_names_a_known_family() {
        let source: Source = toml::from_str(SOURCE).expect("programs.toml parses");
        assert!(source.program.len() > 50);
        for e in &source.program {
            assert!(!e.names.is_empty());
            for r in &e.deny {
                assert!(
                    matches!(
                        r.family.as_str(),
                        "destruction"
                            | "remote_exec"
                            | "exfiltration"
                            | "persistence"
                            | "env_dump"
                            | "inline_interpreter"
                            | "dynamic_command"
                            | "privilege"
                            | "host_availability"
                    ),
                    "{:?}: unknown family {}",
                    e.names,
                    r.family
                );
            }
        }
    }

    #[test]
    fn every_example_in_the_table_gets_its_verdict() {
        let mut failures = Vec::new();
        for e in table().all_entries() {
            for m in &e.matches {
                if evaluate(m).decision.is_allow() {
                    failures.push(format!("{:?}: should deny {m:?}", e.names));
                }
            }
            for m in &e.not_match {
                let r = evaluate(m);
                if !r.decision.is_allow() {
                    failures.push(format!(
                        "{:?}: should allow {m:?}, got {} ({})",
                        e.names, r.decision.rule, r.decision.reason
                    ));
                }
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    /// The build script's slots find every name at its own position, and nothing else.
    #[test]
    fn every_name_is_found_through_the_hash_slots() {
        for (k, (name, _)) in index::NAME_INDEX.iter().enumerate() {
            assert_eq!(position(name), Some(k), "{name}");
        }
        for absent in [
            "",
            "no-such-program",
            "PYTHON",
            "python3.12",
            "rm ",
            "/bin/rm",
        ] {
            assert_eq!(position(absent), None, "{absent}");
        }
    }

    #[test]
    fn patterns_match_words_in_order_and_options_anywhere() {
        let args = |s: &str| s.split(' ').map(Arg::literal).collect::<Vec<_>>();
        let p = Pattern::parse("delete namespace|ns");
        assert!(p.matches(&args("-n x delete ns prod")));
        assert!(!p.matches(&args("get ns")));
        let p = Pattern::parse("prune +--volumes|-a");
        assert!(p.matches(&args("system prune -af")));
        assert!(!p.matches(&args("image prune -f")));
        let p = Pattern::parse("~drop table");
        assert!(p.matches(&args("-c DROP TABLE")) || p.matches(&[Arg::literal("DROP TABLE x")]));
        assert_eq!(size_bytes("1t"), Some(1 << 40));
        assert_eq!(size_bytes("10m"), Some(10 << 20));
        assert_eq!(size_bytes("test.bin"), None);
        let p = Pattern::parse("");
        assert!(p.matches(&args("-h now")) && !p.matches(&args("--help")));
        let p = Pattern::parse("install @address || config set registry*");
        assert!(p.matches(&args("install git+https://x/y")));
        assert!(p.matches(&args("config set registry https://r")));
        assert!(!p.matches(&args("config get registry")));
    }
}
