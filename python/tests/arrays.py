# SPDX-License-Identifier: Apache-2.0
"""A small array library whose __dlpack__ is Python, as a framework writes it: the memory
is a NumPy buffer (which also builds the capsule), the work runs on self.stream."""
import dlsync


class Array:
    def __init__(self, data, device=(1, 0), stream=None, sync=True):
        self.data = data  # a contiguous NumPy array
        self.device = device
        self.stream = stream  # where this library enqueued its work on the data
        self.sync = sync  # False: the bug dlsync.testing must catch

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if self.sync:
            dlsync.export(self.__dlpack_device__(), self.stream, stream)
        return self.data.__dlpack__()
