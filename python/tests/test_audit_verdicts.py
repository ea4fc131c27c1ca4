# SPDX-License-Identifier: Apache-2.0
"""dlsync.audit's judgement, from runs made up here (no device): a cell is judged on every
piece of evidence (the race checker's alone makes a RACE), a host blocked in any run is
said so, and the summary counts a reference's host-blocked cells as ordered and a
control's RACE cells as caught. Each case comes with the run that must not change it."""
import unittest

from dlsync.audit._cells import Run, judge
from dlsync.audit._core import ERROR, HOST_BLOCKED, ORDERED, RACE, Cell
from dlsync.audit._report import JUDGED_STREAM_KEYS, PairResult, Report


def run(seed=1, raced=False, wrong=0, races=0, blocked=False, error=None):
    r = Run(seed, True)
    r.raced, r.wrong, r.races, r.blocked, r.error = raced, wrong, races, blocked, error
    return r


class Judge(unittest.TestCase):
    def test_clean_runs_are_ordered(self):
        self.assertEqual(judge("handle", [run(1), run(2)]).verdict, ORDERED)

    def test_the_race_checker_alone_makes_a_race(self):
        # Values right, nothing finished early: one race the simulated device's checker saw.
        cell = judge("handle", [run(1), run(2, races=1)])
        self.assertEqual(cell.verdict, RACE)
        self.assertIn("the race checker found 1 race(s)", cell.detail)
        self.assertIn("1/2 runs", cell.detail)

    def test_each_other_evidence_makes_a_race_too(self):
        for evidence in ({"raced": True}, {"wrong": 1}):
            with self.subTest(**evidence):
                self.assertEqual(judge("handle", [run(1), run(2, **evidence)]).verdict, RACE)

    def test_one_blocked_run_of_several_is_host_blocked(self):
        for runs in ([run(1, blocked=True), run(2)], [run(1), run(2, blocked=True)],
                     [run(1, blocked=True), run(2, blocked=True)]):
            with self.subTest(blocked=[r.blocked for r in runs]):
                cell = judge("handle", runs)
                self.assertEqual(cell.verdict, HOST_BLOCKED)
                self.assertIn(f"{sum(r.blocked for r in runs)}/2 runs", cell.detail)

    def test_an_error_in_any_run_is_an_error(self):
        self.assertEqual(judge("handle", [run(1), run(2, error="BufferError: no")]).verdict, ERROR)


def report(verdict, control=False, reference=False):
    cells = {key: Cell(key, verdict) for key in JUDGED_STREAM_KEYS}
    cells["-1"] = Cell("-1", RACE, race_expected=True)
    pair = PairResult("p", "c", "sim", cells, control=control, reference=reference)
    return Report("sim", {"gate": "test"}, {}, [pair], runs=2, window=0.1, cells=list(cells))


class Summary(unittest.TestCase):
    def line(self, r, which):
        return next(line for line in r.summary_lines() if line.startswith(f"dlsync.audit: {which}:"))

    def test_a_references_host_blocked_cells_are_ordered(self):
        n = len(JUDGED_STREAM_KEYS)
        for verdict in (ORDERED, HOST_BLOCKED):
            with self.subTest(verdict=verdict):
                r = report(verdict, reference=True)
                self.assertEqual(self.line(r, "reference"), f"dlsync.audit: reference: stream cells {n}, ordered {n}")
                self.assertEqual(r.to_json()["summary"]["reference"], {"judged": n, "ordered": n})
        r = report(RACE, reference=True)
        self.assertEqual(self.line(r, "reference"), f"dlsync.audit: reference: stream cells {n}, ordered 0")

    def test_a_controls_race_cells_are_caught(self):
        n = len(JUDGED_STREAM_KEYS)
        self.assertEqual(self.line(report(RACE, control=True), "controls"),
                         f"dlsync.audit: controls: stream cells {n}, RACE {n}")
        self.assertEqual(self.line(report(HOST_BLOCKED, control=True), "controls"),
                         f"dlsync.audit: controls: stream cells {n}, RACE 0")


if __name__ == "__main__":
    unittest.main()


