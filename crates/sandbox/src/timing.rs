//! Phase timings for profiling start-up, as `tracing` events: every [`mark`] is an INFO event
//! of target [`TARGET`] whose `phase` field names the phase reached. A program shows them with
//! [`stderr_layer`] (airlock does under `AIRLOCK_TIMINGS=1`): one line per mark on stderr,
//! `airlock-timing <ms since the first mark> <phase>`. With no subscriber interested, a mark
//! costs one relaxed atomic load.

use std::sync::OnceLock;
use std::time::Instant;

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// The target of every timing event.
pub const TARGET: &str = "airlock_timing";

/// Records that `phase` has been reached.
pub fn mark(phase: &str) {
    tracing::info!(target: TARGET, phase, "phase reached");
}

/// A layer that prints every timing event to stderr as `airlock-timing <ms> <phase>`, the
/// milliseconds counted from the first one it sees; it ignores every other event.
pub fn stderr_layer<S>() -> impl Layer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    StderrMarks {
        start: OnceLock::new(),
    }
    .with_filter(tracing_subscriber::filter::filter_fn(|m| {
        m.target() == TARGET
    }))
}

struct StderrMarks {
    start: OnceLock<Instant>,
}

impl<S: Subscriber> Layer<S> for StderrMarks {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let t0 = *self.start.get_or_init(Instant::now);
        let mut phase = Phase(String::new());
        event.record(&mut phase);
        eprintln!(
            "airlock-timing {:8.3} {}",
            t0.elapsed().as_secs_f64() * 1000.0,
            phase.0
        );
    }
}

/// Reads an event's `phase` field.
struct Phase(String);

impl Visit for Phase {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "phase" {
            value.clone_into(&mut self.0);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "phase" && self.0.is_empty() {
            self.0 = format!("{value:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    /// Marks reach a subscriber as events of the timing target with the phase's name.
    #[test]
    fn marks_are_tracing_events_with_their_phase() {
        use std::sync::{Arc, Mutex};
        struct Collect(Arc<Mutex<Vec<(String, String)>>>);
        impl<S: Subscriber> Layer<S> for Collect {
            fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
                let mut phase = Phase(String::new());
                event.record(&mut phase);
                let target = event.metadata().target().to_string();
                self.0.lock().unwrap().push((target, phase.0));
            }
        }
        let seen = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry()
            .with(Collect(seen.clone()))
            .with(stderr_layer());
        tracing::subscriber::with_default(subscriber, || {
            mark("first");
            mark("second");
        });
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            vec![
                (TARGET.to_string(), "first".to_string()),
                (TARGET.to_string(), "second".to_string())
            ]
        );
    }
}
