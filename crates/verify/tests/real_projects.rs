//! Verify runs what the project runs: explicit commands keep their structured adapter, and
//! real open-source projects (fetched and set up by `scripts/ci-deps-realprojects.sh`, the way
//! their developers set them up, into `target/realprojects/`) get the runner's own counts,
//! through the real sandbox. Each project is the read-only workspace; a staged change is a
//! layer over it. The runner also runs directly on the host, and the counts must agree.

use std::path::{Path, PathBuf};
use std::time::Duration;

mod realprojects;

mod host;
use airlock_verify::{RunnerKind, Verdict, VerdictReport, VerifyOptions};
use realprojects::{Workspace, in_place, project, staged, total, verify_with};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// A private copy of `dir` as a workspace.
fn copy_of(dir: &Path) -> Workspace {
    let tmp = tempfile::Builder::new()
        .prefix("verify-real-")
        .tempdir()
        .unwrap();
    let root = tmp.path().join("ws");
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(dir)
        .arg(&root)
        .status()
        .unwrap();
    assert!(status.success());
    Workspace {
        _dir: Some(tmp),
        root,
        scratch: tempfile::tempdir().unwrap(),
    }
}

fn options(command: Option<&str>) -> VerifyOptions {
    VerifyOptions {
        command: command.map(|c| c.split_whitespace().map(str::to_string).collect()),
        ..realprojects::options(Duration::from_secs(120))
    }
}

#[test]
fn explicit_go_test_keeps_the_go_adapter() {
    let ws = copy_of(&fixtures().join("go/fail"));
    let r = verify_with(&ws, Vec::new(), &options(Some("go test ./...")));
    assert_eq!(r.runner, RunnerKind::Go, "{r:#?}");
    assert_eq!(r.verdict, Verdict::Failed, "{r:#?}");
    assert!(r.tests.failed >= 1 && r.tests.passed >= 1, "{r:#?}");
    assert!(
        r.failures
            .iter()
            .any(|f| f.file.as_deref() == Some("calc/calc_test.go") && f.line.is_some()),
        "{r:#?}"
    );
    assert_eq!(r.argv[..3], ["go", "test", "-json"]);
}

