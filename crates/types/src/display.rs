//! Display safety: what airlock shows an operator (status, diffs, the `staged …` lines,
//! approvals, denials) may quote names and contents an adversarial agent chose, so every such
//! rendering goes through [`escape_for_terminal`] (or its [`Shown`] wrapper) and no byte of
//! it can move the cursor, clear the screen, recolour text or reorder it.
//!
//! The scheme, one for every rendering (see `docs/CLI.md`):
//!
//! - `\t` and `\n` are kept in [`Escape::Text`] (file contents, command output, messages) and
//!   shown as `\t` and `\n` in [`Escape::Name`] (a file name is one line).
//! - `\r` is shown as `\r`; every other C0 control character and DEL as `\xNN` (`\x1b` for
//!   ESC, `\x7f` for DEL). A byte that is not UTF-8 (in a path) is also `\xNN`, always `\x80`
//!   or above, so the two never collide.
//! - C1 controls (U+0080–U+009F) and the bidirectional and invisible formatting characters
//!   (U+061C, U+200B–U+200F, U+2028–U+202E, U+2060–U+2064, U+2066–U+2069, U+FEFF) as
//!   `\u{NNNN}` in lowercase hex (`\u{202e}`).
//! - Everything else, backslashes included, is shown as it is: `é`, CJK and emoji unchanged.
//!   The escaping is for reading, not reversible (a name spelled `a\x1b` with a real backslash
//!   reads the same); the JSON outputs carry the exact text.
//! - [`Escape::Json`] is for JSON text already written by serde: it writes the same characters
//!   as JSON `\uNNNN` escapes, so the JSON still parses to the exact value while its bytes
//!   carry no control or bidi character to a terminal.
//!
//! ```
//! use airlock_types::display::{Escape, Shown, escape_for_terminal};
//! assert_eq!(Shown::name("zz\r\x1b[2A").to_string(), "zz\\r\\x1b[2A");
//! assert_eq!(escape_for_terminal("a\tb\u{202e}\n", Escape::Text), "a\tb\\u{202e}\n");
//! assert_eq!(escape_for_terminal("\"\u{202e}\"", Escape::Json), "\"\\u202e\"");
//! assert_eq!(escape_for_terminal("héllo 世界 🦀", Escape::Name), "héllo 世界 🦀");
//! ```

use std::borrow::Cow;
use std::fmt;

/// How a text is escaped: what it is and where it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Escape {
    /// One name on one line (a path, a rule's subject): `\t` and `\n` are escaped too.
    Name,
    /// Multi-line text (file contents, command output, messages): `\t` and `\n` are kept.
    Text,
    /// JSON text as serde wrote it: each character to escape becomes a JSON `\uNNNN`.
    Json,
}

/// True for a character a terminal acts on or that changes how the text around it is laid out
/// or read without being seen: C0 controls, DEL, C1 controls, and the bidirectional and
/// invisible formatting characters. The jail refuses names with one; every rendering escapes
/// them.
pub fn is_control_or_bidi(c: char) -> bool {
    matches!(
        c,
        '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{61c}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{feff}'
    )
}

/// `s` with every character [`is_control_or_bidi`] names written visibly, by the scheme of
/// this module; borrowed unchanged when there is none.
pub fn escape_for_terminal(s: &str, how: Escape) -> Cow<'_, str> {
    // In text, a line break is kept as it is, `\r\n` included (a CR right before a LF only
    // ends the line, so text with Windows line endings reads, and is edited, as it is); a lone
    // CR, which would let later text overwrite the line, is escaped.
    let text = how != Escape::Name;
    let keep = |c: char, next: Option<char>| {
        text && (matches!(c, '\t' | '\n') || (c == '\r' && next == Some('\n')))
    };
    let mut chars = s.chars().peekable();
    let mut plain = true;
    while let Some(c) = chars.next() {
        if is_control_or_bidi(c) && !keep(c, chars.peek().copied()) {
            plain = false;
            break;
        }
    }
    if plain {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if !is_control_or_bidi(c) || keep(c, chars.peek().copied()) {
            out.push(c);
            continue;
        }
        let n = c as u32;
        match (how, c) {
            (Escape::Json, _) => out.push_str(&format!("\\u{n:04x}")),
            (_, '\t') => out.push_str("\\t"),
            (_, '\n') => out.push_str("\\n"),
            (_, '\r') => out.push_str("\\r"),
            _ if n < 0x80 => out.push_str(&format!("\\x{n:02x}")),
            _ => out.push_str(&format!("\\u{{{n:x}}}")),
        }
    }
    Cow::Owned(out)
}

/// Bytes that may not be UTF-8 (a path on Unix), escaped as [`escape_for_terminal`] does,
/// with each byte that is not UTF-8 as `\xNN`.
pub fn escape_bytes_for_terminal(bytes: &[u8], how: Escape) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(&escape_for_terminal(chunk.valid(), how));
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// A text to show, escaped when formatted (`{}`): the [`Display`](fmt::Display) form of
/// [`escape_for_terminal`], for `format!` arguments.
#[derive(Debug, Clone, Copy)]
pub struct Shown<'a>(&'a str, Escape);

