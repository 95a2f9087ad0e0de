//! `--impacted-first` on real open-source projects (set up by
//! `scripts/ci-deps-realprojects.sh` into `target/realprojects/`), through the real sandbox:
//! the tests related to a staged change run first, in the runner's own terms, and fail fast;
//! when they pass the whole suite runs and its verdict is the one returned. Each test prints
//! the durations it measured (`--nocapture` shows them).

use std::time::Duration;

mod realprojects;

mod host;
use airlock_verify::{ImpactedMode, ImpactedStatus, RunnerKind, Scope, Verdict, VerdictReport};
use realprojects::{Workspace, in_place, staged, total};

fn verify(ws: &Workspace, layer: &tempfile::TempDir, mode: ImpactedMode) -> VerdictReport {
    let opts = airlock_verify::VerifyOptions {
        impacted: mode,
        ..realprojects::options(Duration::from_secs(300))
    };
    realprojects::verify_with(ws, vec![layer.path().to_path_buf()], &opts)
}

fn measured(project: &str, what: &str, r: &VerdictReport) {
    let phase = r.impacted.as_ref().map_or(0, |i| i.duration_ms);
    eprintln!(
        "[{project}] {what}: verdict {} scope {:?}, {} tests, {} ms in all, impacted phase {} ms",
        r.verdict,
        r.scope,
        total(r),
        r.duration_ms,
        phase
    );
}

/// The failing impacted phase: its verdict, marked with its scope, and its run named.
fn assert_failed_fast(r: &VerdictReport) {
    assert_eq!(r.verdict, Verdict::Failed, "{r:#?}");
    assert_eq!(r.scope, Some(Scope::Impacted), "{r:#?}");
    let i = r.impacted.as_ref().unwrap();
    assert_eq!(i.status, ImpactedStatus::Ran, "{r:#?}");
    assert_eq!(i.verdict, Some(Verdict::Failed), "{r:#?}");
    assert_eq!(i.argv, r.argv);
    assert!(
        r.diagnostics.starts_with("impacted first:") && r.diagnostics.contains("did not run"),
        "{}",
        r.diagnostics
    );
}

#[test]
fn go_runs_the_changed_package_first() {
    let ws = in_place("go-cmp");
    let broken = staged(
        &ws,
        "cmp/internal/value/name.go",
        r#"return append(b, "any"...)"#,
        r#"return append(b, "anything"...)"#,
    );
    let fast = verify(&ws, &broken, ImpactedMode::First);
    measured("go-cmp", "failing change, impacted first", &fast);
    assert_failed_fast(&fast);
    assert_eq!(
        fast.impacted.as_ref().unwrap().selected,
        ["./cmp/internal/value"]
    );
    assert!(
        fast.argv.iter().any(|a| a == "./cmp/internal/value")
            && !fast.argv.iter().any(|a| a == "./..."),
        "{:?}",
        fast.argv
    );
    assert!(fast.failures.iter().all(|f| {
        f.file
            .as_deref()
            .is_some_and(|p| p.starts_with("cmp/internal/value/"))
    }));

    let full = verify(&ws, &broken, ImpactedMode::Off);
    measured("go-cmp", "failing change, full suite", &full);
    assert_eq!(full.verdict, Verdict::Failed);
    assert!(
        total(&fast) < total(&full),
        "{} vs {}",
        total(&fast),
        total(&full)
    );

    // A harmless change: the package passes first, then the whole suite runs and decides.
    let fine = staged(
        &ws,
        "cmp/internal/value/name.go",
        "var anyType",
        "// A comment.\nvar anyType",
    );
    let r = verify(&ws, &fine, ImpactedMode::First);
    measured("go-cmp", "passing change, impacted first", &r);
    assert_eq!(r.verdict, Verdict::Passed, "{r:#?}");
    assert_eq!(r.scope, Some(Scope::Full));
    assert!(r.argv.iter().any(|a| a == "./..."), "{:?}", r.argv);
    let i = r.impacted.as_ref().unwrap();
    assert_eq!(i.verdict, Some(Verdict::Passed));
    assert!(i.tests.unwrap().passed > 0 && i.tests.unwrap().passed < r.tests.passed);
    assert!(
        r.diagnostics
            .starts_with("impacted first: the related tests gave passed")
    );
}

#[test]
fn pytest_runs_the_test_files_importing_the_change_first() {
    let ws = in_place("packaging");
    let broken = staged(
        &ws,
        "src/packaging/utils.py",
        r#"_canonicalize_regex.sub("-", name).lower()"#,
        r#"_canonicalize_regex.sub("_", name).lower()"#,
    );
    let fast = verify(&ws, &broken, ImpactedMode::First);
    measured("packaging", "failing change, impacted first", &fast);
    assert_failed_fast(&fast);
    // The selected tests ran (a broken environment fails too, with nothing passing).
    assert!(fast.tests.passed > 0, "{fast:#?}");
    let selected = &fast.impacted.as_ref().unwrap().selected;
    eprintln!("[packaging] selected: {selected:?}");
    assert!(
        selected.iter().any(|s| s == "tests/test_utils.py"),
        "{selected:?}"
    );
    // test_elffile imports only packaging._elffile, which does not reach utils.
    assert!(
        !selected.iter().any(|s| s == "tests/test_elffile.py"),
        "{selected:?}"
    );
    assert!(fast.argv.iter().any(|a| a == "tests/test_utils.py"));

    let full = verify(&ws, &broken, ImpactedMode::Off);
    measured("packaging", "failing change, full suite", &full);
    assert!(
        total(&fast) < total(&full),
        "{} vs {}",
        total(&fast),
        total(&full)
    );

    // `--impacted` alone: only the related tests, and the verdict says so.
    let only = verify(&ws, &broken, ImpactedMode::Only);
    assert_eq!(only.scope, Some(Scope::Impacted));
    assert_eq!(total(&only), total(&fast));
    assert!(
        only.diagnostics
            .starts_with("impacted: only the tests related")
    );

    // A change no test imports: nothing related, the whole suite at once.
    let readme = staged(&ws, "README.rst", "packaging", "Packaging");
    let r = verify(&ws, &readme, ImpactedMode::First);
    assert_eq!(r.scope, Some(Scope::Full));
    assert_eq!(
        r.impacted.as_ref().unwrap().status,
        ImpactedStatus::NoneRelated
    );
    assert_eq!(total(&r), total(&full));
    let r = verify(&ws, &readme, ImpactedMode::Only);
    assert_eq!((r.verdict, total(&r)), (Verdict::NoTests, 0), "{r:#?}");
}

