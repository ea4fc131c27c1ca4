# SPDX-License-Identifier: Apache-2.0
"""The nanobind sample (dlsync_nb) on dlsync's simulated device and against real peers.

Each ordering case runs with the producer certainly still writing (its stream held by a
gate) and has its control: the same program without dlsync's ordering, which the race
checker must catch and whose consumer must read the old bytes. The pybind11 sample runs the
same cases (samples/pybind11/test_dlsync_pb.py sets MODULE)."""
import gc
import os
import sys
import unittest

SITE = os.environ.get("DL_SYNC_PYPI_SITE", "")
for folder in (os.path.join(SITE, "torch"), SITE) if SITE else ():
    if os.path.isdir(folder):  # PyTorch 2.10's CPU wheel, ahead of Debian's 1.13
        sys.path.insert(0, folder)

import numpy as np  # noqa: E402

import dlsync  # noqa: E402
import dlsync.testing  # noqa: E402

try:
    import torch  # noqa: E402
except ImportError as error:  # pragma: no cover
    torch, TORCH_MISSING = None, f"PyTorch is not installed ({error}; scripts/install-python-test-deps.sh)"

SIZE = 4096
CUDA, CPU = (2, 0), (1, 0)


def module():
    import dlsync_nb

    return dlsync_nb


class Plain:
    """A framework's array without an exchange table whose __dlpack__ orders with dlsync
    (as a Python framework writes it): the consumer must come through __dlpack__(stream=)."""

    def __init__(self, data, stream):
        self.data, self.stream = data, stream

    def __dlpack_device__(self):
        return CUDA

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        dlsync.export(CUDA, self.stream, stream)
        return self.data.__dlpack__()  # the memory's capsule, legacy (pre-DLPack 1)


class Base(unittest.TestCase):
    MODULE = staticmethod(module)

    @classmethod
    def setUpClass(cls):
        cls.m = cls.MODULE()

    def tearDown(self):
        self.m.use_stream(None)

    def open(self, **jitter):
        sim = dlsync.testing.SimulatedDevice(**jitter).open()
        self.m.use_simulated_device(sim)
        self.addCleanup(sim.close, False)
        return sim


