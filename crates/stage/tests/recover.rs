//! Recovery after an in-process crash at every step of apply, undo and recovery itself (the
//! SIGKILL tests in fault_kill.rs do the same with real processes).

mod apply_support;

use airlock_stage::apply::{ApplyContext, apply_verified};
use airlock_stage::journal::{Journal, NewRecord, RecordState};
use airlock_stage::recover::{Resolution, recover, recover_with};
use airlock_stage::undo::undo_last;
use apply_support::{Fixture, StepFault, mixed};
use std::collections::BTreeMap;
use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;

type Tree = BTreeMap<PathBuf, airlock_stage::Fingerprint>;

/// The pre- and post-state of the mixed changeset, from a clean run.
fn reference() -> (Tree, Tree) {
    let fx = Fixture::new();
    let v = mixed(&fx);
    let pre = fx.tree();
    let (j, _) = Journal::open(&fx.ws).unwrap();
    apply_verified(&fx.ws, &v, &fx.blobs, &j, &ApplyContext::new("s", 1)).unwrap();
    (pre, fx.tree())
}

#[test]
fn a_crash_at_any_step_of_apply_recovers_to_exactly_pre_or_post() {
    let (pre, post) = reference();
    let (mut rolled_back, mut completed) = (0, 0);
    for at in 0.. {
        let fx = Fixture::new();
        let v = mixed(&fx);
        let fault = StepFault::crash(at);
        let crashed = {
            let (j, _) = Journal::open(&fx.ws).unwrap();
            let ctx = ApplyContext {
                faults: Some(fault.clone()),
                ..ApplyContext::new("s", 1)
            };
            catch_unwind(AssertUnwindSafe(|| {
                apply_verified(&fx.ws, &v, &fx.blobs, &j, &ctx)
            }))
            .is_err()
        };
        if !crashed {
            assert!(at > 10, "only {at} steps");
            break;
        }
        // Restart: the pending record becomes unknown, then recovery resolves it.
        let (j, notices) = Journal::open(&fx.ws).unwrap();
        assert!(
            notices.iter().any(|n| n.to_string().contains("unknown")),
            "{notices:?}"
        );
        let out = recover(&fx.ws, &j).unwrap();
        assert_eq!(out.len(), 1, "step {at}: {out:?}");
        let tree = fx.tree();
        let rec = &j.records().unwrap()[0];
        match out[0].outcome {
            Resolution::RolledBack => {
                assert_eq!(tree, pre, "step {at}");
                assert_eq!(rec.state, RecordState::RolledBack);
                rolled_back += 1;
            }
            Resolution::Completed => {
                assert_eq!(tree, post, "step {at}");
                assert_eq!(rec.state, RecordState::Completed);
                completed += 1;
            }
            other => panic!("step {at}: {other:?} {:?}", out[0]),
        }
        // Idempotent: a second run changes nothing and reports nothing new.
        assert!(recover(&fx.ws, &j).unwrap().is_empty());
        assert_eq!(fx.tree(), tree);
        let leftovers = fx
            .tree()
            .keys()
            .filter(|p| p.to_string_lossy().contains(".airlock-"))
            .count();
        assert_eq!(leftovers, 0, "step {at}");
    }
    assert!(rolled_back > 5);
    assert!(
        completed >= 1,
        "a crash after the last sync is completed, not rolled back"
    );
}

#[test]
fn a_crash_during_recovery_is_recovered_by_the_next_run() {
    let (pre, _) = reference();
    // Crash the apply late (after the renames started), then crash recovery at each step.
    for rec_at in 0.. {
        let fx = Fixture::new();
        let v = mixed(&fx);
        {
            let (j, _) = Journal::open(&fx.ws).unwrap();
            let ctx = ApplyContext {
                faults: Some(StepFault::crash(20)),
                ..ApplyContext::new("s", 1)
            };
            assert!(
                catch_unwind(AssertUnwindSafe(|| {
                    apply_verified(&fx.ws, &v, &fx.blobs, &j, &ctx)
                }))
                .is_err()
            );
        }
        let crashed = {
            let (j, _) = Journal::open(&fx.ws).unwrap();
            let fault = StepFault::crash(rec_at);
            catch_unwind(AssertUnwindSafe(|| {
                recover_with(&fx.ws, &j, Some(fault.as_ref()))
            }))
            .is_err()
        };
        let (j, _) = Journal::open(&fx.ws).unwrap();
        let out = recover(&fx.ws, &j).unwrap();
        assert_eq!(fx.tree(), pre, "recovery step {rec_at}");
        if !crashed {
            assert!(out.is_empty());
            assert!(rec_at > 3);
            break;
        }
        assert_eq!(out[0].outcome, Resolution::RolledBack);
    }
}

