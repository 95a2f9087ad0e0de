//! The jail against real directories and real symlinks.

use airlock_policy::jail::{Access, Jail, sensitive_rule};
use airlock_policy::modes::OperatorGrant;
use airlock_policy::{RelPath, Ruling, Stage};
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use tempfile::TempDir;

/// A workspace `ws/` next to a directory `outside/` holding a secret, inside one temp dir.
struct Fixture {
    _tmp: TempDir,
    ws: PathBuf,
    outside: PathBuf,
    jail: Jail,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(tmp.path()).unwrap();
    let ws = base.join("ws");
    let outside = base.join("outside");
    fs::create_dir_all(ws.join("src/nested")).unwrap();
    fs::create_dir_all(&outside).unwrap();
    fs::write(ws.join("README.md"), "readme").unwrap();
    fs::write(ws.join("src/lib.rs"), "lib").unwrap();
    fs::write(ws.join(".env"), "SECRET=1").unwrap();
    fs::write(outside.join("secret.txt"), "outside").unwrap();
    let jail = Jail::open(&ws).unwrap();
    Fixture {
        _tmp: tmp,
        ws,
        outside,
        jail,
    }
}

#[track_caller]
fn denied(jail: &Jail, path: &str, access: Access) -> String {
    match jail.confine(path, access) {
        Ok(p) => panic!("`{path}` ({access:?}) was allowed as {:?}", p.abs()),
        Err(d) => {
            assert_eq!(d.decision, Ruling::Deny);
            assert_eq!(d.stage, Stage::Jail);
            assert!(!d.reason.is_empty());
            d.rule.into_owned()
        }
    }
}

#[track_caller]
fn rel_of(jail: &Jail, path: &str, access: Access) -> String {
    match jail.confine(path, access) {
        Ok(p) => p.rel().map(|r| r.display()).unwrap_or_default(),
        Err(d) => panic!("`{path}` ({access:?}) was denied: {d}"),
    }
}

#[test]
fn plain_paths_are_normalised_and_confined() {
    let f = fixture();
    for access in [Access::Read, Access::Write] {
        assert_eq!(rel_of(&f.jail, "src/lib.rs", access), "src/lib.rs");
        assert_eq!(rel_of(&f.jail, "./src//./lib.rs", access), "src/lib.rs");
        assert_eq!(
            rel_of(&f.jail, "src/nested/../lib.rs", access),
            "src/lib.rs"
        );
        assert_eq!(
            rel_of(&f.jail, "new/dir/file.txt", access),
            "new/dir/file.txt"
        );
    }
    let p = f.jail.confine("src/lib.rs", Access::Write).unwrap();
    assert_eq!(p.abs(), f.ws.join("src/lib.rs"));
    assert_eq!(p.access(), Access::Write);
    assert!(p.exists() && !p.is_dir() && p.is_inside());
    let p = f.jail.confine("src/", Access::Read).unwrap();
    assert!(p.is_dir());
    let p = f.jail.confine("no/such", Access::Read).unwrap();
    assert!(!p.exists());
}

#[test]
fn the_root_itself_can_be_read_but_not_written() {
    let f = fixture();
    for p in [".", "./", "src/..", f.ws.to_str().unwrap()] {
        let c = f.jail.confine(p, Access::Read).unwrap();
        assert!(c.is_root() && c.rel().is_none() && c.is_dir(), "{p}");
        assert_eq!(c.abs(), f.ws);
    }
    assert_eq!(denied(&f.jail, ".", Access::Write), "jail_root");
    assert_eq!(denied(&f.jail, "", Access::Read), "jail_empty_path");
}

#[test]
fn absolute_paths_inside_are_made_relative_and_outside_denied() {
    let f = fixture();
    let inside = f.ws.join("src/lib.rs");
    assert_eq!(
        rel_of(&f.jail, inside.to_str().unwrap(), Access::Write),
        "src/lib.rs"
    );
    for p in [
        "/etc/passwd",
        "/",
        f.outside.join("secret.txt").to_str().unwrap(),
    ] {
        assert_eq!(
            denied(&f.jail, p, Access::Read),
            "jail_absolute_outside",
            "{p}"
        );
    }
    // Lexically under the root, but climbing out again.
    let sneaky = format!("{}/../outside/secret.txt", f.ws.display());
    assert_eq!(denied(&f.jail, &sneaky, Access::Read), "jail_parent_escape");
    // A sibling whose name merely starts with the root's name is outside.
    let sibling = format!("{}2/x", f.ws.display());
    assert_eq!(
        denied(&f.jail, &sibling, Access::Read),
        "jail_absolute_outside"
    );
}

