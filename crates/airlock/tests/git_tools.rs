//! The git tools run no repository-controlled code. Each fixture repository carries one kind of
//! code that git runs on the repository's say (a hook, a clean/smudge/process filter, fsmonitor,
//! textconv, an external diff, a pager, an alias, an include, a conditional include, a gitfile to
//! a crafted git directory); each payload writes a marker file when it runs. The plain git CLI
//! is shown running them, then every git tool is called on every fixture through the real
//! `airlock` binary and no marker may appear.

use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Every kind of repository-controlled code a fixture can carry.
const KINDS: &[&str] = &[
    "hook",
    "filter_clean",
    "filter_smudge",
    "filter_process",
    "fsmonitor",
    "textconv",
    "external_diff",
    "pager",
    "alias",
    "include",
    "include_if",
    "gitfile",
];

struct Fx {
    _t: tempfile::TempDir,
    root: PathBuf,
    ws: PathBuf,
    markers: PathBuf,
}

/// Real `git` with no user or system configuration, as a test's own setup tool.
fn git_in(home: &Path, dir: &Path, args: &[&str]) -> Output {
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .stdin(Stdio::null())
        .output()
        .expect("git runs")
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

impl Fx {
    /// A repository with two committed files and a local change, no payload yet.
    fn plain() -> Fx {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        let ws = root.join("ws");
        let markers = root.join("markers");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&markers).unwrap();
        std::fs::create_dir_all(root.join("home")).unwrap();
        std::fs::write(ws.join("a.txt"), "one\ntwo\n").unwrap();
        std::fs::write(ws.join("b.txt"), "bee\n").unwrap();
        let fx = Fx {
            _t: t,
            root,
            ws,
            markers,
        };
        fx.git(&["init", "-q", "-b", "main"]);
        fx.git(&["config", "user.name", "Repo User"]);
        fx.git(&["config", "user.email", "repo@example.com"]);
        fx.git(&["add", "-A"]);
        fx.git(&["commit", "-q", "-m", "init"]);
        fx
    }

    /// A repository carrying one kind of repository-controlled code.
    fn with(kind: &str) -> Fx {
        let fx = Fx::plain();
        let payload = fx.payload(kind);
        let p = payload.to_str().unwrap();
        let git_dir = fx.ws.join(".git");
        match kind {
            "hook" => {
                for h in [
                    "pre-commit",
                    "prepare-commit-msg",
                    "commit-msg",
                    "post-commit",
                    "pre-push",
                    "reference-transaction",
                    "post-index-change",
                ] {
                    let hook = git_dir.join("hooks").join(h);
                    std::fs::write(&hook, format!("#!/bin/sh\n{p}\n")).unwrap();
                    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755))
                        .unwrap();
                }
            }
            "filter_clean" | "filter_smudge" | "filter_process" => {
                let key = kind.trim_start_matches("filter_");
                fx.git(&["config", &format!("filter.evil.{key}"), p]);
                std::fs::write(git_dir.join("info/attributes"), "*.txt filter=evil\n").unwrap();
            }
            "fsmonitor" => {
                fx.git(&["config", "core.fsmonitor", p]);
            }
            "textconv" => {
                fx.git(&["config", "diff.evil.textconv", p]);
                std::fs::write(git_dir.join("info/attributes"), "*.txt diff=evil\n").unwrap();
            }
            "external_diff" => {
                fx.git(&["config", "diff.external", p]);
            }
            "pager" => {
                fx.git(&["config", "core.pager", p]);
                for cmd in ["log", "diff", "show", "status", "blame"] {
                    fx.git(&["config", &format!("pager.{cmd}"), p]);
                }
            }
            "alias" => {
                for a in ["st", "lg", "ci"] {
                    fx.git(&["config", &format!("alias.{a}"), &format!("!{p}")]);
                }
            }
            "include" | "include_if" => {
                let inc = fx.root.join("evil.inc");
                std::fs::write(&inc, format!("[core]\n\tfsmonitor = {p}\n")).unwrap();
                let key = if kind == "include" {
                    "include.path".to_string()
                } else {
                    format!("includeIf.gitdir:{}/.path", fx.root.display())
                };
                fx.git(&["config", &key, inc.to_str().unwrap()]);
            }
            "gitfile" => {
                // The workspace's `.git` becomes a gitfile to a crafted git directory whose
                // configuration runs the payload.
                let crafted = fx.root.join("crafted.git");
                std::fs::rename(&git_dir, &crafted).unwrap();
                std::fs::write(
                    fx.ws.join(".git"),
                    format!("gitdir: {}\n", crafted.display()),
                )
                .unwrap();
                fx.git(&["config", "core.fsmonitor", p]);
                fx.git(&["config", "diff.external", p]);
            }
            other => panic!("no fixture kind {other}"),
        }
        // A change git must look at: a modified file, and one whose stat changed but not its
        // content (git hashes it again, through the clean filter).
        std::fs::write(fx.ws.join("a.txt"), "one\ntwo\nthree\n").unwrap();
        let b = std::fs::File::options()
            .append(true)
            .open(fx.ws.join("b.txt"))
            .unwrap();
        b.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
            .unwrap();
        fx
    }

    /// A script that records that it ran (its marker) and succeeds quietly.
    fn payload(&self, kind: &str) -> PathBuf {
        let script = self.root.join(format!("payload-{kind}.sh"));
        let marker = self.markers.join(kind);
        std::fs::write(
            &script,
            format!("#!/bin/sh\necho ran >> '{}'\nexit 0\n", marker.display()),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        script
    }

    /// The test's own git in the workspace, with the fixture's hooks off (a plain `git status`
    /// that refreshes the index would run `post-index-change`).
    fn git(&self, args: &[&str]) -> Output {
        let all: Vec<&str> = ["-c", "core.hooksPath=/dev/null"]
            .into_iter()
            .chain(args.iter().copied())
            .collect();
        let o = git_in(&self.root.join("home"), &self.ws, &all);
        assert!(o.status.success(), "git {args:?}: {}", text(&o));
        o
    }

    fn markers(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.markers)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    fn airlock(&self, args: &[&str]) -> Output {
        let home = self.root.join("home");
        Command::new(env!("CARGO_BIN_EXE_airlock"))
            .arg("--workspace")
            .arg(&self.ws)
            .args(args)
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .stdin(Stdio::null())
            .output()
            .expect("airlock runs")
    }

    /// `airlock --json call TOOL ARGS` with extra global flags; the JSON it prints.
    fn call_with(&self, flags: &[&str], tool: &str, args: Value) -> (Output, Value) {
        let a = args.to_string();
        let mut all: Vec<&str> = flags.to_vec();
        all.extend(["--json", "call", tool, &a]);
        let o = self.airlock(&all);
        let v = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
        (o, v)
    }

    fn call(&self, tool: &str, args: Value) -> (Output, Value) {
        self.call_with(&["--mode", "build"], tool, args)
    }
}

