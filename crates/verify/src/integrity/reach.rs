//! Does the changed code reach for the test run's machinery? A forged verdict needs one of a
//! few things: to end the process early with success outside a program's own entry point, to
//! write the runner's report or its output format itself, to find the run's descriptors, or to
//! touch airlock's witness. Only the text the change adds is read (new or changed items of
//! Python, Rust and Go; added lines elsewhere), so an ordinary fix is never judged by what
//! the file already held.

use super::items;

/// A construct that reaches for the run's machinery, and what it is.
struct Reach {
    needle: &'static str,
    what: &'static str,
    /// Allowed inside a program's own entry point (`main`).
    entry_ok: bool,
}

const fn r(needle: &'static str, what: &'static str, entry_ok: bool) -> Reach {
    Reach {
        needle,
        what,
        entry_ok,
    }
}

const COMMON: &[Reach] = &[
    r("/proc/self/fd", "the process's own descriptors", false),
    r("/dev/fd/", "the process's own descriptors", false),
    r("airlock-witness", "airlock's witness channel", false),
    r("airlock_witness", "airlock's witness plugin", false),
    r("AIRLOCK_WITNESS", "airlock's witness channel", false),
    r(".airlock-verify", "airlock's report directory", false),
    r("<testsuite", "a test report's format (JUnit)", false),
    r("<testcase", "a test report's format (JUnit)", false),
];

const PYTHON: &[Reach] = &[
    r("os._exit(", "an immediate process exit", true),
    r("os.kill(", "a signal to a process", true),
    r("os.abort(", "a process abort", true),
    r("os.dup2(", "descriptor rewiring", false),
    r("junitxml", "pytest's report path", false),
    r("_pytest.junitxml", "pytest's report internals", false),
    r("_pytest.terminal", "pytest's reporting internals", false),
    r("_pytest.reports", "pytest's reporting internals", false),
    r("_pytest.runner", "pytest's run internals", false),
    r("pluginmanager", "pytest's plugin manager", false),
    r("pytest_runtest_", "a pytest run hook", false),
    r("pytest_report_", "a pytest report hook", false),
    r("pytest_terminal_summary", "a pytest report hook", false),
    r("pytest_sessionfinish", "a pytest session hook", false),
    r(
        "atexit.register",
        "code run after the runner finishes",
        true,
    ),
];

const RUST: &[Reach] = &[
    r("process::exit(", "a process exit", true),
    r("process::abort(", "a process abort", true),
    r("libc::_exit", "an immediate process exit", false),
    r("libc::exit", "a process exit", false),
    r("libc::kill", "a signal to a process", false),
    r("libc::raise", "a signal to the process", false),
    r("libc::dup2", "descriptor rewiring", false),
    r("from_raw_fd(", "a raw descriptor", false),
    r("test result:", "libtest's summary format", false),
    r("--logfile", "libtest's log channel", false),
    r("/dev/stderr", "the run's log channel", false),
    r("#[ctor", "code run before main", false),
    r("link_section", "code placed in start-up sections", false),
    r(".init_array", "code run before main", false),
];

const GO: &[Reach] = &[
    r("os.Exit(", "a process exit", true),
    r("syscall.Exit(", "an immediate process exit", false),
    r("syscall.Kill(", "a signal to a process", false),
    r("unix.Exit(", "an immediate process exit", false),
    r("--- PASS", "go test's result format", false),
    r("\"Action\":", "go test's JSON event format", false),
    r("testing.MainStart", "the test runner's internals", false),
];

const JS: &[Reach] = &[
    r("process.exit(", "a process exit", true),
    r("process.reallyExit", "a process exit", false),
    r("process.kill(", "a signal to a process", true),
    r("process.abort(", "a process abort", true),
    r("numFailedTests", "jest's report format", false),
    r("numPassedTests", "jest's report format", false),
    r("outputFile", "the runner's report path", false),
    r("testResults", "the runner's report format", false),
];

