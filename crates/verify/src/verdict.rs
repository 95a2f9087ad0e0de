//! The verdict rules, as a pure function of what a run produced.
//!
//! - `timeout` when the run was killed by its timeout; `error` when cancelled.
//! - `failed` when a test failed or the code did not compile / a test file did not parse
//!   (compile and syntax errors are the patch's fault, so the model is told to fix them; their
//!   diagnostics are in `failures` with `"kind": "compile"`).
//! - With a baseline, failures that also fail on the unchanged base are `pre_existing`; if every
//!   failure is pre-existing and at least one test passed, the verdict is `passed`: an old red
//!   test neither hides nor blocks a good patch.
//! - `error` for a crash (signal, OOM kill), a missing runner, or a report the runner did not
//!   write.
//! - `no_tests` when no test ran (a run that executed no test never passes), including any
//!   command whose output shows no recognisable test count.
//! - `failed` when the command exited non-zero although no test failed.
//! - `passed` only when the command exited 0, at least one test ran and none failed.

use crate::model::{Counts, Verdict};

/// Everything the verdict depends on.
#[derive(Debug, Clone, Default)]
pub struct RunFacts {
    /// Exit code, if the process exited.
    pub exit_code: Option<i32>,
    /// Terminating signal, if killed.
    pub signal: Option<i32>,
    /// Killed by the timeout.
    pub timed_out: bool,
    /// Timeout in seconds (for the reason text).
    pub timeout_secs: u64,
    /// Stopped by the cancel flag.
    pub cancelled: bool,
    /// Counts from the report or summary lines.
    pub counts: Counts,
    /// Whether any count was recognised.
    pub counts_known: bool,
    /// The expected report was missing or unreadable, and why.
    pub report_problem: Option<String>,
    /// The runner said it found no tests.
    pub said_no_tests: bool,
    /// Test-kind failures seen.
    pub test_failures: u64,
    /// Compile-kind failures seen.
    pub compile_failures: u64,
    /// Failures (of either kind) not marked pre-existing.
    pub new_failures: u64,
    /// A baseline was compared.
    pub baseline_used: bool,
    /// The resource ceiling the run hit, if any.
    pub ceiling: Option<airlock_sandbox::Ceiling>,
}