/// Runs `cmd` on the host in `dir` and returns its stdout.
fn host(dir: &Path, cmd: &[&str], env: &[(&str, &str)]) -> String {
    let out = std::process::Command::new(cmd[0])
        .args(&cmd[1..])
        .current_dir(dir)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

fn structured_in(r: &VerdictReport, file_prefix: &str) -> bool {
    r.failures.iter().any(|f| {
        f.file
            .as_deref()
            .is_some_and(|p| p.starts_with(file_prefix))
            && f.line.is_some()
    })
}

#[test]
fn cargo_semver() {
    let ws = in_place("semver");
    // The runner's own count: `cargo test` in a copy outside this repository's workspace.
    let copy = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("cp")
        .args(["-a"])
        .arg(&ws.root)
        .arg(copy.path().join("semver"))
        .status()
        .unwrap();
    assert!(status.success());
    let text = host(
        &copy.path().join("semver"),
        &["cargo", "test", "--offline", "--no-fail-fast"],
        &[],
    );
    let mut own = 0;
    for line in text.lines().filter(|l| l.starts_with("test result:")) {
        for part in line.split([';', '.']) {
            let words: Vec<&str> = part.split_whitespace().collect();
            if let [n, "passed" | "failed" | "ignored"] = words[..] {
                own += n.parse::<u64>().unwrap();
            }
        }
    }
    assert!(own > 0, "{text}");

    let layer = staged(
        &ws,
        "src/display.rs",
        r#""{}.{}.{}", self.major"#,
        r#""{}.{}.{}.", self.major"#,
    );
    let r = verify_with(&ws, vec![layer.path().to_path_buf()], &options(None));
    assert_eq!(r.runner, RunnerKind::Cargo, "{r:#?}");
    assert_eq!(r.verdict, Verdict::Failed, "{r:#?}");
    assert_eq!(total(&r), own, "{r:#?}");
    assert!(structured_in(&r, "tests/test_version.rs"), "{r:#?}");

    let r = verify_with(
        &ws,
        vec![layer.path().to_path_buf()],
        &options(Some("cargo test --test test_version")),
    );
    assert_eq!(r.runner, RunnerKind::Cargo, "{r:#?}");
    assert_eq!(r.verdict, Verdict::Failed, "{r:#?}");
    assert!(structured_in(&r, "tests/test_version.rs"), "{r:#?}");

    // A staged type error fails with rustc's diagnostic at its place.
    let typed = staged(
        &ws,
        "src/display.rs",
        r#""{}.{}.{}", self.major"#,
        r#""{}.{}.{}", self.major + "1""#,
    );
    let r = verify_with(&ws, vec![typed.path().to_path_buf()], &options(None));
    assert_eq!(r.verdict, Verdict::Failed, "{r:#?}");
    assert!(type_error_in(&r, "src/display.rs"), "{r:#?}");
}

/// A compile failure located in `file`, with a line.
fn type_error_in(r: &VerdictReport, file: &str) -> bool {
    r.failures.iter().any(|f| {
        f.kind == airlock_verify::FailureKind::Compile
            && f.file.as_deref() == Some(file)
            && f.line.is_some()
    })
}

#[test]
fn pytest_packaging_in_its_venv() {
    let ws = in_place("packaging");
    // The runner's own count, from the project's environment.
    let text = host(
        &ws.root,
        &[
            ".venv/bin/python",
            "-m",
            "pytest",
            "--co",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        &[("PYTHONDONTWRITEBYTECODE", "1")],
    );
    let own: u64 = text
        .lines()
        .rev()
        .find_map(|l| l.split_once(" tests collected"))
        .and_then(|(n, _)| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("{text}"));

    let layer = staged(
        &ws,
        "src/packaging/utils.py",
        r#"_canonicalize_regex.sub("-", name).lower()"#,
        r#"_canonicalize_regex.sub("_", name).lower()"#,
    );
    let r = verify_with(&ws, vec![layer.path().to_path_buf()], &options(None));
    assert_eq!(r.runner, RunnerKind::Pytest, "{r:#?}");
    assert_eq!(
        r.argv[0],
        ws.root.join(".venv/bin/python").to_string_lossy()
    );
    assert_eq!(r.verdict, Verdict::Failed, "{r:#?}");
    assert_eq!(total(&r), own, "{r:#?}");
    assert!(structured_in(&r, "tests/test_utils.py"), "{r:#?}");

    // The natural command: `pytest` of the active environment, structured.
    let r = verify_with(
        &ws,
        vec![layer.path().to_path_buf()],
        &options(Some("pytest tests/test_utils.py -k canonicalize")),
    );
    assert_eq!(r.runner, RunnerKind::Pytest, "{r:#?}");
    assert_eq!(r.verdict, Verdict::Failed, "{r:#?}");
    assert!(
        r.tests.failed > 0 && structured_in(&r, "tests/test_utils.py"),
        "{r:#?}"
    );
}

#[test]
fn go_cmp() {
    let ws = in_place("go-cmp");
    let text = host(
        &ws.root,
        &["go", "test", "-json", "./..."],
        &[("GOFLAGS", "-mod=mod"), ("GOPROXY", "off")],
    );
    let own = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| {
            e.get("Test").is_some()
                && matches!(e["Action"].as_str(), Some("pass" | "fail" | "skip"))
        })
        .count() as u64;
    assert!(own > 0, "{text}");

    let layer = staged(
        &ws,
        "cmp/cmpopts/equate.go",
        "(vx.Len() == 0 && vy.Len() == 0)",
        "(vx.Len() == 0 || vy.Len() == 0)",
    );
    let r = verify_with(&ws, vec![layer.path().to_path_buf()], &options(None));
    assert_eq!(r.runner, RunnerKind::Go, "{r:#?}");
    assert_eq!(r.verdict, Verdict::Failed, "{r:#?}");
    assert_eq!(total(&r), own, "{r:#?}");
    assert!(structured_in(&r, "cmp/cmpopts/"), "{r:#?}");

    let r = verify_with(
        &ws,
        vec![layer.path().to_path_buf()],
        &options(Some("go test ./cmp/cmpopts/")),
    );
    assert_eq!(r.runner, RunnerKind::Go, "{r:#?}");
    assert_eq!(r.verdict, Verdict::Failed, "{r:#?}");
    assert!(structured_in(&r, "cmp/cmpopts/"), "{r:#?}");

    // A staged type error fails with the compiler's diagnostic at its place.
    let typed = staged(
        &ws,
        "cmp/cmpopts/equate.go",
        "(vx.Len() == 0 && vy.Len() == 0)",
        r#"(vx.Len() == "0" && vy.Len() == 0)"#,
    );
    let r = verify_with(&ws, vec![typed.path().to_path_buf()], &options(None));
    assert_eq!(r.verdict, Verdict::Failed, "{r:#?}");
    assert!(type_error_in(&r, "cmp/cmpopts/equate.go"), "{r:#?}");
}

/// jest's or vitest's own count from its JSON reporter, run on the host.
fn node_count(dir: &Path, cmd: &[&str]) -> u64 {
    let out = tempfile::NamedTempFile::new().unwrap();
    let mut argv: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
    argv.push(format!("--outputFile={}", out.path().display()));
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let text = host(dir, &argv, &[("CI", "true")]);
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(out.path()).unwrap())
        .unwrap_or_else(|_| panic!("{text}"));
    json["numTotalTests"].as_u64().unwrap()
}

