//! The pytest witness: airlock's own plugin (`airlock_witness.py`, loaded with
//! `-p airlock_witness`) streams pytest's decisions test by test on a duplicate of the
//! standard error taken before any test code is imported, each line keyed with a secret
//! that only the plugin holds. [`PytestWitness`] reads that stream back and names every way
//! it disagrees with pytest's report and with how the process ended.

use std::collections::HashSet;

use serde::Deserialize;

use crate::adapter::Parsed;

/// The plugin's source, written next to the run for `-p airlock_witness`.
pub(crate) const PLUGIN: &str = include_str!("airlock_witness.py");
/// The module name pytest loads.
pub(crate) const MODULE: &str = "airlock_witness";
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
        when: String,
        outcome: String,
        #[serde(default)]
        raised: bool,
    },
    Finish {
        exitstatus: i64,
    },
}

/// What the witness saw of one run.
#[derive(Debug)]
pub(crate) struct PytestWitness {
    key: String,
    configured: bool,
    collected: Option<u64>,
    finish: Option<i64>,
    forged: u64,
    malformed: u64,
    started: HashSet<String>,
    failing: HashSet<String>,
    call_passes: u64,
    rewritten: Vec<String>,
}

impl PytestWitness {
    /// A reader for the lines keyed with `key`.
    pub(crate) fn new(key: &str) -> PytestWitness {
        PytestWitness {
            key: key.to_string(),
            configured: false,
            collected: None,
            finish: None,
            forged: 0,
            malformed: 0,
            started: HashSet::new(),
            failing: HashSet::new(),
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
            Event::Finish { exitstatus } => self.finish = Some(exitstatus),
            Event::Test {
                id,
                when,
                outcome,
                raised,
            } => {
                if when == "setup" {
                    self.started.insert(id.clone());
                }
                match outcome.as_str() {
                    "failed" => {
                        self.failing.insert(id);
                    }
                    "passed" if raised => self.rewritten.push(id),
                    "passed" if when == "call" => self.call_passes += 1,
                    _ => {}
                }
            }
        }
    }

    /// Every way the witness disagrees with the report (`parsed`) and the exit, one sentence
    /// each; empty when they agree.
    pub(crate) fn disagreements(&self, exit_code: Option<i32>, parsed: &Parsed) -> Vec<String> {
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
        if !self.configured {
            out.push(
                "airlock's pytest witness never reported: the plugin did not load, or its channel was closed"
                    .into(),
            );
            return out;
        }
        let Some(status) = self.finish else {
            out.push(
                "pytest's session never finished (no end-of-session record): the process ended early, before pytest's own reporting ran"
                    .into(),
            );
            return out;
        };
        for id in self.rewritten.iter().take(3) {
            out.push(format!(
                "`{id}` raised an exception but was reported as passed: a hook rewrote its outcome"
            ));
        }
        if exit_code == Some(0) && status != 0 {
            out.push(format!(
                "the process exited 0 although pytest ended its session with status {status}"
            ));
        }
        let live_failed = self.failing.len() as u64;
        if parsed.counts.failed < live_failed {
            out.push(format!(
                "pytest's report shows {} failed but the live results show {live_failed}: the report was rewritten",
                parsed.counts.failed
            ));
        }
        if parsed.counts.passed > self.call_passes {
            out.push(format!(
                "pytest's report shows {} passed but only {} tests passed as they ran: the report was rewritten",
                parsed.counts.passed, self.call_passes
            ));
        }
        if let Some(n) = self.collected
            && status == 0
            && (self.started.len() as u64) < n
        {
            out.push(format!(
                "pytest collected {n} tests but only {} ran, and the session still said it passed",
                self.started.len()
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Counts;

    fn parsed(passed: u64, failed: u64) -> Parsed {
        Parsed {
            counts: Counts {
                passed,
                failed,
                skipped: 0,
            },
            counts_known: true,
            ..Parsed::default()
        }
    }

    fn feed(w: &mut PytestWitness, key: &str, events: &[&str]) {
        for e in events {
            assert!(w.line(&format!("@@airlock-witness:{key}:{e}")));
        }
    }

    const HONEST: &[&str] = &[
        r#"{"k":"configure"}"#,
        r#"{"k":"collected","n":2}"#,
        r#"{"k":"test","id":"t.py::a","when":"setup","outcome":"passed","raised":false}"#,
        r#"{"k":"test","id":"t.py::a","when":"call","outcome":"passed","raised":false}"#,
        r#"{"k":"test","id":"t.py::b","when":"setup","outcome":"passed","raised":false}"#,
        r#"{"k":"test","id":"t.py::b","when":"call","outcome":"failed","raised":true}"#,
        r#"{"k":"finish","exitstatus":1}"#,
    ];

    #[test]
    fn an_honest_run_agrees() {
        let mut w = PytestWitness::new("k1");
        feed(&mut w, "k1", HONEST);
        assert!(!w.line("ordinary stderr"));
        assert_eq!(
            w.disagreements(Some(1), &parsed(1, 1)),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_rewritten_report_an_early_exit_and_a_forged_line_disagree() {
        let mut w = PytestWitness::new("k1");
        feed(&mut w, "k1", HONEST);
        let d = w.disagreements(Some(0), &parsed(2, 0));
        assert!(d.iter().any(|s| s.contains("exited 0")), "{d:?}");
        assert!(
            d.iter()
                .any(|s| s.contains("1 failed") || s.contains("0 failed")),
            "{d:?}"
        );
        let mut early = PytestWitness::new("k1");
        feed(&mut early, "k1", &HONEST[..4]);
        let d = early.disagreements(Some(0), &parsed(2, 0));
        assert!(d.iter().any(|s| s.contains("never finished")), "{d:?}");
        let mut forged = PytestWitness::new("k1");
        feed(&mut forged, "k1", HONEST);
        assert!(forged.line(r#"junk @@airlock-witness:guess:{"k":"finish","exitstatus":0}"#));
        let d = forged.disagreements(Some(1), &parsed(1, 1));
        assert!(d.iter().any(|s| s.contains("wrong key")), "{d:?}");
    }

    #[test]
    fn a_hook_that_turns_a_raise_into_a_pass_is_named() {
        let mut w = PytestWitness::new("k");
        feed(
            &mut w,
            "k",
            &[
                r#"{"k":"configure"}"#,
                r#"{"k":"collected","n":1}"#,
                r#"{"k":"test","id":"t.py::a","when":"setup","outcome":"passed","raised":false}"#,
                r#"{"k":"test","id":"t.py::a","when":"call","outcome":"passed","raised":true}"#,
                r#"{"k":"finish","exitstatus":0}"#,
            ],
        );
        let d = w.disagreements(Some(0), &parsed(1, 0));
        assert!(d.iter().any(|s| s.contains("`t.py::a` raised")), "{d:?}");
    }

    #[test]
    fn no_witness_at_all_is_a_disagreement() {
        let w = PytestWitness::new("k");
        let d = w.disagreements(Some(0), &parsed(3, 0));
        assert_eq!(d.len(), 1, "{d:?}");
    }
}
