//! Measures the in-process cost of one sandboxed `/usr/bin/true`: wall time (median, min) and
//! CPU time per run (this process and its children), over a small workspace.
//!
//! `cargo run --release -p airlock-sandbox --example startup [RUNS]`

use std::time::Instant;

use airlock_sandbox::{Backend, NamespaceBackend, SandboxSpec};

/// CPU milliseconds used so far by this process and its reaped children.
fn cpu_ms() -> f64 {
    let mut total = 0.0;
    for who in [libc::RUSAGE_SELF, libc::RUSAGE_CHILDREN] {
        // SAFETY: getrusage fills a zeroed struct of the right type.
        let u = unsafe {
            let mut u: libc::rusage = std::mem::zeroed();
            libc::getrusage(who, &raw mut u);
            u
        };
        for t in [u.ru_utime, u.ru_stime] {
            total += t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
        }
    }
    total
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    airlock_sandbox::settings::install(airlock_sandbox::SandboxSettings::from_vars(
        |n| std::env::var_os(n),
        std::env::vars_os(),
    ));
    let runs: usize = std::env::args().nth(1).map_or(Ok(40), |a| a.parse())?;
    let dir = tempfile::tempdir()?;
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace)?;
    std::fs::write(workspace.join("a.txt"), "hi\n")?;
    let backend = NamespaceBackend::new();
    let mut wall = Vec::with_capacity(runs);
    let cpu_before = cpu_ms();
    for i in 0..runs {
        let (upper, work) = (
            dir.path().join(format!("u{i}")),
            dir.path().join(format!("w{i}")),
        );
        std::fs::create_dir(&upper)?;
        std::fs::create_dir(&work)?;
        let spec = SandboxSpec::new(&workspace, &upper, &work, ["/usr/bin/true"]);
        let start = Instant::now();
        let outcome = backend.run(&spec)?;
        wall.push(start.elapsed().as_secs_f64() * 1e3);
        assert!(outcome.success());
    }
    let cpu = (cpu_ms() - cpu_before) / runs as f64;
    wall.sort_by(f64::total_cmp);
    println!(
        "runs {runs}: median {:.2} ms, min {:.2} ms, cpu {:.2} ms/run",
        wall[runs / 2],
        wall[0],
        cpu
    );
    Ok(())
}
