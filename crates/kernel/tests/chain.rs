//! The chain through the library API, on real temporary workspaces: bad input gets a clear
//! error and loses nothing.

use airlock_kernel::{CallContext, CallOutcome, Cancel, DenyAll, Kernel, KernelConfig, Settings};
use airlock_policy::modes::PermissionMode;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;

fn open(ws: &Path, mode: &str) -> Kernel {
    Kernel::open(KernelConfig {
        workspace: ws.to_path_buf(),
        session: "t".into(),
        mode: mode.parse().expect("a work mode"),
        permission: PermissionMode::Auto,
        profile: None,
        allow_local_config: false,
        allow_degraded: false,
        settings: Settings::from_vars(std::env::vars_os(), std::env::temp_dir()),
    })
    .expect("kernel opens")
}

fn call(k: &Kernel, tool: &str, args: Value) -> CallOutcome {
    let approver = DenyAll::default();
    let ctx = CallContext::new(Cancel::new(), &approver);
    k.call(tool, &args.to_string(), &ctx)
}

fn ws() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("notes.txt"), "alpha\nbeta\nalpha\n").unwrap();
    t
}

#[test]
fn edit_file_requires_exactly_one_match_unless_replace_all() {
    let t = ws();
    let k = open(t.path(), "build");
    let o = call(
        &k,
        "edit_file",
        json!({"path": "notes.txt", "old_string": "alpha", "new_string": "x"}),
    );
    assert!(!o.ok);
    assert!(
        o.output.as_str().unwrap().contains("matches 2 times"),
        "{}",
        o.output
    );
    let o = call(
        &k,
        "edit_file",
        json!({"path": "notes.txt", "old_string": "gamma", "new_string": "x"}),
    );
    assert!(!o.ok);
    assert!(o.output.as_str().unwrap().contains("not found"));
    assert!(
        k.call(
            "status",
            "{}",
            &CallContext::new(Cancel::new(), &DenyAll::default())
        )
        .output["entries"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let o = call(
        &k,
        "edit_file",
        json!({"path": "notes.txt", "old_string": "alpha", "new_string": "x", "replace_all": true}),
    );
    assert!(o.ok, "{}", o.output);
    let o = call(&k, "read_file", json!({"path": "notes.txt"}));
    let text = o.output.as_str().unwrap();
    assert!(text.contains("\tx\n") && !text.contains("alpha"));
    assert_eq!(
        std::fs::read_to_string(t.path().join("notes.txt")).unwrap(),
        "alpha\nbeta\nalpha\n"
    );
}

#[test]
fn binary_content_round_trips_and_is_reported_as_binary() {
    let t = ws();
    let k = open(t.path(), "build");
    // 0x00 0xff 0x10 0x80 in base64.
    let o = call(
        &k,
        "write_file",
        json!({"path": "blob.bin", "content": "AP8QgA==", "encoding": "base64"}),
    );
    assert!(o.ok, "{}", o.output);
    let o = call(&k, "read_file", json!({"path": "blob.bin"}));
    assert!(
        o.output
            .as_str()
            .unwrap()
            .contains("binary file of 4 bytes"),
        "{}",
        o.output
    );
    let o = call(
        &k,
        "write_file",
        json!({"path": "bad.bin", "content": "!!!", "encoding": "base64"}),
    );
    assert!(!o.ok);
}

#[test]
fn oversize_content_is_denied_by_validation() {
    let t = ws();
    let k = open(t.path(), "build");
    let big = "x".repeat(12 * 1024 * 1024);
    let o = call(&k, "write_file", json!({"path": "big.txt", "content": big}));
    let d = o.denial.expect("denied");
    assert_eq!(d.stage.as_str(), "validation");
    assert!(d.reason.contains("/content"), "{}", d.reason);
    assert!(!t.path().join("big.txt").exists());
}

#[test]
fn read_file_pages_with_offset_and_marks_the_cut() {
    let t = ws();
    let body: String = (1..=50).map(|i| format!("line {i}\n")).collect();
    std::fs::write(t.path().join("long.txt"), body).unwrap();
    let k = open(t.path(), "discuss");
    let o = call(&k, "read_file", json!({"path": "long.txt", "limit": 10}));
    assert!(o.truncated);
    let text = o.output.as_str().unwrap();
    assert!(text.contains("offset=11"), "{text}");
    assert!(text.contains("40 more lines"), "{text}");
    assert!(text.contains("untrusted repository data"));
    let o = call(&k, "read_file", json!({"path": "long.txt", "offset": 45}));
    assert!(!o.truncated);
    assert!(o.output.as_str().unwrap().contains("line 50"));
}

#[test]
fn concurrent_writers_lose_nothing() {
    let t = ws();
    let k = Arc::new(open(t.path(), "build"));
    let mut handles = Vec::new();
    for i in 0..8 {
        let k = k.clone();
        handles.push(std::thread::spawn(move || {
            for j in 0..10 {
                let o = call(
                    &k,
                    "write_file",
                    json!({"path": format!("d/f{i}-{j}.txt"), "content": format!("{i}-{j}")}),
                );
                assert!(o.ok, "{}", o.output);
                // Everyone also hammers one shared path: the last writer wins, nobody errors.
                let o = call(
                    &k,
                    "write_file",
                    json!({"path": "shared.txt", "content": format!("{i}")}),
                );
                assert!(o.ok, "{}", o.output);
            }
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    let o = call(&k, "status", json!({}));
    assert_eq!(o.output["entries"].as_array().unwrap().len(), 81);
    for i in 0..8 {
        for j in 0..10 {
            let o = call(&k, "read_file", json!({"path": format!("d/f{i}-{j}.txt")}));
            assert!(o.output.as_str().unwrap().contains(&format!("\t{i}-{j}")));
        }
    }
}

#[test]
fn cancelled_calls_do_nothing() {
    let t = ws();
    let k = open(t.path(), "build");
    let cancel = Cancel::new();
    cancel.cancel();
    let deny = DenyAll::default();
    let ctx = CallContext::new(cancel, &deny);
    let o = k.call("write_file", r#"{"path":"c.txt","content":"x"}"#, &ctx);
    assert!(!o.ok);
    let o = call(&k, "status", json!({}));
    assert!(o.output["entries"].as_array().unwrap().is_empty());
}

#[test]
fn staged_symlinks_cannot_be_written_through() {
    let t = ws();
    let k = open(t.path(), "build");
    let o = call(&k, "bash", json!({"command": "ln -s /etc escape"}));
    assert!(o.ok, "{}", o.output);
    let o = call(
        &k,
        "write_file",
        json!({"path": "escape/passwd", "content": "x"}),
    );
    let d = o.denial.expect("denied");
    assert_eq!(d.stage.as_str(), "jail");
    assert_eq!(d.rule, "jail_symlink_escape", "{}", d.reason);
    let o = call(&k, "status", json!({}));
    let entries = o.output["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1);
    assert!(
        entries[0]["flagged"].is_string(),
        "a symlink out of the workspace is flagged: {}",
        o.output
    );
}

/// The agent's paths resolve in the view it works in, the disk with the changeset over it: a
/// symlink staged by a command leads where it points, as one on disk does, and a path through
/// a directory the changeset deleted no longer follows what the disk had there.
#[test]
fn staged_symlinks_inside_the_workspace_lead_where_they_point() {
    let t = ws();
    std::fs::create_dir(t.path().join("src")).unwrap();
    std::os::unix::fs::symlink("/etc", t.path().join("old")).unwrap();
    let k = open(t.path(), "build");
    let o = call(
        &k,
        "bash",
        json!({"command": "ln -s src lib && rm old && mkdir old"}),
    );
    assert!(o.ok, "{}", o.output);
    let o = call(
        &k,
        "write_file",
        json!({"path": "lib/new.rs", "content": "x"}),
    );
    assert!(o.ok, "{}", o.output);
    let o = call(
        &k,
        "write_file",
        json!({"path": "old/passwd", "content": "y"}),
    );
    assert!(o.ok, "{}", o.output);
    let o = call(&k, "read_file", json!({"path": "lib/new.rs"}));
    assert!(o.ok, "{}", o.output);
    let o = call(&k, "status", json!({}));
    let paths: Vec<&str> = o.output["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert!(paths.contains(&"src/new.rs"), "{paths:?}");
    assert!(!paths.contains(&"lib/new.rs"), "{paths:?}");
    assert!(paths.contains(&"old/passwd"), "{paths:?}");
    assert!(
        std::fs::read_link(t.path().join("old")).is_ok(),
        "the disk is untouched"
    );
}

/// A command that replaces a symlink with a directory, or empties a directory and recreates
/// it: the changeset deletes what was below the old directory, on disk and staged, and never
/// lists the directory a replaced symlink pointed to.
#[test]
fn a_directory_replaced_by_a_command_leaves_nothing_of_the_old_one() {
    let t = ws();
    std::fs::create_dir(t.path().join("gen")).unwrap();
    std::fs::write(t.path().join("gen/on_disk.txt"), "d").unwrap();
    std::os::unix::fs::symlink("/etc", t.path().join("old")).unwrap();
    let k = open(t.path(), "build");
    let o = call(
        &k,
        "write_file",
        json!({"path": "gen/staged.txt", "content": "s"}),
    );
    assert!(o.ok, "{}", o.output);
    let o = call(
        &k,
        "bash",
        json!({"command": "rm -rf gen old && mkdir gen old && echo n > gen/new.txt"}),
    );
    assert!(o.ok, "{}", o.output);
    let o = call(&k, "status", json!({}));
    let entries = o.output["entries"].as_array().unwrap();
    let change = |p: &str| {
        entries
            .iter()
            .find(|e| e["path"] == p)
            .map(|e| e["status"].as_str().unwrap_or("").to_string())
    };
    assert!(
        !entries
            .iter()
            .any(|e| e["path"].as_str().unwrap().starts_with("old/")),
        "{entries:?}"
    );
    assert_eq!(
        change("gen/on_disk.txt").as_deref(),
        Some("D"),
        "{entries:?}"
    );
    // Staged only: the command's removal takes it out of the changeset.
    assert_eq!(change("gen/staged.txt"), None, "{entries:?}");
    assert_eq!(change("old").as_deref(), Some("M"), "{entries:?}");
    assert!(change("gen/new.txt").is_some(), "{entries:?}");
    let o = call(&k, "read_file", json!({"path": "gen/staged.txt"}));
    assert!(!o.ok, "{}", o.output);
}

#[test]
fn tool_schemas_reject_unknown_fields() {
    let t = ws();
    let k = open(t.path(), "build");
    for spec in k.tools() {
        assert_eq!(
            spec.input_schema["additionalProperties"], false,
            "{}",
            spec.name
        );
        assert!(!spec.description.is_empty());
    }
}

#[test]
fn startup_recovery_reports_what_it_resolved_without_the_advice_to_recover() {
    use airlock_kernel::Notice;
    use airlock_stage::journal::{Journal, NewRecord};
    let t = ws();
    {
        // A process that died mid-effect leaves a pending record behind.
        let (j, _) = Journal::open(t.path()).unwrap();
        j.begin(NewRecord {
            session: "t".into(),
            turn: 1,
            tool: "git_push".into(),
            args_hash: "h".into(),
            ..Default::default()
        })
        .unwrap();
    }
    let k = open(t.path(), "build");
    let notices = k.notices();
    let recovered: Vec<&Notice> = notices
        .iter()
        .filter(|n| matches!(n, Notice::RecoveredAtStartup { .. }))
        .collect();
    assert_eq!(recovered.len(), 1, "{notices:?}");
    assert!(
        recovered[0]
            .to_string()
            .starts_with("recovered an interrupted operation at start-up: {"),
        "{}",
        recovered[0]
    );
    // The journal's "it is now `unknown` — run `airlock recover`" is moot: recovery just ran.
    assert!(
        notices
            .iter()
            .all(|n| !n.to_string().contains("run `airlock recover`")),
        "{notices:?}"
    );
    // `recover` reports the same outcome again.
    let o = call(&k, "recover", json!({}));
    assert!(
        o.output.to_string().contains(r#""tool":"git_push""#),
        "{}",
        o.output
    );
}
