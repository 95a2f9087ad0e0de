//! Parsing with brush-parser, behind a cheap lexical bound on nesting: the parser recurses
//! once per nesting level, so input nested deeper than [`MAX_NESTING`] is refused before it
//! can exhaust the stack.

use std::sync::Arc;

use brush_parser::ast::{
    AndOrList, Command, CommandPrefixOrSuffixItem, CommandSuffix, CompoundList, CompoundListItem,
    Pipeline, Program, SeparatorOperator, SimpleCommand, Word,
};
use brush_parser::word::WordPieceWithSource;
use brush_parser::{Parser, ParserOptions, SourcePosition, SourceSpan};

/// Deepest nesting (parentheses, braces, brackets, compound keywords) a script may have.
pub(crate) const MAX_NESTING: usize = 24;
/// Longest script the guard reads.
pub(crate) const MAX_LEN: usize = 256 * 1024;

pub(crate) fn options() -> ParserOptions {
    ParserOptions {
        // extglob would turn `!(…)`/`@(…)` into patterns the tokenizer treats differently
        // from a default non-interactive bash.
        enable_extended_globbing: false,
        ..ParserOptions::default()
    }
}

/// Why a script was not parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ParseFailure {
    TooDeep,
    TooLong,
    Syntax,
}

impl ParseFailure {
    pub(crate) fn sentence(&self, shown: &str) -> String {
        match self {
            ParseFailure::TooDeep => {
                format!("`{shown}` nests deeper than the guard analyses ({MAX_NESTING} levels).")
            }
            ParseFailure::TooLong => {
                format!("The script is longer than the guard analyses ({MAX_LEN} bytes).")
            }
            ParseFailure::Syntax => {
                format!("`{shown}` is not a shell script the guard can parse.")
            }
        }
    }
}

/// Parse a whole script.
pub(crate) fn parse_script(src: &str) -> Result<Program, ParseFailure> {
    check_bounds(src)?;
    if let Some(program) = plain_command(src) {
        return Ok(program);
    }
    // A byte slice is its own buffered reader: wrapping it in a `BufReader` would allocate and
    // fill an 8 KiB buffer for every script, nested ones included.
    let mut parser = Parser::new(src.as_bytes(), &options());
    parser.parse_program().map_err(|_| ParseFailure::Syntax)
}

/// Words bash gives a meaning of their own, in any case (one that is not reserved in some case
/// only sends the script to brush).
const RESERVED: &[&str] = &[
    "case", "coproc", "do", "done", "elif", "else", "esac", "fi", "for", "function", "if", "in",
    "select", "then", "time", "until", "while",
];

/// A byte bash reads as a plain word character wherever it stands: no blank, operator, quote,
/// escape, expansion, comment, glob, brace, tilde or assignment.
fn plain_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'-' | b'_' | b'.' | b'/' | b':' | b'@' | b'%' | b'+' | b','
        )
}

/// The tree of a script that is one simple command of plain words on one line (`cargo test
/// --workspace`, `rm -rf /`), built without the parser: most scripts, and most nested ones,
/// are such a command, and brush's tokenizer and grammar cost more than the rest of their
/// judgement. `None` for anything else, which brush parses. The tree is exactly brush's
/// (positions included; a test compares the two).
fn plain_command(src: &str) -> Option<Program> {
    let bytes = src.as_bytes();
    let mut words = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if matches!(bytes[i], b' ' | b'\t') {
            i += 1;
            continue;
        }
        if !plain_byte(bytes[i]) {
            return None;
        }
        let start = i;
        while i < bytes.len() && plain_byte(bytes[i]) {
            i += 1;
        }
        let text = &src[start..i];
        if RESERVED.iter().any(|r| r.eq_ignore_ascii_case(text)) {
            return None;
        }
        words.push(plain_word(text, start, i));
    }
    let mut words = words.into_iter();
    let name = words.next()?;
    let suffix: Vec<CommandPrefixOrSuffixItem> =
        words.map(CommandPrefixOrSuffixItem::Word).collect();
    let command = SimpleCommand {
        prefix: None,
        word_or_name: Some(name),
        suffix: (!suffix.is_empty()).then_some(CommandSuffix(suffix)),
    };
    let pipeline = Pipeline {
        timed: None,
        bang: false,
        seq: vec![Command::Simple(command)],
    };
    let list = AndOrList {
        first: pipeline,
        additional: Vec::new(),
    };
    Some(Program {
        complete_commands: vec![CompoundList(vec![CompoundListItem(
            list,
            SeparatorOperator::Sequence,
        )])],
    })
}

/// A word of [`plain_command`] at bytes `start..end` of its one line (ASCII: bytes are
/// characters).
fn plain_word(text: &str, start: usize, end: usize) -> Word {
    let at = |index: usize| {
        Arc::new(SourcePosition {
            index,
            line: 1,
            column: index + 1,
        })
    };
    Word {
        value: text.to_owned(),
        loc: Some(SourceSpan {
            start: at(start),
            end: at(end),
        }),
    }
}

/// Split one word into its pieces (quotes, expansions, substitutions).
pub(crate) fn parse_word(word: &str) -> Result<Vec<WordPieceWithSource>, ParseFailure> {
    check_bounds(word)?;
    brush_parser::word::parse(word, &options()).map_err(|_| ParseFailure::Syntax)
}

