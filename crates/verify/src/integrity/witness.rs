//! Witnesses: airlock's own plugin or reporter inside the runner's main process (pytest:
//! `airlock_witness.py` with `-p airlock_witness`; `node --test`, vitest and jest: a reporter
//! module) streams what the runner decided to standard error, each line keyed with a secret that
//! only the witness holds (it reads the key from a file and removes the file as it loads, before
//! any test code runs). [`Witness`] reads that stream back and names every way it disagrees with
//! the runner's report and with how the process ended: a run that ended before the runner's own
//! finish, a report rewritten after the fact, a hook that turned a failure into a pass.

use std::collections::HashSet;

use serde::Deserialize;

use crate::model::{Counts, RunnerKind};

/// The module name pytest loads.
pub(crate) const MODULE: &str = "airlock_witness";
/// The directory, below the report directory, holding the witness files.
pub(crate) const DIR: &str = "witness";

/// The key reader the JavaScript witnesses share (written beside them).
pub(crate) const JS_KEY_MODULE: (&str, &str) = (
    "airlock_witness_key.cjs",
    include_str!("airlock_witness_key.cjs"),
);

/// The witness module for a runner: its file name and source; `None` for runners without
/// one.
pub(crate) fn module_for(kind: RunnerKind) -> Option<(&'static str, &'static str)> {
    match kind {
        RunnerKind::Pytest => Some(("airlock_witness.py", include_str!("airlock_witness.py"))),
        RunnerKind::Node => Some((
            "airlock_witness_node.mjs",
            include_str!("airlock_witness_node.mjs"),
        )),
        RunnerKind::Vitest => Some((
            "airlock_witness_vitest.mjs",
            include_str!("airlock_witness_vitest.mjs"),
        )),
        RunnerKind::Jest => Some((
            "airlock_witness_jest.cjs",
            include_str!("airlock_witness_jest.cjs"),
        )),
        _ => None,
    }
}
/// The variable naming the file that holds the key (removed by the plugin as it loads).
pub(crate) const KEY_ENV: &str = "AIRLOCK_WITNESS";
/// What every witness line starts with.
const PREFIX: &str = "@@airlock-witness:";

#[derive(Debug, Deserialize)]
#[serde(tag = "k", rename_all = "snake_case")]
enum Event {
    Configure,
    Collected {
        n: u64,
    },
    Test {
        id: String,
        outcome: String,
        #[serde(default)]
        raised: bool,
    },
    Finish {
        exitstatus: i64,
        /// Live counts (the reporters).
        #[serde(default)]
        passed: Option<u64>,
        #[serde(default)]
        failed: Option<u64>,
        /// pytest's plugin: tests set up, call phases passed, distinct failing tests (each
        /// failure was also sent as it happened).
        #[serde(default)]
        started: Option<u64>,
        #[serde(default)]
        call_passes: Option<u64>,
        #[serde(default)]
        failing: Option<u64>,
    },
}

