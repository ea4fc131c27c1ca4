# SPDX-License-Identifier: Apache-2.0
"""dlsync.import_tensor, the consumer's side of an exchange for a Python framework, on the
simulated device: through the DLPack exchange table of a producer written in Python
(table_producer.py, ctypes) and through __dlpack__ where a type has no table. Each ordering
test has its negative control (the table's bare conversion, or a __dlpack__ that skips
dlsync), caught by the race checker and by value; then the release path, threads, graph
capture, the runtime calls each path makes, and dlsync.testing.check_exchange_api."""
import gc
import sys
import threading
import unittest

import numpy as np

import dlsync
import dlsync.testing
import table_producer as tp
from arrays import Array
from dlsync import _dlsync

CUDA, CPU = (2, 0), (1, 0)
SIZE = 4096


def write_table_array(sim, array, value):
    """The framework's own kernel, on its current stream."""
    sim.write(tp.FRAMEWORK.current_stream(), array.data, value)


class Base(unittest.TestCase):
    def setUp(self):
        tp.reset()

    def tearDown(self):
        tp.reset()
        dlsync.release_poll()

    def exchange(self, sim, import_, value=7):
        """The producer's stream is held while it writes; the consumer imports onto its own
        stream with import_(array, consumer) and copies what it reads. Returns the bytes
        read, after the gate opened and the consumer synchronized."""
        producer, consumer = sim.stream(), sim.stream(non_blocking=True)
        array = tp.TableArray(np.zeros(SIZE, np.uint8), CUDA)
        with tp.use_stream(producer):
            gate = sim.hold(producer)
            sim.write(producer, array.data, value)
            capsule = import_(array, consumer)
            seen = np.full(SIZE, 1, np.uint8)
            sim.copy(consumer, capsule, seen)
            if import_ is bare_import:  # the read cannot wait for the held write
                consumer.synchronize()
            gate.release()
            consumer.synchronize()
            sim.host_read(seen)
            self.assertIn(dlsync.tensor_release(capsule, consumer),
                          (dlsync.RELEASED_NOW, dlsync.RELEASE_DEFERRED))
        return seen


def through_dlsync(array, consumer):
    return dlsync.import_tensor(array, CUDA, consumer)


def bare_import(array, consumer):
    return _dlsync._exchange_bare_import(array)  # the table's _NoSync tensor, no ordering


