# SPDX-License-Identifier: Apache-2.0
"""dlsync.testing for producers with their own copy of dlsync: a Cython and a C extension,
built against the installed package, install the simulated device into their copy
(dl_sync_testing_install); the race checker then judges their dl_sync_export. The C one
also exposes a DLPack exchange table, which the module dlsync imports through. Each
ordering test has its negative control (the export forgotten, the bare conversion)."""
import unittest

import numpy as np

import c_producer
import cy_producer
import dlsync
import dlsync.testing

SIZE = 4096


class CArray:
    """An array whose __dlpack__ synchronizes with the C extension's copy of dlsync."""

    def __init__(self, data, device, stream, sync=True):
        self.data, self.device, self.stream, self.sync = data, device, stream, sync

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if self.sync:
            c_producer.export(self.device, self.stream, stream)
        return self.data.__dlpack__()


PRODUCERS = {
    "cython": (cy_producer, lambda d, s, sync: cy_producer.Array(d, (2, 0), s, sync)),
    "c": (c_producer, lambda d, s, sync: CArray(d, (2, 0), s, sync)),
}


def exchange(sim, make, sync):
    """The producer writes on its stream, the consumer asks for its own and reads."""
    producer, consumer = sim.stream(), sim.stream()
    x = make(np.zeros(SIZE, np.uint8), producer.handle, sync)
    gate = sim.hold(producer)  # the producer is certainly still writing
    sim.write(producer, x.data, 7)
    x.__dlpack__(stream=consumer.handle)
    seen = np.zeros(SIZE, np.uint8)
    sim.copy(consumer, x.data, seen)
    if sync:  # else the consumer is not waiting for the producer: it reads before the write
        gate.release()
    consumer.synchronize()
    sim.host_read(seen)
    return seen


class Producers(unittest.TestCase):
    def test_export_orders_the_producer_first(self):
        for name, (module, make) in PRODUCERS.items():
            with self.subTest(name), dlsync.testing.SimulatedDevice(jitter_us=100, seed=5) as sim:
                module.use_simulated_device(sim)
                self.assertEqual(module.backend_name(2), "sim")
                seen = exchange(sim, make, sync=True)
                self.assertEqual(sim.race_count, 0, sim.race_report())
                self.assertTrue((seen == 7).all())

    def test_forgotten_export_is_caught(self):
        """Negative control: the same program, the producer's export left out."""
        for name, (module, make) in PRODUCERS.items():
            with self.subTest(name):
                with self.assertRaisesRegex(AssertionError, "race"):
                    with dlsync.testing.SimulatedDevice() as sim:
                        module.use_simulated_device(sim)
                        seen = exchange(sim, make, sync=False)
                        self.assertTrue((seen == 0).all())  # read before the write

    def test_closing_detaches_every_copy(self):
        """Each session installs afresh: the copy's backend comes back at close, and its
        pool (whose events were the closed simulator's) is rebuilt in the next session."""
        for _ in range(3):
            with dlsync.testing.SimulatedDevice() as sim:
                for module, make in PRODUCERS.values():
                    module.use_simulated_device(sim)
                    module.use_simulated_device(sim.backend_capsule)  # again: no-op
                    exchange(sim, make, sync=True)
            for module, _ in PRODUCERS.values():
                self.assertEqual(module.backend_name(2), "cuda")
                self.assertEqual(module.backend_name(13), "cuda")

    def test_three_copies_in_one_exchange(self):
        """Cython -> C -> the module dlsync, each ordering with its own copy."""
        with dlsync.testing.SimulatedDevice(jitter_us=100, seed=9) as sim:
            cy_producer.use_simulated_device(sim)
            c_producer.use_simulated_device(sim)
            a, b, c = sim.stream(), sim.stream(), sim.stream()
            x = np.zeros(SIZE, np.uint8)
            y = np.zeros(SIZE, np.uint8)
            sim.write(a, x, 3)
            cy_producer.Array(x, (2, 0), a.handle).__dlpack__(stream=b.handle)
            sim.copy(b, x, y)
            c_producer.export((2, 0), b.handle, c.handle)
            dlsync.export((2, 0), c, None)  # then the legacy stream reads
            out = np.zeros(SIZE, np.uint8)
            sim.copy(sim.legacy_stream, y, out)
            sim.synchronize()
            sim.host_read(out)
            self.assertTrue((out == 3).all())

    def test_rocm_types(self):
        with dlsync.testing.SimulatedDevice(dlsync.testing.ROCM_DEVICE_TYPES) as sim:
            c_producer.use_simulated_device(sim)
            self.assertEqual(c_producer.backend_name(10), "sim")
            self.assertEqual(c_producer.backend_name(2), "cuda")
            p, q = sim.stream(), sim.stream()
            x = np.zeros(64, np.uint8)
            sim.write(p, x, 1)
            c_producer.export((10, 0), p.handle, q.handle)
            sim.copy(q, x, bytearray(64))
        self.assertEqual(c_producer.backend_name(10), "hip")

    def test_the_c_api_from_cython(self):
        answers = cy_producer.api_smoke()
        self.assertEqual(answers["needs_sync"], 0)  # a CPU tensor needs no synchronization
        self.assertTrue(answers["arg_is_none"])
        self.assertTrue(answers["strict"])
        self.assertEqual(answers["status_name"], "DL_SYNC_EINVAL")
        self.assertEqual(".".join(map(str, answers["version"])), dlsync.__version__)
        self.assertEqual(answers["idle_events"], 0)
        self.assertEqual(answers["has_event"], (0, 0))
        self.assertIn("dl_sync_stream_from_arg", answers["error"])  # dlsync's own message
        self.assertEqual(answers["legacy_handle"], dlsync.STREAM_LEGACY)
        self.assertEqual(answers["sizes"], (80, 64, 48, 8))

    def test_errors(self):
        sim = dlsync.testing.SimulatedDevice()
        with self.assertRaisesRegex(RuntimeError, "not open"):
            c_producer.use_simulated_device(sim)
        with self.assertRaisesRegex(TypeError, "SimulatedDevice"):
            cy_producer.use_simulated_device(object())
        with sim:
            capsule = sim.backend_capsule
        with self.assertRaisesRegex(RuntimeError, "not open"):
            c_producer.use_simulated_device(capsule)  # kept past its device
        with self.assertRaises(ValueError):  # a capsule of another kind
            c_producer.use_simulated_device(np.zeros(1).__dlpack__())

    def test_a_copy_without_the_simulated_device_refuses_its_streams(self):
        # The producer forgot dl_sync_testing_install: its copy of dlsync has the CUDA
        # driver backend, which must never be handed the simulator's streams.
        with dlsync.testing.SimulatedDevice() as sim:
            a, b = sim.stream(), sim.stream()
            with self.assertRaisesRegex(ValueError, r"is a stream of dlsync's simulated device, "
                                        r"given to the 'cuda' backend: install the simulated device"):
                c_producer.export((2, 0), a.handle, b.handle)
            c_producer.use_simulated_device(sim)  # with it installed, the same call orders
            c_producer.export((2, 0), a.handle, b.handle)

    def test_statuses_become_exceptions_with_dlsyncs_message(self):
        # dlsync_python.h's dl_sync_python_raise, in the C producer's export.
        with self.assertRaisesRegex(ValueError, r"dl_sync_export: stream=0 is ambiguous"):
            c_producer.export((2, 0), 0, 0)
        with self.assertRaisesRegex(ValueError, r"dl_sync_export: device has unknown device type 99"):
            c_producer.export((99, 0), 0, None)


