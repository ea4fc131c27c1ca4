# SPDX-License-Identifier: Apache-2.0
"""dlsync.import_tensor against producers that fail or run Python code where dlsync calls
them: a C table (hostile_table.c, built by CMake) whose conversion sets KeyboardInterrupt
with PyErr_SetNone, SystemExit, a ValueError or nothing; Python producers whose
__getattr__ raises, whose __dlpack__ raises its own TypeError or refuses max_version; a gc
callback that calls import_tensor while it runs. Each names what it would catch."""
import os
import subprocess
import sys
import textwrap
import unittest

import numpy as np

import dlsync
import dlsync.testing
import table_producer as tp
from dlsync import _dlsync

try:
    import hostile_table
except ImportError as error:  # built by the CMake build next to the package
    hostile_table = None
    HOSTILE_REASON = f"hostile_table is not built ({error}): the CMake build makes it"

CPU = (1, 0)


@unittest.skipIf(hostile_table is None, "" if hostile_table else HOSTILE_REASON)
class ATableThatFails(unittest.TestCase):
    def tearDown(self):
        hostile_table.fail_with(None)

    def test_it_works_when_it_does_not_fail(self):
        before = hostile_table.deletions()
        capsule = dlsync.import_tensor(hostile_table.Hostile(), CPU, None)
        self.assertEqual(dlsync.tensor_release(capsule, None), dlsync.RELEASED_NOW)
        self.assertEqual(hostile_table.deletions() - before, 1)

    def test_keyboard_interrupt_set_with_pyerr_setnone_goes_on_as_it_is(self):
        # On 3.11 and before its value exists only once normalized: it must not be dropped.
        hostile_table.fail_with("interrupt")
        with self.assertRaises(KeyboardInterrupt) as raised:
            dlsync.import_tensor(hostile_table.Hostile(), CPU, None)
        self.assertIs(type(raised.exception), KeyboardInterrupt)

    def test_system_exit_goes_on_as_it_is(self):
        hostile_table.fail_with("exit")
        with self.assertRaises(SystemExit):
            try:
                dlsync.import_tensor(hostile_table.Hostile(), CPU, None)
            except Exception:  # what it must not be caught as
                self.fail("SystemExit came out as an Exception")

    def test_an_exception_is_the_cause_of_dlsyncs(self):
        hostile_table.fail_with("value")
        with self.assertRaises(RuntimeError) as raised:
            dlsync.import_tensor(hostile_table.Hostile(), CPU, None)
        self.assertIsInstance(raised.exception.__cause__, ValueError)
        self.assertTrue(str(raised.exception).startswith("dlsync.import_tensor: "), str(raised.exception))
        self.assertIn("managed_tensor_from_py_object_no_sync failed with -1", str(raised.exception))
        self.assertNotIn("set no Python exception", str(raised.exception))

    def test_minus_one_without_an_exception_is_said_so(self):
        hostile_table.fail_with("nothing")
        with self.assertRaises(RuntimeError) as raised:
            dlsync.import_tensor(hostile_table.Hostile(), CPU, None)
        self.assertIsNone(raised.exception.__cause__)
        self.assertIn("(the producer set no Python exception)", str(raised.exception))
        self.assertNotIn("an exception is set", str(raised.exception))


class Interrupting:
    """A producer whose attribute lookups raise (a proxy whose backend went away)."""

    def __init__(self, error):
        self.error = error

    def __getattr__(self, name):
        raise self.error


class Counting:
    """A producer on the CPU whose __dlpack__ counts its calls and raises what it is told."""

    def __init__(self, error=None, legacy=False):
        self.data, self.error, self.legacy, self.calls = np.arange(4, dtype=np.uint8), error, legacy, 0

    def __dlpack_device__(self):
        return CPU

    def __dlpack__(self, *, stream=None, **keywords):
        self.calls += 1
        if self.legacy and "max_version" in keywords:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        if self.error is not None:
            raise self.error
        return self.data.__dlpack__()


class PythonProducers(unittest.TestCase):
    def test_an_error_of_getattr_is_not_turned_into_no_dlpack(self):
        for error in (KeyboardInterrupt(), LookupError("the backend went away")):
            with self.subTest(error=type(error).__name__):
                with self.assertRaises(type(error)):
                    dlsync.import_tensor(Interrupting(error), CPU, None)

    def test_an_object_without_dlpack_is_told_so(self):
        with self.assertRaisesRegex(TypeError, "dlsync.import_tensor: object has neither a DLPack exchange table"):
            dlsync.import_tensor(object(), CPU, None)

    def test_a_producers_own_type_error_is_not_retried(self):
        producer = Counting(TypeError("the producer's own TypeError"))
        with self.assertRaisesRegex(TypeError, "the producer's own TypeError"):
            dlsync.import_tensor(producer, CPU, None)
        self.assertEqual(producer.calls, 1)

    def test_a_refused_max_version_is_asked_again_without_it(self):
        producer = Counting(legacy=True)
        capsule = dlsync.import_tensor(producer, CPU, None)
        self.assertEqual(producer.calls, 2)
        self.assertEqual(dlsync.tensor_release(capsule, None), dlsync.RELEASED_NOW)

    def test_a_producer_of_dlpack_1_is_asked_once(self):
        producer = Counting()
        dlsync.tensor_release(dlsync.import_tensor(producer, CPU, None), None)
        self.assertEqual(producer.calls, 1)

    def test_keyboard_interrupt_from_dlpack_goes_on_as_it_is(self):
        producer = Counting(KeyboardInterrupt())
        with self.assertRaises(KeyboardInterrupt):
            dlsync.import_tensor(producer, CPU, None)
        self.assertEqual(producer.calls, 1)