/// The threat is real: the plain git CLI, as an agent's `bash` would run it on the host, runs
/// each payload (the pager needs a terminal, given here by `script`).
#[test]
fn the_plain_git_cli_runs_every_payload() {
    for kind in KINDS {
        let fx = Fx::with(kind);
        let home = fx.root.join("home");
        let run = |args: &[&str]| git_in(&home, &fx.ws, args);
        match *kind {
            "hook" => {
                run(&["commit", "-q", "-am", "x"]);
            }
            "filter_smudge" => {
                run(&["checkout", "--", "a.txt"]);
            }
            "alias" => {
                run(&["st"]);
            }
            "pager" => {
                let o = Command::new("script")
                    .args(["-qec", "git log -1", "/dev/null"])
                    .current_dir(&fx.ws)
                    .env("HOME", &home)
                    .env("GIT_CONFIG_NOSYSTEM", "1")
                    .env("TERM", "dumb")
                    .stdin(Stdio::null())
                    .output()
                    .unwrap();
                // The payload pager exits without reading: git then dies of SIGPIPE.
                assert!(o.status.code().is_some(), "{}", text(&o));
            }
            _ => {
                run(&["status"]);
                run(&["diff"]);
            }
        }
        assert_eq!(fx.markers(), vec![kind.to_string()], "plain git on {kind}");
    }
}

