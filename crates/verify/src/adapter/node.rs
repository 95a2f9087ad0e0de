//! node:test specifics. Its JUnit reporter says only "test failed" for a file that did not load
//! (a syntax error); the reason is printed by the child process on the spec stream:
//!
//! ```text
//! file:///ws/test/math.test.js:6
//!   assert.equal(add(2, 2), 4;
//!                           ^
//!
//! SyntaxError: missing ) after argument list
//! ```
//!
//! [`LoadErrors`] picks those up line by line so the JUnit failure can be given its file, line
//! and message.

use std::sync::LazyLock;

use regex::Regex;

use crate::model::{Failure, FailureKind};
use crate::sanitize::{Location, Locator};

static LOCATION_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*(?:file://)?(/[^\s:]+\.[A-Za-z][A-Za-z0-9]{0,4}):(\d+)$").expect("regex")
});
static ERROR_LINE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*([A-Z][A-Za-z]*Error): (.+)$").expect("regex"));

/// Most load errors remembered.
const MAX_LOAD_ERRORS: usize = 32;

/// A file that failed to load, with where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// Where the parser stopped.
    pub location: Location,
    /// `SyntaxError: ...`.
    pub message: String,
}

/// Streaming collector of node load errors.
#[derive(Debug, Default)]
pub struct LoadErrors {
    pending: Option<(Location, usize)>,
    found: Vec<LoadError>,
}

impl LoadErrors {
    /// Feeds one output line.
    pub fn line(&mut self, line: &str, locator: &Locator) {
        if let Some(caps) = LOCATION_LINE.captures(line)
            && let (Some(file), Ok(n)) = (locator.relative(&caps[1]), caps[2].parse())
        {
            self.pending = Some((
                Location {
                    file,
                    line: n,
                    column: None,
                },
                0,
            ));
            return;
        }
        let Some((location, seen)) = self.pending.take() else {
            return;
        };
        if let Some(caps) = ERROR_LINE.captures(line) {
            if self.found.len() < MAX_LOAD_ERRORS {
                self.found.push(LoadError {
                    location,
                    message: format!("{}: {}", &caps[1], &caps[2]),
                });
            }
        } else if seen < 6 {
            self.pending = Some((location, seen + 1));
        }
    }

    /// The load errors found so far.
    pub fn found(&self) -> &[LoadError] {
        &self.found
    }

    /// Gives a compile-kind failure for a file that did not load its location and reason.
    pub fn enrich(&self, failure: &mut Failure) {
        if failure.kind != FailureKind::Compile {
            return;
        }
        let hit = self
            .found
            .iter()
            .find(|e| failure.test == e.location.file || failure.test.ends_with(&e.location.file))
            .or_else(|| (self.found.len() == 1).then(|| &self.found[0]));
        if let Some(err) = hit {
            failure.file = Some(err.location.file.clone());
            failure.line = Some(err.location.line);
            failure.column = None;
            failure.message = err.message.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn finds_the_syntax_error_of_a_file() {
        let out = "file:///ws/test/math.test.js:6\n  assert.equal(add(2, 2), 4;\n                          ^\n\nSyntaxError: missing ) after argument list\n    at compileSourceTextModule (node:internal/modules/esm/utils:346:16)\n";
        let locator = Locator::new(Path::new("/ws"));
        let mut errs = LoadErrors::default();
        for l in out.lines() {
            errs.line(l, &locator);
        }
        assert_eq!(errs.found().len(), 1);
        let mut f = Failure {
            test: "test/math.test.js".into(),
            message: "test failed".into(),
            kind: FailureKind::Compile,
            ..Failure::default()
        };
        errs.enrich(&mut f);
        assert_eq!(f.file.as_deref(), Some("test/math.test.js"));
        assert_eq!(f.line, Some(6));
        assert_eq!(f.message, "SyntaxError: missing ) after argument list");
    }

    #[test]
    fn ignores_locations_without_an_error() {
        let locator = Locator::new(Path::new("/ws"));
        let mut errs = LoadErrors::default();
        for l in [
            "/ws/a.js:3",
            "a",
            "b",
            "c",
            "d",
            "e",
            "f",
            "g",
            "TypeError: late",
        ] {
            errs.line(l, &locator);
        }
        assert!(errs.found().is_empty());
    }
}