/// A fresh random key, hex (for the witness channel).
pub(crate) fn random_key() -> String {
    use std::io::Read;
    let mut buf = [0u8; 16];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .is_ok();
    if !ok {
        // No randomness source: a key from the clock and the process (weaker, still unknown
        // to the tested code before it runs).
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let h = blake3::hash(format!("{t}:{}", std::process::id()).as_bytes());
        buf.copy_from_slice(&h.as_bytes()[..16]);
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// What the witness saw of one run.
#[derive(Debug)]
pub(crate) struct Witness {
    key: String,
    kind: RunnerKind,
    live: Option<(u64, u64)>,
    configured: bool,
    collected: Option<u64>,
    finish: Option<i64>,
    forged: u64,
    malformed: u64,
    failing: HashSet<String>,
    /// The distinct failing tests the end record counted (it must not be fewer than those
    /// sent one by one).
    failing_count: Option<u64>,
    /// The tests set up and the call phases passed, as pytest's end record counted them
    /// (none sent: zero, which fails closed).
    started: u64,
    call_passes: u64,
    rewritten: Vec<String>,
}

impl Witness {
    /// A reader for the lines of `kind`'s witness keyed with `key`.
    pub(crate) fn new(kind: RunnerKind, key: &str) -> Witness {
        Witness {
            key: key.to_string(),
            kind,
            live: None,
            configured: false,
            collected: None,
            finish: None,
            forged: 0,
            malformed: 0,
            failing: HashSet::new(),
            failing_count: None,
            started: 0,
            call_passes: 0,
            rewritten: Vec::new(),
        }
    }

    /// Reads one line of standard error; true when it was a witness line (the caller keeps
    /// it out of the diagnostics).
    pub(crate) fn line(&mut self, line: &str) -> bool {
        let Some(at) = line.find(PREFIX) else {
            return false;
        };
        let rest = &line[at + PREFIX.len()..];
        let Some((key, body)) = rest.split_once(':') else {
            self.forged += 1;
            return true;
        };
        if key != self.key {
            self.forged += 1;
            return true;
        }
        match serde_json::from_str::<Event>(body) {
            Ok(e) => self.event(e),
            Err(_) => self.malformed += 1,
        }
        true
    }

    fn event(&mut self, e: Event) {
        match e {
            Event::Configure => self.configured = true,
            Event::Collected { n } => self.collected = Some(n),
            Event::Finish {
                exitstatus,
                passed,
                failed,
                started,
                call_passes,
                failing,
            } => {
                self.finish = Some(exitstatus);
                if let (Some(p), Some(f)) = (passed, failed) {
                    self.live = Some((p, f));
                }
                self.started = started.unwrap_or(0);
                self.call_passes = call_passes.unwrap_or(0);
                if let Some(n) = failing {
                    self.failing_count = Some(n);
                }
            }
            // The plugin sends a test only when it failed or a phase that raised passed.
            Event::Test {
                id,
                outcome,
                raised,
            } => match outcome.as_str() {
                "failed" => {
                    self.failing.insert(id);
                }
                "passed" if raised => self.rewritten.push(id),
                _ => {}
            },
        }
    }

    /// Every way the witness disagrees with the report (`parsed`) and the exit, one sentence
    /// each; empty when they agree.
    pub(crate) fn disagreements(&self, exit_code: Option<i32>, report: Counts) -> Vec<String> {
        let mut out = Vec::new();
        if self.forged > 0 {
            out.push(format!(
                "{} line(s) imitating airlock's witness channel carried the wrong key: code in the run wrote them",
                self.forged
            ));
        }
        if self.malformed > 0 {
            out.push(format!(
                "{} witness line(s) did not parse: the channel was written by something other than airlock's plugin",
                self.malformed
            ));
        }
        let runner = self.kind.name();
        if !self.configured {
            out.push(format!(
                "airlock's {runner} witness never reported: it did not load, or its channel was closed"
            ));
            return out;
        }
        let Some(status) = self.finish else {
            out.push(format!(
                "{runner}'s run never finished (no end-of-run record): the process ended early, before {runner}'s own reporting ran"
            ));
            return out;
        };
        for id in self.rewritten.iter().take(3) {
            out.push(format!(
                "`{id}` raised an exception but was reported as passed: a hook rewrote its outcome"
            ));
        }
        if exit_code == Some(0) && status != 0 {
            out.push(format!(
                "the process exited 0 although {runner} ended its run with status {status}"
            ));
        }
        if let Some((passed, failed)) = self.live {
            return self.counted(out, report, passed, failed);
        }
        let sent = self.failing.len() as u64;
        if self.failing_count.is_some_and(|n| n < sent) {
            out.push(format!(
                "{sent} failures were reported as they happened but the end-of-session record counts fewer: the witness was tampered with"
            ));
        }
        let live_failed = self.failing_count.unwrap_or(0).max(sent);
        if report.failed < live_failed {
            out.push(format!(
                "pytest's report shows {} failed but the live results show {live_failed}: the report was rewritten",
                report.failed
            ));
        }
        if report.passed > self.call_passes {
            out.push(format!(
                "pytest's report shows {} passed but only {} tests passed as they ran: the report was rewritten",
                report.passed, self.call_passes
            ));
        }
        let started = self.started;
        if let Some(n) = self.collected
            && status == 0
            && started < n
        {
            out.push(format!(
                "pytest collected {n} tests but only {started} ran, and the session still said it passed"
            ));
        }
        out
    }

    /// The checks for a witness that counted (the reporters): the report may not show fewer
    /// failures, nor (where the report counts tests the same way) more passes.
    fn counted(
        &self,
        mut out: Vec<String>,
        report: Counts,
        passed: u64,
        failed: u64,
    ) -> Vec<String> {
        let runner = self.kind.name();
        if report.failed < failed {
            out.push(format!(
                "{runner}'s report shows {} failed but its run counted {failed}: the report was rewritten",
                report.failed
            ));
        }
        if self.kind != RunnerKind::Node && report.passed > passed {
            out.push(format!(
                "{runner}'s report shows {} passed but its run counted {passed}: the report was rewritten",
                report.passed
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(passed: u64, failed: u64) -> Counts {
        Counts {
            passed,
            failed,
            skipped: 0,
        }
    }

    fn feed(w: &mut Witness, key: &str, events: &[&str]) {
        for e in events {
            assert!(w.line(&format!("@@airlock-witness:{key}:{e}")));
        }
    }

    const HONEST: &[&str] = &[
        r#"{"k":"configure"}"#,
        r#"{"k":"collected","n":2}"#,
        r#"{"k":"test","id":"t.py::b","when":"call","outcome":"failed","raised":true}"#,
        r#"{"k":"finish","exitstatus":1,"started":2,"call_passes":1,"failing":1}"#,
    ];

    #[test]
    fn an_honest_run_agrees() {
        let mut w = Witness::new(RunnerKind::Pytest, "k1");
        feed(&mut w, "k1", HONEST);
        assert!(!w.line("ordinary stderr"));
        assert_eq!(w.disagreements(Some(1), parsed(1, 1)), Vec::<String>::new());
    }

    #[test]
    fn a_rewritten_report_an_early_exit_and_a_forged_line_disagree() {
        let mut w = Witness::new(RunnerKind::Pytest, "k1");
        feed(&mut w, "k1", HONEST);
        let d = w.disagreements(Some(0), parsed(2, 0));
        assert!(d.iter().any(|s| s.contains("exited 0")), "{d:?}");
        assert!(
            d.iter()
                .any(|s| s.contains("1 failed") || s.contains("0 failed")),
            "{d:?}"
        );
        let mut early = Witness::new(RunnerKind::Pytest, "k1");
        feed(&mut early, "k1", &HONEST[..3]);
        let d = early.disagreements(Some(0), parsed(2, 0));
        assert!(d.iter().any(|s| s.contains("never finished")), "{d:?}");
        let mut forged = Witness::new(RunnerKind::Pytest, "k1");
        feed(&mut forged, "k1", HONEST);
        assert!(forged.line(r#"junk @@airlock-witness:guess:{"k":"finish","exitstatus":0}"#));
        let d = forged.disagreements(Some(1), parsed(1, 1));
        assert!(d.iter().any(|s| s.contains("wrong key")), "{d:?}");
    }

    #[test]
    fn a_hook_that_turns_a_raise_into_a_pass_is_named() {
        let mut w = Witness::new(RunnerKind::Pytest, "k");
        feed(
            &mut w,
            "k",
            &[
                r#"{"k":"configure"}"#,
                r#"{"k":"collected","n":1}"#,
                r#"{"k":"test","id":"t.py::a","when":"call","outcome":"passed","raised":true}"#,
                r#"{"k":"finish","exitstatus":0,"started":1,"call_passes":1,"failing":0}"#,
            ],
        );
        let d = w.disagreements(Some(0), parsed(1, 0));
        assert!(d.iter().any(|s| s.contains("`t.py::a` raised")), "{d:?}");
    }

    #[test]
    fn a_reporter_witness_checks_its_counts_and_its_finish() {
        let mut w = Witness::new(RunnerKind::Jest, "k");
        feed(
            &mut w,
            "k",
            &[
                r#"{"k":"configure"}"#,
                r#"{"k":"finish","passed":1,"failed":1,"exitstatus":1}"#,
            ],
        );
        assert!(w.disagreements(Some(1), parsed(1, 1)).is_empty());
        let d = w.disagreements(Some(0), parsed(2, 0));
        assert_eq!(d.len(), 3, "{d:?}");
        let mut early = Witness::new(RunnerKind::Vitest, "k");
        feed(&mut early, "k", &[r#"{"k":"configure"}"#]);
        assert!(early.disagreements(Some(0), parsed(2, 0))[0].contains("never finished"));
    }

    #[test]
    fn no_witness_at_all_is_a_disagreement() {
        let w = Witness::new(RunnerKind::Pytest, "k");
        let d = w.disagreements(Some(0), parsed(3, 0));
        assert_eq!(d.len(), 1, "{d:?}");
    }
}
