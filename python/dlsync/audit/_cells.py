# SPDX-License-Identifier: Apache-2.0
"""Running one producer -> consumer pair through every cell, and judging each.

A gated run: the gate closes on the producer's stream, the producer writes behind it, and
the consumer imports and reads on its own stream (the one the cell's stream value names).
A consumer that nothing orders after the producer therefore reads before the write, every
time, and finishes while the gate is still closed; an ordered one cannot finish before the
gate opens, and reads the producer's values. The host opens the gate once the window has
passed (or the consumer finished), and a timer opens it earlier if the consumer's call
blocks the host meanwhile: "ordered (host blocked)". On the simulated device the race
checker judges beside the values. Each cell runs once ungated first (a warm-up that loads
what its first calls load) and then ``runs`` times gated."""
import contextlib
import gc
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from ._core import (
    COUNT,
    CPU,
    ERROR,
    HANDLE,
    HOST_BLOCKED,
    NOT_AVAILABLE,
    ORDERED,
    OTHER_CELLS,
    RACE,
    STREAM_CELLS,
    Adapter,
    Cell,
    CellSpec,
    Read,
    payload,
)
from ._gates import Hold, NoHold, World
from .. import RELEASE_DEFERRED, RELEASE_GRAPH, RELEASED_NOW, RELEASED_ORDERED
from .._dlsync import _exchange_legacy

RELEASE_NAMES = {RELEASED_NOW: "released now", RELEASED_ORDERED: "ordered",
                 RELEASE_DEFERRED: "deferred", RELEASE_GRAPH: "kept by a graph"}
UNTIMED = ("completion not checked: the consumer's adapter has no marker (the verdict rests on "
           "the values and, on the simulated device, the race checker)")
HOST_BLOCK_LIMIT = 0.5  # a consumer call still running then blocks the host
POLL = 50e-6


class Options:
    def __init__(self, exchange_import: Callable[..., Any], runs: int = 2, window: float = 0.1,
                 cells: Optional[List[str]] = None) -> None:
        self.runs = runs
        self.window = window
        self.cells = cells  # None: every cell
        self.exchange_import = exchange_import  # the exchange-table consumer: dlsync.import_tensor


def _one_line(text: Any, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _error_text(error: BaseException) -> str:
    return _one_line(f"{type(error).__name__}: {error}")


@contextlib.contextmanager
def _no_collection() -> Iterator[None]:
    """No garbage collection while a gate is closed: a framework array it frees may
    synchronize the device (a cudaFree), which the held stream would block."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _wait(ready: Callable[[], bool], seconds: float) -> bool:
    """Polls ready() for up to seconds without blocking in a runtime; its last answer."""
    end = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > end:
            return False
        time.sleep(POLL)
    return True


def _wrong(values: Optional[bytes], expected: bytes) -> Optional[int]:
    """How many bytes differ from expected (None: nothing read back)."""
    if values is None:
        return None
    values = bytes(values)
    if values == expected:
        return 0
    if len(values) != len(expected):
        return COUNT
    return sum(1 for got, want in zip(values, expected) if got != want)


class Forced:
    """A producer's tensor whose own ``__dlpack__`` is called with the cell's stream value,
    whatever the consumer's from_dlpack passes (a consumer runs on the stream that value
    names, so the value is what it would pass)."""

    def __init__(self, tensor: Any, argument: Any) -> None:
        self.tensor, self.argument = tensor, argument

    def __dlpack_device__(self) -> Any:
        return self.tensor.__dlpack_device__()

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        max_version = kwargs.get("max_version")
        if max_version is not None:
            try:
                return self.tensor.__dlpack__(stream=self.argument, max_version=max_version)
            except TypeError:  # a __dlpack__ older than max_version
                pass
        return self.tensor.__dlpack__(stream=self.argument)


class Imported:
    """A capsule the exchange table's import made ready on the consumer's stream, handed to
    the consumer's from_dlpack once."""

    def __init__(self, capsule: Any, device: Any) -> None:
        self.capsule, self.device = capsule, device

    def __dlpack_device__(self) -> Any:
        return self.device

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        capsule, self.capsule = self.capsule, None
        if capsule is None:
            raise BufferError("the imported capsule was handed out already")
        max_version = kwargs.get("max_version")
        if max_version is None or tuple(max_version)[0] < 1:
            # A consumer that asks without max_version (before DLPack 1.0, JAX 0.10) must be
            # handed the legacy capsule "dltensor", as DLPack says.
            return _exchange_legacy(capsule)
        return capsule