#[test]
fn a_root_given_through_a_symlink_accepts_both_spellings() {
    let f = fixture();
    let alias = f.outside.join("ws-alias");
    symlink(&f.ws, &alias).unwrap();
    let jail = Jail::open(&alias).unwrap();
    assert_eq!(jail.root(), f.ws);
    let via_alias = alias.join("README.md");
    assert_eq!(
        rel_of(&jail, via_alias.to_str().unwrap(), Access::Read),
        "README.md"
    );
    symlink(alias.join("src"), f.ws.join("src_via_alias")).unwrap();
    assert_eq!(
        rel_of(&jail, "src_via_alias/lib.rs", Access::Write),
        "src/lib.rs"
    );
    let via_real = f.ws.join("README.md");
    assert_eq!(
        rel_of(&jail, via_real.to_str().unwrap(), Access::Read),
        "README.md"
    );
}

#[test]
fn parent_escapes_are_denied() {
    let f = fixture();
    for p in [
        "..",
        "../outside/secret.txt",
        "src/../../outside",
        "src/nested/../../../x",
        "new/../../x",
        "a/b/../../../x",
    ] {
        for access in [Access::Read, Access::Write] {
            assert_eq!(denied(&f.jail, p, access), "jail_parent_escape", "{p}");
        }
    }
}

#[test]
fn symlink_escapes_are_denied_at_any_component() {
    let f = fixture();
    symlink(&f.outside, f.ws.join("abs_out")).unwrap();
    symlink("../outside", f.ws.join("rel_out")).unwrap();
    symlink("../../outside/secret.txt", f.ws.join("src/file_out")).unwrap();
    symlink("/etc/passwd", f.ws.join("passwd")).unwrap();
    symlink("../rel_out", f.ws.join("src/chain_out")).unwrap();
    for p in [
        "abs_out",
        "abs_out/secret.txt",
        "abs_out/new_file.txt",
        "abs_out/new_dir/deeper/file.txt",
        "rel_out/secret.txt",
        "rel_out/new.txt",
        "src/file_out",
        "passwd",
        "src/chain_out/secret.txt",
        "src/chain_out/new/x",
    ] {
        for access in [Access::Read, Access::Write] {
            assert_eq!(denied(&f.jail, p, access), "jail_symlink_escape", "{p}");
        }
    }
    // A missing component first, then `..` back into the real tree and through a bad link.
    assert_eq!(
        denied(&f.jail, "missing/../abs_out/x", Access::Write),
        "jail_symlink_escape"
    );
    // Nothing was created outside.
    assert!(!f.outside.join("new_file.txt").exists());
    assert!(!f.outside.join("new_dir").exists());
}

#[test]
fn in_tree_symlinks_are_followed() {
    let f = fixture();
    symlink("src", f.ws.join("src_link")).unwrap();
    symlink("nested/../lib.rs", f.ws.join("src/lib_link")).unwrap();
    symlink(f.ws.join("src/lib.rs"), f.ws.join("abs_in")).unwrap();
    symlink("../../src_link/lib.rs", f.ws.join("src/nested/chain")).unwrap();
    assert_eq!(
        rel_of(&f.jail, "src_link/lib.rs", Access::Write),
        "src/lib.rs"
    );
    assert_eq!(
        rel_of(&f.jail, "src_link/new.rs", Access::Write),
        "src/new.rs"
    );
    assert_eq!(rel_of(&f.jail, "src/lib_link", Access::Read), "src/lib.rs");
    assert_eq!(rel_of(&f.jail, "abs_in", Access::Read), "src/lib.rs");
    assert_eq!(
        rel_of(&f.jail, "src/nested/chain", Access::Write),
        "src/lib.rs"
    );
    // `..` after a symlinked directory is physical, as in the kernel.
    assert_eq!(
        rel_of(&f.jail, "src_link/nested/../lib.rs", Access::Read),
        "src/lib.rs"
    );
    // The symlink itself stays addressable for delete/rename.
    let p = f.jail.confine("src/lib_link", Access::Write).unwrap();
    assert_eq!(p.nofollow_rel().unwrap().display(), "src/lib_link");
    assert_eq!(p.rel().unwrap().display(), "src/lib.rs");
    let p = f.jail.confine("README.md", Access::Write).unwrap();
    assert_eq!(p.nofollow_rel(), p.rel());
}

