//! The git tools' executors: reads that run no repository code (status, diff, log, show,
//! blame), a commit of what airlock applied, and a push to a configured remote. Every run goes
//! through [`crate::git::Git`], which never lets git read the repository's configuration as
//! configuration.

use super::{Call, Confined, ExecCtx, failure, success};
use crate::args::{
    GitBlameArgs, GitCommitArgs, GitDiffArgs, GitLogArgs, GitPushArgs, GitShowArgs, GitStatusArgs,
    Int,
};
use crate::git::shadow::Setting;
use crate::git::{Git, GitError, config, history, status};
use crate::output::{DEFAULT_BUDGET, Status, untrusted};
use airlock_policy::{Decision, RelPath, Stage};
use airlock_stage::diff as sdiff;
use airlock_stage::journal::{Journal, JournalRecord, NewRecord, args_hash};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::PathBuf;

/// Default number of lines a git read returns.
const DEFAULT_LINES: u64 = 2000;

/// Where shadow git directories are made.
fn scratch(k: &ExecCtx<'_>) -> PathBuf {
    k.settings.temp_dir.join("airlock-git")
}

/// Git for a read: the repository's main configuration file read by airlock (no process).
fn open(k: &ExecCtx<'_>, extra: &[Setting]) -> Result<Git, GitError> {
    open_with(k, extra, false)
}

/// Git for a commit or push: the configuration read by git's parser, includes followed.
fn open_thorough(k: &ExecCtx<'_>, extra: &[Setting]) -> Result<Git, GitError> {
    open_with(k, extra, true)
}

fn open_with(k: &ExecCtx<'_>, extra: &[Setting], thorough: bool) -> Result<Git, GitError> {
    Git::open(
        k.root,
        &scratch(k),
        k.settings.path.as_ref(),
        k.settings.home.as_deref(),
        extra,
        thorough,
    )
}

fn git_failure(e: GitError) -> crate::CallOutcome {
    failure(format!("{e}."), Status::Failed)
}

fn denial(d: Decision) -> crate::CallOutcome {
    crate::CallOutcome {
        ok: false,
        output: d.to_json(),
        truncated: false,
        status: Status::Denied,
        denial: Some(d),
    }
}

/// A line shown first in every git tool's result while the session is unrestricted.
fn banner(k: &ExecCtx<'_>) -> &'static str {
    if k.jail.is_unrestricted() {
        "!!! UNRESTRICTED SESSION: the operator lifted the workspace jail for this session; git_push carries credentials !!!\n"
    } else {
        ""
    }
}

/// Lines `offset..offset+limit` of `text`, held to the output budget, with a footer saying how
/// to read on. Returns the page and whether anything was left out.
fn page(text: &str, offset: Option<Int>, limit: Option<Int>, tool: &str) -> (String, bool) {
    page_lines(
        text,
        offset.map_or(1, Int::get).max(1),
        limit.map_or(DEFAULT_LINES, Int::get),
        tool,
    )
}

fn page_lines(text: &str, offset: u64, limit: u64, tool: &str) -> (String, bool) {
    let total = text.lines().count() as u64;
    let mut body = String::new();
    let mut shown = 0u64;
    for line in text.lines().skip((offset - 1) as usize) {
        if shown >= limit || body.len() + line.len() > DEFAULT_BUDGET {
            break;
        }
        body.push_str(line);
        body.push('\n');
        shown += 1;
    }
    let next = offset + shown;
    let more = next <= total;
    if more {
        let _ = writeln!(
            body,
            "[… {} more lines not shown; call {tool} with offset={next} to read on]",
            total - next + 1
        );
    }
    (body, more)
}

/// The sensitive-file rule for a repository path (as git prints it), if any.
fn sensitive(path: &str) -> bool {
    RelPath::new(path)
        .ok()
        .and_then(|r| airlock_policy::jail::sensitive_rule(&r))
        .is_some()
}

/// A patch with the sections of sensitive files replaced by one line each: git shows history,
/// the jail still decides which contents a tool may show.
fn withhold_sensitive(patch: &str) -> String {
    let mut out = String::with_capacity(patch.len());
    let mut hiding = false;
    for line in patch.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            let b = rest
                .trim_end()
                .rsplit_once(" b/")
                .map_or(rest.trim_end(), |(_, b)| b);
            let a = rest
                .trim_end()
                .strip_prefix("a/")
                .and_then(|r| r.split_once(" b/"))
                .map_or("", |(a, _)| a);
            hiding = sensitive(b) || sensitive(a);
            if hiding {
                let _ = writeln!(
                    out,
                    "[diff of `{b}` withheld: airlock does not show sensitive files]"
                );
                continue;
            }
        } else if !line.starts_with([' ', '+', '-', '@', '\\'])
            && !line.starts_with("index ")
            && !line.starts_with("new file")
            && !line.starts_with("deleted file")
            && !line.starts_with("old mode")
            && !line.starts_with("new mode")
            && !line.starts_with("similarity")
            && !line.starts_with("rename ")
            && !line.starts_with("Binary")
        {
            hiding = false;
        }
        if !hiding {
            out.push_str(line);
        }
    }
    out
}

fn rel_strings(paths: &[Confined]) -> Vec<String> {
    paths
        .iter()
        .filter_map(Confined::rel)
        .map(RelPath::display)
        .collect()
}