class Run:
    """What one run saw."""

    def __init__(self, seed: int, gated: bool) -> None:
        self.seed, self.gated = seed, gated
        self.error: Optional[str] = None
        self.raced = False  # finished while the producer was held
        self.blocked = False  # the call blocked the host until the timer opened the gate
        self.wrong: Optional[int] = None  # bytes that were not the producer's
        self.races = 0  # the race checker's
        self.unavailable: Optional[str] = None  # an adapter lacks what the cell needs
        self.notes: List[str] = []

    def to_json(self) -> Dict[str, Any]:
        return {"seed": self.seed, "gated": self.gated, "error": self.error,
                "finished_while_held": self.raced, "host_blocked": self.blocked,
                "bytes_wrong": self.wrong, "races": self.races, "notes": self.notes}


class Pair:
    """One producer and one consumer in one world, their streams made once."""

    def __init__(self, world: World, producer: Adapter, consumer: Adapter,
                 options: Options) -> None:
        self.world, self.producer, self.consumer, self.options = world, producer, consumer, options
        self.producer_stream = producer.stream()
        self.consumer_stream = consumer.stream()

    def consumer_stream_for(self, which: str) -> Any:
        if which == "legacy":
            return self.consumer.legacy_stream()
        if which == "per_thread":
            return self.consumer.per_thread_stream()
        return self.consumer_stream

    def synchronize(self) -> None:
        self.producer.synchronize()
        self.consumer.synchronize()
        self.world.synchronize()

    # -- a gated exchange ----------------------------------------------------------------
    def exchange(self, seed: int, gated: bool, call: Callable[[Any, Any], Tuple[Read, Optional[Callable[[], bool]]]],
                 consumer_stream: Any, make: Optional[Callable[[Any, Any], Any]] = None) -> Run:
        """The producer writes behind a gate on its stream (make: the producer's ``make``
        unless given); call(tensor, consumer_stream) imports and reads (returns the read
        and whether it completed)."""
        run, values = Run(seed, gated), payload(seed)
        producer, stream = self.producer, self.producer_stream
        races = self.world.race_count()
        try:
            staged = producer.stage(values, stream)
        except Exception as error:
            run.error = "the producer's stage: " + _error_text(error)
            return run
        with _no_collection():
            tensor, read = self._held(run, staged, gated, call, consumer_stream,
                                      make or producer.make)
        try:
            self.synchronize()
            if read is not None:
                run.wrong = _wrong(read.values(), values)
                read.release()
        except Exception as error:
            run.error = run.error or "after the gate opened: " + _error_text(error)
        if tensor is not None:
            producer.drop(tensor)
        run.races = self.world.race_count() - races
        return run

    def _held(self, run: Run, staged: Any, gated: bool,
              call: Callable[[Any, Any], Tuple[Read, Optional[Callable[[], bool]]]],
              consumer_stream: Any, make: Callable[[Any, Any], Any]) -> Tuple[Any, Optional[Read]]:
        """The part of a run while the gate is closed: the producer's make, the consumer's
        call, the window; the gate open again at the end."""
        stream = self.producer_stream
        tensor: Any = None
        read: Optional[Read] = None
        hold: Hold = self.world.hold(stream) if gated else _NOT_HELD
        if hold.note:
            run.notes.append(hold.note)
        try:
            hold.timer_start(HOST_BLOCK_LIMIT)
            try:
                tensor = make(staged, stream)
                read, ready = call(tensor, consumer_stream)
            finally:
                run.blocked = hold.timer_stop()
            if hold.gated and not run.blocked:
                if ready is None:  # unknown stays unknown: no timing evidence either way
                    run.notes.append(UNTIMED)
                else:
                    run.raced = _wait(ready, self.options.window)
        except NotImplementedError as error:
            run.unavailable = str(error)
        except Exception as error:
            run.error = _error_text(error)
        finally:
            hold.open()
        return tensor, read

    def stream_call(self, spec: CellSpec) -> Callable[[Any, Any], Tuple[Read, Optional[Callable[[], bool]]]]:
        def call(tensor: Any, stream: Any) -> Tuple[Read, Optional[Callable[[], bool]]]:
            exported = tensor if spec.argument == HANDLE else Forced(tensor, spec.argument)
            read = self.consumer.consume(exported, stream)
            return read, read.ready or self.consumer.marker(stream)

        return call

    def exchange_call(self, device: Any) -> Callable[[Any, Any], Tuple[Read, Optional[Callable[[], bool]]]]:
        def call(tensor: Any, stream: Any) -> Tuple[Read, Optional[Callable[[], bool]]]:
            capsule = self.consumer.import_exchange(tensor, device, stream,
                                                    self.options.exchange_import)
            read = self.consumer.consume(Imported(capsule, device), stream)
            return read, read.ready or self.consumer.marker(stream)

        return call

    def capture_call(self) -> Callable[[Any, Any], Tuple[Read, Optional[Callable[[], bool]]]]:
        def call(tensor: Any, stream: Any) -> Tuple[Read, Optional[Callable[[], bool]]]:
            graph, read = self.consumer.capture(stream, lambda: self.consumer.consume(tensor, stream))
            return read, self.consumer.launch(graph, stream)

        return call


