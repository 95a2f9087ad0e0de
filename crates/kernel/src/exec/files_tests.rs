//! The file executors on their own: a temporary workspace, a real staging store and a real
//! jail, no kernel. Each executor stages through the path the jail confined and leaves the
//! workspace untouched.

use super::files;
use super::{Call, Confined, ExecCtx, ExecLimits, Link, SessionLocks};
use crate::api::{CallContext, Cancel, DenyAll};
use crate::args::*;
use crate::output::Status;
use airlock_policy::RelPath;
use airlock_policy::jail::{Access, Jail};
use airlock_stage::store::Store;
use airlock_stage::view;
use serde_json::Value;
use std::path::PathBuf;

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    store: Store,
    jail: Jail,
    locks: SessionLocks,
    verify_command: Option<Vec<String>>,
    outcomes: Vec<Value>,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(root.join("notes.txt"), "alpha\nbeta\nalpha\n").unwrap();
        std::fs::create_dir(root.join("src")).unwrap();
        std::fs::write(root.join("src/a.rs"), "old\n").unwrap();
        let store = Store::open(&root, "t").unwrap();
        let jail = Jail::open(&root).unwrap();
        Fixture {
            _dir: dir,
            root,
            store,
            jail,
            locks: SessionLocks::new(),
            verify_command: None,
            outcomes: Vec::new(),
        }
    }

    fn ctx(&self, max_file_bytes: u64) -> ExecCtx<'_> {
        ExecCtx::new(
            &self.root,
            "t",
            &self.store,
            &self.jail,
            &self.locks,
            ExecLimits {
                max_file_bytes,
                allow_degraded: false,
                expose_sensitive: &[],
                verify_command: &self.verify_command,
                verify_budget: None,
                settings: &TEST_SETTINGS,
                net: None,
            },
            &self.outcomes,
        )
    }

    fn confine(&self, path: &str, access: Access, link: Link) -> Confined {
        let proof = match link {
            Link::Follow => self.jail.confine(path, access),
            Link::Itself => self.jail.confine_nofollow(path, access),
        }
        .expect("the jail allows it");
        Confined::from_jail(proof, link)
    }

    fn staged(&self, path: &str) -> Option<Vec<u8>> {
        view::read_merged(&self.store, &RelPath::new(path).unwrap()).unwrap()
    }

    fn on_disk(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(self.root.join(path)).ok()
    }

    fn staged_count(&self) -> usize {
        self.store.snapshot().unwrap().entries.len()
    }
}

fn call<'c, A>(args: A, paths: Vec<Confined>, cx: &'c CallContext<'c>) -> Call<'c, A> {
    Call {
        args,
        paths,
        script: None,
        patch: None,
        vouched: None,
        cx,
    }
}

fn write_args(path: &str, content: &str) -> WriteFileArgs {
    WriteFileArgs {
        path: path.into(),
        content: content.into(),
        encoding: Encoding::Utf8,
        executable: None,
    }
}

#[test]
fn write_file_stages_at_the_confined_path_and_leaves_the_workspace() {
    let f = Fixture::new();
    let approver = DenyAll::default();
    let cx = CallContext::new(Cancel::new(), &approver);
    // The executor acts on the jail's path, not on whatever the raw argument says.
    let c = call(
        write_args("ignored.txt", "new\n"),
        vec![f.confine("src/b.rs", Access::Write, Link::Follow)],
        &cx,
    );
    let o = files::write_file(&f.ctx(1 << 20), &c);
    assert!(o.ok, "{}", o.output);
    assert_eq!(o.status, Status::Ok);
    assert_eq!(f.staged("src/b.rs").as_deref(), Some(&b"new\n"[..]));
    assert_eq!(f.staged("ignored.txt"), None);
    assert_eq!(f.on_disk("src/b.rs"), None);
}

#[test]
fn write_file_refuses_content_over_the_limit_and_stages_nothing() {
    let f = Fixture::new();
    let approver = DenyAll::default();
    let cx = CallContext::new(Cancel::new(), &approver);
    let c = call(
        write_args("big.txt", "0123456789"),
        vec![f.confine("big.txt", Access::Write, Link::Follow)],
        &cx,
    );
    let o = files::write_file(&f.ctx(4), &c);
    assert!(!o.ok);
    assert_eq!(o.status, Status::Failed);
    assert!(o.output.as_str().unwrap().contains("Nothing was staged"));
    assert_eq!(f.staged_count(), 0);
}