#[test]
fn a_path_changed_after_the_crash_needs_attention_and_nothing_is_touched() {
    let fx = Fixture::new();
    let v = mixed(&fx);
    {
        let (j, _) = Journal::open(&fx.ws).unwrap();
        let ctx = ApplyContext {
            faults: Some(StepFault::crash(20)),
            ..ApplyContext::new("s", 1)
        };
        let _ = catch_unwind(AssertUnwindSafe(|| {
            apply_verified(&fx.ws, &v, &fx.blobs, &j, &ctx)
        }));
    }
    fs::write(
        fx.abs("src/main.rs"),
        b"a human edited this after the crash",
    )
    .unwrap();
    let is_temp = |p: &PathBuf| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with(".airlock-tmp-"))
    };
    let (temps, before): (Tree, Tree) = fx.tree().into_iter().partition(|(p, _)| is_temp(p));
    assert!(!temps.is_empty(), "the crash left temps");
    let (j, _) = Journal::open(&fx.ws).unwrap();
    let out = recover(&fx.ws, &j).unwrap();
    assert_eq!(out[0].outcome, Resolution::NeedsAttention);
    assert_eq!(out[0].details.len(), 1);
    assert_eq!(out[0].details[0].path.display(), "src/main.rs");
    assert_eq!(out[0].details[0].found, "other");
    // Every path is left as it is; only airlock's own temps are removed, and reported.
    assert_eq!(fx.tree(), before);
    let mut removed = out[0].removed.clone();
    removed.sort();
    assert_eq!(removed, temps.into_keys().collect::<Vec<_>>());
    assert_eq!(j.records().unwrap()[0].state, RecordState::NeedsAttention);
    let json = serde_json::to_value(&out[0]).unwrap();
    assert_eq!(json["outcome"], "needs_attention");
}

#[test]
fn external_effects_are_never_rerun_and_lost_turn_work_is_kept() {
    let fx = Fixture::new();
    let v = mixed(&fx);
    let post;
    {
        let (j, _) = Journal::open(&fx.ws).unwrap();
        apply_verified(&fx.ws, &v, &fx.blobs, &j, &ApplyContext::new("s", 7)).unwrap();
        post = fx.tree();
        j.begin(NewRecord {
            session: "s".into(),
            turn: 7,
            tool: "git_push".into(),
            args_hash: "h".into(),
            ..Default::default()
        })
        .unwrap();
        // The process dies before turn 7 finishes.
    }
    let (j, _) = Journal::open(&fx.ws).unwrap();
    let out = recover(&fx.ws, &j).unwrap();
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!(out[0].outcome, Resolution::Kept);
    assert_eq!(out[0].tool, "apply");
    assert!(out[0].note.contains("not redone"), "{}", out[0].note);
    assert_eq!(out[1].outcome, Resolution::NeedsAttention);
    assert!(out[1].note.contains("git_push"));
    assert_eq!(fx.tree(), post);
    assert!(recover(&fx.ws, &j).unwrap().is_empty());
    // The kept apply can still be undone.
    undo_last(&fx.ws, &j, &ApplyContext::new("s", 8)).unwrap();
}

#[test]
fn the_sweep_keeps_temps_of_an_unresolved_record_and_names_that_are_not_airlocks() {
    let fx = Fixture::new();
    fx.write("src/keep.txt", b"k", 0o644);
    let (j, _) = Journal::open(&fx.ws).unwrap();
    // An apply in flight in this process: its record is pending and its temps are needed.
    let id = j
        .begin(NewRecord {
            session: "s".into(),
            turn: 1,
            tool: "apply".into(),
            args_hash: "h".into(),
            ..Default::default()
        })
        .unwrap();
    let mine = format!("src/.airlock-tmp-{id}-0");
    fx.write(&mine, b"in flight", 0o600);
    // Look-alikes that airlock never makes, and a resolved record's leftovers.
    for other in [
        "src/.airlock-tmp-x-1",
        "src/.airlock-tmp-07-1",
        "src/.airlock-tmp-99",
        "src/.airlock-tmp-99-1.bak",
        "src/airlock-tmp-99-1",
    ] {
        fx.write(other, b"user file", 0o644);
    }
    fx.write("deep/er/.airlock-rst-99-3", b"leftover", 0o600);
    fx.write("src/.airlock-tmp-99-4", b"leftover", 0o600);
    std::os::unix::fs::symlink("/etc", fx.abs("through")).unwrap();
    let out = airlock_stage::recover::sweep_temps(&fx.ws, &j).unwrap();
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].record, 99);
    let mut removed: Vec<String> = out[0]
        .removed
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    removed.sort();
    assert_eq!(
        removed,
        ["deep/er/.airlock-rst-99-3", "src/.airlock-tmp-99-4"]
    );
    assert!(fx.abs(&mine).exists(), "a pending record's temp is kept");
    for other in [
        "src/.airlock-tmp-x-1",
        "src/.airlock-tmp-07-1",
        "src/.airlock-tmp-99",
        "src/.airlock-tmp-99-1.bak",
        "src/airlock-tmp-99-1",
    ] {
        assert!(fx.abs(other).exists(), "{other} is not airlock's");
    }
    let json = serde_json::to_value(&out[0]).unwrap();
    assert_eq!(json["outcome"], "cleaned");
    assert_eq!(json["tool"], "unknown");
}
