//! Name folding: how the jail, the host-exec list and the guard compare file names, so a name
//! that a case-insensitive or normalising filesystem treats as another is caught as that one.

use std::ffi::OsStr;

/// A name folded as the sensitive-name rules compare it (case, look-alikes, invisible
/// characters, trailing dots and spaces), for callers matching names of their own.
pub fn fold_name(name: &str) -> String {
    fold(OsStr::new(name))
}

/// A name as the rules compare it: cut at the first `:`, invisible characters dropped,
/// fullwidth and other compatibility look-alikes of ASCII mapped to ASCII, lowercased (with
/// `ſ` as `s` and `ı` as `i`), and trailing dots and spaces trimmed.
pub(crate) fn fold(name: &OsStr) -> String {
    let mut out = String::with_capacity(name.len());
    let lossy = name.to_string_lossy();
    // `name:stream` is the file `name` on NTFS mounts that expose alternate data streams.
    let base = lossy.split(':').next().unwrap_or("");
    for c in base.chars() {
        if is_invisible(c) {
            continue;
        }
        let c = ascii_look_alike(c).unwrap_or(c);
        for l in c.to_lowercase() {
            // Long s and dotless i upper-case to `S` and `I`, as FAT and NTFS compare names.
            out.push(match l {
                '\u{17f}' => 's',
                '\u{131}' => 'i',
                l => l,
            });
        }
    }
    let kept = out.trim_end_matches(['.', ' ']).len();
    out.truncate(kept);
    out
}

/// Default-ignorable code points: zero-width characters, joiners, direction marks, the soft
/// hyphen, variation selectors, the byte-order mark and tag characters. Some filesystems and
/// tools drop them, and they cannot be seen in a name.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{ad}'
            | '\u{34f}'
            | '\u{61c}'
            | '\u{115f}'..='\u{1160}'
            | '\u{17b4}'..='\u{17b5}'
            | '\u{180b}'..='\u{180f}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{3164}'
            | '\u{fe00}'..='\u{fe0f}'
            | '\u{feff}'
            | '\u{ffa0}'
            | '\u{fff0}'..='\u{fff8}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0000}'..='\u{e0fff}'
    )
}

/// The ASCII character a compatibility look-alike stands for (NFKC's mapping for fullwidth
/// forms and the dot look-alikes).
fn ascii_look_alike(c: char) -> Option<char> {
    match c {
        '\u{ff01}'..='\u{ff5e}' => char::from_u32(c as u32 - 0xfee0),
        '\u{2024}' | '\u{fe52}' => Some('.'),
        '\u{fe58}' | '\u{2010}' | '\u{2011}' => Some('-'),
        '\u{fe4d}'..='\u{fe4f}' => Some('_'),
        '\u{3000}' => Some(' '),
        _ => None,
    }
}
