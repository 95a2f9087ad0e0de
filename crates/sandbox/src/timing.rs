//! Opt-in phase timings for profiling start-up: with `AIRLOCK_TIMINGS=1` in the environment,
//! every [`mark`] prints one line to stderr, `airlock-timing <ms since the first mark> <phase>`.
//! Without it a mark costs one relaxed atomic load.

use std::sync::OnceLock;
use std::time::Instant;

static START: OnceLock<Option<Instant>> = OnceLock::new();

/// Records that `phase` has been reached (printed only under `AIRLOCK_TIMINGS=1`).
pub fn mark(phase: &str) {
    let start = START.get_or_init(|| {
        (std::env::var_os("AIRLOCK_TIMINGS").is_some_and(|v| v == "1")).then(Instant::now)
    });
    if let Some(t0) = start {
        eprintln!(
            "airlock-timing {:8.3} {phase}",
            t0.elapsed().as_secs_f64() * 1000.0
        );
    }
}
