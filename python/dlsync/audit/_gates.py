# SPDX-License-Identifier: Apache-2.0
"""Where a run happens and how it holds a producer's stream.

- SimulatedWorld: dlsync's simulated device (dlsync.testing) behind the CUDA device types;
  the gate is its hold (a kernel that waits until released) and its race checker judges
  beside the values.
- DriverWorld: a CUDA device; the gate is cuStreamWaitValue32 on a word of host-mapped
  memory, through dlsync's own driver loading (_dlsync._driver_gate*). Where the
  device cannot map host memory or has no stream memory operations, there is no gate: each
  run then relies on a timed window, and the report says so.

A tensor on the host (CPU) has no stream to hold: its runs are never gated."""
import threading
from typing import Any, Dict, List, Optional

from .. import _dlsync, runtime

from ._core import CUDA, SIMULATED

CUDA_ERROR_NOT_SUPPORTED = 801  # cuda.h: "the attempted operation is not supported"


class Hold:
    """A gate closed on one stream: the stream's later work waits until open(). A timer
    opens it from outside Python (a call that blocks the host would otherwise wait for
    ever): timer_stop() says whether it had to."""

    gated = True
    note = ""

    def open(self) -> None:
        raise NotImplementedError

    def timer_start(self, seconds: float) -> None:
        raise NotImplementedError

    def timer_stop(self) -> bool:
        raise NotImplementedError


class NoHold(Hold):
    """No gate: a stream-less device, or a device without stream memory operations."""

    gated = False

    def __init__(self, note: str = "") -> None:
        self.note = note

    def open(self) -> None:
        pass

    def timer_start(self, seconds: float) -> None:
        pass

    def timer_stop(self) -> bool:
        return False


class World:
    kind = ""
    gate = ""
    """How producers are held, for the report."""

    def __init__(self) -> None:
        self.warnings: List[str] = []

    def hold(self, stream: Any) -> Hold:
        return NoHold("the host's memory: no stream to hold")

    def race_count(self) -> int:
        """Races the race checker found so far (the simulated device's; 0 elsewhere)."""
        return 0

    def synchronize(self) -> None:
        pass

    def close(self) -> None:
        pass

    def describe(self) -> Dict[str, Any]:
        return {"kind": self.kind, "gate": self.gate, "warnings": list(self.warnings)}


class _SimulatedHold(Hold):
    def __init__(self, gate: Any) -> None:
        self._gate = gate
        self._lock = threading.Lock()
        self._fired = False
        self._timer: Optional[threading.Timer] = None

    def open(self) -> None:
        self._gate.release()

    def _fire(self) -> None:
        with self._lock:
            self._fired = True
        self._gate.release()

    def timer_start(self, seconds: float) -> None:
        # The simulator's synchronizing calls let go of the GIL, so a Python thread can
        # open the gate while one of them waits.
        self._fired = False
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def timer_stop(self) -> bool:
        if self._timer is None:
            return False
        self._timer.cancel()
        self._timer.join()
        self._timer = None
        with self._lock:
            return self._fired


class SimulatedWorld(World):
    kind = SIMULATED
    gate = ("the simulated device's hold (dlsync.testing: a kernel that waits until released), "
            "and its race checker beside the values")

    def __init__(self) -> None:
        super().__init__()
        import dlsync.testing

        self.device = dlsync.testing.SimulatedDevice().open()

    def hold(self, stream: Any) -> Hold:
        if stream is None:
            return NoHold("the host's memory: no stream to hold")
        return _SimulatedHold(self.device.hold(stream))

    def race_count(self) -> int:
        return int(self.device.race_count)

    def synchronize(self) -> None:
        self.device.synchronize()

    def close(self) -> None:
        self.device.close(check=False)  # the controls' races are the audit's findings


class _DriverHold(Hold):
    def __init__(self, index: int, note: str) -> None:
        self._index = index
        self.note = note

    def open(self) -> None:
        _dlsync._driver_gate_open(self._index)

    def timer_start(self, seconds: float) -> None:
        _dlsync._driver_gate_timer(self._index, seconds)

    def timer_stop(self) -> bool:
        return bool(_dlsync._driver_gate_timer_stop(self._index))


class DriverWorld(World):
    kind = CUDA
    gate = "none used (no pair held a CUDA stream); on a GPU: cuStreamWaitValue32 on host-mapped memory"

    def __init__(self) -> None:
        super().__init__()
        self._fallback: Optional[str] = None
        self._described = False

    def _warn(self, why: str) -> str:
        self._fallback = (f"no gate: {why}; each run relies on a window instead, so a consumer "
                          "that nothing orders is caught only when it happens to read before "
                          "the producer's write lands")
        self.warnings.append(self._fallback)
        self.gate = "none: a timed window (" + why + ")"
        return self._fallback

    def _describe_gate(self, info: Dict[str, int]) -> None:
        try:
            driver = runtime("cuda")
            where = f"{driver.path}, CUDA {driver.major}.{driver.minor}"
        except BufferError as error:
            where = str(error)
        self._described = True
        self.gate = (f"cuStreamWaitValue32 (CU_STREAM_WAIT_VALUE_GEQ) on host-mapped memory "
                     f"(cuMemHostAlloc DEVICEMAP|PORTABLE), device {info['device']}; driver "
                     f"{where}; CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR "
                     f"{info['can_use_stream_wait_value_nor']}")

    def hold(self, stream: Any) -> Hold:
        if stream is None:
            return NoHold("the host's memory: no stream to hold")
        if self._fallback is not None:
            return NoHold(self._fallback)
        index, info = _dlsync._driver_gate(stream)
        if not info["can_map_host_memory"]:
            return NoHold(self._warn(f"device {info['device']} cannot map host memory "
                                     "(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY is 0)"))
        if not self._described:
            self._describe_gate(info)
        note = ""
        if not _dlsync._driver_stream_non_blocking(stream):
            note = ("the held stream synchronizes with the legacy default stream, which orders "
                    "work on that stream whatever the exchange does")
        try:
            _dlsync._driver_gate_hold(index, stream)
        except RuntimeError as error:
            if len(error.args) == 2 and error.args[1] == CUDA_ERROR_NOT_SUPPORTED:
                return NoHold(self._warn("the device has no stream memory operations "
                                         f"({error.args[0]})"))
            raise
        return _DriverHold(index, note)


def world(simulated: bool) -> World:
    """The world of a run: the simulated device, or the CUDA device (set up at the first
    hold, so that a run without a GPU adapter never touches the driver)."""
    return SimulatedWorld() if simulated else DriverWorld()
