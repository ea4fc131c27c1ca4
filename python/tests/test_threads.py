# SPDX-License-Identifier: Apache-2.0
"""Threads calling dlsync at once: the GIL is released around dlsync's calls, every thread
sees its own errors, and the orderings hold (race checker) for each thread's exchanges."""
import threading
import unittest

import numpy as np

import dlsync
import dlsync.testing
from arrays import Array

THREADS = 4
ROUNDS = 50


def run_threads(target):
    errors = []

    def guarded(index):
        try:
            target(index)
        except BaseException as error:  # reported by the test thread
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


class Threads(unittest.TestCase):
    def test_concurrent_exchanges_on_the_simulator(self):
        with dlsync.testing.SimulatedDevice(jitter_us=50, seed=7) as sim:
            streams = [(sim.stream(non_blocking=True), sim.stream(non_blocking=True)) for _ in range(THREADS)]
            seen = [np.zeros(256, np.uint8) for _ in range(THREADS)]

            def work(i):
                producer, consumer = streams[i]
                for r in range(ROUNDS):
                    x = Array(np.zeros(256, np.uint8), device=(2, 0), stream=producer)
                    sim.write(producer, x.data, r + 1)
                    # per-thread default stream every other round: 2 is this thread's own
                    arg = 2 if r % 2 else consumer.handle
                    x.__dlpack__(stream=arg)
                    sim.copy(sim.per_thread_stream if r % 2 else consumer, x.data, seen[i])
                    (sim.per_thread_stream if r % 2 else consumer).synchronize()
                    sim.host_read(seen[i])
                    if not (seen[i] == r + 1).all():
                        raise AssertionError(f"thread {i} round {r}: wrong values")

            self.assertEqual(run_threads(work), [])

    def test_negative_control_concurrent_exchanges_without_export(self):
        with dlsync.testing.SimulatedDevice() as sim:
            streams = [(sim.stream(non_blocking=True), sim.stream(non_blocking=True)) for _ in range(THREADS)]

            def work(i):
                producer, consumer = streams[i]
                x = Array(np.zeros(64, np.uint8), device=(2, 0), stream=producer, sync=False)
                sim.write(producer, x.data, 1)
                x.__dlpack__(stream=consumer.handle)
                sim.copy(consumer, x.data, bytearray(64))

            self.assertEqual(run_threads(work), [])
            sim.synchronize()
            self.assertEqual(sim.race_count, THREADS)
            sim.close(check=False)

    def test_each_thread_gets_its_own_error_message(self):
        def work(i):
            for _ in range(ROUNDS):
                try:
                    dlsync.export((1, 0), None, i + 3)
                except ValueError as error:
                    if f"stream={i + 3} is invalid" not in str(error):
                        raise AssertionError(f"thread {i} got another thread's message: {error}")
                else:
                    raise AssertionError("no error")

        self.assertEqual(run_threads(work), [])

    def test_a_thread_waiting_on_the_simulator_lets_other_threads_run(self):
        """A thread blocked in the simulator (synchronizing a held stream) releases the
        GIL: the test thread can still run Python and release the stream. Holding the GIL
        there would deadlock this test."""
        with dlsync.testing.SimulatedDevice() as sim:
            s = sim.stream()
            gate = sim.hold(s)
            started, done = threading.Event(), threading.Event()

            def wait():
                started.set()
                s.synchronize()
                done.set()

            t = threading.Thread(target=wait)
            t.start()
            started.wait()
            self.assertFalse(done.is_set())  # the stream is held: it cannot have finished
            gate.release()
            t.join()
            self.assertTrue(done.is_set())


if __name__ == "__main__":
    unittest.main()
