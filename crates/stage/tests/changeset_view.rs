//! The merged view: workspace + changeset, as read tools see it.

use airlock_stage::store::{StageError, Store};
use airlock_stage::view::{
    NodeKind, is_ignored, list_merged, read_merged, stat_merged, walk_merged,
};
use airlock_types::RelPath;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

fn rp(s: &str) -> RelPath {
    RelPath::new(s).unwrap()
}

fn workspace() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let w = |p: &str, c: &str| {
        let path = d.path().join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, c).unwrap();
    };
    w(".gitignore", "target/\n*.log\n");
    w("src/main.rs", "fn main() {}\n");
    w("src/util.rs", "pub fn u() {}\n");
    w("docs/guide.md", "# guide\n");
    w("docs/old/a.md", "a\n");
    w("target/debug/app", "binary");
    w("run.log", "log\n");
    w(".hidden/config", "x=1\n");
    w(".git/HEAD", "ref: refs/heads/main\n");
    d
}

fn names(v: &[airlock_stage::view::MergedEntry]) -> Vec<String> {
    v.iter().map(|e| e.path.display()).collect()
}

#[test]
fn read_sees_staged_content_and_hides_deletes() {
    let ws = workspace();
    let s = Store::open(ws.path(), "s").unwrap();
    s.stage_write(&rp("src/main.rs"), b"fn main() { todo!() }\n", None)
        .unwrap();
    s.stage_delete(&rp("src/util.rs")).unwrap();
    s.stage_delete(&rp("docs")).unwrap();
    s.stage_write(&rp("docs/new.md"), b"new\n", None).unwrap();
    assert_eq!(
        read_merged(&s, &rp("src/main.rs")).unwrap().unwrap(),
        b"fn main() { todo!() }\n"
    );
    assert_eq!(read_merged(&s, &rp("src/util.rs")).unwrap(), None);
    assert_eq!(read_merged(&s, &rp("docs/guide.md")).unwrap(), None);
    assert_eq!(read_merged(&s, &rp("docs/old/a.md")).unwrap(), None);
    assert_eq!(
        read_merged(&s, &rp("docs/new.md")).unwrap().unwrap(),
        b"new\n"
    );
    assert!(matches!(
        read_merged(&s, &rp("src")),
        Err(StageError::IsADirectory(_))
    ));
    // The disk itself is unchanged.
    assert_eq!(
        std::fs::read(ws.path().join("src/util.rs")).unwrap(),
        b"pub fn u() {}\n"
    );
}

#[test]
fn list_merges_disk_and_changeset() {
    let ws = workspace();
    let s = Store::open(ws.path(), "s").unwrap();
    s.stage_delete(&rp("src/util.rs")).unwrap();
    s.stage_write(&rp("src/lib.rs"), b"//! lib\n", None)
        .unwrap();
    s.stage_write(&rp("src/main.rs"), b"fn main() {}\n// edited\n", None)
        .unwrap();
    s.stage_write(&rp("src/deep/er/x.rs"), b"x", None).unwrap();
    let list = list_merged(&s, Some(&rp("src"))).unwrap();
    assert_eq!(
        names(&list),
        ["src/deep", "src/lib.rs", "src/main.rs"],
        "{list:?}"
    );
    let by = |p: &str| list.iter().find(|e| e.path == rp(p)).unwrap();
    assert_eq!(by("src/deep").kind, NodeKind::Dir);
    assert_eq!(by("src/lib.rs").staged, Some('A'));
    assert_eq!(by("src/main.rs").staged, Some('M'));
    assert_eq!(by("src/main.rs").size, 23);
    let root = names(&list_merged(&s, None).unwrap());
    assert!(!root.contains(&".airlock".to_string()), "{root:?}");
    assert!(root.contains(&".gitignore".to_string()));
    // airlock's own state is invisible, even by name or through a link.
    assert_eq!(
        read_merged(&s, &rp(".airlock/sessions/s.db")).unwrap(),
        None
    );
    assert!(stat_merged(&s, &rp(".airlock")).unwrap().is_none());
    std::os::unix::fs::symlink(".airlock/sessions/s.db", ws.path().join("db-link")).unwrap();
    assert_eq!(read_merged(&s, &rp("db-link")).unwrap(), None);

    // A deleted directory lists only what was staged below it.
    s.stage_delete(&rp("docs")).unwrap();
    assert!(matches!(
        list_merged(&s, Some(&rp("docs"))),
        Err(StageError::NotFound(_))
    ));
    s.stage_write(&rp("docs/only.md"), b"o", None).unwrap();
    assert_eq!(
        names(&list_merged(&s, Some(&rp("docs"))).unwrap()),
        ["docs/only.md"]
    );
    assert!(matches!(
        list_merged(&s, Some(&rp("src/main.rs"))),
        Err(StageError::NotADirectory(_))
    ));
}