fn fenced(
    k: &ExecCtx<'_>,
    source: &str,
    body: &str,
    more: bool,
    extra: Value,
) -> crate::CallOutcome {
    let mut out = json!({ "text": format!("{}{}", banner(k), untrusted(source, body)) });
    if let (Some(o), Some(e)) = (out.as_object_mut(), extra.as_object()) {
        for (key, v) in e {
            o.insert(key.clone(), v.clone());
        }
    }
    if k.jail.is_unrestricted() {
        out["unrestricted"] = json!(true);
    }
    success(out, more)
}

/// `git_status`: git's view (index, work tree, untracked) beside airlock's staged changes.
pub(crate) fn git_status(k: &ExecCtx<'_>, call: &Call<'_, GitStatusArgs>) -> crate::CallOutcome {
    let git = match open(k, &[]) {
        Ok(g) => g,
        Err(e) => return git_failure(e),
    };
    let out = match git.run(&[
        "status",
        "--porcelain=v2",
        "-z",
        "--branch",
        "--untracked-files=normal",
        "--ignore-submodules=all",
    ]) {
        Ok(o) => o,
        Err(e) => return git_failure(e),
    };
    let (branch, entries) = status::parse(&out);
    let snap = match k.store.snapshot() {
        Ok(s) => s,
        Err(e) => return failure(e.to_string(), Status::Failed),
    };
    let mut text = String::new();
    let head = branch.head.clone().unwrap_or_else(|| "?".into());
    let oid = branch.oid.clone().unwrap_or_default();
    let _ = write!(text, "branch {head} at {}", &oid[..oid.len().min(12)]);
    if let Some(u) = &branch.upstream {
        let _ = write!(text, ", upstream {u}");
        if let Some((a, b)) = branch.ahead_behind {
            let _ = write!(text, " (ahead {a}, behind {b})");
        }
    }
    text.push('\n');
    let mut staged_by_airlock = Vec::new();
    if !snap.entries.is_empty() {
        text.push_str(
            "staged by airlock, not yet applied (git does not see these; `apply` writes them):\n",
        );
        for e in &snap.entries {
            let code = sdiff::status_letter(e);
            let _ = writeln!(text, "  {code} {}", e.path.display());
            staged_by_airlock.push(json!({"status": code.to_string(), "path": e.path.display()}));
        }
    }
    let section =
        |title: &str, pick: &dyn Fn(&status::Entry) -> Option<char>, text: &mut String| {
            let mut first = true;
            for e in &entries {
                if let Some(c) = pick(e) {
                    if first {
                        text.push_str(title);
                        first = false;
                    }
                    match &e.orig {
                        Some(o) => {
                            let _ = writeln!(text, "  {c} {o} -> {}", e.path);
                        }
                        None => {
                            let _ = writeln!(text, "  {c} {}", e.path);
                        }
                    }
                }
            }
        };
    section(
        "staged in git's index (the next git commit):\n",
        &|e| (e.index != '.' && e.index != '?' && e.index != '!').then_some(e.index),
        &mut text,
    );
    section(
        "modified on disk, not in git's index:\n",
        &|e| (e.worktree != '.' && e.worktree != '?' && e.worktree != '!').then_some(e.worktree),
        &mut text,
    );
    section(
        "untracked:\n",
        &|e| (e.index == '?').then_some('?'),
        &mut text,
    );
    let clean = snap.entries.is_empty() && entries.is_empty();
    if clean {
        text.push_str("nothing staged by airlock; the work tree matches HEAD\n");
    }
    let git_entries: Vec<Value> = entries
        .iter()
        .map(|e| {
            let mut v = json!({"path": e.path, "index": e.index.to_string(), "worktree": e.worktree.to_string()});
            if let Some(o) = &e.orig {
                v["from"] = json!(o);
            }
            v
        })
        .collect();
    let (body, more) = page(&text, call.args.offset, call.args.limit, "git_status");
    // The structured lists are bounded like the text.
    let git_entries: Vec<Value> = git_entries
        .into_iter()
        .take(DEFAULT_LINES as usize)
        .collect();
    let staged_by_airlock: Vec<Value> = staged_by_airlock
        .into_iter()
        .take(DEFAULT_LINES as usize)
        .collect();
    fenced(
        k,
        "git status",
        &body,
        more,
        json!({
            "branch": branch.head,
            "head": branch.oid,
            "upstream": branch.upstream,
            "staged_by_airlock": staged_by_airlock,
            "git": git_entries,
        }),
    )
}

/// A note naming airlock's staged paths, which git's diff cannot show.
fn staged_note(k: &ExecCtx<'_>) -> String {
    match k.store.snapshot() {
        Ok(s) if !s.entries.is_empty() => format!(
            "note: airlock has {} staged change(s) not yet applied, which git does not see (the `diff` tool shows them)\n",
            s.entries.len()
        ),
        _ => String::new(),
    }
}

