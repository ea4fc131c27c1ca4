# SPDX-License-Identifier: Apache-2.0
"""Several Python threads exporting at once: each has its own producer and consumer streams
and its own gate, and runs controls, gated ordered runs and ungated runs while the others
do; dlsync.export releases the GIL, so their calls overlap."""
import threading
import unittest

import numpy as np

import dlsync
import gpu_support as g

THREADS = 4
CONTROL_GATED = 1
ORDERED_GATED = 2
UNGATED = 20
HAMMER = 2000  # exports per thread, back to back, all threads at once


class ThreadsExportAtOnce(unittest.TestCase):
    def test_threads_export_at_once(self):
        fw = g.any_array_framework()
        g.kernels()
        barrier = threading.Barrier(THREADS)
        results = [None] * THREADS

        def worker(index):
            record = {"gated": [], "wrong": 0, "error": None}
            results[index] = record
            gate = None
            try:
                producer_stream, consumer_stream = fw.stream(), fw.stream()
                array = fw.empty()
                stale = np.full(g.COUNT, g.STALE, np.int32)
                gate = g.Gate()
                seeds = [1000 * (index + 1) + run for run in range(CONTROL_GATED + ORDERED_GATED + UNGATED + 1)]
                sources = {seed: fw.pattern(seed) for seed in seeds}

                def exchange(seed, sync):
                    producer = g.Producer(array, producer_stream, fw.capsule, sync=sync)
                    return lambda: fw.consume(producer, consumer_stream)

                fw.set(array, stale)  # warm-up, gate open
                fw.write(producer_stream, array, sources[seeds[-1]])
                exchange(seeds[-1], True)()
                g.device_synchronize()
                barrier.wait()
                for run in range(CONTROL_GATED + ORDERED_GATED):
                    ordered = run >= CONTROL_GATED
                    seed = seeds[run]
                    fw.set(array, stale)
                    outcome = g.gated_run(
                        gate, fw.handle(producer_stream),
                        lambda seed=seed: fw.write(producer_stream, array, sources[seed]),
                        exchange(seed, ordered), g.pattern(seed),
                        g.RACE_WINDOW if ordered else g.RUNS_SOON, g.device_synchronize)
                    record["gated"].append((ordered, outcome))
                for run in range(UNGATED):
                    seed = seeds[CONTROL_GATED + ORDERED_GATED + run]
                    fw.set(array, stale)
                    fw.write(producer_stream, array, sources[seed])
                    consumed = exchange(seed, True)()
                    g.device_synchronize()
                    record["wrong"] += int(np.count_nonzero(consumed.to_host() != g.pattern(seed)))
                barrier.wait()
                for _ in range(HAMMER):  # every thread in dlsync.export at the same time
                    dlsync.export(g.DEVICE, producer_stream, fw.handle(consumer_stream))
                g.device_synchronize()
            except Exception as error:  # reported by the main thread
                record["error"] = f"{type(error).__name__}: {error}"
                barrier.abort()
            finally:
                if gate is not None:
                    gate.destroy()

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for index, record in enumerate(results):
            self.assertIsNone(record["error"], f"thread {index}")
            for run, (ordered, outcome) in enumerate(record["gated"]):
                g.judge(self, f"thread {index} of {THREADS}, gated run {run}", ordered, outcome)
            self.assertEqual(record["wrong"], 0, f"thread {index}: wrong values in ungated runs")
        g.count(ordered=THREADS * UNGATED)


if __name__ == "__main__":
    unittest.main()