#[test]
fn nofollow_confines_the_link_itself() {
    let f = fixture();
    symlink(&f.outside, f.ws.join("abs_out")).unwrap();
    symlink("missing", f.ws.join("src/dangling")).unwrap();
    symlink("README.md", f.ws.join(".npmrc")).unwrap();
    symlink("src", f.ws.join("src_link")).unwrap();
    for (p, rel) in [
        ("abs_out", "abs_out"),
        ("src/dangling", "src/dangling"),
        ("src_link/dangling", "src/dangling"),
        ("src_link", "src_link"),
        ("README.md", "README.md"),
    ] {
        let c = f.jail.confine_nofollow(p, Access::Write).unwrap();
        assert_eq!(c.rel().unwrap().display(), rel, "{p}");
        assert!(c.exists() && !c.is_dir(), "{p}");
    }
    let n = |p| f.jail.confine_nofollow(p, Access::Write).unwrap_err().rule;
    assert_eq!(n("abs_out/secret.txt"), "jail_symlink_escape");
    assert_eq!(n(".npmrc"), "jail_sensitive_file");
    assert_eq!(n("../x"), "jail_parent_escape");
    // The ordinary confine follows the same links and refuses them.
    assert_eq!(
        denied(&f.jail, "abs_out", Access::Write),
        "jail_symlink_escape"
    );
    assert_eq!(
        denied(&f.jail, "src/dangling", Access::Write),
        "jail_dangling_symlink"
    );
}

#[test]
fn symlink_loops_are_denied() {
    let f = fixture();
    symlink("loop_b", f.ws.join("loop_a")).unwrap();
    symlink("loop_a", f.ws.join("loop_b")).unwrap();
    symlink(".", f.ws.join("self")).unwrap();
    assert_eq!(denied(&f.jail, "loop_a", Access::Read), "jail_symlink_loop");
    assert_eq!(
        denied(&f.jail, "loop_b/x", Access::Write),
        "jail_symlink_loop"
    );
    // A harmless self-loop a few times is fine; 41 times is not.
    assert_eq!(
        rel_of(&f.jail, "self/self/README.md", Access::Read),
        "README.md"
    );
    let deep = "self/".repeat(41) + "README.md";
    assert_eq!(denied(&f.jail, &deep, Access::Read), "jail_symlink_loop");
}

#[test]
fn dangling_symlinks_are_not_written_through() {
    let f = fixture();
    symlink("does_not_exist.txt", f.ws.join("dangling_in")).unwrap();
    symlink(f.outside.join("created.txt"), f.ws.join("dangling_out")).unwrap();
    symlink("missing_dir", f.ws.join("dangling_dir")).unwrap();
    assert_eq!(
        denied(&f.jail, "dangling_in", Access::Write),
        "jail_dangling_symlink"
    );
    assert_eq!(
        denied(&f.jail, "dangling_dir/x", Access::Write),
        "jail_dangling_symlink"
    );
    assert_eq!(
        denied(&f.jail, "dangling_out", Access::Write),
        "jail_symlink_escape"
    );
    assert_eq!(
        denied(&f.jail, "dangling_out", Access::Read),
        "jail_symlink_escape"
    );
    // Reading through an in-tree dangling link is allowed: the target is simply missing.
    let p = f.jail.confine("dangling_in", Access::Read).unwrap();
    assert!(!p.exists());
    assert_eq!(p.rel().unwrap().display(), "does_not_exist.txt");
    assert!(!f.outside.join("created.txt").exists());
}