#[test]
fn jest_gensync() {
    let ws = in_place("gensync-jest");
    let own = node_count(&ws.root, &["node_modules/.bin/jest", "--ci", "--json"]);
    assert_eq!(own, 30);

    let layer = staged(
        &ws,
        "index.js",
        "  return value;\n}\n\nfunction evaluateAsync",
        "  return [value];\n}\n\nfunction evaluateAsync",
    );
    let r = verify_with(&ws, vec![layer.path().to_path_buf()], &options(None));
    assert_eq!(r.runner, RunnerKind::Jest, "{r:#?}");
    // The project's own `test` script ran, through sh, as npm runs it.
    assert_eq!(r.argv[..2], ["sh", "-c"]);
    assert!(r.argv[2].starts_with("jest --ci --json"), "{:?}", r.argv);
    assert_eq!(r.verdict, Verdict::Failed, "{r:#?}");
    assert_eq!(total(&r), own, "{r:#?}");
    assert!(structured_in(&r, "test/index.test.js"), "{r:#?}");

    for cmd in ["npx jest", "npm test"] {
        let r = verify_with(&ws, vec![layer.path().to_path_buf()], &options(Some(cmd)));
        assert_eq!(r.runner, RunnerKind::Jest, "{cmd}: {r:#?}");
        assert_eq!(r.verdict, Verdict::Failed, "{cmd}: {r:#?}");
        assert_eq!(total(&r), own, "{cmd}: {r:#?}");
        assert!(structured_in(&r, "test/index.test.js"), "{cmd}: {r:#?}");
    }
}

#[test]
fn vitest_gensync_with_typecheck() {
    let ws = in_place("gensync-vitest");
    let own = node_count(
        &ws.root,
        &[
            "node_modules/.bin/vitest",
            "run",
            "--globals",
            "--typecheck",
            "--reporter=json",
        ],
    );
    assert_eq!(own, 31);

    // A staged type error: only the script's typecheck step sees it.
    let layer = staged(&ws, "test/api.test-d.ts", "toBeFunction()", "toBeString()");
    let r = verify_with(&ws, vec![layer.path().to_path_buf()], &options(None));
    assert_eq!(r.runner, RunnerKind::Vitest, "{r:#?}");
    assert!(
        r.argv[2].starts_with("vitest run --globals --typecheck --reporter=junit"),
        "{:?}",
        r.argv
    );
    assert_eq!(r.verdict, Verdict::Failed, "{r:#?}");
    assert_eq!(total(&r), own, "{r:#?}");
    assert_eq!(r.tests.failed, 1, "{r:#?}");
    assert!(structured_in(&r, "test/api.test-d.ts"), "{r:#?}");

    let r = verify_with(
        &ws,
        vec![layer.path().to_path_buf()],
        &options(Some("npx vitest run --globals --typecheck")),
    );
    assert_eq!(r.runner, RunnerKind::Vitest, "{r:#?}");
    assert_eq!(r.verdict, Verdict::Failed, "{r:#?}");
    assert!(structured_in(&r, "test/api.test-d.ts"), "{r:#?}");
}

