//! [`RelPath`]: a lexically clean, workspace-relative path — no root, no `.`/`..`, no empty or NUL
//! components. It says nothing about symlinks or the disk; only the jail's `ConfinedPath` does.
//! Non-UTF-8 names are kept as bytes (Unix) so a harvested file is never lost or renamed.

use serde::{Serialize, Serializer};
use std::ffi::OsStr;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// Longest accepted relative path in bytes (Linux PATH_MAX).
pub const MAX_PATH_BYTES: usize = 4096;
/// Longest accepted single component in bytes (Linux NAME_MAX).
pub const MAX_NAME_BYTES: usize = 255;

/// Why a string is not a clean relative path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RelPathError {
    /// The path is empty (or only `.`).
    #[error("the path is empty")]
    Empty,
    /// The path contains a NUL byte.
    #[error("the path contains a NUL byte")]
    Nul,
    /// The path is absolute.
    #[error("the path `{0}` is absolute")]
    Absolute(String),
    /// The path contains a `..` component.
    #[error("the path `{0}` contains `..`")]
    ParentDir(String),
    /// The path or one of its components is too long.
    #[error(
        "the path is too long ({0} bytes; the limit is {MAX_PATH_BYTES}, and {MAX_NAME_BYTES} per component)"
    )]
    TooLong(usize),
}

/// A clean workspace-relative path. Construct with [`RelPath::new`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RelPath(PathBuf);

impl RelPath {
    /// Validate and normalise `p` lexically: `./a//b/` becomes `a/b`. Rejects absolute paths,
    /// `..` anywhere, NUL bytes, empty paths and over-long paths.
    pub fn new(p: impl AsRef<Path>) -> Result<RelPath, RelPathError> {
        let p = p.as_ref();
        let bytes = p.as_os_str().as_bytes();
        if bytes.contains(&0) {
            return Err(RelPathError::Nul);
        }
        if bytes.len() > MAX_PATH_BYTES {
            return Err(RelPathError::TooLong(bytes.len()));
        }
        let mut out = PathBuf::new();
        for c in p.components() {
            match c {
                Component::Normal(s) => {
                    if s.len() > MAX_NAME_BYTES {
                        return Err(RelPathError::TooLong(s.len()));
                    }
                    out.push(s)
                }
                Component::CurDir => {}
                Component::ParentDir => {
                    return Err(RelPathError::ParentDir(p.to_string_lossy().into_owned()));
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(RelPathError::Absolute(p.to_string_lossy().into_owned()));
                }
            }
        }
        if out.as_os_str().is_empty() {
            return Err(RelPathError::Empty);
        }
        Ok(RelPath(out))
    }

    /// The path as a `Path` (relative).
    pub fn as_path(&self) -> &Path {
        &self.0
    }

    /// The raw bytes of the path.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_os_str().as_bytes()
    }

    /// The path as UTF-8, if it is.
    pub fn to_str(&self) -> Option<&str> {
        self.0.to_str()
    }

    /// A text form: the UTF-8 path, or the path with invalid bytes escaped as `\xNN`. Control
    /// and bidi characters are kept as they are (JSON carries this form exactly); to show a
    /// path on a terminal use its [`Display`](fmt::Display) form (`{}`), which escapes them
    /// ([`crate::display`]).
    pub fn display(&self) -> String {
        match self.0.to_str() {
            Some(s) => s.to_string(),
            None => escape_bytes(self.as_bytes()),
        }
    }

    /// The components as byte strings.
    pub fn components(&self) -> impl Iterator<Item = &OsStr> {
        self.0.iter()
    }

    /// The parent directory, or `None` for a top-level entry.
    pub fn parent(&self) -> Option<RelPath> {
        let parent = self.0.parent()?;
        if parent.as_os_str().is_empty() {
            None
        } else {
            Some(RelPath(parent.to_path_buf()))
        }
    }

    /// The final component.
    pub fn file_name(&self) -> &OsStr {
        self.0.file_name().unwrap_or(self.0.as_os_str())
    }

    /// `self/child`, validated.
    pub fn join(&self, child: impl AsRef<Path>) -> Result<RelPath, RelPathError> {
        RelPath::new(self.0.join(child))
    }

    /// True when `self` equals `dir` or lies below it.
    pub fn starts_with(&self, dir: &RelPath) -> bool {
        self.0.starts_with(&dir.0)
    }
}