class Consumer(Base):
    """copy(src, dst): src ordered onto the extension's stream before its kernel."""

    def run_copy(self, sim, make, ordered):
        producer = sim.stream(non_blocking=True)
        ours = sim.stream(non_blocking=True)  # blocking, the legacy stream would order it
        self.m.use_stream(ours.handle)
        src, memory = make(producer)
        dst = self.m.Array(bytearray(SIZE), CUDA)
        gate = sim.hold(producer)  # the producer is certainly still writing
        sim.write(producer, memory, 7)
        if ordered:
            self.m.copy(src, dst)
        else:
            self.m.copy_unordered(src, dst)
            ours.synchronize()  # cannot wait for the held write: it read before it
        gate.release()
        ours.synchronize()
        sim.host_read(dst.memory)
        return bytes(dst.memory), sim.race_count

    def check_both(self, make):
        with self.subTest("ordered"):
            sim = self.open(jitter_us=100, seed=3)
            seen, races = self.run_copy(sim, make, ordered=True)
            self.assertEqual(races, 0, sim.race_report())
            self.assertEqual(seen, b"\x07" * SIZE)
            sim.close()
        with self.subTest("control: no ordering"):
            sim = self.open()
            seen, races = self.run_copy(sim, make, ordered=False)
            self.assertGreater(races, 0)
            self.assertEqual(seen, b"\x00" * SIZE)
            with self.assertRaisesRegex(AssertionError, "race"):
                sim.close()

    def test_through_the_exchange_table(self):
        def make(producer):
            dlsync.testing.ExchangeArray.use_stream(producer)
            x = dlsync.testing.ExchangeArray(bytearray(SIZE))
            return x, x

        self.check_both(make)

    def test_through_dlpack_with_the_stream(self):
        def make(producer):
            dlsync.testing.ExchangeArray.use_stream(None)  # only Plain's export orders
            memory = bytearray(SIZE)
            return Plain(dlsync.testing.ExchangeArray(memory), producer), memory

        self.check_both(make)

    def test_release_waits_for_the_kernel(self):
        """The argument is given back after the kernel: its deleter runs once the kernel
        is done (release_poll), never while it may still read."""
        sim = self.open()
        producer, ours = sim.stream(non_blocking=True), sim.stream(non_blocking=True)
        a = self.m.Array(bytearray(SIZE), CUDA)  # the producer: our own type, on its stream
        self.m.use_stream(producer.handle)
        self.m.fill(a, 5)
        holder = Plain(None, producer)
        holder.data = a  # __dlpack__ of our Array, ordered by dlsync.export
        self.m.use_stream(ours.handle)
        dst = self.m.Array(bytearray(SIZE), CUDA)
        before, refs = self.m.deleters_run(), sys.getrefcount(a)
        gate = sim.hold(ours)
        self.m.copy(holder, dst)
        self.assertEqual(self.m.release_pending(), 1)  # the kernel is held: not yet
        self.assertEqual(self.m.deleters_run(), before)
        gate.release()
        ours.synchronize()
        self.assertEqual(self.m.release_poll(), 1)
        self.assertEqual(self.m.deleters_run(), before + 1)
        self.assertEqual(self.m.release_poll(), 0)
        self.assertEqual(sys.getrefcount(a), refs)
        sim.host_read(dst.memory)
        self.assertEqual(bytes(dst.memory), b"\x05" * SIZE)
        sim.close()

    def test_under_capture_the_ordering_is_captured(self):
        sim = self.open()
        producer, ours = sim.stream(non_blocking=True), sim.stream(non_blocking=True)
        dlsync.testing.ExchangeArray.use_stream(producer)
        x = dlsync.testing.ExchangeArray(bytearray(SIZE))
        sim.write(producer, x, 1)
        self.m.use_stream(ours.handle)
        dst = self.m.Array(bytearray(SIZE), CUDA)
        ours.begin_capture()
        self.m.copy(x, dst)
        self.assertEqual(self.m.release_pending(), 1)  # the graph keeps it
        self.assertEqual(ours.end_capture(), (1, 1))  # the kernel, the external wait
        sim.synchronize()
        self.assertEqual(self.m.release_poll(), 1)  # the graph is gone
        sim.close()

    def test_bad_arguments(self):
        sim = self.open()
        self.m.use_stream(sim.stream().handle)
        dst = self.m.Array(bytearray(8), CUDA)
        with self.assertRaisesRegex(ValueError, r"is on device \(1, 0\); this call runs on \(2, 0\)"):
            self.m.copy(np.zeros(8, np.uint8), dst)
        with self.assertRaisesRegex(ValueError, "differ in size"):
            self.m.copy(self.m.Array(bytearray(4), CUDA), dst)
        with self.assertRaisesRegex(TypeError, "expected an array with a DLPack exchange table"):
            self.m.copy(object(), dst)
        with self.assertRaisesRegex(TypeError, "incompatible function arguments"):
            self.m.copy(np.zeros(8, np.uint8), bytearray(8))  # dst: an Array
        sim.close()


class Pooled:
    """A framework whose memory comes from a stream-ordered pool (a caching allocator): its
    __dlpack__ orders with dlsync.export, and once the tensor's deleter ran the pool hands
    the block to the producer's next allocation on its stream at once."""

    def __init__(self, pool, stream):
        self.pool, self.stream = pool, stream
        self.block = pool.alloc(stream)

    def __dlpack_device__(self):
        return CUDA

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        dlsync.export(CUDA, self.stream, stream)
        return self.pool.export(self.block, self.stream, reuse=False)


class Release(Base):
    """copy() gives each argument back after its kernel (dl_sync_tensor_release): the
    producer's pool cannot hand the memory out while the kernel may still read it."""

    def exchange(self, sim, ordered):
        producer, ours = sim.stream(non_blocking=True), sim.stream(non_blocking=True)
        self.m.use_stream(ours.handle)
        pool = dlsync.testing.StreamOrderedPool(SIZE)
        x = Pooled(pool, producer)
        sim.write(producer, x.block, 7)
        dst = self.m.Array(bytearray(SIZE), CUDA)
        gate = sim.hold(ours)  # our kernel certainly reads late
        (self.m.copy if ordered else self.m.copy_unordered)(x, dst)
        again = pool.alloc(producer)  # the producer's next allocation and its write
        sim.write(producer, again, 3)
        if not ordered:
            producer.synchronize()  # the rewrite is done before our kernel reads
        gate.release()
        sim.synchronize()
        self.m.release_poll()
        sim.host_read(dst.memory)
        return again is x.block, bytes(dst.memory)

    def test_the_memory_is_not_reused_under_the_kernel(self):
        sim = self.open(jitter_us=50, seed=13)
        reused, seen = self.exchange(sim, ordered=True)
        self.assertFalse(reused)  # the release waits for the kernel
        self.assertTrue(seen == b"\x07" * SIZE)
        self.assertEqual(self.m.release_pending(), 0)
        sim.close()

    def test_control_the_deleter_at_return(self):
        sim = self.open()
        reused, seen = self.exchange(sim, ordered=False)
        self.assertTrue(reused)
        self.assertTrue(seen == b"\x03" * SIZE)  # the producer's next write, read as ours
        with self.assertRaisesRegex(AssertionError, "race"):
            sim.close()


