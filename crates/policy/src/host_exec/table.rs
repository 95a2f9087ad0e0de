//! The host-exec list as data: `crates/policy/data/host_exec.toml`, embedded at build time
//! (the build script checks that it parses) and parsed once, on first use. See the file's
//! header for the format; [`Table::classify`] is the one matcher.

use serde::Deserialize;
use std::sync::OnceLock;

/// The table source, embedded at build time.
pub(crate) const SOURCE: &str = include_str!("../../data/host_exec.toml");

/// One tool's entry as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Entry {
    /// Stable id (`host_exec:KIND` in staged flags).
    pub(crate) kind: String,
    /// Who acts on it.
    #[allow(dead_code)]
    pub(crate) tool: String,
    /// Noun phrase.
    pub(crate) what: String,
    /// What runs it.
    pub(crate) why: String,
    /// The documented behaviour.
    #[allow(dead_code)]
    pub(crate) docs: String,
    /// Path patterns (see the file's header).
    pub(crate) patterns: Vec<String>,
    /// Paths that must match.
    #[cfg_attr(not(test), allow(dead_code))]
    #[serde(default)]
    pub(crate) matches: Vec<String>,
    /// Look-alikes that must not match.
    #[cfg_attr(not(test), allow(dead_code))]
    #[serde(default)]
    pub(crate) not_matches: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Source {
    entry: Vec<Entry>,
}

/// A pattern ready to match: its component globs (braces expanded) and whether it also takes
/// everything below.
#[derive(Debug, Clone)]
pub(crate) struct Pattern {
    parts: Vec<String>,
    below: bool,
}

/// The parsed table: entries in file order, each with its compiled patterns.
#[derive(Debug)]
pub(crate) struct Table {
    pub(crate) entries: Vec<(Entry, Vec<Pattern>)>,
}

/// The table, parsed on first use.
pub(crate) fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| parse(SOURCE).expect("data/host_exec.toml parses (checked by the build)"))
}

/// Parse a table source.
pub(crate) fn parse(source: &str) -> Result<Table, String> {
    let src: Source = toml::from_str(source).map_err(|e| e.to_string())?;
    let mut entries = Vec::new();
    for e in src.entry {
        let mut pats = Vec::new();
        for p in &e.patterns {
            pats.extend(compile(p)?);
        }
        entries.push((e, pats));
    }
    Ok(Table { entries })
}

/// A pattern with its braces expanded into one [`Pattern`] per alternative.
fn compile(p: &str) -> Result<Vec<Pattern>, String> {
    let (body, below) = match p.strip_suffix("/**") {
        Some(b) => (b, true),
        None => (p, false),
    };
    let mut alts: Vec<Vec<String>> = vec![Vec::new()];
    for part in body.split('/') {
        if part.is_empty() || part == "**" || part == "." || part == ".." {
            return Err(format!("pattern `{p}`: bad component `{part}`"));
        }
        let expanded = expand(part)?;
        alts = alts
            .into_iter()
            .flat_map(|a| {
                expanded.iter().map(move |x| {
                    let mut a = a.clone();
                    a.push(x.clone());
                    a
                })
            })
            .collect();
    }
    Ok(alts
        .into_iter()
        .map(|parts| Pattern { parts, below })
        .collect())
}

/// `{a,b}x{c,}` → `acx`, `ax`, `bcx`, `bx` (no nesting).
fn expand(part: &str) -> Result<Vec<String>, String> {
    let Some(open) = part.find('{') else {
        return Ok(vec![part.to_string()]);
    };
    let close = part[open..]
        .find('}')
        .map(|c| open + c)
        .ok_or_else(|| format!("`{part}`: an unclosed brace"))?;
    let rest = expand(&part[close + 1..])?;
    let mut out = Vec::new();
    for alt in part[open + 1..close].split(',') {
        for r in &rest {
            out.push(format!("{}{alt}{r}", &part[..open]));
        }
    }
    Ok(out)
}