/// Escape non-UTF-8 bytes as `\xNN`, keeping valid UTF-8 runs as they are.
pub fn escape_bytes(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// The path as an operator sees it: [`RelPath::display`] with control and bidi characters
/// escaped ([`crate::display`], one line), so `{}` of a path can never drive a terminal.
impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::display::{Escape, escape_bytes_for_terminal, escape_for_terminal};
        match self.0.to_str() {
            // Borrowed, no copy, for the usual clean name.
            Some(s) => f.write_str(&escape_for_terminal(s, Escape::Name)),
            None => f.write_str(&escape_bytes_for_terminal(self.as_bytes(), Escape::Name)),
        }
    }
}

impl Serialize for RelPath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn normalises_dots_and_slashes() {
        assert_eq!(RelPath::new("./a//b/").unwrap().as_path(), Path::new("a/b"));
    }

    #[test]
    fn rejects_escapes_and_garbage() {
        assert!(matches!(
            RelPath::new("/etc/passwd"),
            Err(RelPathError::Absolute(_))
        ));
        assert!(matches!(
            RelPath::new("a/../../b"),
            Err(RelPathError::ParentDir(_))
        ));
        assert!(matches!(RelPath::new(""), Err(RelPathError::Empty)));
        assert!(matches!(RelPath::new("."), Err(RelPathError::Empty)));
        assert!(matches!(RelPath::new("a\0b"), Err(RelPathError::Nul)));
        assert!(matches!(
            RelPath::new("x".repeat(300)),
            Err(RelPathError::TooLong(_))
        ));
    }

    #[test]
    fn keeps_non_utf8_bytes() {
        let raw = OsStr::from_bytes(b"dir/f\xffo");
        let p = RelPath::new(raw).unwrap();
        assert_eq!(p.as_bytes(), b"dir/f\xffo");
        assert_eq!(p.display(), "dir/f\\xffo");
    }

    #[test]
    fn serialises_as_its_display_form() {
        let p = RelPath::new("./a//b.txt").unwrap();
        assert_eq!(serde_json::to_string(&p).unwrap(), "\"a/b.txt\"");
        let raw = RelPath::new(OsStr::from_bytes(b"f\xffo")).unwrap();
        assert_eq!(serde_json::to_string(&raw).unwrap(), "\"f\\\\xffo\"");
        assert_eq!(raw.to_string(), raw.display());
    }

    #[test]
    fn display_escapes_controls_but_the_text_form_stays_exact() {
        let p = RelPath::new("zz\r\x1b[2A/\u{202e}x\u{ff}").unwrap();
        assert_eq!(p.to_string(), "zz\\r\\x1b[2A/\\u{202e}x\u{ff}");
        assert_eq!(p.display(), "zz\r\x1b[2A/\u{202e}x\u{ff}");
        let raw = RelPath::new(OsStr::from_bytes(b"a\x1b\xff")).unwrap();
        assert_eq!(raw.to_string(), "a\\x1b\\xff");
    }

    #[test]
    fn parent_join_and_prefix() {
        let p = RelPath::new("a/b/c").unwrap();
        assert_eq!(p.parent(), Some(RelPath::new("a/b").unwrap()));
        assert_eq!(RelPath::new("a").unwrap().parent(), None);
        assert_eq!(p.file_name(), "c");
        assert!(p.starts_with(&RelPath::new("a/b").unwrap()));
        assert!(!p.starts_with(&RelPath::new("a/bc").unwrap()));
        assert!(p.join("../x").is_err());
        assert_eq!(p.join("d").unwrap().as_bytes(), b"a/b/c/d");
    }
}
