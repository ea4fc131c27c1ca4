# SPDX-License-Identifier: Apache-2.0
"""Runs the Python GPU suite (the test_gpu_*.py files here) with unittest, so that it needs
no pytest (``python3 -m pytest python/tests/gpu`` runs the same tests where pytest is),
and prints the lines scripts/gpu-check.sh reads:

    python_gpu: python: 3.12.3 (/usr/bin/python3)
    python_gpu: frameworks: torch 2.11.0 (CUDA 13.0), cupy 14.0.0, jax 0.11.0, cuda.core 0.5.0
    python_gpu: test test_gpu_exchange.ExchangeThroughDlsync.test_torch_to_cupy: passed
    python_gpu: test ...: skipped: not installed: CuPy (ModuleNotFoundError: ...)
    python_gpu: summary: ordered runs N, control runs M, controls that observed a race M, ...

or, when every test skipped, ``python_gpu: skipped: <the reasons>``. Exit status: 0 when no
test failed, 1 when one failed, 77 when every test skipped, or when the suite's own
requirement (numpy) is not installed: ``python_gpu: skipped: not installed: numpy (...)``,
which gpu-check.sh reports as skipped where no GPU is listed and as a failure where one is.

--results DIR: the tables (audit-controls.md, python-cost.md) and counts.json go there.
--expect-skipped: the check for machines without a GPU: passes (0) only when tests were
collected and every one skipped with a reason of a known kind ("not installed:", "no
GPU:", "no gate kernels:"), none failed, with unittest and then, where it is installed,
with pytest; where a framework sees a GPU it runs nothing and exits 77 (gpu-check.sh runs
the suite there).
"""
import argparse
import importlib
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REASON_KINDS = ("not installed:", "no GPU:", "no gate kernels:")
# What every test needs (gpu_support imports it); the frameworks are each test's own skip.
REQUIRED = ("numpy",)


def missing_requirements():
    missing = []
    for name in REQUIRED:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as error:
            missing.append(f"not installed: {name} ({type(error).__name__}: {error})")
    return missing


class Recording(unittest.TextTestResult):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outcomes = []  # (test id, outcome, detail)

    def addSuccess(self, test):
        super().addSuccess(test)
        self.outcomes.append((test.id(), "passed", ""))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.outcomes.append((test.id(), "skipped", reason))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.outcomes.append((test.id(), "FAILED", str(err[1]).splitlines()[0] if str(err[1]) else ""))

    def addError(self, test, err):
        super().addError(test, err)
        self.outcomes.append((test.id(), "ERROR", f"{err[0].__name__}: {err[1]}".splitlines()[0]))

    def addExpectedFailure(self, test, err):  # not used by the suite
        super().addExpectedFailure(test, err)
        self.outcomes.append((test.id(), "FAILED", "expected failure"))

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self.outcomes.append((test.id(), "FAILED", "unexpected success"))


def distinct_reasons(reasons):
    """Each reason once, a reason that joins several ("... and ...", "...; ...") split up."""
    parts = []
    for reason in reasons:
        for part in reason.replace(" and not installed:", "; not installed:").replace(
                " and no GPU:", "; no GPU:").split("; "):
            parts.append(part)
    return list(dict.fromkeys(parts))


