//! The changeset store against real temp dirs and real SQLite.

use airlock_stage::model::{Change, ContentHash, Fingerprint, Flag, Verdict, VerdictRecord};
use airlock_stage::store::{StageError, StageOp, Store};
use airlock_types::RelPath;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn rp(s: &str) -> RelPath {
    RelPath::new(s).unwrap()
}

fn workspace() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("README.md"), b"# hi\n").unwrap();
    std::fs::create_dir_all(d.path().join("src/nested")).unwrap();
    std::fs::write(d.path().join("src/lib.rs"), b"pub fn f() {}\n").unwrap();
    std::fs::write(d.path().join("src/nested/a.rs"), b"a\n").unwrap();
    std::fs::write(d.path().join("run.sh"), b"#!/bin/sh\n").unwrap();
    std::fs::set_permissions(
        d.path().join("run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    d
}

fn tree_listing(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for e in walk(root) {
        if e.starts_with(root.join(".airlock")) {
            continue;
        }
        let data = if e.is_file() {
            std::fs::read(&e).unwrap()
        } else {
            Vec::new()
        };
        out.push((e.display().to_string(), data));
    }
    out.sort();
    out
}

fn walk(p: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![p.to_path_buf()];
    if p.is_dir() && !p.is_symlink() {
        for e in std::fs::read_dir(p).unwrap() {
            out.extend(walk(&e.unwrap().path()));
        }
    }
    out
}

#[test]
fn round_trip_survives_reopen_and_never_touches_the_tree() {
    let ws = workspace();
    let before = tree_listing(ws.path());
    {
        let s = Store::open(ws.path(), "default").unwrap();
        s.stage_write(&rp("src/lib.rs"), b"pub fn g() {}\n", None)
            .unwrap();
        s.stage_write(&rp("new/dir/file.txt"), b"new\n", Some(0o600))
            .unwrap();
        s.stage_delete(&rp("README.md")).unwrap();
        s.stage_symlink(&rp("link"), b"src/lib.rs", None).unwrap();
        s.stage_dir(&rp("empty"), 0o700).unwrap();
    }
    assert_eq!(tree_listing(ws.path()), before, "the working tree changed");
    let s = Store::open(ws.path(), "default").unwrap();
    let snap = s.snapshot().unwrap();
    let paths: Vec<String> = snap.entries.iter().map(|e| e.path.display()).collect();
    assert_eq!(
        paths,
        [
            "README.md",
            "empty",
            "link",
            "new/dir/file.txt",
            "src/lib.rs"
        ]
    );
    let lib = s.get(&rp("src/lib.rs")).unwrap().unwrap();
    assert_eq!(
        lib.base,
        Fingerprint::File {
            hash: ContentHash::of(b"pub fn f() {}\n"),
            mode: 0o644
        }
    );
    match lib.change {
        Change::Write {
            content,
            size,
            mode,
        } => {
            assert_eq!(s.blobs().get(&content).unwrap(), b"pub fn g() {}\n");
            assert_eq!(size, 14);
            assert_eq!(mode, 0o644, "mode None keeps the base mode");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(
        s.get(&rp("new/dir/file.txt")).unwrap().unwrap().base,
        Fingerprint::Absent
    );
    // Another session of the same workspace is independent.
    let other = Store::open(ws.path(), "other").unwrap();
    assert!(other.snapshot().unwrap().is_empty());
    // The snapshot hash is stable across reads and changes with the content.
    assert_eq!(s.snapshot().unwrap().hash, snap.hash);
    s.stage_write(&rp("src/lib.rs"), b"pub fn h() {}\n", None)
        .unwrap();
    assert_ne!(s.snapshot().unwrap().hash, snap.hash);
}

#[test]
fn mode_none_keeps_an_executable_bit() {
    let ws = workspace();
    let s = Store::open(ws.path(), "s").unwrap();
    s.stage_write(&rp("run.sh"), b"#!/bin/sh\necho\n", None)
        .unwrap();
    assert!(matches!(
        s.get(&rp("run.sh")).unwrap().unwrap().change,
        Change::Write { mode: 0o755, .. }
    ));
    s.stage_write(&rp("fresh"), b"x", None).unwrap();
    assert!(matches!(
        s.get(&rp("fresh")).unwrap().unwrap().change,
        Change::Write { mode: 0o644, .. }
    ));
}

#[test]
fn setuid_and_setgid_bits_are_never_staged() {
    let ws = workspace();
    let s = Store::open(ws.path(), "s").unwrap();
    s.stage_write(&rp("suid"), b"x", Some(0o4755)).unwrap();
    s.stage_dir(&rp("shared"), 0o2775).unwrap();
    s.stage_entry(
        &rp("sgid"),
        Change::Write {
            content: s.blobs().put(b"y").unwrap(),
            size: 1,
            mode: 0o6711,
        },
        false,
        None,
    )
    .unwrap();
    let mode = |p: &str| match s.get(&rp(p)).unwrap().unwrap().change {
        Change::Write { mode, .. } | Change::Dir { mode } => mode,
        other => panic!("{other:?}"),
    };
    assert_eq!(mode("suid"), 0o755);
    assert_eq!(mode("shared"), 0o775);
    assert_eq!(mode("sgid"), 0o711);
}

#[test]
fn write_back_to_base_and_delete_of_staged_only_leave_nothing() {
    let ws = workspace();
    let s = Store::open(ws.path(), "s").unwrap();
    s.stage_write(&rp("README.md"), b"changed", None).unwrap();
    s.stage_write(&rp("README.md"), b"# hi\n", None).unwrap();
    assert!(s.snapshot().unwrap().is_empty());
    // A delete restored by writing the base back is nothing staged either.
    s.stage_delete(&rp("README.md")).unwrap();
    s.stage_write(&rp("README.md"), b"# hi\n", None).unwrap();
    assert!(s.snapshot().unwrap().is_empty());
    // Same content, different mode: a real change.
    s.stage_write(&rp("README.md"), b"# hi\n", Some(0o600))
        .unwrap();
    assert_eq!(s.snapshot().unwrap().entries.len(), 1);
    s.discard().unwrap();

    s.stage_write(&rp("only/staged.txt"), b"x", None).unwrap();
    s.stage_delete(&rp("only/staged.txt")).unwrap();
    assert!(s.snapshot().unwrap().is_empty());
    // Deleting something that exists nowhere is an error naming the path.
    let err = s.stage_delete(&rp("nope.txt")).unwrap_err();
    assert!(matches!(err, StageError::NotFound(_)));
    assert!(err.to_string().contains("`nope.txt`"), "{err}");
}

#[test]
fn moves_preserve_content_and_mode() {
    let ws = workspace();
    let s = Store::open(ws.path(), "s").unwrap();
    s.stage_move(&rp("run.sh"), &rp("bin/run")).unwrap();
    let moved = s.get(&rp("bin/run")).unwrap().unwrap();
    assert!(matches!(
        moved.change,
        Change::Write { mode: 0o755, content, .. } if content == ContentHash::of(b"#!/bin/sh\n")
    ));
    assert!(matches!(
        s.get(&rp("run.sh")).unwrap().unwrap().change,
        Change::Delete
    ));

    // A staged-only file moves without leaving anything behind.
    s.stage_write(&rp("tmp.txt"), b"draft", Some(0o640))
        .unwrap();
    s.stage_move(&rp("tmp.txt"), &rp("final.txt")).unwrap();
    assert!(s.get(&rp("tmp.txt")).unwrap().is_none());
    assert!(matches!(
        s.get(&rp("final.txt")).unwrap().unwrap().change,
        Change::Write { mode: 0o640, .. }
    ));
    // Moving back onto the original path restores the base: nothing staged for it.
    s.stage_move(&rp("bin/run"), &rp("run.sh")).unwrap();
    assert!(s.get(&rp("run.sh")).unwrap().is_none());
    assert!(s.get(&rp("bin/run")).unwrap().is_none());

    assert!(matches!(
        s.stage_move(&rp("missing"), &rp("x")),
        Err(StageError::NotFound(_))
    ));
    assert!(matches!(
        s.stage_move(&rp("src"), &rp("x")),
        Err(StageError::IsADirectory(_))
    ));
}

#[test]
fn deleting_a_directory_drops_entries_below_and_covers_the_disk() {
    let ws = workspace();
    let s = Store::open(ws.path(), "s").unwrap();
    s.stage_write(&rp("src/nested/b.rs"), b"b", None).unwrap();
    s.stage_write(&rp("src/lib.rs"), b"changed", None).unwrap();
    s.stage_delete(&rp("src")).unwrap();
    let snap = s.snapshot().unwrap();
    assert_eq!(snap.entries.len(), 1);
    assert_eq!(snap.entries[0].path, rp("src"));
    assert_eq!(snap.entries[0].base, Fingerprint::Dir);
    // Writing below the deleted directory: the old contents stay gone (an opaque directory),
    // and writing the disk's old content back is still a change.
    s.stage_write(&rp("src/lib.rs"), b"pub fn f() {}\n", None)
        .unwrap();
    let e = s.get(&rp("src/lib.rs")).unwrap().unwrap();
    assert!(matches!(e.change, Change::Write { .. }));
    assert!(matches!(e.base, Fingerprint::File { .. }));
    // Deleting the only staged file below leaves the directory deleted.
    s.stage_delete(&rp("src/lib.rs")).unwrap();
    assert!(s.get(&rp("src/lib.rs")).unwrap().is_none());
    assert!(matches!(
        s.get(&rp("src")).unwrap().unwrap().change,
        Change::Delete
    ));
    assert!(matches!(
        s.stage_dir(&rp("src"), 0o755),
        Err(StageError::RecreateDeletedDir(_))
    ));
}

#[test]
fn files_in_the_way_are_refused() {
    let ws = workspace();
    let s = Store::open(ws.path(), "s").unwrap();
    assert!(matches!(
        s.stage_write(&rp("src"), b"x", None),
        Err(StageError::IsADirectory(_))
    ));
    s.stage_write(&rp("f"), b"x", None).unwrap();
    assert!(matches!(
        s.stage_write(&rp("f/g"), b"x", None),
        Err(StageError::ParentNotDir { .. })
    ));
    assert!(matches!(
        s.stage_dir(&rp("README.md"), 0o755),
        Err(StageError::AlreadyExists(_))
    ));
    // airlock's own state is out of reach.
    assert!(matches!(
        s.stage_write(&rp(".airlock/sessions/s.db"), b"x", None),
        Err(StageError::Reserved(_))
    ));
    assert!(matches!(
        s.stage_delete(&rp(".airlock")),
        Err(StageError::Reserved(_))
    ));
    // A symlinked directory on disk is never written through.
    std::os::unix::fs::symlink("/tmp", ws.path().join("tmp-link")).unwrap();
    assert!(matches!(
        s.stage_write(&rp("tmp-link/evil"), b"x", None),
        Err(StageError::ParentNotDir { .. })
    ));
}

#[test]
fn binary_content_and_non_utf8_paths_round_trip() {
    let ws = workspace();
    let raw = OsStr::from_bytes(b"dir/caf\xe9-\xff.bin");
    std::fs::create_dir(ws.path().join("dir")).unwrap();
    std::fs::write(ws.path().join(raw), b"old").unwrap();
    let s = Store::open(ws.path(), "s").unwrap();
    let path = RelPath::new(raw).unwrap();
    let bytes: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    s.stage_write(&path, &bytes, None).unwrap();
    let other = RelPath::new(OsStr::from_bytes(b"new\x80name")).unwrap();
    s.stage_symlink(&other, b"target\xfe", None).unwrap();
    drop(s);
    let s = Store::open(ws.path(), "s").unwrap();
    let snap = s.snapshot().unwrap();
    let e = snap.entries.iter().find(|e| e.path == path).unwrap();
    assert_eq!(e.path.as_bytes(), b"dir/caf\xe9-\xff.bin");
    let Change::Write { content, size, .. } = e.change else {
        panic!("not a write")
    };
    assert_eq!(size, 70_000);
    assert_eq!(s.blobs().get(&content).unwrap(), bytes);
    let l = snap.entries.iter().find(|e| e.path == other).unwrap();
    assert_eq!(
        l.change,
        Change::Symlink {
            target: b"target\xfe".to_vec()
        }
    );
}

#[test]
fn batch_is_all_or_nothing() {
    let ws = workspace();
    let s = Store::open(ws.path(), "s").unwrap();
    let ops = vec![
        StageOp::Write {
            path: rp("a.txt"),
            content: b"a".to_vec(),
            mode: None,
        },
        StageOp::Delete {
            path: rp("does-not-exist"),
        },
    ];
    assert!(matches!(s.stage_batch(ops), Err(StageError::NotFound(_))));
    assert!(s.snapshot().unwrap().is_empty());
    let ops: Vec<StageOp> = (0..200)
        .map(|i| StageOp::Write {
            path: rp(&format!("gen/{i:03}.txt")),
            content: format!("{i}\n").into_bytes(),
            mode: None,
        })
        .collect();
    assert_eq!(s.stage_batch(ops).unwrap(), 200);
    assert_eq!(s.snapshot().unwrap().entries.len(), 200);
}

#[test]
fn harvest_entries_need_their_blob_and_keep_flags() {
    let ws = workspace();
    let s = Store::open(ws.path(), "s").unwrap();
    let missing = ContentHash::of(b"never stored");
    let err = s
        .stage_entry(
            &rp("x"),
            Change::Write {
                content: missing,
                size: 12,
                mode: 0o644,
            },
            false,
            None,
        )
        .unwrap_err();
    assert!(matches!(err, StageError::MissingBlob { .. }), "{err}");
    let h = s.blobs().put(b"built").unwrap();
    s.stage_entry(
        &rp("target/out.o"),
        Change::Write {
            content: h,
            size: 5,
            mode: 0o644,
        },
        true,
        None,
    )
    .unwrap();
    s.stage_entry(
        &rp("escape"),
        Change::Symlink {
            target: b"/etc/passwd".to_vec(),
        },
        false,
        Some(Flag::LinkOutside),
    )
    .unwrap();
    // A whiteout for something already gone is not an error for the harvest.
    s.stage_entry(&rp("gone"), Change::Delete, false, None)
        .unwrap();
    let snap = s.snapshot().unwrap();
    assert_eq!(snap.entries.len(), 2);
    assert!(snap.entries[1].session_local);
    assert_eq!(snap.entries[0].flagged, Some(Flag::LinkOutside));
}

/// Flags are stored as stable names and read back typed; a name this build does not read
/// (an older airlock's text, a damaged row) is still a flag, and the flag's kind is part of
/// the changeset hash.
#[test]
fn flags_are_stored_by_name_and_an_unreadable_one_stays_a_flag() {
    let ws = workspace();
    let s = Store::open(ws.path(), "default").unwrap();
    let h = s.blobs().put(b"{}").unwrap();
    let write = |p: &str, flag: Option<Flag>| {
        s.stage_entry(
            &rp(p),
            Change::Write {
                content: h,
                size: 2,
                mode: 0o644,
            },
            false,
            flag,
        )
        .unwrap();
        s.snapshot().unwrap()
    };
    let vscode = write(".vscode/tasks.json", Some(Flag::host_exec("vscode")));
    assert_eq!(vscode.entries[0].flagged, Some(Flag::host_exec("vscode")));
    let git = write(".vscode/tasks.json", Some(Flag::host_exec("git")));
    assert_ne!(vscode.hash, git.hash, "the flag's kind is hashed");
    let none = write(".vscode/tasks.json", None);
    assert_ne!(none.hash, git.hash);
    // What the database holds is the stable name.
    let conn = rusqlite::Connection::open(s.db_path()).unwrap();
    write(
        ".vscode/tasks.json",
        Some(Flag::Sensitive {
            rule: "jail_sensitive".into(),
        }),
    );
    let stored: String = conn
        .query_row("SELECT flagged FROM entries", [], |r| r.get(0))
        .unwrap();
    assert_eq!(stored, "sensitive:jail_sensitive");
    // Old free text, an unknown kind of name, a malformed kind: unknown, never unflagged.
    for raw in [
        "a git control entry, which the host acts on by itself",
        "host_exec:",
        "host_exec:Git Control",
        "setuid",
        "",
    ] {
        conn.execute("UPDATE entries SET flagged = ?1", [raw])
            .unwrap();
        let snap = s.snapshot().unwrap();
        assert_eq!(
            snap.entries[0].flagged,
            Some(Flag::Unknown(raw.to_string())),
            "{raw:?}"
        );
    }
    for f in [Flag::host_exec("git_dir_shape"), Flag::LinkOutside] {
        assert_eq!(Flag::parse(&f.name()), f);
    }
}

#[test]
fn verdicts_discard_and_clear_applied() {
    let ws = workspace();
    let s = Store::open(ws.path(), "s").unwrap();
    s.stage_write(&rp("a.txt"), b"a", None).unwrap();
    let h = s.blobs().put(b"obj").unwrap();
    s.stage_entry(
        &rp("build/x.o"),
        Change::Write {
            content: h,
            size: 3,
            mode: 0o644,
        },
        true,
        None,
    )
    .unwrap();
    let snap = s.snapshot().unwrap();
    let v = VerdictRecord {
        changeset: snap.hash,
        verdict: Verdict::Passed,
        source: airlock_stage::VerdictSource::Detected,
        detail: serde_json::json!({"verdict": "passed", "tests": {"passed": 2}}),
    };
    s.record_verdict(&v).unwrap();
    assert_eq!(s.last_verdict().unwrap(), Some(v.clone()));
    let verified = s.verified().unwrap();
    assert_eq!(verified.snapshot().hash, snap.hash);

    // A stale hash is refused and keeps everything.
    let err = s
        .clear_applied(&airlock_stage::ChangesetHash(ContentHash::of(b"other").0))
        .unwrap_err();
    assert!(matches!(err, StageError::ChangedSinceApply { .. }), "{err}");
    assert_eq!(s.snapshot().unwrap().entries.len(), 2);

    s.clear_applied(&snap.hash).unwrap();
    let left = s.snapshot().unwrap();
    assert_eq!(left.entries.len(), 1, "session-local entries stay");
    assert!(left.entries[0].session_local);
    assert_eq!(s.last_verdict().unwrap(), None);

    s.record_verdict(&v).unwrap();
    assert_eq!(s.discard().unwrap(), 1);
    assert_eq!(s.last_verdict().unwrap(), None);
    assert!(s.snapshot().unwrap().is_empty());
}

#[test]
fn a_corrupt_database_is_a_clear_error() {
    let ws = workspace();
    drop(Store::open(ws.path(), "s").unwrap());
    let db = ws.path().join(".airlock/sessions/s.db");
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    std::fs::write(&db, b"this is not a database, just garbage bytes ......").unwrap();
    let err = Store::open(ws.path(), "s").unwrap_err();
    assert!(matches!(err, StageError::Corrupt { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("s.db") && msg.contains("corrupt"), "{msg}");

    // A foreign SQLite database with a different `entries` table is not taken for ours.
    std::fs::remove_file(&db).unwrap();
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute_batch("CREATE TABLE entries (x INTEGER); PRAGMA user_version = 1;")
            .unwrap();
    }
    let err = Store::open(ws.path(), "s").unwrap_err();
    assert!(matches!(err, StageError::Corrupt { .. }), "{err:?}");
}

#[test]
fn concurrent_writers_serialize_and_keep_the_base() {
    let ws = workspace();
    // Separate stores (separate SQLite connections) behave like separate processes.
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let root = ws.path().to_path_buf();
            std::thread::spawn(move || {
                let s = Store::open(&root, "shared").unwrap();
                for i in 0..25 {
                    s.stage_write(&rp("README.md"), format!("t{t} i{i}\n").as_bytes(), None)
                        .unwrap();
                    s.stage_write(&rp(&format!("own/{t}/{i}.txt")), b"x", None)
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let s = Store::open(ws.path(), "shared").unwrap();
    let snap = s.snapshot().unwrap();
    // Every thread's own files landed: no write was lost.
    assert_eq!(snap.entries.len(), 1 + 4 * 25);
    let readme = s.get(&rp("README.md")).unwrap().unwrap();
    assert_eq!(
        readme.base,
        Fingerprint::File {
            hash: ContentHash::of(b"# hi\n"),
            mode: 0o644
        }
    );
    let Change::Write { content, .. } = readme.change else {
        panic!("not a write")
    };
    let last = String::from_utf8(s.blobs().get(&content).unwrap()).unwrap();
    assert!(last.ends_with("i24\n"), "last writer wins: {last}");
}

#[test]
fn the_state_directory_ignores_itself() {
    let ws = workspace();
    let _s = Store::open(ws.path(), "s").unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.path().join(".airlock/.gitignore")).unwrap(),
        "*\n"
    );
}

const CHILD_ENV: &str = "AIRLOCK_STAGE_TEST_CHILD";

/// The body of one writer process for `concurrent_processes_serialize`.
#[test]
#[ignore = "run as a child process by concurrent_processes_serialize"]
fn child_writer() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (root, id) = spec.split_once('|').unwrap();
    let s = Store::open(Path::new(root), "shared").unwrap();
    for i in 0..30 {
        s.stage_write(&rp("README.md"), format!("p{id} i{i}\n").as_bytes(), None)
            .unwrap();
        s.stage_write(&rp(&format!("proc/{id}/{i}.txt")), b"x", None)
            .unwrap();
    }
}

#[test]
fn concurrent_processes_serialize() {
    let ws = workspace();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..3)
        .map(|id| {
            std::process::Command::new(&exe)
                .args(["child_writer", "--exact", "--ignored", "--quiet"])
                .env(CHILD_ENV, format!("{}|{id}", ws.path().display()))
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success(), "a writer process failed");
    }
    let s = Store::open(ws.path(), "shared").unwrap();
    let snap = s.snapshot().unwrap();
    assert_eq!(snap.entries.len(), 1 + 3 * 30, "a write was lost");
    assert_eq!(
        s.get(&rp("README.md")).unwrap().unwrap().base,
        Fingerprint::File {
            hash: ContentHash::of(b"# hi\n"),
            mode: 0o644
        }
    );
}

#[test]
fn a_state_directory_that_is_a_symlink_is_refused() {
    let ws = workspace();
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), ws.path().join(".airlock")).unwrap();
    let err = Store::open(ws.path(), "s").unwrap_err();
    assert!(err.to_string().contains("not a real directory"), "{err}");
    assert!(
        std::fs::read_dir(elsewhere.path())
            .unwrap()
            .next()
            .is_none()
    );
}

/// The kept `-wal` file is empty whenever no process has the store open: a later process that
/// only reads then has nothing to checkpoint, so it closes without writing or syncing anything.
/// (A WAL that kept its checkpointed frames would be copied back and fsynced at every close.)
#[test]
fn the_kept_wal_is_empty_between_processes() {
    let ws = workspace();
    let wal = ws.path().join(".airlock/sessions/default.db-wal");
    let db = ws.path().join(".airlock/sessions/default.db");
    {
        let s = Store::open(ws.path(), "default").unwrap();
        s.stage_write(&rp("src/lib.rs"), b"pub fn g() {}\n", None)
            .unwrap();
        assert!(std::fs::metadata(&wal).unwrap().len() > 0, "no WAL in use");
    }
    assert_eq!(std::fs::metadata(&wal).unwrap().len(), 0);
    let db_before = std::fs::read(&db).unwrap();
    let modified = std::fs::metadata(&db).unwrap().modified().unwrap();
    {
        let s = Store::open(ws.path(), "default").unwrap();
        assert_eq!(s.snapshot().unwrap().entries.len(), 1);
    }
    assert_eq!(std::fs::metadata(&wal).unwrap().len(), 0);
    assert_eq!(std::fs::read(&db).unwrap(), db_before);
    assert_eq!(
        std::fs::metadata(&db).unwrap().modified().unwrap(),
        modified
    );
    // Nothing was lost: the staged write is in the database file itself.
    let s = Store::open(ws.path(), "default").unwrap();
    assert_eq!(
        s.get(&rp("src/lib.rs")).unwrap().map(|e| e.path.display()),
        Some("src/lib.rs".to_string())
    );
}

#[test]
fn a_session_cannot_stage_past_its_ceiling_and_can_always_shrink() {
    let ws = workspace();
    let s = Store::open(ws.path(), "t").unwrap();
    assert_eq!(
        s.max_staged_bytes(),
        airlock_stage::store::DEFAULT_MAX_STAGED_BYTES
    );
    s.set_max_staged_bytes(100);
    s.stage_write(&rp("a"), &[b'a'; 60], None).unwrap();
    assert_eq!(s.staged_bytes().unwrap(), 60);
    // A batch past the ceiling fails whole: nothing of it is staged.
    let err = s
        .stage_batch([
            StageOp::Write {
                path: rp("small"),
                content: b"s".to_vec(),
                mode: None,
            },
            StageOp::Write {
                path: rp("b"),
                content: vec![b'b'; 60],
                mode: None,
            },
        ])
        .unwrap_err();
    assert!(
        matches!(
            err,
            StageError::OverCeiling {
                limit: 100,
                before: 60,
                after: 121
            }
        ),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("100 bytes") && msg.contains("discard") && msg.contains("--max-staged"),
        "{msg}"
    );
    assert!(s.get(&rp("small")).unwrap().is_none());
    assert_eq!(s.staged_bytes().unwrap(), 60);
    // Replacing a staged write counts its new size only.
    s.stage_write(&rp("a"), &[b'a'; 95], None).unwrap();
    assert_eq!(s.staged_bytes().unwrap(), 95);
    // Under a lowered ceiling, what shrinks the changeset still goes through.
    s.set_max_staged_bytes(10);
    s.stage_write(&rp("a"), &[b'a'; 50], None).unwrap();
    s.stage_delete(&rp("a")).unwrap();
    assert_eq!(s.staged_bytes().unwrap(), 0);
}

/// A harvest-shaped batch (parents first, as `StageOp::Entry`) stages exactly what the same
/// operations staged one batch each do: the parent check a batch reuses from the directory it
/// just staged gives the answer a fresh check gives.
#[test]
fn a_harvest_batch_stages_what_one_operation_per_batch_stages() {
    let ws = workspace();
    std::fs::create_dir_all(ws.path().join("old/keep")).unwrap();
    std::fs::write(ws.path().join("old/keep/f"), b"f").unwrap();
    std::fs::write(ws.path().join("plain"), b"p").unwrap();
    let a = Store::open(ws.path(), "batch").unwrap();
    let b = Store::open(ws.path(), "single").unwrap();
    let blob = a.blobs().put(b"content").unwrap();
    let write = Change::Write {
        content: blob,
        size: 7,
        mode: 0o644,
    };
    let dir = Change::Dir { mode: 0o755 };
    let mut ops: Vec<(String, Change)> = Vec::new();
    let mut deep = String::from("new");
    for _ in 0..300 {
        ops.push((deep.clone(), dir.clone()));
        deep.push_str("/d");
    }
    ops.push((format!("{deep}/file"), write.clone()));
    for (p, c) in [
        ("old", dir.clone()),
        ("old/keep", Change::Delete),
        ("old/keep/f", write.clone()),
        ("old/other", dir.clone()),
        ("old/other/x", write.clone()),
        ("plain", Change::Delete),
        ("src", dir.clone()),
        ("src/nested", dir.clone()),
        ("src/nested/a.rs", Change::Delete),
        ("src/nested/b", dir.clone()),
        ("src/nested/b/c", write.clone()),
    ] {
        ops.push((p.to_string(), c));
    }
    let entry = |p: &str, c: &Change| StageOp::Entry {
        path: rp(p),
        change: c.clone(),
        session_local: false,
        flagged: None,
    };
    a.stage_batch(ops.iter().map(|(p, c)| entry(p, c))).unwrap();
    for (p, c) in &ops {
        b.stage_batch([entry(p, c)]).unwrap();
    }
    let (sa, sb) = (a.snapshot().unwrap(), b.snapshot().unwrap());
    assert_eq!(sa.entries, sb.entries);
    assert_eq!(sa.hash, sb.hash);
    assert!(sa.entries.len() > 300);
}

/// The running total a connection keeps follows its own writes (replacements, deletes, a
/// discard) and is computed again after another connection's.
#[test]
fn the_staged_total_follows_every_write_of_every_connection() {
    let ws = workspace();
    let a = Store::open(ws.path(), "t").unwrap();
    let b = Store::open(ws.path(), "t").unwrap();
    let check = |want: u64| {
        assert_eq!(a.staged_bytes().unwrap(), want);
        assert_eq!(b.staged_bytes().unwrap(), want);
    };
    check(0);
    a.stage_write(&rp("x"), &[1; 10], None).unwrap();
    check(10);
    a.stage_write(&rp("x"), &[1; 4], None).unwrap();
    b.stage_write(&rp("y"), &[1; 7], None).unwrap();
    check(11);
    a.stage_move(&rp("y"), &rp("d/z")).unwrap();
    check(11);
    b.stage_delete(&rp("d")).unwrap();
    check(4);
    a.stage_write(&rp("src/lib.rs"), &[1; 3], None).unwrap();
    b.stage_dir(&rp("e"), 0o755).unwrap();
    check(7);
    a.discard().unwrap();
    check(0);
    b.stage_write(&rp("w"), &[1; 5], None).unwrap();
    check(5);
}