class Exported:
    """A tensor exported earlier with stream=-1 (so it carries an event of its producer's
    stream, recorded then), handed to a consumer later: the consumer must wait on the
    tensor's event, since nothing ordered the export."""

    def __init__(self, array):
        self.device = array.__dlpack_device__()
        self.capsule = array.__dlpack__(stream=-1, max_version=(1, 3))

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return self.capsule


class PerTensorEvents(Base):
    """A tensor that carries an event of its producer's stream: copy() waits on it."""

    PRODUCER = None  # the module whose Array produces: this one, or another copy of dlsync

    def exchange(self, sim, ordered):
        producer_module = self.PRODUCER() if self.PRODUCER else self.m
        if producer_module is not self.m:
            producer_module.use_simulated_device(sim)
        producer, ours = sim.stream(non_blocking=True), sim.stream(non_blocking=True)
        producer_module.use_stream(producer.handle)
        a = producer_module.Array(bytearray(SIZE), CUDA)
        gate = sim.hold(producer)
        producer_module.fill(a, 7)
        before = producer_module.deleters_run()
        x = Exported(a)  # the event is recorded on the producer's stream, now
        self.m.use_stream(ours.handle)  # (one module: its stream is ours from here on)
        dst = self.m.Array(bytearray(SIZE), CUDA)
        (self.m.copy if ordered else self.m.copy_unordered)(x, dst)
        del x
        if not ordered:
            ours.synchronize()  # it did not wait for the held write
        gate.release()
        sim.synchronize()
        self.m.release_poll()
        self.assertEqual(producer_module.deleters_run(), before + 1)
        sim.host_read(dst.memory)
        producer_module.use_stream(None)
        return bytes(dst.memory)

    def test_the_event_orders_the_read(self):
        sim = self.open(jitter_us=50, seed=11)
        self.assertTrue(self.exchange(sim, ordered=True) == b"\x07" * SIZE)
        sim.close()

    def test_control_without_the_wait(self):
        sim = self.open()
        self.assertTrue(self.exchange(sim, ordered=False) == b"\x00" * SIZE)
        with self.assertRaisesRegex(AssertionError, "race"):
            sim.close()

    def test_under_capture_no_event_is_recorded(self):
        sim = self.open()
        producer = sim.stream(non_blocking=True)
        self.m.use_stream(producer.handle)
        a = self.m.Array(bytearray(SIZE), CUDA)
        producer.begin_capture()
        a.__dlpack__(stream=-1, max_version=(1, 3))  # the consumer orders itself: allowed
        self.assertEqual(producer.end_capture(), (0, 0))
        sim.close()


class PoolRecorded:
    """A framework whose pool records a per-tensor event at export (the dlsync module does:
    StreamOrderedPool.export with reuse records an event of the producer's stream and names
    it as the reuse stream) and orders nothing else: the consumer must recognise the dlsync
    module's owner record, another copy of dlsync than its own, to wait on the event."""

    def __init__(self, pool, stream):
        self.pool, self.stream = pool, stream
        self.block = pool.alloc(stream)

    def __dlpack_device__(self):
        return CUDA

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return self.pool.export(self.block, self.stream, reuse=True)


