//! `run_verification`: detect, plan, run in a fresh sandbox, parse, sanitise, decide.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::adapter::cargo::CargoParser;
use crate::adapter::generic::GenericParser;
use crate::adapter::gotest::GoParser;
use crate::adapter::impacted::{self, Related, Selection};
use crate::adapter::node::LoadErrors;
use crate::adapter::{self, FailureSink, Parsed, Plan, REPORT_DIR, ReportFormat};
use crate::detect::{DirSource, FileSource};
use crate::error::VerifyError;
use crate::model::{
    BaseReport, Counts, Failure, FailureKind, ImpactedMode, ImpactedReport, ImpactedStatus,
    RunnerKind, Scope, Verdict, VerdictReport,
};
use crate::runner::{CommandRunner, RunOutput, RunRequest};
use crate::sanitize::{DEFAULT_BUDGET, Locator, Sanitizer, Tail};
use crate::verdict::{RunFacts, decide};

/// Default timeout: 300 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// Most failure identities remembered from a baseline run.
const MAX_BASELINE_IDENTITIES: usize = 10_000;
/// Bytes of output tail kept per stream for crash diagnostics.
const TAIL_BYTES: usize = 1536;

/// How to verify.
#[derive(Debug, Clone)]
pub struct VerifyOptions {
    /// Wall-clock limit of one run (default 300 s).
    pub timeout: Duration,
    /// The runner; `None` detects it (or uses `command` when one is given).
    pub runner: Option<RunnerKind>,
    /// An explicit test command (`airlock verify -- CMD`).
    pub command: Option<Vec<String>>,
    /// Diagnostics budget in bytes (default 4 KiB).
    pub budget_bytes: usize,
    /// Run only these tests (full ids, see [`crate::Failure::id`]); empty: the whole suite.
    /// Such a run says nothing about the other tests: the caller must treat its verdict as
    /// advisory.
    pub only: Vec<String>,
    /// Run the tests related to the changed files: only them (advisory, like `only`), or
    /// first and then the whole suite (see [`ImpactedMode`]). Not with `only`.
    pub impacted: ImpactedMode,
    /// Also run the tests on the unchanged base and mark failures that already existed.
    pub baseline: bool,
    /// Toolchain paths under `$HOME` to expose read-only (the caller's allow-list, e.g.
    /// `~/.cargo/bin`, `~/.rustup/toolchains`).
    pub home_binds: Vec<PathBuf>,
    /// Paths the tests must not see (see `SandboxSpec::masked`): sensitive workspace files
    /// (relative) and credential files inside the exposed home paths (absolute). airlock's own
    /// `.airlock` state is always masked.
    pub masked: Vec<PathBuf>,
    /// Other host paths to expose read-only at the same path.
    pub ro_binds: Vec<PathBuf>,
    /// The workspace's build and test caches, bound writable (see `SandboxSpec::cache_binds`).
    pub cache_binds: Vec<airlock_sandbox::CacheBind>,
    /// Extra environment for the runner (PATH defaults to the caller's).
    pub env: Vec<(String, String)>,
    /// Set to true to stop a run early.
    pub cancel: Option<Arc<AtomicBool>>,
    /// Accept the degraded backend (no kernel isolation) when namespaces are unavailable.
    pub allow_degraded: bool,
    /// Memory ceiling of a run in bytes (none: the sandbox's default).
    pub memory: Option<u64>,
    /// CPU-time ceiling of a run in seconds (none: the sandbox's default).
    pub cpu_secs: Option<u64>,
    /// Most a run may write to its overlay, in bytes (none: the sandbox's default).
    pub disk: Option<u64>,
    /// The caller's environment (name, value), as its front end read it: `PATH` reaches the
    /// runner, and the variables the sandbox passes are part of a cached base run's identity.
    pub host_env: Vec<(OsString, OsString)>,
    /// Where the command came from, as the caller established it; attested with the verdict
    /// (a run of selected or related tests only is attested as `partial` whatever this says).
    pub source: airlock_types::VerdictSource,
    /// Session-local writes the caller found that change how code runs (path, why): each is a
    /// `session_local_hook` concern of the verdict.
    pub local_hooks: Vec<(String, String)>,
}

impl Default for VerifyOptions {
    fn default() -> VerifyOptions {
        VerifyOptions {
            timeout: DEFAULT_TIMEOUT,
            runner: None,
            command: None,
            budget_bytes: DEFAULT_BUDGET,
            only: Vec::new(),
            impacted: ImpactedMode::Off,
            baseline: false,
            home_binds: Vec::new(),
            masked: Vec::new(),
            ro_binds: Vec::new(),
            cache_binds: Vec::new(),
            env: Vec::new(),
            cancel: None,
            allow_degraded: false,
            memory: None,
            cpu_secs: None,
            disk: None,
            host_env: Vec::new(),
            source: airlock_types::VerdictSource::Unrecorded,
            local_hooks: Vec::new(),
        }
    }
}

/// What to verify.
#[derive(Debug, Clone)]
pub struct VerifyInput<'a> {
    /// The real workspace (read-only lower layer).
    pub workspace: &'a Path,
    /// The changeset's staged layers, lowest first.
    pub layers: Vec<PathBuf>,
    /// The changeset's content hash; the verdict is bound to it.
    pub changeset_hash: String,
    /// A directory this verification may fill (upper/work dirs, spools); the caller removes it.
    pub scratch_dir: &'a Path,
    /// Where to cache baseline results, and the base's fingerprint as the cache key.
    pub baseline_cache: Option<(&'a Path, String)>,
}

/// Runs the project's tests over workspace + layers in a fresh sandbox and returns the verdict.
pub fn run_verification(
    input: &VerifyInput,
    opts: &VerifyOptions,
) -> Result<VerdictReport, VerifyError> {
    let runner = crate::runner::default_runner(opts.allow_degraded)?;
    run_verification_with(runner.as_ref(), input, opts)
}

/// [`run_verification`] with a given [`CommandRunner`] (another backend, or the plain-process
/// runner for development).
pub fn run_verification_with(
    runner: &dyn CommandRunner,
    input: &VerifyInput,
    opts: &VerifyOptions,
) -> Result<VerdictReport, VerifyError> {
    let src = DirSource::layered(input.workspace, &input.layers);
    // The operator's runner; else the one recognised in the command; else the project's own.
    let kind = crate::project::kind(opts.runner, opts.command.as_deref(), &src)
        .ok_or(VerifyError::NoRunner)?;
    if matches!(kind, RunnerKind::Command | RunnerKind::Junit)
        && opts.command.as_ref().is_none_or(|c| c.is_empty())
    {
        return Err(VerifyError::EmptyCommand);
    }
    let target = Target {
        kind,
        related: None,
    };
    if opts.impacted == ImpactedMode::Off {
        return verify_scoped(runner, input, opts, &src, target);
    }
    if !opts.only.is_empty() {
        return Err(VerifyError::Selection(
            "`only` and `impacted` cannot be combined".into(),
        ));
    }
    impacted_run(runner, input, opts, &src, kind)
}

