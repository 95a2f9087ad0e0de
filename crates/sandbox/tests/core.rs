//! The namespace backend end to end: overlay semantics, harvest, exit codes, stdin, limits.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use airlock_sandbox::{UpperChange, harvest};
use common::{Fixture, run, stdout};

#[test]
fn writes_land_in_upper_and_workspace_is_untouched() {
    let fx = Fixture::new();
    fx.write("keep.txt", "original\n");
    fx.write("gone.txt", "bye\n");
    fx.write("src/lib.rs", "fn a() {}\n");
    let spec = fx.spec(
        "cat keep.txt && echo changed > keep.txt && rm gone.txt && mkdir -p new/dir && echo x > new/dir/f \
         && chmod 755 src/lib.rs && ln -s ../outside link && cat keep.txt",
    );
    let out = run(&spec);
    assert_eq!(out.exit_code, Some(0), "{}", out.stderr.text_lossy());
    assert_eq!(stdout(&out), "original\nchanged\n");
    assert_eq!(
        std::fs::read_to_string(fx.workspace.join("keep.txt")).unwrap(),
        "original\n"
    );
    assert!(fx.workspace.join("gone.txt").exists());
    assert!(!fx.workspace.join("new").exists());

    let changes = harvest(&fx.upper).unwrap();
    let expected = vec![
        UpperChange::Delete {
            path: "gone.txt".into(),
        },
        UpperChange::File {
            path: "keep.txt".into(),
            mode: 0o644,
        },
        UpperChange::Symlink {
            path: "link".into(),
            target: "../outside".into(),
        },
        UpperChange::Dir {
            path: "new".into(),
            mode: 0o755,
            opaque: false,
        },
        UpperChange::Dir {
            path: "new/dir".into(),
            mode: 0o755,
            opaque: false,
        },
        UpperChange::File {
            path: "new/dir/f".into(),
            mode: 0o644,
        },
        UpperChange::Dir {
            path: "src".into(),
            mode: 0o755,
            opaque: false,
        },
        UpperChange::File {
            path: "src/lib.rs".into(),
            mode: 0o755,
        },
    ];
    assert_eq!(changes, expected);
    assert_eq!(
        std::fs::read_to_string(fx.upper.join("keep.txt")).unwrap(),
        "changed\n"
    );
}

#[test]
fn staged_layers_are_merged_with_whiteouts_and_opaque_dirs() {
    let fx = Fixture::new();
    fx.write("a.txt", "base a\n");
    fx.write("b.txt", "base b\n");
    fx.write("dir/old.txt", "old\n");
    let l1 = fx.path().join("layer1");
    let l2 = fx.path().join("layer2");
    std::fs::create_dir_all(&l1).unwrap();
    std::fs::create_dir_all(l2.join("dir")).unwrap();
    std::fs::write(l1.join("a.txt"), "layer1 a\n").unwrap();
    std::fs::write(l1.join("c.txt"), "layer1 c\n").unwrap();
    // layer2 (above layer1) deletes b.txt and c.txt and replaces dir/ wholesale.
    for name in ["b.txt", "c.txt"] {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            l2.join(name),
            rustix::fs::FileType::CharacterDevice,
            rustix::fs::Mode::empty(),
            0,
        )
        .unwrap();
    }
    std::fs::write(l2.join("dir/new.txt"), "new\n").unwrap();
    rustix::fs::setxattr(
        l2.join("dir"),
        "user.overlay.opaque",
        b"y",
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    let mut spec = fx.spec("ls; ls dir; cat a.txt");
    spec.layers = vec![l1, l2];
    let out = run(&spec);
    assert_eq!(out.exit_code, Some(0), "{}", out.stderr.text_lossy());
    assert_eq!(stdout(&out), "a.txt\ndir\nnew.txt\nlayer1 a\n");
}

#[test]
fn exit_codes_signals_stdin_and_cwd() {
    let fx = Fixture::new();
    std::fs::create_dir(fx.workspace.join("sub")).unwrap();
    let out = run(&fx.spec("exit 7"));
    assert_eq!(
        (out.exit_code, out.signal, out.timed_out),
        (Some(7), None, false)
    );
    let out = run(&fx.spec("kill -9 $$"));
    assert_eq!((out.exit_code, out.signal), (None, Some(9)));
    let mut spec = fx.spec("pwd; tr a-z A-Z; echo err >&2");
    spec.stdin = Some(b"hello".to_vec());
    spec.cwd = fx.workspace.join("sub");
    let out = run(&spec);
    let ws = fx.workspace.canonicalize().unwrap();
    assert_eq!(stdout(&out), format!("{}\nHELLO", ws.join("sub").display()));
    assert_eq!(out.stderr.text_lossy(), "err\n");
}