class InterruptedOnce:
    """A stream argument whose __index__ raises KeyboardInterrupt the first time, then -1."""

    def __init__(self):
        self.calls = 0

    def __index__(self):
        self.calls += 1
        if self.calls == 1:
            raise KeyboardInterrupt
        return -1


class StreamArguments(unittest.TestCase):
    def test_an_error_of_index_in_tensor_release_goes_on(self):
        capsule = dlsync.import_tensor(np.arange(4, dtype=np.uint8), CPU, None)
        stream = InterruptedOnce()
        with self.assertRaises(KeyboardInterrupt):
            dlsync.tensor_release(capsule, stream)
        self.assertEqual(stream.calls, 1)
        self.assertIn('"dltensor_versioned"', repr(capsule))  # not consumed: released again below
        self.assertEqual(dlsync.tensor_release(capsule, None), dlsync.RELEASED_NOW)


class StreamsOfOtherDevices(unittest.TestCase):
    """A table's current_work_stream on a device that is neither CUDA nor ROCm answers
    something that is no CUDA or HIP stream (PyTorch's XPU table: a sycl::queue*): dlsync
    never asks it there, and never uses an answer as a stream."""

    def setUp(self):
        tp.reset()

    def tearDown(self):
        tp.reset()

    def test_it_is_never_asked_and_nothing_is_ordered(self):
        tp.FRAMEWORK.fault, tp.FRAMEWORK.answer = "stream answers", 0xDEAD0  # not a stream of any runtime
        with dlsync.testing.SimulatedDevice() as sim:
            consumer = sim.stream()
            consumer.begin_capture()  # any dlsync stream work would be a node of this graph
            for device in ((14, 0), (8, 0), (7, 1)):  # oneAPI (XPU), Metal, Vulkan
                with self.subTest(device=device):
                    array = tp.TableArray(np.arange(4, dtype=np.uint8), device)
                    capsule = dlsync.import_tensor(array, device, None)
                    self.assertEqual(_dlsync._exchange_describe(capsule)["device"], device)
                    self.assertEqual(dlsync.tensor_release(capsule, None), dlsync.RELEASED_NOW)
            self.assertEqual(consumer.end_capture(), (0, 0))
        self.assertEqual(tp.FRAMEWORK.asked, 0)

    def test_with_a_consumer_on_cuda_too(self):
        # Memory on a device without streams has nothing to order (as a CPU tensor).
        tp.FRAMEWORK.fault, tp.FRAMEWORK.answer = "stream answers", 0xDEAD0
        with dlsync.testing.SimulatedDevice() as sim:
            consumer = sim.stream()
            consumer.begin_capture()
            array = tp.TableArray(np.arange(4, dtype=np.uint8), (14, 0))
            capsule = dlsync.import_tensor(array, (2, 0), consumer)
            self.assertEqual(dlsync.tensor_release(capsule, None), dlsync.RELEASED_NOW)
            self.assertEqual(consumer.end_capture(), (0, 0))
        self.assertEqual(tp.FRAMEWORK.asked, 0)
        self.assertEqual(tp.FRAMEWORK.live, {})


class GarbageCollectionInside(unittest.TestCase):
    def test_a_gc_callback_calling_import_tensor_inside_its_first_call(self):
        # Every new container collects (threshold 1; the tuple free list drained first), and
        # the nth collection imports again from the gc callback: for some n that is while
        # import_tensor's first call builds what it uses (3.11: static objects built then were
        # seen half made, a crash). Each n in a process of its own.
        script = textwrap.dedent("""
            import gc, sys, numpy as np, dlsync
            DEVICE = (1, 0)
            class Array:
                def __init__(self):
                    self.data = np.zeros(2)
                def __dlpack_device__(self):
                    return DEVICE
                def __dlpack__(self, **kwargs):
                    return self.data.__dlpack__()
            target, seen, depth = int(sys.argv[1]), [0], [0]
            def again(phase, info):
                if phase != "start" or depth[0]:
                    return
                seen[0] += 1
                if seen[0] == target:
                    depth[0] += 1
                    try:
                        dlsync.tensor_release(dlsync.import_tensor(Array(), (1, 0), None), None)
                    finally:
                        depth[0] -= 1
            x, keep = Array(), [(i, -i) for i in range(5000)]
            gc.callbacks.append(again)
            gc.set_threshold(1)
            dlsync.tensor_release(dlsync.import_tensor(x, (1, 0), None), None)
            gc.set_threshold(700)
            gc.callbacks.remove(again)
            print("imported")
        """)
        for n in range(1, 16):
            with self.subTest(nth_collection=n):
                done = subprocess.run([sys.executable, "-c", script, str(n)], capture_output=True, text=True,
                                      env=os.environ, timeout=120)
                self.assertEqual((done.returncode, done.stdout.strip()), (0, "imported"), done.stderr[-2000:])


if __name__ == "__main__":
    unittest.main()