fn rules(rel: &str) -> &'static [Reach] {
    let ext = rel.rsplit_once('.').map_or("", |(_, e)| e);
    match ext {
        "py" => PYTHON,
        "rs" => RUST,
        "go" => GO,
        "js" | "jsx" | "ts" | "tsx" | "mjs" | "cjs" | "mts" | "cts" => JS,
        _ => &[],
    }
}

/// The pieces of `new` the change added, each with whether it is a program's entry point.
fn added(rel: &str, old: Option<&[u8]>, new: &[u8]) -> Vec<(String, bool)> {
    let n = String::from_utf8_lossy(new);
    let o = old.map(String::from_utf8_lossy);
    let ext = rel.rsplit_once('.').map_or("", |(_, e)| e);
    let split = |text: &str| -> Vec<String> {
        match ext {
            "py" => items::python(text).into_iter().map(|i| i.text).collect(),
            "rs" => items::braces(text, false),
            "go" => items::braces(text, true),
            _ => text.lines().map(str::to_string).collect(),
        }
    };
    let mut base: Vec<String> = o.as_deref().map(split).unwrap_or_default();
    let mut out = Vec::new();
    for piece in split(&n) {
        if let Some(k) = base.iter().position(|b| *b == piece) {
            base.swap_remove(k);
            continue;
        }
        let head = piece.trim_start();
        let entry = head.starts_with("fn main")
            || head.starts_with("pub fn main")
            || head.starts_with("async fn main")
            || head.contains("fn main()")
            || head.starts_with("func main(")
            || head.starts_with("if __name__ == \"__main__\"")
            || head.starts_with("if __name__ == '__main__'")
            || head.starts_with("def main(");
        out.push((piece, entry));
    }
    out
}

/// One sentence per kind of reach the change adds to `rel` (empty: none).
pub(crate) fn scan(rel: &str, old: Option<&[u8]>, new: &[u8]) -> Vec<String> {
    let specific = rules(rel);
    if specific.is_empty()
        && !matches!(
            rel.rsplit_once('.').map(|x| x.1),
            Some("sh" | "toml" | "cfg" | "ini" | "json")
        )
    {
        return Vec::new();
    }
    let mut out: Vec<String> = Vec::new();
    for (piece, entry) in added(rel, old, new) {
        for rule in COMMON.iter().chain(specific) {
            if entry && rule.entry_ok {
                continue;
            }
            if piece.contains(rule.needle) {
                let s = format!("`{rel}` adds {} (`{}`)", rule.what, rule.needle);
                if !out.contains(&s) {
                    out.push(s);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forging_constructs_are_found_in_added_code_only() {
        let old = b"import os\n\ndef add(a, b):\n    return a + b\n";
        let forged =
            b"import os\n\ndef add(a, b):\n    return a + b\n\ndef test_zz():\n    os._exit(0)\n";
        assert_eq!(scan("test_x.py", Some(old), forged).len(), 1);
        let main = b"import os\n\nif __name__ == \"__main__\":\n    os._exit(0)\n";
        assert!(scan("tool.py", None, main).is_empty());
        // Already there on the base: not the change's doing.
        assert!(scan("test_x.py", Some(forged), forged).is_empty());
        let rs = b"#[test]\nfn a() { println!(\"test result: ok. 3 passed\"); std::process::exit(0); }\n";
        assert_eq!(
            scan("src/lib.rs", None, rs).len(),
            2,
            "{:?}",
            scan("src/lib.rs", None, rs)
        );
        let bin = b"fn main() { std::process::exit(run()); }\n";
        assert!(scan("src/main.rs", None, bin).is_empty());
        let js = b"test('x', () => { process.exit(0) })\n";
        assert_eq!(scan("a.test.js", None, js).len(), 1);
        assert!(scan("README.md", None, b"process.exit(0)").is_empty());
    }
}
