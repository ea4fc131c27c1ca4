# SPDX-License-Identifier: Apache-2.0
"""dlsync.Group with tensors from two producer streams, and a consumer captured with
torch.cuda.graph reading a tensor from a producer that does not capture (an external wait
node), replayed after the producer writes new data."""
import unittest

import numpy as np

import dlsync
import gpu_support as g

GATED = 2  # gated runs per kind (control, ordered) and per held stream


class GroupOfTwoProducerStreams(unittest.TestCase):
    """Three tensors, a and b written on stream p1 and c on p2, read by one consumer after
    dlsync.Group. The gate holds one producer stream at a time; the control's group leaves
    that stream out, and its consumer reads that stream's tensors stale."""

    def test_group_orders_every_producer_stream(self):
        fw = g.any_array_framework()
        k = g.kernels()
        p1, p2, consumer = fw.stream(), fw.stream(), fw.stream()
        for stream in (p1, p2):
            self.assertTrue(k.non_blocking(fw.handle(stream)), "producer streams must be non-blocking")
        arrays = [fw.empty() for _ in range(3)]
        writers = (p1, p1, p2)
        stale = np.full(g.COUNT, g.STALE, np.int32)
        gate = g.Gate()

        def prepare(seed):
            for array in arrays:
                fw.set(array, stale)
            sources = [fw.pattern(seed + i) for i in range(3)]
            expected = np.stack([g.pattern(seed + i) for i in range(3)])

            def write():
                for stream, array, source in zip(writers, arrays, sources):
                    fw.write(stream, array, source)

            return write, expected

        def call(left_out):
            def enqueue():
                with dlsync.Group(g.DEVICE, consumer) as group:
                    for stream in writers:
                        if stream is not left_out:
                            group.add(stream)
                return fw.read(consumer, arrays)

            return enqueue

        try:
            write, expected = prepare(900)  # warm-up, gate open: loads every kernel
            write()
            consumed = call(None)()
            g.device_synchronize()
            self.assertEqual(int(np.count_nonzero(consumed.to_host() != expected)), 0, "warm-up")
            for held in (p1, p2):
                name, stale_tensors = ("p1 (a and b)", 2) if held is p1 else ("p2 (c)", 1)
                for i in range(GATED):
                    write, expected = prepare(10 * i + 1)
                    outcome = g.gated_run(gate, fw.handle(held), write, call(held), expected,
                                          g.RUNS_SOON, g.device_synchronize)
                    raced = outcome.error is None and outcome.raced and outcome.wrong == stale_tensors * g.COUNT
                    g.count(controls=1, raced=int(raced))
                    self.assertTrue(
                        raced,
                        f"group without {name}, control: expected the consumer to finish while "
                        f"{name} was held and read its {stale_tensors} tensor(s) stale, saw "
                        f"{outcome.describe()}")
                for i in range(GATED):
                    write, expected = prepare(10 * i + 5)
                    outcome = g.gated_run(gate, fw.handle(held), write, call(None), expected,
                                          g.RACE_WINDOW, g.device_synchronize)
                    g.judge(self, f"group of p1 and p2, {name} held", True, outcome)
        finally:
            gate.destroy()


class TorchGraphConsumer(unittest.TestCase):
    """A consumer captured with torch.cuda.graph: torch.from_dlpack of a producer whose
    stream does not capture, so dlsync.export puts an external event wait into the graph.
    torch.cuda.graph's __enter__ synchronizes the device (torch/cuda/graphs.py), so the gate
    and the producer's write are enqueued inside the capture block, on the producer's own
    stream, which does not capture. The graph is replayed on a stream of its own.

    Replays after new data: the captured wait is on the event recorded at capture, so it
    covers the data of the capture only. Each new write is exchanged again, onto the
    stream that replays the graph (dlsync.export); the control replays without that."""

    def test_captured_consumer_waits_for_an_uncaptured_producer(self):
        g.require(g.TORCH)
        torch = g.TORCH.torch
        k = g.kernels()
        producer_stream, replay_stream = torch.cuda.Stream(), torch.cuda.Stream()
        handle = producer_stream.cuda_stream
        self.assertTrue(k.non_blocking(handle), "the producer stream must be non-blocking")
        source = torch.empty(g.COUNT, dtype=torch.int32, device="cuda")
        out = torch.empty_like(source)
        stale = np.full(g.COUNT, g.STALE, np.int32)
        gate = g.Gate()

        def replay(graph):
            with torch.cuda.stream(replay_stream):
                graph.replay()
                done = torch.cuda.Event()
                done.record(replay_stream)
            return g.Consumed(done.query, lambda: out.cpu().numpy())

        def capture(seed, sync, gated):
            """out.copy_(torch.from_dlpack(producer)) captured, the producer's write of
            pattern(seed) enqueued on its own stream inside the block (behind the gate
            when gated)."""
            graph = torch.cuda.CUDAGraph()
            producer = g.Producer(source, producer_stream, g.TORCH.capsule, sync=sync)
            with torch.cuda.graph(graph):
                if gated:
                    gate.hold(handle)
                k.produce(handle, source.data_ptr(), seed)
                out.copy_(torch.from_dlpack(producer))
            return graph

        def reset():
            g.TORCH.set(source, stale)
            g.TORCH.set(out, stale)

        try:
            reset()  # warm-up with the gate open: loads every kernel
            graph = capture(1, True, gated=False)
            consumed = replay(graph)
            g.device_synchronize()
            self.assertEqual(int(np.count_nonzero(consumed.to_host() != g.pattern(1))), 0, "warm-up")

            # The capture's own wait: capture and first replay while the gate holds the write.
            for run in range(2 * GATED):
                ordered = run >= GATED
                seed = 10 + run
                reset()
                captured = []

                def capture_and_replay(seed=seed, ordered=ordered):
                    captured.append(capture(seed, ordered, gated=True))
                    return replay(captured[-1])

                outcome = g.gated_run(gate, g.HELD_BY_CALL, None, capture_and_replay,
                                      g.pattern(seed), g.RACE_WINDOW if ordered else g.RUNS_SOON,
                                      g.device_synchronize)
                g.judge(self, f"graph captured {'with' if ordered else 'without'} dlsync.export "
                              f"(external wait), first replay, run {run}", ordered, outcome)
                if ordered:
                    graph = captured[-1]

            # Replays after new writes, with the graph of the last ordered capture.
            for run in range(2 * GATED):
                ordered = run >= GATED
                seed = 30 + run
                reset()

                def write(seed=seed):
                    k.produce(handle, source.data_ptr(), seed)

                def export_and_replay(ordered=ordered):
                    if ordered:
                        dlsync.export(g.DEVICE, producer_stream, replay_stream.cuda_stream)
                    return replay(graph)

                outcome = g.gated_run(gate, handle, write, export_and_replay, g.pattern(seed),
                                      g.RACE_WINDOW if ordered else g.RUNS_SOON,
                                      g.device_synchronize)
                g.judge(self, f"replay after a new write, {'exported' if ordered else 'not exported'}"
                              f" again, run {run}", ordered, outcome)
            for run in range(20):  # ungated: each replay after a new write and its export
                seed = 100 + run
                k.produce(handle, source.data_ptr(), seed)
                dlsync.export(g.DEVICE, producer_stream, replay_stream.cuda_stream)
                consumed = replay(graph)
                g.device_synchronize()
                self.assertEqual(int(np.count_nonzero(consumed.to_host() != g.pattern(seed))), 0,
                                 f"ungated replay {run}")
            g.count(ordered=20)
        finally:
            gate.destroy()


if __name__ == "__main__":
    unittest.main()