/// Most selected names an [`ImpactedReport`] lists.
const MAX_SELECTED_LISTED: usize = 50;

/// `--impacted` / `--impacted-first`: the tests related to the change, then (first) the
/// whole suite unless they failed. The verdict says which tests it covers (`scope`) and what
/// the impacted phase selected and found (`impacted`).
fn impacted_run(
    runner: &dyn CommandRunner,
    input: &VerifyInput,
    opts: &VerifyOptions,
    src: &DirSource,
    kind: RunnerKind,
) -> Result<VerdictReport, VerifyError> {
    let start = Instant::now();
    let changed = adapter::select::changed_paths(&input.layers);
    let related = impacted::related(kind, input.workspace, &input.layers, &changed);
    let (status, note, selection) = match related {
        Related::Selected(sel) => (ImpactedStatus::Ran, sel.note.clone(), Some(sel)),
        Related::Nothing(why) => (ImpactedStatus::NoneRelated, why, None),
        Related::Everything(why) => (ImpactedStatus::Everything, why, None),
        Related::Unsupported(why) => (ImpactedStatus::Unsupported, why, None),
    };
    let names = selection.as_ref().map_or(&[][..], |s| &s.names[..]);
    let mut summary = ImpactedReport {
        status,
        note,
        changed: changed.len(),
        selected: names.iter().take(MAX_SELECTED_LISTED).cloned().collect(),
        selected_total: names.len(),
        verdict: None,
        tests: None,
        argv: Vec::new(),
        duration_ms: 0,
    };
    let cancelled = || {
        opts.cancel
            .as_ref()
            .is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed))
    };
    let mut first_line = format!("impacted first: {}; the full suite ran.", summary.note);
    if let Some(sel) = &selection {
        let target = Target {
            kind,
            related: Some(sel),
        };
        let mut phase = verify_scoped(runner, input, opts, src, target)?;
        summary.verdict = Some(phase.verdict);
        summary.tests = Some(phase.tests);
        summary.argv = phase.argv.clone();
        summary.duration_ms = phase.duration_ms;
        let failed = matches!(phase.verdict, Verdict::Failed | Verdict::Timeout);
        if opts.impacted == ImpactedMode::Only || failed || cancelled() {
            let head = if opts.impacted == ImpactedMode::Only {
                format!(
                    "impacted: only the tests related to the change ran ({}); this verdict says nothing about the rest of the suite.",
                    summary.note
                )
            } else {
                format!(
                    "impacted first: the tests related to the change did not pass ({}); the full suite did not run (fix these first: only a full-suite pass can unlock apply).",
                    summary.note
                )
            };
            phase.diagnostics = format!("{head}\n{}", phase.diagnostics);
            phase.scope = Some(Scope::Impacted);
            phase.impacted = Some(summary);
            return Ok(phase);
        }
        first_line = format!(
            "impacted first: the related tests gave {} ({} passed, {} failed in {} ms; {}); then the full suite ran.",
            phase.verdict, phase.tests.passed, phase.tests.failed, phase.duration_ms, summary.note
        );
    } else if opts.impacted == ImpactedMode::Only && status == ImpactedStatus::NoneRelated {
        return Ok(nothing_related(input, kind, summary, start));
    }
    if opts.impacted == ImpactedMode::Only {
        first_line = format!("impacted: {}; the full suite ran instead.", summary.note);
    }
    let mut full = verify_scoped(
        runner,
        input,
        opts,
        src,
        Target {
            kind,
            related: None,
        },
    )?;
    full.diagnostics = format!("{first_line}\n{}", full.diagnostics);
    full.duration_ms = millis(start.elapsed());
    full.scope = Some(Scope::Full);
    full.impacted = Some(summary);
    Ok(full)
}

/// `--impacted` when no test is related to the change: nothing runs, the verdict is
/// `no_tests` and says why.
fn nothing_related(
    input: &VerifyInput,
    kind: RunnerKind,
    summary: ImpactedReport,
    start: Instant,
) -> VerdictReport {
    VerdictReport {
        verdict: Verdict::NoTests,
        changeset: input.changeset_hash.clone(),
        runner: kind,
        tests: Counts::default(),
        failures: Vec::new(),
        diagnostics: format!(
            "no_tests: impacted: {}, so no test ran (`verify` without `--impacted` runs the whole suite).",
            summary.note
        ),
        duration_ms: millis(start.elapsed()),
        degraded: false,
        tier: None,
        failures_omitted: 0,
        exit_code: None,
        baseline: false,
        base: None,
        argv: Vec::new(),
        environment: Vec::new(),
        ceiling: None,
        limits: None,
        scope: Some(Scope::Impacted),
        impacted: Some(summary),
        integrity: Default::default(),
        attestation: Default::default(),
    }
}

/// Which runner runs, and the related tests it is restricted to (none: the whole suite, or
/// what `only` selects).
#[derive(Clone, Copy)]
struct Target<'a> {
    kind: RunnerKind,
    related: Option<&'a Selection>,
}

