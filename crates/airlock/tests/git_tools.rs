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

    fn git(&self, args: &[&str]) -> Output {
        let o = git_in(&self.root.join("home"), &self.ws, args);
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