#[test]
fn cargo_runs_the_changed_integration_test_first() {
    let ws = in_place("semver");
    let broken = staged(
        &ws,
        "tests/test_version.rs",
        "empty string, expected a semver version",
        "empty string, expected a version",
    );
    let fast = verify(&ws, &broken, ImpactedMode::First);
    measured("semver", "failing test change, impacted first", &fast);
    assert_failed_fast(&fast);
    assert!(
        fast.argv
            .windows(4)
            .any(|w| w == ["-p", "semver", "--test", "test_version"]),
        "{:?}",
        fast.argv
    );
    let full = verify(&ws, &broken, ImpactedMode::Off);
    measured("semver", "failing test change, full suite", &full);
    assert!(
        total(&fast) < total(&full),
        "{} vs {}",
        total(&fast),
        total(&full)
    );

    // The crate's own source: the crate is the whole project, so the whole suite runs.
    let src = staged(
        &ws,
        "src/display.rs",
        r#""{}.{}.{}", self.major"#,
        r#""{}.{}.{}.", self.major"#,
    );
    let r = verify(&ws, &src, ImpactedMode::First);
    measured("semver", "source change, impacted first", &r);
    assert_eq!(r.verdict, Verdict::Failed);
    assert_eq!(r.scope, Some(Scope::Full));
    assert_eq!(
        r.impacted.as_ref().unwrap().status,
        ImpactedStatus::Everything
    );
    assert_eq!(total(&r), total(&full));
}

#[test]
fn jest_finds_its_related_tests() {
    let ws = in_place("gensync-jest");
    let broken = staged(
        &ws,
        "index.js",
        "  return value;\n}\n\nfunction evaluateAsync",
        "  return [value];\n}\n\nfunction evaluateAsync",
    );
    let r = verify(&ws, &broken, ImpactedMode::First);
    measured("gensync-jest", "failing change, impacted first", &r);
    assert_failed_fast(&r);
    assert_eq!(r.runner, RunnerKind::Jest);
    // The script's runner, run directly with jest's own related-tests selection.
    assert!(
        r.argv
            .ends_with(&["--findRelatedTests".into(), "index.js".into()]),
        "{:?}",
        r.argv
    );
    assert!(r.tests.failed > 0, "{r:#?}");

    let readme = staged(&ws, "README.md", "gensync", "Gensync");
    let r = verify(&ws, &readme, ImpactedMode::First);
    assert_eq!(r.verdict, Verdict::Passed, "{r:#?}");
    assert_eq!(
        r.impacted.as_ref().unwrap().status,
        ImpactedStatus::NoneRelated
    );
    assert_eq!(total(&r), 30);
}

#[test]
fn vitest_runs_related() {
    let ws = in_place("gensync-vitest");
    // A changed test file is related to itself.
    let broken = staged(
        &ws,
        "test/index.test.js",
        "expect(fn.sync(arg)).toBe(value);",
        "expect(fn.sync(arg)).toBe(undefined);",
    );
    let r = verify(&ws, &broken, ImpactedMode::First);
    measured("gensync-vitest", "failing test change, impacted first", &r);
    assert_failed_fast(&r);
    assert_eq!(r.runner, RunnerKind::Vitest);
    // The script's own words (`--globals --typecheck`) with `related --run` for `run`.
    assert_eq!(
        r.argv[..5],
        ["vitest", "related", "--run", "--globals", "--typecheck"]
    );
    assert_eq!(
        r.argv.last().map(String::as_str),
        Some("test/index.test.js")
    );
    assert!(r.tests.failed > 0, "{r:#?}");

    // The tests `require` index.js, which vitest's module graph does not follow: its related
    // run finds no test, and the whole suite runs and decides.
    let src = staged(
        &ws,
        "index.js",
        "  return value;\n}\n\nfunction evaluateAsync",
        "  return [value];\n}\n\nfunction evaluateAsync",
    );
    let r = verify(&ws, &src, ImpactedMode::First);
    measured("gensync-vitest", "source change, impacted first", &r);
    let i = r.impacted.as_ref().unwrap();
    assert_eq!(i.verdict, Some(Verdict::NoTests), "{r:#?}");
    assert_eq!(r.scope, Some(Scope::Full));
    assert_eq!(r.verdict, Verdict::Failed);
    assert_eq!(total(&r), 31, "{r:#?}");
}
