# SPDX-License-Identifier: Apache-2.0
"""dlsync.group_wait and dlsync.Group: many producers ordered before one consumer on the
simulated device, with the negative control (a group that leaves one producer out races,
and reads old bytes when that producer is held)."""
import unittest

import numpy as np

import dlsync
import dlsync.testing

SIZE = 1024
CUDA = (2, 0)


class GroupOrdering(unittest.TestCase):
    def run_call(self, sim, add_all, use_context_manager):
        """Three tensors written on two producer streams (a and b on one, c on another),
        read by one kernel on the consumer: returns the bytes the consumer saw."""
        p1, p2 = sim.stream(non_blocking=True), sim.stream(non_blocking=True)
        consumer = sim.stream(non_blocking=True)
        a, b, c = (np.zeros(SIZE, np.uint8) for _ in range(3))
        gate = sim.hold(p2)
        sim.write(p1, a, 1)
        sim.write(p1, b, 2)
        sim.write(p2, c, 3)
        producers = [p1, p1, p2] if add_all else [p1, p1]
        if use_context_manager:
            with dlsync.Group(CUDA, consumer) as group:
                for p in producers:
                    group.add(p)
        else:
            dlsync.group_wait(CUDA, consumer, producers)
        seen = [np.full(SIZE, 9, np.uint8) for _ in range(3)]
        for src, dst in zip((a, b, c), seen):
            sim.copy(consumer, src, dst)
        if add_all:
            gate.release()  # the consumer waits for p2: release it before waiting
        consumer.synchronize()
        gate.release()
        for s in seen:
            sim.host_read(s)
        return seen

    def test_every_producer_is_ordered_before_the_consumer(self):
        for use_context_manager in (False, True):
            with self.subTest(context_manager=use_context_manager):
                with dlsync.testing.SimulatedDevice(jitter_us=100, seed=5) as sim:
                    seen = self.run_call(sim, True, use_context_manager)
                    self.assertEqual(sim.race_count, 0, sim.race_report())
                self.assertEqual([int(s[0]) for s in seen], [1, 2, 3])
                self.assertTrue(all((s == s[0]).all() for s in seen))

    def test_negative_control_a_producer_left_out_races_and_reads_old_bytes(self):
        for use_context_manager in (False, True):
            with self.subTest(context_manager=use_context_manager):
                with dlsync.testing.SimulatedDevice() as sim:
                    seen = self.run_call(sim, False, use_context_manager)
                    self.assertGreater(sim.race_count, 0)
                    sim.close(check=False)
                self.assertTrue((seen[2] == 0).all())  # c read before p2 wrote it
                self.assertEqual([int(seen[0][0]), int(seen[1][0])], [1, 2])

    def test_producer_on_another_device_as_a_pair(self):
        with dlsync.testing.SimulatedDevice() as sim:
            other = sim.stream(non_blocking=True, device=1)
            consumer = sim.stream(non_blocking=True)
            x = np.zeros(SIZE, np.uint8)
            sim.set_device(1)
            sim.write(other, x, 4)
            sim.set_device(0)
            dlsync.group_wait(CUDA, consumer, [((2, 1), other)])
            seen = np.zeros(SIZE, np.uint8)
            sim.copy(consumer, x, seen)
            consumer.synchronize()
            sim.host_read(seen)
        self.assertTrue((seen == 4).all())

    def test_a_block_that_raises_does_not_wait(self):
        with dlsync.testing.SimulatedDevice() as sim:
            consumer = sim.stream()
            with self.assertRaises(KeyError):
                with dlsync.Group(CUDA, consumer) as group:
                    group.add(sim.stream())
                    raise KeyError("the caller's own error")
            self.assertEqual(group._producers, [])


class GroupErrors(unittest.TestCase):
    def test_more_producers_than_a_group_holds_are_all_ordered(self):
        with dlsync.testing.SimulatedDevice() as sim:  # the race checker judges on exit
            consumer = sim.stream()
            producers = [sim.stream() for _ in range(40)]
            blocks = [bytearray(16) for _ in producers]
            for producer, block in zip(producers, blocks):
                sim.write(producer, block, 3)
            with dlsync.Group(CUDA, consumer) as group:
                for producer in producers:
                    group.add(producer)
            for block in blocks:
                sim.copy(consumer, block, bytearray(16))

    def test_add_refuses_what_is_no_stream(self):
        group = dlsync.Group(CUDA, 0x1000)
        for bad in (True, "stream", 1.5, ((2, 0.5), 0x2000)):
            with self.subTest(producer=bad):
                with self.assertRaisesRegex((TypeError, ValueError), "dlsync.Group.add"):
                    group.add(bad)
        self.assertEqual(group._producers, [])

    def test_producer_of_another_family_is_a_value_error(self):
        with self.assertRaisesRegex(ValueError, "on rocm:0 and the group's consumer on cuda:0"):
            dlsync.group_wait(CUDA, 0x1000, [((10, 0), 0x2000)])

    def test_bad_producers(self):
        with self.assertRaises(TypeError):
            dlsync.group_wait(CUDA, 0x1000, 5)  # not iterable
        with self.assertRaisesRegex(TypeError, "producer"):
            dlsync.group_wait(CUDA, 0x1000, [1.5])
        with self.assertRaisesRegex(ValueError, "device"):
            dlsync.group_wait(CUDA, 0x1000, [((2, -1), 0x2000)])

    def test_a_cpu_consumer_has_nothing_to_order(self):
        self.assertIsNone(dlsync.group_wait((1, 0), None, [None, None]))


class RuntimeInfo(unittest.TestCase):
    def test_unknown_names(self):
        with self.assertRaisesRegex(ValueError, "expected 'cuda', 'cudart' or 'hip'"):
            dlsync.runtime("opencl")
        with self.assertRaises(TypeError):
            dlsync.runtime(13)

    def test_answers_with_the_runtime_or_says_what_was_tried(self):
        names = {"cuda": "libcuda.so.1", "cudart": "libcudart", "hip": "libamdhip64"}
        for name, library in names.items():
            with self.subTest(name=name):
                try:
                    info = dlsync.runtime(name)
                except BufferError as error:  # none loaded in this process
                    self.assertIn(library, str(error))
                else:
                    self.assertIsInstance(info, dlsync.RuntimeInfo)
                    self.assertIn(".so", info.path)
                    self.assertGreaterEqual(info.major, 5)


if __name__ == "__main__":
    unittest.main()
