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
