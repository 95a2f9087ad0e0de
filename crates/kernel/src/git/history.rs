//! The history of the current branch read in-process: the common `git_log` call (no revision,
//! no paths, no patch) answered without starting a process.
//!
//! On a large repository most of what `git log -n 50` costs is starting git; a tool call that
//! spawns git pays that and airlock's own work on top. Here the object database and the refs are
//! read as data by gitoxide's object and ref stores (no configuration is applied, nothing is
//! executed), the commits are walked in git's own order, and each is printed exactly as
//! `git log` prints the tool's format. Anything this reader does not reproduce exactly — a
//! linked work tree, a shallow clone, a repository extension, a message in another encoding, an
//! identity or date git would print differently, any read error — answers `None`, and the
//! caller runs git over the shadow git directory as for every other read. A test compares the
//! two byte for byte on crafted histories.

use super::{Repo, config};
use gix_object::Find as _;
use gix_ref::file::ReferenceExt as _;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::fmt::Write as _;

/// The options of `git log` that [`log_head`] reproduces, before any `-p`, revision or paths.
pub(crate) fn log_args(max: u64, skip: u64) -> Vec<String> {
    vec![
        "log".into(),
        "--no-color".into(),
        "--no-ext-diff".into(),
        "--no-textconv".into(),
        "--date=iso-strict".into(),
        "--format=commit %H%nAuthor: %an <%ae>%nDate:   %ad%n%n%w(0,4,4)%B".into(),
        format!("--max-count={max}"),
        format!("--skip={skip}"),
    ]
}

/// `git` with [`log_args`] for `HEAD`, or `None` when only git can answer exactly.
pub(crate) fn log_head(repo: &Repo, skip: u64, max: u64) -> Option<String> {
    if repo.git_dir != repo.common_dir || repo.common_dir.join("shallow").exists() {
        return None;
    }
    let entries = config::read_plain(&repo.common_dir.join("config"));
    let version = config::last(&entries, "core.repositoryformatversion").unwrap_or("0");
    if !matches!(version.trim(), "0" | "1")
        || entries.iter().any(|e| e.key.starts_with("extensions."))
    {
        return None;
    }
    let objects = repo.common_dir.join("objects");
    // The objects are untrusted data: should the reader panic on a malformed one, git answers.
    let read = std::panic::AssertUnwindSafe(|| {
        STORE.with_borrow_mut(|slot| {
            if slot.as_ref().is_none_or(|(dir, _)| *dir != objects) {
                *slot = Some((objects.clone(), open_store(&objects)?));
            }
            let (_, odb) = slot.as_ref()?;
            walk_head(repo, odb, skip, max)
        })
    });
    let out = std::panic::catch_unwind(read).ok().flatten();
    if out.is_none() {
        // Whatever went wrong, the next call starts from a fresh store.
        STORE.with_borrow_mut(|slot| *slot = None);
    }
    out
}

thread_local! {
    /// The object store of the repository read last on this thread, kept between calls so its
    /// pack indexes stay mapped (a long-lived server reads the same repository again and
    /// again). Objects never change under their ids; packs added since are found on a miss.
    static STORE: std::cell::RefCell<Option<(std::path::PathBuf, gix_odb::Handle)>> =
        const { std::cell::RefCell::new(None) };
}

fn open_store(objects: &std::path::Path) -> Option<gix_odb::Handle> {
    let mut odb = gix_odb::at(objects, gix_hash::Kind::Sha1).ok()?;
    // Commits are often stored as deltas of each other: keep recent delta bases (16 MiB at most).
    odb.set_pack_cache(|| Box::new(gix_pack::cache::lru::StaticLinkedList::<64>::new(16 << 20)));
    Some(odb)
}

/// The walk of [`log_head`] over an open object store.
fn walk_head(repo: &Repo, odb: &gix_odb::Handle, skip: u64, max: u64) -> Option<String> {
    let kind = gix_hash::Kind::Sha1;
    let refs = gix_ref::file::Store::at(repo.git_dir.clone(), kind);
    let head = refs.find("HEAD").ok()?.peel_to_id(&refs, odb).ok()?;
    let mut walk = Walk {
        odb,
        queue: BinaryHeap::new(),
        seen: HashSet::new(),
        pushed: 0,
    };
    walk.push(head)?;
    let mut out = String::new();
    let mut index = 0u64;
    while index < skip.saturating_add(max) {
        let Some(next) = walk.queue.pop() else { break };
        let commit = gix_object::CommitRef::from_bytes(&next.data, kind).ok()?;
        if index >= skip {
            print(&mut out, &next.id, &commit)?;
        }
        index += 1;
        for parent in commit.parents() {
            walk.push(parent)?;
        }
    }
    Some(out)
}