/// One verification of `target`'s tests: the base run (with a baseline), the run, its verdict.
fn verify_scoped(
    runner: &dyn CommandRunner,
    input: &VerifyInput,
    opts: &VerifyOptions,
    src: &DirSource,
    target: Target,
) -> Result<VerdictReport, VerifyError> {
    let src = src.clone();
    // The duration covers the base run too: it is part of what this verification cost.
    let start = Instant::now();
    // The tree this run reads, bound into its attestation: apply refuses once it moved.
    let base_tree = crate::integrity::base_fingerprint(input.workspace)
        .map_err(|e| VerifyError::io(input.workspace, e))?;
    let mut base = if opts.baseline {
        Some(load_or_run_baseline(runner, input, opts, target)?)
    } else {
        None
    };

    let scratch = fresh_dir(input.scratch_dir, "run")?;
    let run = run_once(
        runner,
        input.workspace,
        &input.layers,
        scratch.path(),
        opts,
        target,
        &src,
    )?;
    // An empty changeset: this run *is* the base run. Its failures are the base's, recorded
    // for later verifications of this exact base.
    let deferred = match &base {
        Some(Base::Deferred { key, cache_file }) => Some((key.clone(), cache_file.clone())),
        _ => None,
    };
    if let (Some((key, cache_file)), Attempt::Ran { .. }) = (deferred, &run) {
        let (verdict, tests, failing) = judge(&run, opts, &src);
        let known = BaseKnown {
            failing: failing.into_iter().collect(),
            report: BaseReport {
                id: key,
                verdict,
                tests,
                reused: false,
                duration_ms: millis(start.elapsed()),
            },
        };
        store_base(cache_file.as_deref(), &known);
        base = Some(Base::Known(known));
    }
    let baseline = match &base {
        Some(Base::Known(k)) => Some(&k.failing),
        _ => None,
    };
    let base_report = match &base {
        Some(Base::Known(k)) => Some(k.report.clone()),
        _ => None,
    };
    let mut collector = Collector::new(opts.budget_bytes, baseline);
    collector
        .sanitizer
        .set_changed(adapter::select::changed_paths(&input.layers));
    collector
        .sanitizer
        .set_file_reader(adapter::select::head_reader(input.workspace, &input.layers));
    let facts_and_plan = match run {
        Attempt::Missing { plan, reason } => {
            let mut s = Sanitizer::new(opts.budget_bytes);
            s.set_header(&format!("error: {reason}"));
            let out = s.finish();
            return Ok(VerdictReport {
                verdict: Verdict::Error,
                changeset: input.changeset_hash.clone(),
                runner: plan.kind,
                tests: Default::default(),
                failures: Vec::new(),
                diagnostics: out.text,
                duration_ms: millis(start.elapsed()),
                degraded: false,
                tier: None,
                failures_omitted: 0,
                exit_code: None,
                baseline: baseline.is_some(),
                base: base_report,
                argv: argv_text(&plan),
                environment: Vec::new(),
                ceiling: None,
                limits: None,
                scope: None,
                impacted: None,
                integrity: Default::default(),
                attestation: Default::default(),
            });
        }
        Attempt::Ran {
            plan,
            output,
            steps_before_runner,
        } => {
            let (parsed, tails) =
                parse_run(&plan, &output, steps_before_runner, &src, &mut collector);
            (plan, output, parsed, tails)
        }
    };
    let (plan, output, parsed, tails) = facts_and_plan;
    let facts = facts_of(&output, opts, &parsed, &collector, baseline.is_some());
    let (mut verdict, mut reason) = decide(&facts);
    // Failures that already failed on the base excuse a failed runner, not the steps after
    // it that never ran (`jest && tsc`: a type error staged there would go unchecked).
    let excused = reason
        .as_deref()
        .is_some_and(|r| r.starts_with("every failure also fails"));
    if verdict == Verdict::Passed
        && excused
        && plan.steps_after_runner
        && output.exit_code != Some(0)
    {
        verdict = Verdict::Failed;
        reason = Some(
            "every failure also fails on the unchanged base, but the steps after the runner never ran (the runner failed first), so they were not checked; fix the pre-existing failures or verify those steps with `verify -- CMD`"
                .into(),
        );
    }
    // A pass stands only when the run's independent signals agree.
    if verdict == Verdict::Passed && !parsed.disagreements.is_empty() {
        verdict = Verdict::Error;
        reason = Some(format!(
            "the run's signals disagree, so this is not a pass: {}",
            parsed.disagreements.join("; ")
        ));
    }
    // Disagreements are what turned a would-be pass into an error; on any other verdict they
    // would only add noise.
    let flipped = reason
        .as_deref()
        .is_some_and(|r| r.starts_with("the run's signals disagree"));
    let mut integrity = crate::integrity::Integrity {
        disagreements: if flipped {
            parsed.disagreements.clone()
        } else {
            Vec::new()
        },
        concerns: crate::integrity::classify::judge(input.workspace, &input.layers),
        signals: parsed.signals.clone(),
        contract: None,
    };
    if !opts.local_hooks.is_empty() {
        integrity.concerns.push(crate::integrity::ConcernReport {
            kind: airlock_types::Concern::SessionLocalHook,
            paths: opts
                .local_hooks
                .iter()
                .take(8)
                .map(|(p, _)| p.clone())
                .collect(),
            detail: opts
                .local_hooks
                .iter()
                .take(8)
                .map(|(p, why)| format!("session-local `{p}`: {why}"))
                .collect(),
        });
    }
    if verdict == Verdict::Passed && base_report.is_none() && integrity.concerns.is_empty() {
        integrity
            .concerns
            .extend(fewer_than_base(runner, input, opts, target, parsed.counts)?);
    }
    if verdict == Verdict::Passed && target.related.is_none() && opts.only.is_empty() {
        integrity.contract = contract_run(runner, input, opts, target, &integrity.concerns)?;
    }
    let mut header = format!(
        "{verdict}: {} passed, {} failed, {} skipped ({}",
        parsed.counts.passed, parsed.counts.failed, parsed.counts.skipped, plan.kind
    );
    if let Some(code) = output.exit_code {
        header.push_str(&format!(", exit {code}"));
    }
    header.push(')');
    if let Some(reason) = &reason {
        header.push_str(" — ");
        header.push_str(reason);
    }
    if output.degraded {
        header.push_str(" [degraded: no kernel isolation]");
    }
    let mut sanitizer = collector.sanitizer;
    sanitizer.set_header(&header);
    let show_tail = match verdict {
        Verdict::Passed => false,
        Verdict::Failed => collector.test_failures + collector.compile_failures == 0,
        _ => true,
    };
    if show_tail {
        let (out_tail, err_tail) = tails;
        if !err_tail.is_empty() {
            sanitizer.note(&format!("--- stderr (tail) ---\n{}", err_tail.render()));
        }
        if !out_tail.is_empty() {
            sanitizer.note(&format!("--- stdout (tail) ---\n{}", out_tail.render()));
        }
    }
    let sanitized = sanitizer.finish();
    Ok(VerdictReport {
        verdict,
        changeset: input.changeset_hash.clone(),
        runner: plan.kind,
        tests: parsed.counts,
        failures: sanitized.failures,
        diagnostics: sanitized.text,
        duration_ms: millis(start.elapsed()),
        degraded: output.degraded,
        tier: output.tier.map(|t| t.name().to_string()),
        failures_omitted: sanitized.failures_omitted,
        exit_code: output.exit_code,
        baseline: baseline.is_some(),
        base: base_report,
        argv: argv_text(&plan),
        environment: {
            let mut notes = environment_note(&plan, &output, opts, &src);
            notes.extend(added_note(&plan, opts));
            notes
        },
        ceiling: output.ceiling.map(|c| c.name().to_string()),
        limits: output
            .limits
            .as_ref()
            .and_then(|l| serde_json::to_value(l).ok()),
        scope: None,
        impacted: None,
        attestation: attest(input, opts, target, &plan, verdict, base_tree, &integrity),
        integrity,
    })
}

