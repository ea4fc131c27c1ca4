# SPDX-License-Identifier: Apache-2.0
"""The peer audit, reported as a table and not asserted: the frameworks' own __dlpack__
(no dlsync), PyTorch -> CuPy, CuPy -> PyTorch, PyTorch -> JAX and JAX -> PyTorch, under
the same gate as the other tests, with the consumer asking for stream=None, 1, 2 or its
own stream's handle: which pairs order correctly today.

Each column's consumer runs on the stream its value names: None and 1 on the legacy
default stream, 2 on the per-thread default stream, "handle" on a stream of its own, whose
handle its from_dlpack passes. None, 1 and 2 are handed to the producer's __dlpack__ as
they are (whatever the consumer's from_dlpack would pass). A JAX consumer runs where JAX
runs it, in every column, and "handle" is what its from_dlpack passes. The producer writes on its
framework's current stream, which stays current while the consumer imports: the
frameworks' __dlpack__ orders the current stream (torch/_tensor.py, Tensor.__dlpack__:
an event recorded on torch.cuda.current_stream(), waited on by the consumer's stream).
A JAX producer computes its array from an input imported, through dlsync, from a PyTorch
stream that the gate holds: JAX's computation cannot run before the gate opens.

Cells: "ordered"; "ordered (host blocked)": the call blocked the host until the gate
opened; "RACE": the consumer finished while the producer was held, or read stale values;
"error": the call raised (the message says what).

The column "at release" is what the producer's framework does with the memory when the
consumer is done with it, observed by running it (gpu_support.ReleaseProbe): the producer
writes an array, hands out its capsule and drops its own reference; the consumer reads the
capsule's memory on its stream (the row's consumer; a PyTorch stream where JAX consumes,
since the gate cannot hold JAX's) while the gate holds that stream, and then drops the
capsule, so that the framework's deleter runs; the producer allocates the same size again
(on its stream) and writes new values, and once that write has completed the gate opens.
The cell says whether the pool's bytes in use fell at once, whether the new array got the
released block, and what the held read returned (RACE: the new owner's values). For
PyTorch and CuPy producers the same runs follow with dlsync.tensor_release on the
consumer's stream instead of the deleter, and the cell says what dlsync did and saw."""
import unittest

import numpy as np

import dlsync.testing
import gpu_support as g
from dlsync import _dlsync

RUNS = 2  # gated runs per cell
WINDOW = 0.1  # an ordered consumer does not finish in it; an unordered one does
COLUMNS = ("None", "1", "2", "handle")
PAIRS = (("torch", "cupy"), ("cupy", "torch"), ("torch", "jax"), ("jax", "torch"))
FRAMEWORKS = {"torch": g.TORCH, "cupy": g.CUPY, "jax": g.JAX}
POOLS = {"torch": g.TorchPool, "cupy": g.CuPyPool, "jax": g.JaxPool}
# The consumer whose stream the gate holds in the release column: JAX runs its work on no
# stream of the suite's, so PyTorch reads for it.
RELEASE_CONSUMERS = {"torch": g.TORCH, "cupy": g.CUPY, "jax": g.TORCH}


