//! Property: no generated path string that the jail accepts resolves outside the root, and an
//! accepted existing path is exactly where the kernel itself would resolve it.

use airlock_policy::jail::{Access, Jail};
use proptest::prelude::*;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

struct Tree {
    _tmp: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
    jail: Jail,
}

fn tree() -> &'static Tree {
    static TREE: OnceLock<Tree> = OnceLock::new();
    TREE.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(tmp.path()).unwrap();
        let ws = base.join("ws");
        let outside = base.join("outside");
        fs::create_dir_all(ws.join("a/b")).unwrap();
        fs::create_dir_all(outside.join("a")).unwrap();
        fs::write(ws.join("f"), "f").unwrap();
        fs::write(ws.join("a/b/g"), "g").unwrap();
        fs::write(outside.join("secret"), "s").unwrap();
        let links: &[(&str, PathBuf)] = &[
            ("in_dir", "a".into()),
            ("in_up", "a/..".into()),
            ("up", "..".into()),
            ("out_abs", outside.clone()),
            ("out_rel", "../outside".into()),
            ("out_file", "../outside/secret".into()),
            ("abs_in", ws.join("a")),
            ("loop", "loop".into()),
            ("dangling_out", outside.join("nope")),
            ("dangling_in", "a/nope".into()),
            ("a/b/up2", "../..".into()),
            ("a/b/up3", "../../..".into()),
            ("a/to_f", "../f".into()),
            ("a/b/out_deep", "../../../outside/a".into()),
        ];
        for (name, target) in links {
            symlink(target, ws.join(name)).unwrap();
        }
        let jail = Jail::open(&ws).unwrap();
        Tree {
            _tmp: tmp,
            ws,
            outside,
            jail,
        }
    })
}

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("..".to_string()),
        Just(".".to_string()),
        Just(String::new()),
        Just("a".to_string()),
        Just("b".to_string()),
        Just("f".to_string()),
        Just("g".to_string()),
        Just("new".to_string()),
        Just("secret".to_string()),
        Just("outside".to_string()),
        Just("ws".to_string()),
        Just("in_dir".to_string()),
        Just("in_up".to_string()),
        Just("up".to_string()),
        Just("up2".to_string()),
        Just("up3".to_string()),
        Just("out_abs".to_string()),
        Just("out_rel".to_string()),
        Just("out_file".to_string()),
        Just("out_deep".to_string()),
        Just("abs_in".to_string()),
        Just("loop".to_string()),
        Just("to_f".to_string()),
        Just("dangling_out".to_string()),
        Just("dangling_in".to_string()),
        "[a-z]{1,3}",
    ]
}

fn path_string() -> impl Strategy<Value = String> {
    (
        0usize..6,
        prop::collection::vec(segment(), 0..8),
        any::<bool>(),
    )
        .prop_map(|(prefix, segs, trailing)| {
            let t = tree();
            let prefix = match prefix {
                0 | 1 => String::new(),
                2 => format!("{}/", t.ws.display()),
                3 => "/".to_string(),
                4 => format!("{}/", t.outside.display()),
                _ => "/proc/self/root".to_string() + &t.ws.display().to_string() + "/",
            };
            let mut s = prefix + &segs.join("/");
            if trailing {
                s.push('/');
            }
            s
        })
}

/// Canonicalise the deepest existing ancestor of `p`.
fn deepest_existing(p: &Path) -> PathBuf {
    let mut cur = p.to_path_buf();
    loop {
        if let Ok(c) = fs::canonicalize(&cur) {
            return c;
        }
        if !cur.pop() {
            return PathBuf::from("/");
        }
    }
}

