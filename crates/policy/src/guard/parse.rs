//! Parsing with brush-parser, behind a cheap lexical bound on nesting: the parser recurses
//! once per nesting level, so input nested deeper than [`MAX_NESTING`] is refused before it
//! can exhaust the stack.

mod plain;

use brush_parser::ast::Program;
use brush_parser::word::WordPieceWithSource;
use brush_parser::{Parser, ParserOptions};

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
    if let Some(program) = plain::program(src) {
        return Ok(program);
    }
    // A byte slice is its own buffered reader: wrapping it in a `BufReader` would allocate and
    // fill an 8 KiB buffer for every script, nested ones included.
    let mut parser = Parser::new(src.as_bytes(), &options());
    parser.parse_program().map_err(|_| ParseFailure::Syntax)
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

pub(crate) fn check_bounds(src: &str) -> Result<(), ParseFailure> {
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

    #[test]
    fn deep_input_is_refused_before_parsing() {
        let deep = format!("{}ls{}", "$(".repeat(500), ")".repeat(500));
        assert_eq!(parse_script(&deep).unwrap_err(), ParseFailure::TooDeep);
    }
}
