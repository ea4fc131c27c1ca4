# SPDX-License-Identifier: Apache-2.0
"""dlsync.testing: a Python __dlpack__ on the simulated device, judged by the race
checker; every ordering test has its negative control (the same program without the
dependency), caught by the race checker and, with the producer held, by value. The
positive cases also run under jitter."""
import threading
import time
import unittest

import numpy as np

import dlsync
import dlsync.testing
from arrays import Array

SIZE = 4096


def _device_answers():
    try:
        dlsync.export((2, 0), None, 2)  # legacy -> per-thread: real streams where a device is
        return True
    except BufferError:
        return False


DEVICE_ANSWERS = _device_answers()  # asked before any test installs the simulator


class RoundTrip(unittest.TestCase):
    def exchange(self, sim, stream_arg, consumer, sync=True):
        """The producer writes on its stream, the consumer asks with stream_arg and reads on
        consumer: returns the bytes the consumer saw (after synchronizing)."""
        producer = sim.stream()
        x = Array(np.zeros(SIZE, np.uint8), device=(2, 0), stream=producer, sync=sync)
        sim.write(producer, x.data, 7)
        capsule = x.__dlpack__(stream=stream_arg)
        self.assertIn("dltensor", repr(capsule))
        seen = np.zeros(SIZE, np.uint8)
        sim.copy(consumer, x.data, seen)
        sim.synchronize()
        sim.host_read(seen)
        return seen

    def test_every_cuda_stream_cell_orders_the_producer_first(self):
        cases = [
            ("a stream handle", lambda sim, c: c.handle, lambda sim, c: c),
            ("None: the legacy default stream", lambda sim, c: None, lambda sim, c: sim.legacy_stream),
            ("1: the legacy default stream", lambda sim, c: 1, lambda sim, c: sim.legacy_stream),
            ("2: the per-thread default stream", lambda sim, c: 2, lambda sim, c: sim.per_thread_stream),
        ]
        for name, arg, consumer in cases:
            with self.subTest(name):
                with dlsync.testing.SimulatedDevice(jitter_us=200, seed=3) as sim:
                    c = sim.stream(non_blocking=True)
                    seen = self.exchange(sim, arg(sim, c), consumer(sim, c))
                    self.assertEqual(sim.race_count, 0, sim.race_report())
                self.assertTrue((seen == 7).all())

    def test_every_cuda_device_type(self):
        for device_type in dlsync.testing.CUDA_DEVICE_TYPES:
            with self.subTest(device_type=device_type):
                with dlsync.testing.SimulatedDevice() as sim:
                    producer, consumer = sim.stream(), sim.stream()
                    x = Array(np.zeros(64, np.uint8), device=(device_type, 0), stream=producer)
                    sim.write(producer, x.data, 1)
                    x.__dlpack__(stream=consumer.handle)
                    sim.copy(consumer, x.data, bytearray(64))

    def test_rocm_conventions_on_the_simulator(self):
        with dlsync.testing.SimulatedDevice(dlsync.testing.ROCM_DEVICE_TYPES) as sim:
            producer = sim.stream()
            x = Array(np.zeros(64, np.uint8), device=(10, 0), stream=producer)
            sim.write(producer, x.data, 1)
            x.__dlpack__(stream=0)  # ROCm's null stream, the legacy stream of the sim
            sim.copy(sim.legacy_stream, x.data, bytearray(64))

    def test_forgetting_export_fails_the_test(self):
        """Negative control: the same program with an __dlpack__ that skips dlsync."""
        with self.assertRaises(AssertionError) as raised:
            with dlsync.testing.SimulatedDevice() as sim:
                c = sim.stream()
                self.exchange(sim, c.handle, c, sync=False)
        report = str(raised.exception)
        self.assertIn("race", report)
        self.assertIn("dlsync.testing.fill", report)
        self.assertIn("dlsync.testing.copy", report)

    def test_stream_minus_one_is_no_sync(self):
        """-1 asks for no synchronization: reading on another stream is a race."""
        with dlsync.testing.SimulatedDevice() as sim:
            c = sim.stream()
            self.exchange(sim, -1, c)
            self.assertGreater(sim.race_count, 0)
            sim.close(check=False)

    def test_a_held_producer_shows_a_missing_dependency_by_value_every_time(self):
        """The producer's stream is held before its write, so the write has certainly not
        run when the consumer's copy may: with export the copy waits for it (7s), without
        it the copy reads the old zeros, deterministically."""
        for sync in (True, False):
            with self.subTest(sync=sync):
                with dlsync.testing.SimulatedDevice() as sim:
                    producer, consumer = sim.stream(non_blocking=True), sim.stream(non_blocking=True)
                    x = Array(np.zeros(SIZE, np.uint8), device=(2, 0), stream=producer, sync=sync)
                    gate = sim.hold(producer)
                    sim.write(producer, x.data, 7)
                    x.__dlpack__(stream=consumer.handle)
                    seen = np.full(SIZE, 1, np.uint8)
                    sim.copy(consumer, x.data, seen)
                    if sync:
                        gate.release()
                    consumer.synchronize()
                    sim.host_read(seen)
                    self.assertTrue((seen == (7 if sync else 0)).all())
                    gate.release()
                    if not sync:
                        self.assertGreater(sim.race_count, 0)
                        sim.close(check=False)

    def test_host_read_without_synchronization_is_a_race(self):
        with dlsync.testing.SimulatedDevice() as sim:
            s = sim.stream()
            buf = bytearray(32)
            sim.write(s, buf, 9)
            sim.host_read(buf)
            self.assertEqual(sim.race_count, 1)
            sim.close(check=False)
        with dlsync.testing.SimulatedDevice() as sim:
            s = sim.stream()
            buf = bytearray(32)
            sim.write(s, buf, 9)
            s.synchronize()
            sim.host_read(buf)
        self.assertEqual(buf, bytearray([9]) * 32)


