//! The libtest ledger: a second, independent account of a `cargo test` run. Each test binary
//! is asked for its log on standard error (`--logfile /dev/stderr`: libtest writes one line per
//! test as it completes), while its human report goes to standard output. cargo announces each
//! binary on standard error (`Running …`, `Doc-tests …`). The ledger pairs the k-th binary cargo
//! started with the k-th `running N tests` section and the k-th log segment, and names every
//! way they disagree: a section with no summary or two, a summary whose counts do not add up
//! to the announced count, tests the summary counts that the log never saw complete, binaries
//! that reported nothing. A test that prints libtest's lines itself and exits early fails here.

use std::path::{Path, PathBuf};

/// The argument that asks libtest for its per-test log on standard error.
pub(crate) const LOGFILE_ARGS: [&str; 2] = ["--logfile", "/dev/stderr"];

/// What libtest's deprecation notice for `--logfile` looks like (written without a newline,
/// so the first log line follows it on the same line).
const DEPRECATED: &str = "warning: `--logfile` is deprecated";

/// True when a `Cargo.toml` of the workspace (or the staged layers) declares a target with
/// its own harness (`harness = false`): such a binary may not accept libtest's options.
/// Looks at most four directories deep, skipping build outputs and installed packages.
pub(crate) fn custom_harness(workspace: &Path, layers: &[PathBuf]) -> bool {
    fn walk(dir: &Path, depth: usize, budget: &mut usize) -> bool {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return false;
        };
        for e in entries.flatten() {
            if *budget == 0 {
                return false;
            }
            *budget -= 1;
            let name = e.file_name();
            let name = name.to_string_lossy();
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                let skip = name.starts_with('.')
                    || matches!(name.as_ref(), "target" | "node_modules" | "vendor");
                if !skip && depth < 4 && walk(&e.path(), depth + 1, budget) {
                    return true;
                }
            } else if name == "Cargo.toml"
                && std::fs::read_to_string(e.path()).is_ok_and(|t| {
                    t.lines().any(|l| {
                        let l: String = l.chars().filter(|c| !c.is_whitespace()).collect();
                        l.starts_with("harness=false")
                    })
                })
            {
                return true;
            }
        }
        false
    }
    let mut budget = 20_000;
    std::iter::once(workspace)
        .chain(layers.iter().map(PathBuf::as_path))
        .any(|root| walk(root, 0, &mut budget))
}

#[derive(Debug, Default, Clone)]
struct Section {
    announced: u64,
    results: Vec<[u64; 4]>,
}

#[derive(Debug, Default, Clone)]
struct Segment {
    ok: u64,
    failed: u64,
    ignored: u64,
}

/// Reads both streams of one `cargo test` run.
#[derive(Debug, Default)]
pub(crate) struct LibtestLedger {
    sections: Vec<Section>,
    stray_results: u64,
    segments: Vec<Segment>,
    stray_logs: u64,
}

fn parse_result(line: &str) -> Option<[u64; 4]> {
    let rest = line.strip_prefix("test result: ")?;
    let (_, counts) = rest.split_once(". ")?;
    let mut out = [0u64; 4];
    for (i, label) in ["passed", "failed", "ignored", "measured"]
        .iter()
        .enumerate()
    {
        let part = counts
            .split(';')
            .map(str::trim)
            .find(|p| p.ends_with(label))?;
        out[i] = part.split_whitespace().next()?.parse().ok()?;
    }
    Some(out)
}

impl LibtestLedger {
    /// One line of standard output.
    pub(crate) fn stdout_line(&mut self, line: &str) {
        if let Some(rest) = line.strip_prefix("running ")
            && let Some(n) = rest
                .strip_suffix(" tests")
                .or_else(|| rest.strip_suffix(" test"))
            && let Ok(n) = n.parse()
        {
            self.sections.push(Section {
                announced: n,
                results: Vec::new(),
            });
            return;
        }
        if line.starts_with("test result: ")
            && let Some(r) = parse_result(line)
        {
            match self.sections.last_mut() {
                Some(s) => s.results.push(r),
                None => self.stray_results += 1,
            }
        }
    }

    /// One line of standard error.
    pub(crate) fn stderr_line(&mut self, line: &str) {
        let mut line = line;
        while let Some(rest) = line.strip_prefix(DEPRECATED) {
            line = rest;
        }
        let trimmed = line.trim_start();
        if trimmed.starts_with("Running ") || trimmed.starts_with("Doc-tests ") {
            self.segments.push(Segment::default());
            return;
        }
        let kind = if line.starts_with("ok ") {
            0
        } else if line.starts_with("failed ") {
            1
        } else if line.starts_with("ignored ") {
            2
        } else {
            return;
        };
        let Some(seg) = self.segments.last_mut() else {
            self.stray_logs += 1;
            return;
        };
        match kind {
            0 => seg.ok += 1,
            1 => seg.failed += 1,
            _ => seg.ignored += 1,
        }
    }