/// A commit waiting in the walk: ordered by committer date, newest first, and among equal dates
/// first come first (git's `commit_list_insert_by_date`).
struct Queued {
    date: i64,
    order: Reverse<u64>,
    id: gix_hash::ObjectId,
    data: Vec<u8>,
}

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        (self.date, self.order) == (other.date, other.order)
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Queued {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.date, self.order).cmp(&(other.date, other.order))
    }
}

struct Walk<'a> {
    odb: &'a gix_odb::Handle,
    queue: BinaryHeap<Queued>,
    seen: HashSet<gix_hash::ObjectId>,
    pushed: u64,
}

impl Walk<'_> {
    /// Queue `id` unless it was seen: read it, and order it by its committer date.
    fn push(&mut self, id: gix_hash::ObjectId) -> Option<()> {
        if !self.seen.insert(id) {
            return Some(());
        }
        let mut buf = Vec::new();
        let (date, data) = {
            let object = self.odb.try_find(&id, &mut buf).ok()??;
            if object.kind != gix_object::Kind::Commit {
                return None;
            }
            let commit =
                gix_object::CommitRef::from_bytes(object.data, gix_hash::Kind::Sha1).ok()?;
            let (_, _, time) = ident(commit.committer)?;
            // The object's bytes may be a part of the buffer (a loose object's header precedes).
            (seconds(time)?, object.data.to_vec())
        };
        self.queue.push(Queued {
            date,
            order: Reverse(self.pushed),
            id,
            data,
        });
        self.pushed += 1;
        Some(())
    }
}

/// One commit as `git` with [`log_args`] prints it (a user format: a newline after each).
fn print(out: &mut String, id: &gix_hash::ObjectId, c: &gix_object::CommitRef<'_>) -> Option<()> {
    if c.encoding
        .is_some_and(|e| !e.eq_ignore_ascii_case(b"utf-8") && !e.eq_ignore_ascii_case(b"utf8"))
    {
        return None;
    }
    let (name, email, time) = ident(c.author)?;
    let date = iso_strict(time)?;
    let message = std::str::from_utf8(c.message).ok()?;
    if message.contains('\0') {
        return None;
    }
    let _ = write!(
        out,
        "commit {id}\nAuthor: {name} <{email}>\nDate:   {date}\n\n"
    );
    for line in message.split_inclusive('\n') {
        out.push_str("    ");
        out.push_str(line);
    }
    out.push('\n');
    Some(())
}

/// Name, email and time of a raw signature line (`Name <email> 1600000000 +0000`), when it has
/// exactly that shape and git would print the name and email unchanged.
fn ident(raw: &[u8]) -> Option<(&str, &str, &str)> {
    let s = std::str::from_utf8(raw).ok()?;
    let (name, rest) = s.split_once(" <")?;
    let (email, time) = rest.split_once("> ")?;
    let plain = |p: &str| p.trim() == p && !p.contains(['<', '>', '\n', '\0']);
    (plain(name) && plain(email)).then_some((name, email, time))
}

/// The seconds of a raw signature time (`1600000000 +0000`).
fn seconds(raw: &str) -> Option<i64> {
    let (secs, _) = split_time(raw)?;
    Some(secs)
}

/// `SECONDS ±HHMM`, strictly as git writes it; anything else is left to git.
fn split_time(raw: &str) -> Option<(i64, (bool, u32, u32))> {
    let (secs, tz) = raw.split_once(' ')?;
    if secs.is_empty() || !secs.bytes().all(|b| b.is_ascii_digit()) || secs.len() > 12 {
        return None;
    }
    let b = tz.as_bytes();
    if b.len() != 5 || !matches!(b[0], b'+' | b'-') || !b[1..].iter().all(u8::is_ascii_digit) {
        return None;
    }
    let hours: u32 = tz[1..3].parse().ok()?;
    let minutes: u32 = tz[3..5].parse().ok()?;
    if minutes >= 60 {
        return None;
    }
    Some((secs.parse().ok()?, (b[0] == b'-', hours, minutes)))
}

/// git's `--date=iso-strict` of a raw signature time: the author's own offset.
fn iso_strict(raw: &str) -> Option<String> {
    let (secs, (negative, hours, minutes)) = split_time(raw)?;
    let offset = i64::from(hours * 3600 + minutes * 60);
    let local = if negative {
        secs - offset
    } else {
        secs + offset
    };
    if local < 0 {
        return None;
    }
    let days = local.div_euclid(86_400);
    let rest = local.rem_euclid(86_400);
    let (y, m, d) = civil(days);
    let sign = if negative && (hours, minutes) != (0, 0) {
        '-'
    } else {
        '+'
    };
    Some(format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}{sign}{hours:02}:{minutes:02}",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    ))
}