/// A test script whose type-check step runs before the runner (`tsc && vitest run`): a staged
/// type error stops the script before the runner writes its report, and the verdict is still
/// `failed` with the type checker's diagnostics, not a missing report.
#[test]
fn a_failing_step_before_the_runner_is_a_failure_with_its_diagnostics() {
    let pristine = project("gensync-vitest");
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ws");
    std::fs::create_dir_all(root.join("test")).unwrap();
    for rel in [
        "index.js",
        "tsconfig.json",
        "test/index.test.js",
        "test/api.test-d.ts",
    ] {
        std::fs::copy(pristine.join(rel), root.join(rel)).unwrap();
    }
    std::os::unix::fs::symlink(pristine.join("node_modules"), root.join("node_modules")).unwrap();
    std::fs::write(
        root.join("package.json"),
        r#"{"name":"gensync","scripts":{"test":"tsc -p . && vitest run --globals"}}"#,
    )
    .unwrap();
    let ws = Workspace {
        _dir: Some(tmp),
        root,
        scratch: tempfile::tempdir().unwrap(),
    };
    let mut opts = options(None);
    opts.ro_binds = vec![pristine.join("node_modules")];
    let r = verify_with(&ws, Vec::new(), &opts);
    assert_eq!(r.verdict, Verdict::Passed, "{r:#?}");
    assert_eq!(r.tests.passed, 30, "{r:#?}");

    let layer = staged(&ws, "test/api.test-d.ts", "toBeFunction()", "toBeString()");
    let r = verify_with(&ws, vec![layer.path().to_path_buf()], &opts);
    assert_eq!(r.verdict, Verdict::Failed, "{r:#?}");
    assert!(structured_in(&r, "test/api.test-d.ts"), "{r:#?}");
}

/// The changed module's own tests come first: a change to `src/packaging/utils.py` also fails a
/// test in `tests/test_markers.py`, which pytest runs (and reports) first; the diagnostics must
/// still open with `tests/test_utils.py`. The ordering is the diagnostics selection's job.
#[test]
fn the_changed_modules_failures_come_first() {
    let ws = in_place("packaging");
    let layer = staged(
        &ws,
        "src/packaging/utils.py",
        r#"_canonicalize_regex.sub("-", name).lower()"#,
        r#"_canonicalize_regex.sub("_", name).lower()"#,
    );
    let r = verify_with(&ws, vec![layer.path().to_path_buf()], &options(None));
    assert_eq!(r.verdict, Verdict::Failed, "{r:#?}");
    assert!(
        r.failures
            .iter()
            .any(|f| f.file.as_deref() == Some("tests/test_markers.py")),
        "{r:#?}"
    );
    assert_eq!(
        r.failures[0].file.as_deref(),
        Some("tests/test_utils.py"),
        "{r:#?}"
    );
    assert!(
        r.diagnostics.contains("\nFAIL tests/test_utils.py"),
        "{r:#?}"
    );
    let first = r.diagnostics.find("FAIL ").unwrap();
    assert!(
        r.diagnostics[first..].starts_with("FAIL tests/test_utils.py"),
        "{r:#?}"
    );
}

/// The first `FAIL ` entry of the diagnostics text.
fn first_fail_entry(r: &VerdictReport) -> &str {
    let first = r
        .diagnostics
        .find("FAIL ")
        .unwrap_or_else(|| panic!("{r:#?}"));
    r.diagnostics[first..].lines().next().unwrap_or("")
}

/// cargo: a change to `src/parse.rs` (a numeric identifier accepts letters) fails
/// `tests/test_version.rs` and `tests/test_version_req.rs`, whose binaries cargo runs and reports
/// first, and the module's own test, the doc test in `src/parse.rs`, which cargo runs last. The
/// diagnostics must open with the doc test of the changed file.
#[test]
fn cargo_the_changed_modules_failures_come_first() {
    let ws = in_place("semver");
    let layer = staged(&ws, "src/parse.rs", "digit > b'9'", "digit > b'z'");
    let r = verify_with(&ws, vec![layer.path().to_path_buf()], &options(None));
    assert_eq!(r.runner, RunnerKind::Cargo, "{r:#?}");
    assert_eq!(r.verdict, Verdict::Failed, "{r:#?}");
    assert!(structured_in(&r, "tests/test_version.rs"), "{r:#?}");
    let first = &r.failures[0];
    assert_eq!(first.file.as_deref(), Some("src/parse.rs"), "{r:#?}");
    assert!(first.test.starts_with("src/parse.rs - "), "{r:#?}");
    // The doc test of `parse::Error` (its code block opens at line 11) panics at the
    // `.unwrap_err()` of line 15, which rustdoc reports as line 7 of the program it built.
    if first.test == "src/parse.rs - parse::Error (line 11)" {
        assert_eq!((first.line, first.column), (Some(15), Some(39)), "{r:#?}");
    }
    let source = std::fs::read_to_string(ws.root.join("src/parse.rs")).unwrap();
    for f in r
        .failures
        .iter()
        .filter(|f| f.test.starts_with("src/parse.rs - "))
    {
        let line = source.lines().nth(f.line.unwrap() as usize - 1).unwrap();
        assert!(line.trim_start().starts_with("///"), "{f:#?}: {line}");
    }
    assert!(
        first_fail_entry(&r).starts_with("FAIL src/parse.rs:"),
        "{r:#?}"
    );
}

