//! The normalised forms the rules reason on: a word after quote removal and static expansion
//! ([`Arg`]), what a command writes to its output ([`Output`]) and what it reads on its input
//! ([`Input`]); plus the pure decoders (`$'…'`, base64) and quoting for display.

/// What flowed into a word or a stream from elsewhere.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Taint {
    /// Content fetched from the network.
    pub(crate) download: bool,
    /// File contents or environment values.
    pub(crate) secret: bool,
    /// The output of a shell: fed to a network client, it is a reverse shell.
    pub(crate) shell: bool,
    /// The value of an environment variable named as a secret (`$AWS_SECRET_ACCESS_KEY`).
    pub(crate) env_secret: bool,
}

impl Taint {
    pub(crate) fn merge(&mut self, other: Taint) {
        self.download |= other.download;
        self.secret |= other.secret;
        self.shell |= other.shell;
        self.env_secret |= other.env_secret;
    }
}

/// An environment variable whose name says it holds a secret: a `TOKEN`, `SECRET`,
/// `PASSWORD`, `PASSWD` or `CREDENTIALS` word, or `API_KEY`, `ACCESS_KEY`, `PRIVATE_KEY`,
/// `SECRET_KEY` (`GITHUB_TOKEN`, `AWS_SECRET_ACCESS_KEY`, `OPENAI_API_KEY`, `DB_PASSWORD`).
pub(crate) fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    let words: Vec<&str> = upper.split('_').collect();
    words.iter().any(|w| {
        matches!(
            *w,
            "TOKEN" | "SECRET" | "PASSWORD" | "PASSWD" | "CREDENTIALS" | "APIKEY" | "PAT"
        )
    }) || words
        .windows(2)
        .any(|p| p[1] == "KEY" && matches!(p[0], "API" | "ACCESS" | "PRIVATE" | "SECRET"))
}

/// One argument after normalisation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Arg {
    /// The text after quote removal and static expansion; unresolved parts stay as `$name`
    /// or `$(…)`.
    pub(crate) text: String,
    /// Some part is only known at run time.
    pub(crate) dynamic: bool,
    /// What command substitutions inside the word brought in.
    pub(crate) taint: Taint,
    /// The word is a process substitution `<(…)`; this is what it produces.
    pub(crate) proc_sub: Option<Box<Output>>,
}

impl Arg {
    pub(crate) fn literal(text: impl Into<String>) -> Self {
        Arg {
            text: text.into(),
            ..Arg::default()
        }
    }
}

/// What a command (or a list of commands) writes on its standard output.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Output {
    pub(crate) taint: Taint,
    /// The exact text, when it is known statically (`echo`, `printf`, `base64 -d` of those).
    pub(crate) text: Option<String>,
    /// Only the contents of files named in the script (`cat a b`).
    pub(crate) files_only: bool,
    /// The output lists paths (`ls`, `find`): one representative path per listed tree, as
    /// `xargs` will pass them on.
    pub(crate) listed: Option<Vec<String>>,
}

impl Output {
    pub(crate) fn text(text: String) -> Self {
        Output {
            text: Some(text),
            ..Output::default()
        }
    }
    pub(crate) fn unknown() -> Self {
        Output::default()
    }
    /// The output of two commands run one after the other.
    pub(crate) fn then(mut self, next: &Output) -> Output {
        self.taint.merge(next.taint);
        self.text = match (self.text, &next.text) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        self.files_only &= next.files_only;
        self.listed = None;
        self
    }
}

/// Where a command's standard input comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Input {
    /// Nothing the script supplies.
    Inherited,
    /// Text known statically (heredoc, here-string, `echo … |`).
    Static(String),
    /// A file redirect `< path`.
    File(String),
    /// The output of another command.
    Stream(Output),
}

impl Input {
    pub(crate) fn taint(&self) -> Taint {
        match self {
            Input::Stream(o) => o.taint,
            Input::File(_) => Taint {
                secret: true,
                ..Taint::default()
            },
            _ => Taint::default(),
        }
    }
}