def _clean(text, limit=90):
    text = " ".join(str(text).split()).replace("|", "/")
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Cell:
    """One producer -> consumer pair and one column, set up for gated runs."""

    def __init__(self, producer, consumer, column, gate):
        self.producer, self.consumer, self.column, self.gate = producer, consumer, column, gate
        self.pfw, self.cfw = FRAMEWORKS[producer], FRAMEWORKS[consumer]
        self.k = g.kernels()
        # The held stream, and the memory the producer writes: its own framework's, or for
        # JAX, PyTorch's input to JAX's computation.
        self.memory = g.TORCH if producer == "jax" else self.pfw
        self.stream = self.memory.stream()
        self.handle = self.memory.handle(self.stream)
        self.array = self.memory.empty()
        self.stale = np.full(g.COUNT, g.STALE, np.int32)
        if consumer == "jax":
            self.consumer_stream = None
        elif column in ("None", "1"):
            self.consumer_stream = self.cfw.legacy_stream()
        elif column == "2":
            self.consumer_stream = self.cfw.per_thread_stream()
        else:
            self.consumer_stream = self.cfw.stream()
        self.value = {"None": None, "1": 1, "2": 2}.get(column)

    def expected(self, seed):
        """What the consumer reads back: a JAX producer's array is pattern ^ JAX_MASK (a
        JAX consumer's own operation is undone by its to_host)."""
        values = g.pattern(seed)
        return values ^ np.int32(g.JAX_MASK) if self.producer == "jax" else values

    def call(self):
        """The consumer's import and read, with the producer's stream current."""
        if self.producer == "jax":
            source = g.JAX.import_array(g.Producer(self.array, self.stream, g.TORCH.capsule))
        else:
            source = self.array
        exported = source if self.column == "handle" else g.Forced(source, self.value)
        if self.producer == "jax":
            return self.cfw.consume(exported, self.consumer_stream)
        with self.pfw.current(self.stream):
            return self.cfw.consume(exported, self.consumer_stream)

    def run(self, seed, gated):
        self.memory.set(self.array, self.stale)
        source = self.memory.pattern(seed)
        write = lambda: self.memory.write(self.stream, self.array, source)  # noqa: E731
        if not gated:  # the warm-up: loads every kernel of the cell
            write()
            try:
                self.call()
            except Exception:
                pass  # the gated runs report it
            g.device_synchronize()
            return None
        return g.gated_run(self.gate, self.handle, write, self.call, self.expected(seed), WINDOW,
                           g.device_synchronize)


def describe(outcomes):
    errors = [o.error for o in outcomes if o.error is not None]
    if errors:
        return "error: " + _clean(errors[0])
    if any(o.timeouts for o in outcomes):
        return "gate timed out"
    races = [o for o in outcomes if o.raced or o.wrong]
    if races:
        stale = max(o.wrong for o in races)
        return f"RACE {len(races)}/{len(outcomes)} ({stale} of {g.COUNT} values stale)"
    if any(o.blocked for o in outcomes):
        return "ordered (host blocked)"
    return "ordered"


def _share(flags, yes, no):
    """yes, no, or yes k/n when only k of the n runs saw it."""
    k = sum(1 for flag in flags if flag)
    return yes if k == len(flags) else no if k == 0 else f"{yes} {k}/{len(flags)}"


def _verdict(outcomes):
    """"ordered", or RACE k/n with what the worst of the k runs read."""
    races = [o for o in outcomes if o.wrong]
    if not races:
        return "ordered"
    worst = max(races, key=lambda o: o.wrong)
    what = "the new owner's" if worst.overwritten == worst.wrong else "wrong"
    return f"RACE {len(races)}/{len(outcomes)} ({worst.wrong} of {g.COUNT} values read {what})"


def describe_release(deleter, released):
    """The release column's cell: the runs with the deleter, and with dlsync.tensor_release
    (None: not run)."""
    outcomes = deleter + (released or [])
    errors = [o.error for o in outcomes if o.error is not None]
    if errors:
        return "error: " + _clean(errors[0])
    if any(o.timeouts for o in outcomes):
        return "gate timed out"
    if any(o.blocked for o in outcomes):
        return "the host blocked (the timer opened the gate)"
    freed = [o.freed_at_release for o in deleter]
    freed_text = ("bytes in use not known" if None in freed
                  else _share(freed, "back in the pool at once", "not back in the pool at once"))
    reused_text = _share([o.reused for o in deleter], "the next allocation got the block",
                         "the next allocation got another block")
    text = f"deleter: {freed_text}, {reused_text}: {_verdict(deleter)}"
    if not all(o.landed for o in deleter):
        text += " (the new array's write had not completed when the gate opened)"
    if released is not None:
        how = "/".join(dict.fromkeys(g.RELEASE_NAMES.get(o.status, str(o.status))
                                     for o in released))
        reused = _share([o.reused for o in released], "the block reused while the read was held",
                        "not reused before the read completed")
        text += f"; dlsync.tensor_release: {how}, {reused}: {_verdict(released)}"
    return text


