//! Garbage collection of the blob store on real workspaces: what no session and no unresolved
//! journal record names is removed, what they name is kept, a writer between its blob write and
//! its commit is never robbed, and an unreadable database stops the collection before it
//! removes anything.

use airlock_stage::gc::collect;
use airlock_stage::journal::{FileEffect, Journal, NewRecord};
use airlock_stage::store::{StageOp, Store};
use airlock_stage::{Change, ContentHash, Fingerprint};
use airlock_types::RelPath;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

fn rp(s: &str) -> RelPath {
    RelPath::new(s).unwrap()
}

fn ws() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("base.txt"), b"the base\n").unwrap();
    d
}

#[test]
fn unreferenced_blobs_go_and_every_referenced_one_stays() {
    let d = ws();
    let a = Store::open(d.path(), "a").unwrap();
    let b = Store::open(d.path(), "b").unwrap();
    a.stage_write(&rp("base.txt"), b"edited by a", None)
        .unwrap();
    b.stage_write(&rp("new.txt"), b"new in b", None).unwrap();
    a.stage_write(&rp("tmp.txt"), b"soon dropped", None)
        .unwrap();
    a.stage_delete(&rp("tmp.txt")).unwrap();
    let orphan = a.blobs().put(b"never named").unwrap();
    let r = collect(d.path()).unwrap();
    assert_eq!(r.skipped, None);
    assert_eq!(r.removed, 2, "{r:?}"); // "soon dropped" and "never named"
    assert!(!a.blobs().contains(&orphan));
    for content in [&b"edited by a"[..], b"new in b", b"the base\n"] {
        assert!(
            a.blobs().contains(&ContentHash::of(content)),
            "{:?} was collected",
            String::from_utf8_lossy(content)
        );
    }
    // Entries still read back whole: diff needs the base and the content.
    let diff = airlock_stage::diff::unified_diff(&a, &a.snapshot().unwrap(), &[]).unwrap();
    assert!(
        diff.contains("+edited by a") && diff.contains("-the base"),
        "{diff}"
    );
    // Discarding a frees its blobs; b's stay.
    a.discard().unwrap();
    let r = collect(d.path()).unwrap();
    assert_eq!(r.removed, 2, "{r:?}");
    assert!(b.blobs().contains(&ContentHash::of(b"new in b")));
    assert_eq!(collect(d.path()).unwrap().removed, 0, "idempotent");
}

#[test]
fn a_writer_holding_a_pin_is_never_robbed() {
    let d = ws();
    let s = Store::open(d.path(), "default").unwrap();
    // A writer stored its blob and has not committed the entry naming it yet.
    let pin = s.blobs().pin().unwrap();
    let h = s.blobs().put(b"written before the commit").unwrap();
    let r = collect(d.path()).unwrap();
    assert!(r.skipped.is_some(), "{r:?}");
    assert!(s.blobs().contains(&h));
    s.stage_entry(
        &rp("late.txt"),
        Change::Write {
            content: h,
            size: 25,
            mode: 0o644,
        },
        false,
        None,
    )
    .unwrap();
    drop(pin);
    let r = collect(d.path()).unwrap();
    assert_eq!(r.skipped, None);
    assert!(s.blobs().contains(&h), "{r:?}");
}

