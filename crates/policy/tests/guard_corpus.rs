//! The guard against its corpora: every line's verdict and, for denials, its rule family.
//! `guard.jsonl` is the project corpus; `guard_cases.jsonl` covers each construct the guard
//! parses and normalises; `guard_redteam.jsonl` holds held-out-style variants of every family
//! and benign look-alikes.

use airlock_policy::Ruling;
use airlock_policy::guard::evaluate;
use serde::Deserialize;

#[derive(Deserialize)]
struct Case {
    cmd: String,
    expect: String,
    family: String,
}

fn check_file(name: &str) {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut failures = Vec::new();
    let mut count = 0;
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let case: Case =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{name}:{}: {e}", n + 1));
        count += 1;
        let report = evaluate(&case.cmd);
        let got_verdict = match report.decision.decision {
            Ruling::Allow => "allow",
            Ruling::Deny => "deny",
            Ruling::Ask => "ask",
        };
        let ok = got_verdict == case.expect
            && (case.expect != "deny" || report.decision.rule == case.family);
        if !ok {
            failures.push(format!(
                "{name}:{}: {:?}: expected {} {}, got {} {} ({}) [normalized: {}]",
                n + 1,
                case.cmd,
                case.expect,
                case.family,
                got_verdict,
                report.decision.rule,
                report.decision.reason,
                report.normalized
            ));
        }
    }
    assert!(count > 0, "{name} is empty");
    assert!(
        failures.is_empty(),
        "{} of {count} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn project_corpus_at_100_percent() {
    check_file("guard.jsonl");
}

#[test]
fn construct_cases_at_100_percent() {
    check_file("guard_cases.jsonl");
}

// The guard against red-team cases: variant spellings of each dangerous family and the
// benign look-alikes a developer types every day. Every line must get its expected verdict
// and, for denials, its rule family.
//
// Choices made for cases a reviewer could read either way:
// - `git clean -f` without `-x`/`-d` is allowed: it removes untracked files only, and the
//   rule names the forced clean *with* `-x`/`-d`.
// - `rm -f .git/index.lock`, `rm -rf .git/hooks/…`, `.git/rebase-merge` are maintenance and
//   allowed; `.git` itself, `.git/*`, `objects`, `refs`, `HEAD`, `packed-refs`, `logs` are
//   the history and denied.
// - `eval "$(pyenv init -)"`, `source <(kubectl completion bash)` run code the guard cannot
//   see: denied as `dynamic_command`, like any other generated code.
// - `compgen -v`/`-e`/`-A variable` enumerate the environment: `env_dump`.
// - Uploads to the loopback host (curl, wget, HTTPie `:3000`, `nc localhost`) stay local and
//   are allowed.
// - File contents reaching a URL through a variable or a loop (`for l in $(cat f); do curl
//   …/$l`) are exfiltration whatever the file is named; so is `xargs -a FILE curl …`.
// - A download on an interpreter's standard input is `remote_exec` even with `-c` code.
// - Inline code that forks in a loop is `destruction` (a fork bomb); inline code that opens a
//   connection and reads files or the environment is `exfiltration`.
// - `rsync --delete` into the root, home or workspace is `destruction`.
// - `env $(cat .env | xargs) npm start`: the words after `env` could be assignments or the
//   command itself, known only at run time: `dynamic_command`. `export $(cat .env | xargs)`
//   only sets variables and is allowed.
// - Lines of a file turned into URLs (`while read -r url; do curl -O "$url"; done < urls.txt`)
//   are exfiltration: the guard cannot tell a list of URLs from `.env`. `wget -i urls.txt`
//   reads the file itself and is allowed.
// - `select` is not parsed by the shell parser the guard uses: it fails closed
//   (`unparseable`), as anything the guard cannot read must.
#[test]
fn redteam_cases_at_100_percent() {
    check_file("guard_redteam.jsonl");
}