impl<'a> Shown<'a> {
    /// A name, shown on one line ([`Escape::Name`]).
    pub fn name(s: &'a str) -> Shown<'a> {
        Shown(s, Escape::Name)
    }

    /// Multi-line text ([`Escape::Text`]).
    pub fn text(s: &'a str) -> Shown<'a> {
        Shown(s, Escape::Text)
    }
}

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&escape_for_terminal(self.0, self.1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_c0_control_and_del_is_escaped_in_names() {
        for n in (0u32..0x20).chain([0x7f]) {
            let c = char::from_u32(n).unwrap();
            let shown = escape_for_terminal(&format!("a{c}b"), Escape::Name).into_owned();
            let expect = match c {
                '\t' => "a\\tb".to_string(),
                '\n' => "a\\nb".to_string(),
                '\r' => "a\\rb".to_string(),
                _ => format!("a\\x{n:02x}b"),
            };
            assert_eq!(shown, expect, "U+{n:04X}");
            assert!(!shown.chars().any(is_control_or_bidi));
        }
        assert_eq!(Shown::name("\x1b[2J").to_string(), "\\x1b[2J");
    }

    #[test]
    fn text_keeps_tab_newline_and_crlf_but_not_a_lone_cr_or_esc() {
        assert_eq!(
            escape_for_terminal("a\tb\nc\r\n\x1b[2J\x1b[3J\x1b[H", Escape::Text),
            "a\tb\nc\r\n\\x1b[2J\\x1b[3J\\x1b[H"
        );
        assert_eq!(Shown::text("x\u{7}y").to_string(), "x\\x07y");
        assert_eq!(
            escape_for_terminal("ok\rM fake\r\n", Escape::Text),
            "ok\\rM fake\r\n"
        );
        assert_eq!(escape_for_terminal("a\r\n", Escape::Name), "a\\r\\n");
    }

    #[test]
    fn c1_controls_are_escaped_as_code_points() {
        for n in 0x80u32..=0x9f {
            let c = char::from_u32(n).unwrap();
            assert!(is_control_or_bidi(c));
            assert_eq!(
                escape_for_terminal(&c.to_string(), Escape::Text),
                format!("\\u{{{n:x}}}")
            );
        }
        assert_eq!(Shown::name("\u{9b}2J").to_string(), "\\u{9b}2J");
    }

    #[test]
    fn bidi_and_invisible_formatting_characters_are_escaped() {
        let class = ['\u{61c}', '\u{feff}']
            .into_iter()
            .chain('\u{200b}'..='\u{200f}')
            .chain('\u{202a}'..='\u{202e}')
            .chain('\u{2066}'..='\u{2069}');
        for c in class {
            let shown = Shown::name(&format!("x{c}y")).to_string();
            assert_eq!(shown, format!("x\\u{{{:x}}}y", c as u32));
        }
        assert_eq!(
            Shown::name("evil\u{202e}txt.exe").to_string(),
            "evil\\u{202e}txt.exe"
        );
    }

    #[test]
    fn ordinary_text_is_unchanged_and_borrowed() {
        for s in [
            "src/main.rs",
            "café/naïve é",
            "日本語のファイル.txt",
            "emoji 🦀🎉 ok",
            "back\\slash and \"quotes\" and ~$HOME",
            "Ωμέγα العربية עברית",
            "",
        ] {
            for how in [Escape::Name, Escape::Text, Escape::Json] {
                assert!(matches!(escape_for_terminal(s, how), Cow::Borrowed(x) if x == s));
            }
        }
        assert!(!is_control_or_bidi('é') && !is_control_or_bidi('\u{a0}'));
    }

    #[test]
    fn json_escapes_parse_back_to_the_exact_text() {
        let exact = "zz\r\x1b[2A\u{85}\u{202e}\u{feff}\u{7f} é 🦀\t";
        let json = serde_json::to_string(&serde_json::json!({ "path": exact })).unwrap();
        let shown = escape_for_terminal(&json, Escape::Json);
        assert!(!shown.chars().any(is_control_or_bidi), "{shown}");
        let back: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(back["path"], exact);
        let pretty = serde_json::to_string_pretty(&serde_json::json!([exact])).unwrap();
        let shown = escape_for_terminal(&pretty, Escape::Json);
        assert!(shown.contains('\n'), "JSON whitespace is kept");
        assert_eq!(
            serde_json::from_str::<Vec<String>>(&shown).unwrap(),
            [exact]
        );
    }

    #[test]
    fn bytes_escape_invalid_utf8_apart_from_controls() {
        assert_eq!(
            escape_bytes_for_terminal(b"f\xffo\x1b\xc2\x9b", Escape::Name),
            "f\\xffo\\x1b\\u{9b}"
        );
        assert_eq!(escape_bytes_for_terminal(b"\x9b", Escape::Name), "\\x9b");
    }
}