class PushDep(unittest.TestCase):
    def run_pair(self, order):
        with dlsync.testing.SimulatedDevice() as sim:
            a, b = sim.stream(non_blocking=True), sim.stream(non_blocking=True)
            buf, out = bytearray(256), bytearray(256)
            sim.write(a, buf, 4)
            if order:
                dlsync.push_dep((2, 0), a, b)
            sim.copy(b, buf, out)
            sim.synchronize()
            races = sim.race_count
            sim.close(check=False)
        return races

    def test_push_dep_orders_and_its_absence_is_caught(self):
        self.assertEqual(self.run_pair(order=True), 0)
        self.assertGreater(self.run_pair(order=False), 0)


class Capture(unittest.TestCase):
    def tearDown(self):
        dlsync.set_capture_policy(dlsync.CAPTURE_STRICT)

    def test_none_while_the_producer_captures(self):
        with dlsync.testing.SimulatedDevice() as sim:
            producer = sim.stream(non_blocking=True)
            producer.begin_capture()
            self.assertTrue(producer.is_capturing)
            with self.assertRaises(BufferError) as raised:
                dlsync.export((2, 0), producer, None)
            self.assertIn("dl_sync_export", str(raised.exception))
            self.assertIn("-1", str(raised.exception))  # says what to pass instead
            dlsync.set_capture_policy(dlsync.CAPTURE_NONE_IS_NO_SYNC)
            dlsync.export((2, 0), producer, None)
            self.assertIsNotNone(producer.end_capture())  # the capture is still valid

    def test_capturing_producer_and_a_consumer_outside_the_capture(self):
        with dlsync.testing.SimulatedDevice() as sim:
            producer, consumer = sim.stream(non_blocking=True), sim.stream(non_blocking=True)
            producer.begin_capture()
            with self.assertRaisesRegex(BufferError, "capturing a graph and the consumer's stream .* is not"):
                dlsync.export((2, 0), producer, consumer.handle)
            producer.end_capture()

    def test_capturing_consumer_gets_an_external_wait(self):
        with dlsync.testing.SimulatedDevice() as sim:
            producer, consumer = sim.stream(non_blocking=True), sim.stream(non_blocking=True)
            consumer.begin_capture()
            dlsync.export((2, 0), producer, consumer.handle)
            kernels, external_waits = consumer.end_capture()
            self.assertEqual(external_waits, 1)

    def test_runtime_calls_are_made_without_the_gil(self):
        with dlsync.testing.SimulatedDevice() as sim:
            producer, consumer = sim.stream(), sim.stream()
            dlsync.export((2, 0), producer, consumer.handle)
            dlsync.export((2, 0), producer, None)  # the legacy stream, read by the table
            dlsync.export((2, 0), producer, 2)  # the per-thread stream
            dlsync.export((2, 0), None, consumer.handle)
            dlsync.push_dep((2, 0), consumer, producer)
            with dlsync.Group((2, 0), consumer) as group:
                group.add(producer)
            pool = dlsync.testing.StreamOrderedPool(64)
            dlsync.tensor_release(pool.export(pool.alloc(producer), producer), consumer)
            self.assertEqual(sim.runtime_calls_holding_the_gil, 0)

    def test_an_invalidated_capture_is_not_capturing(self):
        with dlsync.testing.SimulatedDevice() as sim:
            stream = sim.stream()
            stream.begin_capture()
            self.assertTrue(stream.is_capturing)
            with self.assertRaisesRegex(RuntimeError, "StreamCaptureUnsupported"):
                stream.synchronize()  # prohibited in a capture: it invalidates the capture
            self.assertFalse(stream.is_capturing)
            self.assertIsNone(stream.end_capture())  # no graph from an invalidated capture