/// The harness's statement of what this run established (see [`crate::integrity::seal`]).
fn attest(
    input: &VerifyInput,
    opts: &VerifyOptions,
    target: Target,
    plan: &Plan,
    verdict: Verdict,
    base: airlock_types::BaseFingerprint,
    integrity: &crate::integrity::Integrity,
) -> crate::integrity::Attestation {
    let mut run = blake3::Hasher::new();
    let mut field = |b: &[u8]| {
        run.update(&(b.len() as u64).to_le_bytes());
        run.update(b);
    };
    for a in &plan.argv {
        field(a.as_encoded_bytes());
    }
    field(b"env");
    for (k, v) in plan.env.iter().chain(&opts.env) {
        field(k.as_bytes());
        field(v.as_bytes());
    }
    let source = if target.related.is_some() || !opts.only.is_empty() {
        airlock_types::VerdictSource::Partial
    } else {
        opts.source
    };
    crate::integrity::Attestation::new(
        &input.changeset_hash,
        verdict,
        source,
        base,
        run.finalize().to_hex().to_string(),
        integrity.concerns.iter().map(|c| c.kind).collect(),
    )
}

/// Most names a note lists before it says how many more there are.
const NOTE_NAMES: usize = 8;

/// `names` as a short list: the first [`NOTE_NAMES`], then how many more.
fn name_list(mut names: Vec<String>) -> String {
    names.sort();
    names.dedup();
    let more = names.len().saturating_sub(NOTE_NAMES);
    names.truncate(NOTE_NAMES);
    let mut text = names.join(", ");
    if more > 0 {
        text.push_str(&format!(" and {more} more"));
    }
    text
}

/// Each known difference between the run's environment and the host's, in a few words: what a
/// test may see differently in the sandbox (see `SandboxRunner` and the sandbox crate).
fn environment_note(
    plan: &Plan,
    output: &RunOutput,
    opts: &VerifyOptions,
    src: &dyn FileSource,
) -> Vec<String> {
    let mut notes = Vec::new();
    if output.degraded {
        notes.push(
            "no kernel isolation: the tests ran on a copy of the workspace, with the host's network"
                .to_string(),
        );
    } else {
        // What a test may do with sockets, per tier (the sandbox crate's `tier` docs).
        notes.push(match output.tier {
            Some(airlock_sandbox::Tier::Landlock) => "no network and no loopback: the landlock tier (no network namespace) refuses inet sockets, so a test that starts a local server fails here; it passes in the full tier".to_string(),
            _ => "no network beyond the run's own loopback (refused by policy: a verification gets no network grant): a test may serve and connect on 127.0.0.1 and ::1; every other address and every name lookup fails at once".to_string(),
        });
        notes.push(
            "HOME is fresh and empty apart from read-only toolchain paths; /tmp is private"
                .to_string(),
        );
        notes.push(format!(
            "/sys: only {} (read-only); /etc: only non-secret files",
            airlock_sandbox::SYS_ALLOWLIST.join(", ")
        ));
        let mut masked: Vec<String> = opts
            .masked
            .iter()
            .chain(std::iter::once(&PathBuf::from(".airlock")))
            .filter(|p| p.is_relative())
            .filter_map(|p| p.to_str())
            .filter(|p| src.exists(p))
            .map(str::to_string)
            .collect();
        masked.retain(|p| !p.is_empty());
        if !masked.is_empty() {
            notes.push(format!(
                "masked (empty to the tests): {}",
                name_list(masked)
            ));
        }
    }
    let mut extra: Vec<(OsString, OsString)> = plan
        .env
        .iter()
        .chain(opts.env.iter())
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    extra.retain(|(k, _)| k != "PATH");
    if !output.degraded
        && let Ok(sent) =
            airlock_sandbox::env::scrubbed(opts.host_env.iter().cloned(), &extra, None)
    {
        let dropped: Vec<String> = opts
            .host_env
            .iter()
            .filter(|(k, _)| !sent.iter().any(|(s, _)| s == k))
            .filter_map(|(k, _)| k.to_str().map(str::to_string))
            .collect();
        if !dropped.is_empty() {
            notes.push(format!(
                "host environment variables not passed: {}",
                name_list(dropped)
            ));
        }
    }
    notes
}

/// The variables airlock itself sets for the run (the plan's and the caller's, `PATH` and the
/// witness's one-shot key file aside), in one note.
fn added_note(plan: &Plan, opts: &VerifyOptions) -> Option<String> {
    // The caller's value of a variable wins over the plan's, as in `run_env`.
    let mut set = std::collections::BTreeMap::new();
    for (k, v) in plan.env.iter().chain(&opts.env) {
        if k != "PATH" && k != crate::integrity::witness::KEY_ENV {
            set.insert(k.as_str(), v.as_str());
        }
    }
    let set: Vec<String> = set
        .into_iter()
        .map(|(k, v)| {
            if v.is_empty() {
                format!("{k} unset")
            } else {
                format!("{k}={v}")
            }
        })
        .collect();
    (!set.is_empty()).then(|| format!("airlock sets: {}", set.join(", ")))
}

