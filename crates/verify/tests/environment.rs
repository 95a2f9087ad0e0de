//! The verdict names where the sandbox differs from the host, so a user can tell a sandbox
//! artefact from a real failure.

use std::path::PathBuf;
use std::time::Duration;

use airlock_verify::{VerifyInput, VerifyOptions, run_verification};

#[test]
fn the_verdict_names_each_known_difference_from_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join(".airlock")).unwrap();
    std::fs::write(ws.join(".env"), "TOKEN=x\n").unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let mut host_env: Vec<_> = std::env::vars_os().collect();
    host_env.push(("AIRLOCK_ENVNOTE_API_TOKEN".into(), "s3cret".into()));
    let opts = VerifyOptions {
        timeout: Duration::from_secs(30),
        command: Some(vec![
            "sh".into(),
            "-c".into(),
            "echo '1 passed, 0 failed'".into(),
        ]),
        masked: vec![PathBuf::from(".env"), PathBuf::from("absent.pem")],
        host_env,
        ..VerifyOptions::default()
    };
    let input = VerifyInput {
        workspace: &ws,
        layers: Vec::new(),
        changeset_hash: "blake3:env".into(),
        scratch_dir: scratch.path(),
        baseline_cache: None,
    };
    let r = run_verification(&input, &opts).unwrap();
    let json = serde_json::to_value(&r).unwrap();
    let notes: Vec<String> = json["environment"]
        .as_array()
        .unwrap_or_else(|| panic!("no environment note: {json:#}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let all = notes.join("\n");
    eprintln!("{all}");
    assert!(
        notes.iter().any(
            |n| n.starts_with("no network beyond the run's own loopback")
                && n.contains("refused by policy")
        ),
        "{all}"
    );
    assert!(notes.iter().any(|n| n.contains("HOME")), "{all}");
    let masked = notes.iter().find(|n| n.starts_with("masked")).expect(&all);
    assert!(
        masked.contains(".env") && masked.contains(".airlock"),
        "{all}"
    );
    assert!(!masked.contains("absent.pem"), "{all}");
    let vars = notes.iter().find(|n| n.contains("not passed")).expect(&all);
    assert!(vars.contains("AIRLOCK_ENVNOTE_API_TOKEN"), "{all}");
    assert!(!all.contains("s3cret"), "{all}");
    assert!(notes.iter().any(|n| n.contains("/sys")), "{all}");
    assert!(all.len() < 1024, "the note stays short: {all}");
}
