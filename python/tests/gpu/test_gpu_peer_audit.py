# SPDX-License-Identifier: Apache-2.0
"""The peer audit is dlsync.audit now (python -m dlsync.audit, docs/audit.md):
scripts/gpu-check.sh runs it against the frameworks and writes its table into
docs/gpu-results.md. This test runs the same tool on the GPU for what this suite asserts:
its gate (cuStreamWaitValue32 on host-mapped memory, no kernel) holds a producer, so that
dlsync's reference producer is ordered and its control (the same without dlsync.export) is
a RACE in every stream cell, with PyTorch and CuPy consumers. The frameworks' own pairs are
reported by the tool and not asserted. A second test reports which installed frameworks
expose a DLPack exchange table, and what its current_work_stream answers."""
import os
import unittest

import dlsync.testing
import gpu_support as g
from dlsync import _dlsync

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


def _clean(text, limit=90):
    text = " ".join(str(text).split()).replace("|", "/")
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
