# SPDX-License-Identifier: Apache-2.0
"""Producers whose __dlpack__ calls dlsync.export, over PyTorch, CuPy and cuda.core streams,
consumed by torch.from_dlpack, cupy.from_dlpack and jax.dlpack.from_dlpack on their own
streams: gated runs with dlsync read every value right; the same producer without the call
(the control) reads the stale buffer every time."""
import unittest

import numpy as np

import gpu_support as g

CONTROL_GATED = 2  # gated runs without dlsync.export, per pair
ORDERED_GATED = 3  # gated runs with it
UNGATED = 20  # runs with the gate open, each checked

PRODUCERS = {"torch": g.TORCH, "cupy": g.CUPY, "cuda_core": g.CUDA_CORE}
CONSUMERS = {"torch": g.TORCH, "cupy": g.CUPY, "jax": g.JAX}
WINDOW = {"torch": g.RACE_WINDOW, "cupy": g.RACE_WINDOW, "jax": 0.1}  # JAX dispatches later


class Pair:
    """One producer kind and one consumer kind, set up for gated runs."""

    def __init__(self, producer, consumer):
        self.producer_fw, self.consumer_fw = PRODUCERS[producer], CONSUMERS[consumer]
        g.require(self.producer_fw, self.consumer_fw)
        self.k = g.kernels()
        # Memory and capsules come from the producer's framework (for cuda.core, which has
        # no arrays, from PyTorch or CuPy); writes are the framework's own copy, or the
        # kernels' producer on a cuda.core stream.
        self.memory = (self.producer_fw if self.producer_fw in g.ARRAY_FRAMEWORKS
                       else g.any_array_framework())
        self.stream = self.producer_fw.stream()
        self.handle = self.producer_fw.handle(self.stream)
        if not self.k.non_blocking(self.handle):
            raise AssertionError(f"{self.producer_fw.name}'s stream synchronizes with the legacy "
                                 "default stream: the gate would hold other streams too")
        self.consumer_stream = None if consumer == "jax" else self.consumer_fw.stream()
        self.window = WINDOW[consumer]
        self.array = self.memory.empty()
        self.stale = np.full(g.COUNT, g.STALE, np.int32)
        self.gate = g.Gate()
        self.what = f"{self.producer_fw.name} stream -> {self.consumer_fw.name}"

    def write(self, seed):
        """A closure writing pattern(seed) on the producer's stream (prepared now: making
        the pattern synchronizes the device, which a closed gate would hold)."""
        if self.producer_fw in g.ARRAY_FRAMEWORKS:
            source = self.memory.pattern(seed)
            return lambda: self.memory.write(self.stream, self.array, source)
        pointer = self.memory.pointer(self.array)
        return lambda: self.k.produce(self.handle, pointer, seed)

    def consume(self, sync):
        producer = g.Producer(self.array, self.stream, self.memory.capsule, sync=sync)
        return self.consumer_fw.consume(producer, self.consumer_stream)

    def ungated(self, seed):
        """One exchange with the gate open; the number of wrong values."""
        self.memory.set(self.array, self.stale)
        self.write(seed)()
        consumed = self.consume(True)
        g.device_synchronize()
        return int(np.count_nonzero(consumed.to_host() != g.pattern(seed)))

    def gated(self, seed, ordered):
        self.memory.set(self.array, self.stale)
        return g.gated_run(self.gate, self.handle, self.write(seed), lambda: self.consume(ordered),
                           g.pattern(seed), self.window if ordered else g.RUNS_SOON,
                           g.device_synchronize)

    def close(self):
        self.gate.destroy()


def exchange(test, producer, consumer):
    pair = Pair(producer, consumer)
    try:
        # Once with the gate open first: every kernel of the exchange gets loaded (and
        # JAX compiles its operation) before a gate holds a stream.
        test.assertEqual(pair.ungated(1000), 0, f"{pair.what}: warm-up exchange")
        for run in range(CONTROL_GATED + ORDERED_GATED):
            ordered = run >= CONTROL_GATED
            g.judge(test, f"{pair.what}, gated run {run}", ordered, pair.gated(run + 1, ordered))
        wrong = sum(pair.ungated(100 + run) for run in range(UNGATED))
        g.count(ordered=UNGATED)
        test.assertEqual(wrong, 0, f"{pair.what}: wrong values in {UNGATED} ungated runs")
    finally:
        pair.close()


class ExchangeThroughDlsync(unittest.TestCase):
    """test_<producer's streams>_to_<consumer>: one per pair."""


def _make(producer, consumer):
    def test(self):
        exchange(self, producer, consumer)

    test.__name__ = f"test_{producer}_to_{consumer}"
    test.__doc__ = f"{PRODUCERS[producer].name} streams -> {CONSUMERS[consumer].name}.from_dlpack"
    return test


for _producer in PRODUCERS:
    for _consumer in CONSUMERS:
        _test = _make(_producer, _consumer)
        setattr(ExchangeThroughDlsync, _test.__name__, _test)

if __name__ == "__main__":
    unittest.main()
