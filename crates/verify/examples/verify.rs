//! Runs a verification of a directory and prints the verdict JSON.
//!
//! `cargo run -p airlock-verify --example verify -- DIR [--plain] [--timeout SECS] [--budget BYTES] [-- CMD...]`
//! `--plain` runs without the sandbox (no isolation; for comparison and development).

use std::path::PathBuf;
use std::time::Duration;

use airlock_verify::{
    PlainRunner, VerifyInput, VerifyOptions, run_verification, run_verification_with,
};

fn main() {
    let mut args = std::env::args().skip(1);
    let mut dir = None;
    let mut plain = false;
    let mut opts = VerifyOptions {
        host_env: std::env::vars_os().collect(),
        ..VerifyOptions::default()
    };
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    opts.home_binds = [".cargo", ".rustup", ".pyenv"]
        .iter()
        .map(|d| PathBuf::from(&home).join(d))
        .filter(|p| p.exists())
        .collect();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--plain" => plain = true,
            "--timeout" => {
                let secs = args.next().and_then(|s| s.parse().ok()).unwrap_or(300);
                opts.timeout = Duration::from_secs(secs);
            }
            "--budget" => {
                opts.budget_bytes = args.next().and_then(|s| s.parse().ok()).unwrap_or(4096);
            }
            "--ro-bind" => opts.ro_binds.extend(args.next().map(PathBuf::from)),
            "--" => {
                opts.command = Some(args.by_ref().collect());
            }
            _ => dir = Some(PathBuf::from(arg)),
        }
    }
    let Some(dir) = dir else {
        eprintln!("usage: verify DIR [--plain] [--timeout SECS] [--budget BYTES] [-- CMD...]");
        std::process::exit(2);
    };
    let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
    let scratch = tempfile::tempdir().expect("scratch dir");
    let input = VerifyInput {
        workspace: &dir,
        layers: Vec::new(),
        changeset_hash: "example".into(),
        scratch_dir: scratch.path(),
        baseline_cache: None,
    };
    let result = if plain {
        run_verification_with(&PlainRunner, &input, &opts)
    } else {
        run_verification(&input, &opts)
    };
    match result {
        Ok(report) => {
            println!("{}", serde_json::to_string_pretty(&report).expect("json"));
            if !report.passed() {
                std::process::exit(4);
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