/// `*` as any run of characters; everything else literal.
fn glob(pat: &str, name: &str) -> bool {
    let Some((head, tail)) = pat.split_once('*') else {
        return pat == name;
    };
    let Some(rest) = name.strip_prefix(head) else {
        return false;
    };
    (0..=rest.len())
        .filter(|&i| rest.is_char_boundary(i))
        .any(|i| glob(tail, &rest[i..]))
}

impl Pattern {
    /// True when the pattern's parts match `names[at..]` consecutively (and, unless it takes
    /// everything below, end at the last name).
    fn matches_at(&self, names: &[String], at: usize) -> bool {
        let end = at + self.parts.len();
        end <= names.len()
            && (self.below || end == names.len())
            && self
                .parts
                .iter()
                .zip(&names[at..end])
                .all(|(p, n)| glob(p, n))
    }

    /// True when the last names of `names` are a strict leading part of this pattern: a
    /// directory the pattern's paths lie below (`.vscode` for `.vscode/tasks.json`).
    fn contains_tail(&self, names: &[String]) -> bool {
        (1..self.parts.len()).any(|k| {
            k <= names.len()
                && self.parts[..k]
                    .iter()
                    .zip(&names[names.len() - k..])
                    .all(|(p, n)| glob(p, n))
        })
    }
}

impl Table {
    /// The first entry (in file order) with a pattern matching the folded `names` at any
    /// position.
    pub(crate) fn classify(&self, names: &[String]) -> Option<&Entry> {
        (0..names.len()).find_map(|at| {
            self.entries
                .iter()
                .find(|(_, pats)| pats.iter().any(|p| p.matches_at(names, at)))
                .map(|(e, _)| e)
        })
    }

    /// The first entry one of whose patterns names paths below the directory `names` (its
    /// last names being the pattern's leading ones).
    pub(crate) fn container(&self, names: &[String]) -> Option<&Entry> {
        self.entries
            .iter()
            .find(|(_, pats)| pats.iter().any(|p| p.contains_tail(names)))
            .map(|(e, _)| e)
    }

    /// The entry with this stable kind.
    pub(crate) fn by_kind(&self, kind: &str) -> Option<&Entry> {
        self.entries
            .iter()
            .find(|(e, _)| e.kind == kind)
            .map(|(e, _)| e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(p: &str) -> Vec<String> {
        let rel = crate::path::RelPath::new(p).unwrap();
        rel.components().map(crate::names::fold).collect()
    }

    #[test]
    fn every_entry_matches_its_own_examples() {
        let t = table();
        let mut kinds = std::collections::HashSet::new();
        for (e, pats) in &t.entries {
            assert!(kinds.insert(e.kind.as_str()), "kind `{}` twice", e.kind);
            assert!(!e.matches.is_empty(), "`{}` has no examples", e.kind);
            for p in &e.patterns {
                assert_eq!(
                    *p,
                    crate::names::fold_name(p),
                    "`{}`: pattern `{p}` must be written folded",
                    e.kind
                );
            }
            let hit = |p: &str| {
                let n = names(p);
                (0..n.len()).any(|at| pats.iter().any(|x| x.matches_at(&n, at)))
            };
            for m in &e.matches {
                assert!(hit(m), "`{}`: `{m}` must match", e.kind);
            }
            for m in &e.not_matches {
                assert!(!hit(m), "`{}`: `{m}` must not match", e.kind);
            }
        }
    }

    #[test]
    fn globs_braces_and_containers() {
        assert_eq!(expand("{,.}a{b,c}").unwrap(), ["ab", "ac", ".ab", ".ac"]);
        assert!(glob("*.pth", "x.pth") && !glob("*.pth", "x.pthx") && glob("a*", "a"));
        assert!(compile("a//b").is_err() && compile("{a").is_err());
        let t = table();
        assert_eq!(t.container(&names(".vscode")).unwrap().kind, "vscode");
        assert_eq!(t.container(&names("app/.kiro")).unwrap().kind, "kiro");
        assert!(t.container(&names("src")).is_none());
        assert!(t.container(&names("vsc")).is_none());
    }
}
