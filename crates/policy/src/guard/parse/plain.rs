//! The tree of a script made of plain words and list operators only (`cargo test --workspace`,
//! `git status && git diff --stat`, `curl -s x.example.org/a | sh`), built without brush.
//!
//! Most scripts, and most scripts nested in them (`sh -c 'rm -rf /'`), are such a list, and
//! brush's tokenizer and grammar cost more than the rest of their judgement. A plain word is
//! made of letters, digits and `-_./:@%+,` (no blank, escape, expansion, comment, glob, brace,
//! tilde, redirection or assignment) and of quoted runs of printable ASCII or tabs: `'…'`, and
//! `"…"` without `$`, `` ` `` or `\`; a word without quotes is no reserved word in any case.
//! Words are separated by blanks and by the operators `|`, `&&`, `||`, `;` and `&`, on one
//! line. Anything else, or a list brush would not accept, gives `None` and goes to brush.
//!
//! The tree is exactly brush's, positions included: the tests compare the two on every line of
//! the corpora and on random runs of plain and special words.

use std::sync::Arc;

use brush_parser::ast::{
    AndOr, AndOrList, Command, CommandPrefixOrSuffixItem, CommandSuffix, CompoundList,
    CompoundListItem, Pipeline, Program, SeparatorOperator, SimpleCommand, Word,
};
use brush_parser::{SourcePosition, SourceSpan};

/// Words bash gives a meaning of their own, in any case (one that is reserved in some case
/// only sends the script to brush).
const RESERVED: &[&str] = &[
    "case", "coproc", "do", "done", "elif", "else", "esac", "fi", "for", "function", "if", "in",
    "select", "then", "time", "until", "while",
];

/// One token of a plain script.
#[derive(Clone, Copy)]
enum Token<'a> {
    /// A plain word and its byte range (ASCII: bytes are characters).
    Word(&'a str, usize, usize),
    /// `|`, `&&`, `||`, `;` or `&`.
    Op(&'a str),
}

/// A byte of a plain word outside quotes.
fn plain_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'-' | b'_' | b'.' | b'/' | b':' | b'@' | b'%' | b'+' | b','
        )
}

/// A byte inside a quoted run of a plain word that opened with `quote`.
fn quoted_byte(b: u8, quote: u8) -> bool {
    (b == b'\t' || (b' '..=b'~').contains(&b))
        && b != quote
        && (quote == b'\'' || !matches!(b, b'$' | b'`' | b'\\'))
}

/// The end of the plain word starting at `start`; `None` when a quote does not close on a
/// byte of the subset.
fn word_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start;
    while i < bytes.len() {
        let b = bytes[i];
        if plain_byte(b) {
            i += 1;
        } else if matches!(b, b'\'' | b'"') {
            i += 1;
            while i < bytes.len() && quoted_byte(bytes[i], b) {
                i += 1;
            }
            if bytes.get(i) != Some(&b) {
                return None;
            }
            i += 1;
        } else {
            break;
        }
    }
    Some(i)
}

/// The tree of `src` when it is a plain script.
pub(super) fn program(src: &str) -> Option<Program> {
    let tokens = tokens(src)?;
    let mut rest = tokens.as_slice();
    let mut items = Vec::new();
    while !rest.is_empty() {
        let list = and_or(&mut rest)?;
        // The last list without a separator runs in sequence, as brush has it.
        let sep = match rest.first() {
            None => SeparatorOperator::Sequence,
            Some(Token::Op(";")) => SeparatorOperator::Sequence,
            Some(Token::Op("&")) => SeparatorOperator::Async,
            Some(_) => return None,
        };
        rest = rest.get(1..).unwrap_or_default();
        items.push(CompoundListItem(list, sep));
    }
    (!items.is_empty()).then(|| Program {
        complete_commands: vec![CompoundList(items)],
    })
}