#[test]
fn a_path_confined_for_reading_cannot_be_written() {
    let f = Fixture::new();
    let approver = DenyAll::default();
    let cx = CallContext::new(Cancel::new(), &approver);
    let c = call(
        write_args("notes.txt", "x"),
        vec![f.confine("notes.txt", Access::Read, Link::Follow)],
        &cx,
    );
    let o = files::write_file(&f.ctx(1 << 20), &c);
    assert!(!o.ok);
    assert_eq!(f.staged_count(), 0);
    // No path at all: refused as well.
    let c = call(write_args("notes.txt", "x"), Vec::new(), &cx);
    assert!(!files::write_file(&f.ctx(1 << 20), &c).ok);
    assert_eq!(f.staged_count(), 0);
}

#[test]
fn edit_file_needs_exactly_one_match_unless_replace_all() {
    let f = Fixture::new();
    let approver = DenyAll::default();
    let cx = CallContext::new(Cancel::new(), &approver);
    let edit = |old: &str, all: bool| {
        let c = call(
            EditFileArgs {
                path: "notes.txt".into(),
                old_string: old.into(),
                new_string: "x".into(),
                replace_all: all,
            },
            vec![f.confine("notes.txt", Access::Write, Link::Follow)],
            &cx,
        );
        files::edit_file(&f.ctx(1 << 20), &c)
    };
    let o = edit("alpha", false);
    assert!(!o.ok);
    assert!(o.output.as_str().unwrap().contains("matches 2 times"));
    assert_eq!(f.staged_count(), 0);
    let o = edit("gamma", false);
    assert!(o.output.as_str().unwrap().contains("not found"));
    assert_eq!(f.staged_count(), 0);
    let o = edit("alpha", true);
    assert!(o.ok, "{}", o.output);
    assert_eq!(f.staged("notes.txt").as_deref(), Some(&b"x\nbeta\nx\n"[..]));
    assert_eq!(
        f.on_disk("notes.txt").as_deref(),
        Some("alpha\nbeta\nalpha\n")
    );
}

#[test]
fn delete_file_stages_a_removal_of_an_existing_path_only() {
    let f = Fixture::new();
    let approver = DenyAll::default();
    let cx = CallContext::new(Cancel::new(), &approver);
    let delete = |p: &str| {
        let c = call(
            DeleteFileArgs { path: p.into() },
            vec![f.confine(p, Access::Write, Link::Itself)],
            &cx,
        );
        files::delete_file(&f.ctx(1 << 20), &c)
    };
    let o = delete("missing.txt");
    assert!(!o.ok);
    assert!(o.output.as_str().unwrap().contains("does not exist"));
    assert_eq!(f.staged_count(), 0);
    let o = delete("notes.txt");
    assert!(o.ok, "{}", o.output);
    assert_eq!(f.staged("notes.txt"), None);
    assert!(f.on_disk("notes.txt").is_some());
}

#[test]
fn move_file_stages_a_rename_and_refuses_an_existing_destination() {
    let f = Fixture::new();
    let approver = DenyAll::default();
    let cx = CallContext::new(Cancel::new(), &approver);
    let mv = |from: &str, to: &str| {
        let c = call(
            MoveFileArgs {
                from: from.into(),
                to: to.into(),
            },
            vec![
                f.confine(from, Access::Write, Link::Itself),
                f.confine(to, Access::Write, Link::Follow),
            ],
            &cx,
        );
        files::move_file(&f.ctx(1 << 20), &c)
    };
    let o = mv("notes.txt", "src/a.rs");
    assert!(!o.ok);
    assert!(o.output.as_str().unwrap().contains("already exists"));
    assert_eq!(f.staged_count(), 0);
    let o = mv("notes.txt", "docs.txt");
    assert!(o.ok, "{}", o.output);
    assert_eq!(f.staged("notes.txt"), None);
    assert_eq!(
        f.staged("docs.txt").as_deref(),
        Some(&b"alpha\nbeta\nalpha\n"[..])
    );
    assert!(f.on_disk("docs.txt").is_none());
}

