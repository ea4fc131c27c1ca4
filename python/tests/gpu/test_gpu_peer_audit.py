# SPDX-License-Identifier: Apache-2.0
"""The peer audit is dlsync.audit now (python -m dlsync.audit, docs/audit.md):
scripts/gpu-check.sh runs it against the frameworks and writes its table into
docs/gpu-results.md. This test runs the same tool on the GPU for what this suite asserts:
its gate (cuStreamWaitValue32 on host-mapped memory, no kernel) holds a producer, so that
dlsync's reference producer is ordered and its control (the same without dlsync.export) is
a RACE in every stream cell, with PyTorch and CuPy consumers. The frameworks' own pairs are
reported by the tool and not asserted."""
import os
import unittest

import gpu_support as g

# Read when the CUDA context is made, before any test runs: enough hardware queues that a
# held stream does not hold another behind it (dlsync.audit.run sets the same, too late
# once a context exists).
os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")

import dlsync.audit

STREAM_KEYS = ("None", "1", "2", "handle")


class PeerAudit(unittest.TestCase):
    def test_the_audit_gate_orders_the_reference_and_catches_the_control(self):
        consumers = [f for f in g.ARRAY_FRAMEWORKS if f.reason() is None]
        if not consumers:
            raise unittest.SkipTest(" and ".join(f.reason() for f in g.ARRAY_FRAMEWORKS))
        names = {g.TORCH: "torch", g.CUPY: "cupy"}
        pairs = [(producer, names[f]) for f in consumers for producer in ("dlsync", "dlsync-control")]
        report = dlsync.audit.run(pairs=pairs, cells=list(STREAM_KEYS))
        g.write_table("audit-controls", report.table())
        self.assertEqual(report.device, "cuda", report.world)
        self.assertFalse(report.world["warnings"], "the driver gate fell back to a window")
        for pair in report.pairs:
            self.assertFalse(pair.not_run, f"{pair.title}: {pair.not_run}")
            for key in STREAM_KEYS:
                cell = pair.cells[key]
                if pair.control:
                    g.count(controls=1, raced=int(cell.verdict == dlsync.audit.RACE))
                    self.assertEqual(cell.verdict, dlsync.audit.RACE,
                                     f"{pair.title} stream={key}, the control: {cell.detail}")
                else:
                    g.count(ordered=1, host_blocked=int(cell.verdict == dlsync.audit.HOST_BLOCKED))
                    self.assertEqual(cell.verdict, dlsync.audit.ORDERED,
                                     f"{pair.title} stream={key}: {cell.detail}")


if __name__ == "__main__":
    unittest.main()
