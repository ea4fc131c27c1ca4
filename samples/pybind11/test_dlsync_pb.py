# SPDX-License-Identifier: Apache-2.0
"""The pybind11 sample (dlsync_pb): the nanobind sample's cases (test_dlsync_nb.py, which
this test finds beside the nanobind sample) on its module. Its control, copy_unordered,
takes the argument with __dlpack__() and no stream, as a hand-written pybind11 binding
does."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "nanobind"))

import test_dlsync_nb  # noqa: E402


def module():
    import dlsync_pb

    return dlsync_pb


class Consumer(test_dlsync_nb.Consumer):
    MODULE = staticmethod(module)


class Producer(test_dlsync_nb.Producer):
    MODULE = staticmethod(module)


class Peers(test_dlsync_nb.Peers):
    MODULE = staticmethod(module)


if __name__ == "__main__":
    unittest.main()