    /// Every disagreement, one sentence each; empty when the accounts agree. `exit_code` is
    /// how `cargo test` ended.
    pub(crate) fn disagreements(&self, exit_code: Option<i32>) -> Vec<String> {
        let mut out = Vec::new();
        if self.stray_results > 0 || self.stray_logs > 0 {
            out.push("libtest lines appeared outside any test binary's run".to_string());
        }
        if self.sections.len() != self.segments.len() {
            out.push(format!(
                "cargo started {} test binaries but {} reported a run",
                self.segments.len(),
                self.sections.len()
            ));
        }
        let mut any_failed = false;
        for (i, s) in self.sections.iter().enumerate() {
            let n = i + 1;
            let [p, f, ig, m] = match s.results.as_slice() {
                [one] => *one,
                [] => {
                    out.push(format!(
                        "test binary {n} announced {} tests and never summarised them: it ended early",
                        s.announced
                    ));
                    continue;
                }
                more => {
                    out.push(format!(
                        "test binary {n} printed {} summaries for one run",
                        more.len()
                    ));
                    continue;
                }
            };
            any_failed |= f > 0;
            if p + f + ig + m != s.announced {
                out.push(format!(
                    "test binary {n} announced {} tests but its summary counts {}",
                    s.announced,
                    p + f + ig + m
                ));
            }
            if let Some(seg) = self.segments.get(i)
                && (seg.ok != p + m || seg.failed != f || seg.ignored != ig)
            {
                out.push(format!(
                    "test binary {n}'s summary says {p} passed, {f} failed, {ig} ignored, but libtest logged {} passed, {} failed, {} ignored as the tests ran",
                    seg.ok, seg.failed, seg.ignored
                ));
            }
        }
        if any_failed && exit_code == Some(0) {
            out.push("a test binary reported failures but cargo exited 0".to_string());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(stdout: &str, stderr: &str) -> LibtestLedger {
        let mut l = LibtestLedger::default();
        stdout.lines().for_each(|x| l.stdout_line(x));
        stderr.lines().for_each(|x| l.stderr_line(x));
        l
    }

    const OUT: &str = "\nrunning 3 tests\ntest tests::ign ... ignored\ntest tests::adds ... ok\ntest tests::sp - should panic ... ok\n\ntest result: ok. 2 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.08s\n\nrunning 1 test\ntest src/lib.rs - doc (line 8) ... ok\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n";
    const ERR: &str = "    Finished `test` profile\n     Running unittests src/lib.rs (target/debug/deps/lt-1)\nwarning: `--logfile` is deprecatedignored tests::ign\nok tests::adds\nok tests::sp\n   Doc-tests lt\nwarning: `--logfile` is deprecatedok src/lib.rs - doc (line 8)\nwarning: `--logfile` is deprecated\n";

    #[test]
    fn a_real_run_agrees() {
        assert_eq!(
            ledger(OUT, ERR).disagreements(Some(0)),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_forged_summary_after_an_early_exit_disagrees() {
        // The test printed libtest's lines itself and exited 0 before the others completed.
        let out = "running 3 tests\ntest tests::adds ... ok\ntest tests::a_forge ... ok\ntest tests::other ... ok\n\ntest result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n";
        let err = "     Running unittests src/lib.rs (x)\nok tests::other\n";
        let d = ledger(out, err).disagreements(Some(0));
        assert!(d.iter().any(|s| s.contains("logged 1 passed")), "{d:?}");
    }

    #[test]
    fn a_silent_binary_and_a_second_summary_disagree() {
        let err = "     Running unittests src/lib.rs (x)\nok a\n     Running tests/t.rs (y)\n";
        let out = "running 1 test\ntest a ... ok\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n";
        let d = ledger(out, err).disagreements(Some(0));
        assert!(
            d.iter().any(|s| s.contains("2 test binaries but 1")),
            "{d:?}"
        );
        let twice = format!(
            "{out}test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n"
        );
        let d = ledger(&twice, "     Running x\nok a\n").disagreements(Some(0));
        assert!(d.iter().any(|s| s.contains("2 summaries")), "{d:?}");
        let short = "running 2 tests\n";
        let d = ledger(short, "     Running x\nok a\n").disagreements(Some(0));
        assert!(d.iter().any(|s| s.contains("never summarised")), "{d:?}");
    }

    #[test]
    fn failures_with_a_zero_exit_disagree() {
        let out = "running 1 test\ntest a ... FAILED\ntest result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out\n";
        let d = ledger(out, "     Running x\nfailed a\n").disagreements(Some(0));
        assert!(d.iter().any(|s| s.contains("exited 0")), "{d:?}");
        assert!(
            ledger(out, "     Running x\nfailed a\n")
                .disagreements(Some(101))
                .is_empty()
        );
    }
}