class ModuleRecordedEvents(Base):
    """copy() waits on an event the dlsync module recorded, and releases the tensor onto the
    module's reuse stream: the module exports its two deleters, so this extension's copy of
    dlsync recognises its tensors (dladdr names them)."""

    def exchange(self, sim, ordered, hold):
        producer, ours = sim.stream(non_blocking=True), sim.stream(non_blocking=True)
        self.m.use_stream(ours.handle)
        pool = dlsync.testing.StreamOrderedPool(SIZE)
        x = PoolRecorded(pool, producer)
        dst = self.m.Array(bytearray(SIZE), CUDA)
        gate = sim.hold(producer if hold == "producer" else ours)
        sim.write(producer, x.block, 7)
        (self.m.copy if ordered else self.m.copy_unordered)(x, dst)
        pending = self.m.release_pending()
        again = pool.alloc(producer)  # the producer's next allocation and its write
        sim.write(producer, again, 3)
        if not ordered:  # nothing waits: the stream not held runs to its end first
            (ours if hold == "producer" else producer).synchronize()
        gate.release()
        sim.synchronize()
        self.m.release_poll()
        sim.host_read(dst.memory)
        return bytes(dst.memory), pending, again is x.block

    def test_the_event_orders_the_read(self):
        """The producer's write is held: only a wait on the tensor's event orders it."""
        sim = self.open(jitter_us=50, seed=17)
        seen, _, _ = self.exchange(sim, ordered=True, hold="producer")
        self.assertEqual(sim.race_count, 0, sim.race_report())
        self.assertTrue(seen == b"\x07" * SIZE)
        sim.close()

    def test_the_release_orders_the_reuse_stream(self):
        """Our kernel is held: the release makes the reuse stream wait for it and gives the
        block back at once (not deferred), so the producer's next write lands after our read."""
        sim = self.open(jitter_us=50, seed=19)
        seen, pending, reused = self.exchange(sim, ordered=True, hold="ours")
        self.assertEqual(pending, 0)
        self.assertTrue(reused)
        self.assertEqual(sim.race_count, 0, sim.race_report())
        self.assertTrue(seen == b"\x07" * SIZE)
        sim.close()

    def test_control_without_the_wait(self):
        sim = self.open()
        seen, _, _ = self.exchange(sim, ordered=False, hold="producer")
        self.assertTrue(seen == b"\x00" * SIZE)  # read before the held write
        with self.assertRaisesRegex(AssertionError, "race"):
            sim.close()

    def test_control_the_deleter_at_return(self):
        sim = self.open()
        seen, _, reused = self.exchange(sim, ordered=False, hold="ours")
        self.assertTrue(reused)
        self.assertTrue(seen == b"\x03" * SIZE)  # the producer's next write, read as ours
        with self.assertRaisesRegex(AssertionError, "race"):
            sim.close()


class Producer(Base):
    """Array.__dlpack__ and the Array type's exchange table."""

    def exchange(self, sim, stream_value, consumer):
        producer = sim.stream(non_blocking=True)
        self.m.use_stream(producer.handle)
        a = self.m.Array(bytearray(SIZE), CUDA)
        gate = sim.hold(producer)
        self.m.fill(a, 9)  # our kernel on our stream
        capsule = a.__dlpack__(stream=stream_value, max_version=(1, 3))
        seen = bytearray(SIZE)
        sim.copy(consumer, capsule, seen)
        if stream_value == -1:  # not ordered: the consumer's copy read before the write
            consumer.synchronize()
        gate.release()
        sim.synchronize()
        sim.host_read(seen)
        return bytes(seen)

    def test_every_stream_value_orders_the_export(self):
        cases = {
            "a stream": lambda sim: (lambda s: (s.handle, s))(sim.stream(non_blocking=True)),
            "None (legacy)": lambda sim: (None, sim.legacy_stream),
            "1 (legacy)": lambda sim: (1, sim.legacy_stream),
            "2 (per-thread)": lambda sim: (2, sim.per_thread_stream),
        }
        for name, pick in cases.items():
            with self.subTest(name):
                sim = self.open(jitter_us=50, seed=7)
                value, consumer = pick(sim)
                self.assertEqual(self.exchange(sim, value, consumer), b"\x09" * SIZE)
                sim.close()

    def test_control_minus_one_is_not_ordered(self):
        """-1: the consumer orders itself; one that does not is caught."""
        sim = self.open()
        seen = self.exchange(sim, -1, sim.stream(non_blocking=True))
        self.assertEqual(seen, b"\x00" * SIZE)
        with self.assertRaisesRegex(AssertionError, "race"):
            sim.close()

    def test_exchange_table_passes_check_exchange_api(self):
        streams = {}

        def make(sim):
            if sim is not None:
                self.m.use_simulated_device(sim)
                streams["current"] = sim.stream(non_blocking=True)
                self.m.use_stream(streams["current"].handle)
            return self.m.Array(bytearray(64), CUDA)

        report = dlsync.testing.check_exchange_api(make, lambda sim, x, value: self.m.fill(x, value))
        self.assertEqual(report.missing, [])
        self.assertTrue(report.ordering_checked)
        self.assertGreater(report.control_races, 0)

    def test_capture_rules(self):
        sim = self.open()
        producer = sim.stream(non_blocking=True)
        self.m.use_stream(producer.handle)
        a = self.m.Array(bytearray(SIZE), CUDA)
        producer.begin_capture()
        with self.assertRaisesRegex(BufferError, "captur"):
            a.__dlpack__(stream=None)  # the legacy stream cannot join the capture
        self.assertIsNotNone(producer.end_capture())
        consumer = sim.stream(non_blocking=True)
        consumer.begin_capture()
        self.m.fill(a, 1)  # our stream is not capturing: the consumer's graph waits on it
        capsule = a.__dlpack__(stream=consumer.handle, max_version=(1, 3))
        sim.copy(consumer, capsule, bytearray(SIZE))
        self.assertEqual(consumer.end_capture(), (1, 1))
        sim.close()

    def test_bad_arguments(self):
        a = self.m.Array(bytearray(8), CUDA)
        for value in (0, -2):
            with self.subTest(stream=value), self.assertRaises(ValueError):
                a.__dlpack__(stream=value)
        for value in (True, "1", 1.0):
            with self.subTest(stream=value), self.assertRaisesRegex(TypeError, "expected None or an int"):
                a.__dlpack__(stream=value)
        with self.assertRaisesRegex(TypeError, "max_version"):
            a.__dlpack__(max_version=1)
        with self.assertRaises(BufferError):
            a.__dlpack__(copy=True)
        with self.assertRaises(BufferError):
            a.__dlpack__(dl_device=(2, 1))
        with self.assertRaises(TypeError):
            a.__dlpack__(None)  # keyword-only
        with self.assertRaises(ValueError):
            self.m.Array(bytearray(8), (4, 0))

    def test_capsules_delete_once(self):
        a = self.m.Array(bytearray(8), CPU)
        refs, before = sys.getrefcount(a), self.m.deleters_run()
        self.assertIn('"dltensor_versioned"', repr(a.__dlpack__(max_version=(1, 3))))
        self.assertIn('"dltensor"', repr(a.__dlpack__()))
        gc.collect()
        self.assertEqual(self.m.deleters_run(), before + 2)  # never consumed: the capsules
        self.assertEqual(sys.getrefcount(a), refs)


