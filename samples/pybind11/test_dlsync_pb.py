# SPDX-License-Identifier: Apache-2.0
"""The pybind11 sample (dlsync_pb): the nanobind sample's cases (test_dlsync_nb.py, which
this test finds beside the nanobind sample) on its module. Its control, copy_unordered,
takes the argument with __dlpack__() and no stream, as a hand-written pybind11 binding
does. Where the nanobind sample is installed too, a tensor of its Array carries an event
this extension's copy of dlsync must wait on."""
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


class PerTensorEvents(test_dlsync_nb.PerTensorEvents):
    MODULE = staticmethod(module)


class Release(test_dlsync_nb.Release):
    MODULE = staticmethod(module)


class ModuleRecordedEvents(test_dlsync_nb.ModuleRecordedEvents):
    MODULE = staticmethod(module)


try:
    import dlsync_nb
except ImportError as error:  # pragma: no cover
    dlsync_nb, NB_MISSING = None, f"the nanobind sample is not installed ({error})"


@unittest.skipIf(dlsync_nb is None, NB_MISSING if dlsync_nb is None else "")
class PerTensorEventsAcrossCopies(test_dlsync_nb.PerTensorEvents):
    """The nanobind extension's copy of dlsync records the event, this extension's copy
    waits on it: it recognizes the other copy's tensors by their exported deleter's name."""

    MODULE = staticmethod(module)
    PRODUCER = staticmethod(lambda: dlsync_nb)


if __name__ == "__main__":
    unittest.main()
