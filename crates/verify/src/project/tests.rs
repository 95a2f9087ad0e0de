use super::*;
use std::collections::HashMap;

struct MapSource(HashMap<String, String>);

impl FileSource for MapSource {
    fn read(&self, rel: &str) -> Option<Vec<u8>> {
        self.0.get(rel).map(|s| s.as_bytes().to_vec())
    }
    fn exists(&self, rel: &str) -> bool {
        self.0.contains_key(rel) || self.0.keys().any(|k| k.starts_with(&format!("{rel}/")))
    }
}

fn src(files: &[(&str, &str)]) -> MapSource {
    MapSource(
        files
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

fn argv(pp: &ProjectPlan) -> Vec<String> {
    pp.plan
        .argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

const ROOT: &str = "/ws";

#[test]
fn runners_are_found_through_wrappers() {
    let none = src(&[]);
    let cases: &[(&str, Option<RunnerKind>)] = &[
        ("go test ./...", Some(RunnerKind::Go)),
        ("cargo test -p x", Some(RunnerKind::Cargo)),
        ("cargo +nightly test", Some(RunnerKind::Cargo)),
        ("cargo build", None),
        ("npx vitest run", Some(RunnerKind::Vitest)),
        ("npx --yes -p vitest vitest run", Some(RunnerKind::Vitest)),
        ("pnpm exec jest --ci", Some(RunnerKind::Jest)),
        ("yarn jest", Some(RunnerKind::Jest)),
        ("env CI=1 FOO=bar pytest -k foo", Some(RunnerKind::Pytest)),
        ("pytest -k foo", Some(RunnerKind::Pytest)),
        (".venv/bin/pytest", Some(RunnerKind::Pytest)),
        ("python3 -m pytest -x", Some(RunnerKind::Pytest)),
        (
            "/usr/bin/python3.11 -X dev -m pytest",
            Some(RunnerKind::Pytest),
        ),
        ("python -m unittest", None),
        ("uv run pytest", Some(RunnerKind::Pytest)),
        ("poetry run pytest tests", Some(RunnerKind::Pytest)),
        ("node --test test/", Some(RunnerKind::Node)),
        ("node script.js --test", None),
        ("NODE_ENV=test cross-env A=1 jest", Some(RunnerKind::Jest)),
        ("make test", None),
    ];
    for (cmd, want) in cases {
        let got = find_runner(&words(cmd), &none).map(|(k, _)| k);
        assert_eq!(got, *want, "{cmd}");
        let kind = kind(None, Some(&words(cmd)), &none).unwrap();
        assert_eq!(kind, want.unwrap_or(RunnerKind::Command), "{cmd}");
    }
}

#[test]
fn explicit_go_test_reports_json() {
    let s = src(&[("go.mod", "module x")]);
    for (cmd, want) in [
        ("go test ./...", "go test -json ./..."),
        ("go test -json ./...", "go test -json ./..."),
        (
            "go test -run X ./a -args -v",
            "go test -json -run X ./a -args -v",
        ),
        ("env GOFLAGS=-v go test .", "env GOFLAGS=-v go test -json ."),
    ] {
        let pp = plan(RunnerKind::Go, Some(&words(cmd)), Path::new(ROOT), &s);
        assert_eq!(argv(&pp).join(" "), want, "{cmd}");
        assert_eq!(pp.plan.format, crate::adapter::ReportFormat::GoJson);
    }
}

#[test]
fn go_modules_with_a_vendor_directory_build_from_it() {
    let s = src(&[("go.mod", "module x"), ("vendor/modules.txt", "")]);
    let pp = plan(RunnerKind::Go, None, Path::new(ROOT), &s);
    assert!(
        pp.plan
            .env
            .contains(&("GOFLAGS".to_string(), "-mod=vendor".to_string()))
    );
}

#[test]
fn cargo_aliases_expand_and_json_is_added() {
    let s = src(&[
        ("Cargo.toml", "[package]\nname='x'"),
        (
            ".cargo/config.toml",
            "[alias]\ntest-all = \"test --workspace --all-features\"\nt2 = [\"test-all\", \"--release\"]\n",
        ),
    ]);
    let root = Path::new(ROOT);
    let pp = plan(
        RunnerKind::Cargo,
        Some(&words("cargo t2 -- --nocapture")),
        root,
        &s,
    );
    assert_eq!(
        argv(&pp).join(" "),
        "cargo test --message-format=json-diagnostic-short --offline --workspace --all-features --release -- --nocapture --logfile /dev/stderr"
    );
    assert_eq!(
        kind(None, Some(&words("cargo test-all")), &s),
        Some(RunnerKind::Cargo)
    );
    let pp = plan(
        RunnerKind::Cargo,
        Some(&words("cargo test --message-format=json -p a")),
        root,
        &s,
    );
    assert_eq!(
        argv(&pp).join(" "),
        "cargo test --offline --message-format=json -p a -- --logfile /dev/stderr"
    );
}

#[test]
fn cargo_workspaces_test_every_member() {
    let root = Path::new(ROOT);
    let ws = src(&[(
        "Cargo.toml",
        "[package]\nname='x'\n[workspace]\nmembers=['b']\n",
    )]);
    assert!(argv(&plan(RunnerKind::Cargo, None, root, &ws)).contains(&"--workspace".into()));
    let single = src(&[("Cargo.toml", "[package]\nname='x'\n")]);
    assert!(!argv(&plan(RunnerKind::Cargo, None, root, &single)).contains(&"--workspace".into()));
}

#[test]
fn pytest_runs_in_the_projects_environment() {
    let root = Path::new(ROOT);
    let s = src(&[
        ("pyproject.toml", "[tool.pytest.ini_options]\n"),
        (".venv/pyvenv.cfg", "home = /usr/bin"),
        (".venv/bin/python", ""),
    ]);
    let pp = plan(RunnerKind::Pytest, None, root, &s);
    let a = argv(&pp);
    assert_eq!(a[..4], ["/ws/.venv/bin/python", "-m", "pytest", "-q"]);
    // The report's path reaches pytest through airlock's witness, never through argv.
    assert!(a.windows(2).any(|w| w == ["-p", "airlock_witness"]));
    assert!(!a.iter().any(|x| x.contains("junitxml")));
    assert_eq!(pp.path_prepend, [Path::new("/ws/.venv/bin")]);
    assert!(
        pp.plan
            .env
            .contains(&("VIRTUAL_ENV".into(), "/ws/.venv".into()))
    );
    // An explicit `pytest -k foo` finds the environment's pytest first on PATH.
    let pp = plan(RunnerKind::Pytest, Some(&words("pytest -k foo")), root, &s);
    assert_eq!(argv(&pp)[..3], ["pytest", "-k", "foo"]);
    assert_eq!(pp.path_prepend, [Path::new("/ws/.venv/bin")]);
    // No environment: the host's python3.
    let bare = src(&[("pyproject.toml", "")]);
    assert_eq!(
        argv(&plan(RunnerKind::Pytest, None, root, &bare))[0],
        "python3"
    );
}

fn script_of(pp: &ProjectPlan) -> String {
    let a = argv(pp);
    assert_eq!(a[..2], ["sh", "-c"]);
    a[2].clone()
}

#[test]
fn the_test_script_keeps_every_step_and_flag() {
    let root = Path::new(ROOT);
    let pkg = r#"{"name":"p","version":"1.2.3","scripts":{"test":"tsc --noEmit && vitest run --typecheck","pretest":"node gen.js","posttest":"echo done"},"devDependencies":{"vitest":"3"}}"#;
    let s = src(&[("package.json", pkg), ("package-lock.json", "{}")]);
    assert_eq!(kind(None, None, &s), Some(RunnerKind::Vitest));
    let pp = plan(RunnerKind::Vitest, None, root, &s);
    assert_eq!(pp.plan.kind, RunnerKind::Vitest);
    assert_eq!(
        script_of(&pp),
        "( node gen.js\n) && ( tsc --noEmit && vitest run --typecheck --reporter=junit \
         --outputFile.junit=/ws/.airlock-verify/vitest.xml --reporter=default --reporter=/ws/.airlock-verify/witness/airlock_witness_vitest.mjs --passWithNoTests \
         --watch=false\n) && ( echo done\n)"
    );
    assert_eq!(pp.path_prepend, [Path::new("/ws/node_modules/.bin")]);
    assert!(
        pp.plan
            .env
            .contains(&("npm_lifecycle_event".into(), "test".into()))
    );
    assert!(
        pp.plan
            .env
            .contains(&("npm_package_version".into(), "1.2.3".into()))
    );
    assert_eq!(
        pp.plan.requires.as_deref(),
        Some("node_modules/.bin/vitest")
    );

    // yarn 2+ and pnpm (by default) run no pre/post scripts.
    for (extra, file) in [("yarn.lock", ".yarnrc.yml"), ("pnpm-lock.yaml", "x")] {
        let s = src(&[("package.json", pkg), (extra, ""), (file, "")]);
        let script = script_of(&plan(RunnerKind::Vitest, None, root, &s));
        assert!(
            script.starts_with("tsc --noEmit && vitest run --typecheck --reporter=junit"),
            "{script}"
        );
        assert!(!script.contains("gen.js"));
    }
    let s = src(&[
        ("package.json", pkg),
        ("pnpm-lock.yaml", ""),
        (".npmrc", "enable-pre-post-scripts = true\n"),
    ]);
    assert!(script_of(&plan(RunnerKind::Vitest, None, root, &s)).contains("gen.js"));
}

#[test]
fn flags_go_into_the_runner_step_wherever_it_is() {
    let root = Path::new(ROOT);
    let pkg = r#"{"scripts":{"test":"cross-env NODE_OPTIONS='--max-old-space-size=4096' jest --coverage 'src/a b' && eslint ."}}"#;
    let s = src(&[("package.json", pkg)]);
    let pp = plan(RunnerKind::Jest, None, root, &s);
    assert_eq!(pp.plan.kind, RunnerKind::Jest);
    assert_eq!(
        script_of(&pp),
        "cross-env NODE_OPTIONS='--max-old-space-size=4096' jest --coverage 'src/a b' --ci --json \
         --outputFile=/ws/.airlock-verify/jest.json --reporters=default --reporters=/ws/.airlock-verify/witness/airlock_witness_jest.cjs --testLocationInResults --passWithNoTests \
         --watchAll=false && eslint ."
    );
    // node's options go before its file arguments.
    let node = src(&[(
        "package.json",
        r#"{"scripts":{"test":"node --test test/"}}"#,
    )]);
    let script = script_of(&plan(RunnerKind::Node, None, root, &node));
    assert!(script.starts_with("node --test-reporter=junit"), "{script}");
    assert!(script.ends_with(" --test test/"), "{script}");
}

#[test]
fn scripts_beyond_simple_commands_run_unchanged_and_generic() {
    let root = Path::new(ROOT);
    for script in [
        "(cd pkg && vitest run)",
        "vitest run > out.txt",
        "npm run lint && npm run unit",
    ] {
        let pkg =
            serde_json::json!({"scripts": {"test": script}, "devDependencies": {"vitest": "3"}});
        let s = src(&[("package.json", &pkg.to_string())]);
        assert_eq!(kind(None, None, &s), Some(RunnerKind::Command), "{script}");
        let pp = plan(RunnerKind::Command, None, root, &s);
        assert_eq!(pp.plan.kind, RunnerKind::Command);
        assert_eq!(script_of(&pp), script);
        assert_eq!(pp.plan.format, crate::adapter::ReportFormat::Generic);
    }
    // npm's placeholder declares nothing: the runner comes from the dependencies.
    let pkg = r#"{"scripts":{"test":"echo \"Error: no test specified\" && exit 1"},"devDependencies":{"jest":"29"}}"#;
    let s = src(&[("package.json", pkg)]);
    assert_eq!(kind(None, None, &s), Some(RunnerKind::Jest));
    assert!(!argv(&plan(RunnerKind::Jest, None, root, &s)).contains(&"sh".to_string()));
}

#[test]
fn explicit_package_manager_calls_run_the_script() {
    let root = Path::new(ROOT);
    let pkg = r#"{"scripts":{"test":"vitest run --typecheck","unit":"jest"}}"#;
    let s = src(&[("package.json", pkg)]);
    assert_eq!(
        kind(None, Some(&words("npm test")), &s),
        Some(RunnerKind::Vitest)
    );
    assert_eq!(
        kind(None, Some(&words("pnpm unit")), &s),
        Some(RunnerKind::Jest)
    );
    assert_eq!(
        kind(None, Some(&words("yarn run unit")), &s),
        Some(RunnerKind::Jest)
    );
    let pp = plan(RunnerKind::Vitest, Some(&words("npm test")), root, &s);
    assert!(script_of(&pp).starts_with("vitest run --typecheck --reporter=junit"));
    // An explicit runner keeps its structured adapter and its node_modules/.bin.
    let s = src(&[("package.json", pkg), ("node_modules/.bin/vitest", "")]);
    let pp = plan(RunnerKind::Vitest, Some(&words("npx vitest run")), root, &s);
    assert_eq!(argv(&pp)[..3], ["npx", "vitest", "run"]);
    assert!(argv(&pp).iter().any(|a| a == "--reporter=junit"));
    assert_eq!(pp.path_prepend, [Path::new("/ws/node_modules/.bin")]);
}

#[test]
fn a_makefile_test_target_that_runs_pytest_is_the_command() {
    let root = Path::new(ROOT);
    let s = src(&[
        ("pyproject.toml", "[project]\nname='x'\n"),
        (
            "Makefile",
            ".PHONY: test\nlint:\n\truff .\n\ntest: lint\n\t$(PYTHON) -m pytest -x tests\n",
        ),
    ]);
    let pp = plan(RunnerKind::Pytest, None, root, &s);
    assert_eq!(argv(&pp), ["make", "test"]);
    assert_eq!(
        pp.plan.report.as_deref(),
        Some(".airlock-verify/pytest.xml")
    );
    let addopts = pp
        .plan
        .env
        .iter()
        .find(|(k, _)| k == "PYTEST_ADDOPTS")
        .map(|(_, v)| v.as_str());
    assert_eq!(addopts, Some("-p airlock_witness"));
    // A test target that does not run pytest is not read as pytest's.
    let other = src(&[
        ("pyproject.toml", ""),
        ("Makefile", "test:\n\t./run-tests.sh\n"),
    ]);
    assert_eq!(
        argv(&plan(RunnerKind::Pytest, None, root, &other))[1..3],
        ["-m", "pytest"]
    );
}

#[test]
fn arguments_after_the_script_name_are_appended_as_the_manager_does() {
    let root = Path::new(ROOT);
    let pkg = r#"{"scripts":{"test":"vitest run --typecheck","posttest":"echo done"}}"#;
    let s = src(&[("package.json", pkg)]);
    for cmd in [
        "npm test -- -t adds",
        "yarn test -t adds",
        "pnpm run test -t adds",
    ] {
        assert_eq!(
            kind(None, Some(&words(cmd)), &s),
            Some(RunnerKind::Vitest),
            "{cmd}"
        );
        let script = script_of(&plan(RunnerKind::Vitest, Some(&words(cmd)), root, &s));
        assert!(
            script.starts_with("( vitest run --typecheck --reporter=junit"),
            "{cmd}: {script}"
        );
        assert!(
            script.contains("--watch=false -t adds\n) && ( echo done"),
            "{cmd}: {script}"
        );
    }
}