/// Many batches staged while collections run back to back: every committed entry's blob is there
/// at the end.
#[test]
fn concurrent_staging_and_collection_lose_nothing() {
    let d = ws();
    let root = d.path().to_path_buf();
    let stop = Arc::new(AtomicBool::new(false));
    let collector = {
        let (root, stop) = (root.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut runs = 0;
            while !stop.load(Ordering::SeqCst) {
                collect(&root).unwrap();
                runs += 1;
            }
            runs
        })
    };
    let s = Store::open(&root, "default").unwrap();
    for i in 0..150 {
        s.stage_batch([
            StageOp::Write {
                path: rp(&format!("f{i}.txt")),
                content: format!("content {i}").into_bytes(),
                mode: None,
            },
            // Overwrites make garbage for the collector to find.
            StageOp::Write {
                path: rp(&format!("g{}.txt", i % 3)),
                content: format!("overwritten {i}").into_bytes(),
                mode: None,
            },
        ])
        .unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    let runs = collector.join().unwrap();
    assert!(runs > 0);
    collect(&root).unwrap();
    let snap = s.snapshot().unwrap();
    assert_eq!(snap.entries.len(), 153);
    for e in &snap.entries {
        if let Change::Write { content, .. } = &e.change {
            assert!(s.blobs().contains(content), "{} lost its blob", e.path);
        }
    }
}

#[test]
fn an_unresolved_apply_keeps_its_post_images() {
    let d = ws();
    let s = Store::open(d.path(), "default").unwrap();
    let h = s.blobs().put(b"being applied").unwrap();
    let (j, _) = Journal::open(d.path()).unwrap();
    j.begin(NewRecord {
        session: "default".into(),
        turn: 1,
        tool: "apply".into(),
        args_hash: "h".into(),
        files: vec![FileEffect {
            path: rp("x.txt"),
            pre: Fingerprint::Absent,
            post: Fingerprint::File {
                hash: h,
                mode: 0o644,
            },
            backup: None,
            dir_mode: None,
        }],
        with_backups: false,
        reverts: None,
    })
    .unwrap();
    assert_eq!(collect(d.path()).unwrap().removed, 0);
    assert!(s.blobs().contains(&h));
}

#[test]
fn an_unreadable_session_database_stops_the_collection() {
    let d = ws();
    let s = Store::open(d.path(), "default").unwrap();
    let orphan = s.blobs().put(b"garbage").unwrap();
    std::fs::write(
        d.path().join(".airlock/sessions/broken.db"),
        b"not a database at all, but long enough to be read as one",
    )
    .unwrap();
    let err = collect(d.path()).unwrap_err();
    assert!(err.to_string().contains("broken.db"), "{err}");
    assert!(s.blobs().contains(&orphan), "nothing is removed");
}

#[test]
fn collecting_an_applied_changeset_removes_only_its_unreferenced_blobs() {
    let d = ws();
    let a = Store::open(d.path(), "a").unwrap();
    let b = Store::open(d.path(), "b").unwrap();
    a.stage_write(&rp("x.txt"), b"shared", None).unwrap();
    a.stage_write(&rp("y.txt"), b"only a", None).unwrap();
    b.stage_write(&rp("z.txt"), b"shared", None).unwrap();
    let unrelated = a.blobs().put(b"garbage of someone else").unwrap();
    let applied = airlock_stage::gc::blobs_of(&a.snapshot().unwrap().entries);
    a.discard().unwrap();
    let r = airlock_stage::gc::collect_some(d.path(), &applied).unwrap();
    assert_eq!((r.removed, r.kept), (1, 1), "{r:?}");
    assert!(!a.blobs().contains(&ContentHash::of(b"only a")));
    assert!(
        a.blobs().contains(&ContentHash::of(b"shared")),
        "b names it"
    );
    assert!(a.blobs().contains(&unrelated), "not a candidate");
}

#[test]
fn a_collection_out_of_time_says_so_and_the_next_one_finishes() {
    let d = ws();
    let s = Store::open(d.path(), "default").unwrap();
    for i in 0..300 {
        s.blobs().put(format!("garbage {i}").as_bytes()).unwrap();
    }
    let r = airlock_stage::gc::collect_within(d.path(), Some(std::time::Duration::ZERO)).unwrap();
    assert!(r.unfinished, "{r:?}");
    assert!(r.removed < 300);
    let r2 = collect(d.path()).unwrap();
    assert!(!r2.unfinished);
    assert_eq!(r.removed + r2.removed, 300);
}
