# SPDX-License-Identifier: Apache-2.0
"""Cost side by side in one run, reported as a table and not asserted: µs per exchange for
dlsync.export (its pooled event), a Python __dlpack__ calling it, PyTorch's and CuPy's own
__dlpack__(stream=...) toward another stream, JAX's, and host synchronization; and the
loop alone. Each exchange follows a small kernel on the producer's stream.

The release path next to the export's: a capsule of the tensor (torch.utils.dlpack's)
made and dropped (its deleter: no release ordering), and made and released with
dlsync.tensor_release on the consumer's stream (PyTorch names no reuse stream: the release
is deferred, its deleter run by later dlsync calls) or with stream=-1 (nothing pending: the
deleter now). The ordered release (RELEASED_ORDERED) needs a producer that names its reuse
stream (dl_sync_tensor_record_reuse, C), which neither PyTorch nor CuPy is: not run here.

PyTorch's __dlpack__ creates an event, records it on the current stream and makes the
consumer's stream wait on it, at every call (torch/_tensor.py, Tensor.__dlpack__); the
loop runs with the producer's stream current, so that this is a cross-stream exchange."""
import time
import unittest

import dlsync
import gpu_support as g

ITERATIONS = 2000
WARMUP = 200
SMALL = 256  # elements the producer's kernel writes per exchange


def measure(work, exchange):
    """µs per iteration of work(i); exchange()."""
    for i in range(WARMUP):
        work(i)
        exchange()
    g.device_synchronize()
    start = time.perf_counter()
    for i in range(ITERATIONS):
        work(i)
        exchange()
    g.device_synchronize()
    return (time.perf_counter() - start) / ITERATIONS * 1e6


class ExchangeCost(unittest.TestCase):
    def test_cost_table(self):
        g.require(g.TORCH)
        torch = g.TORCH.torch
        k = g.kernels()
        producer, consumer = torch.cuda.Stream(), torch.cuda.Stream()
        p, c = producer.cuda_stream, consumer.cuda_stream
        tensor = torch.zeros(g.COUNT, dtype=torch.int32, device="cuda")
        pointer = tensor.data_ptr()

        def work(i):
            k.produce(p, pointer, i, SMALL)

        rows = []

        def row(name, exchange, work=work, current=None):
            try:
                if current is not None:
                    with current:
                        us = measure(work, exchange)
                else:
                    us = measure(work, exchange)
                rows.append((name, us, None))
            except Exception as error:
                rows.append((name, None, "error: " + clean(f"{type(error).__name__}: {error}")))
            finally:
                drain()

        row("the loop alone (no synchronization, unordered)", lambda: None)
        row("dlsync.export (pooled event)", lambda: dlsync.export(g.DEVICE, producer, c))
        python_producer = g.Producer(tensor, producer, g.TORCH.capsule)
        row("a Python `__dlpack__` calling dlsync.export, with its capsule",
            lambda: python_producer.__dlpack__(stream=c))
        row(CAPSULE, lambda: g.TORCH.capsule(tensor))
        try:
            kind = g.RELEASE_NAMES.get(dlsync.tensor_release(g.TORCH.capsule(tensor), c), "?")
        except Exception as error:
            kind = "error: " + clean(f"{type(error).__name__}: {error}")
        drain()
        row(RELEASE_ON_STREAM.format(kind=kind),
            lambda: dlsync.tensor_release(g.TORCH.capsule(tensor), c))
        row(RELEASE_NOW, lambda: dlsync.tensor_release(g.TORCH.capsule(tensor), -1))
        rows.append((RELEASE_ORDERED, None, "not run (PyTorch and CuPy name no reuse stream; a C "
                     "producer does, with dl_sync_tensor_record_reuse)"))
        row("torch.Tensor.__dlpack__(stream=handle) (a fresh event per call)",
            lambda: tensor.__dlpack__(stream=c), current=torch.cuda.stream(producer))
        if g.CUPY.reason() is None:
            cupy = g.CUPY.cupy
            cupy_producer, cupy_consumer = g.CUPY.stream(), g.CUPY.stream()
            array = cupy.zeros(g.COUNT, dtype=cupy.int32)
            cupy_pointer = array.data.ptr

            def cupy_work(i):
                k.produce(cupy_producer.ptr, cupy_pointer, i, SMALL)

            row("cupy.ndarray.__dlpack__(stream=handle)",
                lambda: array.__dlpack__(stream=cupy_consumer.ptr), work=cupy_work,
                current=cupy_producer)
        else:
            rows.append(("cupy.ndarray.__dlpack__(stream=handle)", None,
                         f"not run ({clean(g.CUPY.reason())})"))
        if g.JAX.reason() is None:
            jnp = g.JAX.jax.numpy
            jax_array = jnp.zeros(g.COUNT, dtype=jnp.int32).block_until_ready()
            row("jax.Array.__dlpack__(stream=handle)", lambda: jax_array.__dlpack__(stream=c))
        else:
            rows.append(("jax.Array.__dlpack__(stream=handle)", None,
                         f"not run ({clean(g.JAX.reason())})"))
        row("host synchronization (the producer's stream)", producer.synchronize)

        baseline = rows[0][1]
        pooled = rows[1][1]
        lines = ["| exchange | µs per exchange | over the loop alone | / dlsync.export |",
                 "|---|---:|---:|---:|"]
        for name, us, error in rows:
            if us is None:
                lines.append(f"| {name} | {error} | | |")
                continue
            over = us - baseline if baseline is not None else float("nan")
            ratio = over / (pooled - baseline) if pooled is not None and baseline is not None \
                and pooled - baseline > 0 else float("nan")
            lines.append(f"| {name} | {us:.2f} | {over:.2f} | {ratio:.2f} |")
        legend = (f"{ITERATIONS} exchanges each after {WARMUP} of warm-up; each follows a kernel "
                  f"writing {SMALL} values on the producer's stream. Frameworks: {g.versions()}. "
                  "The release rows make one capsule per iteration (torch.utils.dlpack.to_dlpack) "
                  "and release it; the deferred releases' deleters run from the next releases' "
                  "polls, and the rest after each row.")
        g.write_table("python-cost", "\n".join(lines) + "\n\n" + legend + "\n\n" +
                      release_ratios(rows))
        own = rows[:3] + [r for r in rows
                          if r[0] == CAPSULE or r[0].startswith("dlsync.tensor_release(")]
        self.assertTrue(all(us is not None for name, us, _ in own),
                        "dlsync's own rows must run: " + "; ".join(str(e) for _, _, e in own))