class ThroughTheTable(Base):
    def test_the_producers_current_stream_is_ordered_before_the_consumer(self):
        with dlsync.testing.SimulatedDevice(jitter_us=100, seed=4) as sim:
            seen = self.exchange(sim, through_dlsync)
            self.assertEqual(sim.race_count, 0, sim.race_report())
        self.assertTrue((seen == 7).all())
        self.assertEqual(tp.FRAMEWORK.asked, 1)

    def test_negative_control_the_bare_conversion_reads_before_the_write(self):
        with self.assertRaisesRegex(AssertionError, "race"):
            with dlsync.testing.SimulatedDevice() as sim:
                seen = self.exchange(sim, bare_import)
                self.assertTrue((seen == 0).all())  # every byte read before the held write

    def test_on_the_producers_stream_and_across_the_gil_is_let_go_for_the_runtime(self):
        """The table's functions run with the GIL; every runtime call without it."""
        with dlsync.testing.SimulatedDevice() as sim:
            producer, consumer = sim.stream(), sim.stream()
            array = tp.TableArray(np.zeros(64, np.uint8), CUDA)
            with tp.use_stream(producer):
                for stream in (producer, consumer):
                    dlsync.tensor_release(dlsync.import_tensor(array, CUDA, stream), -1)
            self.assertEqual(sim.runtime_calls_holding_the_gil, 0)
        self.assertEqual(tp.FRAMEWORK.asked, 2)

    def test_a_cpu_tensor_needs_no_stream_work(self):
        with dlsync.testing.SimulatedDevice() as sim:
            consumer = sim.stream()
            array = tp.TableArray(np.arange(16, dtype=np.uint8), CPU)
            for device, stream in ((CUDA, consumer), (CPU, None)):
                capsule = dlsync.import_tensor(array, device, stream)
                self.assertEqual(_dlsync._exchange_describe(capsule)["device"], CPU)
                self.assertEqual(dlsync.tensor_release(capsule, None), dlsync.RELEASED_NOW)
        self.assertEqual(tp.FRAMEWORK.asked, 0)
        self.assertEqual(tp.FRAMEWORK.deleted, 2)

    def test_dlpack_1_2_tables_under_their_old_name(self):
        """DLPack 1.2's form: the table's address as an int under __c_dlpack_exchange_api__."""
        import ctypes

        Old = type("OldArray", (), {"__c_dlpack_exchange_api__": ctypes.addressof(tp.TABLE),
                                    "__init__": tp.TableArray.__init__,
                                    "__dlpack_device__": tp.TableArray.__dlpack_device__})
        with dlsync.testing.SimulatedDevice() as sim:
            producer, consumer = sim.stream(), sim.stream()
            array = Old(np.zeros(64, np.uint8), CUDA)
            with tp.use_stream(producer):
                sim.write(producer, array.data, 3)
                capsule = dlsync.import_tensor(array, CUDA, consumer)
                seen = bytearray(64)
                sim.copy(consumer, capsule, seen)
                consumer.synchronize()
                sim.host_read(seen)
                dlsync.tensor_release(capsule, consumer)
        self.assertEqual(seen, bytearray([3]) * 64)
        self.assertEqual(tp.FRAMEWORK.asked, 1)

    def test_the_release_runs_the_deleter_once_after_the_consumers_work(self):
        with dlsync.testing.SimulatedDevice() as sim:
            producer, consumer = sim.stream(), sim.stream()
            array = tp.TableArray(np.zeros(SIZE, np.uint8), CUDA)
            with tp.use_stream(producer):
                capsule = dlsync.import_tensor(array, CUDA, consumer)
            gate = sim.hold(consumer)
            sim.copy(consumer, capsule, bytearray(SIZE))
            dlsync.release_thread(False)  # the deleter runs where this test polls
            try:
                self.assertEqual(dlsync.tensor_release(capsule, consumer), dlsync.RELEASE_DEFERRED)
                self.assertEqual(dlsync.release_poll(), 0)
                self.assertEqual(tp.FRAMEWORK.deleted, 0)  # the consumer still reads it
                gate.release()
                consumer.synchronize()
                self.assertEqual(dlsync.release_poll(), 1)
                self.assertEqual(dlsync.release_poll(), 0)
            finally:
                dlsync.release_thread(True)
        self.assertEqual(tp.FRAMEWORK.deleted, 1)
        with self.assertRaisesRegex(TypeError, "not yet consumed"):  # released once only
            dlsync.tensor_release(capsule, -1)

    def test_an_unconsumed_capsule_gives_its_tensor_back(self):
        with dlsync.testing.SimulatedDevice() as sim:
            array = tp.TableArray(np.zeros(64, np.uint8), CUDA)
            with tp.use_stream(sim.stream()):
                capsule = dlsync.import_tensor(array, CUDA, sim.stream())
            del capsule
            gc.collect()
        self.assertEqual(tp.FRAMEWORK.deleted, 1)

    def test_threads_import_from_one_table(self):
        """Each thread has its own current stream of the framework and its own consumer."""
        THREADS, ROUNDS = 4, 30
        errors = []
        with dlsync.testing.SimulatedDevice(jitter_us=50, seed=8) as sim:
            streams = [(sim.stream(), sim.stream(non_blocking=True)) for _ in range(THREADS)]
            arrays = [tp.TableArray(np.zeros(SIZE, np.uint8), CUDA) for _ in range(THREADS)]
            outs = [np.zeros(SIZE, np.uint8) for _ in range(THREADS)]

            def run(t):
                producer, consumer = streams[t]
                try:
                    with tp.use_stream(producer):
                        for r in range(ROUNDS):
                            sim.write(producer, arrays[t].data, r + 1)
                            capsule = dlsync.import_tensor(arrays[t], CUDA, consumer)
                            sim.copy(consumer, capsule, outs[t])
                            dlsync.tensor_release(capsule, consumer)
                            dlsync.push_dep(CUDA, consumer, producer)  # the array handed back
                except Exception as error:  # asserted on the test's thread
                    errors.append(error)

            threads = [threading.Thread(target=run, args=(t,)) for t in range(THREADS)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            sim.synchronize()
            for out in outs:
                sim.host_read(out)
            self.assertEqual(errors, [])
            self.assertEqual(sim.race_count, 0, sim.race_report())
        for out in outs:
            self.assertTrue((out == ROUNDS).all())
        for _ in range(1000):  # the release thread may have run some already
            if tp.FRAMEWORK.deleted == THREADS * ROUNDS:
                break
            dlsync.release_poll()
        self.assertEqual(tp.FRAMEWORK.deleted, THREADS * ROUNDS)
        self.assertEqual(tp.FRAMEWORK.asked, THREADS * ROUNDS)

    def test_a_capturing_consumer_waits_inside_its_graph(self):
        with dlsync.testing.SimulatedDevice() as sim:
            producer, consumer = sim.stream(), sim.stream(non_blocking=True)
            array = tp.TableArray(np.zeros(64, np.uint8), CUDA)
            with tp.use_stream(producer):
                sim.write(producer, array.data, 5)
                consumer.begin_capture()
                capsule = dlsync.import_tensor(array, CUDA, consumer)
                sim.copy(consumer, capsule, bytearray(64))
                self.assertEqual(consumer.end_capture(), (1, 1))  # the copy, an external wait
                dlsync.tensor_release(capsule, -1)

    def test_a_capturing_producer_is_refused_and_its_tensor_given_back(self):
        with dlsync.testing.SimulatedDevice() as sim:
            producer, consumer = sim.stream(), sim.stream()
            data = np.arange(64, dtype=np.uint8)
            array = tp.TableArray(data, CUDA)
            references = sys.getrefcount(array)
            with tp.use_stream(producer):
                producer.begin_capture()
                with self.assertRaisesRegex(BufferError, "is capturing a graph"):
                    dlsync.import_tensor(array, CUDA, consumer)
                producer.end_capture()
        self.assertEqual(tp.FRAMEWORK.deleted, 1)
        self.assertEqual(sys.getrefcount(array), references)
        self.assertTrue((array.data == np.arange(64, dtype=np.uint8)).all())


class ThroughDlpack(Base):
    """Types without a table: __dlpack__(stream=..., max_version=(1, 3)) does the ordering."""

    def run_array(self, sync):
        with dlsync.testing.SimulatedDevice() as sim:
            producer, consumer = sim.stream(non_blocking=True), sim.stream(non_blocking=True)
            x = Array(np.zeros(SIZE, np.uint8), device=CUDA, stream=producer, sync=sync)
            gate = sim.hold(producer)
            sim.write(producer, x.data, 9)
            capsule = dlsync.import_tensor(x, CUDA, consumer)
            seen = np.full(SIZE, 1, np.uint8)
            sim.copy(consumer, capsule, seen)
            if not sync:
                consumer.synchronize()
            gate.release()
            consumer.synchronize()
            sim.host_read(seen)
            # Array's capsule is its NumPy buffer's: a CPU tensor, nothing of a stream pending
            self.assertEqual(dlsync.tensor_release(capsule, None), dlsync.RELEASED_NOW)
            return seen

    def test_the_producers_dlpack_orders_for_the_consumers_stream(self):
        self.assertTrue((self.run_array(sync=True) == 9).all())

    def test_negative_control_a_dlpack_without_dlsync_races(self):
        with self.assertRaisesRegex(AssertionError, "race"):
            self.assertTrue((self.run_array(sync=False) == 0).all())

    def test_a_producer_older_than_dlpack_1_is_handed_back_versioned(self):
        """numpy < 2.1: __dlpack__ has no max_version and makes a legacy capsule."""
        data = np.arange(32, dtype=np.uint8)
        references = sys.getrefcount(data)
        capsule = dlsync.import_tensor(data, CPU, None)
        fields = _dlsync._exchange_describe(capsule)
        self.assertEqual((fields["version"][0], fields["device"], fields["shape"]), (1, CPU, (32,)))
        self.assertEqual(fields["data"], data.ctypes.data)
        self.assertEqual(dlsync.tensor_release(capsule, None), dlsync.RELEASED_NOW)
        self.assertEqual(sys.getrefcount(data), references)  # numpy's deleter ran once

    def test_a_type_with_a_table_takes_the_table(self):
        with dlsync.testing.SimulatedDevice() as sim:
            array = tp.TableArray(np.zeros(16, np.uint8), CUDA)
            with tp.use_stream(sim.stream()):
                dlsync.tensor_release(dlsync.import_tensor(array, CUDA, sim.stream()), -1)
        self.assertEqual(tp.FRAMEWORK.asked, 1)  # not __dlpack__, which asks no table


def make_on_current(sim):
    """A new array, and a new current stream of the framework on the simulated device."""
    tp.FRAMEWORK.local.stream = sim.stream() if sim is not None else None
    return tp.TableArray(np.zeros(256, np.uint8), CUDA)


class CheckExchangeApi(Base):
    def test_the_table_producer_passes(self):
        report = dlsync.testing.check_exchange_api(make_on_current, write_table_array)
        self.assertEqual(report.chain, [(1, 3)])
        self.assertEqual(report.version, (1, 3))
        self.assertEqual(report.missing, [])
        self.assertTrue(report.ordering_checked)
        self.assertGreater(report.control_races, 0)
        self.assertEqual(report.released, dlsync.RELEASE_DEFERRED)

    def test_a_current_work_stream_naming_another_stream_is_caught(self):
        def make(sim):
            array = make_on_current(sim)
            tp.FRAMEWORK.fault = "stream answers"
            tp.FRAMEWORK.answer = sim.stream() if sim is not None else None
            return array

        with self.assertRaisesRegex(AssertionError, "the producer's writes are not on that stream"):
            dlsync.testing.check_exchange_api(make, write_table_array)

    def test_without_a_write_the_static_checks_run_on_cpu_tensors(self):
        report = dlsync.testing.check_exchange_api(lambda sim: tp.TableArray(np.arange(8, dtype=np.uint8), CPU))
        self.assertFalse(report.ordering_checked)
        self.assertEqual(report.device, CPU)

    def test_a_missing_required_entry_point_fails(self):
        NoAllocator = tp.variant("NoAllocator", managed_tensor_allocator=None)
        make = lambda sim: NoAllocator(np.zeros(8, np.uint8), CPU)  # noqa: E731
        with self.assertRaisesRegex(AssertionError, "lacks managed_tensor_allocator"):
            dlsync.testing.check_exchange_api(make)
        optional = [e for e in dlsync.testing.REQUIRED_ENTRY_POINTS if e != "managed_tensor_allocator"]
        report = dlsync.testing.check_exchange_api(make, require=optional)
        self.assertEqual(report.missing, ["managed_tensor_allocator"])

    def test_a_chain_dlsync_cannot_use_fails(self):
        for cls, message in ((tp.variant("Major2", version=(2, 0)), "no table of major version 1"),
                             (tp.variant("Cyclic", version=(2, 0), cyclic=True), "cyclic or corrupt"),
                             (tp.variant("Old", version=(1, 1)), "exchange tables exist since DLPack 1.2")):
            with self.subTest(cls.__name__), self.assertRaisesRegex(AssertionError, message):
                dlsync.testing.check_exchange_api(lambda sim: cls(np.zeros(8, np.uint8), CPU))


class ModelProducer(unittest.TestCase):
    """dlsync.testing.ExchangeArray, the model producer a consumer is tested against."""

    def tearDown(self):
        dlsync.testing.ExchangeArray.use_stream(None)

    def test_it_passes_check_exchange_api(self):
        def make(sim):
            if sim is not None:
                dlsync.testing.ExchangeArray.use_stream(sim.stream())
            return dlsync.testing.ExchangeArray(bytearray(256))

        def write(sim, x, value):
            sim.write(dlsync.testing.ExchangeArray.current_stream(), x, value)

        report = dlsync.testing.check_exchange_api(make, write)
        self.assertEqual((report.missing, report.refused, report.device), ([], {}, CUDA))
        self.assertGreater(report.control_races, 0)

    def test_both_paths_order_it_and_their_control_does_not(self):
        """Through its table and through its __dlpack__ (a plain capsule request: the
        consumer's stream not passed, the control)."""
        for how in ("table", "dlpack", "control"):
            with self.subTest(how):
                sim = dlsync.testing.SimulatedDevice().open()
                producer, consumer = sim.stream(), sim.stream(non_blocking=True)
                dlsync.testing.ExchangeArray.use_stream(producer)
                x = dlsync.testing.ExchangeArray(bytearray(SIZE))
                gate = sim.hold(producer)
                sim.write(producer, x, 4)
                if how == "table":
                    capsule = dlsync.import_tensor(x, CUDA, consumer)
                else:
                    stream = consumer.handle if how == "dlpack" else -1  # -1: no synchronization
                    capsule = x.__dlpack__(stream=stream, max_version=(1, 3))
                seen = bytearray(SIZE)
                sim.copy(consumer, capsule, seen)
                if how == "control":
                    consumer.synchronize()
                gate.release()
                consumer.synchronize()
                sim.host_read(seen)
                races = sim.race_count
                sim.close(check=False)
                self.assertEqual((races > 0, seen == bytearray([4]) * SIZE), (how == "control", how != "control"))


if __name__ == "__main__":
    unittest.main()
