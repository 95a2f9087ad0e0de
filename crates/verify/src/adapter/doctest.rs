//! Where in its source file a rustdoc test panicked.
//!
//! rustdoc compiles a doc test as a program of its own: a few lines of its own (attributes, an
//! `extern crate`, a `fn main` wrapper when the snippet has none) and then the snippet. A panic
//! reports the source file's name with the line *of that program*, so `src/parse.rs:7:39` for a
//! test whose code block opens at line 11 means the snippet's fourth line, line 15 of the file.
//! How many lines rustdoc puts in front depends on its version, the crate's attributes and the
//! snippet, so [`source_line`] does not guess it: it reads the snippet from the file and keeps
//! the one line, a few lines back from the reported one, that can hold the reported column (not
//! blank, not a comment). When none or several can, the failure points at the code block's
//! opening line, which is always right about where the test is written.

/// Most lines rustdoc is taken to put in front of a snippet.
const MAX_PREAMBLE: u32 = 8;

/// The line of `file_text` (the doc test's source file) where the doc test `test`
/// (`src/parse.rs - parse::Error (line 11)`) panicked, given the reported `line` and `column`;
/// `None` when `test` is not a doc test or its code block is not at the line it names.
pub fn source_line(test: &str, file_text: &str, line: u32, column: Option<u32>) -> Option<u32> {
    let fence = fence_line(test)?;
    let lines: Vec<&str> = file_text.lines().collect();
    let opening = doc_text(lines.get(usize::try_from(fence).ok()?.checked_sub(1)?)?)?;
    if !opening.trim_start().starts_with("```") {
        return None;
    }
    let snippet: Vec<String> = lines[fence as usize..]
        .iter()
        .map_while(|l| doc_text(l))
        .take_while(|t| !t.trim_start().starts_with("```"))
        .map(|t| hidden_shown(t).to_string())
        .collect();
    let column = column.unwrap_or(1) as usize;
    let mut found = None;
    for preamble in 0..=MAX_PREAMBLE {
        let Some(k) = line.checked_sub(preamble).filter(|k| *k >= 1) else {
            break;
        };
        let Some(code) = snippet.get(k as usize - 1) else {
            continue;
        };
        let t = code.trim_start();
        if t.is_empty() || t.starts_with("//") || code.len() < column {
            continue;
        }
        if found.is_some() {
            return Some(fence);
        }
        found = Some(fence + k);
    }
    Some(found.unwrap_or(fence))
}

/// `N` of `… (line N)`.
fn fence_line(test: &str) -> Option<u32> {
    let (_, item) = test.split_once(" - ")?;
    let n = item.rsplit_once("(line ")?.1.strip_suffix(')')?;
    n.parse().ok().filter(|n| *n > 0)
}

/// The text of a `///` or `//!` doc-comment line, or `None` for any other line.
fn doc_text(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let rest = t.strip_prefix("///").or_else(|| t.strip_prefix("//!"))?;
    if rest.starts_with('/') {
        return None; // `////` is an ordinary comment
    }
    Some(rest.strip_prefix(' ').unwrap_or(rest))
}

/// A hidden line (`# code`) is compiled as `code`.
fn hidden_shown(t: &str) -> &str {
    match t.strip_prefix('#') {
        Some("") => "",
        Some(rest) if rest.starts_with(' ') => &rest[1..],
        _ => t,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARSE_RS: &str = r#"use core::str::FromStr;

/// Error parsing a SemVer version or version requirement.
///
/// # Example
///
/// ```
/// use semver::Version;
///
/// fn main() {
///     let err = Version::parse("1.q.r").unwrap_err();
///
///     // "unexpected character 'q' while parsing minor version number"
///     eprintln!("{}", err);
/// }
/// ```
pub struct Error;
"#;

    #[test]
    fn a_doc_test_panic_is_placed_on_its_line_in_the_file() {
        // rustc 1.95 reports `src/parse.rs:7:39` for the `.unwrap_err()` on line 11 here.
        let t = "src/parse.rs - parse::Error (line 7)";
        assert_eq!(source_line(t, PARSE_RS, 7, Some(39)), Some(11));
        // Whatever rustdoc puts in front, the one line that can hold the column is found.
        assert_eq!(source_line(t, PARSE_RS, 5, Some(39)), Some(11));
        assert_eq!(source_line(t, PARSE_RS, 9, Some(39)), Some(11));
    }

    #[test]
    fn without_one_clear_line_the_failure_points_at_the_code_block() {
        let t = "src/parse.rs - parse::Error (line 7)";
        // Column 1 fits several lines: the block's opening line.
        assert_eq!(source_line(t, PARSE_RS, 7, Some(1)), Some(7));
        // Past the snippet: the opening line.
        assert_eq!(source_line(t, PARSE_RS, 40, Some(5)), Some(7));
        // Not a doc test, or its block is not where the name says: left alone.
        assert_eq!(source_line("parse::tests::t", PARSE_RS, 7, Some(1)), None);
        assert_eq!(
            source_line("src/parse.rs - parse::Error (line 3)", PARSE_RS, 7, Some(1)),
            None
        );
    }

    #[test]
    fn hidden_lines_are_compiled_and_counted() {
        let src = "/// ```\n/// # let f = || Some(1u8);\n/// let v: u8 = f().expect(\"a value\");\n/// ```\n";
        let t = "src/lib.rs - f (line 1)";
        // Compiled, the hidden line is `let f = || Some(1u8);`, 21 columns: too short for
        // column 22, which only the second snippet line (line 3 of the file) holds.
        assert_eq!(source_line(t, src, 4, Some(22)), Some(3));
    }
}
