# SPDX-License-Identifier: Apache-2.0
"""What dlsync adds to a Python __dlpack__: each call of the module next to a bare Python
function called with the same arguments, measured side by side in interleaved rounds
(medians), on the null backend (dlsync.testing.NullBackend), so that no runtime and no
simulator is timed. Prints bench/run.sh's lines: figure, value, unit.

  - ratio of a no-sync export (a device without streams, -1, the producer's own stream)
    to the bare call: the target is at most 1.5; a stream object, at most 2;
  - cross-stream export: what the Python call adds to the C call it makes, in ns
    (target: at most 30), with the GIL's release and retake (which a call that reaches the
    runtime pays, so that other threads run meanwhile) and the bare call measured beside
    it: the three together are the floor of a call that releases the GIL;
  - the same no-sync export beside a CPU-bound Python thread, against the bare call
    there: a call that keeps the GIL pays no switch;
  - the consumer's import of one argument, dlsync.import_tensor (through the producer's
    DLPack exchange table), next to what np.from_dlpack does on the same object
    (__dlpack_device__, then __dlpack__(stream=..., max_version=(1, 3))), for a model
    producer written in C (dlsync.testing.ExchangeArray): on the producer's stream, on
    another stream and for a CPU tensor; each capsule is dropped unconsumed (the deleter);
  - the import of a NumPy array (no table: its __dlpack__) next to np.from_dlpack on it.
"""
import statistics
import threading
import timeit

import dlsync
import dlsync.testing

CPU, CUDA = (1, 0), (2, 0)
A, B = 0x5000, 0x6000  # stream handles: the null backend orders nothing


class CudaStream:
    """A stream object with the CUDA stream protocol (cuda.core's)."""

    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


def bare(device, producer_stream, stream):
    pass


def bare_protocol(device, producer_stream, stream):
    """The bare call plus the one call of the stream object's method that any consumer of
    the protocol makes: the floor under a stream object written in Python."""
    producer_stream.__cuda_stream__()


class PtrStream:
    """A stream object with a .ptr member on its type, as CuPy's Cython class has."""

    __slots__ = ("ptr",)

    def __init__(self, handle):
        self.ptr = handle


STREAM, PTR = CudaStream(A), PtrStream(A)
# (figure, call, baseline): each timed with the same arguments.
RATIOS = [
    ("export(cpu, None, None)", "export(CPU, None, None)", "bare(CPU, None, None)"),
    ("export(cuda, h, -1)", "export(CUDA, A, -1)", "bare(CUDA, A, -1)"),
    ("export(cuda, h, h) same stream", "export(CUDA, A, A)", "bare(CUDA, A, A)"),
    ("export(cuda, __cuda_stream__ in Python, -1)", "export(CUDA, STREAM, -1)",
     "bare(CUDA, STREAM, -1)"),
    ("export(cuda, __cuda_stream__ in Python, -1) / its method called",
     "export(CUDA, STREAM, -1)", "bare_protocol(CUDA, STREAM, -1)"),
    ("export(cuda, .ptr, -1)", "export(CUDA, PTR, -1)", "bare(CUDA, PTR, -1)"),
    ("export(...) by keyword, -1", "export(device=CUDA, producer_stream=A, stream=-1)",
     "bare(device=CUDA, producer_stream=A, stream=-1)"),
]
# The consumer's import: (figure, dlsync's call, np.from_dlpack's path on the same object).
IMPORTS = [
    ("import on the producer's stream", "import_tensor(X, CUDA, A)",
     "X.__dlpack_device__(); X.__dlpack__(stream=A, max_version=V)"),
    ("import cross-stream", "import_tensor(X, CUDA, B)",
     "X.__dlpack_device__(); X.__dlpack__(stream=B, max_version=V)"),
    ("import of a CPU tensor", "import_tensor(X_CPU, CPU, None)",
     "X_CPU.__dlpack_device__(); X_CPU.__dlpack__(stream=None, max_version=V)"),
]
NAMES = {"import_tensor": dlsync.import_tensor, "X": dlsync.testing.ExchangeArray(bytearray(64)),
         "X_CPU": dlsync.testing.ExchangeArray(bytearray(64), CPU), "V": (1, 3),
         "export": dlsync.export, "bare": bare, "bare_protocol": bare_protocol, "CPU": CPU, "CUDA": CUDA, "A": A, "B": B,
         "STREAM": STREAM, "PTR": PTR}


