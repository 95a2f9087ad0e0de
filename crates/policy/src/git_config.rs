//! airlock's one reader of git's configuration format, as data: sections (`[core]`,
//! `[remote "o"]`, the old `[a.b]`), `key = value`, bare keys, quotes, escapes, comments and
//! continued lines. No includes are followed and nothing is run. Used for what the host-exec
//! rules need from a repository's configuration (`core.hooksPath`, `include.path`:
//! [`crate::host_exec::git_config_host_exec`]) and for what the kernel's git tools read
//! without starting git (the object format, file-system booleans).

/// One entry: the key as git prints it (section and key lowercased, subsection as written),
/// and its value (`None` for a bare boolean key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    /// `section.key` or `section.subsection.key`.
    pub key: String,
    /// The value, unquoted and unescaped.
    pub value: Option<String>,
}

/// The entries of one configuration text, in order.
///
/// ```
/// use airlock_policy::git_config::parse;
/// let e = parse("[core]\n\tHooksPath = \".githooks\" # husky\n[remote \"O\"]\n\turl = /x\n");
/// assert_eq!(e[0].key, "core.hookspath");
/// assert_eq!(e[0].value.as_deref(), Some(".githooks"));
/// assert_eq!(e[1].key, "remote.O.url");
/// ```
pub fn parse(text: &str) -> Vec<ConfigEntry> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut lines = text.lines();
    while let Some(raw) = lines.next() {
        let mut line = raw.trim().to_string();
        while line.ends_with('\\') && !line.ends_with("\\\\") {
            line.pop();
            match lines.next() {
                Some(n) => line.push_str(n),
                None => break,
            }
        }
        let mut rest = line.as_str();
        if let Some(h) = rest.strip_prefix('[') {
            let Some(end) = h.find(']') else { continue };
            section = section_name(&h[..end]);
            rest = h[end + 1..].trim();
        }
        if rest.is_empty() || rest.starts_with(['#', ';']) {
            continue;
        }
        let (key, value) = match rest.split_once('=') {
            Some((k, v)) => (k.trim(), Some(value_of(v))),
            None => (rest.trim(), None),
        };
        if section.is_empty() || key.is_empty() {
            continue;
        }
        out.push(ConfigEntry {
            key: format!("{section}.{}", key.to_ascii_lowercase()),
            value,
        });
    }
    out
}

/// `core` → `core`; `remote "o"` → `remote.o`; `a.B` → `a.b`.
fn section_name(header: &str) -> String {
    match header.split_once(|c: char| c.is_whitespace()) {
        Some((s, sub)) => format!(
            "{}.{}",
            s.to_ascii_lowercase(),
            sub.trim().trim_matches('"').replace("\\\"", "\"")
        ),
        None => header.to_ascii_lowercase(),
    }
}

/// A value: comments cut outside quotes, quotes removed, `\n` `\t` and `\x` unescaped,
/// surrounding blanks trimmed.
fn value_of(v: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    let mut chars = v.trim().chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(n) => out.push(n),
                None => {}
            },
            '#' | ';' if !quoted => break,
            c => out.push(c),
        }
    }
    out.trim().to_string()
}

/// The last value of `key` among `entries` (git's rule for single-valued keys).
pub fn last<'a>(entries: &'a [ConfigEntry], key: &str) -> Option<&'a str> {
    entries
        .iter()
        .rev()
        .find(|e| e.key == key)
        .and_then(|e| e.value.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_sections_quotes_escapes_comments_and_continued_lines() {
        let e = parse(
            "# top\nno section = x\n[core]\n\trepositoryformatversion = 1 ; c\n\tbare\n\tpager = \"less \\\"-R\\\"\" # x\n\
             [includeIf \"gitdir:~/w/\"]\n\tpath = ~/x.inc\n[a.B] k = v\n\
             [alias]\n\tst = status \\\n\t  --short\n\tpath = not-an-include\n",
        );
        let keys: Vec<&str> = e.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "core.repositoryformatversion",
                "core.bare",
                "core.pager",
                "includeif.gitdir:~/w/.path",
                "a.b.k",
                "alias.st",
                "alias.path"
            ]
        );
        assert_eq!(last(&e, "core.repositoryformatversion"), Some("1"));
        assert_eq!(e[1].value, None);
        assert_eq!(last(&e, "core.pager"), Some("less \"-R\""));
        assert_eq!(last(&e, "alias.st"), Some("status \t  --short"));
        assert_eq!(last(&e, "a.b.k"), Some("v"));
    }
}