/// `git_diff`.
pub(crate) fn git_diff(k: &ExecCtx<'_>, call: &Call<'_, GitDiffArgs>) -> crate::CallOutcome {
    let git = match open(k, &[]) {
        Ok(g) => g,
        Err(e) => return git_failure(e),
    };
    let mut args: Vec<String> = vec![
        "diff".into(),
        "--no-ext-diff".into(),
        "--no-textconv".into(),
        "--no-color".into(),
        "--ignore-submodules=all".into(),
    ];
    if call.args.cached {
        args.push("--cached".into());
    }
    args.push("--end-of-options".into());
    if let Some(r) = &call.args.rev {
        args.push(r.clone());
    }
    args.push("--".into());
    args.extend(rel_strings(&call.paths));
    let out = match git.run(&args) {
        Ok(o) => o,
        Err(e) => return git_failure(e),
    };
    let patch = withhold_sensitive(&String::from_utf8_lossy(&out));
    let text = format!("{}{}", staged_note(k), patch);
    let (body, more) = page(&text, call.args.offset, call.args.limit, "git_diff");
    fenced(k, "git diff", &body, more, json!({}))
}

/// `git_log`.
pub(crate) fn git_log(k: &ExecCtx<'_>, call: &Call<'_, GitLogArgs>) -> crate::CallOutcome {
    let n = call.args.max_count.map_or(50, Int::get);
    let skip = call.args.skip.map_or(0, Int::get);
    let plain = call.args.rev.is_none() && !call.args.patch && call.paths.is_empty();
    let fast = plain
        .then(|| crate::git::Repo::at(k.root).ok())
        .flatten()
        .and_then(|repo| history::log_head(&repo, skip, n));
    let out = match fast {
        Some(text) => text.into_bytes(),
        None => match spawned_log(k, call, n, skip) {
            Ok(o) => o,
            Err(e) => return git_failure(e),
        },
    };
    let mut text = withhold_sensitive(&String::from_utf8_lossy(&out));
    let commits = text.lines().filter(|l| l.starts_with("commit ")).count() as u64;
    if commits == n {
        let _ = writeln!(
            text,
            "[more history may follow; call git_log with skip={}]",
            skip + n
        );
    }
    let (body, more) = page_lines(&text, 1, 100_000, "git_log");
    fenced(k, "git log", &body, more, json!({ "commits": commits }))
}

/// `git_log` by the git CLI over the shadow git directory: a revision, paths or a patch, or a
/// history the in-process reader leaves to git.
fn spawned_log(
    k: &ExecCtx<'_>,
    call: &Call<'_, GitLogArgs>,
    n: u64,
    skip: u64,
) -> Result<Vec<u8>, GitError> {
    let git = open(k, &[])?;
    let mut args = history::log_args(n, skip);
    if call.args.patch {
        args.push("-p".into());
    }
    args.push("--end-of-options".into());
    if let Some(r) = &call.args.rev {
        args.push(r.clone());
    }
    args.push("--".into());
    args.extend(rel_strings(&call.paths));
    git.run(&args)
}

/// `git_show`.
pub(crate) fn git_show(k: &ExecCtx<'_>, call: &Call<'_, GitShowArgs>) -> crate::CallOutcome {
    let git = match open(k, &[]) {
        Ok(g) => g,
        Err(e) => return git_failure(e),
    };
    let args: Vec<String> = match call.paths.first().and_then(Confined::rel) {
        // A file as of the revision: the blob, shown as stored (no filter, no textconv).
        Some(rel) => vec![
            "cat-file".into(),
            "blob".into(),
            format!("{}:{}", call.args.rev, rel.display()),
        ],
        None => vec![
            "show".into(),
            "--no-ext-diff".into(),
            "--no-textconv".into(),
            "--no-color".into(),
            "--date=iso-strict".into(),
            "--end-of-options".into(),
            call.args.rev.clone(),
            "--".into(),
        ],
    };
    let out = match git.run(&args) {
        Ok(o) => o,
        Err(e) => return git_failure(e),
    };
    if out.iter().take(8000).any(|&b| b == 0) {
        return fenced(
            k,
            "git show",
            &format!(
                "a binary file of {} bytes; its content is not shown\n",
                out.len()
            ),
            false,
            json!({}),
        );
    }
    let text = withhold_sensitive(&String::from_utf8_lossy(&out));
    let (body, more) = page(&text, call.args.offset, call.args.limit, "git_show");
    fenced(k, "git show", &body, more, json!({}))
}

/// `git_blame`.
pub(crate) fn git_blame(k: &ExecCtx<'_>, call: &Call<'_, GitBlameArgs>) -> crate::CallOutcome {
    let Some(rel) = call.paths.first().and_then(Confined::rel) else {
        return failure("git_blame needs a file path.", Status::Failed);
    };
    let git = match open(k, &[]) {
        Ok(g) => g,
        Err(e) => return git_failure(e),
    };
    let offset = call.args.offset.map_or(1, Int::get).max(1);
    let limit = call.args.limit.map_or(DEFAULT_LINES, Int::get);
    let mut args: Vec<String> = vec![
        "blame".into(),
        "--no-textconv".into(),
        "--date=short".into(),
        format!("-L{offset},+{limit}"),
    ];
    // (blame reads a revision after `--end-of-options` as a path; the revision was checked not
    // to be an option.)
    if let Some(r) = &call.args.rev {
        args.push(r.clone());
    }
    args.push("--".into());
    args.push(rel.display());
    let o = match git.output(&args) {
        Ok(o) => o,
        Err(e) => return git_failure(e),
    };
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        // Past the end of the file: nothing more to show.
        if err.contains("has only") {
            return fenced(
                k,
                "git blame",
                &format!("{}\n", err.trim()),
                false,
                json!({}),
            );
        }
        return git_failure(GitError::Failed {
            command: "blame".into(),
            stderr: err.trim().to_string(),
        });
    }
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let shown = text.lines().count() as u64;
    let (mut body, mut more) = page(&text, None, None, "git_blame");
    if shown == limit {
        let _ = writeln!(
            body,
            "[more lines may follow; call git_blame with offset={}]",
            offset + limit
        );
        more = true;
    }
    fenced(
        k,
        &format!("git blame {}", rel.display()),
        &body,
        more,
        json!({}),
    )
}