#[test]
fn apply_patch_stages_every_hunk_or_nothing() {
    let f = Fixture::new();
    let approver = DenyAll::default();
    let cx = CallContext::new(Cancel::new(), &approver);
    let run = |text: &str| {
        let patch = airlock_stage::patch::parse_patch(text).unwrap();
        let paths = patch
            .paths()
            .iter()
            .map(|p| f.confine(p, Access::Write, Link::Follow))
            .collect();
        let mut c = call(ApplyPatchArgs { patch: text.into() }, paths, &cx);
        c.patch = Some(patch);
        files::apply_patch(&f.ctx(1 << 20), &c)
    };
    let o = run("--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1 +1 @@\n-nope\n+new\n");
    assert!(!o.ok);
    assert_eq!(f.staged_count(), 0);
    let o = run("--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1 +1 @@\n-old\n+new\n");
    assert!(o.ok, "{}", o.output);
    assert_eq!(f.staged("src/a.rs").as_deref(), Some(&b"new\n"[..]));
    assert_eq!(f.on_disk("src/a.rs").as_deref(), Some("old\n"));
    // Without the parsed patch the executor refuses.
    let c = call(ApplyPatchArgs { patch: "x".into() }, Vec::new(), &cx);
    assert!(!files::apply_patch(&f.ctx(1 << 20), &c).ok);
}

/// The patch's paths are the ones the jail confined, not re-derived from the patch text: a
/// patch through an on-disk directory link stages at the link's target, as `write_file` does.
#[test]
fn apply_patch_stages_at_the_paths_the_jail_confined() {
    let f = Fixture::new();
    std::os::unix::fs::symlink("src", f.root.join("lnk")).unwrap();
    let approver = DenyAll::default();
    let cx = CallContext::new(Cancel::new(), &approver);
    let text = "--- a/lnk/a.rs\n+++ b/lnk/a.rs\n@@ -1 +1 @@\n-old\n+new\n";
    let patch = airlock_stage::patch::parse_patch(text).unwrap();
    let paths: Vec<Confined> = patch
        .paths()
        .iter()
        .map(|p| f.confine(p, Access::Write, Link::Follow))
        .collect();
    assert_eq!(
        paths[0].rel().map(RelPath::display).as_deref(),
        Some("src/a.rs")
    );
    let mut c = call(ApplyPatchArgs { patch: text.into() }, paths, &cx);
    c.patch = Some(patch);
    let o = files::apply_patch(&f.ctx(1 << 20), &c);
    assert!(o.ok, "{}", o.output);
    assert_eq!(f.staged("src/a.rs").as_deref(), Some(&b"new\n"[..]));
    let entries: Vec<String> = f
        .store
        .snapshot()
        .unwrap()
        .entries
        .iter()
        .map(|e| e.path.display())
        .collect();
    assert_eq!(
        entries,
        ["src/a.rs"],
        "staged below the link instead of at its target"
    );
    // A patch whose paths do not match the confined list is refused, not staged.
    let text2 = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1 @@\n-alpha\n+omega\n";
    let mut c = call(
        ApplyPatchArgs {
            patch: text2.into(),
        },
        Vec::new(),
        &cx,
    );
    c.patch = Some(airlock_stage::patch::parse_patch(text2).unwrap());
    assert!(!files::apply_patch(&f.ctx(1 << 20), &c).ok);
    assert!(f.staged("notes.txt").as_deref() == Some(&b"alpha\nbeta\nalpha\n"[..]));
}

#[test]
fn read_file_pages_the_merged_view() {
    let f = Fixture::new();
    let approver = DenyAll::default();
    let cx = CallContext::new(Cancel::new(), &approver);
    let c = call(
        ReadFileArgs {
            path: "notes.txt".into(),
            offset: None,
            limit: None,
        },
        vec![f.confine("notes.txt", Access::Read, Link::Follow)],
        &cx,
    );
    let o = files::read_file(&f.ctx(1 << 20), &c);
    assert!(o.ok);
    let text = o.output.as_str().unwrap();
    assert!(text.contains("     2\tbeta"), "{text}");
    assert!(text.contains("untrusted repository data from `notes.txt`"));
}

static TEST_SETTINGS: std::sync::LazyLock<crate::api::Settings> =
    std::sync::LazyLock::new(crate::api::Settings::default);