#[test]
fn missing_command_is_an_exec_error() {
    let fx = Fixture::new();
    let mut spec = fx.spec("");
    spec.argv = vec!["definitely-not-a-command-xyz".into()];
    let err = airlock_sandbox::Backend::run(&airlock_sandbox::NamespaceBackend::new(), &spec)
        .unwrap_err();
    assert!(err.to_string().contains("cannot execute"), "{err}");
}

#[test]
fn timeout_kills_everything() {
    let fx = Fixture::new();
    let mut spec = fx.spec("sleep 30 & sleep 30; echo never");
    spec.timeout = Duration::from_millis(300);
    let t = Instant::now();
    let out = run(&spec);
    assert!(out.timed_out);
    assert_eq!(out.exit_code, None);
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(!stdout(&out).contains("never"));
}

#[test]
fn cancellation_stops_the_run() {
    let fx = Fixture::new();
    let mut spec = fx.spec("sleep 30");
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    spec.cancel = Some(flag.clone());
    let setter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        flag.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let t = Instant::now();
    let out = run(&spec);
    setter.join().unwrap();
    assert!(out.cancelled && !out.timed_out);
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn home_exposes_only_named_toolchain_dirs() {
    let fx = Fixture::new();
    let home = fx.path().join("home");
    std::fs::create_dir_all(home.join(".cargo/bin")).unwrap();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "SECRET").unwrap();
    std::fs::write(home.join(".cargo/bin/tool"), "#!/bin/sh\necho tool ran\n").unwrap();
    std::fs::set_permissions(
        home.join(".cargo/bin/tool"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let mut spec =
        fx.spec("ls -A $HOME; echo HOME=$HOME; tool; touch $HOME/.cargo/x 2>/dev/null || echo ro");
    spec.home_binds = vec![PathBuf::from(".cargo")];
    spec.env.push((
        "PATH".into(),
        format!("{}:/usr/bin:/bin", home.join(".cargo/bin").display()).into(),
    ));
    let out = run(&spec);
    assert_eq!(
        stdout(&out),
        format!(".cargo\nHOME={}\ntool ran\nro\n", home.display()),
        "{}",
        out.stderr.text_lossy()
    );
}

#[test]
fn runs_from_many_threads_at_once() {
    let handles: Vec<_> = (0..4)
        .map(|i| {
            std::thread::spawn(move || {
                let fx = Fixture::new();
                let out = run(&fx.spec(&format!("echo {i} > f; cat f")));
                assert_eq!(stdout(&out), format!("{i}\n"));
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn masked_paths_are_hidden_and_nested_layers_refused() {
    let fx = Fixture::new();
    fx.write(".airlock/journal.db", "state");
    fx.write("secret.env", "K=V");
    fx.write("code.rs", "x");
    let mut spec = fx.spec("ls -A .airlock; cat secret.env; echo -n .; touch .airlock/x 2>/dev/null || echo ro; cat code.rs");
    spec.masked = vec![".airlock".into(), "secret.env".into()];
    let out = run(&spec);
    assert_eq!(stdout(&out), ".ro\nx", "{}", out.stderr.text_lossy());

    let mut spec = fx.spec("true");
    let inner = fx.workspace.join(".airlock");
    spec.layers = vec![inner];
    let err = airlock_sandbox::Backend::run(&airlock_sandbox::NamespaceBackend::new(), &spec)
        .unwrap_err();
    assert!(err.to_string().contains("are nested"), "{err}");
}

#[test]
fn without_stdin_the_command_reads_eof() {
    let fx = Fixture::new();
    let mut spec = fx.spec("cat; echo done");
    spec.timeout = Duration::from_secs(10);
    let out = run(&spec);
    assert!(!out.timed_out);
    assert_eq!(stdout(&out), "done\n");
}

#[test]
fn cargo_test_runs_with_read_only_toolchain_dirs() {
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
        return;
    };
    if !home.join(".cargo/bin/cargo").exists() || !home.join(".rustup").is_dir() {
        eprintln!("skipped: no rustup toolchain under $HOME");
        return;
    }
    let fx = Fixture::new();
    fx.write(
        "Cargo.toml",
        "[package]\nname = \"t\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    fx.write(
        "src/lib.rs",
        "#[test]\nfn adds() { assert_eq!(1 + 1, 2); }\n",
    );
    let mut spec = fx.spec("cargo test --offline -q 2>&1");
    spec.home = Some(home);
    spec.home_binds = vec![".cargo".into(), ".rustup".into()];
    spec.timeout = Duration::from_secs(240);
    let out = run(&spec);
    assert_eq!(out.exit_code, Some(0), "{}", stdout(&out));
    assert!(stdout(&out).contains("1 passed"), "{}", stdout(&out));
    assert!(
        fx.upper.join("target").is_dir(),
        "build output did not land in the upper layer"
    );
    assert!(!fx.workspace.join("target").exists());
}