/// go: a change to `cmp/internal/value/name.go` (`interface{}` instead of `any` in type names)
/// fails its own `name_test.go` and the reporter tests of the `cmp` package
/// (`cmp/compare_test.go`), which `go test -p 1` runs and reports first. (`go test` reports
/// packages as they finish; one package at a time the order is the same on every run.)
#[test]
fn go_the_changed_modules_failures_come_first() {
    let ws = in_place("go-cmp");
    let layer = staged(
        &ws,
        "cmp/internal/value/name.go",
        r#"return append(b, "any"...)"#,
        r#"return append(b, "interface{}"...)"#,
    );
    let r = verify_with(
        &ws,
        vec![layer.path().to_path_buf()],
        &options(Some("go test -p 1 ./...")),
    );
    assert_eq!(r.runner, RunnerKind::Go, "{r:#?}");
    assert_eq!(r.verdict, Verdict::Failed, "{r:#?}");
    assert!(structured_in(&r, "cmp/compare_test.go"), "{r:#?}");
    assert_eq!(
        r.failures[0].file.as_deref(),
        Some("cmp/internal/value/name_test.go"),
        "{r:#?}"
    );
    assert!(
        first_fail_entry(&r).starts_with("FAIL cmp/internal/value/name_test.go:"),
        "{r:#?}"
    );
}

/// jest: a change to `src/propName.js` (the attribute node returned instead of its name) fails
/// its own `__tests__/src/propName-test.js` and the tests of the modules that use it
/// (`hasProp`, `getProp`, and through the test helper most getPropValue tests: 319 of 398,
/// more than the 200 the failure list keeps),
/// which jest runs and reports first (largest file first on a fresh cache). The diagnostics
/// must open with a test of `propName-test.js`, and the counts are jest's own. (jest 20, as
/// the project pins: airlock passes it no flag it does not know.)
#[test]
fn jest_the_changed_modules_failures_come_first() {
    let ws = in_place("jsx-ast-utils");
    let own = node_count(&ws.root, &["node_modules/.bin/jest", "--ci", "--json"]);
    assert_eq!(own, 398);

    let layer = staged(
        &ws,
        "src/propName.js",
        "return prop.name.name;",
        "return prop.name;",
    );
    // What the project's CI runs: `npm run tests-only` (`jest --coverage`).
    let r = verify_with(
        &ws,
        vec![layer.path().to_path_buf()],
        &options(Some("npm run tests-only")),
    );
    assert_eq!(r.runner, RunnerKind::Jest, "{r:#?}");
    assert_eq!(r.verdict, Verdict::Failed, "{r:#?}");
    assert_eq!(total(&r), own, "{r:#?}");
    // The module's own tests throw in `src/getProp.js` (their helper calls it), as tests of
    // other files do; jest locates a failure where it threw, and the id names the test file.
    let of_file = |f: &airlock_verify::Failure, file: &str| {
        f.line.is_some()
            && f.id
                .as_deref()
                .is_some_and(|id| id.starts_with(&format!("{file} > ")))
    };
    assert!(
        r.failures
            .iter()
            .any(|f| of_file(f, "__tests__/src/getPropValue-babelparser-test.js")),
        "{r:#?}"
    );
    assert!(
        of_file(&r.failures[0], "__tests__/src/propName-test.js"),
        "{r:#?}"
    );
    assert!(
        first_fail_entry(&r).contains(" __tests__/src/propName-test.js > "),
        "{r:#?}"
    );
}