/// Decode the body of an ANSI-C quoted string `$'…'`.
pub(crate) fn decode_ansi_c(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(e) = chars.next() else {
            out.push('\\');
            break;
        };
        let simple = match e {
            'n' => Some('\n'),
            't' => Some('\t'),
            'r' => Some('\r'),
            'a' => Some('\x07'),
            'b' => Some('\x08'),
            'e' | 'E' => Some('\x1b'),
            'f' => Some('\x0c'),
            'v' => Some('\x0b'),
            '\\' => Some('\\'),
            '\'' => Some('\''),
            '"' => Some('"'),
            '?' => Some('?'),
            _ => None,
        };
        if let Some(s) = simple {
            out.push(s);
            continue;
        }
        let (radix, max) = match e {
            'x' => (16, 2),
            'u' => (16, 4),
            'U' => (16, 8),
            '0'..='7' => (8, 3),
            'c' => {
                if let Some(n) = chars.next() {
                    out.push(char::from((n as u32 & 0x1f) as u8));
                }
                continue;
            }
            other => {
                out.push('\\');
                out.push(other);
                continue;
            }
        };
        let mut digits = String::new();
        if radix == 8 {
            digits.push(e);
        }
        while digits.len() < max {
            match chars.peek() {
                Some(d) if d.is_digit(radix) => {
                    digits.push(*d);
                    chars.next();
                }
                _ => break,
            }
        }
        match u32::from_str_radix(&digits, radix)
            .ok()
            .and_then(char::from_u32)
        {
            Some(ch) => out.push(ch),
            None => {
                out.push('\\');
                out.push(e);
                out.push_str(if radix == 8 { &digits[1..] } else { &digits });
            }
        }
    }
    out
}

/// Decode standard or URL-safe base64, ignoring whitespace; `None` when it is not base64.
pub(crate) fn decode_base64(text: &str) -> Option<String> {
    let mut bits: u32 = 0;
    let mut nbits = 0;
    let mut out = Vec::new();
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            b'=' => break,
            c if c.is_ascii_whitespace() => continue,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(v);
        nbits += 6;
        if nbits >= 8 {
            nbits -= 8;
            out.push((bits >> nbits) as u8);
            bits &= (1 << nbits) - 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Quote a word for display when it would not read back as itself.
#[cfg(test)]
pub(crate) fn shell_quote(word: &str) -> String {
    let mut out = String::with_capacity(word.len() + 2);
    push_quoted(&mut out, word);
    out
}

/// Append `word` to `out`, quoted when it would not read back as itself.
fn push_quoted(out: &mut String, word: &str) {
    let plain = !word.is_empty()
        && word.chars().all(|c| {
            c.is_ascii_alphanumeric() || "-_./=:@%+,~*?[]{}$^#!".contains(c) || !c.is_ascii()
        });
    if plain {
        out.push_str(word);
    } else {
        out.push('\'');
        for (k, part) in word.split('\'').enumerate() {
            if k > 0 {
                out.push_str(r"'\''");
            }
            out.push_str(part);
        }
        out.push('\'');
    }
}

/// The longest display string, in characters, before [`shorten`] cuts it.
const SHOWN_MAX: usize = 120;

/// An argv as one display string, shortened for a sentence.
pub(crate) fn display_argv(argv: &[Arg]) -> String {
    let mut joined = String::with_capacity(argv.iter().map(|a| a.text.len() + 1).sum());
    for (k, a) in argv.iter().enumerate() {
        if k > 0 {
            joined.push(' ');
        }
        push_quoted(&mut joined, &a.text);
    }
    // As many bytes as characters at most: nothing to cut or replace.
    if joined.len() <= SHOWN_MAX && !joined.contains('\n') {
        return joined;
    }
    shorten(&joined)
}

/// Cut a display string to a readable length on a character boundary.
pub(crate) fn shorten(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(4 * SHOWN_MAX + 3));
    for (k, c) in text.chars().enumerate() {
        if k == SHOWN_MAX {
            out.push('…');
            break;
        }
        out.push(if c == '\n' { ' ' } else { c });
    }
    out
}

/// What the next command in a pipeline reads.
pub(crate) fn stream_input(out: &Output) -> Input {
    match &out.text {
        Some(t) if out.taint == Taint::default() => Input::Static(t.clone()),
        _ => Input::Stream(out.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_variable_names() {
        for s in [
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "OPENAI_API_KEY",
            "DB_PASSWORD",
            "NPM_TOKEN",
            "github_pat",
        ] {
            assert!(is_secret_name(s), "{s}");
        }
        for s in [
            "PATH",
            "HOME",
            "KEYBOARD_LAYOUT",
            "TOKENIZERS_PARALLELISM",
            "SSH_AUTH_SOCK",
            "PATCH",
        ] {
            assert!(!is_secret_name(s), "{s}");
        }
    }

    #[test]
    fn ansi_c_escapes_decode() {
        assert_eq!(decode_ansi_c(r"\x72m"), "rm");
        assert_eq!(decode_ansi_c(r"\162\155"), "rm");
        assert_eq!(decode_ansi_c(r"\u0072m"), "rm");
        assert_eq!(decode_ansi_c(r"a\tb\n"), "a\tb\n");
        assert_eq!(decode_ansi_c(r"\q"), r"\q");
    }

    #[test]
    fn base64_decodes_and_rejects() {
        assert_eq!(decode_base64("cm0gLXJmIC8K").as_deref(), Some("rm -rf /\n"));
        assert_eq!(decode_base64("not base64!"), None);
    }

    #[test]
    fn quoting_round_trips_for_display() {
        assert_eq!(shell_quote("rm"), "rm");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
