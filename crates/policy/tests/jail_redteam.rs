//! Adversarial paths against a prepared workspace with real files, real symlinks, hard links,
//! fifos and sockets: every case asserts the decision and its stable rule id (and, for an
//! allowed path, where it resolves). Every mismatch is collected and reported at once.

use airlock_policy::jail::{Access, Jail};
use airlock_policy::{Ruling, Stage};
use std::fs;
use std::os::unix::fs::symlink;
use std::path::PathBuf;
use tempfile::TempDir;

const R: Access = Access::Read;
const W: Access = Access::Write;

/// Expected outcome: allowed resolving to a relative path (`""` for the root), or denied.
enum Want {
    Allow(&'static str),
    AllowAs(String),
    Deny(&'static str),
}
use Want::{Allow, Deny};

struct Ws {
    _tmp: TempDir,
    base: PathBuf,
    ws: PathBuf,
    jail: Jail,
}

fn write(ws: &std::path::Path, rel: &str) {
    let p = ws.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, rel).unwrap();
}

/// The workspace `ws/` beside `outside/`, in one temp dir.
fn workspace() -> Ws {
    let tmp = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(tmp.path()).unwrap();
    let ws = base.join("ws");
    let outside = base.join("outside");
    fs::create_dir_all(ws.join("src/nested")).unwrap();
    fs::create_dir_all(outside.join("dir")).unwrap();
    fs::write(outside.join("secret.txt"), "outside").unwrap();
    for f in [
        "README.md",
        "src/lib.rs",
        ".env",
        ".env.example",
        ".env.sample",
        "config/.env.production",
        ".git/config",
        ".git/HEAD",
        ".git/hooks/pre-commit",
        ".github/workflows/x.yml",
        ".gitconfig",
        "sub/.npmrc",
        "terraform.tfvars",
        "prod.auto.tfvars",
        ".aws/credentials",
        "home/.ssh/known_hosts",
        ".kube/config",
        ".docker/config.json",
        "docker/config.json",
        "app/credentials.json",
        "secrets.yaml",
        "secrets.example.yaml",
        "id_rsa.pub",
        "server.key",
        "cert.PEM",
        ".airlock/journal.db",
        "~/literal.txt",
        "$HOME/x",
    ] {
        write(&ws, f);
    }
    // Symlinks: a chain out, loops, magic links, in-tree links, links up and back in.
    symlink("b", ws.join("a")).unwrap();
    symlink("c", ws.join("b")).unwrap();
    symlink("../outside", ws.join("c")).unwrap();
    symlink("loop2", ws.join("loop1")).unwrap();
    symlink("loop1", ws.join("loop2")).unwrap();
    symlink("selfloop", ws.join("selfloop")).unwrap();
    symlink("/proc/self/root", ws.join("proc_root")).unwrap();
    symlink("/proc/self/cwd", ws.join("proc_cwd")).unwrap();
    symlink("/dev/fd", ws.join("dev_fd")).unwrap();
    symlink("/tmp", ws.join("tmp_link")).unwrap();
    symlink("/dev/null", ws.join("devnull_link")).unwrap();
    symlink("src", ws.join("src_link")).unwrap();
    symlink(ws.join("src"), ws.join("src_abs")).unwrap();
    symlink("../ws/src", ws.join("updown")).unwrap();
    symlink("../../ws/src/lib.rs", ws.join("src/updown_file")).unwrap();
    symlink("../ws", ws.join("up_root")).unwrap();
    symlink("../wsx", ws.join("up_sibling")).unwrap();
    symlink("..", ws.join("dotdot")).unwrap();
    symlink("src/missing.rs", ws.join("dangling_in")).unwrap();
    symlink(
        "../../../../../../../../../../proc/self/root",
        ws.join("src/rel_proc"),
    )
    .unwrap();
    symlink("fifo", ws.join("fifo_link")).unwrap();
    symlink("hl_a", ws.join("hl_link")).unwrap();
    // A chain of 40 in-tree links resolves (the kernel's limit); one more is a loop.
    fs::create_dir(ws.join("chain")).unwrap();
    symlink("../README.md", ws.join("chain/l0")).unwrap();
    for i in 1..=40 {
        symlink(format!("l{}", i - 1), ws.join(format!("chain/l{i}"))).unwrap();
    }
    symlink("../outside/missing.txt", ws.join("dangling_out")).unwrap();
    symlink("missing_dir/x", ws.join("dangling_deep")).unwrap();
    symlink(".git", ws.join("gitdir")).unwrap();
    symlink("home/.ssh", ws.join("keys")).unwrap();
    symlink(".airlock", ws.join("state")).unwrap();
    symlink("nested", ws.join("src/nested_link")).unwrap();
    fs::create_dir_all(base.join("wsx")).unwrap();
    // Hard links, a fifo, a socket.
    fs::write(ws.join("hl_a"), "x").unwrap();
    fs::hard_link(ws.join("hl_a"), ws.join("hl_b")).unwrap();
    let root = fs::File::open(&ws).unwrap();
    rustix::fs::mknodat(
        &root,
        "fifo",
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
        0,
    )
    .unwrap();
    let _sock = std::os::unix::net::UnixListener::bind(ws.join("sock")).unwrap();
    let jail = Jail::open(&ws).unwrap();
    Ws {
        _tmp: tmp,
        base,
        ws,
        jail,
    }
}

fn check(jail: &Jail, cases: &[(String, Access, Want)]) {
    let mut wrong = Vec::new();
    for (path, access, want) in cases {
        let got = jail.confine(path, *access);
        let shown: String = path.escape_debug().to_string().chars().take(100).collect();
        match (want, &got) {
            (Deny(rule), Err(d)) => {
                assert_eq!(d.decision, Ruling::Deny);
                assert_eq!(d.stage, Stage::Jail);
                assert!(!d.reason.is_empty());
                if d.rule != *rule {
                    wrong.push(format!("`{shown}` {access:?}: want {rule}, got {}", d.rule));
                }
            }
            (Deny(rule), Ok(p)) => wrong.push(format!(
                "`{shown}` {access:?}: want {rule}, got allowed as `{}`",
                p.rel_path().display()
            )),
            (Allow(_) | Want::AllowAs(_), Err(d)) => {
                wrong.push(format!("`{shown}` {access:?}: want allow, got {}", d.rule))
            }
            (Allow(_) | Want::AllowAs(_), Ok(p)) => {
                let to = match want {
                    Allow(s) => s.to_string(),
                    Want::AllowAs(s) => s.clone(),
                    Deny(_) => unreachable!(),
                };
                let at = p.rel_path().to_string_lossy().into_owned();
                if at != to {
                    wrong.push(format!("`{shown}` {access:?}: want `{to}`, got `{at}`"));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

fn both(path: impl Into<String>, want: Want) -> Vec<(String, Access, Want)> {
    let path = path.into();
    let again = match &want {
        Allow(s) => Allow(s),
        Want::AllowAs(s) => Want::AllowAs(s.clone()),
        Deny(r) => Deny(r),
    };
    vec![(path.clone(), R, want), (path, W, again)]
}

#[test]
fn lexical_spellings() {
    let w = workspace();
    let root = w.ws.display().to_string();
    let mut cases: Vec<(String, Access, Want)> = Vec::new();
    cases.extend(both("./.env", Deny("jail_sensitive_file")));
    cases.extend(both("a_new/../.env", Deny("jail_sensitive_file")));
    cases.extend(both("src/../../x", Deny("jail_parent_escape")));
    cases.extend(both(
        "src/nested/../../../outside/secret.txt",
        Deny("jail_parent_escape"),
    ));
    cases.extend(both("new/deeper/../../../x", Deny("jail_parent_escape")));
    cases.extend(both("//etc/passwd", Deny("jail_absolute_outside")));
    cases.extend(both("/./etc", Deny("jail_absolute_outside")));
    cases.extend(both("/", Deny("jail_absolute_outside")));
    cases.extend(both(format!("{root}/../x"), Deny("jail_parent_escape")));
    cases.extend(both(
        format!("{root}/../outside/secret.txt"),
        Deny("jail_parent_escape"),
    ));
    cases.extend(both(format!("{root}x/y"), Deny("jail_absolute_outside")));
    cases.extend(both(
        format!("{root}/src/../.ssh/id_rsa"),
        Deny("jail_sensitive_file"),
    ));
    cases.extend(both(format!("{root}//src/./lib.rs"), Allow("src/lib.rs")));
    // `..` that climbs out of the root and straight back in resolves inside.
    cases.extend(both("../ws/src/lib.rs", Allow("src/lib.rs")));
    cases.extend(both(format!("{root}/../ws/README.md"), Allow("README.md")));
    let base = w.base.display().to_string();
    let rest = base.trim_start_matches('/');
    let first = rest.split('/').next().unwrap();
    let last = rest.rsplit('/').next().unwrap();
    // `..` among the root's own ancestors is followed; a `..` after any other name is not
    // (that name could be a symlink), so the path counts as outside.
    cases.extend(both(
        format!("/{first}/../{rest}/ws/src/lib.rs"),
        Allow("src/lib.rs"),
    ));
    cases.extend(both(
        format!("{base}/../{last}/ws/.env"),
        Deny("jail_sensitive_file"),
    ));
    cases.extend(both(
        format!("{base}/../{last}/ws/README.md"),
        Allow("README.md"),
    ));
    cases.extend(both(
        format!("{base}/outside/../ws/src/lib.rs"),
        Deny("jail_absolute_outside"),
    ));
    cases.extend(both(
        format!("{base}/outside/../outside/secret.txt"),
        Deny("jail_absolute_outside"),
    ));
    cases.extend(both(
        format!("{base}/ws/../../ws"),
        Deny("jail_parent_escape"),
    ));
    cases.extend(both(format!("{base}/.."), Deny("jail_absolute_outside")));
    cases.extend(both("/..", Deny("jail_absolute_outside")));
    cases.extend(both("../ws/.env", Deny("jail_sensitive_file")));
    cases.extend(both("../wsx/y", Deny("jail_parent_escape")));
    cases.extend(
        both("../ws", Deny("jail_parent_escape"))
            .into_iter()
            .take(0),
    );
    // Plain names on Linux: backslashes, percent-encoding, a drive letter.
    cases.extend(both("..\\x", Allow("..\\x")));
    cases.extend(both("..\\..\\etc\\passwd", Allow("..\\..\\etc\\passwd")));
    cases.extend(both("%2e%2e/x", Allow("%2e%2e/x")));
    cases.extend(both(
        "%2e%2e%2f%2e%2e%2fetc",
        Allow("%2e%2e%2f%2e%2e%2fetc"),
    ));
    cases.extend(both("C:\\Windows", Allow("C:\\Windows")));
    // Home and variables are not expanded: refused rather than taken literally.
    cases.extend(both("~/.ssh/id_rsa", Deny("jail_sensitive_file")));
    cases.extend(both("~/notes.txt", Deny("jail_unexpanded")));
    cases.extend(both("~", Deny("jail_unexpanded")));
    cases.extend(both("~root/.bashrc", Deny("jail_unexpanded")));
    cases.extend(both("$HOME/x", Deny("jail_unexpanded")));
    cases.extend(both("${HOME}/.bashrc", Deny("jail_unexpanded")));
    cases.extend(both("file:///etc/passwd", Deny("jail_unexpanded")));
    // ... but a `~` or `$` further in is an ordinary name.
    cases.extend(both("src/~backup", Allow("src/~backup")));
    cases.extend(both("app/routes/$slug.tsx", Allow("app/routes/$slug.tsx")));
    cases.extend(both("$lib/x.ts", Deny("jail_unexpanded")));
    cases.extend(both("$slug.tsx", Allow("$slug.tsx")));
    cases.extend(both("$", Allow("$")));
    cases.extend(both("./~/literal.txt", Allow("~/literal.txt")));
    cases.extend(both("./$HOME/x", Allow("$HOME/x")));
    cases.extend(both("src/a://b", Allow("src/a:/b")));
    cases.extend(both("http://example.com/x", Deny("jail_unexpanded")));
    cases.extend(both("notes~", Allow("notes~")));
    // Empty, the root, dots.
    cases.extend(both("", Deny("jail_empty_path")));
    cases.push((".".into(), R, Allow("")));
    cases.push((".".into(), W, Deny("jail_root")));
    cases.push(("./".into(), W, Deny("jail_root")));
    cases.push(("src/..".into(), W, Deny("jail_root")));
    cases.push((root.clone(), R, Allow("")));
    cases.push((root.clone(), W, Deny("jail_root")));
    cases.push((format!("{root}/"), W, Deny("jail_root")));
    cases.extend(both("..", Deny("jail_parent_escape")));
    cases.extend(both("...", Allow("...")));
    // Lengths.
    cases.extend(both(
        "n".repeat(255),
        Allow(Box::leak("n".repeat(255).into_boxed_str())),
    ));
    cases.extend(both("n".repeat(256), Deny("jail_too_long")));
    cases.extend(both(
        format!("src/{}", "é".repeat(128)),
        Deny("jail_too_long"),
    ));
    let deep = format!("{}b", "d/".repeat(1900));
    cases.extend(both(deep.clone(), Want::AllowAs(deep)));
    cases.extend(both(
        format!("{}b", "d/".repeat(2047)),
        Deny("jail_too_long"),
    ));
    cases.extend(both("x".repeat(5000), Deny("jail_too_long")));
    // NUL anywhere.
    cases.extend(both(".env\0", Deny("jail_nul")));
    cases.extend(both("src/lib.rs\0../../etc/passwd", Deny("jail_nul")));
    check(&w.jail, &cases);
}

#[test]
fn symlinks_of_every_shape() {
    let w = workspace();
    let mut cases: Vec<(String, Access, Want)> = Vec::new();
    // A chain a → b → c → ../outside.
    for p in ["a", "a/secret.txt", "a/new.txt", "b/dir", "c"] {
        cases.extend(both(p, Deny("jail_symlink_escape")));
    }
    for p in ["loop1", "loop1/x", "selfloop", "selfloop/new"] {
        cases.extend(both(p, Deny("jail_symlink_loop")));
    }
    for p in [
        "proc_root",
        "proc_root/etc/passwd",
        "proc_cwd/x",
        "dev_fd",
        "dev_fd/0",
    ] {
        cases.extend(both(p, Deny("jail_magic_link")));
    }
    // A relative link that climbs all the way up into procfs.
    cases.extend(both("src/rel_proc", Deny("jail_magic_link")));
    cases.extend(both("src/rel_proc/etc/passwd", Deny("jail_magic_link")));
    for p in ["tmp_link", "tmp_link/x", "tmp_link/..", "devnull_link"] {
        cases.extend(both(p, Deny("jail_symlink_escape")));
    }
    // In-tree links, relative and absolute, and links that go up and come back in.
    cases.extend(both("src_link/lib.rs", Allow("src/lib.rs")));
    cases.extend(both("src_link/new.rs", Allow("src/new.rs")));
    cases.extend(both("src_abs/lib.rs", Allow("src/lib.rs")));
    cases.extend(both("src/nested_link", Allow("src/nested")));
    cases.extend(both("src/nested_link/../lib.rs", Allow("src/lib.rs")));
    cases.extend(both("updown/lib.rs", Allow("src/lib.rs")));
    cases.extend(both("updown/new/file.rs", Allow("src/new/file.rs")));
    cases.extend(both("src/updown_file", Allow("src/lib.rs")));
    cases.extend(both("up_root/README.md", Allow("README.md")));
    cases.extend(both("up_root/up_root/src", Allow("src")));
    cases.extend(both("up_root/.env", Deny("jail_sensitive_file")));
    cases.extend(both("up_root/../x", Deny("jail_parent_escape")));
    cases.push(("up_root".into(), R, Allow("")));
    cases.push(("up_root".into(), W, Deny("jail_root")));
    cases.extend(both("up_sibling", Deny("jail_symlink_escape")));
    cases.extend(both("up_sibling/x", Deny("jail_symlink_escape")));
    cases.extend(both("dotdot", Deny("jail_symlink_escape")));
    cases.extend(both(
        "dotdot/outside/secret.txt",
        Deny("jail_symlink_escape"),
    ));
    cases.extend(both("dotdot/ws/src/lib.rs", Allow("src/lib.rs")));
    // Dangling links: a target inside may be read (it is absent) but not written through.
    cases.push(("dangling_in".into(), R, Allow("src/missing.rs")));
    cases.push(("dangling_in".into(), W, Deny("jail_dangling_symlink")));
    cases.push(("dangling_deep".into(), W, Deny("jail_dangling_symlink")));
    cases.extend(both("dangling_out", Deny("jail_symlink_escape")));
    // Links to sensitive places, by resolution.
    cases.extend(both("gitdir/config", Deny("jail_sensitive_file")));
    // Readable through the link; never writable (host-exec paths).
    cases.push(("gitdir/HEAD".into(), R, Allow(".git/HEAD")));
    cases.push(("gitdir/HEAD".into(), W, Deny("jail_host_exec")));
    cases.extend(both("keys/known_hosts", Deny("jail_sensitive_file")));
    cases.extend(both("state/journal.db", Deny("jail_airlock_state")));
    cases.extend(both("state", Deny("jail_airlock_state")));
    check(&w.jail, &cases);
}

#[test]
fn sensitive_names_and_look_alikes() {
    let w = workspace();
    let mut cases: Vec<(String, Access, Want)> = Vec::new();
    for p in [
        ".env",
        ".ENV",
        ".env.example",
        ".env.sample",
        ".env.d/x",
        "config/.env.production",
        ".git/config",
        ".Git/CONFIG",
        ".git/hooks/pre-commit",
        ".git/hooks",
        "sub/.npmrc",
        "terraform.tfvars",
        "prod.auto.tfvars",
        "vars.tfvars.json",
        ".aws/credentials",
        ".aws",
        "home/.ssh/known_hosts",
        ".ssh/authorized_keys",
        ".kube/config",
        ".docker/config.json",
        "app/credentials.json",
        "secrets.yaml",
        "secrets.YML",
        "config/secrets.json",
        "id_rsa",
        "id_rsa.pub",
        "backup/id_ed25519",
        "id_ecdsa",
        "server.key",
        "cert.PEM",
        "store.p12",
        "store.PFX",
        ".git-credentials",
        ".netrc",
        ".pypirc",
        // Trailing dots and spaces (dropped by some filesystems): refused too.
        ".env.",
        ".env ",
        ".env. . ",
        "id_rsa ",
        ".ssh./x",
        // Look-alikes: fullwidth letters, invisible characters, Unicode case folding.
        ".\u{ff45}nv",
        "\u{ff0e}env",
        ".\u{ff25}\u{ff2e}\u{ff36}",
        ".e\u{200b}nv",
        "\u{feff}.env",
        ".en\u{200d}v",
        ".e\u{ad}nv",
        ".\u{17f}sh/x",
        ".\u{17f}\u{17f}h/x",
        "\u{ff29}\u{ff24}_\u{ff32}\u{ff33}\u{ff21}",
        "server.\u{212a}ey",
        ".g\u{200c}it/config",
        ".npmr\u{ff43}",
        ".g\u{131}t/config",
        ".env:stream",
        ".env::$DATA",
        ".git/config.worktree",
        ".git/config.lock",
        "sub/.git/modules/m/hooks/post-checkout",
    ] {
        cases.extend(both(p, Deny("jail_sensitive_file")));
    }
    for p in [
        ".airlock",
        ".airlock/journal.db",
        ".AIRLOCK/x",
        "sub/.airlock/x",
        ".airlock.",
        ".\u{ff41}irlock/x",
        ".air\u{200b}lock",
    ] {
        cases.extend(both(p, Deny("jail_airlock_state")));
    }
    for p in [
        ".github/workflows/x.yml",
        ".gitconfig",
        ".gitignore",
        "docker/config.json",
        "secrets.example.yaml",
        "secrets.md",
        "env.rs",
        "environment/x",
        "keys.rs",
        "monkey.txt",
        "src/ssh.rs",
        "README.md",
        "café/x",
        "cafe\u{301}/x",
        ".\u{435}nv",
        ".gitmodules",
        "prod.env",
        "src/config",
        "hooks/pre-commit",
        "my.keystore",
        "pubkeys/known.pub",
        " .env",
    ] {
        cases.extend(both(p, Allow(p)));
    }
    // Host-exec paths: read freely, never written, deleted or renamed by a tool.
    for p in [
        ".git/HEAD",
        ".envrc",
        ".git/info/exclude",
        ".git/objects/ab/cdef",
    ] {
        cases.push((p.to_string(), R, Allow(p)));
        cases.push((p.to_string(), W, Deny("jail_host_exec")));
    }
    check(&w.jail, &cases);
}

#[test]
fn files_that_are_not_plain() {
    let w = workspace();
    let mut cases: Vec<(String, Access, Want)> = Vec::new();
    cases.push(("hl_a".into(), R, Allow("hl_a")));
    cases.push(("hl_a".into(), W, Deny("jail_hardlink")));
    cases.push(("hl_b".into(), W, Deny("jail_hardlink")));
    cases.extend(both("fifo", Deny("jail_special_file")));
    cases.extend(both("fifo_link", Deny("jail_special_file")));
    cases.push(("hl_link".into(), R, Allow("hl_a")));
    cases.push(("hl_link".into(), W, Deny("jail_hardlink")));
    cases.extend(both("chain/l39", Allow("README.md")));
    cases.extend(both("chain/l40", Deny("jail_symlink_loop")));
    // A character device (creating one needs privileges; skipped without them).
    let root = fs::File::open(&w.ws).unwrap();
    let null = rustix::fs::makedev(1, 3);
    if rustix::fs::mknodat(
        &root,
        "null_dev",
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
        null,
    )
    .is_ok()
    {
        cases.extend(both("null_dev", Deny("jail_special_file")));
    }
    cases.extend(both("sock", Deny("jail_special_file")));
    cases.extend(both("/dev/null", Deny("jail_absolute_outside")));
    cases.extend(both("README.md/x", Deny("jail_not_a_directory")));
    cases.extend(both("README.md/", Deny("jail_not_a_directory")));
    cases.extend(both("src/lib.rs/../lib.rs", Deny("jail_not_a_directory")));
    cases.extend(both("fifo/x", Deny("jail_not_a_directory")));
    cases.extend(both("src/", Allow("src")));
    check(&w.jail, &cases);
    // A workspace whose parent is reached through `..` keeps its name: the base is canonical.
    assert!(w.base.join("ws").is_dir());
}

#[test]
fn decide_and_json_shape_for_a_mixed_batch() {
    let w = workspace();
    let d = w.jail.decide("src_link/lib.rs", W);
    assert_eq!(d.decision, Ruling::Allow);
    assert_eq!(d.rule, "jail_confined");
    assert!(d.reason.contains("src/lib.rs"), "{}", d.reason);
    let d = w.jail.decide("~/x", R);
    assert_eq!(d.decision, Ruling::Deny);
    assert!(d.reason.contains("~/x"), "{}", d.reason);
    assert!(d.reason.contains("./~/x"), "{}", d.reason);
    let d = w.jail.decide("file:///etc/passwd", R);
    assert_eq!(d.rule, "jail_unexpanded");
    assert!(!d.reason.contains("./file:"), "{}", d.reason);
    let d = w.jail.decide(".\u{ff45}nv", R);
    assert_eq!(d.rule, "jail_sensitive_file");
}

mod disguises {
    use super::*;
    use airlock_policy::RelPath;
    use airlock_policy::jail::sensitive_rule;
    use proptest::prelude::*;

    /// How one character of a sensitive name is disguised.
    #[derive(Debug, Clone, Copy)]
    enum Mask {
        Keep,
        Upper,
        Fullwidth,
        Invisible(char),
    }

    fn mask() -> impl Strategy<Value = Mask> {
        prop_oneof![
            3 => Just(Mask::Keep),
            2 => Just(Mask::Upper),
            1 => Just(Mask::Fullwidth),
            1 => prop::sample::select(vec!['\u{200b}', '\u{200d}', '\u{ad}', '\u{feff}', '\u{2060}', '\u{fe0f}'])
                .prop_map(Mask::Invisible),
        ]
    }

    fn disguise(name: &str, masks: &[Mask], tail: &str) -> String {
        let mut out = String::new();
        for (c, m) in name.chars().zip(masks.iter().cycle()) {
            match m {
                Mask::Keep => out.push(c),
                Mask::Upper => out.push(c.to_ascii_uppercase()),
                Mask::Fullwidth if c.is_ascii_graphic() && c != '/' => {
                    out.push(char::from_u32(c as u32 + 0xfee0).unwrap())
                }
                Mask::Fullwidth => out.push(c),
                Mask::Invisible(z) => {
                    out.push(c);
                    if c != '/' {
                        out.push(*z);
                    }
                }
            }
        }
        out + tail
    }

    proptest! {
        /// Case, fullwidth look-alikes, invisible characters and trailing dots or spaces never
        /// hide a sensitive name, from the pure rule or from the jail on a real workspace.
        #[test]
        fn disguised_sensitive_names_stay_denied(
            name in prop::sample::select(vec![
                ".env", ".env.local", ".git/config", ".git/hooks/x", ".npmrc", "id_rsa",
                "server.pem", "tls.key", ".ssh/known_hosts", ".aws/credentials",
                "credentials.json", "secrets.yaml", "prod.tfvars", ".docker/config.json",
                ".airlock/x",
            ]),
            masks in prop::collection::vec(mask(), 1..24),
            tail in prop::sample::select(vec!["", ".", " ", ". ", ".."]),
        ) {
            let path = disguise(name, &masks, tail);
            let want = if name.starts_with(".airlock") {
                "jail_airlock_state"
            } else {
                "jail_sensitive_file"
            };
            let rel = RelPath::new(&path).unwrap();
            let pure = sensitive_rule(&rel).map(|d| d.rule.into_owned());
            prop_assert_eq!(pure.as_deref(), Some(want), "{:?}", path);
            let w = ws();
            for access in [R, W] {
                let d = w.confine(&path, access).unwrap_err();
                prop_assert_eq!(&*d.rule, want, "{:?}", path);
            }
        }
    }

    fn ws() -> &'static Jail {
        static WS: std::sync::OnceLock<(TempDir, Jail)> = std::sync::OnceLock::new();
        &WS.get_or_init(|| {
            let tmp = tempfile::tempdir().unwrap();
            let jail = Jail::open(tmp.path()).unwrap();
            (tmp, jail)
        })
        .1
    }
}
