# SPDX-License-Identifier: Apache-2.0
"""dlsync.audit's driver gate over the fake CUDA driver (DL_SYNC_LIBCUDA names it; ctest
python_audit_fake_driver): cuStreamWaitValue32 on host-mapped memory, resolved through
dlsync's own driver loading, holds a stream until the host opens the gate, and the audit
over the fake driver reports an ordered producer as ordered and its control as a RACE.

Each ordering check has its control beside it: the same program without the hold, or
without dlsync.export, must show the work completed."""
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

import dlsync
import dlsync.audit
from dlsync import _dlsync

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

if not os.environ.get("DL_SYNC_LIBCUDA"):
    raise unittest.SkipTest("not installed: DL_SYNC_LIBCUDA names no fake driver (ctest sets it)")

import audit_fake_driver as fake  # noqa: E402

BLOCKING = 0


class DriverGate(unittest.TestCase):
    """The gate itself: dlsync._dlsync._driver_gate* over the fake driver."""

    def setUp(self) -> None:
        self.driver = fake.driver()
        self.held = self.driver.stream()
        self.index, self.info = _dlsync._driver_gate(self.held)

    def tearDown(self) -> None:
        _dlsync._driver_gate_open(self.index)

    def test_the_gate_says_what_the_device_offers(self) -> None:
        self.assertEqual(self.info, {"device": 0, "can_map_host_memory": 1,
                                     "can_use_stream_wait_value_nor": 1,
                                     "can_use_stream_mem_ops_v1": 1})
        self.assertTrue(_dlsync._driver_stream_non_blocking(self.held))
        self.assertFalse(_dlsync._driver_stream_non_blocking(self.driver.stream(BLOCKING)))

    def test_work_behind_the_gate_waits_until_the_host_opens_it(self) -> None:
        waits = self.driver.counter("value_waits")
        _dlsync._driver_gate_hold(self.index, self.held)
        self.assertEqual(self.driver.counter("value_waits"), waits + 1)
        behind = self.driver.record(self.held)
        other = self.driver.record(self.driver.stream())  # the control: nothing holds it
        self.assertTrue(other())
        self.assertFalse(behind())
        self.assertEqual(self.driver.lib.cuStreamQuery(ctypes_stream(self.held)), fake.CUDA_ERROR_NOT_READY)
        _dlsync._driver_gate_open(self.index)
        self.assertTrue(behind())
        self.assertEqual(self.driver.lib.cuStreamQuery(ctypes_stream(self.held)), fake.CUDA_SUCCESS)

    def test_a_consumer_ordered_by_dlsync_waits_too(self) -> None:
        ordered, unordered = self.driver.stream(), self.driver.stream()
        _dlsync._driver_gate_hold(self.index, self.held)
        dlsync.export(fake.DEVICE, self.held, ordered)
        after_export = self.driver.record(ordered)
        without_export = self.driver.record(unordered)  # the control
        self.assertFalse(after_export())
        self.assertTrue(without_export())
        _dlsync._driver_gate_open(self.index)
        self.assertTrue(after_export())

    def test_the_legacy_stream_waits_for_a_held_blocking_stream_only(self) -> None:
        blocking = self.driver.stream(BLOCKING)
        _dlsync._driver_gate_hold(self.index, self.held)  # non-blocking: the control
        self.assertTrue(self.driver.record(1)())
        _dlsync._driver_gate_hold(self.index, blocking)
        self.assertFalse(self.driver.record(1)())
        _dlsync._driver_gate_open(self.index)
        self.assertTrue(self.driver.record(1)())

    def test_each_hold_waits_for_its_own_opening(self) -> None:
        _dlsync._driver_gate_hold(self.index, self.held)
        _dlsync._driver_gate_open(self.index)
        _dlsync._driver_gate_hold(self.index, self.held)  # a new value: the old one is not enough
        self.assertFalse(self.driver.record(self.held)())
        _dlsync._driver_gate_open(self.index)
        self.assertTrue(self.driver.record(self.held)())

    def test_the_timer_opens_a_gate_the_host_does_not(self) -> None:
        _dlsync._driver_gate_hold(self.index, self.held)
        behind = self.driver.record(self.held)
        _dlsync._driver_gate_timer(self.index, 0.05)
        # cuStreamSynchronize blocks until the timer thread writes the word.
        start = time.monotonic()
        self.assertEqual(self.driver.lib.cuStreamSynchronize(ctypes_stream(self.held)), 0)
        self.assertGreater(time.monotonic() - start, 0.02)
        self.assertTrue(_dlsync._driver_gate_timer_stop(self.index))
        self.assertTrue(behind())
        _dlsync._driver_gate_timer(self.index, 10.0)  # stopped before it fires: the control
        self.assertFalse(_dlsync._driver_gate_timer_stop(self.index))


