# SPDX-License-Identifier: Apache-2.0
"""PyTorch's DLPack exchange table (torch.Tensor.__dlpack_c_exchange_api__, PyTorch 2.10
and later) on a GPU. A CUDA tensor PyTorch writes on its current stream is imported through
the table with dlsync.import_tensor onto another stream of PyTorch's (the N1 path), read by
a copy there, and released with dlsync.tensor_release, in gated runs: the gate holds the
producer's current stream while it writes. With dlsync every value read is the producer's;
the control takes the table's bare conversion (its _NoSync tensor, what a consumer gets
without dlsync) and reads the stale buffer every time. The N0 check beside it: what
current_work_stream answers is the stream PyTorch has current."""
import unittest

import numpy as np

import dlsync
import dlsync.testing
import gpu_support as g
from dlsync import _dlsync

CONTROL_GATED = 2
ORDERED_GATED = 3
UNGATED = 20


def require_torch_table():
    g.require(g.TORCH)
    torch = g.TORCH.torch
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        raise unittest.SkipTest(f"not installed: torch {torch.__version__} has no exchange table "
                                "(torch.Tensor.__dlpack_c_exchange_api__: PyTorch 2.10 and later)")
    return torch


class TorchTable(unittest.TestCase):
    def setUp(self):
        self.torch = require_torch_table()
        self.k = g.kernels()

    def test_current_work_stream_names_the_current_stream(self):
        torch = self.torch
        x = torch.zeros(16, dtype=torch.uint8, device="cuda")
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            answered = _dlsync._exchange_current_work_stream(x, g.DEVICE)
        self.assertEqual(answered, stream.cuda_stream)
        report = dlsync.testing.check_exchange_api(lambda sim: torch.arange(16, dtype=torch.uint8, device="cuda"))
        self.assertEqual(report.device, g.DEVICE)
        print(f"\n{g.TORCH.version()}: chain {report.chain}, missing {report.missing}, refused "
              f"{report.refused}, current_work_stream {report.stream:#x} (current stream "
              f"{torch.cuda.current_stream().cuda_stream:#x})")

    def test_cuda_tensors_through_the_table_onto_another_stream(self):
        torch = self.torch
        producer, consumer = torch.cuda.Stream(), torch.cuda.Stream()
        for stream in (producer, consumer):
            if not self.k.non_blocking(stream.cuda_stream):
                raise AssertionError("PyTorch's stream synchronizes with the legacy default stream")
        array = torch.empty(g.COUNT, dtype=torch.int32, device="cuda")
        stale = np.full(g.COUNT, g.STALE, np.int32)
        gate = g.Gate()

        def write(seed):
            source = g.TORCH.pattern(seed)  # made now: it synchronizes the device
            return lambda: g.TORCH.write(producer, array, source)

        def consume(ordered):
            with torch.cuda.stream(producer):  # the producer's current stream while importing
                capsule = (dlsync.import_tensor(array, g.DEVICE, consumer.cuda_stream) if ordered
                           else _dlsync._exchange_bare_import(array))
            view = g.TORCH.view(_dlsync._exchange_describe(capsule)["data"])
            consumed = g.TORCH.read(consumer, [view], single=True)
            released = dlsync.tensor_release(capsule, consumer.cuda_stream)
            self.assertIn(released, (dlsync.RELEASED_ORDERED, dlsync.RELEASE_DEFERRED))
            return consumed

        def ungated(seed):
            g.TORCH.set(array, stale)
            write(seed)()
            consumed = consume(True)
            g.device_synchronize()
            return int(np.count_nonzero(consumed.to_host() != g.pattern(seed)))

        try:
            self.assertEqual(ungated(1000), 0, "warm-up exchange")
            for run in range(CONTROL_GATED + ORDERED_GATED):
                ordered = run >= CONTROL_GATED
                g.TORCH.set(array, stale)
                outcome = g.gated_run(gate, producer.cuda_stream, write(run + 1), lambda: consume(ordered),
                                      g.pattern(run + 1), g.RACE_WINDOW if ordered else g.RUNS_SOON,
                                      g.device_synchronize)
                g.judge(self, f"torch table -> another stream, gated run {run}", ordered, outcome)
            wrong = sum(ungated(100 + run) for run in range(UNGATED))
            g.count(ordered=UNGATED)
            self.assertEqual(wrong, 0, f"wrong values in {UNGATED} ungated runs")
        finally:
            gate.destroy()
            dlsync.release_poll()


if __name__ == "__main__":
    unittest.main()
