//! apply_patch against real `git diff` output and hand-written unified diffs.

use airlock_stage::model::Change;
use airlock_stage::patch::{PatchError, parse_patch, stage_patch};
use airlock_stage::store::Store;
use airlock_stage::view::read_merged;
use airlock_types::RelPath;
use std::path::Path;
use std::process::Command;

fn rp(s: &str) -> RelPath {
    RelPath::new(s).unwrap()
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "core.autocrlf=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn write(dir: &Path, p: &str, c: &str) {
    let path = dir.join(p);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, c).unwrap();
}

const LONG: &str = "line 1\nline 2\nline 3\nline 4\nline 5\nline 6\nline 7\nline 8\nline 9\nline 10\nline 11\nline 12\n";

/// A repository with a base commit, and the git diff of a multi-file change made to it (the
/// working tree is then reset to the base).
fn repo_with_diff() -> (tempfile::TempDir, String) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    git(p, &["init", "-q"]);
    write(p, "src/lib.rs", LONG);
    write(p, "src/keep.rs", "keep\n");
    write(p, "old_name.txt", "rename me\nplease\n");
    write(p, "doomed.txt", "bye\nnow\n");
    write(p, "script.sh", "#!/bin/sh\necho hi\n");
    git(p, &["add", "-A"]);
    git(p, &["commit", "-q", "-m", "base"]);
    // The change: two hunks in lib.rs, a new file, a delete, a rename, a mode change.
    write(
        p,
        "src/lib.rs",
        &LONG
            .replace("line 2\n", "line two\n")
            .replace("line 11\n", "line 11\nline 11.5\n"),
    );
    write(p, "src/new.rs", "pub fn new() {}\n");
    std::fs::remove_file(p.join("doomed.txt")).unwrap();
    git(p, &["mv", "old_name.txt", "new_name.txt"]);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p.join("script.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    git(p, &["add", "-A"]);
    let diff = git(p, &["diff", "--cached", "-M"]);
    git(p, &["reset", "-q", "--hard"]);
    (d, diff)
}

#[test]
fn a_multi_file_git_diff_stages_every_change() {
    let (d, diff) = repo_with_diff();
    assert!(diff.contains("rename from old_name.txt"), "{diff}");
    let patch = parse_patch(&diff).unwrap();
    let mut paths = patch.paths();
    paths.sort();
    assert_eq!(
        paths,
        [
            "doomed.txt",
            "new_name.txt",
            "old_name.txt",
            "script.sh",
            "src/lib.rs",
            "src/new.rs"
        ]
    );
    let s = Store::open(d.path(), "s").unwrap();
    let staged = stage_patch(&s, &patch).unwrap();
    assert_eq!(staged.len(), 6);
    let lib = String::from_utf8(read_merged(&s, &rp("src/lib.rs")).unwrap().unwrap()).unwrap();
    assert!(lib.contains("line two\n") && lib.contains("line 11.5\n") && !lib.contains("line 2\n"));
    assert_eq!(
        read_merged(&s, &rp("src/new.rs")).unwrap().unwrap(),
        b"pub fn new() {}\n"
    );
    assert_eq!(read_merged(&s, &rp("doomed.txt")).unwrap(), None);
    assert_eq!(read_merged(&s, &rp("old_name.txt")).unwrap(), None);
    assert_eq!(
        read_merged(&s, &rp("new_name.txt")).unwrap().unwrap(),
        b"rename me\nplease\n"
    );
    assert!(matches!(
        s.get(&rp("script.sh")).unwrap().unwrap().change,
        Change::Write { mode: 0o755, .. }
    ));
    // The working tree is untouched.
    assert_eq!(
        std::fs::read_to_string(d.path().join("src/lib.rs")).unwrap(),
        LONG
    );
    assert!(d.path().join("doomed.txt").exists());
}

#[test]
fn a_hunk_that_does_not_apply_is_located_and_nothing_is_staged() {
    let (d, diff) = repo_with_diff();
    // The workspace drifted: line 11 changed, so lib.rs's second hunk no longer applies.
    std::fs::write(
        d.path().join("src/lib.rs"),
        LONG.replace("line 11\n", "line eleven\n"),
    )
    .unwrap();
    let s = Store::open(d.path(), "s").unwrap();
    let patch = parse_patch(&diff).unwrap();
    let err = stage_patch(&s, &patch).unwrap_err();
    match &err {
        PatchError::HunkFailed { path, hunk, line } => {
            assert_eq!(path, "src/lib.rs");
            assert_eq!(*hunk, 2);
            assert!(*line >= 8 && *line <= 11, "line {line}");
        }
        other => panic!("unexpected {other}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("hunk #2 of `src/lib.rs`") && msg.contains("nothing was staged"),
        "{msg}"
    );
    assert!(
        s.snapshot().unwrap().is_empty(),
        "a failed patch staged something"
    );
}

#[test]
fn patches_see_the_merged_view() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("a.txt"), "one\ntwo\n").unwrap();
    let s = Store::open(d.path(), "s").unwrap();
    s.stage_write(&rp("a.txt"), b"one\nTWO\n", None).unwrap();
    // Written against the staged content, not the disk.
    let p = parse_patch("--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,3 @@\n one\n TWO\n+three\n").unwrap();
    stage_patch(&s, &p).unwrap();
    assert_eq!(
        read_merged(&s, &rp("a.txt")).unwrap().unwrap(),
        b"one\nTWO\nthree\n"
    );
    // The same patch no longer applies (its context is already followed by `three`... and
    // would duplicate): creating an existing file is refused too.
    let create = parse_patch("--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+x\n").unwrap();
    assert!(matches!(
        stage_patch(&s, &create),
        Err(PatchError::Exists(_))
    ));
    let modify_missing =
        parse_patch("--- a/none.txt\n+++ b/none.txt\n@@ -1 +1 @@\n-a\n+b\n").unwrap();
    assert!(matches!(
        stage_patch(&s, &modify_missing),
        Err(PatchError::Missing(_))
    ));
}

#[test]
fn no_newline_at_end_of_file_is_exact() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("f"), "a\nb").unwrap();
    let s = Store::open(d.path(), "s").unwrap();
    let p = parse_patch(
        "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n",
    )
    .unwrap();
    stage_patch(&s, &p).unwrap();
    assert_eq!(read_merged(&s, &rp("f")).unwrap().unwrap(), b"a\nc\n");
}

#[test]
fn garbage_and_escaping_patches_are_refused() {
    assert!(matches!(
        parse_patch("hello world\n"),
        Err(PatchError::Empty | PatchError::Parse(_))
    ));
    let evil = "diff --git a/../x b/../x\nnew file mode 100644\n--- /dev/null\n+++ b/../x\n@@ -0,0 +1 @@\n+x\n";
    assert!(matches!(
        parse_patch(evil),
        Err(PatchError::BadPath { .. } | PatchError::Parse(_))
    ));
}

#[test]
fn binary_git_patches_are_refused_cleanly() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    git(p, &["init", "-q"]);
    std::fs::write(p.join("img.bin"), b"\x00\x01\x02").unwrap();
    git(p, &["add", "-A"]);
    git(p, &["commit", "-q", "-m", "base"]);
    std::fs::write(p.join("img.bin"), b"\x00\x03\x02\x04").unwrap();
    let diff = git(p, &["diff"]);
    let s = Store::open(p, "s").unwrap();
    let patch = parse_patch(&diff).unwrap();
    let err = stage_patch(&s, &patch).unwrap_err();
    assert!(matches!(err, PatchError::Unsupported { .. }), "{err}");
    assert!(s.snapshot().unwrap().is_empty());
}