/// The verdict and, when it is not self-explanatory, one sentence saying why.
pub fn decide(f: &RunFacts) -> (Verdict, Option<String>) {
    if f.cancelled {
        return (Verdict::Error, Some("the run was cancelled".into()));
    }
    if f.timed_out {
        return (
            Verdict::Timeout,
            Some(format!(
                "no result within {} s; the whole process tree was killed",
                f.timeout_secs
            )),
        );
    }
    if let Some(c) = f.ceiling {
        let flag = match c {
            airlock_sandbox::Ceiling::Memory => "--memory BYTES",
            airlock_sandbox::Ceiling::Cpu => "--cpu-secs N",
            airlock_sandbox::Ceiling::Disk => "--disk BYTES",
        };
        return (
            Verdict::Error,
            Some(format!(
                "the run hit its {} ceiling (the operator can raise it with `airlock verify {flag}`)",
                c.name()
            )),
        );
    }
    let seen = f.test_failures + f.compile_failures;
    if f.baseline_used
        && seen > 0
        && f.new_failures == 0
        && f.test_failures >= f.counts.failed
        && f.counts.passed > 0
    {
        return (
            Verdict::Passed,
            Some("every failure also fails on the unchanged base (pre-existing)".into()),
        );
    }
    if f.compile_failures > 0 {
        return (
            Verdict::Failed,
            Some("the code does not compile or a test file does not parse".into()),
        );
    }
    if f.test_failures > 0 || f.counts.failed > 0 {
        return (Verdict::Failed, None);
    }
    if let Some(sig) = f.signal {
        let hint = if sig == 9 { " (out of memory?)" } else { "" };
        return (
            Verdict::Error,
            Some(format!("the runner was killed by signal {sig}{hint}")),
        );
    }
    if f.exit_code == Some(127) && !f.counts_known {
        return (
            Verdict::Error,
            Some("the test runner was not found (exit 127); is it installed?".into()),
        );
    }
    if let Some(problem) = &f.report_problem
        && !f.counts_known
    {
        let exit = f
            .exit_code
            .map(|c| format!("exited {c}"))
            .unwrap_or_else(|| "ended".into());
        return (
            Verdict::Error,
            Some(format!("the runner {exit} and {problem}")),
        );
    }
    if f.counts.ran() == 0 {
        if !f.counts_known && f.exit_code != Some(0) {
            return (
                Verdict::Failed,
                Some(format!(
                    "the command exited {} and no test count was recognised",
                    f.exit_code.unwrap_or(-1)
                )),
            );
        }
        if f.exit_code == Some(0) || f.said_no_tests {
            let why = if f.counts_known {
                "no test ran"
            } else {
                "no test count was recognised in the output, so no test is known to have run"
            };
            return (Verdict::NoTests, Some(why.into()));
        }
        return (
            Verdict::Error,
            Some(format!(
                "the runner exited {} without running a test",
                f.exit_code.unwrap_or(-1)
            )),
        );
    }
    if f.exit_code != Some(0) {
        return (
            Verdict::Failed,
            Some(format!(
                "the command exited {} although no test failed",
                f.exit_code.unwrap_or(-1)
            )),
        );
    }
    (Verdict::Passed, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ran(passed: u64, failed: u64) -> RunFacts {
        RunFacts {
            exit_code: Some(if failed > 0 { 1 } else { 0 }),
            counts: Counts {
                passed,
                failed,
                skipped: 0,
            },
            counts_known: true,
            test_failures: failed,
            new_failures: failed,
            ..RunFacts::default()
        }
    }

    #[test]
    fn the_rules() {
        assert_eq!(decide(&ran(3, 0)).0, Verdict::Passed);
        assert_eq!(decide(&ran(3, 1)).0, Verdict::Failed);
        assert_eq!(decide(&ran(0, 0)).0, Verdict::NoTests);
        let mut timed = ran(1, 0);
        timed.timed_out = true;
        assert_eq!(decide(&timed).0, Verdict::Timeout);
        let mut killed = ran(0, 0);
        killed.exit_code = None;
        killed.signal = Some(9);
        assert_eq!(decide(&killed).0, Verdict::Error);
        let mut missing = RunFacts {
            exit_code: Some(127),
            ..RunFacts::default()
        };
        assert_eq!(decide(&missing).0, Verdict::Error);
        missing.exit_code = Some(1);
        missing.report_problem = Some("wrote no report".into());
        assert_eq!(decide(&missing).0, Verdict::Error);
        let mut nonzero = ran(2, 0);
        nonzero.exit_code = Some(1);
        assert_eq!(decide(&nonzero).0, Verdict::Failed);
        let mut compile = ran(0, 0);
        compile.compile_failures = 1;
        compile.new_failures = 1;
        compile.exit_code = Some(101);
        assert_eq!(decide(&compile).0, Verdict::Failed);
    }

    #[test]
    fn unknown_counts_never_pass() {
        let f = RunFacts {
            exit_code: Some(0),
            ..RunFacts::default()
        };
        assert_eq!(decide(&f).0, Verdict::NoTests);
        let f = RunFacts {
            exit_code: Some(2),
            ..RunFacts::default()
        };
        assert_eq!(decide(&f).0, Verdict::Failed);
    }

    #[test]
    fn pre_existing_failures_do_not_block() {
        let mut f = ran(3, 1);
        f.baseline_used = true;
        f.new_failures = 0;
        assert_eq!(decide(&f).0, Verdict::Passed);
        f.new_failures = 1;
        assert_eq!(decide(&f).0, Verdict::Failed);
        // Without a passing test, pre-existing failures do not make a pass.
        let mut g = ran(0, 1);
        g.baseline_used = true;
        g.new_failures = 0;
        assert_eq!(decide(&g).0, Verdict::Failed);
    }
}