#[test]
fn magic_links_are_denied() {
    let f = fixture();
    symlink("/proc/self/root", f.ws.join("proc_root")).unwrap();
    symlink("/dev/fd/0", f.ws.join("stdin_link")).unwrap();
    for p in [
        "/proc/self/root/etc/passwd",
        "/proc/1/environ",
        "/dev/fd/3",
        "/dev/stdin",
        "proc_root",
        "proc_root/etc/passwd",
        "stdin_link",
    ] {
        for access in [Access::Read, Access::Write] {
            assert_eq!(denied(&f.jail, p, access), "jail_magic_link", "{p}");
        }
    }
    assert!(Jail::open(Path::new("/proc/self")).is_err());
}

#[test]
fn nul_bytes_and_overlong_paths_are_denied() {
    let f = fixture();
    assert_eq!(denied(&f.jail, "src/a\0b", Access::Read), "jail_nul");
    assert_eq!(
        denied(&f.jail, &"x".repeat(256), Access::Write),
        "jail_too_long"
    );
    assert_eq!(
        denied(&f.jail, &"ab/".repeat(1400), Access::Write),
        "jail_too_long"
    );
    // 255 bytes is still a valid name.
    assert_eq!(
        rel_of(&f.jail, &"y".repeat(255), Access::Write),
        "y".repeat(255)
    );
    // A symlink expansion that grows past the limit is caught after resolving.
    let long_target = vec!["d".repeat(200); 15].join("/");
    symlink(&long_target, f.ws.join("grow")).unwrap();
    let grown = format!("grow/{}", vec!["e".repeat(200); 10].join("/"));
    assert_eq!(denied(&f.jail, &grown, Access::Write), "jail_too_long");
}

#[test]
fn sensitive_files_are_denied_for_read_and_write() {
    let f = fixture();
    let paths = [
        ".env",
        ".ENV",
        ".env.production",
        "app/.Env.local",
        ".git/config",
        ".git/hooks/pre-commit",
        ".git-credentials",
        ".npmrc",
        ".netrc",
        ".pypirc",
        "id_rsa",
        "ID_RSA",
        "keys/id_ed25519.pub",
        "id_ecdsa",
        "id_dsa",
        "tls/cert.pem",
        "tls/server.KEY",
        "store.p12",
        "store.pfx",
        ".aws/credentials",
        ".ssh/known_hosts",
        ".kube/config",
        ".docker/config.json",
        "credentials.json",
        "secrets.yml",
        "secrets.yaml",
        "conf/secrets.json",
        "prod.tfvars",
        ".env/",
        "src/../.env",
        "./.env",
    ];
    for p in paths {
        for access in [Access::Read, Access::Write] {
            assert_eq!(denied(&f.jail, p, access), "jail_sensitive_file", "{p}");
        }
    }
    let abs = f.ws.join(".env");
    assert_eq!(
        denied(&f.jail, abs.to_str().unwrap(), Access::Read),
        "jail_sensitive_file"
    );
    for p in [".airlock", ".airlock/sessions/default.db", "sub/.AIRLOCK/x"] {
        assert_eq!(
            denied(&f.jail, p, Access::Read),
            "jail_airlock_state",
            "{p}"
        );
    }
}

#[test]
fn symlinks_to_and_named_like_sensitive_files_are_denied() {
    let f = fixture();
    symlink(".env", f.ws.join("harmless.txt")).unwrap();
    symlink("../.env", f.ws.join("src/config")).unwrap();
    fs::create_dir_all(f.ws.join(".ssh")).unwrap();
    symlink(".ssh", f.ws.join("keys")).unwrap();
    symlink("README.md", f.ws.join(".npmrc")).unwrap();
    fs::create_dir_all(f.ws.join(".airlock")).unwrap();
    symlink(".airlock", f.ws.join("state")).unwrap();
    for p in [
        "harmless.txt",
        "src/config",
        "keys/id_rsa",
        "keys/new",
        ".npmrc",
    ] {
        for access in [Access::Read, Access::Write] {
            assert_eq!(denied(&f.jail, p, access), "jail_sensitive_file", "{p}");
        }
    }
    assert_eq!(
        denied(&f.jail, "state/x", Access::Write),
        "jail_airlock_state"
    );
    let d = f.jail.confine("harmless.txt", Access::Read).unwrap_err();
    assert!(
        d.reason.contains("harmless.txt") && d.reason.contains(".env"),
        "{}",
        d.reason
    );
}

