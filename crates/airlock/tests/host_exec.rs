//! Nothing that the host runs by itself is applied: git control files (a `.git` directory's
//! content, a gitfile), other tools' auto-run configuration, and setuid/setgid bits. Driven
//! through the real `airlock` binary on real git repositories; the payloads are real git
//! `core.fsmonitor` hooks run by a real `git status` on the host.

use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

struct Fx {
    _t: tempfile::TempDir,
    root: PathBuf,
    ws: PathBuf,
}

impl Fx {
    /// A workspace that is a real git repository with one commit.
    fn git_repo() -> Fx {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        let ws = root.join("ws");
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::write(ws.join("src/main.rs"), "fn main() {}\n").unwrap();
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::write(ws.join("sub/readme.txt"), "sub\n").unwrap();
        let fx = Fx { _t: t, root, ws };
        fx.git(&fx.ws, &["init", "-q"]);
        fx.git(&fx.ws, &["add", "-A"]);
        fx.git(&fx.ws, &["commit", "-q", "-m", "init"]);
        fx
    }

    /// Real `git` on the host, with no user or system configuration.
    fn git(&self, dir: &Path, args: &[&str]) -> Output {
        Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("HOME", self.root.join("home"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .stdin(Stdio::null())
            .output()
            .expect("git runs")
    }

    fn airlock(&self, args: &[&str]) -> Output {
        let home = self.root.join("home");
        std::fs::create_dir_all(&home).unwrap();
        Command::new(env!("CARGO_BIN_EXE_airlock"))
            .arg("--workspace")
            .arg(&self.ws)
            .args(args)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .stdin(Stdio::null())
            .output()
            .expect("airlock runs")
    }

    fn build(&self, args: &[&str]) -> Output {
        let mut all = vec!["--mode", "build"];
        all.extend_from_slice(args);
        self.airlock(&all)
    }

    /// Verify with an operator command that reports one passing test.
    fn verify_passes(&self) {
        let o = self.build(&["verify", "--", "echo", "1 passed, 0 failed"]);
        assert_eq!(o.status.code(), Some(0), "verify: {}", text(&o));
    }

    fn status(&self) -> Value {
        let o = self.airlock(&["--json", "status"]);
        assert_eq!(o.status.code(), Some(0), "status: {}", text(&o));
        json_line(&o)
    }
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn json_line(o: &Output) -> Value {
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let line = out
        .lines()
        .last()
        .unwrap_or_else(|| panic!("no stdout: {}", text(o)));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

/// The rule id an `airlock` refusal names on standard error (`denied by STAGE (RULE): …`).
fn json_line_of_stderr_rule(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr);
    err.split_once(" (")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(rule, _)| rule.to_string())
        .unwrap_or_default()
}

fn flagged(status: &Value, path: &str) -> Option<String> {
    status["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"] == path)
        .and_then(|e| e["flagged"].as_str().map(str::to_string))
}

/// `git config` text whose fsmonitor hook touches `marker` when any git command reads the index.
fn fsmonitor_config(marker: &Path) -> String {
    format!(
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = \"touch {}; false\"\n",
        marker.display()
    )
}

#[test]
fn a_gitfile_to_a_planted_git_dir_is_denied_to_file_tools_and_refused_at_apply() {
    let fx = Fx::git_repo();
    let marker = fx.root.join("PWNED-gitfile");
    // The file tools: the gitfile is denied by the jail (stage, rule, sentence), whatever the
    // spelling of the path.
    for path in ["sub/.git", "./sub/.git", "sub//.git", "sub/x/../.git"] {
        let args = serde_json::json!({"path": path, "content": "gitdir: ../evilgit\n"});
        let o = fx.build(&["--json", "call", "write_file", &args.to_string()]);
        assert_eq!(o.status.code(), Some(3), "{path}: {}", text(&o));
        let d = json_line(&o);
        assert_eq!(d["stage"], "jail", "{path}: {d}");
        assert_eq!(d["rule"], "jail_host_exec", "{path}: {d}");
        assert!(d["reason"].as_str().unwrap().contains(".git"), "{d}");
    }
    // The same through the sandbox: staged, flagged, and refused at apply with exit 4.
    let script = format!(
        "git init -q --bare evilgit && printf '%s' '{}' > evilgit/config && printf 'gitdir: ../evilgit\\n' > sub/.git",
        fsmonitor_config(&marker).replace('\'', "'\\''")
    );
    let o = fx.build(&["exec", "--", "sh", "-c", &script]);
    assert_eq!(o.status.code(), Some(0), "exec: {}", text(&o));
    let st = fx.status();
    let flag = flagged(&st, "sub/.git").unwrap_or_else(|| panic!("sub/.git not flagged: {st}"));
    assert!(flag.contains("git"), "{flag}");
    fx.verify_passes();
    let o = fx.build(&["apply"]);
    assert_eq!(o.status.code(), Some(4), "apply: {}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("sub/.git"), "{err}");
    assert!(!fx.ws.join("sub/.git").exists(), "nothing may be written");
    assert!(!fx.ws.join("evilgit").exists(), "nothing may be written");
    // The host's git, run the ordinary way, runs nothing planted.
    let o = fx.git(&fx.ws.join("sub"), &["status", "--short"]);
    assert!(o.status.success(), "git status: {}", text(&o));
    assert!(!marker.exists(), "the fsmonitor payload ran on the host");
    // The payload is live: once the operator deliberately allows the gitfile, the same
    // `git status` runs it. (This is what the refusal above prevents.)
    let o = fx.build(&[
        "apply",
        "--allow-host-exec",
        "sub/.git",
        "--allow-host-exec",
        "evilgit",
    ]);
    assert_eq!(o.status.code(), Some(0), "apply: {}", text(&o));
    let _ = fx.git(&fx.ws.join("sub"), &["status", "--short"]);
    assert!(
        marker.exists(),
        "the control experiment must run the payload"
    );
}

#[test]
fn deleting_git_history_is_refused_unless_the_operator_names_it() {
    let fx = Fx::git_repo();
    let before = fx.git(&fx.ws, &["log", "--oneline"]);
    assert!(before.status.success());
    let o = fx.build(&["exec", "--", "sh", "-c", "cd .git/objects && rm -f */*"]);
    assert_eq!(o.status.code(), Some(0), "exec: {}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("flagged"),
        "the harvest note says the delete is flagged: {}",
        text(&o)
    );
    let st = fx.status();
    let deletes: Vec<&Value> = st["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["status"] == "D")
        .collect();
    assert!(
        deletes.len() >= 3,
        "every loose object is staged for deletion: {st}"
    );
    for e in &deletes {
        assert!(
            e["path"].as_str().unwrap().starts_with(".git/objects/"),
            "{e}"
        );
        assert!(e["flagged"].is_string(), "unflagged: {e}");
    }
    fx.verify_passes();
    let o = fx.build(&["apply"]);
    assert_eq!(o.status.code(), Some(4), "apply: {}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(".git/objects"),
        "{}",
        text(&o)
    );
    let after = fx.git(&fx.ws, &["log", "--oneline"]);
    assert!(
        after.status.success(),
        "history must be intact: {}",
        text(&after)
    );
    assert_eq!(after.stdout, before.stdout);
    // Naming another path does not help.
    let o = fx.build(&["apply", "--allow-host-exec", ".git/refs"]);
    assert_eq!(o.status.code(), Some(4), "apply: {}", text(&o));
    assert!(fx.git(&fx.ws, &["log", "--oneline"]).status.success());
    // The operator names the directory: everything under it may be applied.
    let o = fx.build(&["apply", "--allow-host-exec", "./.git/objects/"]);
    assert_eq!(o.status.code(), Some(0), "apply: {}", text(&o));
    let gone = fx.git(&fx.ws, &["log", "--oneline"]);
    assert!(
        !gone.status.success(),
        "the operator's override applied the deletes"
    );
}

#[test]
fn the_model_cannot_reach_the_override() {
    let fx = Fx::git_repo();
    let o = fx.build(&["exec", "--", "sh", "-c", "cd .git/refs/heads && rm -f *"]);
    assert_eq!(o.status.code(), Some(0), "exec: {}", text(&o));
    fx.verify_passes();
    // The agent's channel (`call`) has no such argument; the schema refuses unknown ones.
    let o = fx.build(&[
        "--json",
        "call",
        "apply",
        r#"{"allow_host_exec":[".git/refs"]}"#,
    ]);
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    let o = fx.build(&["--json", "call", "apply", "{}"]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    assert!(fx.git(&fx.ws, &["log", "--oneline"]).status.success());
}

#[test]
fn setuid_and_setgid_bits_never_reach_the_disk() {
    let fx = Fx::git_repo();
    let o = fx.build(&[
        "exec",
        "--",
        "sh",
        "-c",
        "mkdir -m 2775 shared && mkdir -m 3777 drop && cp -p /usr/bin/passwd tool && stat -c '%a %n' shared drop tool",
    ]);
    assert_eq!(o.status.code(), Some(0), "exec: {}", text(&o));
    // Inside the sandbox the bits were really set: this is what is being stripped.
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("2775 shared"), "{out}");
    assert!(out.contains("4755 tool"), "{out}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("setuid") || err.contains("setgid"),
        "the harvest note says the bits were dropped: {err}"
    );
    fx.verify_passes();
    let o = fx.build(&["apply"]);
    assert_eq!(o.status.code(), Some(0), "apply: {}", text(&o));
    let mode = |p: &str| {
        std::fs::symlink_metadata(fx.ws.join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(mode("shared"), 0o775, "setgid directory");
    assert_eq!(mode("drop") & 0o6000, 0, "setgid directory");
    assert_eq!(mode("tool"), 0o755, "setuid file");
}

#[test]
fn editor_and_vcs_auto_run_files_are_denied_to_every_file_tool_but_readable() {
    let fx = Fx::git_repo();
    std::fs::create_dir_all(fx.ws.join(".vscode")).unwrap();
    std::fs::write(fx.ws.join(".vscode/tasks.json"), "{}\n").unwrap();
    let deny = |tool: &str, args: Value| {
        let o = fx.build(&["--json", "call", tool, &args.to_string()]);
        assert_eq!(o.status.code(), Some(3), "{tool} {args}: {}", text(&o));
        let d = json_line(&o);
        assert_eq!(d["rule"], "jail_host_exec", "{tool} {args}: {d}");
        assert_eq!(d["stage"], "jail");
    };
    deny(
        "write_file",
        serde_json::json!({"path": ".git/hooks/../info/exclude", "content": "x"}),
    );
    deny(
        "write_file",
        serde_json::json!({"path": "vendor/lib/.git", "content": "gitdir: /tmp/x"}),
    );
    deny(
        "write_file",
        serde_json::json!({"path": ".vscode/settings.json", "content": "{}"}),
    );
    deny(
        "write_file",
        serde_json::json!({"path": ".envrc", "content": "touch /tmp/x"}),
    );
    deny(
        "write_file",
        serde_json::json!({"path": "pkg/.hg/hgrc", "content": "[hooks]"}),
    );
    deny(
        "edit_file",
        serde_json::json!({"path": ".vscode/tasks.json", "old_string": "{}", "new_string": "{\"tasks\":[]}"}),
    );
    deny("delete_file", serde_json::json!({"path": ".git/HEAD"}));
    deny("delete_file", serde_json::json!({"path": ".git"}));
    deny(
        "move_file",
        serde_json::json!({"from": "src/main.rs", "to": "sub/.git"}),
    );
    deny(
        "move_file",
        serde_json::json!({"from": ".vscode/tasks.json", "to": "tasks.json"}),
    );
    deny(
        "apply_patch",
        serde_json::json!({"patch": "--- /dev/null\n+++ b/.nvim.lua\n@@ -0,0 +1 @@\n+os.execute('x')\n"}),
    );
    // Reads stay allowed.
    let o = fx.build(&["--json", "call", "read_file", r#"{"path":".git/HEAD"}"#]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // Look-alikes that are ordinary files stay writable.
    for path in [".github/workflows/ci.yml", ".gitignore", "src/git/mod.rs"] {
        let args = serde_json::json!({"path": path, "content": "x\n"});
        let o = fx.build(&["--json", "call", "write_file", &args.to_string()]);
        assert_eq!(o.status.code(), Some(0), "{path}: {}", text(&o));
    }
    // `airlock jail --write` says the same as the chain.
    let o = fx.airlock(&[
        "jail",
        "--json",
        "--write",
        "sub/.git",
        ".vscode/tasks.json",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let d: Value = serde_json::from_str(line).unwrap();
        assert_eq!(d["rule"], "jail_host_exec", "{d}");
    }
}

/// `git status` in the sandbox does not rewrite `.git/index` (its optional index refresh is
/// off), so it leaves no host-exec change behind that would block apply.
#[test]
fn read_only_git_in_the_sandbox_stages_nothing() {
    let fx = Fx::git_repo();
    // A stat change makes `git status` want to refresh (rewrite) the index.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    std::fs::File::options()
        .append(true)
        .open(fx.ws.join("src/main.rs"))
        .unwrap()
        .set_modified(std::time::SystemTime::now())
        .unwrap();
    for args in [
        &["git", "status", "--short"][..],
        &["git", "status"][..],
        &["git", "log", "--oneline"][..],
    ] {
        let mut all = vec!["exec", "--"];
        all.extend_from_slice(args);
        let o = fx.build(&all);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
    }
    let st = fx.status();
    assert_eq!(st["entries"], serde_json::json!([]), "{st}");
}

/// A refusal by the staging layer at apply time is exit 4 with nothing written, not an
/// internal error (exit 1).
#[test]
fn an_entry_the_stage_refuses_at_apply_exits_4() {
    let fx = Fx::git_repo();
    let args = serde_json::json!({"path": "sub/readme.txt", "content": "changed\n"});
    let o = fx.build(&["call", "write_file", &args.to_string()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    fx.verify_passes();
    // After verification, `sub` becomes a symbolic link (to an identical copy).
    std::fs::rename(fx.ws.join("sub"), fx.ws.join("sub2")).unwrap();
    std::os::unix::fs::symlink("sub2", fx.ws.join("sub")).unwrap();
    let o = fx.build(&["apply"]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("Nothing was applied"),
        "{}",
        text(&o)
    );
    assert_eq!(
        std::fs::read_to_string(fx.ws.join("sub2/readme.txt")).unwrap(),
        "sub\n"
    );
}

/// A directory with `HEAD`, `objects/` and `refs/` is a git directory to git whatever its
/// name: `git status` run inside it reads its `config`. Planting one is a host-exec change.
#[test]
fn an_embedded_git_directory_by_shape_is_refused_and_its_payload_never_runs() {
    let fx = Fx::git_repo();
    let marker = fx.root.join("PWNED-shape");
    let config = format!(
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = ..\n\tfsmonitor = \"touch {}; false\"\n",
        marker.display()
    );
    let script = format!(
        "git init -q --bare docs && printf '%s' '{}' > docs/config",
        config.replace('\'', "'\\''")
    );
    let o = fx.build(&["exec", "--", "sh", "-c", &script]);
    assert_eq!(o.status.code(), Some(0), "exec: {}", text(&o));
    let st = fx.status();
    assert!(flagged(&st, "docs/config").is_some(), "{st}");
    fx.verify_passes();
    let o = fx.build(&["apply"]);
    assert_eq!(o.status.code(), Some(4), "apply: {}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("docs/"),
        "{}",
        text(&o)
    );
    assert!(!fx.ws.join("docs").exists(), "nothing may be written");
    std::fs::create_dir_all(fx.ws.join("docs")).unwrap();
    let _ = fx.git(&fx.ws.join("docs"), &["status", "--short"]);
    assert!(
        !marker.exists(),
        "the planted repository's payload ran on the host"
    );
    std::fs::remove_dir(fx.ws.join("docs")).unwrap();

    // The file tools: whichever write completes the shape is denied, and so is anything
    // below a directory that has it.
    let fx = Fx::git_repo();
    let write = |path: &str, content: &str| {
        let args = serde_json::json!({"path": path, "content": content});
        fx.build(&["--json", "call", "write_file", &args.to_string()])
    };
    for (path, body) in [
        ("lib/objects/info/packs", ""),
        (
            "lib/refs/heads/main",
            "0000000000000000000000000000000000000000\n",
        ),
    ] {
        let o = write(path, body);
        assert_eq!(o.status.code(), Some(0), "{path}: {}", text(&o));
    }
    let o = write("lib/HEAD", "ref: refs/heads/main\n");
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert_eq!(json_line(&o)["rule"], "jail_host_exec");
    // A repository already on disk (say, a test fixture) is one too.
    fx.git(&fx.ws, &["init", "-q", "--bare", "tests/fixture.git"]);
    let o = write("tests/fixture.git/config", &config);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert_eq!(json_line(&o)["rule"], "jail_host_exec");
    // Tearing one down is refused too, though the result no longer has the shape.
    let o = fx.build(&[
        "--json",
        "call",
        "delete_file",
        r#"{"path":"tests/fixture.git/HEAD"}"#,
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert_eq!(json_line(&o)["rule"], "jail_host_exec");
    let o = fx.build(&["exec", "--", "rm", "tests/fixture.git/HEAD"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let st = fx.status();
    assert!(flagged(&st, "tests/fixture.git/HEAD").is_some(), "{st}");
}

/// Hooks and included configuration that the repository's own `.git/config` places inside
/// the workspace (`core.hooksPath = .githooks`, as husky-style setups do, and `include.path`)
/// are run by git like `.git/hooks` and `.git/config`.
#[test]
fn the_repositorys_configured_hooks_dir_and_includes_are_host_exec() {
    let fx = Fx::git_repo();
    fx.git(&fx.ws, &["config", "core.hooksPath", ".githooks"]);
    fx.git(&fx.ws, &["config", "include.path", "../tools/git.inc"]);
    let args =
        serde_json::json!({"path": ".githooks/pre-commit", "content": "#!/bin/sh\ntouch /tmp/x\n"});
    let o = fx.build(&["--json", "call", "write_file", &args.to_string()]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert_eq!(json_line(&o)["rule"], "jail_host_exec");
    let args = serde_json::json!({"path": "tools/git.inc", "content": "[core]\n\tpager = x\n"});
    let o = fx.build(&["--json", "call", "write_file", &args.to_string()]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let o = fx.build(&[
        "exec",
        "--",
        "sh",
        "-c",
        "mkdir -p .githooks && printf '#!/bin/sh\\ntouch marker\\n' > .githooks/post-checkout",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let st = fx.status();
    assert!(flagged(&st, ".githooks/post-checkout").is_some(), "{st}");
    fx.verify_passes();
    let o = fx.build(&["apply"]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    assert!(!fx.ws.join(".githooks").exists());
    // Other files stay ordinary.
    let args = serde_json::json!({"path": "tools/other.txt", "content": "x\n"});
    let o = fx.build(&["--json", "call", "write_file", &args.to_string()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// A host-exec name that is a symbolic link on disk makes its in-workspace target host-exec:
/// `.envrc -> tools/envrc.sh`, `.git/hooks/pre-commit -> ../../scripts/pre-commit`.
#[test]
fn targets_of_linked_host_exec_files_are_host_exec() {
    let fx = Fx::git_repo();
    std::fs::create_dir_all(fx.ws.join("tools")).unwrap();
    std::fs::create_dir_all(fx.ws.join("scripts")).unwrap();
    std::fs::write(fx.ws.join("tools/envrc.sh"), "export A=1\n").unwrap();
    std::fs::write(fx.ws.join("scripts/pre-commit"), "#!/bin/sh\n").unwrap();
    std::os::unix::fs::symlink("tools/envrc.sh", fx.ws.join(".envrc")).unwrap();
    std::os::unix::fs::symlink(
        "../../scripts/pre-commit",
        fx.ws.join(".git/hooks/pre-commit"),
    )
    .unwrap();
    for path in ["tools/envrc.sh", "scripts/pre-commit", "./tools//envrc.sh"] {
        let args = serde_json::json!({"path": path, "content": "touch /tmp/x\n"});
        let o = fx.build(&["--json", "call", "write_file", &args.to_string()]);
        assert_eq!(o.status.code(), Some(3), "{path}: {}", text(&o));
        assert_eq!(json_line(&o)["rule"], "jail_host_exec", "{path}");
    }
    let o = fx.build(&[
        "exec",
        "--",
        "sh",
        "-c",
        "echo 'touch /tmp/y' >> scripts/pre-commit",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    fx.verify_passes();
    let o = fx.build(&["apply"]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let args = serde_json::json!({"path": "scripts/other.sh", "content": "x\n"});
    let o = fx.build(&["--json", "call", "write_file", &args.to_string()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// A link created in the changeset under a host-exec directory's name makes its target that
/// directory: `.vscode -> vsc` with `vsc/tasks.json` is `.vscode/tasks.json` to VS Code. Both
/// the link and the file under its target are refused at apply, for every such directory, and
/// through a chain of links; naming both lets them through.
#[test]
fn a_link_named_as_a_host_exec_directory_and_the_files_below_its_target_are_refused() {
    for (dir, file) in [
        (".vscode", "tasks.json"),
        (".claude", "settings.json"),
        (".cursor", "mcp.json"),
        (".gemini", "settings.json"),
        (".codex", "config.toml"),
        (".zed", "settings.json"),
        (".kiro", "settings/mcp.json"),
    ] {
        let fx = Fx::git_repo();
        let script = format!(
            "mkdir -p vsc/$(dirname {file}) && echo '{{\"tasks\":[{{\"runOptions\":{{\"runOn\":\"folderOpen\"}}}}]}}' > vsc/{file} && ln -s vsc {dir}"
        );
        let o = fx.build(&["exec", "--", "sh", "-c", &script]);
        assert_eq!(o.status.code(), Some(0), "{dir}: {}", text(&o));
        let st = fx.status();
        assert!(flagged(&st, dir).is_some(), "{dir} not flagged: {st}");
        let target = format!("vsc/{file}");
        assert!(
            flagged(&st, &target).is_some(),
            "{target} not flagged: {st}"
        );
        fx.verify_passes();
        let o = fx.build(&["apply"]);
        assert_eq!(o.status.code(), Some(4), "{dir}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!(
                "`vsc/{file}` is `{dir}/{file}` through the link `{dir}`"
            )),
            "{dir}: {err}"
        );
        assert!(std::fs::symlink_metadata(fx.ws.join(dir)).is_err(), "{dir}");
        assert!(!fx.ws.join("vsc").exists(), "{dir}: nothing may be written");
        // The link alone is not enough: the operator must name what the link makes host-exec.
        let o = fx.build(&["apply", "--allow-host-exec", dir]);
        assert_eq!(o.status.code(), Some(4), "{dir}: {}", text(&o));
        let o = fx.build(&[
            "apply",
            "--allow-host-exec",
            dir,
            "--allow-host-exec",
            "vsc",
        ]);
        assert_eq!(o.status.code(), Some(0), "{dir}: {}", text(&o));
    }
    // Through a chain of links staged by separate commands, and a file written by a file tool
    // once the link is staged.
    let fx = Fx::git_repo();
    let o = fx.build(&[
        "exec",
        "--",
        "sh",
        "-c",
        "mkdir -p b && ln -s b a && ln -s a .vscode",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = fx.build(&["exec", "--", "sh", "-c", "echo '{}' > b/tasks.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let st = fx.status();
    assert!(flagged(&st, "b/tasks.json").is_some(), "{st}");
    let args = serde_json::json!({"path": "b/settings.json", "content": "{}"});
    let o = fx.build(&["--json", "call", "write_file", &args.to_string()]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let d = json_line(&o);
    assert_eq!(d["rule"], "jail_host_exec");
    assert!(
        d["reason"]
            .as_str()
            .unwrap()
            .contains("(`.vscode/settings.json` through the link `.vscode`)"),
        "{d}"
    );
    fx.verify_passes();
    let o = fx.build(&["apply"]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    assert!(!fx.ws.join("b").exists());
    // A link already on disk does the same for the file tools.
    let fx = Fx::git_repo();
    std::fs::create_dir_all(fx.ws.join("cl")).unwrap();
    std::os::unix::fs::symlink("cl", fx.ws.join(".claude")).unwrap();
    let args = serde_json::json!({"path": "cl/settings.json", "content": "{\"hooks\":{}}"});
    let o = fx.build(&["--json", "call", "write_file", &args.to_string()]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert_eq!(json_line(&o)["rule"], "jail_host_exec");
    let args = serde_json::json!({"path": "cl/notes.md", "content": "x"});
    let o = fx.build(&["--json", "call", "write_file", &args.to_string()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A link with an ordinary name, and a loop, are ordinary.
    let fx = Fx::git_repo();
    let o = fx.build(&[
        "exec",
        "--",
        "sh",
        "-c",
        "mkdir -p docs && echo x > docs/tasks.json && ln -s docs manual && ln -s l2 l1 && ln -s l1 l2",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    fx.verify_passes();
    let o = fx.build(&["apply"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// Agent-harness configurations their tools load by themselves, Cargo's configuration and a
/// virtual environment's startup hooks are host-exec: denied to the file tools, flagged by the
/// harvest and refused at apply.
#[test]
fn agent_harness_configs_cargo_config_and_python_startup_hooks_are_host_exec() {
    let fx = Fx::git_repo();
    let paths = [
        "opencode.json",
        ".roo/mcp.json",
        ".kiro/settings/mcp.json",
        ".amazonq/mcp.json",
        ".continue/mcpServers/x.yaml",
        ".windsurf/hooks.json",
        ".aider.conf.yml",
        ".cargo/config.toml",
        ".venv/lib/python3.12/site-packages/evil.pth",
        ".claude/commands/x.md",
        ".devcontainer/devcontainer.json",
    ];
    for path in paths {
        let args = serde_json::json!({"path": path, "content": "{}\n"});
        let o = fx.build(&["--json", "call", "write_file", &args.to_string()]);
        assert_eq!(o.status.code(), Some(3), "{path}: {}", text(&o));
        assert_eq!(json_line(&o)["rule"], "jail_host_exec", "{path}");
    }
    let script: Vec<String> = paths
        .iter()
        .map(|p| format!("mkdir -p \"$(dirname {p})\" && echo x > {p}"))
        .collect();
    let o = fx.build(&["exec", "--", "sh", "-c", &script.join(" && ")]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let st = fx.status();
    for path in paths {
        assert!(flagged(&st, path).is_some(), "{path} not flagged: {st}");
    }
    fx.verify_passes();
    // `.cargo/config.toml` and a `.pth` hook change how the tests run: the operator accepts
    // that, and the host-exec refusal still stands.
    let o = fx.build(&["apply", "--accept-test-changes"]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    assert_eq!(
        json_line_of_stderr_rule(&o),
        "jail_host_exec",
        "{}",
        text(&o)
    );
    assert!(!fx.ws.join("opencode.json").exists());
}