/// The tokens of a plain script; `None` at the first byte or operator outside the subset.
fn tokens(src: &str) -> Option<Vec<Token<'_>>> {
    let bytes = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        let b = bytes[i];
        if matches!(b, b' ' | b'\t') {
            i += 1;
        } else if plain_byte(b) || matches!(b, b'\'' | b'"') {
            i = word_end(bytes, start)?;
            let text = &src[start..i];
            if RESERVED.iter().any(|r| r.eq_ignore_ascii_case(text)) {
                return None;
            }
            out.push(Token::Word(text, start, i));
        } else if matches!(b, b'|' | b'&' | b';') {
            while i < bytes.len() && matches!(bytes[i], b'|' | b'&' | b';') {
                i += 1;
            }
            // `|&`, `;;`, `;&`, `&&&`: not one of the plain operators.
            let op = &src[start..i];
            if !matches!(op, "|" | "&&" | "||" | ";" | "&") {
                return None;
            }
            out.push(Token::Op(op));
        } else {
            return None;
        }
    }
    Some(out)
}

/// Pipelines joined by `&&` and `||`.
fn and_or(rest: &mut &[Token<'_>]) -> Option<AndOrList> {
    let first = pipeline(rest)?;
    let mut additional = Vec::new();
    loop {
        let op: fn(Pipeline) -> AndOr = match rest.first() {
            Some(Token::Op("&&")) => AndOr::And,
            Some(Token::Op("||")) => AndOr::Or,
            _ => break,
        };
        *rest = &rest[1..];
        additional.push(op(pipeline(rest)?));
    }
    Some(AndOrList { first, additional })
}

/// Simple commands joined by `|`.
fn pipeline(rest: &mut &[Token<'_>]) -> Option<Pipeline> {
    let mut seq = vec![Command::Simple(simple(rest)?)];
    while let Some(Token::Op("|")) = rest.first() {
        *rest = &rest[1..];
        seq.push(Command::Simple(simple(rest)?));
    }
    Some(Pipeline {
        timed: None,
        bang: false,
        seq,
    })
}

/// A command name and its arguments.
fn simple(rest: &mut &[Token<'_>]) -> Option<SimpleCommand> {
    let mut words = Vec::new();
    while let Some(&Token::Word(text, start, end)) = rest.first() {
        words.push(word(text, start, end));
        *rest = &rest[1..];
    }
    let mut words = words.into_iter();
    let name = words.next()?;
    let suffix: Vec<CommandPrefixOrSuffixItem> =
        words.map(CommandPrefixOrSuffixItem::Word).collect();
    Some(SimpleCommand {
        prefix: None,
        word_or_name: Some(name),
        suffix: (!suffix.is_empty()).then_some(CommandSuffix(suffix)),
    })
}

/// A word at bytes `start..end` of the script's one line.
fn word(text: &str, start: usize, end: usize) -> Word {
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

#[cfg(test)]
mod tests {
    use super::super::options;
    use super::*;
    use brush_parser::Parser;

    /// Whether `src` is plain; when it is, its tree is brush's own.
    fn agrees_with_brush(src: &str) -> bool {
        let Some(fast) = program(src) else {
            return false;
        };
        let brush = Parser::new(src.as_bytes(), &options())
            .parse_program()
            .expect("brush parses a plain script");
        assert_eq!(format!("{fast:?}"), format!("{brush:?}"), "{src:?}");
        true
    }

    #[test]
    fn plain_scripts_parse_as_brush_parses_them() {
        for src in [
            "ls",
            "cargo test --workspace",
            "  rm\t-rf   /  ",
            "a.b x/y @x %1 +x a,b 1 -- - ... ::",
            "x\tIFX doner timex",
            "git status && git diff --stat",
            "curl -s x.example.org/a|sh",
            "a || b && c | d | e; f & g &",
            "make;make test;",
            "sh -c 'rm -rf ~'",
            "find . -name '*.pyc' -delete",
            "git commit -m \"fix: a | b; c && d\" && git push",
            "echo ''\"\"x'y'\"z\" 'if' \"done\" 'a=b' '#' \"~\"",
            "a'\t'b",
        ] {
            assert!(agrees_with_brush(src), "{src:?}");
        }
        for src in [
            "",
            "   ",
            ";",
            "time ls",
            "IF x",
            "echo done",
            "a=b ls",
            "ls ~",
            "ls *.rs",
            "ls # c",
            "ls\nls",
            "! ls",
            "{ ls; }",
            "echo é",
            "echo $x",
            "a |& b",
            "a ;; b",
            "a && && b",
            "a |",
            "| a",
            "a; ; b",
            "a & ;",
            "a &&& b",
            "a > f",
            "echo 'a",
            "echo \"a",
            "echo \"$x\"",
            "echo \"`x`\"",
            "echo \"a\\\"b\"",
            "echo 'a\nb'",
            "echo 'é'",
            "echo a'b'=c",
        ] {
            assert!(program(src).is_none(), "{src:?}");
        }
    }

    #[test]
    fn the_corpora_parse_as_brush_parses_them() {
        // Every line of the corpora, and every run of its words from each blank.
        let dir = format!("{}/tests/data", env!("CARGO_MANIFEST_DIR"));
        let mut plain = 0;
        for entry in std::fs::read_dir(&dir).expect("the corpora") {
            let text = std::fs::read_to_string(entry.expect("an entry").path()).unwrap_or_default();
            for line in text.lines() {
                let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                    continue;
                };
                let cmd = v["cmd"].as_str().unwrap_or_default();
                for (k, _) in cmd.match_indices([' ', '\'', '"']).chain([(0, "")]) {
                    plain += usize::from(agrees_with_brush(&cmd[k..]));
                }
            }
        }
        assert!(plain > 1000, "{plain}");
    }

    proptest::proptest! {
        /// Any run of words and operators, plain or not, with any blanks (none included):
        /// where the tree is built, it is brush's.
        #[test]
        fn plain_trees_agree_with_brush(
            words in proptest::collection::vec(
                proptest::sample::select(vec![
                    "ls", "-la", "A.b", "x/y", "@x", "%1", "+x", "a,b", "0", "2", "--o", "-", ":",
                    "_", "if", "Fi", "done", "time", "TIME", "select", "function", "coproc", "in",
                    "!", "{", "}", "[[", "]]", "#", "x=y", "~", "*", "a?b", "(", ")", ";", "&",
                    "|", "&&", "||", "|&", ";;", ">", "2>", "<", "'q'", "\"d\"", "\\", "$v", "`c`",
                    "\n", "é", "'", "\"", "'a b'", "\"a b\"", "'if'", "\"a=b\"", "'$x'", "\"$x\"",
                    "'a\tb'", "\"a|b;c\"", "'~*{}()<>#'", "\"'\"", "'\"'", "'é'", "\"\\\"\"", "'\n'",
                    "x'=y'", "'x'=y",
                ]),
                0..8,
            ),
            blanks in proptest::collection::vec(
                proptest::sample::select(vec!["", " ", "\t", "  ", " \t"]),
                9,
            ),
        ) {
            let mut src = String::from(blanks[8]);
            for (k, w) in words.iter().enumerate() {
                src.push_str(w);
                src.push_str(blanks[k]);
            }
            agrees_with_brush(&src);
        }

        /// Runs of plain words and operators only: most are plain scripts.
        #[test]
        fn plain_lists_agree_with_brush(
            words in proptest::collection::vec(
                proptest::sample::select(vec![
                    "ls", "-la", "x/y", "%1", "2", "-", ":", "@", ";", "&", "|", "&&", "||",
                    "'a b'", "\"c d\"", "''", "\"\"",
                ]),
                1..10,
            ),
            blanks in proptest::collection::vec(proptest::sample::select(vec!["", " ", "\t"]), 11),
        ) {
            let mut src = String::from(blanks[10]);
            for (k, w) in words.iter().enumerate() {
                src.push_str(w);
                src.push_str(blanks[k]);
            }
            agrees_with_brush(&src);
        }
    }
}