/// Year, month and day of a day count since 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::process::{Command, Stdio};

    fn git(root: &Path, args: &[&str], stdin: Option<&[u8]>) -> String {
        use std::io::Write as _;
        let mut c = Command::new("git")
            .args(args)
            .current_dir(root)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let input = stdin.unwrap_or_default();
        c.stdin.take().unwrap().write_all(input).unwrap();
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "git {args:?}");
        String::from_utf8(o.stdout).unwrap().trim().to_string()
    }

    /// A raw commit object written as given: tree, parents, author, committer, `extra` headers,
    /// a blank line and `message`.
    fn commit(
        root: &Path,
        parents: &[&str],
        author: &str,
        committer: &str,
        extra: &str,
        message: &str,
    ) -> String {
        let tree = git(
            root,
            &["hash-object", "-t", "tree", "-w", "--stdin"],
            Some(b""),
        );
        let mut raw = format!("tree {tree}\n");
        for p in parents {
            raw.push_str(&format!("parent {p}\n"));
        }
        raw.push_str(&format!(
            "author {author}\ncommitter {committer}\n{extra}\n{message}"
        ));
        let args = [
            "hash-object",
            "-t",
            "commit",
            "-w",
            "--stdin",
            "--literally",
        ];
        git(root, &args, Some(raw.as_bytes()))
    }

    /// What git itself prints for [`log_args`], run as every git read runs (shadow git
    /// directory, every neutraliser).
    fn git_log(root: &Path, max: u64, skip: u64) -> String {
        let scratch = root.parent().unwrap().join("scratch");
        let g = crate::git::Git::open(root, &scratch, None, None, &[], false).unwrap();
        let mut args = log_args(max, skip);
        args.extend(["--end-of-options".to_string(), "--".to_string()]);
        String::from_utf8(g.run(&args).unwrap()).unwrap()
    }

    /// A history with a merge, equal and skewed commit dates, offsets either side of UTC (and
    /// `-0000`), an empty message, one without a final newline, CRLF and blank lines, non-ASCII
    /// names. Returns the tip.
    fn crafted(root: &Path) -> String {
        git(root, &["init", "-q", "-b", "main"], None);
        let sig = |who: &str, t: &str| format!("{who} <{}@example.com> {t}", who.len());
        let a = commit(
            root,
            &[],
            &sig("Alice", "1600000000 +0000"),
            &sig("Alice", "1600000000 +0000"),
            "",
            "first\n",
        );
        let b = commit(
            root,
            &[&a],
            &sig("Bo Børk", "1600003600 +0530"),
            &sig("C", "1600007200 +0530"),
            "",
            "subject\n\nbody one\n\n  indented\n",
        );
        let c = commit(
            root,
            &[&a],
            &sig("Zoë", "1600003000 -0000"),
            &sig("C", "1600007200 -0800"),
            "",
            "no final newline",
        );
        let m = commit(
            root,
            &[&b, &c],
            &sig("M", "1600010000 -0800"),
            &sig("M", "1600010000 -0800"),
            "",
            "",
        );
        let d = commit(
            root,
            &[&m],
            &sig("D", "1500000000 +1400"),
            &sig("D", "1500000000 +1400"),
            "",
            "skewed\r\ncrlf\r\n\n\n",
        );
        // An octopus merge of six branches committed in the same second: git lists them in the
        // order it met them.
        let same = sig("S", "1700000000 +0000");
        let arms: Vec<String> = (0..6)
            .map(|k| commit(root, &[&a], &same, &same, "", &format!("arm {k}\n")))
            .collect();
        let mut parents: Vec<&str> = vec![&d];
        parents.extend(arms.iter().map(String::as_str));
        let d = commit(root, &parents, &same, &same, "", "octopus\n");
        let e = commit(
            root,
            &[&d],
            &sig("E", "1700000000 -0330"),
            &sig("E", "1700000000 -0330"),
            "",
            "tip\n",
        );
        git(root, &["update-ref", "refs/heads/main", &e], None);
        e
    }

    fn repo_dir() -> (tempfile::TempDir, std::path::PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("repo");
        std::fs::create_dir(&root).unwrap();
        (tmp, root)
    }

    #[test]
    fn the_in_process_log_is_byte_for_byte_what_git_prints() {
        let (_tmp, root) = repo_dir();
        crafted(&root);
        let repo = Repo::at(&root).unwrap();
        for (max, skip) in [(50, 0), (1, 0), (2, 1), (3, 2), (50, 4), (0, 0), (50, 9)] {
            let ours = log_head(&repo, skip, max).expect("the crafted history is read in-process");
            assert_eq!(ours, git_log(&root, max, skip), "max {max} skip {skip}");
        }
        // Packed objects and packed refs read the same.
        git(&root, &["gc", "-q"], None);
        assert!(root.join(".git/packed-refs").exists());
        assert_eq!(log_head(&repo, 0, 50).unwrap(), git_log(&root, 50, 0));
        // A commit made while this thread's store is open is seen, loose and then packed.
        let tip = git(&root, &["rev-parse", "HEAD"], None);
        let sig = "F <f@example.com> 1700000100 +0100";
        let f = commit(&root, &[&tip], sig, sig, "", "after\n");
        git(&root, &["update-ref", "refs/heads/main", &f], None);
        assert_eq!(log_head(&repo, 0, 3).unwrap(), git_log(&root, 3, 0));
        git(&root, &["repack", "-a", "-d", "-q"], None);
        git(&root, &["prune-packed"], None);
        assert_eq!(log_head(&repo, 0, 50).unwrap(), git_log(&root, 50, 0));
    }

    /// The project's own history (merges of feature branches, many authors' dates): the same
    /// as git's, or left to git where the clone is shallow.
    #[test]
    fn the_projects_own_history_reads_as_git_prints_it() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let root = std::fs::canonicalize(root).unwrap();
        let Ok(repo) = Repo::at(&root) else {
            return assert!(!root.join(".git").exists());
        };
        let ours = log_head(&repo, 3, 400);
        if repo.common_dir.join("shallow").exists() || repo.git_dir != repo.common_dir {
            return assert!(ours.is_none());
        }
        let scratch = tempfile::tempdir().unwrap();
        let g = crate::git::Git::open(&root, scratch.path(), None, None, &[], false).unwrap();
        let mut args = log_args(400, 3);
        args.extend(["--end-of-options".to_string(), "--".to_string()]);
        let theirs = String::from_utf8(g.run(&args).unwrap()).unwrap();
        assert_eq!(ours.as_deref(), Some(theirs.as_str()));
    }

    #[test]
    fn what_the_reader_does_not_reproduce_is_left_to_git() {
        let (_tmp, root) = repo_dir();
        let tip = crafted(&root);
        let repo = Repo::at(&root).unwrap();
        assert!(log_head(&repo, 0, 50).is_some());
        // A message in another encoding, even when it is skipped (it is still read).
        let sig = "L <l@example.com> 1700000001 +0000";
        let latin = commit(&root, &[&tip], sig, sig, "encoding ISO-8859-1\n", "caf\n");
        git(&root, &["update-ref", "refs/heads/main", &latin], None);
        assert!(log_head(&repo, 0, 50).is_none());
        // An identity git would print differently.
        let odd = commit(
            &root,
            &[&tip],
            " Spaced  <s@example.com> 1700000001 +0000",
            sig,
            "",
            "x\n",
        );
        git(&root, &["update-ref", "refs/heads/main", &odd], None);
        assert!(log_head(&repo, 0, 50).is_none());
        // A shallow clone, a repository extension, an unborn branch.
        git(&root, &["update-ref", "refs/heads/main", &tip], None);
        std::fs::write(root.join(".git/shallow"), format!("{tip}\n")).unwrap();
        assert!(log_head(&repo, 0, 50).is_none());
        std::fs::remove_file(root.join(".git/shallow")).unwrap();
        git(
            &root,
            &["config", "extensions.worktreeConfig", "true"],
            None,
        );
        assert!(log_head(&repo, 0, 50).is_none());
        git(
            &root,
            &["config", "--unset", "extensions.worktreeConfig"],
            None,
        );
        assert!(log_head(&repo, 0, 50).is_some());
        git(&root, &["symbolic-ref", "HEAD", "refs/heads/unborn"], None);
        assert!(log_head(&repo, 0, 50).is_none());
    }

    #[test]
    fn dates_are_printed_as_git_prints_them() {
        assert_eq!(iso_strict("0 +0000").unwrap(), "1970-01-01T00:00:00+00:00");
        assert_eq!(
            iso_strict("1600000000 +0000").unwrap(),
            "2020-09-13T12:26:40+00:00"
        );
        assert_eq!(
            iso_strict("1600000000 +0530").unwrap(),
            "2020-09-13T17:56:40+05:30"
        );
        assert_eq!(
            iso_strict("1600000000 -0800").unwrap(),
            "2020-09-13T04:26:40-08:00"
        );
        assert_eq!(
            iso_strict("951782400 +0000").unwrap(),
            "2000-02-29T00:00:00+00:00"
        );
        assert!(iso_strict("1600000000 +05").is_none());
        assert!(iso_strict("-5 +0000").is_none());
        assert!(iso_strict("12 +0099").is_none());
    }
}
