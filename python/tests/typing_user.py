# SPDX-License-Identifier: Apache-2.0
"""A user of every public name of dlsync and dlsync.testing, and of dlsync.audit's run,
checked with mypy --strict against the installed package (its stubs and annotations) and
run on the simulated device."""
import os
from typing import Any, Dict, List, Optional, Tuple

import dlsync
import dlsync.audit
import dlsync.testing


class Array:
    def __init__(self, data: bytearray, stream: dlsync.testing.Stream) -> None:
        self.data = data
        self.stream = stream

    def __dlpack_device__(self) -> Tuple[int, int]:
        return (int(dlsync.DeviceType.CUDA), 0)

    def __dlpack__(self, *, stream: Optional[int] = None) -> bytearray:
        dlsync.export(self.__dlpack_device__(), self.stream, stream)
        return self.data


def conventions() -> None:
    handle, needs_sync = dlsync.stream_from_arg((2, 0), None)
    assert (handle, needs_sync) == (dlsync.STREAM_LEGACY, True)
    assert dlsync.stream_to_arg((2, 0), dlsync.STREAM_PER_THREAD) == 2
    previous: int = dlsync.get_capture_policy()
    dlsync.set_capture_policy(dlsync.CAPTURE_NONE_IS_NO_SYNC)
    dlsync.set_capture_policy(dlsync.CAPTURE_STRICT)
    assert previous == dlsync.CAPTURE_STRICT
    try:
        info: dlsync.RuntimeInfo = dlsync.runtime("hip")
        path: str = info.path
        major: int = info.major
        print("hip runtime", path, info.version, major, info.minor)
    except BufferError:
        pass  # no HIP runtime loaded


def build_paths() -> None:
    include: str = dlsync.get_include()
    dirs: List[str] = dlsync.get_library_dirs()
    libraries: List[str] = dlsync.get_libraries()
    assert os.path.isfile(os.path.join(include, "dlsync", "dlsync.h"))
    assert os.path.isfile(os.path.join(include, "dlsync.pxd"))
    assert os.path.isfile(os.path.join(include, "dlsync_testing.h"))
    assert any(os.path.isfile(os.path.join(d, "libdlsync.a")) for d in dirs)
    assert "dlsync" in libraries


def simulated() -> None:
    types: Tuple[int, ...] = dlsync.testing.CUDA_DEVICE_TYPES + dlsync.testing.ROCM_DEVICE_TYPES
    assert len(types) == 5
    with dlsync.testing.SimulatedDevice(jitter_us=10, seed=2) as sim:
        a: dlsync.testing.Stream = sim.stream()
        b = sim.stream(non_blocking=True)
        x = Array(bytearray(64), a)
        sim.write(a, x.data, 1)
        x.__dlpack__(stream=b.handle)
        dlsync.push_dep((2, 0), b, a)
        with dlsync.Group((2, 0), sim.legacy_stream) as group:
            group.add(a)
            group.add(b.handle, (2, 0))
        dlsync.group_wait((2, 0), a, [b, ((2, 0), sim.per_thread_stream)])
        gate: dlsync.testing.Gate = sim.hold(b)
        gate.release()
        sim.copy(b, x.data, bytearray(64))
        capsule: object = sim.backend_capsule
        assert capsule is not None
        sim.synchronize()
        sim.host_read(x.data)
        a.synchronize()
        b.begin_capture("thread_local")
        assert b.is_capturing
        nodes: Optional[Tuple[int, int]] = b.end_capture()
        assert nodes == (0, 0), nodes
        b.begin_capture("relaxed")
        sim.write(b, bytearray(8), 2)
        graph: Optional[dlsync.testing.Graph] = b.end_capture_graph()
        assert graph is not None
        graph.launch(b)
        b.synchronize()
        graph.destroy()
        sim.set_device(1)
        other = sim.stream(device=1)
        other.destroy()
        sim.set_device(0)
        count: int = sim.race_count
        report: str = sim.race_report()
        assert count == 0, report
        sim.assert_no_races()
        pool = dlsync.testing.StreamOrderedPool(64)
        block: bytearray = pool.alloc(a)
        tensor: object = pool.export(block, a)
        dlsync.release_thread(False)  # release_poll's count below is then exact
        running: bool = dlsync.release_thread_running()
        assert not running
        how: int = dlsync.tensor_release(tensor, b)
        assert how == dlsync.RELEASED_ORDERED, how
        assert dlsync.tensor_release(pool.export(pool.alloc(a), a, reuse=False), b) in (
            dlsync.RELEASE_DEFERRED,
            dlsync.RELEASE_GRAPH,
        )
        sim.synchronize()
        ran: int = dlsync.release_poll()
        assert ran == 1, ran
        dlsync.release_thread(True)
        assert dlsync.tensor_release(pool.export(pool.alloc(a), a), -1) == dlsync.RELEASED_NOW
        pool.free(pool.alloc(a), a)
    with dlsync.testing.NullBackend() as null:
        dlsync.export((2, 0), 5, 6)
        per_call: float = null.time_export((2, 0), 5, 6, 10)
        assert per_call > 0, per_call
        switch: float = null.time_gil_release(10)
        assert switch > 0, switch
    rocm = dlsync.testing.SimulatedDevice(dlsync.testing.ROCM_DEVICE_TYPES).open()
    rocm.close(check=True)


