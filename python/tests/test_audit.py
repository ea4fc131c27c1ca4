# SPDX-License-Identifier: Apache-2.0
"""dlsync.audit on the simulated device and on the frameworks' CPU paths (ctest
python_module_audit): dlsync's own producer and consumer are ordered in every cell, and
each of their controls (the producer without dlsync.export, the consumer without
dlsync.tensor_release or dlsync.import_tensor, a consumer that blocks the host or reads
wrong values) is reported as what it is; the command's exit status, JSON and table; an
adapter of one's own; the exchange-table cell and its hook. A test that needs a framework
that is not installed skips, saying which."""
import importlib
import json
import os
import subprocess
import sys
import tempfile
import unittest
import weakref
from typing import Any, Dict, List, Optional, Tuple

import dlsync
import dlsync.audit
import dlsync.testing
from dlsync.audit import CPU, Adapter, Read
from dlsync.audit._adapters import DlsyncAdapter

HERE = os.path.dirname(os.path.abspath(__file__))
WINDOW = 0.05
STREAM_KEYS = ("None", "1", "2", "handle")


def verdicts(report: dlsync.audit.Report, pair: int = 0) -> Dict[str, str]:
    return {key: cell.verdict for key, cell in report.pairs[pair].cells.items()}


def simulated(producer: Any, consumer: Any, **options: Any) -> dlsync.audit.Report:
    return dlsync.audit.run([producer], [consumer], simulated=True, window=WINDOW, **options)


