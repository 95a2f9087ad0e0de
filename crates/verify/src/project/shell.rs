//! Just enough of the POSIX shell grammar to find the steps of a package.json script and the
//! words of each step, with their byte spans, so reporter flags can be spliced into one step
//! without re-quoting anything else.
//!
//! A script is understood when it is a list of simple commands joined by `&&`, `||`, `;`, `|`,
//! `&` or newlines, whose words are plain, quoted (`'…'`, `"…"`) or escaped. Anything else
//! (subshells, command substitution, redirections, here-documents, comments) is not
//! understood: the caller then runs the script unchanged and reads its result generically.

/// One word of a step: its unquoted text and where it sits in the script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Word {
    /// The word after quote removal.
    pub(crate) text: String,
    /// Byte offset of the word's first byte in the script.
    pub(crate) start: usize,
    /// Byte offset just past the word's last byte.
    pub(crate) end: usize,
}

/// A simple command of the script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Step {
    /// Its words, in order.
    pub(crate) words: Vec<Word>,
}

/// The steps of `script`, or `None` when it uses shell syntax beyond a list of simple commands.
pub(crate) fn steps(script: &str) -> Option<Vec<Step>> {
    let bytes = script.as_bytes();
    let mut steps = Vec::new();
    let mut words: Vec<Word> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b' ' | b'\t' => i += 1,
            b'\n' | b';' | b'&' | b'|' => {
                // `&&`, `||`, `;`, `|`, `&`, newline: a step ends.
                if c == b'&' && bytes.get(i + 1) == Some(&b'>') {
                    return None;
                }
                i += if matches!(c, b'&' | b'|') && bytes.get(i + 1) == Some(&c) {
                    2
                } else {
                    1
                };
                if !words.is_empty() {
                    steps.push(Step {
                        words: std::mem::take(&mut words),
                    });
                }
            }
            b'(' | b')' | b'<' | b'>' | b'`' | b'#' | b'{' | b'}' => return None,
            _ => {
                let start = i;
                let mut text = String::new();
                while i < bytes.len() {
                    match bytes[i] {
                        b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' => break,
                        b'(' | b')' | b'<' | b'>' | b'`' => return None,
                        b'$' if bytes.get(i + 1) == Some(&b'(') => return None,
                        b'\\' => {
                            let next = script[i + 1..].chars().next()?;
                            if next != '\n' {
                                text.push(next);
                            }
                            i += 1 + next.len_utf8();
                        }
                        b'\'' => {
                            let close = script[i + 1..].find('\'')? + i + 1;
                            text.push_str(&script[i + 1..close]);
                            i = close + 1;
                        }
                        b'"' => {
                            i += 1;
                            loop {
                                match *bytes.get(i)? {
                                    b'"' => break,
                                    b'`' => return None,
                                    b'$' if bytes.get(i + 1) == Some(&b'(') => return None,
                                    b'\\'
                                        if matches!(
                                            bytes.get(i + 1),
                                            Some(b'"' | b'\\' | b'$' | b'`')
                                        ) =>
                                    {
                                        text.push(char::from(bytes[i + 1]));
                                        i += 2;
                                    }
                                    _ => {
                                        let ch = script[i..].chars().next()?;
                                        text.push(ch);
                                        i += ch.len_utf8();
                                    }
                                }
                            }
                            i += 1;
                        }
                        _ => {
                            let ch = script[i..].chars().next()?;
                            text.push(ch);
                            i += ch.len_utf8();
                        }
                    }
                }
                words.push(Word {
                    text,
                    start,
                    end: i,
                });
            }
        }
    }
    if !words.is_empty() {
        steps.push(Step { words });
    }
    Some(steps)
}

/// `word` quoted for `sh` (unchanged when it needs no quoting).
pub(crate) fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'-' | b'_' | b'.' | b'/' | b'=' | b':' | b',' | b'+' | b'@' | b'%'
                )
        });
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(script: &str) -> Vec<Vec<String>> {
        steps(script)
            .unwrap()
            .into_iter()
            .map(|s| s.words.into_iter().map(|w| w.text).collect())
            .collect()
    }

    #[test]
    fn lists_of_simple_commands() {
        assert_eq!(
            texts("tsc --noEmit && vitest run --typecheck"),
            [
                vec!["tsc", "--noEmit"],
                vec!["vitest", "run", "--typecheck"]
            ]
        );
        assert_eq!(
            texts("NODE_ENV=test jest 'a b' \"c\\\"d\" e\\ f; echo done | cat & x || y"),
            [
                vec!["NODE_ENV=test", "jest", "a b", "c\"d", "e f"],
                vec!["echo", "done"],
                vec!["cat"],
                vec!["x"],
                vec!["y"],
            ]
        );
        let s = steps("a  bc").unwrap();
        assert_eq!((s[0].words[1].start, s[0].words[1].end), (3, 5));
    }

    #[test]
    fn anything_else_is_not_understood() {
        for script in [
            "(cd a && jest)",
            "jest > out.txt",
            "jest $(cat args)",
            "jest `cat args`",
            "jest \"$(x)\"",
            "{ jest; }",
            "jest # comment",
            "jest 'unterminated",
            "jest &> log",
        ] {
            assert!(steps(script).is_none(), "{script}");
        }
    }

    #[test]
    fn quoting() {
        assert_eq!(quote("--reporter=junit"), "--reporter=junit");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
    }
}
