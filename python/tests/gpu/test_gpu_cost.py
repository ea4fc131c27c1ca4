# SPDX-License-Identifier: Apache-2.0
"""Cost side by side in one run, reported as a table and not asserted: µs per exchange for
dlsync.export (its pooled event), a Python __dlpack__ calling it, PyTorch's and CuPy's own
__dlpack__(stream=...) toward another stream, JAX's, and host synchronization; and the
loop alone. Each exchange follows a small kernel on the producer's stream.

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

        row("the loop alone (no synchronization, unordered)", lambda: None)
        row("dlsync.export (pooled event)", lambda: dlsync.export(g.DEVICE, producer, c))
        python_producer = g.Producer(tensor, producer, g.TORCH.capsule)
        row("a Python `__dlpack__` calling dlsync.export, with its capsule",
            lambda: python_producer.__dlpack__(stream=c))
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
                  f"writing {SMALL} values on the producer's stream. Frameworks: {g.versions()}.")
        g.write_table("python-cost", "\n".join(lines) + "\n\n" + legend)
        self.assertTrue(all(us is not None for name, us, _ in rows[:3]),
                        "dlsync's own rows must run: " + "; ".join(str(e) for _, _, e in rows[:3]))


def clean(text, limit=90):
    text = " ".join(str(text).split()).replace("|", "/")
    return text if len(text) <= limit else text[: limit - 3] + "..."


if __name__ == "__main__":
    unittest.main()