/// The plan's argv as text, for the verdict.
fn argv_text(plan: &Plan) -> Vec<String> {
    plan.argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// Everything the verdict rules need from one parsed run.
fn facts_of(
    output: &RunOutput,
    opts: &VerifyOptions,
    parsed: &Parsed,
    collector: &Collector,
    baseline_used: bool,
) -> RunFacts {
    RunFacts {
        exit_code: output.exit_code,
        signal: output.signal,
        timed_out: output.timed_out,
        timeout_secs: opts.timeout.as_secs(),
        cancelled: output.cancelled,
        counts: parsed.counts,
        counts_known: parsed.counts_known,
        report_problem: parsed.report_problem.clone(),
        said_no_tests: parsed.said_no_tests,
        test_failures: collector.test_failures,
        compile_failures: collector.compile_failures,
        new_failures: collector.new_failures,
        baseline_used,
        ceiling: output.ceiling,
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

enum Attempt {
    Missing {
        plan: Plan,
        reason: String,
    },
    Ran {
        plan: Plan,
        output: RunOutput,
        /// See [`crate::project::ProjectPlan::steps_before_runner`].
        steps_before_runner: bool,
    },
}

/// A run's own verdict, counts and failure identities, judged without a baseline (a base run,
/// the contract run); a runner that could not start is an error with nothing counted.
fn judge(
    attempt: &Attempt,
    opts: &VerifyOptions,
    src: &dyn FileSource,
) -> (Verdict, Counts, Vec<String>) {
    let Attempt::Ran {
        plan,
        output,
        steps_before_runner,
    } = attempt
    else {
        return (Verdict::Error, Counts::default(), Vec::new());
    };
    let mut collector = Collector::new(opts.budget_bytes, None);
    let (parsed, _) = parse_run(plan, output, *steps_before_runner, src, &mut collector);
    let (verdict, _) = decide(&facts_of(output, opts, &parsed, &collector, false));
    (verdict, parsed.counts, collector.identities)
}

/// A run's scratch directory, removed when the guard drops (the upper dir with everything the
/// tests wrote is thrown away with it).
fn fresh_dir(parent: &Path, prefix: &str) -> Result<tempfile::TempDir, VerifyError> {
    std::fs::create_dir_all(parent).map_err(|e| VerifyError::io(parent, e))?;
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(parent)
        .map_err(|e| VerifyError::io(parent, e))
}

fn run_once(
    runner: &dyn CommandRunner,
    workspace: &Path,
    layers: &[PathBuf],
    scratch: &Path,
    opts: &VerifyOptions,
    target: Target,
    src: &dyn FileSource,
) -> Result<Attempt, VerifyError> {
    let kind = target.kind;
    let visible_root = runner.visible_root(workspace, scratch);
    let mut project =
        selected_plan(target, opts, &visible_root, src).map_err(VerifyError::Selection)?;
    adapter::jest::use_cache(&mut project.plan, &opts.cache_binds);
    if project.plan.libtest_log && crate::integrity::libtest::custom_harness(workspace, layers) {
        // A target with its own harness may not take libtest's options: no ledger then.
        drop_log_args(&mut project.plan);
    }
    let mut env = run_env(&project, opts);
    let steps_before_runner = project.steps_before_runner;
    let plan = project.plan;
    if plan.argv.is_empty() {
        return Err(VerifyError::EmptyCommand);
    }
    if let Some(required) = &plan.requires
        && !src.exists(required)
    {
        let install = crate::project::node::manager(src).install_command();
        let reason = format!(
            "{kind} is not installed: {required} is missing; install the project's dependencies first (`{install}`, through `airlock exec --allow-net preset:npm`)"
        );
        return Ok(Attempt::Missing { plan, reason });
    }
    // A private top layer holding the (empty) report directory, so reporters can write into it.
    let report_layer = scratch.join("report-layer");
    let report_dir = report_layer.join(REPORT_DIR);
    std::fs::create_dir_all(&report_dir).map_err(|e| VerifyError::io(&report_dir, e))?;
    if let Some(key) = &plan.witness {
        arm_witness(plan.kind, key, &report_layer, &visible_root, &mut env)?;
    }
    let mut all_layers = layers.to_vec();
    all_layers.push(report_layer);
    let req = RunRequest {
        workspace: workspace.to_path_buf(),
        layers: all_layers,
        scratch: scratch.to_path_buf(),
        argv: plan.argv.clone(),
        env,
        timeout: opts.timeout,
        // The caller's $HOME (its environment, passed down), where the toolchains live.
        home: opts
            .host_env
            .iter()
            .rev()
            .find(|(k, _)| k == "HOME")
            .map(|(_, v)| PathBuf::from(v))
            .filter(|h| h.is_absolute()),
        home_binds: opts.home_binds.clone(),
        masked: opts.masked.clone(),
        ro_binds: opts.ro_binds.clone(),
        cache_binds: opts.cache_binds.clone(),
        cancel: opts.cancel.clone(),
        memory: opts.memory,
        cpu_secs: opts.cpu_secs,
        disk: opts.disk,
    };
    match runner.run(&req) {
        Ok(output) => Ok(Attempt::Ran {
            plan,
            output,
            steps_before_runner,
        }),
        Err(VerifyError::RunnerNotFound(reason)) => Ok(Attempt::Missing { plan, reason }),
        Err(e) => Err(e),
    }
}

/// The project's plan for the target, restricted to the tests `opts.only` or the target's
/// related tests select. A selection is given to the runner's own argv: where the project's
/// command reaches the runner through a script, the runner is run directly with the selection
/// instead, with the project's `PATH` and environment: a package.json script's runner step with
/// its own words (`vitest run --globals`, its other steps such as `tsc` left out), else (`make
/// test`) the bare runner (a selected run is advisory either way, and the verdict's argv says
/// what ran).
fn selected_plan(
    target: Target,
    opts: &VerifyOptions,
    visible_root: &Path,
    src: &dyn FileSource,
) -> Result<crate::project::ProjectPlan, String> {
    let mut project = crate::project::plan(target.kind, opts.command.as_deref(), visible_root, src);
    if opts.only.is_empty() && target.related.is_none() {
        return Ok(project);
    }
    let through_script = matches!(
        project.plan.argv.first().and_then(|a| a.to_str()),
        Some("sh" | "make")
    );
    if through_script && project.plan.kind != RunnerKind::Command {
        let script = match opts.command.as_deref() {
            Some(cmd) => crate::project::node::script_call(cmd).map(|(name, _)| name),
            None => Some("test"),
        };
        let words = script
            .and_then(|name| crate::project::node::runner_words(name, src))
            .filter(|(kind, _)| *kind == project.plan.kind)
            .map(|(_, words)| words);
        let mut direct = adapter::plan(project.plan.kind, words.as_deref(), visible_root, src);
        direct.env.extend(
            project
                .plan
                .env
                .iter()
                .filter(|(k, _)| k == "VIRTUAL_ENV")
                .cloned(),
        );
        project.plan = direct;
        project.steps_before_runner = false;
    }
    adapter::select::restrict(&mut project.plan, &opts.only)?;
    if let Some(selection) = target.related {
        impacted::apply(&mut project.plan, selection);
    }
    Ok(project)
}

/// The environment a plan runs with: the plan's own, `PATH` (the project's directories first,
/// then the caller's), then the caller's extra variables (which win).
fn run_env(project: &crate::project::ProjectPlan, opts: &VerifyOptions) -> Vec<(String, String)> {
    let mut env = project.plan.env.clone();
    if !opts.env.iter().any(|(k, _)| k == "PATH") {
        let host = opts
            .host_env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .and_then(|(_, v)| v.to_str());
        let mut parts: Vec<String> = project
            .path_prepend
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        parts.extend(host.map(str::to_string));
        if !parts.is_empty() {
            env.push(("PATH".into(), parts.join(":")));
        }
    }
    for (k, v) in &opts.env {
        // pytest's extra options from both sides are kept (the plan's reporter options reach
        // pytest through it when a Makefile runs pytest; the caller's say where its cache is).
        if k == "PYTEST_ADDOPTS"
            && let Some((_, mine)) = env.iter_mut().rev().find(|(name, _)| name == k)
        {
            *mine = format!("{v} {mine}");
            continue;
        }
        env.push((k.clone(), v.clone()));
    }
    env
}

/// Removes libtest's log arguments from a plan (and a `--` left with nothing after it).
fn drop_log_args(plan: &mut Plan) {
    if let Some(at) = plan.argv.windows(2).position(|w| {
        w[0] == crate::integrity::libtest::LOGFILE_ARGS[0]
            && w[1] == crate::integrity::libtest::LOGFILE_ARGS[1]
    }) {
        plan.argv.drain(at..at + 2);
    }
    if plan.argv.last().is_some_and(|a| a == "--") {
        plan.argv.pop();
    }
    plan.libtest_log = false;
}

/// A clean pass that skipped tests is compared with the base (the base's tests on the
/// unchanged tree, run once per base and cached): more skipped, or fewer run, than the base
/// is a [`FewerTests`](airlock_types::Concern::FewerTests) concern. A run that skipped nothing
/// needs no base run, nor does cargo (libtest skips only what test attributes ignore).
fn fewer_than_base(
    runner: &dyn CommandRunner,
    input: &VerifyInput,
    opts: &VerifyOptions,
    target: Target,
    counts: Counts,
) -> Result<Option<crate::integrity::ConcernReport>, VerifyError> {
    // libtest skips only what its attributes ignore, and those live in the test items the
    // classification compares: no base run for cargo.
    if counts.skipped == 0
        || target.kind == RunnerKind::Cargo
        || target.related.is_some()
        || !opts.only.is_empty()
        || layers_are_empty(&input.layers)
    {
        return Ok(None);
    }
    let Base::Known(base) = load_or_run_baseline(runner, input, opts, target)? else {
        return Ok(None);
    };
    let b = base.report.tests;
    if !matches!(base.report.verdict, Verdict::Passed | Verdict::Failed) {
        return Ok(None);
    }
    let mut detail = Vec::new();
    if counts.skipped > b.skipped {
        detail.push(format!(
            "{} tests were skipped, {} on the unchanged base",
            counts.skipped, b.skipped
        ));
    }
    if counts.ran() < b.ran() {
        detail.push(format!(
            "{} tests ran, {} on the unchanged base",
            counts.ran(),
            b.ran()
        ));
    }
    Ok(
        (!detail.is_empty()).then(|| crate::integrity::ConcernReport {
            kind: airlock_types::Concern::FewerTests,
            paths: Vec::new(),
            detail,
        }),
    )
}

/// The contract run: when the changeset changed the test definition (existing tests or test
/// configuration), the base's versions of exactly those files are laid over the changeset and
/// the suite runs again, so the operator who decides sees whether the changed code passes the
/// tests the base defined. `None` when nothing of the test definition changed.
fn contract_run(
    runner: &dyn CommandRunner,
    input: &VerifyInput,
    opts: &VerifyOptions,
    target: Target,
    concerns: &[crate::integrity::ConcernReport],
) -> Result<Option<crate::integrity::Contract>, VerifyError> {
    use airlock_types::Concern;
    let definition: Vec<&crate::integrity::ConcernReport> = concerns
        .iter()
        .filter(|c| matches!(c.kind, Concern::TestChanged | Concern::TestConfig))
        .collect();
    if definition.is_empty() {
        return Ok(None);
    }
    let not_run = |note: String| {
        Ok(Some(crate::integrity::Contract {
            verdict: None,
            passed: 0,
            failed: 0,
            note,
        }))
    };
    let complete = definition
        .iter()
        .all(|c| c.paths.len() == c.detail.len() && c.paths.len() < 8);
    if !complete {
        return not_run(
            "the changeset changes too much of the test definition to restore the base's".into(),
        );
    }
    let scratch = fresh_dir(input.scratch_dir, "contract")?;
    let layer = scratch.path().join("base-tests");
    let base = DirSource::new(input.workspace);
    for path in definition.iter().flat_map(|c| &c.paths) {
        let Some(bytes) = base.read(path) else {
            return not_run(format!(
                "`{path}` is new test configuration (the base has none to restore), so the base's test definition cannot be run alone"
            ));
        };
        let dest = layer.join(path);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|e| VerifyError::io(parent, e))?;
        }
        std::fs::write(&dest, bytes).map_err(|e| VerifyError::io(&dest, e))?;
    }
    let mut layers = input.layers.clone();
    layers.push(layer);
    let src = DirSource::layered(input.workspace, &layers);
    let run = fresh_dir(input.scratch_dir, "contract-run")?;
    let attempt = run_once(
        runner,
        input.workspace,
        &layers,
        run.path(),
        opts,
        target,
        &src,
    )?;
    if matches!(attempt, Attempt::Missing { .. }) {
        return not_run("the base's test definition could not be run".into());
    }
    let (verdict, counts, _) = judge(&attempt, opts, &src);
    let note = match verdict {
        Verdict::Passed => {
            "the changed code also passes the tests and configuration the base defined".to_string()
        }
        v => format!(
            "with the tests and configuration the base defined, the changed code gives `{v}` ({} passed, {} failed): the change to the test definition is what made it pass",
            counts.passed, counts.failed
        ),
    };
    Ok(Some(crate::integrity::Contract {
        verdict: Some(verdict),
        passed: counts.passed,
        failed: counts.failed,
        note,
    }))
}

/// Prepares airlock's pytest witness for a run: the plugin and its key in the run's private
/// report layer, the key file named by [`crate::integrity::witness::KEY_ENV`] (the plugin
/// reads it and removes it as it loads, before any test code is imported) and the plugin's
/// directory first on `PYTHONPATH`.
fn arm_witness(
    kind: RunnerKind,
    key: &str,
    report_layer: &Path,
    visible_root: &Path,
    env: &mut Vec<(String, String)>,
) -> Result<(), VerifyError> {
    use crate::integrity::witness;
    let Some((file, source)) = witness::module_for(kind) else {
        return Ok(());
    };
    let rel = Path::new(REPORT_DIR).join(witness::DIR);
    let dir = report_layer.join(&rel);
    std::fs::create_dir_all(&dir).map_err(|e| VerifyError::io(&dir, e))?;
    let plugin = dir.join(file);
    std::fs::write(&plugin, source).map_err(|e| VerifyError::io(&plugin, e))?;
    if kind != RunnerKind::Pytest {
        let (name, shared) = witness::JS_KEY_MODULE;
        let path = dir.join(name);
        std::fs::write(&path, shared).map_err(|e| VerifyError::io(&path, e))?;
    }
    let key_file = dir.join("key");
    // The key, then (pytest) where its JUnit report goes: read and removed by the plugin.
    let xml = match kind {
        RunnerKind::Pytest => visible_root.join(REPORT_DIR).join("pytest.xml"),
        _ => PathBuf::new(),
    };
    let body = format!("{key}\n{}\n", xml.display());
    std::fs::write(&key_file, body).map_err(|e| VerifyError::io(&key_file, e))?;
    let inside = visible_root.join(&rel);
    env.push((
        witness::KEY_ENV.to_string(),
        inside.join("key").to_string_lossy().into_owned(),
    ));
    if kind != RunnerKind::Pytest {
        return Ok(());
    }
    let inside = inside.to_string_lossy().into_owned();
    match env.iter_mut().rev().find(|(k, _)| k == "PYTHONPATH") {
        Some((_, v)) if !v.is_empty() => *v = format!("{inside}:{v}"),
        Some((_, v)) => *v = inside,
        None => env.push(("PYTHONPATH".to_string(), inside)),
    }
    Ok(())
}

/// Counts, bounds and (with a baseline) marks failures as they stream in.
struct Collector<'b> {
    sanitizer: Sanitizer,
    baseline: Option<&'b HashSet<String>>,
    test_failures: u64,
    compile_failures: u64,
    new_failures: u64,
    identities: Vec<String>,
    node_load_errors: Option<LoadErrors>,
    /// `<visible root>/`, cut from messages so they name workspace-relative paths only.
    root_prefix: String,
}