class MinimalAdapter(unittest.TestCase):
    """docs/audit.md's --simulated adapter, with only the methods it says are enough: it has
    no marker, so whether a read completed is unknown, which must not read as a RACE."""

    def run_pair(self, producer, consumer):
        import dlsync.audit
        from audit_simulated_adapter import MyArrayAdapter, PlainAdapter

        adapters = {"mine": MyArrayAdapter(), "plain": PlainAdapter()}
        report = dlsync.audit.run(pairs=[(adapters.get(producer, producer), adapters.get(consumer, consumer))],
                                  simulated=True, window=0.05, cells=["handle"])
        return report, report.pairs[0]

    def test_a_correct_producer_is_ordered_not_a_race(self):
        for producer, consumer in (("mine", "mine"), ("dlsync", "mine")):
            with self.subTest(producer=producer, consumer=consumer):
                report, pair = self.run_pair(producer, consumer)
                for key in ("handle",):
                    self.assertEqual(pair.cells[key].verdict, ORDERED, (key, pair.cells[key].detail))
                    self.assertIn("completion not checked", pair.cells[key].detail)
                self.assertEqual(report.exit_status(), 0)

    def test_a_producer_without_dlsync_is_still_a_race(self):
        report, pair = self.run_pair("plain", "mine")
        for key in ("handle",):
            self.assertEqual(pair.cells[key].verdict, RACE, key)
        self.assertEqual(report.exit_status(), 1)


class ErrorsAndGpu(unittest.TestCase):
    def test_the_json_tells_expected_errors_from_unexpected_ones(self):
        cells = {"None": Cell("None", ORDERED), "1": Cell("1", ERROR, "stream on the CPU", error_expected=True),
                 "exchange": Cell("exchange", ERROR, "JaxRuntimeError: a harness failure")}
        r = Report("cuda", {"gate": "test"}, {}, [PairResult("a", "b", "cpu", cells)], runs=2, window=0.1,
                   cells=list(cells))
        found = r.to_json()
        self.assertTrue(found["pairs"][0]["cells"]["1"]["error_expected"])
        self.assertFalse(found["pairs"][0]["cells"]["exchange"]["error_expected"])
        self.assertEqual(found["summary"]["errors_unexpected"], [{"producer": "a", "consumer": "b", "cell": "exchange"}])
        self.assertEqual((found["summary"]["error as asked"], found["summary"]["error unexpected"]), (1, 1))
        self.assertIn("dlsync.audit: unexpected errors: 1: a -> b exchange", r.summary_lines())

    def test_require_gpu_fails_a_run_of_cpu_pairs_only(self):
        cpu_only = Report("cuda", {"gate": "test"}, {}, [PairResult("a", "b", "cpu", {"None": Cell("None", ORDERED)})],
                          runs=2, window=0.1, cells=["None"])
        self.assertIn("dlsync.audit: no GPU: 1 CPU pairs audited", cpu_only.summary_lines())
        self.assertEqual(cpu_only.exit_status(), 0)
        self.assertEqual(cpu_only.exit_status(require_gpu=True), 4)
        self.assertEqual(cpu_only.to_json(require_gpu=True)["exit_status"], 4)
        on_gpu = Report("cuda", {"gate": "test"}, {}, [PairResult("a", "b", "cuda", {"None": Cell("None", ORDERED)})],
                        runs=2, window=0.1, cells=["None"])
        self.assertEqual(on_gpu.exit_status(require_gpu=True), 0)
        self.assertFalse(any("no GPU" in line for line in on_gpu.summary_lines()))


class JaxHarness(unittest.TestCase):
    def test_a_consumer_asking_without_max_version_gets_the_legacy_capsule(self):
        import numpy as np

        import dlsync
        from dlsync.audit._cells import Imported

        for kwargs, name in (({}, "dltensor"), ({"max_version": None}, "dltensor"),
                             ({"max_version": (0, 8)}, "dltensor"), ({"max_version": (1, 3)}, "dltensor_versioned")):
            with self.subTest(**kwargs):
                capsule = dlsync.import_tensor(np.arange(4, dtype=np.uint8), (1, 0), None)
                handed = Imported(capsule, (1, 0)).__dlpack__(stream=None, **kwargs)
                self.assertIn(f'"{name}"', repr(handed))
                if name == "dltensor":  # what any NumPy takes (1.x knows no versioned capsule)
                    self.assertEqual(np.from_dlpack(_Holder(handed)).tolist(), [0, 1, 2, 3])
                else:
                    dlsync.tensor_release(handed, None)


class _Holder:
    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, **kwargs):
        return self.capsule