_NOT_HELD = NoHold()  # an ungated (warm-up) run


def judge(key: str, runs: List[Run], race_expected: bool = False,
          wrong_means: str = "not the producer's") -> Cell:
    """A cell's verdict from its gated runs: not available, error, RACE, ordered (host
    blocked), ordered."""
    as_json = [r.to_json() for r in runs]
    unavailable = [r.unavailable for r in runs if r.unavailable is not None]
    if unavailable:
        return Cell(key, NOT_AVAILABLE, unavailable[0], race_expected, as_json)
    notes = list(dict.fromkeys(n for r in runs for n in r.notes))
    errors = [r.error for r in runs if r.error is not None]
    if errors:
        return Cell(key, ERROR, errors[0], race_expected, as_json)
    raced = [r for r in runs if r.raced or (r.wrong or 0) > 0 or r.races > 0]
    if raced:
        what = []
        finished = sum(1 for r in raced if r.raced)
        if finished:
            what.append(f"the consumer finished while the producer was held in {finished}")
        worst = max((r.wrong or 0) for r in raced)
        if worst:
            what.append(f"read {worst} of {COUNT} bytes {wrong_means}")
        checked = sum(r.races for r in raced)
        if checked:
            what.append(f"the race checker found {checked} race(s)")
        detail = f"{len(raced)}/{len(runs)} runs: " + "; ".join(what)
        return Cell(key, RACE, "; ".join([detail] + notes), race_expected, as_json)
    if any(r.wrong is None for r in runs):
        notes.append("values not checked: the consumer reads none back")
    if any(r.blocked for r in runs):
        blocked = sum(1 for r in runs if r.blocked)
        return Cell(key, HOST_BLOCKED, "; ".join(
            [f"{blocked}/{len(runs)} runs: the call blocked the host until the timer opened "
             "the gate"] + notes), race_expected, as_json)
    return Cell(key, ORDERED, "; ".join(notes), race_expected, as_json)