/// Every read tool, on every fixture, runs none of the payloads.
#[test]
fn no_git_read_tool_runs_repository_code() {
    for kind in KINDS {
        let fx = Fx::with(kind);
        let calls = [
            ("git_status", json!({})),
            ("git_diff", json!({})),
            ("git_diff", json!({"rev": "HEAD", "paths": ["a.txt"]})),
            ("git_log", json!({"max_count": 5})),
            ("git_log", json!({"path": "a.txt", "patch": true})),
            ("git_show", json!({"rev": "HEAD"})),
            ("git_blame", json!({"path": "a.txt"})),
            ("git_blame", json!({"path": "b.txt", "rev": "HEAD"})),
        ];
        for (tool, args) in calls {
            let (o, v) = fx.call(tool, args.clone());
            assert_eq!(
                o.status.code(),
                Some(0),
                "{kind}: {tool} {args}: {}",
                text(&o)
            );
            assert_eq!(v["ok"], json!(true), "{kind}: {tool}: {v}");
        }
        assert!(fx.markers().is_empty(), "{kind}: {:?}", fx.markers());
    }
}

impl Fx {
    /// The operator's user config, allowing the publishing tools in AUTO.
    fn allow_publishing(&self) {
        let dir = self.root.join("home/.config/airlock");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("config.toml"),
            "[permissions]\nallow = [\"git_commit\", \"git_push\"]\n",
        )
        .unwrap();
    }

    /// A bare repository on this machine as the remote `origin`, its hooks writing a marker.
    fn with_local_remote(&self) -> PathBuf {
        let bare = self.root.join("remote.git");
        let o = git_in(
            &self.root.join("home"),
            &self.root,
            &[
                "clone",
                "-q",
                "--bare",
                self.ws.to_str().unwrap(),
                bare.to_str().unwrap(),
            ],
        );
        assert!(o.status.success(), "{}", text(&o));
        let payload = self.payload("remote_hook");
        for h in [
            "pre-receive",
            "update",
            "post-receive",
            "post-update",
            "reference-transaction",
        ] {
            let hook = bare.join("hooks").join(h);
            std::fs::write(&hook, format!("#!/bin/sh\n{}\n", payload.display())).unwrap();
            std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        self.git(&["remote", "add", "origin", bare.to_str().unwrap()]);
        bare
    }

    fn rev(&self, dir: &Path, r: &str) -> String {
        let o = git_in(&self.root.join("home"), dir, &["rev-parse", r]);
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    /// Stage `path` with `content`, verify with an operator command, apply.
    fn apply_file(&self, path: &str, content: &str) {
        let (o, _) = self.call("write_file", json!({"path": path, "content": content}));
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let o = self.airlock(&[
            "--mode",
            "build",
            "verify",
            "--",
            "echo",
            "1 passed, 0 failed",
        ]);
        assert_eq!(o.status.code(), Some(0), "verify: {}", text(&o));
        let o = self.airlock(&["--mode", "build", "apply"]);
        assert_eq!(o.status.code(), Some(0), "apply: {}", text(&o));
    }
}

fn is_filter(kind: &str) -> bool {
    kind.starts_with("filter_")
}

/// `git_commit` and `git_push` on every fixture: no payload runs, on either side of the push;
/// a filter makes the commit refuse before git's index is touched.
#[test]
fn no_git_commit_or_push_runs_repository_code() {
    for kind in KINDS {
        let fx = Fx::with(kind);
        fx.allow_publishing();
        let bare = fx.with_local_remote();
        let git_dir = if *kind == "gitfile" {
            fx.root.join("crafted.git")
        } else {
            fx.ws.join(".git")
        };
        let index_before = std::fs::read(git_dir.join("index")).unwrap();
        let head_before = fx.rev(&fx.ws, "HEAD");
        let (o, v) = fx.call("git_commit", json!({"message": "m", "paths": ["a.txt"]}));
        if is_filter(kind) {
            assert_eq!(o.status.code(), Some(3), "{kind}: {}", text(&o));
            assert_eq!(v["rule"], "git_commit.filter_configured", "{kind}: {v}");
            assert_eq!(
                std::fs::read(git_dir.join("index")).unwrap(),
                index_before,
                "{kind}"
            );
            assert_eq!(fx.rev(&fx.ws, "HEAD"), head_before, "{kind}");
        } else {
            assert_eq!(o.status.code(), Some(0), "{kind}: {}", text(&o));
            assert_eq!(v["output"]["paths"], json!(["a.txt"]), "{kind}: {v}");
            assert_ne!(fx.rev(&fx.ws, "HEAD"), head_before, "{kind}");
        }
        let (o, _) = fx.call("git_push", json!({"remote": "origin"}));
        assert_eq!(o.status.code(), Some(0), "{kind}: push: {}", text(&o));
        assert_eq!(fx.rev(&bare, "main"), fx.rev(&fx.ws, "HEAD"), "{kind}");
        assert!(fx.markers().is_empty(), "{kind}: {:?}", fx.markers());
    }
}

/// Without arguments `git_commit` commits exactly what airlock applied, not the user's other
/// edits on disk nor what sits in git's index.
#[test]
fn git_commit_commits_only_what_airlock_applied() {
    let fx = Fx::with("hook");
    fx.allow_publishing();
    // The user's own work: an edit on disk (a.txt, from the fixture) and a staged new file.
    std::fs::write(fx.ws.join("user.txt"), "mine\n").unwrap();
    fx.git(&["add", "user.txt"]);
    fx.apply_file("c.txt", "from the agent\n");
    fx.apply_file("b.txt", "bee\nchanged by the agent\n");
    let (o, v) = fx.call("git_commit", json!({"message": "agent work"}));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(v["output"]["paths"], json!(["b.txt", "c.txt"]), "{v}");
    let show = fx.git(&["show", "--name-only", "--format=%s", "HEAD"]);
    assert_eq!(
        String::from_utf8_lossy(&show.stdout).trim(),
        "agent work\n\nb.txt\nc.txt"
    );
    let st = fx.git(&["status", "--porcelain"]);
    let st = String::from_utf8_lossy(&st.stdout);
    assert!(st.contains(" M a.txt"), "{st}");
    assert!(st.contains("A  user.txt"), "{st}");
    assert!(fx.markers().is_empty(), "{:?}", fx.markers());
    // Nothing applied since: nothing to commit, and nothing runs.
    let (o, _) = fx.call("git_commit", json!({"message": "again"}));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    // The journal holds the commit like an apply.
    let o = fx.airlock(&["--json", "journal"]);
    let j = String::from_utf8_lossy(&o.stdout);
    assert!(
        j.contains("\"tool\":\"git_commit\"") && j.contains("\"committed\""),
        "{j}"
    );
}

/// The publishing tools need the operator: denied in AUTO without a rule, by the readonly,
/// plan and allowlist profiles, and in DISCUSS; a push to a network host needs a grant the
/// default gate never gives; the remote is a configured name, never a URL; no force.
#[test]
fn git_commit_and_push_are_gated() {
    let fx = Fx::plain();
    fx.with_local_remote();
    for (flags, rule) in [
        (vec!["--mode", "build"], "publish_needs_rule"),
        (vec!["--mode", "discuss"], "mode_discuss_readonly"),
        (
            vec!["--mode", "build", "--profile", "readonly"],
            "profile_readonly",
        ),
        (
            vec!["--mode", "build", "--profile", "plan"],
            "profile_plan_no_exec",
        ),
    ] {
        for (tool, args) in [
            ("git_commit", json!({"message": "m", "paths": ["a.txt"]})),
            ("git_push", json!({"remote": "origin"})),
        ] {
            let (o, v) = fx.call_with(&flags, tool, args);
            assert_eq!(o.status.code(), Some(3), "{tool} {flags:?}: {}", text(&o));
            assert_eq!(v["rule"], rule, "{tool} {flags:?}: {v}");
        }
    }
    // In ASK the operator is asked.
    for tool in ["git_commit", "git_push"] {
        let o = fx.airlock(&[
            "--mode",
            "build",
            "--permission",
            "ask",
            "--json",
            "explain",
            tool,
            r#"{"message":"m","remote":"origin"}"#,
        ]);
        let v: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
        let perm = &v["trail"][0];
        assert_eq!(
            (perm["decision"].as_str(), perm["rule"].as_str()),
            (Some("ask"), Some("permission_ask_gated")),
            "{tool}: {v}"
        );
    }
    fx.allow_publishing();
    let (o, v) = fx.call_with(
        &["--mode", "build", "--profile", "allowlist"],
        "git_push",
        json!({"remote": "origin"}),
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert_eq!(v["rule"], "profile_allowlist_no_publish", "{v}");
    // A URL or an option is not a remote name.
    for remote in [
        "/tmp/elsewhere.git",
        "https://example.com/r.git",
        "--force",
        "nope",
    ] {
        let (o, v) = fx.call("git_push", json!({"remote": remote}));
        assert_eq!(o.status.code(), Some(3), "{remote}: {}", text(&o));
        assert!(v["stage"] == "validation", "{remote}: {v}");
    }
    // A network remote needs the network policy's grant.
    fx.git(&["remote", "add", "net", "git://127.0.0.1:9/r.git"]);
    let (o, v) = fx.call("git_push", json!({"remote": "net"}));
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert_eq!(v["rule"], "git_push.network_not_granted", "{v}");
    // A program-running transport is refused outright.
    fx.git(&["remote", "add", "ext", "ext::sh -c touch% /tmp/x"]);
    let (_, v) = fx.call("git_push", json!({"remote": "ext"}));
    assert_eq!(v["rule"], "git_push.remote_transport", "{v}");
    // No force: a remote that moved on is not overwritten.
    let bare = fx.root.join("remote.git");
    let other = fx.root.join("other");
    let home = fx.root.join("home");
    let o = git_in(
        &home,
        &fx.root,
        &[
            "clone",
            "-q",
            bare.to_str().unwrap(),
            other.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    std::fs::write(other.join("z.txt"), "z\n").unwrap();
    git_in(&home, &other, &["add", "z.txt"]);
    git_in(&home, &other, &["commit", "-qm", "theirs"]);
    let o = git_in(
        &home,
        &other,
        &[
            "-c",
            "core.hooksPath=/dev/null",
            "push",
            "-q",
            "origin",
            "main",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let theirs = fx.rev(&bare, "main");
    std::fs::write(fx.ws.join("a.txt"), "mine\n").unwrap();
    let (o, _) = fx.call("git_commit", json!({"message": "mine", "paths": ["a.txt"]}));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let (o, _) = fx.call("git_push", json!({"remote": "origin"}));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(fx.rev(&bare, "main"), theirs);
}

/// No tool fetches, pulls, clones, resets, amends, rebases, checks out, deletes a branch or
/// drops a stash; the git tools are the read tools, one commit and one push.
#[test]
fn no_tool_rewrites_or_fetches_history() {
    let fx = Fx::plain();
    for perm in ["auto", "ask"] {
        let o = fx.airlock(&["--mode", "build", "--permission", perm, "--json", "tools"]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        let tools = v
            .as_array()
            .or_else(|| v["tools"].as_array())
            .expect("a tool list");
        let names: Vec<String> = tools
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect();
        for forbidden in [
            "fetch", "pull", "clone", "reset", "amend", "rebase", "checkout", "switch", "restore",
            "branch", "stash", "merge", "cherry", "revert", "tag", "remote", "gc", "prune",
        ] {
            assert!(
                !names.iter().any(|n| n.contains(forbidden)),
                "{forbidden} in {names:?}"
            );
        }
        let git: Vec<&String> = names.iter().filter(|n| n.starts_with("git")).collect();
        assert_eq!(
            git,
            [
                "git_blame",
                "git_commit",
                "git_diff",
                "git_log",
                "git_push",
                "git_show",
                "git_status"
            ]
        );
        // Neither publishing tool takes an option that rewrites or forces.
        for t in tools {
            let props = t["input_schema"]["properties"].as_object();
            for key in props.into_iter().flatten().map(|(k, _)| k) {
                for bad in ["amend", "force", "delete", "url", "mirror", "all", "tags"] {
                    assert!(!key.contains(bad), "{}: {key}", t["name"]);
                }
            }
        }
    }
    let (o, _) = fx.call("git_commit", json!({"message": "m", "amend": true}));
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
}

/// A `git` on PATH that signals when `git commit` starts, then waits before running the real
/// git: the window in which the test kills airlock.
fn slow_commit_git(fx: &Fx) -> (PathBuf, PathBuf) {
    let bin = fx.root.join("slowbin");
    std::fs::create_dir_all(&bin).unwrap();
    let signal = fx.root.join("commit-started");
    let real = Command::new("sh")
        .args(["-c", "command -v git"])
        .output()
        .unwrap();
    let real = String::from_utf8_lossy(&real.stdout).trim().to_string();
    let script = format!(
        "#!/bin/sh\nfor a in \"$@\"; do if [ \"$a\" = commit ]; then : > '{}'; sleep 2; break; fi; done\nexec '{real}' \"$@\"\n",
        signal.display()
    );
    std::fs::write(bin.join("git"), script).unwrap();
    std::fs::set_permissions(bin.join("git"), std::fs::Permissions::from_mode(0o755)).unwrap();
    (bin, signal)
}

/// Kill `airlock git_commit` once git's commit has started: with `whole_group`, git dies too
/// (nothing is committed); otherwise git finishes the commit after airlock is gone. Then
/// `airlock recover` resolves the record by looking at the branch, and never commits again.
fn crash_mid_commit(whole_group: bool) -> (Fx, String, Value) {
    use std::os::unix::process::CommandExt;
    let fx = Fx::plain();
    fx.allow_publishing();
    std::fs::write(fx.ws.join("a.txt"), "changed\n").unwrap();
    let (bin, signal) = slow_commit_git(&fx);
    let before = fx.rev(&fx.ws, "HEAD");
    let home = fx.root.join("home");
    let mut child = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .arg("--workspace")
        .arg(&fx.ws)
        .args(["--mode", "build", "--json", "call", "git_commit"])
        .arg(json!({"message": "interrupted", "paths": ["a.txt"]}).to_string())
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !signal.exists() {
        assert!(t0.elapsed().as_secs() < 30, "git commit never started");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let target = if whole_group {
        format!("-{}", child.id())
    } else {
        child.id().to_string()
    };
    let killed = Command::new("kill")
        .args(["-s", "KILL", "--", &target])
        .status()
        .unwrap();
    assert!(killed.success(), "kill {target}");
    let _ = child.wait();
    // Let an orphaned git finish (or not) before recovery looks.
    std::thread::sleep(std::time::Duration::from_millis(3000));
    let o = fx.airlock(&["--mode", "build", "--json", "recover"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (fx, before, v)
}

fn commit_outcome(v: &Value) -> Value {
    let list = v
        .as_array()
        .or_else(|| v["output"].as_array())
        .cloned()
        .unwrap_or_default();
    list.into_iter()
        .find(|o| o["tool"] == "git_commit")
        .unwrap_or_else(|| panic!("no git_commit outcome in {v}"))
}

#[test]
fn a_commit_killed_before_git_commits_recovers_as_rolled_back() {
    let (fx, before, v) = crash_mid_commit(true);
    let o = commit_outcome(&v);
    assert_eq!(o["outcome"], "rolled_back", "{v}");
    assert_eq!(fx.rev(&fx.ws, "HEAD"), before, "recovery never commits");
    // Recovering again changes nothing.
    let o = fx.airlock(&["--mode", "build", "--json", "recover"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(fx.rev(&fx.ws, "HEAD"), before);
}

#[test]
fn a_commit_that_finished_after_airlock_died_recovers_as_completed() {
    let (fx, before, v) = crash_mid_commit(false);
    let o = commit_outcome(&v);
    assert_eq!(o["outcome"], "completed", "{v}");
    let head = fx.rev(&fx.ws, "HEAD");
    assert_ne!(head, before);
    assert_eq!(
        fx.rev(&fx.ws, "HEAD~1"),
        before,
        "exactly one commit, not redone"
    );
    let j = fx.airlock(&["--json", "journal"]);
    let j = String::from_utf8_lossy(&j.stdout);
    assert!(j.contains("\"completed\""), "{j}");
}