CAPSULE = "a capsule (`to_dlpack`) made and dropped: its deleter, no release ordering"
RELEASE_ON_STREAM = "dlsync.tensor_release(capsule, stream=handle): {kind}, with its capsule"
RELEASE_NOW = "dlsync.tensor_release(capsule, stream=-1): the deleter now, with its capsule"
RELEASE_ORDERED = "dlsync.tensor_release, ordered (a producer that names its reuse stream)"


def drain():
    """Every stream done and every deferred release's deleter run (between rows)."""
    g.device_synchronize()
    for _ in range(1000):
        if not dlsync.release_poll():
            break


def release_ratios(rows):
    """The release rows over the capsule's own row, next to the export's cost over the loop
    alone: a line of ratios under the table."""
    us = {name: value for name, value, _ in rows}
    loop, export, capsule = us.get(rows[0][0]), us.get(rows[1][0]), us.get(CAPSULE)
    if None in (loop, export, capsule) or export - loop <= 0:
        return "Release over the capsule alone: not measured (a row it needs did not run)."
    export_over = export - loop
    parts = []
    for name, value in us.items():
        if value is None or not name.startswith("dlsync.tensor_release"):
            continue
        over = value - capsule
        parts.append(f"{name.split(', with')[0]}: {over:.2f} µs, {over / export_over:.2f}× "
                     "dlsync.export's")
    return (f"Release over the capsule alone (dlsync.export over the loop alone: "
            f"{export_over:.2f} µs): " + "; ".join(parts) + ".")


def clean(text, limit=90):
    text = " ".join(str(text).split()).replace("|", "/")
    return text if len(text) <= limit else text[: limit - 3] + "..."


if __name__ == "__main__":
    unittest.main()
