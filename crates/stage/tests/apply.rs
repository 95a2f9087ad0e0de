//! Apply against a real workspace: every kind of change, conflicts, refusals, confinement and
//! injected I/O errors at every step.

mod apply_support;

use airlock_stage::apply::{
    ApplyContext, ApplyError, FaultHook, HostExecGate, Phase, Step, apply_verified,
};
use airlock_stage::journal::{Journal, RecordState};
use airlock_stage::model::{Change, Fingerprint, Flag};
use airlock_types::RelPath;
use apply_support::{Fixture, mixed, verified};
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

fn ctx() -> ApplyContext {
    ApplyContext::new("s", 1)
}

#[test]
fn applies_every_kind_of_change_and_journals_it() {
    let fx = Fixture::new();
    let v = mixed(&fx);
    let (j, _) = Journal::open(&fx.ws).unwrap();
    let report = apply_verified(&fx.ws, &v, &fx.blobs, &j, &ctx()).unwrap();

    assert_eq!(
        fs::read(fx.abs("src/main.rs")).unwrap(),
        b"fn main() { println!(\"x\"); }\n"
    );
    assert!(!fx.abs("src/old.rs").exists());
    let mode = |p: &str| {
        fs::symlink_metadata(fx.abs(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(mode("run.sh"), 0o700);
    assert_eq!(fs::read(fx.abs("new/deep/er/file.txt")).unwrap(), b"nested");
    assert_eq!(mode("new/deep/er/file.txt"), 0o640);
    assert!(fx.abs("became_dir").is_dir());
    assert_eq!(mode("became_dir"), 0o750);
    assert_eq!(fs::read(fx.abs("became_dir/inner.txt")).unwrap(), b"inside");
    assert!(!fx.abs("gone_dir").exists());
    assert_eq!(
        fs::read_link(fx.abs("link")).unwrap(),
        Path::new("keep.txt")
    );
    assert_eq!(
        fs::read_link(fx.abs("newlink")).unwrap(),
        Path::new("../outside-is-just-bytes")
    );
    assert_eq!(fs::read(fx.abs("keep.txt")).unwrap(), b"unchanged");

    let created: Vec<String> = report.created_dirs.iter().map(|p| p.display()).collect();
    assert_eq!(created, ["new", "new/deep", "new/deep/er"]);
    assert_eq!(report.deleted.len(), 2);
    assert_eq!(report.written.len(), 7);

    let recs = j.records().unwrap();
    assert_eq!(recs.len(), 1);
    let rec = &recs[0];
    assert_eq!(rec.id, report.record);
    assert_eq!(rec.state, RecordState::Committed);
    assert_eq!(rec.tool, "apply");
    // The original of src/main.rs is in the backup directory, byte for byte.
    let main = rec
        .files
        .iter()
        .find(|f| f.path.display() == "src/main.rs")
        .unwrap();
    let backup = fx.ws.join(main.backup.as_ref().unwrap());
    assert_eq!(fs::read(backup).unwrap(), b"fn main() {}\n");
    // No temp file is left anywhere.
    for (p, _) in fx.tree() {
        assert!(
            !p.to_string_lossy().contains(".airlock-tmp-"),
            "leftover temp {p:?}"
        );
    }
}

#[test]
fn a_file_edited_on_disk_since_staging_is_a_conflict_and_nothing_is_written() {
    let fx = Fixture::new();
    fx.write("a.txt", b"one", 0o644);
    fx.write("b.txt", b"two", 0o644);
    let v = verified(vec![
        fx.stage_write("a.txt", b"ONE", 0o644),
        fx.stage_write("b.txt", b"TWO", 0o644),
        fx.stage_write("c.txt", b"three", 0o644),
    ]);
    fx.write("b.txt", b"edited by a human", 0o644);
    let before = fx.tree();
    let (j, _) = Journal::open(&fx.ws).unwrap();
    let err = apply_verified(&fx.ws, &v, &fx.blobs, &j, &ctx()).unwrap_err();
    match &err {
        ApplyError::Conflict(c) => {
            assert_eq!(c.len(), 1);
            assert_eq!(c[0].path.display(), "b.txt");
            assert!(matches!(c[0].found, Fingerprint::File { .. }));
        }
        other => panic!("expected a conflict, got {other}"),
    }
    assert!(err.to_string().contains("b.txt"), "{err}");
    assert_eq!(fx.tree(), before);
    assert!(j.records().unwrap().is_empty());
}

#[test]
fn flagged_and_internal_entries_are_refused_and_session_local_ones_skipped() {
    let fx = Fixture::new();
    let mut flagged = fx.stage(
        "evil",
        Change::Symlink {
            target: b"/etc/passwd".to_vec(),
        },
    );
    flagged.flagged = Some(Flag::LinkOutside);
    let (j, _) = Journal::open(&fx.ws).unwrap();
    let v = verified(vec![fx.stage_write("ok.txt", b"x", 0o644), flagged]);
    let err = apply_verified(&fx.ws, &v, &fx.blobs, &j, &ctx()).unwrap_err();
    assert!(matches!(err, ApplyError::Refused { .. }), "{err}");
    assert!(err.to_string().contains("outside the workspace"), "{err}");
    assert!(!fx.abs("ok.txt").exists());

    let v = verified(vec![fx.stage_write(".airlock/journal.db", b"x", 0o644)]);
    let err = apply_verified(&fx.ws, &v, &fx.blobs, &j, &ctx()).unwrap_err();
    assert!(err.to_string().contains(".airlock"), "{err}");

    let mut local = fx.stage_write("target/debug/out", b"build output", 0o644);
    local.session_local = true;
    let v = verified(vec![fx.stage_write("ok.txt", b"x", 0o644), local]);
    let report = apply_verified(&fx.ws, &v, &fx.blobs, &j, &ctx()).unwrap();
    assert_eq!(
        report.skipped_session_local[0].display(),
        "target/debug/out"
    );
    assert!(!fx.abs("target").exists());
    assert!(fx.abs("ok.txt").exists());
}

#[test]
fn setuid_and_setgid_bits_are_stripped_from_files_and_directories() {
    let fx = Fixture::new();
    // The workspace's own setgid directory: directories created in it would inherit the bit.
    fs::create_dir_all(fx.abs("grp")).unwrap();
    fs::set_permissions(fx.abs("grp"), fs::Permissions::from_mode(0o2775)).unwrap();
    let v = verified(vec![
        fx.stage_write("suid", b"x", 0o4755),
        fx.stage_write("sgid", b"x", 0o2711),
        fx.stage("shared", Change::Dir { mode: 0o2775 }),
        fx.stage("sticky", Change::Dir { mode: 0o1777 }),
        fx.stage("grp/made", Change::Dir { mode: 0o755 }),
        fx.stage_write("grp/implied/f", b"x", 0o644),
    ]);
    let (j, _) = Journal::open(&fx.ws).unwrap();
    apply_verified(&fx.ws, &v, &fx.blobs, &j, &ctx()).unwrap();
    let mode = |p: &str| {
        fs::symlink_metadata(fx.abs(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(mode("suid"), 0o755);
    assert_eq!(mode("sgid"), 0o711);
    assert_eq!(mode("shared"), 0o775);
    assert_eq!(
        mode("sticky"),
        0o1777,
        "the sticky bit grants nothing and is kept"
    );
    assert_eq!(mode("grp/made"), 0o755);
    assert_eq!(mode("grp/implied") & 0o6000, 0);
    assert_eq!(mode("grp"), 0o2775, "the user's own directory is untouched");
}

/// A gate standing in for the caller's judgement: paths with a `.git` component are host-exec
/// paths; `granted` lists the operator's paths. (The kernel's gate, built from the policy's
/// classification, is tested with this same changeset in the kernel.)
struct GitGate {
    granted: Vec<RelPath>,
}

fn git_flag() -> Flag {
    Flag::host_exec("git")
}

impl GitGate {
    fn arc(granted: &[&str]) -> Arc<GitGate> {
        Arc::new(GitGate {
            granted: granted.iter().map(|p| RelPath::new(p).unwrap()).collect(),
        })
    }
    fn is_git(path: &RelPath) -> bool {
        path.components().any(|c| c == ".git")
    }
    fn granted(&self, path: &RelPath) -> bool {
        self.granted.iter().any(|g| path.starts_with(g))
    }
}

impl HostExecGate for GitGate {
    fn ungranted(&self, path: &RelPath) -> Option<String> {
        (Self::is_git(path) && !self.granted(path)).then(|| "a git control entry (git)".into())
    }
    fn lifts_flag(&self, path: &RelPath, flag: &Flag) -> bool {
        Self::is_git(path) && self.granted(path) && *flag == git_flag()
    }
}

#[test]
fn host_exec_entries_are_refused_unless_the_callers_gate_grants_them() {
    let fx = Fixture::new();
    fs::create_dir_all(fx.abs(".git/objects/ab")).unwrap();
    fx.write(".git/objects/ab/cd", b"object", 0o444);
    fs::create_dir_all(fx.abs("sub")).unwrap();
    let (j, _) = Journal::open(&fx.ws).unwrap();
    let gitfile = || fx.stage_write("sub/.git", b"gitdir: ../evil", 0o644);
    let wipe = || fx.stage(".git/objects/ab/cd", Change::Delete);
    let ungranted = ApplyContext {
        host_exec: GitGate::arc(&[]),
        ..ctx()
    };
    for entries in [
        vec![gitfile()],
        vec![wipe()],
        vec![fx.stage_write("ok", b"x", 0o644), gitfile()],
    ] {
        let before = fx.tree();
        let err =
            apply_verified(&fx.ws, &verified(entries), &fx.blobs, &j, &ungranted).unwrap_err();
        assert!(matches!(err, ApplyError::Refused { .. }), "{err}");
        assert!(err.to_string().contains("--allow-host-exec"), "{err}");
        assert_eq!(fx.tree(), before, "nothing written");
    }
    // The copy-up of an existing control directory changes nothing and is not refused.
    let v = verified(vec![fx.stage(".git", Change::Dir { mode: 0o755 })]);
    apply_verified(&fx.ws, &v, &fx.blobs, &j, &ungranted).unwrap();
    // A context nobody configured lifts no flag.
    let mut flagged_wipe = wipe();
    flagged_wipe.flagged = Some(git_flag());
    let err = apply_verified(
        &fx.ws,
        &verified(vec![flagged_wipe.clone()]),
        &fx.blobs,
        &j,
        &ctx(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("flagged"), "{err}");
    // Granted: applied, flagged by the harvest or not.
    let granted = ApplyContext {
        host_exec: GitGate::arc(&["sub/.git", ".git/objects"]),
        ..ctx()
    };
    let v = verified(vec![gitfile(), flagged_wipe]);
    apply_verified(&fx.ws, &v, &fx.blobs, &j, &granted).unwrap();
    assert!(fx.abs("sub/.git").is_file());
    assert!(!fx.abs(".git/objects/ab/cd").exists());
    // A grant lifts only the host-exec flag, never another reason.
    let mut escape = fx.stage(
        ".git/hooks",
        Change::Symlink {
            target: b"/etc".to_vec(),
        },
    );
    escape.flagged = Some(Flag::LinkOutside);
    let granted = ApplyContext {
        host_exec: GitGate::arc(&[".git"]),
        ..ctx()
    };
    let err = apply_verified(&fx.ws, &verified(vec![escape]), &fx.blobs, &j, &granted).unwrap_err();
    assert!(err.to_string().contains("outside the workspace"), "{err}");
}

#[test]
fn a_parent_swapped_for_a_symlink_after_staging_is_refused() {
    let fx = Fixture::new();
    let outside = tempfile::tempdir().unwrap();
    fs::create_dir_all(fx.abs("sub")).unwrap();
    let v = verified(vec![fx.stage_write("sub/f.txt", b"payload", 0o644)]);
    // After staging, `sub` becomes a symlink to a directory outside the workspace.
    fs::remove_dir(fx.abs("sub")).unwrap();
    std::os::unix::fs::symlink(outside.path(), fx.abs("sub")).unwrap();
    let (j, _) = Journal::open(&fx.ws).unwrap();
    let err = apply_verified(&fx.ws, &v, &fx.blobs, &j, &ctx()).unwrap_err();
    assert!(
        matches!(&err, ApplyError::Refused { why, .. } if why.contains("symbolic link")),
        "{err}"
    );
    assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
}

#[test]
fn a_symlink_replaced_by_a_directory_with_contents_is_applied_without_following_it() {
    let fx = Fixture::new();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), fx.abs("d")).unwrap();
    let v = verified(vec![
        fx.stage("d", Change::Dir { mode: 0o755 }),
        StagedEntryExt::absent(fx.stage_write("d/x.txt", b"inside", 0o644)),
    ]);
    let (j, _) = Journal::open(&fx.ws).unwrap();
    apply_verified(&fx.ws, &v, &fx.blobs, &j, &ctx()).unwrap();
    assert!(fs::symlink_metadata(fx.abs("d")).unwrap().is_dir());
    assert_eq!(fs::read(fx.abs("d/x.txt")).unwrap(), b"inside");
    assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
}

/// Staging below a symlink records the base as absent (the staging layer never looks through it).
trait StagedEntryExt {
    fn absent(self) -> Self;
}
impl StagedEntryExt for airlock_stage::StagedEntry {
    fn absent(mut self) -> Self {
        self.base = Fingerprint::Absent;
        self
    }
}

/// Fails the `n`th mutating step with EIO.
struct FailAt {
    n: usize,
    seen: AtomicUsize,
    hit: std::sync::Mutex<Option<(Phase, String)>>,
}

impl FaultHook for FailAt {
    fn before(&self, step: &Step<'_>) -> io::Result<()> {
        let i = self.seen.fetch_add(1, Ordering::SeqCst);
        if i == self.n {
            *self.hit.lock().unwrap() = Some((step.phase, step.path.display()));
            return Err(io::Error::from_raw_os_error(5));
        }
        Ok(())
    }
}

#[test]
fn an_io_error_at_any_step_rolls_back_to_the_exact_pre_state() {
    let mut n = 0;
    loop {
        let fx = Fixture::new();
        let v = mixed(&fx);
        let before = fx.tree();
        let (j, _) = Journal::open(&fx.ws).unwrap();
        let hook = Arc::new(FailAt {
            n,
            seen: AtomicUsize::new(0),
            hit: Default::default(),
        });
        let ctx = ApplyContext {
            faults: Some(hook.clone()),
            ..ctx()
        };
        match apply_verified(&fx.ws, &v, &fx.blobs, &j, &ctx) {
            Ok(_) => {
                assert!(hook.hit.lock().unwrap().is_none());
                assert!(n > 10, "too few steps: {n}");
                break;
            }
            Err(err) => {
                let (phase, path) = hook.hit.lock().unwrap().clone().unwrap();
                assert!(
                    matches!(
                        err,
                        ApplyError::Io {
                            rolled_back: true,
                            ..
                        }
                    ),
                    "step {n} ({phase:?} {path}): {err}"
                );
                let msg = err.to_string();
                assert!(msg.contains("Input/output error"), "{msg}");
                assert!(msg.contains(&path), "{msg} should name {path}");
                assert_eq!(fx.tree(), before, "step {n} ({phase:?} {path})");
                let rec = &j.records().unwrap()[0];
                assert_eq!(rec.state, RecordState::Failed);
                assert!(rec.error.as_deref().unwrap().contains(&path));
                // Nothing of the failed attempt remains: no temps, no backups.
                assert!(!fx.ws.join(format!(".airlock/backups/{}", rec.id)).exists());
            }
        }
        n += 1;
    }
}

#[test]
fn a_large_changeset_uses_the_same_protocol() {
    let fx = Fixture::new();
    for i in 0..60 {
        fx.write(
            &format!("d{}/f{i}.txt", i % 7),
            format!("old {i}").as_bytes(),
            0o644,
        );
    }
    let mut entries = Vec::new();
    for i in 0..60 {
        let p = format!("d{}/f{i}.txt", i % 7);
        entries.push(match i % 3 {
            0 => fx.stage(&p, Change::Delete),
            _ => fx.stage_write(&p, format!("new {i}").as_bytes(), 0o600),
        });
        entries.push(fx.stage_write(&format!("fresh/{i}/x"), b"x", 0o644));
    }
    let v = verified(entries);
    let (j, _) = Journal::open(&fx.ws).unwrap();
    apply_verified(&fx.ws, &v, &fx.blobs, &j, &ctx()).unwrap();
    for i in 0..60 {
        let p = fx.abs(&format!("d{}/f{i}.txt", i % 7));
        if i % 3 == 0 {
            assert!(!p.exists());
        } else {
            assert_eq!(fs::read(&p).unwrap(), format!("new {i}").as_bytes());
        }
        assert!(fx.abs(&format!("fresh/{i}/x")).exists());
    }
    let _ = RelPath::new("x").unwrap();
}
