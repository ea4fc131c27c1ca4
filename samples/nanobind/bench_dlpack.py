# SPDX-License-Identifier: Apache-2.0
"""What dlsync costs in the nanobind sample's __dlpack__: Array.__dlpack__ next to the same
export without the ordering (Array._dlpack_unordered), each capsule dropped unconsumed (its
deleter run), interleaved in one process; prints ns per call and the ratio. Cases: a CPU
array (stream=None), and on the simulated device stream=-1 and the producer's own stream
(no runtime call), and another stream (one record and one wait on the simulator, whose
operations cost far more than a GPU runtime's: read it as an upper bound).
Usage: python bench_dlpack.py [calls]"""
import sys
import timeit

import dlsync.testing

import dlsync_nb

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000


def pair(array, stream, n=N):
    ordered = lambda: array.__dlpack__(stream=stream, max_version=(1, 3))  # noqa: E731
    plain = lambda: array._dlpack_unordered(stream=stream, max_version=(1, 3))  # noqa: E731
    best = [float("inf"), float("inf")]
    for _ in range(5):  # interleaved, best of 5
        for i, f in enumerate((ordered, plain)):
            best[i] = min(best[i], timeit.timeit(f, number=n) / n * 1e9)
    return best


def show(name, times):
    print(f"{name:34s} with dlsync {times[0]:7.1f} ns  without {times[1]:7.1f} ns  "
          f"ratio {times[0] / times[1]:.2f}")


show("CPU, stream=None", pair(dlsync_nb.Array(bytearray(64), (1, 0)), None))
with dlsync.testing.SimulatedDevice() as sim:
    dlsync_nb.use_simulated_device(sim)
    producer, consumer = sim.stream(non_blocking=True), sim.stream(non_blocking=True)
    dlsync_nb.use_stream(producer.handle)
    a = dlsync_nb.Array(bytearray(64), (2, 0))
    show("simulated CUDA, stream=-1", pair(a, -1))
    show("simulated CUDA, its own stream", pair(a, producer.handle))
    show("simulated CUDA, another stream", pair(a, consumer.handle, N // 20))
    dlsync_nb.use_stream(None)