def expect_skipped_with_pytest():
    """pytest collects the same tests, and each skips with its reason."""
    try:
        import pytest
    except ImportError:
        print("python_gpu: check (pytest): not run, pytest is not installed (Debian: python3-pytest)")
        return 0

    class Outcomes:
        def __init__(self):
            self.reports = []

        def pytest_runtest_logreport(self, report):
            if report.when == "call" or report.outcome != "passed":
                reason = report.longrepr[2] if report.skipped and isinstance(report.longrepr, tuple) else ""
                self.reports.append((report.nodeid, report.outcome, reason))

    outcomes = Outcomes()
    status = pytest.main(["-q", "-rs", "-p", "no:cacheprovider", HERE], plugins=[outcomes])
    problems = [f"{node}: {outcome}" for node, outcome, _ in outcomes.reports if outcome != "skipped"]
    problems += [f"{node} skipped without a known reason: {reason!r}" for node, outcome, reason
                 in outcomes.reports if outcome == "skipped" and
                 not reason.split(": ", 1)[-1].startswith(REASON_KINDS) and not reason.startswith(REASON_KINDS)]
    if not outcomes.reports:
        problems.append("pytest collected no test")
    if status not in (0,):  # all skipped is 0
        problems.append(f"pytest exited {int(status)}")
    for problem in problems:
        print(f"python_gpu: check: {problem}")
    print(f"python_gpu: check (pytest): {len(outcomes.reports)} tests collected, "
          f"{'every one skipped with its reason' if not problems else 'NOT all skipped as expected'}")
    return 1 if problems else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", help="folder for the tables and counts.json")
    parser.add_argument("--expect-skipped", action="store_true",
                        help="pass only if every test skipped with a known reason")
    options = parser.parse_args()
    if options.results:
        os.environ["DL_SYNC_GPU_RESULTS_DIR"] = os.path.abspath(options.results)
    sys.path.insert(0, HERE)
    missing = missing_requirements()
    if missing:  # no test could even be collected
        print(f"python_gpu: python: {sys.version.split()[0]} ({sys.executable})")
        print(f"python_gpu: skipped: {'; '.join(missing)}")
        return 77
    if options.expect_skipped:
        import gpu_support

        answering = [f.name for f in gpu_support.GPU_FRAMEWORKS if f.reason() is None]
        if answering:
            print(f"skipped: a GPU answers {', '.join(answering)} here: the suite runs, through "
                  "scripts/gpu-check.sh, instead of skipping")
            return 77

    suite = unittest.TestLoader().discover(HERE, pattern="test_gpu_*.py", top_level_dir=HERE)
    runner = unittest.TextTestRunner(stream=sys.stderr, verbosity=2, resultclass=Recording)
    result = runner.run(suite)

    import gpu_support  # imported by the tests already: the same module, with their counts

    print(f"python_gpu: python: {sys.version.split()[0]} ({sys.executable})")
    print(f"python_gpu: frameworks: {gpu_support.versions()}")
    for test_id, outcome, detail in result.outcomes:
        print(f"python_gpu: test {test_id}: {outcome}" + (f": {detail}" if detail else ""))
    # A module that failed to import shows as one error (unittest's _FailedTest).
    gpu_support.write_counts()
    counts = gpu_support.COUNTS
    passed = sum(1 for _, outcome, _ in result.outcomes if outcome == "passed")
    failed = sum(1 for _, outcome, _ in result.outcomes if outcome in ("FAILED", "ERROR"))
    skipped = [(t, reason) for t, outcome, reason in result.outcomes if outcome == "skipped"]

    if options.expect_skipped:
        problems = []
        if not result.outcomes:
            problems.append("no test was collected")
        if passed or failed:
            problems.append(f"{passed} passed and {failed} failed where every test should skip")
        for test_id, reason in skipped:
            if not reason.startswith(REASON_KINDS):
                problems.append(f"{test_id} skipped without a known reason: {reason!r}")
        for problem in problems:
            print(f"python_gpu: check: {problem}")
        print(f"python_gpu: check: {len(skipped)} tests collected, "
              f"{'every one skipped with its reason' if not problems else 'NOT all skipped as expected'}")
        return 1 if problems or expect_skipped_with_pytest() else 0

    if failed == 0 and passed == 0 and skipped:
        reasons = "; ".join(distinct_reasons(reason for _, reason in skipped))
        print(f"python_gpu: skipped: {reasons}")
        return 77
    print(f"python_gpu: summary: ordered runs {counts['ordered']}, control runs {counts['controls']}, "
          f"controls that observed a race {counts['raced']}, host blocked in {counts['host_blocked']} "
          f"ordered runs; tests passed {passed}, skipped {len(skipped)}, failed {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