def per_call_ns(statement, number):
    return timeit.Timer(statement, globals=NAMES).timeit(number) / number * 1e9


def rounds(statements, number, count):
    """Median ns per call of each statement, the statements interleaved in every round."""
    samples = {s: [] for s in statements}
    for _ in range(count):
        for s in statements:
            samples[s].append(per_call_ns(s, number))
    return {s: statistics.median(v) for s, v in samples.items()}


def emit(figure, value, unit):
    print(f"python: {figure}\t{value:.2f}\t{unit}")


def main():
    number, count = 200000, 7
    with dlsync.testing.NullBackend() as null:
        statements = list(dict.fromkeys(s for _, call, base in RATIOS for s in (call, base)))
        statements.append("export(CUDA, A, B)")
        medians = rounds(statements, number, count)
        for figure, call, base in RATIOS:
            over = "" if "/" in figure else " / bare call"
            emit(f"{figure}{over}", medians[call] / medians[base], "ratio")
        c_call = statistics.median(null.time_export(CUDA, A, B, number) for _ in range(count))
        gil = statistics.median(null.time_gil_release(number) for _ in range(count))
        cross = medians["export(CUDA, A, B)"]
        emit("export(cuda, h, h2) cross-stream", cross, "ns")
        emit("dl_sync_export cross-stream, C loop", c_call, "ns")
        emit("GIL release and retake, C loop", gil, "ns")
        emit("bare call", medians["bare(CUDA, A, -1)"], "ns")
        emit("export(cuda, h, h2) beyond its C call", cross - c_call, "ns")
        emit("export(cuda, h, h2) beyond its C call and the GIL switch", cross - c_call - gil, "ns")
        emit("export(cuda, h, h2) beyond the bare call, its C call and the GIL switch",
             cross - medians["bare(CUDA, A, -1)"] - c_call - gil, "ns")

        dlsync.testing.ExchangeArray.use_stream(A)
        imports = rounds([s for _, ours, theirs in IMPORTS for s in (ours, theirs)], number // 4, count)
        for figure, ours, theirs in IMPORTS:
            emit(f"{figure}: import_tensor", imports[ours], "ns")
            emit(f"{figure}: np.from_dlpack's path", imports[theirs], "ns")
            emit(f"{figure}: import_tensor / np.from_dlpack's path", imports[ours] / imports[theirs], "ratio")
        dlsync.testing.ExchangeArray.use_stream(None)

        # Without a table (a NumPy array: its __dlpack__), next to np.from_dlpack itself.
        try:
            import numpy as np
        except ImportError:
            print("python: import without a table: skipped, NumPy is not installed")
            return
        NAMES.update(np=np, N=np.zeros(16, np.uint8))
        ours, theirs = "import_tensor(N, CPU, None)", "np.from_dlpack(N)"
        plain = rounds([ours, theirs], number // 4, count)
        emit("import without a table (NumPy): import_tensor", plain[ours], "ns")
        emit("import without a table (NumPy): np.from_dlpack", plain[theirs], "ns")
        emit("import without a table (NumPy): import_tensor / np.from_dlpack", plain[ours] / plain[theirs], "ratio")

        # Beside a CPU-bound thread: a call that gave the GIL away waits for it back.
        stop = threading.Event()

        def spin():
            while not stop.is_set():
                pass

        thread = threading.Thread(target=spin)
        thread.start()
        try:
            # Long loops: the threads trade the GIL every switch interval (5 ms).
            busy = rounds(["export(CUDA, A, -1)", "bare(CUDA, A, -1)"], number * 5, count)
        finally:
            stop.set()
            thread.join()
        emit("export(cuda, h, -1) beside a busy thread / bare call there",
             busy["export(CUDA, A, -1)"] / busy["bare(CUDA, A, -1)"], "ratio")


if __name__ == "__main__":
    main()