def command(*arguments: str) -> Tuple[int, str, Dict[str, Any]]:
    """python -m dlsync.audit; (exit status, output, the JSON it wrote)."""
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "audit.json")
        process = subprocess.run(
            [sys.executable, "-m", "dlsync.audit", "--json", path, "--window", str(WINDOW),
             *arguments], cwd=HERE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            universal_newlines=True, timeout=240,
            env=dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")])))
        found: Dict[str, Any] = {}
        if os.path.exists(path):
            with open(path) as f:
                found = json.load(f)
        return process.returncode, process.stdout, found


class SimulatedReference(unittest.TestCase):
    """dlsync's producer and consumer on the simulated device, and their controls."""

    def test_dlsync_is_ordered_in_every_cell(self) -> None:
        report = simulated("dlsync", "dlsync")
        self.assertEqual(verdicts(report), {
            "None": "ordered", "-1": "RACE", "1": "ordered", "2": "ordered", "handle": "ordered",
            "exchange": "ordered", "release": "ordered", "capture": "ordered"})
        self.assertTrue(report.pairs[0].cells["-1"].race_expected)  # -1 asks for no sync
        self.assertIn("dlsync.tensor_release: ordered", report.pairs[0].cells["release"].detail)
        self.assertEqual(report.exit_status(), 0)

    def test_the_control_producer_is_a_race_by_value_and_by_the_race_checker(self) -> None:
        report = simulated("dlsync-control", "dlsync")
        cells = report.pairs[0].cells
        for key in STREAM_KEYS + ("capture",):
            self.assertEqual(cells[key].verdict, "RACE", key)
            self.assertIn("the race checker found", cells[key].detail)
            self.assertIn(f"of {dlsync.audit.COUNT} bytes not the producer's", cells[key].detail)
        # dlsync's consumer defers the release of a producer that names no reuse stream.
        self.assertEqual(cells["release"].verdict, "ordered")
        self.assertIn("dlsync.tensor_release: deferred", cells["release"].detail)
        self.assertEqual(report.exit_status(), 1)
        self.assertEqual(report.exit_status(allow_race=True), 0)

    def test_a_consumer_that_drops_the_capsule_races_the_pool(self) -> None:
        for producer in ("dlsync", "dlsync-control"):
            cell = simulated(producer, "dlsync-control", cells=["release"]).pairs[0].cells["release"]
            self.assertEqual(cell.verdict, "RACE", producer)
            self.assertIn("bytes read were the next owner's", cell.detail)
            self.assertIn("got the released block", cell.detail)

    def test_the_audit_keeps_no_reference_to_a_released_tensor(self) -> None:
        # A pool that frees on the tensor's last reference: the consumer's drop must be the
        # last one, or the block would never be reused and the race never shown.
        cell = simulated(OwnerFreedProducer(), "dlsync-control", cells=["release"]).pairs[0].cells["release"]
        self.assertEqual(cell.verdict, "RACE", cell.detail)
        self.assertIn("got the released block", cell.detail)
        ordered = simulated(OwnerFreedProducer(), "dlsync", cells=["release"]).pairs[0].cells["release"]
        self.assertEqual(ordered.verdict, "ordered", ordered.detail)  # the control: a deferred release

    def test_a_consumer_that_blocks_the_host_is_reported_so(self) -> None:
        report = simulated("dlsync", BlockingConsumer(), cells=["handle"])
        cell = report.pairs[0].cells["handle"]
        self.assertEqual(cell.verdict, "ordered (host blocked)", cell.detail)
        self.assertIn("blocked the host until the timer opened the gate", cell.detail)


class BlockingConsumer(DlsyncAdapter):
    """dlsync's consumer, synchronizing the device before it imports (as a consumer that
    waits on the host would): it can only return once the timer opens the gate."""

    name = "blocking"

    def consume(self, tensor: Any, stream: Any) -> Read:
        self._sim.synchronize()
        return super().consume(tensor, stream)


class OwnerFreedTensor:
    """A tensor whose block goes back to its stream's pool when the last reference to the
    tensor goes, as PyTorch's caching allocator frees a tensor's block (its capsule holds a
    reference to the tensor), not when the capsule's deleter runs."""

    def __init__(self, pool: Any, block: bytearray, stream: Any) -> None:
        self.block, self.stream = block, stream
        weakref.finalize(self, pool.free, block, stream)

    def __dlpack_device__(self) -> Any:
        return (2, 0)

    def __dlpack__(self, *, stream: Optional[int] = None, **kwargs: Any) -> Any:
        dlsync.export((2, 0), self.stream, stream)
        owner = [self]  # the capsule's reference: its deleter lets go of it
        return dlsync._dlsync._sim.tensor(self.stream, self.block, owner.clear, None)


class OwnerFreedProducer(DlsyncAdapter):
    name = "owner-freed"

    def make(self, staged: Any, stream: Any) -> Any:
        block = self._pool.alloc(stream)
        self._sim.copy(stream, staged, block)
        return OwnerFreedTensor(self._pool, block, stream)


class NoTable(DlsyncAdapter):
    """dlsync's producer with its Python __dlpack__ alone: its type has no exchange table."""

    name = "no-table"

    def make_exchange(self, staged: Any, stream: Any) -> Any:
        return self.make(staged, stream)


class ExchangeTableTensor:
    """A producer's tensor whose type has a DLPack C exchange table (a stand-in: the cell
    only looks for the attribute and hands the tensor to dlsync.import_tensor)."""

    __dlpack_c_exchange_api__ = object()

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __dlpack_device__(self) -> Any:
        return self.inner.__dlpack_device__()

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.inner.__dlpack__(**kwargs)


class TableProducer(DlsyncAdapter):
    name = "table"

    def make_exchange(self, staged: Any, stream: Any) -> Any:
        return ExchangeTableTensor(self.make(staged, stream))


class TableControl(TableProducer):
    name = "table-control"
    control, reference = True, False


class ExchangeCell(unittest.TestCase):
    """The exchange-table cell: dlsync's producer (dlsync.testing.ExchangeArray, a real
    table) imported with dlsync.import_tensor, and its control, the table's bare conversion;
    then the hook, with a stand-in for dlsync.import_tensor."""

    def setUp(self) -> None:
        self.original = dlsync.import_tensor

    def tearDown(self) -> None:
        setattr(dlsync, "import_tensor", self.original)

    def test_the_reference_is_ordered_by_import_tensor_and_the_bare_conversion_races(self) -> None:
        imported: List[Any] = []

        def import_tensor(obj: Any, device: Any, stream: Any) -> Any:
            imported.append(type(obj))
            return self.original(obj, device, stream)

        setattr(dlsync, "import_tensor", import_tensor)
        reference = simulated("dlsync", "dlsync", cells=["exchange"]).pairs[0].cells["exchange"]
        self.assertEqual(reference.verdict, "ordered", reference.detail)
        self.assertEqual(imported, [dlsync.testing.ExchangeArray] * 3)  # warm-up and 2 runs
        for run in reference.runs:
            self.assertEqual((run["finished_while_held"], run["bytes_wrong"], run["races"]),
                             (False, 0, 0), run)
        # A table orders nothing: the control producer's is the same, its consumer orders it.
        control_producer = simulated("dlsync-control", "dlsync", cells=["exchange"])
        self.assertEqual(control_producer.pairs[0].cells["exchange"].verdict, "ordered")
        del imported[:]
        # The control: the consumer takes the tensor with the table's bare conversion.
        for producer in ("dlsync", "dlsync-control"):
            cell = simulated(producer, "dlsync-control", cells=["exchange"]).pairs[0].cells["exchange"]
            self.assertEqual(cell.verdict, "RACE", (producer, cell.detail))
            self.assertIn("2/2 runs: the consumer finished while the producer was held in 2",
                          cell.detail)
            self.assertIn(f"read {dlsync.audit.COUNT} of {dlsync.audit.COUNT} bytes not the "
                          "producer's", cell.detail)
            self.assertIn("the race checker found", cell.detail)
        self.assertEqual(imported, [])
        self.assertIsNone(dlsync.testing.ExchangeArray.current_stream())  # none left current

    def test_without_a_table_it_is_not_available(self) -> None:
        cell = simulated(NoTable(), "dlsync", cells=["exchange"]).pairs[0].cells["exchange"]
        self.assertEqual((cell.verdict, cell.detail),
                         ("not available", "the producer's type has no __dlpack_c_exchange_api__"))

    def test_the_hook_imports_through_the_table(self) -> None:
        imported: List[Any] = []

        def import_tensor(obj: Any, device: Any, stream: Any) -> Any:
            imported.append(obj)
            return dlsync.audit._adapters._dlpack(obj, int(stream.handle))

        setattr(dlsync, "import_tensor", import_tensor)
        ordered = simulated(TableProducer(), "dlsync", cells=["exchange"]).pairs[0].cells["exchange"]
        self.assertEqual(ordered.verdict, "ordered", ordered.detail)
        self.assertTrue(imported and isinstance(imported[0], ExchangeTableTensor))
        control = simulated(TableControl(), "dlsync", cells=["exchange"]).pairs[0].cells["exchange"]
        self.assertEqual(control.verdict, "RACE", control.detail)


class HostBytes(Adapter):
    """An adapter of one's own, on the host: bytearrays behind a tiny __dlpack__-less
    interface (its consume reads the tensor it is given)."""

    name = "host-bytes"
    description = "bytearrays on the host (a test adapter)"

    def make(self, staged: Any, stream: Any) -> Any:
        return HostTensor(bytearray(staged))

    def consume(self, tensor: Any, stream: Any) -> Read:
        data = bytes(tensor.__dlpack__(stream=None))
        return Read(values=lambda: data)


class StaleReader(HostBytes):
    """Its control: a consumer that reads what was there before the producer's values."""

    name = "stale-reader"

    def consume(self, tensor: Any, stream: Any) -> Read:
        data = bytes(b ^ 0xFF for b in tensor.__dlpack__(stream=None))
        return Read(values=lambda: data)


class Raising(HostBytes):
    name = "raising"

    def consume(self, tensor: Any, stream: Any) -> Read:
        raise BufferError("cannot import this (a test adapter)")


class HostTensor:
    def __init__(self, data: bytearray) -> None:
        self.data = data

    def __dlpack_device__(self) -> Any:
        return (1, 0)

    def __dlpack__(self, *, stream: Optional[int] = None, **kwargs: Any) -> Any:
        if stream is not None:
            raise BufferError(f"stream={stream} on the CPU")
        return self.data


ADAPTERS = [HostBytes, StaleReader(), Raising]


class OwnAdapters(unittest.TestCase):
    def test_an_adapter_of_ones_own_runs_through_the_command(self) -> None:
        status, output, found = command("--adapter", "test_audit:ADAPTERS", "--pair",
                                        "host-bytes:host-bytes", "--pair", "host-bytes:stale-reader",
                                        "--pair", "host-bytes:raising")
        self.assertEqual(status, 1, output)  # the stale reader's RACE
        ok, stale, raising = (pair["cells"] for pair in found["pairs"])
        self.assertEqual(ok["None"]["verdict"], "ordered")
        self.assertEqual(ok["1"]["verdict"], "error")
        self.assertIn("(as DLPack asks on a device without streams)", ok["1"]["detail"])
        self.assertEqual(stale["None"]["verdict"], "RACE")
        self.assertIn("read 65536 of 65536 bytes not the producer's", stale["None"]["detail"])
        self.assertEqual(raising["handle"]["verdict"], "error")
        self.assertIn("BufferError: cannot import this", raising["handle"]["detail"])
        self.assertEqual(found["exit_status"], 1)
        self.assertIn("| host-bytes -> stale-reader | cpu | RACE |", output)

    def test_the_command_on_the_simulated_device(self) -> None:
        status, output, found = command("--simulated", "--producer", "dlsync-control",
                                        "--consumer", "dlsync", "--cells=None,-1,release")
        self.assertEqual(status, 1, output)
        self.assertEqual(found["device"], "simulated")
        self.assertEqual(found["cells"], ["None", "-1", "release"])
        self.assertEqual(found["summary"]["controls"], {"judged": 1, "raced": 1})
        self.assertEqual(found["summary"]["failing"],
                         [{"producer": "dlsync-control", "consumer": "dlsync", "cell": "None"}])
        self.assertIn("dlsync.audit: controls: stream cells 1, RACE 1", output)
        status, output, found = command("--simulated", "--producer", "dlsync", "--consumer",
                                        "dlsync", "--cells=None,-1", "--allow-race")
        self.assertEqual(status, 0, output)
        self.assertIn("dlsync.audit: reference: stream cells 1, ordered 1", output)

    def test_usage_errors_and_nothing_to_run(self) -> None:
        status, output, _ = command("--producer", "nonesuch")
        self.assertEqual(status, 2, output)
        self.assertIn("no adapter named 'nonesuch'", output)
        status, output, _ = command("--simulated", "--producer", "cupy", "--consumer", "cupy")
        self.assertEqual(status, 3, output)
        self.assertIn("no CPU path: CuPy needs a GPU", output)

    def test_list(self) -> None:
        status, output, _ = command("--simulated", "--list")
        self.assertEqual(status, 0, output)
        self.assertIn("dlsync-control: the control", output)
        self.assertIn("numpy: NumPy", output)


def framework(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as error:
        raise unittest.SkipTest(f"not installed: {name} ({error})")


class CpuPaths(unittest.TestCase):
    """The frameworks' own __dlpack__ and from_dlpack on the host, as a framework's
    CPU-only CI runs them: values checked, no streams."""

    def check_host_pair(self, producer: str, consumer: str) -> Dict[str, dlsync.audit.Cell]:
        report = dlsync.audit.run([producer], [consumer], simulated=True, window=WINDOW)
        self.assertEqual(report.pairs[0].device, CPU, report.pairs[0].not_run)
        cells = report.pairs[0].cells
        for key in ("None", "handle"):
            self.assertEqual(cells[key].verdict, "ordered", (key, cells[key].detail))
        for key in ("release", "capture"):
            self.assertEqual(cells[key].verdict, "not available", key)
        return cells

    def test_numpy(self) -> None:
        framework("numpy")
        cells = self.check_host_pair("numpy", "numpy")
        for key in ("-1", "1", "2"):  # NumPy refuses every stream value but None
            self.assertEqual(cells[key].verdict, "error", key)

    def test_torch(self) -> None:
        framework("torch")
        cells = self.check_host_pair("torch", "torch")
        self.check_host_pair("torch", "numpy")
        self.check_host_pair("numpy", "torch")
        for key in ("-1", "1", "2"):  # answered with an error, or accepted and said so
            self.assertIn(cells[key].verdict, ("ordered", "error"), key)
            if cells[key].verdict == "ordered":
                self.assertIn("which DLPack makes an error", cells[key].detail)

    def test_jax(self) -> None:
        framework("jax")
        self.check_host_pair("jax", "jax")
        self.check_host_pair("numpy", "jax")
        self.check_host_pair("jax", "numpy")


class Report(unittest.TestCase):
    def test_the_table_and_the_json_say_the_same(self) -> None:
        report = simulated("dlsync-control", "dlsync-control", cells=["None", "release"])
        table = report.table()
        self.assertIn("| dlsync-control -> dlsync-control | simulated | RACE | RACE |", table)
        found = report.to_json()
        self.assertEqual(found["format"], 1)
        self.assertEqual(found["pairs"][0]["cells"]["None"]["verdict"], "RACE")
        self.assertEqual(len(found["pairs"][0]["cells"]["None"]["runs"]), 2)
        self.assertEqual(found["exit_status"], 1)
        json.dumps(found)  # all of it serializable


if __name__ == "__main__":
    unittest.main()