fn check(path: &str, access: Access) -> Result<(), TestCaseError> {
    let t = tree();
    let Ok(p) = t.jail.confine(path, access) else {
        return Ok(());
    };
    let abs = p.abs();
    prop_assert!(abs.starts_with(&t.ws), "`{path}` → {abs:?}");
    prop_assert!(
        abs.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_))),
        "`{path}` → unclean {abs:?}"
    );
    prop_assert_eq!(&t.ws.join(p.rel_path()), &abs);
    let anchor = deepest_existing(&abs);
    prop_assert!(
        anchor.starts_with(&t.ws),
        "`{path}` → {abs:?} via {anchor:?}"
    );
    if p.exists() {
        let kernel = fs::canonicalize(&abs).unwrap();
        prop_assert_eq!(&kernel, &abs, "`{}` is not canonical", path);
    }
    // Wherever the kernel itself resolves the same string, the jail must agree.
    let full = if Path::new(path).is_absolute() {
        PathBuf::from(path)
    } else {
        t.ws.join(path)
    };
    if let Ok(k) = fs::canonicalize(&full) {
        prop_assert_eq!(&k, &abs, "`{}`: kernel and jail disagree", path);
    }
    Ok(())
}

/// `confine_nofollow`: the entry itself may be a link pointing anywhere, but it sits in a
/// directory under the root.
fn check_nofollow(path: &str) -> Result<(), TestCaseError> {
    let t = tree();
    let Ok(p) = t.jail.confine_nofollow(path, Access::Write) else {
        return Ok(());
    };
    let abs = p.abs();
    prop_assert!(abs.starts_with(&t.ws) && abs != t.ws, "`{path}` → {abs:?}");
    let parent = abs.parent().unwrap();
    let anchor = deepest_existing(parent);
    prop_assert!(
        anchor.starts_with(&t.ws),
        "`{path}` → {abs:?} via {anchor:?}"
    );
    if p.exists() {
        prop_assert_eq!(&fs::canonicalize(parent).unwrap(), parent);
        prop_assert!(fs::symlink_metadata(&abs).is_ok());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn accepted_paths_never_leave_the_root(path in path_string()) {
        check(&path, Access::Read)?;
        check(&path, Access::Write)?;
        check_nofollow(&path)?;
    }
}

/// A sensitive name with its letters' case flipped at random, under random directories.
fn sensitive_variant() -> impl Strategy<Value = String> {
    let names = prop::sample::select(vec![
        ".env",
        ".env.local",
        ".git/config",
        ".git/hooks/pre-push",
        ".git-credentials",
        ".npmrc",
        ".netrc",
        ".pypirc",
        "id_rsa",
        "id_ed25519.pub",
        "id_ecdsa",
        "id_dsa",
        "server.pem",
        "tls.key",
        "a.p12",
        "a.pfx",
        ".aws/credentials",
        ".ssh/config",
        ".kube/config",
        ".docker/config.json",
        "credentials.json",
        "secrets.yml",
        "secrets.yaml",
        "secrets.json",
        "prod.tfvars",
        ".airlock/state.db",
    ]);
    (
        prop::collection::vec("[a-z]{1,4}", 0..3),
        names,
        prop::collection::vec(any::<bool>(), 32),
    )
        .prop_map(|(dirs, name, flips)| {
            let cased: String = name
                .chars()
                .zip(flips.iter().cycle())
                .map(|(c, up)| if *up { c.to_ascii_uppercase() } else { c })
                .collect();
            let mut p = dirs.join("/");
            if !p.is_empty() {
                p.push('/');
            }
            p + &cased
        })
}

proptest! {
    #[test]
    fn sensitive_names_are_denied_in_any_case(path in sensitive_variant()) {
        let t = tree();
        for access in [Access::Read, Access::Write] {
            let d = t.jail.confine(&path, access).unwrap_err();
            prop_assert!(
                d.rule == "jail_sensitive_file" || d.rule == "jail_airlock_state",
                "`{}` → {}", path, d
            );
        }
    }
}

#[test]
fn the_fixture_has_real_escapes() {
    // Guard against a fixture that would make the property trivially true.
    let t = tree();
    assert_eq!(
        fs::canonicalize(t.ws.join("out_rel/secret")).unwrap(),
        t.outside.join("secret")
    );
    assert_eq!(
        fs::canonicalize(t.ws.join("a/b/up3")).unwrap(),
        t.ws.parent().unwrap()
    );
    for p in ["out_rel/secret", "a/b/up3/outside", "up", "out_file"] {
        assert!(t.jail.confine(p, Access::Read).is_err(), "{p}");
    }
    for p in ["a/b/up2/f", "in_up/f", "abs_in/b/g", "a/to_f"] {
        assert!(t.jail.confine(p, Access::Read).is_ok(), "{p}");
    }
}
