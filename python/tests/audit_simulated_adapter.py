# SPDX-License-Identifier: Apache-2.0
"""The adapter docs/audit.md shows for --simulated, as written there: a framework's tensor
on dlsync's simulated device, with only the methods the page says are enough (and attach,
which hands it the simulated device). Its producer orders with dlsync.export; PlainAdapter
is the same without it (a producer that forgot, which must come out a RACE)."""
import ctypes

import dlsync
import dlsync.audit
import dlsync.testing


class SimTensor:
    def __init__(self, pool, block, stream, sync):
        self.pool, self.block, self.stream, self.sync = pool, block, stream, sync

    def __dlpack_device__(self):
        return (2, 0)  # the simulated device is a CUDA device to DLPack

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if self.sync:
            dlsync.export((2, 0), self.stream, stream)
        return self.pool.export(self.block, self.stream, reuse=False)


class MyArrayAdapter(dlsync.audit.Adapter):
    name = "myarray-sim"
    sync = True

    def open(self, simulated):              # this adapter runs on the simulated device only
        return None if simulated else "runs with --simulated only"

    def device(self):
        return dlsync.audit.SIMULATED

    def attach(self, world):                # the run's simulated device
        self.sim = world.device
        self.pool = dlsync.testing.StreamOrderedPool(dlsync.audit.COUNT)

    def stream(self):
        return self.sim.stream(non_blocking=True)

    def make(self, staged, stream):         # written on stream, not waited for
        block = self.pool.alloc(stream)
        self.sim.copy(stream, bytearray(staged), block)
        return SimTensor(self.pool, block, stream, self.sync)

    def consume(self, tensor, stream):      # import on stream, read there
        capsule = tensor.__dlpack__(stream=int(stream.handle), max_version=(1, 3))
        address, size, _ = dlsync.audit.capsule_memory(capsule)
        out = bytearray(size)
        self.sim.copy(stream, (ctypes.c_char * size).from_address(address), out)
        return dlsync.audit.Read(values=lambda: bytes(out), keep=capsule,
                                 release=lambda: dlsync.tensor_release(capsule, stream))


class PlainAdapter(MyArrayAdapter):
    name = "myarray-sim-plain"
    sync = False


ADAPTERS = [MyArrayAdapter(), PlainAdapter()]
