//! Runs a command in the sandbox over a workspace and prints what it changed.
//!
//! `cargo run -p airlock-sandbox --example run -- [--network] [--keep] WORKSPACE -- CMD [ARGS...]`
//!
//! The upper layer lives in a temporary directory (printed and kept with `--keep`) and is always
//! harvested; `--quiet` only stops listing the changes. Exits with the command's exit code
//! (124 on timeout).

use std::path::PathBuf;
use std::process::ExitCode;

use airlock_sandbox::{SandboxSpec, default_backend, harvest};

fn main() -> ExitCode {
    airlock_sandbox::settings::install(airlock_sandbox::SandboxSettings::from_vars(
        |n| std::env::var_os(n),
        std::env::vars_os(),
    ));
    let mut args = std::env::args_os().skip(1);
    let (mut network, mut keep, mut quiet) = (false, false, false);
    let mut workspace = None;
    for a in args.by_ref() {
        match a.to_str() {
            Some("--network") => network = true,
            Some("--keep") => keep = true,
            Some("--quiet") => quiet = true,
            Some("--") => break,
            _ => workspace = Some(PathBuf::from(a)),
        }
    }
    let argv: Vec<_> = args.collect();
    let (Some(workspace), false) = (workspace, argv.is_empty()) else {
        eprintln!("usage: run [--network] [--keep] [--quiet] WORKSPACE -- CMD [ARGS...]");
        return ExitCode::from(2);
    };
    let scratch = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("run: {e}");
            return ExitCode::from(2);
        }
    };
    let (upper, work) = (scratch.path().join("upper"), scratch.path().join("work"));
    for d in [&upper, &work] {
        if let Err(e) = std::fs::create_dir(d) {
            eprintln!("run: {e}");
            return ExitCode::from(2);
        }
    }
    let mut spec = SandboxSpec::new(&workspace, &upper, &work, argv);
    spec.network = network;
    if let Ok(cwd) = std::env::current_dir()
        && cwd.starts_with(&workspace)
    {
        spec.cwd = cwd;
    }
    let outcome = match default_backend(false).and_then(|b| b.run(&spec)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("run: {e}");
            return ExitCode::from(125);
        }
    };
    print!("{}", outcome.stdout.text_lossy());
    eprint!("{}", outcome.stderr.text_lossy());
    match harvest(&upper) {
        Ok(changes) if !quiet => changes.iter().for_each(|c| eprintln!("change: {c:?}")),
        Ok(_) => {}
        Err(e) => eprintln!("run: harvesting failed: {e}"),
    }
    if keep {
        eprintln!("upper kept at {}", scratch.keep().display());
    }
    if outcome.timed_out {
        return ExitCode::from(124);
    }
    match (outcome.exit_code, outcome.signal) {
        // An exit status is 0..=255 and a signal number below 128.
        (Some(c), _) => ExitCode::from(u8::try_from(c & 0xff).unwrap_or(1)),
        (None, Some(s)) => ExitCode::from(128u8.wrapping_add(u8::try_from(s & 0x7f).unwrap_or(0))),
        _ => ExitCode::from(125),
    }
}