impl<'b> Collector<'b> {
    fn new(budget: usize, baseline: Option<&'b HashSet<String>>) -> Collector<'b> {
        Collector {
            sanitizer: Sanitizer::new(budget),
            baseline,
            test_failures: 0,
            compile_failures: 0,
            new_failures: 0,
            identities: Vec::new(),
            node_load_errors: None,
            root_prefix: String::new(),
        }
    }
}

impl FailureSink for Collector<'_> {
    fn failure(&mut self, mut failure: Failure) {
        if let Some(load) = &self.node_load_errors {
            load.enrich(&mut failure);
        }
        if !self.root_prefix.is_empty() && failure.message.contains(&self.root_prefix) {
            failure.message = failure
                .message
                .replace(&format!("file://{}", self.root_prefix), "")
                .replace(&self.root_prefix, "");
        }
        match failure.kind {
            FailureKind::Test => self.test_failures += 1,
            FailureKind::Compile => self.compile_failures += 1,
        }
        let identity = failure.identity();
        if self.baseline.is_some_and(|b| b.contains(&identity)) {
            failure.pre_existing = true;
        } else {
            self.new_failures += 1;
        }
        if self.identities.len() < MAX_BASELINE_IDENTITIES {
            self.identities.push(identity);
        }
        self.sanitizer.push(failure);
    }
}