#[test]
fn writes_to_hard_linked_files_are_denied() {
    let f = fixture();
    fs::hard_link(f.outside.join("secret.txt"), f.ws.join("linked.txt")).unwrap();
    assert_eq!(
        denied(&f.jail, "linked.txt", Access::Write),
        "jail_hardlink"
    );
    assert!(f.jail.confine("linked.txt", Access::Read).is_ok());
    // Directories always have several links; they are not hard-linked files.
    assert!(f.jail.confine("src", Access::Write).is_ok());
}

#[test]
fn paths_through_a_file_are_not_directories() {
    let f = fixture();
    assert_eq!(
        denied(&f.jail, "README.md/x", Access::Write),
        "jail_not_a_directory"
    );
    assert_eq!(
        denied(&f.jail, "README.md/", Access::Read),
        "jail_not_a_directory"
    );
    assert_eq!(
        denied(&f.jail, "README.md/.", Access::Read),
        "jail_not_a_directory"
    );
    assert!(f.jail.confine("src/.", Access::Read).unwrap().is_dir());
    assert_eq!(
        denied(&f.jail, "README.md/..", Access::Read),
        "jail_not_a_directory"
    );
    assert_eq!(
        denied(&f.jail, "src/lib.rs/new/deeper", Access::Write),
        "jail_not_a_directory"
    );
}

#[test]
fn special_files_are_denied() {
    let f = fixture();
    let root = fs::File::open(&f.ws).unwrap();
    rustix::fs::mknodat(
        &root,
        "pipe",
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
        0,
    )
    .unwrap();
    assert_eq!(denied(&f.jail, "pipe", Access::Read), "jail_special_file");
}

#[test]
fn unicode_and_non_utf8_names_are_kept() {
    let f = fixture();
    fs::write(f.ws.join("héllo wörld ✓.txt"), "x").unwrap();
    assert_eq!(
        rel_of(&f.jail, "héllo wörld ✓.txt", Access::Write),
        "héllo wörld ✓.txt"
    );
    // A fullwidth look-alike is a different name on this filesystem, but it reads as `.env`
    // to a person and to some tools: refused, failing closed.
    assert_eq!(
        f.jail.confine("．env", Access::Read).unwrap_err().rule,
        "jail_sensitive_file"
    );
    assert!(f.jail.confine("．envy", Access::Read).is_ok());
    let raw = RelPath::new(OsStr::from_bytes(b"src/f\xffo")).unwrap();
    let p = f.jail.confine_rel(&raw, Access::Write).unwrap();
    assert_eq!(p.rel().unwrap().as_bytes(), b"src/f\xffo");
    let sensitive = RelPath::new(OsStr::from_bytes(b"a/.env.\xff")).unwrap();
    assert_eq!(
        f.jail
            .confine_rel(&sensitive, Access::Read)
            .unwrap_err()
            .rule,
        "jail_sensitive_file"
    );
    assert!(sensitive_rule(&sensitive).is_some());
}

#[test]
fn confine_rel_checks_symlinks_too() {
    let f = fixture();
    symlink(&f.outside, f.ws.join("out")).unwrap();
    let rel = RelPath::new("out/secret.txt").unwrap();
    assert_eq!(
        f.jail.confine_rel(&rel, Access::Write).unwrap_err().rule,
        "jail_symlink_escape"
    );
    let rel = RelPath::new("src/lib.rs").unwrap();
    assert!(f.jail.confine_rel(&rel, Access::Write).is_ok());
}