def _warm_then_gated(pair: Pair, seed: int, one: Callable[[int, bool], Run]) -> List[Run]:
    """one(seed, False), the warm-up, then one(seed + 1 + i, True) for each gated run,
    unless the warm-up failed or was not available (the gated runs would say it again)."""
    warm = one(seed, False)
    if warm.error is not None or warm.unavailable is not None:
        return [warm]
    return [one(seed + 1 + run, True) for run in range(pair.options.runs)]


def _not_available(key: str, why: str) -> Cell:
    return Cell(key, NOT_AVAILABLE, why)


def _cpu_note(pair: Pair, spec: CellSpec) -> Optional[str]:
    """On a device without streams, DLPack makes every stream value but None an error."""
    if pair.producer.device() != CPU or spec.argument in (None, HANDLE):
        return None
    return f"accepted stream={spec.argument}, which DLPack makes an error on a device without streams"


def stream_cell(pair: Pair, spec: CellSpec) -> Cell:
    try:
        stream = pair.consumer_stream_for(spec.consumer_stream)
    except NotImplementedError as error:
        return _not_available(spec.key, str(error))
    call = pair.stream_call(spec)
    runs = _warm_then_gated(pair, 10, lambda seed, gated: pair.exchange(seed, gated, call, stream))
    cell = judge(spec.key, runs, race_expected=spec.argument == -1)
    note = _cpu_note(pair, spec)
    if note and cell.verdict == ORDERED:
        cell.detail = "; ".join(filter(None, [note, cell.detail]))
    elif note and cell.verdict == ERROR:
        cell.detail += " (as DLPack asks on a device without streams)"
        cell.error_expected = True
    return cell


def exchange_cell(pair: Pair) -> Cell:
    key = "exchange"
    make = pair.producer.make_exchange
    try:
        sample = make(pair.producer.stage(payload(0), pair.producer_stream), pair.producer_stream)
        has_table = hasattr(type(sample), "__dlpack_c_exchange_api__")
        device = sample.__dlpack_device__()
        pair.synchronize()
        pair.producer.drop(sample)
    except Exception as error:
        return Cell(key, ERROR, "the producer's make: " + _error_text(error))
    if not has_table:
        return _not_available(key, "the producer's type has no __dlpack_c_exchange_api__")
    call = pair.exchange_call(device)
    return judge(key, _warm_then_gated(
        pair, 20, lambda seed, gated: pair.exchange(seed, gated, call, pair.consumer_stream, make)))


def capture_cell(pair: Pair) -> Cell:
    key = "capture"
    if pair.consumer_stream is None:
        return _not_available(key, "no streams: nothing to capture")
    if type(pair.consumer).capture is Adapter.capture:
        return _not_available(key, f"the {pair.consumer.name} adapter has no graph capture")
    call = pair.capture_call()
    return judge(key, _warm_then_gated(
        pair, 30, lambda seed, gated: pair.exchange(seed, gated, call, pair.consumer_stream)))


# -- release -----------------------------------------------------------------------------


def release_run(pair: Pair, seed: int, gated: bool) -> Tuple[Run, Dict[str, Any]]:
    """The consumer reads the producer's tensor on its stream behind a gate, and is done with
    it (its release); the producer then allocates the same size on its stream and writes new
    values there. A release that does not order the producer's reuse after the consumer's
    read lets the read see the new values."""
    run = Run(seed, gated)
    seen: Dict[str, Any] = {}
    producer, stream = pair.producer, pair.producer_stream
    first, second = payload(seed), payload(seed + 1)
    races = pair.world.race_count()
    try:
        staged_first = producer.stage(first, stream)
        staged_second = producer.stage(second, stream)
        # Held in a list that the part behind the gate empties: once the consumer imported
        # it, nothing of the audit's may keep the tensor alive.
        holder = [producer.make(staged_first, stream)]
        pair.synchronize()  # written, before anything is held
        first_address = producer.address(holder[0])
    except Exception as error:
        run.error = "the producer: " + _error_text(error)
        return run, seen
    with _no_collection():
        read = _release_held(run, seen, pair, holder, staged_second, first_address, gated)
    try:
        pair.synchronize()
        if read is not None and run.error is None:
            got = read.values()
            run.wrong = _wrong(got, first)
            if got is not None and run.wrong:
                run.notes.append(f"{sum(1 for a, b in zip(bytes(got), second) if a == b)} of "
                                 f"{COUNT} bytes read were the next owner's")
    except Exception as error:
        run.error = run.error or "after the gate opened: " + _error_text(error)
    run.races = pair.world.race_count() - races
    return run, seen