def release_cell(producer, consumer, gate):
    """What the producer's framework does at release (RUNS gated runs each way), or why
    that could not be run."""
    try:
        probe = g.ReleaseProbe(POOLS[producer](), RELEASE_CONSUMERS[consumer], gate)
        probe.run(6000, "deleter", gated=False)  # the warm-up: loads every kernel
        deleter = [probe.run(6002 + 2 * run, "deleter") for run in range(RUNS)]
        released = None
        if producer != "jax":
            probe.run(6100, "release", gated=False)
            released = [probe.run(6102 + 2 * run, "release") for run in range(RUNS)]
        return describe_release(deleter, released)
    except Exception as error:  # setting the probe up failed
        return "error: " + _clean(f"{type(error).__name__}: {error}")


class PeerAudit(unittest.TestCase):
    def test_peer_audit_table(self):
        runnable = []
        reasons = []
        for producer, consumer in PAIRS:
            missing = [FRAMEWORKS[n].reason() for n in (producer, consumer) if FRAMEWORKS[n].reason()]
            if producer == "jax" and g.TORCH.reason():
                missing.append(g.TORCH.reason())
            runnable.append(not missing)
            reasons.append("; ".join(dict.fromkeys(missing)))
        if not any(runnable):
            raise unittest.SkipTest(reasons[0])
        g.kernels()
        gate = g.Gate()
        rows = []
        release_cells = {}  # the release column's, per producer and consumer framework
        try:
            for (producer, consumer), ok, reason in zip(PAIRS, runnable, reasons):
                name = f"{FRAMEWORKS[producer].name} -> {FRAMEWORKS[consumer].name}"
                if not ok:
                    rows.append([name] + [f"not run ({_clean(reason, 60)})"] * (len(COLUMNS) + 1))
                    continue
                cells = []
                for column in COLUMNS:
                    try:
                        cell = Cell(producer, consumer, column, gate)
                        cell.run(5000, gated=False)
                        outcomes = [cell.run(5001 + run, gated=True) for run in range(RUNS)]
                        cells.append(describe(outcomes))
                    except Exception as error:  # setting the cell up failed
                        cells.append("error: " + _clean(f"{type(error).__name__}: {error}"))
                key = (producer, RELEASE_CONSUMERS[consumer].name)
                if key not in release_cells:
                    release_cells[key] = release_cell(producer, consumer, gate)
                rows.append([name] + cells + [release_cells[key]])
        finally:
            gate.destroy()
        lines = [
            "| producer -> consumer (their own `__dlpack__`) | stream=None | stream=1 | stream=2 | "
            "stream=handle | at release (the producer's pool) |",
            "|---|---|---|---|---|---|",
        ] + ["| " + " | ".join(row) + " |" for row in rows]
        legend = (f"{RUNS} gated runs per cell, window {int(WINDOW * 1000)} ms; frameworks: "
                  f"{g.versions()}. Consumers run on the stream the value names (None, 1: legacy "
                  "default stream; 2: per-thread default stream; handle: a stream of their own, "
                  "passed by their from_dlpack); JAX where it runs its work, in every column. "
                  f"At release: {RUNS} gated runs each way; the consumer's read of the capsule's "
                  "memory is held while the consumer drops the capsule (the framework's deleter) "
                  "or, for PyTorch and CuPy producers, calls dlsync.tensor_release, and the "
                  "producer allocates the same size again and writes it; the cell says whether "
                  "the block was back in the pool at once, whether the new array got it, and "
                  "what the held read returned.")
        g.write_table("peer-audit", "\n".join(lines) + "\n\n" + legend)