#[test]
fn stat_reports_kinds_sizes_and_absence() {
    let ws = workspace();
    std::os::unix::fs::symlink("src/main.rs", ws.path().join("main-link")).unwrap();
    let s = Store::open(ws.path(), "s").unwrap();
    s.stage_delete(&rp("docs/guide.md")).unwrap();
    assert!(stat_merged(&s, &rp("docs/guide.md")).unwrap().is_none());
    let l = stat_merged(&s, &rp("main-link")).unwrap().unwrap();
    assert_eq!(l.kind, NodeKind::Symlink);
    assert_eq!(l.staged, None);
    let d = stat_merged(&s, &rp("docs")).unwrap().unwrap();
    assert_eq!(d.kind, NodeKind::Dir);
    s.stage_write(&rp("src/main.rs"), b"12345", None).unwrap();
    let f = stat_merged(&s, &rp("src/main.rs")).unwrap().unwrap();
    assert_eq!((f.kind, f.size, f.staged), (NodeKind::File, 5, Some('M')));
    // A symlink inside the workspace is followed to the staged content.
    assert_eq!(
        read_merged(&s, &rp("main-link")).unwrap().unwrap(),
        b"12345"
    );
}

#[test]
fn walk_respects_ignore_files_and_the_changeset() {
    let ws = workspace();
    let s = Store::open(ws.path(), "s").unwrap();
    s.stage_delete(&rp("docs/old")).unwrap();
    s.stage_write(&rp("src/new.rs"), b"new", None).unwrap();
    s.stage_write(&rp("target/release/staged-out"), b"o", None)
        .unwrap();
    s.stage_write(&rp("src/main.rs"), b"m", None).unwrap();
    let all = walk_merged(&s, None, true).unwrap();
    assert_eq!(
        names(&all),
        [
            ".gitignore",
            ".hidden/config",
            "docs/guide.md",
            "src/main.rs",
            "src/new.rs",
            "src/util.rs"
        ]
    );
    let main = all.iter().find(|e| e.path == rp("src/main.rs")).unwrap();
    assert_eq!((main.size, main.staged), (1, Some('M')));
    let unfiltered = names(&walk_merged(&s, None, false).unwrap());
    for p in ["run.log", "target/debug/app", "target/release/staged-out"] {
        assert!(unfiltered.contains(&p.to_string()), "{p} in {unfiltered:?}");
    }
    assert!(!unfiltered.iter().any(|p| p.starts_with(".git/")));
    assert!(!unfiltered.iter().any(|p| p.starts_with(".airlock")));
    assert!(!unfiltered.contains(&"docs/old/a.md".to_string()));
    // Under a subdirectory, the root's ignore rules still apply.
    std::fs::write(ws.path().join("src/trace.log"), "x").unwrap();
    assert_eq!(
        names(&walk_merged(&s, Some(&rp("src")), true).unwrap()),
        ["src/main.rs", "src/new.rs", "src/util.rs"]
    );
    assert!(
        walk_merged(&s, Some(&rp("docs/old")), true)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn walk_does_not_follow_symlinked_directories() {
    let ws = workspace();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "s").unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.path().join("out")).unwrap();
    let s = Store::open(ws.path(), "s").unwrap();
    let all = names(&walk_merged(&s, None, false).unwrap());
    assert!(!all.iter().any(|p| p.starts_with("out")), "{all:?}");
    assert!(matches!(
        read_merged(&s, &rp("out/secret")),
        Err(StageError::SymlinkEscape { .. })
    ));
}

#[test]
fn non_utf8_names_are_listed_and_read() {
    let ws = workspace();
    let raw = OsStr::from_bytes(b"src/\xff\xfe.rs");
    std::fs::write(ws.path().join(raw), b"disk").unwrap();
    let s = Store::open(ws.path(), "s").unwrap();
    let p = RelPath::new(raw).unwrap();
    assert_eq!(read_merged(&s, &p).unwrap().unwrap(), b"disk");
    let staged = RelPath::new(OsStr::from_bytes(b"src/\x80new")).unwrap();
    s.stage_write(&staged, b"\x00\x01", None).unwrap();
    let list = list_merged(&s, Some(&rp("src"))).unwrap();
    assert!(list.iter().any(|e| e.path == p && e.staged.is_none()));
    assert!(
        list.iter()
            .any(|e| e.path == staged && e.staged == Some('A'))
    );
    let walked = walk_merged(&s, None, true).unwrap();
    assert!(walked.iter().any(|e| e.path == p));
    assert!(walked.iter().any(|e| e.path == staged));
}

#[test]
fn ignore_classification_for_harvested_paths() {
    let ws = workspace();
    std::fs::create_dir_all(ws.path().join("web")).unwrap();
    std::fs::write(ws.path().join("web/.ignore"), "node_modules\n").unwrap();
    assert!(is_ignored(ws.path(), &rp("target/debug/app"), false));
    assert!(is_ignored(
        ws.path(),
        &rp("web/node_modules/x/index.js"),
        false
    ));
    assert!(!is_ignored(
        ws.path(),
        &rp("node_modules/x/index.js"),
        false
    ));
    assert!(is_ignored(ws.path(), &rp("deep/er/run.log"), false));
    assert!(!is_ignored(ws.path(), &rp("src/main.rs"), false));
}