def _release_held(run: Run, seen: Dict[str, Any], pair: Pair, holder: List[Any],
                  staged_second: Any, first_address: Optional[int], gated: bool) -> Optional[Read]:
    """The release run's part behind the consumer's gate: its read, its release, the
    producer's next allocation and write; the gate open again at the end."""
    producer, consumer = pair.producer, pair.consumer
    stream, consumer_stream = pair.producer_stream, pair.consumer_stream
    read: Optional[Read] = None
    hold: Hold = pair.world.hold(consumer_stream) if gated else _NOT_HELD
    try:
        tensor = holder.pop()
        read = consumer.consume(tensor, consumer_stream)
        producer.drop(tensor)
        del tensor  # the consumer's imported tensor is all that keeps the memory now
        hold.timer_start(HOST_BLOCK_LIMIT)
        try:
            seen["release"] = read.release()
            reused = producer.make(staged_second, stream)  # the pool's next allocation
        finally:
            run.blocked = hold.timer_stop()
        seen["next owner"] = reused  # alive until the read's values are in
        seen["reused_the_block"] = (first_address is not None and
                                    producer.address(reused) == first_address)
        landed = producer.marker(stream)
        seen["write_landed"] = _wait(landed, max(pair.options.window, 0.2)) if landed else None
    except NotImplementedError as error:
        run.unavailable = str(error)
    except Exception as error:
        run.error = _error_text(error)
    finally:
        hold.open()
    return read


def release_cell(pair: Pair) -> Cell:
    key = "release"
    if pair.consumer_stream is None or pair.producer_stream is None:
        return _not_available(key, "no streams: a release has nothing to order")
    if not pair.producer.stream_ordered_pool:
        return _not_available(key, f"the {pair.producer.name} adapter allocates from no "
                                   "stream-ordered pool")
    warm, _ = release_run(pair, 40, False)
    if warm.error is not None or warm.unavailable is not None:
        return judge(key, [warm])
    results = [release_run(pair, 41 + 2 * run, True) for run in range(pair.options.runs)]
    runs = [run for run, _ in results]
    for run, seen in results:
        released = RELEASE_NAMES.get(seen.get("release"))  # type: ignore[arg-type]
        if released:
            run.notes.append(f"dlsync.tensor_release: {released}")
        if seen.get("reused_the_block"):
            run.notes.append("the next allocation on the producer's stream got the released block")
        if seen.get("write_landed") is False:
            run.notes.append("the next owner's write had not completed when the gate opened")
    return judge(key, runs, wrong_means="not the tensor's")


def run_pair(world: World, producer: Adapter, consumer: Adapter, options: Options) -> Dict[str, Cell]:
    """Every cell of the table for one pair (those options.cells names)."""
    pair = Pair(world, producer, consumer, options)
    cells: Dict[str, Cell] = {}
    wanted = options.cells
    for spec in STREAM_CELLS:
        if wanted is None or spec.key in wanted:
            cells[spec.key] = stream_cell(pair, spec)
    runners = {"exchange": exchange_cell, "release": release_cell, "capture": capture_cell}
    for spec in OTHER_CELLS:
        if wanted is None or spec.key in wanted:
            try:
                cells[spec.key] = runners[spec.key](pair)
            except Exception as error:  # setting the cell up failed
                cells[spec.key] = Cell(spec.key, ERROR, _error_text(error))
    return cells