/// The user's own git configuration files (read as data only): a filter configured there
/// applies to the repository as much as one in its own configuration.
fn user_config_files(k: &ExecCtx<'_>) -> Vec<PathBuf> {
    let mut files = vec![PathBuf::from("/etc/gitconfig")];
    if let Some(x) = &k.settings.xdg_config_home {
        files.push(x.join("git").join("config"));
    } else if let Some(h) = &k.settings.home {
        files.push(h.join(".config").join("git").join("config"));
    }
    if let Some(h) = &k.settings.home {
        files.push(h.join(".gitconfig"));
    }
    files
}

/// The paths airlock applied in this session since its last `git_commit` (applies that a
/// later undo reverted do not count), in order, without directories.
pub(crate) fn applied_since_last_commit(records: &[JournalRecord], session: &str) -> Vec<String> {
    let start = records
        .iter()
        .rposition(|r| r.session == session && r.tool == "git_commit" && r.state.took_effect())
        .map_or(0, |i| i + 1);
    let reverted: std::collections::HashSet<i64> = records
        .iter()
        .filter(|r| r.tool == "undo" && r.state.took_effect())
        .filter_map(|r| r.reverts)
        .collect();
    let mut out: Vec<String> = Vec::new();
    for r in &records[start..] {
        if r.session != session
            || r.tool != "apply"
            || !r.state.took_effect()
            || reverted.contains(&r.id)
        {
            continue;
        }
        for f in &r.files {
            use airlock_stage::model::Fingerprint;
            if matches!(f.pre, Fingerprint::Dir) || matches!(f.post, Fingerprint::Dir) {
                continue;
            }
            let p = f.path.display();
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

fn split_z(out: &[u8]) -> Vec<String> {
    out.split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

fn turn(k: &ExecCtx<'_>) -> u64 {
    k.settings.turn.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64
    })
}

/// `git_commit`: commit what airlock applied (or the named paths), with no hook and no filter.
pub(crate) fn git_commit(k: &ExecCtx<'_>, call: &Call<'_, GitCommitArgs>) -> crate::CallOutcome {
    let _serial = match k.session_run() {
        Ok(g) => g,
        Err(e) => return failure(e, Status::Failed),
    };
    let journal = match Journal::open(k.root) {
        Ok((j, _)) => j,
        Err(e) => return failure(format!("The journal cannot be opened: {e}"), Status::Failed),
    };
    let explicit = rel_strings(&call.paths);
    let from_journal = explicit.is_empty();
    let paths = if from_journal {
        match journal.records() {
            Ok(r) => applied_since_last_commit(&r, k.session()),
            Err(e) => return failure(format!("The journal cannot be read: {e}"), Status::Failed),
        }
    } else {
        explicit
    };
    let probe = match open_thorough(k, &[]) {
        Ok(g) => g,
        Err(e) => return git_failure(e),
    };
    // Refuse before touching anything when any filter is configured, wherever git would read
    // it: the repository's configuration with its includes, and the user's and system's.
    let mut all = probe.shadow().entries().to_vec();
    match config::with_includes(
        probe.program(),
        &user_config_files(k),
        k.settings.home.as_deref(),
        &probe.shadow().home(),
    ) {
        Ok(e) => all.extend(e),
        Err(e) => return git_failure(e),
    }
    if let Some((key, file)) = config::filters(&all).into_iter().next() {
        return denial(Decision::deny(
            Stage::Validation,
            "git_commit.filter_configured",
            format!(
                "git's configuration sets the filter `{key}` (in `{}`), and git_commit never runs repository-chosen programs, so it commits nothing while a clean, smudge or process filter is configured.",
                file.display()
            ),
        ));
    }
    if paths.is_empty() {
        return failure(
            "Nothing to commit: airlock applied nothing in this session since its last git_commit; name the paths to commit in `paths`.",
            Status::Failed,
        );
    }
    let name = config::last(&all, "user.name").map(str::to_string);
    let email = config::last(&all, "user.email").map(str::to_string);
    let (Some(name), Some(email)) = (name, email) else {
        return failure(
            "git_commit needs an identity: set `user.name` and `user.email` in the repository's or your git configuration.",
            Status::Failed,
        );
    };
    drop(probe);
    let git = match open_thorough(
        k,
        &[
            Setting::new("user", "name", &name),
            Setting::new("user", "email", &email),
        ],
    ) {
        Ok(g) => g,
        Err(e) => return git_failure(e),
    };
    let Some(branch) = git.shadow().head_ref() else {
        return failure(
            "HEAD is detached; git_commit commits to a branch only.",
            Status::Failed,
        );
    };
    let before = git
        .run(&["rev-parse", "--verify", "-q", "HEAD"])
        .ok()
        .map(|o| String::from_utf8_lossy(&o).trim().to_string());
    // Paths git ignores are not committed unless the call names them.
    let paths: Vec<String> = if from_journal {
        let ignored = match git.output(
            &[
                vec!["check-ignore".to_string(), "-z".into(), "--".into()],
                paths.clone(),
            ]
            .concat(),
        ) {
            Ok(o) => split_z(&o.stdout),
            Err(e) => return git_failure(e),
        };
        paths.into_iter().filter(|p| !ignored.contains(p)).collect()
    } else {
        paths
    };
    let rec = NewRecord {
        session: k.session().to_string(),
        turn: turn(k),
        tool: "git_commit".into(),
        args_hash: args_hash(&json!({"message": call.args.message, "paths": paths})),
        ..NewRecord::default()
    };
    let id = match journal.begin(rec) {
        Ok(id) => id,
        Err(e) => {
            return failure(
                format!("The journal cannot be written: {e}"),
                Status::Failed,
            );
        }
    };
    let intent = crate::git::recover::CommitIntent {
        record: id,
        branch: branch.clone(),
        before: before.clone(),
        message: call.args.message.clone(),
        unrestricted: k.jail.is_unrestricted(),
    };
    if let Err(e) = intent.write(k.root) {
        let _ = journal.fail(id, &e.to_string());
        return git_failure(e);
    }
    let result = commit_paths(&git, &paths, &call.args.message);
    let finish = |journal: &Journal, r: Result<(), String>| {
        match &r {
            Ok(()) => {
                let _ = journal.commit(id);
            }
            Err(e) => {
                let _ = journal.fail(id, e);
            }
        }
        crate::git::recover::CommitIntent::remove(k.root, id);
        let _ = journal.finish_turn(k.session(), turn(k));
        r
    };
    match result {
        Ok(Some(changed)) => {
            let after = git
                .run(&["rev-parse", "--verify", "-q", "HEAD"])
                .map(|o| String::from_utf8_lossy(&o).trim().to_string())
                .unwrap_or_default();
            let _ = finish(&journal, Ok(()));
            let mut text = format!(
                "{}committed {} on {branch}:\n",
                banner(k),
                &after[..after.len().min(12)]
            );
            for p in &changed {
                let _ = writeln!(text, "  {p}");
            }
            let mut out =
                json!({"commit": after, "branch": branch, "paths": changed, "text": text});
            if k.jail.is_unrestricted() {
                out["unrestricted"] = json!(true);
            }
            success(out, false)
        }
        Ok(None) => {
            let _ = finish(&journal, Err("nothing to commit".into()));
            failure("Nothing to commit: the paths match HEAD.", Status::Failed)
        }
        Err(e) => {
            let _ = finish(&journal, Err(e.to_string()));
            git_failure(e)
        }
    }
}

/// Stage `paths` in git's index as they are on disk and commit exactly them (`--only`): other
/// changes in the index stay as they were. `None` when none of them differs from HEAD.
fn commit_paths(
    git: &Git,
    paths: &[String],
    message: &str,
) -> Result<Option<Vec<String>>, GitError> {
    let root = &git.repo().worktree;
    let (present, gone): (Vec<&String>, Vec<&String>) = paths
        .iter()
        .partition(|p| std::fs::symlink_metadata(root.join(p)).is_ok());
    if !present.is_empty() {
        let mut a: Vec<&str> = vec!["add", "--all", "--"];
        a.extend(present.iter().map(|s| s.as_str()));
        git.run(&a)?;
    }
    if !gone.is_empty() {
        let mut a: Vec<&str> = vec!["rm", "--cached", "-q", "--ignore-unmatch", "--"];
        a.extend(gone.iter().map(|s| s.as_str()));
        git.run(&a)?;
    }
    let mut a: Vec<&str> = vec!["diff", "--cached", "--name-only", "-z", "--no-renames"];
    let head = git.run(&["rev-parse", "--verify", "-q", "HEAD"]).is_ok();
    if head {
        a.push("HEAD");
    }
    a.push("--");
    a.extend(paths.iter().map(String::as_str));
    let changed = split_z(&git.run(&a)?);
    if changed.is_empty() {
        return Ok(None);
    }
    let mut a: Vec<&str> = vec![
        "commit",
        "--no-verify",
        "--no-gpg-sign",
        "--no-edit",
        "--cleanup=strip",
        "--quiet",
        "-m",
        message,
        "--only",
        "--",
    ];
    a.extend(changed.iter().map(String::as_str));
    git.run(&a)?;
    Ok(Some(changed))
}

/// Where a push would go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RemoteTarget {
    /// A repository on this machine (a path or `file://`): reached through a local
    /// `git receive-pack`, with no socket.
    Local(PathBuf),
    /// A host over the network.
    Network {
        /// `ssh`, `git` or `https`.
        scheme: String,
        /// The host name or address.
        host: String,
        /// The port the push connects to (the URL's, else the scheme's default).
        port: u16,
    },
}

/// The port a URL's authority names, else the scheme's default (`ssh` 22, `git` 9418, `https`
/// 443). A port that is not a number is refused.
fn remote_port(scheme: &str, explicit: Option<&str>) -> Result<u16, String> {
    match explicit.filter(|p| !p.is_empty()) {
        Some(p) => p
            .parse::<u16>()
            .map_err(|_| format!("the port `{p}` is not a port number")),
        None => Ok(match scheme {
            "git" => 9418,
            "https" => 443,
            _ => 22,
        }),
    }
}

/// What a remote URL names, or why it is refused (a transport that runs a program, `ext::`,
/// or one the git tools do not speak).
pub(crate) fn remote_target(url: &str) -> Result<RemoteTarget, String> {
    if let Some(p) = url.strip_prefix("file://") {
        return Ok(RemoteTarget::Local(PathBuf::from(p)));
    }
    if url.contains("::") {
        return Err(format!("the transport of `{url}` runs a program"));
    }
    if let Some((scheme, rest)) = url.split_once("://") {
        let scheme = scheme.to_ascii_lowercase();
        if !matches!(
            scheme.as_str(),
            "ssh" | "git" | "https" | "git+ssh" | "ssh+git"
        ) {
            return Err(format!("the scheme `{scheme}` is not one git_push speaks"));
        }
        let authority = rest.split('/').next().unwrap_or("");
        let host_port = authority.rsplit('@').next().unwrap_or("");
        let (host, explicit_port) = if let Some(v6) = host_port.strip_prefix('[') {
            let (h, after) = v6.split_once(']').unwrap_or((v6, ""));
            (h.to_string(), after.strip_prefix(':'))
        } else {
            let (h, p) = host_port.split_once(':').unwrap_or((host_port, ""));
            (h.to_string(), Some(p))
        };
        if host.is_empty() {
            return Err(format!("`{url}` names no host"));
        }
        let scheme = if scheme.contains("ssh") {
            "ssh".into()
        } else {
            scheme
        };
        let port = remote_port(&scheme, explicit_port)?;
        return Ok(RemoteTarget::Network { scheme, host, port });
    }
    // scp-like `[user@]host:path`: a colon before any slash.
    if let Some(colon) = url.find(':')
        && !url[..colon].contains('/')
    {
        let host = url[..colon].rsplit('@').next().unwrap_or("").to_string();
        if host.is_empty() || host.starts_with('-') {
            return Err(format!("`{url}` names no usable host"));
        }
        return Ok(RemoteTarget::Network {
            scheme: "ssh".into(),
            host,
            port: 22,
        });
    }
    Ok(RemoteTarget::Local(PathBuf::from(url)))
}

/// Decides whether a push may reach a remote: [`PolicyGate`] (the operator's `[net]` grants)
/// in a kernel, [`LocalOnly`] where no grant can exist.
pub(crate) trait RemoteGate: Sync {
    /// `Ok` when the push may reach `target`, else the denial.
    fn reach(&self, remote: &str, target: &RemoteTarget) -> Result<(), Decision>;
}

/// The default gate: repositories on this machine only; every network host is denied, since no
/// network grant exists for it.
pub(crate) struct LocalOnly;

impl RemoteGate for LocalOnly {
    fn reach(&self, remote: &str, target: &RemoteTarget) -> Result<(), Decision> {
        match target {
            RemoteTarget::Local(_) => Ok(()),
            RemoteTarget::Network { scheme, host, .. } => Err(Decision::deny(
                Stage::Permission,
                "git_push.network_not_granted",
                format!(
                    "The remote `{remote}` is reached over {scheme} at `{host}`, and the network policy grants no access to that host."
                ),
            )),
        }
    }
}

/// The network policy as a push's gate: the operator's `[net]` grants (user config, never a
/// workspace file), resolved like a command's, decide the remote's `host:port` for the command
/// `git push REMOTE`. Deny rules win; an `ask` rule is a refusal here (nobody is asked mid-push);
/// a local remote opens no socket and needs no grant.
pub(crate) struct PolicyGate {
    policy: Option<airlock_policy::net::NetPolicy>,
}

impl PolicyGate {
    /// The gate of the workspace `root` under the grants `rules` (none: nothing granted).
    pub(crate) fn new(
        root: &std::path::Path,
        rules: Option<&airlock_policy::net::NetRuleSet>,
    ) -> PolicyGate {
        let policy = rules
            .filter(|r| !r.is_empty())
            .map(|r| super::net::resolve(root, r));
        PolicyGate { policy }
    }
}

impl RemoteGate for PolicyGate {
    fn reach(&self, remote: &str, target: &RemoteTarget) -> Result<(), Decision> {
        let RemoteTarget::Network { scheme, host, port } = target else {
            return Ok(());
        };
        let ruling = self
            .policy
            .as_ref()
            .map(|p| p.decide(host, *port, &format!("git push {remote}")));
        match ruling {
            Some(r) if r.allowed => Ok(()),
            Some(r) => Err(Decision::deny(
                Stage::Permission,
                "git_push.network_not_granted",
                format!(
                    "The remote `{remote}` is reached over {scheme} at `{host}:{port}`: {} ({})",
                    r.reason, r.rule
                ),
            )),
            None => LocalOnly.reach(remote, target),
        }
    }
}

/// The remote gate of a kernel: its operator's network grants.
fn remote_gate(k: &ExecCtx<'_>) -> PolicyGate {
    PolicyGate::new(k.root, k.net)
}

/// The ssh a push runs: the operator's ssh configuration and key files are not read (ssh finds
/// them through the password database, whatever `HOME` says), and it never prompts. Only an
/// unrestricted session's agent (`SSH_AUTH_SOCK`, passed then) can authenticate it.
pub(crate) fn ssh_command(unrestricted: bool) -> String {
    let agent = if unrestricted {
        ""
    } else {
        " -o IdentitiesOnly=yes -o IdentityAgent=none"
    };
    format!("ssh -F /dev/null -o BatchMode=yes -o IdentityFile=none{agent}")
}

/// The credentials an unrestricted session passes to the push, and nothing else.
const PUSH_CREDENTIALS: &[&str] = &["GH_TOKEN", "GITHUB_TOKEN", "SSH_AUTH_SOCK"];

/// `git_push`: push one branch to the same branch of a configured remote; no force, no
/// deletion, no hook, on either side when the remote is local.
pub(crate) fn git_push(k: &ExecCtx<'_>, call: &Call<'_, GitPushArgs>) -> crate::CallOutcome {
    let probe = match open_thorough(k, &[]) {
        Ok(g) => g,
        Err(e) => return git_failure(e),
    };
    let remotes = config::remotes(probe.shadow().entries());
    let Some((name, url, push_url)) = remotes
        .iter()
        .find(|(n, _, _)| *n == call.args.remote)
        .cloned()
    else {
        let known: Vec<String> = remotes.iter().map(|(n, _, _)| format!("`{n}`")).collect();
        return denial(Decision::deny(
            Stage::Validation,
            "git_push.unknown_remote",
            format!(
                "`{}` is not one of the repository's configured remotes ({}); git_push pushes only to those, never to a URL.",
                call.args.remote,
                if known.is_empty() {
                    "there are none".to_string()
                } else {
                    known.join(", ")
                }
            ),
        ));
    };
    let url = push_url.unwrap_or(url);
    let target = match remote_target(&url) {
        Ok(t) => t,
        Err(why) => {
            return denial(Decision::deny(
                Stage::Validation,
                "git_push.remote_transport",
                format!("The remote `{name}` cannot be pushed to: {why}."),
            ));
        }
    };
    if let Err(d) = remote_gate(k).reach(&name, &target) {
        return denial(d);
    }
    let branch = match &call.args.branch {
        Some(b) => b.clone(),
        None => match probe
            .shadow()
            .head_ref()
            .and_then(|r| r.strip_prefix("refs/heads/").map(str::to_string))
        {
            Some(b) => b,
            None => {
                return failure(
                    "HEAD is detached; name the branch to push in `branch`.",
                    Status::Failed,
                );
            }
        },
    };
    let full = format!("refs/heads/{branch}");
    if probe.run(&["check-ref-format", &full]).is_err()
        || probe.run(&["rev-parse", "--verify", "-q", &full]).is_err()
    {
        return failure(
            format!("There is no local branch `{branch}`."),
            Status::Failed,
        );
    }
    drop(probe);
    let mut git = match open_thorough(
        k,
        &[Setting {
            section: "remote".into(),
            sub: Some(name.clone()),
            key: "url".into(),
            value: url.clone(),
        }],
    ) {
        Ok(g) => g,
        Err(e) => return git_failure(e),
    };
    let mut pass: Vec<(OsString, OsString)> = Vec::new();
    if k.jail.is_unrestricted() {
        pass.extend(
            k.settings
                .env
                .iter()
                .filter(|(key, _)| PUSH_CREDENTIALS.iter().any(|c| key == c))
                .cloned(),
        );
    }
    if matches!(&target, RemoteTarget::Network { scheme, .. } if scheme == "ssh") {
        pass.push((
            "GIT_SSH_COMMAND".into(),
            ssh_command(k.jail.is_unrestricted()).into(),
        ));
    }
    git.pass_env(pass);
    let journal = match Journal::open(k.root) {
        Ok((j, _)) => j,
        Err(e) => return failure(format!("The journal cannot be opened: {e}"), Status::Failed),
    };
    let id = match journal.begin(NewRecord {
        session: k.session().to_string(),
        turn: turn(k),
        tool: "git_push".into(),
        args_hash: args_hash(&json!({"remote": name, "branch": branch})),
        ..NewRecord::default()
    }) {
        Ok(id) => id,
        Err(e) => {
            return failure(
                format!("The journal cannot be written: {e}"),
                Status::Failed,
            );
        }
    };
    let mut args: Vec<String> = vec![
        "push".into(),
        "--porcelain".into(),
        "--no-verify".into(),
        "--no-recurse-submodules".into(),
    ];
    if matches!(target, RemoteTarget::Local(_)) {
        // The receiving side runs on this machine, in the remote repository: its hooks and its
        // worktree update are switched off too.
        args.push(format!(
            "--receive-pack={} -c core.hooksPath=/dev/null -c core.fsmonitor= -c receive.denyCurrentBranch=refuse -c receive.denyDeletes=true -c receive.denyNonFastForwards=true -c receive.autogc=false -c receive.procReceiveRefs= receive-pack",
            git.program().display()
        ));
    }
    args.push(name.clone());
    args.push(format!("{full}:{full}"));
    let o = match git.output(&args) {
        Ok(o) => o,
        Err(e) => {
            let _ = journal.fail(id, &e.to_string());
            return git_failure(e);
        }
    };
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let _ = journal.finish_turn(k.session(), turn(k));
    if !o.status.success() {
        let _ = journal.fail(id, report.trim());
        return failure(
            format!(
                "git push to `{name}` failed (nothing forced, nothing deleted):\n{}",
                report.trim()
            ),
            Status::Failed,
        );
    }
    let _ = journal.commit(id);
    let mut out = json!({
        "remote": name,
        "branch": branch,
        "text": format!("{}{}", banner(k), untrusted("git push", &report)),
    });
    if k.jail.is_unrestricted() {
        out["unrestricted"] = json!(true);
    }
    success(out, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_urls_are_classified() {
        assert_eq!(
            remote_target("/srv/r.git"),
            Ok(RemoteTarget::Local("/srv/r.git".into()))
        );
        assert_eq!(
            remote_target("file:///srv/r.git"),
            Ok(RemoteTarget::Local("/srv/r.git".into()))
        );
        assert_eq!(
            remote_target("git@github.com:o/r.git"),
            Ok(RemoteTarget::Network {
                scheme: "ssh".into(),
                host: "github.com".into(),
                port: 22
            })
        );
        assert_eq!(
            remote_target("https://u@example.com:8443/r"),
            Ok(RemoteTarget::Network {
                scheme: "https".into(),
                host: "example.com".into(),
                port: 8443
            })
        );
        assert!(remote_target("ext::sh -c touch% /tmp/x").is_err());
        assert!(remote_target("fd::3").is_err());
        assert!(remote_target("http://example.com/r").is_err());
        let d = LocalOnly
            .reach("origin", &remote_target("git://127.0.0.1/r").unwrap())
            .unwrap_err();
        assert_eq!(d.rule, "git_push.network_not_granted");
        assert!(remote_target("https://example.com:x/r").is_err());
        assert_eq!(
            remote_target("ssh://git@host.example:2222/r"),
            Ok(RemoteTarget::Network {
                scheme: "ssh".into(),
                host: "host.example".into(),
                port: 2222
            })
        );
    }

    /// The ssh of a push reads no key file and no configuration of the operator's, and uses an
    /// agent only in an unrestricted session: checked with ssh's own view of its settings.
    #[test]
    fn the_ssh_of_a_push_reads_no_key_file_and_no_configuration() {
        let effective = |unrestricted: bool| -> String {
            let words: Vec<String> = ssh_command(unrestricted)
                .split_whitespace()
                .skip(1)
                .map(str::to_string)
                .collect();
            let out = std::process::Command::new("ssh")
                .arg("-G")
                .args(&words)
                .arg("example.org")
                .output()
                .expect("ssh is installed");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let plain = effective(false);
        for line in [
            "identityfile none",
            "identityagent none",
            "identitiesonly yes",
            "batchmode yes",
        ] {
            assert!(plain.lines().any(|l| l == line), "{line} in:\n{plain}");
        }
        let unrestricted = effective(true);
        assert!(
            unrestricted.lines().any(|l| l == "identityfile none"),
            "{unrestricted}"
        );
        assert!(
            !unrestricted.lines().any(|l| l == "identityagent none"),
            "{unrestricted}"
        );
    }

    /// A push to the network is decided by the operator's `[net]` grants, by host and port.
    #[test]
    fn a_push_over_the_network_needs_a_grant_for_its_host_and_port() {
        let root = tempfile::tempdir().unwrap();
        let gh = remote_target("https://github.com/o/r.git").unwrap();
        let other_port = remote_target("https://github.com:8443/o/r.git").unwrap();
        let elsewhere = remote_target("git@gitlab.com:o/r.git").unwrap();
        let none = PolicyGate::new(root.path(), None);
        assert!(none.reach("origin", &gh).is_err());
        let rules = airlock_policy::net::NetRuleSet::parse(&["github.com:443"], &[]).unwrap();
        let gate = PolicyGate::new(root.path(), Some(&rules));
        assert_eq!(gate.reach("origin", &gh), Ok(()));
        for t in [&other_port, &elsewhere] {
            let d = gate.reach("origin", t).unwrap_err();
            assert_eq!(d.rule, "git_push.network_not_granted", "{t:?}");
            assert_eq!(d.stage, Stage::Permission);
        }
        let denied =
            airlock_policy::net::NetRuleSet::parse(&["*.example.org"], &["git.example.org"])
                .unwrap();
        let gate = PolicyGate::new(root.path(), Some(&denied));
        let refused = remote_target("https://git.example.org/r").unwrap();
        let granted = remote_target("git@code.example.org:o/r").unwrap();
        assert!(gate.reach("origin", &refused).is_err());
        assert_eq!(gate.reach("origin", &granted), Ok(()));
        assert_eq!(
            gate.reach("origin", &RemoteTarget::Local(root.path().into())),
            Ok(())
        );
    }

    #[test]
    fn sensitive_sections_are_withheld() {
        let p = "diff --git a/.env b/.env\nindex 1..2\n--- a/.env\n+++ b/.env\n@@ -1 +1 @@\n-A=1\n+A=2\ndiff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n";
        let w = withhold_sensitive(p);
        assert!(!w.contains("A=2"), "{w}");
        assert!(w.contains("withheld"));
        assert!(w.contains("+b"));
    }
}
