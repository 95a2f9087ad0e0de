"""airlock's witness for pytest runs (loaded with `-p airlock_witness`).

It streams what pytest itself decided, test by test, to airlock on a duplicate of the
standard error taken before any test code is imported, each line keyed with a secret that
only this module holds (read from a file that it removes at once). airlock compares this
stream with pytest's report, its announced count and how the process ended: a run whose
signals disagree is an error, never a pass.
"""

import json
import os

_KEY = None
_XML = None
_FD = None
_raised = {}
_ENV = "AIRLOCK_WITNESS"


def _load():
    global _KEY, _XML, _FD
    path = os.environ.pop(_ENV, None)
    if not path:
        return
    try:
        with open(path, "r", encoding="utf-8") as f:
            lines = f.read().splitlines()
        os.unlink(path)
    except OSError:
        return
    key = lines[0].strip() if lines else ""
    if len(lines) > 1 and lines[1].strip():
        # Where pytest writes its JUnit report: handed over here, never in argv.
        _XML = lines[1].strip()
    if key:
        _KEY = key
        _FD = os.dup(2)
        try:
            os.set_inheritable(_FD, False)
        except OSError:
            pass


_load()


def _emit(kind, **fields):
    if _KEY is None or _FD is None:
        return
    fields["k"] = kind
    line = "@@airlock-witness:" + _KEY + ":" + json.dumps(fields, separators=(",", ":")) + "\n"
    data = line.encode("utf-8", "replace")
    try:
        while data:
            n = os.write(_FD, data)
            data = data[n:]
    except OSError:
        pass


def _benign(excinfo):
    """An exception that does not make a test fail by itself: skip, xfail, exit."""
    import pytest

    kinds = [pytest.skip.Exception, pytest.exit.Exception, KeyboardInterrupt]
    xfail = getattr(pytest.xfail, "Exception", None)
    if xfail is not None:
        kinds.append(xfail)
    return excinfo.errisinstance(tuple(kinds))


def _configure(config):
    if _XML is not None:
        config.option.xmlpath = _XML
    _emit("configure")


def pytest_collection_finish(session):
    _emit("collected", n=len(session.items))


try:
    import pytest as _pytest_mod

    _hookimpl = _pytest_mod.hookimpl
except Exception:  # pragma: no cover
    _hookimpl = None


if _hookimpl is not None:

    @_hookimpl(tryfirst=True)
    def pytest_configure(config):
        _configure(config)

    @_hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_makereport(item, call):
        raised = call.excinfo is not None and not _benign(call.excinfo)
        if raised:
            _raised[(item.nodeid, call.when)] = True
        yield


_counts = {"started": 0, "call_passes": 0}
_failing = set()


def pytest_runtest_logreport(report):
    # Failures and rewritten outcomes go out at once (nothing later can take them back);
    # passes are counted here and sent with the end-of-session record.
    raised = _raised.pop((report.nodeid, report.when), False)
    if report.when == "setup":
        _counts["started"] += 1
    if report.outcome == "failed":
        if report.nodeid not in _failing:
            _failing.add(report.nodeid)
            _emit("test", id=report.nodeid, when=report.when, outcome="failed", raised=raised)
    elif report.outcome == "passed" and raised:
        _emit("test", id=report.nodeid, when=report.when, outcome="passed", raised=True)
    elif report.outcome == "passed" and report.when == "call":
        _counts["call_passes"] += 1


if _hookimpl is not None:

    @_hookimpl(trylast=True)
    def pytest_sessionfinish(session, exitstatus):
        _emit(
            "finish",
            exitstatus=int(exitstatus),
            started=_counts["started"],
            call_passes=_counts["call_passes"],
            failing=len(_failing),
        )