/// Streams the outputs and report of one run through the adapter for its format. When steps
/// ran before the runner and the runner's report is missing after a failed run, an earlier
/// step failed: what the run printed is read generically (type checkers' and compilers'
/// diagnostics become failures).
fn parse_run(
    plan: &Plan,
    output: &RunOutput,
    steps_before_runner: bool,
    src: &dyn FileSource,
    collector: &mut Collector,
) -> (Parsed, (Tail, Tail)) {
    let locator = Locator::new(&output.visible_root);
    collector.root_prefix = format!("{}/", output.visible_root.display());
    let mut out_tail = Tail::new(TAIL_BYTES);
    let mut err_tail = Tail::new(TAIL_BYTES);
    let report_path = plan
        .report
        .as_ref()
        .map(|rel| output.written_root.join(rel));
    let mut parsed = match plan.format {
        ReportFormat::Junit | ReportFormat::JestJson => {
            let mut load = LoadErrors::default();
            let is_node = plan.kind == RunnerKind::Node;
            let _ = output.stdout.for_each_line(|l| {
                out_tail.push(l);
                if is_node {
                    load.line(l, &locator);
                }
            });
            let mut witness = plan
                .witness
                .as_deref()
                .map(|key| crate::integrity::witness::Witness::new(plan.kind, key));
            let _ = output.stderr.for_each_line_max(1024 * 1024, |l| {
                if let Some(w) = &mut witness
                    && w.line(l)
                {
                    return;
                }
                err_tail.push(l);
                if is_node {
                    load.line(l, &locator);
                }
            });
            if is_node {
                collector.node_load_errors = Some(load);
            }
            let path = report_path.unwrap_or_default();
            let mut parsed = if plan.format == ReportFormat::JestJson {
                adapter::jest::parse(&path, &locator, collector)
            } else {
                let innermost_last = plan.kind == RunnerKind::Pytest;
                adapter::junit::parse(&path, &locator, innermost_last, collector)
            };
            // pytest stopped before it wrote a report (an error in code conftest imports):
            // the error's own file and line, read from its traceback.
            if plan.kind == RunnerKind::Pytest && parsed.report_missing {
                // The traceback is at the end: the last lines of each stream are enough.
                let mut lines = std::collections::VecDeque::new();
                let mut keep = |l: &str| {
                    if lines.len() == 4000 {
                        lines.pop_front();
                    }
                    lines.push_back(l.to_string());
                };
                let _ = output.stdout.for_each_line(&mut keep);
                let _ = output.stderr.for_each_line(&mut keep);
                adapter::pytrace::collection_errors(
                    lines.iter().map(String::as_str),
                    &locator,
                    collector,
                );
            }
            if let Some(w) = &witness {
                parsed.disagreements = w.disagreements(output.exit_code, parsed.counts);
                parsed.signals = vec![
                    format!("{}_witness", plan.kind.name()),
                    "report".into(),
                    "exit".into(),
                ];
            }
            parsed
        }
        ReportFormat::CargoLibtest => {
            let mut p = CargoParser::new(&locator);
            let mut ledger = crate::integrity::libtest::LibtestLedger::default();
            let _ = output.stdout.for_each_line_max(1024 * 1024, |l| {
                if !l.starts_with("{\"reason\":") {
                    out_tail.push(l);
                    ledger.stdout_line(l);
                }
                p.line(l, collector);
            });
            let _ = output.stderr.for_each_line(|l| {
                ledger.stderr_line(l);
                err_tail.push(l);
                p.line(l, collector);
            });
            let mut parsed = p.finish(collector);
            if plan.libtest_log {
                parsed.disagreements = ledger.disagreements(output.exit_code);
                parsed.signals = vec![
                    "libtest_log".into(),
                    "libtest_summary".into(),
                    "exit".into(),
                ];
            }
            parsed
        }
        ReportFormat::GoJson => {
            let go_mod = src
                .read("go.mod")
                .map(|b| String::from_utf8_lossy(&b).into_owned());
            let mut p = GoParser::new(&locator, go_mod.as_deref());
            let _ = output.stdout.for_each_line_max(1024 * 1024, |l| {
                if !l.starts_with('{') {
                    out_tail.push(l);
                }
                p.line(l, collector);
            });
            let _ = output.stderr.for_each_line(|l| {
                err_tail.push(l);
                p.build_line(l, collector);
            });
            p.finish(collector)
        }
        ReportFormat::Generic => {
            let mut p = GenericParser::new(&locator);
            let _ = output.stdout.for_each_line(|l| {
                out_tail.push(l);
                p.line(l, collector);
            });
            let _ = output.stderr.for_each_line(|l| {
                err_tail.push(l);
                p.line(l, collector);
            });
            p.finish(collector)
        }
    };
    if steps_before_runner && parsed.report_missing && output.exit_code != Some(0) {
        let mut p = GenericParser::new(&locator);
        let _ = output.stdout.for_each_line(|l| p.line(l, collector));
        let _ = output.stderr.for_each_line(|l| p.line(l, collector));
        let read = p.finish(collector);
        if read.counts_known || collector.test_failures + collector.compile_failures > 0 {
            parsed = read;
        }
    }
    if plan.kind == RunnerKind::Pytest && output.exit_code == Some(5) {
        parsed.said_no_tests = true;
    }
    if parsed.counts_known {
        parsed.report_problem = None;
    }
    (parsed, (out_tail, err_tail))
}