class CTable(unittest.TestCase):
    """A DLPack exchange table written in C (c_producer.TableArray), imported by the module
    dlsync onto the consumer's stream; the control is the table's bare conversion."""

    def exchange(self, sim, bare):
        producer, consumer = sim.stream(), sim.stream(non_blocking=True)
        c_producer.use_stream(producer.handle)
        x = c_producer.TableArray(np.zeros(SIZE, np.uint8), (2, 0))
        gate = sim.hold(producer)
        sim.write(producer, x, 7)
        capsule = dlsync._dlsync._exchange_bare_import(x) if bare else dlsync.import_tensor(x, (2, 0), consumer)
        seen = np.zeros(SIZE, np.uint8)
        sim.copy(consumer, capsule, seen)
        if bare:
            consumer.synchronize()
        gate.release()
        consumer.synchronize()
        sim.host_read(seen)
        dlsync.tensor_release(capsule, consumer)
        return seen

    def test_the_import_orders_the_producers_current_stream_first(self):
        with dlsync.testing.SimulatedDevice(jitter_us=100, seed=6) as sim:
            self.assertTrue((self.exchange(sim, bare=False) == 7).all())
            self.assertEqual(sim.race_count, 0, sim.race_report())

    def test_negative_control_the_bare_conversion_races(self):
        with self.assertRaisesRegex(AssertionError, "race"):
            with dlsync.testing.SimulatedDevice() as sim:
                self.assertTrue((self.exchange(sim, bare=True) == 0).all())

    def test_check_exchange_api_passes(self):
        def make(sim):
            if sim is not None:
                c_producer.use_stream(sim.stream().handle)
            return c_producer.TableArray(np.zeros(64, np.uint8), (2, 0))

        report = dlsync.testing.check_exchange_api(make, lambda sim, x, value: sim.write(
            dlsync.testing.Stream(dlsync._dlsync._exchange_current_work_stream(x, (2, 0))), x, value))
        self.assertEqual(report.missing, [])
        self.assertTrue(report.ordering_checked)
        self.assertGreater(report.control_races, 0)

    def test_a_refused_conversion_is_the_cause_of_dlsyncs_error(self):
        x = c_producer.TableArray(np.zeros(8, np.uint8), (1, 0))
        c_producer.refuse_next()
        with self.assertRaisesRegex(RuntimeError, "managed_tensor_from_py_object_no_sync failed with -1") as raised:
            dlsync.import_tensor(x, (1, 0), None)
        self.assertIsInstance(raised.exception.__cause__, RuntimeError)
        self.assertIn("this conversion is refused", str(raised.exception.__cause__))


if __name__ == "__main__":
    unittest.main()