def _table_form(obj):
    """How obj's type carries a DLPack exchange table, or None."""
    for name, form in (("__dlpack_c_exchange_api__", "1.3"), ("__c_dlpack_exchange_api__", "1.2")):
        value = getattr(type(obj), name, None)
        if value is not None:
            return f"`{name}` ({'int' if isinstance(value, int) else 'capsule'}, DLPack {form} form)"
    return None


def _tensors(memory):
    """(framework, a tensor of it on the GPU, a stream of it made current by `current`, its
    handle), for each installed framework that has tensors; memory: PyTorch's or CuPy's."""
    if g.TORCH.reason() is None:
        torch = g.TORCH.torch
        yield "PyTorch (torch.Tensor)", torch.zeros(16, device="cuda"), torch.cuda.Stream(), g.TORCH.current
    if g.CUPY.reason() is None:
        cupy = g.CUPY.cupy
        yield "CuPy (cupy.ndarray)", cupy.zeros(16), cupy.cuda.Stream(non_blocking=True), g.CUPY.current
    if g.JAX.reason() is None:
        yield "JAX (jax.Array)", g.JAX.jax.numpy.zeros(16), None, None
    if g.CUDA_CORE.reason() is None:
        from cuda.core.utils import StridedMemoryView

        yield "cuda.core (StridedMemoryView)", StridedMemoryView.from_dlpack(memory, stream_ptr=-1), None, None
    try:
        import tvm_ffi
    except Exception:
        return
    yield "apache-tvm-ffi (DLTensorTestWrapper)", tvm_ffi.core.DLTensorTestWrapper(tvm_ffi.from_dlpack(memory)), None, None


def _answer(x, stream, current):
    """What x's table's current_work_stream answers for (kDLCUDA, 0), with the framework's
    own stream current where it has one."""
    try:
        if stream is None:
            return f"{_dlsync._exchange_current_work_stream(x, g.DEVICE)} (no current stream of its own to compare)"
        handle = stream.cuda_stream if hasattr(stream, "cuda_stream") else stream.ptr
        with current(stream):
            answered = _dlsync._exchange_current_work_stream(x, g.DEVICE)
        verdict = "its current stream" if answered == handle else f"not its current stream {handle:#x}"
        return f"{answered:#x} ({verdict})" if answered is not None else f"None ({verdict})"
    except Exception as error:
        return "error: " + _clean(f"{type(error).__name__}: {error}")


class ExchangeTables(unittest.TestCase):
    """Which installed frameworks expose a DLPack exchange table on their tensor type, its
    versions and entry points, and what its current_work_stream answers for (kDLCUDA, 0)
    while the framework has a stream of its own current: reported (exchange-tables.md),
    not asserted."""

    def test_exchange_tables(self):
        memory = g.any_array_framework().empty()
        rows = []
        for name, x, stream, current in _tensors(memory):
            form = _table_form(x)
            if form is None:
                rows.append([name, "none", "-", "-"])
                continue
            try:
                chain = _dlsync._exchange_table_chain(x)
                lacks = [e for e, there in zip(dlsync.testing.ENTRY_POINTS, chain[0][2] or ()) if not there]
                versions = ", ".join(f"{a}.{b}" for a, b, _ in chain)
                entries = f"versions {versions}; lacks {', '.join(lacks) or 'nothing'}"
            except Exception as error:
                entries = "error: " + _clean(f"{type(error).__name__}: {error}")
            rows.append([name, form, entries, _answer(x, stream, current)])
        lines = ["| framework (tensor type) | exchange table | chain and entry points | "
                 "current_work_stream(kDLCUDA, 0) |", "|---|---|---|---|"]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        g.write_table("exchange-tables", "\n".join(lines) + f"\n\nframeworks: {g.versions()}.")


if __name__ == "__main__":
    unittest.main()
