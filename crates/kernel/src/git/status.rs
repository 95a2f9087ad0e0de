//! `git status --porcelain=v2 -z --branch` read into entries.

/// The branch line of a status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Branch {
    /// The commit checked out (`(initial)` before the first commit).
    pub(crate) oid: Option<String>,
    /// The branch name (`(detached)` when detached).
    pub(crate) head: Option<String>,
    /// The upstream branch.
    pub(crate) upstream: Option<String>,
    /// Commits ahead of and behind the upstream.
    pub(crate) ahead_behind: Option<(i64, i64)>,
}

/// One path in git's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The path (the new path of a rename).
    pub(crate) path: String,
    /// The path it was renamed or copied from.
    pub(crate) orig: Option<String>,
    /// The index's status against HEAD (`.` unchanged, `M`, `A`, `D`, `R`, `C`, `T`, `U`), or
    /// `?` untracked.
    pub(crate) index: char,
    /// The work tree's status against the index.
    pub(crate) worktree: char,
}

/// Parse porcelain v2 with `-z`.
pub(crate) fn parse(out: &[u8]) -> (Branch, Vec<Entry>) {
    let mut branch = Branch::default();
    let mut entries = Vec::new();
    let mut records = out.split(|&b| b == 0).map(String::from_utf8_lossy);
    while let Some(rec) = records.next() {
        if rec.is_empty() {
            continue;
        }
        if let Some(h) = rec.strip_prefix("# ") {
            let (k, v) = h.split_once(' ').unwrap_or((h, ""));
            match k {
                "branch.oid" => branch.oid = Some(v.to_string()),
                "branch.head" => branch.head = Some(v.to_string()),
                "branch.upstream" => branch.upstream = Some(v.to_string()),
                "branch.ab" => {
                    let mut it = v.split(' ').map(|n| n.trim_start_matches(['+', '-']));
                    if let (Some(Ok(a)), Some(Ok(b))) =
                        (it.next().map(str::parse), it.next().map(str::parse))
                    {
                        branch.ahead_behind = Some((a, b));
                    }
                }
                _ => {}
            }
            continue;
        }
        let kind = rec.chars().next().unwrap_or(' ');
        // Fields before the path: `1` has 8, `2` has 9, `u` has 10.
        let fields = match kind {
            '1' => 8,
            '2' => 9,
            'u' => 10,
            '?' | '!' => {
                let path = rec.get(2..).unwrap_or("").to_string();
                let c = if kind == '?' { '?' } else { '!' };
                entries.push(Entry {
                    path,
                    orig: None,
                    index: c,
                    worktree: c,
                });
                continue;
            }
            _ => continue,
        };
        let parts: Vec<&str> = rec.splitn(fields + 1, ' ').collect();
        let (Some(xy), Some(path)) = (parts.get(1), parts.get(fields)) else {
            continue;
        };
        let mut xy = xy.chars();
        let index = xy.next().unwrap_or('.');
        let worktree = xy.next().unwrap_or('.');
        let orig = if kind == '2' {
            records.next().map(|o| o.to_string())
        } else {
            None
        };
        entries.push(Entry {
            path: path.to_string(),
            orig,
            index,
            worktree,
        });
    }
    (branch, entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn porcelain_v2_is_read() {
        let out = b"# branch.oid abc\0# branch.head main\0# branch.upstream origin/main\0# branch.ab +2 -1\0\
1 .M N... 100644 100644 100644 aa bb a b.txt\0\
2 R. N... 100644 100644 100644 aa bb R100 new name\0old\0\
? new file\0";
        let (b, e) = parse(out);
        assert_eq!(b.head.as_deref(), Some("main"));
        assert_eq!(b.ahead_behind, Some((2, 1)));
        assert_eq!(e.len(), 3);
        assert_eq!(
            (e[0].path.as_str(), e[0].index, e[0].worktree),
            ("a b.txt", '.', 'M')
        );
        assert_eq!(e[1].orig.as_deref(), Some("old"));
        assert_eq!(e[1].path, "new name");
        assert_eq!(e[2].index, '?');
    }
}
