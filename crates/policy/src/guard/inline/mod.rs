//! Inline programs judged by what their code does: `python -c '…'`, `node -e '…'`, a here-doc
//! fed to `python3 -`. The code is parsed with a real parser for its language (Python by
//! `rustpython-parser`, JavaScript and TypeScript by `oxc_parser`) and walked once; every call,
//! import and reference is resolved through the names the code bound (`import subprocess as
//! sp`, `from os import system as s`, `const {execSync: run} = require('child_process')`,
//! `getattr(os, 'sys' + 'tem')`) to a qualified name, which the API table ([`apis`]) maps to
//! what it does. Arguments are folded to constants where the code makes that possible (string
//! literals, concatenation, f-strings and templates of constants, names bound to constants,
//! path joins, the home directory).
//!
//! The result is a list of [`Act`] values, pure data: the rule `rules::inline` turns them into
//! the guard's findings, judging a command the code runs, a file it reads or a tree it deletes
//! exactly as the equivalent shell command is judged. Code that does not parse is one act,
//! [`Act::Unparseable`]: it fails closed.

mod apis;
mod javascript;
mod python;

/// The languages the guard has a parser for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Language {
    Python,
    JavaScript,
    TypeScript,
}

impl Language {
    /// The language named in the program table's `interpreter.language`.
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        match name {
            "python" => Some(Language::Python),
            "javascript" => Some(Language::JavaScript),
            "typescript" => Some(Language::TypeScript),
            _ => None,
        }
    }

    /// The name a denial uses for code in this language.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Language::Python => "Python",
            Language::JavaScript => "JavaScript",
            Language::TypeScript => "TypeScript",
        }
    }
}

/// One thing inline code does. `None` stands for a value only known when the code runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Act {
    /// Runs a shell command line (`os.system`, `child_process.execSync`, `shell=True`).
    Shell(Option<String>),
    /// Runs a program with these arguments (`subprocess.run([…])`, `spawn(cmd, args)`).
    Exec(Option<Vec<String>>),
    /// Forks the interpreter; `in_loop` when the fork sits in a loop.
    Fork { in_loop: bool },
    /// Sends a signal to this process id.
    Signal(Option<String>),
    /// Opens a network connection or makes a request.
    Network,
    /// Reads the file at this path.
    Read(Option<String>),
    /// Writes (creates, appends to, renames onto, changes the mode of) the file at this path,
    /// with this content when it is known.
    Write {
        path: Option<String>,
        content: Option<String>,
    },
    /// Deletes the file or, when `recursive`, the tree at this path.
    Remove {
        path: Option<String>,
        recursive: bool,
    },
    /// Takes the whole environment as a value (prints it, copies it, serialises it).
    EnvAll,
    /// Reads one environment variable.
    EnvGet(Option<String>),
    /// Runs code only known at run time (`eval(x)`, `exec(data)`, `new Function(s)`,
    /// `require(name)` of a computed name).
    DynamicCode,
    /// Calls native code directly (`ctypes`, `process.dlopen`).
    Native,
    /// The code does not parse; the parser's message.
    Unparseable(String),
}

/// Everything inline `code` in `language` does, in the order the code says it.
pub(crate) fn analyse(language: Language, code: &str) -> Vec<Act> {
    match language {
        Language::Python => python::analyse(code),
        Language::JavaScript => javascript::analyse(code, false),
        Language::TypeScript => javascript::analyse(code, true),
    }
}

/// Join path parts the way `os.path.join` and `path.join` do: an absolute part restarts.
fn join_path(parts: &[String]) -> String {
    let mut out = String::new();
    for part in parts {
        if part.starts_with('/') || out.is_empty() {
            out = part.clone();
        } else if out.ends_with('/') {
            out.push_str(part);
        } else {
            out.push('/');
            out.push_str(part);
        }
    }
    out
}

/// Whether an open-mode string writes (`w`, `a`, `x`, `+`).
fn mode_writes(mode: &str) -> bool {
    mode.contains(['w', 'a', 'x', '+'])
}

#[cfg(test)]
mod tests;
