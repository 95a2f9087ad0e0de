use super::*;
use crate::adapter::{test_argv as argv, test_plan as plan};

fn sel(names: &[&str], targets: &[&str]) -> Selection {
    Selection {
        names: names.iter().map(|s| s.to_string()).collect(),
        test_targets: targets.iter().map(|s| s.to_string()).collect(),
        note: String::new(),
    }
}

/// A temporary project tree holding `files` (path, text).
pub(super) fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (rel, text) in files {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

fn changed(paths: &[&str]) -> Vec<String> {
    paths.iter().map(|s| s.to_string()).collect()
}

#[test]
fn each_runner_runs_its_related_tests() {
    let mut p = plan(
        RunnerKind::Vitest,
        &[
            "node_modules/.bin/vitest",
            "run",
            "--globals",
            "--reporter=junit",
        ],
    );
    apply(&mut p, &sel(&["src/a.ts", "b.js"], &[]));
    assert_eq!(
        argv(&p),
        [
            "node_modules/.bin/vitest",
            "related",
            "--run",
            "--globals",
            "--reporter=junit",
            "src/a.ts",
            "b.js"
        ]
    );
    // No subcommand: `related` is inserted after the program.
    let mut p = plan(RunnerKind::Vitest, &["npx", "vitest", "--reporter=junit"]);
    apply(&mut p, &sel(&["a.js"], &[]));
    assert_eq!(
        argv(&p),
        [
            "npx",
            "vitest",
            "related",
            "--run",
            "--reporter=junit",
            "a.js"
        ]
    );

    let mut p = plan(RunnerKind::Jest, &["jest", "--ci", "--json"]);
    apply(&mut p, &sel(&["index.js"], &[]));
    assert_eq!(
        argv(&p),
        ["jest", "--ci", "--json", "--findRelatedTests", "index.js"]
    );

    let mut p = plan(
        RunnerKind::Cargo,
        &["cargo", "test", "--offline", "--workspace"],
    );
    apply(&mut p, &sel(&["core", "cli"], &[]));
    assert_eq!(
        argv(&p),
        ["cargo", "test", "--offline", "-p", "core", "-p", "cli"]
    );
    let mut p = plan(RunnerKind::Cargo, &["cargo", "test", "--", "--nocapture"]);
    apply(&mut p, &sel(&["semver"], &["test_version"]));
    assert_eq!(
        argv(&p),
        [
            "cargo",
            "test",
            "-p",
            "semver",
            "--test",
            "test_version",
            "--",
            "--nocapture"
        ]
    );

    let mut p = plan(RunnerKind::Go, &["go", "test", "-json", "./..."]);
    apply(&mut p, &sel(&["./cmp/internal/value", "."], &[]));
    assert_eq!(
        argv(&p),
        ["go", "test", "-json", "./cmp/internal/value", "."]
    );

    let mut p = plan(RunnerKind::Pytest, &["python3", "-m", "pytest", "-q"]);
    apply(&mut p, &sel(&["tests/test_a.py"], &[]));
    assert_eq!(argv(&p).last().unwrap(), "tests/test_a.py");
}

#[test]
fn go_packages_of_the_changed_files() {
    let dir = project(&[
        ("go.mod", "module x\n"),
        ("a.go", "package x"),
        ("pkg/b/b.go", "package b"),
        ("pkg/b/testdata/in.txt", "x"),
        ("pkg/c/c.go", "package c"),
        ("nested/go.mod", "module y\n"),
        ("nested/n.go", "package y"),
        ("README.md", "x"),
    ]);
    let tree = Tree::new(dir.path(), &[]);
    let r = go(
        &tree,
        &changed(&["pkg/b/b.go", "a.go", "nested/n.go", "README.md"]),
    );
    let Related::Selected(s) = r else {
        panic!("{r:?}")
    };
    assert_eq!(s.names, [".", "./pkg/b"]);
    let Related::Selected(s) = go(&tree, &changed(&["pkg/b/testdata/in.txt"])) else {
        panic!()
    };
    assert_eq!(s.names, ["./pkg/b"]);
    assert!(matches!(
        go(&tree, &changed(&["README.md"])),
        Related::Nothing(_)
    ));
    assert!(matches!(
        go(&tree, &changed(&["go.sum"])),
        Related::Everything(_)
    ));
}

#[test]
fn cargo_crates_owning_the_change() {
    let dir = project(&[
        ("Cargo.toml", "[workspace]\nmembers = [\"crates/*\"]\n"),
        ("Cargo.lock", ""),
        ("README.md", ""),
        ("crates/core/Cargo.toml", "[package]\nname = \"core-x\"\n"),
        ("crates/core/src/lib.rs", ""),
        ("crates/core/tests/api.rs", ""),
        ("crates/core/tests/big/main.rs", ""),
        ("crates/core/README.md", ""),
        ("crates/cli/Cargo.toml", "[package]\nname = \"cli\"\n"),
        ("crates/cli/src/main.rs", ""),
    ]);
    let tree = Tree::new(dir.path(), &[]);
    let Related::Selected(s) = cargo(
        &tree,
        &changed(&["crates/core/src/lib.rs", "crates/cli/src/main.rs"]),
    ) else {
        panic!()
    };
    assert_eq!(
        (s.names, s.test_targets.len()),
        (vec!["cli".into(), "core-x".into()], 0)
    );
    let Related::Selected(s) = cargo(
        &tree,
        &changed(&["crates/core/tests/api.rs", "crates/core/tests/big/main.rs"]),
    ) else {
        panic!()
    };
    assert_eq!(s.names, ["core-x"]);
    assert_eq!(s.test_targets, ["api", "big"]);
    assert!(matches!(
        cargo(&tree, &changed(&["README.md", "crates/core/README.md"])),
        Related::Nothing(_)
    ));
    assert!(matches!(
        cargo(&tree, &changed(&["Cargo.lock"])),
        Related::Everything(_)
    ));
    assert!(matches!(
        cargo(&tree, &changed(&["Cargo.toml"])),
        Related::Everything(_)
    ));

    // A single-package project: its crate is everything, its integration tests are not.
    let dir = project(&[
        ("Cargo.toml", "[package]\nname = \"one\"\n"),
        ("src/lib.rs", ""),
        ("tests/t.rs", ""),
    ]);
    let tree = Tree::new(dir.path(), &[]);
    assert!(matches!(
        cargo(&tree, &changed(&["src/lib.rs"])),
        Related::Everything(_)
    ));
    let Related::Selected(s) = cargo(&tree, &changed(&["tests/t.rs"])) else {
        panic!()
    };
    assert_eq!(
        (s.names, s.test_targets),
        (vec!["one".into()], vec!["t".into()])
    );
}

#[test]
fn js_changed_modules_and_what_touches_everything() {
    let dir = project(&[("src/a.ts", ""), ("README.md", ""), ("package.json", "{}")]);
    let tree = Tree::new(dir.path(), &[]);
    let Related::Selected(s) = js(&tree, &changed(&["src/a.ts", "README.md"])) else {
        panic!()
    };
    assert_eq!(s.names, ["src/a.ts"]);
    assert!(matches!(
        js(&tree, &changed(&["README.md"])),
        Related::Nothing(_)
    ));
    assert!(matches!(
        js(&tree, &changed(&["src/a.ts", "package.json"])),
        Related::Everything(_)
    ));
    // A deleted module: the runner cannot say who imported it.
    assert!(matches!(
        js(&tree, &changed(&["src/gone.ts"])),
        Related::Everything(_)
    ));
    assert!(matches!(
        related(RunnerKind::Node, dir.path(), &[], &changed(&["src/a.ts"])),
        Related::Unsupported(_)
    ));
    assert!(matches!(
        related(RunnerKind::Go, dir.path(), &[], &[]),
        Related::Nothing(_)
    ));
}