/// vitest: a change to `src/v3/helpers/parseUtil.ts` (`isValid` true for a dirty result) fails
/// its own `src/v3/tests/parseUtil.test.ts` and tests of twenty-two other files (97 of the v3
/// suite's 545), which vitest reports before it (its JUnit report lists files by path). Run as
/// a developer reruns a few files (`vitest run FILE…`): three reported before the module's own
/// test, two after; the whole v3 suite costs ten times as long for the same property. The
/// diagnostics must open with `parseUtil.test.ts`, and the counts are vitest's own.
#[test]
fn vitest_the_changed_modules_failures_come_first() {
    let ws = in_place("zod");
    let files = [
        "src/v3/tests/array.test.ts",
        "src/v3/tests/error.test.ts",
        "src/v3/tests/object.test.ts",
        "src/v3/tests/parseUtil.test.ts",
        "src/v3/tests/refine.test.ts",
        "src/v3/tests/string.test.ts",
    ];
    let mut argv = vec!["node_modules/.bin/vitest", "run"];
    argv.extend(files);
    argv.push("--reporter=json");
    let own = node_count(&ws.root, &argv);
    assert_eq!(own, 163);

    let layer = staged(
        &ws,
        "src/v3/helpers/parseUtil.ts",
        r#"(x as any).status === "valid";"#,
        r#"(x as any).status !== "aborted";"#,
    );
    let r = verify_with(
        &ws,
        vec![layer.path().to_path_buf()],
        &options(Some(&format!("npx vitest run {}", files.join(" ")))),
    );
    assert_eq!(r.runner, RunnerKind::Vitest, "{r:#?}");
    assert_eq!(r.verdict, Verdict::Failed, "{r:#?}");
    assert_eq!(total(&r), own, "{r:#?}");
    assert!(structured_in(&r, "src/v3/tests/array.test.ts"), "{r:#?}");
    assert_eq!(
        r.failures[0].file.as_deref(),
        Some("src/v3/tests/parseUtil.test.ts"),
        "{r:#?}"
    );
    assert!(
        first_fail_entry(&r).starts_with("FAIL src/v3/tests/parseUtil.test.ts:"),
        "{r:#?}"
    );
}

/// Every file below `dir` with its modification time.
fn files_with_times(dir: &Path) -> Vec<(PathBuf, std::time::SystemTime)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let md = std::fs::symlink_metadata(&p).unwrap();
        if md.is_dir() {
            out.extend(files_with_times(&p));
        } else {
            out.push((p, md.modified().unwrap()));
        }
    }
    out.sort();
    out
}

/// jest keeps its transform and haste-map caches in the workspace's `jest` cache (its default,
/// under the run's fresh `/tmp`, is lost with each run): the first verification fills it, and
/// the second finds every transformed file there and writes none again.
#[test]
fn jest_keeps_its_cache_across_verifications() {
    let ws = in_place("gensync-jest");
    let cache = tempfile::tempdir().unwrap();
    let mut opts = options(None);
    opts.cache_binds = vec![airlock_sandbox::CacheBind::named(cache.path(), "jest")];
    let r = verify_with(&ws, Vec::new(), &opts);
    assert_eq!(r.verdict, Verdict::Passed, "{r:#?}");
    assert!(
        r.argv[2].contains("--cacheDirectory=/var/cache/airlock/jest"),
        "{:?}",
        r.argv
    );
    let first = files_with_times(cache.path());
    let name = |p: &PathBuf| p.strip_prefix(cache.path()).unwrap().display().to_string();
    assert!(
        first.iter().any(|(p, _)| name(p).contains("haste-map")),
        "{:?}",
        first.iter().map(|(p, _)| name(p)).collect::<Vec<_>>()
    );
    let transformed: Vec<_> = first
        .iter()
        .filter(|(p, _)| name(p).contains("jest-transform-cache"))
        .cloned()
        .collect();
    assert!(!transformed.is_empty(), "{first:?}");

    let r = verify_with(&ws, Vec::new(), &opts);
    assert_eq!(r.verdict, Verdict::Passed, "{r:#?}");
    let second = files_with_times(cache.path());
    for (p, t) in &transformed {
        let again = second.iter().find(|(q, _)| q == p);
        assert_eq!(again.map(|(_, t)| t), Some(t), "{} was rewritten", name(p));
    }
    let transformed_again = second
        .iter()
        .filter(|(p, _)| name(p).contains("jest-transform-cache"))
        .count();
    assert_eq!(transformed_again, transformed.len());
}