class PoolArray:
    """A producer without a table: its __dlpack__ orders with dlsync.export."""

    def __init__(self, pool: dlsync.testing.StreamOrderedPool, stream: dlsync.testing.Stream) -> None:
        self.pool, self.stream = pool, stream
        self.block = pool.alloc(stream)

    def __dlpack_device__(self) -> Tuple[int, int]:
        return (2, 0)

    def __dlpack__(self, *, stream: Optional[int] = None, max_version: Optional[Tuple[int, int]] = None) -> object:
        dlsync.export((2, 0), self.stream, stream)
        return self.pool.export(self.block, self.stream)


def exchange_tables() -> None:
    entries: Tuple[str, ...] = dlsync.testing.ENTRY_POINTS
    required: Tuple[str, ...] = dlsync.testing.REQUIRED_ENTRY_POINTS
    assert set(required) < set(entries)
    with dlsync.testing.SimulatedDevice() as sim:
        a, b = sim.stream(), sim.stream()
        x = PoolArray(dlsync.testing.StreamOrderedPool(32), a)
        sim.write(a, x.block, 3)
        capsule: object = dlsync.import_tensor(x, (2, 0), b)  # no table: through __dlpack__
        seen = bytearray(32)
        sim.copy(b, capsule, seen)
        b.synchronize()
        sim.host_read(seen)
        assert seen == bytearray([3]) * 32
        dlsync.tensor_release(capsule, b)
        try:
            dlsync.testing.check_exchange_api(lambda s: x, require=required)
        except TypeError as error:  # PoolArray's type has no table
            assert "has no __dlpack_c_exchange_api__" in str(error), error

    def make(sim: Optional[dlsync.testing.SimulatedDevice]) -> dlsync.testing.ExchangeArray:
        if sim is not None:
            dlsync.testing.ExchangeArray.use_stream(sim.stream())
        return dlsync.testing.ExchangeArray(bytearray(64), (2, 0))

    def write(sim: dlsync.testing.SimulatedDevice, x: dlsync.testing.ExchangeArray, value: int) -> None:
        sim.write(dlsync.testing.ExchangeArray.current_stream(), x, value)

    report: dlsync.testing.ExchangeApiReport = dlsync.testing.check_exchange_api(make, write)
    assert report.ordering_checked and report.missing == [] and report.control_races > 0, report
    dlsync.testing.ExchangeArray.use_stream(None)
def audited() -> None:
    """dlsync.audit's API: a run of the reference against its control, and an adapter of
    one's own."""

    class Host(dlsync.audit.Adapter):
        name = "host"

        def make(self, staged: Any, stream: Any) -> Any:
            return bytearray(staged)

        def consume(self, tensor: Any, stream: Any) -> dlsync.audit.Read:
            data = bytes(tensor)
            return dlsync.audit.Read(values=lambda: data)

    report: dlsync.audit.Report = dlsync.audit.run(
        ["dlsync-control"], ["dlsync"], simulated=True, cells=["None"], runs=1, window=0.02)
    cell: dlsync.audit.Cell = report.pairs[0].cells["None"]
    assert cell.verdict == dlsync.audit.RACE and report.exit_status() == 1, cell.detail
    found: Dict[str, Any] = report.to_json()
    assert found["exit_status"] == 1
    mine = dlsync.audit.run(pairs=[(Host(), Host())], cells=["handle"], runs=1)
    assert mine.pairs[0].cells["handle"].verdict == dlsync.audit.ORDERED
    assert mine.pairs[0].device == dlsync.audit.CPU


if __name__ == "__main__":
    conventions()
    build_paths()
    simulated()
    exchange_tables()
    audited()
    print("typing_user: dlsync", dlsync.__version__)
