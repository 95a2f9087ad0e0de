//! The degraded backend: same spec, same harvest, no isolation, and it says so.

mod common;

use std::time::Duration;

use airlock_sandbox::{Backend, DegradedBackend, UpperChange, harvest};
use common::Fixture;

#[test]
fn degraded_runs_produce_overlay_style_changes_and_say_degraded() {
    let fx = Fixture::new();
    fx.write("keep.txt", "original\n");
    fx.write("gone.txt", "bye\n");
    fx.write("same.txt", "same\n");
    fx.write("d/x.txt", "x\n");
    let layer = fx.path().join("layer");
    std::fs::create_dir(&layer).unwrap();
    std::fs::write(layer.join("staged.txt"), "staged\n").unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        layer.join("same.txt"),
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::empty(),
        0,
    )
    .unwrap();
    let mut spec = fx.spec(
        "ls; echo changed > keep.txt; rm gone.txt; rm -r d; echo n > new.txt; chmod 600 staged.txt",
    );
    spec.layers = vec![layer];
    let out = DegradedBackend::new().run(&spec).unwrap();
    assert!(out.degraded);
    assert_eq!(out.exit_code, Some(0), "{}", out.stderr.text_lossy());
    assert_eq!(
        out.stdout.text_lossy(),
        "d\ngone.txt\nkeep.txt\nstaged.txt\n"
    );
    assert_eq!(
        std::fs::read_to_string(fx.workspace.join("keep.txt")).unwrap(),
        "original\n"
    );
    let changes = harvest(&fx.upper).unwrap();
    assert_eq!(
        changes,
        vec![
            UpperChange::Delete { path: "d".into() },
            UpperChange::Delete {
                path: "gone.txt".into()
            },
            UpperChange::File {
                path: "keep.txt".into(),
                mode: 0o644
            },
            UpperChange::File {
                path: "new.txt".into(),
                mode: 0o644
            },
            UpperChange::File {
                path: "staged.txt".into(),
                mode: 0o600
            },
        ]
    );
}

#[test]
fn degraded_timeout_kills_the_process_group() {
    let fx = Fixture::new();
    let mut spec = fx.spec("sleep 30 & sleep 30");
    spec.timeout = Duration::from_millis(300);
    let t = std::time::Instant::now();
    let out = DegradedBackend::new().run(&spec).unwrap();
    assert!(out.timed_out && out.degraded);
    assert!(t.elapsed() < Duration::from_secs(5));
}