def ctypes_stream(handle: int) -> object:
    import ctypes

    return ctypes.c_void_p(handle)


def audit(*arguments: str, env: "dict[str, str] | None" = None) -> "tuple[int, str, dict]":
    """python -m dlsync.audit with the fake driver's adapters; (exit status, output, JSON)."""
    with tempfile.TemporaryDirectory() as scratch:
        report = os.path.join(scratch, "audit.json")
        process = subprocess.run(
            [sys.executable, "-m", "dlsync.audit", "--adapter", "audit_fake_driver:ADAPTERS",
             "--json", report, "--window", "0.02", *arguments],
            cwd=HERE, env=dict(os.environ, **(env or {}), PYTHONPATH=os.pathsep.join(
                [HERE, os.environ.get("PYTHONPATH", "")])),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=240)
        found = {}
        if os.path.exists(report):
            with open(report) as f:
                found = json.load(f)
        return process.returncode, process.stdout, found


def verdicts(found: dict) -> "dict[str, str]":
    return {key: cell["verdict"] for key, cell in found["pairs"][0]["cells"].items()}


class AuditOverTheFakeDriver(unittest.TestCase):
    """The command, its gate the driver's, over the fake driver."""

    def test_an_ordered_producer_is_ordered(self) -> None:
        status, output, found = audit("--producer", "fake-dlsync", "--consumer", "fake")
        self.assertEqual(status, 0, output)
        self.assertIn("cuStreamWaitValue32", found["world"]["gate"])
        self.assertEqual(verdicts(found), {
            "None": "ordered", "-1": "RACE", "1": "ordered", "2": "ordered", "handle": "ordered",
            "exchange": "not available", "release": "not available", "capture": "not available"})
        self.assertTrue(found["pairs"][0]["cells"]["-1"]["race_expected"])
        self.assertIn("values not checked", found["pairs"][0]["cells"]["None"]["detail"])
        self.assertIn("dlsync.audit: reference: stream cells 4, ordered 4", output)

    def test_the_control_is_a_race_and_fails_the_run(self) -> None:
        status, output, found = audit("--producer", "fake-control", "--consumer", "fake")
        self.assertEqual(status, 1, output)
        cells = found["pairs"][0]["cells"]
        for key in ("None", "1", "2", "handle"):
            self.assertEqual(cells[key]["verdict"], "RACE", key)
            self.assertIn("finished while the producer was held", cells[key]["detail"])
        self.assertIn("dlsync.audit: controls: stream cells 4, RACE 4", output)
        self.assertEqual(found["exit_status"], 1)
        allowed, output, _ = audit("--producer", "fake-control", "--consumer", "fake", "--allow-race")
        self.assertEqual(allowed, 0, output)

    def test_without_stream_memory_operations_a_timed_window_with_a_warning(self) -> None:
        status, output, found = audit("--producer", "fake-control", "--consumer", "fake",
                                      env={"FAKE_CUDA_NO_STREAM_MEM_OPS": "1"})
        self.assertIn("CUDA_ERROR_NOT_SUPPORTED", output)
        self.assertTrue(found["world"]["warnings"], output)
        self.assertIn("a timed window", found["world"]["gate"])
        # The fake's work completes at once, so no window catches the control: the report
        # says why the verdicts are weak instead of claiming a gate.
        self.assertEqual(verdicts(found)["None"], "ordered")
        self.assertIn("no gate", found["pairs"][0]["cells"]["None"]["detail"])
        self.assertEqual(status, 0, output)

    def test_without_mapped_memory_a_timed_window_with_a_warning(self) -> None:
        _, output, found = audit("--producer", "fake-dlsync", "--consumer", "fake",
                                 env={"FAKE_CUDA_NO_MAPPED_MEMORY": "1"})
        self.assertIn("cannot map host memory", " ".join(found["world"]["warnings"]), output)


if __name__ == "__main__":
    unittest.main()
