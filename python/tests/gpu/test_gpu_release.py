# SPDX-License-Identifier: Apache-2.0
"""Release ordering with the frameworks' own stream-ordered pools (docs/release.md): a
PyTorch tensor from its caching allocator, a CuPy array from its default memory pool, each
handed to a dlsync consumer as a capsule, read on the consumer's stream behind the gate and
released while the producer allocates again on its stream (gpu_support.ReleaseProbe).

Why the control races every run: the capsule holds the only reference to the array, so its
deleter frees the block at once, and both pools give a freed block to the next allocation
of its size on the stream it was allocated on, without any synchronization. The run checks
each link: the pool's bytes in use fall at release, the new array is at the released
address (else the test fails, saying that the control cannot show the race), its write on
the producer's stream (which nothing holds) completes before the host opens the gate, and
the consumer's read, still behind the gate, then returns the new owner's values at every
index.

Why the ordered run cannot race: neither framework names a reuse stream, so
dlsync.tensor_release defers (RELEASE_DEFERRED). The deleter runs only from a later dlsync
call once an event recorded on the consumer's stream after the read has completed, and that
read waits behind the gate, which opens only after the new allocation and its write. So
while the gate is closed the block is still the capsule's: the new array cannot be in it
(it is cut from the spare block gpu_support's prepare() leaves), and the read returns the
tensor's own values. The run checks that too: the bytes in use do not fall at release, the
new array is elsewhere, every value read is right, and the deleter does run once the gate
has opened (release_poll), so the block is not leaked. A producer that named its reuse
stream would get RELEASED_ORDERED instead: then the reuse stream waits for the read, and a
new array in the same block must not have been written before the gate opened."""
import unittest

import gpu_support as g

CONTROL_GATED = 2  # gated runs with the capsule's deleter, per pool
ORDERED_GATED = 3  # gated runs with dlsync.tensor_release
UNGATED = 20  # releases with the gate open, each checked


def releases(test, pool):
    gate = g.Gate()
    try:
        probe = g.ReleaseProbe(pool, pool.fw, gate)
        what = f"{pool.name} producer, {pool.fw.name} consumer"
        # Once with the gate open first, each way: every kernel and copy of the run gets
        # loaded before a gate holds a stream. Without the gate the deleter's run is a race
        # with no winner known in advance: it is not judged.
        probe.run(3000, "deleter", gated=False)
        warm = probe.run(3002, "release", gated=False)
        test.assertTrue(warm.ordered, f"{what}: warm-up release: {warm.describe()}")
        for run in range(CONTROL_GATED + ORDERED_GATED):
            ordered = run >= CONTROL_GATED
            outcome = probe.run(3010 + 2 * run, "release" if ordered else "deleter")
            g.judge_release(test, f"{what}, gated run {run}", ordered, outcome)
        bad = [o.describe() for o in (probe.run(3100 + 2 * (run % 2), "release", gated=False)
                                      for run in range(UNGATED)) if not o.ordered]
        g.count(ordered=UNGATED)
        test.assertEqual(bad, [], f"{what}: {len(bad)} of {UNGATED} ungated releases")
    finally:
        gate.destroy()


class ReleaseThroughDlsync(unittest.TestCase):
    def test_torch_caching_allocator(self):
        """PyTorch's caching allocator: torch.utils.dlpack.to_dlpack's capsule, released on a
        torch.cuda.Stream while the producer's stream allocates again."""
        g.require(g.TORCH)
        g.kernels()
        releases(self, g.TorchPool())

    def test_cupy_memory_pool(self):
        """CuPy's default memory pool: the capsule of ndarray.__dlpack__, released on a
        cupy.cuda.Stream while the producer's stream allocates again."""
        g.require(g.CUPY)
        g.kernels()
        releases(self, g.CuPyPool())


if __name__ == "__main__":
    unittest.main()