#[test]
fn unrestricted_lifts_confinement_but_not_sensitive_files() {
    let mut f = fixture();
    fs::write(f.outside.join(".env"), "x").unwrap();
    fs::create_dir_all(f.outside.join(".airlock")).unwrap();
    symlink(&f.outside, f.ws.join("out")).unwrap();
    let outside_file = f.outside.join("secret.txt");
    assert_eq!(
        denied(&f.jail, outside_file.to_str().unwrap(), Access::Read),
        "jail_absolute_outside"
    );
    f.jail.set_unrestricted(&OperatorGrant::from_cli_flag());
    assert!(f.jail.is_unrestricted());
    let p = f
        .jail
        .confine(outside_file.to_str().unwrap(), Access::Write)
        .unwrap();
    assert!(!p.is_inside() && p.rel().is_none());
    assert_eq!(p.abs(), outside_file);
    let p = f
        .jail
        .confine("../outside/secret.txt", Access::Read)
        .unwrap();
    assert_eq!(p.abs(), outside_file);
    let p = f.jail.confine("out/secret.txt", Access::Read).unwrap();
    assert_eq!(p.abs(), outside_file);
    // Inside paths are still reported relative to the root.
    assert_eq!(rel_of(&f.jail, "src/lib.rs", Access::Write), "src/lib.rs");
    assert_eq!(
        rel_of(&f.jail, "../ws/src/lib.rs", Access::Write),
        "src/lib.rs"
    );
    let env = f.outside.join(".env");
    assert_eq!(
        denied(&f.jail, env.to_str().unwrap(), Access::Read),
        "jail_sensitive_file"
    );
    assert_eq!(denied(&f.jail, ".env", Access::Read), "jail_sensitive_file");
    assert_eq!(
        denied(&f.jail, "out/.env", Access::Read),
        "jail_sensitive_file"
    );
    assert_eq!(
        denied(&f.jail, ".airlock/x", Access::Write),
        "jail_airlock_state"
    );
    assert_eq!(
        denied(&f.jail, "../outside/.airlock", Access::Read),
        "jail_airlock_state"
    );
    assert_eq!(
        denied(&f.jail, "/proc/self/environ", Access::Read),
        "jail_magic_link"
    );
    assert_eq!(denied(&f.jail, "a\0", Access::Read), "jail_nul");
}

#[test]
fn decide_reports_allow_and_deny_as_decisions() {
    let f = fixture();
    let d = f.jail.decide("./src/lib.rs", Access::Write);
    assert_eq!((d.decision, &*d.rule), (Ruling::Allow, "jail_confined"));
    assert!(d.reason.contains("`src/lib.rs`"), "{}", d.reason);
    let d = f.jail.decide("../x", Access::Read);
    assert_eq!((d.decision, &*d.rule), (Ruling::Deny, "jail_parent_escape"));
}

#[test]
fn every_denial_names_the_path() {
    let f = fixture();
    for p in [
        "../x",
        "/etc/passwd",
        ".env",
        "README.md/x",
        "/proc/self/root",
    ] {
        let d = f.jail.confine(p, Access::Read).unwrap_err();
        assert!(d.reason.contains(p), "{p}: {}", d.reason);
        assert!(d.reason.ends_with('.'), "{}", d.reason);
    }
}

/// A staged layer over the disk, as a map from relative path to what it holds there.
struct Layer(std::collections::BTreeMap<PathBuf, airlock_policy::jail::Staged>);

impl airlock_policy::jail::Overlay for Layer {
    fn staged(&self, rel: &Path) -> Result<Option<airlock_policy::jail::Staged>, String> {
        Ok(self.0.get(rel).cloned())
    }
}

fn layer(entries: &[(&str, airlock_policy::jail::Staged)]) -> Layer {
    Layer(
        entries
            .iter()
            .map(|(p, s)| (PathBuf::from(p), s.clone()))
            .collect(),
    )
}

