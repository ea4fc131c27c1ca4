# SPDX-License-Identifier: Apache-2.0
"""What dlsync costs in the nanobind sample's __dlpack__: Array.__dlpack__ next to the same
export without the ordering (Array._dlpack_unordered), each capsule dropped unconsumed (its
deleter run), interleaved in one process; prints ns per call and the ratio. Cases: a CPU
array (stream=None), and a CUDA array on a backend whose calls return at once (the
extension's _use_null_backend: what is timed is dlsync's own work) with stream=-1, the
producer's own stream (no runtime call) and another stream (one record and one wait, the
GIL let go around them).
Usage: python bench_dlpack.py [calls per round]"""
import sys
import timeit

import dlsync_nb

N = int(sys.argv[1]) if len(sys.argv) > 1 else 5_000  # calls per round
ROUNDS = 80


def pair(array, stream, n=N):
    ordered = lambda: array.__dlpack__(stream=stream, max_version=(1, 3))  # noqa: E731
    plain = lambda: array._dlpack_unordered(stream=stream, max_version=(1, 3))  # noqa: E731
    best = [float("inf"), float("inf")]
    for _ in range(ROUNDS):  # interleaved; the best round of each (the least disturbed)
        for i, f in enumerate((ordered, plain)):
            best[i] = min(best[i], timeit.timeit(f, number=n) / n * 1e9)
    return best


def show(name, times):
    print(f"{name:37s} with dlsync {times[0]:7.1f} ns  without {times[1]:7.1f} ns  "
          f"ratio {times[0] / times[1]:.2f}")


show("CPU, stream=None", pair(dlsync_nb.Array(bytearray(64), (1, 0)), None))
dlsync_nb._use_null_backend(True)
try:
    dlsync_nb.use_stream(5)  # any int > 2 is a stream to the null backend
    a = dlsync_nb.Array(bytearray(64), (2, 0))
    show("CUDA (null backend), stream=-1", pair(a, -1))
    show("CUDA (null backend), its own stream", pair(a, 5))
    show("CUDA (null backend), another stream", pair(a, 6))
finally:
    dlsync_nb.use_stream(None)
    dlsync_nb._use_null_backend(False)
