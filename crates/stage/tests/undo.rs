//! Undo: reverts the last apply from its backups, refuses when files changed since, and is
//! itself all-or-nothing and recoverable.

mod apply_support;

use airlock_stage::apply::{ApplyContext, apply_verified};
use airlock_stage::journal::{Journal, RecordState};
use airlock_stage::recover::{Resolution, recover};
use airlock_stage::undo::{UndoError, undo_last};
use apply_support::{Fixture, StepFault, mixed, verified};
use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

fn ctx() -> ApplyContext {
    ApplyContext::new("s", 1)
}

#[test]
fn undo_restores_the_exact_pre_state_once() {
    let fx = Fixture::new();
    let v = mixed(&fx);
    let pre = fx.tree();
    let (j, _) = Journal::open(&fx.ws).unwrap();
    let applied = apply_verified(&fx.ws, &v, &fx.blobs, &j, &ctx()).unwrap();
    assert_ne!(fx.tree(), pre);
    let report = undo_last(&fx.ws, &j, &ctx()).unwrap();
    assert_eq!(report.reverted, applied.record);
    assert_eq!(fx.tree(), pre);
    let rec = j.record(report.record).unwrap();
    assert_eq!(rec.tool, "undo");
    assert_eq!(rec.state, RecordState::Committed);
    assert_eq!(rec.reverts, Some(applied.record));
    assert!(matches!(
        undo_last(&fx.ws, &j, &ctx()),
        Err(UndoError::NothingToUndo)
    ));
}

#[test]
fn undo_walks_back_through_successive_applies() {
    let fx = Fixture::new();
    fx.write("a.txt", b"v1", 0o644);
    let t0 = fx.tree();
    let (j, _) = Journal::open(&fx.ws).unwrap();
    let v = verified(vec![fx.stage_write("a.txt", b"v2", 0o644)]);
    apply_verified(&fx.ws, &v, &fx.blobs, &j, &ctx()).unwrap();
    let t1 = fx.tree();
    let v = verified(vec![
        fx.stage_write("a.txt", b"v3", 0o600),
        fx.stage_write("b/c.txt", b"new", 0o644),
    ]);
    apply_verified(&fx.ws, &v, &fx.blobs, &j, &ctx()).unwrap();
    undo_last(&fx.ws, &j, &ctx()).unwrap();
    assert_eq!(fx.tree(), t1);
    undo_last(&fx.ws, &j, &ctx()).unwrap();
    assert_eq!(fx.tree(), t0);
}

#[test]
fn a_file_edited_since_the_apply_makes_undo_refuse_without_writing() {
    let fx = Fixture::new();
    let v = mixed(&fx);
    let (j, _) = Journal::open(&fx.ws).unwrap();
    apply_verified(&fx.ws, &v, &fx.blobs, &j, &ctx()).unwrap();
    fs::write(fx.abs("new/deep/er/file.txt"), b"edited after apply").unwrap();
    let before = fx.tree();
    let err = undo_last(&fx.ws, &j, &ctx()).unwrap_err();
    let paths: Vec<String> = err
        .conflict_paths()
        .expect("a conflict")
        .iter()
        .map(|p| p.display())
        .collect();
    assert_eq!(paths, ["new/deep/er/file.txt"]);
    assert!(err.to_string().contains("new/deep/er/file.txt"), "{err}");
    assert_eq!(fx.tree(), before);
    assert_eq!(j.records().unwrap().len(), 1, "no undo record is written");
}

#[test]
fn an_io_error_during_undo_leaves_the_applied_state() {
    for at in 0.. {
        let fx = Fixture::new();
        let v = mixed(&fx);
        let (j, _) = Journal::open(&fx.ws).unwrap();
        apply_verified(&fx.ws, &v, &fx.blobs, &j, &ctx()).unwrap();
        let post = fx.tree();
        let fault = Arc::new(StepFault {
            at,
            panic: false,
            seen: Default::default(),
        });
        let ctx = ApplyContext {
            faults: Some(fault),
            ..ctx()
        };
        match undo_last(&fx.ws, &j, &ctx) {
            Ok(_) => {
                assert!(at > 10);
                break;
            }
            Err(e) => {
                assert!(
                    matches!(
                        e,
                        UndoError::Io {
                            rolled_back: true,
                            ..
                        }
                    ),
                    "step {at}: {e}"
                );
                assert_eq!(fx.tree(), post, "step {at}");
            }
        }
    }
}

#[test]
fn a_crash_during_undo_recovers_to_before_or_after_the_undo() {
    let mut seen_rollback = false;
    for at in (0..40).step_by(3) {
        let fx = Fixture::new();
        let v = mixed(&fx);
        let pre = fx.tree();
        let post;
        {
            let (j, _) = Journal::open(&fx.ws).unwrap();
            apply_verified(&fx.ws, &v, &fx.blobs, &j, &ctx()).unwrap();
            post = fx.tree();
            let ctx = ApplyContext {
                faults: Some(StepFault::crash(at)),
                ..ctx()
            };
            if catch_unwind(AssertUnwindSafe(|| undo_last(&fx.ws, &j, &ctx))).is_ok() {
                assert_eq!(fx.tree(), pre);
                break;
            }
        }
        let (j, _) = Journal::open(&fx.ws).unwrap();
        let out = recover(&fx.ws, &j).unwrap();
        let undo = out.iter().find(|o| o.tool == "undo").unwrap();
        match undo.outcome {
            Resolution::RolledBack => {
                seen_rollback = true;
                assert_eq!(fx.tree(), post, "step {at}");
                // The apply is still there to undo.
                undo_last(&fx.ws, &j, &ctx()).unwrap();
                assert_eq!(fx.tree(), pre);
            }
            Resolution::Completed => assert_eq!(fx.tree(), pre, "step {at}"),
            other => panic!("step {at}: {other:?}"),
        }
    }
    assert!(seen_rollback);
}