/// Paths are confined where they resolve in the merged view: the disk with the staged layer
/// over it. A staged symlink is expanded and confined like one on disk; a staged file cannot
/// be walked through; a staged deletion hides what the disk has.
#[test]
fn paths_resolve_in_the_merged_view_of_disk_and_staged_layer() {
    use airlock_policy::jail::Staged;
    let f = fixture();
    let link = |t: &str| Staged::Symlink(t.into());
    let rel = |p: Result<airlock_policy::jail::ConfinedPath, airlock_policy::Decision>| {
        p.unwrap().rel().unwrap().as_path().to_path_buf()
    };
    let rule = |p: Result<airlock_policy::jail::ConfinedPath, airlock_policy::Decision>| {
        p.unwrap_err().rule
    };
    let abs_outside = f.outside.to_str().unwrap().to_string();
    let l = layer(&[
        ("escape", link("/etc")),
        ("far", link(&abs_outside)),
        ("up", link("../outside")),
        ("lib", link("src")),
        ("abs_in", link(f.ws.join("src/nested").to_str().unwrap())),
        ("notes.txt", Staged::File),
        ("gen", Staged::Dir { opaque: true }),
        ("gen/out", link("../../outside")),
        ("gen/back", link("../src")),
        ("loop_a", link("loop_b")),
        ("loop_b", link("loop_a")),
        ("to_env", link(".env")),
    ]);
    let w = Access::Write;
    // Out of the workspace through a staged link: absolute, relative, and from a staged dir.
    assert_eq!(
        rule(f.jail.confine_over("escape/passwd", w, &l)),
        "jail_symlink_escape"
    );
    assert_eq!(
        rule(f.jail.confine_over("far/secret.txt", Access::Read, &l)),
        "jail_symlink_escape"
    );
    assert_eq!(
        rule(f.jail.confine_over("up/secret.txt", w, &l)),
        "jail_symlink_escape"
    );
    assert_eq!(
        rule(f.jail.confine_over("gen/out/x", w, &l)),
        "jail_symlink_escape"
    );
    // Inside: followed to where it leads, on disk or in the layer.
    assert_eq!(
        rel(f.jail.confine_over("lib/new.rs", w, &l)),
        Path::new("src/new.rs")
    );
    assert_eq!(
        rel(f.jail.confine_over("abs_in/x.rs", w, &l)),
        Path::new("src/nested/x.rs")
    );
    assert_eq!(
        rel(f.jail.confine_over("gen/back/lib.rs", w, &l)),
        Path::new("src/lib.rs")
    );
    assert_eq!(
        rel(f.jail.confine_over("gen/new/deep.rs", w, &l)),
        Path::new("gen/new/deep.rs")
    );
    // The link itself, for tools that act on the entry.
    assert_eq!(
        rel(f.jail.confine_nofollow_over("escape", w, &l)),
        Path::new("escape")
    );
    // A staged file is not a directory; loops and sensitive targets are refused as on disk.
    assert_eq!(
        rule(f.jail.confine_over("notes.txt/x", w, &l)),
        "jail_not_a_directory"
    );
    assert_eq!(
        rule(f.jail.confine_over("loop_a/x", Access::Read, &l)),
        "jail_symlink_loop"
    );
    assert_eq!(
        rule(f.jail.confine_over("to_env", Access::Read, &l)),
        "jail_sensitive_file"
    );
    // Without the layer the same names are plain new paths (the disk has none of them).
    assert_eq!(
        rel(f.jail.confine("escape/passwd", w)),
        Path::new("escape/passwd")
    );
}

/// A staged deletion or an opaque staged directory hides the disk below it: a symlink on disk
/// that the changeset removed no longer routes the path anywhere.
#[test]
fn the_staged_layer_hides_what_it_deleted_or_replaced() {
    use airlock_policy::jail::Staged;
    let f = fixture();
    symlink(&f.outside, f.ws.join("out")).unwrap();
    fs::create_dir(f.ws.join("d")).unwrap();
    symlink(&f.outside, f.ws.join("d/inner")).unwrap();
    let w = Access::Write;
    // On disk alone both lead out.
    assert_eq!(
        f.jail.confine("out/x", w).unwrap_err().rule,
        "jail_symlink_escape"
    );
    assert_eq!(
        f.jail.confine("d/inner/x", w).unwrap_err().rule,
        "jail_symlink_escape"
    );
    let l = layer(&[
        ("out", Staged::Deleted),
        ("d", Staged::Dir { opaque: true }),
    ]);
    let p = f.jail.confine_over("out/x", w, &l).unwrap();
    assert_eq!(p.rel().unwrap().as_path(), Path::new("out/x"));
    assert!(!p.exists());
    let p = f.jail.confine_over("d/inner/x", w, &l).unwrap();
    assert_eq!(p.rel().unwrap().as_path(), Path::new("d/inner/x"));
    // A staged directory that keeps the disk's below it does not hide the link.
    let l = layer(&[("d", Staged::Dir { opaque: false })]);
    assert_eq!(
        f.jail.confine_over("d/inner/x", w, &l).unwrap_err().rule,
        "jail_symlink_escape"
    );
}