class Release(unittest.TestCase):
    """A consumer is done with a tensor while its read is held behind a gate; the
    producer's stream-ordered pool hands the block to a new write at once. The release
    thread is off here, so that release_poll's count is exact; ReleaseThread turns it on."""

    def setUp(self):
        dlsync.release_thread(False)

    def tearDown(self):
        dlsync.release_thread(True)

    def reuse(self, how, reuse=True):
        sim = dlsync.testing.SimulatedDevice().open()
        try:
            a, b = sim.stream(non_blocking=True), sim.stream(non_blocking=True)
            pool = dlsync.testing.StreamOrderedPool(64)
            block, out = pool.alloc(a), bytearray(64)
            sim.write(a, block, 1)
            tensor = pool.export(block, a, reuse=reuse)
            dlsync.export((2, 0), a, b.handle)
            gate = sim.hold(b)
            sim.copy(b, block, out)  # the consumer's last read
            released = dlsync.tensor_release(tensor, b) if how == "release" else None
            del tensor  # unconsumed: the capsule calls the deleter itself
            sim.write(a, pool.alloc(a), 2)  # the pool's next user, on the producer's stream
            if how == "drop":
                a.synchronize()  # unordered, the reuse write lands while the read is held
            gate.release()
            sim.synchronize()
            ran = dlsync.release_poll()
            sim.host_read(out)
            return released, ran, bytes(out), sim.race_count
        finally:
            sim.close(check=False)

    def test_a_participating_producers_block_is_reused_after_the_read(self):
        released, ran, out, races = self.reuse("release")
        self.assertEqual(released, dlsync.RELEASED_ORDERED)
        self.assertEqual((ran, out, races), (0, b"\x01" * 64, 0))

    def test_a_foreign_producers_block_waits_for_the_read(self):
        released, ran, out, races = self.reuse("release", reuse=False)
        self.assertEqual(released, dlsync.RELEASE_DEFERRED)
        self.assertEqual((ran, out, races), (1, b"\x01" * 64, 0))

    def test_negative_control_dropping_the_tensor_races(self):
        released, ran, out, races = self.reuse("drop")
        self.assertIsNone(released)
        self.assertGreater(races, 0)
        self.assertEqual(out, b"\x02" * 64)  # the reuse write landed before the read

    def test_release_arguments(self):
        with dlsync.testing.SimulatedDevice() as sim:
            with self.assertRaisesRegex(TypeError, "DLPack capsule not yet consumed"):
                dlsync.tensor_release(object(), None)
            pool = dlsync.testing.StreamOrderedPool(8)
            stream = sim.stream()
            tensor = pool.export(pool.alloc(stream), stream)
            self.assertEqual(dlsync.tensor_release(tensor, -1), dlsync.RELEASED_NOW)
            with self.assertRaisesRegex(TypeError, "not yet consumed"):
                dlsync.tensor_release(tensor, -1)  # released: the capsule is used


