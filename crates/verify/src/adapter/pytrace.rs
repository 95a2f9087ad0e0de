//! Python errors that stop pytest before it writes a report: a syntax or import error in code
//! that `conftest.py` (or a plugin) imports, reported by pytest as `ImportError while loading
//! conftest` with the traceback prefixed `E `. Each becomes a failure at the file and line of
//! the error (the column from the caret line when there is one), whatever file it is in.

use super::FailureSink;
use crate::model::{Failure, FailureKind};
use crate::sanitize::Locator;

/// The error names that mean the code does not compile or load.
const LOAD_ERRORS: &[&str] = &[
    "SyntaxError",
    "IndentationError",
    "TabError",
    "ImportError",
    "ModuleNotFoundError",
];

/// A `File "PATH", line N` frame line (pytest may prefix it with `E` and spaces).
fn frame(line: &str) -> Option<(&str, u32)> {
    let rest = line.trim_start_matches(['E', ' ']).trim_start();
    let rest = rest.strip_prefix("File \"")?;
    let (path, rest) = rest.split_once('"')?;
    let n = rest.strip_prefix(", line ")?;
    let n: String = n.chars().take_while(char::is_ascii_digit).collect();
    Some((path, n.parse().ok()?))
}

/// `SyntaxError: invalid syntax` (with pytest's `E` prefix or not): the name and message.
fn error(line: &str) -> Option<(&'static str, String)> {
    let rest = line.trim_start_matches(['E', ' ']).trim_start();
    LOAD_ERRORS.iter().find_map(|name| {
        rest.strip_prefix(name)
            .and_then(|r| r.strip_prefix(':'))
            .map(|msg| (*name, format!("{name}:{msg}")))
    })
}

/// Reads `lines` (pytest's output when it wrote no report) and sends one failure per load
/// error, located at the last frame before it; true when it found any.
pub fn collection_errors<'a>(
    lines: impl Iterator<Item = &'a str>,
    locator: &Locator,
    sink: &mut dyn FailureSink,
) -> bool {
    let mut last: Option<(String, u32, Option<u32>)> = None;
    let mut code_at: Option<usize> = None;
    let mut found = false;
    let mut seen = std::collections::HashSet::new();
    for line in lines {
        if let Some((path, n)) = frame(line) {
            last = Some((path.to_string(), n, None));
            code_at = None;
            continue;
        }
        let body = line.trim_start_matches(['E', ' ']);
        if let Some(l) = &mut last {
            if body.trim() == "^"
                || (body.trim().starts_with('^') && body.trim().chars().all(|c| c == '^'))
            {
                if let Some(start) = code_at {
                    let caret = line.find('^').unwrap_or(start);
                    l.2 = u32::try_from(caret.saturating_sub(start) + 1).ok();
                }
                continue;
            }
            if code_at.is_none() && !body.trim().is_empty() && error(line).is_none() {
                code_at = Some(line.len() - line.trim_start_matches(['E', ' ']).len());
            }
        }
        let Some((name, message)) = error(line) else {
            continue;
        };
        let Some((path, n, col)) = last.take() else {
            continue;
        };
        if !seen.insert((path.clone(), n, message.clone())) {
            continue;
        }
        let file = locator.relative(&path);
        let kind = if matches!(name, "SyntaxError" | "IndentationError" | "TabError") {
            FailureKind::Compile
        } else {
            FailureKind::Test
        };
        sink.failure(Failure {
            test: "(collection)".into(),
            file,
            line: Some(n),
            column: col,
            message,
            kind,
            ..Failure::default()
        });
        found = true;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn a_syntax_error_imported_by_conftest_is_located() {
        let out = "ImportError while loading conftest '/ws/conftest.py'.\nconftest.py:1: in <module>\n    import lib.core\nE     File \"/ws/lib/core.py\", line 1\nE       def f(:\nE             ^\nE   SyntaxError: invalid syntax\n";
        let loc = Locator::new(Path::new("/ws"));
        let mut got = Vec::new();
        assert!(collection_errors(out.lines(), &loc, &mut |f: Failure| got.push(f)));
        assert_eq!(got.len(), 1, "{got:?}");
        let f = &got[0];
        assert_eq!(f.file.as_deref(), Some("lib/core.py"));
        assert_eq!(f.line, Some(1));
        assert_eq!(f.column, Some(7));
        assert_eq!(f.kind, FailureKind::Compile);
        assert_eq!(f.message, "SyntaxError: invalid syntax");
    }

    #[test]
    fn a_missing_module_is_located_at_its_import() {
        let out = "Traceback (most recent call last):\n  File \"/ws/conftest.py\", line 3, in <module>\n    import nothere\nModuleNotFoundError: No module named 'nothere'\n";
        let loc = Locator::new(Path::new("/ws"));
        let mut got = Vec::new();
        assert!(collection_errors(out.lines(), &loc, &mut |f: Failure| got.push(f)));
        assert_eq!(got[0].file.as_deref(), Some("conftest.py"));
        assert_eq!(got[0].line, Some(3));
        assert_eq!(got[0].kind, FailureKind::Test);
        let mut none = Vec::new();
        assert!(!collection_errors(
            "all good\n1 passed".lines(),
            &loc,
            &mut |f: Failure| none.push(f)
        ));
    }
}