/// A cached base result, stored under its key.
#[derive(Debug, Serialize, Deserialize)]
struct BaselineRecord {
    key: String,
    verdict: Verdict,
    tests: Counts,
    failing: Vec<String>,
}

/// The base a verification compares against.
enum Base {
    /// Its failing identities and what it was.
    Known(BaseKnown),
    /// The changeset is empty, so the main run is the base run: recorded after it.
    Deferred {
        key: String,
        cache_file: Option<PathBuf>,
    },
}

struct BaseKnown {
    failing: HashSet<String>,
    report: BaseReport,
}

/// The failure identities of the unchanged base: from the cache when a base with exactly the
/// same key ran before, otherwise from a fresh run (cached only when that run produced a
/// verdict that says something: passed or failed). The key covers everything that decides
/// the result ([`base_key`]); a base whose tree cannot be fingerprinted is run and not cached.
fn load_or_run_baseline(
    runner: &dyn CommandRunner,
    input: &VerifyInput,
    opts: &VerifyOptions,
    target: Target,
) -> Result<Base, VerifyError> {
    let src = DirSource::new(input.workspace);
    let key = base_key(input, opts, target, &src);
    let cache_file = match (&key, &input.baseline_cache) {
        (Some(key), Some((dir, _))) => Some(dir.join(format!("verify-base-{key}.json"))),
        _ => None,
    };
    if let (Some(key), Some(path)) = (&key, &cache_file)
        && let Ok(bytes) = std::fs::read(path)
        && let Ok(record) = serde_json::from_slice::<BaselineRecord>(&bytes)
        && &record.key == key
    {
        return Ok(Base::Known(BaseKnown {
            failing: record.failing.into_iter().collect(),
            report: BaseReport {
                id: record.key,
                verdict: record.verdict,
                tests: record.tests,
                reused: true,
                duration_ms: 0,
            },
        }));
    }
    let id = key.clone().unwrap_or_else(|| "unfingerprinted".into());
    if key.is_some() && layers_are_empty(&input.layers) {
        return Ok(Base::Deferred {
            key: id,
            cache_file,
        });
    }
    let start = Instant::now();
    let scratch = fresh_dir(input.scratch_dir, "baseline")?;
    let attempt = run_once(
        runner,
        input.workspace,
        &[],
        scratch.path(),
        opts,
        target,
        &src,
    )?;
    let (verdict, tests, failing) = judge(&attempt, opts, &src);
    let known = BaseKnown {
        failing: failing.into_iter().collect(),
        report: BaseReport {
            id,
            verdict,
            tests,
            reused: false,
            duration_ms: millis(start.elapsed()),
        },
    };
    store_base(cache_file.as_deref(), &known);
    Ok(Base::Known(known))
}

/// Cache a base result that says something (passed or failed) under its key.
fn store_base(path: Option<&Path>, known: &BaseKnown) {
    let Some(path) = path else { return };
    if !matches!(known.report.verdict, Verdict::Passed | Verdict::Failed) {
        return;
    }
    let mut failing: Vec<String> = known.failing.iter().cloned().collect();
    failing.sort();
    let record = BaselineRecord {
        key: known.report.id.clone(),
        verdict: known.report.verdict,
        tests: known.report.tests,
        failing,
    };
    if let Some(parent) = path.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    if let Ok(json) = serde_json::to_vec(&record) {
        let tmp = path.with_extension("json.tmp");
        if std::fs::write(&tmp, json).is_ok() {
            let _ = std::fs::rename(&tmp, path);
        }
    }
}

/// True when no layer holds any entry: the changeset is empty and the run sees the base.
fn layers_are_empty(layers: &[PathBuf]) -> bool {
    layers.iter().all(|l| match std::fs::read_dir(l) {
        Ok(mut it) => it.next().is_none(),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    })
}

/// The identity of a base run: the whole base tree ([`crate::base::tree_fingerprint`]), the
/// runner and its exact argv as planned on the base, the environment that reaches the sandbox,
/// the toolchain (the program that runs and the exposed toolchain directories), airlock's own
/// version and the caller's key material. `None` when the tree cannot be read whole.
fn base_key(
    input: &VerifyInput,
    opts: &VerifyOptions,
    target: Target,
    src: &dyn FileSource,
) -> Option<String> {
    let kind = target.kind;
    // A run of selected tests is another base than the whole suite.
    let project = selected_plan(target, opts, input.workspace, src).ok()?;
    let env = run_env(&project, opts);
    let plan = project.plan;
    let extra: Vec<(std::ffi::OsString, std::ffi::OsString)> =
        env.iter().map(|(k, v)| (k.into(), v.into())).collect();
    let sandbox_env =
        airlock_sandbox::env::scrubbed(opts.host_env.iter().cloned(), &extra, None).ok()?;
    let mut binds: Vec<&Path> = opts.home_binds.iter().map(PathBuf::as_path).collect();
    binds.extend(opts.ro_binds.iter().map(PathBuf::as_path));
    let path_var = sandbox_env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone());
    crate::base::key(&crate::base::KeyParts {
        workspace: input.workspace,
        version: env!("CARGO_PKG_VERSION"),
        runner: kind.name(),
        argv: &plan.argv,
        env: &sandbox_env,
        program: plan
            .argv
            .first()
            .and_then(|p| crate::base::resolve_program(p, path_var.as_deref())),
        toolchains: &binds,
        salt: input
            .baseline_cache
            .as_ref()
            .map(|(_, s)| s.as_str())
            .unwrap_or(""),
    })
}