class ReleaseThread(unittest.TestCase):
    """Deferred deleters run on dlsync's release thread, which the first deferred release
    starts: a consumer gets the producer's memory back without polling."""

    def test_a_deferred_release_finishes_without_a_poll(self):
        with dlsync.testing.SimulatedDevice() as sim:
            a, b = sim.stream(non_blocking=True), sim.stream(non_blocking=True)
            freed = threading.Event()
            block = bytearray(64)
            tensor = dlsync.testing._sim.tensor(a, block, freed.set, None)
            gate = sim.hold(b)
            self.assertEqual(dlsync.tensor_release(tensor, b), dlsync.RELEASE_DEFERRED)
            self.assertTrue(dlsync.release_thread_running())
            self.assertFalse(freed.wait(0.05))  # the consumer's work is held
            gate.release()
            self.assertTrue(freed.wait(10))  # no poll: the thread ran the deleter

    def test_turned_off_only_a_poll_runs_deleters(self):
        dlsync.release_thread(False)
        try:
            self.assertFalse(dlsync.release_thread_running())
            with dlsync.testing.SimulatedDevice() as sim:
                a, b = sim.stream(non_blocking=True), sim.stream(non_blocking=True)
                freed = []
                tensor = dlsync.testing._sim.tensor(a, bytearray(8), lambda: freed.append(1), None)
                self.assertEqual(dlsync.tensor_release(tensor, b), dlsync.RELEASE_DEFERRED)
                self.assertFalse(dlsync.release_thread_running())
                b.synchronize()
                time.sleep(0.05)
                self.assertEqual(freed, [])
                self.assertEqual(dlsync.release_poll(), 1)
                self.assertEqual(freed, [1])
        finally:
            dlsync.release_thread(True)

    def test_a_capsule_is_released_once_across_threads(self):
        """Threads releasing one capsule at once: one release, the others TypeError, one
        deleter call. The capsule is marked used before the GIL is let go."""
        with dlsync.testing.SimulatedDevice() as sim:
            stream = sim.stream()
            for _ in range(50):
                deleted = []
                tensor = dlsync.testing._sim.tensor(stream, bytearray(8), lambda: deleted.append(1), None)
                outcomes = []
                barrier = threading.Barrier(4)

                def release():
                    barrier.wait()
                    try:
                        outcomes.append(dlsync.tensor_release(tensor, -1))
                    except TypeError:
                        outcomes.append("used")

                threads = [threading.Thread(target=release) for _ in range(4)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                self.assertEqual(sorted(outcomes, key=str), [dlsync.RELEASED_NOW] + ["used"] * 3)
                self.assertEqual(deleted, [1])

    def test_a_failed_release_leaves_the_capsule_unconsumed(self):
        with dlsync.testing.SimulatedDevice() as sim:
            deleted = []
            tensor = dlsync.testing._sim.tensor(sim.stream(), bytearray(8), lambda: deleted.append(1), None)
            with self.assertRaises(RuntimeError):
                dlsync.tensor_release(tensor, 7)  # no stream of the simulator: the runtime refuses
            self.assertEqual(dlsync.tensor_release(tensor, -1), dlsync.RELEASED_NOW)
            self.assertEqual(deleted, [1])


class Errors(unittest.TestCase):
    def test_a_runtime_error_is_a_runtime_error(self):
        with dlsync.testing.SimulatedDevice() as sim:
            consumer, gone = sim.stream(), sim.stream()
            gone.destroy()
            with self.assertRaises(RuntimeError) as raised:
                dlsync.export((2, 0), gone, consumer.handle)
            self.assertRegex(str(raised.exception), r"^dl_sync_export: \[dl_sync_sim_\w+\]\[simErrorInvalidResourceHandle\]")

    def test_one_simulated_device_at_a_time(self):
        with dlsync.testing.SimulatedDevice():
            with self.assertRaisesRegex(RuntimeError, "already installed"):
                dlsync.testing.SimulatedDevice().open()

    def test_bad_arguments(self):
        with dlsync.testing.SimulatedDevice() as sim:
            handle = sim.stream().handle
        with self.assertRaises(TypeError):
            dlsync.testing.SimulatedDevice(device_types=("cuda",)).open()
        with self.assertRaisesRegex(ValueError, "no streams"):
            dlsync.testing.SimulatedDevice(device_types=(1,)).open()
        with dlsync.testing.SimulatedDevice() as sim:
            with self.assertRaisesRegex(ValueError, "ids 0 to 3"):
                sim.stream(device=9)
            with self.assertRaisesRegex(ValueError, "capture mode"):
                sim.stream().begin_capture("everywhere")
            with self.assertRaises(TypeError):
                sim.write(sim.stream(), b"read-only", 1)
            # a stray int would be read through by the simulator: refused instead
            for stray in (0xDEAD0, 3):
                with self.assertRaisesRegex(ValueError, "not a stream of the simulated device"):
                    sim.write(stray, bytearray(4), 1)
                with self.assertRaisesRegex(ValueError, "not a stream of the simulated device"):
                    dlsync.testing.Stream(stray).synchronize()
            sim.write(None, bytearray(4), 1)  # the legacy stream
            sim.write(2, bytearray(4), 1)  # this thread's per-thread stream
        with dlsync.testing.SimulatedDevice() as sim:
            with self.assertRaisesRegex(ValueError, "not a stream of the simulated device"):
                sim.write(handle, bytearray(4), 1)  # a stream of the previous opening

    def test_gates(self):
        with dlsync.testing.SimulatedDevice() as sim:
            sim.hold(sim.stream())  # never released: closing releases it
        with dlsync.testing.SimulatedDevice() as sim:
            gate = sim.hold(sim.stream())
            with self.assertRaisesRegex(ValueError, "not a gate"):
                dlsync.testing.Gate(12345).release()
        with dlsync.testing.SimulatedDevice() as sim:
            with self.assertRaisesRegex(ValueError, "not a gate"):
                gate.release()  # a gate of the previous opening

    def test_closing_restores_the_previous_backends(self):
        """After close, CUDA types are served by what was there before: here the CUDA
        runtime backend without a device (ENODEV), or no backend (ENOTSUP)."""
        if DEVICE_ANSWERS:
            self.skipTest("a CUDA device answers: the default streams are real")
        with dlsync.testing.SimulatedDevice():
            dlsync.export((2, 0), None, 2)  # legacy -> per-thread, on the simulator
        with self.assertRaises(BufferError):
            dlsync.export((2, 0), None, 2)


if __name__ == "__main__":
    unittest.main()