/// Split a heredoc body that undergoes expansion.
pub(crate) fn parse_heredoc(body: &str) -> Result<Vec<WordPieceWithSource>, ParseFailure> {
    check_bounds(body)?;
    brush_parser::word::parse_heredoc(body, &options()).map_err(|_| ParseFailure::Syntax)
}

fn check_bounds(src: &str) -> Result<(), ParseFailure> {
    if src.len() > MAX_LEN {
        return Err(ParseFailure::TooLong);
    }
    if nesting_estimate(src) > MAX_NESTING {
        return Err(ParseFailure::TooDeep);
    }
    Ok(())
}

/// An upper-bound estimate of the nesting depth, from brackets and compound keywords; single
/// quotes are skipped, everything else counts (over-counting only refuses odd input).
pub(crate) fn nesting_estimate(src: &str) -> usize {
    let bytes = src.as_bytes();
    let mut depth: usize = 0;
    let mut max: usize = 0;
    let mut backticks: usize = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'\\' => {
                i += 2;
                continue;
            }
            b'\'' => {
                // A single-quoted run (also covers `$'…'` approximately).
                i += 1;
                while i < bytes.len() && bytes[i] != b'\'' {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'(' | b'{' | b'[' => {
                depth += 1;
                max = max.max(depth);
            }
            b')' | b'}' | b']' => depth = depth.saturating_sub(1),
            b'`' => backticks += 1,
            _ if b.is_ascii_alphabetic() => {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                let word = &src[start..i];
                let at_boundary = start == 0 || !bytes[start - 1].is_ascii_alphanumeric();
                if at_boundary {
                    match word {
                        "if" | "case" | "for" | "while" | "until" | "select" => {
                            depth += 1;
                            max = max.max(depth);
                        }
                        "fi" | "esac" | "done" => depth = depth.saturating_sub(1),
                        _ => {}
                    }
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    max.max(depth).max(backticks / 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_estimate_counts_brackets_and_keywords() {
        assert_eq!(nesting_estimate("ls"), 0);
        assert_eq!(nesting_estimate("( ( ls ) )"), 2);
        assert_eq!(nesting_estimate("if a; then if b; then c; fi; fi"), 2);
        assert_eq!(nesting_estimate("echo '((((('"), 0);
        assert_eq!(nesting_estimate("echo ifx"), 0);
    }

    /// The plain-command tree is brush's own, wherever it is built.
    fn agrees_with_brush(src: &str) -> bool {
        let Some(fast) = plain_command(src) else {
            return false;
        };
        let brush = Parser::new(src.as_bytes(), &options())
            .parse_program()
            .expect("brush parses a plain command");
        assert_eq!(format!("{fast:?}"), format!("{brush:?}"), "{src:?}");
        true
    }

    #[test]
    fn plain_commands_parse_as_brush_parses_them() {
        for src in [
            "ls",
            "cargo test --workspace",
            "  rm\t-rf   /  ",
            "git push -u origin main",
            "a.b x/y @x %1 +x a,b 1 -- - ... ::",
            "x\tIFX doner timex",
        ] {
            assert!(agrees_with_brush(src), "{src:?}");
        }
        for src in [
            "",
            "   ",
            "time ls",
            "IF x",
            "echo done",
            "a=b ls",
            "ls ~",
            "ls *.rs",
            "ls # c",
            "ls\nls",
            "ls; ls",
            "! ls",
            "{ ls; }",
            "echo é",
            "echo $x",
        ] {
            assert!(plain_command(src).is_none(), "{src:?}");
        }
        // Every line of the corpora, and every run of its words from each blank.
        let dir = format!("{}/tests/data", env!("CARGO_MANIFEST_DIR"));
        let mut checked = 0;
        for entry in std::fs::read_dir(&dir).expect("the corpora") {
            let text = std::fs::read_to_string(entry.expect("an entry").path()).unwrap_or_default();
            for line in text.lines() {
                let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                    continue;
                };
                let cmd = v["cmd"].as_str().unwrap_or_default();
                for (k, _) in cmd.match_indices(' ').chain([(0, "")]) {
                    checked += usize::from(agrees_with_brush(&cmd[k..]));
                }
            }
        }
        assert!(checked > 1000, "{checked}");
    }

    proptest::proptest! {
        /// Any run of words, plain or not, with any blanks: where the plain-command tree is
        /// built, it is brush's.
        #[test]
        fn plain_command_trees_agree_with_brush(
            words in proptest::collection::vec(
                proptest::sample::select(vec![
                    "ls", "-la", "A.b", "x/y", "@x", "%1", "+x", "a,b", "0", "2", "--o", "-", ":",
                    "_", "if", "Fi", "done", "time", "TIME", "select", "function", "coproc", "in",
                    "!", "{", "}", "[[", "]]", "#", "x=y", "~", "*", "a?b", "(", ")", ";", "&",
                    "|", ">", "2>", "<", "'q'", "\"d\"", "\\", "$v", "`c`", "\n", "é",
                ]),
                0..7,
            ),
            blanks in proptest::collection::vec(
                proptest::sample::select(vec![" ", "\t", "  ", " \t"]),
                8,
            ),
        ) {
            let mut src = String::from(blanks[7]);
            for (k, w) in words.iter().enumerate() {
                src.push_str(w);
                src.push_str(blanks[k]);
            }
            agrees_with_brush(&src);
        }
    }

    #[test]
    fn deep_input_is_refused_before_parsing() {
        let deep = format!("{}ls{}", "$(".repeat(500), ")".repeat(500));
        assert_eq!(parse_script(&deep).unwrap_err(), ParseFailure::TooDeep);
    }
}