/// A layer that cannot answer is a path the jail cannot resolve: refused, not guessed.
#[test]
fn a_layer_that_cannot_answer_fails_closed() {
    struct Broken;
    impl airlock_policy::jail::Overlay for Broken {
        fn staged(&self, _: &Path) -> Result<Option<airlock_policy::jail::Staged>, String> {
            Err("database is locked".into())
        }
    }
    let f = fixture();
    let d = f
        .jail
        .confine_over("src/lib.rs", Access::Read, &Broken)
        .unwrap_err();
    assert_eq!(d.rule, "jail_unresolvable");
    assert!(d.reason.contains("database is locked"), "{}", d.reason);
}

/// A path with a control, C1, bidi or invisible formatting character is refused at every
/// entry point (`jail_control_char`), quoted escaped; a sensitive name says so instead; bytes
/// that are not UTF-8 stay allowed.
#[test]
fn control_and_bidi_characters_are_refused_at_every_entry_point() {
    let f = fixture();
    let forged = "zz\r\x1b[2A\x1b[J\rM docs/notes.md";
    let names = [
        forged,
        "a\tb",
        "new\nline",
        "del\u{7f}",
        "csi\u{9b}2J",
        "evil\u{202e}txt.exe",
        "iso\u{2066}x",
        "zw\u{200b}sp",
        "alm\u{61c}x",
        "bom\u{feff}x",
        "src/\x1b[31mred/x.rs",
    ];
    let l = layer(&[]);
    for name in names {
        for access in [Access::Read, Access::Write] {
            let results = [
                f.jail.confine(name, access),
                f.jail.confine_nofollow(name, access),
                f.jail.confine_over(name, access, &l),
                f.jail.confine_nofollow_over(name, access, &l),
                f.jail.confine(f.ws.join(name).to_str().unwrap(), access),
                f.jail.confine_rel(&RelPath::new(name).unwrap(), access),
            ];
            for r in results {
                let d = r.unwrap_err();
                assert_eq!((d.stage, &*d.rule), (Stage::Jail, "jail_control_char"));
                assert!(d.reason.ends_with('.'), "{}", d.reason);
                assert!(
                    !d.reason
                        .chars()
                        .any(airlock_types::display::is_control_or_bidi),
                    "the reason quotes the name escaped: {:?}",
                    d.reason
                );
            }
        }
    }
    let d = f.jail.confine(forged, Access::Write).unwrap_err();
    assert!(
        d.reason
            .contains("`zz\\r\\x1b[2A\\x1b[J\\rM docs/notes.md`"),
        "{}",
        d.reason
    );
    // A sensitive name disguised with an invisible character is still reported as sensitive.
    assert_eq!(
        denied(&f.jail, ".e\u{200b}nv", Access::Read),
        "jail_sensitive_file"
    );
    // Through a symlink to such a name (made on disk by someone else).
    fs::write(f.ws.join("dark\x1b[8m"), "x").unwrap();
    symlink("dark\x1b[8m", f.ws.join("innocent")).unwrap();
    assert_eq!(
        denied(&f.jail, "innocent", Access::Read),
        "jail_control_char"
    );
    // Bytes that are not UTF-8 are not characters: still allowed (and shown as `\xNN`).
    let raw = RelPath::new(OsStr::from_bytes(b"f\x9b\xffo")).unwrap();
    let p = f.jail.confine_rel(&raw, Access::Write).unwrap();
    assert_eq!(p.rel().unwrap().to_string(), "f\\x9b\\xffo");
    // Ordinary non-ASCII names are unaffected.
    for name in ["café.md", "日本/語.rs", "🦀.txt"] {
        assert!(f.jail.confine(name, Access::Write).is_ok(), "{name}");
    }
}