class Peers(Base):
    """Real frameworks on the CPU: values, each deleter run once, reference counts back."""

    def test_numpy_into_ours(self):
        src = np.arange(64, dtype=np.uint8)
        dst = self.m.Array(bytearray(64), CPU)
        refs = sys.getrefcount(src)
        self.m.copy(src, dst)
        self.assertEqual(bytes(dst.memory), bytes(range(64)))
        self.assertEqual(sys.getrefcount(src), refs)  # NumPy's deleter ran, once
        self.m.copy_unordered(src, dst)  # on the CPU nothing is asynchronous
        self.assertEqual(sys.getrefcount(src), refs)

    def test_ours_into_numpy(self):
        memory = bytearray(range(32))
        a = self.m.Array(memory, CPU)
        refs, before = sys.getrefcount(a), self.m.deleters_run()
        x = np.from_dlpack(a)
        self.assertEqual(x.ctypes.data, a.data_ptr)  # zero copy
        self.assertEqual(x.tolist(), list(range(32)))
        memory[3] = 200
        self.assertEqual(x[3], 200)
        self.assertEqual(self.m.deleters_run(), before)
        del x
        gc.collect()
        self.assertEqual(self.m.deleters_run(), before + 1)
        self.assertEqual(sys.getrefcount(a), refs)

    @unittest.skipIf(torch is None, TORCH_MISSING if torch is None else "")
    def test_torch_into_ours(self):
        src = torch.arange(48, dtype=torch.uint8)
        dst = self.m.Array(bytearray(48), CPU)
        refs = sys.getrefcount(src)
        self.m.copy(src, dst)  # through torch's table where it has one (2.10+)
        self.assertEqual(bytes(dst.memory), bytes(range(48)))
        gc.collect()
        self.assertEqual(sys.getrefcount(src), refs)

    @unittest.skipIf(torch is None, TORCH_MISSING if torch is None else "")
    def test_ours_into_torch(self):
        memory = bytearray(16)
        a = self.m.Array(memory, CPU)
        refs, before = sys.getrefcount(a), self.m.deleters_run()
        x = torch.from_dlpack(a)
        x[2] = 77
        self.assertEqual(memory[2], 77)
        del x
        gc.collect()
        self.assertEqual(self.m.deleters_run(), before + 1)
        self.assertEqual(sys.getrefcount(a), refs)

    def test_our_table_on_the_cpu(self):
        report = dlsync.testing.check_exchange_api(lambda sim: self.m.Array(bytearray(64), CPU))
        self.assertEqual(report.missing, [])


if __name__ == "__main__":
    unittest.main()
